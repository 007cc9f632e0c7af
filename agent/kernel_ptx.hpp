// The PTX a kernel's strategies work on, whatever form its module image came in.
#pragma once

#include "agent/strategy.hpp"
#include "common/result.hpp"

#include <string>
#include <string_view>

namespace hone::agent {

// The kernel's PTX (without a trailing NUL): the image itself when it is PTX, or the PTX entry
// of a fatbin that a driver would JIT for task.arch (the newest when the arch is unknown). An
// error saying why when there is none ("a fatbin with SASS only (sm_90)", "a cubin: SASS only").
Result<std::string> kernel_ptx(const KernelTask& task);

// A PTX parameter's name for people: nvcc names them <entry>_param_<N>, which for a mangled C++
// entry repeats the whole mangled name: "param N" then. Other names stay as they are.
std::string param_label(std::string_view entry, std::string_view name);

} // namespace hone::agent
