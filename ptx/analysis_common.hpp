// Helpers the analyses of analysis.cpp and analysis_external.cpp share; not part of the
// analysis interface (analysis.hpp).
#pragma once

#include "ptx/ir.hpp"

#include <string>

namespace hone::ptx::detail {

// Instructions without a destination register in operand 0.
bool has_no_destination(const Instruction& inst);

// The instruction as one line for messages: `st.global.f32 [%rd4], %f2;`.
std::string instruction_text(const Instruction& inst);

} // namespace hone::ptx::detail
