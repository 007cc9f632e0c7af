// pattern: external-state
// original: scale
// capture: scale
// comparison: bitwise
// verdict: refused
// dynamic-verdict: nondeterministic
//
// A time bomb: right until 1 January 2100 by the GPU's global nanosecond timer, then it returns
// without writing anything. Every validation run before that date passes on a GPU. The static
// check refuses it (its stores depend on %globaltimer, the original's on no such register); with
// the static checks off, the emulated device counts %globaltimer from another epoch in each
// rerun (one of them after the date), so its two runs differ.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now >= 4102444800ull * 1000000000ull) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
}
