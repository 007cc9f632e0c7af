// The kernel the end-to-end tests optimize while an application runs it: out[i] = in[i] * reps,
// computed the slow way (reps additions), so a faster candidate exists and must give exactly the
// same integers.
extern "C" __global__ void accumulate(int* out, const int* in, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int acc = 0;
    for (int k = 0; k < reps; ++k) acc += in[i];
    out[i] = acc;
}

// For the bounded-capture tests (--relay): each thread writes the index it then reads through
// another pointer (the application passes the same buffer twice), so which bytes of `data` it
// reads depends on a store made earlier in the same launch: a bounds probe, whose stores are
// dropped, sees another range of `data` than the launch reads.
extern "C" __global__ void relay(float* out, int* idx_w, const int* idx_r, const float* data, int n,
                                 int far)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    idx_w[i] = far + i;
    out[i] = 2.0f * data[idx_r[i]];
}
