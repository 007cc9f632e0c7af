// bad_input: what a program gets when what it hands the runtime is wrong, checked for the exact
// cudaError_t and for the process carrying on: a fatbin whose bytes are garbage, registered the
// way nvcc's host code registers one (its kernel fails to launch with cudaErrorInvalidKernelImage
// while the program's real kernels keep working); a launch of a host function that was never
// registered (cudaErrorInvalidDeviceFunction); a kernel launched without its arguments, or with a
// null one (cudaErrorInvalidValue).
#include "corpus.cuh"

#include <cstring>
#include <vector>

// The host-side ABI nvcc's generated code uses (crt/host_runtime.h), declared as it does.
extern "C" {
void** __cudaRegisterFatBinary(void* fat_cubin);
void __cudaRegisterFatBinaryEnd(void** handle);
void __cudaRegisterFunction(void** handle, const char* host_fun, char* device_fun,
                            const char* device_name, int thread_limit, uint3* tid, uint3* bid,
                            dim3* block_dim, dim3* grid_dim, int* warp_size);
}

__global__ void scale(float* p, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= s;
}

namespace {

// __fatBinC_Wrapper_t: a valid wrapper around bytes that are no fatbin.
struct Wrapper {
  int magic;
  int version;
  const unsigned long long* data;
  void* filename_or_fatbins;
};
alignas(8) const unsigned long long k_garbage[8] = {0xba55ed50ull | (0x10ull << 32), 0xdeadbeef,
                                                    0xffffffffffffffffull, 3, 4, 5, 6, 7};
Wrapper k_wrapper = {0x466243B1, 1, k_garbage, nullptr};
// The wrong magic altogether.
Wrapper k_not_a_wrapper = {0x12345678, 1, k_garbage, nullptr};

void broken_stub() {}   // stands for the host stub of a kernel in the garbage fatbin
void unwrapped_stub() {} // one in the wrapper with the wrong magic
void never_registered() {}

} // namespace

int main() {
  void** handle = __cudaRegisterFatBinary(&k_wrapper);
  __cudaRegisterFunction(handle, reinterpret_cast<const char*>(&broken_stub),
                         const_cast<char*>("broken"), "broken", -1, nullptr, nullptr, nullptr,
                         nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(handle);
  void** other = __cudaRegisterFatBinary(&k_not_a_wrapper);
  __cudaRegisterFunction(other, reinterpret_cast<const char*>(&unwrapped_stub),
                         const_cast<char*>("unwrapped"), "unwrapped", -1, nullptr, nullptr,
                         nullptr, nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(other);

  float* d = nullptr;
  const int n = 256;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  int count = n;
  float two = 2.0f;
  void* args[] = {&d, &two, &count};
  CHECK_ERROR(cudaLaunchKernel(reinterpret_cast<const void*>(&broken_stub), dim3(1), dim3(32),
                               args, 0, nullptr),
              cudaErrorInvalidKernelImage);
  CHECK_ERROR(cudaLaunchKernel(reinterpret_cast<const void*>(&unwrapped_stub), dim3(1), dim3(32),
                               args, 0, nullptr),
              cudaErrorInvalidKernelImage);
  cudaFuncAttributes attr;
  CHECK_ERROR(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&broken_stub)),
              cudaErrorInvalidKernelImage);

  // Never registered.
  CHECK_ERROR(cudaLaunchKernel(reinterpret_cast<const void*>(&never_registered), dim3(1),
                               dim3(32), args, 0, nullptr),
              cudaErrorInvalidDeviceFunction);
  CHECK_ERROR(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&never_registered)),
              cudaErrorInvalidDeviceFunction);
  CHECK_ERROR(cudaLaunchKernel(nullptr, dim3(1), dim3(32), args, 0, nullptr),
              cudaErrorInvalidDeviceFunction);

  // Arguments that do not match the kernel's three parameters.
  CHECK_ERROR(cudaLaunchKernel(reinterpret_cast<const void*>(&scale), dim3(1), dim3(32), nullptr,
                               0, nullptr),
              cudaErrorInvalidValue);
  void* missing[] = {&d, nullptr, &count};
  CHECK_ERROR(cudaLaunchKernel(reinterpret_cast<const void*>(&scale), dim3(1), dim3(32), missing,
                               0, nullptr),
              cudaErrorInvalidValue);

  // The program's own kernel works throughout.
  std::vector<float> h(n, 1.5f);
  CHECK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  scale<<<1, n>>>(d, 2.0f, n);
  CHECK_LAUNCH("scale<<<1, 256>>>");
  CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&scale), dim3(1), dim3(n), args, 0,
                         nullptr));
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (float v : h) {
    if (v != 6.0f) corpus::wrong("scale: %g", double(v));
  }
  CHECK(cudaFree(d));
  std::printf("bad_input: ok\n");
  return 0;
}
