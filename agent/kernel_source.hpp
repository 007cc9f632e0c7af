// Finding and rewriting one kernel in the CUDA C++ source an application gave NVRTC, for the
// strategies that work at source level (specialization). Text-level, not a C++ front end: it
// understands comments, literals, preprocessor lines, braces and namespaces, and refuses (with an
// error saying why) whatever it cannot resolve with certainty — templates, overloads, macros that
// spell `__global__`, unnamed parameters. A refusal means "use the PTX instead", never a guess.
#pragma once

#include "common/protocol.hpp"
#include "common/result.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hone::agent {

// The program's source with every `#include` of a header it was given by name (SourceInfo
// headers) replaced by that header's text, recursively, so that it compiles as one file without
// headers (the worker's NVRTC call passes none). Includes of other files are left as written.
Result<std::string> inline_headers(const proto::SourceInfo& source);

// The options of the application's nvrtcCompileProgram as a candidate compiled from its source
// takes them: include paths, defines, architecture, standard and the rest as recorded (the worker
// puts its device's architecture and the toolkit's headers before them, daemon/worker/compile.cpp).
// Two-token forms (`-I dir`, `-D NAME=1`, `--gpu-architecture compute_90`, as hashcat passes them)
// are joined into one option each; empty options and those that make other outputs than PTX are
// dropped.
struct CandidateOptions {
  std::vector<std::string> options;      // what the candidate is compiled with
  std::vector<std::string> include_dirs; // the include directories among them, in order
  std::vector<std::string> dropped;      // the recorded options a candidate does not take
};
CandidateOptions nvrtc_candidate_options(const std::vector<std::string>& recorded);

// Why a candidate could not be compiled with these include directories here: the first one this
// process cannot read (honed runs as user hone) or that is relative (the application's working
// directory is not known here); nullopt when every one can be read.
std::optional<std::string> unreadable_include(const std::vector<std::string>& dirs);

struct KernelParam {
  std::string text; // as written: "const float* __restrict__ x"
  std::string name; // "x"
  // The declared type without qualifiers that do not change the value's representation (const,
  // volatile, __restrict__, __grid_constant__, register), tokens joined: "float*", "unsigned int".
  std::string type;
};

// Where a __global__ function's definition lies in a source text (byte offsets into it).
struct KernelDefinition {
  std::vector<std::string> namespaces; // enclosing named namespaces, outermost first
  size_t head_begin = 0;               // start of the declaration (specifiers, attributes)
  size_t name_begin = 0, name_end = 0;
  size_t params_begin = 0, params_end = 0; // inside the parentheses
  std::vector<KernelParam> params;
};

// The one definition of the kernel whose PTX entry is `entry`: an extern "C" name, or an Itanium
// mangled name (`_ZN9hone_test4blurEPKiPii`) that is demangled to find its namespace. An error when
// there is none, more than one (overloads), or it is a template.
Result<KernelDefinition> find_kernel(std::string_view source, std::string_view entry);

// `source` with the kernel of `def` turned into `__device__ __forceinline__ <name><body_suffix>`
// and, appended in the same namespace, `extern "C" __global__ void <wrapper>(<the same
// parameters>)` that calls it with `arguments[i]` for parameter i, or the parameter itself where
// that is nullopt. Kernel-only attributes (__launch_bounds__, __maxnreg__, __cluster_dims__) move
// to the wrapper. An error when the wrapper's name is already used in the source.
Result<std::string> wrap_kernel(std::string_view source, const KernelDefinition& def,
                                std::string_view wrapper, std::string_view body_suffix,
                                const std::vector<std::optional<std::string>>& arguments);

} // namespace hone::agent
