#include "daemon/worker/bench.hpp"

#include <algorithm>
#include <cmath>

namespace hone::worker {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double relative_mad(const std::vector<double>& v, double med) {
  if (v.empty() || med <= 0) return 0;
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) dev.push_back(std::fabs(x - med));
  return median(std::move(dev)) / med;
}

std::variant<Measurement, Failure> measure(CaptureCheck& capture, const BenchSettings& settings) {
  Measurement m;
  auto once = [&](bool candidate, bool keep) -> std::optional<Failure> {
    auto r = capture.timed_run(candidate);
    if (auto* f = std::get_if<Failure>(&r)) return std::move(*f);
    if (keep) (candidate ? m.candidate_ns : m.original_ns).push_back(std::get<double>(r));
    return std::nullopt;
  };
  for (uint32_t i = 0; i < settings.warmup; ++i) {
    if (auto f = once(false, false)) return *f;
    if (auto f = once(true, false)) return *f;
  }
  uint32_t runs = std::max<uint32_t>(settings.runs, 1);
  uint32_t floor = std::clamp<uint32_t>(settings.min_runs, 1, runs);
  for (uint32_t i = 0; i < runs; ++i) {
    bool candidate_first = i % 2 == 1;
    if (auto f = once(candidate_first, true)) return *f;
    if (auto f = once(!candidate_first, true)) return *f;
    if (i + 1 >= floor && i + 1 < runs) {
      summarize(m);
      if (verdict_certain(m, settings)) break;
    }
  }
  summarize(m);
  return m;
}

void summarize(Measurement& m) {
  m.original_median = median(m.original_ns);
  m.candidate_median = median(m.candidate_ns);
  m.speedup = m.candidate_median > 0 ? m.original_median / m.candidate_median : 0;
  m.noise = std::max(relative_mad(m.original_ns, m.original_median),
                     relative_mad(m.candidate_ns, m.candidate_median));
}

bool verdict_certain(const Measurement& m, const BenchSettings& settings) {
  if (m.speedup <= 0) return false;
  if (accepted(m, settings)) {
    Measurement worse = m;
    worse.speedup = m.speedup * (1 - m.noise);
    worse.noise = 2 * m.noise;
    return accepted(worse, settings);
  }
  Measurement better = m;
  better.speedup = m.speedup * (1 + m.noise);
  better.noise = m.noise / 2;
  return !accepted(better, settings);
}

bool accepted(const Measurement& m, const BenchSettings& settings) {
  return m.speedup >= settings.min_speedup && (m.speedup - 1) > settings.noise_factor * m.noise;
}

} // namespace hone::worker
