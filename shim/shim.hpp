// What every hook shares: whether the shim is on, and the start of its background reporting.
#pragma once

#include <atomic>
#include <cstdint>

namespace hone::shim {

enum : int { k_uninitialized = 0, k_enabled = 1, k_disabled = 2 };
extern std::atomic<int> g_state;

// Whatever sends every launch to the hooks' full path, in the one word the fast path reads
// (shim/fast_path.hpp): the shim not enabled (yet), tracing, and the stream captures live in the
// process (counted in the bits from k_divert_capture up).
enum : uint32_t { k_divert_off = 1, k_divert_trace = 2, k_divert_capture = 1u << 8 };
extern std::atomic<uint32_t> g_launch_divert __asm__("hone_shim_launch_divert");

// Stream captures live anywhere in the process: while there are any, each launch asks the driver
// whether its stream is capturing.
inline uint32_t stream_captures() {
  return g_launch_divert.load(std::memory_order_relaxed) / k_divert_capture;
}

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
