// Launch hooks: the fast path every kernel launch of the application takes.
//
// For a function already seen: one lock-free table lookup, a relaxed load (is a timed launch
// due?), the real call, then one relaxed atomic add and three relaxed loads (stores only when the
// launch shape changed). No allocation, lock,
// system call or getenv. The slow paths (a function never seen, a launch picked for timing) are
// out of line.
#include "shim/cuda_abi.hpp"
#include "shim/config.hpp"
#include "shim/real.hpp"
#include "shim/registry.hpp"
#include "shim/sampler.hpp"
#include "shim/shim.hpp"

using namespace hone::shim;

namespace {

__attribute__((noinline)) KernelRecord* unknown(CUfunction f) {
  KernelRecord* r = registry().function_unknown(f);
  on_activity();
  return r;
}

inline KernelRecord* record_of(CUfunction f) {
  KernelRecord* r = registry().functions.find(f);
  return __builtin_expect(r != nullptr, 1) ? r : unknown(f);
}

// Is this launch the one to time? Claims the sample so only one thread takes it; returns the
// claimed launch number (0: not this one).
inline uint64_t sample_due(KernelRecord* r) {
  uint64_t due = r->next_sample.load(std::memory_order_relaxed);
  if (__builtin_expect(!due, 1)) return 0;
  uint64_t n = r->launches.load(std::memory_order_relaxed) + 1;
  if (n < due) return 0;
  return r->next_sample.compare_exchange_strong(due, n + config().sample_every,
                                                std::memory_order_relaxed)
             ? due
             : 0;
}

// Count a launch the driver accepted (a refused launch ran nothing), and its shape.
inline void count(KernelRecord* r, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                  unsigned by, unsigned bz) {
  r->launches.fetch_add(1, std::memory_order_relaxed);
  uint64_t grid = uint64_t(gx) | uint64_t(gy) << 32;
  uint64_t block = uint64_t(bx) | uint64_t(by) << 16 | uint64_t(bz) << 32;
  if (r->grid.load(std::memory_order_relaxed) != grid) r->grid.store(grid, std::memory_order_relaxed);
  if (r->grid_z.load(std::memory_order_relaxed) != gz) r->grid_z.store(gz, std::memory_order_relaxed);
  if (r->block.load(std::memory_order_relaxed) != block) r->block.store(block, std::memory_order_relaxed);
}

// Time this launch with events around it on its own stream.
template <class Call>
__attribute__((noinline)) CUresult timed(KernelRecord* r, CUstream stream, bool per_thread,
                                         Call&& call) {
  SampleSlot slot;
  if (!sample_begin(stream, per_thread, &slot)) return call();
  CUresult res = call();
  sample_end(slot, stream, per_thread, r, res == CUDA_SUCCESS);
  return res;
}

template <class Call>
inline CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, CUstream stream, bool per_thread, Call&& call) {
  if (!enabled()) return call();
  KernelRecord* r = record_of(f);
  if (__builtin_expect(!r, 0)) return call();
  uint64_t due = sample_due(r);
  if (__builtin_expect(due == 0, 1)) {
    CUresult res = call();
    if (__builtin_expect(res == CUDA_SUCCESS, 1)) count(r, gx, gy, gz, bx, by, bz);
    return res;
  }
  CUresult res = timed(r, stream, per_thread, call);
  if (res == CUDA_SUCCESS) {
    count(r, gx, gy, gz, bx, by, bz);
  } else {
    r->next_sample.store(due, std::memory_order_relaxed); // a refused launch gives its turn back
  }
  return res;
}

template <class F> inline F real_fn(Fn f) { return real_as<F>(f); }

} // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
               unsigned bz, unsigned shmem, CUstream s, void** params, void** extra) {
  auto real = real_fn<decltype(&cuLaunchKernel)>(Fn::cuLaunchKernel);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  return launch(f, gx, gy, gz, bx, by, bz, s, false,
                [&] { return real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra); });
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                    unsigned bz, unsigned shmem, CUstream s, void** params, void** extra) {
  auto real = real_fn<decltype(&cuLaunchKernel_ptsz)>(Fn::cuLaunchKernel_ptsz);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  return launch(f, gx, gy, gz, bx, by, bz, s, true,
                [&] { return real(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra); });
}

// The launch attributes travel untouched to the driver: the shim only reads the shape.
__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  auto real = real_fn<decltype(&cuLaunchKernelEx)>(Fn::cuLaunchKernelEx);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!config) return real(config, f, params, extra);
  return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                config->blockDimY, config->blockDimZ, config->hStream, false,
                [&] { return real(config, f, params, extra); });
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  auto real = real_fn<decltype(&cuLaunchKernelEx_ptsz)>(Fn::cuLaunchKernelEx_ptsz);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!config) return real(config, f, params, extra);
  return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                config->blockDimY, config->blockDimZ, config->hStream, true,
                [&] { return real(config, f, params, extra); });
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, CUstream s, void** params) {
  auto real = real_fn<decltype(&cuLaunchCooperativeKernel)>(Fn::cuLaunchCooperativeKernel);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  return launch(f, gx, gy, gz, bx, by, bz, s, false,
                [&] { return real(f, gx, gy, gz, bx, by, bz, shmem, s, params); });
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, CUstream s,
                               void** params) {
  auto real =
      real_fn<decltype(&cuLaunchCooperativeKernel_ptsz)>(Fn::cuLaunchCooperativeKernel_ptsz);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  return launch(f, gx, gy, gz, bx, by, bz, s, true,
                [&] { return real(f, gx, gy, gz, bx, by, bz, shmem, s, params); });
}

} // extern "C"
