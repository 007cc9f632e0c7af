// The kernels of hone-bench-model-pairs (model_pairs_bench.cpp): pairs of kernels that compute the
// same result, A the baseline form and B the optimized one, whose order on a Hopper GPU (H100/H200)
// is well known. Built with `nvcc -ptx -arch=sm_90` and launched by name through the driver API,
// so the same PTX runs on the emulated device and on a GPU. Sizes and launch shapes are the host's:
// each kernel says what it expects of them.

#include <cuda_fp16.h>

constexpr unsigned k_full_warp = 0xffffffffu;

// ---- 1. matmul: c = a * b, square n x n floats, n a multiple of 16, 16 x 16 blocks.

// A: one thread per output, the k loop reading a and b from global memory.
extern "C" __global__ void matmul_naive(const float* a, const float* b, float* c, int n) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.f;
  for (int k = 0; k < n; ++k) acc += a[row * n + k] * b[k * n + col];
  c[row * n + col] = acc;
}

constexpr int k_matmul_tile = 16;

// B: 16 x 16 tiles of a and b staged in shared memory; the same sum in the same order of k, so
// the result is bit for bit A's.
extern "C" __global__ void matmul_tiled(const float* a, const float* b, float* c, int n) {
  __shared__ float a_tile[k_matmul_tile][k_matmul_tile];
  __shared__ float b_tile[k_matmul_tile][k_matmul_tile];
  int tx = threadIdx.x;
  int ty = threadIdx.y;
  int row = blockIdx.y * k_matmul_tile + ty;
  int col = blockIdx.x * k_matmul_tile + tx;
  float acc = 0.f;
  for (int t = 0; t < n; t += k_matmul_tile) {
    a_tile[ty][tx] = a[row * n + t + tx];
    b_tile[ty][tx] = b[(t + ty) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < k_matmul_tile; ++k) acc += a_tile[ty][k] * b_tile[k][tx];
    __syncthreads();
  }
  c[row * n + col] = acc;
}

// ---- 2. transpose: out = in^T, n x n floats, n a multiple of 32; 32 x 8 blocks, each moving a
// 32 x 32 tile (4 elements per thread), grid n/32 x n/32.

constexpr int k_transpose_tile = 32;
constexpr int k_transpose_rows = 8;

// A: coalesced reads, writes a column apart (n floats) from lane to lane.
extern "C" __global__ void transpose_naive(const float* in, float* out, int n) {
  int x = blockIdx.x * k_transpose_tile + threadIdx.x;
  int y = blockIdx.y * k_transpose_tile + threadIdx.y;
  for (int j = 0; j < k_transpose_tile; j += k_transpose_rows)
    out[x * n + y + j] = in[(y + j) * n + x];
}

// B: the tile goes through shared memory, padded to 33 columns so that reading a column of it
// touches 32 different banks; reads and writes are both coalesced.
extern "C" __global__ void transpose_tiled(const float* in, float* out, int n) {
  __shared__ float tile[k_transpose_tile][k_transpose_tile + 1];
  int x = blockIdx.x * k_transpose_tile + threadIdx.x;
  int y = blockIdx.y * k_transpose_tile + threadIdx.y;
  for (int j = 0; j < k_transpose_tile; j += k_transpose_rows)
    tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
  __syncthreads();
  x = blockIdx.y * k_transpose_tile + threadIdx.x;
  y = blockIdx.x * k_transpose_tile + threadIdx.y;
  for (int j = 0; j < k_transpose_tile; j += k_transpose_rows)
    out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

// ---- 3. copy: n floats, n a multiple of 32, one thread per element.

// A: thread i reads element (i % 32) * (n / 32) + i / 32: the lanes of a warp read n/32 floats
// apart, one 32-byte sector each.
extern "C" __global__ void copy_strided(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[(i % 32) * (n / 32) + i / 32];
}

// B: thread i reads element i of the same data laid out in the order it is read (the host builds
// it), so the output is A's. Also the absolute 4096 x 4096 copy.
extern "C" __global__ void copy_coalesced(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

// ---- 4. block reduction: 256 threads per block, one element per thread, one partial sum per
// block (grid = n / 256).

constexpr unsigned k_block = 256;
constexpr unsigned k_warps_per_block = k_block / 32;

// A: a tree in shared memory, a barrier after each of its 8 levels.
extern "C" __global__ void reduce_tree(const float* in, float* partial) {
  __shared__ float sums[k_block];
  unsigned t = threadIdx.x;
  sums[t] = in[blockIdx.x * k_block + t];
  __syncthreads();
  for (unsigned stride = k_block / 2; stride > 0; stride /= 2) {
    if (t < stride) sums[t] += sums[t + stride];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = sums[0];
}

// B: each warp reduces with shuffles, then one warp reduces the 8 warp sums; one barrier.
extern "C" __global__ void reduce_shuffle(const float* in, float* partial) {
  __shared__ float warp_sums[k_warps_per_block];
  unsigned lane = threadIdx.x % 32;
  unsigned warp = threadIdx.x / 32;
  float v = in[blockIdx.x * k_block + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(k_full_warp, v, offset);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp != 0) return;
  v = lane < k_warps_per_block ? warp_sums[lane] : 0.f;
  for (int offset = k_warps_per_block / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(k_full_warp, v, offset);
  if (lane == 0) partial[blockIdx.x] = v;
}

// ---- 5. block scan: exclusive prefix sums of ints, each block of 256 on its own (one element
// per thread, grid = n / 256).

// A: Blelloch's work-efficient scan in shared memory: an up-sweep and a down-sweep of 8 phases
// each, a barrier before every phase.
extern "C" __global__ void scan_blelloch(const int* in, int* out) {
  __shared__ int s[k_block];
  unsigned t = threadIdx.x;
  unsigned base = blockIdx.x * k_block;
  s[t] = in[base + t];
  for (unsigned d = 1; d < k_block; d *= 2) {
    __syncthreads();
    unsigned i = (t + 1) * 2 * d - 1;
    if (i < k_block) s[i] += s[i - d];
  }
  // The last up-sweep phase wrote s[255] from thread 0: no barrier needed before clearing it.
  if (t == 0) s[k_block - 1] = 0;
  for (unsigned d = k_block / 2; d > 0; d /= 2) {
    __syncthreads();
    unsigned i = (t + 1) * 2 * d - 1;
    if (i < k_block) {
      int left = s[i - d];
      s[i - d] = s[i];
      s[i] += left;
    }
  }
  __syncthreads();
  out[base + t] = s[t];
}

// B: an inclusive shuffle scan per warp, the 8 warp totals scanned by one warp; two barriers.
extern "C" __global__ void scan_shuffle(const int* in, int* out) {
  __shared__ int warp_offsets[k_warps_per_block];
  unsigned lane = threadIdx.x % 32;
  unsigned warp = threadIdx.x / 32;
  unsigned i = blockIdx.x * k_block + threadIdx.x;
  int x = in[i];
  int v = x;
  for (unsigned offset = 1; offset < 32; offset *= 2) {
    int up = __shfl_up_sync(k_full_warp, v, offset);
    if (lane >= offset) v += up;
  }
  if (lane == 31) warp_offsets[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int own = lane < k_warps_per_block ? warp_offsets[lane] : 0;
    int total = own;
    for (unsigned offset = 1; offset < k_warps_per_block; offset *= 2) {
      int up = __shfl_up_sync(k_full_warp, total, offset);
      if (lane >= offset) total += up;
    }
    if (lane < k_warps_per_block) warp_offsets[lane] = total - own;
  }
  __syncthreads();
  out[i] = warp_offsets[warp] + v - x;
}

// ---- 6. bandwidth-bound copy with a grid-stride loop over a fixed grid.

// A: one float per iteration.
extern "C" __global__ void copy_grid_stride(const float* in, float* out, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = in[i];
}

// B: one float4 per iteration (n4 = n / 4; the buffers are 16-byte aligned).
extern "C" __global__ void copy_grid_stride_float4(const float4* in, float4* out, unsigned n4) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x)
    out[i] = in[i];
}

// ---- 7. occupancy through a register limit, on a latency-bound kernel.
//
// Each warp walks a table of random words (table_mask + 1 of them, a few MB: resident in L2, not
// in L1): steps rounds of 64 dependent loads, p = table[(p + salt_c) & mask], one salt per slot
// c. All lanes of a warp follow the same walk (one 32-byte sector per warp load), so a warp has one
// load in flight and a GPU runs the kernel at L2 latency: the more warps resident per SM, the
// faster, and nothing else limits it (the sectors in flight stay far below what L2 can serve).
// The salts are loop-invariant: nvcc hoists all 64 out of the walk and ptxas keeps them in
// registers. Under __maxnreg__(32) ptxas recomputes each where it is used (one xor) instead, and
// spills nothing. The PTX of the two kernels is the same but for B's `.maxnreg 32` (nvcc changes
// its own code for __launch_bounds__(256, 8), not for __maxnreg__), so the emulated device runs
// the same instructions for both.
//
// `nvcc -ptx -arch=sm_90` then `ptxas -arch=sm_90 -v` (CUDA 13.0):
//   chase_natural_regs  78 registers, 0 bytes spill stores, 0 bytes spill loads
//                       -> 3 blocks of 256 per SM (24 warps)
//   chase_32_regs       32 registers, 0 bytes spill stores, 0 bytes spill loads
//                       -> 8 blocks of 256 per SM (64 warps)
// Launched with 132 * 8 blocks of 256 threads: one wave at 8 blocks per SM, three at 3.

constexpr int k_chase_slots = 64;

__device__ __forceinline__ void chase(const unsigned* __restrict__ table, unsigned table_mask,
                                      unsigned steps, unsigned* out) {
  unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned warp = tid / 32;
  unsigned salt[k_chase_slots];
#pragma unroll
  for (unsigned c = 0; c < k_chase_slots; ++c) salt[c] = warp ^ (c * 0x9E3779B9u);
  unsigned p = (warp * 2654435761u) & table_mask;
#pragma unroll 1
  for (unsigned s = 0; s < steps; ++s) {
#pragma unroll
    for (int c = 0; c < k_chase_slots; ++c) p = table[(p + salt[c]) & table_mask];
  }
  out[tid] = p;
}

// A: as many registers as ptxas likes (78: 3 blocks of 256 per SM).
extern "C" __global__ void chase_natural_regs(const unsigned* __restrict__ table,
                                              unsigned table_mask, unsigned steps, unsigned* out) {
  chase(table, table_mask, steps, out);
}

// B: the same body in at most 32 registers (8 blocks of 256 per SM).
extern "C" __global__ void __maxnreg__(32)
    chase_32_regs(const unsigned* __restrict__ table, unsigned table_mask, unsigned steps,
                  unsigned* out) {
  chase(table, table_mask, steps, out);
}

// ---- 8. conv1d: y[i] = sum over k of w[k] * x[i + k], x padded to n + taps - 1 floats.

// A: the tap count is a run-time argument.
extern "C" __global__ void conv1d_runtime_taps(const float* x, const float* w, float* y, int n,
                                               int taps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.f;
  for (int k = 0; k < taps; ++k) acc += w[k] * x[i + k];
  y[i] = acc;
}

constexpr int k_conv_taps = 7;

// B: 7 taps known at compile time, the loop unrolled; the same sum in the same order.
extern "C" __global__ void conv1d_7_taps(const float* x, const float* w, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < k_conv_taps; ++k) acc += w[k] * x[i + k];
  y[i] = acc;
}

// ---- 9a. compute-bound: 128 FMAs per element loaded (4 independent chains of 32), so the load
// path makes no difference.

__device__ __forceinline__ float fma_chains(float x) {
  float a0 = x;
  float a1 = x + 1.f;
  float a2 = x - 1.f;
  float a3 = -x;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    a0 = fmaf(a0, x, 0.5f);
    a1 = fmaf(a1, x, -0.25f);
    a2 = fmaf(a2, x, 0.125f);
    a3 = fmaf(a3, x, -0.0625f);
  }
  return (a0 + a1) + (a2 + a3);
}

// A: plain loads (x and y may alias: ld.global).
extern "C" __global__ void fma_plain_loads(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fma_chains(x[i]);
}

// B: read-only loads (__restrict__ and __ldg: ld.global.nc).
extern "C" __global__ void fma_ldg(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fma_chains(__ldg(x + i));
}

// ---- 9b. memory-bound: out = a * x + y, and the same with 4 more FMAs per element.

// A: saxpy. Also the absolute saxpy, in place (out == y).
extern "C" __global__ void saxpy(int n, float a, const float* x, const float* y, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

// B: three FMAs on x the compiler cannot drop, folded into the result by a fourth weighted by
// `zero` (a run-time argument, 0): 0 * t is a zero and t is finite (|x| < 1), so out compares
// equal to saxpy's.
extern "C" __global__ void saxpy_extra_fma(int n, float a, float zero, const float* x,
                                           const float* y, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float xi = x[i];
  float base = a * xi + y[i];
  float t = fmaf(xi, xi, 1.f);
  t = fmaf(t, xi, 1.f);
  t = fmaf(t, xi, 1.f);
  out[i] = fmaf(zero, t, base);
}

// ---- 11. a GEMM tile on tensor cores: c = a * b, a and b n x n halves (row-major), c floats,
// n a multiple of 16. One warp (32 threads) per 16 x 16 tile of c, grid n/16 x n/16; k in steps
// of 16 through shared memory. The inputs are small integers, so every sum is exact in f32 and
// both kernels give the same bits.

constexpr int k_gemm_tile = 16;

// Stages the 16 x 16 tiles of a (rows row0.., columns k0..) and b (rows k0.., columns col0..).
__device__ void gemm_stage(const __half* a, const __half* b, __half (*as)[k_gemm_tile],
                           __half (*bs)[k_gemm_tile], int n, int row0, int col0, int k0) {
  for (int i = threadIdx.x; i < k_gemm_tile * k_gemm_tile; i += 32) {
    as[i / k_gemm_tile][i % k_gemm_tile] = a[(row0 + i / k_gemm_tile) * n + k0 + i % k_gemm_tile];
    bs[i / k_gemm_tile][i % k_gemm_tile] = b[(k0 + i / k_gemm_tile) * n + col0 + i % k_gemm_tile];
  }
}

// A: FMAs on the CUDA cores, each thread 8 outputs of one row.
extern "C" __global__ void gemm_tile_fma(const __half* a, const __half* b, float* c, int n) {
  __shared__ __half as[k_gemm_tile][k_gemm_tile];
  __shared__ __half bs[k_gemm_tile][k_gemm_tile];
  const int row0 = blockIdx.y * k_gemm_tile, col0 = blockIdx.x * k_gemm_tile;
  const int r = threadIdx.x / 2, c0 = (threadIdx.x % 2) * 8;
  float acc[8] = {};
  for (int k0 = 0; k0 < n; k0 += k_gemm_tile) {
    gemm_stage(a, b, as, bs, n, row0, col0, k0);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < k_gemm_tile; ++k) {
      const float av = __half2float(as[r][k]);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += av * __half2float(bs[k][c0 + j]);
    }
    __syncthreads();
  }
  for (int j = 0; j < 8; ++j) c[(row0 + r) * n + col0 + c0 + j] = acc[j];
}

// B: the same tile with ldmatrix and mma.sync.m16n8k16 (two per k step: columns 0-7 and 8-15).
extern "C" __global__ void gemm_tile_mma(const __half* a, const __half* b, float* c, int n) {
  __shared__ __align__(16) __half as[k_gemm_tile][k_gemm_tile];
  __shared__ __align__(16) __half bs[k_gemm_tile][k_gemm_tile];
  const int row0 = blockIdx.y * k_gemm_tile, col0 = blockIdx.x * k_gemm_tile;
  const int lane = threadIdx.x;
  float acc[2][4] = {};
  for (int k0 = 0; k0 < n; k0 += k_gemm_tile) {
    gemm_stage(a, b, as, bs, n, row0, col0, k0);
    __syncthreads();
    unsigned fa[4], fb[4];
    // A: lanes 0-15 give rows 0-15 at column 0, lanes 16-31 the same rows at column 8
    const unsigned a_row = unsigned(__cvta_generic_to_shared(&as[lane % 16][(lane / 16) * 8]));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(fa[0]), "=r"(fa[1]), "=r"(fa[2]), "=r"(fa[3]) : "r"(a_row));
    // B (k x n, row-major): transposed loads give the column-major fragments; matrices 0, 1 are
    // k 0-7 and 8-15 of columns 0-7, matrices 2, 3 the same of columns 8-15
    const unsigned b_row = unsigned(__cvta_generic_to_shared(&bs[(lane % 8) + ((lane / 8) % 2) * 8][(lane / 16) * 8]));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(fb[0]), "=r"(fb[1]), "=r"(fb[2]), "=r"(fb[3]) : "r"(b_row));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                   "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                   : "+f"(acc[h][0]), "+f"(acc[h][1]), "+f"(acc[h][2]), "+f"(acc[h][3])
                   : "r"(fa[0]), "r"(fa[1]), "r"(fa[2]), "r"(fa[3]), "r"(fb[2 * h]), "r"(fb[2 * h + 1]));
    }
    __syncthreads();
  }
  // C fragment: c0, c1 at row lane/4, columns 2 (lane%4) and +1; c2, c3 eight rows down
  const int g = lane / 4, t = lane % 4;
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i / 2) * 8, col = h * 8 + 2 * t + (i % 2);
      c[(row0 + row) * n + col0 + col] = acc[h][i];
    }
  }
}
