// The three kernels of hone-driver-sample: a vector add, a shared-memory tiled matrix multiply and
// a two-pass block reduction. Compiled to PTX by nvcc at build time and embedded in the program.

#define TILE 16

// c[i] = a[i] + b[i]; 1D grid over n.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// C[MxN] = A[MxK] * B[KxN], row-major; grid ceil(N/16) x ceil(M/16), block 16x16. Each block
// stages 16x16 tiles of A and B through shared memory.
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ak = k0 + threadIdx.x, bk = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[bk * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

// partial[blockIdx.x] = sum of this block's grid-stride share of in[0..n); any 1D grid, block of
// 256 threads (a power of two). Run again with one block over the partials for the total.
extern "C" __global__ void reduce_sum(const float* in, float* partial, int n)
{
    __shared__ float s[256];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += in[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}
