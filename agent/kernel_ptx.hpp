// What a kernel's strategies have to work on, whatever form its module image came in (coverage,
// agent/README.md): NVRTC source, PTX for this GPU, PTX for a newer architecture retargeted to
// this one, PTX from Triton's cache, or SASS only; collective kernels are never worked on.
#pragma once

#include "agent/strategy.hpp"
#include "common/result.hpp"

#include <string>
#include <string_view>

namespace hone::agent {

enum class CodeKind : uint8_t {
  unknown,    // the image has not been looked at yet
  source,     // NVRTC source (the PTX too, when the image has it)
  ptx,        // PTX for this GPU: a PTX image, or a fatbin's PTX entry the driver would JIT
  ptx_newer,  // only PTX for newer GPUs: retargeted to this one (workable), or refused
  triton,     // SASS, with the PTX Triton compiled it from in the application's cache
  sass,       // SASS only
  collective, // waits on other GPUs (NCCL, custom all-reduce): never captured or optimized
};
const char* to_string(CodeKind k);
inline constexpr CodeKind k_code_kinds[] = {CodeKind::source,    CodeKind::ptx,
                                            CodeKind::ptx_newer, CodeKind::triton,
                                            CodeKind::sass,      CodeKind::collective,
                                            CodeKind::unknown};

struct KernelCode {
  CodeKind kind = CodeKind::unknown;
  std::string ptx;    // the PTX the strategies work on (for ptx_newer: retargeted); may be empty
  std::string detail; // for people: "compute_100 PTX retargeted to sm_90", "SASS only (sm_90)"
  // The PTX is one of the JIT link's inputs, not the image's own: the worker's analysis is told.
  bool linked = false;
  // The strategies have code to work on: PTX, or the NVRTC source.
  bool workable() const { return !ptx.empty() || kind == CodeKind::source; }
};

// What `task` offers to work from, from its image, source, Triton PTX and, for a cubin the JIT
// linker made, the link's PTX input that defines the entry (task.ptx is what this resolves to, for
// the strategies: it is not read here).
KernelCode kernel_code(const KernelTask& task);

// The kernel's PTX (without a trailing NUL): task.ptx when set; else the image itself when it is
// PTX, the PTX entry of a fatbin that a driver would JIT for task.arch (the newest when the arch
// is unknown), newer-architecture PTX retargeted to task.arch, or the Triton cache's PTX. An error
// saying why when there is none ("a fatbin with SASS only (sm_90)", "a cubin: SASS only").
Result<std::string> kernel_ptx(const KernelTask& task);

// Kernels that wait on other GPUs, by name: NCCL's and the custom all-reduce kernels of inference
// servers (vLLM, TensorRT-LLM, SGLang). A heuristic: the driver says nothing of it.
bool is_collective(std::string_view entry);

// A PTX parameter's name for people: nvcc names them <entry>_param_<N>, which for a mangled C++
// entry repeats the whole mangled name: "param N" then. Other names stay as they are.
std::string param_label(std::string_view entry, std::string_view name);

} // namespace hone::agent
