#include "ptx/fold.hpp"

#include <map>
#include <set>
#include <string>

namespace hone::ptx {

namespace {

bool is_int(Type t) {
  switch (t) {
  case Type::b16:
  case Type::b32:
  case Type::b64:
  case Type::u16:
  case Type::u32:
  case Type::u64:
  case Type::s16:
  case Type::s32:
  case Type::s64:
    return true;
  default:
    return false;
  }
}

bool is_unsigned(Type t) {
  return t == Type::u16 || t == Type::u32 || t == Type::u64;
}

// Every register an instruction may write: its first operand (and the elements of a vector or a
// p|q pair there), except for instructions whose first operand is only read. Conservative: a
// register named there counts as written even where the instruction only reads it.
void written(const Instruction& inst, std::set<std::string_view>& out) {
  if (inst.operands.empty()) return;
  switch (inst.op) {
  case Opcode::st:
  case Opcode::bra:
  case Opcode::bar:
  case Opcode::barrier:
  case Opcode::red:
  case Opcode::prefetch:
  case Opcode::prefetchu:
  case Opcode::ret:
  case Opcode::exit:
  case Opcode::trap:
  case Opcode::membar:
  case Opcode::fence:
    return;
  default:
    break;
  }
  const Operand& d = inst.operands[0];
  if (d.kind == Operand::Kind::reg) out.insert(d.name);
  for (const Operand& e : d.elems) {
    if (e.kind == Operand::Kind::reg) out.insert(e.name);
  }
  if (inst.op == Opcode::call) {
    // outputs and inputs of a call are lists; treat every register there as written
    for (const Operand& o : inst.operands) {
      for (const Operand& e : o.elems) {
        if (e.kind == Operand::Kind::reg) out.insert(e.name);
      }
    }
  }
}

bool is_power_of_two(int64_t v) {
  return v > 0 && (uint64_t(v) & (uint64_t(v) - 1)) == 0;
}

int log2_of(uint64_t v) {
  int k = 0;
  while (v > 1) {
    v >>= 1;
    ++k;
  }
  return k;
}

Operand immediate(int64_t v) {
  Operand o;
  o.kind = Operand::Kind::imm_int;
  o.value = v;
  return o;
}

// The bit type of an integer type's width (.b32 for .u32).
std::string_view bits_type(Type t) {
  switch (type_size(t)) {
  case 2:
    return "b16";
  case 8:
    return "b64";
  default:
    return "b32";
  }
}

// Instructions whose second source operand (operand 2) may be an immediate, for integer types.
bool takes_immediate_b(const Instruction& inst) {
  switch (inst.op) {
  case Opcode::add:
  case Opcode::sub:
  case Opcode::mul:
  case Opcode::mad:
  case Opcode::div:
  case Opcode::rem:
  case Opcode::and_:
  case Opcode::or_:
  case Opcode::xor_:
  case Opcode::shl:
  case Opcode::shr:
  case Opcode::min:
  case Opcode::max:
  case Opcode::setp:
    break;
  default:
    return false;
  }
  if (inst.has_mod("cc") || inst.has_mod("sat")) return false;
  return is_int(inst.last_type());
}

} // namespace

FoldStats fold_constants(Function& f) {
  FoldStats stats;
  // Registers the body writes anywhere; and opaque text, which may name any register.
  std::map<std::string_view, int> writes;
  std::string opaque;
  for (const Statement& st : f.body) {
    if (const auto* inst = std::get_if<Instruction>(&st.item)) {
      std::set<std::string_view> w;
      written(*inst, w);
      for (auto r : w) ++writes[r];
    } else if (const auto* o = std::get_if<Opaque>(&st.item)) {
      opaque.append(o->text).push_back('\n');
    }
  }
  // Constants: one write, an unguarded mov of an integer immediate in the straight-line start of
  // the body, so it runs before anything that could read the register.
  std::map<std::string_view, int64_t> constants;
  for (const Statement& st : f.body) {
    if (std::holds_alternative<Label>(st.item)) break;
    const auto* inst = std::get_if<Instruction>(&st.item);
    if (!inst) continue;
    if (inst->op == Opcode::bra || inst->op == Opcode::call || inst->op == Opcode::ret ||
        inst->op == Opcode::exit) {
      break;
    }
    if (inst->op != Opcode::mov || !inst->guard.empty() || inst->operands.size() != 2) continue;
    const Operand& d = inst->operands[0];
    const Operand& v = inst->operands[1];
    if (d.kind != Operand::Kind::reg || v.kind != Operand::Kind::imm_int) continue;
    if (!is_int(inst->last_type()) || writes[d.name] != 1) continue;
    if (opaque.find(d.name) != std::string::npos) continue;
    constants[d.name] = v.value;
  }
  if (constants.empty()) return stats;

  for (Statement& st : f.body) {
    auto* inst = std::get_if<Instruction>(&st.item);
    if (!inst || !takes_immediate_b(*inst)) continue;
    // setp d, a, b: b is operand 2; mad d, a, b, c: b and c (2, 3); the others d, a, b.
    size_t last = inst->op == Opcode::mad ? 3 : 2;
    for (size_t i = 2; i <= last && i < inst->operands.size(); ++i) {
      Operand& o = inst->operands[i];
      if (o.kind != Operand::Kind::reg || o.negated) continue;
      auto it = constants.find(o.name);
      if (it == constants.end()) continue;
      o = immediate(it->second);
      ++stats.propagated;
    }
    // Strength reduction of unsigned div/rem and of low products by 2^k.
    if (inst->operands.size() != 3 || inst->operands[2].kind != Operand::Kind::imm_int) continue;
    const Type t = inst->last_type();
    const int64_t b = inst->operands[2].value;
    const uint64_t width_mask = type_size(t) == 8 ? ~0ull : (1ull << (type_size(t) * 8)) - 1;
    if (!is_power_of_two(b) || uint64_t(b) > width_mask) continue;
    Instruction r;
    r.guard = inst->guard;
    r.guard_negated = inst->guard_negated;
    if ((inst->op == Opcode::rem || inst->op == Opcode::div) && is_unsigned(t) &&
        inst->mods.size() == 1) {
      if (inst->op == Opcode::rem) {
        r.op = Opcode::and_;
        r.mods = {bits_type(t)};
        r.operands = {inst->operands[0], inst->operands[1], immediate(b - 1)};
      } else {
        r.op = Opcode::shr;
        r.mods = {type_name(t)};
        r.operands = {inst->operands[0], inst->operands[1], immediate(log2_of(uint64_t(b)))};
      }
    } else if (inst->op == Opcode::mul && inst->mods.size() == 2 && inst->has_mod("lo") &&
               (is_unsigned(t) || is_signed(t))) {
      // The low half of a product by 2^k is the shift, signed or not.
      r.op = Opcode::shl;
      r.mods = {bits_type(t)};
      r.operands = {inst->operands[0], inst->operands[1], immediate(log2_of(uint64_t(b)))};
    } else {
      continue;
    }
    *inst = std::move(r);
    ++stats.reduced;
  }
  return stats;
}

} // namespace hone::ptx
