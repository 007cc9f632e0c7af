// Constant folding of integer immediates, as ptxas does to a kernel whose parameters became
// constants: a register set once, at the start of the body, by a `mov` of an integer immediate is
// replaced by the immediate where an instruction reads it as its second source operand, and
// unsigned divisions, remainders and products by a power of two become shifts and masks.
//
// The result computes exactly what the original computes, for every input: only values the body
// cannot change are propagated (one definition, before any label or branch, unguarded), and each
// rewrite is an identity of unsigned integer arithmetic.
#pragma once

#include "ptx/ir.hpp"

#include <cstddef>

namespace hone::ptx {

struct FoldStats {
  size_t propagated = 0; // source operands that became immediates
  size_t reduced = 0;    // div/rem/mul turned into shr/and/shl (or mov)
};

// Fold `f`'s body in place.
FoldStats fold_constants(Function& f);

} // namespace hone::ptx
