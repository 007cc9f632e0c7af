// A plausible-looking but wrong "optimization" of `accumulate`: it adds into the output instead of
// overwriting it, so it is right only when the output happened to hold zeros. honed's validation
// poisons every output byte before the candidate runs, so this is caught as a mismatch and never
// reaches the application.
extern "C" __global__ void accumulate(int* out, const int* in, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] += in[i] * reps;
}
