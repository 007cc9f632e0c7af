#include "ptx/bounds_probe.hpp"

#include "ptx/printer.hpp"

#include <algorithm>
#include <map>

namespace hone::ptx {

namespace {

// Where an instruction's address points, as far as the probe cares.
enum class Where { global, generic, other };

Where where_of(const Instruction& in) {
  for (auto m : in.mods) {
    if (m.starts_with("global")) return Where::global;
    if (m.starts_with("shared") || m.starts_with("local") || m.starts_with("param") ||
        m.starts_with("const"))
      return Where::other;
  }
  return Where::generic;
}

uint32_t vector_count(const Instruction& in) {
  for (auto m : in.mods) {
    if (m == "v2") return 2;
    if (m == "v4") return 4;
    if (m == "v8") return 8;
  }
  return 1;
}

// The address operand: the first one (ld, st, atom, red), the second for cp.async (source).
const Operand* address_of(const Instruction& in, int which) {
  int seen = 0;
  for (const auto& o : in.operands) {
    if (o.kind != Operand::Kind::address || !o.elems.empty()) continue;
    if (seen++ == which) return &o;
  }
  return nullptr;
}

class Rewriter {
public:
  Rewriter(const Module& source, const Module& out) : m_source(source), m_module(out) {}

  Result<void> function(Function& f) {
    // How often each register is named in the body: an atomic whose destination is named
    // nowhere else is a reduction whose result is dropped (nvcc emits atom for atomicAdd even
    // when its value is unused).
    m_mentions.clear();
    for (const auto& st : f.body) {
      if (const auto* in = std::get_if<Instruction>(&st.item)) {
        if (!in->guard.empty()) ++m_mentions[in->guard];
        for (const auto& o : in->operands) count(o);
      }
    }
    std::vector<Statement> out;
    out.reserve(f.body.size() * 2);
    out.push_back(opaque(".reg .b64 %hone_a, %hone_w, %hone_t, %hone_n, %hone_b, %hone_z, "
                         "%hone_d;\n\t.reg .pred %hone_p, %hone_q, %hone_g;"));
    for (const auto& st : f.body) {
      if (std::holds_alternative<Opaque>(st.item)) {
        return make_error("an instruction the PTX reader does not model: " +
                          std::string(std::get<Opaque>(st.item).text));
      }
      const auto* in = std::get_if<Instruction>(&st.item);
      if (!in) {
        out.push_back(st);
        continue;
      }
      if (auto r = instruction(*in, out); !r) return r;
    }
    f.body = std::move(out);
    return ok();
  }

private:
  void count(const Operand& o) {
    if ((o.kind == Operand::Kind::reg || (o.kind == Operand::Kind::address && o.base_is_reg)) &&
        !o.name.empty())
      ++m_mentions[o.name];
    for (const auto& e : o.elems) count(e);
  }

  // The atomic's result is used: some other operand names its destination register(s).
  bool result_used(const Instruction& in) {
    if (in.operands.empty()) return true;
    const Operand& d = in.operands[0];
    if (d.kind == Operand::Kind::sink) return false;
    if (d.kind == Operand::Kind::reg) return m_mentions[d.name] > 1;
    return true; // a vector destination: assume used
  }

  Statement opaque(const std::string& text) {
    return Statement{{}, Opaque{m_module.keep(text)}};
  }

  // Code that computes the address of `addr` into %hone_a and records [a, a + width) in the
  // table, for the instruction's guard: the whole sequence is skipped when the guard is false.
  // Returns the label to place after whatever replaces the instruction ("" when unguarded).
  std::string record(const Instruction& in, const Operand& addr, uint64_t width,
                     std::vector<Statement>& out) {
    const std::string n = std::to_string(m_next++);
    std::string skip;
    std::string t;
    if (!in.guard.empty()) {
      skip = "$Lhone_skip_" + n;
      t += "@" + std::string(in.guard_negated ? "" : "!") + std::string(in.guard) + " bra " +
           skip + ";\n\t";
    }
    std::string base = addr.name.empty() ? "0" : std::string(addr.name);
    t += "mov.b64 %hone_a, " + base + ";\n\t";
    t += "add.s64 %hone_a, %hone_a, " + std::to_string(addr.value) + ";\n\t";
    t += "add.s64 %hone_w, %hone_a, " + std::to_string(width) + ";\n\t";
    t += "ld.global.u64 %hone_t, [" + std::string(k_probe_table_symbol) + "];\n\t";
    t += "ld.global.u64 %hone_n, [%hone_t];\n\t";
    t += "add.s64 %hone_t, %hone_t, " + std::to_string(k_probe_header_bytes) + ";\n";
    t += "$Lhone_loop_" + n + ":\n\t";
    t += "setp.eq.u64 %hone_p, %hone_n, 0;\n\t";
    t += "@%hone_p bra $Lhone_done_" + n + ";\n\t";
    t += "ld.global.u64 %hone_b, [%hone_t];\n\t";
    t += "ld.global.u64 %hone_z, [%hone_t+8];\n\t";
    t += "setp.ge.u64 %hone_p, %hone_a, %hone_b;\n\t";
    t += "setp.lt.u64 %hone_q, %hone_a, %hone_z;\n\t";
    t += "and.pred %hone_p, %hone_p, %hone_q;\n\t";
    t += "@%hone_p atom.global.min.u64 %hone_d, [%hone_t+16], %hone_a;\n\t";
    t += "@%hone_p atom.global.max.u64 %hone_d, [%hone_t+24], %hone_w;\n\t";
    t += "@%hone_p bra $Lhone_done_" + n + ";\n\t";
    t += "add.s64 %hone_t, %hone_t, " + std::to_string(k_probe_record_bytes) + ";\n\t";
    t += "sub.s64 %hone_n, %hone_n, 1;\n\t";
    t += "bra $Lhone_loop_" + n + ";\n";
    t += "$Lhone_done_" + n + ":";
    out.push_back(opaque(t));
    return skip;
  }

  void end(const std::string& skip, std::vector<Statement>& out) {
    if (!skip.empty()) out.push_back(Statement{{}, Label{m_module.keep(skip)}});
  }

  static Instruction unguarded(Instruction in) {
    in.guard = {};
    in.guard_negated = false;
    return in;
  }

  Result<void> instruction(const Instruction& in, std::vector<Statement>& out) {
    auto keep = [&] { out.push_back(Statement{{}, in}); };
    auto refuse = [&](std::string why) {
      return make_error(why + " (" + print(in) + ")");
    };
    switch (in.op) {
    case Opcode::ld:
    case Opcode::ldu: {
      Where w = where_of(in);
      const Operand* a = address_of(in, 0);
      if (w == Where::other) break;
      // A load that can see another thread's store may be a wait for it (a flag, a grid
      // barrier, decoupled look-back): with stores suppressed, the probe would wait forever.
      if (in.has_mod("volatile") || in.has_mod("relaxed") || in.has_mod("acquire")) {
        return refuse("a load that may wait for another thread's store, which the probe "
                      "suppresses");
      }
      if (!a) return refuse("a load whose address the probe cannot read");
      std::string skip = record(in, *a, uint64_t(type_size(in.last_type())) * vector_count(in), out);
      out.push_back(Statement{{}, skip.empty() ? in : unguarded(in)});
      end(skip, out);
      return ok();
    }
    case Opcode::st:
    case Opcode::atom:
    case Opcode::red: {
      Where w = where_of(in);
      if (w == Where::other) break;
      // An atomic's result may be polled (a lock, a counter other blocks bump): suppressed, it
      // would never change and the probe could spin forever. Reductions return nothing.
      if (in.op == Opcode::atom && result_used(in)) {
        return refuse("an atomic whose result the kernel may wait on, which the probe "
                      "cannot suppress safely");
      }
      const Operand* a = address_of(in, 0);
      if (!a) return refuse("a store whose address the probe cannot read");
      std::string skip = record(in, *a, uint64_t(type_size(in.last_type())) * vector_count(in), out);
      if (w == Where::generic) {
        // A generic address may be shared or local memory, which stays real.
        out.push_back(opaque("isspacep.global %hone_g, %hone_a;"));
        Instruction real = unguarded(in);
        real.guard = "%hone_g";
        real.guard_negated = true;
        out.push_back(Statement{{}, real});
      }
      end(skip, out);
      return ok();
    }
    case Opcode::cp: {
      bool global = std::any_of(in.mods.begin(), in.mods.end(),
                                [](std::string_view m) { return m.starts_with("global"); });
      if (!global) break;
      bool simple_async = in.has_mod("async") && !in.has_mod("bulk") && in.has_mod("shared");
      const Operand* src = address_of(in, 1);
      if (!simple_async || !src || in.operands.size() < 3 ||
          in.operands[2].kind != Operand::Kind::imm_int) {
        return refuse("a bulk or tensor copy the probe cannot bound");
      }
      std::string skip = record(in, *src, uint64_t(in.operands[2].value), out);
      out.push_back(Statement{{}, skip.empty() ? in : unguarded(in)});
      end(skip, out);
      return ok();
    }
    case Opcode::call: {
      // call (ret), name, (args): the function symbol is the first symbol operand.
      for (const auto& o : in.operands) {
        if (o.kind != Operand::Kind::symbol) continue;
        const Function* f = m_source.function(o.name);
        if (!f) break; // an indirect call through a register: its target is in this module
        if (!f->has_body) return refuse("a call to " + std::string(o.name) + ", which has no body");
        break;
      }
      break;
    }
    case Opcode::discard:
      // discard.global.L2 leaves the bytes undefined: the application's memory, so not run.
      return ok();
    case Opcode::tex:
    case Opcode::tld4:
    case Opcode::suld:
    case Opcode::sust:
    case Opcode::sured:
    case Opcode::multimem:
    case Opcode::tensormap:
    case Opcode::tcgen05:
      return refuse("memory access the probe cannot see");
    default:
      break;
    }
    keep();
    return ok();
  }

  const Module& m_source;
  const Module& m_module;
  uint64_t m_next = 0;
  std::map<std::string_view, int> m_mentions;
};

} // namespace

Result<std::string> bounds_probe(const Module& module, std::string_view entry) {
  Module out;
  out.version_major = module.version_major;
  out.version_minor = module.version_minor;
  out.target = module.target;
  out.address_size = module.address_size;
  out.arena = module.arena;
  if (module.address_size != 64) return make_error("the module does not use 64-bit addresses");
  VarDecl table;
  table.attrs = {"visible"};
  table.space = Space::global;
  table.align = 8;
  table.type = Type::u64;
  table.name = k_probe_table_symbol;
  out.items.push_back(ModuleItem{{}, table});
  Rewriter rw(module, out);
  bool found = false;
  for (const auto& item : module.items) {
    if (const auto* f = std::get_if<Function>(&item.item)) {
      if (f->is_entry && (f->name != entry || !f->has_body)) continue;
      Function copy = *f;
      if (copy.has_body) {
        if (auto r = rw.function(copy); !r) {
          return make_error("in " + std::string(f->name) + ": " + r.error().message);
        }
      }
      found = found || (f->is_entry && f->name == entry);
      out.items.push_back(ModuleItem{item.loc, std::move(copy)});
    } else {
      out.items.push_back(item);
    }
  }
  if (!found) return make_error("the module has no entry " + std::string(entry));
  return print(out);
}

} // namespace hone::ptx
