// One job, start to verdict: load the original, compile the candidate, validate it on every
// capture, benchmark it, and say what happened (DESIGN.md, "Validation (worker)", "Benchmark
// (worker)").
#pragma once

#include "common/job.hpp"
#include "daemon/worker/device.hpp"
#include "daemon/worker/watchdog.hpp"

namespace hone::worker {

struct JobOutcome {
  Verdict verdict;
  // A sticky fault left the context unusable: send the verdict, then exit (status 3) so that
  // honed starts a fresh worker.
  bool context_lost = false;
};

class OriginalMemo;

// Run `bundle`'s job on `device`. `watchdog` (may be null) guards the candidate's launches;
// `memo` (may be null) keeps the original's runs on each capture for the next job.
JobOutcome run_job(Device& device, const Bundle& bundle, Watchdog* watchdog,
                   OriginalMemo* memo = nullptr);

} // namespace hone::worker
