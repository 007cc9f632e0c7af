// Launch hooks: the path every kernel launch of the application takes.
//
// The fast path (fast(), shim/fast_path.hpp), for a kernel this thread launched before: the shim's
// divert word, one probe of the function table, the record's divert word (a capture due, a variant
// serving), this thread's counters of the kernel (is a timed launch due?), the launch counted in
// them (a load and a store to a line no other thread writes, shim/counts.hpp), then the driver.
// No locked instruction, allocation, lock, system call or getenv. On x86-64 the exported entry
// points are assembly stubs that make the same checks (launch_stubs_x86_64.cpp); elsewhere the C++
// hooks at the end of this file do.
//
// Everything else takes the hook's full path, out of line (hone_full_*): a function never seen or
// first launched on this thread, a timed launch (which also records the launch's shape), a
// capture, a stream being captured, tracing, and a served variant with its guard check (the block
// shape and the bytes of the specialized scalars, and for a no_alias guard one driver query per
// pointer field).
#include "shim/capture.hpp"
#include "shim/config.hpp"
#include "shim/counts.hpp"
#include "shim/fast_path.hpp"
#include "shim/graph.hpp"
#include "shim/guard_check.hpp"
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

// Is this launch one to time? Each thread times launch HONE_SAMPLE_EVERY, 2 x HONE_SAMPLE_EVERY,
// ... of each kernel it launches (its own counts, shim/counts.hpp: no other thread writes them).
inline bool sample_due(KernelRecord* r) {
  counts::Pair& p = counts::of(r->index);
  const uint64_t every = config().sample_every;
  if (!every) {
    p.next_sample = UINT64_MAX;
    return false;
  }
  const uint64_t n = p.launches.load(std::memory_order_relaxed) + 1; // this launch's number
  if (!p.next_sample) p.next_sample = every;
  if (n < p.next_sample) return false;
  p.next_sample = n + every;
  return true;
}

// Count a launch the driver accepted (a refused launch ran nothing), and its shape.
inline void count(KernelRecord* r, const LaunchArgs& a) {
  counts::bump(counts::of(r->index).launches);
  uint64_t grid = uint64_t(a.grid[0]) | uint64_t(a.grid[1]) << 32;
  uint64_t block = uint64_t(a.block[0]) | uint64_t(a.block[1]) << 16 | uint64_t(a.block[2]) << 32;
  if (r->grid.load(std::memory_order_relaxed) != grid) r->grid.store(grid, std::memory_order_relaxed);
  if (r->grid_z.load(std::memory_order_relaxed) != a.grid[2]) {
    r->grid_z.store(a.grid[2], std::memory_order_relaxed);
  }
  if (r->block.load(std::memory_order_relaxed) != block) r->block.store(block, std::memory_order_relaxed);
}

// A launch the driver refused. Until the driver accepts one of the kernel's launches on this
// thread, its launches there keep to the full path, which counts only accepted ones (the fast path
// counts a launch as it hands it to the driver).
inline void refused(KernelRecord* r) {
  counts::Pair& p = counts::of(r->index);
  if (p.launches.load(std::memory_order_relaxed) == 0) p.next_sample = 0;
}

template <class Call>
__attribute__((noinline)) CUresult timed(KernelRecord* r, CUfunction f, const LaunchArgs& a,
                                         Call&& call) {
  SampleSlot slot;
  if (!sample_begin(a.stream, a.per_thread, &slot)) return call(f, a);
  CUresult res = call(f, a);
  sample_end(slot, a.stream, a.per_thread, r, res == CUDA_SUCCESS);
  if (res != CUDA_SUCCESS) { // nothing ran: time the next launch instead
    counts::Pair& p = counts::of(r->index);
    p.next_sample = p.launches.load(std::memory_order_relaxed) + 1;
  }
  return res;
}

template <class Call>
inline CUresult run(KernelRecord* r, CUfunction f, const LaunchArgs& a, Call&& call) {
  if (__builtin_expect(!sample_due(r), 1)) return call(f, a);
  return timed(r, f, a, call);
}

// The variant, when the guard passes; the original otherwise or when the variant's launch fails.
template <class Call>
__attribute__((noinline)) CUresult swapped(KernelRecord* r, const Swap* s, CUfunction f,
                                           const LaunchArgs& a, Call&& call) {
  if (guard_passes(*s, a)) {
    // A reshaping variant runs with its own block size (guard_passes checked that it applies).
    LaunchArgs v = a;
    reshaped(s->guard, a.grid, a.block, v.grid, v.block);
    CUresult res = run(r, static_cast<CUfunction>(s->function), v, call);
    if (res == CUDA_SUCCESS) {
      counts::bump(counts::of(r->index).variant_launches);
      return res;
    }
    r->fallbacks.fetch_add(1, std::memory_order_relaxed);
    if (first_time(Once::variant_failed)) {
      log(Level::warn, "a variant of %s failed to launch (error %d); running the original",
          r->key.entry.c_str(), int(res));
    }
  } else {
    r->guard_misses.fetch_add(1, std::memory_order_relaxed);
  }
  return run(r, f, a, call);
}

template <class Call>
__attribute__((noinline)) CUresult captured(KernelRecord* r, CUfunction f, const LaunchArgs& a,
                                            Call&& call) {
  return CUresult(capture_launch(r, f, a, [&] { return int(call(f, a)); }));
}

// A shadow check's capture (the daemon asked for one of a served launch): the variant runs, its
// outputs are copied after it, and honed compares them with the original's on the same inputs.
// A variant launch that fails runs the original, as swapped() does.
template <class Call>
__attribute__((noinline)) CUresult shadowed(KernelRecord* r, const Swap* s, CUfunction f,
                                            const LaunchArgs& a, Call&& call) {
  const auto variant = static_cast<CUfunction>(s->function);
  LaunchArgs v = a; // the capture records the launch as the application made it
  reshaped(s->guard, a.grid, a.block, v.grid, v.block);
  CUresult res =
      CUresult(capture_launch(r, s->function, a, [&] { return int(call(variant, v)); }));
  if (res == CUDA_SUCCESS) {
    counts::bump(counts::of(r->index).variant_launches);
    return res;
  }
  r->fallbacks.fetch_add(1, std::memory_order_relaxed);
  return call(f, a);
}

// A launch into a stream being captured into a graph runs nothing now: it is not counted, timed
// or captured (the replays of the graph are). It is recorded as the variant serving the kernel
// when the guard passes, so the graph made from the capture starts out served; the shim keeps
// the variant's origin so the node reads, and is restored, as the application's. A variant that
// reshapes the launch is not recorded: the node is recorded as the application launched it, and
// the executable graph's node is reshaped before its first replay (shim/graph.cpp, reconcile).
template <class Call>
__attribute__((noinline)) CUresult recorded(const Swap* s, CUfunction f, const LaunchArgs& a,
                                            Call&& call) {
  if (s && !s->guard.reshape_block && guard_passes(*s, a)) {
    CUresult res = call(static_cast<CUfunction>(s->function), a);
    if (res == CUDA_SUCCESS) {
      note_captured_variant(s->function, f);
      return res;
    }
  }
  return call(f, a);
}

// `config` with the shape of `l`: the application's own config when the shape is its own, else a
// copy on this thread (a reshaping variant; the attributes array is shared, never written).
inline const CUlaunchConfig* shaped(const CUlaunchConfig* config, const LaunchArgs& l) {
  if (config->gridDimX == l.grid[0] && config->gridDimY == l.grid[1] &&
      config->gridDimZ == l.grid[2] && config->blockDimX == l.block[0] &&
      config->blockDimY == l.block[1] && config->blockDimZ == l.block[2]) {
    return config;
  }
  thread_local CUlaunchConfig copy;
  copy = *config;
  copy.gridDimX = l.grid[0];
  copy.gridDimY = l.grid[1];
  copy.gridDimZ = l.grid[2];
  copy.blockDimX = l.block[0];
  copy.blockDimY = l.block[1];
  copy.blockDimZ = l.block[2];
  return &copy;
}

// `call(fn, shape)` launches `fn` with the launch's arguments and that grid and block.
template <class Call> inline CUresult launch(CUfunction f, const LaunchArgs& a, Call&& call) {
  if (!enabled()) return call(f, a);
  const FunctionTable::Slot* slot = g_function_table.find_slot(f);
  if (__builtin_expect(!slot, 0)) slot = unknown(f);
  KernelRecord* r = slot ? slot->record.load(std::memory_order_acquire) : nullptr;
  if (__builtin_expect(!r, 0)) return call(f, a);
  CUresult res;
  const Swap* s = slot->swap.load(std::memory_order_acquire);
  if (__builtin_expect(stream_captures() != 0, 0) &&
      stream_capturing(a.stream, a.per_thread)) {
    return recorded(s, f, a, call);
  }
  if (__builtin_expect(r->captures_pending() != 0, 0)) {
    if (!r->capture_shadow.load(std::memory_order_acquire)) {
      res = captured(r, f, a, call); // captures always run (and measure) the original
    } else if (s && guard_passes(*s, a)) {
      res = shadowed(r, s, f, a, call); // ... except a shadow check's: the variant
    } else if (s) {
      res = swapped(r, s, f, a, call); // not served: nothing to shadow-check
    } else {
      res = run(r, f, a, call);
    }
  } else if (s) {
    res = swapped(r, s, f, a, call);
  } else {
    res = run(r, f, a, call);
  }
  if (__builtin_expect(res == CUDA_SUCCESS, 1)) {
    count(r, a);
  } else {
    refused(r);
  }
  return res;
}


} // namespace

// The full path of each hook, out of line, so that the hooks themselves stay small: what fast()
// does not let through goes here, which traces the call, resolves the driver's entry point, and
// takes the launch path of launch(). Named in C, for the entry stubs (launch_stubs_x86_64.cpp).
extern "C" {
__attribute__((noinline, visibility("hidden"))) CUresult
hone_full_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shmem, CUstream s, void** params,
                         void** extra) {
  HONE_TRACE_HOOK(cuLaunchKernel);
  auto real = real_as<decltype(&cuLaunchKernel)>(Fn::cuLaunchKernel);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  LaunchArgs a{{gx, gy, gz}, {bx, by, bz}, shmem, s, false, params, extra};
  return launch(f, a, [=](CUfunction fn, const LaunchArgs& l) {
    return real(fn, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], shmem, s,
                params, extra);
  });
}

__attribute__((noinline, visibility("hidden"))) CUresult
hone_full_cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shmem, CUstream s, void** params,
                              void** extra) {
  HONE_TRACE_HOOK(cuLaunchKernel_ptsz);
  auto real = real_as<decltype(&cuLaunchKernel_ptsz)>(Fn::cuLaunchKernel_ptsz);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  LaunchArgs a{{gx, gy, gz}, {bx, by, bz}, shmem, s, true, params, extra};
  return launch(f, a, [=](CUfunction fn, const LaunchArgs& l) {
    return real(fn, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], shmem, s,
                params, extra);
  });
}

// The launch attributes travel untouched to the driver: the shim only reads the shape.
__attribute__((noinline, visibility("hidden"))) CUresult
hone_full_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                           void** extra) {
  HONE_TRACE_HOOK(cuLaunchKernelEx);
  auto real = real_as<decltype(&cuLaunchKernelEx)>(Fn::cuLaunchKernelEx);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!config) return real(config, f, params, extra);
  LaunchArgs a{{config->gridDimX, config->gridDimY, config->gridDimZ},
               {config->blockDimX, config->blockDimY, config->blockDimZ},
               config->sharedMemBytes,
               config->hStream,
               false,
               params,
               extra};
  return launch(f, a, [=](CUfunction fn, const LaunchArgs& l) {
    return real(shaped(config, l), fn, params, extra);
  });
}

__attribute__((noinline, visibility("hidden"))) CUresult
hone_full_cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                void** extra) {
  HONE_TRACE_HOOK(cuLaunchKernelEx_ptsz);
  auto real = real_as<decltype(&cuLaunchKernelEx_ptsz)>(Fn::cuLaunchKernelEx_ptsz);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!config) return real(config, f, params, extra);
  LaunchArgs a{{config->gridDimX, config->gridDimY, config->gridDimZ},
               {config->blockDimX, config->blockDimY, config->blockDimZ},
               config->sharedMemBytes,
               config->hStream,
               true,
               params,
               extra};
  return launch(f, a, [=](CUfunction fn, const LaunchArgs& l) {
    return real(shaped(config, l), fn, params, extra);
  });
}

__attribute__((noinline, visibility("hidden"))) CUresult
hone_full_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                    CUstream s, void** params) {
  HONE_TRACE_HOOK(cuLaunchCooperativeKernel);
  auto real = real_as<decltype(&cuLaunchCooperativeKernel)>(Fn::cuLaunchCooperativeKernel);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  LaunchArgs a{{gx, gy, gz}, {bx, by, bz}, shmem, s, false, params, nullptr};
  return launch(f, a, [=](CUfunction fn, const LaunchArgs& l) {
    return real(fn, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], shmem, s,
                params);
  });
}

__attribute__((noinline, visibility("hidden"))) CUresult
hone_full_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                         unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                         CUstream s, void** params) {
  HONE_TRACE_HOOK(cuLaunchCooperativeKernel_ptsz);
  auto real =
      real_as<decltype(&cuLaunchCooperativeKernel_ptsz)>(Fn::cuLaunchCooperativeKernel_ptsz);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  LaunchArgs a{{gx, gy, gz}, {bx, by, bz}, shmem, s, true, params, nullptr};
  return launch(f, a, [=](CUfunction fn, const LaunchArgs& l) {
    return real(fn, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], shmem, s,
                params);
  });
}

} // extern "C"

#if !HONE_SHIM_LAUNCH_STUBS
namespace {

// The driver's entry point when it is resolved already (else the full path resolves it).
template <class T> inline T resolved(Fn f) {
  return reinterpret_cast<T>(detail::g_real[unsigned(f)].load(std::memory_order_acquire));
}

// A hook: the driver's `real` with the hook's arguments when fast() lets the launch of `f` through
// (`usable`: the arguments can be read; counted as it goes to the driver), else `full`.
template <Fn fn, class Full, class... Args>
__attribute__((always_inline)) inline CUresult hook(Full full, CUfunction f, bool usable,
                                                    Args... args) {
  const Full real = resolved<Full>(fn); // the hook's own signature, as the full path's
  if (counts::Pair* p = real && usable ? fast(f) : nullptr; __builtin_expect(p != nullptr, 1)) {
    counts::bump(p->launches);
    return real(args...);
  }
  return full(args...);
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
               unsigned bz, unsigned shmem, CUstream s, void** params, void** extra) {
  return hook<Fn::cuLaunchKernel>(&hone_full_cuLaunchKernel, f, true,
              f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                    unsigned bz, unsigned shmem, CUstream s, void** params, void** extra) {
  return hook<Fn::cuLaunchKernel_ptsz>(&hone_full_cuLaunchKernel_ptsz, f, true,
              f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return hook<Fn::cuLaunchKernelEx>(&hone_full_cuLaunchKernelEx, f, config != nullptr,
              config, f, params, extra);
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  return hook<Fn::cuLaunchKernelEx_ptsz>(&hone_full_cuLaunchKernelEx_ptsz, f, config != nullptr,
              config, f, params, extra);
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, CUstream s, void** params) {
  return hook<Fn::cuLaunchCooperativeKernel>(&hone_full_cuLaunchCooperativeKernel, f, true,
              f, gx, gy, gz, bx, by, bz, shmem, s, params);
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, CUstream s,
                               void** params) {
  return hook<Fn::cuLaunchCooperativeKernel_ptsz>(&hone_full_cuLaunchCooperativeKernel_ptsz, f, true,
              f, gx, gy, gz, bx, by, bz, shmem, s, params);
}

} // extern "C"
#endif // !HONE_SHIM_LAUNCH_STUBS
