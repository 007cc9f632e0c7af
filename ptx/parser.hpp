// Parse PTX text (as emitted by nvcc and NVRTC, ISA 8.x and 9.x) into the IR.
#pragma once

#include "common/result.hpp"
#include "ptx/ir.hpp"

#include <string_view>

namespace hone::ptx {

// Parse a whole module. `filename` only labels errors, which read `file:line:col: message`.
// Never throws; malformed input of any kind gives an error.
Result<Module> parse(std::string_view text, std::string_view filename = "<ptx>");

} // namespace hone::ptx
