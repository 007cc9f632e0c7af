// pattern: result-reuse
// original: scale
// capture: scale
// comparison: bitwise
// verdict: mismatch
//
// Computes only the first half of the output and relies on what memory held for the rest.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 2; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
}
