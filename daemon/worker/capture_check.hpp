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
  VerdictKind kind = VerdictKind::internal;
  std::string message;
  bool context_lost = false; // a sticky fault: the worker must exit once the verdict is sent
};

struct Kernels {
  CUfunction original = nullptr;
  CUfunction candidate = nullptr;
};

// What a run of the original took at most (wall clock): the candidate's watchdog scales from it.
struct RunClock {
  double slowest_original_s = 0;
};

class CaptureCheck {
public:
  // `index` names the capture in messages; `entry` is the original's PTX analysis (nullptr when
  // the original has no PTX: every buffer is then compared exactly).
  CaptureCheck(Device& device, const Job& job, size_t index, std::string_view data,
               const ptx::EntryInfo* entry, Kernels kernels, Watchdog* watchdog, RunClock* clock);

  // Steps a-e for this capture with schedule seeds `seed1` and `seed2`. Leaves nothing allocated.
  std::optional<Failure> validate(uint64_t seed1, uint64_t seed2);

  // For the benchmark: restore the buffers again (with the poisoning validate() decided) and
  // keep them until release().
  std::optional<Failure> prepare();
  // One timed run: restore (poisoned), launch, wait. Device nanoseconds.
  std::variant<double, Failure> timed_run(bool candidate);
  void release();

  // The capture's part of the evidence (after validate()).
  nlohmann::json evidence() const;
  // Buffers where the original itself is nondeterministic ("capture 0 parameter 2 (y)").
  std::vector<std::string> nondeterministic() const;
  // Some buffer was compared with a tolerance (the job's, or the original's nondeterminism).
  bool used_tolerance() const;

private:
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

  enum class Who { original, candidate };
  struct Run {
    Placement::Snapshot snapshot;
  };

  std::optional<Failure> place();
  std::optional<Failure> run(Who who, Fill fill, uint64_t seed, Placement::Snapshot& out,
                             size_t fill_allocation = ~size_t(0));
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

  std::vector<CapturedAllocation> m_allocs;
  std::vector<Alloc> m_info;
  std::unique_ptr<Placement> m_placement;
  std::string m_params; // the parameter bytes, pointers patched to where the buffers are now
  std::vector<bool> m_at_original;
  std::string m_restore_how;
  std::vector<uint64_t> m_guards;
  uint32_t m_runs = 0;
};

} // namespace hone::worker
