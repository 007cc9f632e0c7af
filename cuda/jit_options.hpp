// JIT options as candidates and variants carry them: "NAME=value" with a CUjit_option name
// without CU_JIT_ ("MAX_REGISTERS=64"). The worker and the shim parse them alike, so a variant
// verified with some options loads with the same ones in every process.
#pragma once

#include "common/result.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace hone::cuda {

// A JIT option for cuModuleLoadDataEx: a CUjit_option value (an int here, so that code which
// must not see cuda.h, the shim, can use it) and its value (the pointer-sized value slot).
struct JitOption {
  int option = 0;
  uintptr_t value = 0;
};

// Unknown names, options the loader sets itself (the log buffers) or that need pointers, and
// values that are not unsigned 32-bit integers are errors. A CU_JIT_ prefix is accepted;
// TARGET_FROM_CUCONTEXT may come without a value.
Result<std::vector<JitOption>> parse_jit_options(const std::vector<std::string>& options);

} // namespace hone::cuda
