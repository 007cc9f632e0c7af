// pattern: external-state
// original: scale
// capture: scale
// comparison: bitwise
// verdict: refused
//
// Skips every other element once the SM's cycle counter passes 2^40 (about nine minutes of
// cycles at 1.98 GHz): a GPU's counter runs from when the SM was last reset, so it is right on a
// freshly reset GPU and wrong on one that has been up a while; the emulated device counts each
// launch's cycles from 0, so no run shows it. Its stores depend on %clock64, the original's on no
// such register.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    const int step = clock64() > (1ll << 40) ? 2 : 1;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step * gridDim.x * blockDim.x)
        y[i] = a * x[i];
}
