// The LLM strategy: a session per kernel that asks a model for a faster hone_candidate kernel,
// hands each answer over as a CUDA candidate, and feeds the verdict back for the next turn.
//
// A session's conversation runs on its own thread; poll(), on_verdict() and state() only touch
// what the mutex guards, so the daemon's thread never waits for the network.
#include "agent/kernel_ptx.hpp"
#include "agent/kernel_source.hpp"
#include "agent/llm.hpp"
#include "agent/llm_answer.hpp"
#include "agent/llm_feedback.hpp"

#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <cxxabi.h>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <map>
#include <set>
#include <thread>

namespace hone::agent {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view k_entry = "hone_candidate";
// A sample's candidate tag: turn * k_sample_tag + sample (a turn of one answer: the turn).
constexpr uint64_t k_sample_tag = 100;
// Tags of the sources the model's tool calls compile or check: above every turn's and sample's.
constexpr uint64_t k_tool_tag = uint64_t(1) << 40;
// Consecutive requests without an answer (connection, timeout, HTTP 5xx) before giving up.
constexpr uint32_t k_max_transport_failures = 2;
// A verdict's message (a compile log, a mismatch) is cut to this before it goes to the model.
constexpr size_t k_max_feedback_bytes = 4000;
// Distinct launch descriptions in the prompt; more captures add nothing a model would use.
constexpr size_t k_max_launch_lines = 8;
// Bytes of an aggregate parameter shown in the prompt.
constexpr size_t k_max_aggregate_bytes = 32;
// Characters per token, to decide whether a kernel fits the token budget at all.
constexpr uint64_t k_bytes_per_token = 4;
// State texts taken from errors are cut to this.
constexpr size_t k_max_state_error = 160;

constexpr std::string_view k_system_prompt =
    R"(You are an expert CUDA performance engineer. You rewrite one CUDA kernel of a running application so that it computes the same results faster on the GPU named below.

How your kernel is used:
- It is compiled on its own by NVRTC for that GPU: one source, no other files, no host code. It may define device functions, constants and types, and must define exactly one kernel, extern "C" __global__ void hone_candidate(...), taking the same parameters as the original, in the same order, with the same types and sizes.
- It replaces the original at run time: it is launched with the original's arguments, grid, block and dynamic shared memory size. It cannot change the launch configuration.
- The observed launches below are examples, not promises: the kernel must be correct for any launch the original handles (other sizes, other scalar values), unless a shape is stated as guaranteed.
- Before it is used it is validated on real captured inputs: after each launch every buffer the kernel can reach is compared with the original's. Floating-point elements may differ within a small tolerance (about {F32_REL} relative for float), so reordering sums or fusing multiply-adds is fine, but lower precision (half precision, __expf-style intrinsics, fast math) is usually not. Integers and all other bytes must be equal, including bytes the original leaves untouched. It runs twice on the same input and both runs must agree, so races and order-dependent floating-point atomics are rejected. Accesses outside the buffers are rejected.
- It is then benchmarked against the original on the same input and kept only when measurably faster (by at least {MARGIN}% beyond the measurement noise).

Answer with exactly one fenced code block marked ```cuda that holds the complete source, and at most a few sentences outside it. After each answer you will be told whether it compiled, matched and how fast it was; then fix it or make it faster.)";

// The system prompt with this host's validation settings in place of its placeholders.
std::string system_prompt(const LlmSettings& s) {
  std::string text(k_system_prompt);
  auto put = [&](std::string_view name, const std::string& value) {
    if (auto at = text.find(name); at != std::string::npos) text.replace(at, name.size(), value);
  };
  char rel[32];
  std::snprintf(rel, sizeof rel, "%g", s.f32_rel);
  put("{F32_REL}", rel);
  put("{MARGIN}", std::to_string(int(std::lround((s.min_speedup - 1) * 100))));
  if (s.tool_calls_per_turn > 0 && s.samples_per_turn == 1) {
    text += "\n\nWhere the tools compile and check are offered, you may call them (up to " +
            std::to_string(s.tool_calls_per_turn) +
            " calls per turn) to try a source before answering; your answer is still the "
            "complete source in one ```cuda block.";
  }
  return text;
}

constexpr std::string_view k_answer_form =
    "Answer with exactly one ```cuda block holding the complete source, with one "
    "extern \"C\" __global__ void hone_candidate(...) kernel taking the original's parameters.";

// ---- what the model is told ---------------------------------------------------------------------

std::string demangle(const std::string& symbol) {
  int status = 0;
  char* readable = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && readable ? readable : symbol;
  std::free(readable);
  return out;
}

std::string hex_bytes(std::string_view bytes, size_t max_bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out = "bytes ";
  for (size_t i = 0; i < bytes.size() && i < max_bytes; ++i) {
    auto b = static_cast<unsigned char>(bytes[i]);
    if (i) out += ' ';
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  if (bytes.size() > max_bytes) out += " ...";
  return out;
}

template <class T> T load(std::string_view bytes) {
  T v{};
  std::memcpy(&v, bytes.data(), sizeof v);
  return v;
}

template <class T> std::string shortest(T v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

// A scalar parameter's value as its PTX type reads it (little-endian, as the device does).
std::string scalar_text(ptx::Type type, std::string_view bytes) {
  using ptx::Type;
  if (bytes.size() != ptx::type_size(type)) return hex_bytes(bytes, k_max_aggregate_bytes);
  switch (type) {
  case Type::u8:
  case Type::b8:
    return shortest(load<uint8_t>(bytes));
  case Type::u16:
  case Type::b16:
    return shortest(load<uint16_t>(bytes));
  case Type::u32:
  case Type::b32:
    return shortest(load<uint32_t>(bytes));
  case Type::u64:
  case Type::b64:
    return shortest(load<uint64_t>(bytes));
  case Type::s8:
    return shortest(load<int8_t>(bytes));
  case Type::s16:
    return shortest(load<int16_t>(bytes));
  case Type::s32:
    return shortest(load<int32_t>(bytes));
  case Type::s64:
    return shortest(load<int64_t>(bytes));
  case Type::f32:
    return shortest(load<float>(bytes));
  case Type::f64:
    return shortest(load<double>(bytes));
  default:
    return hex_bytes(bytes, k_max_aggregate_bytes);
  }
}

std::string access_words(uint8_t access) {
  std::vector<std::string> words;
  if (access & ptx::k_access_read) words.emplace_back("read");
  if (access & ptx::k_access_write) words.emplace_back("written");
  if (access & ptx::k_access_atomic) words.emplace_back("atomics");
  if (words.empty()) return "not accessed";
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

std::string shape(const std::array<uint32_t, 3>& v) {
  return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " + std::to_string(v[2]) +
         ")";
}

// `text` as a fenced block of `language`, for the prompt.
std::string fenced(std::string_view language, std::string_view text) {
  std::string out = "```";
  out.append(language).append("\n").append(text);
  if (!text.ends_with('\n')) out += '\n';
  return out + "```\n";
}

// The PTX module with the entry's text, without the module's other entries (a module may hold
// hundreds of kernels the model does not need to read).
std::string entry_ptx(const ptx::Module& module, std::string_view entry) {
  ptx::Module only = module;
  std::erase_if(only.items, [&](const ptx::ModuleItem& item) {
    const auto* f = std::get_if<ptx::Function>(&item.item);
    return f && f->is_entry && f->name != entry;
  });
  return ptx::print(only);
}

// One line per parameter: index, name, PTX type, size, pointer or scalar and what is done with it.
std::string parameter_lines(const ptx::EntryInfo& info) {
  std::string out;
  for (size_t i = 0; i < info.params.size(); ++i) {
    const ptx::ParamInfo& p = info.params[i];
    out += std::to_string(i) + ". `" + p.name + "`: ";
    out += p.aggregate ? ".b8[" + std::to_string(p.size) + "] (a struct or array by value)"
                       : "." + std::string(ptx::type_name(p.type));
    out += ", " + std::to_string(p.size) + " bytes, ";
    if (!p.is_pointer()) {
      out += "scalar\n";
      continue;
    }
    for (size_t k = 0; k < p.pointers.size(); ++k) {
      const ptx::PointerUse& use = p.pointers[k];
      if (k) out += "; ";
      out += p.aggregate ? "pointer at byte " + std::to_string(use.offset) : "pointer";
      if (!use.types.empty()) {
        out += " to";
        for (auto t : use.types) out += " " + std::string(ptx::type_name(t));
        out += " data";
      }
      out += ", " + access_words(use.access);
      if (use.escapes) out += " (conservatively: its uses cannot all be followed)";
    }
    out += "\n";
  }
  return out;
}

// The bytes of parameter `index` in a capture, or nullopt when the capture does not hold them.
std::optional<std::string_view> param_bytes(const Capture& c, size_t index) {
  if (index >= c.params.size()) return std::nullopt;
  const ParamSlot& slot = c.params[index];
  if (uint64_t(slot.offset) + slot.size > c.param_bytes.size()) return std::nullopt;
  return std::string_view(c.param_bytes).substr(slot.offset, slot.size);
}

// A launch as the model reads it: shape, scalar values, and where each pointer points (sizes of
// allocations only: buffer contents are production data and never leave the host).
std::string launch_text(const Capture& c, const std::optional<ptx::EntryInfo>& info) {
  std::string out = "grid " + shape(c.grid) + ", block " + shape(c.block) +
                    ", dynamic shared memory " + std::to_string(c.shared_bytes) + " bytes";
  for (size_t i = 0; i < c.params.size(); ++i) {
    auto bytes = param_bytes(c, i);
    if (!bytes) continue;
    const ptx::ParamInfo* p = info && i < info->params.size() ? &info->params[i] : nullptr;
    bool has_buffer = std::any_of(c.buffers.begin(), c.buffers.end(),
                                  [&](const CaptureBuffer& b) { return b.param == i; });
    if ((p && p->is_pointer() && !p->aggregate) || (!p && has_buffer)) {
      if (!has_buffer) {
        bool null = bytes->find_first_not_of('\0') == std::string_view::npos;
        out += "; param " + std::to_string(i) + (null ? " is NULL" : " points to no allocation");
      }
      continue; // its allocation is listed below
    }
    out += "; param " + std::to_string(i) + " = ";
    out += p && !p->aggregate ? scalar_text(p->type, *bytes)
                              : hex_bytes(*bytes, k_max_aggregate_bytes);
  }
  for (const auto& b : c.buffers) {
    out += "; param " + std::to_string(b.param);
    if (b.field) out += " (field at byte " + std::to_string(b.field) + ")";
    out += " points into an allocation of " + std::to_string(b.size) + " bytes at offset " +
           std::to_string(b.pointer >= b.base ? b.pointer - b.base : 0);
  }
  return out;
}

std::string launch_lines(const std::vector<Capture>& captures,
                         const std::optional<ptx::EntryInfo>& info) {
  std::vector<std::pair<std::string, size_t>> seen; // description, how many launches, in order
  for (const auto& c : captures) {
    if (c.status != CaptureStatus::ok) continue;
    std::string text = launch_text(c, info);
    auto it =
        std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == text; });
    if (it != seen.end()) {
      ++it->second;
    } else if (seen.size() < k_max_launch_lines) {
      seen.emplace_back(std::move(text), 1);
    }
  }
  std::string out;
  for (const auto& [text, count] : seen) {
    out += "- " + text + (count > 1 ? " (" + std::to_string(count) + " launches)" : "") + "\n";
  }
  return out.empty() ? "(none captured)\n" : out;
}

// The block shape every captured launch used, if they agree: the candidate is guarded by it, so
// the model may rely on it.
std::optional<std::array<uint32_t, 3>> common_block(const std::vector<Capture>& captures) {
  std::optional<std::array<uint32_t, 3>> block;
  for (const auto& c : captures) {
    if (c.status != CaptureStatus::ok) continue;
    if (block && *block != c.block) return std::nullopt;
    block = c.block;
  }
  return block;
}

// ---- kernels with neither PTX nor source (agent.llm.sass_kernels) ------------------------------

// A scalar's bytes as the model may read them, its type unknown: hex, and as integer and
// floating-point values of its size.
std::string untyped_scalar(std::string_view bytes) {
  std::string out = hex_bytes(bytes, k_max_aggregate_bytes);
  if (bytes.size() == 4) {
    out += " (as u32 " + shortest(load<uint32_t>(bytes)) + ", as s32 " +
           shortest(load<int32_t>(bytes)) + ", as f32 " + shortest(load<float>(bytes)) + ")";
  } else if (bytes.size() == 8) {
    out += " (as u64 " + shortest(load<uint64_t>(bytes)) + ", as s64 " +
           shortest(load<int64_t>(bytes)) + ", as f64 " + shortest(load<double>(bytes)) + ")";
  } else if (bytes.size() == 2) {
    out += " (as u16 " + shortest(load<uint16_t>(bytes)) + ")";
  } else if (bytes.size() == 1) {
    out += " (as u8 " + shortest(load<uint8_t>(bytes)) + ")";
  }
  return out;
}

// What the captures say of each parameter of a kernel with no PTX: its offset and size (the
// driver's cuFuncGetParamInfo), whether it points into an allocation, and for the others the
// value every launch gave it. Fills `guard` with the scalars that never changed.
std::string sass_parameter_lines(const std::vector<Capture>& captures, Guard& guard) {
  const Capture* first = nullptr;
  for (const auto& c : captures) {
    if (c.status == CaptureStatus::ok) {
      first = &c;
      break;
    }
  }
  if (!first) return "(no launch captured)\n";
  std::string out;
  for (size_t i = 0; i < first->params.size(); ++i) {
    const ParamSlot& slot = first->params[i];
    out += std::to_string(i) + ". offset " + std::to_string(slot.offset) + ", " +
           std::to_string(slot.size) + " bytes: ";
    bool pointer = false;
    for (const auto& c : captures) {
      for (const auto& b : c.buffers) pointer |= b.param == i;
    }
    if (pointer) {
      out += "a pointer into an allocation (sizes under the launches below)\n";
      continue;
    }
    std::optional<std::string_view> value = param_bytes(*first, i);
    bool constant = value.has_value();
    for (const auto& c : captures) {
      if (c.status != CaptureStatus::ok) continue;
      auto v = param_bytes(c, i);
      constant = constant && v && *v == *value;
    }
    if (constant) {
      out += "the same in every captured launch: " + untyped_scalar(*value) + "\n";
      guard.scalars.push_back({uint32_t(i), slot.offset, std::string(*value)});
    } else {
      out += "a value that changes between launches (see below)\n";
    }
  }
  return out;
}

// cuobjdump's SASS listing of `entry` in `image`, when the toolkit's cuobjdump is installed on
// this host (it is not part of the driver); "" otherwise, or when it fails or takes longer than
// 20 s. At most 48 KiB of it.
std::string sass_listing(const std::string& image, const std::string& entry) {
  constexpr size_t k_max_listing = 48 << 10;
  std::string tool;
  std::vector<std::string> places;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) {
    places.push_back(std::string(home) + "/bin/cuobjdump");
  }
  places.push_back("/usr/local/cuda/bin/cuobjdump");
  places.push_back("/usr/bin/cuobjdump");
  for (const auto& p : places) {
    if (::access(p.c_str(), X_OK) == 0) {
      tool = p;
      break;
    }
  }
  if (tool.empty() || entry.empty()) return {};
  // The symbol goes on a command line: only what mangled names are made of.
  for (char ch : entry) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '$' && ch != '.')
      return {};
  }
  char path[] = "/tmp/hone-sass-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return {};
  bool written = ::write(fd, image.data(), image.size()) == ssize_t(image.size());
  ::close(fd);
  std::string out;
  if (written) {
    std::string command = "timeout 20 '" + tool + "' -sass -fun '" + entry + "' '" + path +
                          "' 2>/dev/null";
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
      char buf[4096];
      size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0 && out.size() < k_max_listing) {
        out.append(buf, n);
      }
      int status = ::pclose(pipe);
      if (status != 0 && out.empty()) out.clear();
    }
  }
  ::unlink(path);
  if (out.size() > k_max_listing) {
    out.resize(k_max_listing);
    out += "\n[... cut]";
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The original's NVRTC options that keep their meaning for a candidate compiled on its own: the
// language standard, macros, the floating-point mode (so the candidate rounds like the original)
// and the include paths (for files the source includes from disk). Debug, relocatable code and
// the architecture (the worker sets it for the device) are dropped, and nothing is added: no
// --use_fast_math. Two-token forms (`-D NAME`) are joined first (nvrtc_candidate_options).
std::vector<std::string> candidate_nvrtc_options(const std::vector<std::string>& recorded) {
  const std::vector<std::string> original = nvrtc_candidate_options(recorded).options;
  static constexpr std::string_view k_kept[] = {"--include-path=",
                                                "-I",
                                                "-std=",
                                                "--std=",
                                                "-D",
                                                "--define-macro=",
                                                "-U",
                                                "--undefine-macro=",
                                                "-ftz=",
                                                "--ftz=",
                                                "-prec-div=",
                                                "--prec-div=",
                                                "-prec-sqrt=",
                                                "--prec-sqrt=",
                                                "-fmad=",
                                                "--fmad=",
                                                "-default-device",
                                                "--device-as-default-execution-space"};
  std::vector<std::string> out;
  for (const auto& option : original) {
    if (std::any_of(std::begin(k_kept), std::end(k_kept),
                    [&](std::string_view p) { return starts_with(option, p); })) {
      out.push_back(option);
    }
  }
  return out;
}

// The name in `#include "name"` or `#include <name>`, or empty when `line` is no include.
std::string_view included_name(std::string_view line) {
  auto skip_space = [&] {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  };
  skip_space();
  if (line.empty() || line.front() != '#') return {};
  line.remove_prefix(1);
  skip_space();
  if (!starts_with(line, "include")) return {};
  line.remove_prefix(7);
  skip_space();
  if (line.empty() || (line.front() != '"' && line.front() != '<')) return {};
  char close = line.front() == '"' ? '"' : '>';
  line.remove_prefix(1);
  size_t end = line.find(close);
  return end == std::string_view::npos ? std::string_view() : line.substr(0, end);
}

using Headers = std::vector<std::pair<std::string, std::string>>;

// `code` with each #include of one of the original's headers replaced by its text, recursively;
// a header already inlined is dropped, as its include guard would. The worker compiles one
// source, with no headers beside it.
std::string inline_headers(std::string_view code, const Headers& headers,
                           std::set<std::string>& inlined) {
  std::string out;
  size_t start = 0;
  while (start < code.size()) {
    size_t nl = code.find('\n', start);
    size_t end = nl == std::string_view::npos ? code.size() : nl + 1;
    std::string_view line = code.substr(start, end - start);
    start = end;
    std::string_view name = included_name(line);
    auto header = std::find_if(headers.begin(), headers.end(),
                               [&](const auto& h) { return !name.empty() && h.first == name; });
    if (header == headers.end()) {
      out += line;
      continue;
    }
    if (!inlined.insert(header->first).second) {
      out += "// (" + header->first + " already inlined above)\n";
      continue;
    }
    out += "// ---- " + header->first + " (inlined) ----\n";
    out += inline_headers(header->second, headers, inlined);
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += "// ---- end of " + header->first + " ----\n";
  }
  return out;
}

// ---- what comes back ----------------------------------------------------------------------------

std::string_view trim(std::string_view s) {
  const char* space = " \t\r";
  size_t b = s.find_first_not_of(space);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(space) - b + 1);
}

// A verdict's message for the model: the worker's own words, cut to a size worth reading.
std::string clip(std::string text) {
  if (text.size() <= k_max_feedback_bytes) return text;
  size_t cut = k_max_feedback_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  text.resize(cut);
  return text + "\n[... cut]";
}

// How the verdict on a rejected kernel reads to the model, after "The kernel of turn N".
std::string rejection(VerdictKind kind) {
  switch (kind) {
  case VerdictKind::compile_error:
    return " did not compile (NVRTC):";
  case VerdictKind::load_error:
    return " compiled, but did not load or does not take the original's parameters:";
  case VerdictKind::launch_error:
    return " failed to launch (too many registers or too much shared memory for the block?):";
  case VerdictKind::illegal_address:
    return " read or wrote outside its buffers (or misaligned):";
  case VerdictKind::timeout:
    return " ran past the time limit:";
  case VerdictKind::mismatch:
    return " computed results that differ from the original's:";
  case VerdictKind::nondeterministic:
    return " gave different results in two runs on the same input (a race, or order-dependent "
           "atomics):";
  case VerdictKind::suspicious:
    return " looked implausibly fast and did not survive re-checking:";
  case VerdictKind::refused:
    return " was refused before it ran: its PTX does what a rewrite may not (keep state across "
           "launches, write an input, or compute in a narrower floating-point type):";
  default:
    return std::string(" was rejected (") + to_string(kind) + "):";
  }
}

// The next user message after verdict `v` on the kernel of `turn` (only turns that have a next
// one wait for their verdict); `message` is the verdict's, redacted.
std::string verdict_feedback(uint32_t turn, const Verdict& v, std::string message) {
  std::string head = "The kernel of turn " + std::to_string(turn);
  std::string timing = fmt::format("it took {:.0f} ns against the original's {:.0f} ns ({:.2f}x)",
                                   v.candidate_ns, v.original_ns, v.speedup);
  std::string detail = message.empty() ? "" : "\n" + clip(std::move(message)) + "\n";
  std::string form(k_answer_form);
  std::string profile = profile_feedback(v.evidence_json);
  if (!profile.empty()) profile = "\n" + profile;
  if (v.kind == VerdictKind::verified) {
    return head + " was verified: it matched the original on every captured launch; " + timing +
           "." + profile + (profile.empty() ? " " : "") +
           "Make it faster still, under the same rules. " + form;
  }
  if (v.kind == VerdictKind::not_faster) {
    return head + " matched the original but was not faster by enough: " + timing + "." + detail +
           profile + "Find an approach that saves more time. " + form;
  }
  return head + rejection(v.kind) + detail + "Fix it. " + form;
}

// ---- the session --------------------------------------------------------------------------------

// What a session needs from start(): the opening conversation and what every candidate shares.
struct Plan {
  std::string label; // the kernel, for logs
  std::string original_entry; // the original kernel's name: an answer may keep it
  std::vector<ChatMessage> opening;
  Candidate base;  // kind, entry, options, comparison and guard of every candidate
  Headers headers; // the original's, inlined into candidates that include them
  // A SASS-only kernel: its image, for a SASS listing added to the opening before turn 1.
  std::string sass_image;
};

class LlmSession final : public Session {
public:
  LlmSession(std::shared_ptr<LlmClient> client, Plan plan)
      : m_client(std::move(client)), m_plan(std::move(plan)),
        m_deadline(Clock::now() +
                   std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                       m_client->settings().wall_budget_s_per_kernel))),
        m_state(turn_label(1) + ": waiting for the model") {
    m_thread = std::thread([this] { run(); });
  }

  ~LlmSession() override {
    {
      std::lock_guard lock(m_mutex);
      m_cancel = true;
    }
    m_verdict_ready.notify_all();
    m_thread.join();
  }

  std::vector<Candidate> poll() override {
    std::lock_guard lock(m_mutex);
    return std::exchange(m_ready, {});
  }

  void on_verdict(const Candidate& candidate, const Verdict& verdict) override {
    std::lock_guard lock(m_mutex);
    if (verdict.kind == VerdictKind::verified && verdict.speedup > m_best_speedup) {
      m_best_speedup = verdict.speedup;
      m_best_turn = candidate.tag;
    }
    if (m_awaited.count(candidate.tag) && !m_verdicts.count(candidate.tag)) {
      m_verdicts.emplace(candidate.tag, verdict);
      m_verdict_ready.notify_all();
    }
  }

  bool done() const override {
    std::lock_guard lock(m_mutex);
    return m_finished && m_ready.empty();
  }

  std::string state() const override {
    std::lock_guard lock(m_mutex);
    if (m_best_turn == 0) return m_state;
    if (m_best_turn >= k_sample_tag) {
      return m_state + fmt::format("; best {:.2f}x (turn {} sample {})", m_best_speedup,
                                   m_best_turn / k_sample_tag, m_best_turn % k_sample_tag);
    }
    return m_state + fmt::format("; best {:.2f}x (turn {})", m_best_speedup, m_best_turn);
  }

private:
  std::string turn_label(uint32_t turn) const {
    return "turn " + std::to_string(turn) + " of " + std::to_string(m_client->settings().max_turns);
  }

  void set_state(std::string state) {
    std::lock_guard lock(m_mutex);
    m_state = std::move(state);
  }

  void finish(const std::string& why) {
    std::string state = "done: " + why;
    spdlog::info("llm: {}: {}", m_plan.label, state);
    std::lock_guard lock(m_mutex);
    m_state = std::move(state);
    m_finished = true;
  }

  double seconds_left() const {
    return std::chrono::duration<double>(m_deadline - Clock::now()).count();
  }

  // The candidate of `answer`, sample `sample` (1-based; 0 when the turn has one answer).
  Candidate candidate(uint32_t turn, const Answer& answer, uint32_t sample = 0) const {
    Candidate c = m_plan.base;
    std::set<std::string> inlined;
    c.code = inline_headers(answer.code, m_plan.headers, inlined);
    c.entry = answer.entry;
    c.description = "LLM turn " + std::to_string(turn) +
                    (sample ? " sample " + std::to_string(sample) : std::string()) + " (" +
                    m_client->settings().model + ")";
    c.tag = sample ? uint64_t(turn) * k_sample_tag + sample : turn;
    return c;
  }

  // Hand `cs` to poll() and wait for their verdicts in the same breath, so that a verdict that
  // comes back at once is not missed.
  void hand_over(std::vector<Candidate> cs) {
    std::lock_guard lock(m_mutex);
    m_awaited.clear();
    m_verdicts.clear();
    for (auto& c : cs) {
      m_awaited.insert(c.tag);
      m_ready.push_back(std::move(c));
    }
  }
  void hand_over(Candidate c) {
    std::vector<Candidate> one;
    one.push_back(std::move(c));
    hand_over(std::move(one));
  }

  // The verdicts on the candidates handed over last, by tag: all of them, or those in before
  // the session was cancelled (then empty) or ran out of time.
  std::map<uint64_t, Verdict> wait_for_verdicts() {
    std::unique_lock lock(m_mutex);
    m_verdict_ready.wait_until(lock, m_deadline,
                               [&] { return m_cancel || m_verdicts.size() == m_awaited.size(); });
    m_awaited.clear();
    if (m_cancel) return {};
    return std::exchange(m_verdicts, {});
  }
  std::optional<Verdict> wait_for_verdict() {
    auto all = wait_for_verdicts();
    if (all.empty()) return std::nullopt;
    return all.begin()->second;
  }

  // Tools are offered in this session's turns: asked for, one answer per turn, and the endpoint
  // has not refused them.
  bool offer_tools() const {
    const LlmSettings& s = m_client->settings();
    return s.tool_calls_per_turn > 0 && s.samples_per_turn == 1 && !m_client->tools_refused();
  }

  // Run the model's tool call `call` of turn `turn`: the source it passes becomes a candidate
  // that is only compiled (compile) or only validated on one capture (check), through the same
  // worker as every candidate. Returns what the model is told.
  std::string run_tool(uint32_t turn, const ToolCall& call) {
    JobCheck check = call.name == "compile" ? JobCheck::compile
                     : call.name == "check" ? JobCheck::validate
                                            : JobCheck::none;
    if (check == JobCheck::none) {
      return "Error: there is no tool `" + m_client->excerpt(call.name, 60) +
             "`; the tools are compile and check.";
    }
    auto source = tool_call_source(call.arguments);
    if (!source) return "Error: " + source.error().message + ".";
    auto answer = extract_answer(*source, k_entry, m_plan.original_entry);
    if (!answer) return "Error: " + answer.error().message + ".";
    Candidate c = candidate(turn, *answer);
    c.check = check;
    c.tag = k_tool_tag + ++m_tool_calls;
    c.description = "LLM turn " + std::to_string(turn) + " tool " + call.name + " (" +
                    m_client->settings().model + ")";
    spdlog::info("llm: {}: {}: the model calls {} ({} bytes of CUDA)", m_plan.label,
                 turn_label(turn), call.name, answer->code.size());
    set_state(turn_label(turn) + ": running the model's " + call.name);
    hand_over(std::move(c));
    auto v = wait_for_verdict();
    if (!v) return "Error: no result within the session's time.";
    std::string message = m_client->redact(v->message);
    if (message.rfind("check: ", 0) == 0) message.erase(0, 7);
    if (v->kind == VerdictKind::verified) {
      if (check == JobCheck::compile) return "Compiled and loaded: " + clip(message);
      return "Correct: " + clip(message) + ". Answer with it to have it timed, or improve it.";
    }
    return "The kernel" + rejection(v->kind) + "\n" + clip(message);
  }

  // The reply of a turn after the tool calls it makes (at most tool_calls_per_turn; calls past
  // them are answered that the limit is reached, and a reply that calls again is returned as it
  // is, for the turn to refuse). `tokens` counts every request.
  Result<ChatReply> converse(uint32_t turn, std::vector<ChatMessage>& conversation,
                             uint64_t& tokens) {
    const LlmSettings& s = m_client->settings();
    bool tools = offer_tools();
    auto reply = m_client->chat(conversation, m_cancel, seconds_left(), tools);
    uint32_t calls = 0;
    bool limit_told = false;
    while (reply && !reply->tool_calls.empty() && tools && !limit_told) {
      tokens += reply->total_tokens;
      reply->total_tokens = 0;
      ChatMessage asked{"assistant", strip_reasoning(reply->content)};
      asked.tool_calls = reply->tool_calls;
      conversation.push_back(std::move(asked));
      for (const auto& call : reply->tool_calls) {
        std::string result;
        if (calls >= s.tool_calls_per_turn) {
          result = "Not run: the " + std::to_string(s.tool_calls_per_turn) +
                   " tool calls of this turn are spent. Answer with the kernel now. " +
                   std::string(k_answer_form);
          limit_told = true;
        } else {
          ++calls;
          result = run_tool(turn, call);
        }
        ChatMessage answer{"tool", std::move(result)};
        answer.tool_call_id = call.id;
        conversation.push_back(std::move(answer));
        if (m_cancel) return make_error("cancelled", int(ChatFailure::cancelled));
      }
      if (seconds_left() <= 0 || tokens >= s.token_budget_per_kernel) return reply;
      set_state(turn_label(turn) + ": waiting for the model (" + std::to_string(calls) +
                " tool call" + (calls == 1 ? "" : "s") + ")");
      reply = m_client->chat(conversation, m_cancel, seconds_left(), true);
    }
    return reply;
  }

  // A reply that never reached the model's side of the conversation (too large, not a chat
  // completion): say so in the pending user message, keeping the roles alternating, as some
  // chat templates require.
  static void note_unusable(std::vector<ChatMessage>& conversation, const std::string& why) {
    std::string note = "\n\n(Your previous answer could not be read: " + why + ". " +
                       std::string(k_answer_form) + ")";
    if (conversation.back().role == "user") {
      conversation.back().content += note;
    } else {
      conversation.push_back({"user", note.substr(2)});
    }
  }

  // Why an answer could not be used, as the model is told.
  static std::string unusable_why(std::string why, const std::string& content,
                                  const ChatReply& reply) {
    if (trim(content).empty() && reply.reasoning_bytes) {
      why = "the answer holds only reasoning, no code";
    }
    if (reply.truncated) {
      why += " (the answer was cut at max_tokens: send the kernel alone, without explanations, "
             "shorter)";
    }
    return why;
  }

  // A turn of samples_per_turn answers (the reply's choices, `n`; requests one at a time for what
  // the endpoint did not send): each usable one becomes a candidate, all are validated, and the
  // conversation goes on from the best (verified and fastest, else the fastest correct, else the
  // first). False when the session ended.
  bool samples_turn(uint32_t turn, const ChatReply& first, std::vector<ChatMessage>& conversation,
                    uint64_t& tokens) {
    const LlmSettings& s = m_client->settings();
    std::vector<ChatReply> replies{first};
    for (const auto& more : first.more_choices) {
      ChatReply r;
      r.content = more;
      replies.push_back(std::move(r));
    }
    while (replies.size() < s.samples_per_turn && !m_cancel && seconds_left() > 0) {
      auto more = m_client->chat(conversation, m_cancel, seconds_left());
      if (!more) break;
      tokens += more->total_tokens;
      replies.push_back(std::move(*more));
    }
    const size_t n = std::min<size_t>(replies.size(), s.samples_per_turn);
    std::vector<std::string> contents(n), why(n);
    std::vector<Candidate> candidates;
    for (size_t k = 0; k < n; ++k) {
      contents[k] = strip_reasoning(replies[k].content);
      auto answer = extract_answer(contents[k], k_entry, m_plan.original_entry);
      if (!answer) {
        why[k] = unusable_why(answer.error().message, contents[k], replies[k]);
        continue;
      }
      candidates.push_back(candidate(turn, *answer, uint32_t(k + 1)));
    }
    spdlog::info("llm: {}: {}: {} of {} samples usable ({} tokens so far)", m_plan.label,
                 turn_label(turn), candidates.size(), n, tokens);
    if (candidates.empty()) {
      conversation.push_back({"assistant", contents[0]});
      std::string text = "None of your answers could be used.";
      for (size_t k = 0; k < n; ++k) text += " Answer " + std::to_string(k + 1) + ": " + why[k] + ".";
      conversation.push_back({"user", text + " " + std::string(k_answer_form)});
      return true;
    }
    hand_over(candidates);
    if (turn == s.max_turns) {
      finish(std::to_string(s.max_turns) + " of " + std::to_string(s.max_turns) + " turns used");
      return false;
    }
    if (tokens >= s.token_budget_per_kernel) {
      finish("budget spent (tokens)");
      return false;
    }
    set_state(turn_label(turn) + ": waiting for " + std::to_string(candidates.size()) +
              " verdicts");
    auto verdicts = wait_for_verdicts();
    if (verdicts.empty()) {
      finish(m_cancel ? "cancelled" : "budget spent (wall time)");
      return false;
    }
    // The best sample: verified and fastest, else correct and fastest, else the first judged.
    auto rank = [](const Verdict& v) {
      int cls = v.kind == VerdictKind::verified ? 2 : v.kind == VerdictKind::not_faster ? 1 : 0;
      return std::make_pair(cls, cls ? v.speedup : 0.0);
    };
    const Candidate* best = nullptr;
    const Verdict* best_verdict = nullptr;
    for (const auto& c : candidates) {
      auto it = verdicts.find(c.tag);
      if (it == verdicts.end()) continue;
      if (!best || rank(it->second) > rank(*best_verdict)) {
        best = &c;
        best_verdict = &it->second;
      }
    }
    bool validatable = false;
    for (const auto& [tag, v] : verdicts) {
      validatable |= v.kind != VerdictKind::unsupported && v.kind != VerdictKind::internal &&
                     v.kind != VerdictKind::not_applicable;
    }
    if (!validatable) {
      finish("gave up: the candidates could not be validated (" +
             std::string(to_string(best_verdict->kind)) +
             "): " + m_client->excerpt(best_verdict->message, k_max_state_error));
      return false;
    }
    const size_t best_sample = size_t(best->tag % k_sample_tag);
    conversation.push_back({"assistant", contents[best_sample - 1]});
    std::string summary = "You gave " + std::to_string(n) + " answers, each validated:";
    for (size_t k = 0; k < n; ++k) {
      summary += "\n- answer " + std::to_string(k + 1) + ": ";
      auto it = verdicts.find(uint64_t(turn) * k_sample_tag + k + 1);
      if (!why[k].empty()) {
        summary += "could not be used: " + why[k];
      } else if (it == verdicts.end()) {
        summary += "no verdict in time";
      } else {
        summary += to_string(it->second.kind);
        if (it->second.kind == VerdictKind::verified ||
            it->second.kind == VerdictKind::not_faster) {
          summary += fmt::format(" ({:.2f}x)", it->second.speedup);
        }
      }
    }
    summary += "\nThe conversation goes on from answer " + std::to_string(best_sample) +
               " (the best), shown above as your answer.\n";
    conversation.push_back(
        {"user", summary + verdict_feedback(turn, *best_verdict,
                                            m_client->redact(best_verdict->message))});
    return true;
  }

  void run() {
    const LlmSettings& s = m_client->settings();
    std::vector<ChatMessage> conversation = m_plan.opening;
    if (!m_plan.sass_image.empty()) {
      // Here, not in start(): cuobjdump may take seconds, and start() runs on honed's thread.
      set_state(turn_label(1) + ": listing the SASS");
      std::string listing = sass_listing(m_plan.sass_image, m_plan.original_entry);
      std::string& opening = conversation.back().content;
      size_t at = opening.rfind("\nWrite hone_candidate.");
      if (!listing.empty() && at != std::string::npos) {
        opening.insert(at, "\n## Its SASS (cuobjdump -sass)\n" + fenced("", listing));
      }
      set_state(turn_label(1) + ": waiting for the model");
    }
    uint64_t tokens = 0;
    uint32_t transport_failures = 0;
    for (uint32_t turn = 1; turn <= s.max_turns; ++turn) {
      if (m_cancel) return finish("cancelled");
      if (tokens >= s.token_budget_per_kernel) return finish("budget spent (tokens)");
      double left = seconds_left();
      if (left <= 0) return finish("budget spent (wall time)");
      set_state(turn_label(turn) + ": waiting for the model");

      auto reply = converse(turn, conversation, tokens);
      if (!reply) {
        const Error& e = reply.error();
        std::string short_error = m_client->excerpt(e.message, k_max_state_error);
        switch (failure_of(e)) {
        case ChatFailure::cancelled:
          return finish("cancelled");
        case ChatFailure::refused:
          return finish("gave up: " + short_error);
        case ChatFailure::transport:
          spdlog::warn("llm: {}: {}: {}", m_plan.label, turn_label(turn), short_error);
          if (++transport_failures >= k_max_transport_failures) {
            return finish("gave up: " + short_error);
          }
          continue; // the same conversation again, as the next turn
        default:    // ChatFailure::reply: an answer, but not a usable chat completion
          transport_failures = 0;
          spdlog::info("llm: {}: {}: unusable reply: {}", m_plan.label, turn_label(turn),
                       short_error);
          note_unusable(conversation, e.message);
          continue;
        }
      }
      transport_failures = 0;
      tokens += reply->total_tokens;
      if (s.samples_per_turn > 1) {
        if (!samples_turn(turn, *reply, conversation, tokens)) return;
        continue;
      }
      // The model's reasoning never goes back to it: only what it answered.
      std::string content = strip_reasoning(reply->content);
      conversation.push_back({"assistant", content});

      if (!reply->tool_calls.empty() && tokens >= s.token_budget_per_kernel) {
        return finish("budget spent (tokens)");
      }
      if (!reply->tool_calls.empty() && seconds_left() <= 0) {
        return finish("budget spent (wall time)");
      }
      auto answer = extract_answer(content, k_entry, m_plan.original_entry);
      if (!answer) {
        std::string why = unusable_why(answer.error().message, content, *reply);
        if (!reply->tool_calls.empty()) {
          why = offer_tools() ? "it called tools after the " +
                                    std::to_string(s.tool_calls_per_turn) +
                                    " calls of the turn were spent"
                              : std::string("it called a tool, but no tools are offered here");
        }
        spdlog::info("llm: {}: {}: unusable answer: {}", m_plan.label, turn_label(turn), why);
        conversation.push_back(
            {"user", "Your answer could not be used: " + why + ". " + std::string(k_answer_form)});
        continue;
      }
      spdlog::info("llm: {}: {}: candidate proposed ({} bytes of CUDA, {} tokens so far){}",
                   m_plan.label, turn_label(turn), answer->code.size(), tokens,
                   answer->changes.empty() ? "" : "; taken as given: " + answer->changes);
      hand_over(candidate(turn, *answer));
      if (turn == s.max_turns) break;
      // No turn would follow: its verdict is not worth waiting for.
      if (tokens >= s.token_budget_per_kernel) return finish("budget spent (tokens)");

      set_state(turn_label(turn) + ": waiting for the verdict");
      auto verdict = wait_for_verdict();
      if (!verdict) return finish(m_cancel ? "cancelled" : "budget spent (wall time)");
      spdlog::debug("llm: {}: {}: verdict {}", m_plan.label, turn_label(turn),
                    to_string(verdict->kind));
      if (verdict->kind == VerdictKind::unsupported || verdict->kind == VerdictKind::internal ||
          verdict->kind == VerdictKind::not_applicable) {
        // Not the candidate's fault: another answer would meet the same end (every candidate of
        // the session carries the same guard, which no captured launch passes).
        return finish("gave up: the candidate could not be validated (" +
                      std::string(to_string(verdict->kind)) +
                      "): " + m_client->excerpt(verdict->message, k_max_state_error));
      }
      conversation.push_back(
          {"user", verdict_feedback(turn, *verdict, m_client->redact(verdict->message))});
    }
    finish(std::to_string(s.max_turns) + " of " + std::to_string(s.max_turns) + " turns used");
  }

  const std::shared_ptr<LlmClient> m_client;
  const Plan m_plan;
  const Clock::time_point m_deadline;
  std::atomic<bool> m_cancel{false};

  mutable std::mutex m_mutex;
  std::condition_variable m_verdict_ready;
  std::vector<Candidate> m_ready;
  std::set<uint64_t> m_awaited; // the tags whose verdicts the session waits for
  std::map<uint64_t, Verdict> m_verdicts;
  std::string m_state;
  bool m_finished = false;
  double m_best_speedup = 0;
  uint64_t m_best_turn = 0;
  uint64_t m_tool_calls = 0; // of the session, for the tags of their candidates

  std::thread m_thread; // last: it starts once everything above exists
};

// ---- the strategy -------------------------------------------------------------------------------

class LlmStrategy final : public Strategy {
public:
  explicit LlmStrategy(LlmSettings settings)
      : m_client(std::make_shared<LlmClient>(std::move(settings))) {}

  std::string id() const override { return "llm"; }
  bool needs_captures() const override { return true; }
  bool needs_ptx() const override { return false; } // the NVRTC source is enough
  double expected_speedup() const override { return 1.3; }
  // One validation job per turn.
  double cost_gpu_seconds() const override { return m_client->settings().max_turns; }
  uint32_t examples_wanted() const override { return m_client->settings().examples; }
  bool works_without_code() const override { return m_client->settings().sass_kernels; }

  std::unique_ptr<Session> start(const KernelTask& task) override {
    auto plan = make_plan(task);
    if (!plan) return nullptr;
    spdlog::info("llm: {}: asking {} (up to {} turns)", plan->label, m_client->settings().model,
                 m_client->settings().max_turns);
    return std::make_unique<LlmSession>(m_client, std::move(*plan));
  }

private:
  std::optional<Plan> make_plan(const KernelTask& task) const {
    const LlmSettings& s = m_client->settings();
    const std::string& entry = task.key.entry;

    // The PTX (the image, or its fatbin's PTX entry): the parameter analysis, and the code itself when there is
    // no source.
    std::optional<ptx::EntryInfo> info;
    std::string ptx_text;
    if (auto text = kernel_ptx(task)) {
      auto module = ptx::parse(*text);
      const ptx::Function* f = module ? module->function(entry) : nullptr;
      if (f && f->is_entry && f->has_body) {
        info = ptx::analyze_entry(*module, *f);
        ptx_text = entry_ptx(*module, entry);
      } else {
        spdlog::debug("llm: {}: no usable PTX ({})", entry,
                      module ? "the entry is not in it" : module.error().message);
      }
    }
    if (!task.source && ptx_text.empty()) {
      if (!s.sass_kernels) return std::nullopt;
      return sass_plan(task);
    }

    const std::string readable = demangle(entry);
    std::string user = "Kernel to rewrite: `" + readable + "`";
    if (readable != entry) user += " (symbol `" + entry + "`)";
    user += "\nDevice: " + (task.device.empty() ? std::string("unknown") : task.device) + " (" +
            (task.arch.empty() ? std::string("architecture unknown") : task.arch) + ")\n\n";
    if (task.source) {
      const proto::SourceInfo& src = *task.source;
      user += "## Original CUDA source\n\nNVRTC program `" + src.name + "`";
      if (!src.options.empty()) {
        user += ", compiled with:";
        for (const auto& o : src.options) user += " " + o;
      }
      user += "\n" + fenced("cuda", src.source);
      for (const auto& [name, text] : src.headers) {
        user += "\n### Header `" + name + "`\n";
        user += fenced("cuda", text);
      }
    } else {
      user += "## Original PTX (no CUDA source is known)\n";
      user += fenced("ptx", ptx_text);
    }
    if (info) user += "\n## Parameters, in order (from the PTX)\n" + parameter_lines(*info);

    user += "\n## Observed launches\n" + launch_lines(task.captures, info);
    Candidate base;
    base.strategy = id();
    base.kind = CandidateKind::cuda;
    base.entry = std::string(k_entry);
    base.comparison = Comparison::tolerance; // the model may reorder floating-point arithmetic
    if (auto block = common_block(task.captures)) {
      base.guard.block = *block;
      user += "\nEvery captured launch used block " + shape(*block) +
              ": your kernel will only serve launches with that block shape, so it may rely on "
              "it (for example with __launch_bounds__(" +
              std::to_string(uint64_t((*block)[0]) * (*block)[1] * (*block)[2]) + ")).\n";
    }
    if (!task.examples.empty()) {
      user += "\n## Verified rewrites of other kernels on this host\n\nThese passed the same "
              "validation on this device; they show what has worked here.\n";
      for (const auto& ex : task.examples) {
        user += fmt::format("\n### `{}`, verified {:.2f}x faster than its original\n",
                            demangle(ex.kernel), ex.speedup);
        user += fenced("cuda", ex.source);
      }
    }
    user += "\nWrite hone_candidate. " + std::string(k_answer_form) + "\n";

    Plan plan;
    plan.original_entry = task.key.entry;
    plan.label = entry;
    plan.opening = {{"system", system_prompt(s)}, {"user", std::move(user)}};
    uint64_t prompt_tokens =
        (plan.opening[0].content.size() + plan.opening[1].content.size()) / k_bytes_per_token;
    if (prompt_tokens + s.max_reply_tokens > s.token_budget_per_kernel) {
      spdlog::info("llm: {}: not tried: its prompt (about {} tokens) and one reply do not fit the "
                   "token budget of {}",
                   entry, prompt_tokens, s.token_budget_per_kernel);
      return std::nullopt;
    }
    if (task.source) {
      base.nvrtc_options = candidate_nvrtc_options(task.source->options);
      plan.headers = task.source->headers;
    }
    plan.base = std::move(base);
    return plan;
  }

  // A kernel shipped as SASS only: the model writes it from what is known of its behaviour, and
  // its candidates serve only launches like the captured ones (block shape, scalar values).
  std::optional<Plan> sass_plan(const KernelTask& task) const {
    const LlmSettings& s = m_client->settings();
    const std::string& entry = task.key.entry;
    bool captured = std::any_of(task.captures.begin(), task.captures.end(),
                                [](const Capture& c) { return c.status == CaptureStatus::ok; });
    if (!captured) return std::nullopt;
    Candidate base;
    base.strategy = id();
    base.kind = CandidateKind::cuda;
    base.entry = std::string(k_entry);
    base.comparison = Comparison::tolerance;
    const std::string readable = demangle(entry);
    std::string user = "Kernel to rewrite: `" + readable + "`";
    if (readable != entry) user += " (symbol `" + entry + "`)";
    user += "\nDevice: " + (task.device.empty() ? std::string("unknown") : task.device) + " (" +
            (task.arch.empty() ? std::string("architecture unknown") : task.arch) + ")\n\n";
    user += "## What is known\n\nThe application ships this kernel as machine code only (SASS: "
            "no CUDA source, no PTX). Write a kernel that computes what it computes, from its "
            "name, its parameters and launches below" +
            std::string(" and its SASS where listed") +
            ". Your kernel is validated against the original on the captured launches: after "
            "each, every buffer it can reach is compared with the original's, byte for byte.\n";
    user += "\n## Parameters, in order (offset and size in the parameter buffer)\n" +
            sass_parameter_lines(task.captures, base.guard);
    user += "\n## Observed launches\n" + launch_lines(task.captures, std::nullopt);
    if (auto block = common_block(task.captures)) base.guard.block = *block;
    user += "\nYour kernel will serve only launches with ";
    user += base.guard.block == std::array<uint32_t, 3>{0, 0, 0}
                ? std::string("any block shape")
                : "block " + shape(base.guard.block);
    user += base.guard.scalars.empty()
                ? std::string(", whatever the scalar arguments")
                : " and the scalar values listed as the same in every launch";
    user += ", so it may rely on them.\n";
    user += "\nBegin the kernel with `asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");`, "
            "before it touches any memory: the original may run as a programmatic dependent "
            "launch, where its inputs are written by the kernel before it until that wait "
            "returns (nothing here says whether it does). It costs nothing when it does not, and "
            "a kernel without it is refused.\n";
    user += "\nWrite hone_candidate. " + std::string(k_answer_form) + "\n";

    Plan plan;
    plan.original_entry = entry;
    plan.label = entry;
    plan.opening = {{"system", system_prompt(s)}, {"user", std::move(user)}};
    plan.base = std::move(base);
    plan.sass_image = task.image;
    spdlog::info("llm: {}: SASS only: asking for a rewrite from its behaviour", entry);
    return plan;
  }

  std::shared_ptr<LlmClient> m_client;
};

} // namespace

std::unique_ptr<Strategy> make_llm_strategy(LlmSettings settings) {
  return std::make_unique<LlmStrategy>(std::move(settings));
}

} // namespace hone::agent
