// The three kernels every test application (tests/apps) launches. Compiled to PTX by nvcc at build
// time and embedded in the driver-API apps, given to NVRTC as source by hone-testapp-nvrtc, and
// compiled with <<<>>> launches into hone-testapp-runtime.
//
// Names cover the three kinds of entry names a shim sees: a C name (saxpy), a mangled free
// function (_Z8mix_bitsPjji) and a mangled function in a namespace (_ZN9hone_test4blurEPKiPii).
// Every result is exact (integers, and floats holding small integers), so host references and
// runs with and without a shim must agree bit for bit.
#include "workload_params.h"

// y[i] = a * x[i] + y[i] for i < n; 1D grid.
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// data[i] = xorshift32(data[i] ^ salt) for i < n; 2D grid of 1D blocks.
__global__ void mix_bits(unsigned* data, unsigned salt, int n)
{
    int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = data[i] ^ salt;
    v ^= v << 13;
    v ^= v >> 17;
    v ^= v << 5;
    data[i] = v;
}

namespace hone_test {

// A 3-point integer blur with clamped edges; 1D grid.
__global__ void blur(const int* in, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int l = in[i > 0 ? i - 1 : 0];
    int r = in[i + 1 < n ? i + 1 : n - 1];
    out[i] = (l + HONE_BLUR_CENTER * in[i] + r) >> HONE_BLUR_SHIFT;
}

} // namespace hone_test
