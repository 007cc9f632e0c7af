// The workload every test application runs, without the CUDA API: kernel names, launch counts and
// shapes, deterministic inputs, host references, and the lines the applications print.
//
// Test applications are ordinary CUDA programs: this header and workload_driver.hpp are all they
// share, and neither includes anything of hone. C++17, so nvcc can compile it into
// hone-testapp-runtime. shim_test includes it too, to know what the applications did.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace testapp {

enum KernelIndex { k_saxpy = 0, k_mix_bits = 1, k_blur = 2, k_kernel_count = 3 };

struct KernelSpec {
  const char* entry;    // the PTX entry (mangled) name
  const char* label;    // the short name the output uses
  int launches;         // how many times run_workload launches it
  unsigned grid[3];
  unsigned block[3];
};

// Launch counts differ per kernel so that a report which mixes kernels up cannot pass.
inline constexpr KernelSpec k_kernels[k_kernel_count] = {
    {"saxpy", "saxpy", 7, {8, 1, 1}, {128, 1, 1}},
    {"_Z8mix_bitsPjji", "mix_bits", 5, {3, 3, 1}, {64, 1, 1}},
    {"_ZN9hone_test4blurEPKiPii", "blur", 3, {3, 1, 1}, {256, 1, 1}},
};

inline constexpr int k_saxpy_n = 1000; // grid 8 x 128 covers it
inline constexpr int k_mix_n = 513;    // grid 3 x 3 x 64 covers it
inline constexpr int k_blur_n = 700;   // grid 3 x 256 covers it
inline constexpr float k_saxpy_a = 2.0f;

inline uint32_t mix_salt(int launch) { return 0x9E3779B9u * uint32_t(launch + 1); }

// Inputs: small integers (as floats for saxpy), so every result is exact in any evaluation order.
struct Inputs {
  std::vector<float> x, y;
  std::vector<uint32_t> bits;
  std::vector<int32_t> blur;

  explicit Inputs(int scale = 1) {
    for (int i = 0; i < k_saxpy_n; ++i) {
      x.push_back(float((i * scale) % 17 - 8));
      y.push_back(float(i % 5));
    }
    for (int i = 0; i < k_mix_n; ++i) bits.push_back(uint32_t(i + scale) * 2654435761u);
    for (int i = 0; i < k_blur_n; ++i) blur.push_back((i * 37 * scale) % 1001 - 500);
  }
};

// The results the kernels must produce, computed on the host.
inline void reference_saxpy(const std::vector<float>& x, std::vector<float>& y, int launches) {
  for (int l = 0; l < launches; ++l)
    for (size_t i = 0; i < y.size(); ++i) y[i] = k_saxpy_a * x[i] + y[i];
}
inline void reference_mix_bits(std::vector<uint32_t>& data, int launches) {
  for (int l = 0; l < launches; ++l) {
    for (auto& d : data) {
      uint32_t v = d ^ mix_salt(l);
      v ^= v << 13;
      v ^= v >> 17;
      v ^= v << 5;
      d = v;
    }
  }
}
// Ping-pong: launch l reads buffer l % 2 and writes the other (a = buffer 0, b = buffer 1).
inline void reference_blur(std::vector<int32_t>& a, std::vector<int32_t>& b, int launches) {
  for (int l = 0; l < launches; ++l) {
    const std::vector<int32_t>& in = l % 2 == 0 ? a : b;
    std::vector<int32_t>& out = l % 2 == 0 ? b : a;
    int n = int(in.size());
    for (int i = 0; i < n; ++i) {
      int left = in[i > 0 ? i - 1 : 0];
      int right = in[i + 1 < n ? i + 1 : n - 1];
      out[size_t(i)] = (left + 2 * in[size_t(i)] + right) >> 2;
    }
  }
}

// FNV-1a over the bit patterns of a buffer.
template <class T> uint64_t checksum(const std::vector<T>& v, uint64_t h = 0xcbf29ce484222325ull) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(T); ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

inline std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// "workload: launches saxpy=7 _Z8mix_bitsPjji=5 _ZN9hone_test4blurEPKiPii=3": what shim_test
// compares the shim's report against.
inline std::string launches_line(const int counts[k_kernel_count]) {
  std::string s = "workload: launches";
  for (int k = 0; k < k_kernel_count; ++k)
    s += std::string(" ") + k_kernels[k].entry + "=" + std::to_string(counts[k]);
  return s;
}

} // namespace testapp
