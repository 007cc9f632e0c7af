// The launch hooks' fast path, shared by the portable hooks (hooks_launch.cpp) and the x86-64
// entry stubs (launch_stubs_x86_64.cpp): whether a launch of `f` may go straight to the driver.
#pragma once

#include "shim/counts.hpp"
#include "shim/cuda_abi.hpp"
#include "shim/registry.hpp"
#include "shim/shim.hpp"

namespace hone::shim {

// The fast path: a launch of a function already seen (and launched on this thread before), that no
// variant serves, no capture or timed launch is due for, outside stream capture. Returns this
// thread's counters of the kernel, for the hook to count the launch in as it hands it to the
// driver; nullptr: the full path (which also initializes the shim on its first call, and traces
// calls under HONE_TRACE). The launch's shape is recorded by the full path only: the kernel's first
// launch on each thread and its timed launches (one in HONE_SAMPLE_EVERY); reading the shape here
// would cost every launch more than the rare change of shape is worth.
__attribute__((always_inline)) inline counts::Pair* fast(CUfunction f) {
  if (__builtin_expect(g_launch_divert.load(std::memory_order_relaxed) != 0, 0)) return nullptr;
  const FunctionTable::Slot* slot = g_function_table.find_first(f);
  if (__builtin_expect(!slot, 0)) return nullptr;
  KernelRecord* r = slot->record.load(std::memory_order_acquire);
  if (__builtin_expect(!r || r->divert.load(std::memory_order_acquire) != 0, 0)) return nullptr;
  counts::ThreadState& t = counts::t_thread;
  if (__builtin_expect(r->index >= t.capacity, 0)) return nullptr;
  counts::Pair* p = &t.pairs[r->index];
  // the kernel's first launch on this thread, or a timed one: the full path
  if (__builtin_expect(p->launches.load(std::memory_order_relaxed) + 1 >= p->next_sample, 0))
    return nullptr;
  return p;
}

} // namespace hone::shim
