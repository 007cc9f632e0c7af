// hone-emu-survey: load the PTX modules real applications ship on the emulated device and launch
// every kernel once, to list what the device refuses (tests/survey/README.md).
//
//   hone-emu-survey [options] SOURCE...
//
// SOURCE is one of
//   elf:PATH        every PTX module a compute 9.0 driver would JIT from the .nv_fatbin section
//                   of the ELF file PATH (a shared library such as llama.cpp's libggml-cuda.so):
//                   for each fatbin container, the highest PTX entry not above compute_90
//   ptx:PATH        a PTX file
//   hashcat:FILE    a kernel file of hashcat's OpenCL folder (m00000_a3-optimized.cl, amp_a0.cl,
//                   shared.cl, ...), compiled by NVRTC with the options hashcat 6.2.6 gives it
//                   for a compute 9.0 CUDA device (hashcat_kernel.cpp)
//
// Each module is loaded with cuModuleLoadDataEx (its parse and decode timed), and each of its
// kernels launched once: one block of the kernel's .reqntid or .maxntid (else 128 threads), all
// the dynamic shared memory the device allows it, every pointer parameter pointing into the middle
// of a zeroed scratch buffer and every other parameter byte zero. Pointers are the parameters a
// mangled name declares as pointers (`acc_f32(float const*, ..., long)`); for a name that is not
// mangled (hashcat's kernels are extern "C"), every 8-byte parameter at an 8-byte offset. Sizes
// and counts of zero make most kernels return early; what the kernel then does is fine: it may
// run, fault (the context is then replaced by a fresh one and the module loaded again for the
// next kernel) or run out of the instruction budget. Of llama.cpp's NO_DEVICE_CODE stubs (printf,
// then trap) only the first of each module is launched (no_device_code_entries). What the survey
// is after is the launches the device answers with CUDA_ERROR_NOT_SUPPORTED, and why: the emulated
// driver logs the reason ("PTX line N: instruction ... is not supported") on stderr, which the
// survey reads back.
//
// Options:
//   --json FILE           write every module and kernel outcome as JSON
//   --hashcat-root DIR    hashcat's shared folder, holding OpenCL/ (default /usr/share/hashcat)
//   --hashcat-modes FILE  the per-mode table (hashcat_modes.tsv)
//   --ptx-dir DIR         keep the PTX NVRTC made for each hashcat kernel there, and reuse it
//   --expect-none         exit 1 when any kernel or module is refused (the test's assertion)
//   --load-only           load the modules (timing their parse and decode), launch nothing
//   --dump-ptx DIR        write each module's PTX there (module names made file names)
//
// HONE_EMU_INSTRUCTION_BUDGET defaults to 1000000 here, so that no launch runs long.
#include "hashcat_kernel.hpp"

#include "cuda/fatbin.hpp"

#include <cuda.h>
#include <cxxabi.h>
#include <elf.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cctype>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using hone::Result;
using hone::make_error;
using Clock = std::chrono::steady_clock;

// The survey's own messages go to the stderr it started with; fd 2 is the emulator's log file.
FILE* g_out = stderr;

void say(const char* format, auto... args) {
  std::fprintf(g_out, format, args...);
  std::fflush(g_out);
}

struct Module {
  std::string name;   // where it came from
  std::string ptx;    // its text
  std::string origin; // "llama.cpp", "hashcat", "ptx"
};

struct KernelOutcome {
  std::string kernel;
  std::string outcome; // ran, fault, refused, launch-error, no device code (not launched)
  std::string detail;  // the emulator's reason, or the error's name
  double ms = 0;       // the launch and the synchronization after it
};

struct ModuleOutcome {
  Module module;
  double load_ms = 0;
  double reload_ms = 0;   // fresh contexts and loads again after faults
  std::string load_error; // empty when it loaded
  std::vector<KernelOutcome> kernels;
};

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The bytes of section `name` of the ELF64 file `bytes`, or an error.
Result<std::string_view> elf_section(std::string_view bytes, const char* name) {
  if (bytes.size() < sizeof(Elf64_Ehdr) || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0 ||
      bytes[EI_CLASS] != ELFCLASS64) {
    return make_error("not an ELF64 file");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  auto header = [&](size_t i) -> std::optional<Elf64_Shdr> {
    const uint64_t at = eh.e_shoff + i * uint64_t(eh.e_shentsize);
    if (eh.e_shentsize < sizeof(Elf64_Shdr) || at + sizeof(Elf64_Shdr) > bytes.size()) return {};
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + at, sizeof sh);
    return sh;
  };
  auto strtab = header(eh.e_shstrndx);
  if (!strtab || strtab->sh_offset + strtab->sh_size > bytes.size()) return make_error("no section names");
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    auto sh = header(i);
    if (!sh || sh->sh_name >= strtab->sh_size) return make_error("bad section header");
    const char* n = bytes.data() + strtab->sh_offset + sh->sh_name;
    if (std::strncmp(n, name, strtab->sh_size - sh->sh_name) != 0) continue;
    if (sh->sh_offset + sh->sh_size > bytes.size()) return make_error(std::string(name) + " past the end");
    return bytes.substr(sh->sh_offset, sh->sh_size);
  }
  return make_error(std::string("no section ") + name);
}

// The PTX modules a compute 9.0 driver would JIT from `path`'s .nv_fatbin: per container, the
// entry select_ptx(90) picks. The file's bytes stay alive in `keep`.
Result<std::vector<Module>> elf_modules(const std::string& path, std::string& keep) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  keep = std::move(*bytes);
  auto section = elf_section(keep, ".nv_fatbin");
  if (!section) return make_error(path + ": " + section.error().message);
  auto fatbin = hone::cuda::parse_fatbin(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(section->data()), section->size()));
  if (!fatbin) return make_error(path + ": " + fatbin.error().message);
  const std::string base = path.substr(path.find_last_of('/') + 1);
  std::vector<Module> out;
  for (size_t c = 0; c < fatbin->containers.size(); ++c) {
    hone::cuda::Fatbin one;
    one.containers.push_back(fatbin->containers[c]);
    for (const auto& e : fatbin->entries) {
      if (e.container == c) one.entries.push_back(e);
    }
    const hone::cuda::FatbinEntry* entry = hone::cuda::select_ptx(one, 90);
    if (entry == nullptr) continue; // SASS only
    auto ptx = hone::cuda::entry_ptx(*entry);
    if (!ptx) return make_error(path + ": container " + std::to_string(c) + ": " + ptx.error().message);
    out.push_back({base + "#" + std::to_string(c) + " (" + hone::cuda::arch_name(*entry) + ")",
                   std::move(*ptx), "elf"});
  }
  return out;
}

// The block a kernel asks for in its PTX (.reqntid, else .maxntid), or 128 threads.
void block_of(const std::string& ptx, const std::string& kernel, unsigned (&block)[3]) {
  block[0] = 128;
  block[1] = block[2] = 1;
  size_t at = 0;
  while ((at = ptx.find(".entry " + kernel, at)) != std::string::npos) {
    const char after = at + 7 + kernel.size() < ptx.size() ? ptx[at + 7 + kernel.size()] : '\0';
    if (after == '(' || after == ' ' || after == '\n' || after == '\t') break;
    ++at;
  }
  if (at == std::string::npos) return;
  const size_t body = ptx.find('{', ptx.find(')', at));
  const std::string head = ptx.substr(at, body == std::string::npos ? std::string::npos : body - at);
  for (const char* directive : {".reqntid", ".maxntid"}) {
    size_t d = head.find(directive);
    if (d == std::string::npos) continue;
    unsigned v[3] = {1, 1, 1};
    int n = std::sscanf(head.c_str() + d + std::strlen(directive), " %u , %u , %u", &v[0], &v[1], &v[2]);
    if (n >= 1) {
      std::copy(v, v + 3, block);
      return;
    }
  }
}

// Which of a kernel's `count` parameters are pointers, from its mangled name: the demangled
// parameter list split at top-level commas, a parameter ending in '*' being a pointer. Empty when
// the name is not mangled or its list does not have `count` entries.
std::vector<bool> pointer_params(const std::string& kernel, size_t count) {
  int status = 0;
  char* text = abi::__cxa_demangle(kernel.c_str(), nullptr, nullptr, &status);
  if (status != 0 || text == nullptr) return {};
  std::string d(text);
  std::free(text);
  // The parameter list is the last top-level parenthesized group.
  size_t close = d.rfind(')');
  if (close == std::string::npos) return {};
  int depth = 0;
  size_t open = std::string::npos;
  for (size_t i = close + 1; i-- > 0;) {
    if (d[i] == ')') ++depth;
    else if (d[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos) return {};
  std::vector<bool> out;
  std::string cur;
  depth = 0;
  auto flush = [&] {
    while (!cur.empty() && cur.back() == ' ') cur.pop_back();
    if (!cur.empty() && cur != "void") out.push_back(cur.back() == '*');
    cur.clear();
  };
  for (size_t i = open + 1; i < close; ++i) {
    const char c = d[i];
    if (c == '<' || c == '(' || c == '[') ++depth;
    if (c == '>' || c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      flush();
      continue;
    }
    if (!(cur.empty() && c == ' ')) cur.push_back(c);
  }
  flush();
  if (out.size() != count) return {};
  return out;
}

const char* error_name(CUresult rc) {
  const char* name = nullptr;
  return cuGetErrorName(rc, &name) == CUDA_SUCCESS && name ? name : "CUDA_ERROR_?";
}

// The emulator's log (fd 2 of this process) is a temporary file; what it wrote since the last
// call comes back as lines.
class EmulatorLog {
public:
  bool open() {
    char path[] = "/tmp/hone-emu-survey-XXXXXX";
    m_fd = mkstemp(path);
    if (m_fd < 0) return false;
    unlink(path);
    const int saved = dup(STDERR_FILENO);
    if (saved < 0 || dup2(m_fd, STDERR_FILENO) < 0) return false;
    g_out = fdopen(saved, "w");
    return g_out != nullptr;
  }
  std::vector<std::string> take() {
    std::vector<std::string> lines;
    const off_t end = lseek(m_fd, 0, SEEK_END);
    std::string text(size_t(end - m_read), '\0');
    if (end > m_read && pread(m_fd, text.data(), text.size(), m_read) == ssize_t(text.size())) {
      m_read = end;
      std::istringstream in(text);
      for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    return lines;
  }

private:
  int m_fd = -1;
  off_t m_read = 0;
};

// The reason the emulator logged for refusing `kernel`: the text after "PTX line N: ", or the
// whole message after the kernel's name when it names no line.
std::string refusal_reason(const std::vector<std::string>& lines, const std::string& kernel) {
  for (const auto& line : lines) {
    if (line.find("CUDA_ERROR_NOT_SUPPORTED") == std::string::npos) continue;
    const size_t k = line.find(kernel);
    size_t at = line.find("PTX line ");
    if (at != std::string::npos) {
      const size_t colon = line.find(": ", at);
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
    if (k != std::string::npos) return line.substr(k + kernel.size());
    return line;
  }
  return "CUDA_ERROR_NOT_SUPPORTED (no reason logged)";
}

// The message of the last log line naming `error`.
std::string logged(const std::vector<std::string>& lines, const char* error) {
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    size_t at = it->find(error);
    if (at != std::string::npos) return it->substr(at);
  }
  return error;
}

// llama.cpp's "no device code" entries: a template instance compiled for an architecture its
// host code never launches it on is NO_DEVICE_CODE (ggml-cuda/common.cuh), a printf of
// "... ERROR: CUDA kernel K has no device code compatible with CUDA arch 900 ..." and a trap. Of
// the 6731 compute_90 kernels, thousands are such stubs; each launch prints the message from every
// thread and faults, and each fault costs a fresh context and the module parsed again (minutes in
// all). The first stub of a module is launched (printf and trap on the device); the others are the
// same code with other strings and are listed as "no device code", not launched.
// Found by the format string (a .global .b8 array holding "has no device code") and the entries
// whose body (brace-balanced after `.entry NAME(`) names that array and traps.
std::set<std::string> no_device_code_entries(const std::string& ptx) {
  std::set<std::string> stubs;
  std::vector<std::string> strings; // the arrays holding the message
  for (size_t at = ptx.find(".global .align 1 .b8 "); at != std::string::npos;
       at = ptx.find(".global .align 1 .b8 ", at + 1)) {
    const size_t name_at = at + std::strlen(".global .align 1 .b8 ");
    const size_t bracket = ptx.find('[', name_at);
    const size_t open = ptx.find('{', name_at);
    const size_t close = ptx.find('}', name_at);
    const size_t eol = ptx.find(';', name_at);
    if (bracket == std::string::npos || open == std::string::npos || close == std::string::npos ||
        eol == std::string::npos || open > eol || close > eol)
      continue;
    std::string text;
    for (size_t i = open + 1; i < close;) {
      char* end = nullptr;
      const long v = std::strtol(ptx.c_str() + i, &end, 10);
      if (end == ptx.c_str() + i) {
        ++i;
        continue;
      }
      text.push_back(char(v));
      i = size_t(end - ptx.c_str());
    }
    if (text.find("has no device code") != std::string::npos)
      strings.push_back(ptx.substr(name_at, bracket - name_at));
  }
  if (strings.empty()) return stubs;
  auto names_array = [&](std::string_view body) {
    for (const std::string& n : strings) {
      for (size_t at = body.find(n); at != std::string_view::npos; at = body.find(n, at + 1)) {
        const char next = at + n.size() < body.size() ? body[at + n.size()] : ';';
        if (!std::isalnum(static_cast<unsigned char>(next)) && next != '_' && next != '$') return true;
      }
    }
    return false;
  };
  for (size_t at = ptx.find(".entry "); at != std::string::npos; at = ptx.find(".entry ", at + 1)) {
    const size_t name_at = at + std::strlen(".entry ");
    const size_t paren = ptx.find('(', name_at);
    const size_t open = ptx.find('{', name_at);
    if (paren == std::string::npos || open == std::string::npos) break;
    int depth = 0;
    size_t end = open;
    for (; end < ptx.size(); ++end) {
      if (ptx[end] == '/' && end + 1 < ptx.size() && ptx[end + 1] == '/') {
        end = ptx.find('\n', end);
        if (end == std::string::npos) break;
        continue;
      }
      if (ptx[end] == '{') ++depth;
      if (ptx[end] == '}' && --depth == 0) break;
    }
    if (end == std::string::npos || end >= ptx.size()) break;
    const std::string_view body(ptx.data() + open, end - open);
    if (names_array(body) && body.find("trap;") != std::string_view::npos)
      stubs.insert(ptx.substr(name_at, paren - name_at));
  }
  return stubs;
}

class Survey {
public:
  Survey(EmulatorLog& log, bool load_only) : m_log(log), m_load_only(load_only) {}

  bool init() {
    if (CUresult rc = cuInit(0); rc != CUDA_SUCCESS) {
      say("hone-emu-survey: cuInit: %s\n", error_name(rc));
      return false;
    }
    return cuDeviceGet(&m_device, 0) == CUDA_SUCCESS;
  }

  ModuleOutcome run(const Module& m) {
    ModuleOutcome out;
    out.module = m;
    const auto start = Clock::now();
    CUmodule mod = nullptr;
    std::string error;
    if (!fresh_context() || !load(m, mod, error)) {
      out.load_error = error.empty() ? "no context" : error;
      m_log.take();
      return out;
    }
    out.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    m_log.take();
    if (m_load_only) return out;

    unsigned count = 0;
    cuModuleGetFunctionCount(&count, mod);
    std::vector<CUfunction> functions(count);
    cuModuleEnumerateFunctions(functions.data(), count, mod);
    std::vector<std::string> names;
    for (CUfunction f : functions) {
      const char* name = nullptr;
      cuFuncGetName(&name, f);
      names.push_back(name ? name : "?");
    }
    std::sort(names.begin(), names.end());
    const std::set<std::string> stubs = no_device_code_entries(m.ptx);
    std::string stub_launched;
    for (const std::string& name : names) {
      if (stubs.count(name) && !stub_launched.empty()) {
        out.kernels.push_back({name, "no device code",
                               "not launched: a NO_DEVICE_CODE stub like " + stub_launched, 0});
        continue;
      }
      if (stubs.count(name)) stub_launched = name;
      KernelOutcome k = launch(m, mod, name);
      if (k.outcome == "fault") {
        // The context is unusable now: the next kernel gets a fresh one, and the module again.
        const auto again = Clock::now();
        const bool reloaded = fresh_context() && load(m, mod, error);
        out.reload_ms += std::chrono::duration<double, std::milli>(Clock::now() - again).count();
        if (!reloaded) {
          out.kernels.push_back(std::move(k));
          out.load_error = "reloading after a fault: " + error;
          break;
        }
        m_log.take();
      }
      out.kernels.push_back(std::move(k));
    }
    return out;
  }

private:
  bool fresh_context() {
    if (m_ctx != nullptr) cuCtxDestroy(m_ctx);
    m_ctx = nullptr;
    m_scratch = 0;
    if (cuCtxCreate(&m_ctx, nullptr, 0, m_device) != CUDA_SUCCESS) return false;
    m_scratch_dirty = true;
    return cuMemAlloc(&m_scratch, k_scratch_bytes) == CUDA_SUCCESS;
  }

  // What pointer parameters point at: zeroed before every launch that follows one that ran.
  static constexpr size_t k_scratch_bytes = 16 << 20;
  // The most shared memory a block may have (227 KiB on sm_90, with the opt-in attribute).
  static constexpr unsigned k_shared_optin = 227 * 1024;

  bool load(const Module& m, CUmodule& mod, std::string& error) {
    std::vector<char> log(1 << 16, '\0');
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log.data(), reinterpret_cast<void*>(uintptr_t(log.size()))};
    CUresult rc = cuModuleLoadDataEx(&mod, m.ptx.c_str(), 2, options, values);
    if (rc == CUDA_SUCCESS) return true;
    error = std::string(error_name(rc)) + ": " + log.data();
    return false;
  }

  KernelOutcome launch(const Module& m, CUmodule mod, const std::string& name) {
    KernelOutcome k{name, "", ""};
    CUfunction f = nullptr;
    if (CUresult rc = cuModuleGetFunction(&f, mod, name.c_str()); rc != CUDA_SUCCESS) {
      return {name, "launch-error", std::string("cuModuleGetFunction: ") + error_name(rc)};
    }
    // The parameters: pointers at the scratch buffer, everything else zero.
    size_t end = 0;
    std::vector<std::pair<size_t, size_t>> slots; // offset, size
    for (size_t i = 0;; ++i) {
      size_t offset = 0, size = 0;
      if (cuFuncGetParamInfo(f, i, &offset, &size) != CUDA_SUCCESS) break;
      slots.emplace_back(offset, size);
      end = std::max(end, offset + size);
    }
    std::vector<uint8_t> bytes(std::max<size_t>(end, 1) + 16, 0);
    std::vector<bool> pointers = pointer_params(name, slots.size());
    std::vector<void*> params;
    for (size_t i = 0; i < slots.size(); ++i) {
      const auto [offset, size] = slots[i];
      const bool pointer = pointers.empty() ? (size == 8 && offset % 8 == 0) : pointers[i];
      // The middle of the buffer: kernels given zero sizes also index at -1 (ne - 1).
      const CUdeviceptr at = m_scratch + k_scratch_bytes / 2;
      if (pointer && size == 8) std::memcpy(bytes.data() + offset, &at, 8);
      params.push_back(bytes.data() + offset);
    }
    unsigned block[3];
    block_of(m.ptx, name, block);
    // All the dynamic shared memory the device lets the kernel have.
    int static_shared = 0;
    cuFuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
    unsigned dynamic_shared = k_shared_optin > unsigned(static_shared) ? k_shared_optin - static_shared : 0;
    if (cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(dynamic_shared)) !=
        CUDA_SUCCESS) {
      dynamic_shared = 0;
    }
    if (m_scratch_dirty) {
      cuMemsetD8(m_scratch, 0, k_scratch_bytes);
      m_scratch_dirty = false;
    }
    m_log.take();
    const auto start = Clock::now();
    CUresult rc = cuLaunchKernel(f, 1, 1, 1, block[0], block[1], block[2], dynamic_shared, nullptr,
                                 params.empty() ? nullptr : params.data(), nullptr);
    m_scratch_dirty = rc == CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) rc = cuCtxSynchronize();
    k.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    const auto lines = m_log.take();
    if (rc == CUDA_SUCCESS) {
      k.outcome = "ran";
    } else if (rc == CUDA_ERROR_NOT_SUPPORTED) {
      k.outcome = "refused";
      k.detail = refusal_reason(lines, name);
    } else if (rc == CUDA_ERROR_ILLEGAL_ADDRESS || rc == CUDA_ERROR_LAUNCH_TIMEOUT ||
               rc == CUDA_ERROR_MISALIGNED_ADDRESS || rc == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
               rc == CUDA_ERROR_LAUNCH_FAILED || rc == CUDA_ERROR_ASSERT ||
               rc == CUDA_ERROR_HARDWARE_STACK_ERROR || rc == CUDA_ERROR_INVALID_ADDRESS_SPACE ||
               rc == CUDA_ERROR_INVALID_PC) {
      k.outcome = "fault";
      k.detail = logged(lines, error_name(rc));
    } else {
      k.outcome = "launch-error";
      k.detail = logged(lines, error_name(rc));
    }
    return k;
  }

  EmulatorLog& m_log;
  bool m_load_only = false;
  CUdevice m_device = 0;
  CUdeviceptr m_scratch = 0;
  bool m_scratch_dirty = true;
  CUcontext m_ctx = nullptr;
};

struct Options {
  std::vector<std::string> sources;
  std::string json;
  std::string hashcat_root = "/usr/share/hashcat";
  std::string hashcat_modes;
  std::string ptx_dir;
  std::string dump_dir;
  bool expect_none = false;
  bool load_only = false;
};

[[noreturn]] void usage(const std::string& why) {
  say("hone-emu-survey: %s\nusage: hone-emu-survey [--json FILE] [--hashcat-root DIR] "
      "[--hashcat-modes FILE] [--ptx-dir DIR] [--expect-none] elf:PATH|ptx:PATH|hashcat:FILE...\n",
      why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " wants a value");
      return argv[++i];
    };
    if (a == "--json") o.json = value();
    else if (a == "--hashcat-root") o.hashcat_root = value();
    else if (a == "--hashcat-modes") o.hashcat_modes = value();
    else if (a == "--ptx-dir") o.ptx_dir = value();
    else if (a == "--expect-none") o.expect_none = true;
    else if (a == "--load-only") o.load_only = true;
    else if (a == "--dump-ptx") o.dump_dir = value();
    else if (a.rfind("--", 0) == 0) usage("unknown option " + a);
    else o.sources.push_back(a);
  }
  if (o.sources.empty()) usage("nothing to survey");
  return o;
}

} // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  setenv("HONE_EMU_INSTRUCTION_BUDGET", "1000000", 0);
  EmulatorLog log;
  if (!log.open()) {
    std::fprintf(stderr, "hone-emu-survey: cannot redirect the emulator's log\n");
    return 1;
  }

  std::optional<hone::survey::HashcatModes> modes;
  std::vector<std::string> keep; // ELF bytes the modules were read from
  std::vector<Module> modules;
  std::vector<std::string> source_errors;
  double compile_ms = 0;
  for (const std::string& s : o.sources) {
    const size_t colon = s.find(':');
    const std::string kind = colon == std::string::npos ? "" : s.substr(0, colon);
    const std::string path = colon == std::string::npos ? s : s.substr(colon + 1);
    if (kind == "elf") {
      auto mods = elf_modules(path, keep.emplace_back());
      if (!mods) {
        source_errors.push_back(mods.error().message);
        continue;
      }
      for (auto& m : *mods) {
        m.origin = "llama.cpp";
        modules.push_back(std::move(m));
      }
    } else if (kind == "ptx") {
      auto text = read_file(path);
      if (!text) {
        source_errors.push_back(text.error().message);
        continue;
      }
      modules.push_back({path, std::move(*text), "ptx"});
    } else if (kind == "hashcat") {
      if (!modes) {
        if (o.hashcat_modes.empty()) usage("hashcat: sources need --hashcat-modes");
        auto m = hone::survey::read_hashcat_modes(o.hashcat_modes);
        if (!m) {
          say("hone-emu-survey: %s\n", m.error().message.c_str());
          return 1;
        }
        modes = std::move(*m);
      }
      const auto start = Clock::now();
      auto ptx = hone::survey::compile_hashcat_kernel(o.hashcat_root, path, *modes, o.ptx_dir);
      compile_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (!ptx) {
        source_errors.push_back(ptx.error().message);
        continue;
      }
      modules.push_back({path, std::move(*ptx), "hashcat"});
    } else {
      usage("a source is elf:PATH, ptx:PATH or hashcat:FILE, not " + s);
    }
  }

  if (!o.dump_dir.empty()) {
    std::filesystem::create_directories(o.dump_dir);
    for (const Module& m : modules) {
      std::string file = m.name;
      for (char& c : file) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
      }
      std::ofstream(o.dump_dir + "/" + file + ".ptx") << m.ptx;
    }
  }
  Survey survey(log, o.load_only);
  if (!survey.init()) return 1;
  std::vector<ModuleOutcome> results;
  for (const Module& m : modules) {
    results.push_back(survey.run(m));
    const ModuleOutcome& r = results.back();
    size_t refused = std::count_if(r.kernels.begin(), r.kernels.end(),
                                   [](const KernelOutcome& k) { return k.outcome == "refused"; });
    say("%-60s %7.0f ms load, %4zu kernels, %4zu refused%s%s\n", m.name.c_str(), r.load_ms,
        r.kernels.size(), refused, r.load_error.empty() ? "" : ": ", r.load_error.c_str());
  }

  // The histogram: each refusal reason, with how many kernels (and modules) it stops.
  std::map<std::string, std::pair<size_t, size_t>> histogram;
  std::map<std::string, size_t> outcomes;
  size_t kernels = 0, load_failures = 0;
  for (const auto& r : results) {
    std::map<std::string, bool> in_module;
    if (!r.load_error.empty()) ++load_failures;
    for (const auto& k : r.kernels) {
      ++kernels;
      ++outcomes[k.outcome];
      if (k.outcome != "refused") continue;
      ++histogram[k.detail].first;
      if (!in_module[k.detail]) ++histogram[k.detail].second;
      in_module[k.detail] = true;
    }
  }
  say("\n%zu modules (%zu could not load), %zu kernels:", results.size(), load_failures, kernels);
  for (const auto& [what, n] : outcomes) say(" %s %zu,", what.c_str(), n);
  say("\n");
  if (compile_ms > 0) say("NVRTC compile of the hashcat kernels: %.1f s\n", compile_ms / 1000);
  std::vector<std::pair<std::string, std::pair<size_t, size_t>>> sorted(histogram.begin(), histogram.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  if (!sorted.empty()) say("refused (kernels, modules: reason):\n");
  for (const auto& [why, n] : sorted) say("  %6zu %4zu  %s\n", n.first, n.second, why.c_str());
  std::vector<const ModuleOutcome*> slowest;
  for (const auto& r : results) slowest.push_back(&r);
  std::sort(slowest.begin(), slowest.end(),
            [](const auto* a, const auto* b) { return a->load_ms > b->load_ms; });
  say("slowest loads (parse and decode):\n");
  for (size_t i = 0; i < std::min<size_t>(5, slowest.size()); ++i) {
    say("  %8.0f ms  %6.1f MB PTX  %s\n", slowest[i]->load_ms, slowest[i]->module.ptx.size() / 1e6,
        slowest[i]->module.name.c_str());
  }
  for (const auto& e : source_errors) say("source error: %s\n", e.c_str());

  if (!o.json.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : results) {
      nlohmann::json m = {{"module", r.module.name}, {"origin", r.module.origin},
                          {"ptx_bytes", r.module.ptx.size()}, {"load_ms", r.load_ms}, {"reload_ms", r.reload_ms},
                          {"load_error", r.load_error}, {"kernels", nlohmann::json::array()}};
      for (const auto& k : r.kernels) {
        m["kernels"].push_back({{"kernel", k.kernel}, {"outcome", k.outcome}, {"detail", k.detail}, {"ms", k.ms}});
      }
      j.push_back(std::move(m));
    }
    std::ofstream(o.json) << j.dump(1) << "\n";
  }

  if (!source_errors.empty()) return 1;
  if (o.expect_none && (!histogram.empty() || load_failures > 0)) {
    say("hone-emu-survey: the emulated device refused %zu kernels and %zu modules\n",
        outcomes["refused"], load_failures);
    return 1;
  }
  return 0;
}
