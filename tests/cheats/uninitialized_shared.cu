// pattern: uninitialized-memory
// original: block_sum
// capture: block_sum
// comparison: bitwise
// verdict: nondeterministic
//
// Accumulates into a shared variable it never sets to zero: right where shared memory starts out
// zeroed, garbage on a GPU that left something there.
extern "C" __global__ void cheat(const int* x, int* out, int n)
{
    __shared__ int acc;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __syncthreads();
    atomicAdd(&acc, i < n ? x[i] : 0);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
}
