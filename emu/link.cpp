#include "emu/link.hpp"

#include "cuda/fatbin.hpp"
#include "emu/link_image.hpp"
#include "ptx/lexer.hpp"
#include "ptx/parser.hpp"

#include <cuda.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace hone::emu {

namespace {

// Functions the driver provides to every module (the device-side printf, heap and assert): a GPU
// resolves their `.extern .func` declarations without any input defining them.
bool driver_function(std::string_view name) {
  return name == "vprintf" || name == "malloc" || name == "free" || name == "__assertfail";
}

// --- text ---------------------------------------------------------------------------------------

// Calls `on(begin, end)` for every identifier token of `text` outside comments and strings:
// directive and modifier names (`.global`, `.u32`) and numbers are not identifiers (PTX ISA,
// "Identifiers": [a-zA-Z_$%][a-zA-Z0-9_$]*).
void scan_identifiers(std::string_view text, const std::function<void(size_t, size_t)>& on) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      while (i < n && text[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? n : end + 2;
    } else if (c == '"') {
      for (++i; i < n && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
      ++i;
    } else if (c == '.' || ptx::is_digit(c)) {
      for (++i; i < n && (ptx::is_ident_char(text[i]) || text[i] == '.'); ++i) {
      }
    } else if (ptx::is_ident_start(c)) {
      size_t j = i + 1;
      while (j < n && ptx::is_ident_char(text[j])) ++j;
      on(i, j);
      i = j;
    } else {
      ++i;
    }
  }
}

// `text` with every identifier token named in `renames` replaced.
std::string rename_identifiers(std::string_view text,
                               const std::map<std::string, std::string, std::less<>>& renames) {
  std::string out;
  out.reserve(text.size() + 64);
  size_t copied = 0;
  scan_identifiers(text, [&](size_t b, size_t e) {
    auto it = renames.find(text.substr(b, e - b));
    if (it == renames.end()) return;
    out.append(text.substr(copied, b - copied));
    out.append(it->second);
    copied = e;
  });
  out.append(text.substr(copied));
  return out;
}

// The offset of the first `{` of `text` outside comments and strings (a function's body), or npos.
size_t body_open(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) return std::string_view::npos;
      i = end + 1;
    } else if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == '{') {
      return i;
    }
  }
  return std::string_view::npos;
}

// `text` without its `.loc` and `.file` lines: source positions of several inputs cannot share
// one module's file table, and the emulated device reports PTX lines, never source lines.
std::string without_line_info(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    auto line = text.substr(pos, end - pos);
    size_t first = line.find_first_not_of(" \t");
    auto rest = first == std::string_view::npos ? std::string_view{} : line.substr(first);
    auto is = [&](std::string_view d) {
      return rest.starts_with(d) && rest.size() > d.size() &&
             (rest[d.size()] == ' ' || rest[d.size()] == '\t');
    };
    if (!is(".loc") && !is(".file")) out.append(line);
    pos = end;
  }
  return out;
}

std::string_view trim_end(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// --- units --------------------------------------------------------------------------------------

enum class Linkage { internal, visible, weak, external };

// A module-level declaration of a unit.
struct Decl {
  std::string name;
  bool function = false;
  bool entry = false;
  bool defined = false;
  bool dynamic_shared = false; // `.extern .shared` arrays: the dynamic shared window, never linked
  Linkage linkage = Linkage::internal;
  size_t group = 0; // the statement it belongs to
  const ptx::Function* fn = nullptr;
  const ptx::VarDecl* var = nullptr;
};

// One statement at module level: the bytes from its first token to the next statement's.
struct Group {
  size_t begin = 0;
  size_t end = 0;
  enum class Kind { function, variable, directive } kind = Kind::directive;
  std::string_view directive; // for directives: the text
};

struct Unit {
  const LinkUnit* source = nullptr;
  std::string text;
  ptx::Module module;
  std::vector<Group> groups;
  std::vector<Decl> decls;
  uint32_t arch = 0; // of `.target sm_XX`
  bool arch_specific = false;
};

Linkage linkage_of(const std::vector<std::string_view>& attrs) {
  auto has = [&](std::string_view a) {
    return std::find(attrs.begin(), attrs.end(), a) != attrs.end();
  };
  if (has("extern")) return Linkage::external;
  if (has("weak") || has("common")) return Linkage::weak;
  if (has("visible")) return Linkage::visible;
  return Linkage::internal;
}

// The SM number and `a`/`f` suffix of a module's `.target`, 0 when it names none.
uint32_t target_arch(const ptx::Module& m, bool& specific) {
  specific = false;
  for (auto t : m.target) {
    if (!t.starts_with("sm_")) continue;
    uint32_t arch = 0;
    size_t i = 3;
    while (i < t.size() && ptx::is_digit(t[i])) arch = arch * 10 + uint32_t(t[i++] - '0');
    specific = i < t.size();
    return arch;
  }
  return 0;
}

std::string arch_text(uint32_t arch, bool specific) {
  return "sm_" + std::to_string(arch) + (specific ? "a" : "");
}

Result<Unit> analyze(const LinkUnit& source, std::string text) {
  Unit u;
  u.source = &source;
  while (!text.empty() && text.back() == '\0') text.pop_back();
  u.text = std::move(text);
  auto parsed = ptx::parse(u.text, source.name);
  if (!parsed) return make_error(parsed.error().message, CUDA_ERROR_INVALID_PTX);
  u.module = std::move(*parsed);
  u.arch = target_arch(u.module, u.arch_specific);

  std::vector<size_t> line_start{0};
  for (size_t i = 0; i < u.text.size(); ++i) {
    if (u.text[i] == '\n') line_start.push_back(i + 1);
  }
  size_t last_offset = std::string::npos;
  for (const auto& item : u.module.items) {
    if (item.loc.line == 0 || item.loc.line > line_start.size())
      return make_error(source.name + ": a statement without a position", CUDA_ERROR_INVALID_PTX);
    const size_t offset = line_start[item.loc.line - 1] + item.loc.col - 1;
    if (offset != last_offset) {
      if (!u.groups.empty()) u.groups.back().end = offset;
      Group g;
      g.begin = offset;
      g.end = u.text.size();
      if (std::holds_alternative<ptx::Function>(item.item))
        g.kind = Group::Kind::function;
      else if (std::holds_alternative<ptx::VarDecl>(item.item))
        g.kind = Group::Kind::variable;
      else
        g.directive = std::get<ptx::Directive>(item.item).text;
      u.groups.push_back(g);
      last_offset = offset;
    }
    const size_t group = u.groups.size() - 1;
    if (const auto* f = std::get_if<ptx::Function>(&item.item)) {
      Decl d;
      d.name = std::string(f->name);
      d.function = true;
      d.entry = f->is_entry;
      d.defined = f->has_body;
      d.linkage = linkage_of(f->attrs);
      // A kernel is found by its name (cuModuleGetFunction) whatever its linkage directive: never
      // rename one apart; two inputs defining one kernel is a conflict.
      if (d.entry && d.linkage == Linkage::internal) d.linkage = Linkage::visible;
      d.group = group;
      d.fn = f;
      u.decls.push_back(std::move(d));
    } else if (const auto* v = std::get_if<ptx::VarDecl>(&item.item)) {
      Decl d;
      d.name = std::string(v->name);
      d.linkage = linkage_of(v->attrs);
      d.dynamic_shared = v->space == ptx::Space::shared && d.linkage == Linkage::external;
      if (d.dynamic_shared) d.linkage = Linkage::internal;
      d.defined = d.linkage != Linkage::external;
      d.group = group;
      d.var = v;
      u.decls.push_back(std::move(d));
    }
  }
  return u;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

} // namespace

Result<void> check_link_unit(const LinkUnit& unit, uint32_t target) {
  auto u = analyze(unit, unit.ptx);
  if (!u) return u.error();
  if (u->module.address_size != 64)
    return make_error(unit.name + ": .address_size 32 cannot be linked into a 64-bit image",
                      CUDA_ERROR_INVALID_PTX);
  if (u->arch > target || (u->arch_specific && u->arch / 10 != target / 10))
    return make_error(unit.name + ": .target " + arch_text(u->arch, u->arch_specific) +
                          " is newer than the link's target sm_" + std::to_string(target) +
                          " (CU_JIT_TARGET, or the current context's device)",
                      CUDA_ERROR_INVALID_PTX);
  return ok();
}

Result<LinkOutput> link_units(const std::vector<LinkUnit>& units,
                              const std::vector<LinkUnit>& members, uint32_t target,
                              const CompileOptions& options) {
  if (units.empty())
    return make_error("nothing to link: no input was added (cuLinkAddData, cuLinkAddFile)",
                      CUDA_ERROR_INVALID_VALUE);
  LinkOutput out;
  std::vector<Unit> parsed;
  for (const auto& lu : units) {
    auto u = analyze(lu, lu.ptx);
    if (!u) return u.error();
    parsed.push_back(std::move(*u));
  }
  std::vector<Unit> pool; // archive members, pulled on demand
  for (const auto& lu : members) {
    auto u = analyze(lu, lu.ptx);
    if (!u) return u.error();
    pool.push_back(std::move(*u));
  }

  // Pull archive members while one defines a symbol that is still undefined, as a static linker
  // does; members are tried in archive order, again after each pull.
  auto undefined_names = [&] {
    std::set<std::string> defined, wanted;
    for (const auto& u : parsed) {
      for (const auto& d : u.decls) {
        if (d.linkage == Linkage::internal) continue;
        if (d.defined)
          defined.insert(d.name);
        else
          wanted.insert(d.name);
      }
    }
    std::set<std::string> out_names;
    for (const auto& w : wanted) {
      if (!defined.contains(w)) out_names.insert(w);
    }
    return out_names;
  };
  std::vector<bool> pulled(pool.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    auto wanted = undefined_names();
    for (size_t i = 0; i < pool.size() && !changed; ++i) {
      if (pulled[i]) continue;
      for (const auto& d : pool[i].decls) {
        if (d.defined && d.linkage != Linkage::internal && wanted.contains(d.name)) {
          pulled[i] = true;
          out.info += "info    : " + pool[i].source->name + " linked for '" + d.name + "'\n";
          parsed.push_back(std::move(pool[i]));
          changed = true;
          break;
        }
      }
    }
  }

  // Resolve every external name: one definition wins, the other definitions of it are dropped.
  struct Resolution {
    bool function = false;
    std::optional<std::pair<size_t, size_t>> winner; // unit, decl
    std::vector<std::string> referenced_by;
  };
  std::map<std::string, Resolution> globals;
  std::set<std::pair<size_t, size_t>> dropped; // (unit, decl) left out of the merged module
  std::vector<std::string> errors;
  std::vector<std::string> undefined;
  for (size_t ui = 0; ui < parsed.size(); ++ui) {
    for (size_t di = 0; di < parsed[ui].decls.size(); ++di) {
      const Decl& d = parsed[ui].decls[di];
      if (d.linkage == Linkage::internal) continue;
      auto [it, fresh] = globals.try_emplace(d.name);
      Resolution& r = it->second;
      if (fresh)
        r.function = d.function;
      else if (r.function != d.function) {
        errors.push_back("error   : '" + d.name + "' is a " +
                         (d.function ? "function" : "variable") + " in '" +
                         parsed[ui].source->name + "' and a " +
                         (r.function ? "function" : "variable") + " elsewhere");
        continue;
      }
      if (!d.defined) {
        r.referenced_by.push_back(parsed[ui].source->name);
        dropped.insert({ui, di}); // a declaration: the merged module declares it once
        continue;
      }
      if (!r.winner) {
        r.winner = {ui, di};
        continue;
      }
      const Decl& w = parsed[r.winner->first].decls[r.winner->second];
      if (d.linkage == Linkage::visible && w.linkage == Linkage::visible) {
        errors.push_back("error   : Multiple definition of '" + d.name + "' in '" +
                         parsed[ui].source->name + "', first defined in '" +
                         parsed[r.winner->first].source->name + "'");
      } else if (d.linkage == Linkage::visible) {
        dropped.insert(*r.winner); // a strong definition overrides a weak one
        r.winner = {ui, di};
      } else {
        dropped.insert({ui, di}); // the first weak definition stays
      }
    }
  }
  // Internal functions declared and never defined in their own input.
  for (const auto& u : parsed) {
    for (const auto& d : u.decls) {
      if (d.linkage != Linkage::internal || !d.function || d.defined) continue;
      bool has_body = std::any_of(u.decls.begin(), u.decls.end(), [&](const Decl& o) {
        return o.function && o.defined && o.name == d.name;
      });
      if (!has_body)
        undefined.push_back("error   : Undefined reference to '" + d.name + "' in '" +
                            u.source->name + "' (declared without a definition)");
    }
  }
  std::set<std::string> driver_externs;
  for (const auto& [name, r] : globals) {
    if (r.winner) continue;
    if (r.function && driver_function(name)) {
      driver_externs.insert(name);
      continue;
    }
    std::vector<std::string> refs = r.referenced_by;
    refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
    undefined.push_back("error   : Undefined reference to '" + name + "' in '" +
                        join(refs, "', '") + "'");
  }
  if (!errors.empty()) return make_error(join(errors, "\n"), CUDA_ERROR_INVALID_PTX);
  if (!undefined.empty()) return make_error(join(undefined, "\n"), CUDA_ERROR_NOT_FOUND);

  // Register options: one set for the whole module when every input asks for the same, else as
  // directives of each input's entries.
  auto effective = [&](const Unit& u) {
    CompileOptions o = options;
    if (u.source->max_registers) o.max_registers = *u.source->max_registers;
    if (u.source->threads_per_block) o.threads_per_block = *u.source->threads_per_block;
    return o;
  };
  bool uniform = true;
  for (const auto& u : parsed) {
    CompileOptions o = effective(u), first = effective(parsed.front());
    uniform = uniform && o.max_registers == first.max_registers &&
              o.threads_per_block == first.threads_per_block;
  }

  if (parsed.size() == 1 && uniform) {
    // Nothing to merge: the input as it is, so that fault messages name its own lines.
    out.ptx = parsed.front().text;
    out.options = effective(parsed.front());
    return out;
  }

  // Several inputs: rename internal symbols apart, then reparse to find the statements again.
  std::set<std::string> taken;
  for (const auto& u : parsed) {
    for (const auto& d : u.decls) taken.insert(d.name);
  }
  std::set<std::string> internal_before;
  for (size_t ui = 0; ui < parsed.size(); ++ui) {
    std::map<std::string, std::string, std::less<>> renames;
    std::set<std::string> internal_here;
    for (const auto& d : parsed[ui].decls) {
      if (d.linkage != Linkage::internal) continue;
      internal_here.insert(d.name);
      if (renames.contains(d.name)) continue;
      if (!globals.contains(d.name) && !internal_before.contains(d.name)) continue;
      std::string fresh;
      for (int k = 0;; ++k) {
        fresh = d.name + "_hone" + std::to_string(ui) + (k ? "_" + std::to_string(k) : "");
        if (!taken.contains(fresh)) break;
      }
      taken.insert(fresh);
      out.info += "info    : internal symbol '" + d.name + "' of '" + parsed[ui].source->name +
                  "' is named '" + fresh + "' in the linked module\n";
      renames.emplace(d.name, fresh);
    }
    internal_before.insert(internal_here.begin(), internal_here.end());
    if (renames.empty()) continue;
    auto u = analyze(*parsed[ui].source, rename_identifiers(parsed[ui].text, renames));
    if (!u)
      return make_error("internal error renaming symbols: " + u.error().message,
                        CUDA_ERROR_INVALID_PTX);
    parsed[ui] = std::move(*u);
  }

  // The header: the newest .version and the highest .target of the inputs.
  uint32_t major = 0, minor = 0, arch = 0;
  bool specific = false;
  std::vector<std::string> target_options;
  bool had_debug = false;
  for (const auto& u : parsed) {
    if (std::tie(u.module.version_major, u.module.version_minor) > std::tie(major, minor)) {
      major = u.module.version_major;
      minor = u.module.version_minor;
    }
    if (u.arch > arch || (u.arch == arch && u.arch_specific)) {
      arch = u.arch;
      specific = u.arch_specific;
    }
    for (auto t : u.module.target) {
      if (t.starts_with("sm_") || t.starts_with("compute_")) continue;
      if (t == "debug") {
        had_debug = true;
        continue;
      }
      if (std::find(target_options.begin(), target_options.end(), t) == target_options.end())
        target_options.emplace_back(t);
    }
  }
  std::string text = ".version " + std::to_string(major) + "." + std::to_string(minor) +
                     "\n.target " + arch_text(arch == 0 ? target : arch, specific);
  for (const auto& t : target_options) text += ", " + t;
  text += "\n.address_size 64\n\n";

  auto span = [](const Unit& u, const Group& g) {
    return std::string_view(u.text).substr(g.begin, g.end - g.begin);
  };
  auto group_dropped = [&](size_t ui, size_t gi, bool& mixed) {
    size_t total = 0, gone = 0;
    for (size_t di = 0; di < parsed[ui].decls.size(); ++di) {
      if (parsed[ui].decls[di].group != gi) continue;
      ++total;
      if (dropped.contains({ui, di})) ++gone;
    }
    mixed = gone != 0 && gone != total;
    return total != 0 && gone == total;
  };

  // Declarations first, so that any statement may name any function: the driver's functions once,
  // then a prototype of every function defined (PTX ISA, "Function Declarations and Definitions").
  std::string decls, vars, funcs, pragmas, aliases;
  std::set<std::string> declared_externs;
  std::map<std::string, std::pair<size_t, size_t>> var_group; // variable name → its statement
  std::vector<std::pair<size_t, size_t>> var_order;
  for (size_t ui = 0; ui < parsed.size(); ++ui) {
    const Unit& u = parsed[ui];
    for (size_t gi = 0; gi < u.groups.size(); ++gi) {
      const Group& g = u.groups[gi];
      bool mixed = false;
      const bool gone = group_dropped(ui, gi, mixed);
      if (mixed)
        return make_error(u.source->name +
                              ": a statement declares several variables of which some are "
                              "defined elsewhere; the emulated linker cannot split it",
                          CUDA_ERROR_INVALID_PTX);
      if (g.kind == Group::Kind::directive) {
        auto d = g.directive;
        if (d.starts_with(".file") || d.starts_with(".loc") || d.starts_with(".section")) {
          had_debug = true;
        } else if (d.starts_with(".alias")) {
          aliases += std::string(trim_end(span(u, g))) + "\n";
        } else {
          pragmas += std::string(trim_end(span(u, g))) + "\n";
        }
        continue;
      }
      if (g.kind == Group::Kind::variable) {
        if (gone) continue;
        var_order.push_back({ui, gi});
        for (const auto& d : u.decls) {
          if (d.group == gi) var_group[d.name] = {ui, gi};
        }
        continue;
      }
      // A function: one declaration per statement.
      const Decl* d = nullptr;
      size_t di = 0;
      for (; di < u.decls.size(); ++di) {
        if (u.decls[di].group == gi) {
          d = &u.decls[di];
          break;
        }
      }
      if (d == nullptr) continue;
      if (!d->defined) {
        if (driver_externs.contains(d->name) && declared_externs.insert(d->name).second)
          decls += std::string(trim_end(span(u, g))) + "\n";
        continue; // other declarations: the prototype of the definition stands for them
      }
      if (gone) continue;
      std::string body = without_line_info(span(u, g));
      const size_t open = body_open(body);
      if (open == std::string::npos)
        return make_error(u.source->name + ": the body of " + d->name + " was not found",
                          CUDA_ERROR_INVALID_PTX);
      if (!d->entry) decls += std::string(trim_end(std::string_view(body).substr(0, open))) + ";\n";
      if (d->entry && !uniform) {
        const CompileOptions o = effective(u);
        std::string directives;
        if (o.max_registers && d->fn->directive("maxnreg") == nullptr)
          directives += ".maxnreg " + std::to_string(o.max_registers) + "\n";
        if (o.threads_per_block && d->fn->directive("maxntid") == nullptr)
          directives += ".maxntid " + std::to_string(o.threads_per_block) + ", 1, 1\n";
        body.insert(open, directives);
      }
      funcs += std::string(trim_end(body)) + "\n\n";
    }
  }

  // Variables in an order where each initializer's symbols are declared before it.
  std::set<std::pair<size_t, size_t>> placed, visiting;
  std::function<void(std::pair<size_t, size_t>)> place = [&](std::pair<size_t, size_t> key) {
    if (placed.contains(key) || !visiting.insert(key).second) return;
    const Unit& u = parsed[key.first];
    for (const auto& d : u.decls) {
      if (d.group != key.second || d.var == nullptr || d.var->init.empty()) continue;
      scan_identifiers(d.var->init, [&](size_t b, size_t e) {
        auto it = var_group.find(std::string(d.var->init.substr(b, e - b)));
        if (it != var_group.end() && it->second != key) place(it->second);
      });
    }
    placed.insert(key);
    vars += std::string(trim_end(span(u, u.groups[key.second]))) + "\n";
  };
  for (const auto& key : var_order) place(key);

  text += decls + "\n" + vars + "\n" + pragmas + funcs + aliases;
  if (had_debug)
    out.info += "info    : debug and line information of the inputs is not carried into the "
                "linked module\n";
  auto check = ptx::parse(text, "linked module");
  if (!check)
    return make_error("internal error: the linked module does not parse: " + check.error().message,
                      CUDA_ERROR_INVALID_PTX);
  out.ptx = std::move(text);
  if (uniform) out.options = effective(parsed.front());
  return out;
}

Result<InputCode> link_input(int type, std::span<const uint8_t> bytes, const std::string& name,
                             uint32_t target) {
  InputCode out;
  auto ptx_unit = [&](std::string text, const std::string& unit_name) -> Result<LinkUnit> {
    LinkUnit u;
    u.name = unit_name;
    u.ptx = std::move(text);
    if (auto ok = check_link_unit(u, target); !ok) return ok.error();
    return u;
  };
  // The PTX a fatbin carries for `target`, as the module loader picks it (cuda::select_ptx).
  auto fatbin_ptx = [&](std::span<const uint8_t> fb,
                        const std::string& what) -> Result<std::string> {
    auto fatbin = cuda::parse_fatbin(fb);
    if (!fatbin)
      return make_error(what + ": bad fatbin: " + fatbin.error().message, CUDA_ERROR_INVALID_IMAGE);
    const cuda::FatbinEntry* entry = cuda::select_ptx(*fatbin, target);
    if (entry == nullptr) {
      std::vector<std::string> have;
      for (const auto& e : fatbin->entries) have.push_back(cuda::arch_name(e));
      return make_error(what + ": the fatbin carries no PTX for sm_" + std::to_string(target) +
                            " (it has: " + (have.empty() ? "nothing" : join(have, ", ")) +
                            "); the emulated device links PTX only",
                        CUDA_ERROR_NO_BINARY_FOR_GPU);
    }
    auto text = cuda::entry_ptx(*entry);
    if (!text)
      return make_error(what + ": cannot extract " + cuda::describe(*entry) + ": " +
                            text.error().message,
                        CUDA_ERROR_INVALID_IMAGE);
    return std::move(*text);
  };
  // A cubin: only the emulator's own linked images carry PTX.
  auto cubin_ptx = [&](std::span<const uint8_t> elf,
                       const std::string& what) -> Result<std::string> {
    auto linked = read_linked_image(elf);
    if (!linked)
      return make_error(what + ": bad cubin: " + linked.error().message, CUDA_ERROR_INVALID_IMAGE);
    if (!*linked)
      return make_error(what + ": a cubin holds SASS, which the emulated device can neither run "
                               "nor link; add its PTX instead (CU_JIT_INPUT_PTX, or a fatbin "
                               "built with -gencode arch=compute_90,code=compute_90)",
                        CUDA_ERROR_NO_BINARY_FOR_GPU);
    if ((*linked)->arch != target)
      return make_error(what + ": a linked image for sm_" + std::to_string((*linked)->arch) +
                            " cannot be linked for sm_" + std::to_string(target),
                        CUDA_ERROR_NO_BINARY_FOR_GPU);
    return std::move((*linked)->ptx);
  };
  // A host object: its device code is a fatbin, in `__nv_relfatbin` when nvcc compiled it as
  // relocatable device code (-rdc=true -c, what a link wants), in `.nv_fatbin` otherwise.
  auto object_ptx = [&](std::span<const uint8_t> obj,
                        const std::string& what) -> Result<std::string> {
    auto info = elf_info(obj);
    if (!info) return make_error(what + ": " + info.error().message, CUDA_ERROR_INVALID_IMAGE);
    if (info->machine == k_em_cuda) return cubin_ptx(obj, what);
    for (const char* name : {"__nv_relfatbin", ".nv_fatbin"}) {
      auto section = elf_section(obj, name);
      if (!section)
        return make_error(what + ": " + section.error().message, CUDA_ERROR_INVALID_IMAGE);
      if (*section) return fatbin_ptx(**section, what);
    }
    return make_error(what + ": the object carries no device code (no __nv_relfatbin or "
                             ".nv_fatbin section)",
                      CUDA_ERROR_NO_BINARY_FOR_GPU);
  };

  switch (type) {
  case CU_JIT_INPUT_PTX: {
    size_t n = 0;
    while (n < bytes.size() && bytes[n] != 0) ++n;
    auto u = ptx_unit(std::string(reinterpret_cast<const char*>(bytes.data()), n), name);
    if (!u) return u.error();
    out.units.push_back(std::move(*u));
    return out;
  }
  case CU_JIT_INPUT_FATBINARY:
  case CU_JIT_INPUT_CUBIN:
  case CU_JIT_INPUT_OBJECT: {
    Result<std::string> text = type == CU_JIT_INPUT_FATBINARY ? fatbin_ptx(bytes, name)
                               : type == CU_JIT_INPUT_CUBIN   ? cubin_ptx(bytes, name)
                                                              : object_ptx(bytes, name);
    if (!text) return text.error();
    auto u = ptx_unit(std::move(*text), name);
    if (!u) return u.error();
    out.units.push_back(std::move(*u));
    return out;
  }
  case CU_JIT_INPUT_LIBRARY: {
    auto list = read_archive(bytes);
    if (!list) return make_error(name + ": " + list.error().message, CUDA_ERROR_INVALID_IMAGE);
    for (const auto& m : *list) {
      const std::string what = name + "(" + m.name + ")";
      auto text = object_ptx(m.bytes, what);
      Result<LinkUnit> u = text ? ptx_unit(std::move(*text), what) : Result<LinkUnit>(text.error());
      if (!u) {
        out.notes += "info    : " + u.error().message + "; member left out\n";
        continue;
      }
      out.members.push_back(std::move(*u));
    }
    return out;
  }
  case CU_JIT_INPUT_NVVM:
    return make_error(name + ": LTO-IR (CU_JIT_INPUT_NVVM) cannot be linked by the emulated "
                             "device, which links PTX; give it PTX instead",
                      CUDA_ERROR_NOT_SUPPORTED);
  default:
    return make_error(name + ": unknown input type " + std::to_string(type),
                      CUDA_ERROR_INVALID_VALUE);
  }
}

} // namespace hone::emu
