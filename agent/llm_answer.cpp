#include "agent/llm_answer.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

namespace hone::agent {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  const char* space = " \t\r";
  size_t b = s.find_first_not_of(space);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(space) - b + 1);
}

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

struct Block {
  std::string language;
  std::string code;
};

// The fenced blocks of `reply`; an error for one left open.
Result<std::vector<Block>> fenced_blocks(std::string_view reply) {
  std::vector<Block> blocks;
  bool open = false;
  size_t start = 0;
  while (start <= reply.size()) {
    size_t nl = reply.find('\n', start);
    std::string_view line =
        reply.substr(start, nl == std::string_view::npos ? reply.npos : nl - start);
    start = nl == std::string_view::npos ? reply.size() + 1 : nl + 1;
    std::string_view bare = trim(line);
    if (bare.substr(0, 3) == "```") {
      if (!open) {
        open = true;
        std::string_view info = trim(bare.substr(3));
        blocks.push_back({lower(info.substr(0, info.find_first_of(" \t{"))), {}});
      } else if (trim(bare.substr(3)).empty()) {
        open = false;
      }
      continue;
    }
    if (open) blocks.back().code.append(line).append("\n");
  }
  if (open) return make_error("the fenced code block is not closed");
  return blocks;
}

// The index of the bracket closing the one at `open` (`(`/`)` or `{`/`}`), or npos.
size_t matching(std::string_view s, size_t open) {
  const char o = s[open], c = o == '(' ? ')' : '}';
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == o) ++depth;
    if (s[i] == c && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// Brace depth at `pos` (braces in comments and strings count too: good enough for kernels).
int depth_at(std::string_view s, size_t pos) {
  int d = 0;
  for (size_t i = 0; i < pos && i < s.size(); ++i) d += s[i] == '{' ? 1 : s[i] == '}' ? -1 : 0;
  return d;
}

struct Kernel {
  std::string name;
  size_t global_at = 0; // where its `__global__` is
  bool extern_c = false;
  bool templated = false;
};

// Where the declaration holding `pos` starts: after the last `;`, `}` or `{` before it, or at a
// preprocessor line.
size_t declaration_start(std::string_view code, size_t pos) {
  size_t b = code.find_last_of(";{}", pos == 0 ? 0 : pos - 1);
  return b == std::string_view::npos ? 0 : b + 1;
}

// Is `pos` inside an `extern "C" { ... }` block?
bool in_extern_c_block(std::string_view code, size_t pos) {
  for (size_t at = code.find("extern \"C\""); at != std::string_view::npos && at < pos;
       at = code.find("extern \"C\"", at + 1)) {
    size_t brace = code.find_first_not_of(" \t\r\n", at + 10);
    if (brace == std::string_view::npos || code[brace] != '{' || brace > pos) continue;
    size_t close = matching(code, brace);
    if (close == std::string_view::npos || close > pos) return true;
  }
  return false;
}

// The __global__ functions `code` defines (declarations alone are skipped).
std::vector<Kernel> kernels_of(std::string_view code) {
  std::vector<Kernel> out;
  for (size_t at = code.find("__global__"); at != std::string_view::npos;
       at = code.find("__global__", at + 1)) {
    if ((at > 0 && ident_char(code[at - 1])) ||
        (at + 10 < code.size() && ident_char(code[at + 10]))) {
      continue;
    }
    // The name: the last identifier before the parameter list's `(`, skipping
    // __launch_bounds__(...) and other parenthesized attributes.
    std::string last;
    size_t i = at + 10, params = std::string_view::npos;
    while (i < code.size()) {
      char c = code[i];
      if (c == ';' || c == '{' || c == '}') break;
      if (ident_char(c)) {
        size_t b = i;
        while (i < code.size() && ident_char(code[i])) ++i;
        last = std::string(code.substr(b, i - b));
        continue;
      }
      if (c == '(') {
        if (last == "__launch_bounds__" || last == "__attribute__" || last == "__declspec" ||
            last == "alignas") {
          size_t close = matching(code, i);
          if (close == std::string_view::npos) break;
          i = close + 1;
          last.clear();
          continue;
        }
        params = i;
        break;
      }
      ++i;
    }
    if (params == std::string_view::npos || last.empty()) continue;
    size_t close = matching(code, params);
    if (close == std::string_view::npos) continue;
    size_t body = code.find_first_of(";{", close);
    if (body == std::string_view::npos || code[body] != '{') continue; // a declaration
    Kernel k;
    k.name = last;
    k.global_at = at;
    std::string_view prefix = code.substr(declaration_start(code, at), at - declaration_start(code, at));
    k.extern_c = prefix.find("extern \"C\"") != std::string_view::npos || in_extern_c_block(code, at);
    k.templated = prefix.find("template") != std::string_view::npos;
    out.push_back(std::move(k));
  }
  return out;
}

// Headers of the host side that NVRTC neither has nor needs for device code.
const std::set<std::string>& host_headers() {
  static const std::set<std::string> h = {
      "cuda_runtime.h", "cuda_runtime_api.h", "cuda.h",   "device_launch_parameters.h",
      "stdio.h",        "cstdio",             "stdlib.h", "cstdlib",
      "iostream",       "vector",             "chrono",   "cassert",
      "assert.h",       "cstring",            "string.h", "string",
      "random",         "iomanip",            "fstream",  "sstream"};
  return h;
}

// `code` without `#include <h>` lines of host headers; the headers dropped go to `dropped`.
std::string drop_host_includes(const std::string& code, std::vector<std::string>& dropped) {
  std::string out;
  size_t start = 0;
  while (start < code.size()) {
    size_t nl = code.find('\n', start);
    size_t end = nl == std::string::npos ? code.size() : nl + 1;
    std::string_view line(code.data() + start, end - start);
    std::string_view bare = trim(line);
    bool drop = false;
    if (bare.substr(0, 1) == "#") {
      std::string_view rest = trim(bare.substr(1));
      if (rest.substr(0, 7) == "include") {
        rest = trim(rest.substr(7));
        if (rest.size() > 2 && rest.front() == '<') {
          std::string name(rest.substr(1, rest.find('>') - 1));
          if (host_headers().count(name)) {
            drop = true;
            dropped.push_back("<" + name + ">");
          }
        }
      }
    }
    if (!drop) out.append(line);
    start = end;
  }
  return out;
}

// `code` without a top-level main() definition; true when one was dropped.
bool drop_main(std::string& code) {
  for (size_t at = code.find("main"); at != std::string::npos; at = code.find("main", at + 1)) {
    if ((at > 0 && ident_char(code[at - 1])) || (at + 4 < code.size() && ident_char(code[at + 4])))
      continue;
    size_t paren = code.find_first_not_of(" \t\r\n", at + 4);
    if (paren == std::string::npos || code[paren] != '(' || depth_at(code, at) != 0) continue;
    size_t close = matching(code, paren);
    if (close == std::string::npos) continue;
    size_t brace = code.find_first_of(";{", close);
    if (brace == std::string::npos || code[brace] != '{') continue;
    size_t end = matching(code, brace);
    if (end == std::string::npos) continue;
    size_t begin = declaration_start(code, at);
    code.erase(begin, end + 1 - begin);
    return true;
  }
  return false;
}

} // namespace

std::string strip_reasoning(std::string_view content) {
  std::string out(content);
  // Reasoning whose opening tag the chat template put in the prompt: only the close shows.
  size_t close = out.find("</think>");
  size_t open = out.find("<think>");
  if (close != std::string::npos && (open == std::string::npos || close < open)) {
    out.erase(0, close + 8);
  }
  for (open = out.find("<think>"); open != std::string::npos; open = out.find("<think>", open)) {
    close = out.find("</think>", open);
    if (close == std::string::npos) {
      out.erase(open); // cut off while thinking
      break;
    }
    out.erase(open, close + 8 - open);
  }
  return out;
}

Result<Answer> extract_answer(std::string_view reply, std::string_view wanted,
                              std::string_view original) {
  static const std::set<std::string> k_languages = {"", "cuda", "cu", "cpp", "c++", "cxx", "c"};
  auto blocks = fenced_blocks(reply);
  if (!blocks) return blocks.error();
  if (blocks->empty()) return make_error("the reply holds no fenced code block");

  // Every kernel of every CUDA block, with its block.
  struct Found {
    size_t block;
    Kernel kernel;
  };
  std::vector<Found> found;
  size_t cuda_blocks = 0;
  std::string other_languages;
  for (size_t b = 0; b < blocks->size(); ++b) {
    const Block& block = (*blocks)[b];
    if (!k_languages.count(block.language)) {
      other_languages += (other_languages.empty() ? "'" : ", '") + block.language + "'";
      continue;
    }
    ++cuda_blocks;
    for (auto& k : kernels_of(block.code)) found.push_back({b, std::move(k)});
  }
  if (!cuda_blocks) {
    return make_error("the reply holds no CUDA code block (only blocks marked " + other_languages +
                      ")");
  }
  if (found.empty()) {
    return make_error("no code block defines a __global__ kernel (asked for: extern \"C\" "
                      "__global__ void " + std::string(wanted) + "(...) { ... })");
  }
  // The kernel: by the name asked for, by the original's name, or the only one. Where several
  // blocks define it, the last (a model's corrected version comes after the first).
  const Found* pick = nullptr;
  for (std::string_view name : {wanted, original}) {
    for (const auto& f : found) {
      if (!name.empty() && f.kernel.name == name) pick = &f;
    }
    if (pick) break;
  }
  std::set<std::string> names;
  for (const auto& f : found) names.insert(f.kernel.name);
  if (!pick && names.size() == 1) pick = &found.back();
  if (!pick) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return make_error("the reply defines " + std::to_string(names.size()) + " kernels (" + list +
                      ") and none is named " + std::string(wanted) +
                      ": name the one to use " + std::string(wanted));
  }

  Answer out;
  out.entry = pick->kernel.name;
  std::vector<std::string> changes;
  if (out.entry != wanted) changes.push_back("the kernel is " + out.entry);
  size_t defining = 0;
  for (const auto& f : found) defining += f.kernel.name == out.entry;
  if (defining > 1) {
    changes.push_back("the last of " + std::to_string(defining) + " blocks defining it");
  }
  std::string code = (*blocks)[pick->block].code;
  if (drop_main(code)) changes.push_back("its host main() dropped");
  std::vector<std::string> dropped;
  code = drop_host_includes(code, dropped);
  if (!dropped.empty()) {
    std::string list;
    for (const auto& d : dropped) list += (list.empty() ? "" : " ") + d;
    changes.push_back("host headers dropped (" + list + ")");
  }
  // What is left must be device code: NVRTC compiles no host calls, and a launch is the caller's.
  for (const char* host : {"cudaMalloc", "cudaMemcpy", "cudaFree", "cudaDeviceSynchronize",
                           "cudaEvent", "<<<", "std::cout", "std::vector"}) {
    if (code.find(host) != std::string::npos) {
      return make_error("the code holds host code (" + std::string(host) +
                        ") outside main(): send the kernel and its device functions only, "
                        "without a harness");
    }
  }
  // Find the kernel again in what is left, and give it C linkage when it lacks it.
  auto left = kernels_of(code);
  auto it = std::find_if(left.begin(), left.end(),
                         [&](const Kernel& k) { return k.name == out.entry; });
  if (it == left.end()) {
    return make_error("the kernel " + out.entry + " could not be found again after dropping "
                      "the host code");
  }
  if (!it->extern_c) {
    if (it->templated) {
      return make_error("the kernel " + out.entry + " is a template: a template has no name to "
                        "launch; write a plain extern \"C\" __global__ kernel");
    }
    // The last definition: the one kernels_of() and the pick agree on.
    const Kernel* last = nullptr;
    for (const auto& k : left) {
      if (k.name == out.entry) last = &k;
    }
    code.insert(last->global_at, "extern \"C\" ");
    changes.push_back("extern \"C\" added");
  }
  out.code = std::move(code);
  for (const auto& c : changes) out.changes += (out.changes.empty() ? "" : "; ") + c;
  return out;
}

} // namespace hone::agent
