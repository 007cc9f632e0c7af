#include "agent/llm_answer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <set>
#include <unordered_map>
#include <vector>

namespace hone::agent {

namespace {

using json = nlohmann::json;

// Characters per token, for an estimate when the server reports no usage.
constexpr uint64_t k_bytes_per_token = 4;
// No chat completion nests this deep; a reply that does is refused before anything copies or
// prints it (nlohmann's parser and destructor are iterative, its copy and dump recurse).
constexpr int k_max_reply_depth = 64;

Error reply_error(std::string message) {
  return make_error(std::move(message), static_cast<int>(ChatFailure::reply));
}

// message.tool_calls as servers send them: arguments as JSON text (OpenAI, vLLM, SGLang,
// llama-server) or as an object (Ollama), ids sometimes missing.
std::vector<ToolCall> tool_calls_of(const json& message) {
  std::vector<ToolCall> out;
  auto calls = message.find("tool_calls");
  if (calls == message.end() || !calls->is_array()) return out;
  for (const auto& c : *calls) {
    if (!c.is_object()) continue;
    auto f = c.find("function");
    if (f == c.end() || !f->is_object()) continue;
    auto name = f->find("name");
    if (name == f->end() || !name->is_string()) continue;
    ToolCall call;
    call.name = name->get<std::string>();
    auto args = f->find("arguments");
    if (args == f->end()) {
      call.arguments = "null";
    } else {
      call.arguments = args->is_string() ? args->get<std::string>() : args->dump();
    }
    auto id = c.find("id");
    if (id != c.end() && id->is_string()) call.id = id->get<std::string>();
    if (call.id.empty()) call.id = "call_" + std::to_string(out.size() + 1);
    out.push_back(std::move(call));
  }
  return out;
}

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

struct Kernel {
  std::string name;
  size_t global_at = 0; // where its `__global__` is
  bool extern_c = false;
  bool templated = false;
};

// A reply defining more kernels than this in one block is refused: no answer needs them, and a
// bound keeps the search linear however the reply repeats one kernel's head.
constexpr size_t k_max_kernels_per_block = 64;
// Code larger than this is not searched (the index takes some 40 bytes per byte of code).
constexpr size_t k_max_code_bytes = size_t(64) << 20;

// What the kernel search asks about a piece of code, each answer found in one pass over it. The
// search used to scan from each `__global__`, `extern "C"` and `main` towards the end or the start
// of the code: a reply of a few hundred kilobytes that repeats them took minutes of CPU (issue 33,
// found while fuzzing). Brackets, braces and keywords in comments and strings count too: good
// enough for kernels.
class CodeIndex {
public:
  explicit CodeIndex(std::string_view code) : m_code(code) {
    const size_t n = code.size();
    m_close.assign(n, k_none);
    m_next_semicolon_or_brace.assign(n + 1, k_none);
    m_next_stop.assign(n + 1, k_none);
    m_last_separator.assign(n, k_none);
    m_last_ident.assign(n + 1, k_none);
    m_ident_start.assign(n, k_none);
    m_last_extern_c.assign(n, k_none);
    m_last_template.assign(n, k_none);
    std::vector<int32_t> cover(n + 1, 0);
    std::vector<uint32_t> parens, braces;
    uint32_t separator = k_none, ident = k_none, extern_c = k_none, templ = k_none;
    for (size_t i = 0; i < n; ++i) {
      const char c = code[i];
      if (c == '(') parens.push_back(uint32_t(i));
      if (c == ')' && !parens.empty()) {
        m_close[parens.back()] = uint32_t(i);
        parens.pop_back();
      }
      if (c == '{') braces.push_back(uint32_t(i));
      if (c == '}' && !braces.empty()) {
        m_close[braces.back()] = uint32_t(i);
        braces.pop_back();
      }
      if (c == ';' || c == '{' || c == '}') separator = uint32_t(i);
      m_last_separator[i] = separator;
      m_last_ident[i] = ident; // the last identifier character before i
      if (ident_char(c)) {
        m_ident_start[i] = i > 0 && ident_char(code[i - 1]) ? m_ident_start[i - 1] : uint32_t(i);
        ident = uint32_t(i);
      }
      if (code.substr(i, 10) == "extern \"C\"") extern_c = uint32_t(i);
      if (code.substr(i, 8) == "template") templ = uint32_t(i);
      m_last_extern_c[i] = extern_c;
      m_last_template[i] = templ;
    }
    m_last_ident[n] = ident;
    for (size_t i = n; i-- > 0;) {
      const char c = code[i];
      m_next_semicolon_or_brace[i] =
          c == ';' || c == '{' ? uint32_t(i) : m_next_semicolon_or_brace[i + 1];
      m_next_stop[i] = c == ';' || c == '{' || c == '}' || c == '(' ? uint32_t(i) : m_next_stop[i + 1];
    }
    // extern "C" { ... } blocks: from their brace to the brace closing it (or the end).
    for (size_t at = code.find("extern \"C\""); at != std::string_view::npos;
         at = code.find("extern \"C\"", at + 1)) {
      size_t brace = code.find_first_not_of(" \t\r\n", at + 10);
      if (brace == std::string_view::npos || code[brace] != '{') continue;
      size_t close = matching(brace);
      ++cover[brace];
      --cover[close == std::string_view::npos ? n : close];
    }
    m_in_extern_c.assign(n, false);
    int32_t depth = 0;
    for (size_t i = 0; i < n; ++i) m_in_extern_c[i] = (depth += cover[i]) > 0;
  }

  // The bracket closing the `(` or `{` at `open` (counting only its own kind), or npos.
  size_t matching(size_t open) const { return pos(m_close[open]); }
  // The first `;` or `{` at or after `at`, or npos.
  size_t next_semicolon_or_brace(size_t at) const {
    return pos(m_next_semicolon_or_brace[std::min(at, m_code.size())]);
  }
  // Where the declaration holding `at` starts: after the last `;`, `}` or `{` before it.
  size_t declaration_start(size_t at) const {
    if (m_code.empty()) return 0;
    const uint32_t b = m_last_separator[std::min(at == 0 ? 0 : at - 1, m_code.size() - 1)];
    return b == k_none ? 0 : size_t(b) + 1;
  }
  // Whether [begin, end) holds `extern "C"`, or `template`.
  bool has_extern_c(size_t begin, size_t end) const { return holds(m_last_extern_c, 10, begin, end); }
  bool has_template(size_t begin, size_t end) const { return holds(m_last_template, 8, begin, end); }
  // Whether `at` is inside an `extern "C" { ... }` block (or one left open).
  bool in_extern_c_block(size_t at) const { return at < m_code.size() && m_in_extern_c[at]; }

  // The head of a function declared from `from` on: the first `(` before any `;`, `{` or `}`,
  // skipping __launch_bounds__(...) and other parenthesized attributes, and the identifier just
  // before it. params is npos when there is none.
  struct Head {
    size_t params = std::string_view::npos;
    std::string_view name;
  };
  Head head(size_t from) const {
    // Several __global__ can lead to the same attribute's end: each segment is resolved once.
    std::vector<size_t> chain;
    Head result;
    for (size_t s = from;;) {
      if (auto it = m_heads.find(s); it != m_heads.end()) {
        result = it->second;
        break;
      }
      chain.push_back(s);
      const size_t j = pos(m_next_stop[std::min(s, m_code.size())]);
      if (j == std::string_view::npos || m_code[j] != '(') break;
      // The last identifier of the segment; it cannot begin before `s`, which follows
      // `__global__` or a `)`, and holds no identifier character itself unless it starts one.
      std::string_view name;
      const uint32_t e = m_last_ident[j];
      if (e != k_none && e >= s) name = m_code.substr(m_ident_start[e], e + 1 - m_ident_start[e]);
      if (name == "__launch_bounds__" || name == "__attribute__" || name == "__declspec" ||
          name == "alignas") {
        const size_t close = matching(j);
        if (close == std::string_view::npos) break;
        s = close + 1;
        continue;
      }
      result = {j, name};
      break;
    }
    for (size_t s : chain) m_heads.emplace(s, result);
    return result;
  }

private:
  static constexpr uint32_t k_none = UINT32_MAX;
  static size_t pos(uint32_t p) { return p == k_none ? std::string_view::npos : size_t(p); }

  // Does [begin, end) hold a whole occurrence (of `length` bytes) whose last start is in `last`?
  bool holds(const std::vector<uint32_t>& last, size_t length, size_t begin, size_t end) const {
    if (end > m_code.size() || end < begin + length) return false;
    const uint32_t at = last[end - length];
    return at != k_none && at >= begin;
  }

  std::string_view m_code;
  std::vector<uint32_t> m_close;                  // for `(` and `{`: where it closes
  std::vector<uint32_t> m_next_semicolon_or_brace; // first `;` or `{` at or after i
  std::vector<uint32_t> m_next_stop;               // first `;`, `{`, `}` or `(` at or after i
  std::vector<uint32_t> m_last_separator;          // last `;`, `{` or `}` at or before i
  std::vector<uint32_t> m_last_ident;              // last identifier character before i
  std::vector<uint32_t> m_ident_start;             // where the identifier holding i starts
  std::vector<uint32_t> m_last_extern_c;           // last `extern "C"` starting at or before i
  std::vector<uint32_t> m_last_template;           // last `template` starting at or before i
  std::vector<bool> m_in_extern_c;
  mutable std::unordered_map<size_t, Head> m_heads;
};

// The __global__ functions `code` defines (declarations alone are skipped), at most
// k_max_kernels_per_block + 1 of them (the caller refuses more than the limit).
std::vector<Kernel> kernels_of(std::string_view code) {
  std::vector<Kernel> out;
  if (code.size() > k_max_code_bytes) return out;
  const CodeIndex index(code);
  for (size_t at = code.find("__global__"); at != std::string_view::npos;
       at = code.find("__global__", at + 1)) {
    if ((at > 0 && ident_char(code[at - 1])) ||
        (at + 10 < code.size() && ident_char(code[at + 10]))) {
      continue;
    }
    // The name: the last identifier before the parameter list's `(`.
    const CodeIndex::Head head = index.head(at + 10);
    if (head.params == std::string_view::npos || head.name.empty()) continue;
    size_t close = index.matching(head.params);
    if (close == std::string_view::npos) continue;
    size_t body = index.next_semicolon_or_brace(close);
    if (body == std::string_view::npos || code[body] != '{') continue; // a declaration
    Kernel k;
    k.name = std::string(head.name);
    k.global_at = at;
    const size_t start = index.declaration_start(at);
    k.extern_c = index.has_extern_c(start, at) || index.in_extern_c_block(at);
    k.templated = index.has_template(start, at);
    out.push_back(std::move(k));
    if (out.size() > k_max_kernels_per_block) break;
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
  if (code.size() > k_max_code_bytes) return false;
  const CodeIndex index(code);
  // Brace depth at `at`, counted as the search moves forward (it only does).
  int depth = 0;
  size_t counted = 0;
  auto depth_at = [&](size_t at) {
    for (; counted < at && counted < code.size(); ++counted) {
      depth += code[counted] == '{' ? 1 : code[counted] == '}' ? -1 : 0;
    }
    return depth;
  };
  for (size_t at = code.find("main"); at != std::string::npos; at = code.find("main", at + 1)) {
    if ((at > 0 && ident_char(code[at - 1])) || (at + 4 < code.size() && ident_char(code[at + 4])))
      continue;
    size_t paren = code.find_first_not_of(" \t\r\n", at + 4);
    if (paren == std::string::npos || code[paren] != '(' || depth_at(at) != 0) continue;
    size_t close = index.matching(paren);
    if (close == std::string::npos) continue;
    size_t brace = index.next_semicolon_or_brace(close);
    if (brace == std::string::npos || code[brace] != '{') continue;
    size_t end = index.matching(brace);
    if (end == std::string::npos) continue;
    size_t begin = index.declaration_start(at);
    code.erase(begin, end + 1 - begin);
    return true;
  }
  return false;
}

} // namespace

Result<ChatReply> parse_chat_reply(std::string_view body, uint32_t samples,
                                   uint64_t request_bytes) {
  int deepest = 0;
  const json::parser_callback_t depth = [&](int d, json::parse_event_t, json&) {
    deepest = std::max(deepest, d);
    return true;
  };
  const json reply = json::parse(body.begin(), body.end(), depth, false);
  if (reply.is_discarded()) return reply_error("the reply is not JSON");
  if (deepest > k_max_reply_depth) {
    return reply_error("the reply nests JSON deeper than " + std::to_string(k_max_reply_depth) +
                       " levels: not a chat completion");
  }
  const json* content = nullptr;
  const json* choices = nullptr;
  const json* choice = nullptr;
  const json* message = nullptr;
  size_t reasoning_bytes = 0;
  if (reply.is_object()) {
    auto list = reply.find("choices");
    if (list != reply.end() && list->is_array() && !list->empty() && (*list)[0].is_object()) {
      choices = &*list;
      choice = &(*list)[0];
      auto m = choice->find("message");
      if (m != choice->end() && m->is_object()) {
        message = &*m;
        auto c = message->find("content");
        if (c != message->end() && c->is_string()) content = &*c;
        // Reasoning models' thinking (vLLM and SGLang: reasoning_content; Ollama and some
        // hosted APIs: reasoning): read, measured, never sent back.
        for (const char* field : {"reasoning_content", "reasoning"}) {
          auto r = message->find(field);
          if (r != message->end() && r->is_string()) {
            reasoning_bytes += r->get_ref<const std::string&>().size();
          }
        }
      }
    }
  }
  ChatReply out;
  if (message) out.tool_calls = tool_calls_of(*message);
  if (!content && !reasoning_bytes && out.tool_calls.empty()) {
    return reply_error("the reply has no choices[0].message.content");
  }
  out.reasoning_bytes = reasoning_bytes;
  for (size_t i = 1; i < choices->size() && i < samples; ++i) {
    const json& other = (*choices)[i];
    auto m = other.find("message");
    if (m == other.end() || !m->is_object()) continue;
    auto c = m->find("content");
    if (c != m->end() && c->is_string()) out.more_choices.push_back(c->get<std::string>());
  }
  out.content = content ? content->get<std::string>() : std::string();
  auto finish = choice->find("finish_reason");
  out.truncated = finish != choice->end() && finish->is_string() && *finish == "length";
  out.total_tokens = (request_bytes + out.content.size()) / k_bytes_per_token;
  if (auto usage = reply.find("usage"); usage != reply.end() && usage->is_object()) {
    auto total = usage->find("total_tokens");
    if (total != usage->end() && total->is_number_unsigned()) {
      out.total_tokens = total->get<uint64_t>();
    }
  }
  return out;
}

Result<std::string> tool_call_source(std::string_view arguments) {
  const json args = json::parse(arguments.begin(), arguments.end(), nullptr, false);
  auto source = args.find("source"); // end() for anything but an object
  if (source == args.end() || !source->is_string()) {
    return make_error("the arguments must be a JSON object {\"source\": \"...\"} holding the "
                      "complete CUDA source");
  }
  std::string text = source->get<std::string>();
  if (text.find("```") == std::string::npos) text = "```cuda\n" + text + "\n```\n";
  return text;
}

std::string strip_reasoning(std::string_view content) {
  // Reasoning whose opening tag the chat template put in the prompt: only the close shows.
  size_t close = content.find("</think>");
  size_t open = content.find("<think>");
  if (close != std::string_view::npos && (open == std::string_view::npos || close < open)) {
    content.remove_prefix(close + 8);
  }
  // The text between the blocks, copied once (erasing each block in place was quadratic).
  std::string out;
  for (size_t at = 0;;) {
    open = content.find("<think>", at);
    if (open == std::string_view::npos) {
      out.append(content.substr(at));
      break;
    }
    out.append(content.substr(at, open - at));
    close = content.find("</think>", open);
    if (close == std::string_view::npos) break; // cut off while thinking
    at = close + 8;
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
    auto kernels = kernels_of(block.code);
    if (kernels.size() > k_max_kernels_per_block) {
      return make_error("a code block defines more than " +
                        std::to_string(k_max_kernels_per_block) +
                        " kernels: send the one kernel asked for");
    }
    for (auto& k : kernels) found.push_back({b, std::move(k)});
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
