// A hand-written variant of llama.cpp's rms_norm_f32<256, true, false> (ggml-cuda/norm.cu in the
// llama.cpp node-llama-cpp 3.22.1 ships: RMS norm fused with the multiply by the norm's weights),
// as a kernel engineer would hand it to honed with `honectl submit`. llama_hone_test submits it
// (compiled with --use_fast_math, as llama.cpp's kernels are) so that a verified variant of a
// kernel llama.cpp replays in its CUDA graphs is served from the store in the second run, and put
// back by `honectl disable`. hone's built-in strategies find no gain on this model's kernels.
//
// What differs from the original: the original reads its row of x to sum the squares, reduces,
// then reads x again with the weights to write the output, so a thread waits for global memory
// twice. This one reads x and the weights once, before the reduction, and keeps them in
// registers for rows of up to 4 * 256 columns (longer rows take the original's two passes). Every
// floating-point operation is the original's, in the original's order: the outputs are the same
// bits. The parameter list is the original's, so the entry has its mangled name.

template <int block_size, bool do_multiply, bool do_add>
__global__ void rms_norm_f32(const float* x, float* dst, const int ncols, const long stride_row,
                             const long stride_channel, const long stride_sample, const float eps,
                             const float* mul, const long mul_stride_row,
                             const long mul_stride_channel, const long mul_stride_sample,
                             const uint3 mul_ncols_packed, const uint3 mul_nrows_packed,
                             const uint3 mul_nchannels_packed, const uint3 mul_nsamples_packed,
                             const float* add, const long add_stride_row,
                             const long add_stride_channel, const long add_stride_sample,
                             const uint3 add_ncols_packed, const uint3 add_nrows_packed,
                             const uint3 add_nchannels_packed, const uint3 add_nsamples_packed);

namespace {

__device__ __forceinline__ unsigned fastmodulo(unsigned n, const uint3 v) {
  const unsigned hi = __umulhi(n, v.x);
  return n - ((hi + n) >> v.y) * v.z;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset, 32);
  return v;
}

} // namespace

template <>
__global__ void rms_norm_f32<256, true, false>(
    const float* x, float* dst, const int ncols, const long stride_row, const long stride_channel,
    const long stride_sample, const float eps, const float* mul, const long mul_stride_row,
    const long mul_stride_channel, const long mul_stride_sample, const uint3 mul_ncols_packed,
    const uint3 mul_nrows_packed, const uint3 mul_nchannels_packed,
    const uint3 mul_nsamples_packed, const float*, const long, const long, const long, const uint3,
    const uint3, const uint3, const uint3) {
  constexpr int block_size = 256;
  constexpr int held = 4;
  // Programmatic dependent launch, as the original: let the next kernel start its prologue.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int nrows = gridDim.x;
  const int nchannels = gridDim.y;
  const int row = blockIdx.x;
  const int channel = blockIdx.y;
  const int sample = blockIdx.z;
  const int tid = threadIdx.x;

  x += sample * stride_sample + channel * stride_channel + row * stride_row;
  dst += ((sample * nchannels + channel) * nrows + row) * ncols;
  const unsigned mul_row = fastmodulo(row, mul_nrows_packed);
  const unsigned mul_channel = fastmodulo(channel, mul_nchannels_packed);
  const unsigned mul_sample = fastmodulo(sample, mul_nsamples_packed);
  mul += mul_sample * mul_stride_sample + mul_channel * mul_stride_channel +
         mul_row * mul_stride_row;

  // The previous kernel's output (x) is complete from here on.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const bool in_registers = ncols <= held * block_size;
  float xs[held], ms[held];
  float tmp = 0.0f;
  if (in_registers) {
#pragma unroll
    for (int i = 0; i < held; ++i) {
      const int col = tid + i * block_size;
      if (col < ncols) {
        xs[i] = x[col];
        ms[i] = mul[fastmodulo(col, mul_ncols_packed)];
      }
    }
#pragma unroll
    for (int i = 0; i < held; ++i) {
      if (tid + i * block_size < ncols) tmp = __fmaf_rn(xs[i], xs[i], tmp);
    }
  } else {
    for (int col = tid; col < ncols; col += block_size) tmp = __fmaf_rn(x[col], x[col], tmp);
  }

  // The original's block reduction: each warp's sum, then the warps' sums in the first lanes.
  __shared__ float s_sum[block_size / 32];
  tmp = warp_sum(tmp);
  if (tid % 32 == 0) s_sum[tid / 32] = tmp;
  __syncthreads();
  tmp = tid % 32 < block_size / 32 ? s_sum[tid % 32] : 0.0f;
  tmp = warp_sum(tmp);

  const float mean = __fdividef(tmp, float(ncols));
  const float scale = rsqrtf(mean + eps);
  if (in_registers) {
#pragma unroll
    for (int i = 0; i < held; ++i) {
      const int col = tid + i * block_size;
      if (col < ncols) dst[col] = scale * xs[i] * ms[i];
    }
  } else {
    for (int col = tid; col < ncols; col += block_size) {
      dst[col] = scale * x[col] * mul[fastmodulo(col, mul_ncols_packed)];
    }
  }
}
