#include "ptx/parser.hpp"

#include "ptx/lexer.hpp"

#include <algorithm>
#include <cstring>

namespace hone::ptx {

namespace {

// Deep nesting only comes from hostile input; real PTX nests operands two levels at most.
constexpr int k_max_operand_depth = 16;
constexpr int k_max_scope_depth = 256;

bool is_linkage(std::string_view d) {
  return d == "visible" || d == "extern" || d == "weak" || d == "common";
}

bool is_var_space(std::string_view d) {
  return d == "global" || d == "const" || d == "shared" || d == "local" || d == "param" ||
         d == "tex" || d.starts_with("shared::");
}

class Parser {
public:
  Parser(std::string_view text, Module& module) : c(text), m(module) {}

  void module() {
    c.skip_space();
    SourceLoc first_at = c.loc();
    if (c.peek() != '.' || c.directive_name() != "version") {
      c.fail_at(first_at, "expected .version at the start of a PTX module");
    }
    version();
    while (true) {
      c.skip_space();
      if (c.at_end()) break;
      SourceLoc at = c.loc();
      size_t start = c.pos();
      if (c.peek() != '.') {
        c.fail("expected a directive at module level, found " + describe_char(c.peek()));
      }
      auto d = c.directive_name();
      if (d == "version") {
        c.fail_at(at, "duplicate .version directive");
      } else if (d == "target") {
        target();
      } else if (d == "address_size") {
        c.skip_space();
        auto n = c.number();
        if (n.kind != Number::Kind::integer || (n.bits != 32 && n.bits != 64)) {
          c.fail_at(at, ".address_size must be 32 or 64");
        }
        m.address_size = uint32_t(n.bits);
      } else if (d == "file" || d == "loc") {
        c.raw_line();
        push_item(at, Directive{c.slice(start, c.pos())});
        trim_last_directive();
      } else if (d == "section") {
        // `.section .debug_info { ... }`: DWARF as directives, kept as text
        c.skip_space();
        if (c.peek() == '.') c.directive_name();
        else if (c.identifier().empty()) c.fail("expected a section name");
        c.skip_space();
        if (c.peek() != '{') c.fail("expected '{' after the section name");
        c.raw_braces();
        push_item(at, Directive{c.slice(start, c.pos())});
      } else if (d == "entry" || d == "func") {
        function(at, {}, d == "entry");
      } else if (is_linkage(d)) {
        std::vector<std::string_view> attrs{d};
        while (true) {
          c.skip_space();
          auto next = c.directive_name();
          if (is_linkage(next)) {
            attrs.push_back(next);
            continue;
          }
          if (next == "entry" || next == "func") {
            function(at, std::move(attrs), next == "entry");
          } else if (is_var_space(next)) {
            var_decls(at, std::move(attrs), next, true);
          } else {
            c.fail("expected .entry, .func or a variable after ." + std::string(attrs.back()) +
                   ", found ." + std::string(next));
          }
          break;
        }
      } else if (is_var_space(d)) {
        var_decls(at, {}, d, true);
      } else if (d == "pragma" || d == "alias" || d == "globl" || d == "extern") {
        c.raw_statement();
        push_item(at, Directive{c.slice(start, c.pos())});
      } else {
        c.fail_at(at, "unknown module directive ." + std::string(d));
      }
    }
  }

private:
  Cursor c;
  Module& m;
  std::vector<std::string_view> m_plain_regs; // registers of the current function without '%'
  int m_operand_depth = 0;

  template <class T> void push_item(SourceLoc at, T&& item) {
    auto& slot = m.items.emplace_back();
    slot.loc = at;
    slot.item.template emplace<std::decay_t<T>>(std::forward<T>(item));
  }

  void trim_last_directive() {
    auto& d = std::get<Directive>(m.items.back().item);
    while (!d.text.empty() && (d.text.back() == ' ' || d.text.back() == '\t' ||
                               d.text.back() == '\r' || d.text.back() == '\n')) {
      d.text.remove_suffix(1);
    }
  }

  uint32_t small_number(std::string_view what) {
    c.skip_space();
    SourceLoc at = c.loc();
    auto n = c.number();
    if (n.kind != Number::Kind::integer || n.bits > 0x7fffffffu) {
      c.fail_at(at, std::string(what) + " must be a non-negative integer");
    }
    return uint32_t(n.bits);
  }

  void version() {
    c.skip_space();
    SourceLoc at = c.loc();
    auto digits = [&] {
      uint32_t v = 0;
      size_t n = 0;
      while (is_digit(c.peek())) {
        v = v * 10 + uint32_t(c.peek() - '0');
        c.advance();
        if (++n > 4) c.fail_at(at, "malformed .version");
      }
      if (n == 0) c.fail_at(at, "malformed .version: expected MAJOR.MINOR");
      return v;
    };
    m.version_major = digits();
    if (c.peek() != '.') c.fail_at(at, "malformed .version: expected MAJOR.MINOR");
    c.advance();
    m.version_minor = digits();
  }

  void target() {
    do {
      c.skip_space();
      auto t = c.identifier();
      if (t.empty()) c.fail("expected a target name, found " + describe_char(c.peek()));
      m.target.push_back(t);
    } while (c.accept(','));
  }

  // Variables declared in one statement: `.shared .align 4 .b8 a[16], b[8];` becomes two.
  void var_decls(SourceLoc at, std::vector<std::string_view> attrs, std::string_view space,
                 bool module_level, std::vector<Statement>* body = nullptr) {
    VarDecl v;
    v.attrs = std::move(attrs);
    v.space = space_from_name(space);
    while (true) {
      c.skip_space();
      if (c.peek() != '.') break;
      size_t dstart = c.pos();
      auto d = c.directive_name();
      if (d == "align") {
        v.align = small_number(".align");
        if (v.align == 0 || (v.align & (v.align - 1))) c.fail(".align must be a power of two");
      } else if (d == "v2" || d == "v4" || d == "v8") {
        v.vector = uint8_t(d[1] - '0');
      } else if (d == "attribute") {
        c.expect('(', "'(' after .attribute");
        int depth = 1;
        while (depth > 0) {
          if (c.at_end()) c.fail("unterminated .attribute(...)");
          if (c.peek() == '(') ++depth;
          if (c.peek() == ')') --depth;
          c.advance();
        }
        v.attrs.push_back(c.slice(dstart + 1, c.pos()));
      } else if (Type t = type_from_name(d); t != Type::none) {
        v.type = t;
        break;
      } else {
        c.fail("unexpected ." + std::string(d) + " in a variable declaration");
      }
    }
    if (v.type == Type::none) c.fail("expected the type of the variable");
    while (true) {
      VarDecl one = v;
      c.skip_space();
      one.name = c.identifier();
      if (one.name.empty()) c.fail("expected a variable name, found " + describe_char(c.peek()));
      while (c.accept('[')) {
        if (c.accept(']')) {
          one.dims.push_back(-1);
          continue;
        }
        c.skip_space();
        SourceLoc dim_at = c.loc();
        auto n = c.number();
        if (n.kind != Number::Kind::integer || int64_t(n.bits) < 0 || n.bits > (1ull << 40)) {
          c.fail_at(dim_at, "array dimension must be a non-negative integer");
        }
        one.dims.push_back(int64_t(n.bits));
        c.expect(']', "']'");
      }
      c.skip_space();
      SourceLoc eq_at = c.loc();
      if (c.accept('=')) {
        c.skip_space();
        size_t s = c.pos();
        int depth = 0;
        while (true) {
          char ch = c.peek();
          if (c.at_end()) c.fail_at(at, "unterminated initializer");
          if (ch == '{') ++depth;
          if (ch == '}') --depth;
          if (depth < 0) c.fail("unbalanced '}' in initializer");
          if (depth == 0 && (ch == ';' || ch == ',')) break;
          if (ch == '/' && (c.peek(1) == '/' || c.peek(1) == '*')) {
            c.skip_space();
            continue;
          }
          c.advance();
        }
        one.init = c.slice(s, c.pos());
        while (!one.init.empty() && (one.init.back() == ' ' || one.init.back() == '\n' ||
                                     one.init.back() == '\t' || one.init.back() == '\r')) {
          one.init.remove_suffix(1);
        }
        // Printed back, "x = ;" would lose its '=' (and ptxas refuses it anyway).
        if (one.init.empty()) c.fail_at(eq_at, "'=' without an initializer");
        parse_init(one);
      }
      if (module_level) {
        push_item(at, std::move(one));
      } else {
        body->push_back(Statement{at, std::move(one)});
      }
      if (c.accept(',')) continue;
      c.expect(';', "';' after a variable declaration");
      break;
    }
  }

  // Flatten an initializer into memory-ordered values; anything unmodeled leaves init_parsed false.
  void parse_init(VarDecl& v) {
    Cursor ic(v.init);
    std::vector<InitValue> out;
    auto value = [&](auto&& self, int depth) -> bool {
      ic.skip_space();
      if (depth > 32) return false;
      if (ic.peek() == '{') {
        ic.advance();
        if (ic.accept('}')) return true;
        do {
          if (!self(self, depth + 1)) return false;
        } while (ic.accept(','));
        return ic.accept('}');
      }
      InitValue iv;
      if (ic.number_starts()) {
        auto n = ic.number();
        iv.bits = n.bits;
        iv.kind = n.kind == Number::Kind::f32   ? InitValue::Kind::f32
                  : n.kind == Number::Kind::integer ? InitValue::Kind::integer
                                                    : InitValue::Kind::f64;
        out.push_back(iv);
        return true;
      }
      auto id = ic.identifier();
      if (id.empty()) return false;
      iv.kind = InitValue::Kind::symbol;
      if (id == "generic") {
        iv.generic = true;
        if (!ic.accept('(')) return false;
        ic.skip_space();
        id = ic.identifier();
        if (id.empty() || !ic.accept(')')) return false;
      }
      iv.name = id;
      ic.skip_space();
      if (ic.peek() == '+' || ic.peek() == '-') {
        bool neg = ic.peek() == '-';
        ic.advance();
        ic.skip_space();
        auto n = ic.number();
        if (n.kind != Number::Kind::integer) return false;
        iv.offset = neg ? -int64_t(n.bits) : int64_t(n.bits);
      }
      out.push_back(iv);
      return true;
    };
    try {
      v.init_parsed = value(value, 0);
      ic.skip_space();
      if (!ic.at_end()) v.init_parsed = false;
    } catch (const ParseError&) {
      v.init_parsed = false;
    }
    if (v.init_parsed) v.init_values = std::move(out);
  }

  std::vector<Param> param_list() {
    std::vector<Param> out;
    c.expect('(', "'('");
    if (c.accept(')')) return out;
    while (true) {
      Param p;
      c.skip_space();
      auto sp = c.directive_name();
      if (sp == "param") {
        p.space = Space::param;
      } else if (sp == "reg") {
        p.space = Space::reg;
      } else {
        c.fail("expected .param or .reg in a parameter list, found ." + std::string(sp));
      }
      while (true) {
        c.skip_space();
        if (c.peek() != '.') break;
        auto d = c.directive_name();
        if (d == "align") {
          uint32_t a = small_number(".align");
          if (a == 0 || (a & (a - 1))) c.fail(".align must be a power of two");
          (p.ptr ? p.ptr_align : p.align) = a;
        } else if (d == "ptr") {
          p.ptr = true;
        } else if (p.ptr && space_from_name(d) != Space::none) {
          p.ptr_space = space_from_name(d);
        } else if (Type t = type_from_name(d); t != Type::none) {
          p.type = t;
        } else {
          c.fail("unexpected ." + std::string(d) + " in a parameter declaration");
        }
      }
      if (p.type == Type::none) c.fail("expected the type of the parameter");
      p.name = c.identifier();
      if (p.name.empty()) c.fail("expected a parameter name, found " + describe_char(c.peek()));
      if (c.accept('[')) {
        c.skip_space();
        auto n = c.number();
        if (n.kind != Number::Kind::integer || n.bits > (1u << 20)) {
          c.fail("parameter array size must be a small non-negative integer");
        }
        p.array = int64_t(n.bits);
        c.expect(']', "']'");
      }
      out.push_back(p);
      if (c.accept(',')) continue;
      c.expect(')', "',' or ')' in a parameter list");
      return out;
    }
  }

  void function(SourceLoc at, std::vector<std::string_view> attrs, bool is_entry) {
    Function f;
    f.loc = at;
    f.attrs = std::move(attrs);
    f.is_entry = is_entry;
    c.skip_space();
    if (!is_entry && c.peek() == '(') {
      f.returns = param_list();
      f.has_returns = true;
    }
    c.skip_space();
    f.name = c.identifier();
    if (f.name.empty()) c.fail("expected a function name, found " + describe_char(c.peek()));
    c.skip_space();
    if (c.peek() == '(') f.params = param_list();
    while (true) {
      c.skip_space();
      if (c.peek() != '.') break;
      size_t start = c.pos();
      FuncDirective d;
      d.name = c.directive_name();
      if (d.name == "pragma") {
        c.raw_statement();
        d.text = c.slice(start, c.pos());
      } else {
        c.skip_space_in_line();
        if (c.number_starts()) {
          do {
            c.skip_space();
            auto n = c.number();
            if (n.kind != Number::Kind::integer) c.fail("expected an integer");
            d.values.push_back(int64_t(n.bits));
          } while (c.accept(','));
        }
      }
      f.directives.push_back(d);
    }
    if (c.accept(';')) {
      push_item(at, std::move(f));
      return;
    }
    c.expect('{', "'{' to open the body of " + std::string(f.name));
    f.has_body = true;
    m_plain_regs.clear();
    body(f);
    push_item(at, std::move(f));
  }

  void body(Function& f) {
    int depth = 0;
    while (true) {
      c.skip_space();
      if (c.at_end()) c.fail_at(f.loc, "the body of " + std::string(f.name) + " is not closed");
      SourceLoc at = c.loc();
      size_t start = c.pos();
      char ch = c.peek();
      if (ch == '}') {
        c.advance();
        if (depth == 0) return;
        --depth;
        f.body.push_back(Statement{at, ScopeEnd{}});
      } else if (ch == '{') {
        c.advance();
        if (++depth > k_max_scope_depth) c.fail_at(at, "scopes nested too deeply");
        f.body.push_back(Statement{at, ScopeBegin{}});
      } else if (ch == '@') {
        instruction(f, at, start);
      } else if (ch == '.') {
        auto d = c.directive_name();
        if (d == "reg") {
          reg_decl(f, at);
        } else if (is_var_space(d)) {
          var_decls(at, {}, d, false, &f.body);
        } else if (is_linkage(d)) {
          c.skip_space();
          auto sp = c.directive_name();
          if (!is_var_space(sp)) c.fail("expected a variable after ." + std::string(d));
          var_decls(at, {d}, sp, false, &f.body);
        } else if (d == "loc" || d == "file") {
          c.raw_line();
          auto text = c.slice(start, c.pos());
          while (!text.empty() && (text.back() == ' ' || text.back() == '\t' ||
                                   text.back() == '\r')) {
            text.remove_suffix(1);
          }
          f.body.push_back(Statement{at, Directive{text}});
        } else if (d == "pragma" || d == "branchtargets" || d == "calltargets" ||
                   d == "callprototype") {
          c.raw_statement();
          f.body.push_back(Statement{at, Directive{c.slice(start, c.pos())}});
        } else {
          c.fail_at(at, "unknown directive ." + std::string(d) + " in the body of " +
                            std::string(f.name));
        }
      } else if (is_ident_start(ch)) {
        auto state = c.save();
        auto id = c.identifier();
        c.skip_space_in_line();
        if (c.peek() == ':' && c.peek(1) != ':') {
          c.advance();
          c.skip_space();
          if (c.peek() == '.') {
            // `label: .branchtargets ...;` or `proto: .callprototype ...;`
            auto s2 = c.save();
            auto d = c.directive_name();
            if (d == "callprototype") {
              c.raw_statement();
              f.body.push_back(Statement{at, Directive{c.slice(start, c.pos())}});
              continue;
            }
            c.restore(s2);
          }
          f.body.push_back(Statement{at, Label{id}});
        } else {
          c.restore(state);
          instruction(f, at, start);
        }
      } else {
        c.fail("unexpected " + describe_char(ch) + " in the body of " + std::string(f.name));
      }
    }
  }

  void reg_decl(Function& f, SourceLoc at) {
    RegDecl r;
    while (true) {
      c.skip_space();
      if (c.peek() != '.') break;
      auto d = c.directive_name();
      if (d == "v2" || d == "v4" || d == "v8") {
        r.vector = uint8_t(d[1] - '0');
      } else if (Type t = type_from_name(d); t != Type::none) {
        r.type = t;
      } else {
        c.fail("unexpected ." + std::string(d) + " in a register declaration");
      }
    }
    if (r.type == Type::none) c.fail("expected the type of the register");
    while (true) {
      c.skip_space();
      RegDecl::Name n;
      n.name = c.identifier();
      if (n.name.empty()) c.fail("expected a register name, found " + describe_char(c.peek()));
      if (c.accept('<')) {
        c.skip_space();
        SourceLoc nat = c.loc();
        auto num = c.number();
        if (num.kind != Number::Kind::integer || num.bits > (1u << 24)) {
          c.fail_at(nat, "register count must be a non-negative integer");
        }
        n.count = int32_t(num.bits);
        c.expect('>', "'>'");
      } else if (n.name[0] != '%') {
        m_plain_regs.push_back(n.name);
      }
      r.names.push_back(n);
      if (c.accept(',')) continue;
      c.expect(';', "';' after a register declaration");
      break;
    }
    f.body.push_back(Statement{at, std::move(r)});
  }

  bool is_plain_reg(std::string_view name) const {
    return std::find(m_plain_regs.begin(), m_plain_regs.end(), name) != m_plain_regs.end();
  }

  void instruction(Function& f, SourceLoc at, size_t start) {
    Instruction inst;
    if (c.peek() == '@') {
      c.advance();
      c.skip_space();
      if (c.peek() == '!') {
        inst.guard_negated = true;
        c.advance();
        c.skip_space();
      }
      inst.guard = c.identifier();
      if (inst.guard.empty()) c.fail("expected a predicate after '@'");
      c.skip_space();
    }
    SourceLoc op_at = c.loc();
    auto full = c.dotted();
    if (full.empty()) c.fail("expected an instruction, found " + describe_char(c.peek()));
    auto dot = full.find('.');
    auto base = full.substr(0, dot);
    auto op = opcode_from_name(base);
    if (!op) {
      // Not an instruction the IR models: keep it whole.
      if (c.peek() != ';' && c.peek() != ' ' && c.peek() != '\t' && c.peek() != '\n' &&
          c.peek() != '\r') {
        c.fail_at(op_at, "malformed instruction '" + std::string(full) + "'");
      }
      c.raw_statement();
      f.body.push_back(Statement{at, Opaque{c.slice(start, c.pos())}});
      return;
    }
    inst.op = *op;
    // Most instructions have at most four modifiers and four operands: one allocation each.
    inst.mods.reserve(4);
    inst.operands.reserve(4);
    while (dot != std::string_view::npos) {
      auto next = full.find('.', dot + 1);
      inst.mods.push_back(full.substr(dot + 1, next == std::string_view::npos ? next : next - dot - 1));
      dot = next;
    }
    c.skip_space();
    if (c.peek() != ';') {
      while (true) {
        inst.operands.push_back(operand());
        if (c.accept(',')) continue;
        c.expect(';', "',' or ';' after an operand of " + std::string(full));
        break;
      }
    } else {
      c.advance();
    }
    f.body.push_back(Statement{at, std::move(inst)});
  }

  Operand named(std::string_view name) {
    Operand o;
    o.name = name;
    o.kind = (name[0] == '%' || is_plain_reg(name)) ? Operand::Kind::reg : Operand::Kind::symbol;
    return o;
  }

  // A raw balanced group from `open` to its `close`, kept as an expression.
  Operand raw_group(char open, char close) {
    size_t s = c.pos();
    SourceLoc at = c.loc();
    int depth = 0;
    while (true) {
      if (c.at_end()) c.fail_at(at, std::string("unbalanced '") + open + "'");
      char ch = c.peek();
      if (ch == ';') c.fail_at(at, std::string("unbalanced '") + open + "'");
      c.advance();
      if (ch == open) ++depth;
      if (ch == close && --depth == 0) break;
    }
    Operand o;
    o.kind = Operand::Kind::expr;
    o.name = c.slice(s, c.pos());
    return o;
  }

  Operand operand() {
    if (++m_operand_depth > k_max_operand_depth) c.fail("operands nested too deeply");
    Operand o = operand_inner();
    --m_operand_depth;
    return o;
  }

  Operand operand_inner() {
    c.skip_space();
    char ch = c.peek();
    Operand o;
    if (ch == '{') {
      c.advance();
      o.kind = Operand::Kind::vector;
      if (!c.accept('}')) {
        do {
          o.elems.push_back(operand());
        } while (c.accept(','));
        c.expect('}', "'}' to close a vector operand");
      }
      return maybe_pair(std::move(o));
    }
    if (ch == '[') {
      auto state = c.save();
      try {
        return address();
      } catch (const ParseError&) {
        c.restore(state);
        return raw_group('[', ']');
      }
    }
    if (ch == '(') {
      auto state = c.save();
      try {
        c.advance();
        o.kind = Operand::Kind::list;
        if (!c.accept(')')) {
          do {
            o.elems.push_back(operand());
          } while (c.accept(','));
          c.expect(')', "')'");
        }
        return o;
      } catch (const ParseError&) {
        c.restore(state);
        return raw_group('(', ')');
      }
    }
    if (ch == '!') {
      c.advance();
      c.skip_space();
      auto id = c.identifier();
      if (id.empty()) c.fail("expected a predicate after '!'");
      o = named(id);
      o.negated = true;
      return o;
    }
    if (c.number_starts()) {
      auto n = c.number();
      switch (n.kind) {
      case Number::Kind::integer:
        o.kind = Operand::Kind::imm_int;
        o.value = int64_t(n.bits);
        o.unsigned_suffix = n.unsigned_suffix;
        break;
      case Number::Kind::f32:
        o.kind = Operand::Kind::imm_f32;
        o.bits = n.bits;
        break;
      case Number::Kind::f64:
        o.kind = Operand::Kind::imm_f64;
        o.bits = n.bits;
        break;
      case Number::Kind::decimal:
        o.kind = Operand::Kind::imm_dec;
        o.bits = n.bits;
        o.name = n.text;
        break;
      }
      return o;
    }
    if (is_ident_start(ch)) {
      size_t s = c.pos();
      auto id = c.identifier();
      if (id == "_") {
        o.kind = Operand::Kind::sink;
        return o;
      }
      // %tid.x, %ctaid.y and vector-register components
      if (c.peek() == '.' && is_ident_char(c.peek(1))) {
        c.advance();
        c.identifier();
        id = c.slice(s, c.pos());
      }
      o = named(id);
      if (o.kind == Operand::Kind::symbol) {
        auto state = c.save();
        c.skip_space();
        if (c.peek() == '+' || (c.peek() == '-' && is_digit(c.peek(1)))) {
          bool plus = c.peek() == '+';
          if (plus) c.advance();
          c.skip_space();
          auto n = c.number();
          if (n.kind != Number::Kind::integer) c.fail("expected an integer offset");
          o.value = int64_t(n.bits);
        } else {
          c.restore(state);
        }
      }
      return maybe_pair(std::move(o));
    }
    c.fail("unexpected " + describe_char(ch) + " in an operand");
  }

  Operand maybe_pair(Operand first) {
    auto state = c.save();
    c.skip_space();
    if (c.peek() != '|') {
      c.restore(state);
      return first;
    }
    c.advance();
    Operand o;
    o.kind = Operand::Kind::pair;
    o.elems.push_back(std::move(first));
    o.elems.push_back(operand());
    return o;
  }

  Operand address() {
    Operand o;
    o.kind = Operand::Kind::address;
    c.advance(); // '['
    c.skip_space();
    if (c.number_starts()) {
      auto n = c.number();
      if (n.kind != Number::Kind::integer) c.fail("expected an integer address");
      o.value = int64_t(n.bits);
      c.expect(']', "']' to close an address");
      return o;
    }
    auto id = c.identifier();
    if (id.empty()) c.fail("expected a register or a symbol in an address");
    Operand base = named(id);
    c.skip_space();
    if (c.peek() == ',') {
      // texture/surface form: [tex, {coords}] or [tex, sampler, {coords}]
      o.elems.push_back(base);
      while (c.accept(',')) o.elems.push_back(operand());
      c.expect(']', "']' to close an address");
      return o;
    }
    o.name = id;
    o.base_is_reg = base.kind == Operand::Kind::reg;
    if (c.peek() == '+' || c.peek() == '-') {
      bool plus = c.peek() == '+';
      if (plus) c.advance();
      c.skip_space();
      auto n = c.number();
      if (n.kind != Number::Kind::integer) c.fail("expected an integer offset");
      o.value = int64_t(n.bits);
    }
    c.expect(']', "']' to close an address");
    return o;
  }
};

} // namespace

Result<Module> parse(std::string_view text, std::string_view filename) {
  // Images handed to the driver carry their terminating NUL.
  while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
  if (auto nul = text.find('\0'); nul != std::string_view::npos) {
    auto before = text.substr(0, nul);
    auto line = 1 + std::count(before.begin(), before.end(), '\n');
    auto line_start = before.rfind('\n');
    auto col = nul - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    return make_error(std::string(filename) + ":" + std::to_string(line) + ":" +
                      std::to_string(col) + ": NUL byte inside the PTX text");
  }
  Module module;
  auto kept = module.arena->keep(text);
  try {
    Parser p(kept, module);
    p.module();
  } catch (const ParseError& e) {
    return make_error(std::string(filename) + ":" + std::to_string(e.loc.line) + ":" +
                      std::to_string(e.loc.col) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return make_error(std::string(filename) + ": out of memory while parsing");
  }
  return module;
}

} // namespace hone::ptx
