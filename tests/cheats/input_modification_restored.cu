// pattern: input-modification
// original: scale
// capture: scale
// comparison: bitwise
// verdict: refused
//
// Scales its input in place, uses it, and writes the old value back before the kernel ends: the
// bytes after the launch are the captured ones, but another kernel reading x meanwhile (another
// stream) sees them changed. Only the candidate's code shows it.
extern "C" __global__ void cheat(float a, float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float keep = x[i];
        x[i] = a * keep;
        y[i] = x[i];
        x[i] = keep;
    }
}
