// What a verdict tells the model beyond "verified" or "mismatch": what bounds the original and the
// candidate (agent/README.md, "LLM feedback"). The worker records it in the verdict's evidence as
// "profile" (daemon/worker/job_run.cpp): on the emulated device, its cost model's account of each
// kernel's launch (issue-, latency-, L1-, L2- or DRAM-bound, the terms in nanoseconds, occupancy
// and what limits it, waves, bytes moved against the DRAM roofline); on a GPU, what the driver
// reports of the compiled kernel (ptxas' registers, local memory, static shared memory, resident
// warps) and the bandwidth its buffers imply at the measured time.
#pragma once

#include <string>
#include <string_view>

namespace hone::agent {

// The profile in `evidence_json` as lines a kernel engineer reads, or "" when the evidence has
// none (the candidate never reached the benchmark) or cannot be read.
std::string profile_feedback(std::string_view evidence_json);

} // namespace hone::agent
