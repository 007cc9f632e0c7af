// Initialisation, fork handling and the exit flush.
#include "shim/config.hpp"
#include "shim/log.hpp"
#include "shim/registry.hpp"
#include "shim/reporter.hpp"
#include "shim/capture.hpp"
#include "shim/graph.hpp"
#include "shim/sampler.hpp"
#include "shim/swap.hpp"
#include "shim/shim.hpp"
#include "shim/trace.hpp"

#include <pthread.h>

namespace hone::shim {

std::atomic<int> g_state{k_uninitialized};
std::atomic<uint32_t> g_launch_divert{k_divert_off};

namespace {

std::atomic<bool> g_atfork_installed{false};

void prepare_fork() {
  registry().mutex().lock();
  reporter().lock_for_fork();
}
void parent_after_fork() {
  reporter().unlock_after_fork();
  registry().mutex().unlock();
}
void child_after_fork() {
  reporter().reset_in_child();
  registry().reset_after_fork();
  sample_reset_after_fork();
  capture_reset_after_fork();
  graph_reset_after_fork();
  swap_reset_after_fork();
  registry().mutex().unlock();
}

} // namespace

int initialize() {
  // Concurrent first calls may both get here; every step is idempotent.
  const Config& c = config();
  int state = c.disabled ? k_disabled : k_enabled;
  if (state == k_enabled) trace_init();
  if (state == k_enabled && !g_atfork_installed.exchange(true)) {
    pthread_atfork(prepare_fork, parent_after_fork, child_after_fork);
    log(Level::debug, "observing this process (socket %s, 1 launch in %u timed)", c.socket,
        c.sample_every);
  }
  // The fast path opens once the shim is enabled, and never while tracing (every call is traced).
  if (state == k_enabled && !tracing()) {
    g_launch_divert.fetch_and(~uint32_t(k_divert_off | k_divert_trace), std::memory_order_relaxed);
  } else if (state == k_enabled) {
    g_launch_divert.fetch_and(~uint32_t(k_divert_off), std::memory_order_relaxed);
    g_launch_divert.fetch_or(k_divert_trace, std::memory_order_relaxed);
  }
  g_state.store(state, std::memory_order_relaxed);
  return state;
}

void on_activity() {
  if (enabled()) reporter().ensure_started();
}

} // namespace hone::shim
