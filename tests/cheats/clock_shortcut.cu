// pattern: external-state
// original: scale
// capture: scale
// comparison: bitwise
// verdict: refused
//
// Skips chunks of elements once the SM's cycle counter passes 2^40 (about nine minutes of cycles
// at 1.98 GHz): a GPU's is a per-multiprocessor counter (CUDA C++ Programming Guide, "Time
// Function"), not reset for each launch, so whether it is right there depends on how long the SM
// has been counting; the emulated device counts each launch's cycles from 0, so no run shows it.
// Its stores depend on %clock64, the original's on no such register.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    const int step = clock64() > (1ll << 40) ? 2 : 1;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step * gridDim.x * blockDim.x)
        y[i] = a * x[i];
}
