#include "daemon/optimizer.hpp"
#include "daemon/metrics.hpp"

#include "agent/kernel_ptx.hpp"

#include "agent/llm.hpp"
#include "daemon/capture_files.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <cstring>
#include <ctime>
#include <limits>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hone::daemon {

using nlohmann::json;

namespace {

constexpr auto k_tick = std::chrono::milliseconds(250);
constexpr int64_t k_image_retry_s = 10;
constexpr size_t k_finished_jobs_kept = 200;
constexpr uint64_t k_max_image = 1ull << 30; // module images larger than this are not optimized
// Buffer ranges of captures from this size up are held once by their contents (share_ranges).
constexpr uint64_t k_shared_min = 64u << 10;
// A job waits this many capture deadlines (capture.timeout_s) for a process that runs its kernel.
constexpr int64_t k_wait_for_process_factor = 60;

int64_t now_s() {
  return int64_t(std::time(nullptr));
}

const char* state_name(int s) {
  static const char* names[] = {"waiting", "running", "done"};
  return names[s];
}

std::optional<std::string> read_fd(int fd, uint64_t size) {
  std::string out(size, '\0');
  uint64_t got = 0;
  while (got < size) {
    ssize_t n = ::pread(fd, out.data() + got, size - got, off_t(got));
    if (n <= 0) return std::nullopt;
    got += uint64_t(n);
  }
  return out;
}

UniqueFd memfd_with(const std::string& bytes, const char* name) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return fd;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n <= 0) return UniqueFd();
    done += size_t(n);
  }
  ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return fd;
}

uint32_t driver_major(uint32_t driver_version) {
  return driver_version / 1000;
}

// The verdict of a variant a failed shadow check withdrew (finish_shadow_job).
constexpr std::string_view k_shadow_withdrawn = "withdrawn by a shadow check";

// Withdrawn for good: by an operator for the whole fleet, by a shadow check here, or by a
// tombstone from another host. Such a variant never serves or is published as verified again,
// even when a search here finds the very same code (same id).
bool withdrawn_for_good(const store::VariantRecord& v) {
  if (v.state == store::VariantState::disabled) return v.verdict == Fleet::k_withdrawn;
  if (v.state != store::VariantState::rejected) return false;
  return v.verdict.starts_with(Fleet::k_tombstoned) || v.verdict.starts_with(k_shadow_withdrawn);
}

// What a tombstone says of a failed shadow check: the pattern, never the values that differed
// (those are the application's outputs, which never leave this host).
std::string shadow_detail(const store::VariantRecord& v) {
  std::string detail = "its outputs differed from the original kernel's on a launch it served";
  json e = json::parse(v.evidence_json, nullptr, false);
  if (e.is_object() && e.contains("pattern") && e["pattern"].is_string()) {
    detail += " (pattern " + e["pattern"].get<std::string>() + ")";
  }
  return detail;
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || !host[0]) return "(unknown host)";
  return host;
}

} // namespace

Optimizer::Optimizer(asio::io_context& io, const config::Config& config, store::Store* store,
                     Registry& registry, Send send, Fleet* fleet)
    : m_io(io), m_config(config), m_store(store), m_registry(registry), m_send(std::move(send)),
      m_fleet(fleet), m_timer(io) {
  WorkerSettings ws;
  ws.driver = m_config.worker.driver;
  ws.job_timeout = std::chrono::seconds(m_config.validation.job_timeout_s);
  ws.start_timeout = std::chrono::seconds(m_config.worker.start_timeout_s);
  ws.gpu_share = m_config.optimizer.gpu_share;
  m_workers = std::make_unique<WorkerPool>(
      io, ws, [this](uint64_t job, const Verdict& v) { on_verdict(job, v); });
  // The built-in strategies always run; ranking decides their order per kernel.
  m_strategies.push_back(agent::make_specialize_strategy());
  m_strategies.push_back(agent::make_launch_bounds_strategy());
  m_strategies.push_back(agent::make_launch_shape_strategy());
  m_strategies.push_back(agent::make_readonly_strategy());
  m_strategies.push_back(agent::make_rejit_strategy());
  configure_llm();
  load_persisted_captures();
  if (m_fleet) {
    // Tombstones a publish came across: those variants are withdrawn here too.
    m_fleet->on_withdrawn([this](std::vector<Fleet::Withdrawal> found) {
      for (const auto& w : found) apply_tombstone(w);
    });
  }
  if (const char* hide = std::getenv("HONE_TEST_HIDE_PTX_ARCH"); hide && *hide) {
    m_hide_ptx_arch = uint32_t(std::strtoul(hide, nullptr, 10));
    spdlog::warn("test-only setting HONE_TEST_HIDE_PTX_ARCH={}: the fatbins' compute_{} PTX is "
                 "hidden from the strategies",
                 hide, m_hide_ptx_arch);
  }
}

Optimizer::~Optimizer() {
  stop();
}

void Optimizer::start() {
  tick();
}

void Optimizer::stop() {
  if (m_stopping) return;
  m_stopping = true;
  m_timer.cancel();
  if (m_workers) m_workers->stop();
}

void Optimizer::set_config(const config::Config& config) {
  m_config = config;
  WorkerSettings ws;
  ws.driver = m_config.worker.driver;
  ws.job_timeout = std::chrono::seconds(m_config.validation.job_timeout_s);
  ws.start_timeout = std::chrono::seconds(m_config.worker.start_timeout_s);
  ws.gpu_share = m_config.optimizer.gpu_share;
  m_workers->set_settings(ws);
  configure_llm();
}

void Optimizer::configure_llm() {
  const config::LlmConfig& c = m_config.agent.llm;
  // Unchanged (the section, and the validation settings the prompt quotes): sessions go on.
  auto quoted = std::make_pair(m_config.validation.f32_rel, m_config.validation.min_speedup);
  if (m_llm_config && *m_llm_config == c && m_llm_quoted == quoted) return;
  m_llm_config = c;
  m_llm_quoted = quoted;
  // Sessions already started keep their own client; new kernels get the new settings.
  std::erase_if(m_strategies, [](const auto& s) { return s->id() == "llm"; });
  m_llm_state = "off (agent.llm.enabled = false)";
  if (!c.enabled) return;
  auto key = agent::resolve_api_key(c.api_key_env, c.api_key_file.string());
  if (!key) {
    m_llm_state = "off: " + key.error().message;
    spdlog::warn("the LLM strategy is off: {}", key.error().message);
    return;
  }
  agent::LlmSettings s;
  s.enabled = true;
  s.base_url = c.base_url;
  s.model = c.model;
  s.api_key = std::move(*key);
  s.connect_timeout_s = c.connect_timeout_s;
  s.request_timeout_s = c.request_timeout_s;
  s.max_turns = c.max_turns;
  s.max_reply_tokens = c.max_reply_tokens;
  s.token_budget_per_kernel = c.token_budget_per_kernel;
  s.wall_budget_s_per_kernel = c.wall_budget_s_per_kernel;
  s.concurrency = c.concurrency;
  s.max_reply_bytes = c.max_reply_bytes;
  s.temperature = c.temperature;
  s.samples_per_turn = c.samples_per_turn;
  s.examples = c.examples;
  s.tool_calls_per_turn = c.tool_calls_per_turn;
  s.sass_kernels = c.sass_kernels;
  s.f32_rel = m_config.validation.f32_rel;
  s.min_speedup = m_config.validation.min_speedup;
  m_strategies.push_back(agent::make_llm_strategy(std::move(s)));
  m_llm_state = "on: model " + c.model + " at " + c.base_url;
  spdlog::info("the LLM strategy is on: model {} at {}", c.model, c.base_url);
}

void Optimizer::tick() {
  if (m_stopping) return;
  run_strategies();
  revalidate_imports();
  advance();
  release_idle_captures();
  watch_load();
  check_tombstones();
  // Forget the oldest finished jobs beyond what status shows.
  size_t finished = 0;
  for (const auto& [id, j] : m_jobs) finished += j.state == JobState::done;
  for (auto it = m_jobs.begin(); finished > k_finished_jobs_kept && it != m_jobs.end();) {
    if (it->second.state == JobState::done) {
      it = m_jobs.erase(it);
      --finished;
    } else {
      ++it;
    }
  }
  m_timer.expires_after(k_tick);
  m_timer.async_wait([this](const boost::system::error_code& e) {
    if (!e) tick();
  });
}

void Optimizer::watch_load() {
  // The applications' GPU load: their kernels' estimated device time per second, over ~2 s.
  uint64_t total = 0;
  for (const auto& [key, k] : m_registry.kernels()) total += k.record.est_gpu_ns;
  auto now = std::chrono::steady_clock::now();
  if (m_load_at != std::chrono::steady_clock::time_point{}) {
    double dt = std::chrono::duration<double, std::nano>(now - m_load_at).count();
    double rate = total >= m_load_total && dt > 0 ? double(total - m_load_total) / dt : 0;
    m_load += (rate - m_load) * std::min(1.0, dt / 2e9);
  }
  m_load_total = total;
  m_load_at = now;
  double limit = m_config.optimizer.pause_load;
  bool pause = limit > 0 && m_load >= limit;
  if (pause != m_workers->paused()) {
    if (pause) {
      spdlog::info("validation paused: the applications keep the GPU {:.0f}% busy "
                   "(optimizer.pause_load {:.0f}%)",
                   m_load * 100, limit * 100);
    } else {
      spdlog::info("validation resumed: GPU load {:.0f}%", m_load * 100);
    }
    m_workers->set_paused(pause);
  }
}

void Optimizer::advance() {
  if (m_stopping) return;
  for (auto& [id, job] : m_jobs) {
    if (job.state != JobState::waiting) continue;
    if (job.shadow_of) {
      Work& w = m_work[job.kernel];
      request_image(job.kernel, w);
      if (w.has_image()) {
        start_shadow_job(job);
      } else if (now_s() - job.created > int64_t(m_config.capture.timeout_s)) {
        Verdict v;
        v.job = job.id;
        v.kind = VerdictKind::internal;
        v.message = "no process sent the kernel's image for its shadow check";
        finish_job(job, v);
      }
      continue;
    }
    if (prerequisites(job)) start_job(job);
  }
}

void Optimizer::advance_soon() {
  // Not from inside the message or request being handled: from the loop, right after it.
  asio::post(m_io, [this] { advance(); });
}

Result<uint64_t> Optimizer::submit(const KernelKey& kernel, agent::Candidate candidate,
                                   uint64_t session) {
  if (candidate.code.empty()) return make_error("the candidate is empty");
  if (candidate.entry.empty()) candidate.entry = kernel.entry;
  JobEntry job;
  job.id = m_next_job++;
  job.kernel = kernel;
  job.candidate = std::move(candidate);
  job.created = now_s();
  job.session = session;
  if (KernelInfo* k = m_registry.kernel(kernel)) {
    if (k->record.state == store::KernelState::observed ||
        k->record.state == store::KernelState::rejected) {
      k->record.state = store::KernelState::queued;
      k->dirty = true;
    }
  }
  spdlog::info("job {}: {} candidate for {} ({})", job.id, job.candidate.strategy, kernel.str(),
               job.candidate.description);
  uint64_t id = job.id;
  m_jobs.emplace(id, std::move(job));
  advance_soon(); // ask for the image and captures now, not at the next tick
  return id;
}

// ---- what a job needs ------------------------------------------------------------------------

std::optional<std::pair<uint64_t, uint64_t>> Optimizer::process_with(const KernelKey& key) const {
  for (const auto& [conn, p] : m_registry.processes()) {
    for (const auto& [id, seen] : p.kernels) {
      if (seen.key == key) return std::make_pair(conn, id);
    }
  }
  return std::nullopt;
}

void Optimizer::request_image(const KernelKey& key, Work& w) {
  if (w.has_image()) return;
  // Another kernel of the module has it in memory: one copy, with its format and the rest.
  for (const auto& [other, ow] : m_work) {
    if (other.image == key.image && ow.has_image()) {
      w.image = ow.image;
      w.format = ow.format;
      w.source = ow.source;
      w.triton = ow.triton;
      w.linked = ow.linked;
      return;
    }
  }
  if (m_store) {
    if (auto img = m_store->get_image(key.image); img && *img) {
      w.image = std::make_shared<const std::string>(std::move((*img)->bytes));
      w.format = (*img)->format;
      w.source = (*img)->source;
      w.triton = (*img)->triton;
      w.linked = (*img)->linked;
      return;
    }
  }
  // A request to a process that has exited since is not waited for: the next one is asked.
  if (w.image_requested && now_s() - w.image_asked_at < k_image_retry_s &&
      m_registry.processes().count(w.image_conn))
    return;
  // Another kernel of the module asked for it lately: one transfer serves them all (on_image).
  for (const auto& [other, ow] : m_work) {
    if (other.image == key.image && ow.image_requested &&
        now_s() - ow.image_asked_at < k_image_retry_s &&
        m_registry.processes().count(ow.image_conn)) {
      return;
    }
  }
  auto p = process_with(key);
  if (!p) return;
  proto::ImageRequest req;
  req.image = key.image;
  m_send(p->first, proto::frame_of(proto::MsgType::image_request, 0, req), UniqueFd());
  w.image_requested = true;
  w.image_asked_at = now_s();
  w.image_conn = p->first;
}

void Optimizer::request_captures(const KernelKey& key, Work& w) {
  uint32_t want = m_config.capture.captures_per_kernel;
  if (w.captures.size() >= want) return;
  // Short-lived processes (one hashcat crack, one batch job) often exit before the launches
  // they were asked to capture: the next process that runs the kernel is asked at once, not
  // after capture.timeout_s.
  if (w.captures_asked && now_s() - w.capture_asked_at < int64_t(m_config.capture.timeout_s) &&
      m_registry.processes().count(w.capture_conn))
    return;
  auto p = process_with(key);
  if (!p) return;
  proto::CaptureRequest req;
  req.request = m_next_request++;
  req.kernel = p->second;
  req.launches = want - uint32_t(w.captures.size());
  req.max_bytes = uint64_t(m_config.capture.max_mb) << 20;
  req.with_outputs = m_config.capture.with_outputs;
  req.whole = w.captures_whole;
  m_capture_requests[req.request] = {key, now_s(), std::nullopt, p->first};
  m_send(p->first, proto::frame_of(proto::MsgType::capture_request, 0, req), UniqueFd());
  w.captures_asked = req.launches;
  w.capture_asked_at = now_s();
  w.capture_conn = p->first;
  if (KernelInfo* k = m_registry.kernel(key); k && k->record.state == store::KernelState::queued) {
    k->record.state = store::KernelState::capturing;
    k->dirty = true;
  }
}

bool Optimizer::prerequisites(JobEntry& job) {
  Work& w = m_work[job.kernel];
  request_image(job.kernel, w);
  request_captures(job.kernel, w);
  // The capture deadline counts while a process runs the kernel. Without one (a short-lived
  // application between two runs) the job waits for the next, up to k_wait_for_process_factor
  // deadlines.
  const int64_t now = now_s();
  if (!job.waiting_since) job.waiting_since = job.created;
  if (!job.waited_until) job.waited_until = job.waiting_since;
  if (process_with(job.kernel))
    job.waited_with_process += std::max<int64_t>(0, now - job.waited_until);
  job.waited_until = now;
  const int64_t deadline = int64_t(m_config.capture.timeout_s);
  const bool no_process_long = now - job.waiting_since >= k_wait_for_process_factor * deadline;
  int64_t waited = no_process_long ? deadline : job.waited_with_process;
  if (!w.has_image() || w.captures.size() < m_config.capture.captures_per_kernel) {
    // A process that refused the captures said why (over capture.max_mb, a graph it cannot
    // copy, ...): that, not silence, is the reason, and waiting out the deadline would only
    // delay it.
    const KernelInfo* k = m_registry.kernel(job.kernel);
    const std::string refused = k ? k->capture_refused : std::string();
    const bool refused_all = w.has_image() && w.captures.empty() && !refused.empty();
    // Run with what there is once the capture deadline passed; fail when there is nothing.
    if (waited < int64_t(m_config.capture.timeout_s) && !refused_all) return false;
    if (!w.has_image() || w.captures.empty()) {
      Verdict v;
      v.job = job.id;
      v.kind = VerdictKind::unsupported;
      v.message = !w.has_image() ? "no process running the kernel sent its image within " +
                                        std::to_string(m_config.capture.timeout_s) + " s"
                  : !refused.empty()
                      ? "the process refused to capture the kernel's launches: " + refused
                  : no_process_long && job.waited_with_process < deadline
                      ? "no launch of the kernel was captured: no process ran it for " +
                            std::to_string(now - job.waiting_since - job.waited_with_process) +
                            " s after the job was made"
                      : "no launch of the kernel was captured within " +
                            std::to_string(m_config.capture.timeout_s) +
                            " s (is the application still launching it?)";
      finish_job(job, v);
      return false;
    }
  }
  return true;
}

Job Optimizer::job_against_original(const JobEntry& job) {
  const Work& w = m_work[job.kernel];
  Job j;
  j.id = job.id;
  j.kernel = job.kernel;
  j.original_format = w.format;
  if (w.has_image()) j.original_image = *w.image;
  j.original_entry = job.kernel.entry;
  // Resolved PTX for an image with none the device would JIT, for the worker's analysis.
  if (w.code && (w.code->kind == agent::CodeKind::ptx_newer ||
                 w.code->kind == agent::CodeKind::triton || w.code->linked)) {
    j.original_ptx = w.code->ptx;
  }
  const auto& val = m_config.validation;
  j.tolerance = {val.f32_rel, val.f32_abs, val.f64_rel, val.f64_abs, val.f16_rel, val.f16_abs};
  return j;
}

void Optimizer::start_job(JobEntry& job) {
  Work& w = m_work[job.kernel];
  Job j = job_against_original(job);
  j.kind = job.candidate.kind;
  j.candidate = job.candidate.code;
  j.candidate_entry = job.candidate.entry;
  j.jit_options = job.candidate.jit_options;
  j.nvrtc_options = job.candidate.nvrtc_options;
  j.comparison = job.candidate.comparison;
  const auto& val = m_config.validation;
  j.bench.warmup = val.warmup;
  j.bench.runs = val.runs;
  j.bench.min_runs = std::min(val.min_runs, val.runs);
  j.bench.min_speedup = val.min_speedup;
  j.bench.noise_factor = val.noise_factor;
  j.bench.suspicious = val.suspicious_speedup;
  j.static_checks = val.static_checks;
  j.gpu_scrub = val.gpu_scrub;
  j.check = job.candidate.check;
  // Proven only on the captured launches: unless the candidate says which launches it may serve,
  // it serves only their block shape (a kernel correct only at that shape never meets another).
  if (job.candidate.guard.block == std::array<uint32_t, 3>{0, 0, 0} && !w.captures.empty()) {
    auto shape = w.captures.front().meta.block;
    bool same = std::all_of(w.captures.begin(), w.captures.end(),
                            [&](const CaptureEntry& c) { return c.meta.block == shape; });
    if (same) job.candidate.guard.block = shape;
  }
  j.guard = job.candidate.guard;
  std::vector<std::string> data;
  for (const auto& c : w.captures) {
    auto bytes = read_capture(c);
    if (!bytes) continue;
    j.captures.push_back(c.meta);
    data.push_back(std::move(*bytes));
    if (j.check != JobCheck::none) break; // a check validates on one capture
  }
  std::vector<std::string_view> views(data.begin(), data.end());
  job.state = JobState::running;
  if (KernelInfo* k = m_registry.kernel(job.kernel)) {
    k->record.state = store::KernelState::optimizing;
    k->dirty = true;
  }
  spdlog::info("job {}: queued for a worker, to validate on {} captured launch(es)", job.id,
               j.captures.size());
  // A person waiting on `honectl submit` goes ahead of the background strategies, and those go
  // in order of their expected gain per GPU-second: the validation budget goes first to the
  // candidates most likely to pay off (specializing, ahead of re-JITs that rarely do).
  double priority = std::numeric_limits<double>::infinity();
  if (job.session) {
    priority = 0;
    for (const auto& s : m_strategies) {
      if (s->id() == job.candidate.strategy) priority = expected_gain_per_second(*s);
    }
  }
  m_workers->submit(job.id, encode_bundle(j, views), priority);
}

// ---- verdicts ----------------------------------------------------------------------------------

void Optimizer::on_verdict(uint64_t id, const Verdict& v) {
  auto it = m_jobs.find(id);
  if (it == m_jobs.end()) return;
  if (retry_whole(it->second, v)) return;
  finish_job(it->second, v);
}

bool Optimizer::retry_whole(JobEntry& job, const Verdict& v) {
  if (job.shadow_of || job.retried_whole || v.kind != VerdictKind::unsupported) return false;
  json e = json::parse(v.evidence_json, nullptr, false);
  if (!e.is_object() || e.value("capture_unusable", "") != "bounded") return false;
  Work& w = m_work[job.kernel];
  if (!w.captures_whole) {
    w.captures_whole = true;
    release_captures(job.kernel, w,
                     "a capture by bounded ranges proved unusable; asking for whole allocations");
  }
  job.retried_whole = true;
  job.state = JobState::waiting;
  job.waiting_since = now_s();
  job.waited_with_process = 0;
  job.waited_until = 0;
  (void)m_workers->job_seconds(job.id);
  spdlog::info("job {}: {}; it waits for captures of whole allocations", job.id,
               v.message.substr(0, 300));
  advance_soon();
  return true;
}

void Optimizer::finish_job(JobEntry& job, const Verdict& v) {
  if (job.shadow_of) return finish_shadow_job(job, v);
  job.state = JobState::done;
  job.verdict = v;
  job.finished = now_s();
  bool verified = v.kind == VerdictKind::verified;
  if (job.candidate.check != JobCheck::none) {
    // A strategy's check: its verdict is for the session alone; nothing is stored or served, and
    // it is not a validation verdict (hone_verdicts_total).
    spdlog::info("job {}: {} check: {}", job.id,
                 job.candidate.check == JobCheck::compile ? "compile" : "validate",
                 verified ? "passed" : std::string(to_string(v.kind)) + ": " +
                                           v.message.substr(0, 300));
    if (job.session) {
      if (auto s = m_sessions.find(job.session); s != m_sessions.end()) {
        s->second.session->on_verdict(job.candidate, v);
      }
    }
    settle_kernel_state(job.kernel);
    return;
  }
  ++m_verdicts[v.kind];
  spdlog::info("job {}: {}: {}", job.id, to_string(v.kind),
               verified ? fmt::format("{:.2f}x faster", v.speedup) : v.message.substr(0, 300));
  if (job.candidate.strategy != "submit") {
    auto& st = m_strategy_stats[job.candidate.strategy];
    ++st.candidates;
    st.gpu_seconds += m_workers->job_seconds(job.id);
    if (verified) {
      ++st.verified;
      st.gain_sum += std::max(0.0, v.speedup - 1);
    }
  }
  if (job.session) {
    if (auto s = m_sessions.find(job.session); s != m_sessions.end()) {
      s->second.session->on_verdict(job.candidate, v);
    }
  }
  std::string arch;
  const Work& w = m_work[job.kernel];
  // The captured process's driver, when it has exited since (hashcat's runs are shorter than
  // their kernels' validation); a process attached now with the same architecture otherwise.
  uint32_t major = w.driver_major;
  if (!w.captures.empty()) arch = w.captures.front().meta.arch;
  for (const auto& [conn, p] : m_registry.processes()) {
    if (p.hello.arch == arch || arch.empty()) {
      arch = p.hello.arch;
      major = driver_major(p.hello.driver_version);
      break;
    }
  }
  // Jobs that never reached a worker (no capture) leave no variant behind.
  bool ran = v.kind != VerdictKind::unsupported || !w.captures.empty();
  if (m_store && ran && !job.candidate.code.empty()) {
    store::VariantRecord rec;
    rec.kernel = job.kernel;
    rec.arch = arch;
    rec.driver_major = major;
    rec.strategy = job.candidate.strategy;
    rec.format = proto::ImageFormat::ptx;
    rec.image = job.candidate.code;
    if (job.candidate.kind == CandidateKind::cuda) {
      rec.image = v.compiled_ptx; // what the worker compiled and validated
    } else if (job.candidate.kind == CandidateKind::cubin) {
      rec.format = proto::ImageFormat::cubin;
    }
    if (!rec.image.empty() && rec.format == proto::ImageFormat::ptx && rec.image.back() != '\0') {
      rec.image.push_back('\0');
    }
    rec.entry = job.candidate.entry;
    rec.jit_options = job.candidate.jit_options;
    rec.guard = job.candidate.guard;
    rec.state = verified ? store::VariantState::verified : store::VariantState::rejected;
    rec.speedup = v.speedup;
    rec.noise = v.noise;
    rec.verdict = verified ? "verified" : std::string(to_string(v.kind)) + ": " + v.message;
    json evidence = json::parse(v.evidence_json, nullptr, false);
    json e{{"job", job.id},
           {"strategy", job.candidate.strategy},
           {"description", job.candidate.description},
           {"comparison", v.comparison == Comparison::bitwise ? "bitwise" : "tolerance"},
           {"captures_used", v.captures_used},
           {"original_ns", v.original_ns},
           {"candidate_ns", v.candidate_ns},
           {"worker", evidence.is_discarded() ? json(v.evidence_json) : evidence}};
    // The source the worker compiled (the image holds only its PTX): for people reading the
    // record, and for the LLM strategy's examples (agent.llm.examples).
    if (job.candidate.kind == CandidateKind::cuda) e["candidate_source"] = job.candidate.code;
    rec.evidence_json = e.dump(-1, ' ', false, json::error_handler_t::replace);
    rec.created = now_s();
    rec.id = store::variant_id_of(rec);
    if (job.revalidates) {
      // re-validation of an imported variant: the record keeps its id and becomes this host's
      if (auto old = m_store->get_variant(*job.revalidates); old && *old) {
        store::VariantRecord imported = **old;
        imported.state = rec.state;
        imported.speedup = rec.speedup;
        imported.noise = rec.noise;
        imported.verdict = rec.verdict;
        imported.evidence_json = rec.evidence_json;
        rec = imported;
      }
    }
    if (auto old = m_store->get_variant(rec.id); old && *old && withdrawn_for_good(**old)) {
      // This very variant was withdrawn (by an operator for the fleet, a shadow check, or a
      // tombstone while it waited here): it stays withdrawn, whatever this run found.
      if ((*old)->state == store::VariantState::disabled) {
        spdlog::info("job {}: variant {} was withdrawn from the fleet by an operator: it stays "
                     "disabled",
                     job.id, rec.id.hex());
      } else {
        spdlog::info("job {}: variant {} was {}: it stays withdrawn", job.id, rec.id.hex(),
                     (*old)->verdict.substr(0, 300));
      }
      rec = **old;
      verified = false;
    }
    if (!rec.image.empty()) {
      if (auto r = m_store->put_variant(rec); !r) {
        spdlog::error("job {}: storing the variant failed: {}", job.id, r.error().message);
      } else {
        job.variant = rec.id;
      }
    }
  }
  settle_kernel_state(job.kernel);
  if (job.revalidates) fleet_settled(job, verified);
  if (!verified) return;
  std::optional<store::VariantRecord> stored;
  if (m_store && job.variant) {
    if (auto r = m_store->get_variant(*job.variant); r && *r) stored = **r;
  }
  if (stored && m_fleet && m_fleet->enabled()) {
    // Verified here: it serves, and the fleet gets this host's verified variants of the kernel
    // for its target, once no tombstone names it.
    serve_unless_tombstoned(*stored, !job.revalidates && !arch.empty());
    return;
  }
  if (!job.revalidates && !arch.empty()) publish_to_fleet(job.kernel, arch, major);
  push(job.kernel);
}

void Optimizer::settle_kernel_state(const KernelKey& key) {
  KernelInfo* k = m_registry.kernel(key);
  if (!k) return;
  bool any_verified = false;
  if (m_store) {
    if (auto list = m_store->variants_of(key)) {
      for (const auto& vr : *list) any_verified |= vr.state == store::VariantState::verified;
    }
  }
  bool more = std::any_of(m_jobs.begin(), m_jobs.end(), [&](const auto& j) {
    return j.second.kernel == key && j.second.state != JobState::done;
  });
  k->record.state = any_verified ? store::KernelState::verified
                    : more       ? store::KernelState::optimizing
                                 : store::KernelState::rejected;
  k->dirty = true;
}

// ---- variants in processes ---------------------------------------------------------------------

std::optional<store::VariantRecord>
Optimizer::best_variant(const KernelKey& key, const std::string& arch, uint32_t major) const {
  if (!m_store) return std::nullopt;
  auto list = m_store->variants_of(key);
  if (!list) return std::nullopt;
  std::optional<store::VariantRecord> best;
  for (auto& v : *list) {
    if (v.state != store::VariantState::verified || v.arch != arch || v.driver_major != major)
      continue;
    if (m_awaiting_tombstone.count(v.id)) continue; // serves once its tombstone was looked up
    if (!best || v.speedup > best->speedup) best = std::move(v);
  }
  return best;
}

void Optimizer::push_to(uint64_t conn, const KernelKey& key) {
  const auto& procs = m_registry.processes();
  auto p = procs.find(conn);
  if (p == procs.end()) return;
  KernelInfo* k = m_registry.kernel(key);
  if (!k || k->record.disabled) return;
  auto best = best_variant(key, p->second.hello.arch, driver_major(p->second.hello.driver_version));
  if (!best) {
    spdlog::debug("{}: no verified variant for process {} ({}, driver {})", key.entry,
                  p->second.hello.pid, p->second.hello.arch, p->second.hello.driver_version);
    return;
  }
  auto& installed = m_installed[conn];
  if (auto it = installed.find(key); it != installed.end() && it->second == best->id) return;
  proto::InstallVariant msg;
  msg.kernel = key;
  msg.variant = best->id;
  msg.format = best->format;
  msg.size = best->image.size();
  msg.entry = best->entry;
  msg.jit_options = best->jit_options;
  msg.guard = best->guard;
  UniqueFd fd = memfd_with(best->image, "hone-variant");
  if (!fd) return;
  m_send(conn, proto::frame_of(proto::MsgType::install_variant, 0, msg, proto::k_flag_fd),
         std::move(fd));
  installed[key] = best->id;
  m_pushed_speedup[best->id] = best->speedup;
  k->serving = best->id.hex();
  spdlog::info("variant {} of {} pushed to process {}", best->id.hex(), key.entry,
               p->second.hello.pid);
}

void Optimizer::push(const KernelKey& key) {
  for (const auto& [conn, p] : m_registry.processes()) {
    bool runs = std::any_of(p.kernels.begin(), p.kernels.end(),
                            [&](const auto& s) { return s.second.key == key; });
    if (runs) push_to(conn, key);
  }
}

void Optimizer::withdraw(const KernelKey& key) {
  if (KernelInfo* k = m_registry.kernel(key)) k->serving.clear();
  for (auto& [conn, installed] : m_installed) {
    auto it = installed.find(key);
    if (it == installed.end()) continue;
    proto::RemoveVariant msg;
    msg.kernel = key;
    m_send(conn, proto::frame_of(proto::MsgType::remove_variant, 0, msg), UniqueFd());
    installed.erase(it);
  }
}

void Optimizer::kernel_switched(const KernelKey& key) {
  // Whatever changed (the kernel or one of its variants), processes get what should serve now.
  withdraw(key);
  push(key);
}

void Optimizer::on_kernels(uint64_t conn, const proto::Kernels& msg) {
  for (const auto& k : msg.kernels) push_to(conn, k.key);
}

void Optimizer::on_detach(uint64_t conn) {
  m_installed.erase(conn);
  for (auto it = m_shadow_due.begin(); it != m_shadow_due.end();) {
    it = it->first.first == conn ? m_shadow_due.erase(it) : std::next(it);
  }
  for (auto it = m_shadow_pending.begin(); it != m_shadow_pending.end();) {
    it = it->first == conn ? m_shadow_pending.erase(it) : std::next(it);
  }
}

// A served launch saves what the original would have taken beyond the variant: the kernel's mean
// sampled time (mostly the original's, sampled before a variant served) times 1 - 1/speedup, the
// speedup its validation measured. An estimate: the samples after serving began are the variant's.
void Optimizer::on_served(uint64_t conn, const std::vector<std::pair<KernelKey, uint64_t>>& served) {
  auto installed = m_installed.find(conn);
  if (installed == m_installed.end()) return;
  for (const auto& [key, launches] : served) {
    auto v = installed->second.find(key);
    if (v == installed->second.end()) continue;
    auto s = m_pushed_speedup.find(v->second);
    const KernelInfo* k = m_registry.kernel(key);
    if (s == m_pushed_speedup.end() || s->second <= 1 || !k) continue;
    m_gpu_saved_ns += double(launches) * k->mean_ns() * (1 - 1 / s->second);
  }
  // Shadow checks: one served launch in shadow_every, per process and kernel, one at a time.
  const uint64_t every = m_config.validation.shadow_every;
  if (!every) return;
  for (const auto& [key, launches] : served) {
    auto v = installed->second.find(key);
    if (v == installed->second.end() || !launches) continue;
    auto slot = std::make_pair(conn, key);
    uint64_t& due = m_shadow_due[slot];
    due += launches;
    if (due < every || m_shadow_pending.count(slot)) continue;
    due = 0;
    request_shadow(conn, key, v->second);
  }
}

void Optimizer::request_shadow(uint64_t conn, const KernelKey& key, const VariantId& variant) {
  const auto& procs = m_registry.processes();
  auto p = procs.find(conn);
  if (p == procs.end()) return;
  for (const auto& [id, seen] : p->second.kernels) {
    if (seen.key != key) continue;
    proto::CaptureRequest req;
    req.request = m_next_request++;
    req.kernel = id;
    req.launches = 1;
    req.max_bytes = uint64_t(m_config.capture.max_mb) << 20;
    req.with_outputs = true;
    req.shadow = true;
    m_capture_requests[req.request] = {key, now_s(), variant, conn};
    m_shadow_pending.insert({conn, key});
    m_send(conn, proto::frame_of(proto::MsgType::capture_request, 0, req), UniqueFd());
    spdlog::debug("shadow check of variant {} of {} asked of process {}", variant.hex(), key.entry,
                  p->second.hello.pid);
    return;
  }
}

void Optimizer::start_shadow_job(JobEntry& job) {
  Job j = job_against_original(job);
  j.shadow_check = true;
  // Compared as the variant was verified: bit for bit, or within the tolerance.
  j.comparison = Comparison::bitwise;
  if (m_store) {
    if (auto rec = m_store->get_variant(*job.shadow_of); rec && *rec) {
      json e = json::parse((*rec)->evidence_json, nullptr, false);
      if (e.is_object() && e.value("comparison", "") == "tolerance")
        j.comparison = Comparison::tolerance;
    }
  }
  std::vector<std::string> data;
  const CaptureEntry& c = *job.shadow_capture;
  auto bytes = read_capture(c);
  if (!bytes) {
    Verdict v;
    v.job = job.id;
    v.kind = VerdictKind::internal;
    v.message = "the shadow capture could not be read";
    finish_job(job, v);
    return;
  }
  j.captures.push_back(c.meta);
  data.push_back(std::move(*bytes));
  std::vector<std::string_view> views(data.begin(), data.end());
  job.state = JobState::running;
  m_workers->submit(job.id, encode_bundle(j, views), std::numeric_limits<double>::infinity());
}

void Optimizer::finish_shadow_job(JobEntry& job, const Verdict& v) {
  job.state = JobState::done;
  job.verdict = v;
  job.finished = now_s();
  if (job.shadow_capture) {
    m_capture_bytes -= std::min(m_capture_bytes, job.shadow_capture->meta.data_bytes);
    job.shadow_capture.reset();
  }
  for (auto it = m_shadow_pending.begin(); it != m_shadow_pending.end();) {
    it = it->second == job.kernel ? m_shadow_pending.erase(it) : std::next(it);
  }
  const VariantId variant = *job.shadow_of;
  if (v.kind == VerdictKind::verified) {
    ++m_shadow_passed;
    spdlog::info("job {}: shadow check of variant {} of {} passed", job.id, variant.hex(),
                 job.kernel.entry);
    return;
  }
  if (v.kind != VerdictKind::mismatch) {
    // The check itself could not run (the capture, the worker): nothing is proven either way.
    spdlog::warn("job {}: shadow check of variant {} of {} inconclusive: {}: {}", job.id,
                 variant.hex(), job.kernel.entry, to_string(v.kind), v.message.substr(0, 300));
    return;
  }
  ++m_shadow_failed;
  spdlog::error("job {}: shadow check of variant {} of {} FAILED, withdrawing it from every "
                "process: {}",
                job.id, variant.hex(), job.kernel.entry, v.message.substr(0, 500));
  std::optional<store::VariantRecord> rec;
  if (m_store) {
    if (auto r = m_store->get_variant(variant); r && *r) rec = **r;
  }
  if (rec) {
    rec->state = store::VariantState::rejected;
    rec->verdict = std::string(k_shadow_withdrawn) + ": " + v.message;
    json e = json::parse(rec->evidence_json, nullptr, false);
    if (!e.is_object()) e = json{{"evidence", rec->evidence_json}};
    json worker = json::parse(v.evidence_json, nullptr, false);
    e["shadow_check"] = {{"job", job.id},
                         {"at", now_s()},
                         {"verdict", to_string(v.kind)},
                         {"message", v.message},
                         {"worker", worker.is_discarded() ? json(v.evidence_json) : worker}};
    // What `honectl show` names: the pattern the shadow check caught.
    if (worker.is_object() && worker.contains("pattern")) e["pattern"] = worker["pattern"];
    rec->evidence_json = e.dump(-1, ' ', false, json::error_handler_t::replace);
    if (auto r = m_store->put_variant(*rec); !r)
      spdlog::error("job {}: recording the withdrawal failed: {}", job.id, r.error().message);
  }
  m_pushed_speedup.erase(variant);
  if (KernelInfo* k = m_registry.kernel(job.kernel)) {
    bool any_verified = false;
    if (m_store) {
      if (auto list = m_store->variants_of(job.kernel)) {
        for (const auto& vr : *list) any_verified |= vr.state == store::VariantState::verified;
      }
    }
    k->record.state = any_verified ? store::KernelState::verified : store::KernelState::rejected;
    k->dirty = true;
  }
  // Every process at once: the variant leaves them all, and the next best verified one (if any)
  // takes its place.
  kernel_switched(job.kernel);
  if (rec) {
    // The fleet: a tombstone, so that every host withdraws it and none publishes it again, and
    // the kernel's object without it.
    withdraw_from_fleet(*rec, std::string(k_shadow_withdrawn), shadow_detail(*rec));
    publish_to_fleet(job.kernel, rec->arch, rec->driver_major);
  }
}

std::string Optimizer::metrics_text() const {
  std::string out =
      "# HELP hone_verdicts_total Validation jobs finished since honed started, by verdict.\n"
      "# TYPE hone_verdicts_total counter\n";
  static constexpr const char* k_labels[] = {
      "verified",  "compile_error",    "load_error", "launch_error", "illegal_address", "timeout",
      "mismatch",  "nondeterministic", "not_faster", "suspicious",   "unsupported",     "internal",
      "refused",   "not_applicable"};
  static_assert(std::size(k_labels) == size_t(k_last_verdict_kind) + 1);
  for (uint8_t i = 0; i <= uint8_t(k_last_verdict_kind); ++i) {
    const auto kind = VerdictKind(i);
    const std::string label = k_labels[i];
    auto it = m_verdicts.find(kind);
    out += "hone_verdicts_total{kind=\"" + label + "\"} " +
           std::to_string(it == m_verdicts.end() ? 0 : it->second) + "\n";
  }
  std::set<KernelKey> served;
  for (const auto& [conn, installed] : m_installed)
    for (const auto& [key, variant] : installed) served.insert(key);
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    append_metric(out, name, type, help, value);
  };
  metric("hone_kernels_served", "gauge",
         "Kernels a verified variant is installed for in at least one attached process.",
         double(served.size()));
  metric("hone_gpu_time_saved_seconds_total", "counter",
         "GPU time the variants saved since honed started, estimated: served launches x the "
         "kernel's mean sampled time x (1 - 1/speedup).",
         m_gpu_saved_ns / 1e9);
  metric("hone_capture_bytes", "gauge", "Memory the captured launches hold now.",
         double(m_capture_bytes));
  metric("hone_capture_shared_bytes", "gauge",
         "Bytes the captured launches refer to that another capture holds already (held once).",
         double(m_capture_bytes_shared));
  metric("hone_capture_budget_bytes", "gauge", "What captures may hold in all (capture.total_mb).",
         double(uint64_t(m_config.capture.total_mb) << 20));
  out += "# HELP hone_shadow_checks_total Shadow checks of served variants since honed started, "
         "by result (failed: the variant was withdrawn).\n"
         "# TYPE hone_shadow_checks_total counter\n"
         "hone_shadow_checks_total{result=\"passed\"} " + std::to_string(m_shadow_passed) + "\n"
         "hone_shadow_checks_total{result=\"failed\"} " + std::to_string(m_shadow_failed) + "\n";
  {
    const json c = coverage_json();
    metric("hone_coverage_workable_share", "gauge",
           "Share of the kernels' estimated GPU time in kernels hone can work on (NVRTC source, "
           "PTX, retargeted PTX, Triton's PTX).",
           c["workable_share"].get<double>());
    out += "# HELP hone_coverage_share Share of the kernels' estimated GPU time by what hone has "
           "to work from (source, ptx, ptx_newer, triton, sass, collective, unknown).\n"
           "# TYPE hone_coverage_share gauge\n";
    for (const auto& k : c["kinds"]) {
      out += "hone_coverage_share{kind=\"" + k["kind"].get<std::string>() + "\"} " +
             std::to_string(k["share"].get<double>()) + "\n";
    }
  }
  metric("hone_worker_crashes_total", "counter",
         "Validation workers that died on their own (not killed for a job past its deadline).",
         double(m_workers->workers_crashed()));
  return out;
}

void Optimizer::on_variant_status(uint64_t conn, const proto::VariantStatus& msg) {
  if (msg.installed) {
    spdlog::debug("variant {} installed in connection {}: {}", msg.variant.hex(), conn,
                  msg.message);
    return;
  }
  spdlog::info("variant {} of {} not serving in connection {}: {}", msg.variant.hex(),
               msg.kernel.entry, conn, msg.message);
  auto& installed = m_installed[conn];
  if (auto it = installed.find(msg.kernel); it != installed.end() && it->second == msg.variant) {
    installed.erase(it);
  }
}

// ---- images and captures from shims ----------------------------------------------------------

void Optimizer::on_image(uint64_t conn, const proto::Image& msg, UniqueFd fd) {
  if (!msg.available || !fd) return;
  // The size is the shim's word: held against the descriptor before anything is allocated.
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || uint64_t(st.st_size) != msg.size || msg.size > k_max_image) {
    spdlog::warn("an image from connection {} does not match its size; ignored", conn);
    return;
  }
  auto bytes = read_fd(fd.get(), msg.size);
  if (!bytes || ImageHash::of(bytes->data(), bytes->size()) != msg.image) {
    spdlog::warn("an image from connection {} does not match its hash; ignored", conn);
    return;
  }
  auto shared = std::make_shared<const std::string>(std::move(*bytes));
  // A process that loaded the linked image from its own cache (hashcat keeps the cubin) did not
  // see the link: what an earlier process's link said stays with the image.
  std::optional<proto::Image::Linked> linked = msg.linked;
  std::optional<proto::SourceInfo> source = msg.source;
  if (!linked && m_store && msg.format == proto::ImageFormat::cubin) {
    if (auto old = m_store->get_image(msg.image); old && *old && (*old)->linked) {
      linked = (*old)->linked;
      if (!source) source = (*old)->source;
    }
  }
  if (linked) {
    spdlog::info("image {}: a cubin the JIT linker made from {} input(s)", msg.image.hex(),
                 linked->inputs.size());
  }
  for (auto& [key, w] : m_work) {
    if (key.image != msg.image || w.has_image()) continue;
    w.image = shared;
    w.format = msg.format;
    w.source = source;
    w.triton = msg.triton;
    w.linked = linked;
  }
  if (msg.triton) {
    spdlog::info("image {}: its PTX is in the application's Triton cache ({})", msg.image.hex(),
                 msg.triton->cubin_path);
  }
  advance_soon();
  if (m_store) {
    store::ImageRecord rec;
    rec.hash = msg.image;
    rec.format = msg.format;
    rec.bytes = *shared;
    rec.source = source;
    rec.triton = msg.triton;
    rec.linked = linked;
    rec.first_seen = now_s();
    if (auto r = m_store->put_image(rec); !r) spdlog::error("store: {}", r.error().message);
  }
}

void Optimizer::on_capture(uint64_t conn, const Capture& msg, UniqueFd fd) {
  auto req = m_capture_requests.find(msg.request);
  if (req == m_capture_requests.end() || req->second.kernel != msg.key) {
    spdlog::debug("a capture nobody asked for from connection {}; dropped", conn);
    return;
  }
  if (req->second.shadow_of) {
    // A served launch, captured for its shadow check: checked on its own, never a job's input.
    const VariantId variant = *req->second.shadow_of;
    m_capture_requests.erase(req);
    struct stat st {};
    if (msg.status != CaptureStatus::ok || !fd || ::fstat(fd.get(), &st) != 0 ||
        uint64_t(st.st_size) < msg.data_bytes || !make_room_for(msg.data_bytes)) {
      spdlog::info("shadow check of {} skipped: {}", msg.key.entry,
                   msg.status != CaptureStatus::ok ? msg.reason : "no room or a short capture");
      m_shadow_pending.erase({conn, msg.key});
      return;
    }
    JobEntry job;
    job.id = m_next_job++;
    job.kernel = msg.key;
    job.shadow_of = variant;
    job.candidate.strategy = "shadow";
    job.candidate.description = "shadow check of variant " + variant.hex();
    job.created = now_s();
    CaptureEntry e;
    e.meta = msg;
    const auto& procs = m_registry.processes();
    if (auto p = procs.find(conn); p != procs.end()) e.meta.arch = p->second.hello.arch;
    e.received = now_s();
    e.data = std::make_shared<UniqueFd>(std::move(fd));
    m_capture_bytes += msg.data_bytes;
    job.shadow_capture = std::move(e);
    spdlog::info("job {}: shadow check of variant {} of {} on a served launch", job.id,
                 variant.hex(), msg.key.entry);
    m_jobs.emplace(job.id, std::move(job));
    advance_soon();
    return;
  }
  Work& w = m_work[msg.key];
  if (msg.status != CaptureStatus::ok || !fd) {
    spdlog::info("capture of {} refused by the process: {}", msg.key.entry, msg.reason);
    if (KernelInfo* k = m_registry.kernel(msg.key)) k->capture_refused = msg.reason;
    advance_soon(); // the jobs waiting for a capture end now, with the reason
    return;
  }
  if (KernelInfo* k = m_registry.kernel(msg.key)) {
    k->capture_refused.clear();
    k->captured_buffers = msg.buffers;
    k->captured_whole_why = msg.whole_why;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || uint64_t(st.st_size) < msg.data_bytes) {
    spdlog::warn("a capture from connection {} is shorter than it says; dropped", conn);
    return;
  }
  if (w.captures.size() >= m_config.capture.captures_per_kernel) return;
  if (!make_room_for(msg.data_bytes)) {
    spdlog::warn("capture of {} dropped: captures would exceed capture.total_mb", msg.key.entry);
    return;
  }
  CaptureEntry e;
  e.meta = msg;
  const auto& procs = m_registry.processes();
  if (auto p = procs.find(conn); p != procs.end()) {
    e.meta.arch = p->second.hello.arch;
    w.driver_major = driver_major(p->second.hello.driver_version);
  }
  e.received = now_s();
  if (m_config.capture.persist) {
    auto file =
        capture_files::write(capture_files::directory(m_config.store.state_dir), e.meta, fd.get());
    if (file)
      e.file = *file;
    else
      spdlog::warn("capture of {} kept in memory only: {}", msg.key.entry, file.error().message);
  }
  e.data = std::make_shared<UniqueFd>(std::move(fd));
  uint64_t shared = 0;
  if (!share_ranges(e, shared)) {
    spdlog::warn("capture of {} dropped: its bytes could not be read", msg.key.entry);
    return;
  }
  m_capture_bytes += msg.data_bytes - shared;
  m_capture_bytes_shared += shared;
  w.captures.push_back(std::move(e));
  size_t bounded = 0;
  for (const auto& b : msg.buffers) bounded += b.bounded ? 1 : 0;
  spdlog::info("captured a launch of {} ({} buffers, {} by bounded ranges, {} bytes, {} of them "
               "held already for other captures)",
               msg.key.entry, msg.buffers.size(), bounded, msg.data_bytes, shared);
  advance_soon();
}

bool Optimizer::needs_captures(const KernelKey& key) const {
  return std::any_of(m_jobs.begin(), m_jobs.end(), [&](const auto& j) {
    return j.second.kernel == key && j.second.state != JobState::done;
  });
}

bool Optimizer::strategies_left(const KernelKey& key) {
  if (!m_config.optimizer.enabled) return false;
  const KernelInfo* k = m_registry.kernel(key);
  if (!k || k->record.disabled) return false;
  for (const auto& s : m_strategies) {
    if (!strategy_enabled(s->id())) continue;
    if (std::find(k->record.tried.begin(), k->record.tried.end(), s->id()) ==
        k->record.tried.end())
      return true;
  }
  return std::any_of(m_sessions.begin(), m_sessions.end(),
                     [&](const auto& e) { return e.second.kernel == key; });
}

void Optimizer::release_captures(const KernelKey& key, Work& w, const char* why) {
  if (w.captures.empty()) return;
  for (auto& c : w.captures) {
    uncharge(c);
    if (!c.file.empty()) capture_files::remove(c.file);
  }
  spdlog::info("dropped {} capture(s) of {}: {}", w.captures.size(), key.entry, why);
  w.captures.clear();
  w.captures_asked = 0;
  w.capture_asked_at = 0;
}

bool Optimizer::share_ranges(CaptureEntry& e, uint64_t& shared_bytes) {
  shared_bytes = 0;
  const uint64_t total = e.meta.data_bytes;
  // The buffers' ranges worth holding once, each range once (buffers into one allocation name
  // the same bytes), in order and apart.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& b : e.meta.buffers) {
    if (b.size >= k_shared_min && b.before <= total && b.size <= total - b.before)
      ranges.emplace_back(b.before, b.size);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint64_t, uint64_t>> apart;
  uint64_t end = 0;
  for (auto r : ranges) {
    if (r.first < end) continue;
    apart.push_back(r);
    end = r.first + r.second;
  }
  if (apart.empty()) return true;
  auto bytes = read_fd(e.data->get(), total);
  if (!bytes) return false;
  std::string rest;
  rest.reserve(total);
  uint64_t at = 0;
  for (auto [off, size] : apart) {
    rest.append(*bytes, at, off - at);
    std::string_view range(bytes->data() + off, size);
    const ImageHash key = ImageHash::of(range.data(), range.size()); // 128-bit xxh3
    std::shared_ptr<const std::string> blob;
    auto it = m_shared_ranges.find(key);
    if (it != m_shared_ranges.end()) blob = it->second.lock();
    if (blob && *blob == range) {
      shared_bytes += size;
    } else {
      // New bytes (or, never seen yet, other bytes with the same hash: held apart).
      bool collision = blob != nullptr;
      blob = std::make_shared<const std::string>(range);
      if (!collision) m_shared_ranges[key] = blob;
    }
    e.shared.emplace_back(off, std::move(blob));
    at = off + size;
  }
  rest.append(*bytes, at, total - at);
  UniqueFd fd = memfd_with(rest, "hone-capture");
  if (!fd) return false;
  e.data = std::make_shared<UniqueFd>(std::move(fd));
  for (auto i = m_shared_ranges.begin(); i != m_shared_ranges.end();)
    i = i->second.expired() ? m_shared_ranges.erase(i) : std::next(i);
  return true;
}

std::optional<std::string> Optimizer::read_capture(const CaptureEntry& c) const {
  uint64_t shared = 0;
  for (const auto& r : c.shared) shared += r.second->size();
  auto rest = read_fd(c.data->get(), c.meta.data_bytes - shared);
  if (!rest || c.shared.empty()) return rest;
  std::string out;
  out.reserve(c.meta.data_bytes);
  uint64_t from = 0; // in `rest`
  for (const auto& [off, blob] : c.shared) {
    uint64_t n = off - out.size();
    out.append(*rest, from, n);
    from += n;
    out += *blob;
  }
  out.append(*rest, from, std::string::npos);
  return out;
}

void Optimizer::uncharge(CaptureEntry& c) {
  uint64_t freed = c.meta.data_bytes;
  std::map<const std::string*, long> refs; // a capture may name one blob twice
  for (const auto& r : c.shared) {
    freed -= std::min<uint64_t>(freed, r.second->size());
    ++refs[r.second.get()];
  }
  for (const auto& r : c.shared) {
    auto it = refs.find(r.second.get());
    if (it == refs.end()) continue;
    const uint64_t size = r.second->size();
    const long mine = it->second;
    const bool last = r.second.use_count() == mine; // no other capture holds it
    if (last) freed += size;
    const uint64_t unshared = uint64_t(last ? mine - 1 : mine) * size;
    m_capture_bytes_shared -= std::min(m_capture_bytes_shared, unshared);
    refs.erase(it);
  }
  m_capture_bytes -= std::min(m_capture_bytes, freed);
  c.shared.clear();
}

void Optimizer::release_idle_captures() {
  // Without persistence, captures leave memory once no process runs the kernel and no job
  // waits for them; with it they stay (that is what the operator asked for) until room is needed.
  if (!m_config.capture.persist) {
    for (auto& [key, w] : m_work) {
      if (!w.captures.empty() && !needs_captures(key) && !process_with(key) &&
          !strategies_left(key)) {
        release_captures(key, w, "no process runs the kernel any more");
      }
    }
  }
  // Requests no capture answered in time are forgotten.
  int64_t now = now_s();
  int64_t limit = 2 * int64_t(m_config.capture.timeout_s) + 1;
  for (auto it = m_capture_requests.begin(); it != m_capture_requests.end();) {
    if (now - it->second.asked_at > limit) {
      if (it->second.shadow_of) m_shadow_pending.erase({it->second.conn, it->second.kernel});
      it = m_capture_requests.erase(it);
    } else {
      ++it;
    }
  }
}

bool Optimizer::make_room_for(uint64_t bytes) {
  uint64_t cap = uint64_t(m_config.capture.total_mb) << 20;
  if (bytes > cap) return false;
  while (m_capture_bytes + bytes > cap) {
    Work* oldest = nullptr;
    const KernelKey* oldest_key = nullptr;
    int64_t when = INT64_MAX;
    for (auto& [key, w] : m_work) {
      if (w.captures.empty() || needs_captures(key)) continue;
      if (w.captures.front().received < when) {
        when = w.captures.front().received;
        oldest = &w;
        oldest_key = &key;
      }
    }
    if (!oldest) return false;
    release_captures(*oldest_key, *oldest, "room for newer captures (capture.total_mb)");
  }
  return true;
}

void Optimizer::load_persisted_captures() {
  if (!m_config.capture.persist) return;
  std::vector<std::string> problems;
  auto loaded =
      capture_files::load_all(capture_files::directory(m_config.store.state_dir), &problems);
  for (const auto& p : problems) spdlog::warn("capture file {}", p);
  size_t kept = 0;
  for (auto& l : loaded) {
    Work& w = m_work[l.meta.key];
    if (w.captures.size() >= m_config.capture.captures_per_kernel ||
        !make_room_for(l.meta.data_bytes)) {
      capture_files::remove(l.file);
      continue;
    }
    CaptureEntry e;
    e.meta = std::move(l.meta);
    e.data = std::make_shared<UniqueFd>(std::move(l.data));
    e.received = now_s();
    e.file = l.file;
    uint64_t shared = 0;
    if (!share_ranges(e, shared)) {
      spdlog::warn("capture file {}: its bytes could not be read", l.file.string());
      continue;
    }
    m_capture_bytes += e.meta.data_bytes - shared;
    m_capture_bytes_shared += shared;
    w.captures.push_back(std::move(e));
    ++kept;
  }
  if (kept) spdlog::info("{} persisted capture(s) loaded from the state directory", kept);
}

// ---- the agent ---------------------------------------------------------------------------------

void Optimizer::classify(const KernelKey& key, Work& w, KernelInfo& k) {
  w.code = agent::kernel_code(task_for(key, w));
  k.code = agent::to_string(w.code->kind);
  k.workable = w.code->workable();
  if (w.code->kind == agent::CodeKind::sass) {
    // SASS only: covered when a strategy works from behaviour (agent.llm.sass_kernels).
    for (const auto& s : m_strategies) {
      k.workable = k.workable || (strategy_enabled(s->id()) && s->works_without_code());
    }
  }
  k.ptx = w.code->ptx.empty() ? "none: " + w.code->detail : w.code->detail;
  if (w.code->ptx.empty()) {
    spdlog::info("{}: no PTX to work on ({}); strategies that need it skip the kernel", key.entry,
                 w.code->detail);
  } else if (w.code->kind == agent::CodeKind::ptx_newer ||
             w.code->kind == agent::CodeKind::triton || w.code->linked) {
    spdlog::info("{}: working on {}", key.entry, w.code->detail);
  }
}

agent::KernelTask Optimizer::task_for(const KernelKey& key, const Work& w) const {
  agent::KernelTask t;
  t.key = key;
  t.format = w.format;
  if (w.has_image()) t.image = *w.image;
  t.source = w.source;
  // Source the kernel's code does not come from (another input of its JIT link) or that does not
  // compile here (include directories honed cannot read): the strategies work on the PTX.
  if (w.code && w.code->kind != agent::CodeKind::source) t.source.reset();
  if (w.triton) t.triton_ptx = w.triton->ptx;
  t.linked = w.linked;
  t.hide_ptx_arch = m_hide_ptx_arch;
  if (w.code) t.ptx = w.code->ptx;
  for (const auto& c : w.captures) t.captures.push_back(c.meta);
  if (!w.captures.empty()) t.arch = w.captures.front().meta.arch;
  // The device as a process running the kernel named it (the prompt of the LLM strategy).
  if (auto p = process_with(key)) {
    const auto& procs = m_registry.processes();
    if (auto it = procs.find(p->first); it != procs.end()) {
      t.device = it->second.hello.device_name;
      if (t.arch.empty()) t.arch = it->second.hello.arch;
    }
  }
  return t;
}

std::vector<agent::Example> Optimizer::examples_for(const KernelKey& key, uint32_t n) const {
  // A rewrite longer than this would crowd the prompt for what it teaches.
  constexpr size_t k_max_example_bytes = 4000;
  std::vector<agent::Example> out;
  if (!m_store || n == 0) return out;
  auto all = m_store->variants();
  if (!all) {
    spdlog::warn("the LLM's examples: reading the store failed: {}", all.error().message);
    return out;
  }
  std::map<KernelKey, agent::Example> best; // per kernel
  for (const auto& v : *all) {
    // Verified here, not imported from another host, and not this kernel's. Rewrites only, by a
    // model or an engineer (honectl submit): a specialization holds the values of scalar
    // arguments, which are the application's inputs.
    if (v.state != store::VariantState::verified || v.kernel == key) continue;
    if (v.strategy != "llm" && v.strategy != "submit") continue;
    json e = json::parse(v.evidence_json, nullptr, false);
    if (!e.is_object() || !e.contains("candidate_source") || !e["candidate_source"].is_string())
      continue;
    std::string source = e["candidate_source"].get<std::string>();
    if (source.empty() || source.size() > k_max_example_bytes) continue;
    auto& slot = best[v.kernel];
    if (v.speedup > slot.speedup) slot = {v.kernel.entry, v.speedup, std::move(source)};
  }
  for (auto& [k, ex] : best) out.push_back(std::move(ex));
  std::sort(out.begin(), out.end(), [](const agent::Example& a, const agent::Example& b) {
    return a.speedup != b.speedup ? a.speedup > b.speedup : a.kernel < b.kernel;
  });
  if (out.size() > n) out.resize(n);
  return out;
}

double Optimizer::expected_gain_per_second(const agent::Strategy& s) const {
  // The strategy's own prior, weighed as two tries, refined by what its candidates did here.
  double gain = (s.expected_speedup() - 1) * 2;
  double cost = s.cost_gpu_seconds() * 2;
  if (auto it = m_strategy_stats.find(s.id()); it != m_strategy_stats.end()) {
    gain += it->second.gain_sum;
    cost += it->second.gpu_seconds;
  }
  return cost > 0 ? gain / cost : 0;
}

void Optimizer::survey() {
  // The hottest kernels, more than the optimizer considers: what each has to work from, for the
  // coverage, whether or not the optimizer runs. An image is fetched once for all its kernels.
  constexpr size_t k_survey_top = 64;
  const size_t top = std::max<size_t>(m_config.optimizer.hot_top, k_survey_top);
  size_t considered = 0;
  for (const KernelInfo* ck : m_registry.ranked()) {
    if (considered++ >= top) break;
    const KernelKey& key = ck->record.key;
    KernelInfo* k = m_registry.kernel(key);
    if (!k->code.empty()) continue;
    // Every kernel among the top ones gets its CODE, however few launches it has made (the
    // optimizer's hot_min_launches is about what is worth a job; knowing what a kernel is made of
    // costs one image per module). A kernel no process runs any more can still be classified from
    // the store or from another kernel of its module (request_image).
    if (agent::is_collective(key.entry)) {
      // It waits on other GPUs: never captured, replayed in a worker, or optimized.
      k->code = agent::to_string(agent::CodeKind::collective);
      k->ptx = "none: a collective kernel (it waits on other GPUs): never captured, replayed or "
               "optimized";
      spdlog::info("{}: a collective kernel: never captured or optimized", key.entry);
      continue;
    }
    Work& w = m_work[key];
    request_image(key, w);
    if (w.has_image() && !w.code) classify(key, w, *k);
  }
}

void Optimizer::run_strategies() {
  survey();
  if (!m_config.optimizer.enabled) return;
  // The strategies agent.strategies names, in order of expected gain per GPU-second.
  std::vector<agent::Strategy*> order;
  for (const auto& s : m_strategies) {
    if (strategy_enabled(s->id())) order.push_back(s.get());
  }
  std::stable_sort(order.begin(), order.end(), [&](agent::Strategy* a, agent::Strategy* b) {
    return expected_gain_per_second(*a) > expected_gain_per_second(*b);
  });
  auto ranked = m_registry.ranked();
  size_t considered = 0;
  for (const KernelInfo* ck : ranked) {
    if (considered++ >= m_config.optimizer.hot_top) break;
    const KernelKey& key = ck->record.key;
    KernelInfo* k = m_registry.kernel(key);
    if (k->record.disabled || k->record.launches < m_config.optimizer.hot_min_launches) continue;
    if (k->code == agent::to_string(agent::CodeKind::collective)) continue; // survey()
    Work& w = m_work[key];
    // A kernel no process runs any more is worked on only from the captures in hand: a short-lived
    // application (a hashcat crack) exits before every strategy has started, and its variants
    // serve its next run from the store.
    if (k->processes.empty() && w.captures.size() < m_config.capture.captures_per_kernel) continue;
    if (fleet_first(key, *k, w)) continue;
    for (agent::Strategy* s : order) {
      if (std::find(k->record.tried.begin(), k->record.tried.end(), s->id()) !=
          k->record.tried.end()) {
        continue;
      }
      request_image(key, w);
      if (!w.has_image()) break; // strategies read the image; try again when it is here
      if (!w.code) classify(key, w, *k);
      if (w.code->ptx.empty() && s->needs_ptx()) {
        k->record.tried.push_back(s->id());
        k->skipped[s->id()] = "no PTX: " + w.code->detail;
        k->dirty = true;
        continue;
      }
      if (s->needs_captures()) {
        request_captures(key, w);
        if (w.captures.size() < m_config.capture.captures_per_kernel) continue;
      }
      k->record.tried.push_back(s->id());
      k->dirty = true;
      agent::KernelTask task = task_for(key, w);
      if (uint32_t n = s->examples_wanted()) task.examples = examples_for(key, n);
      std::string declined;
      task.declined = &declined;
      auto session = s->start(task);
      if (!session) {
        // Not a fault: the strategy's preconditions do not hold for this kernel (no job, so no
        // verdict; `honectl show` says why).
        k->skipped[s->id()] =
            "not applicable: " + (declined.empty() ? "the strategy does not apply to this kernel"
                                                   : declined);
        spdlog::info("{}: strategy {} does not apply: {}", key.entry, s->id(),
                     declined.empty() ? "-" : declined);
        continue;
      }
      uint64_t id = m_next_session++;
      spdlog::info("{}: strategy {} started", key.entry, s->id());
      m_sessions.emplace(id, SessionEntry{key, s->id(), std::move(session), now_s()});
    }
  }
  poll_sessions();
}

void Optimizer::poll_sessions() {
  for (auto it = m_sessions.begin(); it != m_sessions.end();) {
    SessionEntry& e = it->second;
    auto candidates = e.session->poll();
    if (!candidates.empty()) {
      spdlog::info("{}: strategy {} proposes {} candidate(s)", e.kernel.entry, e.strategy,
                   candidates.size());
    }
    for (auto& c : candidates) {
      c.strategy = e.strategy;
      (void)submit(e.kernel, std::move(c), it->first);
    }
    bool waiting = std::any_of(m_jobs.begin(), m_jobs.end(), [&](const auto& j) {
      return j.second.session == it->first && j.second.state != JobState::done;
    });
    if (e.session->done() && !waiting) {
      spdlog::debug("{}: strategy {} finished", e.kernel.entry, e.strategy);
      it = m_sessions.erase(it);
    } else {
      ++it;
    }
  }
}

void Optimizer::add_strategy(std::unique_ptr<agent::Strategy> strategy) {
  m_strategies.push_back(std::move(strategy));
}

bool Optimizer::strategy_enabled(const std::string& id) const {
  const auto& on = m_config.agent.strategies;
  return std::find(on.begin(), on.end(), id) != on.end();
}

json Optimizer::coverage_json() const {
  struct Sum {
    uint64_t kernels = 0;
    double ns = 0;
    double workable_ns = 0;
  };
  std::map<std::string, Sum> by_kind;
  double total = 0, workable = 0;
  for (const auto& [key, k] : m_registry.kernels()) {
    std::string kind = k.code;
    if (kind.empty()) {
      kind = agent::to_string(agent::is_collective(key.entry) ? agent::CodeKind::collective
                                                              : agent::CodeKind::unknown);
    }
    Sum& sum = by_kind[kind];
    const double ns = double(k.record.est_gpu_ns);
    ++sum.kernels;
    sum.ns += ns;
    total += ns;
    if (k.workable) {
      sum.workable_ns += ns;
      workable += ns;
    }
  }
  auto share = [&](double ns) { return total > 0 ? ns / total : 0.0; };
  json kinds = json::array();
  for (agent::CodeKind kind : agent::k_code_kinds) {
    const Sum& sum = by_kind[agent::to_string(kind)];
    kinds.push_back({{"kind", agent::to_string(kind)},
                     {"kernels", sum.kernels},
                     {"est_gpu_ns", uint64_t(sum.ns)},
                     {"share", share(sum.ns)},
                     {"workable_share", share(sum.workable_ns)}});
  }
  return json{{"est_gpu_ns", uint64_t(total)},
              {"workable_share", share(workable)},
              {"kinds", std::move(kinds)}};
}

json Optimizer::agent_json() const {
  json strategies = json::array();
  for (const auto& s : m_strategies) {
    json j{{"id", s->id()},
           {"enabled", strategy_enabled(s->id())},
           {"expected_gain_per_gpu_second", expected_gain_per_second(*s)}};
    if (auto it = m_strategy_stats.find(s->id()); it != m_strategy_stats.end()) {
      j["candidates"] = it->second.candidates;
      j["verified"] = it->second.verified;
      j["gpu_seconds"] = it->second.gpu_seconds;
    }
    strategies.push_back(std::move(j));
  }
  json sessions = json::array();
  for (const auto& [id, e] : m_sessions) {
    sessions.push_back({{"id", id},
                        {"kernel", e.kernel.str()},
                        {"strategy", e.strategy},
                        {"state", e.session->state()},
                        {"started", e.started}});
  }
  return json{{"strategies", std::move(strategies)},
              {"sessions", std::move(sessions)},
              {"llm", m_llm_state}};
}

bool Optimizer::publish_to_fleet(const KernelKey& kernel, const std::string& arch,
                                 uint32_t driver_major) {
  if (!m_fleet || !m_fleet->enabled() || !m_store) return false;
  std::vector<store::VariantRecord> mine;
  if (auto list = m_store->variants_of(kernel)) {
    for (auto& vr : *list) {
      if (vr.arch != arch || vr.driver_major != driver_major) continue;
      bool withdrawn = vr.state == store::VariantState::disabled && vr.verdict == Fleet::k_withdrawn;
      if (vr.state == store::VariantState::verified || withdrawn) mine.push_back(std::move(vr));
    }
  }
  m_fleet->publish(kernel, arch, driver_major, mine);
  return true;
}

bool Optimizer::withdraw_from_fleet(const store::VariantRecord& variant, const std::string& what,
                                    const std::string& detail) {
  if (!m_fleet || !m_fleet->enabled()) return false;
  store::remote_object::Tombstone t;
  t.variant = variant.id;
  t.kernel = variant.kernel;
  t.arch = variant.arch;
  t.driver_major = variant.driver_major;
  t.when = now_s();
  t.reason = what + " on host " + host_name() + (detail.empty() ? "" : ": " + detail);
  t.host = host_name();
  spdlog::info("variant {} of {}: writing its tombstone to the fleet: {}", variant.id.hex(),
               variant.kernel.entry, t.reason);
  m_fleet->write_tombstone(t);
  m_watched.erase(variant.id);
  // Kept with the variant, so that the same tombstone can be written again after a restart.
  if (m_store) {
    if (auto r = m_store->get_variant(variant.id); r && *r) {
      store::VariantRecord rec = **r;
      json e = json::parse(rec.evidence_json, nullptr, false);
      if (!e.is_object()) e = json{{"evidence", rec.evidence_json}};
      e["fleet_tombstone"] = {{"reason", t.reason}, {"host", t.host}, {"when", t.when}};
      rec.evidence_json = e.dump(-1, ' ', false, json::error_handler_t::replace);
      if (auto w = m_store->put_variant(rec); !w) {
        spdlog::warn("variant {}: keeping its tombstone: {}", rec.id.hex(), w.error().message);
      }
    }
  }
  return true;
}

void Optimizer::rewrite_tombstones(const std::vector<store::VariantRecord>& all) {
  for (const auto& v : all) {
    if (v.state != store::VariantState::rejected && v.state != store::VariantState::disabled)
      continue;
    json e = json::parse(v.evidence_json, nullptr, false);
    if (e.is_object() && e.contains("fleet_tombstone") && e["fleet_tombstone"].is_object()) {
      // Written here or received: the same tombstone again, faithfully (its reason, host, time).
      // A received one only when its signature was checked: otherwise this host would sign, with
      // the fleet key, what anyone who can write the remote wrote unsigned (a host that does not
      // require signatures accepts such tombstones), and hosts that require signatures would
      // then accept it.
      const json& f = e["fleet_tombstone"];
      if (f.contains("remote") && !f.value("signed", false)) continue;
      store::remote_object::Tombstone t;
      t.variant = v.id;
      t.kernel = v.kernel;
      t.arch = v.arch;
      t.driver_major = v.driver_major;
      t.reason = f.value("reason", "");
      t.host = f.value("host", "");
      t.when = f.value("when", int64_t(0));
      if (!t.reason.empty()) m_fleet->write_tombstone(t);
    } else if (v.state == store::VariantState::rejected &&
               v.verdict.starts_with(k_shadow_withdrawn)) {
      // Withdrawn by this host's own shadow check before it wrote tombstones.
      withdraw_from_fleet(v, std::string(k_shadow_withdrawn), shadow_detail(v));
    }
  }
}

void Optimizer::serve_unless_tombstoned(const store::VariantRecord& rec, bool publish) {
  Fleet::Watched w{rec.kernel, rec.arch, rec.driver_major, rec.id};
  m_watched[rec.id] = w;
  m_awaiting_tombstone.insert(rec.id);
  m_fleet->check_tombstones({w}, [this, w, publish](std::vector<Fleet::Withdrawal> found) {
    for (const auto& t : found) apply_tombstone(t);
    m_awaiting_tombstone.erase(w.variant);
    if (publish) publish_to_fleet(w.kernel, w.arch, w.driver_major);
    push(w.kernel); // the best verified variant: this one, unless a tombstone named it
  });
}

void Optimizer::check_tombstones() {
  if (!m_fleet || !m_fleet->enabled() || !m_store) return;
  if (!m_watch_loaded) {
    // Once, at start: what this host verified or adopted before, to look up; and the tombstones
    // it knows (written here or received), written again (create-only: one already there stays),
    // so that a withdrawal survives a restart before its tombstone was written, or a tombstone
    // deleted from a remote.
    m_watch_loaded = true;
    if (auto all = m_store->variants()) {
      for (const auto& v : *all) {
        if (v.state == store::VariantState::verified) {
          m_watched[v.id] = Fleet::Watched{v.kernel, v.arch, v.driver_major, v.id};
        }
      }
      rewrite_tombstones(*all);
    }
  }
  const uint32_t every = m_config.store.remote.tombstone_interval_s;
  if (every == 0 || m_tombstone_check_busy) return;
  auto now = std::chrono::steady_clock::now();
  if (m_tombstones_checked_at != std::chrono::steady_clock::time_point{} &&
      now - m_tombstones_checked_at < std::chrono::seconds(every)) {
    return;
  }
  m_tombstones_checked_at = now;
  for (const auto& [conn, installed] : m_installed) {
    for (const auto& [key, id] : installed) {
      if (m_watched.count(id)) continue;
      if (auto r = m_store->get_variant(id); r && *r) {
        m_watched[id] = Fleet::Watched{(*r)->kernel, (*r)->arch, (*r)->driver_major, id};
      }
    }
  }
  std::vector<Fleet::Watched> list;
  for (auto it = m_watched.begin(); it != m_watched.end();) {
    auto r = m_store->get_variant(it->first);
    if (!r || !*r || (*r)->state != store::VariantState::verified) {
      it = m_watched.erase(it); // withdrawn, disabled or evicted since: nothing to look up
      continue;
    }
    list.push_back(it->second);
    ++it;
  }
  if (list.empty()) return;
  m_tombstone_check_busy = true;
  m_fleet->check_tombstones(std::move(list), [this](std::vector<Fleet::Withdrawal> found) {
    m_tombstone_check_busy = false;
    for (const auto& t : found) apply_tombstone(t);
  });
}

void Optimizer::apply_tombstone(const Fleet::Withdrawal& w) {
  if (!m_store) return;
  const store::remote_object::Tombstone& t = w.tombstone;
  m_watched.erase(t.variant);
  std::optional<store::VariantRecord> rec;
  if (auto r = m_store->get_variant(t.variant); r && *r) {
    rec = **r;
  } else if (w.record) {
    rec = *w.record; // a candidate from an object: kept here as withdrawn
  } else {
    return; // nothing of it here
  }
  // Already out of service for a reason of its own (withdrawn, or rejected by validation here).
  if (withdrawn_for_good(*rec) || rec->state == store::VariantState::rejected) return;
  const bool served = rec->state == store::VariantState::verified;
  const store::VariantState was = rec->state;
  rec->state = store::VariantState::rejected;
  rec->verdict = std::string(Fleet::k_tombstoned) + t.reason;
  json e = json::parse(rec->evidence_json, nullptr, false);
  if (!e.is_object()) e = json{{"evidence", rec->evidence_json}};
  e["fleet_tombstone"] = {{"reason", t.reason},
                          {"host", t.host},
                          {"when", t.when},
                          {"remote", w.remote},
                          {"signed", w.signed_by_fleet},
                          {"seen", now_s()}};
  rec->evidence_json = e.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!rec->created) rec->created = now_s();
  if (auto r = m_store->put_variant(*rec); !r) {
    spdlog::error("variant {}: recording its withdrawal from the fleet failed: {}", t.variant.hex(),
                  r.error().message);
    return;
  }
  if (!served) {
    spdlog::info("variant {} of {} ({}) has a tombstone in {}: recorded as withdrawn: {}",
                 t.variant.hex(), rec->kernel.entry, store::to_string(was), w.remote, t.reason);
    return;
  }
  m_fleet->count_withdrawal();
  if (m_awaiting_tombstone.count(t.variant)) {
    spdlog::error("variant {} of {}, verified here, never serves: a tombstone in {} says: {} "
                  "(written at {} by {})",
                  t.variant.hex(), rec->kernel.entry, w.remote, t.reason, t.when, t.host);
  } else {
    spdlog::error("variant {} of {} withdrawn from every process: a tombstone in {} says: {} "
                  "(written at {} by {})",
                  t.variant.hex(), rec->kernel.entry, w.remote, t.reason, t.when, t.host);
  }
  m_pushed_speedup.erase(t.variant);
  settle_kernel_state(rec->kernel);
  // Every process at once; the next best verified variant, if any, takes its place.
  kernel_switched(rec->kernel);
}

bool Optimizer::fleet_first(const KernelKey& key, KernelInfo& k, Work& w) {
  using FS = Work::FleetState;
  if (!m_fleet || !m_fleet->enabled() || !m_store || w.fleet == FS::done) return false;
  if (w.fleet != FS::unknown) return true;
  // What this kernel runs on: the first process running it.
  const auto& procs = m_registry.processes();
  auto p = procs.find(*k.processes.begin());
  if (p == procs.end()) return false;
  if (p->second.hello.arch.empty()) return true; // its device is not known yet: ask later
  w.fleet = FS::looking;
  std::string arch = p->second.hello.arch;
  uint32_t major = driver_major(p->second.hello.driver_version);
  m_fleet->lookup(key, arch, major, [this, key](Fleet::Found found) {
    Work& w = m_work[key];
    // Withdrawn by an operator: kept here as such (never adopted, and published as withdrawn
    // with this host's own variants), unless this host verified the variant itself.
    for (auto& v : found.withdrawn) {
      auto old = m_store->get_variant(v.id);
      if (old && *old && (*old)->state != store::VariantState::imported) continue;
      v.verdict = Fleet::k_withdrawn;
      v.created = now_s();
      if (auto r = m_store->put_variant(v); !r) {
        spdlog::error("{}: storing a withdrawn variant: {}", key.entry, r.error().message);
      }
    }
    // Named by a tombstone: recorded as withdrawn (never adopted, never published as verified).
    for (const auto& t : found.tombstoned) apply_tombstone(t);
    size_t pending = 0;
    for (auto& v : found.candidates) {
      auto old = m_store->get_variant(v.id);
      if (old && *old) {
        pending += (*old)->state == store::VariantState::imported;
        continue; // known here already: verified, rejected or waiting
      }
      v.created = now_s();
      if (auto r = m_store->put_variant(v); !r) {
        spdlog::error("{}: storing a candidate from the fleet: {}", key.entry, r.error().message);
        continue;
      }
      ++pending;
    }
    if (pending == 0) {
      w.fleet = Work::FleetState::done;
      advance_soon();
      return;
    }
    w.fleet = Work::FleetState::adopted;
    w.fleet_from = found.remote;
    spdlog::info("{}: {} candidate(s) from the fleet ({}): validated here before they serve; the "
                 "strategies wait",
                 key.entry, pending, found.remote);
    revalidate_imports();
  });
  return true;
}

void Optimizer::fleet_settled(const JobEntry& job, bool verified) {
  auto it = m_work.find(job.kernel);
  if (it == m_work.end() || it->second.fleet != Work::FleetState::adopted) return;
  Work& w = it->second;
  KernelInfo* k = m_registry.kernel(job.kernel);
  if (verified) {
    // Adopted: this host's own validation proved it, so the search is not run again here
    // (honectl retry runs one strategy on demand).
    if (k) {
      for (const auto& s : m_strategies) {
        if (std::find(k->record.tried.begin(), k->record.tried.end(), s->id()) !=
            k->record.tried.end()) {
          continue;
        }
        k->record.tried.push_back(s->id());
        k->skipped[s->id()] = "not run: a variant from the fleet (" + w.fleet_from +
                              ") was verified here";
      }
      k->dirty = true;
    }
    spdlog::info("{}: adopted from the fleet ({}) after validation here", job.kernel.entry,
                 w.fleet_from);
    w.fleet = Work::FleetState::done;
    return;
  }
  bool more = std::any_of(m_jobs.begin(), m_jobs.end(), [&](const auto& j) {
    return j.second.kernel == job.kernel && j.second.revalidates && j.second.state != JobState::done;
  });
  if (!more) {
    spdlog::info("{}: the fleet's candidates failed validation here; the strategies run",
                 job.kernel.entry);
    w.fleet = Work::FleetState::done;
    advance_soon();
  }
}

void Optimizer::revalidate_imports() {
  if (!m_store) return;
  for (const auto& [conn, p] : m_registry.processes()) {
    for (const auto& [id, seen] : p.kernels) {
      auto list = m_store->variants_of(seen.key);
      if (!list) continue;
      for (const auto& v : *list) {
        if (v.state != store::VariantState::imported || v.arch != p.hello.arch) continue;
        bool queued = std::any_of(m_jobs.begin(), m_jobs.end(),
                                  [&](const auto& j) { return j.second.revalidates == v.id; });
        if (queued) continue;
        agent::Candidate c;
        c.strategy = v.strategy;
        c.description = "re-validation of variant " + v.id.hex() + " imported from another host";
        c.kind = v.format == proto::ImageFormat::cubin ? CandidateKind::cubin : CandidateKind::ptx;
        c.code = v.image;
        c.entry = v.entry;
        c.jit_options = v.jit_options;
        c.guard = v.guard;
        auto job = submit(seen.key, std::move(c));
        if (job) m_jobs[*job].revalidates = v.id;
      }
    }
  }
}

// ---- status ------------------------------------------------------------------------------------

std::optional<json> Optimizer::job_json(uint64_t id) const {
  auto it = m_jobs.find(id);
  if (it == m_jobs.end()) return std::nullopt;
  const JobEntry& j = it->second;
  json out{{"id", j.id},
           {"kernel", j.kernel.str()},
           {"strategy", j.candidate.strategy},
           {"description", j.candidate.description},
           // a running job is `queued` until the worker has it
           {"state", j.state == JobState::running && m_workers->current() != j.id
                         ? "queued"
                         : state_name(int(j.state))},
           {"created", j.created},
           {"finished", j.finished}};
  if (j.verdict) {
    out["verdict"] = to_string(j.verdict->kind);
    out["message"] = j.verdict->message;
    out["speedup"] = j.verdict->speedup;
    out["noise"] = j.verdict->noise;
    out["original_ns"] = j.verdict->original_ns;
    out["candidate_ns"] = j.verdict->candidate_ns;
    out["captures_used"] = j.verdict->captures_used;
  }
  if (j.variant) out["variant"] = j.variant->hex();
  // A strategy's check (Job::check): its `verified` means compiled, or correct on a capture.
  if (j.candidate.check == JobCheck::compile) out["check"] = "compile";
  if (j.candidate.check == JobCheck::validate) out["check"] = "validate";
  return out;
}

json Optimizer::jobs_json() const {
  json list = json::array();
  for (const auto& [id, j] : m_jobs) list.push_back(*job_json(id));
  return list;
}

json Optimizer::workers_json() const {
  return json{{"busy", m_workers->busy()},
              {"paused", m_workers->paused()},
              {"gpu_load", m_load},
              {"gpu_share", m_config.optimizer.gpu_share},
              {"busy_seconds", m_workers->busy_seconds()},
              {"active_seconds", m_workers->active_seconds()},
              {"queued", m_workers->queued()},
              {"started", m_workers->workers_started()},
              {"lost", m_workers->workers_lost()},
              {"crashed", m_workers->workers_crashed()},
              {"capture_bytes", m_capture_bytes},
              {"capture_bytes_shared", m_capture_bytes_shared}};
}

} // namespace hone::daemon
