// Which effects of a kernel can depend on special registers that say when or where it runs
// (EntryInfo::external_dependences, analysis.hpp): a taint analysis over the entry and the
// functions it calls, with control dependence taken from each function's post-dominator tree.
//
// Registers are tracked by name per function, flow-insensitively (a register that is ever written
// from a dependent value is dependent everywhere), and memory by state space: a dependent value
// stored to shared memory makes every load from shared memory dependent. Both err on the side of
// "depends". Global memory is the exception (store()).
#include "ptx/analysis.hpp"
#include "ptx/analysis_common.hpp"

#include "ptx/lexer.hpp"
#include "ptx/printer.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace hone::ptx {

std::optional<External> external_kind(std::string_view name) {
  // Called for every register operand: most (%r1, %rd2, %f3, %p4) fail on their second letter.
  if (name.size() < 4 || name[0] != '%') return std::nullopt;
  switch (name[1]) {
  case 'c':
  case 'g':
  case 's':
  case 'n':
  case 'w':
  case 'e':
    break;
  case 'p':
    if (name[2] != 'm') return std::nullopt;
    break;
  case 'r':
    if (name[2] != 'e') return std::nullopt;
    break;
  default:
    return std::nullopt;
  }
  auto base = name.substr(0, name.find('.'));
  if (base == "%clock" || base == "%clock_hi" || base == "%clock64") return External::clock;
  if (base == "%globaltimer" || base == "%globaltimer_lo" || base == "%globaltimer_hi")
    return External::timer;
  if (base == "%smid" || base == "%nsmid" || base == "%warpid" || base == "%nwarpid" ||
      base == "%gridid")
    return External::placement;
  if (base == "%current_graph_exec" || base == "%reserved_smem_offset_begin" ||
      base == "%reserved_smem_offset_end" || base == "%reserved_smem_offset_cap")
    return External::driver;
  auto number = [](std::string_view s, int max) {
    if (s.empty() || s.size() > 2) return false;
    int v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    return v <= max;
  };
  if (base.starts_with("%envreg") && number(base.substr(7), 31)) return External::driver;
  if (base.starts_with("%pm")) {
    auto rest = base.substr(3);
    if (rest.ends_with("_64")) rest.remove_suffix(3);
    if (rest.size() == 1 && number(rest, 7)) return External::counters;
  }
  return std::nullopt;
}

std::string_view external_text(External kind) {
  switch (kind) {
  case External::clock:
    return "the SM's cycle counter";
  case External::timer:
    return "the global nanosecond timer";
  case External::counters:
    return "a performance counter";
  case External::placement:
    return "where the thread runs (its SM or warp) or which launch it is";
  case External::driver:
    return "a value the driver sets up";
  }
  return "?";
}

namespace {

using detail::has_no_destination;
using detail::instruction_text;

using Mask = uint64_t; // one bit per External register name met (the 64th and later share a bit)

// Memory the analysis tells apart: a dependent value stored in one makes loads from it dependent.
enum MemClass : uint8_t { k_mem_global, k_mem_shared, k_mem_local, k_mem_param, k_mem_count };
using MemSet = uint8_t; // bits 1 << MemClass
constexpr MemSet k_all_memory = (1u << k_mem_count) - 1;

// An instruction in a function: what a control dependence or a register read points to.
struct Origin {
  const Function* f = nullptr;
  uint32_t stmt = 0;
};

// Registers and expression identifiers named by an operand.
template <class F> void for_each_reg(const Operand& o, F&& fn) {
  detail::for_each_reg<true>(o, fn);
}

template <class F> void for_each_identifier(std::string_view text, F&& fn) {
  Operand e;
  e.kind = Operand::Kind::expr;
  e.name = text;
  for_each_reg(e, fn);
}

bool has_destination(const Instruction& inst) {
  if (inst.operands.empty()) return false;
  // bar.red.popc.u32 %r1, 0, %p1: a reduction over the block's threads
  bool reduction = (inst.op == Opcode::bar || inst.op == Opcode::barrier) && inst.has_mod("red");
  if (has_no_destination(inst) && !reduction) return false;
  auto k = inst.operands[0].kind;
  return k == Operand::Kind::reg || k == Operand::Kind::vector || k == Operand::Kind::pair ||
         k == Operand::Kind::sink;
}

// Does `inst` only read the memory its address operand at `index` names? Anything else with an
// address operand is taken to write it.
bool only_reads(const Instruction& inst, size_t index) {
  switch (inst.op) {
  case Opcode::ld:
  case Opcode::ldu:
  case Opcode::prefetch:
  case Opcode::prefetchu:
  case Opcode::tex:
  case Opcode::tld4:
  case Opcode::suld:
  case Opcode::suq:
  case Opcode::txq:
  case Opcode::ldmatrix:
  case Opcode::applypriority:
    return true;
  case Opcode::cp:
    return index != 0; // cp.async[.bulk] [dst], [src], ...
  case Opcode::wmma:
    return inst.has_mod("load");
  case Opcode::multimem:
    return inst.has_mod("ld_reduce");
  default:
    return false;
  }
}

MemSet space_classes(Space s) {
  switch (s) {
  case Space::shared:
    return 1u << k_mem_shared;
  case Space::local:
    return 1u << k_mem_local;
  case Space::param:
    return 1u << k_mem_param;
  case Space::none:
  case Space::generic:
    return k_all_memory; // a generic address may point into any window
  default:
    return 1u << k_mem_global; // global, const, texture
  }
}

// The function a call names, or nullptr for an indirect call (through a register).
const Operand* call_target(const Instruction& call, size_t& index) {
  for (size_t i = 0; i < call.operands.size(); ++i) {
    const auto& o = call.operands[i];
    if (o.kind == Operand::Kind::list) continue;
    index = i;
    return o.kind == Operand::Kind::symbol ? &o : nullptr;
  }
  index = call.operands.size();
  return nullptr;
}

struct FnState {
  const Function* f = nullptr;
  bool is_entry = false;
  uint32_t n = 0;                          // statements; node n is the exit
  std::vector<std::vector<uint32_t>> succ; // per statement
  std::vector<uint32_t> ipdom;             // per node (n + 1): the immediate post-dominator
  std::unordered_map<std::string_view, uint32_t> regs;
  std::vector<Mask> taint;        // per register id
  std::vector<Mask> ctl;          // per statement: what decides whether it executes
  std::vector<Origin> ctl_origin; // one branch that does
  std::vector<Mask> pushed;       // per branch: bits already spread over its region
  Mask incoming = 0;              // what decides whether some call of it executes
  Origin incoming_origin;
  // It may end the thread (exit, trap, or a call that may): then what follows a call of it in the
  // caller executes only if it did not, as decided by exit_taint.
  bool may_exit = false;
  Mask exit_taint = 0;
};

class ExternalAnalysis {
public:
  ExternalAnalysis(const Module& m, const Function& entry) : m_module(m) {
    add_function(&entry, true);
    // The entry and what it calls (an indirect call: any function with a body).
    for (size_t i = 0; i < m_fns.size(); ++i) {
      for (const auto& st : m_fns[i].f->body) {
        const auto* inst = std::get_if<Instruction>(&st.item);
        if (!inst || inst->op != Opcode::call) continue;
        size_t at = 0;
        const Operand* t = call_target(*inst, at);
        if (!t) {
          m_indirect = true;
          continue;
        }
        if (const Function* g = function(t->name); g && g->has_body) add_function(g, false);
      }
      if (m_indirect && i + 1 == m_fns.size()) {
        for (const auto& it : m_module.items) {
          const auto* g = std::get_if<Function>(&it.item);
          if (g && g->has_body && !g->is_entry) add_function(g, false);
        }
      }
    }
  }

  std::vector<ExternalDependence> run() {
    collect_registers();
    if (m_sregs.empty()) return {};
    find_exits();
    for (auto& s : m_fns) build_cfg(s);
    do {
      m_changed = false;
      for (auto& s : m_fns) propagate(s);
    } while (m_changed);
    return report();
  }

private:
  const Module& m_module;
  std::vector<FnState> m_fns;
  std::unordered_map<const Function*, size_t> m_index;
  std::unordered_map<std::string_view, const Function*> m_functions;
  bool m_indirect = false;
  std::vector<std::string_view> m_sregs; // bit -> register base name
  std::vector<Origin> m_reads;           // bit -> the first instruction reading it
  std::array<Mask, k_mem_count> m_mem{};
  bool m_changed = false;

  const Function* function(std::string_view name) {
    auto [it, fresh] = m_functions.emplace(name, nullptr);
    if (fresh) it->second = m_module.function(name);
    return it->second;
  }

  void add_function(const Function* f, bool entry) {
    if (m_index.count(f)) return;
    m_index.emplace(f, m_fns.size());
    FnState s;
    s.f = f;
    s.is_entry = entry;
    s.n = uint32_t(f->body.size());
    m_fns.push_back(std::move(s));
  }

  FnState& state(const Function* f) { return m_fns[m_index.at(f)]; }

  // The bits of External registers, in the order the entry and then its callees first read them.
  void collect_registers() {
    for (auto& s : m_fns) {
      for (uint32_t k = 0; k < s.n; ++k) {
        const Statement& st = s.f->body[k];
        auto note = [&](std::string_view name) {
          if (!external_kind(name)) return;
          auto base = name.substr(0, name.find('.'));
          if (std::find(m_sregs.begin(), m_sregs.end(), base) != m_sregs.end()) return;
          if (m_sregs.size() < 64) {
            m_sregs.push_back(base);
            m_reads.push_back({s.f, k});
          }
        };
        if (const auto* inst = std::get_if<Instruction>(&st.item)) {
          for (const auto& o : inst->operands) for_each_reg(o, note);
        } else if (const auto* op = std::get_if<Opaque>(&st.item)) {
          for_each_identifier(op->text, note);
        }
      }
    }
  }

  Mask sreg_bit(std::string_view name) const {
    auto base = name.substr(0, name.find('.'));
    auto it = std::find(m_sregs.begin(), m_sregs.end(), base);
    size_t bit = it == m_sregs.end() ? 63 : size_t(it - m_sregs.begin());
    return Mask(1) << bit;
  }

  uint32_t reg_id(FnState& s, std::string_view name) {
    auto [it, fresh] = s.regs.emplace(name, uint32_t(s.taint.size()));
    if (fresh) s.taint.push_back(0);
    return it->second;
  }

  Mask reg(FnState& s, std::string_view name) {
    if (external_kind(name)) return sreg_bit(name);
    auto it = s.regs.find(name);
    return it == s.regs.end() ? 0 : s.taint[it->second];
  }

  Mask use(FnState& s, const Operand& o) {
    Mask m = 0;
    for_each_reg(o, [&](std::string_view r) { m |= reg(s, r); });
    return m;
  }

  void define(FnState& s, std::string_view name, Mask m) {
    if (!m || external_kind(name)) return;
    Mask& t = s.taint[reg_id(s, name)];
    if ((t | m) == t) return;
    t |= m;
    m_changed = true;
  }

  void define(FnState& s, const Operand& o, Mask m) {
    if (!m || o.kind == Operand::Kind::address) return;
    for_each_reg(o, [&](std::string_view r) { define(s, r, m); });
  }

  Mask memory(MemSet set) const {
    Mask m = 0;
    for (int c = 0; c < k_mem_count; ++c) {
      if (set & (1u << c)) m |= m_mem[c];
    }
    return m;
  }

  // Global memory keeps no taint: a dependent value stored there (or at a dependent address, or
  // under a dependent branch) is itself an effect, and what reads it back adds no kind of
  // register to what the kernel's effects depend on; tracking it would only blame the kernel's
  // input loads for what its own outputs depend on.
  void store(MemSet set, Mask m) {
    set &= MemSet(~(1u << k_mem_global));
    if (!m) return;
    for (int c = 0; c < k_mem_count; ++c) {
      if (!(set & (1u << c)) || (m_mem[c] | m) == m_mem[c]) continue;
      m_mem[c] |= m;
      m_changed = true;
    }
  }

  // The memory an address operand names: `ld.param` of the entry's own parameters reads what the
  // application passed, which nothing in the kernel writes.
  MemSet classes(const FnState& s, const Instruction& inst, size_t index) const {
    const Operand& a = inst.operands[index];
    Space space = inst.space();
    if (inst.op == Opcode::cp) {
      // cp.async.ca.shared.global [dst], [src]: the destination's space, then the source's.
      std::vector<Space> spaces;
      for (auto m : inst.mods) {
        if (Space sp = space_from_name(m); sp != Space::none) spaces.push_back(sp);
      }
      space = index < spaces.size() ? spaces[index] : Space::none;
    }
    if (space == Space::param && s.is_entry && !a.base_is_reg) {
      for (const auto& p : s.f->params) {
        if (p.name == a.name) return 0;
      }
    }
    return space_classes(space);
  }

  // What decides whether statement k executes (with its guard, when it has one).
  Mask control(FnState& s, uint32_t k, const Instruction* inst) {
    Mask m = s.ctl[k] | s.incoming;
    if (inst && !inst->guard.empty()) m |= reg(s, inst->guard);
    return m;
  }

  // Whether a call may end the calling thread: a callee that may, a function without a body here
  // other than vprintf, malloc and free (__assertfail traps), an indirect call.
  bool call_may_exit(const Instruction& inst) {
    bool known = true;
    std::string_view name;
    auto fns = targets(inst, known, name);
    if (!known) return name != "vprintf" && name != "malloc" && name != "free";
    return std::any_of(fns.begin(), fns.end(),
                       [&](const Function* g) { return state(g).may_exit; });
  }

  void find_exits() {
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& s : m_fns) {
        if (s.may_exit) continue;
        for (const auto& st : s.f->body) {
          if (std::holds_alternative<Opaque>(st.item)) s.may_exit = true;
          const auto* inst = std::get_if<Instruction>(&st.item);
          if (!inst) continue;
          if (inst->op == Opcode::exit || inst->op == Opcode::trap ||
              (inst->op == Opcode::call && call_may_exit(*inst))) {
            s.may_exit = true;
          }
        }
        changed = changed || s.may_exit;
      }
    }
  }

  // Successors per statement (the exit is node n), then the post-dominator tree.
  void build_cfg(FnState& s) {
    const auto& body = s.f->body;
    const uint32_t n = s.n;
    s.ctl.assign(n, 0);
    s.ctl_origin.assign(n, {});
    s.pushed.assign(n, 0);
    s.succ.assign(n, {});
    std::unordered_map<std::string_view, std::vector<uint32_t>> labels;
    std::vector<uint32_t> all_labels;
    for (uint32_t k = 0; k < n; ++k) {
      if (const auto* l = std::get_if<Label>(&body[k].item)) {
        labels[l->name].push_back(k);
        all_labels.push_back(k);
      }
    }
    for (uint32_t k = 0; k < n; ++k) {
      auto& out = s.succ[k];
      const auto* inst = std::get_if<Instruction>(&body[k].item);
      bool guarded = inst && !inst->guard.empty();
      switch (inst ? inst->op : Opcode::count) {
      case Opcode::bra: {
        bool found = false;
        for (const auto& o : inst->operands) {
          if (o.kind != Operand::Kind::symbol) continue;
          if (auto it = labels.find(o.name); it != labels.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            found = true;
          }
        }
        if (!found) out = all_labels;
        if (guarded) out.push_back(k + 1);
        break;
      }
      case Opcode::brx:
        out = all_labels;
        out.push_back(k + 1);
        break;
      case Opcode::ret:
      case Opcode::exit:
      case Opcode::trap:
        out.push_back(n);
        if (guarded) out.push_back(k + 1);
        break;
      case Opcode::call:
        out.push_back(k + 1);
        if (call_may_exit(*inst)) out.push_back(n);
        break;
      default:
        out.push_back(k + 1);
        break;
      }
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
    }
    // A node from which no path leaves the function (a loop that never ends) is given an edge to
    // the exit: a thread may stop there (a trap elsewhere, a timeout), and post-dominance then
    // says its loop decides whether what follows executes.
    std::vector<std::vector<uint32_t>> pred(n + 1);
    for (uint32_t k = 0; k < n; ++k) {
      for (uint32_t t : s.succ[k]) pred[t].push_back(k);
    }
    std::vector<bool> reaches(n + 1, false);
    std::vector<uint32_t> work{n};
    reaches[n] = true;
    while (!work.empty()) {
      uint32_t v = work.back();
      work.pop_back();
      for (uint32_t p : pred[v]) {
        if (!reaches[p]) {
          reaches[p] = true;
          work.push_back(p);
        }
      }
    }
    for (uint32_t k = 0; k < n; ++k) {
      if (reaches[k]) continue;
      s.succ[k].push_back(n);
      pred[n].push_back(k);
    }
    // Post-dominators: dominators of the reversed graph from the exit (Cooper, Harvey and
    // Kennedy, "A Simple, Fast Dominance Algorithm").
    constexpr uint32_t undef = ~0u;
    std::vector<uint32_t> post(n + 1, undef); // postorder numbers in the reversed graph
    std::vector<uint32_t> order;              // that postorder
    order.reserve(n + 1);
    {
      std::vector<std::pair<uint32_t, size_t>> stack{{n, 0}};
      std::vector<bool> seen(n + 1, false);
      seen[n] = true;
      while (!stack.empty()) {
        auto& [v, i] = stack.back();
        if (i < pred[v].size()) {
          uint32_t p = pred[v][i++];
          if (!seen[p]) {
            seen[p] = true;
            stack.push_back({p, 0});
          }
          continue;
        }
        post[v] = uint32_t(order.size());
        order.push_back(v);
        stack.pop_back();
      }
    }
    s.ipdom.assign(n + 1, undef);
    s.ipdom[n] = n;
    auto intersect = [&](uint32_t a, uint32_t b) {
      while (a != b) {
        while (post[a] < post[b]) a = s.ipdom[a];
        while (post[b] < post[a]) b = s.ipdom[b];
      }
      return a;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = order.size(); i-- > 0;) {
        uint32_t v = order[i];
        if (v == n) continue;
        uint32_t d = undef;
        for (uint32_t t : s.succ[v]) {
          if (s.ipdom[t] == undef) continue;
          d = d == undef ? t : intersect(t, d);
        }
        if (d != s.ipdom[v]) {
          s.ipdom[v] = d;
          changed = true;
        }
      }
    }
  }

  // Statement k, a branch (or guarded return, exit, trap) on a predicate that depends on `m`:
  // every statement whose execution it decides (those control dependent on it: they post-
  // dominate one of its successors but not k itself) gets `m`.
  void spread(FnState& s, uint32_t k, Mask m) {
    m &= ~s.pushed[k];
    if (!m) return;
    s.pushed[k] |= m;
    const uint32_t stop = s.ipdom[k];
    for (uint32_t t : s.succ[k]) {
      for (uint32_t v = t; v != stop && v != s.n && v != ~0u; v = s.ipdom[v]) {
        if ((s.ctl[v] | m) == s.ctl[v]) continue;
        if (!s.ctl[v]) s.ctl_origin[v] = {s.f, k};
        s.ctl[v] |= m;
        m_changed = true;
      }
    }
  }

  void propagate(FnState& s) {
    for (uint32_t k = 0; k < s.n; ++k) {
      const Statement& st = s.f->body[k];
      if (const auto* op = std::get_if<Opaque>(&st.item)) {
        // Unknown: it may read and write every register it names, and any memory.
        Mask m = control(s, k, nullptr);
        for_each_identifier(op->text, [&](std::string_view r) { m |= reg(s, r); });
        for_each_identifier(op->text, [&](std::string_view r) { define(s, r, m); });
        store(k_all_memory, m);
        continue;
      }
      const auto* inst = std::get_if<Instruction>(&st.item);
      if (!inst) continue;
      const Mask ctl = control(s, k, inst);
      if (inst->op == Opcode::call) {
        call(s, k, *inst, ctl);
        continue;
      }
      switch (inst->op) {
      case Opcode::exit:
      case Opcode::trap:
        if ((s.exit_taint | ctl) != s.exit_taint) {
          s.exit_taint |= ctl;
          m_changed = true;
        }
        [[fallthrough]];
      case Opcode::bra:
      case Opcode::ret:
        if (!inst->guard.empty()) spread(s, k, reg(s, inst->guard) | s.ctl[k]);
        continue;
      case Opcode::brx: {
        Mask m = s.ctl[k] | (inst->guard.empty() ? 0 : reg(s, inst->guard));
        if (!inst->operands.empty()) m |= use(s, inst->operands[0]);
        spread(s, k, m);
        continue;
      }
      default:
        break;
      }
      const bool dest = has_destination(*inst);
      Mask values = 0, loaded = 0;
      for (size_t i = dest ? 1 : 0; i < inst->operands.size(); ++i) {
        const Operand& o = inst->operands[i];
        values |= use(s, o); // an address's registers too: what it loads depends on where
        if (o.kind == Operand::Kind::address && only_reads(*inst, i))
          loaded |= memory(classes(s, *inst, i));
      }
      if (inst->op != Opcode::ld && inst->op != Opcode::ldu) {
        // atom and the like read what they update.
        for (size_t i = 0; i < inst->operands.size(); ++i) {
          if (inst->operands[i].kind == Operand::Kind::address && !only_reads(*inst, i))
            loaded |= memory(classes(s, *inst, i));
        }
      }
      if (dest) define(s, inst->operands[0], values | loaded | ctl);
      for (size_t i = 0; i < inst->operands.size(); ++i) {
        if (inst->operands[i].kind == Operand::Kind::address && !only_reads(*inst, i))
          store(classes(s, *inst, i), values | loaded | ctl);
      }
    }
  }

  // The functions a call may reach: its target, or any function with a body for an indirect one.
  // `known` is false when some target has no body here.
  std::vector<const Function*> targets(const Instruction& inst, bool& known,
                                       std::string_view& name) {
    size_t at = 0;
    const Operand* t = call_target(inst, at);
    known = true;
    name = {};
    if (!t) {
      known = false;
      std::vector<const Function*> all;
      for (const auto& s : m_fns) {
        if (!s.is_entry) all.push_back(s.f);
      }
      return all;
    }
    name = t->name;
    const Function* g = function(t->name);
    if (g && g->has_body) return {g};
    known = false;
    return {};
  }

  // call (rets), target, (args): arguments flow into the callee's parameters, its results into
  // the return registers; .param arguments and results travel through parameter memory.
  void call(FnState& s, uint32_t k, const Instruction& inst, Mask ctl) {
    size_t at = 0;
    call_target(inst, at);
    const Operand* rets =
        at > 0 && inst.operands[0].kind == Operand::Kind::list ? &inst.operands[0] : nullptr;
    const Operand* args = nullptr;
    for (size_t i = at + 1; i < inst.operands.size(); ++i) {
      if (inst.operands[i].kind == Operand::Kind::list) {
        args = &inst.operands[i];
        break;
      }
    }
    Mask argm = args ? use(s, *args) : 0;
    if (at < inst.operands.size() && inst.operands[at].kind == Operand::Kind::reg)
      argm |= use(s, inst.operands[at]); // the function pointer of an indirect call
    bool known = true;
    std::string_view name;
    for (const Function* g : targets(inst, known, name)) {
      FnState& callee = state(g);
      if ((callee.incoming | ctl) != callee.incoming) {
        if (!callee.incoming) {
          callee.incoming_origin = !inst.guard.empty() && reg(s, inst.guard) ? Origin{s.f, k}
                                   : s.ctl[k]                                ? s.ctl_origin[k]
                                                                             : s.incoming_origin;
        }
        callee.incoming |= ctl;
        m_changed = true;
      }
      if (args) {
        for (size_t i = 0; i < args->elems.size(); ++i) {
          Mask m = use(s, args->elems[i]);
          if (i < g->params.size() && g->params[i].space == Space::reg) {
            define(callee, g->params[i].name, m);
          } else {
            store(1u << k_mem_param, m);
          }
        }
      }
      if (rets) {
        for (size_t i = 0; i < rets->elems.size(); ++i) {
          Mask m = ctl;
          if (i < g->returns.size() && g->returns[i].space == Space::reg) {
            m |= reg(callee, g->returns[i].name);
          } else {
            m |= m_mem[k_mem_param];
          }
          define(s, rets->elems[i], m);
        }
      }
    }
    if (call_may_exit(inst)) {
      // What follows the call executes only if the thread did not end in it.
      // A function without a body here may end it for reasons its arguments give.
      Mask ex = known ? 0 : argm | m_mem[k_mem_param];
      bool all_known = known;
      for (const Function* g : targets(inst, all_known, name)) ex |= state(g).exit_taint;
      if ((s.exit_taint | ex | ctl) != s.exit_taint) {
        s.exit_taint |= ex | ctl;
        m_changed = true;
      }
      spread(s, k, ex | s.ctl[k]);
    }
    if (known) return;
    if (name == "vprintf" || name == "free" || name == "__assertfail") return;
    // malloc, or a function without a body here: its results derive from its arguments; an
    // unknown one may also write any memory.
    Mask m = argm | m_mem[k_mem_param] | ctl;
    if (rets) define(s, *rets, m);
    if (name != "malloc") store(k_all_memory, m);
  }

  struct Effect {
    Mask value = 0, address = 0, guard = 0, branch = 0;
  };

  // What an effect at statement k (if it is one) depends on through each of its parts.
  std::optional<Effect> effect(FnState& s, uint32_t k) {
    const Statement& st = s.f->body[k];
    Effect e;
    e.branch = s.ctl[k] | s.incoming;
    if (const auto* op = std::get_if<Opaque>(&st.item)) {
      for_each_identifier(op->text, [&](std::string_view r) { e.value |= reg(s, r); });
      return e;
    }
    const auto* inst = std::get_if<Instruction>(&st.item);
    if (!inst) return std::nullopt;
    if (!inst->guard.empty()) e.guard = reg(s, inst->guard);
    if (inst->op == Opcode::trap) return e;
    if (inst->op == Opcode::call) {
      bool known = true;
      std::string_view name;
      targets(*inst, known, name);
      if (known || name == "vprintf" || name == "malloc" || name == "free") return std::nullopt;
      if (name == "__assertfail") return e;
      size_t at = 0;
      call_target(*inst, at);
      for (size_t i = 0; i < inst->operands.size(); ++i) {
        if (i != 0 || at == 0) e.value |= use(s, inst->operands[i]);
      }
      e.value |= m_mem[k_mem_param];
      return e;
    }
    bool writes = false;
    for (size_t i = 0; i < inst->operands.size(); ++i) {
      const Operand& o = inst->operands[i];
      if (o.kind != Operand::Kind::address || only_reads(*inst, i)) continue;
      if (!(classes(s, *inst, i) & (1u << k_mem_global))) continue;
      writes = true;
      e.address |= use(s, o);
    }
    if (!writes) return std::nullopt;
    const bool dest = has_destination(*inst);
    for (size_t i = dest ? 1 : 0; i < inst->operands.size(); ++i) {
      const Operand& o = inst->operands[i];
      if (o.kind != Operand::Kind::address) {
        e.value |= use(s, o);
      } else if (only_reads(*inst, i)) {
        e.value |= use(s, o) | memory(classes(s, *inst, i)); // cp: what it copies
      }
    }
    return e;
  }

  std::vector<ExternalDependence> report() {
    std::vector<ExternalDependence> out;
    std::array<bool, 5> seen{};
    for (auto& s : m_fns) {
      for (uint32_t k = 0; k < s.n; ++k) {
        auto e = effect(s, k);
        if (!e) continue;
        Mask all = e->value | e->address | e->guard | e->branch;
        for (size_t bit = 0; bit < m_sregs.size(); ++bit) {
          const Mask b = Mask(1) << bit;
          if (!(all & b)) continue;
          External kind = *external_kind(m_sregs[bit]);
          if (seen[size_t(kind)]) continue;
          seen[size_t(kind)] = true;
          ExternalDependence d;
          d.kind = kind;
          d.sreg = std::string(m_sregs[bit]);
          const Origin& r = m_reads[bit];
          d.read_function = std::string(r.f->name);
          d.read_loc = r.f->body[r.stmt].loc;
          d.read_instruction = text(r);
          d.function = std::string(s.f->name);
          d.loc = s.f->body[k].loc;
          d.instruction = text({s.f, k});
          // Whether it executes at all first: what a dependent branch decides also makes every
          // register written after it dependent, the values stored included.
          using Via = ExternalDependence::Via;
          d.via = (e->guard & b)    ? Via::guard
                  : (e->branch & b) ? Via::branch
                  : (e->value & b)  ? Via::value
                                    : Via::address;
          if (d.via == Via::branch) {
            Origin o = (s.ctl[k] & b) ? s.ctl_origin[k] : s.incoming_origin;
            if (o.f) {
              d.branch_function = std::string(o.f->name);
              d.branch_loc = o.f->body[o.stmt].loc;
              d.branch_instruction = text(o);
            }
          }
          out.push_back(std::move(d));
        }
      }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.kind < b.kind; });
    return out;
  }

  static std::string text(const Origin& o) {
    const auto& item = o.f->body[o.stmt].item;
    if (const auto* inst = std::get_if<Instruction>(&item)) return instruction_text(*inst);
    if (const auto* op = std::get_if<Opaque>(&item)) return std::string(op->text);
    return {};
  }
};

} // namespace

std::vector<ExternalDependence> external_dependences(const Module& module, const Function& entry) {
  return ExternalAnalysis(module, entry).run();
}

} // namespace hone::ptx
