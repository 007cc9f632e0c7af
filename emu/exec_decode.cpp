#include "emu/exec_decode.hpp"

#include "emu/cost_model.hpp"
#include "emu/exec_defined.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

namespace hone::emu {

namespace {

using ptx::Opcode;
using ptx::Operand;
using ptx::Type;

// A reason the kernel cannot run, thrown inside the decoder only.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Symbol {
  enum class Kind : uint8_t { reg, local_var, kparam, shared_var, global_var } kind;
  uint32_t slot = k_no_slot; // reg
  uint8_t width = 8;         // reg: bytes
  uint8_t vec = 0;           // reg: .v2/.v4 register (slots slot..slot+vec-1)
  uint64_t value = 0;        // offset or address
};

struct RegRange {
  std::string_view prefix;
  uint32_t count;
  uint8_t width;
};

struct Scope {
  std::map<std::string_view, Symbol> names;
  std::vector<RegRange> ranges;
};

// A function instance being emitted: the entry, or a callee inlined at one call site.
struct Instance {
  const ptx::Function* function;
  std::map<std::string_view, uint32_t> labels;
  std::vector<std::pair<uint32_t, std::string_view>> branch_fixups; // insn index, label
  std::vector<uint32_t> return_fixups;                             // insns that jump to the end
};

std::optional<Sreg> special_register(std::string_view n) {
  static const std::map<std::string_view, Sreg> table = {
      {"%tid.x", Sreg::tid_x},          {"%tid.y", Sreg::tid_y},
      {"%tid.z", Sreg::tid_z},          {"%ntid.x", Sreg::ntid_x},
      {"%ntid.y", Sreg::ntid_y},        {"%ntid.z", Sreg::ntid_z},
      {"%ctaid.x", Sreg::ctaid_x},      {"%ctaid.y", Sreg::ctaid_y},
      {"%ctaid.z", Sreg::ctaid_z},      {"%nctaid.x", Sreg::nctaid_x},
      {"%nctaid.y", Sreg::nctaid_y},    {"%nctaid.z", Sreg::nctaid_z},
      {"%laneid", Sreg::laneid},        {"%warpid", Sreg::warpid},
      {"%nwarpid", Sreg::nwarpid},      {"%smid", Sreg::smid},
      {"%nsmid", Sreg::nsmid},          {"%gridid", Sreg::gridid},
      {"%lanemask_eq", Sreg::lanemask_eq}, {"%lanemask_le", Sreg::lanemask_le},
      {"%lanemask_lt", Sreg::lanemask_lt}, {"%lanemask_ge", Sreg::lanemask_ge},
      {"%lanemask_gt", Sreg::lanemask_gt}, {"%clock", Sreg::clock},
      {"%clock_hi", Sreg::clock_hi},    {"%clock64", Sreg::clock64},
      {"%globaltimer", Sreg::globaltimer}, {"%globaltimer_lo", Sreg::globaltimer_lo},
      {"%globaltimer_hi", Sreg::globaltimer_hi}, {"%total_smem_size", Sreg::total_smem_size},
      {"%dynamic_smem_size", Sreg::dynamic_smem_size}, {"%aggr_smem_size", Sreg::aggr_smem_size},
      {"%is_explicit_cluster", Sreg::zero}, {"%cluster_ctarank", Sreg::zero},
      {"%cluster_nctarank", Sreg::one},
      {"%cluster_ctaid.x", Sreg::zero}, {"%cluster_ctaid.y", Sreg::zero},
      {"%cluster_ctaid.z", Sreg::zero}, {"%cluster_nctaid.x", Sreg::one},
      {"%cluster_nctaid.y", Sreg::one}, {"%cluster_nctaid.z", Sreg::one},
      {"%clusterid.x", Sreg::ctaid_x},  {"%clusterid.y", Sreg::ctaid_y},
      {"%clusterid.z", Sreg::ctaid_z},  {"%nclusterid.x", Sreg::nctaid_x},
      {"%nclusterid.y", Sreg::nctaid_y}, {"%nclusterid.z", Sreg::nctaid_z},
  };
  auto it = table.find(n);
  if (it != table.end()) return it->second;
  // The driver-defined environment registers: cooperative groups reads the address of its
  // grid-wide barrier's workspace from %envreg1:%envreg2 (cooperative_groups/details/sync.h); the
  // rest are 0.
  if (n == "%envreg1") return Sreg::envreg1;
  if (n == "%envreg2") return Sreg::envreg2;
  if (n.starts_with("%envreg")) return Sreg::zero;
  // The performance-monitoring counters %pm0..%pm7 and %pm0_64..%pm7_64 (PTX ISA "Special
  // Registers": their behaviour is "currently undefined"): no profiler counts events here, so 0.
  if (n.size() >= 4 && n.starts_with("%pm") && n[3] >= '0' && n[3] <= '7' &&
      (n.size() == 4 || n.substr(4) == "_64"))
    return Sreg::zero;
  return std::nullopt;
}

uint64_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
uint64_t f64_bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}
double bits_f64(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}
float bits_f32(uint64_t b) {
  float f;
  uint32_t u = uint32_t(b);
  std::memcpy(&f, &u, 4);
  return f;
}

// f32 to f16 bits, round to nearest even (for literals only).
uint16_t f32_to_f16_rn(float f) {
  uint32_t x = uint32_t(f32_bits(f));
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = (uint32_t(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return uint16_t(sign | half);
}

uint8_t width_of(Type t) {
  if (t == Type::pred) return 1;
  uint32_t s = ptx::type_size(t);
  return uint8_t(s ? s : 8);
}

class Decoder {
public:
  Decoder(const ptx::Module& m, const SymbolAddresses& globals, CompiledKernel& k)
      : m_module(m), m_globals(globals), m_k(k) {}

  void entry(const ptx::Function& f) {
    m_k.name = std::string(f.name);
    m_k.ptx_version = m_module.version_major * 10 + m_module.version_minor;
    // Kernel parameters: offsets as the driver lays them out.
    Scope params;
    uint32_t offset = 0;
    for (const auto& p : f.params) {
      uint32_t align = p.alignment();
      offset = (offset + align - 1) / align * align;
      params.names[p.name] = Symbol{Symbol::Kind::kparam, k_no_slot, 8, 0, offset};
      m_k.param_offsets.push_back(offset);
      m_k.param_sizes.push_back(p.size_bytes());
      offset += p.size_bytes();
    }
    m_k.param_bytes = offset;
    m_scopes.push_back(std::move(params));
    m_k.carry_slot = new_slot(4);
    instance(f);
    m_scopes.pop_back();
    m_k.code.push_back(exit_insn());
    place_dynamic_shared();
  }

private:
  const ptx::Module& m_module;
  const SymbolAddresses& m_globals;
  CompiledKernel& m_k;
  std::vector<Scope> m_scopes;
  std::vector<const ptx::Function*> m_inline_stack;
  std::map<std::string, uint32_t> m_shared; // static shared variables: key -> offset
  uint32_t m_line = 0;
  Instance* m_instance = nullptr;
  bool m_dynamic_hit = false;
  std::vector<uint32_t> m_dynamic_patches;

  [[noreturn]] void unsupported(const std::string& why) const {
    throw Unsupported("PTX line " + std::to_string(m_line) + ": " + why);
  }

  Insn exit_insn() const {
    Insn i;
    i.op = XOp::exit;
    i.line = m_line;
    return i;
  }

  uint32_t new_slot(uint8_t width) {
    m_k.slot_bytes.push_back(width);
    return m_k.num_slots++;
  }

  uint32_t alloc_local(uint64_t size, uint32_t align) {
    align = std::max<uint32_t>(align, 1);
    uint64_t off = (uint64_t(m_k.local_bytes) + align - 1) / align * align;
    if (off + size > (64u << 20)) unsupported("more than 64 MB of local memory per thread");
    m_k.local_bytes = uint32_t(off + size);
    return uint32_t(off);
  }

  uint32_t alloc_shared(const std::string& key, uint64_t size, uint32_t align) {
    auto it = m_shared.find(key);
    if (it != m_shared.end()) return it->second;
    align = std::max<uint32_t>(align, 1);
    uint64_t off = (uint64_t(m_k.static_shared_bytes) + align - 1) / align * align;
    if (off + size > (1u << 30)) unsupported("static shared memory too large");
    m_k.static_shared_bytes = uint32_t(off + size);
    m_shared[key] = uint32_t(off);
    return uint32_t(off);
  }

  // ---- symbols ----------------------------------------------------------------------------

  const Symbol* lookup(std::string_view name) {
    for (auto s = m_scopes.rbegin(); s != m_scopes.rend(); ++s) {
      auto it = s->names.find(name);
      if (it != s->names.end()) return &it->second;
      // %r17 within a `%r<N>` range of this scope
      size_t d = name.size();
      while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9') --d;
      if (d == name.size() || d == 0) continue;
      auto prefix = name.substr(0, d);
      if (name.size() - d > 1 && name[d] == '0') continue; // %r07 is not in %r<N>
      uint64_t index = 0;
      for (size_t i = d; i < name.size(); ++i) index = index * 10 + uint64_t(name[i] - '0');
      for (const auto& r : s->ranges) {
        if (r.prefix == prefix && index < r.count) {
          Symbol sym{Symbol::Kind::reg, new_slot(r.width), r.width, 0, 0};
          return &(s->names[name] = sym);
        }
      }
    }
    // Module variables.
    if (auto it = m_globals.find(name); it != m_globals.end()) {
      m_k.uses_module_addresses = true;
      static thread_local Symbol g;
      g = Symbol{Symbol::Kind::global_var, k_no_slot, 8, 0, it->second};
      return &g;
    }
    if (const auto* v = m_module.variable(name); v && v->space == ptx::Space::shared) {
      return shared_symbol(*v, std::string(name));
    }
    return nullptr;
  }

  const Symbol* shared_symbol(const ptx::VarDecl& v, const std::string& key) {
    static thread_local Symbol s;
    if (!v.dims.empty() && v.dims.back() < 0) {
      // extern .shared: dynamic shared memory starts after the static part, aligned
      m_k.dynamic_shared_align = std::max(m_k.dynamic_shared_align, std::max(v.align, 16u));
      s = Symbol{Symbol::Kind::shared_var, k_no_slot, 8, 0, ~uint64_t(0)};
      return &s;
    }
    uint32_t off = alloc_shared(key, v.size_bytes(), v.align ? v.align : ptx::type_size(v.type));
    s = Symbol{Symbol::Kind::shared_var, k_no_slot, 8, 0, off};
    return &s;
  }

  uint32_t reg_slot(std::string_view name) {
    const Symbol* s = lookup(name);
    if (!s || s->kind != Symbol::Kind::reg) {
      // `v.x` component of a vector register
      auto dot = name.rfind('.');
      if (dot != std::string_view::npos && dot + 2 == name.size()) {
        const Symbol* v = lookup(name.substr(0, dot));
        if (v && v->kind == Symbol::Kind::reg && v->vec) {
          static constexpr std::string_view comps = "xyzw";
          auto c = comps.find(name[dot + 1]);
          if (c != std::string_view::npos && c < v->vec) return v->slot + uint32_t(c);
        }
      }
      unsupported("unknown register " + std::string(name));
    }
    return s->slot;
  }

  // The value a symbol operand stands for (an address or an offset in its space).
  uint64_t symbol_value(std::string_view name, int64_t offset) {
    const Symbol* s = lookup(name);
    // PTX's one predefined constant (PTX ISA "Identifiers", "Predefined Identifiers"): the
    // number of threads in a warp, 32 on every target; a module may still name a variable so.
    if (!s && name == "WARP_SZ") return 32 + uint64_t(offset);
    if (!s) unsupported("unknown symbol " + std::string(name));
    switch (s->kind) {
    case Symbol::Kind::reg:
      unsupported("register " + std::string(name) + " used as an address symbol");
    case Symbol::Kind::shared_var:
      if (s->value == ~uint64_t(0)) {
        m_dynamic_hit = true;
        return k_dynamic_marker + uint64_t(offset);
      }
      return s->value + uint64_t(offset);
    case Symbol::Kind::local_var:
    case Symbol::Kind::kparam:
    case Symbol::Kind::global_var:
      return s->value + uint64_t(offset);
    }
    return 0;
  }

  // Dynamic shared memory's base is known only at launch: such immediates are patched then.
  static constexpr uint64_t k_dynamic_marker = 0x4000'0000'0000'0000ull;

  // ---- operands -----------------------------------------------------------------------------

  uint64_t convert_imm(const Operand& o, Type t) {
    bool fl = ptx::is_float(t);
    uint32_t size = ptx::type_size(t);
    switch (o.kind) {
    case Operand::Kind::imm_int:
      if (fl && t == Type::f32) return f32_bits(float(int64_t(o.value)));
      if (fl && t == Type::f64) return f64_bits(double(int64_t(o.value)));
      return uint64_t(o.value);
    case Operand::Kind::imm_f32: {
      if (t == Type::f64) return f64_bits(double(bits_f32(o.bits)));
      if (t == Type::f16 && size == 2) return f32_to_f16_rn(bits_f32(o.bits));
      return o.bits & 0xffffffffu;
    }
    case Operand::Kind::imm_f64:
    case Operand::Kind::imm_dec: {
      double d = bits_f64(o.bits);
      if (t == Type::f32) return f32_bits(float(d));
      if (t == Type::f16) return f32_to_f16_rn(float(d));
      if (!fl && o.kind == Operand::Kind::imm_dec) return uint64_t(int64_t(d));
      return o.bits;
    }
    default:
      return 0;
    }
  }

  Src src(const Operand& o, Type t) {
    Src s;
    switch (o.kind) {
    case Operand::Kind::reg:
      if (auto sr = special_register(o.name)) {
        s.kind = Src::Kind::sreg;
        s.sreg = *sr;
      } else {
        s.kind = Src::Kind::reg;
        s.slot = reg_slot(o.name);
      }
      s.negate = o.negated;
      return s;
    case Operand::Kind::imm_int:
    case Operand::Kind::imm_f32:
    case Operand::Kind::imm_f64:
    case Operand::Kind::imm_dec:
      s.kind = Src::Kind::imm;
      s.imm = convert_imm(o, t);
      return s;
    case Operand::Kind::symbol:
      s.kind = Src::Kind::imm;
      s.imm = symbol_value(o.name, o.value);
      s.negate = o.negated;
      return s;
    case Operand::Kind::sink:
      return s;
    default:
      unsupported("operand form '" + std::string(o.name) + "' is not supported");
    }
  }

  Src dst(const Operand& o) {
    Src s;
    if (o.kind == Operand::Kind::sink) return s;
    if (o.kind != Operand::Kind::reg) unsupported("destination must be a register");
    if (special_register(o.name)) unsupported("cannot write a special register");
    s.kind = Src::Kind::reg;
    s.slot = reg_slot(o.name);
    return s;
  }

  Addr addr(const Operand& o, ptx::Space space) {
    if (o.kind != Operand::Kind::address || !o.elems.empty()) {
      unsupported("address operand form is not supported");
    }
    Addr a;
    a.offset = o.value;
    AddrSpace by_space = AddrSpace::generic;
    switch (space) {
    case ptx::Space::global:
    case ptx::Space::const_:
      by_space = AddrSpace::global;
      break;
    case ptx::Space::shared:
      by_space = AddrSpace::shared;
      break;
    case ptx::Space::local:
      by_space = AddrSpace::local;
      break;
    case ptx::Space::param:
      by_space = AddrSpace::kparam;
      break;
    case ptx::Space::none:
      by_space = AddrSpace::generic;
      break;
    default:
      unsupported("state space ." + std::string(ptx::space_name(space)) + " is not supported");
    }
    if (o.base_is_reg) {
      a.slot = reg_slot(o.name);
      a.space = by_space;
      return a;
    }
    if (o.name.empty()) {
      a.space = by_space;
      return a;
    }
    const Symbol* s = lookup(o.name);
    if (!s) unsupported("unknown symbol " + std::string(o.name));
    switch (s->kind) {
    case Symbol::Kind::reg:
      a.slot = s->slot;
      a.space = by_space;
      return a;
    case Symbol::Kind::local_var:
      a.space = AddrSpace::local;
      break;
    case Symbol::Kind::kparam:
      a.space = AddrSpace::kparam;
      break;
    case Symbol::Kind::shared_var:
      a.space = AddrSpace::shared;
      if (s->value == ~uint64_t(0)) {
        m_dynamic_hit = true;
        a.offset += int64_t(k_dynamic_marker);
        return a;
      }
      break;
    case Symbol::Kind::global_var:
      a.space = AddrSpace::global;
      break;
    }
    a.offset += int64_t(s->value);
    return a;
  }

  // ---- statements ---------------------------------------------------------------------------

  void instance(const ptx::Function& f) {
    if (std::find(m_inline_stack.begin(), m_inline_stack.end(), &f) != m_inline_stack.end()) {
      unsupported("recursive call to " + std::string(f.name) + " is not supported");
    }
    if (m_inline_stack.size() > 32) unsupported("calls nested more than 32 deep");
    if (!f.has_body) unsupported("call to " + std::string(f.name) + ", which has no body here");
    m_inline_stack.push_back(&f);
    Instance inst{&f, {}, {}, {}};
    Instance* outer = m_instance;
    m_instance = &inst;
    size_t depth = m_scopes.size();
    m_scopes.emplace_back();
    for (const auto& st : f.body) {
      m_line = st.loc.line;
      statement(f, st);
    }
    m_scopes.resize(depth);
    uint32_t end = uint32_t(m_k.code.size());
    for (auto [at, label] : inst.branch_fixups) {
      auto it = inst.labels.find(label);
      if (it == inst.labels.end()) {
        m_line = m_k.code[at].line;
        unsupported("branch to unknown label " + std::string(label));
      }
      m_k.code[at].target = it->second;
    }
    for (auto at : inst.return_fixups) m_k.code[at].target = end;
    m_instance = outer;
    m_inline_stack.pop_back();
  }

  void statement(const ptx::Function& f, const ptx::Statement& st) {
    std::visit(
        [&](const auto& item) {
          using T = std::decay_t<decltype(item)>;
          if constexpr (std::is_same_v<T, ptx::Instruction>) {
            instruction(item);
          } else if constexpr (std::is_same_v<T, ptx::Label>) {
            m_instance->labels[item.name] = uint32_t(m_k.code.size());
          } else if constexpr (std::is_same_v<T, ptx::RegDecl>) {
            reg_decl(item);
          } else if constexpr (std::is_same_v<T, ptx::VarDecl>) {
            var_decl(f, item);
          } else if constexpr (std::is_same_v<T, ptx::ScopeBegin>) {
            m_scopes.emplace_back();
          } else if constexpr (std::is_same_v<T, ptx::ScopeEnd>) {
            m_scopes.pop_back();
          } else if constexpr (std::is_same_v<T, ptx::Opaque>) {
            auto text = item.text.substr(0, item.text.find_first_of(" \t"));
            unsupported("instruction '" + std::string(text) + "' is not supported");
          }
          // Directives (.pragma, .loc) change nothing here.
        },
        st.item);
  }

  void reg_decl(const ptx::RegDecl& r) {
    uint8_t w = width_of(r.type);
    for (const auto& n : r.names) {
      if (n.count >= 0) {
        m_scopes.back().ranges.push_back({n.name, uint32_t(n.count), w});
        m_k.declared_registers += uint32_t(n.count);
        continue;
      }
      Symbol s{Symbol::Kind::reg, k_no_slot, w, r.vector, 0};
      s.slot = new_slot(w);
      for (uint32_t i = 1; i < r.vector; ++i) new_slot(w);
      m_scopes.back().names[n.name] = s;
      m_k.declared_registers += std::max<uint32_t>(1, r.vector);
    }
  }

  void var_decl(const ptx::Function& f, const ptx::VarDecl& v) {
    switch (v.space) {
    case ptx::Space::local:
    case ptx::Space::param: {
      uint64_t size = std::max<uint64_t>(v.size_bytes(), 1);
      uint32_t align = v.align ? v.align : std::max<uint32_t>(ptx::type_size(v.type), 1);
      uint32_t off = alloc_local(size, align);
      m_scopes.back().names[v.name] = Symbol{Symbol::Kind::local_var, k_no_slot, 8, 0, off};
      return;
    }
    case ptx::Space::shared: {
      const Symbol* s = shared_symbol(v, std::string(f.name) + "::" + std::string(v.name));
      m_scopes.back().names[v.name] = *s;
      return;
    }
    default:
      unsupported("." + std::string(ptx::space_name(v.space)) +
                  " variable inside a function is not supported");
    }
  }

  // ---- instructions -------------------------------------------------------------------------

  struct Mods {
    uint32_t flags = 0;
    uint8_t round = k_rnd_default;
    std::vector<std::string_view> rest; // modifiers the op handler interprets
  };

  static bool ignorable(std::string_view m) {
    static const std::set<std::string_view> k = {
        "sync", "aligned", "uni", "gpu", "sys", "cta", "cluster", "weak", "ca", "cg", "cs",
        "lu", "cv", "wb", "wt", "nc", "noftz", "full_range"};
    return k.count(m) || m.starts_with("L1::") || m.starts_with("L2::") ||
           m.starts_with("level::") || m.starts_with("mem");
  }

  Mods split_mods(const ptx::Instruction& in) {
    Mods md;
    for (auto m : in.mods) {
      if (m == "ftz") md.flags |= k_f_ftz;
      else if (m == "sat") md.flags |= k_f_sat;
      else if (m == "satfinite") md.flags |= k_f_satfinite;
      else if (m == "hi") md.flags |= k_f_hi;
      else if (m == "lo") {
      } else if (m == "wide") md.flags |= k_f_wide;
      else if (m == "cc") md.flags |= k_f_cc;
      else if (m == "approx") md.flags |= k_f_approx;
      else if (m == "full") md.flags |= k_f_full;
      else if (m == "relu") md.flags |= k_f_relu;
      else if (m == "NaN") md.flags |= k_f_nan;
      else if (m == "xorsign") md.flags |= k_f_xorsign;
      else if (m == "abs" && md.flags & k_f_xorsign) {
      } else if (m == "shiftamt") md.flags |= k_f_shiftamt;
      else if (m == "volatile" || m == "relaxed" || m == "acquire" || m == "release" ||
               m == "acq_rel" || m == "sc")
        md.flags |= k_f_volatile;
      else if (m == "rn") md.round = k_rnd_rn;
      else if (m == "rz") md.round = k_rnd_rz;
      else if (m == "rm") md.round = k_rnd_rm;
      else if (m == "rp") md.round = k_rnd_rp;
      else if (m == "rna") md.round = k_rnd_rna;
      else if (m == "rni") md.round = k_rnd_rni;
      else if (m == "rzi") md.round = k_rnd_rzi;
      else if (m == "rmi") md.round = k_rnd_rmi;
      else if (m == "rpi") md.round = k_rnd_rpi;
      else if (ptx::type_from_name(m) != Type::none || ignorable(m) ||
               ptx::space_from_name(m) != ptx::Space::none)
        continue;
      else md.rest.push_back(m);
    }
    return md;
  }

  void reject_rest(const ptx::Instruction& in, const Mods& md, size_t allowed = 0) {
    if (md.rest.size() > allowed) {
      unsupported("modifier ." + std::string(md.rest[allowed]) + " of " +
                  std::string(ptx::opcode_name(in.op)) + " is not supported");
    }
  }

  void need(const ptx::Instruction& in, size_t n) {
    if (in.operands.size() != n) {
      unsupported(std::string(ptx::opcode_name(in.op)) + " expects " + std::to_string(n) +
                  " operands, has " + std::to_string(in.operands.size()));
    }
  }

  Insn base(const ptx::Instruction& in, XOp op, const Mods& md) {
    Insn i;
    i.op = op;
    i.flags = md.flags;
    i.mode = md.round;
    i.type = in.last_type();
    i.line = m_line;
    if (!in.guard.empty()) {
      i.guard = reg_slot(in.guard);
      i.guard_negated = in.guard_negated;
    }
    return i;
  }

  void emit(Insn i) {
    cost::assign(i);
    if (is_matrix(i.op)) cost::assign_matrix(i, m_k.matrix[i.matrix]);
    if (m_dynamic_hit) {
      m_dynamic_patches.push_back(uint32_t(m_k.code.size()));
      m_dynamic_hit = false;
    }
    m_k.code.push_back(i);
  }

  // Dynamic shared memory starts after the static variables, at its alignment; only now is the
  // static size known.
  void place_dynamic_shared() {
    uint64_t a = m_k.dynamic_shared_align;
    uint64_t base = (uint64_t(m_k.static_shared_bytes) + a - 1) / a * a;
    for (uint32_t at : m_dynamic_patches) {
      Insn& i = m_k.code[at];
      auto fix = [&](uint64_t& v) {
        if (v >= k_dynamic_marker && v - k_dynamic_marker < (1ull << 32)) {
          v = v - k_dynamic_marker + base;
        }
      };
      for (auto& s : i.src) {
        if (s.kind == Src::Kind::imm) fix(s.imm);
      }
      uint64_t off = uint64_t(i.addr.offset);
      fix(off);
      i.addr.offset = int64_t(off);
    }
  }

  // d, a[, b[, c]] with every source of the instruction's type.
  void simple(const ptx::Instruction& in, XOp op, size_t nsrc, const Mods& md) {
    need(in, nsrc + 1);
    Insn i = base(in, op, md);
    i.ndst = 1;
    i.dst[0] = dst(in.operands[0]);
    i.nsrc = uint8_t(nsrc);
    for (size_t k = 0; k < nsrc; ++k) i.src[k] = src(in.operands[k + 1], i.type);
    emit(i);
  }

  static uint8_t cmp_op(std::string_view m) {
    static const std::map<std::string_view, uint8_t> t = {
        {"eq", k_cmp_eq},   {"ne", k_cmp_ne},   {"lt", k_cmp_lt},   {"le", k_cmp_le},
        {"gt", k_cmp_gt},   {"ge", k_cmp_ge},   {"lo", k_cmp_lo},   {"ls", k_cmp_ls},
        {"hi", k_cmp_hi},   {"hs", k_cmp_hs},   {"equ", k_cmp_equ}, {"neu", k_cmp_neu},
        {"ltu", k_cmp_ltu}, {"leu", k_cmp_leu}, {"gtu", k_cmp_gtu}, {"geu", k_cmp_geu},
        {"num", k_cmp_num}, {"nan", k_cmp_nan}};
    auto it = t.find(m);
    return it == t.end() ? 0xff : it->second;
  }

  static uint8_t bool_op(std::string_view m) {
    if (m == "and") return k_bool_and;
    if (m == "or") return k_bool_or;
    if (m == "xor") return k_bool_xor;
    if (m == "popc") return k_bool_popc;
    return 0xff;
  }

  void instruction(const ptx::Instruction& in) {
    Mods md = split_mods(in);
    auto ops = [&](size_t k) -> const Operand& { return in.operands.at(k); };
    switch (in.op) {
    case Opcode::mov:
      return mov(in, md);
    case Opcode::add:
    case Opcode::sub: {
      reject_rest(in, md);
      simple(in, in.op == Opcode::add ? XOp::add : XOp::sub, 2, md);
      return;
    }
    case Opcode::addc:
    case Opcode::subc:
      reject_rest(in, md);
      simple(in, in.op == Opcode::addc ? XOp::addc : XOp::subc, 2, md);
      return;
    case Opcode::mul:
    case Opcode::mul24: {
      reject_rest(in, md);
      simple(in, in.op == Opcode::mul ? XOp::mul : XOp::mul24, 2, md);
      return;
    }
    case Opcode::mad:
    case Opcode::mad24:
    case Opcode::madc: {
      reject_rest(in, md);
      simple(in, in.op == Opcode::mad24 ? XOp::mad24 : XOp::mad, 3, md);
      if (in.op == Opcode::madc) m_k.code.back().flags |= k_f_carry_in;
      if (ptx::is_float(m_k.code.back().type)) m_k.code.back().op = XOp::fma;
      return;
    }
    case Opcode::fma:
      reject_rest(in, md);
      simple(in, XOp::fma, 3, md);
      return;
    case Opcode::sad:
      reject_rest(in, md);
      simple(in, XOp::sad, 3, md);
      return;
    case Opcode::div:
    case Opcode::rem:
      reject_rest(in, md);
      simple(in, in.op == Opcode::div ? XOp::div : XOp::rem, 2, md);
      return;
    case Opcode::abs:
    case Opcode::neg:
    case Opcode::not_:
    case Opcode::cnot:
    case Opcode::popc:
    case Opcode::clz:
    case Opcode::brev:
    case Opcode::bfind: {
      reject_rest(in, md);
      static const std::map<Opcode, XOp> t = {
          {Opcode::abs, XOp::abs},   {Opcode::neg, XOp::neg},  {Opcode::not_, XOp::not_},
          {Opcode::cnot, XOp::cnot}, {Opcode::popc, XOp::popc}, {Opcode::clz, XOp::clz},
          {Opcode::brev, XOp::brev}, {Opcode::bfind, XOp::bfind}};
      simple(in, t.at(in.op), 1, md);
      return;
    }
    case Opcode::min:
    case Opcode::max:
      reject_rest(in, md);
      simple(in, in.op == Opcode::min ? XOp::min : XOp::max, 2, md);
      return;
    case Opcode::and_:
    case Opcode::or_:
    case Opcode::xor_:
    case Opcode::copysign:
      reject_rest(in, md);
      simple(in,
             in.op == Opcode::and_  ? XOp::and_
             : in.op == Opcode::or_ ? XOp::or_
             : in.op == Opcode::xor_ ? XOp::xor_
                                     : XOp::copysign,
             2, md);
      return;
    case Opcode::shl:
    case Opcode::shr: {
      reject_rest(in, md);
      need(in, 3);
      Insn i = base(in, in.op == Opcode::shl ? XOp::shl : XOp::shr, md);
      i.ndst = 1;
      i.dst[0] = dst(ops(0));
      i.nsrc = 2;
      i.src[0] = src(ops(1), i.type);
      i.src[1] = src(ops(2), Type::u32);
      emit(i);
      return;
    }
    case Opcode::bfe:
    case Opcode::bfi:
    case Opcode::prmt:
    case Opcode::shf:
    case Opcode::lop3:
    case Opcode::bmsk:
    case Opcode::szext:
    case Opcode::fns:
      return bit_op(in, md);
    case Opcode::testp: {
      need(in, 2);
      if (md.rest.size() != 1) unsupported("testp needs one test");
      static const std::map<std::string_view, uint8_t> t = {
          {"finite", 0}, {"infinite", 1}, {"number", 2}, {"notanumber", 3}, {"normal", 4},
          {"subnormal", 5}};
      auto it = t.find(md.rest[0]);
      if (it == t.end()) unsupported("testp." + std::string(md.rest[0]));
      Insn i = base(in, XOp::testp, md);
      i.mode = it->second;
      i.ndst = 1;
      i.dst[0] = dst(ops(0));
      i.nsrc = 1;
      i.src[0] = src(ops(1), i.type);
      emit(i);
      return;
    }
    case Opcode::setp:
    case Opcode::set:
      return setp(in, md);
    case Opcode::selp: {
      reject_rest(in, md);
      need(in, 4);
      Insn i = base(in, XOp::selp, md);
      i.ndst = 1;
      i.dst[0] = dst(ops(0));
      i.nsrc = 3;
      i.src[0] = src(ops(1), i.type);
      i.src[1] = src(ops(2), i.type);
      i.src[2] = src(ops(3), Type::pred);
      emit(i);
      return;
    }
    case Opcode::slct: {
      reject_rest(in, md);
      need(in, 4);
      auto types = in.types();
      if (types.size() != 2) unsupported("slct needs two types");
      Insn i = base(in, XOp::slct, md);
      i.type = types[0];
      i.type2 = types[1];
      i.ndst = 1;
      i.dst[0] = dst(ops(0));
      i.nsrc = 3;
      i.src[0] = src(ops(1), i.type);
      i.src[1] = src(ops(2), i.type);
      i.src[2] = src(ops(3), i.type2);
      emit(i);
      return;
    }
    case Opcode::cvt:
      return cvt(in, md);
    case Opcode::cvta:
    case Opcode::isspacep:
      return cvta(in, md);
    case Opcode::ld:
    case Opcode::ldu:
    case Opcode::st:
      return load_store(in, md);
    case Opcode::atom:
    case Opcode::red:
      return atomic(in, md);
    case Opcode::rcp:
    case Opcode::sqrt:
    case Opcode::rsqrt:
    case Opcode::sin:
    case Opcode::cos:
    case Opcode::lg2:
    case Opcode::ex2:
    case Opcode::tanh: {
      reject_rest(in, md);
      static const std::map<Opcode, XOp> t = {
          {Opcode::rcp, XOp::rcp}, {Opcode::sqrt, XOp::sqrt}, {Opcode::rsqrt, XOp::rsqrt},
          {Opcode::sin, XOp::sin}, {Opcode::cos, XOp::cos},   {Opcode::lg2, XOp::lg2},
          {Opcode::ex2, XOp::ex2}, {Opcode::tanh, XOp::tanh}};
      simple(in, t.at(in.op), 1, md);
      return;
    }
    case Opcode::bra: {
      need(in, 1);
      if (ops(0).kind != Operand::Kind::symbol) unsupported("indirect branch");
      Insn i = base(in, XOp::bra, md);
      m_instance->branch_fixups.emplace_back(uint32_t(m_k.code.size()), ops(0).name);
      emit(i);
      return;
    }
    case Opcode::ret:
    case Opcode::exit: {
      Insn i = base(in, XOp::exit, md);
      if (in.op == Opcode::ret && m_inline_stack.size() > 1) {
        i.op = XOp::bra; // return from an inlined function: jump past its body
        m_instance->return_fixups.push_back(uint32_t(m_k.code.size()));
      }
      emit(i);
      return;
    }
    case Opcode::call:
      return call(in);
    case Opcode::bar:
    case Opcode::barrier:
      return barrier(in, md);
    case Opcode::membar:
    case Opcode::fence:
    case Opcode::prefetch:
    case Opcode::prefetchu:
    case Opcode::nanosleep:
    case Opcode::pmevent:
    case Opcode::discard:
    case Opcode::applypriority:
    case Opcode::griddepcontrol:
    case Opcode::brkpt: {
      // Ordering and hints: execution here is already ordered and uncached.
      Insn i = base(in, XOp::nop, md);
      emit(i);
      return;
    }
    case Opcode::createpolicy: {
      Insn i = base(in, XOp::mov, md);
      i.type = Type::b64;
      i.ndst = 1;
      i.dst[0] = dst(ops(0));
      i.nsrc = 1;
      i.src[0].kind = Src::Kind::imm;
      emit(i);
      return;
    }
    case Opcode::trap: {
      Insn i = base(in, XOp::trap, md);
      emit(i);
      return;
    }
    case Opcode::shfl:
    case Opcode::vote:
    case Opcode::match:
    case Opcode::activemask:
    case Opcode::redux:
    case Opcode::elect:
      return warp_op(in, md);
    case Opcode::dp4a:
    case Opcode::dp2a: {
      need(in, 4);
      auto types = in.types();
      if (types.size() != 2) unsupported("dp4a/dp2a need two types");
      Insn i = base(in, in.op == Opcode::dp4a ? XOp::dp4a : XOp::dp2a, md);
      i.type = types[0];
      i.type2 = types[1];
      i.ndst = 1;
      i.dst[0] = dst(ops(0));
      i.nsrc = 3;
      for (int k = 0; k < 3; ++k) i.src[k] = src(ops(size_t(k) + 1), Type::b32);
      if (in.op == Opcode::dp2a && in.has_mod("hi")) i.flags |= k_f_hi;
      emit(i);
      return;
    }
    case Opcode::cp:
      return cp_async(in, md);
    case Opcode::mma:
    case Opcode::wmma:
    case Opcode::ldmatrix:
    case Opcode::stmatrix:
    case Opcode::movmatrix:
      return matrix_instruction(in, md);
    default:
      unsupported("instruction " + std::string(ptx::opcode_name(in.op)) +
                  " is not supported by the emulated device");
    }
  }

  void mov(const ptx::Instruction& in, const Mods& md) {
    reject_rest(in, md);
    need(in, 2);
    const Operand& d = in.operands[0];
    const Operand& a = in.operands[1];
    Insn i = base(in, XOp::mov, md);
    if (d.kind == Operand::Kind::vector) {
      // mov.b64 {lo, hi}, %rd: unpack into equal parts, lowest first
      i.op = XOp::unpack;
      if (d.elems.size() > 4) unsupported("vector of more than 4 elements");
      i.ndst = uint8_t(d.elems.size());
      for (size_t k = 0; k < d.elems.size(); ++k) i.dst[k] = dst(d.elems[k]);
      i.nsrc = 1;
      i.src[0] = src(a, i.type);
    } else if (a.kind == Operand::Kind::vector) {
      i.op = XOp::pack;
      if (a.elems.size() > 4) unsupported("vector of more than 4 elements");
      i.ndst = 1;
      i.dst[0] = dst(d);
      i.nsrc = uint8_t(a.elems.size());
      for (size_t k = 0; k < a.elems.size(); ++k) i.src[k] = src(a.elems[k], Type::none);
    } else {
      i.ndst = 1;
      i.dst[0] = dst(d);
      i.nsrc = 1;
      i.src[0] = src(a, i.type);
    }
    emit(i);
  }

  void bit_op(const ptx::Instruction& in, Mods& md) {
    Insn i = base(in, XOp::nop, md);
    i.ndst = 1;
    switch (in.op) {
    case Opcode::bfe:
      need(in, 4);
      reject_rest(in, md);
      i.op = XOp::bfe;
      i.nsrc = 3;
      i.src[0] = src(in.operands[1], i.type);
      i.src[1] = src(in.operands[2], Type::u32);
      i.src[2] = src(in.operands[3], Type::u32);
      break;
    case Opcode::bfi:
      need(in, 5);
      reject_rest(in, md);
      i.op = XOp::bfi;
      i.nsrc = 4;
      i.src[0] = src(in.operands[1], i.type);
      i.src[1] = src(in.operands[2], i.type);
      i.src[2] = src(in.operands[3], Type::u32);
      i.src[3] = src(in.operands[4], Type::u32);
      break;
    case Opcode::prmt: {
      need(in, 4);
      i.op = XOp::prmt;
      static const std::map<std::string_view, uint8_t> modes = {
          {"f4e", 1}, {"b4e", 2}, {"rc8", 3}, {"ecl", 4}, {"ecr", 5}, {"rc16", 6}};
      if (!md.rest.empty()) {
        auto it = modes.find(md.rest[0]);
        if (it == modes.end()) unsupported("prmt." + std::string(md.rest[0]));
        i.mode = it->second;
        md.rest.erase(md.rest.begin());
      }
      reject_rest(in, md);
      i.nsrc = 3;
      for (int k = 0; k < 3; ++k) i.src[k] = src(in.operands[size_t(k) + 1], Type::b32);
      break;
    }
    case Opcode::shf: {
      need(in, 4);
      i.op = XOp::shf;
      bool left = false;
      for (auto m : md.rest) {
        if (m == "l") left = true;
        else if (m == "r") left = false;
        else if (m == "wrap") i.flags |= k_f_wrap;
        else if (m == "clamp") {
        } else unsupported("shf." + std::string(m));
      }
      i.mode = left ? 1 : 0;
      i.nsrc = 3;
      for (int k = 0; k < 3; ++k) i.src[k] = src(in.operands[size_t(k) + 1], Type::b32);
      break;
    }
    case Opcode::lop3:
      need(in, 5);
      reject_rest(in, md);
      i.op = XOp::lop3;
      i.nsrc = 4;
      for (int k = 0; k < 4; ++k) i.src[k] = src(in.operands[size_t(k) + 1], Type::b32);
      break;
    case Opcode::bmsk:
      need(in, 3);
      i.op = XOp::bmsk;
      for (auto m : md.rest) {
        if (m == "wrap") i.flags |= k_f_wrap;
        else if (m != "clamp") unsupported("bmsk." + std::string(m));
      }
      i.nsrc = 2;
      i.src[0] = src(in.operands[1], Type::u32);
      i.src[1] = src(in.operands[2], Type::u32);
      break;
    case Opcode::fns:
      // fns.b32 d, mask, base, offset (PTX ISA 9.7.1.x, "fns")
      need(in, 4);
      reject_rest(in, md);
      i.op = XOp::fns;
      i.nsrc = 3;
      i.src[0] = src(in.operands[1], Type::b32);
      i.src[1] = src(in.operands[2], Type::u32);
      i.src[2] = src(in.operands[3], Type::s32);
      break;
    case Opcode::szext:
      need(in, 3);
      i.op = XOp::szext;
      for (auto m : md.rest) {
        if (m == "wrap") i.flags |= k_f_wrap;
        else if (m != "clamp") unsupported("szext." + std::string(m));
      }
      i.nsrc = 2;
      i.src[0] = src(in.operands[1], i.type);
      i.src[1] = src(in.operands[2], Type::u32);
      break;
    default:
      unsupported("instruction " + std::string(ptx::opcode_name(in.op)) + " is not supported");
    }
    i.dst[0] = dst(in.operands[0]);
    emit(i);
  }

  void setp(const ptx::Instruction& in, const Mods& md) {
    Insn i = base(in, in.op == Opcode::setp ? XOp::setp : XOp::set, md);
    i.mode = 0xff;
    i.mode2 = k_bool_none;
    for (auto m : md.rest) {
      if (uint8_t c = cmp_op(m); c != 0xff && i.mode == 0xff) i.mode = c;
      else if (uint8_t b = bool_op(m); b != 0xff && b != k_bool_popc) i.mode2 = b;
      else unsupported(std::string(ptx::opcode_name(in.op)) + "." + std::string(m));
    }
    if (i.mode == 0xff) unsupported("comparison without an operator");
    auto types = in.types();
    if (in.op == Opcode::set) {
      if (types.size() != 2) unsupported("set needs two types");
      i.type = types[0];
      i.type2 = types[1];
    } else {
      i.type2 = i.type;
    }
    size_t n = in.operands.size();
    if (n != 3 + (i.mode2 != k_bool_none)) unsupported("wrong operand count for setp/set");
    const Operand& d = in.operands[0];
    if (d.kind == Operand::Kind::pair) {
      i.ndst = 2;
      i.dst[0] = dst(d.elems[0]);
      i.dst[1] = dst(d.elems[1]);
    } else {
      i.ndst = 1;
      i.dst[0] = dst(d);
    }
    i.nsrc = uint8_t(n - 1);
    i.src[0] = src(in.operands[1], i.type2);
    i.src[1] = src(in.operands[2], i.type2);
    if (n == 4) i.src[2] = src(in.operands[3], Type::pred);
    emit(i);
  }

  void cvt(const ptx::Instruction& in, const Mods& md) {
    reject_rest(in, md);
    auto types = in.types();
    if (types.size() != 2) unsupported("cvt needs a destination and a source type");
    Insn i = base(in, XOp::cvt, md);
    i.type = types[0];
    i.type2 = types[1];
    i.ndst = 1;
    i.dst[0] = dst(in.operands.at(0));
    if (in.operands.size() == 3) {
      // cvt.rn.f16x2.f32 d, a, b: a to the upper half, b to the lower
      i.nsrc = 2;
      i.src[0] = src(in.operands[1], i.type2);
      i.src[1] = src(in.operands[2], i.type2);
    } else {
      need(in, 2);
      i.nsrc = 1;
      i.src[0] = src(in.operands[1], i.type2);
    }
    emit(i);
  }

  void cvta(const ptx::Instruction& in, const Mods& md) {
    need(in, 2);
    Insn i = base(in, in.op == Opcode::cvta ? XOp::cvta : XOp::isspacep, md);
    bool to = false;
    for (auto m : md.rest) {
      if (m == "to") to = true;
      else unsupported("cvta." + std::string(m));
    }
    ptx::Space sp = in.space();
    switch (sp) {
    case ptx::Space::global:
    case ptx::Space::const_:
      i.mode = 0;
      break;
    case ptx::Space::shared:
      i.mode = 1;
      break;
    case ptx::Space::local:
      i.mode = 2;
      break;
    case ptx::Space::param:
      i.mode = 3;
      break;
    default:
      unsupported("cvta/isspacep without a state space");
    }
    if (to) i.op = XOp::cvta_to;
    i.ndst = 1;
    i.dst[0] = dst(in.operands[0]);
    i.nsrc = 1;
    i.src[0] = src(in.operands[1], Type::u64);
    emit(i);
  }

  // What a load or store reaches, for the cost model: .const data sits in the constant cache,
  // parameters are operands in SASS; generic addresses are global until an access says not.
  static MemClass mem_class(ptx::Space space, AddrSpace resolved) {
    if (space == ptx::Space::const_) return k_mem_constant;
    switch (resolved) {
    case AddrSpace::shared: return k_mem_shared;
    case AddrSpace::local: return k_mem_local;
    case AddrSpace::kparam: return k_mem_param;
    default: return k_mem_global;
    }
  }

  void load_store(const ptx::Instruction& in, const Mods& md) {
    for (auto m : md.rest) {
      if (m != "v2" && m != "v4" && m != "v8") {
        unsupported(std::string(ptx::opcode_name(in.op)) + "." + std::string(m) +
                    " is not supported");
      }
    }
    need(in, 2);
    bool store = in.op == Opcode::st;
    Insn i = base(in, store ? XOp::st : XOp::ld, md);
    if (in.has_mod("v2")) i.vec = 2;
    if (in.has_mod("v4")) i.vec = 4;
    if (in.has_mod("v8")) unsupported(".v8 loads are not supported");
    const Operand& data = in.operands[store ? 1 : 0];
    i.addr = addr(in.operands[store ? 0 : 1], in.space());
    if (i.vec > 1) {
      if (data.kind != Operand::Kind::vector || data.elems.size() != i.vec) {
        unsupported("vector load/store needs a vector operand");
      }
    }
    for (uint8_t k = 0; k < i.vec; ++k) {
      const Operand& e = i.vec > 1 ? data.elems[k] : data;
      if (store) i.src[k] = src(e, i.type);
      else i.dst[k] = dst(e);
    }
    if (store) i.nsrc = i.vec;
    else i.ndst = i.vec;
    i.mclass = mem_class(in.space(), i.addr.space);
    emit(i);
  }

  void atomic(const ptx::Instruction& in, const Mods& md) {
    bool red = in.op == Opcode::red;
    Insn i = base(in, red ? XOp::red : XOp::atom, md);
    static const std::map<std::string_view, uint8_t> t = {
        {"add", k_atom_add}, {"min", k_atom_min},   {"max", k_atom_max}, {"inc", k_atom_inc},
        {"dec", k_atom_dec}, {"and", k_atom_and},   {"or", k_atom_or},   {"xor", k_atom_xor},
        {"exch", k_atom_exch}, {"cas", k_atom_cas}};
    i.mode = 0xff;
    for (auto m : md.rest) {
      auto it = t.find(m);
      if (it != t.end() && i.mode == 0xff) i.mode = it->second;
      else unsupported(std::string(ptx::opcode_name(in.op)) + "." + std::string(m) +
                       " is not supported");
    }
    if (i.mode == 0xff) unsupported("atomic without an operation");
    if (in.has_mod("v2") || in.has_mod("v4")) unsupported("vector atomics are not supported");
    size_t first = red ? 0 : 1;
    size_t nsrc = i.mode == k_atom_cas ? 2 : 1;
    need(in, first + 1 + nsrc);
    if (!red) {
      i.ndst = 1;
      i.dst[0] = dst(in.operands[0]);
    }
    i.addr = addr(in.operands[first], in.space());
    i.nsrc = uint8_t(nsrc);
    for (size_t k = 0; k < nsrc; ++k) i.src[k] = src(in.operands[first + 1 + k], i.type);
    i.mclass = i.addr.space == AddrSpace::shared ? k_mem_shared : k_mem_global;
    emit(i);
  }

  void call(const ptx::Instruction& in) {
    // call[.uni] [(rets),] func, [(args)][, prototype]
    std::vector<const Operand*> lists;
    const Operand* target = nullptr;
    for (const auto& o : in.operands) {
      if (o.kind == Operand::Kind::list) lists.push_back(&o);
      else if (o.kind == Operand::Kind::symbol && !target) target = &o;
      else if (o.kind == Operand::Kind::reg) unsupported("indirect calls are not supported");
    }
    if (!target) unsupported("call without a target");
    if (!in.guard.empty()) unsupported("guarded calls are not supported");
    const ptx::Function* callee = m_module.function(target->name);
    if (!callee) unsupported("call to unknown function " + std::string(target->name));
    const Operand* rets = nullptr;
    const Operand* args = nullptr;
    if (callee->has_returns && !lists.empty() && in.operands[0].kind == Operand::Kind::list) {
      rets = lists[0];
      if (lists.size() > 1) args = lists[1];
    } else if (!lists.empty()) {
      args = lists[0];
    }
    if (callee->name == "vprintf" && !callee->has_body) return device_printf(in, rets, args);
    if (callee->name == "vprintf" || callee->name == "malloc" || callee->name == "free" ||
        callee->name == "__assertfail") {
      unsupported("call to " + std::string(callee->name) + " (device runtime) is not supported");
    }
    // Bind the callee's parameters to the caller's .param variables (by position).
    Scope binding;
    auto bind = [&](const std::vector<ptx::Param>& formal, const Operand* actual) {
      size_t n = actual ? actual->elems.size() : 0;
      if (n != formal.size()) unsupported("call to " + std::string(callee->name) +
                                          " with the wrong number of arguments");
      for (size_t k = 0; k < n; ++k) {
        const Operand& a = actual->elems[k];
        if (formal[k].space != ptx::Space::param) {
          unsupported(".reg parameters of " + std::string(callee->name) + " are not supported");
        }
        const Symbol* s = a.kind == Operand::Kind::symbol || a.kind == Operand::Kind::reg
                              ? lookup(a.name)
                              : nullptr;
        if (!s || s->kind != Symbol::Kind::local_var) {
          unsupported("call argument " + std::string(a.name) + " is not a .param variable");
        }
        binding.names[formal[k].name] = *s;
      }
    };
    bind(callee->params, args);
    if (callee->has_returns) bind(callee->returns, rets);
    // The callee sees the module and its bound parameters, not the caller's names.
    std::vector<Scope> saved;
    saved.swap(m_scopes);
    m_scopes.push_back(std::move(binding));
    uint32_t line = m_line;
    instance(*callee);
    m_line = line;
    m_scopes.swap(saved);
  }

  // The device runtime's `vprintf(format, args)` (exec_printf.hpp): the call's .param variables
  // are in the thread's local frame; src[0] and src[1] hold where its two arguments are, src[2]
  // where its 32-bit result goes (none: k_no_slot).
  void device_printf(const ptx::Instruction& in, const Operand* rets, const Operand* args) {
    auto param_offset = [&](const Operand& a) -> uint64_t {
      const Symbol* s = a.kind == Operand::Kind::symbol || a.kind == Operand::Kind::reg
                            ? lookup(a.name)
                            : nullptr;
      if (!s || s->kind != Symbol::Kind::local_var) {
        unsupported("vprintf argument " + std::string(a.name) + " is not a .param variable");
      }
      return s->value;
    };
    if (!args || args->elems.size() != 2) unsupported("vprintf takes two arguments");
    if (rets && rets->elems.size() > 1) unsupported("vprintf returns one value");
    Insn i = base(in, XOp::printf, Mods{});
    i.nsrc = 3;
    for (int k = 0; k < 3; ++k) i.src[k].kind = Src::Kind::imm;
    i.src[0].imm = param_offset(args->elems[0]);
    i.src[1].imm = param_offset(args->elems[1]);
    i.src[2].imm = rets && !rets->elems.empty() ? param_offset(rets->elems[0]) : k_no_slot;
    i.mclass = k_mem_local;
    emit(i);
  }

  void barrier(const ptx::Instruction& in, const Mods& md) {
    Insn i = base(in, XOp::bar, md);
    std::string_view kind;
    for (auto m : md.rest) {
      if (kind.empty() && (m == "sync" || m == "arrive" || m == "red" || m == "warp")) kind = m;
      else if (bool_op(m) != 0xff && kind == "red") i.mode2 = bool_op(m);
      else unsupported("bar." + std::string(m));
    }
    // "sync" is in the ignorable set, so a plain bar.sync/barrier.sync has no kind here.
    if (in.has_mod("warp")) {
      i.op = XOp::bar_warp;
      need(in, 1);
      i.nsrc = 1;
      i.src[0] = src(in.operands[0], Type::b32);
      emit(i);
      return;
    }
    if (in.has_mod("arrive")) i.op = XOp::bar_arrive;
    if (in.has_mod("red")) {
      i.op = XOp::bar_red;
      // bar.red.op.type d, a{, b}, {!}c
      if (in.operands.size() < 3) unsupported("bar.red needs a destination and a predicate");
      i.ndst = 1;
      i.dst[0] = dst(in.operands[0]);
      i.nsrc = uint8_t(in.operands.size() - 1);
      for (size_t k = 1; k < in.operands.size(); ++k) {
        i.src[k - 1] = src(in.operands[k], k + 1 == in.operands.size() ? Type::pred : Type::u32);
      }
      emit(i);
      return;
    }
    if (in.operands.empty() || in.operands.size() > 2) unsupported("bar needs 1 or 2 operands");
    i.nsrc = uint8_t(in.operands.size());
    for (size_t k = 0; k < in.operands.size(); ++k) i.src[k] = src(in.operands[k], Type::u32);
    emit(i);
  }

  void warp_op(const ptx::Instruction& in, const Mods& md) {
    Insn i = base(in, XOp::nop, md);
    switch (in.op) {
    case Opcode::shfl: {
      i.op = XOp::shfl;
      static const std::map<std::string_view, uint8_t> t = {
          {"up", k_shfl_up}, {"down", k_shfl_down}, {"bfly", k_shfl_bfly}, {"idx", k_shfl_idx}};
      if (md.rest.size() != 1 || !t.count(md.rest[0])) unsupported("shfl mode");
      i.mode = t.at(md.rest[0]);
      if (!in.has_mod("sync")) unsupported("shfl without .sync (sm_70+ PTX) is not supported");
      need(in, 5);
      const Operand& d = in.operands[0];
      if (d.kind == Operand::Kind::pair) {
        i.ndst = 2;
        i.dst[0] = dst(d.elems[0]);
        i.dst[1] = dst(d.elems[1]);
      } else {
        i.ndst = 1;
        i.dst[0] = dst(d);
      }
      i.nsrc = 4;
      for (int k = 0; k < 4; ++k) i.src[k] = src(in.operands[size_t(k) + 1], Type::b32);
      break;
    }
    case Opcode::vote: {
      i.op = XOp::vote;
      static const std::map<std::string_view, uint8_t> t = {
          {"all", k_vote_all}, {"any", k_vote_any}, {"uni", k_vote_uni},
          {"ballot", k_vote_ballot}};
      // .uni is also bra.uni's modifier, which split_mods() drops
      const std::string_view mode =
          md.rest.size() == 1 ? md.rest[0] : md.rest.empty() && in.has_mod("uni") ? "uni" : "";
      if (!t.count(mode)) unsupported("vote mode");
      i.mode = t.at(mode);
      need(in, 3);
      i.ndst = 1;
      i.dst[0] = dst(in.operands[0]);
      i.nsrc = 2;
      i.src[0] = src(in.operands[1], Type::pred);
      i.src[1] = src(in.operands[2], Type::b32);
      break;
    }
    case Opcode::match: {
      i.op = XOp::match;
      if (md.rest.size() != 1 || (md.rest[0] != "any" && md.rest[0] != "all")) {
        unsupported("match mode");
      }
      i.mode = md.rest[0] == "all";
      need(in, 3);
      const Operand& d = in.operands[0];
      if (d.kind == Operand::Kind::pair) {
        i.ndst = 2;
        i.dst[0] = dst(d.elems[0]);
        i.dst[1] = dst(d.elems[1]);
      } else {
        i.ndst = 1;
        i.dst[0] = dst(d);
      }
      i.nsrc = 2;
      i.src[0] = src(in.operands[1], i.type);
      i.src[1] = src(in.operands[2], Type::b32);
      break;
    }
    case Opcode::activemask:
      i.op = XOp::activemask;
      need(in, 1);
      i.ndst = 1;
      i.dst[0] = dst(in.operands[0]);
      break;
    case Opcode::redux: {
      i.op = XOp::redux;
      static const std::map<std::string_view, uint8_t> t = {
          {"add", k_atom_add}, {"min", k_atom_min}, {"max", k_atom_max},
          {"and", k_atom_and}, {"or", k_atom_or},   {"xor", k_atom_xor}};
      if (md.rest.size() != 1 || !t.count(md.rest[0])) unsupported("redux operation");
      i.mode = t.at(md.rest[0]);
      need(in, 3);
      i.ndst = 1;
      i.dst[0] = dst(in.operands[0]);
      i.nsrc = 2;
      i.src[0] = src(in.operands[1], i.type);
      i.src[1] = src(in.operands[2], Type::b32);
      break;
    }
    case Opcode::elect: {
      i.op = XOp::elect;
      need(in, 2);
      const Operand& d = in.operands[0];
      if (d.kind != Operand::Kind::pair) unsupported("elect needs d|p");
      i.ndst = 2;
      i.dst[0] = dst(d.elems[0]);
      i.dst[1] = dst(d.elems[1]);
      i.nsrc = 1;
      i.src[0] = src(in.operands[1], Type::b32);
      break;
    }
    default:
      unsupported("warp instruction");
    }
    emit(i);
  }

  // ---- tensor-core and matrix-fragment instructions (emu/matrix.hpp) ---------------------------

  static matrix::Elem matrix_elem(std::string_view m) {
    using matrix::Elem;
    static const std::map<std::string_view, Elem> t = {
        {"f16", Elem::f16},   {"bf16", Elem::bf16}, {"tf32", Elem::tf32}, {"f32", Elem::f32},
        {"f64", Elem::f64},   {"e4m3", Elem::e4m3}, {"e5m2", Elem::e5m2}, {"s8", Elem::s8},
        {"u8", Elem::u8},     {"s4", Elem::s4},     {"u4", Elem::u4},     {"b1", Elem::b1},
        {"s32", Elem::s32}};
    auto it = t.find(m);
    return it == t.end() ? Elem::none : it->second;
  }

  // "m16n8k16" -> 16, 8, 16; "m8n8" -> 8, 8, 0
  static bool matrix_shape(std::string_view m, uint16_t& M, uint16_t& N, uint16_t& K) {
    unsigned a = 0, b = 0, c = 0;
    int used = 0;
    const std::string text(m);
    if (std::sscanf(text.c_str(), "m%un%uk%u%n", &a, &b, &c, &used) == 3 &&
        size_t(used) == text.size()) {
    } else if (std::sscanf(text.c_str(), "m%un%u%n", &a, &b, &used) == 2 &&
               size_t(used) == text.size()) {
      c = 0;
    } else {
      return false;
    }
    if (a == 0 || b == 0 || a > 64 || b > 64 || c > 256) return false;
    M = uint16_t(a);
    N = uint16_t(b);
    K = uint16_t(c);
    return true;
  }

  // The register operands of a fragment: a brace-enclosed vector, or one register.
  std::vector<Src> fragment(const Operand& o, bool write, Type t) {
    std::vector<Src> out;
    if (o.kind == Operand::Kind::vector) {
      for (const Operand& e : o.elems) out.push_back(write ? dst(e) : src(e, t));
    } else {
      out.push_back(write ? dst(o) : src(o, t));
    }
    return out;
  }

  void matrix_instruction(const ptx::Instruction& in, const Mods& md) {
    using matrix::Elem;
    const std::string name = std::string(ptx::opcode_name(in.op));
    matrix::Insn mi;
    std::vector<Elem> types;
    std::vector<bool> layouts; // .row (true) / .col, in order
    bool shape = false, sync = false, aligned = false;
    ptx::Space space = ptx::Space::none;
    std::string wmma_kind; // load, store, mma
    char which = 0;
    for (auto m : in.mods) {
      if (m == "sync") sync = true;
      else if (m == "aligned") aligned = true;
      else if (matrix_shape(m, mi.m, mi.n, mi.k)) shape = true;
      else if (m == "row" || m == "col") layouts.push_back(m == "row");
      else if (m == "satfinite") mi.satfinite = true;
      else if (m == "trans") mi.trans = true;
      else if (m == "x1" || m == "x2" || m == "x4") mi.num = uint8_t(m[1] - '0');
      else if (m == "xor" || m == "and") mi.bit_xor = m == "xor";
      else if (m == "popc" || m == "rn") continue; // b1's reduction; f64's only rounding
      else if (m == "b16") types.push_back(Elem::f16); // 16-bit elements moved as they are
      else if (m == "load" || m == "store" || m == "mma") wmma_kind = std::string(m);
      else if (in.op == Opcode::wmma && (m == "a" || m == "b" || m == "c" || m == "d")) which = m[0];
      else if (ptx::space_from_name(m) != ptx::Space::none) space = ptx::space_from_name(m);
      else if (Elem e = matrix_elem(m); e != Elem::none) types.push_back(e);
      else if (m == "sp" || m.starts_with("sp::") || m.starts_with("kind::") ||
               m == "block_scale" || m.starts_with("scale_vec"))
        unsupported(name + "." + std::string(m) + " (sparse, block-scaled and sm_100+ forms) "
                    "is not supported by the emulated device");
      else unsupported("modifier ." + std::string(m) + " of " + name + " is not supported");
    }
    (void)md;
    if (!sync || !aligned) unsupported(name + " without .sync.aligned is not a PTX form");
    Insn i;
    i.flags = 0;
    i.line = m_line;
    if (!in.guard.empty()) {
      i.guard = reg_slot(in.guard);
      i.guard_negated = in.guard_negated;
    }
    std::vector<Src> d, a, b, c;
    std::string why;
    auto need_ops = [&](size_t n) {
      if (in.operands.size() != n)
        unsupported(name + " expects " + std::to_string(n) + " operands, has " +
                    std::to_string(in.operands.size()));
    };
    auto check_count = [&](const char* what, size_t have, uint32_t want) {
      if (have != want)
        unsupported(name + ": the " + what + " fragment has " + std::to_string(have) +
                    " registers, the shape and type need " + std::to_string(want));
    };
    auto address_space = [&](ptx::Space sp, bool global_ok) {
      if (sp == ptx::Space::none) return sp;
      if (sp == ptx::Space::shared || (global_ok && sp == ptx::Space::global)) return sp;
      unsupported(name + " from ." + std::string(ptx::space_name(sp)) + " is not a PTX form");
    };
    if (in.op == Opcode::mma || (in.op == Opcode::wmma && wmma_kind == "mma")) {
      mi.op = in.op == Opcode::mma ? matrix::Op::mma : matrix::Op::wmma_mma;
      if (!shape) unsupported(name + " without a shape");
      if (layouts.size() != 2) unsupported(name + " needs two layouts (.row/.col)");
      mi.a_row = layouts[0];
      mi.b_row = layouts[1];
      // .dtype.atype.btype.ctype; b1, s4, u4, s8, u8 mma write .s32 and the same for wmma
      if (types.size() == 4) {
        mi.d = types[0], mi.a = types[1], mi.b = types[2], mi.c = types[3];
      } else if (mi.op == matrix::Op::wmma_mma && types.size() == 2) {
        // wmma.mma.*.f16 shapes: .dtype.ctype with .f16 multiplicands
        mi.d = types[0], mi.c = types[1], mi.a = mi.b = Elem::f16;
      } else if (mi.op == matrix::Op::wmma_mma && types.size() == 3) {
        // wmma.mma...s32.atype.s32 (sub-byte and integer: one multiplicand type), or
        // .f32.bf16.bf16.f32 written with a single input type
        mi.d = types[0], mi.a = mi.b = types[1], mi.c = types[2];
      } else {
        unsupported(name + ": expected .dtype.atype.btype.ctype");
      }
      need_ops(4);
      const Type rt = mi.a == Elem::f64 ? Type::b64 : Type::b32;
      const Type ct = mi.c == Elem::f64 ? Type::b64 : Type::b32;
      d = fragment(in.operands[0], true, ct);
      a = fragment(in.operands[1], false, rt);
      b = fragment(in.operands[2], false, rt);
      c = fragment(in.operands[3], false, ct);
      const matrix::Counts n = mi.op == matrix::Op::mma ? matrix::mma_counts(mi, why)
                                                         : matrix::wmma_counts(mi, why);
      if (n.a == 0) unsupported(why);
      const matrix::Counts nd = [&] {
        matrix::Insn dm = mi;
        dm.c = mi.d;
        std::string ignore;
        return mi.op == matrix::Op::mma ? matrix::mma_counts(dm, ignore)
                                        : matrix::wmma_counts(dm, ignore);
      }();
      check_count("A", a.size(), n.a);
      check_count("B", b.size(), n.b);
      check_count("C", c.size(), n.c);
      check_count("D", d.size(), nd.c ? nd.c : n.c);
      i.op = XOp::mma;
    } else if (in.op == Opcode::wmma) {
      if (!shape) unsupported(name + " without a shape");
      if (layouts.size() != 1) unsupported(name + "." + wmma_kind + " needs one layout (.row/.col)");
      if (types.size() != 1) unsupported(name + "." + wmma_kind + " needs one type");
      mi.row_major = layouts[0];
      space = address_space(space, true);
      if (wmma_kind == "load") {
        if (which != 'a' && which != 'b' && which != 'c') unsupported("wmma.load of ." + std::string(1, which));
        mi.op = matrix::Op::wmma_load;
        mi.role = which == 'a' ? matrix::Role::a : which == 'b' ? matrix::Role::b : matrix::Role::c;
      } else if (wmma_kind == "store") {
        if (which != 'd') unsupported("wmma.store of ." + std::string(1, which));
        mi.op = matrix::Op::wmma_store;
        mi.role = matrix::Role::c;
      } else {
        unsupported("wmma." + wmma_kind + " is not a PTX form");
      }
      // the fragment's element type sets the multiplicand type for wmma_counts; accumulators
      // (.f16/.f32/.s32/.f64) are looked up with the multiplicand type that goes with them
      const Elem t = types[0];
      mi.a = mi.b = t;
      mi.c = mi.d = t;
      if (mi.role == matrix::Role::c) {
        if (t == Elem::f32 || t == Elem::f16)
          mi.a = mi.b = (mi.m == 16 && mi.n == 16 && mi.k == 8) ? Elem::tf32 : Elem::f16;
        else if (t == Elem::s32)
          mi.a = mi.b = mi.k == 32 ? Elem::s4 : mi.k == 128 ? Elem::b1 : Elem::s8;
        else if (t == Elem::f64)
          mi.a = mi.b = Elem::f64;
        else
          unsupported("wmma accumulators are .f16, .f32, .s32 or .f64");
      }
      const matrix::Counts n = matrix::wmma_counts(mi, why);
      if (n.a == 0) unsupported(why);
      const uint32_t want = mi.role == matrix::Role::a ? n.a : mi.role == matrix::Role::b ? n.b : n.c;
      const size_t data = mi.op == matrix::Op::wmma_load ? 0 : 1;
      if (in.operands.size() != 2 && in.operands.size() != 3)
        unsupported(name + " expects 2 or 3 operands");
      const Type rt = t == Elem::f64 ? Type::b64 : Type::b32;
      auto frag = fragment(in.operands[data], mi.op == matrix::Op::wmma_load, rt);
      check_count("", frag.size(), want);
      i.addr = addr(in.operands[1 - data], space);
      if (mi.op == matrix::Op::wmma_load) d = frag;
      else a = frag;
      if (in.operands.size() == 3) {
        mi.has_stride = true;
        c.push_back(src(in.operands[2], Type::u32));
      }
      i.op = mi.op == matrix::Op::wmma_load ? XOp::wmma_load : XOp::wmma_store;
      i.mclass = space == ptx::Space::shared ? k_mem_shared : k_mem_global;
    } else if (in.op == Opcode::ldmatrix || in.op == Opcode::stmatrix) {
      if (!shape || mi.m != 8 || mi.n != 8 || mi.k != 0)
        unsupported(name + " supports .m8n8 (16-bit elements) here; .m16n16 and .m8n16 are "
                    "sm_100a forms");
      if (types.size() != 1 || types[0] != Elem::f16) unsupported(name + " supports .b16 here");
      mi.op = in.op == Opcode::ldmatrix ? matrix::Op::ldmatrix : matrix::Op::stmatrix;
      mi.a = mi.d = Elem::f16;
      need_ops(2);
      space = address_space(space, false);
      const size_t data = in.op == Opcode::ldmatrix ? 0 : 1;
      auto frag = fragment(in.operands[data], in.op == Opcode::ldmatrix, Type::b32);
      check_count("", frag.size(), mi.num);
      i.addr = addr(in.operands[1 - data], space);
      if (in.op == Opcode::ldmatrix) d = frag;
      else a = frag;
      i.op = in.op == Opcode::ldmatrix ? XOp::ldmatrix : XOp::stmatrix;
      i.mclass = space == ptx::Space::shared ? k_mem_shared : k_mem_global;
    } else { // movmatrix.sync.aligned.m8n8.trans.b16 d, a
      if (!shape || mi.m != 8 || mi.n != 8 || mi.k != 0 || !mi.trans || types.size() != 1 ||
          types[0] != Elem::f16)
        unsupported("movmatrix supports .m8n8.trans.b16 only, as the ISA defines it");
      mi.op = matrix::Op::movmatrix;
      need_ops(2);
      d.push_back(dst(in.operands[0]));
      a.push_back(src(in.operands[1], Type::b32));
      i.op = XOp::movmatrix;
    }
    mi.nd = uint8_t(d.size());
    mi.na = uint8_t(a.size());
    mi.nb = uint8_t(b.size());
    mi.nc = uint8_t(mi.has_stride ? 0 : c.size());
    if (mi.op == matrix::Op::mma || mi.op == matrix::Op::wmma_mma) mi.plan = matrix::make_plan(mi);
    mi.first = uint32_t(m_k.matrix_operands.size());
    for (auto* v : {&d, &a, &b, &c})
      m_k.matrix_operands.insert(m_k.matrix_operands.end(), v->begin(), v->end());
    i.matrix = uint32_t(m_k.matrix.size());
    m_k.matrix.push_back(mi);
    emit(i);
  }

  void cp_async(const ptx::Instruction& in, const Mods& md) {
    if (md.rest.empty() || md.rest[0] != "async") {
      unsupported("cp." + (md.rest.empty() ? std::string() : std::string(md.rest[0])));
    }
    bool wait_like = in.has_mod("commit_group") || in.has_mod("wait_group") ||
                     in.has_mod("wait_all");
    if (wait_like) {
      // Copies complete when issued here, so groups are always complete.
      emit(base(in, XOp::nop, md));
      return;
    }
    if (in.has_mod("bulk") || in.has_mod("tensor") || in.has_mod("mbarrier")) {
      unsupported("cp.async.bulk and mbarrier-based copies are not supported");
    }
    // PTX ISA 9.7.9.25.3.1, cp.async:
    //   cp.async.ca.shared{::cta}.global{.level::cache_hint}{.level::prefetch_size}
    //       [dst], [src], cp-size{, src-size | ignore-src}{, cache-policy}
    // (.cg: cp-size 16 only). The cache hint and prefetch size change nothing here; the cache
    // policy operand is there exactly when .L2::cache_hint is.
    const bool hinted = in.has_mod("L2::cache_hint");
    const size_t base_operands = 3;
    const size_t n = in.operands.size();
    if (n < base_operands || n > base_operands + 1 + (hinted ? 1 : 0) ||
        (hinted && n == base_operands)) {
      unsupported("cp.async: " + std::to_string(n) + " operands");
    }
    Insn i = base(in, XOp::cp_async, md);
    i.addr = addr(in.operands[0], ptx::Space::shared);
    Addr s = addr(in.operands[1], ptx::Space::global);
    if (in.operands[2].kind != Operand::Kind::imm_int) unsupported("cp.async: cp-size must be a constant");
    const uint64_t cp_size = uint64_t(in.operands[2].value);
    if (cp_size != 4 && cp_size != 8 && cp_size != 16) {
      unsupported("cp.async: cp-size " + std::to_string(cp_size) + " (4, 8 or 16)");
    }
    if (in.has_mod("cg") && cp_size != 16) unsupported("cp.async.cg: cp-size must be 16");
    i.src[0] = src(in.operands[2], Type::u32);
    i.nsrc = 1;
    i.mode = k_cp_full;
    if (n - base_operands - (hinted ? 1 : 0) == 1) {
      // the fourth operand: src-size (bytes read, the rest zero-filled) or the predicate
      // ignore-src (true: nothing read, all zero-filled)
      const Operand& o = in.operands[3];
      bool predicate = false;
      if (o.kind == Operand::Kind::reg && !special_register(o.name)) {
        const Symbol* sym = lookup(o.name);
        predicate = sym && sym->kind == Symbol::Kind::reg && sym->width == 1;
      }
      i.mode = predicate ? k_cp_ignore_src : k_cp_src_size;
      i.src[1] = src(o, predicate ? Type::pred : Type::u32);
      i.nsrc = 2;
    }
    // the source address: src[2] its base register, src[3] its offset
    i.src[2].kind = s.slot == k_no_slot ? Src::Kind::imm : Src::Kind::reg;
    i.src[2].slot = s.slot;
    i.src[3].kind = Src::Kind::imm;
    i.src[3].imm = uint64_t(s.offset);
    i.mclass = k_mem_global;
    emit(i);
  }
};

} // namespace

CompiledKernel decode_kernel(const ptx::Module& module, const ptx::Function& entry,
                             const SymbolAddresses& globals) {
  CompiledKernel k;
  k.name = std::string(entry.name);
  Decoder d(module, globals, k);
  try {
    d.entry(entry);
  } catch (const Unsupported& e) {
    CompiledKernel bad;
    bad.name = k.name;
    bad.param_offsets = k.param_offsets;
    bad.param_sizes = k.param_sizes;
    bad.param_bytes = k.param_bytes;
    bad.unsupported = e.what();
    return bad;
  } catch (const std::exception& e) {
    CompiledKernel bad;
    bad.name = k.name;
    bad.unsupported = std::string("cannot decode: ") + e.what();
    return bad;
  }
  k.zeroed_slots = slots_to_zero(k);
  return k;
}

} // namespace hone::emu
