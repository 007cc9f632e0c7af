// The CUDA source of hone-example-mlp's kernels, compiled with NVRTC when the program starts (as
// CuPy's RawKernel or PyTorch's jiterator do). Every size is a run-time argument; the program
// passes the same values to every launch, which is what a runtime specializer can exploit.
#pragma once

namespace mlp {

inline constexpr const char* k_program_name = "mlp_kernels.cu";

// The kernels, in the order the program looks them up.
inline constexpr const char* k_kernel_names[] = {"conv1d", "matmul", "bias_act", "layernorm",
                                                 "softmax"};

// Rows of A a matmul block keeps in shared memory (the source's MATMUL_ROWS).
inline constexpr int k_matmul_rows = 16;

inline constexpr const char* k_kernel_source = R"cuda(
#define MATMUL_ROWS 16

// y[c][i] = sum_j x[c][i + j - width/2] * w[j]: a "same" 1-D convolution of each of gridDim.x
// channels of `length` samples (zero outside), one block per channel. The block stages the taps
// and the channel (with its halo) in shared memory: width + length + width - 1 floats.
extern "C" __global__ void conv1d(const float* x, const float* w, float* y, int length, int width) {
  extern __shared__ float smem[];
  float* taps = smem;
  float* tile = smem + width;
  const float* xc = x + (size_t)blockIdx.x * length;
  float* yc = y + (size_t)blockIdx.x * length;
  int half = width / 2;
  for (int i = threadIdx.x; i < width; i += blockDim.x) taps[i] = w[i];
  for (int i = threadIdx.x; i < length + width - 1; i += blockDim.x) {
    int s = i - half;
    tile[i] = (s >= 0 && s < length) ? xc[s] : 0.f;
  }
  __syncthreads();
  for (int o = threadIdx.x; o < length; o += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < width; ++j) acc = fmaf(tile[o + j], taps[j], acc);
    yc[o] = acc;
  }
}

// C[M x N] = A[M x K] * B[K x N], row-major. A block computes MATMUL_ROWS rows of C for
// blockDim.x columns: it stages its rows of A (MATMUL_ROWS x K floats of dynamic shared memory),
// then each thread streams its column of B once and accumulates MATMUL_ROWS outputs.
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  extern __shared__ float As[];
  int row0 = blockIdx.y * MATMUL_ROWS;
  for (int i = threadIdx.x; i < MATMUL_ROWS * K; i += blockDim.x) {
    int r = row0 + i / K;
    As[i] = r < M ? A[(size_t)r * K + i % K] : 0.f;
  }
  __syncthreads();
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= N) return;
  float acc[MATMUL_ROWS];
  for (int r = 0; r < MATMUL_ROWS; ++r) acc[r] = 0.f;
  for (int k = 0; k < K; ++k) {
    float b = B[(size_t)k * N + col];
    for (int r = 0; r < MATMUL_ROWS; ++r) acc[r] = fmaf(As[r * K + k], b, acc[r]);
  }
  for (int r = 0; r < MATMUL_ROWS; ++r) {
    if (row0 + r < M) C[(size_t)(row0 + r) * N + col] = acc[r];
  }
}

__device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

// y = act(x + bias[column]) over a rows x cols matrix; act 0: ReLU, 1: GELU (tanh form).
extern "C" __global__ void bias_act(const float* x, const float* bias, float* y, int rows,
                                    int cols, int act) {
  int n = rows * cols;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = x[i] + bias[i % cols];
    y[i] = act == 1 ? gelu(v) : fmaxf(v, 0.f);
  }
}

// The sum (or maximum) of v over the block; every thread gets it. red: 32 floats of shared memory.
__device__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float block_max(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : -3.402823466e38f;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// y = (x - mean) / sqrt(var + eps) * gamma + beta, per row of `cols`; one block per row.
extern "C" __global__ void layernorm(const float* x, const float* gamma, const float* beta,
                                     float* y, int cols, float eps) {
  __shared__ float red[32];
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  float mean = block_sum(s, red) / cols;
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = xr[c] - mean;
    v += d * d;
  }
  float rstd = rsqrtf(block_sum(v, red) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
  }
}

// y = exp(x - max) / sum(exp(x - max)), per row of `cols`; one block per row.
extern "C" __global__ void softmax(const float* x, float* y, int cols) {
  __shared__ float red[32];
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  float m = -3.402823466e38f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_max(m, red);
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(xr[c] - m);
  float inv = 1.f / block_sum(s, red);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __expf(xr[c] - m) * inv;
}
)cuda";

} // namespace mlp
