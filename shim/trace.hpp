// HONE_TRACE=1: which driver entry points an application calls, and how it found them.
//
// Every pointer the shim hands out from cuGetProcAddress[_v2], and from its dlsym for a driver
// name, becomes a trace thunk: a trampoline that logs one line on its first call and then jumps
// to the pointer it stands for with every argument register as the caller left it. The hooks an
// application reaches by linking against libcuda log their first call themselves. One line per
// entry point and way of finding it, on stderr, whatever HONE_LOG says:
//
//   hone: trace: cuMemAlloc_v2 (cuGetProcAddress_v2 "cuMemAlloc" version 3020, default stream)
//   hone: trace: cuLaunchKernel (dlsym)
//   hone: trace: cuInit (linked)
//
// Off (the default), nothing of this runs: no thunk, no check on any launch.
#pragma once

#include "shim/real.hpp"

#include <atomic>
#include <cstdint>

namespace hone::shim {

// How an application found an entry point.
enum class Found : uint8_t { proc_address, proc_address_v2, dlsym };

namespace detail {
// Set once at start-up when HONE_TRACE is on: the hooks then report their linked calls.
extern bool g_trace;
} // namespace detail

inline bool tracing() { return detail::g_trace; }

// Read HONE_TRACE (at initialization).
void trace_init();

// `target` as the application should see it: a thunk that logs its first call when tracing (and
// the thunk pool is not exhausted), else `target` itself. `symbol` is the name the application
// asked for, `version` and `flags` its cuGetProcAddress arguments (0 for dlsym).
void* trace_pointer(void* target, const char* symbol, int version, uint64_t flags, Found how);

// A lookup, logged at debug level when tracing (a failed one with its status).
void trace_lookup(const char* symbol, int version, uint64_t flags, Found how, int result,
                  int status);

// The first call of the hook for `f` that the application reached by linking (not through a
// pointer the shim handed out): log it.
void trace_linked(Fn f);

} // namespace hone::shim

// At the top of a hooked export: report its first linked call when tracing. One predictable
// branch on a global when not.
#define HONE_TRACE_HOOK(name)                                                                      \
  do {                                                                                             \
    if (__builtin_expect(::hone::shim::detail::g_trace, false))                                    \
      ::hone::shim::trace_linked(::hone::shim::Fn::name);                                          \
  } while (0)
