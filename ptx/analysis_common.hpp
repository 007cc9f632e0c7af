// Helpers the analyses of analysis.cpp and analysis_external.cpp share; not part of the
// analysis interface (analysis.hpp).
#pragma once

#include "ptx/ir.hpp"
#include "ptx/lexer.hpp"

#include <string>
#include <string_view>

namespace hone::ptx::detail {

// Instructions without a destination register in operand 0.
bool has_no_destination(const Instruction& inst);

// A special register (PTX ISA 10, "Special Registers"): %tid.x, %clock64, %envreg3, ...
bool is_special_register(std::string_view name);

// The instruction as one line for messages: `st.global.f32 [%rd4], %f2;`.
std::string instruction_text(const Instruction& inst);

// Calls `fn` with each register an operand names: itself, an address's base, the elements of
// vectors, pairs and lists. With `Expressions`, also every identifier of an expression operand
// (`sym+4`, `%r1`): the external-input analysis (analysis_external.cpp) reads those too.
template <bool Expressions = false, class F> void for_each_reg(const Operand& o, F&& fn) {
  switch (o.kind) {
  case Operand::Kind::reg:
    fn(o.name);
    break;
  case Operand::Kind::address:
    if (o.base_is_reg) fn(o.name);
    for (const auto& e : o.elems) for_each_reg<Expressions>(e, fn);
    break;
  case Operand::Kind::vector:
  case Operand::Kind::pair:
  case Operand::Kind::list:
    for (const auto& e : o.elems) for_each_reg<Expressions>(e, fn);
    break;
  case Operand::Kind::expr:
    if constexpr (Expressions) {
      for (size_t i = 0; i < o.name.size();) {
        if (is_ident_start(o.name[i])) {
          size_t j = i + 1;
          while (j < o.name.size() && is_ident_char(o.name[j])) ++j;
          fn(o.name.substr(i, j - i));
          i = j;
        } else {
          ++i;
        }
      }
    }
    break;
  default:
    break;
  }
}

} // namespace hone::ptx::detail
