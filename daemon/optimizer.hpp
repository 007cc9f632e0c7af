// The loop that closes (DESIGN.md): candidates for a kernel — from the agent's strategies or a
// kernel engineer's `honectl submit` — wait for the kernel's image and captured launches, run in
// a worker against the original, and leave a verdict with its evidence in the store. A verified
// variant is pushed to every process running the kernel, now and whenever one starts later.
#pragma once

#include "agent/kernel_ptx.hpp"
#include "agent/strategy.hpp"
#include "config/config.hpp"
#include "daemon/fleet.hpp"
#include "daemon/registry.hpp"
#include "daemon/unique_fd.hpp"
#include "daemon/worker_pool.hpp"
#include "store/store.hpp"

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace hone::daemon {

class Optimizer {
public:
  // Send a frame (with an optional descriptor) to the shim on connection `conn`.
  using Send = std::function<void(uint64_t conn, std::string frame, UniqueFd fd)>;

  // `fleet` (may be null): the remote tier, asked before the strategies and told what is verified.
  Optimizer(asio::io_context& io, const config::Config& config, store::Store* store,
            Registry& registry, Send send, Fleet* fleet = nullptr);
  ~Optimizer();

  void start();
  void stop();
  void set_config(const config::Config& config);

  // A candidate for `kernel`, validated like any other. Returns the job id.
  // `session`: the strategy session that proposed it (0: a submission), told the verdict.
  Result<uint64_t> submit(const KernelKey& kernel, agent::Candidate candidate,
                          uint64_t session = 0);
  // Strategies and their sessions, for status.
  nlohmann::json agent_json() const;
  // The share of estimated GPU time in kernels hone can work on, by what it has to work from
  // (schema in docs/protocol.md, "coverage").
  nlohmann::json coverage_json() const;
  // Add a strategy (the daemon adds the LLM one when it is configured).
  void add_strategy(std::unique_ptr<agent::Strategy> strategy);

  // Messages from shims.
  void on_kernels(uint64_t conn, const proto::Kernels& msg);
  void on_image(uint64_t conn, const proto::Image& msg, UniqueFd fd);
  void on_capture(uint64_t conn, const Capture& msg, UniqueFd fd);
  void on_variant_status(uint64_t conn, const proto::VariantStatus& msg);
  void on_detach(uint64_t conn);
  // Launches the variants installed in `conn` served since its last report, per kernel
  // (Registry::stats): what they saved, estimated.
  void on_served(uint64_t conn, const std::vector<std::pair<KernelKey, uint64_t>>& served);

  // The operator turned a kernel or a variant off or on (honectl disable/enable/evict).
  void kernel_switched(const KernelKey& kernel);
  // Publishes this host's verified variants of `kernel` for `arch` and `driver_major`, and those
  // withdrawn from the fleet (honectl disable --fleet), to the remote tier. False without one.
  bool publish_to_fleet(const KernelKey& kernel, const std::string& arch, uint32_t driver_major);
  // Writes a tombstone for `variant` in the remote tier, so that every host withdraws it and none
  // publishes it again. Its reason: `what` withdrew it ("disabled by an operator"), on this host,
  // and `detail` (the shadow check's mismatch). False without a remote tier.
  bool withdraw_from_fleet(const store::VariantRecord& variant, const std::string& what,
                           const std::string& detail = {});

  nlohmann::json jobs_json() const;
  std::optional<nlohmann::json> job_json(uint64_t id) const;
  nlohmann::json workers_json() const;
  uint64_t capture_bytes() const { return m_capture_bytes; }
  // Its part of /metrics: verdicts by kind, kernels served, GPU time saved, captures, workers.
  std::string metrics_text() const;

private:
  struct CaptureEntry {
    Capture meta;
    // The capture's bytes, less the `shared` ranges, in order.
    std::shared_ptr<UniqueFd> data;
    // Buffer ranges (by their offset in the capture's bytes) that honed holds once for every
    // capture with the same bytes: a weights range that many launches read (share_ranges()).
    std::vector<std::pair<uint64_t, std::shared_ptr<const std::string>>> shared;
    int64_t received = 0;
    std::filesystem::path file; // with capture.persist: its file under the state directory
  };
  struct Work {
    // The module image, shared by every kernel of the module (an image can be hundreds of MiB).
    std::shared_ptr<const std::string> image;
    bool has_image() const { return image && !image->empty(); }
    proto::ImageFormat format = proto::ImageFormat::unknown;
    std::optional<proto::SourceInfo> source;
    std::optional<proto::Image::Triton> triton; // the PTX of a SASS image, from Triton's cache
    std::optional<proto::Image::Linked> linked; // a JIT-linked cubin's inputs (their PTX)
    // Once the image is in: what the strategies have to work from (agent/kernel_ptx.hpp).
    std::optional<agent::KernelCode> code;
    bool image_requested = false;
    int64_t image_asked_at = 0;
    uint64_t image_conn = 0; // the connection asked for the image
    // The driver major of the process whose launches were captured: a variant validated after
    // that process exited (a short-lived application) is still stored for the right driver.
    uint32_t driver_major = 0;
    std::vector<CaptureEntry> captures;
    int64_t capture_asked_at = 0;
    uint32_t captures_asked = 0;
    uint64_t capture_conn = 0; // the connection asked for the captures
    // A capture of the kernel by bounded ranges proved unusable in the worker: its captures are
    // of whole allocations from then on (CaptureRequest::whole), within capture.max_mb.
    bool captures_whole = false;
    // The remote tier: not asked yet, asked, candidates from it being validated here, settled.
    enum class FleetState : uint8_t { unknown, looking, adopted, done };
    FleetState fleet = FleetState::unknown;
    std::string fleet_from;
  };
  enum class JobState { waiting, running, done };
  struct JobEntry {
    uint64_t id = 0;
    KernelKey kernel;
    agent::Candidate candidate;
    JobState state = JobState::waiting;
    std::optional<Verdict> verdict;
    std::optional<VariantId> variant;
    std::optional<VariantId> revalidates; // an imported variant this job re-validates
    // A shadow check of this served variant, on `shadow_capture` (no candidate).
    std::optional<VariantId> shadow_of;
    std::optional<CaptureEntry> shadow_capture;
    uint64_t session = 0;                 // the strategy session that proposed it
    std::string message;
    int64_t created = 0;
    int64_t finished = 0;
    // When it started waiting for its image and captures (0: when it was created; again when
    // retry_whole puts it back), the seconds of that wait a process ran the kernel (the capture
    // deadline counts only those: a short-lived application's next run still serves it), and
    // when they were last counted.
    int64_t waiting_since = 0;
    int64_t waited_with_process = 0;
    int64_t waited_until = 0;
    // It ran once on a capture by bounded ranges that proved unusable, and waits for (or ran on)
    // captures of whole allocations (retry_whole).
    bool retried_whole = false;
  };

  void tick();
  bool strategy_enabled(const std::string& id) const; // agent.strategies names it
  // Start every waiting job whose image and captures are in (asking for what is missing).
  void advance();
  void advance_soon();
  // Captures are production data: kept only while something may still use them.
  bool needs_captures(const KernelKey& key) const;
  void release_captures(const KernelKey& key, Work& w, const char* why);
  // A job whose capture by bounded ranges proved unusable (the evidence's "capture_unusable")
  // waits once more, for captures of whole allocations. True when it was put back.
  bool retry_whole(JobEntry& job, const Verdict& v);
  // Captures hold each buffer range of at least k_shared_min bytes once, by its contents: the
  // weights that many kernels' launches read are held once however many captures have them.
  // Moves `e`'s ranges into shared blobs and its other bytes into a memfd of their own; returns
  // the bytes it shares with captures already held (false: `e` is unusable, a short read).
  bool share_ranges(CaptureEntry& e, uint64_t& shared_bytes);
  // The capture's bytes, its shared ranges put back in place.
  std::optional<std::string> read_capture(const CaptureEntry& c) const;
  // Drops `c`'s hold on its bytes (its shared ranges are let go): what it alone held leaves the
  // accounting.
  void uncharge(CaptureEntry& c);
  // Whether the kernel has an enabled strategy not yet tried, or one still proposing (its
  // captures are kept for them when no process runs it any more).
  bool strategies_left(const KernelKey& key);
  void release_idle_captures();
  bool make_room_for(uint64_t bytes); // drop captures of idle kernels, oldest first
  void load_persisted_captures();
  void run_strategies();
  void revalidate_imports();
  // Ask the fleet for `key` once (true while its answer or its candidates' validation is awaited:
  // the strategies wait).
  bool fleet_first(const KernelKey& key, KernelInfo& k, Work& w);
  void fleet_settled(const JobEntry& job, bool verified);
  // Tombstones ([store.remote] tombstone_interval_s): the variants this host serves, adopted or
  // verified are looked up at that interval; one a tombstone names is withdrawn here.
  void check_tombstones();
  void apply_tombstone(const Fleet::Withdrawal& w);
  // At start: the tombstones recorded with `all`'s withdrawn variants, written again.
  void rewrite_tombstones(const std::vector<store::VariantRecord>& all);
  // A variant verified here serves once its tombstone was looked up (none found, or no remote
  // answered).
  void serve_unless_tombstoned(const store::VariantRecord& rec, bool publish);
  std::map<VariantId, Fleet::Watched> m_watched;
  std::set<VariantId> m_awaiting_tombstone; // verified here, not served before the lookup
  bool m_watch_loaded = false;              // the store's verified variants are in m_watched
  bool m_tombstone_check_busy = false;
  std::chrono::steady_clock::time_point m_tombstones_checked_at{};
  bool prerequisites(JobEntry& job);
  void start_job(JobEntry& job);
  void finish_job(JobEntry& job, const Verdict& v);
  void on_verdict(uint64_t job, const Verdict& v);
  void request_image(const KernelKey& key, Work& w);
  void request_captures(const KernelKey& key, Work& w);
  // A connection running `key`, and the shim's id for the kernel there.
  std::optional<std::pair<uint64_t, uint64_t>> process_with(const KernelKey& key) const;
  std::optional<store::VariantRecord> best_variant(const KernelKey& key, const std::string& arch,
                                                   uint32_t driver_major) const;
  void push(const KernelKey& key);
  void push_to(uint64_t conn, const KernelKey& key);
  void withdraw(const KernelKey& key);
  agent::KernelTask task_for(const KernelKey& key, const Work& w) const;
  // What the hottest kernels have to work from (classify()), and collective kernels marked as
  // such; run before the strategies, also while the optimizer is off.
  void survey();
  // Find what `key` has to work from, once its image is in (Work::code, KernelInfo::code).
  void classify(const KernelKey& key, Work& w, KernelInfo& k);
  // The kernel's state from its variants and the jobs still open on it.
  void settle_kernel_state(const KernelKey& key);
  // Up to `n` verified rewrites of kernels other than `key` on this host whose CUDA source the
  // store keeps: the fastest per kernel, fastest first, each small enough to show.
  std::vector<agent::Example> examples_for(const KernelKey& key, uint32_t n) const;

  asio::io_context& m_io;
  config::Config m_config;
  store::Store* m_store;
  Registry& m_registry;
  Send m_send;
  std::unique_ptr<WorkerPool> m_workers;
  std::vector<std::unique_ptr<agent::Strategy>> m_strategies;
  Fleet* m_fleet = nullptr;
  // One strategy's work on one kernel, while it may still propose candidates or await verdicts.
  struct SessionEntry {
    KernelKey kernel;
    std::string strategy;
    std::unique_ptr<agent::Session> session;
    int64_t started = 0;
  };
  std::map<uint64_t, SessionEntry> m_sessions;
  uint64_t m_next_session = 1;
  // What each strategy achieved here: ranks strategies by expected gain per GPU-second.
  struct StrategyStats {
    uint64_t candidates = 0, verified = 0;
    double gain_sum = 0;    // over verified candidates, speedup minus one
    double gpu_seconds = 0; // wall time its jobs kept the worker busy
  };
  // The LLM strategy follows [agent.llm]: (re)made when the section changes.
  void configure_llm();
  std::optional<config::LlmConfig> m_llm_config;
  std::pair<double, double> m_llm_quoted; // validation.f32_rel, min_speedup in its prompt
  std::string m_llm_state; // for status: on (model, endpoint) or why it is off
  std::map<std::string, StrategyStats> m_strategy_stats;
  std::map<VerdictKind, uint64_t> m_verdicts;   // jobs finished, by verdict (this run)
  std::map<VariantId, double> m_pushed_speedup; // variants pushed to processes: their speedup
  double m_gpu_saved_ns = 0;                    // estimated (on_served)
  uint32_t m_hide_ptx_arch = 0;                 // HONE_TEST_HIDE_PTX_ARCH (KernelTask)
  double expected_gain_per_second(const agent::Strategy& s) const;
  void poll_sessions();
  void watch_load(); // pause validation while the applications keep the GPU busy
  double m_load = 0; // their estimated device time per wall second
  uint64_t m_load_total = 0;
  std::chrono::steady_clock::time_point m_load_at;
  asio::steady_timer m_timer;
  std::map<KernelKey, Work> m_work;
  std::map<uint64_t, JobEntry> m_jobs;
  struct CaptureRequestEntry {
    KernelKey kernel;
    int64_t asked_at = 0;
    std::optional<VariantId> shadow_of; // a shadow check's capture of this variant's launch
    uint64_t conn = 0;
  };
  // Shadow checks ([validation] shadow_every): served launches since the last check, per
  // connection and kernel, and the checks outstanding there.
  std::map<std::pair<uint64_t, KernelKey>, uint64_t> m_shadow_due;
  std::set<std::pair<uint64_t, KernelKey>> m_shadow_pending;
  uint64_t m_shadow_passed = 0, m_shadow_failed = 0;
  void request_shadow(uint64_t conn, const KernelKey& key, const VariantId& variant);
  void start_shadow_job(JobEntry& job);
  // A job for the worker with the kernel's original image and the configured tolerances.
  Job job_against_original(const JobEntry& job);
  void finish_shadow_job(JobEntry& job, const Verdict& v);
  std::map<uint64_t, CaptureRequestEntry> m_capture_requests; // by request id
  // conn -> kernel -> variant installed there
  std::map<uint64_t, std::map<KernelKey, VariantId>> m_installed;
  uint64_t m_next_job = 1;
  uint64_t m_next_request = 1;
  uint64_t m_capture_bytes = 0;
  // Bytes the captures refer to that another capture holds already (held once).
  uint64_t m_capture_bytes_shared = 0;
  // Shared ranges by the 128-bit hash of their bytes (held by the captures that refer to them).
  std::map<ImageHash, std::weak_ptr<const std::string>> m_shared_ranges;
  bool m_stopping = false;
};

} // namespace hone::daemon
