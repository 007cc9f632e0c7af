// Runtime specialization of scalar arguments (DESIGN.md, "Agent"), as LLNL Proteus does: a scalar
// the application passes with the same bytes in every captured launch becomes a constant of the
// kernel, and the guard makes the variant serve only launches that pass exactly those bytes.
//
// Source level when the source is known: the kernel becomes an inlined device function called
// from a new entry with the constants, so NVVM folds them and unrolls loops they bound. PTX level
// otherwise: every `ld.param` of the parameter becomes a `mov` of its value, which ptxas
// propagates. Either way the arithmetic is the original's, so the comparison is bitwise.
#include "agent/kernel_source.hpp"
#include "agent/kernel_ptx.hpp"
#include "agent/strategy.hpp"
#include "ptx/analysis.hpp"
#include "ptx/fold.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

namespace hone::agent {

namespace {

constexpr std::string_view k_spec_entry = "hone_spec";
constexpr std::string_view k_body_suffix = "__hone_spec_body";

// Candidate tags: the source-level one, and the PTX-level one that may follow it.
constexpr uint64_t k_tag_source = 1;
constexpr uint64_t k_tag_ptx = 2;

enum class ValueKind { signed_int, unsigned_int, floating, boolean };

// A scalar parameter with the same bytes in every captured launch.
struct ConstantParam {
  uint32_t index = 0;
  ptx::ParamInfo info;
  uint32_t slot_offset = 0; // in the launch parameter buffer, as the captures lay it out
  std::string bytes;
};

// Little-endian, as the device and the parameter buffer hold scalars.
uint64_t little_endian(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | uint8_t(bytes[i]);
  return v;
}

int64_t sign_extend(uint64_t v, uint32_t bits) {
  if (bits >= 64) return int64_t(v);
  uint64_t sign = 1ull << (bits - 1);
  v &= (sign << 1) - 1;
  return int64_t((v ^ sign) - sign);
}

// For people: the value as its type reads it ("64", "-5", "0.1").
std::string display(std::string_view bytes, ValueKind kind) {
  uint64_t raw = little_endian(bytes);
  char buf[40];
  switch (kind) {
  case ValueKind::signed_int:
    return std::to_string(sign_extend(raw, uint32_t(bytes.size() * 8)));
  case ValueKind::unsigned_int:
    return std::to_string(raw);
  case ValueKind::boolean:
    return raw ? "true" : "false";
  case ValueKind::floating:
    if (bytes.size() == 4) {
      float f;
      uint32_t bits = uint32_t(raw);
      std::memcpy(&f, &bits, 4);
      std::snprintf(buf, sizeof buf, "%.9g", double(f));
    } else if (bytes.size() == 8) {
      double d;
      std::memcpy(&d, &raw, 8);
      std::snprintf(buf, sizeof buf, "%.17g", d);
    } else {
      std::snprintf(buf, sizeof buf, "0x%0*" PRIx64, int(bytes.size() * 2), raw);
    }
    return buf;
  }
  return {};
}

// How a PTX parameter type reads its bytes; nullopt for what is not an integer or float scalar.
std::optional<ValueKind> ptx_value_kind(ptx::Type t) {
  switch (t) {
  case ptx::Type::b8:
  case ptx::Type::b16:
  case ptx::Type::b32:
  case ptx::Type::b64:
  case ptx::Type::u8:
  case ptx::Type::u16:
  case ptx::Type::u32:
  case ptx::Type::u64:
    return ValueKind::unsigned_int;
  case ptx::Type::s8:
  case ptx::Type::s16:
  case ptx::Type::s32:
  case ptx::Type::s64:
    return ValueKind::signed_int;
  case ptx::Type::f16:
  case ptx::Type::bf16:
  case ptx::Type::f32:
  case ptx::Type::f64:
    return ValueKind::floating;
  default:
    return std::nullopt;
  }
}

// ---- the captures ------------------------------------------------------------------------------

// The scalar parameters whose bytes are identical in every capture; nullopt when a capture's
// parameter layout is not the one the PTX declares (then nothing about the captures is trusted).
std::optional<std::vector<ConstantParam>>
constant_scalars(const ptx::EntryInfo& info, const std::vector<const Capture*>& caps) {
  // What the shim captured a buffer for is a pointer, whatever the PTX analysis concluded.
  std::set<uint32_t> pointer_params;
  for (const Capture* c : caps) {
    if (c->params.size() != info.params.size()) return std::nullopt;
    for (size_t i = 0; i < info.params.size(); ++i) {
      const ParamSlot& slot = c->params[i];
      if (slot.offset != info.params[i].offset || slot.size != info.params[i].size ||
          uint64_t(slot.offset) + slot.size > c->param_bytes.size()) {
        return std::nullopt;
      }
    }
    for (const auto& b : c->buffers) pointer_params.insert(b.param);
  }
  std::vector<ConstantParam> out;
  for (uint32_t i = 0; i < info.params.size(); ++i) {
    const ptx::ParamInfo& p = info.params[i];
    bool scalar = !p.is_pointer() && !p.aggregate && !p.address_taken && !pointer_params.count(i) &&
                  ptx_value_kind(p.type) &&
                  (p.size == 1 || p.size == 2 || p.size == 4 || p.size == 8);
    if (!scalar) continue;
    const ParamSlot& slot = caps.front()->params[i];
    std::string bytes = caps.front()->param_bytes.substr(slot.offset, slot.size);
    bool same = std::all_of(caps.begin(), caps.end(), [&](const Capture* c) {
      return c->param_bytes.compare(slot.offset, slot.size, bytes) == 0;
    });
    if (same) out.push_back({i, p, slot.offset, std::move(bytes)});
  }
  return out;
}

Guard guard_for(const std::vector<const ConstantParam*>& params) {
  Guard g;
  for (const auto* p : params) g.scalars.push_back({p->index, p->slot_offset, p->bytes});
  return g;
}

// ---- PTX level ---------------------------------------------------------------------------------

// How the entry reads one parameter: its `ld.param` statements, and whether they are all it does
// with it (its address taken, or a use inside opaque text, rules out replacing the loads).
struct ParamReads {
  std::vector<size_t> loads; // statement indices in the body
  bool only_loads = true;
};

bool names_param(const ptx::Operand& o, std::string_view param) {
  if ((o.kind == ptx::Operand::Kind::symbol || o.kind == ptx::Operand::Kind::address) &&
      !o.base_is_reg && o.name == param) {
    return true;
  }
  return std::any_of(o.elems.begin(), o.elems.end(),
                     [&](const ptx::Operand& e) { return names_param(e, param); });
}

std::map<std::string, ParamReads> param_reads(const ptx::Function& f) {
  std::map<std::string, ParamReads> reads;
  for (const auto& p : f.params) reads[std::string(p.name)];
  for (size_t si = 0; si < f.body.size(); ++si) {
    const auto& item = f.body[si].item;
    if (const auto* opaque = std::get_if<ptx::Opaque>(&item)) {
      for (auto& [name, r] : reads) {
        if (opaque->text.find(name) != std::string_view::npos) r.only_loads = false;
      }
      continue;
    }
    const auto* inst = std::get_if<ptx::Instruction>(&item);
    if (!inst) continue;
    for (auto& [name, r] : reads) {
      bool load = inst->op == ptx::Opcode::ld && inst->space() == ptx::Space::param &&
                  inst->operands.size() == 2 &&
                  inst->operands[1].kind == ptx::Operand::Kind::address &&
                  !inst->operands[1].base_is_reg && inst->operands[1].name == name;
      if (load) {
        r.loads.push_back(si);
        continue;
      }
      for (const auto& o : inst->operands) {
        if (names_param(o, name)) r.only_loads = false;
      }
    }
  }
  return reads;
}

// Width in bits of register `reg` as the body declares it (`.reg .b32 %r<91>;`), 0 when unknown.
uint32_t register_bits(const ptx::Function& f, std::string_view reg) {
  for (const auto& st : f.body) {
    const auto* decl = std::get_if<ptx::RegDecl>(&st.item);
    if (!decl || decl->vector) continue;
    for (const auto& n : decl->names) {
      if (n.count < 0) {
        if (n.name == reg) return ptx::type_size(decl->type) * 8;
        continue;
      }
      if (!reg.starts_with(n.name) || reg.size() == n.name.size()) continue;
      std::string_view index = reg.substr(n.name.size());
      if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
          index.size() > 9) {
        continue;
      }
      if (std::stoll(std::string(index)) < n.count) return ptx::type_size(decl->type) * 8;
    }
  }
  return 0;
}

// The `mov` that puts what `load` (an `ld.param` of the parameter holding `bytes`) would read into
// its destination. ld may widen (`ld.param.u8` into a 16-bit register, zero- or sign-extending as
// its type says); mov may not, so a widened value is moved as a bit pattern of the register's size.
Result<ptx::Instruction> constant_move(const ptx::Function& f, const ptx::Instruction& load,
                                       std::string_view bytes) {
  auto text = [&] { return ptx::print(load); };
  if (load.has_mod("v2") || load.has_mod("v4") || load.has_mod("v8")) {
    return make_error("a vector load of a scalar: " + text());
  }
  const ptx::Operand& dest = load.operands[0];
  const ptx::Type t = load.last_type();
  const uint32_t size = ptx::type_size(t);
  const int64_t offset = load.operands[1].value;
  if (dest.kind != ptx::Operand::Kind::reg || size == 0 || offset < 0 ||
      uint64_t(offset) + size > bytes.size()) {
    return make_error("a load this pass does not follow: " + text());
  }
  const uint32_t bits = register_bits(f, dest.name);
  const uint64_t raw = little_endian(bytes.substr(size_t(offset), size));

  ptx::Instruction mov;
  mov.op = ptx::Opcode::mov;
  mov.guard = load.guard;
  mov.guard_negated = load.guard_negated;
  ptx::Operand imm;
  if (t == ptx::Type::f32 || t == ptx::Type::f64) {
    if (bits != size * 8)
      return make_error("a float load into a register of another size: " + text());
    imm.kind = t == ptx::Type::f32 ? ptx::Operand::Kind::imm_f32 : ptx::Operand::Kind::imm_f64;
    imm.bits = raw;
    mov.mods = {ptx::type_name(t)};
  } else {
    if (bits < size * 8 || (bits != 16 && bits != 32 && bits != 64)) {
      return make_error("a load into a register of " + std::to_string(bits) + " bits: " + text());
    }
    // u/s/b of the register's width keep their type; 8-bit loads and f16/bf16 bits move as .bN.
    bool keep_type = bits == size * 8 && !ptx::is_float(t);
    ptx::Type mov_type = keep_type    ? t
                         : bits == 16 ? ptx::Type::b16
                         : bits == 32 ? ptx::Type::b32
                                      : ptx::Type::b64;
    uint64_t extended = ptx::is_signed(t) ? uint64_t(sign_extend(raw, size * 8)) : raw;
    imm.kind = ptx::Operand::Kind::imm_int;
    // Signed types read the value signed; the others as the unsigned pattern of the register
    // (ptxas takes 64-bit patterns above 2^63 written as negative numbers).
    imm.value = ptx::is_signed(mov_type)
                    ? sign_extend(extended, bits)
                    : int64_t(bits == 64 ? extended : extended & ((1ull << bits) - 1));
    mov.mods = {ptx::type_name(mov_type)};
  }
  mov.operands = {dest, imm};
  return mov;
}

struct PtxSpecialization {
  std::string code;
  std::vector<const ConstantParam*> params;
  ptx::FoldStats folded;
};

// The module with the loads of every parameter in `consts` that allows it replaced by constants.
Result<PtxSpecialization> specialize_ptx(const ptx::Module& original, std::string_view entry,
                                         const std::vector<ConstantParam>& consts) {
  ptx::Module module = original;
  ptx::Function* f = module.function(entry);
  if (!f) return make_error("no entry " + std::string(entry));
  auto reads = param_reads(*f);
  PtxSpecialization out;
  std::string refusals;
  for (const auto& c : consts) {
    const ParamReads& r = reads[c.info.name];
    if (!r.only_loads) {
      refusals += " " + c.info.name + " (used other than by ld.param)";
      continue;
    }
    std::vector<std::pair<size_t, ptx::Instruction>> moves;
    std::string failure;
    for (size_t si : r.loads) {
      auto mov = constant_move(*f, std::get<ptx::Instruction>(f->body[si].item), c.bytes);
      if (!mov) {
        failure = mov.error().message;
        break;
      }
      moves.emplace_back(si, std::move(*mov));
    }
    if (!failure.empty()) {
      refusals += " " + c.info.name + " (" + failure + ")";
      continue;
    }
    for (auto& [si, mov] : moves) f->body[si].item = std::move(mov);
    out.params.push_back(&c);
  }
  if (out.params.empty()) return make_error("no parameter can be folded in the PTX:" + refusals);
  // What ptxas would do with the constants on a GPU, done here so that the PTX itself says it
  // (and a device that runs PTX as written, the emulated one, sees the same work saved).
  out.folded = ptx::fold_constants(*f);
  out.code = ptx::print(module);
  return out;
}

Candidate ptx_candidate(const KernelTask& task, PtxSpecialization spec) {
  Candidate c;
  c.description = "specialized";
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const ConstantParam& p = *spec.params[i];
    c.description +=
        (i ? ", " : " ") + param_label(task.key.entry, p.info.name) + "=" +
        display(p.bytes, *ptx_value_kind(p.info.type));
  }
  c.description += " (PTX level: ld.param replaced by constants";
  if (spec.folded.propagated || spec.folded.reduced) {
    c.description += "; " + std::to_string(spec.folded.propagated) + " operands folded, " +
                     std::to_string(spec.folded.reduced) + " div/rem/mul by 2^k reduced";
  }
  c.description += ")";
  c.kind = CandidateKind::ptx;
  c.code = std::move(spec.code);
  c.entry = task.key.entry;
  c.comparison = Comparison::bitwise;
  c.guard = guard_for(spec.params);
  c.tag = k_tag_ptx;
  return c;
}

// ---- source level ------------------------------------------------------------------------------

// The builtin arithmetic types a constant can be written in, by their normalized spelling.
struct SourceScalar {
  uint32_t size;
  ValueKind kind;
};

std::optional<SourceScalar> source_scalar(std::string_view type) {
  static const std::map<std::string_view, SourceScalar> k_types = {
      {"bool", {1, ValueKind::boolean}},
      {"char", {1, ValueKind::signed_int}}, // signed on every host CUDA supports
      {"signed char", {1, ValueKind::signed_int}},
      {"unsigned char", {1, ValueKind::unsigned_int}},
      {"short", {2, ValueKind::signed_int}},
      {"short int", {2, ValueKind::signed_int}},
      {"signed short", {2, ValueKind::signed_int}},
      {"unsigned short", {2, ValueKind::unsigned_int}},
      {"unsigned short int", {2, ValueKind::unsigned_int}},
      {"int", {4, ValueKind::signed_int}},
      {"signed", {4, ValueKind::signed_int}},
      {"signed int", {4, ValueKind::signed_int}},
      {"unsigned", {4, ValueKind::unsigned_int}},
      {"unsigned int", {4, ValueKind::unsigned_int}},
      {"long", {8, ValueKind::signed_int}}, // LP64: the device follows the 64-bit Linux host
      {"long int", {8, ValueKind::signed_int}},
      {"unsigned long", {8, ValueKind::unsigned_int}},
      {"unsigned long int", {8, ValueKind::unsigned_int}},
      {"long long", {8, ValueKind::signed_int}},
      {"long long int", {8, ValueKind::signed_int}},
      {"unsigned long long", {8, ValueKind::unsigned_int}},
      {"unsigned long long int", {8, ValueKind::unsigned_int}},
      {"size_t", {8, ValueKind::unsigned_int}},
      {"std::size_t", {8, ValueKind::unsigned_int}},
      {"ptrdiff_t", {8, ValueKind::signed_int}},
      {"std::ptrdiff_t", {8, ValueKind::signed_int}},
      {"int8_t", {1, ValueKind::signed_int}},
      {"int16_t", {2, ValueKind::signed_int}},
      {"int32_t", {4, ValueKind::signed_int}},
      {"int64_t", {8, ValueKind::signed_int}},
      {"uint8_t", {1, ValueKind::unsigned_int}},
      {"uint16_t", {2, ValueKind::unsigned_int}},
      {"uint32_t", {4, ValueKind::unsigned_int}},
      {"uint64_t", {8, ValueKind::unsigned_int}},
      {"std::int8_t", {1, ValueKind::signed_int}},
      {"std::int16_t", {2, ValueKind::signed_int}},
      {"std::int32_t", {4, ValueKind::signed_int}},
      {"std::int64_t", {8, ValueKind::signed_int}},
      {"std::uint8_t", {1, ValueKind::unsigned_int}},
      {"std::uint16_t", {2, ValueKind::unsigned_int}},
      {"std::uint32_t", {4, ValueKind::unsigned_int}},
      {"std::uint64_t", {8, ValueKind::unsigned_int}},
      {"float", {4, ValueKind::floating}},
      {"double", {8, ValueKind::floating}},
  };
  auto it = k_types.find(type);
  if (it == k_types.end()) return std::nullopt;
  return it->second;
}

// A signed integer literal of exactly `v` (the most negative value has no literal of its own).
std::string signed_literal(int64_t v, bool hex = false) {
  if (v == INT64_MIN) return hex ? "(-0x7fffffffffffffffll - 1)" : "(-9223372036854775807ll - 1)";
  uint64_t magnitude = v < 0 ? uint64_t(-v) : uint64_t(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, hex ? "0x%" PRIx64 : "%" PRIu64, magnitude);
  std::string text = std::string(buf) + (magnitude > INT32_MAX ? "ll" : "");
  return v < 0 ? "(-" + text + ")" : text;
}

// An expression of type `type` with exactly the bytes `bytes`; nullopt when none exists (a bool
// byte other than 0 or 1).
std::optional<std::string> source_constant(std::string_view type, ValueKind kind,
                                           std::string_view bytes) {
  uint64_t raw = little_endian(bytes);
  std::string cast = "(" + std::string(type) + ")";
  switch (kind) {
  case ValueKind::boolean:
    if (raw > 1) return std::nullopt;
    return raw ? "true" : "false";
  case ValueKind::signed_int:
    return cast + signed_literal(sign_extend(raw, uint32_t(bytes.size() * 8)));
  case ValueKind::unsigned_int:
    return cast + std::to_string(raw) + (raw > UINT32_MAX ? "ull" : "u");
  case ValueKind::floating: {
    // The exact bits, reinterpreted: no decimal rounding can change them.
    char buf[64];
    std::string value = display(bytes, kind);
    if (bytes.size() == 4) {
      std::snprintf(buf, sizeof buf, "__uint_as_float(0x%08" PRIx32 "u)", uint32_t(raw));
    } else {
      std::snprintf(buf, sizeof buf, "__longlong_as_double(%s)",
                    signed_literal(int64_t(raw), true).c_str());
    }
    return std::string(buf) + " /* " + value + " */";
  }
  }
  return std::nullopt;
}

struct SourceSpecialization {
  std::string code;
  std::vector<const ConstantParam*> params;
  std::vector<std::string> names; // the source's names of `params`
  std::vector<ValueKind> kinds;
};

// The source rewritten so that `hone_spec` runs the kernel with every constant the source can
// spell; an error (and the PTX level instead) when the kernel cannot be found with certainty.
Result<SourceSpecialization> specialize_source(const proto::SourceInfo& source,
                                               std::string_view entry, size_t param_count,
                                               const std::vector<ConstantParam>& consts) {
  auto text = inline_headers(source);
  if (!text) return text.error();
  auto def = find_kernel(*text, entry);
  if (!def) return def.error();
  if (def->params.size() != param_count) {
    return make_error("the source's " + std::string(entry) + " has " +
                      std::to_string(def->params.size()) + " parameters, its PTX " +
                      std::to_string(param_count));
  }
  SourceSpecialization out;
  std::vector<std::optional<std::string>> arguments(param_count);
  for (const auto& c : consts) {
    const KernelParam& p = def->params[c.index];
    auto scalar = source_scalar(p.type);
    // The declared type must hold exactly the bytes the PTX parameter does, and read them as the
    // PTX does (a float as a float).
    if (!scalar || scalar->size != c.info.size ||
        (scalar->kind == ValueKind::floating) !=
            (ptx_value_kind(c.info.type) == ValueKind::floating)) {
      continue;
    }
    auto constant = source_constant(p.type, scalar->kind, c.bytes);
    if (!constant) continue;
    arguments[c.index] = std::move(*constant);
    out.params.push_back(&c);
    out.names.push_back(p.name);
    out.kinds.push_back(scalar->kind);
  }
  if (out.params.empty()) {
    return make_error("no constant parameter of " + std::string(entry) +
                      " has a builtin arithmetic type in the source");
  }
  auto code = wrap_kernel(*text, *def, k_spec_entry, k_body_suffix, arguments);
  if (!code) return code.error();
  out.code = std::move(*code);
  return out;
}

Candidate source_candidate(const proto::SourceInfo& source, SourceSpecialization spec) {
  Candidate c;
  c.description = "specialized";
  for (size_t i = 0; i < spec.params.size(); ++i) {
    c.description +=
        (i ? ", " : " ") + spec.names[i] + "=" + display(spec.params[i]->bytes, spec.kinds[i]);
  }
  c.description += " (source level, through NVRTC)";
  c.kind = CandidateKind::cuda;
  c.code = std::move(spec.code);
  c.entry = std::string(k_spec_entry);
  c.nvrtc_options = nvrtc_candidate_options(source.options).options;
  c.comparison = Comparison::bitwise;
  c.guard = guard_for(spec.params);
  c.tag = k_tag_source;
  return c;
}

// ---- the session -------------------------------------------------------------------------------

// Verdicts that blame the rewrite rather than the idea: the PTX-level specialization, a different
// transformation, is then worth its GPU time. (not_faster is not one: the PTX level folds less.)
bool rewrite_failed(VerdictKind k) {
  return k == VerdictKind::compile_error || k == VerdictKind::load_error ||
         k == VerdictKind::launch_error || k == VerdictKind::illegal_address ||
         k == VerdictKind::mismatch || k == VerdictKind::refused;
}

// The source-level candidate first; the PTX-level one only when the first's verdict says the
// source rewrite itself failed.
class SpecializeSession final : public Session {
public:
  SpecializeSession(Candidate source, Candidate ptx)
      : m_source(std::move(source)), m_ptx(std::move(ptx)) {}

  std::vector<Candidate> poll() override {
    switch (m_state) {
    case State::start:
      m_state = State::awaiting_verdict;
      return {m_source};
    case State::fallback_ready:
      m_state = State::finished;
      return {m_ptx};
    default:
      return {};
    }
  }

  void on_verdict(const Candidate& candidate, const Verdict& verdict) override {
    if (candidate.tag != k_tag_source || m_state != State::awaiting_verdict) return;
    m_state = rewrite_failed(verdict.kind) ? State::fallback_ready : State::finished;
  }

  bool done() const override { return m_state == State::finished; }

  std::string state() const override {
    switch (m_state) {
    case State::start:
      return "source-level candidate ready";
    case State::awaiting_verdict:
      return "waiting for the source-level candidate's verdict (PTX level if it fails)";
    case State::fallback_ready:
      return "PTX-level candidate ready";
    default:
      return "done";
    }
  }

private:
  enum class State { start, awaiting_verdict, fallback_ready, finished };
  Candidate m_source, m_ptx;
  State m_state = State::start;
};

class Specialize final : public Strategy {
public:
  std::string id() const override { return "specialize"; }
  bool needs_captures() const override { return true; }
  double expected_speedup() const override { return 1.3; }
  double cost_gpu_seconds() const override { return 2.0; }

  std::unique_ptr<Session> start(const KernelTask& task) override {
    auto ptx_text = kernel_ptx(task);
    if (!ptx_text) return decline(task, "no PTX: " + ptx_text.error().message);
    std::vector<const Capture*> caps;
    for (const auto& c : task.captures) {
      if (c.status == CaptureStatus::ok) caps.push_back(&c);
    }
    if (caps.empty()) return decline(task, "no complete capture gives the arguments' values");

    auto module = ptx::parse(*ptx_text, "original");
    if (!module) return decline(task, "the PTX does not parse: " + module.error().message);
    const ptx::Function* f = module->function(task.key.entry);
    if (!f || !f->is_entry || !f->has_body) return decline(task, "no body of the entry in the PTX");
    const ptx::EntryInfo info = ptx::analyze_entry(*module, *f);

    auto constants = constant_scalars(info, caps);
    if (!constants) return decline(task, "the captures do not match the kernel's parameters");
    // A parameter the kernel never loads gains nothing from a constant and would only narrow the
    // guard.
    auto reads = param_reads(*f);
    std::erase_if(*constants,
                  [&](const ConstantParam& c) { return reads[c.info.name].loads.empty(); });
    if (constants->empty()) {
      return decline(task, "no scalar argument the kernel reads is the same in every captured "
                           "launch");
    }

    auto ptx_level = specialize_ptx(*module, task.key.entry, *constants);
    std::string source_refusal;
    if (task.source) {
      auto source_level =
          specialize_source(*task.source, task.key.entry, info.params.size(), *constants);
      if (source_level) {
        Candidate source = source_candidate(*task.source, std::move(*source_level));
        if (!ptx_level) return fixed_session({std::move(source)});
        return std::make_unique<SpecializeSession>(std::move(source),
                                                   ptx_candidate(task, std::move(*ptx_level)));
      }
      source_refusal = source_level.error().message;
    }
    if (!ptx_level) {
      return decline(task, "the constants cannot be substituted in the PTX: " +
                               ptx_level.error().message +
                               (source_refusal.empty() ? "" : "; at source level: " + source_refusal));
    }
    Candidate c = ptx_candidate(task, std::move(*ptx_level));
    // Whoever reads the status should see why the stronger source level was not used.
    if (!source_refusal.empty()) c.description += "; not at source level: " + source_refusal;
    return fixed_session({std::move(c)});
  }
};

} // namespace

std::unique_ptr<Strategy> make_specialize_strategy() {
  return std::make_unique<Specialize>();
}

} // namespace hone::agent
