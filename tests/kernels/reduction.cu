// Reductions, the three ways real code does them: a shared-memory tree with __syncthreads,
// warp shuffles (__shfl_down_sync / __shfl_xor_sync) with one shared slot per warp, and atomics.
// Every warp-level step masks and guards the lanes that were actually launched, so a block size
// that is not a multiple of 32 (or a partial last warp) still gives the right answer.

// Mask of the lanes of the calling thread's warp that exist in this block (1D blocks).
static __device__ __forceinline__ unsigned launched_lanes(unsigned* count)
{
    unsigned warp_base = threadIdx.x & ~31u;
    unsigned n = blockDim.x - warp_base;
    n = n < 32u ? n : 32u;
    *count = n;
    return n == 32u ? 0xffffffffu : ((1u << n) - 1u);
}

// Sum to lane 0 with __shfl_down_sync; lanes past the launched ones contribute nothing.
static __device__ __forceinline__ float warp_sum_down(float v)
{
    unsigned nl;
    unsigned mask = launched_lanes(&nl);
    unsigned lane = threadIdx.x & 31u;
    for (unsigned off = 16; off > 0; off >>= 1) {
        float o = __shfl_down_sync(mask, v, off);
        if (lane + off < nl) v += o;
    }
    return v;
}

// hone-expect reduce_sum_smem_f32: in=r partial=w n=-
// hone-run reduce_sum_smem_f32: 1D grid of any size, any block <= 1024 threads; grid-stride partial sums, then a shared-memory tree; partial[blockIdx.x] = sum of this block's share of in[0..n) (float, fixed order)
extern "C" __global__ void reduce_sum_smem_f32(const float* in, float* partial, int n)
{
    __shared__ float s[1024];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        acc += in[i];
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    unsigned half = 1;
    while (half * 2 < blockDim.x) half *= 2;  // largest power of two below blockDim.x
    for (; half > 0; half >>= 1) {
        if (threadIdx.x < half && threadIdx.x + half < blockDim.x) {
            s[threadIdx.x] += s[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s[0];
    }
}

// hone-expect reduce_sum_shfl_f32: in=r partial=w n=-
// hone-run reduce_sum_shfl_f32: 1D grid of any size, any block <= 1024; grid-stride sums, __shfl_down_sync within each warp, warp sums through shared memory; partial[blockIdx.x] = block sum (float, fixed order)
extern "C" __global__ void reduce_sum_shfl_f32(const float* in, float* partial, int n)
{
    __shared__ float warp_sums[32];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        acc += in[i];
    }
    acc = warp_sum_down(acc);
    unsigned warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31u) == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned nwarps = (blockDim.x + 31u) >> 5;
        float total = 0.0f;
        for (unsigned w = 0; w < nwarps; ++w) total += warp_sums[w];
        partial[blockIdx.x] = total;
    }
}

// hone-expect reduce_sum_atomic_f32: in=r out=a n=-
// hone-run reduce_sum_atomic_f32: 1D grid over n, block 256, *out zeroed before launch; __shfl_xor_sync butterfly per warp then one atomicAdd per warp into *out. NONDETERMINISTIC: float atomic order varies, compare with a tolerance
extern "C" __global__ void reduce_sum_atomic_f32(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    unsigned nl;
    unsigned mask = launched_lanes(&nl);
    unsigned lane = threadIdx.x & 31u;
    // Descending xor offsets: lane 0 only ever reads lanes below the launched count, so skipping
    // partners that do not exist keeps lane 0's total exact.
    for (unsigned off = 16; off > 0; off >>= 1) {
        float o = __shfl_xor_sync(mask, v, off);
        if ((lane ^ off) < nl) v += o;
    }
    if (lane == 0) {
        atomicAdd(out, v);
    }
}

// hone-expect reduce_max_atomic_i32: in=r out=a n=-
// hone-run reduce_max_atomic_i32: 1D grid over n, block 256, *out set to INT_MIN before launch; warp max via __shfl_down_sync, then atomicMax per warp; *out = max(in[0..n)) (deterministic: integer max)
extern "C" __global__ void reduce_max_atomic_i32(const int* in, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : (int)0x80000000;
    unsigned nl;
    unsigned mask = launched_lanes(&nl);
    unsigned lane = threadIdx.x & 31u;
    for (unsigned off = 16; off > 0; off >>= 1) {
        int o = __shfl_down_sync(mask, v, off);
        if (lane + off < nl) v = o > v ? o : v;
    }
    if (lane == 0) {
        atomicMax(out, v);
    }
}

// hone-expect dot_f64: x=r y=r partial=w n=-
// hone-run dot_f64: 1D grid of any size, any block <= 1024; grid-stride x[i]*y[i] (double, fma), shared-memory tree; partial[blockIdx.x] = block's dot product (fixed order)
extern "C" __global__ void dot_f64(const double* x, const double* y, double* partial, int n)
{
    __shared__ double s[1024];
    double acc = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        acc = fma(x[i], y[i], acc);
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    unsigned half = 1;
    while (half * 2 < blockDim.x) half *= 2;
    for (; half > 0; half >>= 1) {
        if (threadIdx.x < half && threadIdx.x + half < blockDim.x) {
            s[threadIdx.x] += s[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s[0];
    }
}

// Float max through an atomicCAS loop (there is no float atomicMax): reads the current value,
// then CASes until it is no smaller than v. NaN inputs never win.
static __device__ __forceinline__ void atomic_max_f32(float* addr, float v)
{
    int* bits = reinterpret_cast<int*>(addr);
    int old = *bits;
    while (__int_as_float(old) < v) {
        int assumed = old;
        old = atomicCAS(bits, assumed, __float_as_int(v));
        if (old == assumed) break;
    }
}

// hone-expect reduce_max_cas_f32: in=r out=ra n=-
// hone-run reduce_max_cas_f32: 1D grid over n, block 256, *out set to -inf before launch; warp max via __shfl_down_sync, then lane 0 does a read + atomicCAS loop on *out; *out = max of the non-NaN in[0..n) (deterministic: max is order-independent)
extern "C" __global__ void reduce_max_cas_f32(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : -__int_as_float(0x7f800000);
    if (v != v) v = -__int_as_float(0x7f800000);
    unsigned nl;
    unsigned mask = launched_lanes(&nl);
    unsigned lane = threadIdx.x & 31u;
    for (unsigned off = 16; off > 0; off >>= 1) {
        float o = __shfl_down_sync(mask, v, off);
        if (lane + off < nl) v = fmaxf(v, o);
    }
    if (lane == 0) {
        atomic_max_f32(out, v);
    }
}

// Single-pass sum: every block publishes its partial, takes a ticket, and the last block to
// finish adds the partials in block order (the CUDA threadFenceReduction pattern).
// hone-expect reduce_sum_lastblock_f32: in=r partial=rw counter=wa out=w n=-
// hone-run reduce_sum_lastblock_f32: 1D grid of any size (e.g. 64 blocks), any block <= 1024, partial sized gridDim.x, *counter zero before the first launch (the kernel resets it to 0); *out = sum of in[0..n): grid-stride per thread, __shfl_down_sync per warp, warp sums in block order, then partials in block order by the last block (deterministic for a given launch shape)
extern "C" __global__ void reduce_sum_lastblock_f32(const float* in, float* partial, unsigned* counter, float* out,
                                                    int n)
{
    __shared__ float warp_sums[32];
    __shared__ bool is_last;
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        acc += in[i];
    }
    acc = warp_sum_down(acc);
    if ((threadIdx.x & 31u) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned nwarps = (blockDim.x + 31u) >> 5;
        float total = 0.0f;
        for (unsigned w = 0; w < nwarps; ++w) total += warp_sums[w];
        partial[blockIdx.x] = total;
        __threadfence();  // publish the partial before taking a ticket
        unsigned ticket = atomicAdd(counter, 1u);
        is_last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (is_last && threadIdx.x == 0) {
        const volatile float* p = partial;
        float sum = 0.0f;
        for (unsigned b = 0; b < gridDim.x; ++b) sum += p[b];
        *out = sum;
        *counter = 0u;  // ready for the next launch
    }
}
