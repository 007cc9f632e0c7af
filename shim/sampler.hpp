// Sampled device time: 1 launch in HONE_SAMPLE_EVERY is bracketed by two events recorded on the
// launch's own stream. The application thread only records; the reporter thread creates the
// events (in the application's context) and collects finished pairs without ever blocking.
#pragma once

#include "shim/registry.hpp"

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

// Reporter thread: create event pools for contexts seen, fold finished pairs into their records.
void sample_collect();
// A forked child has no events: forget them all.
void sample_reset_after_fork();

} // namespace hone::shim
