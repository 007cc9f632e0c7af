// Per-node device time of graph replays from CUPTI activity records (HONE_CUPTI=1, off by
// default). Events time a replay as a whole; CUPTI's CONCURRENT_KERNEL records carry each
// kernel's start and end with the graph node that launched it, so a graph's time is no longer
// shared out by thread counts. libcupti is loaded at run time, by the reporter thread, and only
// when no profiler is there to disturb: not when a CUDA injection library is configured
// (CUDA_INJECTION64_PATH: Nsight Systems, Nsight Compute), not when the application has loaded
// CUPTI itself, and not when the CUPTI found is of another API version than the one hone was
// built with (its record layout would differ). Otherwise, and on the emulated device (no CUPTI
// records), the event-based estimate stands.
#pragma once

#include "shim/cuda_abi.hpp"

#include <atomic>
#include <cstdint>

namespace hone::shim {

// Device time of one graph node's kernels, as CUPTI reported it; never freed (records may arrive
// after the graph is gone).
struct NodeTime {
  std::atomic<uint64_t> kernels{0};
  std::atomic<uint64_t> ns{0};
};

// Reporter thread: load and enable CUPTI when HONE_CUPTI=1 and it is safe (once; later calls
// return what the first decided).
bool cupti_start();
bool cupti_active();
// Reporter thread: hand over the records buffered so far (before a report).
void cupti_flush();
// The counters for `node` (a node of an instantiated graph), registered so its kernels' records
// land there; nullptr when CUPTI is not active or the node has no CUPTI id.
NodeTime* cupti_node(CUgraphNode node);

} // namespace hone::shim
