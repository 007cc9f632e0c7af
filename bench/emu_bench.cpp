// Throughput of the emulated device on the CUDA corpus, through both of its execution paths, and
// the time of a 2^20-element saxpy.
//
// Every corpus kernel (nvcc PTX for sm_90) runs its largest checked shape, scaled up, through the
// driver API with the launchers of tests/support/corpus_launch.hpp (outputs still checked), once
// on the reference path (HONE_EMU_EXEC=reference, the interpreter before its fast path) and once on
// the fast path (the default), one after the other in the same run. The emulated driver reports
// each launch's thread-instructions and modeled time in its debug log (HONE_EMU_LOG=debug:
// "launch <kernel>: <ns> ns modeled, <n> thread instructions; ..."); this program turns its own
// stderr into that log and reads it back. On a real driver those columns stay empty.
//
//   hone-bench-emu [SCALE] [MIN_SECONDS]   (defaults 8 and 0.2: element-count multiplier, and the
//                                           least launch time measured per kernel and path)
//
// Targets (printed, never asserted): at least 100 M thread-instructions per second with every
// worker thread (HONE_EMU_THREADS, by default one per core); the fast path at least 10x the
// reference path's thread-instructions per second (issue 14). Both paths must model the same
// time for the same launches: a kernel whose modeled totals differ is marked.
#include "corpus.hpp"
#include "corpus_launch.hpp"

#include <cuda.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace hone;
using Clock = std::chrono::steady_clock;

namespace {

// The emulated driver's debug log, captured from our own stderr.
class DriverLog {
public:
  DriverLog() {
    if (!std::getenv("HONE_EMU_LOG")) setenv("HONE_EMU_LOG", "debug", 1);
    std::fflush(stderr);
    m_saved = dup(2);
    m_file = std::tmpfile();
    if (m_saved >= 0 && m_file) dup2(fileno(m_file), 2);
  }
  ~DriverLog() {
    std::fflush(stderr);
    if (m_saved >= 0) dup2(m_saved, 2);
    if (m_file) std::fclose(m_file);
  }

  struct Counts {
    uint64_t launches = 0;
    uint64_t thread_instructions = 0;
    uint64_t modeled_ns = 0;
  };

  // The launches logged since the last call; errors and warnings go to the real stderr.
  Counts take() {
    Counts c;
    std::fflush(stderr);
    if (!m_file) return c;
    std::fseek(m_file, long(m_offset), SEEK_SET);
    char line[4096];
    while (std::fgets(line, sizeof line, m_file)) {
      m_offset += std::strlen(line);
      unsigned long long ns = 0, instructions = 0;
      // "launch <kernel>: <ns> ns modeled, <n> thread instructions; <the model's terms>"
      const char* launch = std::strstr(line, "hone-emu: launch ");
      const char* modeled = launch ? std::strstr(launch, " ns modeled, ") : nullptr;
      const char* number = modeled;
      while (number && number > launch && std::isdigit(static_cast<unsigned char>(number[-1]))) --number;
      if (modeled && number < modeled &&
          std::sscanf(number, "%llu ns modeled, %llu thread instructions", &ns, &instructions) == 2) {
        ++c.launches;
        c.thread_instructions += instructions;
        c.modeled_ns += ns;
      } else if (std::strstr(line, "ERROR") || std::strstr(line, "cannot") ||
                 std::strstr(line, "not supported")) {
        if (m_saved >= 0) (void)!write(m_saved, line, std::strlen(line));
      }
    }
    std::fseek(m_file, 0, SEEK_END);
    return c;
  }

  void print(const char* text) {
    if (m_saved >= 0) (void)!write(m_saved, text, std::strlen(text));
  }

private:
  int m_saved = -1;
  std::FILE* m_file = nullptr;
  size_t m_offset = 0;
};

struct Row {
  std::string kernel;
  test::LaunchTotals totals;
  DriverLog::Counts counts;
  bool passed = true;
  std::string note;
};

std::string si(double v) {
  char buf[32];
  if (v >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

int worker_threads() {
  if (const char* e = std::getenv("HONE_EMU_THREADS")) return std::atoi(e);
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::fprintf(stdout, "bench: %s failed: %s\n", what, test::cu_error_text(r).c_str());
  std::exit(1);
}

} // namespace

int main(int argc, char** argv) {
  const unsigned scale = argc > 1 ? unsigned(std::atoi(argv[1])) : 8;
  const double min_seconds = argc > 2 ? std::atof(argv[2]) : 0.2;
  DriverLog log;

  check(cuInit(0), "cuInit");
  CUdevice device;
  check(cuDeviceGet(&device, 0), "cuDeviceGet");
  char name[256] = {};
  cuDeviceGetName(name, sizeof name, device);
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

  std::printf("hone-bench-emu: %s, %d worker threads, scale %u, >= %.2f s of launches per kernel\n",
              name, worker_threads(), scale, min_seconds);
  std::printf("Each kernel runs its largest corpus shape x%u (outputs checked) until its launches "
              "took %.2f s.\n",
              scale, min_seconds);
  std::printf("wall: cuLaunchKernel + cuCtxSynchronize; thread-instr and modeled: the emulated "
              "driver's log.\n\n");

  std::map<std::string, CUmodule> modules;
  std::vector<Row> rows, reference_rows;
  // One kernel's launches on one path, until they took min_seconds.
  auto measure = [&](const test::CorpusKernel& k, CUfunction f, const char* path, Row row) {
    setenv("HONE_EMU_EXEC", path, 1);
    test::CorpusRunOptions options;
    options.shapes = test::ShapeSet::bench;
    options.bench_scale = scale;
    log.take();
    for (int rep = 0; rep < 50 && row.totals.launch_seconds < min_seconds; ++rep) {
      auto r = test::run_corpus_kernel(k, f, options);
      row.totals.launches += r.totals.launches;
      row.totals.threads += r.totals.threads;
      row.totals.elements += r.totals.elements;
      row.totals.launch_seconds += r.totals.launch_seconds;
      if (!r.passed()) {
        row.passed = false;
        row.note = r.failures.front().substr(0, 60);
        break;
      }
    }
    row.counts = log.take();
    unsetenv("HONE_EMU_EXEC");
    return row;
  };
  for (const auto& k : test::corpus_kernels()) {
    Row row;
    row.kernel = k.entry == "_Z10fill_valueIfEvPT_S0_i" ? "fill_value<float>" : k.entry;
    auto it = modules.find(k.file);
    if (it == modules.end()) {
      const auto& cm = test::compiled({k.file, "nvcc", "90"});
      CUmodule m = nullptr;
      if (!cm.error.empty() || cuModuleLoadData(&m, cm.ptx.c_str()) != CUDA_SUCCESS) m = nullptr;
      it = modules.emplace(k.file, m).first;
    }
    CUfunction f = nullptr;
    if (!it->second || cuModuleGetFunction(&f, it->second, k.entry.c_str()) != CUDA_SUCCESS) {
      row.passed = false;
      row.note = "module did not load";
      rows.push_back(row);
      reference_rows.push_back(row);
      continue;
    }
    reference_rows.push_back(measure(k, f, "reference", row));
    rows.push_back(measure(k, f, "fast", row));
  }

  std::printf("%-28s %8s %9s %9s %10s %12s %12s %10s %10s %12s %9s  %s\n", "kernel", "launches",
              "threads", "elements", "wall ms", "thread-instr", "instr/s", "elem/s", "modeled ms",
              "ref instr/s", "fast/ref", "check");
  DriverLog::Counts all, all_ref;
  double all_seconds = 0, all_ref_seconds = 0, log_ratio_sum = 0;
  int ratios = 0;
  uint64_t all_elements = 0;
  int failed = 0, modeled_differ = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const Row& ref = reference_rows[i];
    double s = r.totals.launch_seconds;
    bool counted = r.counts.launches > 0;
    const double fast_rate = counted && s > 0 ? double(r.counts.thread_instructions) / s : 0;
    const double ref_rate = ref.counts.launches && ref.totals.launch_seconds > 0
                                ? double(ref.counts.thread_instructions) / ref.totals.launch_seconds
                                : 0;
    // Per launch, the two paths must model the same time (they ran different launch counts).
    const bool same_model =
        !counted || !ref.counts.launches ||
        (r.counts.modeled_ns * ref.counts.launches == ref.counts.modeled_ns * r.counts.launches &&
         r.counts.thread_instructions * ref.counts.launches ==
             ref.counts.thread_instructions * r.counts.launches);
    // With blocks on several host threads a kernel whose blocks race (a CAS retry loop) executes
    // more or fewer instructions from run to run on either path; emu_exec_equivalence_test
    // compares the paths on one thread, where they must agree bit for bit.
    const bool racing = !same_model && worker_threads() > 1;
    modeled_differ += same_model || racing ? 0 : 1;
    char ratio[32] = "n/a";
    if (fast_rate > 0 && ref_rate > 0) {
      std::snprintf(ratio, sizeof ratio, "%.2fx", fast_rate / ref_rate);
      log_ratio_sum += std::log(fast_rate / ref_rate);
      ++ratios;
    }
    const bool ok = r.passed && ref.passed && (same_model || racing);
    std::printf("%-28s %8llu %9s %9s %10.2f %12s %12s %10s %10s %12s %9s  %s\n", r.kernel.c_str(),
                (unsigned long long)r.totals.launches, si(double(r.totals.threads)).c_str(),
                si(double(r.totals.elements)).c_str(), s * 1e3,
                counted ? si(double(r.counts.thread_instructions)).c_str() : "n/a",
                counted && s > 0 ? si(fast_rate).c_str() : "n/a",
                s > 0 ? si(double(r.totals.elements) / s).c_str() : "n/a",
                counted ? std::to_string(double(r.counts.modeled_ns) / 1e6).substr(0, 8).c_str()
                        : "n/a",
                ref_rate > 0 ? si(ref_rate).c_str() : "n/a", ratio,
                ok ? (same_model ? "ok" : "ok (counts vary: racing blocks)")
                   : !same_model ? "MODELED TIMES DIFFER"
                                 : ("FAIL " + (r.passed ? ref.note : r.note)).c_str());
    all.launches += r.counts.launches;
    all.thread_instructions += r.counts.thread_instructions;
    all.modeled_ns += r.counts.modeled_ns;
    all_ref.launches += ref.counts.launches;
    all_ref.thread_instructions += ref.counts.thread_instructions;
    all_seconds += s;
    all_ref_seconds += ref.totals.launch_seconds;
    all_elements += r.totals.elements;
    failed += ok ? 0 : 1;
  }
  const bool counted = all.launches > 0;
  const double rate =
      counted && all_seconds > 0 ? double(all.thread_instructions) / all_seconds : 0;
  const double ref_rate = all_ref.launches && all_ref_seconds > 0
                              ? double(all_ref.thread_instructions) / all_ref_seconds
                              : 0;
  std::printf("%-28s %8s %9s %9s %10.2f %12s %12s %10s %10s %12s %9s  %s\n", "ALL (sum)", "", "",
              si(double(all_elements)).c_str(), all_seconds * 1e3,
              counted ? si(double(all.thread_instructions)).c_str() : "n/a",
              counted ? si(rate).c_str() : "n/a", si(double(all_elements) / all_seconds).c_str(),
              counted ? std::to_string(double(all.modeled_ns) / 1e6).substr(0, 8).c_str() : "n/a",
              ref_rate > 0 ? si(ref_rate).c_str() : "n/a",
              rate > 0 && ref_rate > 0
                  ? (std::to_string(rate / ref_rate).substr(0, 4) + "x").c_str()
                  : "n/a",
              failed ? (std::to_string(failed) + " FAILED").c_str() : "ok");
  const double geomean = ratios ? std::exp(log_ratio_sum / ratios) : 0;

  // saxpy over 2^20 elements: wall time and the time events report (modeled on the emulator).
  {
    const int n = 1 << 20;
    const auto& cm = test::compiled({"elementwise", "nvcc", "90"});
    CUmodule m = modules.count("elementwise") ? modules["elementwise"] : nullptr;
    if (!m) check(cuModuleLoadData(&m, cm.ptx.c_str()), "cuModuleLoadData(elementwise)");
    CUfunction f;
    check(cuModuleGetFunction(&f, m, "saxpy"), "cuModuleGetFunction(saxpy)");
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
      x[i] = float(i % 1000) * 0.001f;
      y[i] = float(i % 7);
    }
    CUdeviceptr dx, dy;
    check(cuMemAlloc(&dx, n * 4), "cuMemAlloc");
    check(cuMemAlloc(&dy, n * 4), "cuMemAlloc");
    check(cuMemcpyHtoD(dx, x.data(), n * 4), "cuMemcpyHtoD");
    check(cuMemcpyHtoD(dy, y.data(), n * 4), "cuMemcpyHtoD");
    CUevent start, stop;
    check(cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    check(cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    int nn = n;
    float a = 2.0f;
    void* params[] = {&nn, &a, &dx, &dy};
    for (const char* path : {"reference", "fast"}) {
      setenv("HONE_EMU_EXEC", path, 1);
      std::vector<double> wall;
      float event_ms = 0;
      log.take();
      for (int rep = 0; rep < 5; ++rep) {
        auto t0 = Clock::now();
        check(cuEventRecord(start, nullptr), "cuEventRecord");
        check(cuLaunchKernel(f, n / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
              "cuLaunchKernel(saxpy)");
        check(cuEventRecord(stop, nullptr), "cuEventRecord");
        check(cuEventSynchronize(stop), "cuEventSynchronize");
        wall.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        check(cuEventElapsedTime(&event_ms, start, stop), "cuEventElapsedTime");
      }
      auto c = log.take();
      std::sort(wall.begin(), wall.end());
      std::printf("\nsaxpy, n = 2^20, grid 4096 x 256, %s path: wall %.2f ms (median of 5), "
                  "cuEventElapsedTime %.4f ms (modeled)",
                  path, wall[2] * 1e3, double(event_ms));
      if (c.launches) {
        std::printf(", %s thread-instructions per launch, %s thread-instructions/s",
                    si(double(c.thread_instructions) / double(c.launches)).c_str(),
                    si(double(c.thread_instructions) / double(c.launches) / wall[2]).c_str());
      }
      std::printf("\n");
    }
    unsetenv("HONE_EMU_EXEC");
    cuEventDestroy(start);
    cuEventDestroy(stop);
    cuMemFree(dx);
    cuMemFree(dy);
  }

  if (counted) {
    std::printf("\ntarget >= 100 M thread-instructions/s over the corpus (%d worker threads): %s "
                "(%.1f M/s)\n",
                worker_threads(), rate >= 100e6 ? "met" : "NOT met", rate / 1e6);
    std::printf("target: fast path >= 10x the reference path's thread-instructions/s: %s "
                "(%.2fx over the corpus's totals, %.2fx geometric mean over %d kernels)\n",
                rate >= 10 * ref_rate ? "met" : "NOT met", ref_rate > 0 ? rate / ref_rate : 0.0,
                geomean, ratios);
    if (modeled_differ)
      std::printf("the paths' modeled times or instruction counts DIFFER for %d kernels\n",
                  modeled_differ);
  } else {
    std::printf("\ntarget >= 100 M thread-instructions/s: not measured (the driver logged no "
                "instruction counts; "
                "elements/s and launches/s above are wall-time measurements)\n");
  }
  for (auto& [file, m] : modules) {
    if (m) cuModuleUnload(m);
  }
  cuDevicePrimaryCtxRelease(device);
  return 0;
}
