// The PTX a kernel's strategies work on, whatever form its module image came in.
#pragma once

#include "agent/strategy.hpp"
#include "common/result.hpp"

#include <string>

namespace hone::agent {

// The kernel's PTX (without a trailing NUL): the image itself when it is PTX, or the PTX entry
// of a fatbin that a driver would JIT for task.arch (the newest when the arch is unknown). An
// error saying why when there is none ("a fatbin with SASS only (sm_90)", "a cubin: SASS only").
Result<std::string> kernel_ptx(const KernelTask& task);

} // namespace hone::agent
