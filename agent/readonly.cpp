// Read-only cache loads (DESIGN.md, "Agent"): global loads through a pointer parameter the kernel
// never writes become `ld.global.nc`, served by the non-coherent read-only data cache.
//
// PTX ISA 9.7.9.8 (ld.global.nc): the memory must stay read-only for the whole kernel. A changed
// load therefore needs three facts:
//  - its parameter is only read (ptx/analysis.hpp: no store, no atomic, no escape);
//  - its address is that parameter plus an offset (the dataflow below); an address that cannot be
//    traced leaves the load as it was;
//  - every write the kernel makes to global memory goes through a pointer parameter, so the
//    memory the loads read can only be written when two parameters share an allocation. The guard
//    says no_alias when the kernel writes at all, and the shim checks it on every launch. A kernel
//    that writes anywhere else (through a pointer loaded from memory, a module variable, a call,
//    an instruction the IR keeps as text) is left alone.
#include "agent/kernel_ptx.hpp"
#include "agent/strategy.hpp"
#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hone::agent {

namespace {

using ptx::Instruction;
using ptx::Opcode;
using ptx::Operand;
using ptx::Space;

// A pointer held in the parameters: parameter `param`, `offset` bytes into it.
struct PointerField {
  uint32_t param = 0;
  uint32_t offset = 0;
  bool read_only = false; // the kernel only reads through it: its loads may become .nc
};

// What a register holds, as far as addresses go (a lattice: unset < number, pointer < unknown).
struct Value {
  enum class Kind : uint8_t {
    unset,   // no definition seen yet
    number,  // computed without any pointer parameter: an index, a constant, a loaded value
    pointer, // a pointer field plus a number: an address inside that field's allocation
    unknown, // anything else (two fields mixed, a pointer scaled or truncated, a symbol address)
  };
  Kind kind = Kind::unset;
  uint32_t field = 0; // pointer: index into the entry's pointer fields

  static Value number() { return {Kind::number, 0}; }
  static Value pointer(uint32_t field) { return {Kind::pointer, field}; }
  static Value unknown() { return {Kind::unknown, 0}; }
  bool operator==(const Value&) const = default;
};

Value join(Value a, Value b) {
  if (a.kind == Value::Kind::unset) return b;
  if (b.kind == Value::Kind::unset) return a;
  return a == b ? a : Value::unknown();
}

bool is_int64(ptx::Type t) {
  return t == ptx::Type::u64 || t == ptx::Type::s64 || t == ptx::Type::b64;
}

// Instructions whose first operand is read, not written, even when it is a register.
bool first_operand_is_source(Opcode op) {
  switch (op) {
  case Opcode::bra:
  case Opcode::brx:
  case Opcode::call:
  case Opcode::bar:
  case Opcode::barrier:
  case Opcode::nanosleep:
  case Opcode::stackrestore:
  case Opcode::pmevent:
  case Opcode::setmaxnreg:
    return true;
  default:
    return false;
  }
}

// Instructions whose targets the transform does not model (surfaces, multicast memory, tensor
// maps and tensor memory): a kernel using them is left alone.
bool writes_unmodeled_memory(Opcode op) {
  switch (op) {
  case Opcode::sust:
  case Opcode::sured:
  case Opcode::multimem:
  case Opcode::tensormap:
  case Opcode::tcgen05:
    return true;
  default:
    return false;
  }
}

// Whether `inst` may write memory (its destination address is its first address operand).
bool writes_memory(const Instruction& inst) {
  switch (inst.op) {
  case Opcode::st:
  case Opcode::red:
  case Opcode::atom:
  case Opcode::cp: // destination first: cp.async.bulk.global.shared::cta [dst], [src], ...
  case Opcode::stmatrix:
  case Opcode::discard: // leaves the bytes undefined: a write as far as readers can tell
  case Opcode::mbarrier:
    return true;
  case Opcode::wmma:
    return inst.has_mod("store");
  default:
    return false;
  }
}

// Memory a write to `space` cannot reach through a pointer parameter: the block's shared memory,
// the thread's local memory, the parameter space of a call.
bool private_space(Space space) {
  return space == Space::shared || space == Space::local || space == Space::param;
}

// Modifiers `ld.global.nc` accepts besides the state space (PTX ISA 9.7.9.8): the cache
// operations .ca/.cg/.cs, eviction priorities and hints, prefetch sizes, vector width, type.
// Anything else (.volatile, .relaxed, .acquire, a scope, .mmio, .lu, .cv, .L2::evict_*) keeps the
// load as it is.
bool nc_compatible(std::string_view mod) {
  if (mod == "global" || mod == "ca" || mod == "cg" || mod == "cs" || mod == "weak") return true;
  if (mod.starts_with("L1::")) return true;
  if (mod == "L2::cache_hint" || mod == "L2::64B" || mod == "L2::128B" || mod == "L2::256B") {
    return true;
  }
  if (mod == "v2" || mod == "v4" || mod == "v8") return true;
  return ptx::type_from_name(mod) != ptx::Type::none;
}

// The registers an operand names (the elements of a vector or a pair destination).
template <class F> void for_each_reg(const Operand& o, F&& fn) {
  if (o.kind == Operand::Kind::reg) {
    fn(o.name);
  } else if (o.kind == Operand::Kind::vector || o.kind == Operand::Kind::pair) {
    for (const auto& e : o.elems) for_each_reg(e, fn);
  }
}

// The registers `inst` defines.
std::vector<std::string_view> destinations(const Instruction& inst) {
  std::vector<std::string_view> out;
  if (inst.operands.empty() || first_operand_is_source(inst.op)) return out;
  for_each_reg(inst.operands[0], [&](std::string_view r) { out.push_back(r); });
  return out;
}

// The address dataflow of one entry: flow-insensitive, so each register holds the join of what
// every definition of it can give (a register defined on two paths from two fields is unknown).
class AddressFlow {
public:
  AddressFlow(const ptx::Function& entry, const std::vector<PointerField>& fields,
              const std::vector<ptx::ParamInfo>& params)
      : m_entry(entry), m_fields(fields), m_params(params) {}

  void run() {
    for (const auto& st : m_entry.body) {
      if (const auto* inst = std::get_if<Instruction>(&st.item)) {
        for (auto r : destinations(*inst)) m_values.emplace(r, Value{});
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& st : m_entry.body) {
        const auto* inst = std::get_if<Instruction>(&st.item);
        if (!inst) continue;
        auto dests = destinations(*inst);
        for (size_t k = 0; k < dests.size(); ++k) {
          Value& v = m_values[dests[k]];
          Value joined = join(v, result(*inst, k));
          if (!(joined == v)) {
            v = joined;
            changed = true;
          }
        }
      }
    }
  }

  // The pointer field `reg` points into, or -1.
  int field_of(std::string_view reg) const {
    auto it = m_values.find(reg);
    if (it == m_values.end() || it->second.kind != Value::Kind::pointer) return -1;
    return int(it->second.field);
  }

private:
  const ptx::Function& m_entry;
  const std::vector<PointerField>& m_fields;
  const std::vector<ptx::ParamInfo>& m_params;
  std::unordered_map<std::string_view, Value> m_values;

  Value operand(const Operand& o) const {
    switch (o.kind) {
    case Operand::Kind::reg: {
      auto it = m_values.find(o.name);
      // never defined in the entry: a special register (%tid.x, %ctaid.x, ...)
      return it == m_values.end() ? Value::number() : it->second;
    }
    case Operand::Kind::imm_int:
    case Operand::Kind::imm_f32:
    case Operand::Kind::imm_f64:
    case Operand::Kind::imm_dec:
      return Value::number();
    default:
      return Value::unknown(); // the address of a symbol, an expression kept as text
    }
  }

  // A pointer field loaded from the parameters (`ld.param.u64 %rd1, [name+offset]`).
  Value param_load(const Instruction& inst, size_t dest) const {
    const Operand& address = inst.operands[1];
    ptx::Type t = inst.last_type();
    // read through the parameter's address: whatever it holds was not followed by the analysis
    if (address.base_is_reg) return Value::unknown();
    if (!is_int64(t)) return Value::number();
    for (size_t p = 0; p < m_params.size(); ++p) {
      if (m_params[p].name != address.name) continue;
      auto offset = uint32_t(address.value + int64_t(dest) * 8);
      for (size_t f = 0; f < m_fields.size(); ++f) {
        if (m_fields[f].param == p && m_fields[f].offset == offset)
          return Value::pointer(uint32_t(f));
      }
    }
    return Value::number(); // a 64-bit scalar the kernel never uses as an address
  }

  // What the `dest`-th destination of `inst` holds, from its sources' current values.
  Value result(const Instruction& inst, size_t dest) const {
    switch (inst.op) {
    case Opcode::ld:
      if (inst.space() == Space::param && inst.operands.size() >= 2) return param_load(inst, dest);
      return Value::number(); // a value loaded from memory
    case Opcode::ldu:
    case Opcode::atom:
      return Value::number();
    default:
      break;
    }
    std::vector<Value> in;
    for (size_t i = 1; i < inst.operands.size(); ++i) in.push_back(operand(inst.operands[i]));
    auto types = inst.types();
    bool integer = !types.empty() && std::none_of(types.begin(), types.end(), ptx::is_float);
    auto all_numbers = [&](size_t from, size_t to) {
      Value acc = Value::number();
      for (size_t i = from; i < to && i < in.size(); ++i) {
        if (in[i].kind == Value::Kind::unset) return Value{};
        if (in[i].kind != Value::Kind::number) acc = Value::unknown();
      }
      return acc;
    };
    // pointer ± number keeps the pointer's allocation; so do moves and 64-bit conversions
    auto offset_of = [&](Value base, Value offset) {
      if (base.kind == Value::Kind::unset || offset.kind == Value::Kind::unset) return Value{};
      if (offset.kind != Value::Kind::number) return Value::unknown();
      return base.kind == Value::Kind::unknown ? Value::unknown() : base;
    };
    switch (inst.op) {
    case Opcode::mov:
      if (in.size() == 1) return in[0];
      break;
    case Opcode::cvta:
      // cvta.to.global and cvta.global name the same global memory; other spaces are not it
      if (in.size() == 1 && inst.space() == Space::global) return in[0];
      break;
    case Opcode::cvt:
      if (in.size() == 1 && types.size() == 2 && is_int64(types[0]) && is_int64(types[1])) {
        return in[0];
      }
      break;
    case Opcode::add:
      if (integer && in.size() == 2) {
        if (in[0].kind == Value::Kind::pointer) return offset_of(in[0], in[1]);
        if (in[1].kind == Value::Kind::pointer) return offset_of(in[1], in[0]);
      }
      break;
    case Opcode::sub:
      if (integer && in.size() == 2 && in[0].kind == Value::Kind::pointer) {
        return offset_of(in[0], in[1]);
      }
      break;
    case Opcode::mad:
      // a * b + c: the product is an offset, c may be the pointer
      if (integer && in.size() == 3 && in[2].kind == Value::Kind::pointer) {
        Value factors = all_numbers(0, 2);
        return factors.kind == Value::Kind::number ? in[2] : factors;
      }
      break;
    case Opcode::selp:
      if (in.size() == 3) return join(in[0], in[1]);
      break;
    default:
      break;
    }
    return all_numbers(0, in.size());
  }
};

class Readonly final : public Strategy {
public:
  std::string id() const override { return "readonly"; }
  double expected_speedup() const override { return 1.1; }
  double cost_gpu_seconds() const override { return 1.0; } // one candidate

  std::unique_ptr<Session> start(const KernelTask& task) override {
    auto ptx_text = kernel_ptx(task);
    if (!ptx_text) return decline(task, "no PTX: " + ptx_text.error().message);
    auto module = ptx::parse(*ptx_text, "readonly");
    if (!module) return decline(task, "the PTX does not parse: " + module.error().message);
    if (module->address_size != 64) return decline(task, "32-bit addresses (.address_size 32)");
    ptx::Function* entry = module->function(task.key.entry);
    if (!entry || !entry->is_entry || !entry->has_body) {
      return decline(task, "no body of the entry in the PTX");
    }
    std::string why;
    auto candidate = transform(*module, *entry, why);
    if (!candidate) return decline(task, std::move(why));
    candidate->entry = task.key.entry;
    std::vector<Candidate> out;
    out.push_back(std::move(*candidate));
    return fixed_session(std::move(out));
  }

private:
  // The candidate, or nullopt with `why` it does not apply.
  std::optional<Candidate> transform(ptx::Module& module, ptx::Function& entry,
                                     std::string& why) const {
    ptx::EntryInfo info = ptx::analyze_entry(module, entry);
    // A callee or an instruction kept as text may write memory the dataflow cannot see.
    if (!info.callees.empty() || info.has_opaque) {
      why = !info.callees.empty() ? "it calls functions whose writes the analysis does not follow"
                                  : "it has instructions the analysis cannot see into";
      return std::nullopt;
    }

    std::vector<PointerField> fields;
    for (uint32_t p = 0; p < info.params.size(); ++p) {
      const auto& param = info.params[p];
      for (const auto& use : param.pointers) {
        // A parameter read through its address may hold pointers the analysis did not follow.
        bool read_only = use.access == ptx::k_access_read && !use.escapes && !param.address_taken;
        fields.push_back({p, use.offset, read_only});
      }
    }
    if (std::none_of(fields.begin(), fields.end(),
                     [](const PointerField& f) { return f.read_only; })) {
      why = "no pointer parameter is only read";
      return std::nullopt;
    }
    AddressFlow flow(entry, fields, info.params);
    flow.run();

    // Every write to memory a pointer could reach must go through a pointer field.
    bool writes_global = false;
    for (const auto& st : entry.body) {
      const auto* inst = std::get_if<Instruction>(&st.item);
      if (!inst) continue;
      // an indirect call has no callee the analysis could list
      if (inst->op == Opcode::call || writes_unmodeled_memory(inst->op)) {
        why = "it writes memory through an instruction the analysis does not model (" +
              std::string(ptx::opcode_name(inst->op)) + ")";
        return std::nullopt;
      }
      if (!writes_memory(*inst) || private_space(inst->space())) continue;
      auto address =
          std::find_if(inst->operands.begin(), inst->operands.end(),
                       [](const Operand& o) { return o.kind == Operand::Kind::address; });
      if (address == inst->operands.end() || !address->base_is_reg || !address->elems.empty() ||
          flow.field_of(address->name) < 0) {
        why = "a write's address does not come from one pointer parameter";
        return std::nullopt;
      }
      writes_global = true;
    }

    std::set<uint32_t> changed_fields;
    size_t changed_loads = 0;
    for (auto& st : entry.body) {
      auto* inst = std::get_if<Instruction>(&st.item);
      if (!inst || inst->op != Opcode::ld || inst->space() != Space::global ||
          inst->has_mod("nc") || inst->operands.size() < 2 ||
          !std::all_of(inst->mods.begin(), inst->mods.end(), nc_compatible)) {
        continue;
      }
      const Operand& address = inst->operands[1];
      if (address.kind != Operand::Kind::address || !address.base_is_reg) continue;
      int f = flow.field_of(address.name);
      if (f < 0 || !fields[size_t(f)].read_only) continue;
      // .weak is what a plain ld means, and ld.global.nc does not take it
      std::vector<std::string_view> mods;
      for (auto m : inst->mods) {
        if (m == "weak") continue;
        mods.push_back(m);
        if (m == "global") mods.push_back("nc");
      }
      inst->mods = std::move(mods);
      changed_fields.insert(uint32_t(f));
      ++changed_loads;
    }
    if (!changed_loads) {
      why = "no global load through a read-only pointer to make .nc";
      return std::nullopt;
    }

    std::string names;
    for (uint32_t f : changed_fields) {
      if (!names.empty()) names += ", ";
      names += param_label(entry.name, info.params[fields[f].param].name);
      if (info.params[fields[f].param].aggregate) names += "+" + std::to_string(fields[f].offset);
    }
    Candidate c;
    c.strategy = id();
    c.description = "ld.global.nc through " + names + " (" + std::to_string(changed_loads) +
                    (changed_loads == 1 ? " load)" : " loads)");
    c.kind = CandidateKind::ptx;
    c.code = ptx::print(module);
    c.comparison = Comparison::bitwise;
    // A write through one parameter into another's allocation would leave .nc loads stale.
    c.guard.no_alias = writes_global;
    return c;
  }
};

} // namespace

std::unique_ptr<Strategy> make_readonly_strategy() {
  return std::make_unique<Readonly>();
}

} // namespace hone::agent
