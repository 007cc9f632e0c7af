// Bounded captures (shim/README.md, "Bounded captures"): which bytes of each allocation a launch
// touches, seen by running a bounds probe of its kernel (ptx/bounds_probe.hpp) once with the
// launch's own shape and parameters, just before the captured launch, on the same stream.
#pragma once

#include "common/result.hpp"
#include "shim/launch_args.hpp"
#include "shim/registry.hpp"

#include <cstdint>
#include <vector>

namespace hone::shim {

// One allocation a launch's pointers reach, and what the probe saw the launch touch in it.
struct TouchedRange {
  uint64_t base = 0; // the allocation
  uint64_t size = 0;
  uint64_t lo = ~0ull; // lowest address touched; ~0 (and hi 0) when nothing was
  uint64_t hi = 0;     // one past the highest byte touched
  bool touched() const { return lo < hi; }
};

// Captured ranges are widened to this alignment (within the allocation): the worker restores a
// range where the pointers keep their alignment modulo it, which vectorized candidates rely on.
inline constexpr uint64_t k_range_alignment = 256;

// Run the probe of `r`'s kernel for launch `a` of `function` over `ranges` (base and size set)
// and fill in lo/hi. Waits for the stream. An error says why no probe ran (the kernel has no PTX
// here, an instruction the probe cannot bound, the probe failed to load or launch).
Result<void> probe_launch(KernelRecord* r, void* function, const LaunchArgs& a,
                          std::vector<TouchedRange>& ranges);

// After fork: the parent's probes (modules of its contexts) are not the child's.
void probes_reset_after_fork();

// The range of `t`'s allocation to capture: [lo, hi) widened to k_range_alignment, at least one
// aligned block (around `pointer` when nothing was touched), within the allocation.
void captured_range(const TouchedRange& t, uint64_t pointer, uint64_t* start, uint64_t* size);

} // namespace hone::shim
