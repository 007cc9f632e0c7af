#include "agent/kernel_ptx.hpp"
#include "agent/strategy.hpp"

namespace hone::agent {

namespace {

class Rejit final : public Strategy {
public:
  std::string id() const override { return "rejit"; }

  double expected_speedup() const override { return 1.03; }
  double cost_gpu_seconds() const override { return 4.0; } // four candidates

  std::unique_ptr<Session> start(const KernelTask& task) override {
    std::vector<Candidate> out;
    auto ptx_text = kernel_ptx(task);
    if (!ptx_text) return decline(task, "no PTX: " + ptx_text.error().message);
    // The driver's default is the highest optimization level with no register limit; fewer
    // registers can raise occupancy for memory-bound kernels, a lower level occasionally avoids
    // a poor schedule.
    const std::vector<std::pair<std::vector<std::string>, std::string>> sweep = {
        {{"MAX_REGISTERS=32"}, "at most 32 registers per thread"},
        {{"MAX_REGISTERS=64"}, "at most 64 registers per thread"},
        {{"MAX_REGISTERS=128"}, "at most 128 registers per thread"},
        {{"OPTIMIZATION_LEVEL=3"}, "JIT optimization level 3"},
    };
    for (const auto& [options, what] : sweep) {
      Candidate c;
      c.strategy = id();
      c.description = "re-JIT with " + what;
      c.kind = CandidateKind::ptx;
      c.code = *ptx_text;
      c.entry = task.key.entry;
      c.jit_options = options;
      c.comparison = Comparison::bitwise;
      out.push_back(std::move(c));
    }
    return fixed_session(std::move(out));
  }
};

} // namespace

std::unique_ptr<Strategy> make_rejit_strategy() {
  return std::make_unique<Rejit>();
}

} // namespace hone::agent
