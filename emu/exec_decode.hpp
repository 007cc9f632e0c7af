// Decode a PTX entry (and the functions it calls, inlined) into the executor's instructions.
#pragma once

#include "emu/exec_code.hpp"
#include "ptx/ir.hpp"

#include <string_view>
#include <unordered_map>

namespace hone::emu {

// Device addresses of a module's .global and .const variables.
using SymbolAddresses = std::unordered_map<std::string_view, uint64_t>;

// Never fails: a kernel the executor cannot run comes back with `unsupported` set, naming the
// PTX line and the reason, so the rest of its module still loads.
CompiledKernel decode_kernel(const ptx::Module& module, const ptx::Function& entry,
                             const SymbolAddresses& globals);

} // namespace hone::emu
