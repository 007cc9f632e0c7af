// Turning a job's original and candidate into loaded modules: NVRTC for CUDA C++ candidates, the
// JIT (with the job's options) for PTX, the driver's loader for cubins and fatbins.
#pragma once

#include "common/job.hpp"
#include "daemon/worker/device.hpp"

#include <string>
#include <vector>

namespace hone::worker {

struct LoadedCandidate {
  Module module;
  std::string ptx; // the PTX that was loaded (kinds ptx and cuda); empty for a cubin
  std::string log; // NVRTC's warnings for a CUDA candidate that compiled (often empty)
};

// Compile and load the job's candidate. The error's message is what to show as the
// compile_error: NVRTC's log, or the driver's result and the JIT error log.
Result<LoadedCandidate> load_candidate(Device& device, const Job& job);

struct LoadedOriginal {
  Module module;
  std::string ptx; // the PTX of the original when it has one (PTX image, or a fatbin's PTX entry)
};

// Load the job's original image as the application did. Errors are the worker's (internal).
Result<LoadedOriginal> load_original(Device& device, const Job& job);

} // namespace hone::worker
