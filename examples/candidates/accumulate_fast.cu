// A kernel engineer's faster version of the serve application's `accumulate` kernel
// (tests/apps/serve.cu): the same integers, out[i] = in[i] * reps, without the loop of additions.
// `honectl submit accumulate accumulate_fast.cu --bitwise` hands it to honed, which swaps it in only
// after it matched the original bit for bit on the application's own captured launches and
// measured faster.
extern "C" __global__ void accumulate(int* out, const int* in, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i] * reps;
}
