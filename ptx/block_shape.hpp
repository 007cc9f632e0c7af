// Whether what the threads of an entry compute can depend on how they are grouped into blocks:
// the proof launch-shape tuning needs (agent/launch_shape.cpp) before it launches a kernel with
// another block size and the same thread count.
#pragma once

#include "ptx/ir.hpp"

#include <optional>
#include <string>

namespace hone::ptx {

// Why the results of `entry` may depend on its block size, or nullopt when each thread's work is
// a function of its linear index (blockIdx.x * blockDim.x + threadIdx.x) alone. Conservative:
// the only special registers read are %tid.x, %ntid.x and %ctaid.x, each moved once into a
// register used only in %ctaid.x * %ntid.x + %tid.x (`mad.lo`, or `mul.lo` and `add`); nothing
// is shared between threads (no shared memory, barrier, warp, cluster or matrix instruction), no
// call (not followed) and no instruction the IR keeps as text. The entry's directives
// (.reqntid, .maxntid) are the caller's to check.
std::optional<std::string> block_size_dependence(const Function& entry);

} // namespace hone::ptx
