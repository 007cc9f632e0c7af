#include "daemon/worker/job_run.hpp"

#include "common/cheats.hpp"

#include "daemon/worker/bench.hpp"
#include "daemon/worker/candidate_checks.hpp"
#include "daemon/worker/capture_check.hpp"
#include "daemon/worker/compile.hpp"
#include "daemon/worker/original_memo.hpp"
#include "ptx/parser.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

namespace hone::worker {

namespace {

using nlohmann::json;

// Schedule seeds for the two runs of each side: fixed per kernel, so a verdict can be reproduced
// and every candidate for a kernel meets the same schedules, under which the original's runs are
// kept for the next job (OriginalMemo).
uint64_t seed_for(const KernelKey& kernel, uint64_t k) {
  uint64_t x = kernel.image.lo ^ (kernel.image.hi * 0x9E3779B97F4A7C15ull) ^
               std::hash<std::string>{}(kernel.entry);
  x = x * 0x9E3779B97F4A7C15ull + k * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86693A6B5ull;
  x ^= x >> 29;
  return (x & 0x7FFFFFFF) + 1; // positive and non-zero: 0 means "no seed"
}

std::string layout_text(const std::vector<ParamSlot>& l) {
  std::string s = std::to_string(l.size()) + " parameter" + (l.size() == 1 ? "" : "s") + " [";
  for (size_t i = 0; i < l.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(l[i].offset) + ":" + std::to_string(l[i].size);
  }
  return s + "]";
}

std::string ns_text(double ns) {
  char buf[64];
  if (ns >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3f ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f us", ns / 1e3);
  }
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Would the candidate serve this launch? The shim checks the same guard on every launch
// (shim/hooks_launch.cpp): a capture it fails is one the candidate never has to match.
// Why capture `c` is not a launch the guard `g` lets the candidate serve; nullopt when it is.
std::optional<std::string> guard_refuses(const Guard& g, const Capture& c) {
  auto shape = [](const std::array<uint32_t, 3>& b) {
    return std::to_string(b[0]) + "x" + std::to_string(b[1]) + "x" + std::to_string(b[2]);
  };
  for (size_t d = 0; d < 3; ++d) {
    if (g.block[d] && g.block[d] != c.block[d]) {
      return "its block is " + shape(c.block) + ", the candidate is for " + shape(g.block);
    }
  }
  if (g.reshape_block) {
    std::array<uint32_t, 3> grid, block;
    if (!reshaped(g, c.grid.data(), c.block.data(), grid.data(), block.data())) {
      return "its launch (grid " + shape(c.grid) + ", block " + shape(c.block) +
             ") cannot run as blocks of " + std::to_string(g.reshape_block) +
             " threads with the same thread count";
    }
  }
  for (const auto& s : g.scalars) {
    if (s.param >= c.params.size() || s.bytes.size() > c.params[s.param].size ||
        c.param_bytes.compare(c.params[s.param].offset, s.bytes.size(), s.bytes) != 0) {
      return "parameter " + std::to_string(s.param) +
             " is not the value the candidate was specialized for";
    }
  }
  if (g.no_alias) {
    for (size_t i = 0; i < c.buffers.size(); ++i) {
      for (size_t j = i + 1; j < c.buffers.size(); ++j) {
        if (c.buffers[i].base == c.buffers[j].base) {
          return "parameters " + std::to_string(c.buffers[i].param) + " and " +
                 std::to_string(c.buffers[j].param) +
                 " point into the same buffer, and the candidate needs them apart";
        }
      }
    }
  }
  return std::nullopt;
}

// The original's PTX analysis, when it has PTX and the PTX parses.
std::optional<ptx::EntryInfo> analyze_original(const std::string& ptx_text,
                                               const std::string& entry) {
  if (ptx_text.empty()) return std::nullopt;
  auto module = ptx::parse(ptx_text, "original");
  if (!module) return std::nullopt;
  const ptx::Function* f = module->function(entry);
  if (!f) return std::nullopt;
  return ptx::analyze_entry(*module, *f);
}

class JobRun {
public:
  JobRun(Device& d, const Bundle& b, Watchdog* w, OriginalMemo* memo)
      : m_device(d), m_bundle(b), m_job(b.job), m_watchdog(w), m_memo(memo) {
    m_verdict.job = m_job.id;
    m_verdict.comparison = m_job.comparison;
    m_evidence =
        json{{"schema", "hone.evidence/1"},
             {"device", d.name()},
             {"arch", d.arch()},
             {"driver_version", d.driver_version()},
             {"comparison", m_job.comparison == Comparison::tolerance ? "tolerance" : "bitwise"},
             {"captures", json::array()},
             {"original_nondeterministic_buffers", json::array()},
             {"seeds", json::array()}};
  }

  JobOutcome run() {
    if (auto f = go()) return finish(*f);
    return finish({});
  }

private:
  std::optional<Failure> go();
  std::optional<Failure> shadow(CUfunction original);
  std::optional<Failure> validate_all(uint64_t seed1, uint64_t seed2, bool record);
  // The captures' perturbed copies, left by validation for after the timing
  // (CaptureCheck::perturbed_last).
  std::optional<Failure> perturbed_last();
  JobOutcome finish(std::optional<Failure> f);
  void record_measurement(const Measurement& m, const char* key);
  void record_profile(const Capture& capture, const Measurement& m);
  // The verdict of a compile check: it compiled, loaded and takes the original's parameters.
  std::optional<Failure> compiled(CUfunction fn, const std::vector<ParamSlot>& layout,
                                  const std::string& log);

  Device& m_device;
  const Bundle& m_bundle;
  const Job& m_job;
  Watchdog* m_watchdog;
  OriginalMemo* m_memo;
  Verdict m_verdict;
  json m_evidence;
  std::optional<ptx::EntryInfo> m_entry;
  Kernels m_kernels;
  RunClock m_clock;
  std::vector<std::unique_ptr<CaptureCheck>> m_checks;
  size_t m_bench_capture = 0; // the capture the benchmark runs on (the first usable one)
  bool m_tolerance_used = false;
  bool m_context_lost_after = false; // the original faulted on a perturbed copy of a capture
};

std::optional<Failure> JobRun::go() {
  // 1. The original, as the application loaded it, and the candidate.
  auto original = load_original(m_device, m_job);
  if (!original) {
    return Failure{VerdictKind::internal,
                   "the original image does not load here: " + original.error().message};
  }
  auto ofn = original->module.function(m_job.original_entry);
  if (!ofn) return Failure{VerdictKind::internal, "the original image: " + ofn.error().message};
  m_entry = analyze_original(original->ptx.empty() ? m_job.original_ptx : original->ptx,
                             m_job.original_entry);
  if (m_job.shadow_check) return shadow(*ofn);

  auto candidate = load_candidate(m_device, m_job);
  if (!candidate) return Failure{VerdictKind::compile_error, candidate.error().message};
  // What serves, if this candidate is verified, is the PTX NVRTC made here, not the source.
  if (m_job.kind == CandidateKind::cuda) m_verdict.compiled_ptx = candidate->ptx;
  auto cfn = candidate->module.function(m_job.candidate_entry);
  if (!cfn) return Failure{VerdictKind::load_error, "the candidate: " + cfn.error().message};
  m_kernels = {*ofn, *cfn};

  auto lo = m_device.param_layout(*ofn);
  if (!lo) return Failure{VerdictKind::internal, lo.error().message};
  auto lc = m_device.param_layout(*cfn);
  if (!lc) return Failure{VerdictKind::internal, lc.error().message};
  if (*lo != *lc) {
    return Failure{VerdictKind::load_error, "parameters differ: the original takes " +
                                                layout_text(*lo) + ", the candidate " +
                                                layout_text(*lc) + " (offset:size)"};
  }
  if (m_job.static_checks) {
    // What the candidate's PTX alone refuses (candidate_checks.hpp); a cubin has no PTX.
    auto c = analyze_original(candidate->ptx, m_job.candidate_entry);
    if (c && m_entry) {
      if (auto f = check_candidate(*m_entry, *c)) return f;
    } else if (c && original->ptx.empty() && m_job.original_ptx.empty()) {
      // SASS only: nothing says what the original waits for.
      if (auto f = check_candidate_of_unknown(*c)) return f;
    }
  }
  if (m_job.check == JobCheck::compile) return compiled(*cfn, *lc, candidate->log);

  // Only captures that hold what they should, laid out as the kernel's parameters are.
  std::vector<size_t> usable;
  size_t outside_guard = 0, incomplete = 0;
  std::string guard_reason, incomplete_reason;
  for (size_t i = 0; i < m_job.captures.size(); ++i) {
    const Capture& c = m_job.captures[i];
    if (c.status != CaptureStatus::ok) {
      if (incomplete++ == 0) {
        incomplete_reason = "capture " + std::to_string(i) + ": " +
                            (c.reason.empty() ? "not taken completely" : c.reason);
      }
      continue;
    }
    if (auto why = guard_refuses(m_job.guard, c)) {
      if (outside_guard++ == 0) guard_reason = "capture " + std::to_string(i) + ": " + *why;
      continue;
    }
    if (c.params != *lo) {
      return Failure{VerdictKind::internal, "capture " + std::to_string(i) +
                                                " does not match the original kernel: it has " +
                                                layout_text(c.params) + ", the kernel " +
                                                layout_text(*lo)};
    }
    usable.push_back(i);
  }
  m_evidence["captures_outside_guard"] = outside_guard;
  if (usable.empty()) {
    // Not hone's fault: the candidate does not apply to the launches the application made (its
    // guard), or the process could not capture them (it says why).
    if (outside_guard > 0) {
      return Failure{VerdictKind::not_applicable,
                     "no capture passes the candidate's guard (" +
                         std::to_string(outside_guard) + " of " +
                         std::to_string(m_job.captures.size()) + " fail it; " + guard_reason + ")"};
    }
    return Failure{VerdictKind::unsupported,
                   "no usable capture: the process could not capture the launches (" +
                       std::to_string(incomplete) + " of " + std::to_string(m_job.captures.size()) +
                       "; " + incomplete_reason + ")"};
  }
  m_bench_capture = usable.front();
  const ptx::EntryInfo* entry = m_entry ? &*m_entry : nullptr;
  // PTX reads %globaltimer only by naming it; a cubin may read it anywhere.
  const bool reads_timer =
      candidate->ptx.empty() || candidate->ptx.find("%globaltimer") != std::string::npos;
  for (size_t i : usable) {
    m_checks.push_back(std::make_unique<CaptureCheck>(m_device, m_job, i, m_bundle.capture_data[i],
                                                      entry, m_kernels, m_watchdog, &m_clock));
    m_checks.back()->use_memo(m_memo);
    m_checks.back()->candidate_reads_timer(reads_timer);
  }

  // 2-3. Validation on every capture.
  uint64_t s1 = seed_for(m_job.kernel, 1), s2 = seed_for(m_job.kernel, 2);
  m_evidence["seeds"] = {s1, s2};
  if (auto f = validate_all(s1, s2, true)) return f;
  m_verdict.captures_used = uint32_t(m_checks.size());
  if (m_job.check == JobCheck::validate) {
    if (auto f = perturbed_last()) return f;
    m_evidence["check"] = "validate";
    m_verdict.kind = VerdictKind::verified;
    m_verdict.message = "check: correct on " + std::to_string(m_checks.size()) + " capture" +
                        (m_checks.size() == 1 ? "" : "s") +
                        (m_tolerance_used ? " (within tolerance)" : " (bitwise)") + "; not timed";
    return std::nullopt;
  }

  // 4. The benchmark, on the first capture.
  auto bench = [&]() -> std::variant<Measurement, Failure> {
    CaptureCheck& first = *m_checks.front();
    if (auto f = first.prepare()) return *f;
    auto m = measure(first, m_job.bench);
    if (auto* ok = std::get_if<Measurement>(&m)) {
      // Outputs are checked again after the timed runs, not only before them.
      if (auto f = first.recheck(s1, ok->original_ns.size() + m_job.bench.warmup)) {
        first.release();
        return *f;
      }
    }
    first.release();
    return m;
  };
  auto measured = bench();
  if (auto* f = std::get_if<Failure>(&measured)) return *f;
  Measurement m = std::get<Measurement>(measured);
  record_measurement(m, "times_ns");
  m_evidence["l2_flushed_between_runs"] = m_checks.front()->l2_flushed();

  if (m.speedup > m_job.bench.suspicious) {
    // Too good to take on one look: validate everything again under fresh schedules, and measure
    // again.
    m_evidence["revalidated"] = true;
    uint64_t s3 = seed_for(m_job.kernel, 3), s4 = seed_for(m_job.kernel, 4);
    m_evidence["seeds"].push_back(s3);
    m_evidence["seeds"].push_back(s4);
    std::string first = fixed(m.speedup, 2) + "x";
    if (auto f = validate_all(s3, s4, false)) {
      if (f->context_lost) return f;
      return Failure{VerdictKind::suspicious,
                     "a speedup of " + first + " did not survive re-validation: " + f->message};
    }
    auto again = bench();
    if (auto* f = std::get_if<Failure>(&again)) {
      if (f->context_lost) return *f;
      return Failure{VerdictKind::suspicious,
                     "a speedup of " + first + " did not survive re-measuring: " + f->message};
    }
    Measurement m2 = std::get<Measurement>(again);
    record_measurement(m2, "times_ns_recheck");
    bool holds =
        accepted(m2, m_job.bench) && m2.speedup >= m.speedup / 2 && m2.speedup <= m.speedup * 2;
    m = m2;
    if (!holds) {
      return Failure{VerdictKind::suspicious, "a speedup of " + first +
                                                  " did not hold when measured again (" +
                                                  fixed(m2.speedup, 2) + "x)"};
    }
  }

  record_profile(m_job.captures[m_bench_capture], m);
  if (auto f = perturbed_last()) return f;

  // 5. The verdict.
  std::string numbers = fixed(m.speedup, 2) + "x (median " + ns_text(m.original_median) + " -> " +
                        ns_text(m.candidate_median) + ", noise " + fixed(m.noise * 100, 1) + "%, " +
                        std::to_string(m.original_ns.size()) + " runs each)";
  if (!accepted(m, m_job.bench)) {
    return Failure{VerdictKind::not_faster,
                   "correct on " + std::to_string(m_checks.size()) + " capture" +
                       (m_checks.size() == 1 ? "" : "s") + ", but not faster: " + numbers +
                       "; needs at least " + fixed(m_job.bench.min_speedup, 2) +
                       "x and more than " + fixed(m_job.bench.noise_factor, 1) +
                       " times the noise"};
  }
  m_verdict.kind = VerdictKind::verified;
  m_verdict.message = "verified on " + std::to_string(m_checks.size()) + " capture" +
                      (m_checks.size() == 1 ? "" : "s") +
                      (m_tolerance_used ? " (within tolerance)" : " (bitwise)") + ", " + numbers;
  return std::nullopt;
}

std::optional<Failure> JobRun::compiled(CUfunction fn, const std::vector<ParamSlot>& layout,
                                        const std::string& log) {
  m_evidence["check"] = "compile";
  LaunchShape shape;
  if (!m_job.captures.empty()) {
    const Capture& c = m_job.captures.front();
    shape = {c.grid, c.block, c.shared_bytes};
  }
  KernelProfile p = m_device.profile(fn, shape);
  std::string text = "check: compiled and loaded; it takes the original's " + layout_text(layout) +
                     " (offset:size)";
  std::string resources;
  auto add = [&](int v, const char* what) {
    if (v < 0) return;
    resources += (resources.empty() ? "" : ", ") + std::to_string(v) + what;
  };
  add(p.registers, " registers");
  add(p.local_bytes, " B local memory per thread");
  add(p.static_shared_bytes, " B static shared memory");
  if (p.blocks_per_sm >= 0 && p.max_warps_per_sm > 0) {
    resources += (resources.empty() ? "" : ", ") +
                 std::to_string(p.blocks_per_sm * p.warps_per_block) + " of " +
                 std::to_string(p.max_warps_per_sm) + " warps per SM at the captured block";
  }
  if (!resources.empty()) text += "; " + resources;
  if (!log.empty()) text += "\n" + log;
  m_verdict.kind = VerdictKind::verified;
  m_verdict.message = std::move(text);
  return std::nullopt;
}

// A shadow check: the original on each capture of a served launch, against what the variant left.
std::optional<Failure> JobRun::shadow(CUfunction original) {
  m_evidence["shadow_check"] = true;
  const ptx::EntryInfo* entry = m_entry ? &*m_entry : nullptr;
  uint64_t s1 = seed_for(m_job.kernel, 1), s2 = seed_for(m_job.kernel, 2);
  m_evidence["seeds"] = {s1, s2};
  size_t checked = 0;
  for (size_t i = 0; i < m_job.captures.size(); ++i) {
    if (m_job.captures[i].status != CaptureStatus::ok) continue;
    CaptureCheck check(m_device, m_job, i, m_bundle.capture_data[i], entry, {original, nullptr},
                       m_watchdog, &m_clock);
    auto f = check.shadow(s1, s2);
    m_evidence["captures"].push_back(check.evidence());
    if (f) return f;
    ++checked;
  }
  if (!checked) return Failure{VerdictKind::internal, "the shadow check has no usable capture"};
  m_verdict.kind = VerdictKind::verified;
  m_verdict.captures_used = uint32_t(checked);
  m_verdict.message = "shadow check: on " + std::to_string(checked) + " launch" +
                      (checked == 1 ? "" : "es") +
                      " the variant served, its outputs equal the original's on the same inputs";
  return std::nullopt;
}

std::optional<Failure> JobRun::validate_all(uint64_t seed1, uint64_t seed2, bool record) {
  for (auto& check : m_checks) {
    auto f = check->validate(seed1, seed2);
    if (record) {
      m_evidence["captures"].push_back(check->evidence());
      for (auto& n : check->nondeterministic())
        m_evidence["original_nondeterministic_buffers"].push_back(n);
      m_tolerance_used = m_tolerance_used || check->used_tolerance();
    }
    if (f) return f;
  }
  return std::nullopt;
}

std::optional<Failure> JobRun::perturbed_last() {
  for (size_t k = 0; k < m_checks.size(); ++k) {
    if (!m_checks[k]->perturbed_pending()) continue;
    auto f = m_checks[k]->perturbed_last();
    if (k < m_evidence["captures"].size()) {
      json& c = m_evidence["captures"][k];
      if (!m_checks[k]->perturbed().empty()) c["perturbed"] = m_checks[k]->perturbed();
      c["runs"] = c.value("runs", 0u) + m_checks[k]->perturbed_runs();
    }
    if (f) return f;
    if (m_checks[k]->lost_context_on_perturbed()) {
      m_context_lost_after = true;
      break;
    }
  }
  return std::nullopt;
}

void JobRun::record_measurement(const Measurement& m, const char* key) {
  m_verdict.original_ns = m.original_median;
  m_verdict.candidate_ns = m.candidate_median;
  m_verdict.speedup = m.speedup;
  m_verdict.noise = m.noise;
  m_evidence["runs"] = m.original_ns.size();
  m_evidence["runs_max"] = m_job.bench.runs;
  m_evidence["stopped_early"] = m.original_ns.size() < m_job.bench.runs;
  m_evidence["warmup"] = m_job.bench.warmup;
  // Events measure in float milliseconds: a thousandth of a nanosecond says all they know.
  auto rounded = [](const std::vector<double>& v) {
    json out = json::array();
    for (double x : v) out.push_back(std::round(x * 1000) / 1000);
    return out;
  };
  m_evidence[key] = {{"original", rounded(m.original_ns)}, {"candidate", rounded(m.candidate_ns)}};
}

// What bounds the original and the candidate on the benchmark's capture, for the verdict's reader
// (the LLM strategy's feedback): the driver's account of each kernel and, on the emulated device,
// the cost model's of its last launch there (the recheck after the timed runs).
void JobRun::record_profile(const Capture& capture, const Measurement& m) {
  LaunchShape shape{capture.grid, capture.block, capture.shared_bytes};
  // Bytes the launch's buffers hold, each allocation once: what a kernel that reads or writes all
  // of them once moves at least.
  std::vector<std::pair<uint64_t, uint64_t>> allocations;
  for (const auto& b : capture.buffers) allocations.emplace_back(b.base, b.size);
  std::sort(allocations.begin(), allocations.end());
  allocations.erase(std::unique(allocations.begin(), allocations.end()), allocations.end());
  uint64_t buffer_bytes = 0;
  for (const auto& a : allocations) buffer_bytes += a.second;

  bool modeled = false;
  LaunchShape candidate_shape = shape; // a reshaping candidate's occupancy is its own shape's
  reshaped(m_job.guard, shape.grid.data(), shape.block.data(), candidate_shape.grid.data(),
           candidate_shape.block.data());
  auto side = [&](CUfunction fn, double ns) {
    KernelProfile p = m_device.profile(fn, fn == m_kernels.candidate ? candidate_shape : shape);
    json j = {{"ns", std::round(ns)}};
    auto put = [&](const char* key, int v) {
      if (v >= 0) j[key] = v;
    };
    put("registers", p.registers);
    put("local_bytes", p.local_bytes);
    put("static_shared_bytes", p.static_shared_bytes);
    put("blocks_per_sm", p.blocks_per_sm);
    if (p.blocks_per_sm >= 0) j["warps_per_sm"] = p.blocks_per_sm * p.warps_per_block;
    put("max_warps_per_sm", p.max_warps_per_sm);
    if (const auto& c = p.modeled) {
      modeled = true;
      j["bound"] = std::string(c->bound, strnlen(c->bound, sizeof c->bound));
      j["occupancy_limit"] =
          std::string(c->occupancy_limit, strnlen(c->occupancy_limit, sizeof c->occupancy_limit));
      j["warps_per_sm"] = c->warps_per_sm;
      j["waves"] = c->waves;
      j["modeled_ns"] = c->modeled_ns;
      j["terms_ns"] = {{"issue", c->issue_ns},
                       {"latency", c->latency_ns},
                       {"L1", c->l1_ns},
                       {"L2", c->l2_ns},
                       {"DRAM", c->dram_ns}};
      j["dram_bytes"] = c->dram_bytes;
      j["l2_bytes"] = c->l2_bytes;
      j["dram_bytes_per_s_peak"] = c->dram_bytes_per_s;
    }
    return j;
  };
  json profile = {{"capture", m_bench_capture},
                  {"buffer_bytes", buffer_bytes},
                  {"original", side(m_kernels.original, m.original_median)},
                  {"candidate", side(m_kernels.candidate, m.candidate_median)}};
  profile["source"] = modeled ? "emulated device cost model" : "driver";
  if (!modeled) {
    if (double peak = m_device.dram_peak_bytes_per_s(); peak > 0) {
      profile["dram_bytes_per_s_peak"] = std::round(peak);
    }
  }
  m_evidence["profile"] = std::move(profile);
}

JobOutcome JobRun::finish(std::optional<Failure> f) {
  JobOutcome out;
  if (f) {
    m_verdict.kind = f->kind;
    m_verdict.message = std::move(f->message);
    out.context_lost = f->context_lost;
    if (f->bounded_unusable) m_evidence["capture_unusable"] = "bounded";
    if (const CheatPattern* p = cheat_pattern(f->pattern)) {
      m_evidence["pattern"] = p->id;
      m_verdict.message += " [pattern " + std::string(p->id) + ": " + std::string(p->title) + "]";
    }
  }
  if (m_context_lost_after) {
    out.context_lost = true;
    m_evidence["context_lost_after"] =
        "the original faulted on a perturbed copy of a capture, the job's last step";
  }
  if (m_tolerance_used) m_verdict.comparison = Comparison::tolerance;
  // Shared and local memory before each validation run: the emulated device's fill seed, a
  // scrub kernel on a GPU, or neither (and why).
  if (m_device.emulated()) {
    m_evidence["memory_scrub"] = "fill seed (emulated device)";
  } else if (!m_job.gpu_scrub) {
    m_evidence["memory_scrub"] = "off ([validation] gpu_scrub = false)";
  } else if (std::any_of(m_checks.begin(), m_checks.end(),
                         [](const auto& c) { return c->scrubbed(); })) {
    m_evidence["memory_scrub"] = "scrub kernel";
  } else if (!m_checks.empty()) {
    m_evidence["memory_scrub"] = "none: " + m_device.scrub_unavailable();
  }
  m_evidence["comparison"] =
      m_verdict.comparison == Comparison::tolerance ? "tolerance" : "bitwise";
  m_evidence["verdict"] = to_string(m_verdict.kind);
  // The verdict frame holds at most 1 MiB of evidence and 256 KiB of message.
  std::string text = m_evidence.dump();
  if (text.size() > (1u << 20) - 1024) {
    size_t n = m_evidence["captures"].size();
    m_evidence["captures"] = json::array();
    m_evidence["captures_truncated"] = n;
    text = m_evidence.dump();
    if (text.size() > (1u << 20) - 1024)
      text = json{{"schema", "hone.evidence/1"}, {"truncated", true}}.dump();
  }
  m_verdict.evidence_json = std::move(text);
  constexpr size_t k_max_message = 200u << 10;
  if (m_verdict.message.size() > k_max_message) {
    m_verdict.message.resize(k_max_message);
    m_verdict.message += "\n[truncated]";
  }
  out.verdict = std::move(m_verdict);
  return out;
}

} // namespace

JobOutcome run_job(Device& device, const Bundle& bundle, Watchdog* watchdog, OriginalMemo* memo) {
  JobRun run(device, bundle, watchdog, memo);
  return run.run();
}

} // namespace hone::worker
