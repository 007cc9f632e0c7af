// Matrix transpose, 2D grid and 2D blocks: the naive version (uncoalesced stores) and the classic
// shared-memory tile padded to 32x33 so column reads hit 32 different banks. The tiled kernel
// loops over its tile with whatever block shape it gets, so any 2D block is safe and correct.

#define TILE_DIM 32

// hone-expect transpose_naive_f32: in=r out=w rows=- cols=-
// hone-run transpose_naive_f32: 2D grid ceil(cols/16) x ceil(rows/16), block 16x16; in is rows x cols row-major, out is cols x rows: out[c*rows + r] = in[r*cols + c]
extern "C" __global__ void transpose_naive_f32(const float* in, float* out, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        out[(long long)c * rows + r] = in[(long long)r * cols + c];
    }
}

// hone-expect transpose_tiled_f32: in=r out=w rows=- cols=-
// hone-run transpose_tiled_f32: 2D grid ceil(cols/32) x ceil(rows/32), block 32x8 (any 2D block works); same result as transpose_naive_f32 via a __shared__ float tile[32][33]
extern "C" __global__ void transpose_tiled_f32(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int c0 = blockIdx.x * TILE_DIM;
    int r0 = blockIdx.y * TILE_DIM;
    for (int ty = threadIdx.y; ty < TILE_DIM; ty += blockDim.y) {
        for (int tx = threadIdx.x; tx < TILE_DIM; tx += blockDim.x) {
            int r = r0 + ty, c = c0 + tx;
            if (r < rows && c < cols) tile[ty][tx] = in[(long long)r * cols + c];
        }
    }
    __syncthreads();
    // Block (bx, by) of the input becomes block (by, bx) of the output.
    for (int ty = threadIdx.y; ty < TILE_DIM; ty += blockDim.y) {
        for (int tx = threadIdx.x; tx < TILE_DIM; tx += blockDim.x) {
            int orow = c0 + ty;  // output row = input column
            int ocol = r0 + tx;  // output column = input row
            if (orow < cols && ocol < rows) out[(long long)orow * rows + ocol] = tile[tx][ty];
        }
    }
}
