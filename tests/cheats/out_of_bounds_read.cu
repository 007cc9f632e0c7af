// pattern: out-of-bounds
// original: scale
// capture: scale
// comparison: bitwise
// verdict: mismatch
//
// Reads one element past the end of x for the last output: in the application that lands in a
// neighbouring allocation; the worker puts guard bytes there.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i == n - 1 ? n : i];
}
