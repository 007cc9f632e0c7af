#include "ptx/ir.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace hone::ptx {

std::string_view Arena::keep(std::string_view text) {
  std::lock_guard lock(m_mutex);
  m_strings.emplace_back(text);
  return m_strings.back();
}

namespace {

constexpr std::string_view k_opcode_names[] = {
#define HONE_X(id, text) text,
    HONE_PTX_OPCODES(HONE_X)
#undef HONE_X
};

const std::unordered_map<std::string_view, Opcode>& opcode_table() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string_view, Opcode>();
    for (size_t i = 0; i < std::size(k_opcode_names); ++i) {
      t->emplace(k_opcode_names[i], static_cast<Opcode>(i));
    }
    return t;
  }();
  return *table;
}

struct TypeEntry {
  std::string_view name;
  Type type;
  uint32_t size;
};

constexpr TypeEntry k_types[] = {
    {"b8", Type::b8, 1},         {"b16", Type::b16, 2},       {"b32", Type::b32, 4},
    {"b64", Type::b64, 8},       {"b128", Type::b128, 16},    {"u8", Type::u8, 1},
    {"u16", Type::u16, 2},       {"u32", Type::u32, 4},       {"u64", Type::u64, 8},
    {"s8", Type::s8, 1},         {"s16", Type::s16, 2},       {"s32", Type::s32, 4},
    {"s64", Type::s64, 8},       {"f16", Type::f16, 2},       {"f16x2", Type::f16x2, 4},
    {"bf16", Type::bf16, 2},     {"bf16x2", Type::bf16x2, 4}, {"f32", Type::f32, 4},
    {"f64", Type::f64, 8},       {"tf32", Type::tf32, 4},     {"e4m3", Type::e4m3, 1},
    {"e5m2", Type::e5m2, 1},     {"e4m3x2", Type::e4m3x2, 2}, {"e5m2x2", Type::e5m2x2, 2},
    {"u16x2", Type::u16x2, 4},   {"s16x2", Type::s16x2, 4},   {"pred", Type::pred, 1},
    {"texref", Type::texref, 8}, {"samplerref", Type::samplerref, 8},
    {"surfref", Type::surfref, 8},
};

} // namespace

std::optional<Opcode> opcode_from_name(std::string_view text) {
  const auto& table = opcode_table();
  auto it = table.find(text);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

std::string_view opcode_name(Opcode op) {
  auto i = static_cast<size_t>(op);
  return i < std::size(k_opcode_names) ? k_opcode_names[i] : std::string_view("?");
}

Type type_from_name(std::string_view text) {
  // Types are short; a linear scan over 30 entries is as fast as hashing here.
  if (text.empty() || text.size() > 10) return Type::none;
  for (const auto& e : k_types) {
    if (e.name == text) return e.type;
  }
  return Type::none;
}

std::string_view type_name(Type t) {
  for (const auto& e : k_types) {
    if (e.type == t) return e.name;
  }
  return "";
}

uint32_t type_size(Type t) {
  // The interpreter asks on every memory instruction: a table indexed by the type.
  static constexpr auto k_sizes = [] {
    std::array<uint8_t, 256> sizes{};
    for (const auto& e : k_types) sizes[size_t(e.type)] = uint8_t(e.size);
    return sizes;
  }();
  return k_sizes[uint8_t(t)];
}

bool is_float(Type t) {
  switch (t) {
  case Type::f16:
  case Type::f16x2:
  case Type::bf16:
  case Type::bf16x2:
  case Type::f32:
  case Type::f64:
  case Type::tf32:
  case Type::e4m3:
  case Type::e5m2:
  case Type::e4m3x2:
  case Type::e5m2x2:
    return true;
  default:
    return false;
  }
}

bool is_signed(Type t) {
  return t == Type::s8 || t == Type::s16 || t == Type::s32 || t == Type::s64 || t == Type::s16x2;
}

Space space_from_name(std::string_view text) {
  if (text == "reg") return Space::reg;
  if (text == "sreg") return Space::sreg;
  if (text == "const") return Space::const_;
  if (text == "global") return Space::global;
  if (text == "local") return Space::local;
  if (text == "param" || text == "param::entry" || text == "param::func") return Space::param;
  if (text == "shared" || text == "shared::cta" || text == "shared::cluster") return Space::shared;
  if (text == "tex") return Space::tex;
  return Space::none;
}

std::string_view space_name(Space s) {
  switch (s) {
  case Space::reg: return "reg";
  case Space::sreg: return "sreg";
  case Space::const_: return "const";
  case Space::global: return "global";
  case Space::local: return "local";
  case Space::param: return "param";
  case Space::shared: return "shared";
  case Space::tex: return "tex";
  case Space::generic: return "generic";
  case Space::none: break;
  }
  return "";
}

bool Instruction::has_mod(std::string_view mod) const {
  return std::find(mods.begin(), mods.end(), mod) != mods.end();
}

Type Instruction::last_type() const {
  for (auto it = mods.rbegin(); it != mods.rend(); ++it) {
    if (Type t = type_from_name(*it); t != Type::none) return t;
  }
  return Type::none;
}

std::vector<Type> Instruction::types() const {
  std::vector<Type> out;
  for (auto m : mods) {
    if (Type t = type_from_name(m); t != Type::none) out.push_back(t);
  }
  return out;
}

Space Instruction::space() const {
  for (auto m : mods) {
    if (Space s = space_from_name(m); s != Space::none) return s;
  }
  return Space::none;
}

bool VarDecl::is_extern() const {
  return std::find(attrs.begin(), attrs.end(), "extern") != attrs.end();
}

uint64_t VarDecl::size_bytes() const {
  uint64_t n = uint64_t(type_size(type)) * (vector ? vector : 1);
  for (auto d : dims) {
    if (d < 0) return 0;
    n *= uint64_t(d);
  }
  return n;
}

uint32_t Param::size_bytes() const {
  uint32_t n = type_size(type);
  if (array >= 0) n *= uint32_t(array);
  return n;
}

uint32_t Param::alignment() const {
  if (align) return align;
  uint32_t n = type_size(type);
  return n ? n : 1;
}

const FuncDirective* Function::directive(std::string_view dname) const {
  for (const auto& d : directives) {
    if (d.name == dname) return &d;
  }
  return nullptr;
}

bool operator==(const Function& a, const Function& b) {
  return a.attrs == b.attrs && a.is_entry == b.is_entry && a.returns == b.returns &&
         a.has_returns == b.has_returns && a.name == b.name && a.params == b.params &&
         a.directives == b.directives && a.has_body == b.has_body && a.body == b.body;
}

const Function* Module::function(std::string_view fname) const {
  const Function* decl = nullptr;
  for (const auto& it : items) {
    if (const auto* f = std::get_if<Function>(&it.item); f && f->name == fname) {
      if (f->has_body) return f;
      decl = f;
    }
  }
  return decl;
}

Function* Module::function(std::string_view fname) {
  return const_cast<Function*>(static_cast<const Module*>(this)->function(fname));
}

const VarDecl* Module::variable(std::string_view vname) const {
  for (const auto& it : items) {
    if (const auto* v = std::get_if<VarDecl>(&it.item); v && v->name == vname) return v;
  }
  return nullptr;
}

std::vector<const Function*> Module::entries() const {
  std::vector<const Function*> out;
  for (const auto& it : items) {
    if (const auto* f = std::get_if<Function>(&it.item); f && f->is_entry && f->has_body) {
      out.push_back(f);
    }
  }
  return out;
}

bool operator==(const Module& a, const Module& b) {
  return a.version_major == b.version_major && a.version_minor == b.version_minor &&
         a.target == b.target && a.address_size == b.address_size && a.items == b.items;
}

} // namespace hone::ptx
