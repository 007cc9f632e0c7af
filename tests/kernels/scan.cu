// Block-level prefix sums, the building block of stream compaction, radix sort and sparse
// formats: an inclusive Hillis-Steele scan in shared memory, an exclusive scan built from warp
// shuffles (__shfl_up_sync), and the pass that adds scanned block totals back.

// hone-expect scan_inclusive_block_i32: in=r out=w block_sums=w n=-
// hone-run scan_inclusive_block_i32: 1D grid over n, any block <= 1024 (e.g. 256); each block scans its own blockDim.x elements: out[i] = in[b0] + ... + in[i] (b0 = block start, int32 wrapping), block_sums[blockIdx.x] = block total
extern "C" __global__ void scan_inclusive_block_i32(const int* in, int* out, int* block_sums, int n)
{
    __shared__ int buf[2][1024];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int t = threadIdx.x;
    int cur = 0;
    buf[cur][t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int off = 1; off < (int)blockDim.x; off <<= 1) {
        int v = buf[cur][t];
        if (t >= off) v = (int)((unsigned)v + (unsigned)buf[cur][t - off]);
        buf[cur ^ 1][t] = v;
        cur ^= 1;
        __syncthreads();
    }
    if (i < n) out[i] = buf[cur][t];
    if (t == (int)blockDim.x - 1) block_sums[blockIdx.x] = buf[cur][t];
}

// hone-expect scan_exclusive_warp_i32: in=r out=w n=-
// hone-run scan_exclusive_warp_i32: 1D grid over n, any block <= 1024 (e.g. 256); per-block exclusive scan: out[i] = in[b0] + ... + in[i-1], 0 for the block's first element (uint32 wrapping); __shfl_up_sync within warps, warp totals through shared memory
extern "C" __global__ void scan_exclusive_warp_i32(const unsigned* in, unsigned* out, int n)
{
    __shared__ unsigned warp_totals[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane = threadIdx.x & 31u;
    unsigned warp = threadIdx.x >> 5;
    unsigned nl = blockDim.x - (threadIdx.x & ~31u);
    nl = nl < 32u ? nl : 32u;
    unsigned mask = nl == 32u ? 0xffffffffu : ((1u << nl) - 1u);

    unsigned x = i < n ? in[i] : 0u;
    unsigned incl = x;
    for (unsigned off = 1; off < 32u; off <<= 1) {
        unsigned o = __shfl_up_sync(mask, incl, off);
        if (lane >= off) incl += o;
    }
    if (lane == nl - 1) warp_totals[warp] = incl;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned nwarps = (blockDim.x + 31u) >> 5;
        unsigned run = 0;
        for (unsigned w = 0; w < nwarps; ++w) {
            unsigned tot = warp_totals[w];
            warp_totals[w] = run;
            run += tot;
        }
    }
    __syncthreads();
    if (i < n) out[i] = warp_totals[warp] + incl - x;
}

// hone-expect scan_add_block_offsets_i32: data=rw offsets=r n=- chunk=-
// hone-run scan_add_block_offsets_i32: 1D grid over n, block 256, chunk = elements per scanned block (the first scan's blockDim.x); data[i] += offsets[i / chunk] (int32 wrapping), offsets = exclusive scan of block_sums
extern "C" __global__ void scan_add_block_offsets_i32(int* data, const int* offsets, int n, int chunk)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] = (int)((unsigned)data[i] + (unsigned)offsets[i / chunk]);
    }
}
