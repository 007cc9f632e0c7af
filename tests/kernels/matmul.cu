// Dense linear algebra: a shared-memory tiled SGEMM (2D grid, 2D block) and a warp-per-row SGEMV.
// Row-major storage throughout.

#define MM_TILE 16

// hone-expect sgemm_tiled: A=r B=r C=rw M=- N=- K=- alpha=- beta=-
// hone-run sgemm_tiled: 2D grid ceil(N/16) x ceil(M/16), block 16x16; C[MxN] = alpha*A[MxK]*B[KxN] + beta*C (C not read when beta == 0), k summed in increasing order with fmaf; tiles staged through __shared__ As[16][16], Bs[16][16]. Safe with any 2D block; blocks smaller than 16x16 leave some C elements unwritten
extern "C" __global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K, float alpha,
                                       float beta)
{
    __shared__ float As[MM_TILE][MM_TILE];
    __shared__ float Bs[MM_TILE][MM_TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * MM_TILE + ty;
    int col = blockIdx.x * MM_TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += MM_TILE) {
        // Strided tile loads: every thread of any block shape helps, none writes out of bounds.
        for (int y = ty; y < MM_TILE; y += blockDim.y) {
            for (int x = tx; x < MM_TILE; x += blockDim.x) {
                int ar = blockIdx.y * MM_TILE + y, ac = k0 + x;
                As[y][x] = (ar < M && ac < K) ? A[(long long)ar * K + ac] : 0.0f;
                int br = k0 + y, bc = blockIdx.x * MM_TILE + x;
                Bs[y][x] = (br < K && bc < N) ? B[(long long)br * N + bc] : 0.0f;
            }
        }
        __syncthreads();
        if (tx < MM_TILE && ty < MM_TILE) {
            for (int k = 0; k < MM_TILE; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
        }
        __syncthreads();
    }
    if (tx < MM_TILE && ty < MM_TILE && row < M && col < N) {
        long long idx = (long long)row * N + col;
        float prev = beta == 0.0f ? 0.0f : beta * C[idx];
        C[idx] = alpha * acc + prev;
    }
}

// hone-expect sgemv_warp: A=r x=r y=w rows=- cols=-
// hone-run sgemv_warp: 1D grid, block 256 (8 warps), ceil(rows/8) blocks (any block size works: one warp per row, rows past the grid's warps are grid-strided); y[r] = sum_c A[r*cols+c]*x[c], lane-strided partial sums combined with __shfl_down_sync (fixed order)
extern "C" __global__ void sgemv_warp(const float* A, const float* x, float* y, int rows, int cols)
{
    unsigned lane = threadIdx.x & 31u;
    unsigned nl = blockDim.x - (threadIdx.x & ~31u);
    nl = nl < 32u ? nl : 32u;
    unsigned mask = nl == 32u ? 0xffffffffu : ((1u << nl) - 1u);
    int warps_per_block = (blockDim.x + 31) / 32;
    int warp = blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    int nwarps = gridDim.x * warps_per_block;
    for (int r = warp; r < rows; r += nwarps) {  // uniform per warp
        float acc = 0.0f;
        for (int c = lane; c < cols; c += nl) acc = fmaf(A[(long long)r * cols + c], x[c], acc);
        for (unsigned off = 16; off > 0; off >>= 1) {
            float o = __shfl_down_sync(mask, acc, off);
            if (lane + off < nl) acc += o;
        }
        if (lane == 0) y[r] = acc;
    }
}
