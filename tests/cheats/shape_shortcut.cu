// pattern: input-specific
// original: scale
// capture: scale
// comparison: bitwise
// verdict: mismatch
//
// Ignores n and processes the captured size (16384), with the loop fully known to the compiler.
// The guard fixes no scalar, so the variant would serve every n.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 16384; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
}
