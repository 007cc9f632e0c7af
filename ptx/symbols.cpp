#include "ptx/symbols.hpp"

#include <vector>

namespace hone::ptx {

namespace {

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c == '.' || c == '%';
}

bool is_name(std::string_view t) {
  if (t.empty() || t[0] == '.' || (t[0] >= '0' && t[0] <= '9')) return false;
  return token_char(t[0]);
}

bool has(const std::vector<std::string_view>& tokens, std::string_view t) {
  for (auto x : tokens) {
    if (x == t) return true;
  }
  return false;
}

// One module-scope statement: its tokens up to the `;` or `{` that ended it.
void statement(const std::vector<std::string_view>& t, bool body, ModuleSymbols& out) {
  if (t.empty()) return;
  const bool is_extern = has(t, ".extern");
  if (has(t, ".entry")) {
    for (size_t i = 0; i + 1 < t.size(); ++i) {
      if (t[i] == ".entry" && is_name(t[i + 1])) {
        if (body) out.entries.emplace(t[i + 1]);
        return;
      }
    }
    return;
  }
  if (has(t, ".func")) {
    size_t i = 0;
    while (i < t.size() && t[i] != ".func") ++i;
    ++i;
    if (i < t.size() && t[i] == "(") { // the return parameters
      int depth = 0;
      for (; i < t.size(); ++i) {
        if (t[i] == "(") ++depth;
        if (t[i] == ")" && --depth == 0) {
          ++i;
          break;
        }
      }
    }
    if (i >= t.size() || !is_name(t[i])) return;
    if (body) {
      out.functions.emplace(t[i]);
    } else if (is_extern) {
      out.extern_funcs.emplace(t[i]);
    }
    return;
  }
  const bool global = has(t, ".global") || has(t, ".const");
  if (!global) return;
  // The name is the last one before an initializer or an array bound.
  std::string_view name;
  for (auto x : t) {
    if (x == "=" || x == "[") break;
    if (is_name(x)) name = x;
  }
  if (name.empty()) return;
  if (is_extern) {
    out.extern_vars.emplace(name);
  } else {
    out.variables.emplace(name);
  }
}

} // namespace

ModuleSymbols module_symbols(std::string_view text) {
  ModuleSymbols out;
  std::vector<std::string_view> tokens;
  int depth = 0;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? n : end + 2;
      continue;
    }
    if (c == '"') {
      size_t end = text.find('"', i + 1);
      i = end == std::string_view::npos ? n : end + 1;
      continue;
    }
    if (c == '\0') break;
    if (token_char(c)) {
      size_t start = i;
      while (i < n && token_char(text[i])) ++i;
      if (depth == 0) tokens.push_back(text.substr(start, i - start));
      continue;
    }
    ++i;
    if (c == '{') {
      if (depth++ == 0) {
        statement(tokens, true, out);
        tokens.clear();
      }
    } else if (c == '}') {
      if (depth > 0 && --depth == 0) tokens.clear();
    } else if (depth == 0) {
      if (c == ';') {
        statement(tokens, false, out);
        tokens.clear();
      } else if (c == '(' || c == ')' || c == '=' || c == '[') {
        tokens.push_back(text.substr(i - 1, 1));
      }
    }
  }
  return out;
}

} // namespace hone::ptx
