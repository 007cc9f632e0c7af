// Retargeting: PTX written for a newer GPU (sm_100, sm_103a, sm_120, ...) lowered to sm_90 when
// every instruction it uses exists there, refused otherwise.
//
// Applications ship fatbins whose only PTX is for compute_100 or compute_120; on an H100/H200 hone
// wants that PTX as the kernel's PTX. Only the `.target` architecture and, where the toolkit needs
// it, the `.version` change: every other byte of the text stays as it was, so the code computes
// exactly what the original computes.
#pragma once

#include "common/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace hone::ptx {

// The highest PTX ISA version the CUDA toolkit hone builds against assembles: CUDA 13.0's ptxas
// (V13.0.88) refuses `.version 9.1` with "current version is '9.0'" (PTX ISA 9.0 release notes:
// PTX ISA 9.0 ships with CUDA 13.0).
inline constexpr uint32_t k_max_ptx_version_major = 9;
inline constexpr uint32_t k_max_ptx_version_minor = 0;

struct RetargetResult {
  std::string ptx;         // the module text for the target
  std::string from_target; // the architecture the module declared: "sm_100a"
  std::string to_target;   // "sm_90", or "sm_90a" when the module uses sm_90a features
  std::string version;     // the .version it now declares: "9.0"
  std::string why_90a;     // the first instruction that made the target sm_90a; empty for sm_90
};

// Lower `ptx_text`, a whole module whose `.target` is an architecture newer than `arch`, to run on
// a device of compute capability `arch` (only 90 is supported). Errors, each naming what it is
// about: the text does not parse; the module already targets `arch` or older (nothing to do); the
// module uses an instruction, type, modifier, directive, special register or target option that
// sm_90 and sm_90a lack, or one hone cannot confirm they have ("tcgen05.alloc.cta_group::1... (line
// 12) needs sm_100a; sm_90 has no tcgen05 ..."; the first one found is reported).
Result<RetargetResult> retarget(std::string_view ptx_text, uint32_t arch = 90);

// `ptx_text` declaring `.version major.minor` instead of the newer version it declares, every
// other byte as it was: for an assembler that knows only ISA versions up to that one (CUDA 13.1
// writes 9.1, CUDA 13.0's ptxas refuses it). Whether the instructions exist in the older version
// is for the assembler to say: a module that uses something newer fails there, with its line.
// Errors: no `.version` directive at the start, or the module's version is not newer.
Result<std::string> lower_version(std::string_view ptx_text, uint32_t major, uint32_t minor);

} // namespace hone::ptx
