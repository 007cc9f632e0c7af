// pattern: external-state
// original: scale
// capture: scale
// comparison: bitwise
// verdict: refused
//
// Wrong only on the last SMs of a full H100 or H200 (ids 128 to 131): a launch of a few blocks,
// like the captured one here, never reaches them (the emulated device puts block b on SM b mod
// 132), so every run passes; a large grid in the application is wrong in the blocks that land
// there. Its stores depend on %smid, the original's on no such register.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    const float scale = sm >= 128 ? 0.5f * a : a;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = scale * x[i];
}
