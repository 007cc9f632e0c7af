// A hand-written "faster" conv1d for hone-example-mlp that drops the barrier between staging the
// channel in shared memory and reading it back ("every thread only reads what its own warp
// wrote", which is not true: the window of a thread's outputs reaches into its neighbours' part
// of the tile). A race: whether it computes the right result depends on how the warps are
// scheduled. honed's validation runs it on the application's captured launches and compares
// every output byte with the original's, so this is rejected and never reaches the application.
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
  // (the __syncthreads() of the original was here)
  for (int o = threadIdx.x; o < length; o += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < width; ++j) acc = fmaf(tile[o + j], taps[j], acc);
    yc[o] = acc;
  }
}
