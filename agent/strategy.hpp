// The agent's strategies (DESIGN.md, "Agent"): each turns a kernel task into candidates for the
// validation worker. One interface, one level of implementations (embedded ones here, the LLM
// one in llm.*); the daemon's optimizer runs them and feeds every candidate through the same
// validation path as a kernel engineer's submission.
#pragma once

#include "common/capture.hpp"
#include "common/guard.hpp"
#include "common/identity.hpp"
#include "common/job.hpp"
#include "common/protocol.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hone::agent {

// What a strategy knows about a kernel.
struct KernelTask {
  KernelKey key;
  proto::ImageFormat format = proto::ImageFormat::unknown;
  std::string image;                       // the module image (PTX text with its NUL for PTX)
  std::optional<proto::SourceInfo> source; // the NVRTC source, when the shim captured it
  std::vector<Capture> captures;           // observed launches: shapes and scalar bytes
  std::string arch;                        // "sm_90"
};

struct Candidate {
  std::string strategy;                    // the id of the strategy that made it
  std::string description;                 // for people: what was changed
  CandidateKind kind = CandidateKind::ptx;
  std::string code;                        // PTX text or CUDA source
  std::string entry;
  std::vector<std::string> jit_options;    // "NAME=value"
  std::vector<std::string> nvrtc_options;
  Comparison comparison = Comparison::bitwise; // what "same result" means for it
  Guard guard;                             // which launches it may serve
};

class Strategy {
public:
  virtual ~Strategy() = default;
  // A stable id ("rejit"), recorded per kernel so a restart does not redo it.
  virtual std::string id() const = 0;
  // Candidates for `task`; none when the strategy does not apply.
  virtual std::vector<Candidate> propose(const KernelTask& task) = 0;
};

// Re-JIT the original PTX with a sweep of JIT options (optimization level, register limits).
// Same code, same arithmetic: bitwise equality.
std::unique_ptr<Strategy> make_rejit_strategy();

} // namespace hone::agent
