// hone-bench-model-pairs: kernel optimization pairs whose outcome on a Hopper GPU (H100/H200) is
// well known, each kernel timed with CUDA events through the driver API. The same binary measures
// the modeled time of the emulated device (LD_LIBRARY_PATH=<build>/lib/emu) and the real time of a
// GPU (the system's libcuda.so.1), so the table says where the emulated device's cost model agrees
// with a GPU and where it does not.
//
// Every pair is A (the baseline form) and B (the optimized one) of model_pairs.cu, computing the
// same result; the outputs are compared (exactly, or within a relative 1e-5 for the float
// reduction). Each kernel runs once to warm up, then --reps times between two cuEventRecord calls;
// the median is reported. A/B >= 1.05 reads "B faster", A/B <= 0.95 "A faster", "same" between.
// Two absolute rows follow: a saxpy and a copy against the H200's HBM3e bandwidth (4.8 TB/s).
//
//   hone-bench-model-pairs [--ptx FILE] [--reps N] [--small] [--check] [--json]
//
// Exit status: 0; 1 when the outputs of a pair differ or a CUDA call fails; 2 on a usage error or
// an unreadable PTX file; 3 with --check, when every output agrees but a pair's measured direction
// is not the one a GPU shows.
#include <cuda.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#ifndef HONE_MODEL_PAIRS_PTX
#define HONE_MODEL_PAIRS_PTX "model_pairs.ptx"
#endif

namespace {

// The H200's documented HBM3e bandwidth, bytes per second.
constexpr double k_h200_bytes_per_second = 4.8e12;
// A/B at or beyond these reads as a difference.
constexpr double k_b_faster_ratio = 1.05;
constexpr double k_a_faster_ratio = 0.95;
// The two reductions add the same floats (all in [0, 1)) in different orders.
constexpr double k_reduction_tolerance = 1e-5;

constexpr unsigned k_block = 256; // threads per block of the 1D kernels
constexpr unsigned k_sms = 132;   // an H100/H200 SXM's SMs: the fixed grids are multiples
constexpr int k_conv_taps = 7;    // conv1d_7_taps's compile-time tap count
constexpr uint64_t k_seed = 0x6d6f64656c706169ull; // "modelpai"

constexpr int k_exit_mismatch = 1;
constexpr int k_exit_usage = 2;
constexpr int k_exit_disagrees = 3;

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws CudaError naming the call and the driver's own name and text for `r`.
void check(CUresult r, const std::string& call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "unknown error";
  const char* text = "no description";
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  throw CudaError(call + " failed: " + name + " (" + text + ")");
}

struct Options {
  std::string ptx = HONE_MODEL_PAIRS_PTX;
  int reps = 1;
  bool small = false;
  bool check = false;
  bool json = false;
};

// The problem sizes; --small shrinks each while keeping what makes its pair differ.
struct Sizes {
  int matmul_n;           // square, a multiple of 16
  int transpose_n;        // square, a multiple of 32
  int copy_n;             // strided copy, a multiple of 32 * 256
  int reduce_n;           // a multiple of 256
  int scan_n;             // a multiple of 256
  unsigned stride_copy_n; // a multiple of 4
  unsigned stride_copy_blocks;
  unsigned chase_table; // words, a power of two
  unsigned chase_steps; // rounds of 64 dependent loads
  unsigned chase_blocks;
  int conv_n;       // a multiple of 256
  int fma_n;        // a multiple of 256
  int saxpy_pair_n; // a multiple of 256
  int saxpy_n;      // the absolute row, a multiple of 256
  int copy_side;    // the absolute row: a copy_side^2 copy, a multiple of 16
};

constexpr Sizes k_default_sizes{
    .matmul_n = 256,
    .transpose_n = 2048,
    .copy_n = 1 << 22,
    .reduce_n = 1 << 22,
    .scan_n = 1 << 20,
    .stride_copy_n = 1u << 24,
    .stride_copy_blocks = k_sms * 8,
    .chase_table = 1u << 20, // 4 MB
    .chase_steps = 2,
    .chase_blocks = k_sms * 8,
    .conv_n = 1 << 20,
    .fma_n = 1 << 20,
    .saxpy_pair_n = 1 << 22,
    .saxpy_n = 1 << 20,
    .copy_side = 4096,
};

// Grids still fill every SM where the pair depends on it: the grid-stride copy still loops (8
// iterations per thread), and the chase grid still needs three waves at the natural occupancy.
constexpr Sizes k_small_sizes{
    .matmul_n = 64,
    .transpose_n = 256,
    .copy_n = 1 << 16,
    .reduce_n = 1 << 16,
    .scan_n = 1 << 14,
    .stride_copy_n = 1u << 18,
    .stride_copy_blocks = k_sms,
    .chase_table = 1u << 20, // as large as the default: L2, not L1
    .chase_steps = 1,
    .chase_blocks = k_sms * 8,
    .conv_n = 1 << 16,
    .fma_n = 1 << 16,
    .saxpy_pair_n = 1 << 16,
    .saxpy_n = 1 << 16,
    .copy_side = 512,
};

// A fixed-seed generator (splitmix64), so every run fills the inputs alike.
class Rng {
public:
  explicit Rng(uint64_t seed) : m_state(seed) {}
  uint64_t next() {
    uint64_t z = (m_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi), 24 bits of it.
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * float(next() >> 40) * (1.f / float(1u << 24));
  }
  std::vector<float> floats(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto& x : v) x = uniform(lo, hi);
    return v;
  }

private:
  uint64_t m_state;
};

// A device array of n T, freed with it.
template <typename T> class DeviceArray {
public:
  explicit DeviceArray(size_t n) : m_n(n) {
    check(cuMemAlloc(&m_ptr, bytes()), "cuMemAlloc(" + std::to_string(bytes()) + " bytes)");
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    check(cuMemcpyHtoD(m_ptr, host.data(), bytes()), "cuMemcpyHtoD");
  }
  ~DeviceArray() {
    if (m_ptr) cuMemFree(m_ptr);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  size_t bytes() const { return m_n * sizeof(T); }
  // Sets every byte, so that an element a kernel fails to write differs between A and B.
  void fill_bytes(unsigned char value) { check(cuMemsetD8(m_ptr, value, bytes()), "cuMemsetD8"); }
  std::vector<T> read() const {
    std::vector<T> host(m_n);
    check(cuMemcpyDtoH(host.data(), m_ptr, bytes()), "cuMemcpyDtoH");
    return host;
  }
  // The address of the device pointer: a kernel parameter.
  CUdeviceptr* arg() { return &m_ptr; }

private:
  CUdeviceptr m_ptr = 0;
  size_t m_n;
};

// An output pair: A's buffer starts as zero bytes, B's as 0xff bytes.
template <typename T> struct Outputs {
  explicit Outputs(size_t n) : a(n), b(n) {
    a.fill_bytes(0x00);
    b.fill_bytes(0xff);
  }
  DeviceArray<T> a;
  DeviceArray<T> b;
};

std::string show(float v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.9g", v);
  return s;
}
std::string show(int v) {
  return std::to_string(v);
}
std::string show(unsigned v) {
  return std::to_string(v);
}

// The first element where A and B differ, if any (floats compare with ==, so 0 equals -0).
template <typename T>
std::optional<std::string> first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i]))
      return "element " + std::to_string(i) + ": A " + show(a[i]) + ", B " + show(b[i]);
  return std::nullopt;
}

// The first element where A and B differ by more than `tolerance` relative to the larger.
std::optional<std::string> first_relative_difference(const std::vector<float>& a,
                                                     const std::vector<float>& b,
                                                     double tolerance) {
  for (size_t i = 0; i < a.size(); ++i) {
    double scale = std::max({std::fabs(double(a[i])), std::fabs(double(b[i])), 1e-30});
    if (!(std::fabs(double(a[i]) - double(b[i])) <= tolerance * scale))
      return "element " + std::to_string(i) + ": A " + show(a[i]) + ", B " + show(b[i]) +
             " (beyond a relative " + show(float(tolerance)) + ")";
  }
  return std::nullopt;
}

template <typename T> std::optional<std::string> compare_exact(const Outputs<T>& out) {
  return first_difference(out.a.read(), out.b.read());
}

struct Dim {
  unsigned x = 1;
  unsigned y = 1;
};

Dim grid_1d(size_t threads) {
  return {unsigned((threads + k_block - 1) / k_block), 1};
}

struct Kernel {
  std::string name;
  CUfunction function = nullptr;
};

// The module of model_pairs.cu's PTX in the current context.
class Module {
public:
  explicit Module(const std::string& ptx) {
    char log[8192] = {};
    CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log, reinterpret_cast<void*>(uintptr_t(sizeof log))};
    CUresult r = cuModuleLoadDataEx(&m_module, ptx.c_str(), 2, keys, values);
    if (r != CUDA_SUCCESS && log[0]) std::fprintf(stderr, "JIT log:\n%s\n", log);
    check(r, "cuModuleLoadDataEx(the PTX)");
  }
  ~Module() {
    if (m_module) cuModuleUnload(m_module);
  }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  Kernel kernel(const std::string& name) const {
    Kernel k{name, nullptr};
    check(cuModuleGetFunction(&k.function, m_module, name.c_str()),
          "cuModuleGetFunction(" + name + ")");
    return k;
  }

private:
  CUmodule m_module = nullptr;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Times launches with a pair of events on the legacy stream.
class Timer {
public:
  explicit Timer(int reps) : m_reps(reps) {
    check(cuEventCreate(&m_start, CU_EVENT_DEFAULT), "cuEventCreate");
    check(cuEventCreate(&m_stop, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  ~Timer() {
    cuEventDestroy(m_start);
    cuEventDestroy(m_stop);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // One warm-up launch, then the median of `reps` launches each between two events, in µs.
  double median_us(const Kernel& k, Dim grid, Dim block, std::vector<void*> args) {
    launch(k, grid, block, args);
    check(cuCtxSynchronize(), "cuCtxSynchronize after the warm-up launch of " + k.name);
    std::vector<double> us;
    for (int i = 0; i < m_reps; ++i) {
      check(cuEventRecord(m_start, nullptr), "cuEventRecord");
      launch(k, grid, block, args);
      check(cuEventRecord(m_stop, nullptr), "cuEventRecord");
      check(cuEventSynchronize(m_stop), "cuEventSynchronize after " + k.name);
      float ms = 0;
      check(cuEventElapsedTime(&ms, m_start, m_stop), "cuEventElapsedTime");
      us.push_back(double(ms) * 1000);
    }
    return median(us);
  }

private:
  static void launch(const Kernel& k, Dim grid, Dim block, std::vector<void*>& args) {
    check(cuLaunchKernel(k.function, grid.x, grid.y, 1, block.x, block.y, 1, 0, nullptr,
                         args.data(), nullptr),
          "cuLaunchKernel(" + k.name + ")");
  }

  int m_reps;
  CUevent m_start = nullptr;
  CUevent m_stop = nullptr;
};

enum class Verdict { b_faster, same, a_faster };

const char* verdict_name(Verdict v) {
  switch (v) {
  case Verdict::b_faster:
    return "B faster";
  case Verdict::same:
    return "same";
  case Verdict::a_faster:
    return "A faster";
  }
  return "?";
}

Verdict verdict_of(double ratio) {
  if (ratio >= k_b_faster_ratio) return Verdict::b_faster;
  if (ratio <= k_a_faster_ratio) return Verdict::a_faster;
  return Verdict::same;
}

struct PairResult {
  std::string pair;
  std::string a_kernel;
  std::string b_kernel;
  Verdict gpu = Verdict::b_faster;
  double a_us = 0;
  double b_us = 0;
  std::optional<std::string> mismatch; // what differs between A's and B's outputs

  double ratio() const { return b_us > 0 ? a_us / b_us : 0; }
  Verdict measured() const { return verdict_of(ratio()); }
  bool agrees() const { return measured() == gpu; }
};

struct AbsoluteResult {
  std::string name;
  double bytes = 0;
  double us = 0;
  double bound_us() const { return bytes / k_h200_bytes_per_second * 1e6; }
  double ratio() const { return us / bound_us(); }
};

// What every pair function gets.
struct Context {
  const Module& module;
  Timer& timer;
  const Sizes& sizes;
  Rng& rng;
};

// Times A then B and fills in the result's times.
struct PairTimer {
  Context& cx;
  PairResult result;

  PairTimer(Context& cx, std::string pair, std::string a, std::string b, Verdict gpu)
      : cx(cx), result{std::move(pair), std::move(a), std::move(b), gpu, 0, 0, std::nullopt} {}
  void time_a(Dim grid, Dim block, std::vector<void*> args) {
    result.a_us =
        cx.timer.median_us(cx.module.kernel(result.a_kernel), grid, block, std::move(args));
  }
  void time_b(Dim grid, Dim block, std::vector<void*> args) {
    result.b_us =
        cx.timer.median_us(cx.module.kernel(result.b_kernel), grid, block, std::move(args));
  }
};

PairResult matmul_pair(Context& cx) {
  PairTimer t(cx, "matmul", "matmul_naive", "matmul_tiled", Verdict::b_faster);
  int n = cx.sizes.matmul_n;
  size_t elements = static_cast<size_t>(n) * n;
  DeviceArray<float> a(cx.rng.floats(elements, -1, 1));
  DeviceArray<float> b(cx.rng.floats(elements, -1, 1));
  Outputs<float> c(elements);
  Dim grid{unsigned(n / 16), unsigned(n / 16)};
  Dim block{16, 16};
  t.time_a(grid, block, {a.arg(), b.arg(), c.a.arg(), &n});
  t.time_b(grid, block, {a.arg(), b.arg(), c.b.arg(), &n});
  t.result.mismatch = compare_exact(c);
  return t.result;
}

PairResult transpose_pair(Context& cx) {
  PairTimer t(cx, "transpose", "transpose_naive", "transpose_tiled", Verdict::b_faster);
  int n = cx.sizes.transpose_n;
  size_t elements = static_cast<size_t>(n) * n;
  DeviceArray<float> in(cx.rng.floats(elements, -1, 1));
  Outputs<float> out(elements);
  Dim grid{unsigned(n / 32), unsigned(n / 32)};
  Dim block{32, 8};
  t.time_a(grid, block, {in.arg(), out.a.arg(), &n});
  t.time_b(grid, block, {in.arg(), out.b.arg(), &n});
  t.result.mismatch = compare_exact(out);
  return t.result;
}

PairResult strided_copy_pair(Context& cx) {
  PairTimer t(cx, "strided_copy", "copy_strided", "copy_coalesced", Verdict::b_faster);
  int n = cx.sizes.copy_n;
  size_t elements = static_cast<size_t>(n);
  std::vector<float> data = cx.rng.floats(elements, -1, 1);
  // The same data in the order copy_strided reads it.
  std::vector<float> in_read_order(data.size());
  for (int i = 0; i < n; ++i) in_read_order[size_t(i)] = data[size_t((i % 32) * (n / 32) + i / 32)];
  DeviceArray<float> in(data);
  DeviceArray<float> in_ordered(in_read_order);
  Outputs<float> out(elements);
  t.time_a(grid_1d(elements), {k_block}, {in.arg(), out.a.arg(), &n});
  t.time_b(grid_1d(elements), {k_block}, {in_ordered.arg(), out.b.arg(), &n});
  t.result.mismatch = compare_exact(out);
  return t.result;
}

PairResult reduction_pair(Context& cx) {
  PairTimer t(cx, "reduction", "reduce_tree", "reduce_shuffle", Verdict::b_faster);
  int n = cx.sizes.reduce_n;
  size_t elements = static_cast<size_t>(n);
  DeviceArray<float> in(cx.rng.floats(elements, 0, 1));
  Outputs<float> partial(elements / k_block);
  t.time_a(grid_1d(elements), {k_block}, {in.arg(), partial.a.arg()});
  t.time_b(grid_1d(elements), {k_block}, {in.arg(), partial.b.arg()});
  t.result.mismatch =
      first_relative_difference(partial.a.read(), partial.b.read(), k_reduction_tolerance);
  return t.result;
}

PairResult scan_pair(Context& cx) {
  PairTimer t(cx, "scan", "scan_blelloch", "scan_shuffle", Verdict::b_faster);
  int n = cx.sizes.scan_n;
  size_t elements = static_cast<size_t>(n);
  std::vector<int> values(elements);
  for (auto& v : values) v = int(cx.rng.next() % 100);
  DeviceArray<int> in(values);
  Outputs<int> out(elements);
  t.time_a(grid_1d(elements), {k_block}, {in.arg(), out.a.arg()});
  t.time_b(grid_1d(elements), {k_block}, {in.arg(), out.b.arg()});
  t.result.mismatch = compare_exact(out);
  return t.result;
}

PairResult vector_load_pair(Context& cx) {
  PairTimer t(cx, "vector_loads", "copy_grid_stride", "copy_grid_stride_float4", Verdict::b_faster);
  unsigned n = cx.sizes.stride_copy_n;
  unsigned n4 = n / 4;
  DeviceArray<float> in(cx.rng.floats(n, -1, 1));
  Outputs<float> out(n);
  Dim grid{cx.sizes.stride_copy_blocks, 1};
  t.time_a(grid, {k_block}, {in.arg(), out.a.arg(), &n});
  t.time_b(grid, {k_block}, {in.arg(), out.b.arg(), &n4});
  t.result.mismatch = compare_exact(out);
  return t.result;
}

PairResult occupancy_pair(Context& cx) {
  PairTimer t(cx, "occupancy", "chase_natural_regs", "chase_32_regs", Verdict::b_faster);
  std::vector<unsigned> words(cx.sizes.chase_table);
  for (auto& w : words) w = unsigned(cx.rng.next());
  DeviceArray<unsigned> table(words);
  unsigned mask = cx.sizes.chase_table - 1;
  unsigned steps = cx.sizes.chase_steps;
  Dim grid{cx.sizes.chase_blocks, 1};
  Outputs<unsigned> out(size_t(grid.x) * k_block);
  t.time_a(grid, {k_block}, {table.arg(), &mask, &steps, out.a.arg()});
  t.time_b(grid, {k_block}, {table.arg(), &mask, &steps, out.b.arg()});
  t.result.mismatch = compare_exact(out);
  return t.result;
}

PairResult conv1d_pair(Context& cx) {
  PairTimer t(cx, "conv1d_unroll", "conv1d_runtime_taps", "conv1d_7_taps", Verdict::b_faster);
  int n = cx.sizes.conv_n;
  size_t elements = static_cast<size_t>(n);
  int taps = k_conv_taps;
  DeviceArray<float> x(cx.rng.floats(elements + taps - 1, -1, 1));
  DeviceArray<float> w(cx.rng.floats(size_t(taps), -1, 1));
  Outputs<float> y(elements);
  t.time_a(grid_1d(elements), {k_block}, {x.arg(), w.arg(), y.a.arg(), &n, &taps});
  t.time_b(grid_1d(elements), {k_block}, {x.arg(), w.arg(), y.b.arg(), &n});
  t.result.mismatch = compare_exact(y);
  return t.result;
}

PairResult ldg_pair(Context& cx) {
  PairTimer t(cx, "ldg_compute", "fma_plain_loads", "fma_ldg", Verdict::same);
  int n = cx.sizes.fma_n;
  size_t elements = static_cast<size_t>(n);
  DeviceArray<float> x(cx.rng.floats(elements, -1, 1));
  Outputs<float> y(elements);
  t.time_a(grid_1d(elements), {k_block}, {x.arg(), y.a.arg(), &n});
  t.time_b(grid_1d(elements), {k_block}, {x.arg(), y.b.arg(), &n});
  t.result.mismatch = compare_exact(y);
  return t.result;
}

PairResult extra_fma_pair(Context& cx) {
  PairTimer t(cx, "fma_memory", "saxpy", "saxpy_extra_fma", Verdict::same);
  int n = cx.sizes.saxpy_pair_n;
  size_t elements = static_cast<size_t>(n);
  float a = 1.5f;
  float zero = 0.f;
  DeviceArray<float> x(cx.rng.floats(elements, -1, 1)); // |x| < 1 keeps the extra FMAs finite
  DeviceArray<float> y(cx.rng.floats(elements, -1, 1));
  Outputs<float> out(elements);
  t.time_a(grid_1d(elements), {k_block}, {&n, &a, x.arg(), y.arg(), out.a.arg()});
  t.time_b(grid_1d(elements), {k_block}, {&n, &a, &zero, x.arg(), y.arg(), out.b.arg()});
  t.result.mismatch = compare_exact(out);
  return t.result;
}

// The bits of a small integer as an IEEE half (exact for |v| <= 2048).
uint16_t half_of(int v) {
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  unsigned a = unsigned(v < 0 ? -v : v);
  int e = 31 - __builtin_clz(a); // a = 1.m * 2^e
  return uint16_t(sign | uint16_t((e + 15) << 10) | uint16_t(((a << (10 - e)) & 0x3ff)));
}

PairResult gemm_tile_pair(Context& cx) {
  PairTimer t(cx, "gemm_tile", "gemm_tile_fma", "gemm_tile_mma", Verdict::b_faster);
  int n = cx.sizes.matmul_n;
  size_t elements = static_cast<size_t>(n) * n;
  std::vector<uint16_t> a(elements), b(elements);
  for (auto& v : a) v = half_of(int(cx.rng.next() % 9) - 4);
  for (auto& v : b) v = half_of(int(cx.rng.next() % 9) - 4);
  DeviceArray<uint16_t> da(a), db(b);
  Outputs<float> c(elements);
  Dim grid{unsigned(n / 16), unsigned(n / 16)};
  Dim block{32};
  t.time_a(grid, block, {da.arg(), db.arg(), c.a.arg(), &n});
  t.time_b(grid, block, {da.arg(), db.arg(), c.b.arg(), &n});
  t.result.mismatch = compare_exact(c);
  return t.result;
}

AbsoluteResult saxpy_absolute(Context& cx) {
  int n = cx.sizes.saxpy_n;
  size_t elements = static_cast<size_t>(n);
  float a = 0.5f;
  DeviceArray<float> x(cx.rng.floats(elements, -1, 1));
  DeviceArray<float> y(cx.rng.floats(elements, -1, 1));
  AbsoluteResult r;
  r.name = "saxpy y = a*x + y, n = " + std::to_string(n);
  r.bytes = 3.0 * sizeof(float) * n; // read x and y, write y
  r.us = cx.timer.median_us(cx.module.kernel("saxpy"), grid_1d(elements), {k_block},
                            {&n, &a, x.arg(), y.arg(), y.arg()});
  return r;
}

AbsoluteResult copy_absolute(Context& cx) {
  int side = cx.sizes.copy_side;
  int n = side * side;
  size_t elements = static_cast<size_t>(n);
  DeviceArray<float> in(cx.rng.floats(elements, -1, 1));
  DeviceArray<float> out(elements);
  AbsoluteResult r;
  r.name = "copy " + std::to_string(side) + " x " + std::to_string(side) + " floats";
  r.bytes = 2.0 * sizeof(float) * n; // read and write
  r.us = cx.timer.median_us(cx.module.kernel("copy_coalesced"), grid_1d(elements), {k_block},
                            {in.arg(), out.arg(), &n});
  return r;
}

void print_usage(FILE* to, const char* argv0) {
  std::fprintf(to,
               "usage: %s [--ptx FILE] [--reps N] [--small] [--check] [--json]\n"
               "  Times kernel pairs (A baseline, B optimized) whose order on a Hopper GPU is\n"
               "  well known, with CUDA events, on whatever libcuda.so.1 the loader finds.\n"
               "  --ptx FILE  the kernels' PTX (default %s)\n"
               "  --reps N    timed launches per kernel after one warm-up, median reported\n"
               "              (default 1: modeled times do not vary; on a GPU use e.g. 20)\n"
               "  --small     every size shrunk, for a quick test\n"
               "  --check     exit 3 when a pair's measured direction is not the GPU's\n"
               "  --json      also print the results as one JSON object, on the last line\n",
               argv0, HONE_MODEL_PAIRS_PTX);
}

// Parses argv into `opt`; returns an exit status when the program should stop (help, usage).
std::optional<int> parse(int argc, char** argv, Options& opt) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout, argv[0]);
      return 0;
    } else if (arg == "--ptx" && i + 1 < argc) {
      opt.ptx = argv[++i];
    } else if (arg == "--reps" && i + 1 < argc) {
      char* end = nullptr;
      long reps = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || reps < 1 || reps > 100000) {
        std::fprintf(stderr, "%s: --reps wants a whole number from 1 to 100000, not '%s'\n",
                     argv[0], argv[i]);
        return k_exit_usage;
      }
      opt.reps = int(reps);
    } else if (arg == "--small") {
      opt.small = true;
    } else if (arg == "--check") {
      opt.check = true;
    } else if (arg == "--json") {
      opt.json = true;
    } else {
      std::fprintf(stderr, "%s: unknown or incomplete option '%s'\n", argv[0], arg.c_str());
      print_usage(stderr, argv[0]);
      return k_exit_usage;
    }
  }
  return std::nullopt;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return std::nullopt;
  return text.str();
}

constexpr const char* k_row_format = "%-14s %-20s %-23s %10s %10s %7s  %-8s  %-8s  %s\n";

void print_pair_header() {
  // "µs" is one column wide but two bytes: the format's widths count bytes.
  std::printf("%-14s %-20s %-23s %11s %11s %7s  %-8s  %-8s  %s\n", "pair", "A kernel", "B kernel",
              "A µs", "B µs", "A/B", "GPU", "measured", "agree");
}

void print_pair(const PairResult& r) {
  char a_us[32], b_us[32], ratio[32];
  std::snprintf(a_us, sizeof a_us, "%.2f", r.a_us);
  std::snprintf(b_us, sizeof b_us, "%.2f", r.b_us);
  std::snprintf(ratio, sizeof ratio, "%.3f", r.ratio());
  std::printf(k_row_format, r.pair.c_str(), r.a_kernel.c_str(), r.b_kernel.c_str(), a_us, b_us,
              ratio, verdict_name(r.gpu), verdict_name(r.measured()),
              r.mismatch   ? "OUTPUTS DIFFER"
              : r.agrees() ? "yes"
                           : "no");
  std::fflush(stdout);
}

void print_absolute(const std::vector<AbsoluteResult>& rows) {
  std::printf("\n%-38s %10s %11s %17s %9s\n", "absolute", "MB moved", "µs", "µs at 4.8 TB/s",
              "ratio");
  for (const auto& r : rows)
    std::printf("%-38s %10.1f %10.2f %16.2f %9.2f\n", r.name.c_str(), r.bytes / 1e6, r.us,
                r.bound_us(), r.ratio());
}

nlohmann::json to_json(const std::string& device, const Options& opt,
                       const std::vector<PairResult>& pairs,
                       const std::vector<AbsoluteResult>& absolute) {
  nlohmann::json j;
  j["device"] = device;
  j["reps"] = opt.reps;
  j["small"] = opt.small;
  j["thresholds"] = {{"b_faster_at_or_above", k_b_faster_ratio},
                     {"a_faster_at_or_below", k_a_faster_ratio}};
  for (const auto& p : pairs) {
    j["pairs"].push_back({{"pair", p.pair},
                          {"a_kernel", p.a_kernel},
                          {"b_kernel", p.b_kernel},
                          {"a_us", p.a_us},
                          {"b_us", p.b_us},
                          {"ratio", p.ratio()},
                          {"gpu", verdict_name(p.gpu)},
                          {"measured", verdict_name(p.measured())},
                          {"agree", p.agrees()},
                          {"outputs_match", !p.mismatch.has_value()}});
  }
  for (const auto& r : absolute) {
    j["absolute"].push_back({{"name", r.name},
                             {"bytes", r.bytes},
                             {"us", r.us},
                             {"us_at_4_8_tb_per_s", r.bound_us()},
                             {"ratio", r.ratio()}});
  }
  return j;
}

int run(const Options& opt, const std::string& ptx) {
  check(cuInit(0), "cuInit");
  CUdevice device = 0;
  check(cuDeviceGet(&device, 0), "cuDeviceGet(0)");
  char name[256] = {};
  check(cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
  std::printf("device 0: %s\n", name);
  std::printf("ptx %s, %d timed launch%s per kernel after one warm-up, %s sizes\n\n",
              opt.ptx.c_str(), opt.reps, opt.reps == 1 ? "" : "es",
              opt.small ? "small" : "default");
  std::fflush(stdout);

  CUcontext ctx = nullptr;
  check(cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

  std::vector<PairResult> pairs;
  std::vector<AbsoluteResult> absolute;
  {
    Module module(ptx);
    Timer timer(opt.reps);
    Rng rng(k_seed);
    Context cx{module, timer, opt.small ? k_small_sizes : k_default_sizes, rng};

    print_pair_header();
    for (auto pair_fn : {matmul_pair, transpose_pair, strided_copy_pair, reduction_pair, scan_pair,
                         vector_load_pair, occupancy_pair, conv1d_pair, ldg_pair, extra_fma_pair,
                         gemm_tile_pair}) {
      pairs.push_back(pair_fn(cx));
      const PairResult& r = pairs.back();
      print_pair(r);
      if (r.mismatch)
        std::fprintf(stderr, "%s: %s and %s disagree at %s\n", r.pair.c_str(), r.a_kernel.c_str(),
                     r.b_kernel.c_str(), r.mismatch->c_str());
    }
    absolute.push_back(saxpy_absolute(cx));
    absolute.push_back(copy_absolute(cx));
  }
  cuDevicePrimaryCtxRelease(device);

  print_absolute(absolute);
  std::printf("\nA/B >= %.2f reads \"B faster\", <= %.2f \"A faster\", \"same\" between; "
              "GPU: what an H100/H200 shows.\n",
              k_b_faster_ratio, k_a_faster_ratio);

  bool mismatch = std::any_of(pairs.begin(), pairs.end(), [](auto& p) { return p.mismatch; });
  int disagreeing =
      int(std::count_if(pairs.begin(), pairs.end(), [](auto& p) { return !p.agrees(); }));
  std::printf("%zu pairs: %zu agree with a GPU, %d do not%s\n", pairs.size(),
              pairs.size() - size_t(disagreeing), disagreeing,
              mismatch ? "; OUTPUTS DIFFER in at least one pair" : "");
  if (opt.json) std::printf("%s\n", to_json(name, opt, pairs, absolute).dump().c_str());
  if (mismatch) return k_exit_mismatch;
  if (opt.check && disagreeing > 0) return k_exit_disagrees;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  Options opt;
  if (auto status = parse(argc, argv, opt)) return *status;
  auto ptx = read_file(opt.ptx);
  if (!ptx) {
    std::fprintf(stderr, "%s: cannot read the PTX file %s: %s (pass --ptx FILE)\n", argv[0],
                 opt.ptx.c_str(), std::strerror(errno));
    return k_exit_usage;
  }
  try {
    return run(opt, *ptx);
  } catch (const CudaError& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return k_exit_mismatch;
  }
}
