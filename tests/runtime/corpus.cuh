// What every program of the runtime corpus shares: failing the way the corpus promises (exit 2
// after `error: <call>: <cudaGetErrorName>` when a CUDA call fails, exit 1 after `wrong: ...` when
// a result or an expected error is not what it should be) and a checksum of results to print.
// Nothing of hone: cuda_runtime.h only.
#pragma once

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace corpus {

// A CUDA call that must succeed.
inline void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  std::printf("error: %s: %s\n", call, cudaGetErrorName(e));
  std::fflush(stdout);
  std::exit(2);
}

// A wrong result: say which, and exit 1.
[[noreturn]] inline void wrong(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::printf("wrong: ");
  std::vprintf(format, args);
  std::printf("\n");
  va_end(args);
  std::fflush(stdout);
  std::exit(1);
}

// A CUDA call that must fail with exactly `want`; the failure is then the thread's last error,
// which cudaGetLastError returns once and clears (so later launch checks start clean).
inline void check_error(cudaError_t got, cudaError_t want, const char* call) {
  if (got != want) {
    wrong("%s: %s, expected %s", call, cudaGetErrorName(got), cudaGetErrorName(want));
  }
  cudaError_t last = cudaGetLastError();
  if (last != want) {
    wrong("%s: last error %s, expected %s", call, cudaGetErrorName(last), cudaGetErrorName(want));
  }
  if (cudaError_t again = cudaGetLastError(); again != cudaSuccess) {
    wrong("%s: last error %s after cudaGetLastError", call, cudaGetErrorName(again));
  }
}

// A <<<>>> launch that must have failed with exactly `want`: cudaPeekAtLastError reports it and
// keeps it, cudaGetLastError reports it once and clears it.
inline void check_launch_error(cudaError_t want, const char* launch) {
  cudaError_t peeked = cudaPeekAtLastError();
  if (peeked != want) {
    wrong("%s: %s, expected %s", launch, cudaGetErrorName(peeked), cudaGetErrorName(want));
  }
  if (cudaError_t again = cudaPeekAtLastError(); again != want) {
    wrong("%s: peeked again: %s", launch, cudaGetErrorName(again));
  }
  if (cudaError_t got = cudaGetLastError(); got != want) {
    wrong("%s: last error %s, expected %s", launch, cudaGetErrorName(got), cudaGetErrorName(want));
  }
  if (cudaError_t after = cudaGetLastError(); after != cudaSuccess) {
    wrong("%s: last error %s after cudaGetLastError", launch, cudaGetErrorName(after));
  }
}

// FNV-1a over bytes: one line of output says whether every result matched a reference run.
struct Checksum {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void add(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
  template <class T> void add_all(const T* data, std::size_t count) {
    add(data, count * sizeof(T));
  }
  unsigned long long value() const { return h; }
};

// A deterministic pseudo-random sequence for inputs (xorshift32).
struct Random {
  std::uint32_t s;
  explicit Random(std::uint32_t seed) : s(seed ? seed : 1u) {}
  std::uint32_t next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
  // An integer in [lo, hi].
  int in(int lo, int hi) { return lo + int(next() % std::uint32_t(hi - lo + 1)); }
};

} // namespace corpus

#define CHECK(call) corpus::check((call), #call)
#define CHECK_ERROR(call, want) corpus::check_error((call), (want), #call)
// A <<<>>> launch has no result of its own: the configuration's error is the last error.
#define CHECK_LAUNCH(what) corpus::check(cudaGetLastError(), what)
#define CHECK_LAUNCH_ERROR(what, want) corpus::check_launch_error((want), what)
