// Validating a candidate against the original on one captured launch (DESIGN.md, "Validation
// (worker)"): restore the buffers, learn from the original which bytes it writes and whether it
// only writes them, run both twice under different schedules, and compare every byte.
#pragma once

#include "common/job.hpp"
#include "daemon/worker/compare.hpp"
#include "daemon/worker/device.hpp"
#include "daemon/worker/restore.hpp"
#include "daemon/worker/watchdog.hpp"
#include "ptx/analysis.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace hone::worker {

// Why a job ends before it is verified.
struct Failure {
  Failure() = default;
  Failure(VerdictKind k, std::string m, bool lost = false, std::string_view p = {})
      : kind(k), message(std::move(m)), context_lost(lost), pattern(p) {}

  VerdictKind kind = VerdictKind::internal;
  std::string message;
  bool context_lost = false; // a sticky fault: the worker must exit once the verdict is sent
  // A bounded capture the original itself cannot run on (its ranges missed what it touches):
  // the evidence's "capture_unusable" says so, and honed asks for whole allocations.
  bool bounded_unusable = false;
  // The cheat the refusal matched (common/cheats.hpp id), when it names one: the evidence's
  // "pattern", and the verdict message ends with it.
  std::string_view pattern;
};

struct Kernels {
  CUfunction original = nullptr;
  CUfunction candidate = nullptr;
};

// What a run of the original took at most (wall clock): the candidate's watchdog scales from it.
struct RunClock {
  double slowest_original_s = 0;
};

class OriginalMemo;

class CaptureCheck {
public:
  // `index` names the capture in messages; `entry` is the original's PTX analysis (nullptr when
  // the original has no PTX: every buffer is then compared exactly).
  CaptureCheck(Device& device, const Job& job, size_t index, std::string_view data,
               const ptx::EntryInfo* entry, Kernels kernels, Watchdog* watchdog, RunClock* clock);

  // Steps a-e for this capture with schedule seeds `seed1` and `seed2`. Leaves nothing allocated.
  std::optional<Failure> validate(uint64_t seed1, uint64_t seed2);

  // A shadow check (Job::shadow_check): the capture is of a launch a variant served, with the
  // buffers after it. The original runs on the same inputs under `seed1` and `seed2`; every
  // captured output must equal what it computes (within the job's tolerance, or the original's
  // own spread where it varies). Leaves nothing allocated.
  std::optional<Failure> shadow(uint64_t seed1, uint64_t seed2);

  // For the benchmark: restore the buffers again (with the poisoning validate() decided) and
  // keep them until release().
  std::optional<Failure> prepare();
  // After the benchmark (between prepare() and release()): the original and the candidate once
  // more under `seed`, compared as in validation. A candidate that changes after its first
  // launches in this worker (`runs` so far) is a `mismatch` (correct-while-checked).
  std::optional<Failure> recheck(uint64_t seed, size_t runs);
  // One timed run: restore (poisoned), launch, wait. Device nanoseconds.
  std::variant<double, Failure> timed_run(bool candidate);
  void release();
  // The last timed run started from a flushed L2 (Device::flush_l2).
  bool l2_flushed() const { return m_l2_flushed; }
  // The last validation run started from scrubbed shared and local memory (Device::scrub).
  bool scrubbed() const { return m_scrubbed; }

  // The capture's part of the evidence (after validate()).
  nlohmann::json evidence() const;
  // Buffers where the original itself is nondeterministic ("capture 0 parameter 2 (y)").
  std::vector<std::string> nondeterministic() const;
  // Some buffer was compared with a tolerance (the job's, or the original's nondeterminism).
  bool used_tolerance() const;

  enum class Role { input, output, read_modify_write };
  struct Alloc {
    ElementType type;
    bool written = true; // the analysis says the kernel may write it (or does not know)
    uint64_t origin = 0; // offset of the first buffer's pointer into it
    Role role = Role::input;
    std::vector<std::pair<uint64_t, uint64_t>> poison; // byte ranges poisoned in every run
    bool original_nondeterministic = false;
    bool tolerance = false;
    Difference diff;                     // candidate against original
    std::optional<bool> replays_capture; // the clean replay ended as the captured output
  };

  // What the original's runs on this capture showed (steps a-c of validate()): each buffer's
  // role, poisoning and comparison, and the original's two results. None of it depends on the
  // candidate, so the worker keeps it for the next job on the same original, capture and seeds
  // (OriginalMemo) and that job runs only the candidate.
  struct OriginalRuns {
    std::vector<Alloc> info;                  // diffs empty
    std::vector<uint64_t> bases;              // of buffers at their original address, else 0
    Placement::Snapshot first, second;        // the original under seed1 and seed2
    std::vector<std::string> spread;          // another result where the original varies
    uint32_t runs = 0;                        // runs of the original it took
    double slowest_original_s = 0;
    uint64_t job = 0;                         // the job that learned it
    uint64_t bytes() const;
  };

  // Where validate() keeps what it learned from the original, and looks for it (may be null).
  void use_memo(OriginalMemo* memo) { m_memo = memo; }
  // Whether the candidate may read %globaltimer (its PTX names it, or it has no PTX): a result
  // that differs between runs is then first tried under another epoch (external-state).
  void candidate_reads_timer(bool reads) { m_reads_timer = reads; }
  // The original's runs came from the memo in the last validate(): the job that ran them.
  std::optional<uint64_t> original_reused_from() const { return m_reused_from; }

  // Step g, which validate() leaves for later: a perturbed copy (halved sizes, strides, offsets)
  // can make the original itself fault (reach bytes outside the ranges a bounded capture holds,
  // or index with garbage), a sticky fault that ends the worker's context. The job runs it after
  // its timing. Leaves nothing allocated.
  std::optional<Failure> perturbed_last();
  // The original faulted on a perturbed copy in perturbed_last(): that copy proves nothing, and
  // the context is unusable (the worker exits after the verdict).
  bool lost_context_on_perturbed() const { return m_lost_on_perturbed; }
  // Runs of the original and the candidate in the last perturbed_last().
  uint32_t perturbed_runs() const { return m_perturbed_runs; }
  bool perturbed_pending() const { return m_perturbed_pending.has_value(); }
  // Step g's evidence: what each perturbed copy changed and how it ended.
  const nlohmann::json& perturbed() const { return m_perturbed; }

private:

  enum class Who { original, candidate };
  struct Run {
    Placement::Snapshot snapshot;
  };

  std::optional<Failure> place();
  // The capture's allocations and what the original's PTX says of each (validate(), shadow()).
  std::optional<Failure> learn_allocations();
  // Steps d-f: the candidate against what the original showed.
  std::optional<Failure> check_candidate(const OriginalRuns& original, uint64_t seed1,
                                         uint64_t seed2);
  // The original gives other results under other schedules in allocation `a` (`other` is one):
  // a tolerance compares it, or, for exact types, nothing can.
  std::optional<Failure> mark_nondeterministic(size_t a, std::string_view other,
                                               std::vector<std::string>& spread);
  std::optional<Failure> run(Who who, Fill fill, uint64_t seed, Placement::Snapshot& out,
                             size_t fill_allocation = ~size_t(0));
  // Which pattern explains a candidate result that differs where it should not (`c1`: its run
  // under `seed` with `fill`): run again with the guard zones refilled differently (out of
  // bounds), under `other_schedule` with the same garbage in shared and local memory (a race;
  // when given), then with other garbage there (uninitialized memory). Returns the pattern id, or
  // an empty view when none changes the result.
  std::variant<std::string_view, Failure> diagnose(uint64_t seed, Fill fill,
                                                   const Placement::Snapshot& c1,
                                                   uint64_t other_schedule = 0);
  // A mismatch in allocation `a` (`o1` the original's result, `c1` the candidate's): the pattern
  // it shows, when one is plain from the bytes.
  std::string_view mismatch_pattern(size_t a, std::string_view want, std::string_view got) const;
  // Step g: perturbed copies of the capture (other floating-point input values; then also halved
  // integer sizes). The original's result on them is the reference; a candidate that differs
  // takes a shortcut for what the captures hold.
  std::optional<Failure> check_perturbed(uint64_t seed1);
  Failure launch_failure(Who who, const Error& e) const;
  std::string name(size_t a) const;
  std::string param_name(uint32_t param) const;

  Device& m_device;
  const Job& m_job;
  const Capture& m_capture;
  size_t m_index;
  std::string_view m_data;
  const ptx::EntryInfo* m_entry;
  Kernels m_kernels;
  Watchdog* m_watchdog;
  RunClock* m_clock;
  LaunchShape m_shape;
  LaunchShape m_candidate_shape; // m_shape, or the candidate's reshape of it (Guard::reshape_block)

  std::vector<CapturedAllocation> m_allocs;
  std::vector<Alloc> m_info;
  std::unique_ptr<Placement> m_placement;
  std::string m_params; // the parameter bytes, pointers patched to where the buffers are now
  std::vector<bool> m_at_original;
  std::string m_restore_how;
  std::vector<uint64_t> m_guards;
  uint32_t m_runs = 0;
  OriginalMemo* m_memo = nullptr;
  std::optional<uint64_t> m_reused_from;
  // Seeds for the emulated device's fill of shared and local memory: the schedule seed unless
  // a diagnosis sets another.
  std::optional<uint64_t> m_fill_seed;
  // The emulated device's %globaltimer epoch (HONE_EMU_GLOBALTIMER_EPOCH) of a run under schedule
  // `seed`: the present (when this check was made) for the first schedule, a seeded time some 150
  // years later for every other, so that a result keyed on the date differs between the runs.
  // A diagnosis may pin another.
  uint64_t epoch_for(uint64_t seed) const;
  uint64_t m_present_ns = 0;
  uint64_t m_first_seed = 0, m_second_seed = 0;
  std::optional<uint64_t> m_epoch;
  bool m_reads_timer = true;
  nlohmann::json m_perturbed = nlohmann::json::array(); // evidence of step g
  bool m_bounded = false;            // some buffer is restored from bounded ranges
  std::optional<uint64_t> m_perturbed_pending; // step g left for perturbed_last(), its seed
  bool m_lost_on_perturbed = false;
  uint32_t m_perturbed_runs = 0;
  bool m_l2_flushed = false; // the last timed run started from a flushed L2
  bool m_scrubbed = false;   // the last validation run started from scrubbed memory
};

} // namespace hone::worker
