// pattern: uninitialized-memory
// original: block_sum
// capture: block_sum
// comparison: bitwise
// verdict: nondeterministic
//
// Adds a slot of a per-thread array that it never wrote: zero where local memory starts out
// zeroed, garbage on a GPU.
extern "C" __global__ void cheat(const int* x, int* out, int n)
{
    __shared__ int s[128];
    volatile int scratch[8];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    scratch[threadIdx.x % 8] = i < n ? x[i] : 0;
    int v = scratch[threadIdx.x % 8];
    if (threadIdx.x == 0) v += scratch[5];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
