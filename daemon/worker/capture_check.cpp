#include "daemon/worker/capture_check.hpp"

#include "daemon/worker/original_memo.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

namespace hone::worker {

namespace {

// The emulated device varies its block and warp order by this seed, read at every launch, so a
// race shows up as two different results; a real driver ignores it.
constexpr const char* k_seed_env = "HONE_EMU_SCHEDULE_SEED";
// And fills each block's shared memory and each thread's local memory with garbage from this seed
// (the schedule seed, unless a diagnosis asks for another): a candidate that reads memory it never
// wrote gives different results. A real driver ignores it.
constexpr const char* k_fill_env = "HONE_EMU_FILL_SEED";
// And counts %globaltimer from this epoch (ns since the Unix epoch), set for every run
// (CaptureCheck::epoch_for): a result keyed on the date differs between runs. A real driver
// ignores it.
constexpr const char* k_epoch_env = "HONE_EMU_GLOBALTIMER_EPOCH";
// The other schedules' epochs: the present plus 2^62 ns (146 years) plus up to 2^60 (36 years),
// below 2^63 until about 2079, so that a signed comparison with a date sees a late one too.
constexpr uint64_t k_later = 1ull << 62;
constexpr uint64_t k_later_spread = 1ull << 60;
// A fill seed no schedule seed gives (schedule seeds are below 2^31).
constexpr uint64_t k_other_fill = 0xF111'5EEDull << 32;
// The guard zones' second pattern (every byte flipped in 7 bits).
constexpr uint8_t k_other_guard = 0x7F;

void set_seed(const char* name, uint64_t v) {
  if (v) {
    ::setenv(name, std::to_string(v).c_str(), 1);
  } else {
    ::unsetenv(name);
  }
}

// More schedules the original gets before a difference is blamed on the candidate.
constexpr uint64_t k_probe_runs = 6;

// Whatever validate() or shadow() placed is released when it returns.
struct ReleaseAtExit {
  CaptureCheck* self;
  ~ReleaseAtExit() { self->release(); }
};

uint64_t load_u64(std::string_view s, uint64_t at) {
  uint64_t v = 0;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}

std::string signed_offset_text(int64_t off, uint64_t size) {
  if (off < 0) return std::to_string(-off) + " bytes before the start of";
  return std::to_string(uint64_t(off) - size) + " bytes past the end of";
}

} // namespace

CaptureCheck::CaptureCheck(Device& device, const Job& job, size_t index, std::string_view data,
                           const ptx::EntryInfo* entry, Kernels kernels, Watchdog* watchdog,
                           RunClock* clock)
    : m_device(device), m_job(job), m_capture(job.captures[index]), m_index(index), m_data(data),
      m_entry(entry), m_kernels(kernels), m_watchdog(watchdog), m_clock(clock) {
  m_present_ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
  for (const auto& b : m_capture.buffers) m_bounded = m_bounded || b.bounded;
  m_shape.grid = m_capture.grid;
  m_shape.block = m_capture.block;
  m_shape.shared_bytes = m_capture.shared_bytes;
  // A candidate that reshapes its launches runs with its own block size (the job refuses captures
  // it cannot reshape before any check starts: JobRun, guard_refuses).
  m_candidate_shape = m_shape;
  reshaped(job.guard, m_shape.grid.data(), m_shape.block.data(), m_candidate_shape.grid.data(),
           m_candidate_shape.block.data());
}

uint64_t CaptureCheck::epoch_for(uint64_t seed) const {
  if (seed == m_first_seed) return m_present_ns;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  return m_present_ns + k_later + x % k_later_spread;
}

std::string CaptureCheck::param_name(uint32_t param) const {
  std::string s = "parameter " + std::to_string(param);
  if (m_entry && param < m_entry->params.size()) s += " (" + m_entry->params[param].name + ")";
  return s;
}

std::string CaptureCheck::name(size_t a) const {
  const auto& b = m_capture.buffers[m_allocs[a].buffers.front()];
  std::string s = param_name(b.param);
  if (b.field) s += " field +" + std::to_string(b.field);
  return s;
}

Failure CaptureCheck::launch_failure(Who who, const Error& e) const {
  auto code = CUresult(e.code);
  bool lost = cuda::is_sticky(code) || !m_device.healthy();
  std::string where = "capture " + std::to_string(m_index);
  if (who == Who::original && m_bounded &&
      (code == CUDA_ERROR_ILLEGAL_ADDRESS || code == CUDA_ERROR_MISALIGNED_ADDRESS)) {
    // The ranges did not hold what the original reads here (the bounds probe runs with the
    // launch's stores suppressed, so a kernel whose addresses depend on what it wrote earlier in
    // the launch can reach bytes the probe never saw). The candidate is not at fault: the capture
    // cannot be used, and the job says so rather than blaming hone's worker.
    Failure f{VerdictKind::unsupported,
              "the original kernel reached outside the bounded ranges of " + where +
                  ", so the capture cannot be replayed (honed asks the application for whole "
                  "allocations next): " +
                  e.message,
              lost};
    f.bounded_unusable = true;
    return f;
  }
  if (who == Who::original) {
    return {VerdictKind::internal,
            "the original kernel failed on " + where +
                ", so the capture cannot be replayed (a bad capture, or buffers the kernel "
                "does not accept where the worker restored them): " +
                e.message,
            lost};
  }
  Failure f{VerdictKind::launch_error, "the candidate failed on " + where + ": " + e.message, lost};
  if (code == CUDA_ERROR_ILLEGAL_ADDRESS || code == CUDA_ERROR_MISALIGNED_ADDRESS) {
    f.kind = VerdictKind::illegal_address;
    f.pattern = "out-of-bounds";
  } else if (code == CUDA_ERROR_LAUNCH_TIMEOUT) {
    f.kind = VerdictKind::timeout;
  }
  return f;
}

std::optional<Failure> CaptureCheck::place() {
  // Does any buffer hold a pointer into a captured allocation (an 8-byte-aligned value inside
  // one)? Then the allocations must keep their original addresses. Otherwise each one is placed
  // on its own with guard zones on both sides: restored at their original addresses, allocations
  // the application had side by side stay side by side, with no guard between them.
  auto pointing_into = [&](uint64_t v, bool moved_only) -> std::optional<size_t> {
    for (size_t a = 0; a < m_allocs.size(); ++a) {
      if (moved_only && m_at_original[a]) continue;
      if (v >= m_allocs[a].base && v - m_allocs[a].base <= m_allocs[a].size) return a;
    }
    return std::nullopt;
  };
  struct Stored {
    size_t holder;
    uint64_t offset;
    size_t target;
  };
  auto find_stored = [&](bool moved_only) -> std::optional<Stored> {
    for (size_t a = 0; a < m_allocs.size(); ++a) {
      const auto& before = m_allocs[a].before;
      for (uint64_t off = (8 - m_allocs[a].base % 8) % 8; off + 8 <= before.size(); off += 8) {
        if (auto t = pointing_into(load_u64(before, off), moved_only)) return Stored{a, off, *t};
      }
    }
    return std::nullopt;
  };
  m_at_original.assign(m_allocs.size(), false);
  auto stored = find_stored(false);
  const char* env = std::getenv("HONE_WORKER_RESTORE"); // auto (default), original, relocate
  std::string_view mode = env ? env : "auto";
  bool original_addresses = mode == "original" || (mode != "relocate" && stored);

  auto p = Placement::place(m_device, m_allocs, original_addresses);
  if (!p) {
    return Failure{VerdictKind::internal,
                   "restoring the buffers of capture " + std::to_string(m_index) + ": " +
                       p.error().message,
                   cuda::is_sticky(CUresult(p.error().code))};
  }
  m_placement = std::move(*p);
  m_restore_how = original_addresses ? m_placement->how()
                  : mode == "relocate"
                      ? "relocated (HONE_WORKER_RESTORE=relocate)"
                      : "relocated: no buffer holds a pointer into a captured buffer, so each "
                        "gets guard zones of its own";
  m_guards.assign(m_allocs.size(), 0);
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    m_at_original[a] = m_placement->at_original(a);
    m_guards[a] = m_placement->guard_bytes(a);
  }

  // Point every listed pointer at the buffer's new home.
  m_params = m_capture.param_bytes;
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    for (uint32_t bi : m_allocs[a].buffers) {
      const auto& b = m_capture.buffers[bi];
      uint64_t at = uint64_t(m_capture.params[b.param].offset) + b.field;
      if (load_u64(m_params, at) != b.pointer) {
        return Failure{VerdictKind::internal, "capture " + std::to_string(m_index) +
                                                  " is inconsistent: " + param_name(b.param) +
                                                  " does not hold the pointer its buffer lists"};
      }
      uint64_t moved = m_placement->base(a) + (b.pointer - m_allocs[a].base);
      std::memcpy(m_params.data() + at, &moved, 8);
    }
  }
  if (!m_placement->any_relocated()) return std::nullopt;

  // A moved allocation breaks every pointer to it that the worker cannot patch: those stored in
  // buffers, and those in parameters the capture does not list.
  if (auto st = find_stored(true)) {
    return Failure{VerdictKind::unsupported,
                   "buffers hold pointers into other captured buffers; they cannot be moved (" +
                       name(st->holder) + " at byte " + std::to_string(st->offset) +
                       " points into " + name(st->target) +
                       ", and its original address is not available here: " + m_restore_how + ")"};
  }
  for (uint32_t p = 0; p < m_capture.params.size(); ++p) {
    const auto& slot = m_capture.params[p];
    for (uint32_t f = 0; f + 8 <= slot.size; f += 8) {
      bool listed = false;
      for (const auto& b : m_capture.buffers) listed = listed || (b.param == p && b.field == f);
      if (listed) continue;
      if (auto t =
              pointing_into(load_u64(m_capture.param_bytes, uint64_t(slot.offset) + f), true)) {
        return Failure{VerdictKind::unsupported,
                       param_name(p) + " holds a pointer into " + name(*t) +
                           " that the capture does not list, so it cannot be moved"};
      }
    }
  }
  return std::nullopt;
}

std::optional<Failure> CaptureCheck::run(Who who, Fill fill, uint64_t seed,
                                         Placement::Snapshot& out, size_t fill_allocation) {
  auto internal = [&](const Error& e) {
    return Failure{VerdictKind::internal, "capture " + std::to_string(m_index) + ": " + e.message,
                   cuda::is_sticky(CUresult(e.code)) || !m_device.healthy()};
  };
  if (auto r = m_placement->restore(fill); !r) return internal(r.error());
  if (fill_allocation < m_allocs.size()) {
    if (auto r = m_device.fill(m_placement->base(fill_allocation), k_poison,
                               m_allocs[fill_allocation].size);
        !r) {
      return internal(r.error());
    }
  }
  set_seed(k_seed_env, seed);
  set_seed(k_fill_env, m_fill_seed ? *m_fill_seed : seed);
  ::setenv(k_epoch_env, std::to_string(m_epoch ? *m_epoch : epoch_for(seed)).c_str(), 1);
  CUfunction fn = who == Who::original ? m_kernels.original : m_kernels.candidate;
  if (m_job.gpu_scrub && !m_device.emulated()) {
    // What the emulated device's fill seed does at every launch, done on a GPU by a kernel ahead
    // of this one: the same seed, the same garbage; another seed, other garbage.
    int local = -1;
    if (m_device.api().cuFuncGetAttribute) {
      m_device.api().cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn);
    }
    m_scrubbed = m_device.scrub(m_fill_seed ? *m_fill_seed : seed, local);
  }
  if (who == Who::candidate && m_watchdog) {
    // Generous: a correct candidate is not many times slower than the original.
    double s = std::max(60.0, 20 * m_clock->slowest_original_s);
    m_watchdog->arm(std::chrono::milliseconds(int64_t(s * 1000)));
  }
  auto t0 = std::chrono::steady_clock::now();
  auto r = m_device.run(fn, who == Who::original ? m_shape : m_candidate_shape, m_params);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (who == Who::candidate && m_watchdog) m_watchdog->disarm();
  if (who == Who::original)
    m_clock->slowest_original_s = std::max(m_clock->slowest_original_s, wall);
  if (!r) return launch_failure(who, r.error());
  ++m_runs;
  auto snap = m_placement->snapshot();
  if (!snap) return internal(snap.error());
  if (auto hit = m_placement->guard_hit(*snap)) {
    std::string where = std::to_string(hit->bytes) + " guard bytes changed, the first " +
                        signed_offset_text(hit->offset, m_allocs[hit->allocation].size) + " " +
                        name(hit->allocation) + " (" +
                        std::to_string(m_allocs[hit->allocation].size) + " bytes)";
    // A bounded buffer is the range a bounds probe saw the original touch (shim/README.md,
    // "Bounded captures"): the original writing outside it means the bound was wrong, which
    // makes the capture unusable, not the worker faulty.
    const bool bounded = m_capture.buffers[m_allocs[hit->allocation].buffers.front()].bounded;
    if (who == Who::original && bounded) {
      Failure f{VerdictKind::unsupported,
                "capture " + std::to_string(m_index) +
                    " is unusable: the original kernel wrote outside the range its bounds "
                    "probe recorded (" +
                    where + "), so the range was wrong"};
      f.bounded_unusable = true;
      return f;
    }
    if (who == Who::original) {
      return Failure{VerdictKind::internal, "capture " + std::to_string(m_index) +
                                                ": the original kernel wrote outside its captured "
                                                "buffers (" +
                                                where + ")"};
    }
    Failure f{VerdictKind::illegal_address,
              std::string(bounded ? "the candidate wrote outside the bytes the original can touch"
                                  : "the candidate wrote outside its buffers") +
                  " on capture " + std::to_string(m_index) + ": " + where};
    f.pattern = "out-of-bounds";
    return f;
  }
  out = std::move(*snap);
  return std::nullopt;
}

std::optional<Failure> CaptureCheck::learn_allocations() {
  auto allocs = collect_allocations(m_capture, m_data);
  if (!allocs) {
    return Failure{VerdictKind::internal, "capture " + std::to_string(m_index) +
                                              " is inconsistent: " + allocs.error().message};
  }
  m_allocs = std::move(*allocs);
  m_info.assign(m_allocs.size(), Alloc{});
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    Alloc& info = m_info[a];
    const auto& first = m_capture.buffers[m_allocs[a].buffers.front()];
    // A bounded range may start past the pointer (the kernel reads only further on): element 0
    // then lies before the range, and what matters is where elements start modulo their size,
    // which a shift by a multiple of 256 (every element size divides it) keeps.
    info.origin = first.pointer >= first.base ? first.pointer - first.base
                                              : (256 - (first.base - first.pointer) % 256) % 256;
    bool known = m_entry != nullptr;
    bool written = m_entry == nullptr;
    std::vector<ptx::Type> types;
    for (uint32_t bi : m_allocs[a].buffers) {
      const auto& b = m_capture.buffers[bi];
      if (!m_entry || b.param >= m_entry->params.size()) {
        known = false;
        written = true;
        continue;
      }
      const auto& p = m_entry->params[b.param];
      const ptx::PointerUse* use = nullptr;
      for (const auto& u : p.pointers) {
        if (u.offset == b.field) use = &u;
      }
      if (!use) {
        // Not used as a pointer, unless the parameter is read through its address.
        if (p.address_taken) {
          known = false;
          written = true;
        }
        continue;
      }
      if (use->escapes) known = false;
      written =
          written || use->escapes || (use->access & (ptx::k_access_write | ptx::k_access_atomic));
      types.insert(types.end(), use->types.begin(), use->types.end());
    }
    info.type = known ? element_type(types) : ElementType{};
    info.written = written;
  }
  return std::nullopt;
}

std::optional<Failure> CaptureCheck::validate(uint64_t seed1, uint64_t seed2) {
  ReleaseAtExit release_at_exit{this};
  m_runs = 0;
  m_first_seed = seed1;
  m_second_seed = seed2;
  m_perturbed = nlohmann::json::array();
  m_perturbed_pending.reset();
  if (auto f = learn_allocations()) return f;
  if (auto f = place()) return f;

  // Steps a-c do not depend on the candidate: a job before this one on the same original, capture
  // and seeds may have run them already. They hold where each buffer is placed the same way: at
  // its original address, or relocated (a relocated buffer holds no pointer and none points into
  // it, so where it lands does not change what the original computes; validation elsewhere than
  // in the application relies on that already).
  m_reused_from.reset();
  std::vector<uint64_t> bases(m_allocs.size());
  for (size_t a = 0; a < m_allocs.size(); ++a)
    bases[a] = m_at_original[a] ? m_placement->base(a) : 0;
  std::shared_ptr<const OriginalRuns> learned;
  std::string memo_key;
  if (m_memo) {
    memo_key = OriginalMemo::key(m_job, m_index, m_data, seed1, seed2);
    learned = m_memo->find(memo_key);
    if (learned && (learned->bases != bases || learned->info.size() != m_allocs.size()))
      learned.reset();
  }
  if (learned) {
    m_info = learned->info;
    for (size_t a = 0; a < m_allocs.size(); ++a) {
      Alloc& info = m_info[a];
      for (auto [off, len] : info.poison) m_placement->poison(a, off, len);
      // How this job compares: its own comparison, or a tolerance where the original varies.
      info.tolerance = info.type.dtype != Dtype::exact &&
                       (m_job.comparison == Comparison::tolerance || info.original_nondeterministic);
    }
    m_clock->slowest_original_s = std::max(m_clock->slowest_original_s,
                                           learned->slowest_original_s);
    m_reused_from = learned->job;
    return check_candidate(*learned, seed1, seed2);
  }
  auto fresh = std::make_shared<OriginalRuns>();
  fresh->bases = std::move(bases);
  fresh->job = m_job.id;

  // a. The original on the captured bytes: which bytes it changes.
  Placement::Snapshot clean_run;
  if (auto f = run(Who::original, Fill::clean, seed1, clean_run)) return f;
  // When the shim also copied the buffers after the launch, the replay should end the same
  // (unless the kernel is nondeterministic): evidence that the capture is faithful.
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    for (uint32_t bi : m_allocs[a].buffers) {
      const auto& b = m_capture.buffers[bi];
      if (b.after == ~0ull) continue;
      m_info[a].replays_capture = m_placement->data(clean_run, a) == m_data.substr(b.after, b.size);
      break;
    }
  }

  // b. Is each allocation it writes a pure output? Poison all of it and run again: a pure output
  // ends the same wherever the original writes, and still poisoned where it does not. Poisoning
  // the whole allocation (not only the changed bytes) also finds bytes the original rewrites with
  // the value they already held.
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    Alloc& info = m_info[a];
    std::string_view r = m_placement->data(clean_run, a), before = m_allocs[a].before;
    bool changed = r != before;
    if (!changed && !info.written) continue;
    Placement::Snapshot filled_run;
    if (auto f = run(Who::original, Fill::clean, seed1, filled_run, a)) return f;
    bool pure = true;
    for (size_t x = 0; x < m_allocs.size() && pure; ++x) {
      if (x != a && m_placement->data(filled_run, x) != m_placement->data(clean_run, x))
        pure = false;
    }
    std::string_view p = m_placement->data(filled_run, a);
    for (uint64_t i = 0; i < p.size() && pure; ++i) {
      if (p[i] == r[i]) continue;
      if (uint8_t(p[i]) == k_poison && r[i] == before[i]) continue;
      pure = false;
    }
    if (!pure) {
      info.role = Role::read_modify_write;
      continue;
    }
    for (uint64_t i = 0; i < p.size();) {
      auto written_at = [&](uint64_t k) { return r[k] != before[k] || uint8_t(p[k]) != k_poison; };
      if (!written_at(i)) {
        ++i;
        continue;
      }
      uint64_t j = i;
      while (j < p.size() && written_at(j)) ++j;
      info.poison.push_back({i, j - i});
      i = j;
    }
    info.role = info.poison.empty() ? Role::input : Role::output;
    for (auto [off, len] : info.poison) m_placement->poison(a, off, len);
  }
  clean_run = {};

  // c. The original twice more, under two schedules: where they differ, the original itself is
  // nondeterministic (atomics) and only a tolerance can compare.
  if (auto f = run(Who::original, Fill::poison, seed1, fresh->first)) return f;
  if (auto f = run(Who::original, Fill::poison, seed2, fresh->second)) return f;
  fresh->spread.assign(m_allocs.size(), {});
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    Alloc& info = m_info[a];
    if (m_placement->data(fresh->first, a) != m_placement->data(fresh->second, a)) {
      if (auto f = mark_nondeterministic(a, m_placement->data(fresh->second, a), fresh->spread))
        return f;
    }
    info.tolerance = info.type.dtype != Dtype::exact &&
                     (m_job.comparison == Comparison::tolerance || info.original_nondeterministic);
  }
  fresh->info = m_info;
  fresh->runs = m_runs;
  fresh->slowest_original_s = m_clock->slowest_original_s;
  if (m_memo) m_memo->keep(memo_key, fresh);
  return check_candidate(*fresh, seed1, seed2);
}

std::optional<Failure> CaptureCheck::mark_nondeterministic(size_t a, std::string_view other,
                                                           std::vector<std::string>& spread) {
  Alloc& info = m_info[a];
  info.original_nondeterministic = true;
  spread[a] = std::string(other);
  if (info.type.dtype == Dtype::exact) {
    return Failure{VerdictKind::unsupported,
                   "the original kernel itself is nondeterministic in " + name(a) +
                       " on capture " + std::to_string(m_index) +
                       " (runs under different schedules differ) and its elements are not "
                       "floating-point, so no tolerance can compare them"};
  }
  info.tolerance = true;
  return std::nullopt;
}

std::optional<Failure> CaptureCheck::check_candidate(const OriginalRuns& original, uint64_t seed1,
                                                     uint64_t seed2) {
  const Placement::Snapshot& o1 = original.first;
  // Per allocation, another result of the original where it is nondeterministic; this job's own
  // probes below may add to it.
  std::vector<std::string> spread = original.spread;
  // Two equal runs do not prove the original deterministic (atomics may happen to add up the
  // same). Before the candidate is blamed for a difference, the original gets more schedules.
  auto original_varies = [&](size_t a, bool& varies) -> std::optional<Failure> {
    varies = false;
    for (uint64_t k = 1; k <= k_probe_runs && !varies; ++k) {
      Placement::Snapshot o;
      uint64_t seed = ((seed1 + k * 0x9E3779B9ull) & 0x7FFFFFFF) + 1;
      if (auto f = run(Who::original, Fill::poison, seed, o)) return f;
      if (m_placement->data(o, a) != m_placement->data(o1, a)) {
        varies = true;
        if (auto f = mark_nondeterministic(a, m_placement->data(o, a), spread)) return f;
      }
    }
    return std::nullopt;
  };

  // d. The candidate twice, under the same two schedules: it must be as deterministic as the
  // original.
  Placement::Snapshot c1, c2;
  if (auto f = run(Who::candidate, Fill::poison, seed1, c1)) return f;
  if (auto f = run(Who::candidate, Fill::poison, seed2, c2)) return f;
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    if (m_info[a].original_nondeterministic) continue;
    CompareSpec spec;
    spec.type = m_info[a].type;
    spec.origin = m_info[a].origin;
    Difference d = compare(m_placement->data(c1, a), m_placement->data(c2, a), spec);
    if (!d.any()) continue;
    bool varies = false;
    if (auto f = original_varies(a, varies)) return f;
    if (varies) continue;
    auto why = diagnose(seed1, Fill::poison, c1, seed2);
    if (auto* f = std::get_if<Failure>(&why)) return *f;
    std::string_view pattern = std::get<std::string_view>(why);
    if (pattern.empty()) pattern = "race"; // on a GPU, where seeds change nothing
    const char* what = pattern == "out-of-bounds" ? "it reads outside its buffers"
                       : pattern == "uninitialized-memory"
                           ? "it reads shared or local memory it never wrote"
                       : pattern == "external-state"
                           ? "it depends on the time: %globaltimer counted from another epoch "
                             "gives another result"
                           : "a race: the result depends on the schedule";
    Failure f{VerdictKind::nondeterministic,
              "two runs of the candidate on capture " + std::to_string(m_index) + " differ (" +
                  what + ") in " + name(a) + ", " + describe(d) +
                  " (the first run is 'want'); the original gives one result under " +
                  std::to_string(2 + k_probe_runs) + " schedules"};
    f.pattern = pattern;
    return f;
  }

  // e. The candidate against the original, every byte of every allocation.
  auto spec_for = [&](size_t a) {
    CompareSpec spec;
    spec.type = m_info[a].type;
    spec.origin = m_info[a].origin;
    if (m_info[a].tolerance) spec.tolerance = &m_job.tolerance;
    if (m_info[a].original_nondeterministic) spec.spread = spread[a];
    return spec;
  };
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    Alloc& info = m_info[a];
    info.diff = compare(m_placement->data(o1, a), m_placement->data(c1, a), spec_for(a));
    if (info.diff.any() && !info.original_nondeterministic) {
      // A different rounding of an order the original did not fix is not a mismatch.
      bool varies = false;
      if (auto f = original_varies(a, varies)) return f;
      if (varies)
        info.diff = compare(m_placement->data(o1, a), m_placement->data(c1, a), spec_for(a));
    }
    if (!info.diff.any() && info.tolerance && info.role != Role::input) {
      // Within tolerance, but a constant where the original's outputs vary: zeros (or any one
      // value) passing for small results.
      std::string_view want = m_placement->data(o1, a), got = m_placement->data(c1, a);
      auto ranges = info.poison;
      if (info.role == Role::read_modify_write) ranges = {{0, got.size()}};
      for (auto [off, len] : ranges) {
        if (constant_elements(got, info.type, info.origin, off, off + len) &&
            !constant_elements(want, info.type, info.origin, off, off + len)) {
          Failure f{VerdictKind::mismatch,
                    "capture " + std::to_string(m_index) + ", " + name(a) +
                        ": every element the original writes in bytes [" + std::to_string(off) +
                        ", " + std::to_string(off + len) +
                        ") holds one value in the candidate's result, while the original's vary "
                        "(within the tolerance, max abs error " +
                        std::to_string(info.diff.max_abs_err) + ")"};
          f.pattern = "degenerate-output";
          return f;
        }
      }
    }
    if (info.diff.any()) {
      std::string why;
      if (info.role == Role::input) why = " (a buffer the original does not change)";
      Failure f{VerdictKind::mismatch, "capture " + std::to_string(m_index) + ", " + name(a) +
                                           why + ": " + describe(info.diff)};
      f.pattern = mismatch_pattern(a, m_placement->data(o1, a), m_placement->data(c1, a));
      if (f.pattern.empty()) {
        auto why_run = diagnose(seed1, Fill::poison, c1);
        if (auto* g = std::get_if<Failure>(&why_run)) return *g;
        f.pattern = std::get<std::string_view>(why_run);
      }
      return f;
    }
  }

  // f. The candidate once more with the second poison: a byte the original writes as 0xFF looks
  // written by a candidate that leaves it alone. Its result must not depend on what the outputs
  // held before the launch.
  // (g runs last, after the job's timing: perturbed_last().)
  m_perturbed_pending = seed1;
  bool any_poison = false;
  for (const auto& info : m_info) any_poison = any_poison || !info.poison.empty();
  if (!any_poison) return std::nullopt;
  Placement::Snapshot c3;
  if (auto f = run(Who::candidate, Fill::poison_alt, seed1, c3)) return f;
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    CompareSpec spec = spec_for(a);
    if (!m_info[a].original_nondeterministic) spec.tolerance = nullptr;
    Difference d = compare(m_placement->data(c1, a), m_placement->data(c3, a), spec);
    if (d.any()) {
      Failure f{VerdictKind::mismatch,
                "capture " + std::to_string(m_index) + ", " + name(a) +
                    ": the candidate's result depends on what the outputs held before the "
                    "launch (it leaves bytes the original writes unwritten, or reads them): " +
                    describe(d) + " ('want' with outputs pre-filled with 0xFF, 'got' with 0x5A)"};
      f.pattern = "result-reuse";
      return f;
    }
  }
  return std::nullopt;
}

std::optional<Failure> CaptureCheck::perturbed_last() {
  if (!m_perturbed_pending) return std::nullopt;
  const uint64_t seed1 = *m_perturbed_pending;
  m_perturbed_pending.reset();
  ReleaseAtExit release_at_exit{this};
  const uint32_t runs_before = m_runs;
  auto f = check_perturbed(seed1);
  m_perturbed_runs = m_runs - runs_before;
  return f;
}

std::optional<Failure> CaptureCheck::check_perturbed(uint64_t seed1) {
  using nlohmann::json;
  std::mt19937_64 rng(seed1 ^ (0xC0FFEEull + m_index));
  std::uniform_real_distribution<double> factor(0.5, 1.5);
  // Floating-point inputs: the same values, shuffled and each scaled by 0.5-1.5 (signs, and so the
  // cancellations a reordered sum meets, stay as captured).
  std::vector<std::string> values(m_allocs.size());
  std::vector<std::string> changed_values;
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    const Alloc& info = m_info[a];
    if (info.role != Role::input || (info.type.dtype != Dtype::f32 && info.type.dtype != Dtype::f64))
      continue;
    const uint32_t size = info.type.size;
    std::string bytes(m_allocs[a].before);
    const uint64_t first = info.origin % size;
    std::vector<double> v;
    for (uint64_t o = first; o + size <= bytes.size(); o += size) {
      if (size == 4) {
        float f;
        std::memcpy(&f, bytes.data() + o, 4);
        v.push_back(f);
      } else {
        double d;
        std::memcpy(&d, bytes.data() + o, 8);
        v.push_back(d);
      }
    }
    if (v.size() < 2) continue;
    std::shuffle(v.begin(), v.end(), rng);
    size_t k = 0;
    for (uint64_t o = first; o + size <= bytes.size(); o += size, ++k) {
      double x = std::isfinite(v[k]) ? v[k] * factor(rng) : v[k];
      if (size == 4) {
        float f = float(x);
        std::memcpy(bytes.data() + o, &f, 4);
      } else {
        std::memcpy(bytes.data() + o, &x, 8);
      }
    }
    if (bytes == m_allocs[a].before) continue;
    values[a] = std::move(bytes);
    changed_values.push_back(name(a));
  }
  // Scalars outside the guard: floating-point ones scaled by 0.5-1.5; integers (sizes, counts)
  // halved when even and at least 2.
  struct Scalar {
    uint32_t param;
    std::string bytes;
    bool integer;
  };
  std::vector<Scalar> scalars;
  if (m_entry) {
    for (uint32_t p = 0; p < m_entry->params.size() && p < m_capture.params.size(); ++p) {
      const ptx::ParamInfo& pi = m_entry->params[p];
      if (pi.is_pointer() || pi.aggregate || pi.address_taken) continue;
      bool guarded = false, buffer = false;
      for (const auto& g : m_job.guard.scalars) guarded = guarded || g.param == p;
      for (const auto& b : m_capture.buffers) buffer = buffer || b.param == p;
      if (guarded || buffer) continue;
      const auto& slot = m_capture.params[p];
      std::string bytes = m_params.substr(slot.offset, slot.size);
      using T = ptx::Type;
      if ((pi.type == T::f32 && slot.size == 4) || (pi.type == T::f64 && slot.size == 8)) {
        double x;
        if (slot.size == 4) {
          float f;
          std::memcpy(&f, bytes.data(), 4);
          x = f;
        } else {
          std::memcpy(&x, bytes.data(), 8);
        }
        if (!std::isfinite(x)) continue;
        x = x == 0 ? 0.25 : x * factor(rng);
        if (slot.size == 4) {
          float f = float(x);
          std::memcpy(bytes.data(), &f, 4);
        } else {
          std::memcpy(bytes.data(), &x, 8);
        }
        scalars.push_back({p, bytes, false});
      } else if ((slot.size == 4 || slot.size == 8) &&
                 (pi.type == T::u32 || pi.type == T::s32 || pi.type == T::b32 ||
                  pi.type == T::u64 || pi.type == T::s64 || pi.type == T::b64)) {
        uint64_t v = 0;
        std::memcpy(&v, bytes.data(), slot.size);
        if (slot.size == 4 && pi.type == T::s32 && int32_t(v) < 0) continue;
        if (slot.size == 8 && pi.type == T::s64 && int64_t(v) < 0) continue;
        if (v < 2 || v % 2) continue;
        v /= 2;
        std::memcpy(bytes.data(), &v, slot.size);
        scalars.push_back({p, bytes, true});
      }
    }
  }
  bool any_float_scalar = false, any_int_scalar = false;
  for (const auto& s : scalars) (s.integer ? any_int_scalar : any_float_scalar) = true;

  struct Pass {
    const char* name;
    bool sizes;
  };
  std::vector<Pass> passes;
  if (!changed_values.empty() || any_float_scalar) passes.push_back({"values", false});
  if (any_int_scalar) passes.push_back({"values and sizes", true});
  for (const Pass& pass : passes) {
    std::string what;
    auto add = [&](const std::string& s) { what += (what.empty() ? "" : ", ") + s; };
    for (const auto& n : changed_values) add(n + " shuffled and scaled");
    for (const auto& s : scalars) {
      if (s.integer && !pass.sizes) continue;
      add(param_name(s.param) + (s.integer ? " halved" : " scaled"));
    }
    json record{{"pass", pass.name}, {"changed", what}};
    // Place the perturbed copy in place of the capture, then put everything back.
    std::vector<CapturedAllocation> saved = m_allocs;
    std::string saved_params = m_params;
    for (size_t a = 0; a < m_allocs.size(); ++a) {
      if (!values[a].empty()) m_allocs[a].before = values[a];
    }
    m_placement.reset();
    auto restore_capture = [&] {
      m_placement.reset();
      m_allocs = saved;
      m_params = saved_params;
    };
    if (auto f = place()) {
      restore_capture();
      return f;
    }
    for (size_t a = 0; a < m_allocs.size(); ++a) {
      for (auto [off, len] : m_info[a].poison) m_placement->poison(a, off, len);
    }
    for (const auto& s : scalars) {
      if (s.integer && !pass.sizes) continue;
      m_params.replace(m_capture.params[s.param].offset, s.bytes.size(), s.bytes);
    }
    Placement::Snapshot o, c;
    if (auto f = run(Who::original, Fill::poison, seed1, o)) {
      restore_capture();
      if (f->context_lost) {
        // This is the job's last step (perturbed_last()): the verdict stands on the rest, and no
        // later copy can run on this context.
        record["result"] = std::string(f->bounded_unusable
                                           ? "skipped: the original reaches outside the capture's "
                                             "bounded ranges on it ("
                                           : "skipped: the original faults on it (") +
                           f->message + "); the fault ended the context, so no later copy ran";
        m_perturbed.push_back(std::move(record));
        m_lost_on_perturbed = true;
        return std::nullopt;
      }
      // Not an input the kernel accepts: this copy proves nothing.
      record["result"] = "skipped: the original does not run on it (" + f->message + ")";
      m_perturbed.push_back(std::move(record));
      continue;
    }
    if (auto f = run(Who::candidate, Fill::poison, seed1, c)) {
      restore_capture();
      f->message += " (on a perturbed copy of capture " + std::to_string(m_index) + ": " + what +
                    ")";
      if (f->pattern.empty()) f->pattern = "input-specific";
      return f;
    }
    for (size_t a = 0; a < m_allocs.size(); ++a) {
      if (m_info[a].original_nondeterministic) continue;
      CompareSpec spec;
      spec.type = m_info[a].type;
      spec.origin = m_info[a].origin;
      if (m_info[a].tolerance) spec.tolerance = &m_job.tolerance;
      Difference d = compare(m_placement->data(o, a), m_placement->data(c, a), spec);
      if (!d.any()) continue;
      restore_capture();
      Failure f{VerdictKind::mismatch,
                "correct on capture " + std::to_string(m_index) +
                    " but not on a perturbed copy of it (" + what + "): " + name(a) + ", " +
                    describe(d)};
      f.pattern = "input-specific";
      return f;
    }
    restore_capture();
    record["result"] = "equal";
    m_perturbed.push_back(std::move(record));
  }
  return std::nullopt;
}

std::variant<std::string_view, Failure> CaptureCheck::diagnose(uint64_t seed, Fill fill,
                                                                const Placement::Snapshot& c1,
                                                                uint64_t other_schedule) {
  auto differs = [&](const Placement::Snapshot& s) {
    for (size_t a = 0; a < m_allocs.size(); ++a) {
      if (m_placement->data(s, a) != m_placement->data(c1, a)) return true;
    }
    return false;
  };
  Placement::Snapshot probe;
  std::optional<Failure> f;
  // The same run with %globaltimer counted from other epochs (the present, 36 years before it,
  // 146 years after it: a date compared with the clock falls between two of them). First, when
  // the candidate reads it: every run of it sees another time (the stream's clock moves on), so a
  // probe below would see the difference too and blame something else. The probes below keep the
  // epoch of the run that showed the difference.
  const uint64_t epoch = epoch_for(seed);
  if (m_reads_timer) {
    for (uint64_t other : {m_present_ns, m_present_ns - k_later_spread,
                           epoch_for(m_second_seed ? m_second_seed : ~seed)}) {
      if (other == epoch) continue;
      m_epoch = other;
      f = run(Who::candidate, fill, seed, probe);
      m_epoch.reset();
      if (f) return *f;
      if (differs(probe)) return std::string_view("external-state");
    }
  }
  m_epoch = epoch;
  struct Unpin {
    std::optional<uint64_t>& epoch;
    ~Unpin() { epoch.reset(); }
  } unpin{m_epoch};
  // Another guard pattern: a write there is a guard hit (run() says so), a read changes the result.
  m_placement->set_guard_mask(k_other_guard);
  f = run(Who::candidate, fill, seed, probe);
  m_placement->set_guard_mask(0);
  if (f) return *f;
  if (differs(probe)) return std::string_view("out-of-bounds");
  // Another schedule, the same garbage in shared and local memory.
  if (other_schedule) {
    m_fill_seed = seed;
    f = run(Who::candidate, fill, other_schedule, probe);
    m_fill_seed.reset();
    if (f) return *f;
    if (differs(probe)) return std::string_view("race");
  }
  // Other garbage in shared and local memory.
  m_fill_seed = k_other_fill ^ seed;
  f = run(Who::candidate, fill, seed, probe);
  m_fill_seed.reset();
  if (f) return *f;
  if (differs(probe)) return std::string_view("uninitialized-memory");
  return std::string_view();
}

std::string_view CaptureCheck::mismatch_pattern(size_t a, std::string_view want,
                                                std::string_view got) const {
  const Alloc& info = m_info[a];
  if (info.role == Role::input) return "input-modification";
  // Poison left where the original writes something else: the candidate did not write it. A run
  // of 8 poison bytes, not one: any value may hold a 0xFF byte.
  constexpr uint64_t k_run = 8;
  for (auto [off, len] : info.poison) {
    const uint64_t end = std::min<uint64_t>(off + len, got.size());
    for (uint64_t i = off, run = 0; i < end; ++i) {
      run = uint8_t(got[i]) == k_poison ? run + 1 : 0;
      if (run >= k_run && want.substr(i + 1 - k_run, k_run) != std::string(k_run, char(k_poison)))
        return "result-reuse";
    }
  }
  if (info.type.dtype != Dtype::exact) {
    auto ranges = info.poison;
    if (info.role == Role::read_modify_write) ranges = {{0, got.size()}};
    for (auto [off, len] : ranges) {
      if (constant_elements(got, info.type, info.origin, off, off + len) &&
          !constant_elements(want, info.type, info.origin, off, off + len)) {
        return "degenerate-output";
      }
    }
  }
  return {};
}

std::optional<Failure> CaptureCheck::shadow(uint64_t seed1, uint64_t seed2) {
  ReleaseAtExit release_at_exit{this};
  m_runs = 0;
  m_first_seed = seed1;
  m_second_seed = seed2;
  m_perturbed = nlohmann::json::array();
  if (auto f = learn_allocations()) return f;
  if (auto f = place()) return f;
  Placement::Snapshot o1, o2;
  if (auto f = run(Who::original, Fill::clean, seed1, o1)) return f;
  if (auto f = run(Who::original, Fill::clean, seed2, o2)) return f;
  size_t compared = 0;
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    Alloc& info = m_info[a];
    const CaptureBuffer* with_after = nullptr;
    for (uint32_t bi : m_allocs[a].buffers) {
      if (m_capture.buffers[bi].after != ~0ull) with_after = &m_capture.buffers[bi];
    }
    if (!with_after) continue;
    if (with_after->after > m_data.size() || m_data.size() - with_after->after < m_allocs[a].size) {
      return Failure{VerdictKind::internal, "capture " + std::to_string(m_index) +
                                                " is inconsistent: " + name(a) +
                                                "'s bytes after the launch lie past its data"};
    }
    std::string_view served = m_data.substr(with_after->after, m_allocs[a].size);
    std::string_view want = m_placement->data(o1, a);
    CompareSpec spec;
    spec.type = info.type;
    spec.origin = info.origin;
    info.tolerance = info.type.dtype != Dtype::exact && m_job.comparison == Comparison::tolerance;
    if (want != m_placement->data(o2, a)) {
      // The original varies here itself: only a tolerance, widened by its spread, can compare.
      info.original_nondeterministic = true;
      if (info.type.dtype == Dtype::exact) continue;
      info.tolerance = true;
      spec.spread = m_placement->data(o2, a);
    }
    if (info.tolerance) spec.tolerance = &m_job.tolerance;
    info.role = want == m_allocs[a].before ? Role::input : Role::output;
    info.diff = compare(want, served, spec);
    ++compared;
    if (info.diff.any()) {
      Failure f{VerdictKind::mismatch,
                "a launch the variant served in the application left " + name(a) +
                    " different from what the original computes on the same inputs: " +
                    describe(info.diff) + " ('got' is the variant's, 'want' the original's)"};
      f.pattern = "correct-while-checked";
      return f;
    }
  }
  if (!compared) {
    return Failure{VerdictKind::unsupported,
                   "capture " + std::to_string(m_index) +
                       " holds no buffer after the launch that the original's result can be "
                       "compared with (buffers are exact and the original varies, or none was "
                       "copied after the launch)"};
  }
  return std::nullopt;
}

std::optional<Failure> CaptureCheck::recheck(uint64_t seed, size_t runs) {
  Placement::Snapshot o, c;
  if (auto f = run(Who::original, Fill::poison, seed, o)) return f;
  if (auto f = run(Who::candidate, Fill::poison, seed, c)) return f;
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    const Alloc& info = m_info[a];
    if (info.original_nondeterministic) continue;
    CompareSpec spec;
    spec.type = info.type;
    spec.origin = info.origin;
    if (info.tolerance) spec.tolerance = &m_job.tolerance;
    Difference d = compare(m_placement->data(o, a), m_placement->data(c, a), spec);
    if (!d.any()) continue;
    Failure f{VerdictKind::mismatch,
              "correct when validated, but after " + std::to_string(runs) +
                  " launches in the benchmark the candidate's result on capture " +
                  std::to_string(m_index) + " differs: " + name(a) + ", " + describe(d)};
    f.pattern = "correct-while-checked";
    return f;
  }
  return std::nullopt;
}

std::optional<Failure> CaptureCheck::prepare() {
  if (auto f = place()) return f;
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    for (auto [off, len] : m_info[a].poison) m_placement->poison(a, off, len);
  }
  return std::nullopt;
}

std::variant<double, Failure> CaptureCheck::timed_run(bool candidate) {
  if (auto r = m_placement->restore(Fill::poison); !r) {
    return Failure{VerdictKind::internal, r.error().message,
                   cuda::is_sticky(CUresult(r.error().code))};
  }
  ::unsetenv(k_seed_env);
  ::unsetenv(k_fill_env);
  ::unsetenv(k_epoch_env);
  // Each timed run starts from a cold L2 (on a GPU): a candidate is not timed on data a restore
  // or the other kernel left in cache.
  m_l2_flushed = m_device.flush_l2();
  Who who = candidate ? Who::candidate : Who::original;
  if (candidate && m_watchdog) {
    double s = std::max(60.0, 20 * m_clock->slowest_original_s);
    m_watchdog->arm(std::chrono::milliseconds(int64_t(s * 1000)));
  }
  auto r = m_device.run(candidate ? m_kernels.candidate : m_kernels.original,
                        candidate ? m_candidate_shape : m_shape, m_params);
  if (candidate && m_watchdog) m_watchdog->disarm();
  if (!r) return launch_failure(who, r.error());
  return *r;
}

void CaptureCheck::release() {
  m_placement.reset();
}

nlohmann::json CaptureCheck::evidence() const {
  using nlohmann::json;
  json allocations = json::array();
  for (size_t a = 0; a < m_allocs.size(); ++a) {
    const Alloc& info = m_info[a];
    json params = json::array();
    for (uint32_t bi : m_allocs[a].buffers) params.push_back(m_capture.buffers[bi].param);
    json j{{"param", params.front()},
           {"params", params},
           {"bytes", m_allocs[a].size},
           {"restored_at_original_address", a < m_at_original.size() && m_at_original[a]},
           {"guard_bytes", a < m_guards.size() ? m_guards[a] : 0},
           {"role", info.role == Role::input    ? "input"
                    : info.role == Role::output ? "output"
                                                : "read-modify-write"},
           {"dtype", to_string(info.type.dtype)},
           {"compared", info.tolerance ? "tolerance" : "bitwise"},
           {"original_nondeterministic", info.original_nondeterministic},
           {"compared_bytes", info.diff.compared_bytes},
           {"max_abs_err", info.diff.max_abs_err},
           {"max_rel_err", info.diff.max_rel_err}};
    if (info.replays_capture) j["replays_captured_output"] = *info.replays_capture;
    if (info.role == Role::read_modify_write) {
      j["poisoned_bytes"] = "read-modify-write";
    } else {
      uint64_t n = 0;
      for (auto [off, len] : info.poison) n += len;
      j["poisoned_bytes"] = n;
    }
    allocations.push_back(std::move(j));
  }
  json j{{"index", m_index},
         {"grid", m_capture.grid},
         {"block", m_capture.block},
         {"shared_bytes", m_capture.shared_bytes},
         {"restore", m_restore_how},
         {"runs", m_runs},
         {"allocations", std::move(allocations)}};
  // What %globaltimer counted from on the emulated device under each schedule (ns since 1970).
  if (m_first_seed) {
    j["globaltimer_epochs_ns"] = {epoch_for(m_first_seed), epoch_for(m_second_seed)};
  }
  // The original's runs of steps a-c were an earlier job's, on the same capture and seeds.
  if (m_reused_from) j["original_runs_from_job"] = *m_reused_from;
  if (!m_perturbed.empty()) j["perturbed"] = m_perturbed;
  return j;
}

std::vector<std::string> CaptureCheck::nondeterministic() const {
  std::vector<std::string> out;
  for (size_t a = 0; a < m_info.size(); ++a) {
    if (m_info[a].original_nondeterministic) {
      out.push_back("capture " + std::to_string(m_index) + " " + name(a));
    }
  }
  return out;
}

bool CaptureCheck::used_tolerance() const {
  for (const auto& i : m_info) {
    if (i.tolerance) return true;
  }
  return false;
}

} // namespace hone::worker
