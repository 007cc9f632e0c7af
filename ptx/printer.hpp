// Print the IR back as PTX that ptxas assembles and that parses to the same IR.
#pragma once

#include "ptx/ir.hpp"

#include <string>

namespace hone::ptx {

std::string print(const Module& module);
std::string print(const Function& function);
std::string print(const Instruction& instruction);
std::string print(const Operand& operand);

} // namespace hone::ptx
