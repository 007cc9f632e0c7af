// What every hook shares: whether the shim is on, and the start of its background reporting.
#pragma once

#include <atomic>

namespace hone::shim {

enum : int { k_uninitialized = 0, k_enabled = 1, k_disabled = 2 };
extern std::atomic<int> g_state;

int initialize();

// True when the shim observes this process (HONE_DISABLE unset). The first call initialises.
inline bool enabled() {
  int s = g_state.load(std::memory_order_relaxed);
  if (__builtin_expect(s == k_uninitialized, 0)) s = initialize();
  return s == k_enabled;
}

// CUDA activity happened: make sure the reporter thread runs (cheap after the first call).
void on_activity();

} // namespace hone::shim
