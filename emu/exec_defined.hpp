// Which registers a block must start at zero: those a thread may read before it has written them,
// and those other lanes read (a shuffle's source, read in every lane, live or not). Every other
// register is written before it is read on every path, so whatever it held before cannot show.
#pragma once

#include "emu/exec_code.hpp"

#include <cstdint>
#include <vector>

namespace hone::emu {

// The slots of `kernel` to zero at the start of each block, in increasing order.
std::vector<uint32_t> slots_to_zero(const CompiledKernel& kernel);

} // namespace hone::emu
