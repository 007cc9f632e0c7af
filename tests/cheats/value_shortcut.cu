// pattern: input-specific
// original: scale
// capture: scale
// comparison: bitwise
// verdict: mismatch
//
// Hard-codes the captured scale factor (1.5) instead of reading a.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = 1.5f * x[i];
}
