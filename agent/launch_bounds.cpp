// Launch bounds from the observed block shape (DESIGN.md, "Agent"). Without them ptxas must
// assume blocks of up to 1024 threads and budgets registers for that; told the real shape it may
// give each thread more registers (fewer spills) or schedule for the occupancy that shape allows.
//
// Done at PTX level for every kernel, source known or not: `.maxntid X, Y, Z` is exactly what
// NVVM makes of `__launch_bounds__(X*Y*Z)`, without recompiling the source. The guard holds the
// shape, so the variant never serves a launch its bound would make fail.
#include "agent/kernel_ptx.hpp"
#include "agent/strategy.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <array>
#include <optional>

namespace hone::agent {

namespace {

class LaunchBounds final : public Strategy {
public:
  std::string id() const override { return "launch_bounds"; }
  bool needs_captures() const override { return true; }
  double expected_speedup() const override { return 1.05; }
  double cost_gpu_seconds() const override { return 2.0; } // two candidates

  std::unique_ptr<Session> start(const KernelTask& task) override {
    auto ptx_text = kernel_ptx(task);
    if (!ptx_text) return decline(task, "no PTX: " + ptx_text.error().message);
    // One shape in every captured launch, or the bound would leave some launches unserved.
    std::optional<std::array<uint32_t, 3>> shape;
    for (const auto& c : task.captures) {
      if (c.status != CaptureStatus::ok) continue;
      if (shape && *shape != c.block) {
        return decline(task, "the captured launches use different block shapes");
      }
      shape = c.block;
    }
    if (!shape) return decline(task, "no complete capture gives the block shape");
    const auto [x, y, z] = *shape;
    if (x == 0 || y == 0 || z == 0 || uint64_t(x) * y * z > 1024) {
      return decline(task, "the captured block shape is not one a bound can name");
    }

    auto module = ptx::parse(*ptx_text, "original");
    if (!module) return decline(task, "the PTX does not parse: " + module.error().message);
    ptx::Function* f = module->function(task.key.entry);
    // The author's own bounds stand: replacing them could only remove what they promised ptxas.
    if (!f || !f->is_entry || !f->has_body) return decline(task, "no body of the entry in the PTX");
    if (f->directive("maxntid") || f->directive("reqntid")) {
      return decline(task, "the kernel declares its own launch bounds");
    }
    f->directives.insert(f->directives.begin(),
                         ptx::FuncDirective{"maxntid", {int64_t(x), int64_t(y), int64_t(z)}, {}});
    const std::string shape_text =
        std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z);
    const uint32_t threads = x * y * z;

    Guard guard;
    guard.block = *shape;
    std::vector<Candidate> out;
    Candidate bounded;
    bounded.description = "launch bounds .maxntid " + std::to_string(x) + ", " + std::to_string(y) +
                          ", " + std::to_string(z) + " (every captured launch used " + shape_text +
                          " blocks)";
    bounded.kind = CandidateKind::ptx;
    bounded.code = ptx::print(*module);
    bounded.entry = task.key.entry;
    bounded.comparison = Comparison::bitwise;
    bounded.guard = guard;
    bounded.tag = 1;
    out.push_back(std::move(bounded));

    // The same promise through the JIT instead of the PTX: the original image, compiled for
    // blocks of that many threads. The JIT treats it as a register budget only, which sometimes
    // schedules differently from the directive; bitwise equal either way.
    Candidate jit;
    jit.description = "JIT option THREADS_PER_BLOCK=" + std::to_string(threads) +
                      " (every captured launch used " + shape_text + " blocks)";
    jit.kind = CandidateKind::ptx;
    jit.code = *ptx_text;
    jit.entry = task.key.entry;
    jit.jit_options = {"THREADS_PER_BLOCK=" + std::to_string(threads)};
    jit.comparison = Comparison::bitwise;
    jit.guard = guard;
    jit.tag = 2;
    out.push_back(std::move(jit));
    return fixed_session(std::move(out));
  }
};

} // namespace

std::unique_ptr<Strategy> make_launch_bounds_strategy() {
  return std::make_unique<LaunchBounds>();
}

} // namespace hone::agent
