// Launch-shape tuning (DESIGN.md, "Agent"): the same kernel, launched with another block size and
// the grid that keeps the launch's thread count, where the PTX proves that what each thread
// computes cannot depend on how threads are grouped into blocks.
//
// Applications pick block sizes by heuristics written for all GPUs: hashcat launches its mask
// generators (`l_markov`, `r_markov`) and its `gpu_bzero`/`gpu_memset` helpers with blocks of the
// device's largest size, so a launch of 8448 work items is 9 blocks of 1024 threads that occupy 9
// of an H100's 132 SMs. Blocks of 64 threads spread the same work over 132 SMs.
//
// The proof, on the entry's PTX (conservative: anything it does not recognize refuses):
// - the only special registers read are %tid.x, %ntid.x and %ctaid.x, and each read of them
//   (a `mov` into a register defined nowhere else) feeds one computation only: the thread's
//   linear index, %ctaid.x * %ntid.x + %tid.x (`mad.lo`, or `mul.lo` and an `add`), the CUDA
//   idiom `blockIdx.x * blockDim.x + threadIdx.x`. With blocks of B' threads and a grid of
//   grid.x * B / B' blocks, every linear index the application's launch ran runs exactly once;
// - nothing is shared between the threads of a block or a warp: no shared memory, barrier,
//   shuffle, vote, match, warp reduction or cluster instruction, no call (not followed), no
//   instruction the IR keeps as text;
// - no `.reqntid` (a promise of the exact shape); under `.maxntid` only block sizes it allows.
// One-dimensional launches only (the guard refuses others at launch time), the block shape every
// captured launch used, and the same code: results compare bitwise.
#include "agent/kernel_ptx.hpp"
#include "agent/strategy.hpp"
#include "ptx/block_shape.hpp"
#include "ptx/parser.hpp"

#include <algorithm>
#include <array>
#include <optional>

namespace hone::agent {

namespace {

class LaunchShape final : public Strategy {
public:
  std::string id() const override { return "launch_shape"; }
  bool needs_captures() const override { return true; }
  double expected_speedup() const override { return 1.1; }
  double cost_gpu_seconds() const override { return 3.0; } // up to five candidates

  std::unique_ptr<Session> start(const KernelTask& task) override {
    auto ptx_text = kernel_ptx(task);
    if (!ptx_text) return decline(task, "no PTX: " + ptx_text.error().message);
    // One block shape in every captured launch, one-dimensional; the thread counts they ran.
    std::optional<std::array<uint32_t, 3>> shape;
    std::vector<uint64_t> threads;
    for (const auto& c : task.captures) {
      if (c.status != CaptureStatus::ok) continue;
      if (shape && *shape != c.block) {
        return decline(task, "the captured launches use different block shapes");
      }
      shape = c.block;
      if (c.grid[1] != 1 || c.grid[2] != 1) {
        return decline(task, "a captured launch has a grid of more than one dimension");
      }
      threads.push_back(uint64_t(c.grid[0]) * c.block[0]);
    }
    if (!shape) return decline(task, "no complete capture gives the block shape");
    if ((*shape)[1] != 1 || (*shape)[2] != 1) {
      return decline(task, "the captured blocks have more than one dimension");
    }
    const uint32_t block = (*shape)[0];
    if (block == 0 || block > 1024) return decline(task, "the captured block size is not valid");

    auto module = ptx::parse(*ptx_text, "original");
    if (!module) return decline(task, "the PTX does not parse: " + module.error().message);
    const ptx::Function* f = module->function(task.key.entry);
    if (!f || !f->is_entry || !f->has_body) return decline(task, "no body of the entry in the PTX");
    if (f->directive("reqntid")) return decline(task, "the kernel requires its block shape (.reqntid)");
    uint64_t max_threads = 1024;
    if (const auto* d = f->directive("maxntid")) {
      max_threads = 1;
      for (int64_t v : d->values) max_threads *= uint64_t(std::max<int64_t>(v, 1));
    }
    if (auto why = ptx::block_size_dependence(*f)) {
      return decline(task, "its results may depend on the block size: " + *why);
    }

    std::vector<Candidate> out;
    for (uint32_t b = 32; b <= 1024 && out.size() < 5; b *= 2) {
      if (b == block || b > max_threads) continue;
      // Every captured launch must be one it can serve: the thread count divides evenly.
      bool serves_all = std::all_of(threads.begin(), threads.end(),
                                    [&](uint64_t n) { return n % b == 0; });
      if (!serves_all) continue;
      Candidate c;
      c.description = "blocks of " + std::to_string(b) + " threads instead of " +
                      std::to_string(block) +
                      ", the grid scaled to the same thread count (the PTX uses the thread "
                      "index only as blockIdx.x * blockDim.x + threadIdx.x)";
      c.kind = CandidateKind::ptx;
      c.code = *ptx_text;
      c.entry = task.key.entry;
      c.comparison = Comparison::bitwise;
      c.guard.block = *shape;
      c.guard.reshape_block = b;
      c.tag = b;
      out.push_back(std::move(c));
    }
    if (out.empty()) {
      return decline(task, "no other block size divides every captured launch's thread count");
    }
    return fixed_session(std::move(out));
  }
};

} // namespace

std::unique_ptr<Strategy> make_launch_shape_strategy() {
  return std::make_unique<LaunchShape>();
}

} // namespace hone::agent
