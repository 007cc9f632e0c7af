// dynamic_shared: extern __shared__ buffers sized at launch, as real kernels size their tiles.
// A block reverses its part of an array through 1 KB of dynamic shared memory, and a kernel with a
// static buffer as well sees both; a kernel that needs 64 KB, above the 48 KB default, is refused
// until cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) raises its limit, then
// runs; asking beyond the device's opt-in maximum is refused. cudaFuncGetAttributes reports sane
// fields (the static shared size, the raised limit, threads per block, PTX version).
#include "corpus.cuh"

#include <vector>

__global__ void reverse_block(const int* in, int* out, int n) {
  extern __shared__ int buf[];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  buf[t] = i < n ? in[i] : -1;
  __syncthreads();
  int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - t);
  if (j < n) out[j] = buf[t];
}

// A static buffer and a dynamic one: the dynamic one starts after the static one.
__global__ void static_and_dynamic(int* out) {
  __shared__ int fixed[100];
  extern __shared__ int dyn[];
  int t = threadIdx.x;
  if (t < 100) fixed[t] = t;
  dyn[t] = 1000 + t;
  __syncthreads();
  out[t] = fixed[t % 100] + dyn[blockDim.x - 1 - t];
}

// 64 KB: 16384 ints per block, each thread owns 64 of them.
constexpr int k_big_ints = 16384;
__global__ void big_window(const int* in, long long* out) {
  extern __shared__ int window[];
  int t = threadIdx.x;
  for (int i = t; i < k_big_ints; i += blockDim.x) window[i] = in[blockIdx.x * k_big_ints + i];
  __syncthreads();
  // Each thread sums a stripe from the far end of the window.
  long long s = 0;
  for (int i = t; i < k_big_ints; i += blockDim.x) s += window[k_big_ints - 1 - i];
  out[blockIdx.x * blockDim.x + t] = s;
}

int main() {
  // 1 KB dynamic.
  const int n = 1000, block = 256;
  const int blocks = (n + block - 1) / block;
  std::vector<int> in(n), out(n);
  for (int i = 0; i < n; ++i) in[i] = 3 * i + 1;
  int *din, *dout;
  CHECK(cudaMalloc(&din, n * sizeof(int)));
  CHECK(cudaMalloc(&dout, n * sizeof(int)));
  CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  reverse_block<<<blocks, block, block * sizeof(int)>>>(din, dout, n);
  CHECK_LAUNCH("reverse_block<<<>>>");
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    int b = i / block, t = block - 1 - i % block, src = b * block + t;
    int want = src < n ? in[src] : -1;
    if (out[i] != want) corpus::wrong("reverse[%d] = %d, expected %d", i, out[i], want);
  }

  int* dmix;
  CHECK(cudaMalloc(&dmix, 128 * sizeof(int)));
  static_and_dynamic<<<1, 128, 128 * sizeof(int)>>>(dmix);
  CHECK_LAUNCH("static_and_dynamic<<<>>>");
  int mix[128];
  CHECK(cudaMemcpy(mix, dmix, sizeof mix, cudaMemcpyDeviceToHost));
  for (int t = 0; t < 128; ++t) {
    if (mix[t] != t % 100 + 1000 + 127 - t) corpus::wrong("static_and_dynamic[%d] = %d", t, mix[t]);
  }

  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, static_and_dynamic));
  if (attr.sharedSizeBytes < 100 * sizeof(int) || attr.sharedSizeBytes > 100 * sizeof(int) + 256)
    corpus::wrong("static_and_dynamic: sharedSizeBytes %zu", attr.sharedSizeBytes);
  if (attr.maxThreadsPerBlock <= 0 || attr.maxThreadsPerBlock > 1024 || attr.ptxVersion != 90 ||
      attr.numRegs < 0 || attr.localSizeBytes > 4096 || attr.constSizeBytes > 65536)
    corpus::wrong("static_and_dynamic: maxThreadsPerBlock %d ptxVersion %d numRegs %d local %zu",
                  attr.maxThreadsPerBlock, attr.ptxVersion, attr.numRegs, attr.localSizeBytes);

  // 64 KB: refused at first, then allowed.
  int optin = 0;
  CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  const int big = k_big_ints * sizeof(int);
  if (optin < big) corpus::wrong("opt-in shared memory %d is below %d", optin, big);
  CHECK(cudaFuncGetAttributes(&attr, big_window));
  if (attr.maxDynamicSharedSizeBytes > 48 * 1024 || attr.sharedSizeBytes != 0)
    corpus::wrong("big_window before: maxDynamicSharedSizeBytes %d shared %zu",
                  attr.maxDynamicSharedSizeBytes, attr.sharedSizeBytes);

  const int big_blocks = 2, big_threads = 256;
  std::vector<int> wide(big_blocks * k_big_ints);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = int(i % 1013) - 500;
  int* dwide;
  long long* dsums;
  CHECK(cudaMalloc(&dwide, wide.size() * sizeof(int)));
  CHECK(cudaMalloc(&dsums, big_blocks * big_threads * sizeof(long long)));
  CHECK(cudaMemcpy(dwide, wide.data(), wide.size() * sizeof(int), cudaMemcpyHostToDevice));

  big_window<<<big_blocks, big_threads, big>>>(dwide, dsums);
  CHECK_LAUNCH_ERROR("big_window<<<>>>", cudaErrorInvalidValue);
  CHECK_ERROR(cudaFuncSetAttribute(big_window, cudaFuncAttributeMaxDynamicSharedMemorySize, optin + 1),
              cudaErrorInvalidValue);
  CHECK(cudaFuncSetAttribute(big_window, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
  CHECK(cudaFuncGetAttributes(&attr, big_window));
  if (attr.maxDynamicSharedSizeBytes != big)
    corpus::wrong("big_window after: maxDynamicSharedSizeBytes %d", attr.maxDynamicSharedSizeBytes);
  // One byte more than the raised limit is still refused.
  big_window<<<big_blocks, big_threads, big + 4>>>(dwide, dsums);
  CHECK_LAUNCH_ERROR("big_window<<<>>>", cudaErrorInvalidValue);
  big_window<<<big_blocks, big_threads, big>>>(dwide, dsums);
  CHECK_LAUNCH("big_window<<<>>> with 64 KB");
  std::vector<long long> sums(big_blocks * big_threads);
  CHECK(cudaMemcpy(sums.data(), dsums, sums.size() * sizeof(long long), cudaMemcpyDeviceToHost));
  for (int b = 0; b < big_blocks; ++b) {
    for (int t = 0; t < big_threads; ++t) {
      long long want = 0;
      for (int i = t; i < k_big_ints; i += big_threads) want += wide[b * k_big_ints + k_big_ints - 1 - i];
      if (sums[b * big_threads + t] != want)
        corpus::wrong("big_window block %d thread %d: %lld, expected %lld", b, t,
                      sums[b * big_threads + t], want);
    }
  }

  corpus::Checksum sum;
  sum.add_all(out.data(), out.size());
  sum.add_all(mix, 128);
  sum.add_all(sums.data(), sums.size());
  std::printf("dynamic_shared: 1 KB reverse, static 400 B + dynamic 512 B, 64 KB refused then run\n");
  std::printf("dynamic_shared: sums[0] %lld checksum %016llx\n", sums[0], sum.value());
  for (void* p : {(void*)din, (void*)dout, (void*)dmix, (void*)dwide, (void*)dsums}) CHECK(cudaFree(p));
  std::printf("dynamic_shared: ok\n");
  return 0;
}
