// A kernel's decoded instructions as one LLVM function over a warp (emu/jit/abi.hpp says what it
// promises). The instruction forms it handles itself are written as operations on the 32 lanes at
// once; the rest are calls of Helpers::execute, the interpreter's own code.
#pragma once

#include "emu/exec_code.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace hone::emu::jit {

struct Generated {
  std::unique_ptr<llvm::Module> module;
  std::vector<uint8_t> entry;  // entry[pc] != 0: the function may start at pc
  uint32_t inline_forms = 0;   // instructions written as lane operations
  uint32_t helper_forms = 0;   // instructions left to Helpers::execute
};

// The function `name` (void(Frame*)) that runs `kernel`.
Generated generate(const CompiledKernel& kernel, llvm::LLVMContext& context,
                   const std::string& name);

} // namespace hone::emu::jit
