// Row-wise normalizations from transformer inference: softmax (block per row with precise expf,
// and warp per row with fast __expf/__fdividef), LayerNorm, and RMSNorm over __half.
// Reductions run in a fixed order for a given launch shape, so results are deterministic.
#include <cuda_fp16.h>

// Mask and count of the lanes of this thread's warp that exist in the (1D) block.
static __device__ __forceinline__ unsigned sl_lane_mask(unsigned* count)
{
    unsigned n = blockDim.x - (threadIdx.x & ~31u);
    n = n < 32u ? n : 32u;
    *count = n;
    return n == 32u ? 0xffffffffu : ((1u << n) - 1u);
}

// Block-wide sum (is_max == false) or max (is_max == true); every thread gets the result.
// `scratch` needs 33 floats. Must be called by all threads of the block.
static __device__ __forceinline__ float block_allreduce(float v, bool is_max, float* scratch)
{
    unsigned nl;
    unsigned mask = sl_lane_mask(&nl);
    unsigned lane = threadIdx.x & 31u;
    for (unsigned off = 16; off > 0; off >>= 1) {
        float o = __shfl_down_sync(mask, v, off);
        if (lane + off < nl) v = is_max ? fmaxf(v, o) : v + o;
    }
    if (lane == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned nwarps = (blockDim.x + 31u) >> 5;
        float r = scratch[0];
        for (unsigned w = 1; w < nwarps; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
        scratch[32] = r;
    }
    __syncthreads();
    float r = scratch[32];
    __syncthreads();  // scratch may be reused right after
    return r;
}

// hone-expect softmax_rows_f32: in=r out=w rows=- cols=-
// hone-run softmax_rows_f32: grid of any size (e.g. rows blocks), any block <= 1024 (e.g. 128); one block per row, rows grid-strided; out[r,c] = expf(in[r,c] - max_r) / sum_c expf(in[r,c] - max_r)
extern "C" __global__ void softmax_rows_f32(const float* in, float* out, int rows, int cols)
{
    __shared__ float scratch[33];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* x = in + (long long)r * cols;
        float m = -__int_as_float(0x7f800000);
        for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
        m = block_allreduce(m, true, scratch);
        float s = 0.0f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(x[c] - m);
        s = block_allreduce(s, false, scratch);
        float inv = 1.0f / s;
        float* y = out + (long long)r * cols;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] = expf(x[c] - m) * inv;
    }
}

// hone-expect softmax_rows_warp_fast_f32: in=r out=w rows=- cols=-
// hone-run softmax_rows_warp_fast_f32: 1D grid, block 128 (4 warps), ceil(rows/4) blocks (any shape works, rows grid-strided over warps); one warp per row, fast math: __expf and __fdividef, row max and sum by __shfl_xor_sync then broadcast with __shfl_sync; compare to softmax with a loose tolerance (~1e-5 relative)
extern "C" __global__ void softmax_rows_warp_fast_f32(const float* in, float* out, int rows, int cols)
{
    unsigned nl;
    unsigned mask = sl_lane_mask(&nl);
    unsigned lane = threadIdx.x & 31u;
    int warps_per_block = (blockDim.x + 31) / 32;
    int warp = blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    for (int r = warp; r < rows; r += gridDim.x * warps_per_block) {
        const float* x = in + (long long)r * cols;
        float m = -__int_as_float(0x7f800000);
        for (int c = lane; c < cols; c += nl) m = fmaxf(m, x[c]);
        for (unsigned off = 16; off > 0; off >>= 1) {
            float o = __shfl_xor_sync(mask, m, off);
            if ((lane ^ off) < nl) m = fmaxf(m, o);
        }
        m = __shfl_sync(mask, m, 0);
        float s = 0.0f;
        for (int c = lane; c < cols; c += nl) s += __expf(x[c] - m);
        for (unsigned off = 16; off > 0; off >>= 1) {
            float o = __shfl_xor_sync(mask, s, off);
            if ((lane ^ off) < nl) s += o;
        }
        s = __shfl_sync(mask, s, 0);
        float* y = out + (long long)r * cols;
        for (int c = lane; c < cols; c += nl) y[c] = __fdividef(__expf(x[c] - m), s);
    }
}

// hone-expect layernorm_rows_f32: in=r gamma=r beta=r out=w rows=- cols=- eps=-
// hone-run layernorm_rows_f32: grid of any size (e.g. rows blocks), any block <= 1024 (e.g. 256); one block per row: mean, then variance of (x-mean) (two passes), out[r,c] = (x-mean)*rsqrtf(var+eps)*gamma[c] + beta[c]
extern "C" __global__ void layernorm_rows_f32(const float* in, const float* gamma, const float* beta, float* out,
                                              int rows, int cols, float eps)
{
    __shared__ float scratch[33];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* x = in + (long long)r * cols;
        float s = 0.0f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[c];
        float mean = block_allreduce(s, false, scratch) / (float)cols;
        float q = 0.0f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            float d = x[c] - mean;
            q += d * d;
        }
        float rstd = rsqrtf(block_allreduce(q, false, scratch) / (float)cols + eps);
        float* y = out + (long long)r * cols;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] = (x[c] - mean) * rstd * gamma[c] + beta[c];
    }
}

// hone-expect rmsnorm_rows_f16: in=r weight=r out=w rows=- cols=- eps=-
// hone-run rmsnorm_rows_f16: grid of any size (e.g. rows blocks), any block <= 1024 (e.g. 256); one block per row, float accumulation: out[r,c] = half(float(x)*rsqrtf(mean(float(x)^2)+eps)*float(weight[c]))
extern "C" __global__ void rmsnorm_rows_f16(const __half* in, const __half* weight, __half* out, int rows, int cols,
                                            float eps)
{
    __shared__ float scratch[33];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const __half* x = in + (long long)r * cols;
        float q = 0.0f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            float v = __half2float(x[c]);
            q += v * v;
        }
        float rstd = rsqrtf(block_allreduce(q, false, scratch) / (float)cols + eps);
        __half* y = out + (long long)r * cols;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            y[c] = __float2half(__half2float(x[c]) * rstd * __half2float(weight[c]));
        }
    }
}
