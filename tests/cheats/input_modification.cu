// pattern: input-modification
// original: scale
// capture: scale
// comparison: bitwise
// verdict: refused
//
// Uses its input as scratch space and leaves it changed (refused from its code before it runs;
// the byte comparison after a run would catch it too).
extern "C" __global__ void cheat(float a, float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        x[i] = a * x[i];
        y[i] = x[i];
    }
}
