// Whether what a kernel's threads compute can depend on how they are grouped into blocks
// (block_shape.hpp); agent/launch_shape.cpp acts on it.
#include "ptx/block_shape.hpp"

#include "ptx/analysis_common.hpp"

#include <map>
#include <set>
#include <vector>

namespace hone::ptx {

namespace {

struct Use {
  const Instruction* at = nullptr;
  size_t operand = 0;
};

} // namespace

std::optional<std::string> block_size_dependence(const Function& f) {
  std::map<std::string_view, int> defs;                 // register -> instructions writing it
  std::map<std::string_view, std::vector<Use>> uses;    // register -> where it is read
  std::map<std::string_view, std::string_view> sreg_of; // register -> the special register moved in
  for (const auto& st : f.body) {
    if (std::holds_alternative<Opaque>(st.item)) {
      return "it holds an instruction hone's PTX reader keeps as text";
    }
    const auto* in = std::get_if<Instruction>(&st.item);
    if (!in) continue;
    switch (in->op) {
    case Opcode::bar:
    case Opcode::barrier:
    case Opcode::shfl:
    case Opcode::vote:
    case Opcode::match:
    case Opcode::redux:
    case Opcode::activemask:
    case Opcode::elect:
    case Opcode::mbarrier:
    case Opcode::getctarank:
    case Opcode::mapa:
    case Opcode::clusterlaunchcontrol:
    case Opcode::ldmatrix:
    case Opcode::stmatrix:
    case Opcode::movmatrix:
    case Opcode::mma:
    case Opcode::cp:
    case Opcode::tcgen05:
      return "it uses " + std::string(opcode_name(in->op)) +
             ", which works across the threads of a warp or block";
    case Opcode::call:
      return "it calls a function (calls are not followed)";
    case Opcode::griddepcontrol:
      // Programmatic dependent launch (llama.cpp builds nearly every kernel with it): waiting for
      // the grids before this one, or letting the next one start early, is about whole grids,
      // not about how their threads are grouped into blocks.
      break;
    default:
      break;
    }
    if (in->has_mod("shared")) return "it uses shared memory";
    for (size_t i = 0; i < in->operands.size(); ++i) {
      const bool dest = i == 0 && !detail::has_no_destination(*in) &&
                        in->operands[i].kind != Operand::Kind::address;
      detail::for_each_reg(in->operands[i], [&](std::string_view r) {
        if (dest) {
          ++defs[r];
        } else {
          uses[r].push_back({in, i});
        }
      });
    }
    if (in->guard.size()) uses[in->guard].push_back({in, size_t(-1)});
  }

  static const std::set<std::string_view> k_allowed = {"%tid.x", "%ntid.x", "%ctaid.x"};
  // Special registers: read only by `mov` into a register, and only the three above.
  for (const auto& [reg, where] : uses) {
    if (!detail::is_special_register(reg)) continue;
    if (!k_allowed.count(reg)) return "it reads " + std::string(reg);
    for (const Use& u : where) {
      const Instruction& in = *u.at;
      if (in.op != Opcode::mov || u.operand != 1 || in.operands.size() != 2 ||
          in.operands[0].kind != Operand::Kind::reg || !in.guard.empty()) {
        return "it reads " + std::string(reg) + " other than by moving it into a register";
      }
      sreg_of[in.operands[0].name] = reg;
    }
  }
  if (sreg_of.empty()) return std::nullopt; // no thread index at all: every thread alike

  auto only_use = [&](std::string_view reg) -> const Use* {
    auto it = uses.find(reg);
    if (defs[reg] != 1 || it == uses.end() || it->second.size() != 1) return nullptr;
    return &it->second.front();
  };
  auto operand_reg = [](const Instruction& in, size_t i) -> std::string_view {
    if (i >= in.operands.size() || in.operands[i].kind != Operand::Kind::reg ||
        in.operands[i].negated) {
      return {};
    }
    return in.operands[i].name;
  };
  // Each register holding %tid.x must be the addend of a linear index whose product is
  // %ctaid.x * %ntid.x; each %ctaid.x and %ntid.x register must be a factor of one.
  std::set<const Instruction*> linear; // the instructions that compute a linear index
  auto factors_are_block_and_size = [&](const Instruction& m) {
    auto a = sreg_of.find(operand_reg(m, 1));
    auto b = sreg_of.find(operand_reg(m, 2));
    return a != sreg_of.end() && b != sreg_of.end() &&
           std::set<std::string_view>{a->second, b->second} ==
               std::set<std::string_view>{"%ctaid.x", "%ntid.x"};
  };
  // Does `in`, reading the index register as its `operand`, add it to %ctaid.x * %ntid.x? In
  // 32 bits: `mad.lo` (the index its addend), or `add` with a `mul.lo` used only there. With
  // `wide`, the 64-bit form nvcc gives `int64_t(blockDim.x) * blockIdx.x + threadIdx.x`
  // (llama.cpp's element-wise kernels): `mad.wide.u32`, or `add.s64` with `mul.wide.u32`. The
  // 64-bit product is exact, so the index is the same for any grouping of the same threads.
  auto adds_to_block_offset = [&](const Instruction& in, size_t operand, bool wide) {
    auto product_form = [&](const Instruction& m) {
      return m.has_mod(wide ? "wide" : "lo") && (m.has_mod("s32") || m.has_mod("u32")) &&
             m.guard.empty();
    };
    if (in.op == Opcode::mad && operand == 3 && product_form(in) &&
        factors_are_block_and_size(in)) {
      linear.insert(&in);
      return true;
    }
    const bool add = in.op == Opcode::add && in.guard.empty() && !in.has_mod("sat") &&
                     !in.has_mod("cc") &&
                     (wide ? in.has_mod("s64") || in.has_mod("u64")
                           : in.has_mod("s32") || in.has_mod("u32"));
    if (!add || (operand != 1 && operand != 2)) return false;
    std::string_view product = operand_reg(in, operand == 1 ? 2 : 1);
    if (product.empty() || !only_use(product)) return false;
    const Instruction* mul = nullptr; // its one definition
    for (const auto& st : f.body) {
      const auto* d = std::get_if<Instruction>(&st.item);
      if (d && !detail::has_no_destination(*d) && operand_reg(*d, 0) == product) mul = d;
    }
    if (!mul || mul->op != Opcode::mul || !product_form(*mul) || !factors_are_block_and_size(*mul))
      return false;
    linear.insert(&in);
    linear.insert(mul);
    return true;
  };
  // %tid.x widened to 64 bits (`cvt.u64.u32` into a register used once) for the `wide` forms.
  auto widened = [&](const Instruction& cvt, size_t operand) -> const Use* {
    const bool widens = (cvt.has_mod("u64") && cvt.has_mod("u32")) ||
                        (cvt.has_mod("s64") && cvt.has_mod("s32"));
    if (cvt.op != Opcode::cvt || operand != 1 || !cvt.guard.empty() || !widens) return nullptr;
    std::string_view wide = operand_reg(cvt, 0);
    return wide.empty() ? nullptr : only_use(wide);
  };
  for (const auto& [reg, sreg] : sreg_of) {
    const Use* u = only_use(reg);
    if (!u) {
      return "the register holding " + std::string(sreg) +
             " is used more than once or written more than once";
    }
    if (sreg != "%tid.x") continue;
    if (adds_to_block_offset(*u->at, u->operand, false)) continue;
    if (const Use* w = widened(*u->at, u->operand);
        w && adds_to_block_offset(*w->at, w->operand, true)) {
      continue;
    }
    return "%tid.x is used other than in the thread's linear index "
           "(%ctaid.x * %ntid.x + %tid.x)";
  }
  // %ctaid.x and %ntid.x: only as the factors of those products.
  for (const auto& [reg, sreg] : sreg_of) {
    if (sreg == "%tid.x") continue;
    const Use* u = only_use(reg);
    if (!u || !linear.count(u->at) || (u->operand != 1 && u->operand != 2)) {
      return std::string(sreg) + " is used other than in the thread's linear index "
                                 "(%ctaid.x * %ntid.x + %tid.x)";
    }
  }
  return std::nullopt;
}

} // namespace hone::ptx
