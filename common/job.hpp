// The work honed hands a worker (DESIGN.md, "Validation", "Benchmark"): one candidate of one
// kernel, the original to hold it to, and the captured launches to run both on; and the verdict
// that comes back.
//
// A job travels as one sealed memfd, the bundle: "HJOB", a format version, the encoded Job, then
// the data of each capture, in order.
#pragma once

#include "common/capture.hpp"
#include "common/guard.hpp"
#include "common/identity.hpp"
#include "common/protocol.hpp"
#include "common/result.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace hone {

enum class CandidateKind : uint8_t {
  ptx = 0,  // PTX text, loaded with the JIT options
  cuda = 1, // CUDA C++ source, compiled with NVRTC (nvrtc_options) for the device
  cubin = 2,
};

enum class Comparison : uint8_t {
  bitwise = 0,   // every byte of every buffer equal: re-JIT, launch bounds, most specializations
  tolerance = 1, // floating-point elements within Tolerance; integers and the rest still exact
};

struct Tolerance {
  double f32_rel = 1e-5, f32_abs = 1e-6;
  double f64_rel = 1e-12, f64_abs = 1e-14;
  double f16_rel = 1e-2, f16_abs = 1e-3; // also bf16
};

struct BenchSettings {
  uint32_t warmup = 3;       // runs of each before measuring
  uint32_t runs = 21;        // measured runs of each, interleaved original/candidate: at most
  uint32_t min_runs = 5;     // ... and at least: past it, measuring stops once the verdict is certain
  double min_speedup = 1.05; // accepted only when faster than this ...
  double noise_factor = 3;   // ... by more than this many times the measured noise
  double suspicious = 10;    // speedups above this are re-validated and re-measured first
};

// What a job does with its candidate: all of validation and the benchmark, or less.
enum class JobCheck : uint8_t {
  none = 0,     // validate and time it: a variant if verified
  compile = 1,  // compile and load it, and compare its parameters with the original's
  validate = 2, // that, then validation on one capture, not timed
};

struct Job {
  uint64_t id = 0;
  KernelKey kernel;
  proto::ImageFormat original_format = proto::ImageFormat::ptx;
  std::string original_image; // as the application loaded it (PTX text with its NUL, cubin, fatbin)
  std::string original_entry;
  // The PTX honed resolved for the original when its image has none the device would JIT
  // (newer-architecture PTX retargeted, Triton's): for the analysis and the static checks only;
  // the original always runs as the application loaded it.
  std::string original_ptx;
  CandidateKind kind = CandidateKind::ptx;
  std::string candidate;      // PTX text, CUDA source or cubin
  std::string candidate_entry;
  std::vector<std::string> jit_options;   // "name=value", CUjit_option names without CU_JIT_
  std::vector<std::string> nvrtc_options; // for kind cuda
  Comparison comparison = Comparison::bitwise;
  Tolerance tolerance;
  BenchSettings bench;
  Guard guard;                // the candidate serves only launches that pass it
  // Refuse from its PTX a candidate that keeps state in module-scope memory, downgrades
  // precision or writes an input ([validation] static_checks).
  bool static_checks = true;
  // Before each validation run on a GPU, seeded garbage in shared and local memory
  // (daemon/worker/scrub.hpp; [validation] gpu_scrub).
  bool gpu_scrub = true;
  // A shadow check: no candidate; each capture is of a launch a variant served, with its
  // outputs after the variant ran, and the original must give the same on the same inputs.
  bool shadow_check = false;
  // A check for a strategy (the LLM's tools `compile` and `check`): nothing of it is stored or
  // served, and its verdict is `verified` for "it compiled" or "it was correct".
  JobCheck check = JobCheck::none;
  std::vector<Capture> captures;
};

enum class VerdictKind : uint8_t {
  verified = 0,
  compile_error = 1,   // NVRTC or the JIT refused the candidate (log in the message)
  load_error = 2,      // the module loaded but the entry is missing or its parameters differ
  launch_error = 3,    // the candidate's launch failed (resources, shape)
  illegal_address = 4, // it read or wrote outside its buffers (or misaligned)
  timeout = 5,         // it ran past the watchdog
  mismatch = 6,        // a buffer differs from the original's (buffer, index, got, want)
  nondeterministic = 7, // two runs of the candidate on the same input differ
  not_faster = 8,
  suspicious = 9,      // a huge speedup that did not survive re-checking
  unsupported = 10,    // the job cannot be run here (e.g. buffers holding pointers to others)
  internal = 11,       // the worker failed; not the candidate's fault
  refused = 12,        // its PTX does what a candidate may not (a cheat pattern), before any run
  // The candidate's preconditions hold for none of the launches the application made (no capture
  // passes its guard, e.g. pointers that alias for a read-only variant): nobody's fault, nothing
  // to run it on. Not `internal` (hone's own faults) nor `unsupported` (a job the worker cannot run).
  not_applicable = 13,
};

// The highest VerdictKind: decoders refuse anything above it. A worker and honed ship together
// (honed starts the worker of its own install), so both sides always know the same kinds; a
// newer worker's not_applicable reaching an older honed would end that job as internal error
// ("unknown verdict"), never crash it.
inline constexpr VerdictKind k_last_verdict_kind = VerdictKind::not_applicable;

const char* to_string(VerdictKind k);

struct Verdict {
  uint64_t job = 0;
  VerdictKind kind = VerdictKind::internal;
  std::string message;
  double original_ns = 0;   // median of the measured runs
  double candidate_ns = 0;
  double speedup = 0;
  double noise = 0;         // relative spread of the measurements
  uint32_t captures_used = 0;
  Comparison comparison = Comparison::bitwise;
  std::string evidence_json;
  std::string compiled_ptx; // for a CUDA candidate: the PTX NVRTC made of it (what would serve)
  // From the worker to honed: it exits right after this verdict (the candidate left its context
  // unusable), so no further job may be sent to it.
  bool worker_exits = false;
};

void encode(wire::Writer& w, const Job& j);
bool decode(wire::Reader& r, Job& j);
void encode(wire::Writer& w, const Verdict& v);
bool decode(wire::Reader& r, Verdict& v);

// The bundle: the job and its capture data, as written to (and read from) a memfd.
std::string encode_bundle(const Job& job, const std::vector<std::string_view>& capture_data);
struct Bundle {
  Job job;
  std::vector<std::string_view> capture_data; // views into `bytes`
  std::string bytes;
};
Result<Bundle> decode_bundle(std::string bytes);

} // namespace hone
