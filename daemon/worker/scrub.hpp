// The scrub: before a validation run on a GPU, seeded garbage in every SM's shared memory and in
// the local-memory window, so that a kernel reading shared or local memory it never wrote sees
// different bytes in the two runs (a `nondeterministic` verdict) instead of whatever the previous
// kernel left there, often the same in both. The emulated device does this itself under a fill
// seed (HONE_EMU_FILL_SEED); a GPU does nothing of the kind (docs/security.md, "Validation").
#pragma once

#include <cstdint>
#include <string>

namespace hone::worker {

// Entry points of the scrub module.
inline constexpr const char* k_scrub_shared_entry = "hone_scrub_shared";
inline constexpr const char* k_scrub_local_entry = "hone_scrub_local";

// The scrub's PTX (NUL-free text; load it with its terminating NUL). Two entries:
//
//   hone_scrub_shared(.u64 seed, .u32 bytes): each block writes the first `bytes` of its dynamic
//     shared memory, 4 bytes a thread at a time, with a hash of the seed, the block and the
//     offset. Launched with the most dynamic shared memory a block may opt in to and the
//     carveout set to all shared, one block fills an SM's shared memory but the driver's reserved
//     kilobyte per block.
//   hone_scrub_local(.u64 seed): each thread writes its whole `local_bytes` frame (rounded up to
//     16) with a hash of the seed, the thread and the offset. Local memory is laid out per
//     hardware thread slot by the frame size the kernel declares, so the scrub declares the frame
//     of the kernel about to run, and the same slots then hold the garbage that kernel would read.
//
// The stores are volatile, so that ptxas keeps stores nothing reads (local memory's through its
// generic address: PTX allows no `.volatile` on `.local`).
std::string scrub_ptx(uint32_t local_bytes);

// The frame `scrub_ptx` declares for a kernel with `local_bytes` of local memory per thread: 0
// (no local scrub) for a kernel without local memory, else rounded up to 16 and capped at
// k_scrub_local_max. Past the cap the layout of the scrub's frames need not be the kernel's, so a
// kernel with a larger frame is scrubbed only as far as the layouts agree (docs/security.md);
// the cap bounds the local memory the driver reserves for the scrub (frame x resident threads).
inline constexpr uint32_t k_scrub_local_max = 16u << 10;
uint32_t scrub_local_frame(int local_bytes);

} // namespace hone::worker
