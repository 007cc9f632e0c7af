#include "ptx/analysis.hpp"

#include "ptx/analysis_common.hpp"
#include "ptx/lexer.hpp"
#include "ptx/printer.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace hone::ptx {

std::string access_string(uint8_t access) {
  std::string s;
  if (access & k_access_read) s += 'r';
  if (access & k_access_write) s += 'w';
  if (access & k_access_atomic) s += 'a';
  return s.empty() ? "-" : s;
}

uint8_t ParamInfo::access() const {
  uint8_t a = 0;
  for (const auto& p : pointers) a |= p.access;
  return a;
}

const ParamInfo* EntryInfo::param(std::string_view pname) const {
  for (const auto& p : params) {
    if (p.name == pname) return &p;
  }
  return nullptr;
}

namespace detail {

// Special registers (PTX ISA 10): matched on the name before any `.x` component.
constexpr std::string_view k_special_registers[] = {
    "%tid", "%ntid", "%laneid", "%warpid", "%nwarpid", "%ctaid", "%nctaid", "%smid", "%nsmid",
    "%gridid", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt",
    "%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi",
    "%total_smem_size", "%aggr_smem_size", "%dynamic_smem_size", "%is_explicit_cluster",
    "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
    "%cluster_nctarank", "%current_graph_exec", "%reserved_smem_offset_begin",
    "%reserved_smem_offset_end", "%reserved_smem_offset_cap"};

bool is_special_register(std::string_view name) {
  auto base = name.substr(0, name.find('.'));
  if (base.starts_with("%envreg") || base.starts_with("%pm")) return true;
  return std::find(std::begin(k_special_registers), std::end(k_special_registers), base) !=
         std::end(k_special_registers);
}


bool has_no_destination(const Instruction& inst) {
  switch (inst.op) {
  case Opcode::st:
  case Opcode::red:
  case Opcode::bar:
  case Opcode::barrier:
  case Opcode::bra:
  case Opcode::brx:
  case Opcode::call:
  case Opcode::ret:
  case Opcode::exit:
  case Opcode::trap:
  case Opcode::membar:
  case Opcode::fence:
  case Opcode::prefetch:
  case Opcode::prefetchu:
  case Opcode::nanosleep:
  case Opcode::pmevent:
  case Opcode::stmatrix:
  case Opcode::sust:
  case Opcode::sured:
  case Opcode::cp:
  case Opcode::discard:
  case Opcode::applypriority:
  case Opcode::griddepcontrol:
  case Opcode::brkpt:
    return true;
  case Opcode::wmma:
    return inst.has_mod("store");
  default:
    return false;
  }
}

std::string instruction_text(const Instruction& inst) {
  std::string s = print(inst);
  if (auto tab = s.find(" \t"); tab != std::string::npos) s.erase(tab + 1, 1);
  return s;
}

} // namespace detail

using detail::has_no_destination;
using detail::instruction_text;
using detail::is_special_register;

namespace {


// Instructions whose result is an offset or a value, never a pointer derived from an operand:
// a product, a shift or a quotient of a pointer is not a pointer.
bool kills_pointer(const Instruction& inst) {
  // Floating-point results are values; cvt.f32.u64 converts a number, not an address.
  auto types = inst.types();
  if (!types.empty() && is_float(types.front())) return true;
  switch (inst.op) {
  case Opcode::mul:
  case Opcode::mul24:
  case Opcode::shl:
  case Opcode::shr:
  case Opcode::div:
  case Opcode::rem:
  case Opcode::popc:
  case Opcode::clz:
  case Opcode::bfind:
  case Opcode::brev:
  case Opcode::bfe:
  case Opcode::setp:
  case Opcode::set:
  case Opcode::isspacep:
  case Opcode::vote:
  case Opcode::activemask:
    return true;
  default:
    return false;
  }
}


// Access through an address operand at position `index` of `inst`.
uint8_t address_access(const Instruction& inst, size_t index) {
  switch (inst.op) {
  case Opcode::ld:
  case Opcode::ldu:
  case Opcode::prefetch:
  case Opcode::prefetchu:
  case Opcode::ldmatrix:
  case Opcode::tex:
  case Opcode::tld4:
  case Opcode::suld:
    return k_access_read;
  case Opcode::st:
  case Opcode::stmatrix:
  case Opcode::sust:
    return k_access_write;
  case Opcode::atom:
  case Opcode::red:
  case Opcode::sured:
    return k_access_atomic;
  case Opcode::cp:
    // cp.async[.bulk]: destination first, source second
    return index == 0 ? k_access_write : k_access_read;
  case Opcode::wmma:
    if (inst.has_mod("load")) return k_access_read;
    if (inst.has_mod("store")) return k_access_write;
    return k_access_read | k_access_write;
  default:
    return k_access_read | k_access_write;
  }
}

// Does `inst` change the memory its address operand at position `index` names?
bool writes_memory(const Instruction& inst, size_t index) {
  switch (inst.op) {
  case Opcode::st:
  case Opcode::atom:
  case Opcode::red:
  case Opcode::stmatrix:
    return true;
  case Opcode::cp:
    return index == 0; // the destination
  case Opcode::wmma:
    return inst.has_mod("store");
  case Opcode::multimem:
    return inst.has_mod("st") || inst.has_mod("red");
  default:
    return false;
  }
}

// A griddepcontrol.wait: the thread waits until the prerequisite grids of a programmatic
// dependent launch have completed and their writes are visible.
bool is_grid_wait(const Instruction& inst) {
  return inst.op == Opcode::griddepcontrol && inst.has_mod("wait");
}

// How the address operand at position `index` of `inst` accesses global memory (UnwaitedAccess
// says which instructions count), or k_access_none where it cannot reach global memory.
uint8_t global_access(const Instruction& inst, size_t index) {
  Space space = inst.space();
  bool global = space == Space::global || space == Space::none;
  switch (inst.op) {
  case Opcode::ld:
  case Opcode::ldu:
    return global ? k_access_read : k_access_none;
  case Opcode::st:
    return global ? k_access_write : k_access_none;
  case Opcode::atom:
  case Opcode::red:
    return global ? k_access_atomic : k_access_none;
  case Opcode::tex:
  case Opcode::tld4:
  case Opcode::suld:
    return k_access_read;
  case Opcode::sust:
    return k_access_write;
  case Opcode::sured:
    return k_access_atomic;
  case Opcode::wmma:
    if (!global) return k_access_none;
    if (inst.has_mod("load")) return k_access_read;
    return inst.has_mod("store") ? k_access_write : k_access_none;
  case Opcode::multimem:
    if (inst.has_mod("ld_reduce")) return k_access_read;
    if (inst.has_mod("st")) return k_access_write;
    return inst.has_mod("red") ? k_access_atomic : k_access_none;
  case Opcode::cp: {
    // cp.async.ca.shared.global [dst], [src]: the destination's space, then the source's.
    if (inst.has_mod("prefetch")) return k_access_none;
    std::vector<Space> spaces;
    for (auto m : inst.mods) {
      if (Space s = space_from_name(m); s != Space::none) spaces.push_back(s);
    }
    if (index == 0 && !spaces.empty() && spaces[0] == Space::global) {
      return inst.has_mod("reduce") ? k_access_atomic : k_access_write;
    }
    if (index == 1 && spaces.size() >= 2 && spaces[1] == Space::global) return k_access_read;
    return k_access_none;
  }
  default:
    return k_access_none;
  }
}

// Functions of the CUDA runtime a kernel calls without their bodies, which touch no memory of
// another kernel's.
bool is_runtime_call(std::string_view name) {
  return name == "vprintf" || name == "malloc" || name == "free" || name == "__assertfail";
}

// The function a call names, or nullptr for an indirect call (through a register).
const Operand* call_target(const Instruction& call) {
  for (const auto& o : call.operands) {
    if (o.kind == Operand::Kind::list) continue;
    return o.kind == Operand::Kind::symbol ? &o : nullptr;
  }
  return nullptr;
}

// Where the threads of a function may not have waited for the grids they depend on yet
// (griddepcontrol.wait, programmatic dependent launch). A statement is "after the wait" only when
// every path from the function's start to it passes an unguarded griddepcontrol.wait or an
// unguarded call to a function that waits on every path to its returns: the complement of what
// the start reaches through neither. Conservative where the control flow is not followed: brx
// may go to any label, a branch to a label named twice (in nested scopes) to both.
class GridWaits {
public:
  explicit GridWaits(const Module& m) : m_module(m) {}

  // Does `entry`, or a function it calls directly (transitively), hold a griddepcontrol.wait?
  bool any_wait(const Function& entry) const {
    std::vector<const Function*> reached{&entry};
    std::set<const Function*> seen{&entry};
    for (size_t i = 0; i < reached.size(); ++i) {
      for (const auto& st : reached[i]->body) {
        const auto* inst = std::get_if<Instruction>(&st.item);
        if (!inst) continue;
        if (is_grid_wait(*inst)) return true;
        if (const Function* g = callee(*inst); g && seen.insert(g).second) reached.push_back(g);
      }
    }
    return false;
  }

  // Per statement of `f`: true where some path from f's start reaches it without a wait.
  const std::vector<bool>& unwaited(const Function& f) {
    compute(f);
    return m_unwaited.at(&f);
  }

  // The function `inst` calls, when it is a call to a function with a body; else nullptr.
  const Function* callee(const Instruction& inst) const {
    if (inst.op != Opcode::call) return nullptr;
    const Operand* t = call_target(inst);
    const Function* g = t ? m_module.function(t->name) : nullptr;
    return g && g->has_body ? g : nullptr;
  }

private:
  const Module& m_module;
  std::map<const Function*, std::vector<bool>> m_unwaited;
  std::map<const Function*, bool> m_always_waits; // every return of the function after a wait
  std::set<const Function*> m_in_progress;        // a recursive call waits for nothing

  bool always_waits(const Function& f) {
    if (m_in_progress.count(&f)) return false;
    compute(f);
    return m_always_waits.at(&f);
  }

  void compute(const Function& f) {
    if (m_unwaited.count(&f)) return;
    m_in_progress.insert(&f);
    const auto& body = f.body;
    std::unordered_map<std::string_view, std::vector<size_t>> labels;
    std::vector<size_t> all_labels;
    for (size_t k = 0; k < body.size(); ++k) {
      if (const auto* l = std::get_if<Label>(&body[k].item)) {
        labels[l->name].push_back(k);
        all_labels.push_back(k);
      }
    }
    std::vector<bool> seen(body.size(), false);
    bool returns = false; // a return (or the end of the body) reached without a wait
    std::vector<size_t> work{0};
    while (!work.empty()) {
      size_t k = work.back();
      work.pop_back();
      if (k >= body.size()) {
        returns = true;
        continue;
      }
      if (seen[k]) continue;
      seen[k] = true;
      const auto* inst = std::get_if<Instruction>(&body[k].item);
      if (!inst) {
        work.push_back(k + 1);
        continue;
      }
      bool guarded = !inst->guard.empty();
      auto to_every_label = [&] { work.insert(work.end(), all_labels.begin(), all_labels.end()); };
      switch (inst->op) {
      case Opcode::bra: {
        bool found = false;
        for (const auto& o : inst->operands) {
          if (o.kind != Operand::Kind::symbol) continue;
          if (auto it = labels.find(o.name); it != labels.end()) {
            work.insert(work.end(), it->second.begin(), it->second.end());
            found = true;
          }
        }
        if (!found) to_every_label();
        break;
      }
      case Opcode::brx:
        to_every_label();
        break;
      case Opcode::ret:
        returns = true;
        break;
      case Opcode::exit:
      case Opcode::trap:
        break;
      case Opcode::griddepcontrol:
        if (!is_grid_wait(*inst) || guarded) work.push_back(k + 1);
        continue;
      case Opcode::call:
        if (const Function* g = callee(*inst); guarded || !g || !always_waits(*g)) {
          work.push_back(k + 1);
        }
        continue;
      default:
        work.push_back(k + 1);
        continue;
      }
      // bra, brx, ret, exit and trap fall through when not taken
      if (guarded) work.push_back(k + 1);
    }
    m_in_progress.erase(&f);
    m_always_waits[&f] = !returns;
    m_unwaited[&f] = std::move(seen);
  }
};


using Bits = std::vector<uint64_t>;

bool merge(Bits& into, const Bits& from) {
  bool changed = false;
  for (size_t i = 0; i < into.size(); ++i) {
    uint64_t n = into[i] | from[i];
    if (n != into[i]) {
      into[i] = n;
      changed = true;
    }
  }
  return changed;
}

// The pointer analysis of one function: what derives from the pointers in the entry's parameters
// (`params`; empty for a called function) and from the addresses of variables, and the writes to
// global or generic memory with what their addresses derive from (appended to `writes`).
class PointerAnalysis {
public:
  PointerAnalysis(const Module& m, const Function& f, std::vector<ParamInfo>& params,
                  std::vector<MemoryWrite>& writes)
      : m_module(m), m_f(f), m_params(params), m_writes(writes) {
    for (const auto& st : f.body) {
      if (const auto* v = std::get_if<VarDecl>(&st.item)) m_locals.emplace(v->name, v);
    }
  }

  // Also report the accesses to global memory at the statements `unwaited` marks (GridWaits) to
  // `out`.
  PointerAnalysis& track_unwaited(const std::vector<bool>& unwaited,
                                  std::vector<UnwaitedAccess>& out) {
    m_unwaited = &unwaited;
    m_unwaited_out = &out;
    return *this;
  }

  void run() {
    collect_sources();
    m_words = (m_sources.size() + 63) / 64;
    if (!m_sources.empty()) propagate();
    collect_uses();
    report();
  }

private:
  static constexpr uint32_t k_variable = ~uint32_t(0); // Source::param of a variable's address

  struct Source {
    uint32_t param; // k_variable: the address of `variable`
    uint32_t offset;
    uint32_t size;
    uint8_t access = k_access_none;
    bool used_as_address = false;
    bool escapes = false;
    std::vector<Type> types{};
    const VarDecl* variable = nullptr;
    bool module_scope = false;
  };

  const Module& m_module;
  const Function& m_f;
  std::vector<ParamInfo>& m_params;
  std::vector<MemoryWrite>& m_writes;
  const std::vector<bool>* m_unwaited = nullptr; // per statement: before a wait
  std::vector<UnwaitedAccess>* m_unwaited_out = nullptr;
  std::unordered_map<std::string_view, const VarDecl*> m_locals; // the function's own variables
  std::vector<Source> m_sources;
  std::unordered_map<std::string_view, uint32_t> m_variable_sources; // name -> source
  std::unordered_map<std::string_view, uint32_t> m_reg_ids;
  std::vector<Bits> m_taint;                // per register id
  std::vector<std::pair<std::string_view, uint32_t>> m_seeds; // register, source it holds
  size_t m_words = 0;

  // The source standing for the address of the variable `name`, or nullopt when no variable (of
  // the function, else of the module) has that name.
  std::optional<uint32_t> variable_source(std::string_view name) {
    if (auto it = m_variable_sources.find(name); it != m_variable_sources.end()) return it->second;
    const VarDecl* v = nullptr;
    bool module_scope = false;
    if (auto it = m_locals.find(name); it != m_locals.end()) {
      v = it->second;
    } else if ((v = m_module.variable(name))) {
      module_scope = true;
    }
    if (!v) return std::nullopt;
    auto id = uint32_t(m_sources.size());
    Source s{k_variable, 0, 8};
    s.variable = v;
    s.module_scope = module_scope;
    m_sources.push_back(std::move(s));
    m_variable_sources.emplace(name, id);
    return id;
  }

  // Instructions whose destination derives from their sources (propagate() follows them).
  static bool derives(const Instruction& inst) {
    return !inst.operands.empty() && !has_no_destination(inst) && inst.op != Opcode::ld &&
           inst.op != Opcode::ldu && inst.op != Opcode::atom && !kills_pointer(inst);
  }

  // Every identifier in raw text.
  template <class F> static void for_each_identifier(std::string_view text, F&& fn) {
    for (size_t i = 0; i < text.size();) {
      if (is_ident_start(text[i])) {
        size_t j = i + 1;
        while (j < text.size() && is_ident_char(text[j])) ++j;
        fn(text.substr(i, j - i));
        i = j;
      } else {
        ++i;
      }
    }
  }

  int param_index(std::string_view name) const {
    for (size_t i = 0; i < m_params.size(); ++i) {
      if (m_params[i].name == name) return int(i);
    }
    return -1;
  }

  uint32_t reg_id(std::string_view name) {
    auto [it, inserted] = m_reg_ids.emplace(name, uint32_t(m_taint.size()));
    if (inserted) m_taint.emplace_back(m_words, 0);
    return it->second;
  }

  // Parameter loads `ld.param [name+off]` become sources; parameters named otherwise are
  // address-taken.
  void collect_sources() {
    for (size_t si = 0; si < m_f.body.size(); ++si) {
      const auto* inst = std::get_if<Instruction>(&m_f.body[si].item);
      if (!inst) continue;
      for (size_t oi = 0; oi < inst->operands.size(); ++oi) {
        const auto& o = inst->operands[oi];
        bool param_load = inst->op == Opcode::ld && inst->space() == Space::param &&
                          o.kind == Operand::Kind::address && !o.base_is_reg && oi == 1;
        if (param_load) {
          int p = param_index(o.name);
          if (p < 0) continue;
          uint32_t size = type_size(inst->last_type());
          const auto& dest = inst->operands[0];
          std::vector<std::string_view> regs;
          detail::for_each_reg(dest, [&](std::string_view r) { regs.push_back(r); });
          for (size_t k = 0; k < regs.size(); ++k) {
            // Only a 64-bit integer can hold a pointer with .address_size 64.
            if (size != 8 || is_float(inst->last_type())) continue;
            m_seeds.emplace_back(regs[k], uint32_t(m_sources.size()));
            m_sources.push_back({uint32_t(p), uint32_t(o.value + int64_t(k) * size), size});
          }
          continue;
        }
        if ((o.kind == Operand::Kind::symbol || o.kind == Operand::Kind::address) &&
            !o.base_is_reg) {
          if (int p = param_index(o.name); p >= 0) m_params[size_t(p)].address_taken = true;
        }
        // `mov.u64 %rd1, counter;`, `cvta.global.u64 %rd2, counter;`: the destination holds the
        // address of a variable (mad: only its addend can be an address).
        bool mad = (inst->op == Opcode::mad || inst->op == Opcode::mad24) &&
                   inst->operands.size() == 4;
        if (oi == 0 || (mad && oi != 3) || !derives(*inst)) continue;
        auto seed = [&](std::string_view name) {
          if (auto src = variable_source(name)) {
            detail::for_each_reg(inst->operands[0],
                         [&](std::string_view r) { m_seeds.emplace_back(r, *src); });
          }
        };
        if (o.kind == Operand::Kind::symbol) seed(o.name);
        if (o.kind == Operand::Kind::expr) for_each_identifier(o.name, seed);
      }
    }
  }

  void propagate() {
    // Seed the sources.
    for (const auto& [reg, src] : m_seeds) {
      auto& t = m_taint[reg_id(reg)];
      t[src / 64] |= 1ull << (src % 64);
    }
    // Flow-insensitive: iterate to a fixed point over every instruction.
    bool changed = true;
    Bits acc(m_words);
    while (changed) {
      changed = false;
      for (const auto& st : m_f.body) {
        const auto* inst = std::get_if<Instruction>(&st.item);
        if (!inst || !derives(*inst)) continue;
        std::fill(acc.begin(), acc.end(), 0);
        auto sources_from = [&](const Operand& o) {
          detail::for_each_reg(o, [&](std::string_view r) { merge(acc, m_taint[reg_id(r)]); });
        };
        if ((inst->op == Opcode::mad || inst->op == Opcode::mad24) && inst->operands.size() == 4) {
          sources_from(inst->operands[3]); // a*b is an offset; c may be a pointer
        } else {
          for (size_t i = 1; i < inst->operands.size(); ++i) sources_from(inst->operands[i]);
        }
        bool any = std::any_of(acc.begin(), acc.end(), [](uint64_t w) { return w != 0; });
        if (!any) continue;
        detail::for_each_reg(inst->operands[0], [&](std::string_view r) {
          if (merge(m_taint[reg_id(r)], acc)) changed = true;
        });
      }
    }
  }

  template <class F> void for_each_source(const Bits& bits, F&& fn) {
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint64_t b = bits[w]; b; b &= b - 1) fn(m_sources[w * 64 + size_t(__builtin_ctzll(b))]);
    }
  }

  void escape_reg(std::string_view r) {
    auto it = m_reg_ids.find(r);
    if (it == m_reg_ids.end()) return;
    for_each_source(m_taint[it->second], [](Source& s) { s.escapes = true; });
  }

  // Every register-like word in raw text (opaque instructions, kept expressions).
  void escape_text(std::string_view text) {
    for_each_identifier(text, [&](std::string_view r) { escape_reg(r); });
  }

  // A write to global or generic memory through the address operand `address` of `inst`.
  void record_write(const Statement& st, const Instruction& inst, const Operand& address) {
    MemoryWrite w;
    w.function = std::string(m_f.name);
    w.instruction = instruction_text(inst);
    w.loc = st.loc;
    auto add = [&](const Source& s) {
      if (s.param != k_variable) {
        w.pointers.push_back({s.param, s.offset});
      } else {
        w.variables.push_back({std::string(s.variable->name), s.variable->space, s.module_scope});
      }
    };
    if (address.base_is_reg) {
      if (auto it = m_reg_ids.find(address.name); it != m_reg_ids.end()) {
        for_each_source(m_taint[it->second], add);
      }
    } else if (!address.name.empty()) {
      if (auto src = variable_source(address.name)) add(m_sources[*src]);
    }
    std::sort(w.pointers.begin(), w.pointers.end());
    w.pointers.erase(std::unique(w.pointers.begin(), w.pointers.end()), w.pointers.end());
    auto by_name = [](const VariableRef& a, const VariableRef& b) { return a.name < b.name; };
    auto same_name = [](const VariableRef& a, const VariableRef& b) { return a.name == b.name; };
    std::sort(w.variables.begin(), w.variables.end(), by_name);
    w.variables.erase(std::unique(w.variables.begin(), w.variables.end(), same_name),
                      w.variables.end());
    m_writes.push_back(std::move(w));
  }

  // An access to global memory before a wait (UnwaitedAccess) through the address operand
  // `address` of `inst`, with the parameter pointers its address derives from; left out when it
  // derives only from variables (the kernel's own memory).
  void record_unwaited(const Statement& st, const Instruction& inst, const Operand& address,
                       uint8_t access) {
    UnwaitedAccess a;
    bool variables = false;
    auto add = [&](const Source& s) {
      if (s.param != k_variable) {
        a.pointers.push_back({s.param, s.offset});
      } else {
        variables = true;
      }
    };
    // [%rd1+8], [table], or the handle of [tex, {%f1, %f2}] and [tensormap, {%r1, %r2}]
    auto from = [&](std::string_view name, bool is_reg) {
      if (is_reg) {
        if (auto it = m_reg_ids.find(name); it != m_reg_ids.end()) {
          for_each_source(m_taint[it->second], add);
        }
      } else if (!name.empty()) {
        if (auto src = variable_source(name)) add(m_sources[*src]);
      }
    };
    from(address.name, address.base_is_reg);
    if (!address.elems.empty()) {
      const Operand& handle = address.elems.front();
      if (handle.kind == Operand::Kind::reg || handle.kind == Operand::Kind::symbol) {
        from(handle.name, handle.kind == Operand::Kind::reg);
      }
    }
    if (a.pointers.empty() && variables) return;
    std::sort(a.pointers.begin(), a.pointers.end());
    a.pointers.erase(std::unique(a.pointers.begin(), a.pointers.end()), a.pointers.end());
    a.function = std::string(m_f.name);
    a.instruction = instruction_text(inst);
    a.loc = st.loc;
    a.access = access;
    m_unwaited_out->push_back(std::move(a));
  }

  // An instruction before a wait whose accesses are not known: it may read or write anything.
  void record_untraced(const Statement& st, std::string instruction) {
    UnwaitedAccess a;
    a.function = std::string(m_f.name);
    a.instruction = std::move(instruction);
    a.loc = st.loc;
    a.access = k_access_read | k_access_write;
    m_unwaited_out->push_back(std::move(a));
  }

  void collect_uses() {
    for (size_t k = 0; k < m_f.body.size(); ++k) {
      const Statement& st = m_f.body[k];
      bool unwaited = m_unwaited && k < m_unwaited->size() && (*m_unwaited)[k];
      if (const auto* op = std::get_if<Opaque>(&st.item)) {
        escape_text(op->text);
        if (unwaited) record_untraced(st, std::string(op->text));
        continue;
      }
      const auto* inst = std::get_if<Instruction>(&st.item);
      if (!inst) continue;
      if (unwaited && inst->op == Opcode::call) {
        // A called function's own accesses are its analysis's; one without a body is unknown.
        const Operand* t = call_target(*inst);
        const Function* g = t ? m_module.function(t->name) : nullptr;
        if (!t || ((!g || !g->has_body) && !is_runtime_call(t->name))) {
          record_untraced(st, instruction_text(*inst));
        }
      }
      bool stores_value = inst->op == Opcode::st || inst->op == Opcode::atom ||
                          inst->op == Opcode::red || inst->op == Opcode::call ||
                          inst->op == Opcode::sust || inst->op == Opcode::sured;
      for (size_t i = 0; i < inst->operands.size(); ++i) {
        const auto& o = inst->operands[i];
        if (o.kind == Operand::Kind::expr) {
          escape_text(o.name);
          continue;
        }
        if (o.kind == Operand::Kind::address) {
          Space space = inst->space();
          if (writes_memory(*inst, i) && (space == Space::global || space == Space::none)) {
            record_write(st, *inst, o);
          }
          if (unwaited) {
            if (uint8_t a = global_access(*inst, i)) record_unwaited(st, *inst, o, a);
          }
          if (o.base_is_reg) {
            auto it = m_reg_ids.find(o.name);
            if (it != m_reg_ids.end()) {
              uint8_t a = address_access(*inst, i);
              Type t = inst->last_type();
              for_each_source(m_taint[it->second], [&](Source& s) {
                s.used_as_address = true;
                s.access |= a;
                if (t != Type::none && std::find(s.types.begin(), s.types.end(), t) == s.types.end()) {
                  s.types.push_back(t);
                }
              });
            }
          }
          for (const auto& e : o.elems)
            detail::for_each_reg(e, [&](std::string_view r) { escape_reg(r); });
          continue;
        }
        bool is_dest = i == 0 && !has_no_destination(*inst);
        if (stores_value && !is_dest) {
          detail::for_each_reg(o, [&](std::string_view r) { escape_reg(r); });
        }
      }
    }
  }

  void report() {
    for (const auto& s : m_sources) {
      if (s.param == k_variable || (!s.used_as_address && !s.escapes)) continue;
      uint8_t access = s.access;
      if (s.escapes) access |= k_access_read | k_access_write;
      auto& ptrs = m_params[s.param].pointers;
      auto it = std::find_if(ptrs.begin(), ptrs.end(),
                             [&](const PointerUse& u) { return u.offset == s.offset; });
      if (it == ptrs.end()) {
        ptrs.push_back({s.offset, access, s.escapes, s.types});
      } else {
        it->access |= access;
        it->escapes = it->escapes || s.escapes;
        it->types.insert(it->types.end(), s.types.begin(), s.types.end());
      }
    }
    for (auto& p : m_params) {
      std::sort(p.pointers.begin(), p.pointers.end(),
                [](const PointerUse& a, const PointerUse& b) { return a.offset < b.offset; });
      for (auto& u : p.pointers) {
        std::sort(u.types.begin(), u.types.end());
        u.types.erase(std::unique(u.types.begin(), u.types.end()), u.types.end());
      }
    }
  }
};

void layout_params(const Function& f, EntryInfo& info) {
  uint32_t offset = 0;
  for (const auto& p : f.params) {
    ParamInfo pi;
    pi.name = std::string(p.name);
    pi.type = p.type;
    pi.size = p.size_bytes();
    pi.align = p.alignment();
    pi.aggregate = p.array >= 0;
    offset = (offset + pi.align - 1) / pi.align * pi.align;
    pi.offset = offset;
    offset += pi.size;
    info.params.push_back(std::move(pi));
  }
  info.param_bytes = offset;
}

// Names of module-level symbols an instruction or raw text mentions.
void collect_symbols(const Statement& st, std::set<std::string_view>& out) {
  auto from_operand = [&](auto&& self, const Operand& o) -> void {
    if ((o.kind == Operand::Kind::symbol || o.kind == Operand::Kind::address) && !o.base_is_reg &&
        !o.name.empty()) {
      out.insert(o.name);
    }
    if (o.kind == Operand::Kind::expr) {
      for (size_t i = 0; i < o.name.size();) {
        if (is_ident_start(o.name[i])) {
          size_t j = i + 1;
          while (j < o.name.size() && is_ident_char(o.name[j])) ++j;
          out.insert(o.name.substr(i, j - i));
          i = j;
        } else {
          ++i;
        }
      }
    }
    for (const auto& e : o.elems) self(self, e);
  };
  if (const auto* inst = std::get_if<Instruction>(&st.item)) {
    for (const auto& o : inst->operands) from_operand(from_operand, o);
  } else if (const auto* op = std::get_if<Opaque>(&st.item)) {
    Operand e;
    e.kind = Operand::Kind::expr;
    e.name = op->text;
    from_operand(from_operand, e);
  }
}

uint64_t align_up(uint64_t v, uint64_t a) { return a ? (v + a - 1) / a * a : v; }

} // namespace

EntryInfo analyze_entry(const Module& module, const Function& entry) {
  EntryInfo info;
  info.name = std::string(entry.name);
  layout_params(entry, info);
  // What can run before a griddepcontrol.wait: the entry, and the functions its calls before a
  // wait reach (only where the kernel waits somewhere at all).
  GridWaits grid_waits(module);
  std::set<const Function*> before_wait;
  if (grid_waits.any_wait(entry)) {
    info.waits_grid_dependency = true;
    std::vector<const Function*> work{&entry};
    before_wait.insert(&entry);
    while (!work.empty()) {
      const Function* f = work.back();
      work.pop_back();
      const auto& unwaited = grid_waits.unwaited(*f);
      for (size_t k = 0; k < f->body.size(); ++k) {
        const auto* inst = std::get_if<Instruction>(&f->body[k].item);
        const Function* g = inst && unwaited[k] ? grid_waits.callee(*inst) : nullptr;
        if (g && before_wait.insert(g).second) work.push_back(g);
      }
    }
  }
  auto pointer_analysis = [&](const Function& f, std::vector<ParamInfo>& params) {
    PointerAnalysis a(module, f, params, info.writes);
    if (before_wait.count(&f)) a.track_unwaited(grid_waits.unwaited(f), info.unwaited_accesses);
    a.run();
  };
  pointer_analysis(entry, info.params);

  auto dims = [](const FuncDirective* d) -> std::optional<std::array<int64_t, 3>> {
    if (!d || d->values.empty()) return std::nullopt;
    std::array<int64_t, 3> v{1, 1, 1};
    for (size_t i = 0; i < d->values.size() && i < 3; ++i) v[i] = d->values[i];
    return v;
  };
  info.maxntid = dims(entry.directive("maxntid"));
  info.reqntid = dims(entry.directive("reqntid"));
  if (const auto* d = entry.directive("minnctapersm"); d && !d->values.empty()) {
    info.minnctapersm = d->values[0];
  }
  if (const auto* d = entry.directive("maxnreg"); d && !d->values.empty()) {
    info.maxnreg = d->values[0];
  }

  // The entry and every function it reaches through direct calls.
  std::vector<const Function*> reached{&entry};
  std::set<std::string_view> seen_funcs{entry.name};
  std::set<std::string_view> symbols;
  std::set<std::string> sregs;
  std::map<Type, uint32_t> regs;
  std::set<Type> types_seen;
  bool indirect_call = false;
  for (size_t fi = 0; fi < reached.size(); ++fi) {
    const Function& f = *reached[fi];
    if (fi > 0) {
      std::vector<ParamInfo> none; // a callee's own parameters are not the entry's pointers
      pointer_analysis(f, none);
    }
    for (const auto& st : f.body) {
      collect_symbols(st, symbols);
      if (const auto* r = std::get_if<RegDecl>(&st.item); r && fi == 0) {
        for (const auto& n : r->names) regs[r->type] += uint32_t(n.count >= 0 ? n.count : 1);
      }
      if (const auto* v = std::get_if<VarDecl>(&st.item)) {
        if (v->space == Space::shared) {
          if (v->dims.size() && v->dims.back() < 0) {
            info.dynamic_shared = true;
          } else {
            info.static_shared_bytes = align_up(info.static_shared_bytes, v->align) + v->size_bytes();
          }
        } else if (v->space == Space::local && fi == 0) {
          info.local_bytes = align_up(info.local_bytes, v->align) + v->size_bytes();
        }
      }
      if (std::holds_alternative<Opaque>(st.item)) info.has_opaque = true;
      const auto* inst = std::get_if<Instruction>(&st.item);
      if (!inst) continue;
      if (fi == 0) ++info.instructions;
      switch (inst->op) {
      case Opcode::bar:
      case Opcode::barrier:
        if (!inst->has_mod("warp")) info.uses_barrier = true;
        break;
      case Opcode::shfl:
        info.uses_shuffle = true;
        break;
      case Opcode::vote:
        info.uses_vote = true;
        break;
      case Opcode::match:
        info.uses_match = true;
        break;
      case Opcode::atom:
      case Opcode::red:
        if (inst->space() == Space::shared) {
          info.uses_atomics_shared = true;
        } else {
          info.uses_atomics_global = true;
        }
        break;
      case Opcode::tex:
      case Opcode::tld4:
      case Opcode::suld:
      case Opcode::sust:
        info.uses_texture = true;
        break;
      case Opcode::call:
        indirect_call = indirect_call || call_target(*inst) == nullptr;
        for (const auto& o : inst->operands) {
          if (o.kind != Operand::Kind::symbol) continue;
          const Function* callee = module.function(o.name);
          if (callee && seen_funcs.insert(callee->name).second) {
            reached.push_back(callee);
            info.callees.emplace_back(callee->name);
          }
        }
        break;
      default:
        break;
      }
      for (auto m : inst->mods) {
        Type t = type_from_name(m);
        if (t != Type::none && types_seen.insert(t).second) {
          info.types_used.push_back({t, std::string(f.name), instruction_text(*inst), st.loc});
        }
        if (t == Type::f64) info.uses_fp64 = true;
        if (t == Type::f16 || t == Type::f16x2 || t == Type::bf16 || t == Type::bf16x2) {
          info.uses_fp16 = true;
        }
      }
      for (const auto& o : inst->operands) {
        auto visit = [&](auto&& self, const Operand& op) -> void {
          if (op.kind == Operand::Kind::reg && is_special_register(op.name)) {
            sregs.insert(std::string(op.name));
          }
          for (const auto& e : op.elems) self(self, e);
        };
        visit(visit, o);
      }
    }
  }
  // Module-level .shared variables the entry or its callees name.
  for (const auto& it : module.items) {
    const auto* v = std::get_if<VarDecl>(&it.item);
    if (!v || v->space != Space::shared || !symbols.count(v->name)) continue;
    if (v->dims.size() && v->dims.back() < 0) {
      info.dynamic_shared = true;
    } else {
      info.static_shared_bytes = align_up(info.static_shared_bytes, v->align) + v->size_bytes();
    }
  }
  auto note_global = [&](const VarDecl& v) {
    if (v.space != Space::global || v.type == Type::texref || v.type == Type::samplerref ||
        v.type == Type::surfref) {
      return;
    }
    // A string literal the compiler made (printf's format strings: `.global .align 1 .b8
    // $str[N] = {...}`, `$str$1`, ...): initialized bytes the code only reads. The name is one
    // CUDA C++ cannot spell; hand-written PTX can, which docs/security.md counts as open.
    if (v.name.starts_with("$str") && v.type == Type::b8 && !v.init.empty()) return;
    info.module_globals.push_back(std::string(v.name));
  };
  for (const auto& it : module.items) {
    if (const auto* v = std::get_if<VarDecl>(&it.item)) {
      note_global(*v);
    } else if (const auto* f = std::get_if<Function>(&it.item)) {
      for (const auto& st : f->body) {
        if (const auto* v = std::get_if<VarDecl>(&st.item)) note_global(*v);
      }
    }
  }
  info.special_registers.assign(sregs.begin(), sregs.end());
  // Only an entry that may read such a register needs the dataflow analysis: one its instructions
  // or those of the functions it calls name, or one hidden in text the IR keeps, or in a function
  // an indirect call may reach.
  bool external = info.has_opaque || indirect_call;
  for (const auto& r : info.special_registers) external = external || external_kind(r);
  if (external) info.external_dependences = external_dependences(module, entry);
  for (const auto& [t, n] : regs) {
    info.registers.push_back({t, n});
    info.total_registers += n;
  }
  return info;
}

std::vector<EntryInfo> analyze(const Module& module) {
  std::vector<EntryInfo> out;
  for (const auto* f : module.entries()) out.push_back(analyze_entry(module, *f));
  return out;
}

} // namespace hone::ptx
