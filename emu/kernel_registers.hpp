// The registers each kernel of a PTX module uses on sm_90, as ptxas allocates them: the toolkit's
// ptxas compiles the module (`ptxas -arch=sm_90 -v`, a child process) and its report is read. The
// cost model's occupancy depends on it, as a GPU's does.
//
// A child process, not nvJitLink in this one: nvJitLink calls cuInit, which here is the emulated
// driver itself, inside the launch that asked.
#pragma once

#include "emu/program.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace hone::emu {

struct ModuleRegisters {
  std::map<std::string, uint32_t, std::less<>> by_kernel; // entry name -> registers per thread
  std::string error; // why there are none: no ptxas, or ptxas rejected the module
  // "9.0" when ptxas refused the module's newer `.version` and compiled it declaring this one
  std::string lowered_version;
};

// Compiles `ptx` for sm_90 and reads the registers of every entry. Never throws. The ptxas run is
// HONE_EMU_PTXAS, else the toolkit's the build found, else `ptxas` on PATH.
// `options` become ptxas's -maxrregcount and -maxntid. Reports are kept in a cache directory
// (HONE_EMU_CACHE_DIR, else $XDG_CACHE_HOME/hone-emu, else ~/.cache/hone-emu; "off" for none),
// keyed by the ptxas binary, its arguments and the PTX, so a module is compiled once per machine.
ModuleRegisters kernel_registers(std::string_view ptx, const CompileOptions& options = {});

// Where the emulated device keeps what it computes once per machine (ptxas reports, compiled
// kernels): HONE_EMU_CACHE_DIR, else $XDG_CACHE_HOME/hone-emu, else ~/.cache/hone-emu; "" when
// HONE_EMU_CACHE_DIR=off or there is no home.
std::string cache_dir();

// Registers assumed for a kernel ptxas gave no count for.
constexpr uint32_t k_fallback_registers = 32;

} // namespace hone::emu
