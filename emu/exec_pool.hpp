// The worker threads blocks run on: the calling thread plus HONE_EMU_THREADS - 1 helpers
// (default: one per core). One launch uses the pool at a time.
#pragma once

#include <cstdint>
#include <functional>

namespace hone::emu {

// Run fn(worker, i) for i in [0, n), spread over the pool; `worker` is in [0, workers()).
// Returns when every call has returned. fn must not throw.
void parallel_for(uint64_t n, const std::function<void(unsigned worker, uint64_t i)>& fn);
unsigned pool_workers();

} // namespace hone::emu
