// Integer division and modulo by divisors known only at run time (the compiler cannot turn them
// into multiply-shift sequences): signed/unsigned, 32/64-bit, and the index unravelling that
// every N-d kernel does. Divisors must be non-zero; signed kernels avoid INT_MIN / -1.

// hone-expect divmod_i32: a=r q=w r=w d=- n=-
// hone-run divmod_i32: 1D grid over n, block 256, d != 0 and no a[i] == INT_MIN when d == -1; q[i] = a[i] / d, r[i] = a[i] % d (C truncation semantics)
extern "C" __global__ void divmod_i32(const int* a, int* q, int* r, int d, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i];
        q[i] = x / d;
        r[i] = x % d;
    }
}

// hone-expect divmod_u32: a=r q=w r=w d=- n=-
// hone-run divmod_u32: 1D grid over n, block 256, d != 0; q[i] = a[i] / d, r[i] = a[i] % d (unsigned 32-bit)
extern "C" __global__ void divmod_u32(const unsigned* a, unsigned* q, unsigned* r, unsigned d, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned x = a[i];
        q[i] = x / d;
        r[i] = x % d;
    }
}

// hone-expect divmod_i64: a=r q=w r=w d=- n=-
// hone-run divmod_i64: 1D grid over n, block 256, d != 0 and no a[i] == INT64_MIN when d == -1; q[i] = a[i] / d, r[i] = a[i] % d (signed 64-bit, C truncation semantics)
extern "C" __global__ void divmod_i64(const long long* a, long long* q, long long* r, long long d, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        long long x = a[i];
        q[i] = x / d;
        r[i] = x % d;
    }
}

// hone-expect divmod_u64: a=r q=w r=w d=- n=-
// hone-run divmod_u64: 1D grid over n, block 256, d != 0; q[i] = a[i] / d, r[i] = a[i] % d (unsigned 64-bit)
extern "C" __global__ void divmod_u64(const unsigned long long* a, unsigned long long* q, unsigned long long* r,
                                      unsigned long long d, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned long long x = a[i];
        q[i] = x / d;
        r[i] = x % d;
    }
}

// hone-expect reverse_axes_3d: src=r dst=w nx=- ny=- nz=-
// hone-run reverse_axes_3d: 1D grid over nx*ny*nz (< 2^32), block 256, all dims >= 1; src is [nz][ny][nx] (x fastest), dst is [nx][ny][nz] (z fastest); unravel i with run-time / and %: z = i % nz, y = (i / nz) % ny, x = (i / nz) / ny; dst[i] = src[x + nx*(y + ny*z)]
extern "C" __global__ void reverse_axes_3d(const float* src, float* dst, unsigned nx, unsigned ny, unsigned nz)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nx * ny * nz) return;
    unsigned z = i % nz;
    unsigned rest = i / nz;
    unsigned y = rest % ny;
    unsigned x = rest / ny;
    dst[i] = src[x + nx * (y + ny * z)];
}
