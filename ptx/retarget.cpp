#include "ptx/retarget.hpp"

#include "ptx/ir.hpp"
#include "ptx/lexer.hpp"
#include "ptx/parser.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>
#include <vector>

namespace hone::ptx {

namespace {

// ---- what sm_90 lacks ---------------------------------------------------------------------------
//
// Facts from the PTX ISA 9.0 manual (CUDA 13.0): each entry names the section whose "Target ISA
// notes" say which targets have the feature, and the PTX ISA version that introduced it. Most
// entries were also tried on CUDA 13.0's ptxas, which rejects them for -arch=sm_90 and -arch=sm_90a
// ("Feature '...' requires .target sm_100 or higher", "... not supported on .target 'sm_90'");
// tests/unit/ptx_retarget_test.cpp repeats that for each refusal it exercises.
//
// Refused (needs the target named):
// - tcgen05.* (tensor memory, 5th-generation tensor cores): sm_100a.
//   "Tensorcore 5th Generation Family Instructions", 8.6.
// - clusterlaunchcontrol.*: sm_100. "Parallel Synchronization and Communication Instructions:
//   clusterlaunchcontrol", 8.6.
// - .kind::* on mma (f8f6f4, mxf4, mxf4nvf4, mxf8f6f4), .block_scale, .scale_vec::*: sm_120a.
//   "Warp Level Matrix Multiply-Accumulate Instructions: mma, mma.sp", 8.7.
// - .cta_group::* (tcgen05, cp.async.bulk.tensor): sm_100a. "cp.async.bulk.tensor", 8.6.
// - FP4/FP6 types .e2m1 .e2m3 .e3m2 and their packed forms: sm_100a, sm_120a. "Alternate Floating
//   Point Data Formats"; "cvt", 8.6.
// - scale-factor types .ue8m0, .ue8m0x2, .ue4m3: sm_100a, sm_120a. "cvt"; "mma" block scaling, 8.6
//   and 8.7.
// - four packed FP8, .e4m3x4 .e5m2x4: sm_100a, sm_120a. "multimem.ld_reduce, multimem.st", 8.6;
//   "cvt" (.rs), 8.7.
// - unpacking formats .b8x16 .b6x16_p32 .b4x16_p64, ldmatrix/stmatrix shapes other than .m8n8 and
//   types other than .b16: sm_100a, sm_120a. "ldmatrix", "stmatrix", "tcgen05.cp", 8.6.
// - .f32x2 (add, sub, mul, fma on packed f32): sm_100. "Floating Point Instructions", 8.6.
// - add/sub/fma .f32 with .f16/.bf16 sources (mixed precision): sm_100. "Floating Point
//   Instructions: add, sub, fma", 8.6.
// - min/max with three inputs: sm_100. "min", "max", 8.8.
// - ld/st of 256 bits (.v8 of 32-bit, .v4 of 64-bit elements): sm_100. "ld", "st", 8.8.
// - st.bulk: sm_100. "st.bulk", 8.6.
// - cvt.rs (stochastic rounding): sm_100a. "cvt", 8.7.
// - cvt.rn/.rz .satfinite to .tf32: sm_100. "cvt", 8.6.
// - redux.sync on .f32 (.abs, .NaN): sm_100a. "redux.sync", 8.6.
// - .tile::gather4, .tile::scatter4, .im2col::w, .im2col::w::128: sm_100a. "cp.async.bulk.tensor",
//   "cp.async.bulk.prefetch.tensor", 8.6.
// - .cp_mask on cp.async.bulk: sm_100. "cp.async.bulk", 8.6.
// - tensormap.replace .swizzle_atomicity, and .elemtype above 12 (the FP4/FP6 layouts): sm_100a.
//   "tensormap.replace", 8.6.
//
// Kept, but only on sm_90a (H100/H200 run sm_90a code): wgmma.* ("Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate Instructions", 8.0), setmaxnreg ("setmaxnreg", 8.0) and
// tensormap.replace ("tensormap.replace", 8.3; ptxas refuses it for plain sm_90).
// `.multicast::cluster` on cp.async.bulk{.tensor} runs on sm_90 but is optimized for sm_90a
// ("cp.async.bulk.tensor"; ptxas warns on sm_90), so it selects sm_90a too.
//
// Refused because hone cannot confirm sm_90 has them: instructions the parser keeps as opaque text;
// multimem sub-operations other than ld_reduce/st/red ("multimem", 8.1); tensormap sub-operations
// other than replace/cp_fenceproxy; function directives outside PTX ISA 9.0's ("Performance-Tuning
// Directives", "Cluster Dimension Directives", .noreturn, .pragma); special registers outside PTX
// ISA 9.0's ("Special Registers"); target options other than
// texmode_unified/texmode_independent/debug (map_f64_to_f32 is for sm_1x only, "Module Directives:
// .target"); and .address_size 32 (ptxas: "32-Bit ABI ... is not supported on sm_90 or higher
// architectures").

// A reason the module cannot run on sm_90 as it is, or needs sm_90a.
struct Finding {
  std::string what; // the instruction as written: "tcgen05.alloc.cta_group::1.sync..."
  uint32_t line = 0;
  std::string needs;   // "sm_100a"; empty when hone only cannot confirm the feature
  std::string feature; // what sm_90 has no
};

std::string describe(const Finding& f) {
  std::string out = f.what + " (line " + std::to_string(f.line) + ")";
  if (f.needs.empty()) return out + " is not known to exist on sm_90: " + f.feature;
  return out + " needs " + f.needs + "; sm_90 has no " + f.feature;
}

// Modifiers that exist only on targets newer than sm_90, whatever the opcode. A token ending in
// "::" matches every modifier that starts with it.
struct TokenRule {
  std::string_view token;
  std::string_view needs;
  std::string_view about;
};

constexpr std::array k_token_rules{
    TokenRule{"kind::", "sm_120a", "MMA kind (new with sm_100a/sm_120a)"},
    TokenRule{"cta_group::", "sm_100a", "CTA-pair qualifier"},
    TokenRule{"block_scale", "sm_120a", "block-scaled MMA"},
    TokenRule{"scale_vec::", "sm_120a", "block-scaled MMA"},
    TokenRule{"e2m1", "sm_100a or sm_120a", "FP4 type"},
    TokenRule{"e2m1x2", "sm_100a or sm_120a", "packed FP4 type"},
    TokenRule{"e2m1x4", "sm_100a or sm_120a", "packed FP4 type"},
    TokenRule{"e2m3", "sm_100a or sm_120a", "FP6 type"},
    TokenRule{"e2m3x2", "sm_100a or sm_120a", "packed FP6 type"},
    TokenRule{"e2m3x4", "sm_100a or sm_120a", "packed FP6 type"},
    TokenRule{"e3m2", "sm_100a or sm_120a", "FP6 type"},
    TokenRule{"e3m2x2", "sm_100a or sm_120a", "packed FP6 type"},
    TokenRule{"e3m2x4", "sm_100a or sm_120a", "packed FP6 type"},
    TokenRule{"ue8m0", "sm_100a or sm_120a", "scale-factor type"},
    TokenRule{"ue8m0x2", "sm_100a or sm_120a", "packed scale-factor type"},
    TokenRule{"ue4m3", "sm_100a or sm_120a", "scale-factor type"},
    TokenRule{"e4m3x4", "sm_100a or sm_120a", "four packed FP8"},
    TokenRule{"e5m2x4", "sm_100a or sm_120a", "four packed FP8"},
    TokenRule{"b8x16", "sm_100a or sm_120a", "unpacking matrix format"},
    TokenRule{"b6x16_p32", "sm_100a or sm_120a", "unpacking matrix format"},
    TokenRule{"b4x16_p64", "sm_100a or sm_120a", "unpacking matrix format"},
    TokenRule{"f32x2", "sm_100", "packed f32 arithmetic"},
    TokenRule{"tile::gather4", "sm_100a", "tensor gather"},
    TokenRule{"tile::scatter4", "sm_100a", "tensor scatter"},
    TokenRule{"im2col::w", "sm_100a", "im2col::w mode"},
    TokenRule{"im2col::w::128", "sm_100a", "im2col::w::128 mode"},
    TokenRule{"cp_mask", "sm_100", "byte-masked bulk copy"},
    TokenRule{"swizzle_atomicity", "sm_100a", "tensor-map field"},
};

const TokenRule* token_rule(std::string_view mod) {
  for (const TokenRule& r : k_token_rules) {
    if (r.token.ends_with("::") ? mod.starts_with(r.token) : mod == r.token) return &r;
  }
  return nullptr;
}

std::string written_as(const Instruction& inst) {
  std::string out(opcode_name(inst.op));
  for (auto m : inst.mods) {
    out += '.';
    out += m;
  }
  return out;
}

// `m16n8`, `m8n8`: a matrix shape modifier.
bool is_shape(std::string_view mod) {
  return mod.size() > 1 && mod[0] == 'm' && mod[1] >= '0' && mod[1] <= '9';
}

// Bytes one ld/st moves: the element size times the vector length.
uint32_t access_bytes(const Instruction& inst) {
  uint32_t lanes = 1;
  if (inst.has_mod("v2")) lanes = 2;
  if (inst.has_mod("v4")) lanes = 4;
  if (inst.has_mod("v8")) lanes = 8;
  Type t = inst.last_type();
  return t == Type::none ? 0 : lanes * type_size(t);
}

// Where sm_90a is what the instruction needs (H100/H200 have it): the feature, or nullopt.
std::optional<std::string> wants_90a(const Instruction& inst) {
  switch (inst.op) {
  case Opcode::wgmma:
    return "wgmma (warpgroup MMA)";
  case Opcode::setmaxnreg:
    return "setmaxnreg";
  case Opcode::tensormap:
    if (!inst.mods.empty() && inst.mods[0] == "replace") return "tensormap.replace";
    return std::nullopt;
  case Opcode::cp:
    if (inst.has_mod("multicast::cluster")) return ".multicast::cluster (optimized for sm_90a)";
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

// Why sm_90 and sm_90a cannot run `inst` as written, or nullopt when they can.
std::optional<Finding> lacks(const Instruction& inst, uint32_t line) {
  auto found = [&](std::string_view needs, std::string feature) {
    return Finding{written_as(inst), line, std::string(needs), std::move(feature)};
  };
  switch (inst.op) {
  case Opcode::tcgen05:
    return found("sm_100a", "tcgen05 (tensor memory and 5th-generation tensor cores)");
  case Opcode::clusterlaunchcontrol:
    return found("sm_100", "clusterlaunchcontrol");
  default:
    break;
  }
  for (auto m : inst.mods) {
    if (const TokenRule* r = token_rule(m)) {
      return found(r->needs, "." + std::string(m) + " (" + std::string(r->about) + ")");
    }
  }
  const std::vector<Type> types = inst.types();
  switch (inst.op) {
  case Opcode::cvt:
    if (inst.has_mod("rs")) return found("sm_100a", "cvt.rs (stochastic rounding)");
    if (!types.empty() && types[0] == Type::tf32 && inst.has_mod("satfinite") &&
        !inst.has_mod("rna")) {
      return found("sm_100", ".satfinite with .rn/.rz on cvt to .tf32");
    }
    break;
  case Opcode::redux:
    if (std::any_of(types.begin(), types.end(), is_float)) {
      return found("sm_100a", "floating-point redux.sync");
    }
    break;
  case Opcode::add:
  case Opcode::sub:
  case Opcode::fma:
    if (types.size() >= 2 && types[0] == Type::f32 &&
        (types[1] == Type::f16 || types[1] == Type::bf16)) {
      return found("sm_100", "mixed-precision ." + std::string(type_name(types[0])) + "." +
                                 std::string(type_name(types[1])) + " arithmetic");
    }
    break;
  case Opcode::min:
  case Opcode::max:
    if (inst.operands.size() > 3) return found("sm_100", "three-input " + written_as(inst));
    break;
  case Opcode::ld:
  case Opcode::ldu:
  case Opcode::st:
    if (inst.op == Opcode::st && inst.has_mod("bulk")) return found("sm_100", "st.bulk");
    if (access_bytes(inst) > 16) return found("sm_100", "256-bit loads and stores");
    break;
  case Opcode::ldmatrix:
  case Opcode::stmatrix:
    for (auto m : inst.mods) {
      if ((is_shape(m) && m != "m8n8") || (type_from_name(m) != Type::none && m != "b16")) {
        return found("sm_100a or sm_120a", std::string(opcode_name(inst.op)) + " ." +
                                               std::string(m) + " (sm_90 has .m8n8 .b16 only)");
      }
    }
    break;
  case Opcode::multimem:
    if (inst.mods.empty() ||
        (inst.mods[0] != "ld_reduce" && inst.mods[0] != "st" && inst.mods[0] != "red")) {
      return found("", "hone knows multimem.ld_reduce, multimem.st and multimem.red only");
    }
    break;
  case Opcode::tensormap:
    if (inst.mods.empty() || (inst.mods[0] != "replace" && inst.mods[0] != "cp_fenceproxy")) {
      return found("", "hone knows tensormap.replace and tensormap.cp_fenceproxy only");
    }
    // .elemtype 13..15 are the FP4/FP6 layouts (PTX ISA: tensormap.replace); ptxas takes only
    // 0..12 for sm_90a, and the value must be an immediate.
    if (inst.has_mod("elemtype") && inst.operands.size() >= 2 &&
        inst.operands[1].kind == Operand::Kind::imm_int && inst.operands[1].value > 12) {
      return found("sm_100a", ".elemtype " + std::to_string(inst.operands[1].value) +
                                  " (FP4/FP6 tensor layouts)");
    }
    break;
  default:
    break;
  }
  return std::nullopt;
}

// Special registers of PTX ISA 9.0 ("Special Registers"), all present on sm_90.
bool is_special_register(std::string_view name) {
  // clang-format off
  static constexpr std::array<std::string_view, 37> k_names{
      "%tid", "%ntid", "%laneid", "%warpid", "%nwarpid", "%ctaid", "%nctaid", "%smid", "%nsmid",
      "%gridid", "%is_explicit_cluster", "%clusterid", "%nclusterid", "%cluster_ctaid",
      "%cluster_nctaid", "%cluster_ctarank", "%cluster_nctarank", "%lanemask_eq", "%lanemask_le",
      "%lanemask_lt", "%lanemask_ge", "%lanemask_gt", "%clock", "%clock_hi", "%clock64",
      "%globaltimer", "%globaltimer_lo", "%globaltimer_hi", "%reserved_smem_offset_begin",
      "%reserved_smem_offset_end", "%reserved_smem_offset_cap", "%reserved_smem_offset_0",
      "%reserved_smem_offset_1", "%total_smem_size", "%aggr_smem_size", "%dynamic_smem_size",
      "%current_graph_exec"};
  // clang-format on
  if (std::find(k_names.begin(), k_names.end(), name) != k_names.end()) return true;
  auto numbered = [&](std::string_view prefix, uint32_t count, std::string_view suffix) {
    if (!name.starts_with(prefix) || !name.ends_with(suffix)) return false;
    auto digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.empty() || digits.size() > 2) return false;
    uint32_t n = 0;
    for (char c : digits) {
      if (!is_digit(c)) return false;
      n = n * 10 + uint32_t(c - '0');
    }
    return n < count;
  };
  // %pm0..%pm7, %pm0_64..%pm7_64, %envreg0..%envreg31
  return numbered("%pm", 8, "") || numbered("%pm", 8, "_64") || numbered("%envreg", 32, "");
}

// The names a function may use as %-operands: its registers (plain names and the prefixes of
// `%r<N>` ranges), its parameters, and variables (PTX identifiers may start with '%').
struct Declared {
  std::vector<std::string_view> names;
  std::vector<std::string_view> ranges;

  bool has(std::string_view reg) const {
    if (std::find(names.begin(), names.end(), reg) != names.end()) return true;
    return std::any_of(ranges.begin(), ranges.end(), [&](std::string_view prefix) {
      if (!reg.starts_with(prefix) || reg.size() == prefix.size()) return false;
      auto rest = reg.substr(prefix.size());
      return std::all_of(rest.begin(), rest.end(), is_digit);
    });
  }
};

Declared declared_in(const Function& f, const std::vector<std::string_view>& module_names) {
  Declared d;
  d.names = module_names;
  for (const Param& p : f.params) d.names.push_back(p.name);
  for (const Param& p : f.returns) d.names.push_back(p.name);
  for (const Statement& s : f.body) {
    if (const auto* r = std::get_if<RegDecl>(&s.item)) {
      for (const RegDecl::Name& n : r->names) (n.count >= 0 ? d.ranges : d.names).push_back(n.name);
    }
    if (const auto* v = std::get_if<VarDecl>(&s.item)) d.names.push_back(v->name);
  }
  return d;
}

// The first %-register an operand names that is neither declared nor a special register of sm_90.
std::optional<std::string_view> unknown_register(const Operand& o, const Declared& d) {
  std::string_view reg;
  if (o.kind == Operand::Kind::reg) reg = o.name;
  if (o.kind == Operand::Kind::address && o.base_is_reg) reg = o.name;
  if (reg.starts_with('%')) {
    std::string_view base = reg.substr(0, reg.find('.')); // %tid.x, %v1.y
    if (!d.has(reg) && !d.has(base) && !is_special_register(base)) return base;
  }
  for (const Operand& e : o.elems) {
    if (auto r = unknown_register(e, d)) return r;
  }
  return std::nullopt;
}

// Function directives of PTX ISA 9.0 ("Performance-Tuning Directives", "Cluster Dimension
// Directives", .noreturn, .pragma), all accepted for sm_90.
bool is_known_function_directive(std::string_view name) {
  static constexpr std::array<std::string_view, 11> k_names{
      "maxnreg",           "maxntid",        "reqntid",          "minnctapersm",
      "maxnctapersm",      "noreturn",       "pragma",           "explicitcluster",
      "reqnctapercluster", "maxclusterrank", "blocksareclusters"};
  return std::find(k_names.begin(), k_names.end(), name) != k_names.end();
}

// The opcode an opaque statement starts with (after any guard), for messages.
std::string_view opaque_opcode(std::string_view text) {
  size_t i = 0;
  auto skip_blanks = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  };
  if (i < text.size() && text[i] == '@') {
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    skip_blanks();
  }
  size_t start = i;
  while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != ';' && text[i] != '\n')
    ++i;
  return text.substr(start, i - start);
}

struct Survey {
  std::optional<Finding> refused; // the first thing sm_90 lacks
  std::optional<Finding> sm_90a;  // the first thing that needs sm_90a
};

void survey_function(const Function& f, const std::vector<std::string_view>& module_names,
                     Survey& s) {
  for (const FuncDirective& d : f.directives) {
    if (!is_known_function_directive(d.name)) {
      s.refused = Finding{"." + std::string(d.name) + " of " + std::string(f.name), f.loc.line, "",
                          "a function directive hone does not know"};
      return;
    }
  }
  const Declared declared = declared_in(f, module_names);
  for (const Statement& st : f.body) {
    if (const auto* o = std::get_if<Opaque>(&st.item)) {
      s.refused = Finding{std::string(opaque_opcode(o->text)), st.loc.line, "",
                          "an instruction hone does not model, so it cannot confirm sm_90 has it"};
      return;
    }
    const auto* inst = std::get_if<Instruction>(&st.item);
    if (!inst) continue;
    if (auto found = lacks(*inst, st.loc.line)) {
      s.refused = std::move(found);
      return;
    }
    for (const Operand& o : inst->operands) {
      if (auto reg = unknown_register(o, declared)) {
        s.refused = Finding{written_as(*inst), st.loc.line, "",
                            "register " + std::string(*reg) +
                                " is neither declared nor a special register of sm_90"};
        return;
      }
    }
    if (!s.sm_90a) {
      if (auto feature = wants_90a(*inst)) {
        s.sm_90a = Finding{written_as(*inst), st.loc.line, "sm_90a", std::move(*feature)};
      }
    }
  }
}

// `sm_100a` as compute capability 100 and suffix 'a' ('f' for family targets, 0 for none).
struct SmName {
  uint32_t cc = 0;
  char suffix = 0;
};

std::optional<SmName> parse_sm(std::string_view name) {
  if (!name.starts_with("sm_")) return std::nullopt;
  name.remove_prefix(3);
  SmName out;
  size_t i = 0;
  while (i < name.size() && is_digit(name[i]) && i < 4)
    out.cc = out.cc * 10 + uint32_t(name[i++] - '0');
  if (i == 0) return std::nullopt;
  if (i + 1 == name.size() && (name[i] == 'a' || name[i] == 'f')) out.suffix = name[i++];
  if (i != name.size()) return std::nullopt;
  return out;
}

// Where the header's directives sit in the text, found the way the parser reads them.
struct Header {
  size_t version_at = 0, version_end = 0;
  size_t arch_at = 0, arch_end = 0;
  std::vector<std::string_view> target; // every name in the .target directive(s)
  int target_directives = 0;
  bool arch_found = false;
};

std::optional<Header> scan_header(std::string_view text) {
  Header h;
  try {
    Cursor c(text);
    c.skip_space();
    if (c.peek() != '.' || c.directive_name() != "version") return std::nullopt;
    c.skip_space();
    h.version_at = c.pos();
    while (is_digit(c.peek()) || c.peek() == '.') c.advance();
    h.version_end = c.pos();
    while (true) {
      c.skip_space();
      if (c.peek() != '.') break;
      auto state = c.save();
      auto d = c.directive_name();
      if (d == "target") {
        ++h.target_directives;
        do {
          c.skip_space();
          size_t at = c.pos();
          auto name = c.identifier();
          if (name.empty()) return std::nullopt;
          h.target.push_back(name);
          if (name.starts_with("sm_") && !h.arch_found) {
            h.arch_found = true;
            h.arch_at = at;
            h.arch_end = c.pos();
          }
        } while (c.accept(','));
      } else if (d == "address_size") {
        c.skip_space();
        c.number();
      } else {
        c.restore(state);
        break;
      }
    }
  } catch (const ParseError&) {
    return std::nullopt;
  }
  return h;
}

std::string version_text(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// The (major, minor) a `.version` operand such as "9.1" names.
std::optional<std::pair<uint32_t, uint32_t>> read_version(std::string_view v) {
  const auto dot = v.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == v.size()) return std::nullopt;
  uint32_t major = 0, minor = 0;
  for (char c : v.substr(0, dot)) {
    if (!is_digit(c) || major > 1000) return std::nullopt;
    major = major * 10 + uint32_t(c - '0');
  }
  for (char c : v.substr(dot + 1)) {
    if (!is_digit(c) || minor > 1000) return std::nullopt;
    minor = minor * 10 + uint32_t(c - '0');
  }
  return std::pair(major, minor);
}

} // namespace

Result<std::string> lower_version(std::string_view ptx_text, uint32_t major, uint32_t minor) {
  auto header = scan_header(ptx_text);
  if (!header) return make_error("lower_version: the module does not start with a .version directive");
  const auto text = ptx_text.substr(header->version_at, header->version_end - header->version_at);
  const auto declared = read_version(text);
  if (!declared) return make_error("lower_version: unreadable .version " + std::string(text));
  if (*declared <= std::pair(major, minor)) {
    return make_error("lower_version: the module declares .version " + std::string(text) +
                      ", not newer than " + version_text(major, minor));
  }
  std::string out(ptx_text);
  out.replace(header->version_at, text.size(), version_text(major, minor));
  return out;
}

Result<RetargetResult> retarget(std::string_view ptx_text, uint32_t arch) {
  if (arch != 90) {
    return make_error("retarget: the only supported target is compute capability 90 (sm_90, "
                      "sm_90a), not " +
                      std::to_string(arch));
  }
  auto parsed = parse(ptx_text);
  if (!parsed) return make_error("retarget: the PTX does not parse: " + parsed.error().message);
  const Module& m = *parsed;

  auto header = scan_header(ptx_text);
  if (!header || !header->arch_found || header->target_directives != 1 ||
      header->target != m.target) {
    return make_error("retarget: the module needs exactly one .target directive, naming an sm_ "
                      "architecture, right after .version (with .address_size); nothing changed");
  }
  RetargetResult out;
  out.from_target =
      std::string(ptx_text.substr(header->arch_at, header->arch_end - header->arch_at));
  const std::string prefix = "cannot retarget " + out.from_target + " to sm_90: ";
  auto sm = parse_sm(out.from_target);
  if (!sm) return make_error(prefix + "unknown target architecture '" + out.from_target + "'");
  if (sm->cc <= arch) {
    return make_error(prefix + "the module already targets " + out.from_target +
                      (sm->cc < arch ? ", which sm_90 runs as it is" : "") + "; nothing to do");
  }
  for (auto option : m.target) {
    if (option.starts_with("sm_")) continue;
    if (option != "texmode_unified" && option != "texmode_independent" && option != "debug") {
      return make_error(prefix + "target option '" + std::string(option) +
                        "' cannot be kept for sm_90");
    }
  }
  if (std::count_if(m.target.begin(), m.target.end(),
                    [](std::string_view t) { return t.starts_with("sm_"); }) != 1) {
    return make_error(prefix + "the .target directive names more than one architecture");
  }
  if (m.address_size != 64) {
    return make_error(prefix + ".address_size " + std::to_string(m.address_size) +
                      ": sm_90 supports 64-bit addressing only");
  }

  std::vector<std::string_view> module_names; // module-level variables and functions
  for (const ModuleItem& item : m.items) {
    if (const auto* v = std::get_if<VarDecl>(&item.item)) module_names.push_back(v->name);
    if (const auto* f = std::get_if<Function>(&item.item)) module_names.push_back(f->name);
  }
  Survey survey;
  for (const ModuleItem& item : m.items) {
    if (const auto* f = std::get_if<Function>(&item.item)) {
      survey_function(*f, module_names, survey);
    }
    if (survey.refused) return make_error(prefix + describe(*survey.refused));
  }
  out.to_target = survey.sm_90a ? "sm_90a" : "sm_90";
  if (survey.sm_90a) {
    out.why_90a = survey.sm_90a->what + " (line " + std::to_string(survey.sm_90a->line) +
                  "): " + survey.sm_90a->feature;
  }

  // The version: kept when this toolkit assembles it, else the highest it does. sm_90 needs PTX ISA
  // 7.8 and sm_90a 8.0 (PTX ISA "Release Notes"); a module for sm_100 or newer declares 8.6 or
  // more.
  uint32_t major = m.version_major, minor = m.version_minor;
  if (std::pair(major, minor) > std::pair(k_max_ptx_version_major, k_max_ptx_version_minor)) {
    major = k_max_ptx_version_major;
    minor = k_max_ptx_version_minor;
  }
  const auto least = survey.sm_90a ? std::pair(8u, 0u) : std::pair(7u, 8u);
  if (std::pair(major, minor) < least) {
    return make_error(prefix + ".version " + version_text(m.version_major, m.version_minor) +
                      " is older than " + out.to_target + " accepts (" +
                      version_text(least.first, least.second) + ")");
  }
  const bool version_changed = major != m.version_major || minor != m.version_minor;
  out.version = version_changed
                    ? version_text(major, minor)
                    : std::string(ptx_text.substr(header->version_at,
                                                  header->version_end - header->version_at));

  // Edit the two tokens in place (the later one first), so every other byte stays as it was.
  out.ptx.assign(ptx_text);
  out.ptx.replace(header->arch_at, header->arch_end - header->arch_at, out.to_target);
  if (version_changed) {
    out.ptx.replace(header->version_at, header->version_end - header->version_at, out.version);
  }

  // What was edited must parse to the same module but for the target and the version.
  auto again = parse(out.ptx);
  if (!again || again->items != m.items || again->address_size != m.address_size ||
      again->target.size() != m.target.size() || again->version_major != major ||
      again->version_minor != minor) {
    return make_error(prefix + "internal error: the edited text no longer reads as the same "
                               "module; nothing changed");
  }
  return out;
}

} // namespace hone::ptx
