// Sampled device time: 1 launch in HONE_SAMPLE_EVERY is bracketed by two events recorded on the
// launch's own stream. The application thread only records; the reporter thread creates the
// events (in the application's context) and collects finished pairs without ever blocking.
#pragma once

#include "shim/registry.hpp"

#include <atomic>
#include <cstdint>

namespace hone::shim {

struct SampleSlot {
  void* pool = nullptr;
  int pair = -1;
};

// Application thread, sampled launches only. False: do not time this launch (no events for this
// context yet, all in flight, or the stream is being captured into a graph).
bool sample_begin(void* stream, bool per_thread, SampleSlot* slot);
void sample_end(const SampleSlot& slot, void* stream, bool per_thread, KernelRecord* record,
                bool launched);
// The same for a measurement that goes elsewhere (a graph replay's, spread over its kernels
// later): the counters must outlive the pair.
void sample_end_into(const SampleSlot& slot, void* stream, bool per_thread,
                     std::atomic<uint64_t>* sampled, std::atomic<uint64_t>* sampled_ns,
                     bool launched);

// Application thread, at a module load (a slow path): make the events of the current context now,
// so the first timed launch in it already has them.
void sample_prepare_current_context();

// Reporter thread: create event pools for contexts seen, fold finished pairs into their records.
void sample_collect();
// Timed launches whose events have not been collected yet.
uint32_t sample_in_flight();
// A forked child has no events: forget them all.
void sample_reset_after_fork();

} // namespace hone::shim
