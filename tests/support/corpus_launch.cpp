#include "corpus_launch.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

// Host references must round exactly where the kernels do, so this file is compiled with
// -ffp-contract=off (tests/CMakeLists.txt): a*b+c is never fused behind our back, and every fma of
// a kernel appears here as an explicit std::fma.

namespace hone::test {

std::string cu_error_text(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR_?";
  if (cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) text = "no description";
  return std::string(name) + " (" + std::to_string(int(result)) + ", " + text + ")";
}

namespace {

// ---------------------------------------------------------------------------------------------
// Small numeric helpers

std::string strf(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* format, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, format);
  vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  return buf;
}

uint32_t bits_of(float f) {
  return std::bit_cast<uint32_t>(f);
}
uint64_t bits_of(double d) {
  return std::bit_cast<uint64_t>(d);
}
float float_of(uint32_t u) {
  return std::bit_cast<float>(u);
}

const float k_inf = std::numeric_limits<float>::infinity();
const float k_nan = std::numeric_limits<float>::quiet_NaN();

// Distance to the next float away from zero: the unit in the last place of |x|.
double ulp(float x) {
  float a = std::fabs(x);
  if (std::isinf(a) || std::isnan(a)) return std::numeric_limits<double>::infinity();
  return double(std::nextafter(a, k_inf)) - double(a);
}

// SplitMix64: fixed, portable sequence (std:: distributions differ between libraries).
class Rng {
public:
  explicit Rng(uint64_t seed) : m_state(seed) {}
  uint64_t next64() {
    uint64_t z = (m_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t next32() { return uint32_t(next64() >> 32); }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next32() >> 8) * 0x1p-24f; }
  double uniform_d(double lo, double hi) {
    return lo + (hi - lo) * double(next64() >> 11) * 0x1p-53;
  }
  // Uniform integer in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + int64_t(next64() % uint64_t(hi - lo + 1)); }

private:
  uint64_t m_state;
};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Write `specials` over `v` at spread-out positions (every value lands when v is long enough).
template <class T> void scatter_specials(std::vector<T>& v, const std::vector<T>& specials) {
  if (v.empty()) return;
  for (size_t k = 0; k < specials.size(); ++k)
    v[(k * 7919 + k / v.size()) % v.size()] = specials[k];
}

// -- binary16 and bfloat16 ---------------------------------------------------------------------
// Storage types, so the harness can tell them from uint16_t when comparing and printing.
struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};
static_assert(sizeof(Half) == 2 && sizeof(Bf16) == 2);

// Round the real number hi + lo to a binary format with `mant` fraction bits and `exp_bits`
// exponent bits, to nearest even. hi is that sum rounded to double and |lo| <= ulp(hi)/2 (a
// TwoSum pair), which keeps the rounding single even when the exact sum does not fit a double:
// only a hi that sits exactly on a midpoint of the narrow format needs lo's sign.
uint16_t round_narrow(double hi, double lo, int mant, int exp_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const uint32_t inf = ((1u << exp_bits) - 1u) << mant;
  if (std::isnan(hi)) return 0x7fffu; // the canonical NaN of both formats
  const uint32_t sign = std::signbit(hi) ? 0x8000u : 0u;
  double a = std::fabs(hi);
  if (std::isinf(a)) return uint16_t(sign | inf);
  if (a == 0.0) return uint16_t(sign);
  int e = 0;
  std::frexp(a, &e);
  const int lead = e - 1;    // a in [2^lead, 2^(lead+1))
  const int emin = 1 - bias; // exponent of the smallest normal
  const int quantum = std::max(lead, emin) - mant;
  const double s = std::ldexp(a, -quantum); // exact: a in units of the target's ulp
  double r = std::nearbyint(s);             // ties to even (default rounding mode)
  if (s - std::floor(s) == 0.5 && lo != 0.0) {
    const bool larger = (lo > 0) == (hi > 0); // the exact value lies beyond the midpoint
    r = larger ? std::floor(s) + 1.0 : std::floor(s);
  }
  uint32_t ri = uint32_t(r);
  uint32_t biased;
  uint32_t fraction;
  if (lead < emin) { // subnormal range; rounding may carry into the smallest normal
    biased = ri >> mant;
    fraction = ri & ((1u << mant) - 1u);
  } else {
    biased = uint32_t(lead + bias);
    if (ri >> (mant + 1)) { // rounded up to the next power of two
      ++biased;
      ri >>= 1;
    }
    fraction = ri - (1u << mant);
  }
  if (biased >= (1u << exp_bits) - 1u) return uint16_t(sign | inf);
  return uint16_t(sign | (biased << mant) | fraction);
}

double narrow_to_double(uint16_t bits, int mant, int exp_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const uint32_t e = (bits >> mant) & ((1u << exp_bits) - 1u);
  const uint32_t f = bits & ((1u << mant) - 1u);
  const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  if (e == (1u << exp_bits) - 1u) {
    return f ? std::numeric_limits<double>::quiet_NaN()
             : sign * std::numeric_limits<double>::infinity();
  }
  if (e == 0) return sign * std::ldexp(double(f), 1 - bias - mant);
  return sign * std::ldexp(double(f | (1u << mant)), int(e) - bias - mant);
}

// Exact sum as an unevaluated pair (Knuth's TwoSum); lo is meaningless when hi is not finite.
std::pair<double, double> two_sum(double a, double b) {
  double s = a + b;
  if (!std::isfinite(s)) return {s, 0.0};
  double bb = s - a;
  double err = (a - (s - bb)) + (b - bb);
  return {s, err};
}

double h2d(Half h) {
  return narrow_to_double(h.bits, 10, 5);
}
double b2d(Bf16 b) {
  return narrow_to_double(b.bits, 7, 8);
}
Half half_rn(double hi, double lo = 0.0) {
  return Half{round_narrow(hi, lo, 10, 5)};
}
Bf16 bf16_rn(double hi, double lo = 0.0) {
  return Bf16{round_narrow(hi, lo, 7, 8)};
}
// The spacing of binary16 values at |v| (2^-24 in the subnormal range).
double half_ulp(double v) {
  if (v == 0.0) return 0x1p-24;
  int e = 0;
  std::frexp(std::fabs(v), &e);
  return std::ldexp(1.0, std::max(e - 1, -14) - 10);
}
bool is_nan(Half h) {
  return (h.bits & 0x7c00u) == 0x7c00u && (h.bits & 0x3ffu);
}
bool is_nan(Bf16 b) {
  return (b.bits & 0x7f80u) == 0x7f80u && (b.bits & 0x7fu);
}

// fma.rn.f16: the product of two binary16 values is exact in double; the sum may not be.
Half half_fma(Half a, Half b, Half c) {
  auto [hi, lo] = two_sum(h2d(a) * h2d(b), h2d(c));
  return half_rn(hi, lo);
}
Half half_mul(Half a, Half b) {
  return half_rn(h2d(a) * h2d(b));
}
Half half_add(Half a, Half b) {
  auto [hi, lo] = two_sum(h2d(a), h2d(b));
  return half_rn(hi, lo);
}
Bf16 bf16_mul(Bf16 a, Bf16 b) {
  return bf16_rn(b2d(a) * b2d(b));
} // 16-bit product: exact
Bf16 bf16_add(Bf16 a, Bf16 b) {
  auto [hi, lo] = two_sum(b2d(a), b2d(b));
  return bf16_rn(hi, lo);
}

// ---------------------------------------------------------------------------------------------
// Comparing and printing values

template <class T> bool same_value(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return bits_of(a) == bits_of(b) || (std::isnan(a) && std::isnan(b));
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, Bf16>) {
    return a.bits == b.bits || (is_nan(a) && is_nan(b));
  } else {
    return a == b;
  }
}

template <class T> std::string show(const T& v) {
  if constexpr (std::is_same_v<T, float>) {
    return strf("%.9g (0x%08x)", double(v), bits_of(v));
  } else if constexpr (std::is_same_v<T, double>) {
    return strf("%.17g (0x%016llx)", v, (unsigned long long)bits_of(v));
  } else if constexpr (std::is_same_v<T, Half>) {
    return strf("%.6g (0x%04x)", h2d(v), v.bits);
  } else if constexpr (std::is_same_v<T, Bf16>) {
    return strf("%.4g (0x%04x)", b2d(v), v.bits);
  } else if constexpr (std::is_signed_v<T>) {
    return strf("%lld", (long long)v);
  } else {
    return strf("%llu (0x%llx)", (unsigned long long)v, (unsigned long long)v);
  }
}

struct Dim {
  unsigned x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

unsigned ceil_div(uint64_t a, uint64_t b) {
  return unsigned((a + b - 1) / b);
}

// Append `v` to a packed parameter buffer at its natural alignment.
template <class T> void pack_param(std::vector<uint8_t>& buf, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  size_t at = (buf.size() + alignof(T) - 1) / alignof(T) * alignof(T);
  buf.resize(at + sizeof(T));
  std::memcpy(buf.data() + at, &v, sizeof(T));
}

class DriverFailure : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

void check_cu(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) throw DriverFailure(std::string(call) + " failed: " + cu_error_text(r));
}

// Read-only inputs of the current launches, by device address: name and the bytes uploaded.
struct WatchedInput {
  std::string name;
  std::vector<uint8_t> bytes;
};
using InputWatch = std::map<CUdeviceptr, WatchedInput>;

// Where the run in progress on this thread records the digests of what it reads back.
thread_local std::vector<uint64_t>* t_readbacks = nullptr;

// A device allocation of `n` elements of T (at least one, since cuMemAlloc rejects 0 bytes).
template <class T> class DeviceArray {
public:
  explicit DeviceArray(size_t n) : m_n(n) {
    check_cu(cuMemAlloc(&m_ptr, std::max<size_t>(n, 1) * sizeof(T)), "cuMemAlloc");
  }
  ~DeviceArray() {
    if (m_watch) m_watch->erase(m_ptr);
    if (m_ptr) cuMemFree(m_ptr);
  }
  // Have every launch check that this buffer still holds `host`, until it is freed.
  void watch(InputWatch& watch, std::string name, const std::vector<T>& host) {
    const auto* p = reinterpret_cast<const uint8_t*>(host.data());
    watch[m_ptr] =
        WatchedInput{std::move(name), std::vector<uint8_t>(p, p + host.size() * sizeof(T))};
    m_watch = &watch;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  CUdeviceptr ptr() const { return m_ptr; }
  size_t size() const { return m_n; }
  void upload(const std::vector<T>& host) {
    if (host.size() != m_n) throw DriverFailure("harness bug: upload size mismatch");
    if (m_n) check_cu(cuMemcpyHtoD(m_ptr, host.data(), m_n * sizeof(T)), "cuMemcpyHtoD");
  }
  std::vector<T> download() const {
    std::vector<T> host(m_n);
    if (m_n) check_cu(cuMemcpyDtoH(host.data(), m_ptr, m_n * sizeof(T)), "cuMemcpyDtoH");
    if (t_readbacks) t_readbacks->push_back(XXH3_64bits(host.data(), m_n * sizeof(T)));
    return host;
  }

private:
  CUdeviceptr m_ptr = 0;
  size_t m_n;
  InputWatch* m_watch = nullptr;
};

} // namespace

// What a launcher works with: the kernel, its options, device buffers, launches and checks.
class Harness {
public:
  Harness(const CorpusKernel& kernel, CUfunction function, const CorpusRunOptions& options,
          CorpusRunResult& result)
      : m_kernel(kernel), m_function(function), m_options(options), m_result(result) {}

  bool bench() const { return m_options.shapes == ShapeSet::bench; }

  // The shapes to run: all of them, or the last (largest) one for the benchmark.
  template <class S> std::vector<S> pick(std::vector<S> shapes) const {
    if (bench() && !shapes.empty()) return {shapes.back()};
    return shapes;
  }
  // Element counts grow by bench_scale in the benchmark; 2D sides by its square root.
  int scaled(int n) const { return bench() ? int(int64_t(n) * m_options.bench_scale) : n; }
  int scaled_side(int n) const {
    return bench() ? int(std::lround(n * std::sqrt(double(m_options.bench_scale)))) : n;
  }

  // Let the kernel take `bytes` of dynamic shared memory (above the 48 KiB default: an opt-in).
  void allow_dynamic_shared(unsigned bytes) {
    check_cu(
        cuFuncSetAttribute(m_function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes)),
        "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  }

  // Describe the launch shape the next checks belong to.
  void shape(std::string text) { m_shape = std::move(text); }

  // A generator seeded by the kernel's name and `salt`: fixed inputs for a given shape.
  Rng rng(uint64_t salt) const {
    return Rng(fnv1a(m_kernel.entry) ^ (salt * 0x9e3779b97f4a7c15ull));
  }

  template <class T> std::unique_ptr<DeviceArray<T>> upload(const std::vector<T>& host) {
    auto d = std::make_unique<DeviceArray<T>>(host.size());
    d->upload(host);
    return d;
  }
  template <class T> std::unique_ptr<DeviceArray<T>> filled(size_t n, T value) {
    return upload(std::vector<T>(n, value));
  }
  // A buffer the kernel only reads: every launch checks that it still holds `host` afterwards
  // (a write through a miscomputed address may land in another allocation, not outside all).
  template <class T>
  std::unique_ptr<DeviceArray<T>> input(const char* name, const std::vector<T>& host) {
    auto d = upload(host);
    d->watch(m_inputs, name, host);
    return d;
  }

  // Launch with `args` as the kernel's parameters (each exactly the parameter's type and size)
  // and wait for it. `elements` is what the benchmark counts for this launch.
  template <class... A>
  void launch(Dim grid, Dim block, unsigned shared_bytes, uint64_t elements, const A&... args) {
    // The three ways a program hands over parameters, in turn (the benchmark uses the first):
    // pointers to each argument, one packed buffer through `extra` (each argument at its natural
    // alignment, as the device ABI lays out .param space), and cuLaunchKernelEx.
    const int way = bench() ? 0 : int(m_result.totals.launches % 3);
    static const char* const k_ways[] = {"cuLaunchKernel(kernelParams)", "cuLaunchKernel(extra)",
                                         "cuLaunchKernelEx"};
    void* params[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    std::vector<uint8_t> packed;
    (pack_param(packed, args), ...);
    size_t packed_size = packed.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_size, CU_LAUNCH_PARAM_END};
    const bool timed = !bench() && events();
    auto t0 = std::chrono::steady_clock::now();
    if (timed) check_cu(cuEventRecord(m_start, nullptr), "cuEventRecord");
    CUresult r;
    if (way == 2) {
      CUlaunchConfig config = {};
      config.gridDimX = grid.x;
      config.gridDimY = grid.y;
      config.gridDimZ = grid.z;
      config.blockDimX = block.x;
      config.blockDimY = block.y;
      config.blockDimZ = block.z;
      config.sharedMemBytes = shared_bytes;
      r = cuLaunchKernelEx(&config, m_function, params, nullptr);
    } else {
      r = cuLaunchKernel(m_function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                         shared_bytes, nullptr, way == 0 ? params : nullptr,
                         way == 1 ? extra : nullptr);
    }
    if (r != CUDA_SUCCESS) {
      throw DriverFailure(strf("%s(grid %ux%ux%u, block %ux%ux%u, shared %u) failed: ", k_ways[way],
                               grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes) +
                          cu_error_text(r));
    }
    if (!bench()) m_shape += std::string(" via ") + k_ways[way];
    if (timed) check_cu(cuEventRecord(m_end, nullptr), "cuEventRecord");
    r = cuCtxSynchronize();
    if (r != CUDA_SUCCESS)
      throw DriverFailure("cuCtxSynchronize after the launch failed: " + cu_error_text(r));
    auto t1 = std::chrono::steady_clock::now();
    if (timed) {
      float ms = 0;
      check_cu(cuEventElapsedTime(&ms, m_start, m_end), "cuEventElapsedTime");
      m_result.launch_ms.push_back(ms);
    }
    m_result.totals.launches += 1;
    m_result.totals.threads += grid.count() * block.count();
    m_result.totals.elements += elements;
    m_result.totals.launch_seconds += std::chrono::duration<double>(t1 - t0).count();
    for (const auto& [ptr, watched] : m_inputs) {
      std::vector<uint8_t> now(watched.bytes.size());
      if (!now.empty()) check_cu(cuMemcpyDtoH(now.data(), ptr, now.size()), "cuMemcpyDtoH");
      auto diff = std::mismatch(now.begin(), now.end(), watched.bytes.begin());
      if (diff.first != now.end()) {
        fail(strf("input %s (%zu bytes, read-only) changed by the launch: first at byte %zu",
                  watched.name.c_str(), now.size(), size_t(diff.first - now.begin())));
      }
    }
  }

  // Bit-exact comparison (NaN matches any NaN; every other value, -0 included, must match bits).
  template <class T>
  void expect_exact(const char* what, const std::vector<T>& want, const std::vector<T>& got) {
    if (want.size() != got.size()) {
      fail(strf("%s: %zu values expected, %zu read back", what, want.size(), got.size()));
      return;
    }
    size_t bad = 0;
    std::string first;
    for (size_t i = 0; i < want.size(); ++i) {
      if (same_value(want[i], got[i])) continue;
      if (bad < 3)
        first += strf("\n    %s[%zu]: expected %s, got %s", what, i, show(want[i]).c_str(),
                      show(got[i]).c_str());
      ++bad;
    }
    if (bad)
      fail(strf("%s: %zu of %zu values differ (exact comparison)", what, bad, want.size()) + first);
  }

  // |got - want| <= tol elementwise; NaN must meet NaN and an infinity the same infinity.
  template <class G>
  void expect_near(const char* what, const std::vector<double>& want, const std::vector<G>& got,
                   const std::vector<double>& tol) {
    if (want.size() != got.size() || tol.size() != want.size()) {
      fail(strf("%s: %zu values expected, %zu read back", what, want.size(), got.size()));
      return;
    }
    size_t bad = 0;
    std::string first;
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      double g = double(got[i]);
      double w = want[i];
      bool ok;
      if (std::isnan(w) || std::isnan(g)) {
        ok = std::isnan(w) && std::isnan(g);
      } else if (std::isinf(w) || std::isinf(g)) {
        ok = w == g;
      } else {
        double err = std::fabs(g - w);
        ok = err <= tol[i];
        if (tol[i] > 0) worst = std::max(worst, err / tol[i]);
      }
      if (ok) continue;
      if (bad < 3) {
        first += strf("\n    %s[%zu]: expected %.9g +- %.3g, got %.9g (off by %.3g)", what, i, w,
                      tol[i], g, std::fabs(g - w));
      }
      ++bad;
    }
    m_result.tolerance_used = std::max(m_result.tolerance_used, worst);
    if (bad) fail(strf("%s: %zu of %zu values outside tolerance", what, bad, want.size()) + first);
  }

  void fail(const std::string& line) { m_result.failures.push_back(m_shape + ": " + line); }

  ~Harness() {
    if (m_start) cuEventDestroy(m_start);
    if (m_end) cuEventDestroy(m_end);
  }

private:
  // The events each checked launch is timed with, made on first use.
  bool events() {
    if (!m_start && cuEventCreate(&m_start, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;
    if (!m_end && cuEventCreate(&m_end, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;
    return true;
  }

  const CorpusKernel& m_kernel;
  CUfunction m_function;
  const CorpusRunOptions& m_options;
  CorpusRunResult& m_result;
  std::string m_shape = "(no shape)";
  InputWatch m_inputs;
  CUevent m_start = nullptr, m_end = nullptr;
};

namespace {

Dim grid_for(uint64_t n, unsigned block) {
  return Dim{std::max(1u, ceil_div(n, block))};
}

template <class T> std::vector<T> random_ints(Rng& rng, size_t n, int64_t lo, int64_t hi) {
  std::vector<T> v(n);
  for (auto& x : v) x = T(rng.range(lo, hi));
  return v;
}
template <class T> std::vector<T> random_bits(Rng& rng, size_t n) {
  std::vector<T> v(n);
  for (auto& x : v) x = T(rng.next64());
  return v;
}
std::vector<float> random_floats(Rng& rng, size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}
std::vector<double> random_doubles(Rng& rng, size_t n, double lo, double hi) {
  std::vector<double> v(n);
  for (auto& x : v) x = rng.uniform_d(lo, hi);
  return v;
}

// Edge values for kernels whose float math is exact IEEE arithmetic (any input is defined).
const std::vector<float> k_float_specials = {
    0.0f,  -0.0f, k_inf, -k_inf, k_nan, 1e-40f, -3e-39f, std::numeric_limits<float>::max(),
    -1.0f, 1.0f};

// -- warp and block reductions, the way the corpus writes them --------------------------------

// Lanes that exist in warp `w` of a 1D block of `block` threads.
unsigned lanes_of_warp(unsigned block, unsigned w) {
  return std::min(32u, block - 32u * w);
}

// for (off = 16; off > 0; off >>= 1) { o = __shfl_down_sync(mask, v, off); if (lane + off < nl) v =
// op(v, o); } on the `nl` launched lanes' values; lane 0's result.
template <class T, class Op> T warp_down(std::vector<T> v, Op op) {
  const unsigned nl = unsigned(v.size());
  for (unsigned off = 16; off > 0; off >>= 1) {
    std::vector<T> old = v;
    for (unsigned l = 0; l + off < nl; ++l) v[l] = op(old[l], old[l + off]);
  }
  return v[0];
}

// The same with __shfl_xor_sync and `if ((lane ^ off) < nl)`: lane 0's result.
template <class T, class Op> T warp_xor_lane0(std::vector<T> v, Op op) {
  const unsigned nl = unsigned(v.size());
  v.resize(32);
  for (unsigned off = 16; off > 0; off >>= 1) {
    std::vector<T> old = v;
    for (unsigned l = 0; l < nl; ++l) {
      if ((l ^ off) < nl) v[l] = op(old[l], old[l ^ off]);
    }
  }
  return v[0];
}

// softmax_layernorm.cu's block_allreduce: warp_down per warp, then warp results in warp order.
template <class Op> float block_allreduce(const std::vector<float>& per_thread, Op op) {
  const unsigned block = unsigned(per_thread.size());
  float r = 0;
  for (unsigned w = 0; w * 32 < block; ++w) {
    unsigned nl = lanes_of_warp(block, w);
    float ws = warp_down(
        std::vector<float>(per_thread.begin() + 32 * w, per_thread.begin() + 32 * w + nl), op);
    r = w == 0 ? ws : op(r, ws);
  }
  return r;
}

float add_f(float a, float b) {
  return a + b;
}

// Per-thread grid-stride sums `acc += in[i]` of a 1D launch, thread t of block b at [b][t].
std::vector<std::vector<float>> gridstride_sums(const std::vector<float>& in, unsigned grid,
                                                unsigned block) {
  std::vector<std::vector<float>> acc(grid, std::vector<float>(block, 0.0f));
  const uint64_t stride = uint64_t(grid) * block;
  for (unsigned b = 0; b < grid; ++b) {
    for (unsigned t = 0; t < block; ++t) {
      float a = 0.0f;
      for (uint64_t i = uint64_t(b) * block + t; i < in.size(); i += stride) a += in[i];
      acc[b][t] = a;
    }
  }
  return acc;
}

// reduction.cu's shared-memory tree: `half` starts at the largest power of two below blockDim.x.
template <class T> T smem_tree(std::vector<T> s) {
  const unsigned block = unsigned(s.size());
  unsigned half = 1;
  while (half * 2 < block) half *= 2;
  for (; half > 0; half >>= 1) {
    for (unsigned t = 0; t < half && t + half < block; ++t) s[t] = s[t] + s[t + half];
  }
  return s[0];
}

// reduction.cu's warp_sum_down per warp, then the warp sums in warp order (reduce_sum_shfl_f32,
// reduce_sum_lastblock_f32).
float block_sum_shfl(const std::vector<float>& per_thread) {
  const unsigned block = unsigned(per_thread.size());
  float total = 0.0f;
  for (unsigned w = 0; w * 32 < block; ++w) {
    unsigned nl = lanes_of_warp(block, w);
    total += warp_down(
        std::vector<float>(per_thread.begin() + 32 * w, per_thread.begin() + 32 * w + nl), add_f);
  }
  return total;
}

// ============================================================================================
// elementwise.cu

void run_saxpy(Harness& h) {
  struct S {
    int n;
    unsigned block;
    float a;
  };
  for (S s :
       h.pick<S>({{1, 256, 2.5f}, {256, 256, -0.75f}, {1000, 256, 2.5f}, {5000, 128, 1.25f}})) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d block=%u a=%g", n, s.block, double(s.a)));
    Rng rng = h.rng(uint64_t(n));
    auto x = random_floats(rng, n, -10, 10);
    auto y = random_floats(rng, n, -10, 10);
    scatter_specials(x, k_float_specials);
    scatter_specials(y, {-0.0f, 5e-39f, -k_inf, 1.0f});
    auto dx = h.input("x", x);
    auto dy = h.upload(y);
    h.launch(grid_for(n, s.block), {s.block}, 0, n, n, s.a, dx->ptr(), dy->ptr());
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = std::fma(s.a, x[i], y[i]); // fma.rn.f32 in the PTX
    h.expect_exact("y", want, dy->download());
  }
}

void run_vadd_i32(Harness& h) {
  for (int n0 : h.pick<int>({1, 128, 1000, 5000})) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=128", n));
    Rng rng = h.rng(uint64_t(n));
    auto a = random_ints<int32_t>(rng, n, INT_MIN, INT_MAX);
    auto b = random_ints<int32_t>(rng, n, INT_MIN, INT_MAX);
    scatter_specials(a, {INT_MAX, INT_MIN, -1, 0, INT_MAX});
    scatter_specials(b, {1, -1, INT_MIN, 0, INT_MAX});
    auto da = h.input("a", a);
    auto db = h.input("b", b);
    auto dc = h.filled<int32_t>(n, 0x5a5a5a5a);
    h.launch(grid_for(n, 128), {128}, 0, n, da->ptr(), db->ptr(), dc->ptr(), n);
    std::vector<int32_t> want(n);
    for (int i = 0; i < n; ++i) want[i] = int32_t(uint32_t(a[i]) + uint32_t(b[i]));
    h.expect_exact("c", want, dc->download());
  }
}

void run_daxpy_gridstride(Harness& h) {
  struct S {
    int n;
    unsigned grid, block;
  };
  // Fewer threads than elements (the grid-stride loop runs several times), more threads than
  // elements, and a single thread.
  for (S s : h.pick<S>({{37, 1, 1}, {300, 3, 100}, {5000, 4, 64}, {5000, 32, 256}})) {
    long long n = h.scaled(s.n);
    double a = -1.0 / 3.0;
    h.shape(strf("n=%lld grid=%u block=%u", n, s.grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.grid);
    auto x = random_doubles(rng, n, -1e3, 1e3);
    auto y = random_doubles(rng, n, -1e3, 1e3);
    scatter_specials<double>(x, {0.0, -0.0, 4.9e-324, 1e308, -1.0});
    scatter_specials<double>(y, {-0.0, 1e308, 2.2e-308});
    auto dx = h.input("x", x);
    auto dy = h.upload(y);
    h.launch({s.grid}, {s.block}, 0, uint64_t(n), n, a, dx->ptr(), dy->ptr());
    std::vector<double> want(n);
    for (long long i = 0; i < n; ++i) want[i] = std::fma(a, x[i], y[i]); // fma.rn.f64
    h.expect_exact("y", want, dy->download());
  }
}

void run_scale_bias_f4(Harness& h) {
  // n % 4 == 0 (all vector), n < 4 (all scalar tail), and tails of 1..3 after full vectors.
  for (int n0 : h.pick<int>({1, 3, 4, 7, 1024, 1026, 4097, 6003})) {
    int n = h.scaled(n0);
    float scale = 1.75f, bias = -0.5f;
    unsigned groups = ceil_div(n, 4);
    h.shape(strf("n=%d block=256 (%u float4 groups)", n, groups));
    Rng rng = h.rng(uint64_t(n));
    auto in = random_floats(rng, n, -100, 100);
    scatter_specials(in, k_float_specials);
    auto din = h.input("in", in);
    auto dout = h.filled<float>(n, k_nan);
    h.launch(grid_for(groups, 256), {256}, 0, n, din->ptr(), dout->ptr(), n, scale, bias);
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = std::fma(in[i], scale, bias); // contracted to fma.rn.f32
    h.expect_exact("out", want, dout->download());
  }
}

std::vector<Half> random_halves(Rng& rng, size_t n, float lo, float hi) {
  std::vector<Half> v(n);
  for (auto& x : v) x = half_rn(rng.uniform(lo, hi));
  return v;
}
// 0, -0, smallest and largest subnormal, largest finite, inf, -inf, NaN, 1, -2.
const std::vector<Half> k_half_specials = {{0x0000}, {0x8000}, {0x0001}, {0x03ff}, {0x7bff},
                                           {0x7c00}, {0xfc00}, {0x7e00}, {0x3c00}, {0xc000}};

void run_haxpy_f16(Harness& h) {
  struct S {
    int n;
    float a;
  };
  for (S s : h.pick<S>({{1, 1.5f}, {256, -0.333f}, {1000, 1.5f}, {4099, 7.0f}})) {
    int n = h.scaled(s.n);
    Half a = half_rn(s.a);
    h.shape(strf("n=%d block=256 a=%g", n, h2d(a)));
    Rng rng = h.rng(uint64_t(n));
    auto x = random_halves(rng, n, -8, 8);
    auto y = random_halves(rng, n, -8, 8);
    scatter_specials(x, k_half_specials);
    scatter_specials(y, {{0x8000}, {0x0200}, {0x7bff}, {0x3c00}});
    auto dx = h.input("x", x);
    auto dy = h.upload(y);
    h.launch(grid_for(n, 256), {256}, 0, n, n, a, dx->ptr(), dy->ptr());
    std::vector<Half> want(n);
    for (int i = 0; i < n; ++i) want[i] = half_fma(a, x[i], y[i]); // fma.rn.f16, one rounding
    h.expect_exact("y", want, dy->download());
  }
}

void run_hmul_add_f16x2(Harness& h) {
  for (int n0 : h.pick<int>({1, 256, 1000, 3001})) {
    int n2 = h.scaled(n0);
    h.shape(strf("n2=%d block=256", n2));
    Rng rng = h.rng(uint64_t(n2));
    auto a = random_halves(rng, 2 * size_t(n2), -16, 16);
    auto b = random_halves(rng, 2 * size_t(n2), -16, 16);
    auto c = random_halves(rng, 2 * size_t(n2), -64, 64);
    scatter_specials(a, k_half_specials);
    scatter_specials(b, {{0x0400}, {0x8000}, {0x7bff}, {0x3800}});
    auto da = h.input("a", a);
    auto db = h.input("b", b);
    auto dc = h.input("c", c);
    auto dout = h.filled<Half>(2 * size_t(n2), Half{0x7e00});
    h.launch(grid_for(n2, 256), {256}, 0, 2 * uint64_t(n2), da->ptr(), db->ptr(), dc->ptr(),
             dout->ptr(), n2);
    std::vector<Half> want(2 * size_t(n2));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = half_add(half_mul(a[i], b[i]), c[i]); // two roundings
    h.expect_exact("out", want, dout->download());
  }
}

void run_relu_bf16(Harness& h) {
  struct S {
    int n;
    float scale;
  };
  for (S s : h.pick<S>({{1, 0.7f}, {256, -1.3f}, {1000, 0.7f}, {5000, 3.1f}})) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d block=256 scale=%g", n, double(s.scale)));
    Rng rng = h.rng(uint64_t(n));
    std::vector<Bf16> in(n);
    for (auto& v : in) v = bf16_rn(rng.uniform(-50, 50));
    // 0, -0, NaN (never greater than 0: becomes 0), inf, -inf, largest finite, a subnormal.
    scatter_specials<Bf16>(in,
                           {{0x0000}, {0x8000}, {0x7fc0}, {0x7f80}, {0xff80}, {0x7f7f}, {0x0040}});
    auto din = h.input("in", in);
    auto dout = h.filled<Bf16>(n, Bf16{0x7fc0});
    h.launch(grid_for(n, 256), {256}, 0, n, din->ptr(), dout->ptr(), n, s.scale);
    const Bf16 scale = bf16_rn(s.scale); // __float2bfloat16: cvt.rn.bf16.f32
    std::vector<Bf16> want(n);
    for (int i = 0; i < n; ++i) {
      Bf16 v = bf16_mul(in[i], scale);
      want[i] = (!is_nan(v) && b2d(v) > 0) ? v : Bf16{0x0000};
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_mul_add_bf16x2(Harness& h) {
  for (int n0 : h.pick<int>({1, 256, 1000, 3001})) {
    int n2 = h.scaled(n0);
    h.shape(strf("n2=%d block=256", n2));
    Rng rng = h.rng(uint64_t(n2));
    // Magnitudes in [1/4, 4): a product and the addend are then within 2^6 of each other, so
    // the float sum sm_75's emulation rounds twice through is exact and every architecture gives
    // the correctly rounded bf16 (the kernel's promise; wider ranges would not keep it).
    auto mag = [&] {
      float m = std::ldexp(rng.uniform(1, 2), int(rng.range(-2, 1)));
      return bf16_rn(rng.next32() & 1 ? -m : m);
    };
    const size_t len = 2 * size_t(n2);
    std::vector<Bf16> a(len), b(len), c(len);
    for (size_t i = 0; i < len; ++i) {
      a[i] = mag();
      b[i] = mag();
      c[i] = mag();
      if (i % 97 == 5)
        c[i] = Bf16{uint16_t(bf16_mul(a[i], b[i]).bits ^ 0x8000u)}; // exact cancellation: +0
      if (i % 89 == 7) a[i] = Bf16{0x8000};                         // -0 product
    }
    auto da = h.input("a", a);
    auto db = h.input("b", b);
    auto dc = h.input("c", c);
    auto dout = h.filled<Bf16>(len, Bf16{0x7fc0});
    h.launch(grid_for(n2, 256), {256}, 0, len, da->ptr(), db->ptr(), dc->ptr(), dout->ptr(), n2);
    std::vector<Bf16> want(len);
    for (size_t i = 0; i < len; ++i) want[i] = bf16_add(bf16_mul(a[i], b[i]), c[i]);
    h.expect_exact("out", want, dout->download());
  }
}

void run_fill_value(Harness& h) {
  struct S {
    int n;
    uint32_t value_bits;
    unsigned block;
  };
  // A plain value, -0 and a NaN with a payload: a store of a parameter moves bits unchanged. One
  // thread per block over 70000 blocks: blockIdx.x beyond 16 bits.
  for (S s : h.pick<S>({{1, 0x40500000u, 256},
                        {256, 0x80000000u, 256},
                        {1000, 0x7fc0abcdu, 256},
                        {70000, 0xc2c80000u, 1},
                        {5000, 0x40500000u, 256}})) {
    int n = h.scaled(s.n);
    float value = float_of(s.value_bits);
    h.shape(strf("n=%d block=%u value=0x%08x", n, s.block, s.value_bits));
    auto dout = h.filled<float>(n, 1.0f);
    h.launch(grid_for(n, s.block), {s.block}, 0, n, dout->ptr(), value, n);
    std::vector<uint32_t> want(n, s.value_bits), got(n);
    auto back = dout->download();
    for (int i = 0; i < n; ++i) got[i] = bits_of(back[i]);
    h.expect_exact("out (bits)", want, got);
  }
}

// ============================================================================================
// reduction.cu

struct ReduceShape {
  int n;
  unsigned grid, block;
};
// Many full blocks, a block size that is not a multiple of 32 (partial last warp), one maximal
// block, one thread, and more threads than elements (whole blocks with nothing to add).
const std::vector<ReduceShape> k_reduce_shapes = {
    {10, 1, 1}, {100, 5, 64}, {777, 3, 100}, {3000, 1, 1024}, {5000, 8, 256}};

void run_reduce_sum_smem_f32(Harness& h) {
  for (ReduceShape s : h.pick(k_reduce_shapes)) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d grid=%u block=%u", n, s.grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = random_floats(rng, n, -1, 1);
    auto din = h.input("in", in);
    auto dpartial = h.filled<float>(s.grid, k_nan);
    h.launch({s.grid}, {s.block}, 0, n, din->ptr(), dpartial->ptr(), n);
    auto acc = gridstride_sums(in, s.grid, s.block);
    std::vector<float> want(s.grid);
    for (unsigned b = 0; b < s.grid; ++b) want[b] = smem_tree(acc[b]);
    h.expect_exact("partial", want, dpartial->download());
  }
}

void run_reduce_sum_shfl_f32(Harness& h) {
  for (ReduceShape s : h.pick(k_reduce_shapes)) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d grid=%u block=%u", n, s.grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = random_floats(rng, n, -1, 1);
    auto din = h.input("in", in);
    auto dpartial = h.filled<float>(s.grid, k_nan);
    h.launch({s.grid}, {s.block}, 0, n, din->ptr(), dpartial->ptr(), n);
    auto acc = gridstride_sums(in, s.grid, s.block);
    std::vector<float> want(s.grid);
    for (unsigned b = 0; b < s.grid; ++b) want[b] = block_sum_shfl(acc[b]);
    h.expect_exact("partial", want, dpartial->download());
  }
}

void run_reduce_sum_atomic_f32(Harness& h) {
  struct S {
    int n;
    unsigned block;
  };
  for (S s : h.pick<S>({{1, 256}, {256, 256}, {1000, 100}, {5000, 256}})) {
    int n = h.scaled(s.n);
    unsigned grid = grid_for(n, s.block).x;
    h.shape(strf("n=%d grid=%u block=%u", n, grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = random_floats(rng, n, -1, 1);
    auto din = h.input("in", in);
    auto dout = h.filled<float>(1, 0.0f);
    h.launch({grid}, {s.block}, 0, n, din->ptr(), dout->ptr(), n);
    // Each warp's butterfly sum is deterministic; only the order of the per-warp atomicAdds
    // varies. Whatever the order, each of the k-1 adds after the first rounds by at most half an
    // ulp of a partial sum, and |partial sum| <= sum |warp sums|: the bound below.
    double exact = 0, magnitude = 0;
    unsigned warps = 0;
    for (unsigned b = 0; b < grid; ++b) {
      for (unsigned w = 0; w * 32 < s.block; ++w) {
        unsigned nl = lanes_of_warp(s.block, w);
        std::vector<float> v(nl);
        for (unsigned l = 0; l < nl; ++l) {
          uint64_t i = uint64_t(b) * s.block + 32 * w + l;
          v[l] = i < uint64_t(n) ? in[i] : 0.0f;
        }
        float ws = warp_xor_lane0(v, add_f);
        exact += ws;
        magnitude += std::fabs(ws);
        ++warps;
      }
    }
    double tol = double(warps - 1) * 0x1p-24 * magnitude;
    h.expect_near("*out", {exact}, dout->download(), {tol});
  }
}

void run_reduce_max_atomic_i32(Harness& h) {
  struct S {
    int n;
    unsigned block;
    bool negative; // every input negative
  };
  for (S s :
       h.pick<S>({{1, 256, false}, {256, 256, true}, {1000, 100, false}, {5000, 256, false}})) {
    int n = h.scaled(s.n);
    unsigned grid = grid_for(n, s.block).x;
    h.shape(strf("n=%d grid=%u block=%u%s", n, grid, s.block, s.negative ? " all negative" : ""));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = s.negative ? random_ints<int32_t>(rng, n, INT_MIN, -1)
                         : random_ints<int32_t>(rng, n, -1000000, 1000000);
    if (s.negative) scatter_specials(in, {INT_MIN});
    auto din = h.input("in", in);
    auto dout = h.filled<int32_t>(1, INT_MIN);
    h.launch({grid}, {s.block}, 0, n, din->ptr(), dout->ptr(), n);
    h.expect_exact("*out", {*std::max_element(in.begin(), in.end())}, dout->download());
  }
}

void run_dot_f64(Harness& h) {
  for (ReduceShape s : h.pick(k_reduce_shapes)) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d grid=%u block=%u", n, s.grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto x = random_doubles(rng, n, -2, 2);
    auto y = random_doubles(rng, n, -2, 2);
    auto dx = h.input("x", x);
    auto dy = h.input("y", y);
    auto dpartial = h.filled<double>(s.grid, std::nan(""));
    h.launch({s.grid}, {s.block}, 0, n, dx->ptr(), dy->ptr(), dpartial->ptr(), n);
    std::vector<double> want(s.grid);
    const uint64_t stride = uint64_t(s.grid) * s.block;
    for (unsigned b = 0; b < s.grid; ++b) {
      std::vector<double> acc(s.block, 0.0);
      for (unsigned t = 0; t < s.block; ++t) {
        for (uint64_t i = uint64_t(b) * s.block + t; i < uint64_t(n); i += stride)
          acc[t] = std::fma(x[i], y[i], acc[t]);
      }
      want[b] = smem_tree(acc);
    }
    h.expect_exact("partial", want, dpartial->download());
  }
}

void run_reduce_max_cas_f32(Harness& h) {
  struct S {
    int n;
    unsigned block;
    int kind; // 0 mixed with NaNs, 1 all negative, 2 all NaN
  };
  for (S s :
       h.pick<S>({{40, 256, 2}, {1, 256, 0}, {256, 256, 1}, {1000, 100, 0}, {5000, 256, 0}})) {
    int n = h.scaled(s.n);
    unsigned grid = grid_for(n, s.block).x;
    static const char* kinds[] = {"with NaNs", "all negative", "all NaN"};
    h.shape(strf("n=%d grid=%u block=%u %s", n, grid, s.block, kinds[s.kind]));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in =
        random_floats(rng, n, -1000.0f,
                      s.kind == 1 ? -0.001f : 1000.0f); // no zeros: max(-0, +0) is order-dependent
    if (s.kind == 0) scatter_specials(in, {k_nan, -k_nan, k_nan, -k_inf});
    if (s.kind == 2) std::fill(in.begin(), in.end(), k_nan);
    auto din = h.input("in", in);
    auto dout = h.filled<float>(1, -k_inf);
    h.launch({grid}, {s.block}, 0, n, din->ptr(), dout->ptr(), n);
    float want = -k_inf;
    for (float v : in) {
      if (!std::isnan(v) && v > want) want = v;
    }
    h.expect_exact("*out", {want}, dout->download());
  }
}

void run_reduce_sum_lastblock_f32(Harness& h) {
  for (ReduceShape s :
       h.pick<ReduceShape>({{10, 1, 32}, {1000, 3, 100}, {3000, 7, 1024}, {5000, 64, 256}})) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d grid=%u block=%u", n, s.grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = random_floats(rng, n, -1, 1);
    auto din = h.input("in", in);
    auto dpartial = h.filled<float>(s.grid, k_nan);
    auto dcounter = h.filled<uint32_t>(1, 0u);
    auto dout = h.filled<float>(1, k_nan);
    auto acc = gridstride_sums(in, s.grid, s.block);
    std::vector<float> partial(s.grid);
    float total = 0.0f;
    for (unsigned b = 0; b < s.grid; ++b) {
      partial[b] = block_sum_shfl(acc[b]);
      total += partial[b];
    }
    // Twice: the last block resets the ticket counter, so a second launch must work unchanged.
    for (int run = 0; run < (h.bench() ? 1 : 2); ++run) {
      h.launch({s.grid}, {s.block}, 0, n, din->ptr(), dpartial->ptr(), dcounter->ptr(), dout->ptr(),
               n);
      h.expect_exact(run == 0 ? "partial" : "partial (second launch)", partial,
                     dpartial->download());
      h.expect_exact(run == 0 ? "*out" : "*out (second launch)", {total}, dout->download());
      h.expect_exact(run == 0 ? "*counter" : "*counter (second launch)", {0u},
                     dcounter->download());
    }
  }
}

// ============================================================================================
// scan.cu

void run_scan_inclusive_block_i32(Harness& h) {
  struct S {
    int n;
    unsigned block;
  };
  for (S s : h.pick<S>({{5, 1}, {256, 256}, {1000, 100}, {2500, 1024}, {5000, 256}})) {
    int n = h.scaled(s.n);
    unsigned grid = grid_for(n, s.block).x;
    h.shape(strf("n=%d grid=%u block=%u", n, grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = random_ints<int32_t>(rng, n, -1000, 1000);
    scatter_specials(in, {INT_MAX, INT_MAX, INT_MIN}); // wrapping sums
    auto din = h.input("in", in);
    auto dout = h.filled<int32_t>(n, 0x7eadbeef);
    auto dsums = h.filled<int32_t>(grid, 0x7eadbeef);
    h.launch({grid}, {s.block}, 0, n, din->ptr(), dout->ptr(), dsums->ptr(), n);
    std::vector<int32_t> want(n), sums(grid);
    for (unsigned b = 0; b < grid; ++b) {
      uint32_t run = 0;
      for (unsigned t = 0; t < s.block; ++t) {
        uint64_t i = uint64_t(b) * s.block + t;
        run += i < uint64_t(n) ? uint32_t(in[i]) : 0u;
        if (i < uint64_t(n)) want[i] = int32_t(run);
      }
      sums[b] = int32_t(run);
    }
    h.expect_exact("out", want, dout->download());
    h.expect_exact("block_sums", sums, dsums->download());
  }
}

void run_scan_exclusive_warp_i32(Harness& h) {
  struct S {
    int n;
    unsigned block;
  };
  for (S s : h.pick<S>({{1, 256}, {33, 33}, {256, 256}, {1000, 100}, {3000, 1024}, {5000, 256}})) {
    int n = h.scaled(s.n);
    unsigned grid = grid_for(n, s.block).x;
    h.shape(strf("n=%d grid=%u block=%u", n, grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = random_bits<uint32_t>(rng, n); // uint32 wrapping
    auto din = h.input("in", in);
    auto dout = h.filled<uint32_t>(n, 0xdeadbeefu);
    h.launch({grid}, {s.block}, 0, n, din->ptr(), dout->ptr(), n);
    std::vector<uint32_t> want(n);
    for (unsigned b = 0; b < grid; ++b) {
      uint32_t run = 0;
      for (unsigned t = 0; t < s.block; ++t) {
        uint64_t i = uint64_t(b) * s.block + t;
        if (i >= uint64_t(n)) break;
        want[i] = run;
        run += in[i];
      }
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_scan_add_block_offsets_i32(Harness& h) {
  struct S {
    int n, chunk;
  };
  for (S s : h.pick<S>({{1, 1}, {256, 7}, {1000, 100}, {5000, 256}})) {
    int n = h.scaled(s.n);
    int chunk = s.chunk;
    h.shape(strf("n=%d block=256 chunk=%d", n, chunk));
    Rng rng = h.rng(uint64_t(n) + uint64_t(chunk));
    auto data = random_ints<int32_t>(rng, n, INT_MIN, INT_MAX);
    auto offsets = random_ints<int32_t>(rng, ceil_div(n, chunk), INT_MIN, INT_MAX);
    auto ddata = h.upload(data);
    auto doffsets = h.input("offsets", offsets);
    h.launch(grid_for(n, 256), {256}, 0, n, ddata->ptr(), doffsets->ptr(), n, chunk);
    std::vector<int32_t> want(n);
    for (int i = 0; i < n; ++i) want[i] = int32_t(uint32_t(data[i]) + uint32_t(offsets[i / chunk]));
    h.expect_exact("data", want, ddata->download());
  }
}

// ============================================================================================
// histogram.cu

void run_histogram256_smem(Harness& h) {
  struct S {
    int n;
    unsigned grid, block;
    bool one_value; // every byte the same: all atomics on one bin
  };
  for (S s : h.pick<S>({{1, 3, 33, false},
                        {3000, 1, 100, false},
                        {5000, 4, 1024, true},
                        {10000, 64, 256, false}})) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d grid=%u block=%u%s", n, s.grid, s.block, s.one_value ? " one value" : ""));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto data = s.one_value ? std::vector<uint8_t>(n, 7) : random_ints<uint8_t>(rng, n, 0, 255);
    auto ddata = h.input("data", data);
    auto dbins = h.filled<uint32_t>(256, 0u);
    h.launch({s.grid}, {s.block}, 0, n, ddata->ptr(), dbins->ptr(), n);
    std::vector<uint32_t> want(256, 0u);
    for (uint8_t v : data) ++want[v];
    h.expect_exact("bins", want, dbins->download());
  }
}

void run_histogram_range_f32(Harness& h) {
  struct S {
    int n, nbins;
  };
  for (S s : h.pick<S>({{1, 1}, {256, 10}, {1000, 37}, {5000, 64}})) {
    int n = h.scaled(s.n);
    float lo = -2.0f, hi = 3.0f;
    h.shape(strf("n=%d block=256 nbins=%d lo=%g hi=%g", n, s.nbins, double(lo), double(hi)));
    Rng rng = h.rng(uint64_t(n) + uint64_t(s.nbins));
    auto x = random_floats(rng, n, -3, 4); // some below lo and above hi: clamped
    scatter_specials(x, {k_nan, lo, hi, k_inf, -k_inf, -k_nan, 2.9999998f, -0.0f});
    auto dx = h.input("x", x);
    auto dbins = h.filled<int32_t>(s.nbins, 0);
    h.launch(grid_for(n, 256), {256}, 0, n, dx->ptr(), dbins->ptr(), n, s.nbins, lo, hi);
    std::vector<int32_t> want(s.nbins, 0);
    for (float v : x) {
      if (std::isnan(v)) continue;
      float t = (v - lo) / (hi - lo) * float(s.nbins); // sub, div.rn, mul: no contraction possible
      int b = t < 0.0f ? 0 : (t >= float(s.nbins) ? s.nbins - 1 : int(t));
      ++want[b];
    }
    h.expect_exact("bins", want, dbins->download());
  }
}

// ============================================================================================
// transpose.cu

struct TransposeShape {
  int rows, cols;
  unsigned bx, by;
};

void run_transpose(Harness& h, bool tiled, const std::vector<TransposeShape>& shapes) {
  for (TransposeShape s : h.pick(shapes)) {
    int rows = h.scaled_side(s.rows), cols = h.scaled_side(s.cols);
    unsigned tile_x = tiled ? 32 : s.bx, tile_y = tiled ? 32 : s.by;
    Dim grid{ceil_div(cols, tile_x), ceil_div(rows, tile_y)};
    h.shape(strf("%dx%d grid=%ux%u block=%ux%u", rows, cols, grid.x, grid.y, s.bx, s.by));
    Rng rng = h.rng(uint64_t(rows) * 7 + uint64_t(cols) + s.bx);
    auto in = random_floats(rng, size_t(rows) * cols, -1000, 1000);
    auto din = h.input("in", in);
    auto dout = h.filled<float>(size_t(rows) * cols, k_nan);
    h.launch(grid, {s.bx, s.by}, 0, in.size(), din->ptr(), dout->ptr(), rows, cols);
    std::vector<float> want(in.size());
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) want[size_t(c) * rows + r] = in[size_t(r) * cols + c];
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_transpose_naive_f32(Harness& h) {
  run_transpose(
      h, false,
      {{1, 1, 16, 16}, {16, 16, 16, 16}, {37, 53, 16, 16}, {45, 20, 8, 32}, {100, 70, 16, 16}});
}

void run_transpose_tiled_f32(Harness& h) {
  // The kernel strides over its 32x32 tile with whatever 2D block it gets.
  run_transpose(h, true,
                {{1, 1, 32, 8},
                 {32, 32, 32, 8},
                 {37, 53, 32, 8},
                 {70, 45, 16, 16},
                 {33, 65, 8, 4},
                 {100, 70, 32, 32}});
}

// ============================================================================================
// matmul.cu

void run_sgemm_tiled(Harness& h) {
  struct S {
    int m, n, k;
    unsigned bx, by;
    float alpha, beta;
  };
  // beta == 0 must not read C (filled with NaN to prove it); M, N, K not multiples of the tile;
  // a block wider than the tile (threads that only help load).
  for (S s : h.pick<S>({{1, 1, 1, 16, 16, 1.0f, 0.0f},
                        {16, 16, 16, 16, 16, 1.5f, -0.5f},
                        {37, 29, 45, 16, 16, 1.5f, 0.0f},
                        {20, 33, 17, 32, 16, -2.0f, 0.25f},
                        {64, 48, 33, 16, 16, 0.75f, 1.0f}})) {
    int M = h.scaled_side(s.m), N = h.scaled_side(s.n), K = h.scaled_side(s.k);
    Dim grid{ceil_div(N, 16), ceil_div(M, 16)};
    h.shape(strf("M=%d N=%d K=%d grid=%ux%u block=%ux%u alpha=%g beta=%g", M, N, K, grid.x, grid.y,
                 s.bx, s.by, double(s.alpha), double(s.beta)));
    Rng rng = h.rng(uint64_t(M) * 31 + uint64_t(N) * 7 + uint64_t(K));
    auto A = random_floats(rng, size_t(M) * K, -1, 1);
    auto B = random_floats(rng, size_t(K) * N, -1, 1);
    auto C = s.beta == 0.0f ? std::vector<float>(size_t(M) * N, k_nan)
                            : random_floats(rng, size_t(M) * N, -1, 1);
    auto dA = h.input("A", A);
    auto dB = h.input("B", B);
    auto dC = h.upload(C);
    h.launch(grid, {s.bx, s.by}, 0, C.size(), dA->ptr(), dB->ptr(), dC->ptr(), M, N, K, s.alpha,
             s.beta);
    std::vector<float> want(C.size());
    for (int r = 0; r < M; ++r) {
      for (int c = 0; c < N; ++c) {
        float acc = 0.0f; // k in increasing order; zero-padded tile entries add nothing
        for (int k = 0; k < K; ++k) acc = std::fma(A[size_t(r) * K + k], B[size_t(k) * N + c], acc);
        size_t idx = size_t(r) * N + c;
        float prev = s.beta == 0.0f ? 0.0f : s.beta * C[idx];
        want[idx] = std::fma(s.alpha, acc, prev); // mul.f32 then fma.rn.f32 in the PTX
      }
    }
    h.expect_exact("C", want, dC->download());
  }
}

void run_sgemv_warp(Harness& h) {
  struct S {
    int rows, cols;
    unsigned grid, block;
  };
  // One warp per row; block 100 has a 4-lane last warp; grid 2 of 100 grid-strides over rows.
  for (S s : h.pick<S>({{1, 1, 1, 256},
                        {8, 32, 1, 256},
                        {37, 100, 5, 256},
                        {100, 37, 2, 100},
                        {300, 200, 38, 256}})) {
    int rows = h.scaled_side(s.rows), cols = h.scaled_side(s.cols);
    unsigned grid = h.bench() ? ceil_div(rows, 8) : s.grid;
    h.shape(strf("rows=%d cols=%d grid=%u block=%u", rows, cols, grid, s.block));
    Rng rng = h.rng(uint64_t(rows) * 7 + uint64_t(cols));
    auto A = random_floats(rng, size_t(rows) * cols, -1, 1);
    auto x = random_floats(rng, cols, -1, 1);
    auto dA = h.input("A", A);
    auto dx = h.input("x", x);
    auto dy = h.filled<float>(rows, k_nan);
    h.launch({grid}, {s.block}, 0, A.size(), dA->ptr(), dx->ptr(), dy->ptr(), rows, cols);
    const unsigned warps_per_block = ceil_div(s.block, 32);
    const unsigned nwarps = grid * warps_per_block;
    std::vector<float> want(rows);
    for (int r = 0; r < rows; ++r) {
      unsigned warp_in_block = (unsigned(r) % nwarps) % warps_per_block;
      unsigned nl = lanes_of_warp(s.block, warp_in_block);
      std::vector<float> acc(nl, 0.0f);
      for (unsigned l = 0; l < nl; ++l) {
        for (int c = int(l); c < cols; c += int(nl))
          acc[l] = std::fma(A[size_t(r) * cols + c], x[c], acc[l]);
      }
      want[r] = warp_down(acc, add_f);
    }
    h.expect_exact("y", want, dy->download());
  }
}

// ============================================================================================
// softmax_layernorm.cu

struct RowShape {
  int rows, cols;
  unsigned grid, block;
};

// Softmax rows in double from the float differences x - max (the kernels subtract in float).
std::vector<double> softmax_reference(const std::vector<float>& in, int rows, int cols) {
  std::vector<double> want(in.size());
  for (int r = 0; r < rows; ++r) {
    const float* x = &in[size_t(r) * cols];
    float m = -k_inf;
    for (int c = 0; c < cols; ++c) m = std::fmax(m, x[c]);
    double s = 0;
    for (int c = 0; c < cols; ++c) s += std::exp(double(x[c] - m));
    for (int c = 0; c < cols; ++c) want[size_t(r) * cols + c] = std::exp(double(x[c] - m)) / s;
  }
  return want;
}

void run_softmax_rows_f32(Harness& h) {
  // Rows grid-strided over fewer blocks; a block larger than a row; 100 threads (partial warp).
  for (RowShape s : h.pick<RowShape>({{1, 1, 1, 128},
                                      {8, 33, 8, 1024},
                                      {37, 100, 10, 100},
                                      {4, 1000, 4, 128},
                                      {64, 256, 64, 128}})) {
    int rows = h.scaled_side(s.rows), cols = h.scaled_side(s.cols);
    unsigned grid = h.bench() ? unsigned(rows) : s.grid;
    h.shape(strf("rows=%d cols=%d grid=%u block=%u", rows, cols, grid, s.block));
    Rng rng = h.rng(uint64_t(rows) * 7 + uint64_t(cols));
    auto in = random_floats(rng, size_t(rows) * cols, -10, 10); // x - max >= -20: no subnormal exps
    auto din = h.input("in", in);
    auto dout = h.filled<float>(in.size(), k_nan);
    h.launch({grid}, {s.block}, 0, in.size(), din->ptr(), dout->ptr(), rows, cols);
    auto want = softmax_reference(in, rows, cols);
    std::vector<double> tol(want.size());
    for (size_t i = 0; i < want.size(); ++i) tol[i] = 1e-5 * want[i];
    h.expect_near("out", want, dout->download(), tol);
  }
}

void run_softmax_rows_warp_fast_f32(Harness& h) {
  for (RowShape s : h.pick<RowShape>({{1, 1, 1, 128},
                                      {9, 33, 1, 32},
                                      {37, 100, 3, 128},
                                      {10, 70, 2, 100},
                                      {4, 1000, 1, 128},
                                      {64, 256, 16, 128}})) {
    int rows = h.scaled_side(s.rows), cols = h.scaled_side(s.cols);
    unsigned grid = h.bench() ? ceil_div(rows, 4) : s.grid;
    h.shape(strf("rows=%d cols=%d grid=%u block=%u", rows, cols, grid, s.block));
    Rng rng = h.rng(uint64_t(rows) * 7 + uint64_t(cols));
    auto in =
        random_floats(rng, size_t(rows) * cols, -3, 3); // x - max in [-6, 0]: __expf within 9 ulp
    auto din = h.input("in", in);
    auto dout = h.filled<float>(in.size(), k_nan);
    h.launch({grid}, {s.block}, 0, in.size(), din->ptr(), dout->ptr(), rows, cols);
    auto want = softmax_reference(in, rows, cols);
    std::vector<double> tol(want.size());
    for (size_t i = 0; i < want.size(); ++i) tol[i] = 1e-5 * want[i];
    h.expect_near("out", want, dout->download(), tol);
  }
}

// Per-thread strided partial values of one row: thread t sums f(x[c]) for c = t, t + block, ...
template <class F> std::vector<float> strided_partials(unsigned block, int cols, F f) {
  std::vector<float> acc(block, 0.0f);
  for (unsigned t = 0; t < block; ++t) {
    for (int c = int(t); c < cols; c += int(block)) acc[t] = f(acc[t], c);
  }
  return acc;
}

void run_layernorm_rows_f32(Harness& h) {
  for (RowShape s : h.pick<RowShape>({{1, 1, 1, 256},
                                      {8, 33, 8, 1024},
                                      {37, 100, 10, 100},
                                      {4, 1000, 4, 256},
                                      {64, 256, 64, 256}})) {
    int rows = h.scaled_side(s.rows), cols = h.scaled_side(s.cols);
    unsigned grid = h.bench() ? unsigned(rows) : s.grid;
    float eps = 1e-5f;
    h.shape(strf("rows=%d cols=%d grid=%u block=%u", rows, cols, grid, s.block));
    Rng rng = h.rng(uint64_t(rows) * 7 + uint64_t(cols));
    auto in = random_floats(rng, size_t(rows) * cols, -4, 6);
    auto gamma = random_floats(rng, cols, 0.5f, 1.5f);
    auto beta = random_floats(rng, cols, -1, 1);
    auto din = h.input("in", in);
    auto dgamma = h.input("gamma", gamma);
    auto dbeta = h.input("beta", beta);
    auto dout = h.filled<float>(in.size(), k_nan);
    h.launch({grid}, {s.block}, 0, in.size(), din->ptr(), dgamma->ptr(), dbeta->ptr(), dout->ptr(),
             rows, cols, eps);
    // Mean and variance follow the kernel's float operations exactly (same partial sums, same
    // tree, same fma contraction); only rsqrtf (rsqrt.approx.f32, <= 2 ulp per the CUDA
    // Programming Guide) is approximate: the reference takes 1/sqrt in double.
    std::vector<double> want(in.size()), tol(in.size());
    for (int r = 0; r < rows; ++r) {
      const float* x = &in[size_t(r) * cols];
      float mean =
          block_allreduce(strided_partials(s.block, cols, [&](float a, int c) { return a + x[c]; }),
                          add_f) /
          float(cols);
      float q = block_allreduce(strided_partials(s.block, cols,
                                                 [&](float a, int c) {
                                                   float d = x[c] - mean;
                                                   return std::fma(d, d, a);
                                                 }),
                                add_f);
      float var = q / float(cols) + eps;
      double rstd = 1.0 / std::sqrt(double(var));
      for (int c = 0; c < cols; ++c) {
        double d = double(x[c] - mean);
        size_t i = size_t(r) * cols + c;
        want[i] = d * rstd * gamma[c] + beta[c];
        // rsqrt within 2 ulp (2^-22 relative), then a mul and an fma rounding: 2^-20 relative to
        // the scaled term leaves a 2x margin; plus an ulp of the sum.
        tol[i] = std::fabs(d * rstd * gamma[c]) * 0x1p-20 + ulp(float(want[i]));
      }
    }
    h.expect_near("out", want, dout->download(), tol);
  }
}

void run_rmsnorm_rows_f16(Harness& h) {
  for (RowShape s : h.pick<RowShape>({{1, 1, 1, 256},
                                      {8, 33, 8, 1024},
                                      {37, 100, 10, 100},
                                      {4, 1000, 4, 256},
                                      {64, 256, 64, 256}})) {
    int rows = h.scaled_side(s.rows), cols = h.scaled_side(s.cols);
    unsigned grid = h.bench() ? unsigned(rows) : s.grid;
    float eps = 1e-6f;
    h.shape(strf("rows=%d cols=%d grid=%u block=%u", rows, cols, grid, s.block));
    Rng rng = h.rng(uint64_t(rows) * 7 + uint64_t(cols));
    auto in = random_halves(rng, size_t(rows) * cols, -4, 4);
    auto weight = random_halves(rng, cols, 0.5f, 2.0f);
    auto din = h.input("in", in);
    auto dweight = h.input("weight", weight);
    auto dout = h.filled<Half>(in.size(), Half{0x7e00});
    h.launch({grid}, {s.block}, 0, in.size(), din->ptr(), dweight->ptr(), dout->ptr(), rows, cols,
             eps);
    auto got = dout->download();
    // The sum of squares follows the kernel's float operations exactly; rsqrtf is within 2 ulp,
    // which moves the float product by a few float ulps: the half result may land one half-ulp
    // away when that product is near a rounding boundary of binary16. Tolerance: 1 half ulp.
    std::vector<double> want(in.size()), tol(in.size());
    for (int r = 0; r < rows; ++r) {
      const Half* x = &in[size_t(r) * cols];
      float q = block_allreduce(strided_partials(s.block, cols,
                                                 [&](float a, int c) {
                                                   float v = float(h2d(x[c]));
                                                   return std::fma(v, v, a);
                                                 }),
                                add_f);
      double rstd = 1.0 / std::sqrt(double(q / float(cols) + eps));
      for (int c = 0; c < cols; ++c) {
        size_t i = size_t(r) * cols + c;
        Half ref = half_rn(h2d(x[c]) * rstd * h2d(weight[c]));
        want[i] = h2d(ref);
        tol[i] = half_ulp(want[i]);
      }
    }
    std::vector<double> got_values(got.size());
    for (size_t i = 0; i < got.size(); ++i) got_values[i] = h2d(got[i]);
    h.expect_near("out", want, got_values, tol);
  }
}

// ============================================================================================
// math.cu

const std::vector<int> k_math_sizes = {1, 256, 1000, 5000};

void run_gelu_tanh_f32(Harness& h) {
  for (int n0 : h.pick(k_math_sizes)) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=256", n));
    Rng rng = h.rng(uint64_t(n));
    auto in = random_floats(rng, n, -8, 8);
    scatter_specials(in, {0.0f, -0.0f, 1e-30f, -1e-30f, 0.5f, 20.0f, -20.0f});
    auto din = h.input("in", in);
    auto dout = h.filled<float>(n, k_nan);
    h.launch(grid_for(n, 256), {256}, 0, n, din->ptr(), dout->ptr(), n);
    std::vector<double> want(n), tol(n);
    for (int i = 0; i < n; ++i) {
      float x = in[i];
      // u exactly as the PTX computes it: mul, mul, fma(x^3-ish, x, x), mul.
      float u = 0.7978845608f * std::fma(0.044715f * x * x, x, x);
      want[i] = 0.5 * double(x) * (1.0 + std::tanh(double(u)));
      // tanhf is within 2 ulp (CUDA Programming Guide), |t| < 1 so that is <= 2^-23 absolute;
      // 1 + t and the products add half ulps: |err| <= |x| (2^-24 + 2^-25) + ulp(out). Allowed:
      // |x| 2^-22 + 2 ulp(out).
      tol[i] = std::fabs(double(x)) * 0x1p-22 + 2 * ulp(float(want[i]));
    }
    h.expect_near("out", want, dout->download(), tol);
  }
}

void run_gelu_tanh_fast_f32(Harness& h) {
  for (int n0 : h.pick(k_math_sizes)) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=256", n));
    Rng rng = h.rng(uint64_t(n));
    auto in = random_floats(rng, n, -6, 6);
    scatter_specials(in, {0.0f, -0.0f, 1e-30f, 0.5f, 20.0f, -20.0f});
    auto din = h.input("in", in);
    auto dout = h.filled<float>(n, k_nan);
    h.launch(grid_for(n, 256), {256}, 0, n, din->ptr(), dout->ptr(), n);
    std::vector<double> want(n), tol(n);
    for (int i = 0; i < n; ++i) {
      float x = in[i];
      float u = 0.7978845608f * std::fma(0.044715f * x * x, x, x);
      u = std::fmin(std::fmax(u, -10.0f), 10.0f);
      double t = std::tanh(double(u));
      want[i] = 0.5 * double(x) * (1.0 + t);
      // t = 1 - 2/(1 + e), e = __expf(2u): e is within (2 + floor(1.173 |2u|)) <= 25 ulp
      // (3e-6 relative) and __fdividef within 2 ulp (Programming Guide), so
      // |dt| <= (1 - t) 3.3e-6 + 2^-24; then 0.5 x (1 + t) adds half ulps. Allowed: twice that.
      tol[i] = std::fabs(double(x)) * ((1.0 - t) * 4e-6 + 0x1p-22) + 2 * ulp(float(want[i]));
    }
    h.expect_near("out", want, dout->download(), tol);
  }
}

void run_softplus_exp_log_f32(Harness& h) {
  for (int n0 : h.pick(k_math_sizes)) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=256", n));
    Rng rng = h.rng(uint64_t(n));
    auto in = random_floats(rng, n, -30, 30);
    scatter_specials(in, {0.0f, 20.0f, std::nextafter(20.0f, 30.0f), -0.0f, 1e-20f, 25.0f, -30.0f});
    auto din = h.input("in", in);
    auto dout = h.filled<float>(n, k_nan);
    h.launch(grid_for(n, 256), {256}, 0, n, din->ptr(), dout->ptr(), n);
    std::vector<double> want(n), tol(n);
    for (int i = 0; i < n; ++i) {
      double x = in[i];
      want[i] = in[i] > 20.0f ? x : std::log1p(std::exp(x));
      // expf within 2 ulp, log1pf within 1 ulp: log1p(e (1 + d)) moves by <= min(e, 1) d, which is
      // at most 1.5 d relative to log1p(e); 2^-20 relative (8 ulp) covers the sum twice.
      tol[i] = in[i] > 20.0f ? 0.0 : std::fabs(want[i]) * 0x1p-20;
    }
    h.expect_near("out", want, dout->download(), tol);
  }
}

void run_logsig(Harness& h, bool fast) {
  for (int n0 : h.pick(k_math_sizes)) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=256", n));
    Rng rng = h.rng(uint64_t(n));
    auto in = random_floats(rng, n, -20, 20);
    scatter_specials(in, {0.0f, -0.0f, 20.0f, -20.0f, 1e-7f, -1e-7f});
    auto din = h.input("in", in);
    auto dsig = h.filled<float>(n, k_nan);
    auto dlog = h.filled<float>(n, k_nan);
    h.launch(grid_for(n, 256), {256}, 0, n, din->ptr(), dsig->ptr(), dlog->ptr(), n);
    auto sig = dsig->download();
    std::vector<double> want_sig(n), tol_sig(n), want_log(n), tol_log(n);
    for (int i = 0; i < n; ++i) {
      double x = in[i];
      want_sig[i] = 1.0 / (1.0 + std::exp(-x));
      // The log output is checked against the log of the sigmoid the kernel produced, so it
      // measures logf/__logf alone.
      want_log[i] = std::log(double(sig[i]));
      if (!fast) {
        // expf within 2 ulp, IEEE reciprocal: |ds/s| <= e/(1+e) 2^-22 + 2 2^-24; allowed 2^-20.
        tol_sig[i] = want_sig[i] * 0x1p-20;
        // logf within 1 ulp; allowed 2 ulp.
        tol_log[i] = 2 * ulp(float(want_log[i]));
      } else {
        // __expf(-x): 2 + floor(1.173 |x|) <= 25 ulp for |x| <= 20; __fdividef 2 ulp: 3.3e-6
        // relative at most; allowed 1e-5 relative.
        tol_sig[i] = want_sig[i] * 1e-5;
        // __logf: 2^-21.41 absolute for s in [0.5, 2], else 3 ulp; allowed 2^-21 + 4 ulp.
        tol_log[i] = 0x1p-21 + 4 * ulp(float(want_log[i]));
      }
    }
    h.expect_near("out_sig", want_sig, sig, tol_sig);
    h.expect_near("out_log", want_log, dlog->download(), tol_log);
  }
}
void run_logsig_f32(Harness& h) {
  run_logsig(h, false);
}
void run_logsig_fast_f32(Harness& h) {
  run_logsig(h, true);
}

void run_dmath_f64(Harness& h) {
  for (int n0 : h.pick(k_math_sizes)) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=128", n));
    Rng rng = h.rng(uint64_t(n));
    auto in = random_doubles(rng, n, -4, 4);
    // Large arguments take sin's slow path (Payne-Hanek reduction with a local array and the
    // module's global table).
    scatter_specials<double>(in, {0.0, -0.0, 1e6, -3.5e7, 1e10, 123456789.5, 1e22, 0.5, 1e-300});
    auto din = h.input("in", in);
    auto dout = h.filled<double>(n, std::nan(""));
    h.launch(grid_for(n, 128), {128}, 0, n, din->ptr(), dout->ptr(), n);
    std::vector<double> want(n), tol(n);
    for (int i = 0; i < n; ++i) {
      double x = in[i];
      double r = std::sqrt(std::fabs(x)), e = std::exp(-x * x), s = std::sin(x);
      want[i] = std::fma(r, e, s);
      // sqrt is IEEE; exp within 1 ulp and sin within 2 ulp on the device (Programming Guide),
      // host libm within 1 ulp: allowed 2^-50 relative on each term plus an ulp of the result.
      tol[i] = (r * e + std::fabs(s)) * 0x1p-50 + std::fabs(want[i]) * 0x1p-52 + 1e-300;
    }
    h.expect_near("out", want, dout->download(), tol);
  }
}

// ============================================================================================
// bits.cu

void run_bit_stats_u32(Harness& h) {
  for (int n0 : h.pick<int>({1, 256, 1000, 5000})) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=256", n));
    Rng rng = h.rng(uint64_t(n));
    auto in = random_bits<uint32_t>(rng, n);
    for (size_t i = 0; i < in.size(); i += 3) in[i] >>= (i / 3) % 32; // every leading-zero count
    scatter_specials<uint32_t>(in, {0u, 1u, 0x80000000u, 0xffffffffu, 0x00010000u});
    auto din = h.input("in", in);
    auto dout = h.filled<uint32_t>(4 * size_t(n), 0xdeadbeefu);
    h.launch(grid_for(n, 256), {256}, 0, n, din->ptr(), dout->ptr(), n);
    std::vector<uint32_t> want(4 * size_t(n));
    for (int i = 0; i < n; ++i) {
      uint32_t x = in[i];
      want[4 * i + 0] = uint32_t(std::popcount(x));
      want[4 * i + 1] = uint32_t(std::countl_zero(x));
      want[4 * i + 2] = x ? uint32_t(std::countr_zero(x)) + 1 : 0;
      uint32_t r = 0;
      for (int b = 0; b < 32; ++b) r |= ((x >> b) & 1u) << (31 - b);
      want[4 * i + 3] = r;
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_bit_stats_u64(Harness& h) {
  for (int n0 : h.pick<int>({1, 256, 1000, 5000})) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=256", n));
    Rng rng = h.rng(uint64_t(n));
    auto in = random_bits<uint64_t>(rng, n);
    for (size_t i = 0; i < in.size(); i += 3) in[i] >>= (i / 3) % 64;
    scatter_specials<uint64_t>(in, {0ull, 1ull, 1ull << 63, ~0ull, 1ull << 32, 0xffffffffull});
    auto din = h.input("in", in);
    auto dout = h.filled<uint64_t>(4 * size_t(n), 0xdeadbeefull);
    h.launch(grid_for(n, 256), {256}, 0, n, din->ptr(), dout->ptr(), n);
    std::vector<uint64_t> want(4 * size_t(n));
    for (int i = 0; i < n; ++i) {
      uint64_t x = in[i];
      want[4 * i + 0] = uint64_t(std::popcount(x));
      want[4 * i + 1] = uint64_t(std::countl_zero(x));
      want[4 * i + 2] = x ? uint64_t(std::countr_zero(x)) + 1 : 0;
      uint64_t r = 0;
      for (int b = 0; b < 64; ++b) r |= ((x >> b) & 1ull) << (63 - b);
      want[4 * i + 3] = r;
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_byte_perm_funnel(Harness& h) {
  struct S {
    int n;
    uint32_t selector, shift;
  };
  // Selectors with the nibbles' high bits set (__byte_perm uses the low 3 bits of each) and shifts
  // of 0, 31, 32 and beyond (taken mod 32).
  for (S s : h.pick<S>({{1, 0x3210u, 0u},
                        {256, 0x7654u, 31u},
                        {300, 0x0123u, 32u},
                        {1000, 0xfedcu, 13u},
                        {1000, 0x5140u, 45u},
                        {5000, 0x9a8bu, 7u}})) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d block=256 selector=0x%x shift=%u", n, s.selector, s.shift));
    Rng rng = h.rng(uint64_t(n) + s.selector);
    auto a = random_bits<uint32_t>(rng, n);
    auto b = random_bits<uint32_t>(rng, n);
    auto da = h.input("a", a);
    auto db = h.input("b", b);
    auto dout = h.filled<uint32_t>(3 * size_t(n), 0xdeadbeefu);
    h.launch(grid_for(n, 256), {256}, 0, n, da->ptr(), db->ptr(), dout->ptr(), s.selector, s.shift,
             n);
    std::vector<uint32_t> want(3 * size_t(n));
    for (int i = 0; i < n; ++i) {
      uint64_t both = (uint64_t(b[i]) << 32) | a[i]; // bytes 0-3 from a, 4-7 from b
      uint32_t perm = 0;
      for (int k = 0; k < 4; ++k) {
        unsigned sel = (s.selector >> (4 * k)) & 7u;
        perm |= uint32_t((both >> (8 * sel)) & 0xffu) << (8 * k);
      }
      unsigned sh = s.shift & 31u;
      want[3 * i + 0] = perm;
      want[3 * i + 1] = uint32_t((both << sh) >> 32);
      want[3 * i + 2] = uint32_t(both >> sh);
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_hash_mix_u32(Harness& h) {
  struct S {
    int n;
    uint32_t seed;
  };
  for (S s : h.pick<S>({{1, 0u}, {256, 0x9747b28cu}, {1000, 0xffffffffu}, {5000, 42u}})) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d block=256 seed=0x%x", n, s.seed));
    Rng rng = h.rng(uint64_t(n) + s.seed);
    auto keys = random_bits<uint32_t>(rng, n);
    scatter_specials<uint32_t>(keys, {0u, 0xffffffffu, s.seed});
    auto dkeys = h.input("keys", keys);
    auto dout = h.filled<uint32_t>(n, 0xdeadbeefu);
    h.launch(grid_for(n, 256), {256}, 0, n, dkeys->ptr(), dout->ptr(), n, s.seed);
    std::vector<uint32_t> want(n);
    for (int i = 0; i < n; ++i) {
      uint32_t x = keys[i] ^ s.seed;
      x ^= x >> 16;
      x *= 0x85ebca6bu;
      x = (x << 13) | (x >> 19);
      x ^= x >> 13;
      x *= 0xc2b2ae35u;
      x ^= x >> 16;
      want[i] = x;
    }
    h.expect_exact("out", want, dout->download());
  }
}

// ============================================================================================
// intdiv.cu

template <class T>
void run_divmod(Harness& h, const std::vector<T>& divisors, const std::vector<T>& specials) {
  struct S {
    int n;
    size_t divisor;
  };
  std::vector<S> shapes = {{1, 0}};
  for (size_t d = 0; d < divisors.size(); ++d) shapes.push_back({d % 2 ? 1000 : 257, d});
  shapes.push_back({5000, 0});
  for (S s : h.pick(shapes)) {
    int n = h.scaled(s.n);
    T d = divisors[s.divisor];
    h.shape(strf("n=%d block=256 d=%s", n, show(d).c_str()));
    Rng rng = h.rng(uint64_t(n) * 131 + s.divisor);
    auto a = random_bits<T>(rng, n);
    for (size_t i = 0; i < a.size(); i += 2)
      a[i] = T(a[i] >> (rng.next32() % (8 * sizeof(T)))); // small too
    scatter_specials(a, specials);
    if constexpr (std::is_signed_v<T>) {
      if (d == T(-1)) { // INT_MIN / -1 overflows: excluded by the kernel's precondition
        for (auto& v : a) {
          if (v == std::numeric_limits<T>::min()) v = std::numeric_limits<T>::max();
        }
      }
    }
    auto da = h.input("a", a);
    auto dq = h.filled<T>(n, T(0x5a));
    auto dr = h.filled<T>(n, T(0x5a));
    h.launch(grid_for(n, 256), {256}, 0, n, da->ptr(), dq->ptr(), dr->ptr(), d, n);
    std::vector<T> q(n), r(n);
    for (int i = 0; i < n; ++i) {
      q[i] = T(a[i] / d);
      r[i] = T(a[i] % d);
    }
    h.expect_exact("q", q, dq->download());
    h.expect_exact("r", r, dr->download());
  }
}

void run_divmod_i32(Harness& h) {
  run_divmod<int32_t>(h, {7, -3, 1, -1, 1000003, INT_MIN, INT_MAX, -65536},
                      {0, -1, 1, INT_MAX, INT_MIN, -7, 6, -6, INT_MIN + 1});
}
void run_divmod_u32(Harness& h) {
  run_divmod<uint32_t>(h, {7u, 1u, 3u, 0xffffffffu, 65536u, 0x80000001u, 1000003u},
                       {0u, 1u, 0xffffffffu, 0x80000000u, 6u});
}
void run_divmod_i64(Harness& h) {
  run_divmod<int64_t>(
      h, {7, -3, -1, 1, INT64_MIN, INT64_MAX, 1000000000039ll, -4294967296ll, 4294967297ll},
      {0, -1, INT64_MAX, INT64_MIN, INT64_MIN + 1, -7, 4294967296ll});
}
void run_divmod_u64(Harness& h) {
  run_divmod<uint64_t>(
      h, {3ull, 1ull, 1ull << 63, ~0ull, 1000000000039ull, (1ull << 32) + 1, 0xffffffffull, 10ull},
      {0ull, ~0ull, 1ull << 63, 0xffffffffull, 1ull << 32});
}

void run_reverse_axes_3d(Harness& h) {
  struct S {
    unsigned nx, ny, nz;
  };
  for (S s :
       h.pick<S>({{1, 1, 1}, {7, 5, 3}, {33, 1, 17}, {1, 40, 1}, {16, 9, 20}, {30, 20, 10}})) {
    unsigned nx = s.nx, ny = s.ny, nz = h.bench() ? s.nz * h.scaled(1) : s.nz;
    unsigned total = nx * ny * nz;
    h.shape(strf("nx=%u ny=%u nz=%u block=256", nx, ny, nz));
    Rng rng = h.rng(uint64_t(nx) * 10007 + ny * 101 + nz);
    auto src = random_floats(rng, total, -1, 1);
    auto dsrc = h.input("src", src);
    auto ddst = h.filled<float>(total, k_nan);
    h.launch(grid_for(total, 256), {256}, 0, total, dsrc->ptr(), ddst->ptr(), nx, ny, nz);
    std::vector<float> want(total);
    for (unsigned x = 0; x < nx; ++x) {
      for (unsigned y = 0; y < ny; ++y) {
        for (unsigned z = 0; z < nz; ++z) want[z + nz * (y + ny * x)] = src[x + nx * (y + ny * z)];
      }
    }
    h.expect_exact("dst", want, ddst->download());
  }
}

// ============================================================================================
// memory.cu

void run_local_hist16(Harness& h) {
  for (int n0 : h.pick<int>({1, 128, 1000, 3000})) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=128", n));
    Rng rng = h.rng(uint64_t(n));
    auto keys = random_ints<uint8_t>(rng, 8 * size_t(n), 0, 255);
    for (size_t j = 0; j < 8 && j < keys.size(); ++j)
      keys[j] = uint8_t(0x30 + 5); // one thread all alike
    auto dkeys = h.input("keys", keys);
    auto dout = h.filled<int32_t>(16 * size_t(n), -1);
    h.launch(grid_for(n, 128), {128}, 0, n, dkeys->ptr(), dout->ptr(), n);
    std::vector<int32_t> want(16 * size_t(n), 0);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < 8; ++j) ++want[16 * size_t(i) + (keys[8 * size_t(i) + j] & 15)];
    }
    h.expect_exact("out", want, dout->download());
  }
}

float saturate(float x) {
  return std::isnan(x) ? 0.0f : std::fmin(std::fmax(x, 0.0f), 1.0f);
} // cvt.sat.f32.f32

void run_lut_smoothstep_noinline(Harness& h) {
  struct S {
    int n, lut_n;
    float e0, e1;
  };
  for (S s : h.pick<S>({{1, 1, -1.0f, 2.0f},
                        {256, 2, 3.0f, -1.0f},
                        {1000, 17, -1.0f, 2.0f},
                        {5000, 64, -0.5f, 3.5f}})) {
    int n = h.scaled(s.n);
    h.shape(strf("n=%d block=256 lut_n=%d e0=%g e1=%g", n, s.lut_n, double(s.e0), double(s.e1)));
    Rng rng = h.rng(uint64_t(n) + uint64_t(s.lut_n));
    auto in = random_floats(rng, n, -3, 4);
    scatter_specials(in, {s.e0, s.e1, k_nan, k_inf, -k_inf, 0.5f}); // NaN saturates to 0
    auto lut = random_floats(rng, s.lut_n, -10, 10);
    auto din = h.input("in", in);
    auto dlut = h.input("lut", lut);
    auto dout = h.filled<float>(n, k_nan);
    h.launch(grid_for(n, 256), {256}, 0, n, din->ptr(), dout->ptr(), dlut->ptr(), s.lut_n, n, s.e0,
             s.e1);
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) {
      // smoothstep01: sub, sub, div.rn, cvt.sat, mul, add, sub, mul (no fma in the PTX).
      float t = saturate((in[i] - s.e0) / (s.e1 - s.e0));
      float sm = (t * t) * (3.0f - (t + t));
      // lut_lerp: cvt.sat, mul, cvt.rzi, sub, then fma(f, lut[k1] - lut[k], lut[k]).
      float pos = saturate(sm) * float(s.lut_n - 1);
      int k = int(pos);
      int k1 = k + 1 < s.lut_n ? k + 1 : k;
      float f = pos - float(k);
      want[i] = std::fma(f, lut[k1] - lut[k], lut[k]);
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_reverse_blocks_dynsmem(Harness& h) {
  struct S {
    int n;
    unsigned block;
    unsigned shared; // 0: exactly blockDim.x floats
  };
  // The last but one asks for more dynamic shared memory than the kernel uses, beyond the 48 KiB
  // default: it needs cuFuncSetAttribute's opt-in first.
  for (S s : h.pick<S>({{5, 1, 0},
                        {100, 100, 0},
                        {1000, 256, 0},
                        {3000, 1024, 0},
                        {2000, 128, 100 * 1024},
                        {5000, 96, 0}})) {
    int n = h.scaled(s.n);
    unsigned grid = grid_for(n, s.block).x;
    unsigned shared = s.shared ? s.shared : s.block * 4;
    if (shared > 48 * 1024) h.allow_dynamic_shared(shared);
    h.shape(strf("n=%d grid=%u block=%u dynamic shared=%u", n, grid, s.block, shared));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = random_floats(rng, n, -1, 1);
    auto din = h.input("in", in);
    auto dout = h.filled<float>(n, k_nan);
    h.launch({grid}, {s.block}, shared, n, din->ptr(), dout->ptr(), n);
    std::vector<float> want(n);
    for (int b0 = 0; b0 < n; b0 += int(s.block)) {
      int len = std::min(int(s.block), n - b0);
      for (int j = 0; j < len; ++j) want[b0 + j] = in[b0 + len - 1 - j];
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_poly_eval_const(Harness& h) {
  static const float c[8] = {1.0f,    -0.5f,     0.25f,     -0.125f,
                             0.0625f, -0.03125f, 0.015625f, -0.0078125f};
  for (int n0 : h.pick<int>({1, 256, 1000, 5000})) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=256", n));
    Rng rng = h.rng(uint64_t(n));
    auto in = random_floats(rng, n, -2, 2);
    scatter_specials(in, {0.0f, -0.0f, -2.0f, 1e10f, k_nan, -k_inf});
    auto din = h.input("in", in);
    auto dout = h.filled<float>(n, k_nan);
    h.launch(grid_for(n, 256), {256}, 0, n, din->ptr(), dout->ptr(), n);
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) {
      float acc = c[7];
      for (int k = 6; k >= 0; --k) acc = std::fma(acc, in[i], c[k]);
      want[i] = acc;
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_palette_lookup_const(Harness& h) {
  static const uint32_t palette[16] = {
      0x000000u, 0x800000u, 0x008000u, 0x808000u, 0x000080u, 0x800080u, 0x008080u, 0xc0c0c0u,
      0x808080u, 0xff0000u, 0x00ff00u, 0xffff00u, 0x0000ffu, 0xff00ffu, 0x00ffffu, 0xffffffu};
  for (int n0 : h.pick<int>({1, 256, 1000, 5000})) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=256", n));
    Rng rng = h.rng(uint64_t(n));
    auto idx = random_ints<uint8_t>(rng, n, 0, 255);
    auto didx = h.input("idx", idx);
    auto drgb = h.filled<uint32_t>(n, 0xdeadbeefu);
    h.launch(grid_for(n, 256), {256}, 0, n, didx->ptr(), drgb->ptr(), n);
    std::vector<uint32_t> want(n);
    for (int i = 0; i < n; ++i) want[i] = palette[idx[i] & 15];
    h.expect_exact("rgb", want, drgb->download());
  }
}

// The kernel's by-value argument blocks, laid out as the device compiler lays them out.
struct ScaleArgs {
  int32_t n;
  float scale;
  CUdeviceptr src; // offset 8
  CUdeviceptr dst; // offset 16
};
static_assert(sizeof(ScaleArgs) == 24);
struct Box3 {
  int32_t x0, y0, z0, nx, ny, nz;
};
static_assert(sizeof(Box3) == 24);

void run_scale_struct_arg(Harness& h) {
  for (int n0 : h.pick<int>({1, 256, 1000, 5000})) {
    int n = h.scaled(n0);
    h.shape(strf("n=%d block=256", n));
    Rng rng = h.rng(uint64_t(n));
    auto src = random_floats(rng, n, -100, 100);
    scatter_specials(src, k_float_specials);
    auto dsrc = h.input("src", src);
    auto ddst = h.filled<float>(n, k_nan);
    ScaleArgs args{n, -1.625f, dsrc->ptr(), ddst->ptr()};
    h.launch(grid_for(n, 256), {256}, 0, n, args);
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = src[i] * args.scale;
    h.expect_exact("args.dst", want, ddst->download());
  }
}

void run_crop3d(Harness& h) {
  struct S {
    int sx, sy, sz;
    Box3 box;
    Dim block;
  };
  // A single voxel, extents that are not multiples of the block, exact multiples, another block.
  for (S s : h.pick<S>({{4, 4, 4, {1, 2, 3, 1, 1, 1}, {8, 8, 4}},
                        {20, 15, 10, {3, 2, 1, 13, 9, 6}, {8, 8, 4}},
                        {8, 16, 6, {0, 5, 2, 8, 8, 4}, {8, 8, 4}},
                        {17, 19, 23, {2, 3, 4, 15, 11, 17}, {4, 4, 2}},
                        {40, 30, 20, {5, 1, 2, 33, 27, 17}, {8, 8, 4}}})) {
    Box3 box = s.box;
    int sz = s.sz;
    if (h.bench()) {
      box.nz *= h.scaled(1);
      sz = box.z0 + box.nz;
    }
    Dim grid{ceil_div(box.nx, s.block.x), ceil_div(box.ny, s.block.y), ceil_div(box.nz, s.block.z)};
    h.shape(strf("volume %dx%dx%d box at (%d,%d,%d) size %dx%dx%d grid=%ux%ux%u block=%ux%ux%u",
                 s.sx, s.sy, sz, box.x0, box.y0, box.z0, box.nx, box.ny, box.nz, grid.x, grid.y,
                 grid.z, s.block.x, s.block.y, s.block.z));
    Rng rng = h.rng(uint64_t(s.sx) * 1000 + uint64_t(box.nx));
    auto src = random_floats(rng, size_t(s.sx) * s.sy * sz, -1, 1);
    auto dsrc = h.input("src", src);
    size_t count = size_t(box.nx) * box.ny * box.nz;
    auto ddst = h.filled<float>(count, k_nan);
    h.launch(grid, s.block, 0, count, dsrc->ptr(), ddst->ptr(), s.sx, s.sy, box);
    std::vector<float> want(count);
    for (int z = 0; z < box.nz; ++z) {
      for (int y = 0; y < box.ny; ++y) {
        for (int x = 0; x < box.nx; ++x) {
          want[x + size_t(box.nx) * (y + size_t(box.ny) * z)] =
              src[(box.x0 + x) + size_t(s.sx) * ((box.y0 + y) + size_t(s.sy) * (box.z0 + z))];
        }
      }
    }
    h.expect_exact("dst", want, ddst->download());
  }
}

// ============================================================================================
// warp.cu

struct WarpShape {
  int n;
  unsigned grid, block;
};

void run_warp_vote_stats(Harness& h) {
  for (WarpShape s : h.pick<WarpShape>({{1, 2, 1},
                                        {32, 1, 32},
                                        {100, 5, 33},
                                        {250, 3, 100},
                                        {1000, 4, 256},
                                        {5000, 20, 256}})) {
    int n = h.scaled(s.n);
    unsigned grid = h.bench() ? grid_for(n, s.block).x : s.grid;
    float threshold = 0.25f;
    unsigned wpb = ceil_div(s.block, 32);
    h.shape(strf("n=%d grid=%u block=%u", n, grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = random_floats(rng, n, -1, 1);
    // Whole warps above and whole warps below the threshold (for __all_sync and __any_sync).
    for (int i = 0; i < n; ++i) {
      if ((i / 32) % 5 == 1) in[i] = 0.5f + float(i % 7);
      if ((i / 32) % 5 == 2) in[i] = -0.5f;
    }
    scatter_specials(in, {k_nan, threshold});
    auto din = h.input("in", in);
    auto dout = h.filled<uint32_t>(4 * size_t(grid) * wpb, 0xdeadbeefu);
    h.launch({grid}, {s.block}, 0, n, din->ptr(), dout->ptr(), n, threshold);
    std::vector<uint32_t> want(4 * size_t(grid) * wpb);
    for (unsigned b = 0; b < grid; ++b) {
      for (unsigned w = 0; w < wpb; ++w) {
        unsigned nl = lanes_of_warp(s.block, w);
        uint32_t m = nl == 32 ? 0xffffffffu : ((1u << nl) - 1u);
        uint32_t ballot = 0;
        bool all = true;
        for (unsigned l = 0; l < nl; ++l) {
          uint64_t i = uint64_t(b) * s.block + 32 * w + l;
          bool in_range = i < uint64_t(n);
          bool above = in_range && in[i] > threshold;
          if (above) ballot |= 1u << l;
          all = all && (!in_range || above);
        }
        size_t o = 4 * (size_t(b) * wpb + w);
        want[o + 0] = ballot;
        want[o + 1] = ballot != 0;
        want[o + 2] = all;
        want[o + 3] = m;
      }
    }
    h.expect_exact("out", want, dout->download());
  }
}

void run_compact_gt_ballot(Harness& h) {
  struct S {
    int n;
    unsigned block;
  };
  for (S s : h.pick<S>({{1, 256}, {33, 33}, {777, 100}, {1000, 256}, {3000, 1024}, {5000, 256}})) {
    int n = h.scaled(s.n);
    unsigned grid = grid_for(n, s.block).x;
    float threshold = 0.1f;
    h.shape(strf("n=%d grid=%u block=%u", n, grid, s.block));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto in = random_floats(rng, n, -1, 1);
    for (int i = 0; i < n; ++i) {
      if ((i / 32) % 4 == 3) in[i] = -1.0f; // warps that keep nothing (no atomic)
    }
    scatter_specials(in, {k_nan, threshold, std::nextafter(threshold, 1.0f)});
    auto din = h.input("in", in);
    const uint32_t sentinel = 0x7fbadbadu;
    auto dout = h.filled<float>(n, float_of(sentinel));
    auto dcounter = h.filled<uint32_t>(1, 0u);
    h.launch({grid}, {s.block}, 0, n, din->ptr(), dout->ptr(), dcounter->ptr(), n, threshold);
    // The order between warps depends on the atomics: compare the kept values as a multiset
    // (sorted bit patterns) and check that nothing past the count was written.
    std::vector<uint32_t> want;
    for (float v : in) {
      if (v > threshold) want.push_back(bits_of(v));
    }
    std::sort(want.begin(), want.end());
    auto counter = dcounter->download();
    h.expect_exact("*counter", {uint32_t(want.size())}, counter);
    auto out = dout->download();
    std::vector<uint32_t> kept, rest;
    for (size_t i = 0; i < out.size(); ++i)
      (i < std::min<size_t>(counter[0], out.size()) ? kept : rest).push_back(bits_of(out[i]));
    std::sort(kept.begin(), kept.end());
    h.expect_exact("out[0..*counter) as a multiset (sorted bits)", want, kept);
    h.expect_exact("out[*counter..n) (untouched)", std::vector<uint32_t>(rest.size(), sentinel),
                   rest);
  }
}

void run_warp_match_count(Harness& h) {
  struct S {
    int n;
    unsigned block;
    int alphabet;
  };
  for (S s : h.pick<S>({{1, 256, 4},
                        {45, 33, 3},
                        {250, 100, 4},
                        {1000, 256, 2},
                        {1000, 64, 1000000},
                        {5000, 256, 5}})) {
    int n = h.scaled(s.n);
    unsigned grid = grid_for(n, s.block).x;
    h.shape(strf("n=%d grid=%u block=%u keys in [0,%d)", n, grid, s.block, s.alphabet));
    Rng rng = h.rng(uint64_t(n) + s.block);
    auto keys = random_ints<int32_t>(rng, n, 0, s.alphabet - 1);
    auto dkeys = h.input("keys", keys);
    auto dout = h.filled<int32_t>(n, -1);
    h.launch({grid}, {s.block}, 0, n, dkeys->ptr(), dout->ptr(), n);
    std::vector<int32_t> want(n);
    for (int i = 0; i < n; ++i) {
      // Peers: same block, same warp of that block, index < n.
      unsigned b = unsigned(i) / s.block, t = unsigned(i) % s.block;
      int first = int(b * s.block + (t & ~31u));
      int last = std::min(first + int(lanes_of_warp(s.block, t / 32)), n);
      int count = 0;
      for (int j = first; j < last; ++j) count += keys[j] == keys[i];
      want[i] = count;
    }
    h.expect_exact("out", want, dout->download());
  }
}

// ============================================================================================
// tensor.cu

// Halves holding integers in [lo, hi]: products and sums of them stay exact in f32.
std::vector<Half> random_integer_halves(Rng& rng, size_t n, int lo, int hi) {
  std::vector<Half> v(n);
  for (auto& x : v) x = half_rn(double(rng.range(lo, hi)));
  return v;
}

std::vector<double> halves_to_doubles(const std::vector<Half>& h) {
  std::vector<double> d(h.size());
  for (size_t i = 0; i < h.size(); ++i) d[i] = h2d(h[i]);
  return d;
}

void run_hgemm_mma_f16(Harness& h) {
  struct S {
    int m, n, k;
    unsigned grid, block;
    bool integers; // small-integer inputs (exact) or uniform in [-1, 1] (within a tolerance)
  };
  // One tile; M, N, K not multiples of 16 with a 4-lane last warp that must exit; more tiles than
  // warps (grid-stride); 8 warps per block; fractions; the largest shape (the benchmark's).
  for (S s : h.pick<S>({{1, 1, 1, 1, 32, true},
                        {16, 16, 16, 1, 32, true},
                        {37, 29, 45, 2, 100, true},
                        {64, 48, 80, 3, 64, true},
                        {48, 64, 40, 2, 256, false},
                        {96, 80, 64, 4, 128, true}})) {
    const int M = h.scaled_side(s.m), N = h.scaled_side(s.n), K = h.scaled_side(s.k);
    const unsigned tiles = ceil_div(M, 16) * ceil_div(N, 16);
    const unsigned grid = h.bench() ? ceil_div(tiles, s.block / 32) : s.grid;
    h.shape(strf("M=%d N=%d K=%d grid=%u block=%u %s", M, N, K, grid, s.block,
                 s.integers ? "integers" : "fractions"));
    Rng rng = h.rng(uint64_t(M) * 31 + uint64_t(N) * 7 + uint64_t(K));
    auto A = s.integers ? random_integer_halves(rng, size_t(M) * K, -8, 8)
                        : random_halves(rng, size_t(M) * K, -1, 1);
    auto B = s.integers ? random_integer_halves(rng, size_t(K) * N, -8, 8)
                        : random_halves(rng, size_t(K) * N, -1, 1);
    auto dA = h.input("A", A);
    auto dB = h.input("B", B);
    auto dC = h.filled<float>(size_t(M) * N, k_nan);
    h.launch({grid}, {s.block}, 0, size_t(M) * N, dA->ptr(), dB->ptr(), dC->ptr(), M, N, K);
    std::vector<double> want(size_t(M) * N), tol(want.size());
    const std::vector<double> a = halves_to_doubles(A), b = halves_to_doubles(B);
    for (int r = 0; r < M; ++r) {
      for (int c = 0; c < N; ++c) {
        double sum = 0, magnitude = 0; // products of halves are exact in double
        for (int k = 0; k < K; ++k) {
          double p = a[size_t(r) * K + k] * b[size_t(k) * N + c];
          sum += p;
          magnitude += std::fabs(p);
        }
        want[size_t(r) * N + c] = sum;
        tol[size_t(r) * N + c] = K * 0x1p-22 * magnitude;
      }
    }
    if (s.integers) {
      // |sum| <= 64 K < 2^24: exact in f32 on the tensor path (one rounding per mma) and in the
      // fmaf fallback alike, and on a GPU's tensor cores.
      std::vector<float> exact(want.begin(), want.end());
      h.expect_exact("C", exact, dC->download());
    } else {
      h.expect_near("C", want, dC->download(), tol);
    }
  }
}

void run_flash_attn_tile_f16(Harness& h) {
  constexpr int d = 64;
  struct S {
    int n_q, n_kv;
    unsigned grid, block;
    float scale;
  };
  // One query and one key; one warp's rows and exactly one tile; a block with more query rows
  // than there are (and a second block with none); a 4-lane warp that only stages, grid-striding
  // over query blocks of 48 rows; 8 warps of which 4 compute; no keys at all; the largest (the
  // benchmark's), 64-row query blocks and a 1-key last tile.
  for (S s : h.pick<S>({{1, 1, 1, 32, 0.125f},
                        {16, 32, 1, 32, 0.125f},
                        {37, 45, 2, 128, 0.5f},
                        {100, 100, 1, 100, 0.125f},
                        {50, 200, 3, 256, 0.5f},
                        {20, 0, 1, 64, 0.125f},
                        {130, 161, 3, 128, 0.25f}})) {
    const int n_q = h.scaled_side(s.n_q), n_kv = h.scaled_side(s.n_kv);
    const unsigned grid = h.bench() ? ceil_div(n_q, 64) : s.grid;
    h.shape(strf("n_q=%d n_kv=%d d=%d grid=%u block=%u scale=%g", n_q, n_kv, d, grid, s.block,
                 double(s.scale)));
    Rng rng = h.rng(uint64_t(n_q) * 131 + uint64_t(n_kv) * 7 + s.block);
    auto Q = random_halves(rng, size_t(n_q) * d, -1, 1);
    auto K = random_halves(rng, size_t(n_kv) * d, -1, 1);
    auto V = random_halves(rng, size_t(n_kv) * d, -1, 1);
    auto dQ = h.input("Q", Q);
    auto dK = h.input("K", K);
    auto dV = h.input("V", V);
    auto dO = h.filled<float>(size_t(n_q) * d, k_nan);
    h.launch({grid}, {s.block}, 0, size_t(n_q) * d, dQ->ptr(), dK->ptr(), dV->ptr(), dO->ptr(), n_q,
             n_kv, s.scale);
    std::vector<double> want(size_t(n_q) * d, 0.0), tol(want.size(), 0.0);
    std::vector<double> score(n_kv), p(n_kv);
    const std::vector<double> q = halves_to_doubles(Q), k = halves_to_doubles(K),
                              v = halves_to_doubles(V);
    for (int i = 0; i < n_q; ++i) {
      double max = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < n_kv; ++j) {
        double dot = 0;
        for (int c = 0; c < d; ++c) dot += q[size_t(i) * d + c] * k[size_t(j) * d + c];
        score[j] = double(s.scale) * dot;
        max = std::max(max, score[j]);
      }
      double l = 0;
      for (int j = 0; j < n_kv; ++j) l += p[j] = std::exp(score[j] - max);
      for (int c = 0; c < d && n_kv > 0; ++c) {
        double o = 0, weighted = 0, plain = 0;
        for (int j = 0; j < n_kv; ++j) {
          const double vj = v[size_t(j) * d + c];
          o += p[j] * vj;
          weighted += p[j] * std::fabs(vj);
          plain += std::fabs(vj);
        }
        // P is rounded to binary16 for P V: 2^-11 relative, or 2^-25 absolute where it falls
        // below binary16's normal range; twice that, for the f32 scores, exp2f and sums.
        want[size_t(i) * d + c] = o / l;
        tol[size_t(i) * d + c] = 0x1p-10 * weighted / l + 0x1p-24 * plain / l;
      }
    }
    h.expect_near("O", want, dO->download(), tol);
  }
}

// ============================================================================================

const char* k_exact = "exact (bitwise; the reference follows the PTX's operation order)";

} // namespace

const std::vector<CorpusKernel>& corpus_kernels() {
  static const std::vector<CorpusKernel> kernels = {
      // bits.cu
      {"bits", "bit_stats_u32", k_exact, run_bit_stats_u32},
      {"bits", "bit_stats_u64", k_exact, run_bit_stats_u64},
      {"bits", "byte_perm_funnel", k_exact, run_byte_perm_funnel},
      {"bits", "hash_mix_u32", k_exact, run_hash_mix_u32},
      // elementwise.cu
      {"elementwise", "saxpy",
       "exact: fmaf(a, x, y), the PTX's fma.rn.f32; inf/NaN/subnormal inputs included", run_saxpy},
      {"elementwise", "vadd_i32", k_exact, run_vadd_i32},
      {"elementwise", "daxpy_gridstride", "exact: fma(a, x, y), fma.rn.f64", run_daxpy_gridstride},
      {"elementwise", "scale_bias_f4",
       "exact: fmaf(in, scale, bias) on the float4 path and the tail", run_scale_bias_f4},
      {"elementwise", "haxpy_f16",
       "exact: correctly rounded binary16 fma (fma.rn.f16), subnormals and inf included",
       run_haxpy_f16},
      {"elementwise", "hmul_add_f16x2", "exact: binary16 mul then add, each correctly rounded",
       run_hmul_add_f16x2},
      {"elementwise", "relu_bf16", "exact: correctly rounded bf16 product, NaN and -0 give +0",
       run_relu_bf16},
      {"elementwise", "mul_add_bf16x2",
       "exact: bf16 mul then add, each correctly rounded (inputs within 2^6 of each other, where "
       "sm_75's "
       "float emulation rounds the same)",
       run_mul_add_bf16x2},
      {"elementwise", "_Z10fill_valueIfEvPT_S0_i",
       "exact bits (-0 and a NaN payload survive a store)", run_fill_value},
      // histogram.cu
      {"histogram", "histogram256_smem", "exact counts (integer atomics commute)",
       run_histogram256_smem},
      {"histogram", "histogram_range_f32",
       "exact counts; the bin index follows the PTX's sub/div.rn/mul", run_histogram_range_f32},
      // intdiv.cu
      {"intdiv", "divmod_i32", k_exact, run_divmod_i32},
      {"intdiv", "divmod_u32", k_exact, run_divmod_u32},
      {"intdiv", "divmod_i64", k_exact, run_divmod_i64},
      {"intdiv", "divmod_u64", k_exact, run_divmod_u64},
      {"intdiv", "reverse_axes_3d", k_exact, run_reverse_axes_3d},
      // math.cu
      {"math", "gelu_tanh_f32",
       "|err| <= |x| 2^-22 + 2 ulp: tanhf within 2 ulp (CUDA Programming Guide), u computed "
       "exactly as the PTX does",
       run_gelu_tanh_f32},
      {"math", "gelu_tanh_fast_f32",
       "|err| <= |x| ((1 - tanh u) 4e-6 + 2^-22) + 2 ulp: __expf within 2 + floor(1.173 |2u|) <= "
       "25 ulp, "
       "__fdividef within 2 ulp",
       run_gelu_tanh_fast_f32},
      {"math", "softplus_exp_log_f32",
       "2^-20 relative: expf within 2 ulp, log1pf within 1 ulp; x > 20 exact",
       run_softplus_exp_log_f32},
      {"math", "logsig_f32",
       "sig: 2^-20 relative (expf 2 ulp, IEEE reciprocal); log: 2 ulp of log(sig as computed) "
       "(logf 1 ulp)",
       run_logsig_f32},
      {"math", "logsig_fast_f32",
       "sig: 1e-5 relative (__expf <= 25 ulp for |x| <= 20, __fdividef 2 ulp); log: 2^-21 + 4 ulp "
       "of "
       "log(sig as computed) (__logf 2^-21.41 absolute in [0.5, 2], else 3 ulp)",
       run_logsig_fast_f32},
      {"math", "dmath_f64",
       "2^-50 relative per term + 2^-52 of the result: sqrt IEEE, exp 1 ulp, sin 2 ulp (slow path "
       "included)",
       run_dmath_f64},
      // matmul.cu
      {"matmul", "sgemm_tiled",
       "exact: fmaf over k in increasing order, then fmaf(alpha, acc, beta*C)", run_sgemm_tiled},
      {"matmul", "sgemv_warp", "exact: per-lane fmaf, then the __shfl_down_sync tree",
       run_sgemv_warp},
      // memory.cu
      {"memory", "local_hist16", k_exact, run_local_hist16},
      {"memory", "lut_smoothstep_noinline",
       "exact: both __noinline__ helpers' float ops in PTX order", run_lut_smoothstep_noinline},
      {"memory", "reverse_blocks_dynsmem", k_exact, run_reverse_blocks_dynsmem},
      {"memory", "poly_eval_const", "exact: Horner with fmaf", run_poly_eval_const},
      {"memory", "palette_lookup_const", k_exact, run_palette_lookup_const},
      {"memory", "scale_struct_arg", k_exact, run_scale_struct_arg},
      {"memory", "crop3d", k_exact, run_crop3d},
      // reduction.cu
      {"reduction", "reduce_sum_smem_f32",
       "exact: per-thread grid-stride sums and the shared-memory tree mirrored",
       run_reduce_sum_smem_f32},
      {"reduction", "reduce_sum_shfl_f32",
       "exact: grid-stride sums, shuffle tree and warp order mirrored", run_reduce_sum_shfl_f32},
      {"reduction", "reduce_sum_atomic_f32",
       "NONDETERMINISTIC: |got - sum of warp sums| <= (warps - 1) 2^-24 sum |warp sums| (any "
       "atomic order)",
       run_reduce_sum_atomic_f32},
      {"reduction", "reduce_max_atomic_i32", "exact (integer max commutes)",
       run_reduce_max_atomic_i32},
      {"reduction", "dot_f64", "exact: fma grid-stride sums and the shared-memory tree mirrored",
       run_dot_f64},
      {"reduction", "reduce_max_cas_f32", "exact (max of the non-NaN inputs; max commutes)",
       run_reduce_max_cas_f32},
      {"reduction", "reduce_sum_lastblock_f32",
       "exact: partials, block-order total, counter reset; launched twice",
       run_reduce_sum_lastblock_f32},
      // scan.cu
      {"scan", "scan_inclusive_block_i32", k_exact, run_scan_inclusive_block_i32},
      {"scan", "scan_exclusive_warp_i32", k_exact, run_scan_exclusive_warp_i32},
      {"scan", "scan_add_block_offsets_i32", k_exact, run_scan_add_block_offsets_i32},
      // softmax_layernorm.cu
      {"softmax_layernorm", "softmax_rows_f32",
       "1e-5 relative: expf within 2 ulp, float sums over <= 1000 terms (~1e-6), IEEE reciprocal",
       run_softmax_rows_f32},
      {"softmax_layernorm", "softmax_rows_warp_fast_f32",
       "1e-5 relative: __expf within 2 + floor(1.173 |x - max|) <= 9 ulp on [-6, 0], __fdividef 2 "
       "ulp, float sums",
       run_softmax_rows_warp_fast_f32},
      {"softmax_layernorm", "layernorm_rows_f32",
       "|err| <= |(x - mean) rstd gamma| 2^-20 + 1 ulp: mean/variance mirrored exactly, rsqrtf "
       "within 2 ulp",
       run_layernorm_rows_f32},
      {"softmax_layernorm", "rmsnorm_rows_f16",
       "1 binary16 ulp: sum of squares mirrored exactly, rsqrtf within 2 ulp may move the final "
       "rounding",
       run_rmsnorm_rows_f16},
      // tensor.cu
      {"tensor", "hgemm_mma_f16",
       "small-integer inputs exact (every sum fits f32, on the tensor path and the sm_75 fmaf "
       "fallback); fractions within K 2^-22 sum_k |a b| of the double sum (one rounding per mma "
       "or per fmaf, and a GPU's tensor-core bound)",
       run_hgemm_mma_f16},
      {"tensor", "flash_attn_tile_f16",
       "within 2^-10 sum_j p_j |v_j| / l + 2^-24 sum_j |v_j| / l of the double softmax(scale Q "
       "K^T) V: P rounded to binary16 (2^-11 relative, 2^-25 absolute below its normals), "
       "twice that for f32 scores, exp2f (ex2.approx) and sums",
       run_flash_attn_tile_f16},
      // transpose.cu
      {"transpose", "transpose_naive_f32", k_exact, run_transpose_naive_f32},
      {"transpose", "transpose_tiled_f32", k_exact, run_transpose_tiled_f32},
      // warp.cu
      {"warp", "warp_vote_stats", k_exact, run_warp_vote_stats},
      {"warp", "compact_gt_ballot",
       "NONDETERMINISTIC order: *counter exact, out[0..*counter) as a multiset, the rest untouched",
       run_compact_gt_ballot},
      {"warp", "warp_match_count", k_exact, run_warp_match_count},
  };
  return kernels;
}

const CorpusKernel* find_corpus_kernel(std::string_view entry) {
  for (const auto& k : corpus_kernels()) {
    if (k.entry == entry) return &k;
  }
  return nullptr;
}

CorpusRunResult run_corpus_kernel(const CorpusKernel& kernel, CUfunction function,
                                  const CorpusRunOptions& options) {
  CorpusRunResult result;
  t_readbacks = &result.readback_digests;
  {
    Harness h(kernel, function, options, result);
    try {
      kernel.run(h);
    } catch (const DriverFailure& e) {
      h.fail(e.what());
    } catch (const std::exception& e) {
      h.fail(std::string("harness error: ") + e.what());
    }
  }
  t_readbacks = nullptr;
  return result;
}

} // namespace hone::test
