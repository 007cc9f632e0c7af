// Tensor-core kernels as hand-written CUDA drives them: warps issuing `mma.sync.aligned.m16n8k16`
// through inline PTX on fragments that `ldmatrix` (and `ldmatrix.trans`) loads from shared memory.
// A half-precision GEMM with f32 accumulators, and a flash-attention tile in the manner of
// llama.cpp's mma kernel (S = Q K^T, online softmax on the accumulator fragments, P reused as the A
// fragment of O += P V), with `cp.async` staging of K and V.
//
// Fragment layouts: PTX ISA 9.7.14.5.8 ("Matrix Fragments for mma.m16n8k16 with floating point
// type"). With g = lane / 4 and t = lane % 4: A (16 x 16, row) registers a0..a3 hold
// (g, 2t..2t+1), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..); B (16 x 8, col) b0, b1 hold
// (k 2t..2t+1, n g), (k 2t + 8.., n g); C and D (16 x 8, f32) c0..c3 hold (g, 2t), (g, 2t + 1),
// (g + 8, 2t), (g + 8, 2t + 1). ldmatrix (9.7.14.5.15): lanes 8i..8i+7 give the row addresses of
// matrix i, and lane l receives row l/4, elements 2(l%4) and 2(l%4)+1 (with .trans: column l/4).
//
// Exceptions to the corpus's lane rules (tests/kernels/README.md): mma and ldmatrix are
// `.sync.aligned` and need all 32 lanes of a warp, so only full warps compute; a warp that is not
// full (blockDim.x not a multiple of 32) exits (the GEMM, which has no block barrier) or only helps
// stage tiles and meets the barriers (the attention). mma.m16n8k16 needs sm_80: for sm_75 the
// tensor path is compiled out and plain fmaf loops compute the same fragments (every sum of the
// GEMM's small-integer inputs is exact either way; the attention within its tolerance).

#include <cuda_fp16.h>

#define TC_MAX_WARPS 32 // 1024 threads: one private 16 x 16 A and B tile per warp

// hone-expect hgemm_mma_f16: A=r B=r C=w M=- N=- K=-
// hone-run hgemm_mma_f16: 1D grid (any), 1D block of a multiple of 32 up to 1024 (a warp that is not full exits at once: fewer than 32 threads compute nothing); C[MxN] (f32) = A[MxK] * B[KxN] (halves, row-major), any M, N, K (tails zero-padded): one 16x16 tile of C per warp, tiles (ceil(M/16) * ceil(N/16), row-major) grid-strided over the grid's full warps; per 16-wide k step the warp stages A and B into its own shared tiles, ldmatrix.x4 (B with .trans) and two mma.sync m16n8k16 .f32.f16.f16.f32 (sm_75: fmaf over k). Exact where the sums are (small integers); else within K 2^-22 sum_k |a b| of the exact sum
extern "C" __global__ void hgemm_mma_f16(const __half* A, const __half* B, float* C, int M, int N, int K)
{
    __shared__ __align__(16) __half sA[TC_MAX_WARPS][16][16];
    __shared__ __align__(16) __half sB[TC_MAX_WARPS][16][16];
    if ((threadIdx.x | 31u) >= blockDim.x) return;  // a warp that is not full: no mma without all lanes
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    __half (*a)[16] = sA[warp];
    __half (*b)[16] = sB[warp];
    const int g = lane >> 2, t = lane & 3;
    const int tiles_n = (N + 15) >> 4;
    const int tiles = ((M + 15) >> 4) * tiles_n;
    const __half zero = __float2half(0.0f);
    for (int tile = blockIdx.x * warps + warp; tile < tiles; tile += gridDim.x * warps) {  // uniform per warp
        const int row0 = tile / tiles_n * 16, col0 = tile % tiles_n * 16;
        float acc[2][4] = {};  // columns 0-7 and 8-15 of the tile, C fragments
        for (int k0 = 0; k0 < K; k0 += 16) {
            for (int i = lane; i < 256; i += 32) {
                const int r = i >> 4, c = i & 15;
                a[r][c] = row0 + r < M && k0 + c < K ? A[(long long)(row0 + r) * K + k0 + c] : zero;
                b[r][c] = k0 + r < K && col0 + c < N ? B[(long long)(k0 + r) * N + col0 + c] : zero;
            }
            __syncwarp();
#if __CUDA_ARCH__ >= 800
            unsigned fa[4], fb[4];
            // A: matrices 0-3 are rows 0-7 / 8-15 at k 0-7, then the same rows at k 8-15
            const unsigned a_row = unsigned(__cvta_generic_to_shared(&a[lane & 15][(lane >> 4) * 8]));
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                         : "=r"(fa[0]), "=r"(fa[1]), "=r"(fa[2]), "=r"(fa[3])
                         : "r"(a_row));
            // B (k x n, row-major) transposed gives the col-major fragments: matrices 0, 1 are
            // k 0-7 and 8-15 of columns 0-7, matrices 2, 3 the same of columns 8-15
            const unsigned b_row =
                unsigned(__cvta_generic_to_shared(&b[(lane & 7) + ((lane >> 3) & 1) * 8][(lane >> 4) * 8]));
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                         : "=r"(fb[0]), "=r"(fb[1]), "=r"(fb[2]), "=r"(fb[3])
                         : "r"(b_row));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                             "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                             : "+f"(acc[h][0]), "+f"(acc[h][1]), "+f"(acc[h][2]), "+f"(acc[h][3])
                             : "r"(fa[0]), "r"(fa[1]), "r"(fa[2]), "r"(fa[3]), "r"(fb[2 * h]),
                               "r"(fb[2 * h + 1]));
            }
#else
            // The same C fragment elements, one fmaf per k. Loops kept rolled: the emulated
            // device's compiled code takes seconds per hundred PTX instructions to build.
#pragma unroll 1
            for (int e = 0; e < 8; ++e) {
                const int h = e >> 2, i = e & 3;
                const int r = g + (i >> 1) * 8, c = h * 8 + 2 * t + (i & 1);
                float x = acc[h][i];
#pragma unroll 1
                for (int k = 0; k < 16; ++k) x = fmaf(__half2float(a[r][k]), __half2float(b[k][c]), x);
                acc[h][i] = x;
            }
#endif
            __syncwarp();  // the next k step overwrites the tiles
        }
        for (int h = 0; h < 2; ++h) {
            for (int i = 0; i < 4; ++i) {
                const int row = row0 + g + (i >> 1) * 8, col = col0 + h * 8 + 2 * t + (i & 1);
                if (row < M && col < N) C[(long long)row * N + col] = acc[h][i];
            }
        }
    }
}

#define FA_D 64    // head size
#define FA_KV 32   // keys per K/V tile
#define FA_WARPS 4 // warps that compute, 16 query rows each; further warps only help staging

// One 32-bit register of two halves: lo in bits 0-15, as fragments hold consecutive elements.
__device__ __forceinline__ unsigned fa_pack(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
}

// hone-expect flash_attn_tile_f16: Q=r K=r V=r O=w n_q=- n_kv=- scale=-
// hone-run flash_attn_tile_f16: 1D grid (any), 1D block 128 (any size: min(blockDim.x/32, 4) full warps compute 16 query rows each, other threads only stage; fewer than 32 threads compute nothing); one head, d = 64: O[n_q x 64] (f32) = softmax(scale * Q K^T) V, Q [n_q x 64], K and V [n_kv x 64] halves, row-major; query blocks grid-strided over blocks; per 32-key tile K and V staged with cp.async (sm_75: uint4 loads, keys >= n_kv zero), S by mma (K via ldmatrix), masked, online softmax in f32 with exp2f and quad shuffles, P rounded to half as the A fragment, O += P V by mma (V via ldmatrix.trans); O = 0 when n_kv = 0. Within (2^-10 sum_j p_j |v_j| + 2^-24 sum_j |v_j|) / sum_j p_j of the double reference (p_j = exp(s_j - max s))
extern "C" __global__ void flash_attn_tile_f16(const __half* Q, const __half* K, const __half* V, float* O, int n_q,
                                               int n_kv, float scale)
{
    __shared__ __align__(16) __half sK[FA_KV][FA_D];
    __shared__ __align__(16) __half sV[FA_KV][FA_D];
#if __CUDA_ARCH__ < 800
    __shared__ __half sP[FA_WARPS][16][FA_KV];  // the fallback's P, as the mma path's A fragments hold it
#endif
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int full = blockDim.x >> 5;
    const int compute_warps = full < FA_WARPS ? full : FA_WARPS;
    const bool computes = warp < compute_warps;  // a full warp: every lane is there for the mma
    const int rows = 16 * compute_warps;
    if (rows == 0) return;  // the whole block: no barrier is left waiting
    const int g = lane >> 2, t = lane & 3;
    const float neg_inf = __int_as_float(0xff800000);
    const float scale_log2 = scale * 1.44269504f;  // scores in base 2: exp2f
    for (int q_block = blockIdx.x * rows; q_block < n_q; q_block += gridDim.x * rows) {  // uniform per block
        const int q0 = q_block + 16 * warp;
        float o[FA_D / 8][4] = {};       // O fragments: columns 8j..8j+7
        float m[2] = {neg_inf, neg_inf}; // running max of rows g and g + 8 (base-2 units)
        float l[2] = {0.0f, 0.0f};       // this lane's part of their running sums
#if __CUDA_ARCH__ >= 800
        unsigned qf[FA_D / 16][4];  // Q's A fragments, d in steps of 16, rows past n_q zero
        if (computes) {
            for (int kk = 0; kk < FA_D / 16; ++kk) {
                for (int i = 0; i < 4; ++i) {
                    const int r = q0 + g + (i & 1) * 8, c = kk * 16 + 2 * t + (i >> 1) * 8;
                    qf[kk][i] = r < n_q ? *reinterpret_cast<const unsigned*>(Q + (long long)r * FA_D + c) : 0u;
                }
            }
        }
#endif
        for (int j0 = 0; j0 < n_kv; j0 += FA_KV) {  // uniform per block
            for (int i = threadIdx.x; i < FA_KV * FA_D / 8; i += blockDim.x) {
                const int r = i / (FA_D / 8), c = i % (FA_D / 8) * 8;
                const bool valid = j0 + r < n_kv;
                const long long src = (long long)(valid ? j0 + r : 0) * FA_D + c;
#if __CUDA_ARCH__ >= 800
                // 16 bytes each; a key past n_kv copies none and zero-fills (src-size 0)
                const unsigned bytes = valid ? 16u : 0u;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                             :: "r"(unsigned(__cvta_generic_to_shared(&sK[r][c]))), "l"(K + src), "r"(bytes));
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                             :: "r"(unsigned(__cvta_generic_to_shared(&sV[r][c]))), "l"(V + src), "r"(bytes));
#else
                const uint4 z = make_uint4(0u, 0u, 0u, 0u);
                *reinterpret_cast<uint4*>(&sK[r][c]) = valid ? *reinterpret_cast<const uint4*>(K + src) : z;
                *reinterpret_cast<uint4*>(&sV[r][c]) = valid ? *reinterpret_cast<const uint4*>(V + src) : z;
#endif
            }
#if __CUDA_ARCH__ >= 800
            asm volatile("cp.async.wait_all;" ::: "memory");
#endif
            __syncthreads();
            if (computes) {
                float s[FA_KV / 8][4];  // S fragments: keys 8n..8n+7 of the tile
#if __CUDA_ARCH__ >= 800
                for (int n = 0; n < FA_KV / 8; ++n) {
                    for (int i = 0; i < 4; ++i) s[n][i] = 0.0f;
                    for (int kk = 0; kk < FA_D / 16; kk += 2) {
                        // K rows (keys) as they are: matrix i is keys 8n..8n+7 at d 16kk + 8i
                        unsigned kf[4];
                        const unsigned k_row =
                            unsigned(__cvta_generic_to_shared(&sK[n * 8 + (lane & 7)][kk * 16 + (lane >> 3) * 8]));
                        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                                     : "=r"(kf[0]), "=r"(kf[1]), "=r"(kf[2]), "=r"(kf[3])
                                     : "r"(k_row));
                        for (int h = 0; h < 2; ++h) {
                            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                                         "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                                         : "+f"(s[n][0]), "+f"(s[n][1]), "+f"(s[n][2]), "+f"(s[n][3])
                                         : "r"(qf[kk + h][0]), "r"(qf[kk + h][1]), "r"(qf[kk + h][2]),
                                           "r"(qf[kk + h][3]), "r"(kf[2 * h]), "r"(kf[2 * h + 1]));
                        }
                    }
                }
#else
                // The same S fragment elements, one fmaf per d in d order, two d per load (loops
                // rolled, as in the GEMM's fallback)
#pragma unroll 1
                for (int e = 0; e < FA_KV / 2; ++e) {
                    const int n = e >> 2, i = e & 3;
                    const int r = q0 + g + (i >> 1) * 8, key = n * 8 + 2 * t + (i & 1);
                    float acc = 0.0f;
                    if (r < n_q) {
                        const __half2* q = reinterpret_cast<const __half2*>(Q + (long long)r * FA_D);
                        const __half2* k = reinterpret_cast<const __half2*>(sK[key]);
#pragma unroll 1
                        for (int d = 0; d < FA_D / 2; ++d) {
                            const float2 qd = __half22float2(q[d]), kd = __half22float2(k[d]);
                            acc = fmaf(qd.x, kd.x, acc);
                            acc = fmaf(qd.y, kd.y, acc);
                        }
                    }
                    s[n][i] = acc;
                }
#endif
                // Online softmax: row g in elements 0, 1 and row g + 8 in 2, 3 of each fragment;
                // the four lanes of a quad hold a row between them
                float mx[2] = {m[0], m[1]};
                for (int n = 0; n < FA_KV / 8; ++n) {
                    for (int i = 0; i < 4; ++i) {
                        const int key = j0 + n * 8 + 2 * t + (i & 1);
                        s[n][i] = key < n_kv ? s[n][i] * scale_log2 : neg_inf;
                        mx[i >> 1] = fmaxf(mx[i >> 1], s[n][i]);
                    }
                }
                float alpha[2];
                for (int h = 0; h < 2; ++h) {
                    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
                    alpha[h] = exp2f(m[h] - mx[h]);  // 0 on the first tile (m = -inf)
                    m[h] = mx[h];
                    l[h] *= alpha[h];
                }
                for (int n = 0; n < FA_KV / 8; ++n) {
                    for (int i = 0; i < 4; ++i) {
                        s[n][i] = exp2f(s[n][i] - m[i >> 1]);  // masked keys: exp2(-inf) = 0
                        l[i >> 1] += s[n][i];
                    }
                }
                for (int j = 0; j < FA_D / 8; ++j) {
                    for (int i = 0; i < 4; ++i) o[j][i] *= alpha[i >> 1];
                }
#if __CUDA_ARCH__ >= 800
                for (int kk = 0; kk < FA_KV / 16; ++kk) {
                    // P's C fragments of keys 16kk..16kk+15 are the A fragment of P V as they lie
                    const unsigned pa[4] = {fa_pack(s[2 * kk][0], s[2 * kk][1]), fa_pack(s[2 * kk][2], s[2 * kk][3]),
                                            fa_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                            fa_pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
                    for (int j = 0; j < FA_D / 8; j += 2) {
                        // V (keys x d, row-major) transposed: matrices 0, 1 are keys 16kk..+7 and
                        // +8..+15 of columns 8j..8j+7, matrices 2, 3 the same of columns 8j+8..
                        unsigned vf[4];
                        const unsigned v_row = unsigned(__cvta_generic_to_shared(
                            &sV[kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8][(j + (lane >> 4)) * 8]));
                        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                                     : "=r"(vf[0]), "=r"(vf[1]), "=r"(vf[2]), "=r"(vf[3])
                                     : "r"(v_row));
                        for (int h = 0; h < 2; ++h) {
                            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                                         "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                                         : "+f"(o[j + h][0]), "+f"(o[j + h][1]), "+f"(o[j + h][2]),
                                           "+f"(o[j + h][3])
                                         : "r"(pa[0]), "r"(pa[1]), "r"(pa[2]), "r"(pa[3]), "r"(vf[2 * h]),
                                           "r"(vf[2 * h + 1]));
                        }
                    }
                }
#else
                // P through shared memory, rounded to half as the mma path's A fragments hold it
#pragma unroll 1
                for (int e = 0; e < FA_KV / 2; ++e) {
                    const int n = e >> 2, i = e & 3;
                    sP[warp][g + (i >> 1) * 8][n * 8 + 2 * t + (i & 1)] = __float2half(s[n][i]);
                }
                __syncwarp();
#pragma unroll 1
                for (int e = 0; e < FA_D / 2; ++e) {
                    const int j = e >> 2, i = e & 3;
                    const int r = g + (i >> 1) * 8, c = j * 8 + 2 * t + (i & 1);
                    float x = o[j][i];
#pragma unroll 1
                    for (int key = 0; key < FA_KV; ++key)
                        x = fmaf(__half2float(sP[warp][r][key]), __half2float(sV[key][c]), x);
                    o[j][i] = x;
                }
                __syncwarp();
#endif
            }
            __syncthreads();  // the next tile overwrites sK and sV
        }
        if (computes) {
            for (int h = 0; h < 2; ++h) {
                l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
                l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
            }
            const float inv[2] = {l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f};
            for (int j = 0; j < FA_D / 8; ++j) {
                for (int i = 0; i < 4; ++i) {
                    const int r = q0 + g + (i >> 1) * 8, c = j * 8 + 2 * t + (i & 1);
                    if (r < n_q) O[(long long)r * FA_D + c] = o[j][i] * inv[i >> 1];
                }
            }
        }
    }
}
