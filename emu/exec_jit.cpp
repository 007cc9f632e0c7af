#include "emu/exec_jit.hpp"

#include "emu/kernel_registers.hpp"
#include "emu/log.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <dlfcn.h>

namespace hone::emu {

namespace {

// `auto` compiles a kernel at a launch of at least this many threads, or once launches without
// compiled code have executed this many thread-instructions: about 0.1 s of interpretation, more
// than compiling a kernel of a few hundred instructions takes.
constexpr uint64_t k_auto_threads = 1u << 16;
constexpr uint64_t k_auto_instructions = 1u << 25;

// The compiler library beside this one, opened once; nullptr when it cannot be used (said once:
// at info level, or warn when HONE_EMU_EXEC=compile asked for it).
const jit::Api* jit_api(ExecMode mode) {
  static std::string problem;
  static const jit::Api* api = [] () -> const jit::Api* {
    Dl_info self{};
    if (!dladdr(reinterpret_cast<void*>(&execution_mode), &self) || !self.dli_fname) {
      problem = "cannot tell where libcuda.so.1 was loaded from";
      return nullptr;
    }
    std::string path = self.dli_fname;
    path = path.substr(0, path.rfind('/') + 1) + "libhone-emu-jit.so";
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      problem = why ? why : ("cannot open " + path);
      return nullptr;
    }
    auto entry = reinterpret_cast<jit::ApiFn>(dlsym(handle, jit::k_api_symbol));
    const jit::Api* a = entry ? entry(jit::k_abi_version) : nullptr;
    if (!a) problem = path + " is of another version than this libcuda.so.1";
    return a;
  }();
  static std::once_flag said;
  if (!api) {
    std::call_once(said, [mode] {
      log(mode == ExecMode::compile ? LogLevel::warn : LogLevel::info,
          "compiled execution is not available (" + problem + "): kernels are interpreted");
    });
  }
  return api;
}

} // namespace

ExecMode execution_mode() {
  const char* e = std::getenv("HONE_EMU_EXEC");
  const std::string_view v = e ? e : "";
  if (v.empty() || v == "auto") return ExecMode::automatic;
  if (v == "interpret") return ExecMode::interpret;
  if (v == "compile") return ExecMode::compile;
  static std::once_flag said;
  std::call_once(said, [v] {
    // The frozen reference interpreter was retired once the interpreter and compiled code were
    // checked against each other (emu/README.md, "Execution paths").
    log(LogLevel::warn, "HONE_EMU_EXEC=" + std::string(v) +
                            (v == "reference" ? ": the reference path was retired (emu/README.md, "
                                                "\"Execution paths\"); using auto"
                                              : " is not one of auto, compile, interpret: using auto"));
  });
  return ExecMode::automatic;
}

KernelCode::~KernelCode() {
  if (m_code) m_api->release(m_code);
}

const jit::Code* KernelCode::for_launch(const CompiledKernel& kernel, ExecMode mode,
                                        uint64_t threads) {
  switch (mode) {
  case ExecMode::interpret:
    return nullptr;
  case ExecMode::compile:
    return compiled(kernel);
  case ExecMode::automatic:
    break;
  }
  if (threads >= k_auto_threads ||
      m_interpreted.load(std::memory_order_relaxed) >= k_auto_instructions) {
    return compiled(kernel);
  }
  return nullptr;
}

const jit::Code* KernelCode::compiled(const CompiledKernel& kernel) {
  std::call_once(m_once, [&] {
    const ExecMode mode = execution_mode();
    m_api = jit_api(mode);
    if (!m_api) return;
    std::string error;
    const auto start = std::chrono::steady_clock::now();
    // a kernel holding module variables' addresses compiles to other code in every process:
    // keeping it would only fill the cache
    m_code = m_api->compile(kernel, kernel.uses_module_addresses ? std::string() : cache_dir(), error);
    if (!m_code) {
      log(LogLevel::warn, "kernel " + kernel.name + ": cannot compile it (" + error +
                              "); it is interpreted");
      return;
    }
    if (log_enabled(LogLevel::debug)) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f", ms);
      log(LogLevel::debug, "kernel " + kernel.name + ": " +
                               (m_code->from_cache ? "loaded compiled code in " : "compiled in ") +
                               buf + " ms, " +
                               std::to_string(m_code->inline_forms) + " of " +
                               std::to_string(m_code->instructions) +
                               " instructions as lane operations, " +
                               std::to_string(m_code->helper_forms) + " through the interpreter");
    }
  });
  return m_code;
}

} // namespace hone::emu
