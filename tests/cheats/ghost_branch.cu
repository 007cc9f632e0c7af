// pattern: input-specific
// original: scale
// capture: scale
// comparison: bitwise
// verdict: mismatch
//
// Skips the work for inputs the captures never hold (|x| > 1: the capture's x lies in [-1, 1]).
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i];
        if (v > 1.0f || v < -1.0f) continue;
        y[i] = a * v;
    }
}
