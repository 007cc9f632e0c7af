// Measuring the candidate against the original (DESIGN.md, "Benchmark (worker)"): warm-up, then
// interleaved pairs timed with device events, medians, and a noise estimate.
#pragma once

#include "common/job.hpp"
#include "daemon/worker/capture_check.hpp"

#include <variant>
#include <vector>

namespace hone::worker {

struct Measurement {
  std::vector<double> original_ns; // every measured run, in order
  std::vector<double> candidate_ns;
  double original_median = 0;
  double candidate_median = 0;
  double speedup = 0; // original median / candidate median
  double noise = 0;   // the larger relative median absolute deviation of the two
};

double median(std::vector<double> v);
// Median absolute deviation from `med`, relative to `med` (0 when med is 0).
double relative_mad(const std::vector<double>& v, double med);

// `settings.warmup` runs of each, then up to `settings.runs` pairs, alternating which goes first;
// the buffers are restored (and poisoned) before every run, outside the timed region. Past
// `settings.min_runs` pairs it stops as soon as the verdict is certain.
std::variant<Measurement, Failure> measure(CaptureCheck& capture, const BenchSettings& settings);

// Faster by at least min_speedup, and by more than noise_factor times the noise.
bool accepted(const Measurement& m, const BenchSettings& settings);

// Would the verdict on `m` stand whatever the next runs show? Accepting: even with the speedup
// moved toward 1 by the noise, and the noise doubled. Refusing: even with the speedup moved away
// from 1 by the noise. With times that do not vary (the emulated device), any verdict is certain.
bool verdict_certain(const Measurement& m, const BenchSettings& settings);
// Medians, speedup and noise of the runs in `m`.
void summarize(Measurement& m);

} // namespace hone::worker
