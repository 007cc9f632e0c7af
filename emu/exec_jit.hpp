// Which execution path runs a launch's blocks, and the compiled code of a kernel (emu/jit/).
//
// HONE_EMU_EXEC (read at every launch): `interpret` (the interpreter), `compile` (compile every
// kernel at its first launch) or `auto` (the default: compile a kernel once its launches are large
// enough to repay the compile).
// Compiled code comes from libhone-emu-jit.so, opened from the directory this library was loaded
// from the first time a kernel is compiled; without it every kernel is interpreted.
#pragma once

#include "emu/exec_code.hpp"
#include "emu/jit/abi.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>

namespace hone::emu {

enum class ExecMode : uint8_t { automatic, interpret, compile };

// HONE_EMU_EXEC; an unknown value is `auto` (logged once), and so is `reference`, the retired
// reference interpreter (logged once, saying so).
ExecMode execution_mode();

// A kernel's compiled code, made at most once and released with the kernel.
class KernelCode {
public:
  KernelCode() = default;
  KernelCode(const KernelCode&) = delete;
  KernelCode& operator=(const KernelCode&) = delete;
  ~KernelCode();

  // The code to run a launch of `kernel` with under `mode`, compiling it first if this launch
  // decides so; nullptr when the launch is interpreted. `threads` is the launch's thread count.
  const jit::Code* for_launch(const CompiledKernel& kernel, ExecMode mode, uint64_t threads);
  // Counts what a launch that ran without compiled code executed, toward compiling it later.
  void interpreted(uint64_t thread_instructions) {
    m_interpreted.fetch_add(thread_instructions, std::memory_order_relaxed);
  }

private:
  const jit::Code* compiled(const CompiledKernel& kernel);

  std::once_flag m_once;
  const jit::Code* m_code = nullptr;
  const jit::Api* m_api = nullptr;
  std::atomic<uint64_t> m_interpreted{0};
};

} // namespace hone::emu
