// hone-driver-sample: three kernels through the CUDA driver API, each checked against the host.
//
// An ordinary driver-API program: it includes only cuda.h, links the toolkit's libcuda stub, and
// runs on whatever libcuda.so.1 the loader finds: a GPU's driver, or hone's emulated device with
// LD_LIBRARY_PATH=build/lib/emu. The PTX of sample_kernels.cu is embedded at build time.
//
// The inputs are small integers stored as floats, so every sum and product the kernels form is
// exact in float whatever the order of operations: the results must equal the host's exactly.
//
// Prints PASS or FAIL per kernel and exits 0 only if all three pass.
#include <cuda.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern const char k_sample_kernels_ptx[];

namespace {

// A failed driver call: what was called and the driver's own words for the error.
struct CallError {
  std::string what;
};

void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "?";
  const char* text = "?";
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  throw CallError{std::string(call) + ": " + name + " (" + text + ")"};
}
#define CK(call) check((call), #call)

// A device buffer of floats.
class Buffer {
public:
  explicit Buffer(size_t n) : m_n(n) { CK(cuMemAlloc(&m_ptr, n * sizeof(float))); }
  explicit Buffer(const std::vector<float>& host) : Buffer(host.size()) {
    CK(cuMemcpyHtoD(m_ptr, host.data(), host.size() * sizeof(float)));
  }
  ~Buffer() { cuMemFree(m_ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::vector<float> read() const {
    std::vector<float> host(m_n);
    CK(cuMemcpyDtoH(host.data(), m_ptr, m_n * sizeof(float)));
    return host;
  }
  CUdeviceptr& ptr() { return m_ptr; }

private:
  CUdeviceptr m_ptr = 0;
  size_t m_n;
};

// Small integers in [-range, range], as floats, from a fixed linear congruential sequence.
std::vector<float> small_ints(size_t n, int range, unsigned seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(int((seed >> 8) % unsigned(2 * range + 1)) - range);
  }
  return v;
}

// Index of the first element that differs, or -1.
long first_difference(const std::vector<float>& want, const std::vector<float>& got) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i]) return long(i);
  }
  return -1;
}

// Runs `f` with grid/block, timing it with events (the device's time, modeled on the emulator).
float launch_timed(CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned by,
                   void** params) {
  CUevent start = nullptr, stop = nullptr;
  CK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&stop, CU_EVENT_DEFAULT));
  CK(cuEventRecord(start, nullptr));
  CK(cuLaunchKernel(f, gx, gy, 1, bx, by, 1, 0, nullptr, params, nullptr));
  CK(cuEventRecord(stop, nullptr));
  CK(cuEventSynchronize(stop));
  float ms = 0;
  CK(cuEventElapsedTime(&ms, start, stop));
  cuEventDestroy(start);
  cuEventDestroy(stop);
  return ms;
}

bool report(const char* kernel, long bad, const std::vector<float>& want,
            const std::vector<float>& got, const std::string& shape, float ms) {
  if (bad < 0) {
    std::printf("PASS %-13s %s, %.3f ms\n", kernel, shape.c_str(), double(ms));
    return true;
  }
  std::printf("FAIL %-13s %s: element %ld is %.9g, expected %.9g\n", kernel, shape.c_str(), bad,
              double(got[bad]), double(want[bad]));
  return false;
}

bool run_vector_add(CUmodule module) {
  CUfunction f;
  CK(cuModuleGetFunction(&f, module, "vector_add"));
  int n = (1 << 20) + 3; // a partial last block
  auto a = small_ints(n, 1000, 1), b = small_ints(n, 1000, 2);
  Buffer da(a), db(b), dc{size_t(n)};
  void* params[] = {&da.ptr(), &db.ptr(), &dc.ptr(), &n};
  float ms = launch_timed(f, (n + 255) / 256, 1, 256, 1, params);
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = a[i] + b[i];
  auto got = dc.read();
  return report("vector_add", first_difference(want, got), want, got, "n=" + std::to_string(n), ms);
}

bool run_matmul_tiled(CUmodule module) {
  CUfunction f;
  CK(cuModuleGetFunction(&f, module, "matmul_tiled"));
  int M = 200, N = 150, K = 130; // none a multiple of the 16x16 tile
  auto A = small_ints(size_t(M) * K, 8, 3), B = small_ints(size_t(K) * N, 8, 4);
  Buffer dA(A), dB(B), dC{size_t(M) * N};
  void* params[] = {&dA.ptr(), &dB.ptr(), &dC.ptr(), &M, &N, &K};
  float ms = launch_timed(f, (N + 15) / 16, (M + 15) / 16, 16, 16, params);
  std::vector<float> want(size_t(M) * N);
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) {
      float acc = 0; // |acc| <= 130 * 64: exact
      for (int k = 0; k < K; ++k) acc += A[size_t(r) * K + k] * B[size_t(k) * N + c];
      want[size_t(r) * N + c] = acc;
    }
  }
  auto got = dC.read();
  return report("matmul_tiled", first_difference(want, got), want, got,
                std::to_string(M) + "x" + std::to_string(K) + " * " + std::to_string(K) + "x" +
                    std::to_string(N),
                ms);
}

bool run_reduce_sum(CUmodule module) {
  CUfunction f;
  CK(cuModuleGetFunction(&f, module, "reduce_sum"));
  int n = (1 << 20) + 7;
  int blocks = 256;
  auto in = small_ints(n, 4, 5); // |sum| <= 4 * 2^20 < 2^24: exact
  Buffer din(in), dpartial{size_t(blocks)}, dtotal{1};
  void* first[] = {&din.ptr(), &dpartial.ptr(), &n};
  float ms = launch_timed(f, unsigned(blocks), 1, 256, 1, first);
  void* second[] = {&dpartial.ptr(), &dtotal.ptr(), &blocks};
  ms += launch_timed(f, 1, 1, 256, 1, second);
  double sum = 0;
  for (float v : in) sum += v;
  std::vector<float> want = {float(sum)};
  auto got = dtotal.read();
  return report("reduce_sum", first_difference(want, got), want, got,
                "n=" + std::to_string(n) + " (" + std::to_string(blocks) + " partials)", ms);
}

} // namespace

int main() {
  int failed = 0;
  try {
    CK(cuInit(0));
    CUdevice device;
    CK(cuDeviceGet(&device, 0));
    char name[256] = {};
    CK(cuDeviceGetName(name, sizeof name, device));
    int major = 0, minor = 0;
    CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
    CK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
    std::printf("device 0: %s (compute capability %d.%d)\n", name, major, minor);

    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, device));
    CK(cuCtxSetCurrent(ctx));
    CUmodule module;
    CK(cuModuleLoadData(&module, k_sample_kernels_ptx));
    struct Sample {
      const char* kernel;
      bool (*run)(CUmodule);
    };
    for (Sample s : {Sample{"vector_add", run_vector_add}, Sample{"matmul_tiled", run_matmul_tiled},
                     Sample{"reduce_sum", run_reduce_sum}}) {
      try {
        failed += s.run(module) ? 0 : 1;
      } catch (const CallError& e) {
        std::printf("FAIL %-13s %s\n", s.kernel, e.what.c_str());
        ++failed;
      }
    }
    CK(cuModuleUnload(module));
    CK(cuDevicePrimaryCtxRelease(device));
  } catch (const CallError& e) {
    std::printf("FAIL %s\n", e.what.c_str());
    return 1;
  }
  std::printf("%s\n", failed ? "some kernels FAILED" : "all kernels PASSED");
  return failed ? 1 : 0;
}
