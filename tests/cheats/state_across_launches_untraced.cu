// pattern: state-across-launches
// original: scale
// capture: scale
// comparison: bitwise
// verdict: refused
//
// The same launch counter as state_across_launches.cu, reached through an address the static
// analysis does not follow (the variable's address times 1, a 1 from inline assembly the compiler
// cannot fold: a product is a number to the analysis, not an address), so no traced write names
// it. The original's module declares no __device__ variable, so the candidate's declaration alone
// refuses it.
__device__ unsigned launches;

extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    unsigned long long one;
    asm volatile("mov.u64 %0, 1;" : "=l"(one));
    unsigned* counter = (unsigned*)((unsigned long long)&launches * one);
    __shared__ unsigned seen;
    if (threadIdx.x == 0) {
        seen = *counter;
        if (blockIdx.x == 0) atomicAdd(counter, 1u);
    }
    __syncthreads();
    if (seen > 1000) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
}
