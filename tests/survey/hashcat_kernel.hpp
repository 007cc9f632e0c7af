// Compile a kernel file of hashcat's OpenCL folder with NVRTC the way hashcat 6.2.6 does for a
// CUDA device of compute capability 9.0 (tests/survey/README.md says where each option comes from).
#pragma once

#include "common/result.hpp"

#include <cstdint>
#include <map>
#include <string>

namespace hone::survey {

// What a hash mode's module contributes to the build options (hashcat_modes.tsv).
struct HashcatMode {
  uint64_t kern_type = 0;
  uint32_t attack_exec = 0; // 10 outside the kernel (slow hashes), 11 inside
  uint32_t dgst_r[4] = {0, 1, 2, 3};
  uint32_t dgst_elem = 4;
};
using HashcatModes = std::map<uint32_t, HashcatMode>;

Result<HashcatModes> read_hashcat_modes(const std::string& path);

// The PTX of `file` (a name in <root>/OpenCL, e.g. "m00000_a3-optimized.cl"). Kernels of a hash
// mode take that mode's values; the attack comes from the name (_a0, _a1, _a3; a slow hash's
// kernel, named without one, and the shared, amp and markov kernels take the straight attack's).
// With `ptx_dir` non-empty, the PTX is kept there under a name derived from the file and the
// options, and read back instead of compiled when present.
Result<std::string> compile_hashcat_kernel(const std::string& root, const std::string& file,
                                           const HashcatModes& modes, const std::string& ptx_dir);

} // namespace hone::survey
