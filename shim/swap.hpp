// Hot swap inside the application (DESIGN.md, "Hot swap"). The reporter thread loads a verified
// variant into each context the kernel lives in and publishes it per function handle; launches
// then check its guard in a few nanoseconds and run the variant, falling back to the original on
// a guard mismatch or any launch error. Removal withdraws it at once; its module stays loaded
// (a launch may still be using it) until the process exits.
#pragma once

#include "common/protocol.hpp"

#include <string>
#include <vector>

namespace hone::shim {

// Reporter thread: install `msg` (image bytes in `image`) for every handle of its kernel.
// Returns the status to report.
proto::VariantStatus install_variant(const proto::InstallVariant& msg, std::string image);
proto::VariantStatus remove_variant(const proto::RemoveVariant& msg);
// Reporter thread: install known variants on handles looked up since (new contexts, reloads).
std::vector<proto::VariantStatus> install_on_new_handles();
void swap_reset_after_fork();

} // namespace hone::shim
