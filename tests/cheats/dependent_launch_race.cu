// pattern: dependent-launch-race
// original: scale_pdl
// capture: scale_pdl
// comparison: bitwise
// verdict: refused
//
// Drops the original's griddepcontrol.wait, so it starts reading x sooner. Every run on the
// emulated device matches (it runs launches one after the other); on a GPU, launched after the
// kernel that writes x with programmatic dependent launch, it reads x before that kernel is done
// (refused from its code before it runs).
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
    asm volatile("griddepcontrol.launch_dependents;" :::);
}
