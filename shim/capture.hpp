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

#include <functional>
#include <vector>

namespace hone::shim {

// Application thread, when r->capture_pending was set: capture this launch around `launch`.
int capture_launch(KernelRecord* r, void* function, const LaunchArgs& a,
                   const std::function<int()>& launch);

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
