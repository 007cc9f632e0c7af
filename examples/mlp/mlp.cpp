// hone-example-mlp: an inference-like loop, the application `make demo` optimizes.
//
// An ordinary CUDA driver-API program (cuda.h and nvrtc.h; nothing of hone). At start it compiles
// its kernels from source with NVRTC, as CuPy or PyTorch's jiterator do, then runs one small
// model step per iteration on fresh input:
//
//   signal [128 x 8192] -> conv1d (9 taps) -> [32768 x 32] -> matmul W1 -> bias_act (GELU)
//                       -> matmul W2 -> layernorm -> softmax
//
// (1M elements per activation: large enough that no kernel is dominated by its launch.)
//
// Every kernel takes its sizes as run-time arguments, and every launch passes the same ones.
// Every --check-every iterations (and at the end) it checks its results two ways:
//   - each kernel's output of that iteration against the host's version (reference.hpp), within
//     a tolerance, and
//   - one extra step on a fixed input, whose outputs (all six) must hash (FNV-1a 64) to the same
//     fingerprint as at the first check: bit for bit the same results for the whole run.
// It also measures the device time of each step with events (the cost model's time on hone's
// emulated device) and prints its mean since the previous check.
//
//   hone-example-mlp [--seconds S] [--iterations N] [--check-every K] [--stop-file PATH] [--quiet]
//
// Output: a line saying what was compiled; a line per check,
//   check C iteration I max_error E fingerprint F step_us T ok|MISMATCH
// and at the end
//   iterations I checks C max_error E fingerprint_changes F result ok|MISMATCH
// Exit status: 0 when every check matched, 1 on a mismatch, 2 on a usage or CUDA/NVRTC error.
#include "kernels.hpp"
#include "reference.hpp"

#include <cuda.h>
#include <nvrtc.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using mlp::Floats;

// The model's shape. The convolution's output, channels x length, is viewed as rows x hidden.
constexpr int k_channels = 128;
constexpr int k_length = 8192;
constexpr int k_taps = 9;
constexpr int k_rows = 32768;
constexpr int k_hidden = 32;
constexpr int k_gelu = 1;
constexpr float k_eps = 1e-5f;
static_assert(k_channels * k_length == k_rows * k_hidden);

constexpr unsigned k_matmul_threads = 32;
constexpr unsigned k_row_threads = 32; // layernorm, softmax: one block per row
constexpr unsigned k_conv_threads = 256;
constexpr unsigned k_elementwise_threads = 256;

// Results further than this from the host's (relative, absolute near zero) are a mismatch.
constexpr double k_tolerance = 1e-3;

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "?";
  const char* text = "?";
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  throw CudaError(std::string(call) + ": " + name + " (" + text + ")");
}
#define CK(call) check((call), #call)

void check_nvrtc(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS) throw CudaError(std::string(call) + ": " + nvrtcGetErrorString(r));
}

struct Options {
  double seconds = 60;
  long iterations = -1;
  long check_every = 20;
  std::string stop_file;
  bool quiet = false;
};

// Uniform floats in [-scale, scale) from a linear congruential sequence.
Floats uniform(size_t n, float scale, uint32_t seed) {
  Floats v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = scale * (float(seed >> 8) / float(1u << 23) - 1.f);
  }
  return v;
}

Floats shifted(Floats v, float by) {
  for (auto& x : v) x += by;
  return v;
}

uint64_t fnv1a(uint64_t h, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// A device buffer of floats.
class Buffer {
public:
  explicit Buffer(size_t n) : m_n(n) { CK(cuMemAlloc(&m_ptr, n * sizeof(float))); }
  explicit Buffer(const Floats& host) : Buffer(host.size()) { write(host); }
  ~Buffer() { cuMemFree(m_ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void write(const Floats& host) { CK(cuMemcpyHtoD(m_ptr, host.data(), m_n * sizeof(float))); }
  Floats read() const {
    Floats host(m_n);
    CK(cuMemcpyDtoH(host.data(), m_ptr, m_n * sizeof(float)));
    return host;
  }
  CUdeviceptr* arg() { return &m_ptr; }

private:
  CUdeviceptr m_ptr = 0;
  size_t m_n;
};

// The compiled kernels: NVRTC source -> PTX -> a module of the current context.
struct Kernels {
  CUmodule module = nullptr;
  CUfunction conv1d, matmul, bias_act, layernorm, softmax;
  std::string arch;
};

Kernels compile(CUdevice device) {
  int major = 0, minor = 0;
  CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
  CK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
  Kernels k;
  k.arch = "compute_" + std::to_string(major * 10 + minor);
  std::string arch_option = "--gpu-architecture=" + k.arch;
  const char* options[] = {"-std=c++17", arch_option.c_str()};
  nvrtcProgram prog = nullptr;
  check_nvrtc(
      nvrtcCreateProgram(&prog, mlp::k_kernel_source, mlp::k_program_name, 0, nullptr, nullptr),
      "nvrtcCreateProgram");
  nvrtcResult compiled = nvrtcCompileProgram(prog, 2, options);
  if (compiled != NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetProgramLogSize(prog, &size);
    std::string log(size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    nvrtcDestroyProgram(&prog);
    throw CudaError(std::string("nvrtcCompileProgram: ") + nvrtcGetErrorString(compiled) + "\n" +
                    log);
  }
  size_t size = 0;
  check_nvrtc(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
  std::string ptx(size, '\0'); // the size counts the NUL
  check_nvrtc(nvrtcGetPTX(prog, ptx.data()), "nvrtcGetPTX");
  nvrtcDestroyProgram(&prog);
  CK(cuModuleLoadData(&k.module, ptx.c_str()));
  CUfunction* functions[] = {&k.conv1d, &k.matmul, &k.bias_act, &k.layernorm, &k.softmax};
  for (size_t i = 0; i < std::size(functions); ++i) {
    CK(cuModuleGetFunction(functions[i], k.module, mlp::k_kernel_names[i]));
  }
  return k;
}

// The model: weights, activations, and the six launches of a step.
class Model {
public:
  explicit Model(const Kernels& k)
      : m_k(k), m_signal(size_t(k_channels) * k_length), m_taps(m_taps_host),
        m_features(size_t(k_rows) * k_hidden), m_w1(m_w1_host), m_b1(m_b1_host),
        m_h0(size_t(k_rows) * k_hidden), m_h1(size_t(k_rows) * k_hidden), m_w2(m_w2_host),
        m_h2(size_t(k_rows) * k_hidden), m_gamma(m_gamma_host), m_beta(m_beta_host),
        m_h3(size_t(k_rows) * k_hidden), m_probs(size_t(k_rows) * k_hidden) {
    CK(cuEventCreate(&m_start, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&m_stop, CU_EVENT_DEFAULT));
  }
  ~Model() {
    cuEventDestroy(m_start);
    cuEventDestroy(m_stop);
  }

  // One step on `signal`; returns its device time in microseconds.
  double step(const Floats& signal) {
    m_signal_host = signal;
    m_signal.write(signal);
    CK(cuEventRecord(m_start, nullptr));
    int length = k_length, taps = k_taps, rows = k_rows, hidden = k_hidden, act = k_gelu;
    float eps = k_eps;
    unsigned conv_shared = unsigned(k_taps + k_length + k_taps - 1) * sizeof(float);
    void* conv[] = {m_signal.arg(), m_taps.arg(), m_features.arg(), &length, &taps};
    launch(m_k.conv1d, k_channels, 1, k_conv_threads, conv_shared, conv);
    matmul(m_features, m_w1, m_h0);
    unsigned n = unsigned(k_rows * k_hidden);
    void* bias[] = {m_h0.arg(), m_b1.arg(), m_h1.arg(), &rows, &hidden, &act};
    launch(m_k.bias_act, (n + k_elementwise_threads - 1) / k_elementwise_threads, 1,
           k_elementwise_threads, 0, bias);
    matmul(m_h1, m_w2, m_h2);
    void* norm[] = {m_h2.arg(), m_gamma.arg(), m_beta.arg(), m_h3.arg(), &hidden, &eps};
    launch(m_k.layernorm, k_rows, 1, k_row_threads, 0, norm);
    void* soft[] = {m_h3.arg(), m_probs.arg(), &hidden};
    launch(m_k.softmax, k_rows, 1, k_row_threads, 0, soft);
    CK(cuEventRecord(m_stop, nullptr));
    CK(cuEventSynchronize(m_stop));
    float ms = 0;
    CK(cuEventElapsedTime(&ms, m_start, m_stop));
    return double(ms) * 1000;
  }

  // The outputs of the last step, in launch order.
  struct Outputs {
    Floats features, h0, h1, h2, h3, probs;
  };
  Outputs outputs() const {
    return {m_features.read(), m_h0.read(), m_h1.read(), m_h2.read(), m_h3.read(), m_probs.read()};
  }

  // The largest difference between the last step's outputs and the host's version of each
  // kernel applied to that kernel's own inputs; `where` says which output and element.
  double compare_with_host(const Outputs& o, std::string& where) const {
    struct Stage {
      const char* name;
      const Floats& got;
      Floats want;
    };
    const Stage stages[] = {
        {"conv1d", o.features,
         mlp::conv1d(m_signal_host, m_taps_host, k_channels, k_length, k_taps)},
        {"matmul (W1)", o.h0, mlp::matmul(o.features, m_w1_host, k_rows, k_hidden, k_hidden)},
        {"bias_act", o.h1, mlp::bias_act(o.h0, m_b1_host, k_rows, k_hidden, k_gelu)},
        {"matmul (W2)", o.h2, mlp::matmul(o.h1, m_w2_host, k_rows, k_hidden, k_hidden)},
        {"layernorm", o.h3,
         mlp::layernorm(o.h2, m_gamma_host, m_beta_host, k_rows, k_hidden, k_eps)},
        {"softmax", o.probs, mlp::softmax(o.h3, k_rows, k_hidden)},
    };
    double worst = -1;
    for (const auto& s : stages) {
      mlp::Difference d = mlp::max_difference(s.got, s.want);
      if (d.error > worst) {
        worst = d.error;
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s element %zu: got %.9g, want %.9g", s.name, d.index,
                      double(s.got[d.index]), double(s.want[d.index]));
        where = buf;
      }
    }
    return worst;
  }

private:
  void launch(CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned shared, void** args) {
    CK(cuLaunchKernel(f, gx, gy, 1, bx, 1, 1, shared, nullptr, args, nullptr));
  }
  void matmul(Buffer& a, Buffer& b, Buffer& c) {
    int m = k_rows, n = k_hidden, k = k_hidden;
    void* args[] = {a.arg(), b.arg(), c.arg(), &m, &n, &k};
    launch(m_k.matmul, (unsigned(n) + k_matmul_threads - 1) / k_matmul_threads,
           unsigned((m + mlp::k_matmul_rows - 1) / mlp::k_matmul_rows), k_matmul_threads,
           unsigned(mlp::k_matmul_rows * k) * sizeof(float), args);
  }

  const Kernels& m_k;
  Floats m_signal_host;
  // Host copies of the weights (declared before their device buffers, which copy them).
  Floats m_taps_host = uniform(k_taps, 0.25f, 11);
  Floats m_w1_host = uniform(size_t(k_hidden) * k_hidden, 1.f / std::sqrt(float(k_hidden)), 12);
  Floats m_b1_host = uniform(k_hidden, 0.1f, 13);
  Floats m_w2_host = uniform(size_t(k_hidden) * k_hidden, 1.f / std::sqrt(float(k_hidden)), 14);
  Floats m_gamma_host = shifted(uniform(k_hidden, 0.5f, 15), 1.f);
  Floats m_beta_host = uniform(k_hidden, 0.5f, 16);
  Buffer m_signal, m_taps, m_features, m_w1, m_b1, m_h0, m_h1, m_w2, m_h2, m_gamma, m_beta, m_h3,
      m_probs;
  CUevent m_start = nullptr, m_stop = nullptr;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool value = i + 1 < argc;
    if (a == "--seconds" && value)
      o.seconds = std::atof(argv[++i]);
    else if (a == "--iterations" && value)
      o.iterations = std::atol(argv[++i]);
    else if (a == "--check-every" && value)
      o.check_every = std::atol(argv[++i]);
    else if (a == "--stop-file" && value)
      o.stop_file = argv[++i];
    else if (a == "--quiet")
      o.quiet = true;
    else
      return false;
  }
  return o.check_every > 0 && o.seconds >= 0;
}

} // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, opt)) {
    std::fprintf(stderr,
                 "usage: %s [--seconds S] [--iterations N] [--check-every K] [--stop-file PATH] "
                 "[--quiet]\n"
                 "  runs an MLP step per iteration until S seconds (default 60) or N iterations\n"
                 "  have passed or PATH exists; checks its results every K iterations (default "
                 "20)\n",
                 argv[0]);
    return 2;
  }
  long iterations = 0, checks = 0, fingerprint_changes = 0, mismatches = 0;
  double max_error = 0;
  try {
    CK(cuInit(0));
    CUdevice device;
    CK(cuDeviceGet(&device, 0));
    char name[256] = {};
    CK(cuDeviceGetName(name, sizeof name, device));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, device));
    CK(cuCtxSetCurrent(ctx));
    auto t0 = std::chrono::steady_clock::now();
    Kernels kernels = compile(device);
    double compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("mlp: %s: NVRTC compiled conv1d, matmul, bias_act, layernorm, softmax for %s in "
                "%.0f ms\n",
                name, kernels.arch.c_str(), compile_ms);
    std::printf("mlp: step = conv1d %dx%d (%d taps) -> matmul %dx%dx%d -> bias_act (GELU) -> "
                "matmul -> layernorm -> softmax (%d columns); checks every %ld iterations\n",
                k_channels, k_length, k_taps, k_rows, k_hidden, k_hidden, k_hidden,
                opt.check_every);
    std::fflush(stdout);

    Model model(kernels);
    const Floats fixed_signal = uniform(size_t(k_channels) * k_length, 1.f, 42);
    uint64_t first_fingerprint = 0;
    double step_us_sum = 0;
    long steps_since_check = 0, last_checked = -1;

    // Checks the step just run (iteration `it`), then runs the fixed-input step and hashes it.
    auto run_check = [&](long it) {
      std::string where;
      double error = model.compare_with_host(model.outputs(), where);
      model.step(fixed_signal);
      Model::Outputs fixed = model.outputs();
      uint64_t fp = 0xcbf29ce484222325ull;
      for (const Floats* f :
           {&fixed.features, &fixed.h0, &fixed.h1, &fixed.h2, &fixed.h3, &fixed.probs}) {
        fp = fnv1a(fp, f->data(), f->size() * sizeof(float));
      }
      if (checks == 0) first_fingerprint = fp;
      bool ok = error <= k_tolerance && fp == first_fingerprint;
      fingerprint_changes += fp != first_fingerprint;
      mismatches += !ok;
      max_error = std::max(max_error, error);
      ++checks;
      last_checked = it;
      if (!opt.quiet || !ok) {
        std::printf(
            "check %ld iteration %ld max_error %.2e fingerprint %016" PRIx64 " step_us %.2f %s\n",
            checks, it, error, fp, steps_since_check ? step_us_sum / steps_since_check : 0.0,
            ok ? "ok" : "MISMATCH");
      }
      if (error > k_tolerance) std::printf("mismatch: %s\n", where.c_str());
      if (fp != first_fingerprint) {
        std::printf("mismatch: the fixed input's results changed (fingerprint %016" PRIx64
                    ", was %016" PRIx64 ")\n",
                    fp, first_fingerprint);
      }
      std::fflush(stdout);
      step_us_sum = 0;
      steps_since_check = 0;
    };

    auto start = std::chrono::steady_clock::now();
    for (long it = 0;; ++it) {
      bool stop =
          opt.iterations >= 0
              ? it >= opt.iterations
              : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >=
                    opt.seconds;
      if (!opt.stop_file.empty() && ::access(opt.stop_file.c_str(), F_OK) == 0) stop = true;
      if (stop) break;
      step_us_sum += model.step(uniform(size_t(k_channels) * k_length, 1.f, uint32_t(1000 + it)));
      ++steps_since_check;
      ++iterations;
      if (it % opt.check_every == 0) run_check(it);
    }
    if (iterations > 0 && last_checked != iterations - 1) run_check(iterations - 1);
    CK(cuModuleUnload(kernels.module));
    CK(cuDevicePrimaryCtxRelease(device));
  } catch (const CudaError& e) {
    std::printf("mlp: %s\n", e.what());
    std::printf("iterations %ld checks %ld max_error %.2e fingerprint_changes %ld result error\n",
                iterations, checks, max_error, fingerprint_changes);
    return 2;
  }
  bool ok = mismatches == 0 && checks > 0;
  std::printf("iterations %ld checks %ld max_error %.2e fingerprint_changes %ld result %s\n",
              iterations, checks, max_error, fingerprint_changes, ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
