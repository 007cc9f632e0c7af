// errors: how a program finds out that something went wrong, as real code checks. A launch with a
// bad configuration fails at once: cudaPeekAtLastError reports it and keeps it, cudaGetLastError
// reports it once and clears it, and the next launch works. A kernel that writes out of bounds
// makes the device unusable (a sticky error): every later call that needs the device returns
// cudaErrorIllegalAddress, and cudaGetLastError returns it every time, until cudaDeviceReset;
// after the reset the program allocates and launches again. Names and descriptions of errors.
#include "corpus.cuh"

#include <cstring>
#include <vector>

__global__ void fill(int* p, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

// Writes one element past the end of a 64-element allocation.
__global__ void overrun(int* p) { p[64 + threadIdx.x] = 1; }

int main() {
  int* d = nullptr;
  CHECK(cudaMalloc(&d, 64 * sizeof(int)));

  // A configuration error: not sticky.
  fill<<<1, 2048>>>(d, 64, 1);
  CHECK_LAUNCH_ERROR("fill<<<1, 2048>>>", cudaErrorInvalidConfiguration);
  fill<<<0, 64>>>(d, 64, 1);
  CHECK_LAUNCH_ERROR("fill<<<0, 64>>>", cudaErrorInvalidConfiguration);
  fill<<<1, 64>>>(d, 64, 5);
  CHECK_LAUNCH("fill<<<1, 64>>>");
  CHECK(cudaDeviceSynchronize());
  std::vector<int> h(64);
  CHECK(cudaMemcpy(h.data(), d, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int v : h) {
    if (v != 5) corpus::wrong("fill after a failed launch: %d", v);
  }

  // Names and descriptions.
  if (std::strcmp(cudaGetErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress") != 0)
    corpus::wrong("cudaGetErrorName: %s", cudaGetErrorName(cudaErrorIllegalAddress));
  if (std::strcmp(cudaGetErrorName(cudaErrorInvalidDeviceFunction),
                  "cudaErrorInvalidDeviceFunction") != 0)
    corpus::wrong("cudaGetErrorName: %s", cudaGetErrorName(cudaErrorInvalidDeviceFunction));
  for (cudaError_t e : {cudaSuccess, cudaErrorInvalidValue, cudaErrorMemoryAllocation,
                        cudaErrorInvalidConfiguration, cudaErrorIllegalAddress}) {
    const char* s = cudaGetErrorString(e);
    if (s == nullptr || *s == '\0') corpus::wrong("no description for %s", cudaGetErrorName(e));
    std::printf("errors: %s: %s\n", cudaGetErrorName(e), s);
  }

  // A fault: sticky.
  overrun<<<1, 1>>>(d);
  cudaError_t at_sync = cudaDeviceSynchronize();
  if (at_sync != cudaErrorIllegalAddress)
    corpus::wrong("synchronize after the overrun: %s", cudaGetErrorName(at_sync));
  for (int i = 0; i < 2; ++i) {
    if (cudaError_t e = cudaGetLastError(); e != cudaErrorIllegalAddress)
      corpus::wrong("cudaGetLastError %d after the fault: %s", i, cudaGetErrorName(e));
  }
  int* more = nullptr;
  if (cudaError_t e = cudaMalloc(&more, 16); e != cudaErrorIllegalAddress)
    corpus::wrong("cudaMalloc after the fault: %s", cudaGetErrorName(e));
  if (cudaError_t e = cudaMemcpy(h.data(), d, 16, cudaMemcpyDeviceToHost);
      e != cudaErrorIllegalAddress)
    corpus::wrong("cudaMemcpy after the fault: %s", cudaGetErrorName(e));
  fill<<<1, 64>>>(d, 64, 6);
  if (cudaError_t e = cudaGetLastError(); e != cudaErrorIllegalAddress)
    corpus::wrong("a launch after the fault: %s", cudaGetErrorName(e));

  // The reset clears it; the device works again (the old allocation went with the reset).
  CHECK(cudaDeviceReset());
  CHECK(cudaGetLastError());
  CHECK(cudaMalloc(&d, 64 * sizeof(int)));
  fill<<<1, 64>>>(d, 64, 7);
  CHECK_LAUNCH("fill<<<1, 64>>> after the reset");
  CHECK(cudaMemcpy(h.data(), d, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int v : h) {
    if (v != 7) corpus::wrong("fill after the reset: %d", v);
  }
  CHECK(cudaFree(d));
  std::printf("errors: ok\n");
  return 0;
}
