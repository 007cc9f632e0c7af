// Shadow-input capture in the application (DESIGN.md, "Shadow inputs"). When the daemon asks,
// the next launches of a kernel are captured: the parameter bytes, and every device allocation a
// pointer parameter points into, copied stream-ordered into pinned memory just before the launch
// (and after it, on request). The application thread only enqueues the copies; the reporter
// thread waits for them, moves the bytes into a sealed memfd and sends them. Nothing captured is
// ever logged.
#pragma once

#include "common/capture.hpp"
#include "shim/launch_args.hpp"
#include "shim/registry.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hone::shim {

// Application thread, when r->capture_pending was set: capture this launch around `launch`.
int capture_launch(KernelRecord* r, void* function, const LaunchArgs& a,
                   const std::function<int()>& launch);

// The parts of a capture, shared by a launch's capture (above) and a graph replay's
// (shim/graph.cpp, which copies through memcpy nodes of an instrumented clone instead).
struct CaptureRequestInfo {
  uint64_t request = 0;
  uint64_t max_bytes = 0;
  bool outputs = false;
  bool whole = false; // honed asked for whole allocations (CaptureRequest::whole)
};
struct CapturePlan {
  Capture capture;
  uint64_t request = 0;
  bool outputs = false;
  std::map<uint64_t, size_t> allocations; // base -> size: what is copied
  std::map<uint64_t, uint64_t> offset_of; // base -> offset in `host` (before; + before_bytes after)
  uint64_t before_bytes = 0;
  void* host = nullptr; // pinned
};
// Counts a capture being made on this thread until it is pending or refused (captures_pending).
struct CaptureInFlight {
  CaptureInFlight();
  ~CaptureInFlight();
  CaptureInFlight(const CaptureInFlight&) = delete;
  CaptureInFlight& operator=(const CaptureInFlight&) = delete;
};
// While it lives, this thread's stream capture mode is relaxed when any capture is live in the
// process: the copies and the pinned allocation a capture makes are calls a global-mode capture
// on another thread would otherwise fail, and be invalidated by.
class RelaxedCaptureMode {
public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

private:
  int m_previous = -1; // -1: unchanged
};
// Take one of the launches the daemon asked for; false when none is due.
bool capture_claim(KernelRecord* r, CaptureRequestInfo* out);
// The parameter bytes and the buffers of a launch of `function` with `a`, and pinned memory for
// them. False when refused (already reported).
bool capture_plan(KernelRecord* r, void* function, const LaunchArgs& a,
                  const CaptureRequestInfo& req, CapturePlan& plan);
// The copies were enqueued on `stream` around a launch that returned `res`: queue the capture
// for the reporter once they complete (or refuse it).
void capture_finish(KernelRecord* r, CapturePlan& plan, void* stream, bool per_thread, bool copied,
                    int res);
// A planned capture that will not be made: free it and report why.
void capture_abandon(KernelRecord* r, CapturePlan& plan, std::string reason);
void capture_refuse(KernelRecord* r, uint64_t request, CaptureStatus status, std::string reason);

struct CaptureReady {
  Capture capture;
  int memfd = -1; // -1: nothing to send with it (a refused capture)
};
// Reporter thread: captures whose copies finished (or that were refused), ready to send.
std::vector<CaptureReady> capture_collect();
// Free the pinned memory and events of the captures collected so far. Separate from collecting
// because freeing pinned memory may wait for the device (the application's kernels): the
// reporter sends the captures first.
void capture_release();
size_t captures_pending();
void capture_reset_after_fork();

} // namespace hone::shim
