// Which parameters of a kernel hold pointers, from the PTX analysis of its image
// (ptx/analysis.hpp). Capture copies the allocations they point into; a no_alias guard checks at
// each launch that no two of them share one.
#pragma once

#include "common/identity.hpp"
#include "shim/registry.hpp"

#include <optional>
#include <vector>

namespace hone::shim {

// The pointer fields of `key`'s parameters, or nullopt when the shim has no PTX of the kernel
// (a cubin or fatbin image, one over HONE_IMAGE_CACHE_MB, or PTX it cannot parse). Parses the
// image: call it off the launch path.
std::optional<std::vector<PointerField>> pointer_fields(const KernelKey& key);

} // namespace hone::shim
