// Launch hooks: the fast path every kernel launch of the application takes.
//
// For a function already seen: one lock-free table lookup (which also yields the variant serving
// the handle, if any), two relaxed loads (is a timed launch or a capture due?), the real call, then
// one relaxed atomic add and three relaxed loads (stores only when the launch shape changed).
// No allocation, lock, system call or getenv. A served variant adds its guard check: the block
// shape and the bytes of the specialized scalars, and for a no_alias guard one driver query per
// pointer field (the allocation it lies in). The slow paths (a function never seen, a launch
// picked for timing or capture) are out of line.
#include "shim/capture.hpp"
#include "shim/config.hpp"
#include "shim/cuda_abi.hpp"
#include "shim/launch_args.hpp"
#include "shim/log.hpp"
#include "shim/real.hpp"
#include "shim/registry.hpp"
#include "shim/sampler.hpp"
#include "shim/shim.hpp"
#include "shim/trace.hpp"

#include <cstring>

using namespace hone::shim;

namespace {

__attribute__((noinline)) const FunctionTable::Slot* unknown(CUfunction f) {
  registry().function_unknown(f);
  on_activity();
  return registry().functions.find_slot(f);
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
inline void count(KernelRecord* r, const LaunchArgs& a) {
  r->launches.fetch_add(1, std::memory_order_relaxed);
  uint64_t grid = uint64_t(a.grid[0]) | uint64_t(a.grid[1]) << 32;
  uint64_t block = uint64_t(a.block[0]) | uint64_t(a.block[1]) << 16 | uint64_t(a.block[2]) << 32;
  if (r->grid.load(std::memory_order_relaxed) != grid) r->grid.store(grid, std::memory_order_relaxed);
  if (r->grid_z.load(std::memory_order_relaxed) != a.grid[2]) {
    r->grid_z.store(a.grid[2], std::memory_order_relaxed);
  }
  if (r->block.load(std::memory_order_relaxed) != block) r->block.store(block, std::memory_order_relaxed);
}

// Do the launch's pointer fields lie in pairwise distinct allocations? (a no_alias guard: a
// variant reading through ld.global.nc would miss the launch's writes to an aliased buffer)
// A null pointer points nowhere and is skipped, and so is a field that may hold data (of a
// parameter read through its address) whose value is in no allocation; any other pointer the
// driver cannot place fails the guard. Stack only: Swap::k_max_alias_fields bounds the fields.
__attribute__((noinline)) bool pointers_distinct(const Swap& s, const LaunchArgs& a) {
  using GetRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  auto range = real_as<GetRange>(Fn::cuMemGetAddressRange_v2);
  if (!range || s.alias_fields.size() > Swap::k_max_alias_fields) return false;
  const uint8_t* buffer = nullptr;
  size_t size = 0;
  if (!a.params && !extra_buffer(a.extra, &buffer, &size)) return false;
  CUdeviceptr bases[Swap::k_max_alias_fields];
  size_t n = 0;
  for (const PointerField& f : s.alias_fields) {
    CUdeviceptr pointer;
    if (a.params) {
      if (!a.params[f.param]) return false;
      std::memcpy(&pointer, static_cast<const uint8_t*>(a.params[f.param]) + f.field,
                  sizeof pointer);
    } else {
      if (f.offset + sizeof pointer > size) return false;
      std::memcpy(&pointer, buffer + f.offset, sizeof pointer);
    }
    if (!pointer) continue;
    CUdeviceptr base = 0;
    size_t bytes = 0;
    if (range(&base, &bytes, pointer) != CUDA_SUCCESS) {
      if (f.certain) return false;
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      if (bases[i] == base) return false;
    }
    bases[n++] = base;
  }
  return true;
}

// Does this launch pass the variant's guard? (DESIGN.md, "Hot swap")
inline bool guard_passes(const Swap& s, const LaunchArgs& a) {
  for (int i = 0; i < 3; ++i) {
    if (s.guard.block[size_t(i)] && s.guard.block[size_t(i)] != a.block[i]) return false;
  }
  if (!s.guard.scalars.empty()) {
    const uint8_t* buffer = nullptr;
    size_t size = 0;
    if (!a.params && !extra_buffer(a.extra, &buffer, &size)) return false;
    for (const auto& sc : s.guard.scalars) {
      const void* p;
      if (a.params) {
        p = a.params[sc.param];
      } else {
        if (sc.offset + sc.bytes.size() > size) return false;
        p = buffer + sc.offset;
      }
      if (!p || std::memcmp(p, sc.bytes.data(), sc.bytes.size()) != 0) return false;
    }
  }
  if (s.kernel_handle) {
    // a CUkernel launches in the current context; the variant was loaded for one context
    CUcontext ctx = nullptr;
    auto get = real_as<CUresult (*)(CUcontext*)>(Fn::cuCtxGetCurrent);
    if (!get || get(&ctx) != CUDA_SUCCESS || ctx != s.context) return false;
  }
  // last: the one check that costs driver calls
  return !s.guard.no_alias || pointers_distinct(s, a);
}

template <class Call> CUresult run(KernelRecord* r, CUfunction f, const LaunchArgs& a, Call&& call) {
  uint64_t due = sample_due(r);
  if (__builtin_expect(due == 0, 1)) return call(f);
  SampleSlot slot;
  if (!sample_begin(a.stream, a.per_thread, &slot)) return call(f);
  CUresult res = call(f);
  sample_end(slot, a.stream, a.per_thread, r, res == CUDA_SUCCESS);
  if (res != CUDA_SUCCESS) r->next_sample.store(due, std::memory_order_relaxed); // turn back
  return res;
}

// The variant, when the guard passes; the original otherwise or when the variant's launch fails.
template <class Call>
__attribute__((noinline)) CUresult swapped(KernelRecord* r, const Swap* s, CUfunction f,
                                           const LaunchArgs& a, Call&& call) {
  if (guard_passes(*s, a)) {
    CUresult res = run(r, static_cast<CUfunction>(s->function), a, call);
    if (res == CUDA_SUCCESS) {
      r->variant_launches.fetch_add(1, std::memory_order_relaxed);
      return res;
    }
    r->fallbacks.fetch_add(1, std::memory_order_relaxed);
    if (first_time(Once::variant_failed)) {
      log(Level::warn, "a variant of %s failed to launch (error %d); running the original",
          r->key.entry.c_str(), int(res));
    }
  }
  return run(r, f, a, call);
}

template <class Call>
__attribute__((noinline)) CUresult captured(KernelRecord* r, CUfunction f, const LaunchArgs& a,
                                            Call&& call) {
  return CUresult(capture_launch(r, f, a, [&] { return int(call(f)); }));
}

template <class Call> inline CUresult launch(CUfunction f, const LaunchArgs& a, Call&& call) {
  if (!enabled()) return call(f);
  const FunctionTable::Slot* slot = registry().functions.find_slot(f);
  if (__builtin_expect(!slot, 0)) slot = unknown(f);
  KernelRecord* r = slot ? slot->record.load(std::memory_order_acquire) : nullptr;
  if (__builtin_expect(!r, 0)) return call(f);
  CUresult res;
  const Swap* s = slot->swap.load(std::memory_order_acquire);
  if (__builtin_expect(r->capture_pending.load(std::memory_order_relaxed) != 0, 0)) {
    res = captured(r, f, a, call); // captures always run (and measure) the original
  } else if (s) {
    res = swapped(r, s, f, a, call);
  } else {
    res = run(r, f, a, call);
  }
  if (__builtin_expect(res == CUDA_SUCCESS, 1)) count(r, a);
  return res;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
               unsigned bz, unsigned shmem, CUstream s, void** params, void** extra) {
  HONE_TRACE_HOOK(cuLaunchKernel);
  auto real = real_as<decltype(&cuLaunchKernel)>(Fn::cuLaunchKernel);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  LaunchArgs a{{gx, gy, gz}, {bx, by, bz}, shmem, s, false, params, extra};
  return launch(f, a, [&](CUfunction fn) {
    return real(fn, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
  });
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                    unsigned bz, unsigned shmem, CUstream s, void** params, void** extra) {
  HONE_TRACE_HOOK(cuLaunchKernel_ptsz);
  auto real = real_as<decltype(&cuLaunchKernel_ptsz)>(Fn::cuLaunchKernel_ptsz);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  LaunchArgs a{{gx, gy, gz}, {bx, by, bz}, shmem, s, true, params, extra};
  return launch(f, a, [&](CUfunction fn) {
    return real(fn, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
  });
}

// The launch attributes travel untouched to the driver: the shim only reads the shape.
__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  HONE_TRACE_HOOK(cuLaunchKernelEx);
  auto real = real_as<decltype(&cuLaunchKernelEx)>(Fn::cuLaunchKernelEx);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!config) return real(config, f, params, extra);
  LaunchArgs a{{config->gridDimX, config->gridDimY, config->gridDimZ},
               {config->blockDimX, config->blockDimY, config->blockDimZ},
               config->sharedMemBytes, config->hStream, false, params, extra};
  return launch(f, a, [&](CUfunction fn) { return real(config, fn, params, extra); });
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  HONE_TRACE_HOOK(cuLaunchKernelEx_ptsz);
  auto real = real_as<decltype(&cuLaunchKernelEx_ptsz)>(Fn::cuLaunchKernelEx_ptsz);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!config) return real(config, f, params, extra);
  LaunchArgs a{{config->gridDimX, config->gridDimY, config->gridDimZ},
               {config->blockDimX, config->blockDimY, config->blockDimZ},
               config->sharedMemBytes, config->hStream, true, params, extra};
  return launch(f, a, [&](CUfunction fn) { return real(config, fn, params, extra); });
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, CUstream s, void** params) {
  HONE_TRACE_HOOK(cuLaunchCooperativeKernel);
  auto real = real_as<decltype(&cuLaunchCooperativeKernel)>(Fn::cuLaunchCooperativeKernel);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  LaunchArgs a{{gx, gy, gz}, {bx, by, bz}, shmem, s, false, params, nullptr};
  return launch(f, a, [&](CUfunction fn) {
    return real(fn, gx, gy, gz, bx, by, bz, shmem, s, params);
  });
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, CUstream s,
                               void** params) {
  HONE_TRACE_HOOK(cuLaunchCooperativeKernel_ptsz);
  auto real =
      real_as<decltype(&cuLaunchCooperativeKernel_ptsz)>(Fn::cuLaunchCooperativeKernel_ptsz);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  LaunchArgs a{{gx, gy, gz}, {bx, by, bz}, shmem, s, true, params, nullptr};
  return launch(f, a, [&](CUfunction fn) {
    return real(fn, gx, gy, gz, bx, by, bz, shmem, s, params);
  });
}

} // extern "C"
