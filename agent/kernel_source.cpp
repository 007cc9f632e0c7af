#include "agent/kernel_source.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>

#include <cerrno>
#include <cstring>

#include <unistd.h>

namespace hone::agent {

namespace {

// Deeper nesting than this is taken for an include cycle.
constexpr int k_max_include_depth = 16;

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_ident_char(char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

size_t ident_end(std::string_view s, size_t i) {
  while (i < s.size() && is_ident_char(s[i])) ++i;
  return i;
}

// The end of the literal opening with the quote at `i` (one past its closing quote), or of the
// line when it is not closed there.
size_t quoted_end(std::string_view s, size_t i) {
  char quote = s[i];
  size_t j = i + 1;
  while (j < s.size() && s[j] != quote && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
  return std::min(j + 1, s.size());
}

// `s` with comments, string and character literals and preprocessor directives blanked out
// (same length, newlines kept), so that a scan for declarations sees only code: a `{` in a string
// or a `__global__` in a comment or a #define cannot mislead it.
std::string code_only(std::string_view s) {
  std::string m(s);
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < m.size(); ++k) {
      if (m[k] != '\n') m[k] = ' ';
    }
  };
  bool line_start = true;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    char next = i + 1 < s.size() ? s[i + 1] : '\0';
    if (c == '\n') {
      line_start = true;
      ++i;
    } else if (is_space(c)) {
      ++i;
    } else if (line_start && c == '#') {
      // A directive runs to the end of the line, continued by backslash-newline.
      size_t j = i;
      while (j < s.size() && s[j] != '\n') j += (s[j] == '\\' && j + 1 < s.size()) ? 2 : 1;
      blank(i, j);
      i = j;
    } else if (c == '/' && next == '/') {
      size_t j = s.find('\n', i);
      if (j == std::string_view::npos) j = s.size();
      blank(i, j);
      i = j;
    } else if (c == '/' && next == '*') {
      size_t j = s.find("*/", i + 2);
      j = j == std::string_view::npos ? s.size() : j + 2;
      blank(i, j);
      i = j;
      line_start = false;
    } else if (c == '"' || c == '\'') {
      size_t j = quoted_end(s, i);
      // A raw string R"delim( ... )delim" (also u8R, uR, UR, LR): the identifier before the quote.
      size_t word = i;
      while (word > 0 && is_ident_char(s[word - 1])) --word;
      std::string_view prefix = s.substr(word, i - word);
      if (c == '"' && (prefix == "R" || prefix == "u8R" || prefix == "uR" || prefix == "UR" ||
                       prefix == "LR")) {
        size_t open = s.find('(', i);
        if (open != std::string_view::npos) {
          std::string close = ")" + std::string(s.substr(i + 1, open - i - 1)) + "\"";
          size_t end = s.find(close, open);
          j = end == std::string_view::npos ? s.size() : end + close.size();
        }
      }
      blank(i, j);
      i = j;
      line_start = false;
    } else if (is_digit(c)) {
      // A number, with its digit separators (1'000) that would otherwise open a char literal.
      size_t j = i + 1;
      while (j < s.size()) {
        if (is_ident_char(s[j]) || s[j] == '.') {
          ++j;
        } else if (s[j] == '\'' && j + 1 < s.size() && is_ident_char(s[j + 1])) {
          j += 2;
        } else if ((s[j] == '+' || s[j] == '-') &&
                   std::string_view("eEpP").find(s[j - 1]) != std::string_view::npos) {
          ++j;
        } else {
          break;
        }
      }
      i = j;
      line_start = false;
    } else if (is_ident_start(c)) {
      i = ident_end(s, i);
      line_start = false;
    } else {
      ++i;
      line_start = false;
    }
  }
  return m;
}

// The identifiers of `s`, in order.
std::vector<std::string_view> identifiers(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    if (is_ident_start(s[i]) && (i == 0 || !is_ident_char(s[i - 1]))) {
      size_t e = ident_end(s, i);
      out.push_back(s.substr(i, e - i));
      i = e;
    } else {
      ++i;
    }
  }
  return out;
}

bool contains(const std::vector<std::string_view>& words, std::string_view w) {
  return std::find(words.begin(), words.end(), w) != words.end();
}

// One past the bracket closing the one at `open`, counting only `open`'s kind; npos when unclosed.
size_t matching(std::string_view m, size_t open) {
  char o = m[open], c = o == '(' ? ')' : o == '[' ? ']' : '}';
  int depth = 0;
  for (size_t i = open; i < m.size(); ++i) {
    if (m[i] == o) ++depth;
    if (m[i] == c && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

// Qualifiers that do not change how a parameter's value is represented.
bool is_value_qualifier(std::string_view w) {
  return w == "const" || w == "volatile" || w == "__restrict__" || w == "__restrict" ||
         w == "__grid_constant__" || w == "register";
}

// Words that can only be part of a type: a parameter ending in one has no name.
bool is_type_keyword(std::string_view w) {
  static const std::set<std::string_view> k_words = {
      "void",  "bool",   "char", "short",   "int",      "long",     "signed", "unsigned",
      "float", "double", "auto", "wchar_t", "char16_t", "char32_t", "char8_t"};
  return k_words.count(w) != 0;
}

// The parameters written in `m[begin, end)` (masked text), with their text from `s`.
Result<std::vector<KernelParam>> split_params(std::string_view s, std::string_view m, size_t begin,
                                              size_t end) {
  std::vector<std::pair<size_t, size_t>> pieces;
  int depth = 0;
  size_t start = begin;
  for (size_t i = begin; i < end; ++i) {
    char c = m[i];
    if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
    if (c == ')' || c == ']' || c == '}' || c == '>') --depth;
    if (c == ',' && depth == 0) {
      pieces.emplace_back(start, i);
      start = i + 1;
    }
  }
  pieces.emplace_back(start, end);
  std::vector<KernelParam> out;
  if (pieces.size() == 1) {
    auto words = identifiers(m.substr(begin, end - begin));
    if (words.empty() || (words.size() == 1 && words[0] == "void")) return out; // () or (void)
  }
  for (size_t pi = 0; pi < pieces.size(); ++pi) {
    auto [a, b] = pieces[pi];
    while (a < b && is_space(m[a])) ++a;
    while (b > a && is_space(m[b - 1])) --b;
    std::string_view masked = m.substr(a, b - a);
    // Tokens: identifiers, `::`, and single punctuation characters.
    std::vector<std::string_view> tokens;
    for (size_t i = 0; i < masked.size();) {
      if (is_space(masked[i])) {
        ++i;
      } else if (is_ident_char(masked[i])) {
        size_t e = ident_end(masked, i);
        tokens.push_back(masked.substr(i, e - i));
        i = e;
      } else if (masked.substr(i, 2) == "::") {
        tokens.push_back(masked.substr(i, 2));
        i += 2;
      } else {
        tokens.push_back(masked.substr(i, 1));
        ++i;
      }
    }
    // The name is the last identifier, followed by nothing or by array extents.
    size_t name_at = tokens.size();
    for (size_t t = tokens.size(); t-- > 0;) {
      if (tokens[t] == "]" || tokens[t] == "[" || is_digit(tokens[t][0])) continue;
      if (is_ident_start(tokens[t][0])) name_at = t;
      break;
    }
    std::string where =
        "parameter " + std::to_string(pi + 1) + " (" + std::string(s.substr(a, b - a)) + ")";
    if (name_at == tokens.size())
      return make_error(where + " has a form this reader does not follow");
    size_t type_words = 0;
    for (size_t t = 0; t < name_at; ++t) {
      if (is_ident_start(tokens[t][0]) && !is_value_qualifier(tokens[t])) ++type_words;
    }
    if (type_words == 0 || is_type_keyword(tokens[name_at]) ||
        is_value_qualifier(tokens[name_at])) {
      return make_error(where + " has no name");
    }
    KernelParam p;
    p.text = std::string(s.substr(a, b - a));
    p.name = std::string(tokens[name_at]);
    for (size_t t = 0; t < name_at; ++t) {
      if (is_value_qualifier(tokens[t])) continue;
      bool word = is_ident_char(tokens[t][0]);
      if (word && !p.type.empty() && is_ident_char(p.type.back())) p.type += ' ';
      p.type += tokens[t];
    }
    out.push_back(std::move(p));
  }
  return out;
}

// What a `{` opens, judged by the declaration head before it.
struct Scope {
  enum class Kind { named_namespace, anonymous_namespace, linkage, other };
  Kind kind = Kind::other;
  std::vector<std::string> names; // a::b for `namespace a::b {`
};

Scope classify(std::string_view head) {
  auto words = identifiers(head);
  Scope s;
  size_t at = 0;
  if (!words.empty() && words[0] == "inline") at = 1;
  if (at < words.size() && words[at] == "namespace") {
    for (size_t i = at + 1; i < words.size(); ++i) s.names.emplace_back(words[i]);
    s.kind = s.names.empty() ? Scope::Kind::anonymous_namespace : Scope::Kind::named_namespace;
  } else if (words.size() == 1 && words[0] == "extern") {
    s.kind = Scope::Kind::linkage; // extern "C" { ... } (the string is blanked)
  }
  return s;
}

// The kernel a PTX entry name denotes: its namespaces and name, and whether it has C linkage.
struct EntryName {
  std::vector<std::string> namespaces;
  std::string name;
  bool c_linkage = true;
};

Result<EntryName> parse_entry(std::string_view entry) {
  EntryName out;
  if (!entry.starts_with("_Z")) {
    if (entry.empty() || !is_ident_start(entry[0]) || ident_end(entry, 0) != entry.size()) {
      return make_error("entry '" + std::string(entry) + "' is not a C identifier");
    }
    out.name = std::string(entry);
    return out;
  }
  out.c_linkage = false;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(std::string(entry).c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !demangled) {
    return make_error("entry '" + std::string(entry) + "' does not demangle");
  }
  std::string_view text = demangled.get();
  std::string_view qualified = text.substr(0, text.find('('));
  // Templates, anonymous namespaces and ABI tags cannot be named from outside: refuse them.
  for (char c : qualified) {
    if (!is_ident_char(c) && c != ':') {
      return make_error("kernel '" + std::string(text) +
                        "' is a template or in an unnamed scope: not resolved in the source");
    }
  }
  size_t from = 0;
  while (true) {
    size_t sep = qualified.find("::", from);
    std::string part(qualified.substr(from, sep == std::string_view::npos ? sep : sep - from));
    if (part.empty())
      return make_error("kernel '" + std::string(text) + "' has an empty name part");
    if (sep == std::string_view::npos) {
      out.name = std::move(part);
      break;
    }
    out.namespaces.push_back(std::move(part));
    from = sep + 2;
  }
  return out;
}

// A definition found by the scan, before it is matched against the entry.
struct Found {
  KernelDefinition def;
  bool c_linkage = false;
  std::string refusal; // why it cannot be used, when it cannot
};

// `text` with the headers of `source` it includes inlined; `once` holds the #pragma once headers
// already inlined.
Result<std::string> inline_into(std::string_view text, const proto::SourceInfo& source, int depth,
                                std::set<std::string>& once) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    std::string_view line = text.substr(pos, next - pos);
    pos = next;
    // #include "name" or #include <name>
    size_t i = skip_space(line, 0);
    std::string_view name;
    if (i < line.size() && line[i] == '#') {
      i = skip_space(line, i + 1);
      if (line.substr(i, 7) == "include") {
        i = skip_space(line, i + 7);
        if (i < line.size() && (line[i] == '"' || line[i] == '<')) {
          size_t close = line.find(line[i] == '"' ? '"' : '>', i + 1);
          if (close != std::string_view::npos) name = line.substr(i + 1, close - i - 1);
        }
      }
    }
    auto header = std::find_if(source.headers.begin(), source.headers.end(),
                               [&](const auto& h) { return !name.empty() && h.first == name; });
    if (header == source.headers.end()) {
      out += line;
      continue;
    }
    if (depth >= k_max_include_depth) {
      return make_error("headers include each other more than " +
                        std::to_string(k_max_include_depth) + " deep at \"" + std::string(name) +
                        "\" (a cycle without include guards?)");
    }
    std::string key(name);
    if (once.count(key)) {
      out += "// hone: \"" + key + "\" already inlined above (#pragma once)\n";
      continue;
    }
    // `#pragma once` means nothing in the one file the header becomes part of: honour it here.
    std::string contents = header->second;
    for (size_t at = 0; at < contents.size();) {
      size_t end = contents.find('\n', at);
      if (end == std::string::npos) end = contents.size();
      auto words = identifiers(std::string_view(contents).substr(at, end - at));
      std::string_view l = std::string_view(contents).substr(at, end - at);
      if (l.substr(skip_space(l, 0), 1) == "#" && words.size() == 2 && words[0] == "pragma" &&
          words[1] == "once") {
        once.insert(key);
        contents.replace(at, end - at, std::string(end - at, ' '));
      }
      at = end + 1;
    }
    auto inner = inline_into(contents, source, depth + 1, once);
    if (!inner) return inner.error();
    out += "// hone: inlined \"" + key + "\"\n" + *inner;
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += "// hone: end of \"" + key + "\"\n";
  }
  return out;
}

} // namespace

CandidateOptions nvrtc_candidate_options(const std::vector<std::string>& recorded) {
  CandidateOptions out;
  // Options that take their value as the next argument when written alone (NVRTC accepts both
  // `-I dir` and `-Idir`), and how the two are joined; one-token options stay as written.
  struct Pair {
    std::string_view flag, join;
  };
  static constexpr Pair k_pairs[] = {
      {"-I", "-I"},          {"--include-path", "--include-path="},
      {"-D", "-D"},          {"--define-macro", "--define-macro="},
      {"-U", "-U"},          {"--undefine-macro", "--undefine-macro="},
      {"-include", "--pre-include="}, {"--pre-include", "--pre-include="},
      {"-arch", "-arch="},   {"--gpu-architecture", "--gpu-architecture="},
      {"-std", "-std="},     {"--std", "--std="},
      {"-maxrregcount", "-maxrregcount="}, {"--maxrregcount", "--maxrregcount="},
      {"-o", "--output-file="},
  };
  for (size_t i = 0; i < recorded.size(); ++i) {
    std::string o = recorded[i];
    if (o.empty()) continue; // hashcat passes "" for options it leaves out
    for (const auto& p : k_pairs) {
      if (o == p.flag && i + 1 < recorded.size()) {
        o = std::string(p.join) + recorded[++i];
        break;
      }
    }
    // What a candidate does not make: LTO IR (-dlto makes nvrtcGetPTX fail), precompiled
    // headers and timing or other output files (they would be written beside honed).
    if (o == "-dlto" || o == "--dlink-time-opt" || o.starts_with("--dlink-time-opt=") ||
        o == "-pch" || o == "--pch" || o.starts_with("--create-pch") ||
        o.starts_with("--use-pch") || o.starts_with("--pch-dir") || o.starts_with("-time") ||
        o.starts_with("--time") || o.starts_with("-fdevice-time-trace") ||
        o.starts_with("--fdevice-time-trace") || o.starts_with("-split-compile") ||
        o.starts_with("--split-compile") || o == "-o" || o.starts_with("--output-file")) {
      out.dropped.push_back(std::move(o));
      continue;
    }
    if (o.starts_with("--include-path=")) {
      out.include_dirs.push_back(o.substr(15));
    } else if (o.starts_with("-I") && o.size() > 2) {
      out.include_dirs.push_back(o.substr(o[2] == '=' ? 3 : 2));
    }
    out.options.push_back(std::move(o));
  }
  return out;
}

std::optional<std::string> unreadable_include(const std::vector<std::string>& dirs) {
  for (const auto& d : dirs) {
    if (d.empty() || d.front() != '/') {
      return "include directory '" + d +
             "' is relative to the application's working directory, which honed does not know";
    }
    if (::access(d.c_str(), R_OK | X_OK) != 0) {
      return "include directory " + d + " cannot be read by honed (uid " +
             std::to_string(::geteuid()) + "): " + std::strerror(errno);
    }
  }
  return std::nullopt;
}

Result<std::string> inline_headers(const proto::SourceInfo& source) {
  std::set<std::string> once;
  return inline_into(source.source, source, 0, once);
}

Result<KernelDefinition> find_kernel(std::string_view source, std::string_view entry) {
  auto wanted = parse_entry(entry);
  if (!wanted) return wanted.error();
  const std::string m = code_only(source);
  std::vector<Scope> scopes;
  std::vector<Found> found;
  size_t stmt_start = 0;
  for (size_t i = 0; i < m.size();) {
    char c = m[i];
    if (is_digit(c)) { // a number: its letters (0x1f, 2.5e3f) are not identifiers
      i = ident_end(m, i);
      continue;
    }
    if (is_ident_start(c)) {
      size_t e = ident_end(m, i);
      size_t open = skip_space(m, e);
      std::string_view word(m.data() + i, e - i);
      if (word != wanted->name || open >= m.size() || m[open] != '(') {
        i = e;
        continue;
      }
      auto head = identifiers(std::string_view(m).substr(stmt_start, i - stmt_start));
      size_t close = matching(m, open);
      if (!contains(head, "__global__") || close == std::string_view::npos) {
        i = e;
        continue;
      }
      size_t body = skip_space(m, close);
      if (body >= m.size() || m[body] != '{') { // a declaration (or a form not followed)
        i = close;
        continue;
      }
      Found f;
      f.def.head_begin = stmt_start;
      f.def.name_begin = i;
      f.def.name_end = e;
      f.def.params_begin = open + 1;
      f.def.params_end = close - 1;
      f.c_linkage = contains(head, "extern");
      if (contains(head, "template")) f.refusal = "it is a template";
      for (const auto& s : scopes) {
        if (s.kind == Scope::Kind::named_namespace) {
          f.def.namespaces.insert(f.def.namespaces.end(), s.names.begin(), s.names.end());
        } else if (s.kind == Scope::Kind::anonymous_namespace) {
          f.refusal = "it is in an unnamed namespace";
        } else if (s.kind == Scope::Kind::linkage) {
          f.c_linkage = true;
        } else {
          f.refusal = "it is inside a class or a block";
        }
      }
      found.push_back(std::move(f));
      i = close;
      continue;
    }
    if (c == '{') {
      scopes.push_back(classify(std::string_view(m).substr(stmt_start, i - stmt_start)));
      stmt_start = i + 1;
    } else if (c == '}') {
      if (scopes.empty()) return make_error("the source has an unbalanced '}'");
      scopes.pop_back();
      stmt_start = i + 1;
    } else if (c == ';') {
      stmt_start = i + 1;
    }
    ++i;
  }

  // C names are global whatever the namespace; C++ names must sit in the demangled namespaces.
  std::vector<Found*> matches;
  for (auto& f : found) {
    if (f.c_linkage != wanted->c_linkage) continue;
    if (!wanted->c_linkage && f.def.namespaces != wanted->namespaces) continue;
    matches.push_back(&f);
  }
  std::string what = "__global__ " + std::string(entry);
  if (matches.empty()) {
    return make_error("no definition of " + what +
                      " in the source (declared through a macro, or defined elsewhere)");
  }
  if (matches.size() > 1) {
    return make_error(std::to_string(matches.size()) + " definitions match " + what +
                      " (overloads): not resolved in the source");
  }
  Found& f = *matches.front();
  if (!f.refusal.empty()) return make_error(what + ": " + f.refusal);
  auto params = split_params(source, m, f.def.params_begin, f.def.params_end);
  if (!params) return make_error(what + ": " + params.error().message);
  f.def.params = std::move(*params);
  return std::move(f.def);
}

Result<std::string> wrap_kernel(std::string_view source, const KernelDefinition& def,
                                std::string_view wrapper, std::string_view body_suffix,
                                const std::vector<std::optional<std::string>>& arguments) {
  if (arguments.size() != def.params.size()) {
    return make_error("wrap_kernel: " + std::to_string(arguments.size()) + " arguments for " +
                      std::to_string(def.params.size()) + " parameters");
  }
  const std::string m = code_only(source);
  if (contains(identifiers(m), wrapper)) {
    return make_error("the source already uses the name '" + std::string(wrapper) + "'");
  }
  struct Edit {
    size_t at, length;
    std::string text;
  };
  std::vector<Edit> edits;
  std::string kernel_attributes; // moved to the wrapper
  for (size_t i = def.head_begin; i < def.name_begin;) {
    if (!is_ident_start(m[i])) {
      ++i;
      continue;
    }
    size_t e = ident_end(m, i);
    std::string_view word(m.data() + i, e - i);
    if (word == "__global__") {
      edits.push_back({i, e - i, "__device__ __forceinline__"});
    } else if (word == "__launch_bounds__" || word == "__maxnreg__" || word == "__cluster_dims__") {
      size_t open = skip_space(m, e);
      size_t close = open < m.size() && m[open] == '(' ? matching(m, open) : std::string_view::npos;
      if (close == std::string_view::npos || close > def.name_begin) {
        return make_error(std::string(word) + " of the kernel is not followed by its arguments");
      }
      kernel_attributes += std::string(source.substr(i, close - i)) + " ";
      close = std::min(skip_space(m, close), def.name_begin); // and the space that followed it
      edits.push_back({i, close - i, ""});
      e = close;
    }
    i = e;
  }
  edits.push_back({def.name_begin, def.name_end - def.name_begin,
                   std::string(source.substr(def.name_begin, def.name_end - def.name_begin)) +
                       std::string(body_suffix)});
  // A device function's parameters cannot be __grid_constant__; the wrapper's keep it.
  for (size_t i = def.params_begin; i < def.params_end;) {
    if (!is_ident_start(m[i])) {
      ++i;
      continue;
    }
    size_t e = ident_end(m, i);
    if (std::string_view(m.data() + i, e - i) == "__grid_constant__")
      edits.push_back({i, e - i, ""});
    i = e;
  }
  std::string out(source);
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.at > b.at; });
  for (const auto& ed : edits) out.replace(ed.at, ed.length, ed.text);

  std::string body_name =
      std::string(source.substr(def.name_begin, def.name_end - def.name_begin)) +
      std::string(body_suffix);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "\n// hone: the kernel above, called with the values the application was seen to pass.\n";
  for (const auto& ns : def.namespaces) out += "namespace " + ns + " {\n";
  out += "extern \"C\" __global__ void " + kernel_attributes + std::string(wrapper) + "(";
  for (size_t i = 0; i < def.params.size(); ++i) out += (i ? ", " : "") + def.params[i].text;
  out += ")\n{\n  " + body_name + "(";
  for (size_t i = 0; i < def.params.size(); ++i) {
    out += i ? ", " : "";
    out += arguments[i] ? *arguments[i] : def.params[i].name;
  }
  out += ");\n}\n";
  for (size_t i = 0; i < def.namespaces.size(); ++i) out += "}\n";
  return out;
}

} // namespace hone::agent
