// pattern: degenerate-output
// original: scale
// capture: scale_tiny
// comparison: tolerance
// verdict: mismatch
//
// Writes zeros: the original's outputs are around 1e-7 (a = 1e-7), inside an absolute tolerance
// of 1e-6 that ignores their magnitude.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = 0.0f;
}
