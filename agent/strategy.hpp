// The agent's strategies (DESIGN.md, "Agent"): each turns a kernel task into candidates for the
// validation worker. One interface; the daemon's optimizer runs them, ranks them, and feeds every
// candidate through the same validation path as a kernel engineer's submission. Verdicts come
// back to the session that proposed the candidate, so a strategy can learn and try again.
//
// Threading: the optimizer calls every method on its own (the daemon's) thread. A session that
// works in the background (the LLM one) keeps its own thread and hands results over inside
// poll(); it must never block the caller.
#pragma once

#include "common/capture.hpp"
#include "common/guard.hpp"
#include "common/identity.hpp"
#include "common/job.hpp"
#include "common/protocol.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hone::agent {

// A verified rewrite of another kernel on this host, shown to a strategy that asks for examples
// (Strategy::examples_wanted): its code only, never what it computed on.
struct Example {
  std::string kernel;  // the rewritten kernel's name
  double speedup = 0;  // as verified here
  std::string source;  // the CUDA source that was verified
};

// What a strategy knows about a kernel.
struct KernelTask {
  KernelKey key;
  proto::ImageFormat format = proto::ImageFormat::unknown;
  std::string image;                       // the module image (PTX text with its NUL for PTX)
  std::optional<proto::SourceInfo> source; // the NVRTC source, when the shim captured it
  std::vector<Capture> captures;           // observed launches: shapes and scalar bytes
  std::string arch;                        // "sm_90"
  std::string device;                      // the device's name, as the shim reported it
  std::vector<Example> examples;           // only for a strategy that asks for them
  // The PTX of a SASS image from the application's Triton cache (proto::Image::triton).
  std::string triton_ptx;
  // A cubin the application's JIT linker made: its inputs, their PTX (proto::Image::linked).
  std::optional<proto::Image::Linked> linked;
  // A fatbin's PTX for this compute capability (90) is not to be used: a test-only setting
  // (HONE_TEST_HIDE_PTX_ARCH) that makes a kernel the emulated device runs from PTX look SASS-only
  // or newer-arch-PTX-only to the strategies. 0: none hidden.
  uint32_t hide_ptx_arch = 0;
  // The PTX the strategies work on, when the caller has resolved it already (kernel_code()):
  // kernel_ptx() returns it as it is.
  std::string ptx;
  // Where Strategy::start says why it does not apply (decline()), for `honectl show`; null when
  // the caller does not ask.
  std::string* declined = nullptr;
};

struct Candidate {
  std::string strategy;    // the id of the strategy that made it
  std::string description; // for people: what was changed
  CandidateKind kind = CandidateKind::ptx;
  std::string code; // PTX text or CUDA source
  std::string entry;
  std::vector<std::string> jit_options; // "NAME=value"
  std::vector<std::string> nvrtc_options;
  Comparison comparison = Comparison::bitwise; // what "same result" means for it
  Guard guard;                                 // which launches it may serve
  uint64_t tag = 0; // the session's own id for it (verdicts carry it back)
  // Less than a full job (Job::check): only compile it, or only validate it on one capture
  // without timing it. Its verdict goes back to the session; nothing is stored or served.
  JobCheck check = JobCheck::none;
};

// One strategy's work on one kernel.
class Session {
public:
  virtual ~Session() = default;
  // Candidates ready now; empty while the session is still working (or has nothing more).
  virtual std::vector<Candidate> poll() = 0;
  // The verdict on a candidate this session proposed (matched by Candidate::tag).
  virtual void on_verdict(const Candidate& candidate, const Verdict& verdict) {
    (void)candidate;
    (void)verdict;
  }
  // Nothing more will come from poll().
  virtual bool done() const = 0;
  // For status: what it is doing ("turn 2 of 4: waiting for the model").
  virtual std::string state() const { return done() ? "done" : "working"; }
};

class Strategy {
public:
  virtual ~Strategy() = default;
  // A stable id ("rejit"), recorded per kernel so a restart does not redo it.
  virtual std::string id() const = 0;
  // Whether it reads the captured launches (scalar values, shapes) and must wait for them.
  virtual bool needs_captures() const { return false; }
  // Whether it can only work on the kernel's PTX (kernel_ptx.hpp); those that can also work from
  // a captured NVRTC source say no. The optimizer skips the former, with the reason, for a kernel
  // whose image has no PTX (SASS only), without waiting for captures.
  virtual bool needs_ptx() const { return true; }
  // The speedup it typically brings and the GPU-seconds a try costs, for ranking strategies
  // before any verdict is known (expected gain per GPU-second; the optimizer refines it from
  // verdicts).
  virtual double expected_speedup() const { return 1.05; }
  virtual double cost_gpu_seconds() const { return 1.0; }
  // How many verified rewrites of other kernels it would be shown (KernelTask::examples).
  virtual uint32_t examples_wanted() const { return 0; }
  // Whether it can work on a kernel with neither PTX nor source (SASS only), from what the
  // kernel is observed to do: such kernels then count as covered.
  virtual bool works_without_code() const { return false; }
  // Work on `task`; nullptr when the strategy does not apply to this kernel.
  virtual std::unique_ptr<Session> start(const KernelTask& task) = 0;
};

// A session that hands out a fixed list of candidates at once (the built-in strategies).
std::unique_ptr<Session> fixed_session(std::vector<Candidate> candidates);

// What Strategy::start returns when the strategy does not apply to the kernel: nullptr, with
// `why` ("no scalar argument is the same in every captured launch") left in task.declined.
std::unique_ptr<Session> decline(const KernelTask& task, std::string why);

// Re-JIT the original PTX with a sweep of JIT options (optimization level, register limits).
// Same code, same arithmetic: bitwise equality.
std::unique_ptr<Strategy> make_rejit_strategy();

// Runtime specialization of scalar arguments the application keeps constant across the captured
// launches (source level through NVRTC when the source is known, PTX level otherwise); the guard
// carries the specialized values. Same arithmetic: bitwise equality.
std::unique_ptr<Strategy> make_specialize_strategy();

// Launch bounds from the observed block size (.maxntid / __launch_bounds__), guarded by it.
std::unique_ptr<Strategy> make_launch_bounds_strategy();

// The same kernel with another block size and the grid that keeps the thread count, where the PTX
// proves each thread's work depends on its linear index alone (agent/launch_shape.cpp); the guard
// holds the block shape and the new size. Same code: bitwise equality.
std::unique_ptr<Strategy> make_launch_shape_strategy();

// Read-only cache loads (ld.global.nc) through pointer parameters the kernel never writes,
// guarded by no_alias (the shim proves at launch time that the pointers do not alias).
std::unique_ptr<Strategy> make_readonly_strategy();

} // namespace hone::agent
