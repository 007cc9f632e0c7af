// Launch-shape tuning's proof that a kernel's results cannot depend on its block size
// (agent/launch_shape.cpp), for the strategy and its tests.
#pragma once

#include "ptx/ir.hpp"

#include <optional>
#include <string>

namespace hone::agent {

// Why what the threads of `entry` compute may depend on how they are grouped into blocks, or
// nullopt when each thread's work is a function of its linear index
// (blockIdx.x * blockDim.x + threadIdx.x) alone.
std::optional<std::string> launch_shape_refusal(const ptx::Function& entry);

} // namespace hone::agent
