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
