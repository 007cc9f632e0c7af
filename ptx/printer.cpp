#include "ptx/printer.hpp"

#include <cinttypes>
#include <cstdio>

namespace hone::ptx {

namespace {

class Printer {
public:
  std::string out;

  void put(std::string_view s) { out.append(s); }
  void put(char ch) { out.push_back(ch); }
  void put_int(int64_t v) {
    char buf[32];
    if (v == INT64_MIN) {
      std::snprintf(buf, sizeof buf, "0x8000000000000000");
    } else {
      std::snprintf(buf, sizeof buf, "%" PRId64, v);
    }
    out.append(buf);
  }
  void put_uint(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRIu64, v);
    out.append(buf);
  }

  void operand(const Operand& o) {
    switch (o.kind) {
    case Operand::Kind::reg:
      if (o.negated) put('!');
      put(o.name);
      break;
    case Operand::Kind::symbol:
      if (o.negated) put('!');
      put(o.name);
      if (o.value) offset(o.value);
      break;
    case Operand::Kind::imm_int:
      put_int(o.value);
      if (o.unsigned_suffix) put('U');
      break;
    case Operand::Kind::imm_f32: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0f%08" PRIX32, uint32_t(o.bits));
      put(buf);
      break;
    }
    case Operand::Kind::imm_f64: {
      char buf[24];
      std::snprintf(buf, sizeof buf, "0d%016" PRIX64, o.bits);
      put(buf);
      break;
    }
    case Operand::Kind::imm_dec:
    case Operand::Kind::expr:
      put(o.name);
      break;
    case Operand::Kind::address:
      put('[');
      if (!o.elems.empty()) {
        list(o.elems);
      } else if (o.name.empty()) {
        put_int(o.value);
      } else {
        put(o.name);
        if (o.value) offset(o.value);
      }
      put(']');
      break;
    case Operand::Kind::vector:
      put('{');
      list(o.elems);
      put('}');
      break;
    case Operand::Kind::pair:
      operand(o.elems.at(0));
      put('|');
      operand(o.elems.at(1));
      break;
    case Operand::Kind::list:
      put('(');
      list(o.elems);
      put(')');
      break;
    case Operand::Kind::sink:
      put('_');
      break;
    }
  }

  void offset(int64_t v) {
    put('+');
    put_int(v);
  }

  void list(const std::vector<Operand>& elems) {
    for (size_t i = 0; i < elems.size(); ++i) {
      if (i) put(", ");
      operand(elems[i]);
    }
  }

  void instruction(const Instruction& inst) {
    if (!inst.guard.empty()) {
      put('@');
      if (inst.guard_negated) put('!');
      put(inst.guard);
      put(' ');
    }
    put(opcode_name(inst.op));
    for (auto m : inst.mods) {
      put('.');
      put(m);
    }
    if (!inst.operands.empty()) {
      put(" \t");
      list(inst.operands);
    }
    put(';');
  }

  void var(const VarDecl& v) {
    for (auto a : v.attrs) {
      if (a.starts_with("attribute")) continue;
      put('.');
      put(a);
      put(' ');
    }
    put('.');
    put(space_name(v.space));
    for (auto a : v.attrs) {
      if (!a.starts_with("attribute")) continue;
      put(" .");
      put(a);
    }
    if (v.align) {
      put(" .align ");
      put_uint(v.align);
    }
    if (v.vector) {
      put(" .v");
      put_uint(v.vector);
    }
    put(" .");
    put(type_name(v.type));
    put(' ');
    put(v.name);
    for (auto d : v.dims) {
      put('[');
      if (d >= 0) put_int(d);
      put(']');
    }
    if (!v.init.empty()) {
      put(" = ");
      put(v.init);
      // The text is verbatim, comments included: a line comment at its end would take the ';'.
      if (v.init.find("//") != std::string_view::npos) put('\n');
    }
    put(';');
  }

  void param(const Param& p) {
    put(p.space == Space::reg ? ".reg" : ".param");
    if (p.align) {
      put(" .align ");
      put_uint(p.align);
    }
    put(" .");
    put(type_name(p.type));
    if (p.ptr) {
      put(" .ptr");
      if (p.ptr_space != Space::none) {
        put(" .");
        put(space_name(p.ptr_space));
      }
      if (p.ptr_align) {
        put(" .align ");
        put_uint(p.ptr_align);
      }
    }
    put(' ');
    put(p.name);
    if (p.array >= 0) {
      put('[');
      put_int(p.array);
      put(']');
    }
  }

  void params(const std::vector<Param>& ps, bool multiline) {
    put('(');
    for (size_t i = 0; i < ps.size(); ++i) {
      if (multiline) put("\n\t");
      param(ps[i]);
      if (i + 1 < ps.size()) put(',');
    }
    if (multiline && !ps.empty()) put('\n');
    put(')');
  }

  void function(const Function& f) {
    for (auto a : f.attrs) {
      put('.');
      put(a);
      put(' ');
    }
    put(f.is_entry ? ".entry " : ".func ");
    if (f.has_returns) {
      params(f.returns, false);
      put(' ');
    }
    put(f.name);
    params(f.params, true);
    for (const auto& d : f.directives) {
      put('\n');
      if (!d.text.empty()) {
        put(d.text);
        continue;
      }
      put('.');
      put(d.name);
      for (size_t i = 0; i < d.values.size(); ++i) {
        put(i ? ", " : " ");
        put_int(d.values[i]);
      }
    }
    if (!f.has_body) {
      put(";\n");
      return;
    }
    put("\n{\n");
    for (const auto& st : f.body) statement(st);
    put("}\n");
  }

  void statement(const Statement& st) {
    std::visit(
        [&](const auto& item) {
          using T = std::decay_t<decltype(item)>;
          if constexpr (std::is_same_v<T, Instruction>) {
            put('\t');
            instruction(item);
          } else if constexpr (std::is_same_v<T, Label>) {
            put(item.name);
            put(':');
          } else if constexpr (std::is_same_v<T, RegDecl>) {
            put("\t.reg");
            if (item.vector) {
              put(" .v");
              put_uint(item.vector);
            }
            put(" .");
            put(type_name(item.type));
            put(' ');
            for (size_t i = 0; i < item.names.size(); ++i) {
              if (i) put(", ");
              put(item.names[i].name);
              if (item.names[i].count >= 0) {
                put('<');
                put_int(item.names[i].count);
                put('>');
              }
            }
            put(';');
          } else if constexpr (std::is_same_v<T, VarDecl>) {
            put('\t');
            var(item);
          } else if constexpr (std::is_same_v<T, ScopeBegin>) {
            put("\t{");
          } else if constexpr (std::is_same_v<T, ScopeEnd>) {
            put("\t}");
          } else {
            put('\t');
            put(item.text);
          }
        },
        st.item);
    put('\n');
  }

  void module(const Module& m) {
    put(".version ");
    put_uint(m.version_major);
    put('.');
    put_uint(m.version_minor);
    put('\n');
    if (!m.target.empty()) {
      put(".target ");
      for (size_t i = 0; i < m.target.size(); ++i) {
        if (i) put(", ");
        put(m.target[i]);
      }
      put('\n');
    }
    put(".address_size ");
    put_uint(m.address_size);
    put("\n\n");
    for (const auto& it : m.items) {
      std::visit(
          [&](const auto& item) {
            using T = std::decay_t<decltype(item)>;
            if constexpr (std::is_same_v<T, Function>) {
              function(item);
            } else if constexpr (std::is_same_v<T, VarDecl>) {
              var(item);
            } else {
              put(item.text);
            }
          },
          it.item);
      put('\n');
    }
  }
};

} // namespace

std::string print(const Module& module) {
  Printer p;
  p.out.reserve(4096);
  p.module(module);
  return std::move(p.out);
}

std::string print(const Function& function) {
  Printer p;
  p.function(function);
  return std::move(p.out);
}

std::string print(const Instruction& instruction) {
  Printer p;
  p.instruction(instruction);
  return std::move(p.out);
}

std::string print(const Operand& operand) {
  Printer p;
  p.operand(operand);
  return std::move(p.out);
}

} // namespace hone::ptx
