// hone-testapp-serve --relay runs this kernel (serve_app.cpp); kept apart from serve.cu, whose
// PTX the shim tests edit by text.

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
