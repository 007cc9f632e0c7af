// NVRTC, the runtime CUDA C++ compiler, behind hone's Result errors.
//
// Linked (not dlopened): only the daemon's worker and the tests compile CUDA C++; the shim never
// links this (it hooks NVRTC in the application instead).
#pragma once

#include "common/result.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace hone::cuda {

struct NvrtcHeader {
  std::string name;   // as #included
  std::string source;
};

struct NvrtcOutput {
  std::string ptx;
  std::string log;    // compiler warnings, possibly empty
};

// Compile `source` (named `name` in messages) to PTX with NVRTC `options`
// (e.g. "--gpu-architecture=compute_90"). A compile error returns the compiler log in the error.
Result<NvrtcOutput> nvrtc_compile(std::string_view source, std::string_view name,
                                  const std::vector<std::string>& options,
                                  const std::vector<NvrtcHeader>& headers = {});

// "13.0" and so on.
std::string nvrtc_version();

// The CUDA toolkit's include directory that belongs to the NVRTC in use (the one holding
// cuda_fp16.h, cuda_bf16.h, ...): beside the library's directory, else $CUDA_HOME/include, else
// /usr/local/cuda/include; empty when none holds cuda_fp16.h. For `--include-path=`, so that
// candidates may include the device headers NVRTC does not build in.
std::string cuda_include_dir();

} // namespace hone::cuda
