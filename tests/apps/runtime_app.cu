// hone-testapp-runtime: the workload as a CUDA runtime-API program (<<<>>> launches, static
// cudart), built by nvcc. On a GPU it prints what the driver-API apps print. On the emulated
// device the runtime stops at its first call (it needs cuGetExportTable's private tables, which the
// emulated driver does not provide) and the program prints that error: what a shim must leave
// exactly as it is.
#include "workload.cu"
#include "workload.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

using namespace testapp;

#define RT_CHECK(call)                                                                             \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::printf("error: %s: %s\n", #call, cudaGetErrorName(e_));                                 \
      return 2;                                                                                    \
    }                                                                                              \
  } while (0)

static dim3 grid_of(int k) {
  return dim3(k_kernels[k].grid[0], k_kernels[k].grid[1], k_kernels[k].grid[2]);
}
static dim3 block_of(int k) {
  return dim3(k_kernels[k].block[0], k_kernels[k].block[1], k_kernels[k].block[2]);
}

int main() {
  Inputs in;
  float *x = nullptr, *y = nullptr;
  unsigned* bits = nullptr;
  int* blur[2] = {nullptr, nullptr};
  RT_CHECK(cudaMalloc(&x, in.x.size() * sizeof(float)));
  RT_CHECK(cudaMalloc(&y, in.y.size() * sizeof(float)));
  RT_CHECK(cudaMalloc(&bits, in.bits.size() * sizeof(unsigned)));
  for (auto& b : blur) RT_CHECK(cudaMalloc(&b, in.blur.size() * sizeof(int)));
  RT_CHECK(cudaMemcpy(x, in.x.data(), in.x.size() * sizeof(float), cudaMemcpyHostToDevice));
  RT_CHECK(cudaMemcpy(y, in.y.data(), in.y.size() * sizeof(float), cudaMemcpyHostToDevice));
  RT_CHECK(cudaMemcpy(bits, in.bits.data(), in.bits.size() * sizeof(unsigned), cudaMemcpyHostToDevice));
  for (auto b : blur)
    RT_CHECK(cudaMemcpy(b, in.blur.data(), in.blur.size() * sizeof(int), cudaMemcpyHostToDevice));

  // Round r launches every kernel that has launches left, as the driver-API apps do.
  int counts[k_kernel_count] = {};
  int rounds = 0;
  for (const auto& k : k_kernels) rounds = k.launches > rounds ? k.launches : rounds;
  for (int round = 0; round < rounds; ++round) {
    if (round < k_kernels[k_saxpy].launches) {
      saxpy<<<grid_of(k_saxpy), block_of(k_saxpy)>>>(k_saxpy_a, x, y, k_saxpy_n);
      RT_CHECK(cudaGetLastError());
      ++counts[k_saxpy];
    }
    if (round < k_kernels[k_mix_bits].launches) {
      mix_bits<<<grid_of(k_mix_bits), block_of(k_mix_bits)>>>(bits, mix_salt(round), k_mix_n);
      RT_CHECK(cudaGetLastError());
      ++counts[k_mix_bits];
    }
    if (round < k_kernels[k_blur].launches) {
      hone_test::blur<<<grid_of(k_blur), block_of(k_blur)>>>(blur[round % 2], blur[1 - round % 2], k_blur_n);
      RT_CHECK(cudaGetLastError());
      ++counts[k_blur];
    }
  }
  RT_CHECK(cudaDeviceSynchronize());

  std::vector<float> y_out(in.y.size());
  std::vector<uint32_t> bits_out(in.bits.size());
  std::vector<int32_t> blur_out[2] = {std::vector<int32_t>(in.blur.size()),
                                      std::vector<int32_t>(in.blur.size())};
  RT_CHECK(cudaMemcpy(y_out.data(), y, y_out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  RT_CHECK(cudaMemcpy(bits_out.data(), bits, bits_out.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (int b = 0; b < 2; ++b)
    RT_CHECK(cudaMemcpy(blur_out[b].data(), blur[b], blur_out[b].size() * sizeof(int), cudaMemcpyDeviceToHost));

  std::vector<float> y_ref = in.y;
  reference_saxpy(in.x, y_ref, counts[k_saxpy]);
  std::vector<uint32_t> bits_ref = in.bits;
  reference_mix_bits(bits_ref, counts[k_mix_bits]);
  std::vector<int32_t> blur_ref[2] = {in.blur, in.blur};
  reference_blur(blur_ref[0], blur_ref[1], counts[k_blur]);

  std::printf("%s\n", launches_line(counts).c_str());
  std::printf("workload: checksum saxpy=%s mix_bits=%s blur_a=%s blur_b=%s\n",
              hex64(checksum(y_out)).c_str(), hex64(checksum(bits_out)).c_str(),
              hex64(checksum(blur_out[0])).c_str(), hex64(checksum(blur_out[1])).c_str());
  bool ok = std::memcmp(y_out.data(), y_ref.data(), y_ref.size() * sizeof(float)) == 0 &&
            bits_out == bits_ref && blur_out[0] == blur_ref[0] && blur_out[1] == blur_ref[1];
  std::printf("workload: check %s\n", ok ? "ok" : "MISMATCH");
  for (auto p : {static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(bits),
                 static_cast<void*>(blur[0]), static_cast<void*>(blur[1])})
    RT_CHECK(cudaFree(p));
  return ok ? 0 : 1;
}
