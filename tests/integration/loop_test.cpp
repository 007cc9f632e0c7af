// The whole loop with real processes on the emulated device: an application (apps/serve_app.cpp)
// under libhone.so, honed, and its worker. A kernel engineer's candidate is captured, validated,
// benchmarked, stored and swapped into the running application; hostile candidates are each
// rejected with the verdict their defect calls for; the application's results stay correct
// throughout (it checks every launch on the host and exits 1 on a mismatch); a restarted honed
// serves the stored variant to a new process without new work.
#include "daemon_process.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <regex>
#include <sstream>
#include <thread>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The serve application's kernel at n = 1M, reps = 64: four waves of blocks over the SMs, each
// thread's loop long enough that the emulator's modeled time (emu/README.md, "Cost model") is
// issue-bound, and a kernel without it, memory-bound, clearly faster (4.7 us against 3.3 us).
constexpr const char* k_n = "1048576";
constexpr const char* k_reps = "64";
// Where no candidate has to be faster (it must be rejected), a shorter loop: each validation run
// costs the emulator a third as much.
constexpr const char* k_reps_short = "8";

// Validation back to back (gpu_share 1: the share's gate is agent_test's); three measured runs and
// no warmup settle a verdict on the emulated device, whose modeled times do not vary.
std::string config_text(int captures = 2, const std::string& extra = "",
                        int worker_start_timeout_s = 30) {
  std::ostringstream s;
  s << "[server]\nreport_interval_ms = 200\n"
    << "[worker]\ndriver = \"" << HONE_EMU_LIBRARY_DIR << "/libcuda.so.1\"\n"
    << "start_timeout_s = " << worker_start_timeout_s << "\n"
    << "[optimizer]\nenabled = false\ngpu_share = 1.0\n"
    << "[capture]\ncaptures_per_kernel = " << captures << "\ntimeout_s = 60\n"
    << "[validation]\nwarmup = 0\nruns = 7\nmin_runs = 3\njob_timeout_s = 120\n"
    << extra;
  return s.str();
}

std::unique_ptr<DaemonProcess> start_daemon(const std::string& config, fs::path dir = {}) {
  DaemonOptions o;
  o.config = config;
  o.dir = std::move(dir);
  // A runaway candidate ends at this many thread-instructions per launch (the original needs
  // about 98 million) instead of the emulator's default of 10^10.
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "200000000");
  auto d = DaemonProcess::start(std::move(o));
  if (!d) {
    ADD_FAILURE() << d.error().message;
    return nullptr;
  }
  return std::move(*d);
}

struct AppResult {
  RunResult run;
  long launches = -1;
  long mismatches = -1;
  long last_mismatch = -1; // the number of the last wrong launch; 0: none
};

// The serve application under the shim, attached to `socket`, in the background: it runs until
// finish() (at most 300 s).
class App {
public:
  App(const std::string& socket, const std::vector<std::string>& args)
      : m_app(options(socket, args)) {}

  // Stop the application and wait for it.
  AppResult finish() {
    AppResult r;
    r.run = m_app.finish();
    std::smatch m;
    static const std::regex line("launches (\\d+) mismatches (\\d+) last_mismatch (\\d+)");
    if (std::regex_search(r.run.out, m, line)) {
      r.launches = std::stol(m[1]);
      r.mismatches = std::stol(m[2]);
      r.last_mismatch = std::stol(m[3]);
    }
    return r;
  }

private:
  static AppOptions options(const std::string& socket, const std::vector<std::string>& args) {
    AppOptions o;
    o.program = std::string(HONE_TESTAPP_DIR) + "/hone-testapp-serve";
    o.args = {"--seconds", "300"};
    o.args.insert(o.args.end(), args.begin(), args.end());
    o.socket = socket;
    o.shim = HONE_SHIM_LIBRARY;
    o.driver_dir = HONE_EMU_LIBRARY_DIR;
    o.env["HONE_LOG"] = "info";
    // One core for the application's kernels (it launches back to back), the rest for the
    // worker's: on the emulated device both run on the CPU.
    o.env["HONE_EMU_THREADS"] = "1";
    return o;
  }
  BackgroundApp m_app;
};

// The application ran, checked every launch, and found nothing wrong.
void expect_app_correct(App& app) {
  AppResult r = app.finish();
  EXPECT_EQ(r.run.exit_code, 0) << r.run.out << r.run.err;
  EXPECT_GT(r.launches, 0) << r.run.out << r.run.err;
  EXPECT_EQ(r.mismatches, 0) << r.run.out << r.run.err;
}

// Submit `code` for the kernel `accumulate`; the job id, or 0 with a test failure.
uint64_t submit(Ctl& ctl, const std::string& code, const std::string& kind,
                json extra = json::object()) {
  json req{{"target", "accumulate"}, {"kind", kind}};
  req.update(extra);
  json r = ctl.submit(req, code);
  if (!r.value("ok", false)) {
    ADD_FAILURE() << "submit: " << r.dump();
    return 0;
  }
  return r["result"]["job"].get<uint64_t>();
}

// Wait until the application reported the kernel (it is hot enough to submit against).
bool wait_kernel(Ctl& ctl, std::chrono::seconds timeout = 60s) {
  return wait_for([&] { return !ctl.kernel("accumulate").is_null(); }, timeout);
}

// The faster kernel: the same integers without the loop.
constexpr const char* k_fast = R"(
extern "C" __global__ void accumulate(int* out, const int* in, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i] * reps;
}
)";

} // namespace

// A submitted faster kernel is captured, validated, benchmarked, stored and swapped in; the
// application stays correct and the daemon counts launches the variant served.
TEST(Loop, SubmittedKernelIsValidatedAndServes) {
  auto d = start_daemon(config_text());
  ASSERT_TRUE(d);
  App app(d->socket(), {"--n", k_n, "--reps", k_reps});
  Ctl ctl(d->socket());
  ASSERT_TRUE(wait_kernel(ctl)) << d->log();

  // Through honectl, as a kernel engineer would: it waits for the verdict.
  TempDir files("hone-candidate");
  std::string file = (files.path() / "fast.cu").string();
  std::ofstream(file) << k_fast;
  RunOptions slow;
  slow.timeout = 200s;
  RunResult sub =
      run_honectl({"submit", "accumulate", file, "--bitwise", "--socket", d->socket()}, slow);
  std::printf("%s", sub.out.c_str());
  EXPECT_EQ(sub.exit_code, 0) << sub.out << sub.err << d->log();
  EXPECT_NE(sub.out.find(": verified: verified on"), std::string::npos) << sub.out;
  json jobs = ctl.request({{"cmd", "jobs"}});
  ASSERT_EQ(jobs["result"]["jobs"].size(), 1u) << jobs.dump(2);
  json job = jobs["result"]["jobs"][0];
  EXPECT_EQ(job.value("verdict", ""), "verified") << job.dump(2);
  EXPECT_GT(job.value("speedup", 0.0), 1.25) << job.dump(2); // 4.7 us against 3.3 us
  EXPECT_GE(job.value("captures_used", 0), 1) << job.dump(2);
  EXPECT_EQ(job.value("strategy", ""), "submit") << job.dump(2);

  // Stored with its evidence ...
  json variants = ctl.request({{"cmd", "variants"}, {"target", "accumulate"}});
  ASSERT_TRUE(variants.value("ok", false)) << variants.dump();
  bool stored = false;
  for (const auto& v : variants["result"]["variants"]) {
    stored |= v.value("state", "") == "verified" && v.value("strategy", "") == "submit";
  }
  EXPECT_TRUE(stored) << variants.dump(2);

  // ... and serving launches in the application.
  json k;
  EXPECT_TRUE(wait_for(
      [&] {
        k = ctl.kernel("accumulate");
        return !k.is_null() && k.value("variant_launches", uint64_t(0)) > 10;
      },
      60s))
      << k.dump(2) << d->log();
  EXPECT_EQ(k.value("state", ""), "verified") << k.dump(2);
  EXPECT_EQ(k.value("fallbacks", uint64_t(1)), 0u) << k.dump(2);
  // honectl status shows the launches the variant served.
  RunResult st = run_honectl({"status", "--socket", d->socket()});
  EXPECT_EQ(st.exit_code, 0) << st.err;
  EXPECT_NE(st.out.find("SERVED"), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("verified"), std::string::npos) << st.out;
  std::printf("%s", st.out.c_str());
  expect_app_correct(app);
}

// Each hostile candidate is rejected with the verdict its defect calls for, and the application
// running the kernel all along never sees any of them.
TEST(Loop, HostileCandidatesAreRejected) {
  auto d = start_daemon(config_text());
  ASSERT_TRUE(d);
  App app(d->socket(), {"--n", k_n, "--reps", k_reps_short});
  Ctl ctl(d->socket());
  ASSERT_TRUE(wait_kernel(ctl)) << d->log();

  struct Case {
    const char* what;
    const char* verdict;
    const char* message; // a piece of the verdict's message
    std::string code;
  };
  const std::string head =
      "extern \"C\" __global__ void accumulate(int* out, const int* in, int n, "
      "int reps)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "    if (i >= n) return;\n";
  const std::vector<Case> cases{
      {"wrong result", "mismatch", "parameter 0",
       head + "    out[i] = in[i] * reps + (i == 517);\n}\n"},
      // Warps read a neighbour warp's shared slot without __syncthreads: what they see depends
      // on the order warps run in, which the worker varies between the two runs.
      {"race", "nondeterministic", "",
       "extern \"C\" __global__ void accumulate(int* out, const int* in, int n, int reps)\n{\n"
       "    __shared__ int s[1024];\n"
       "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
       "    int t = threadIdx.x;\n"
       "    s[t] = i < n ? in[i] * reps : 0;\n"
       "    int other = s[(t + 32) % blockDim.x];\n"
       "    if (i < n) out[i] = s[t] + (other == 0x5a5a5a5a);\n"
       "    s[t] = 0x5a5a5a5a;\n}\n"},
      {"out-of-bounds write", "illegal address", "",
       head + "    out[i + n] = 1;\n    out[i] = in[i] * reps;\n}\n"},
      {"out-of-bounds read", "illegal address", "",
       head + "    out[i] = in[i + (1 << 26)] * reps;\n}\n"},
      {"infinite loop", "timeout", "",
       head + "    volatile int* p = out;\n    while (p[i] != 0x7fffffff) p[i] = in[i];\n}\n"},
      // Refused from its PTX before it runs (daemon/worker/candidate_checks.hpp).
      {"writes a buffer the original only reads", "refused", "parameter 1",
       head +
           "    int v = in[i];\n    const_cast<int*>(in)[i] = v + 1;\n    out[i] = v * reps;\n}\n"},
      {"reads the output's previous contents", "mismatch", "parameter 0",
       head + "    out[i] += in[i] * reps;\n}\n"},
      {"does not compile", "compile error", "error", head + "    out[i] = in[i] * reps\n}\n"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    uint64_t id = submit(ctl, c.code, "cuda", {{"comparison", "bitwise"}});
    ASSERT_NE(id, 0u);
    json job = ctl.wait_job(id);
    ASSERT_FALSE(job.is_null()) << d->log();
    std::printf("%s -> %s: %s\n", c.what, job.value("verdict", "").c_str(),
                job.value("message", "").c_str());
    EXPECT_EQ(job.value("verdict", ""), c.verdict) << job.dump(2);
    EXPECT_NE(job.value("message", "").find(c.message), std::string::npos) << job.dump(2);
  }
  // Nothing was ever swapped in, and the variants are on record as rejected.
  json k = ctl.kernel("accumulate");
  EXPECT_EQ(k.value("variant_launches", uint64_t(1)), 0u) << k.dump(2);
  json variants = ctl.request({{"cmd", "variants"}, {"target", "accumulate"}});
  ASSERT_TRUE(variants.value("ok", false)) << variants.dump();
  std::string input_writer;
  for (const auto& v : variants["result"]["variants"]) {
    EXPECT_EQ(v.value("state", ""), "rejected");
    if (v.value("verdict", "").rfind("refused", 0) == 0) input_writer = v.value("id", "");
  }
  // honectl show names the pattern a refused candidate matched, and the defence that caught it.
  ASSERT_FALSE(input_writer.empty()) << variants.dump(2);
  RunResult show = run_honectl({"show", input_writer, "--socket", d->socket()});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("pattern"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("input-modification"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("caught by"), std::string::npos) << show.out;
  // The candidates that broke a worker's context cost it its life, not the daemon's.
  json st = ctl.request({{"cmd", "status"}});
  EXPECT_TRUE(st.value("ok", false)) << st.dump();
  expect_app_correct(app);
}

// A kernel correct only at the block shape it was captured with: verified with that shape as
// its guard, it serves the launches of that shape and the others run the original.
TEST(Loop, ShapeSpecificKernelServesOnlyItsShape) {
  auto d = start_daemon(config_text(4));
  ASSERT_TRUE(d);
  App app(d->socket(), {"--n", k_n, "--reps", k_reps, "--mixed-shapes"});
  Ctl ctl(d->socket());
  ASSERT_TRUE(wait_kernel(ctl)) << d->log();
  const std::string code =
      "extern \"C\" __global__ void accumulate(int* out, const int* in, int n, "
      "int reps)\n{\n    int i = blockIdx.x * 256 + threadIdx.x;\n"
      "    if (i >= n) return;\n    out[i] = in[i] * reps;\n}\n";
  uint64_t id = submit(ctl, code, "cuda", {{"comparison", "bitwise"}, {"block", {256, 1, 1}}});
  ASSERT_NE(id, 0u);
  json job = ctl.wait_job(id);
  ASSERT_FALSE(job.is_null()) << d->log();
  ASSERT_EQ(job.value("verdict", ""), "verified") << job.dump(2);
  auto served = [&] { return ctl.kernel("accumulate").value("variant_launches", uint64_t(0)); };
  ASSERT_TRUE(wait_for([&] { return served() > 0; }, 60s)) << d->log();
  // From now on three launches in four have the guarded shape: the variant serves those, and
  // the original runs the rest (they are not failures of the variant: no fallbacks).
  json k0 = ctl.kernel("accumulate");
  json k1;
  ASSERT_TRUE(wait_for(
      [&] {
        k1 = ctl.kernel("accumulate");
        return k1.value("launches", uint64_t(0)) >= k0.value("launches", uint64_t(0)) + 40;
      },
      90s))
      << k1.dump(2);
  double launches = double(k1["launches"].get<uint64_t>() - k0["launches"].get<uint64_t>());
  double by_variant =
      double(k1["variant_launches"].get<uint64_t>() - k0["variant_launches"].get<uint64_t>());
  EXPECT_GT(by_variant / launches, 0.6) << k0.dump() << k1.dump();
  EXPECT_LT(by_variant / launches, 0.9) << k0.dump() << k1.dump();
  EXPECT_EQ(k1.value("fallbacks", uint64_t(1)), 0u) << k1.dump(2);
  // the others are guard misses, per kernel in the kernel's record and in /metrics
  double misses =
      double(k1.value("guard_misses", uint64_t(0)) - k0.value("guard_misses", uint64_t(0)));
  EXPECT_GT(misses / launches, 0.1) << k0.dump() << k1.dump();
  EXPECT_LT(misses / launches, 0.4) << k0.dump() << k1.dump();
  auto metrics = run_honectl({"metrics", "--socket", d->socket()});
  EXPECT_NE(metrics.out.find("hone_guard_misses_total{kernel=\"accumulate\"} "), std::string::npos)
      << metrics.out;
  expect_app_correct(app);
}

// Without the guard's shape the same kernel is caught on a capture of the other shape.
TEST(Loop, ShapeSpecificKernelFailsOnOtherShape) {
  auto d = start_daemon(config_text(1));
  ASSERT_TRUE(d);
  // With --mixed-shapes a capture would be of the other shape only by luck: this application
  // launches 128 threads per block every time.
  App app(d->socket(), {"--n", k_n, "--reps", k_reps_short, "--block", "128"});
  Ctl ctl(d->socket());
  ASSERT_TRUE(wait_kernel(ctl)) << d->log();
  const std::string code =
      "extern \"C\" __global__ void accumulate(int* out, const int* in, int n, "
      "int reps)\n{\n    int i = blockIdx.x * 256 + threadIdx.x;\n"
      "    if (i >= n) return;\n    out[i] = in[i] * reps;\n}\n";
  uint64_t id = submit(ctl, code, "cuda", {{"comparison", "bitwise"}});
  ASSERT_NE(id, 0u);
  json job = ctl.wait_job(id);
  ASSERT_FALSE(job.is_null()) << d->log();
  EXPECT_EQ(job.value("verdict", ""), "mismatch") << job.dump(2);
  expect_app_correct(app);
}

// `disable` withdraws the variant from the running process; `enable` brings it back.
// A worker lives for as long as there is work: it is not mistaken, start_timeout_s after its
// start, for a peer that never finished its handshake (which used to kill it, and fail the job it
// ran). The deadline is 3 s here so that the test need not wait out the default 30 s.
TEST(Loop, WorkerOutlivesTheHandshakeDeadline) {
  auto d = start_daemon(config_text(2, "", 3));
  ASSERT_TRUE(d);
  App app(d->socket(), {"--n", k_n, "--reps", k_reps});
  Ctl ctl(d->socket());
  ASSERT_TRUE(wait_kernel(ctl)) << d->log();
  uint64_t first = submit(ctl, k_fast, "cuda", {{"comparison", "bitwise"}});
  ASSERT_NE(first, 0u);
  EXPECT_EQ(ctl.wait_job(first).value("verdict", ""), "verified") << d->log();
  std::this_thread::sleep_for(4s); // past the 3 s the worker had to say hello
  uint64_t second = submit(ctl, k_fast, "cuda", {{"comparison", "bitwise"}});
  ASSERT_NE(second, 0u);
  EXPECT_EQ(ctl.wait_job(second).value("verdict", ""), "verified") << d->log();
  json workers = ctl.request({{"cmd", "status"}})["result"]["workers"];
  EXPECT_EQ(workers.value("started", 0), 1) << workers.dump() << d->log();
  EXPECT_EQ(workers.value("lost", 1), 0) << workers.dump() << d->log();
  expect_app_correct(app);
}

TEST(Loop, DisableWithdrawsAndEnableRestores) {
  auto d = start_daemon(config_text());
  ASSERT_TRUE(d);
  App app(d->socket(), {"--n", k_n, "--reps", k_reps});
  Ctl ctl(d->socket());
  ASSERT_TRUE(wait_kernel(ctl)) << d->log();
  uint64_t id = submit(ctl, k_fast, "cuda", {{"comparison", "bitwise"}});
  ASSERT_NE(id, 0u);
  json job = ctl.wait_job(id);
  ASSERT_EQ(job.value("verdict", ""), "verified") << job.dump(2);
  auto served = [&] { return ctl.kernel("accumulate").value("variant_launches", uint64_t(0)); };
  ASSERT_TRUE(wait_for([&] { return served() > 0; }, 60s)) << d->log();

  ASSERT_TRUE(ctl.request({{"cmd", "disable"}, {"target", "accumulate"}}).value("ok", false));
  // Within a second no launch goes to the variant any more: the count stops growing.
  std::this_thread::sleep_for(1500ms);
  uint64_t before = served();
  std::this_thread::sleep_for(2000ms);
  EXPECT_EQ(served(), before) << "the variant kept serving after disable";

  ASSERT_TRUE(ctl.request({{"cmd", "enable"}, {"target", "accumulate"}}).value("ok", false));
  EXPECT_TRUE(wait_for([&] { return served() > before; }, 30s)) << d->log();
  expect_app_correct(app);
}

// honed restarted on the same state directory serves the stored variant to a new process at once:
// no capture, no job.
TEST(Loop, RestartServesStoredVariantWithoutNewWork) {
  TempDir dir("hone-loop");
  {
    auto d = start_daemon(config_text(), dir.path());
    ASSERT_TRUE(d);
    App app(d->socket(), {"--n", k_n, "--reps", k_reps});
    Ctl ctl(d->socket());
    ASSERT_TRUE(wait_kernel(ctl)) << d->log();
    uint64_t id = submit(ctl, k_fast, "cuda", {{"comparison", "bitwise"}});
    ASSERT_NE(id, 0u);
    json job = ctl.wait_job(id);
    ASSERT_EQ(job.value("verdict", ""), "verified") << job.dump(2);
    expect_app_correct(app);
    auto status = d->stop();
    ASSERT_TRUE(status && *status == 0) << d->log();
  }
  auto d = start_daemon(config_text(), dir.path());
  ASSERT_TRUE(d);
  App app(d->socket(), {"--n", k_n, "--reps", k_reps});
  Ctl ctl(d->socket());
  json k;
  EXPECT_TRUE(wait_for(
      [&] {
        k = ctl.kernel("accumulate");
        return !k.is_null() && k.value("variant_launches", uint64_t(0)) > 0;
      },
      60s))
      << k.dump(2) << d->log();
  json jobs = ctl.request({{"cmd", "jobs"}});
  EXPECT_TRUE(jobs["result"]["jobs"].empty()) << jobs.dump(2);
  expect_app_correct(app);
}

// Captures are the application's data: once no process runs the kernel and no job waits for
// them, honed lets them go.
TEST(Loop, CapturesLeaveMemoryWithTheApplication) {
  auto d = start_daemon(config_text());
  ASSERT_TRUE(d);
  Ctl ctl(d->socket());
  auto capture_bytes = [&] {
    json st = ctl.request({{"cmd", "status"}});
    return st["result"]["workers"].value("capture_bytes", uint64_t(0));
  };
  {
    App app(d->socket(), {"--n", k_n, "--reps", k_reps});
    ASSERT_TRUE(wait_kernel(ctl)) << d->log();
    uint64_t id = submit(ctl, k_fast, "cuda", {{"comparison", "bitwise"}});
    ASSERT_NE(id, 0u);
    json job = ctl.wait_job(id);
    ASSERT_EQ(job.value("verdict", ""), "verified") << job.dump(2);
    // Two launches of n ints in and out. The application fills `out` with the same bytes
    // before every launch, so the two captures hold its range once.
    const uint64_t range = 4u * uint64_t(std::atol(k_n));
    EXPECT_EQ(capture_bytes(), 3u * range) << d->log();
    json st = ctl.request({{"cmd", "status"}});
    EXPECT_EQ(st["result"]["workers"].value("capture_bytes_shared", uint64_t(0)), range)
        << st.dump(2);
    expect_app_correct(app);
  }
  EXPECT_TRUE(wait_for([&] { return capture_bytes() == 0; }, 10s)) << d->log();
  json st = ctl.request({{"cmd", "status"}});
  EXPECT_EQ(st["result"]["workers"].value("capture_bytes_shared", uint64_t(1)), 0u) << st.dump(2);
  EXPECT_NE(d->log().find("dropped 2 capture(s) of accumulate"), std::string::npos) << d->log();
  EXPECT_FALSE(fs::exists(d->state_dir() / "captures"));
}

// A range many launches read with the same bytes (a model's weights) is held once for all their
// captures, and each capture a job runs on gets those bytes back in place: the worker's replay of
// the original ends as the application's launch did (capture.with_outputs).
TEST(Loop, CapturesHoldTheBytesManyLaunchesReadOnce) {
  DaemonOptions o;
  o.config = config_text();
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "200000000");
  o.env.emplace("HONE_CAPTURE_WITH_OUTPUTS", "true");
  auto started = DaemonProcess::start(std::move(o));
  ASSERT_TRUE(started) << started.error().message;
  auto d = std::move(*started);
  Ctl ctl(d->socket());
  App app(d->socket(), {"--n", k_n, "--reps", k_reps, "--same-input"});
  ASSERT_TRUE(wait_kernel(ctl)) << d->log();
  uint64_t id = submit(ctl, k_fast, "cuda", {{"comparison", "bitwise"}});
  ASSERT_NE(id, 0u);
  json job = ctl.wait_job(id);
  ASSERT_EQ(job.value("verdict", ""), "verified") << job.dump(2) << d->log();
  EXPECT_EQ(job.value("captures_used", 0), 2) << job.dump(2);
  // The second capture's `in` and `out` (0xab before every launch) are the first one's bytes.
  const uint64_t range = 4u * uint64_t(std::atol(k_n));
  json st = ctl.request({{"cmd", "status"}});
  EXPECT_EQ(st["result"]["workers"].value("capture_bytes_shared", uint64_t(0)), 2 * range)
      << st.dump(2);
  EXPECT_NE(d->log().find(std::to_string(2 * range) + " of them held already for other captures"),
            std::string::npos)
      << d->log();
  json variants = ctl.request({{"cmd", "variants"}, {"target", "accumulate"}});
  ASSERT_FALSE(variants["result"]["variants"].empty()) << variants.dump(2);
  std::string vid = variants["result"]["variants"][0].value("id", "");
  json shown = ctl.request({{"cmd", "show"}, {"target", vid}});
  const json& captures = shown["result"]["evidence"]["worker"]["captures"];
  ASSERT_EQ(captures.size(), 2u) << shown.dump(2);
  for (const auto& c : captures) {
    bool replayed = false;
    for (const auto& a : c["allocations"]) {
      if (a.value("role", "") == "output") replayed = a.value("replays_captured_output", false);
    }
    EXPECT_TRUE(replayed) << c.dump(2);
  }
  expect_app_correct(app);
}

// A bounded capture the original itself cannot run on: `relay` reads `data` through indices it
// stores first in the same launch, which the bounds probe (stores dropped) never sees, so the
// capture holds the first bytes of `data` while the launch reads 4 MiB into it. The worker's
// original faults outside the ranges; honed drops the kernel's captures, asks the process for
// whole allocations, and the job runs again on those.
TEST(Loop, BoundedCaptureTheOriginalOverrunsIsTakenAgainWhole) {
  auto d = start_daemon(config_text(1));
  ASSERT_TRUE(d);
  Ctl ctl(d->socket());
  App app(d->socket(), {"--relay", "--n", "4096"});
  ASSERT_TRUE(wait_for([&] { return !ctl.kernel("relay").is_null(); }, 60s)) << d->log();
  // The application's own kernel, unchanged.
  std::ifstream relay_source(HONE_RELAY_SOURCE);
  std::stringstream same;
  same << relay_source.rdbuf();
  ASSERT_FALSE(same.str().empty()) << HONE_RELAY_SOURCE;
  json r = ctl.submit({{"target", "relay"}, {"kind", "cuda"}}, same.str());
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  json job = ctl.wait_job(r["result"]["job"].get<uint64_t>());
  // The same code: correct, and no faster.
  EXPECT_EQ(job.value("verdict", ""), "not faster") << job.dump(2) << d->log();
  const std::string log = d->log();
  EXPECT_NE(log.find("captured a launch of relay (4 buffers, 4 by bounded ranges"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("reached outside the bounded ranges"), std::string::npos) << log;
  EXPECT_NE(log.find("it waits for captures of whole allocations"), std::string::npos) << log;
  EXPECT_NE(log.find("captured a launch of relay (4 buffers, 0 by bounded ranges"),
            std::string::npos)
      << log;
  json k = ctl.kernel("relay");
  EXPECT_NE(k.value("captured_whole_why", "").find("honed asked for whole allocations"),
            std::string::npos)
      << k.dump(2);
  expect_app_correct(app);
}

// With capture.persist the captures are files of mode 0600 under the state directory, and a
// restarted honed validates with them while no application runs the kernel.
TEST(Loop, PersistedCapturesValidateAfterRestart) {
  TempDir dir("hone-loop");
  std::string cfg = config_text();
  cfg.replace(cfg.find("[capture]\n"), 10, "[capture]\npersist = true\n");
  {
    auto d = start_daemon(cfg, dir.path());
    ASSERT_TRUE(d);
    App app(d->socket(), {"--n", k_n, "--reps", k_reps});
    Ctl ctl(d->socket());
    ASSERT_TRUE(wait_kernel(ctl)) << d->log();
    uint64_t id = submit(ctl, k_fast, "cuda", {{"comparison", "bitwise"}});
    json job = ctl.wait_job(id);
    ASSERT_EQ(job.value("verdict", ""), "verified") << job.dump(2);
    expect_app_correct(app);
    ASSERT_TRUE(d->stop());
  }
  fs::path captures = dir.path() / "state" / "captures";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(captures)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 2u);
  for (const auto& f : files) {
    EXPECT_EQ(f.extension(), ".cap");
    EXPECT_EQ(fs::status(f).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write)
        << f;
  }
  // A corrupt file among them is removed, not trusted.
  std::ofstream(captures / "garbage.cap") << "HCAP but not really";

  auto d = start_daemon(cfg, dir.path());
  ASSERT_TRUE(d);
  Ctl ctl(d->socket());
  const std::string wrong =
      "extern \"C\" __global__ void accumulate(int* out, const int* in, int n, "
      "int reps)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "    if (i < n) out[i] = in[i] * (reps + 1);\n}\n";
  uint64_t id = submit(ctl, wrong, "cuda", {{"comparison", "bitwise"}});
  ASSERT_NE(id, 0u);
  json job = ctl.wait_job(id, 60s);
  EXPECT_EQ(job.value("verdict", ""), "mismatch") << job.dump(2) << d->log();
  job = ctl.wait_job(submit(ctl, k_fast, "cuda", {{"comparison", "bitwise"}}), 60s);
  EXPECT_EQ(job.value("verdict", ""), "verified") << job.dump(2) << d->log();
  EXPECT_EQ(job.value("captures_used", 0), 2) << job.dump(2);
  EXPECT_NE(d->log().find("2 persisted capture(s) loaded"), std::string::npos) << d->log();
  EXPECT_NE(d->log().find("garbage.cap: "), std::string::npos) << d->log();
  EXPECT_FALSE(fs::exists(captures / "garbage.cap"));
}

// A variant that goes wrong only after its validation (a launch counter in module-scope memory,
// let through here by turning the static checks off) serves, until a shadow check of one of its
// served launches finds its outputs differ from the original's: it is withdrawn from the process,
// recorded as such with the pattern, and the application's results are right again.
TEST(Loop, ShadowCheckWithdrawsAVariantThatGoesWrongLater) {
  auto d = start_daemon(config_text(2, "shadow_every = 10\nstatic_checks = false\n"));
  ASSERT_TRUE(d);
  App app(d->socket(), {"--n", k_n, "--reps", k_reps});
  Ctl ctl(d->socket());
  ASSERT_TRUE(wait_kernel(ctl)) << d->log();
  // Faster than the original, and right for the first 60 launches of its module.
  const std::string late = R"(
__device__ unsigned served;

extern "C" __global__ void accumulate(int* out, const int* in, int n, int reps)
{
    __shared__ unsigned seen;
    if (threadIdx.x == 0) seen = served;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * reps + (seen >= 60 ? 1 : 0);
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&served, 1u);
}
)";
  uint64_t id = submit(ctl, late, "cuda", {{"comparison", "bitwise"}});
  ASSERT_NE(id, 0u);
  json job = ctl.wait_job(id);
  ASSERT_EQ(job.value("verdict", ""), "verified") << job.dump(2) << d->log();

  // It serves; the shadow checks pass while it is right, then one catches it.
  json withdrawn;
  ASSERT_TRUE(wait_for(
      [&] {
        json variants = ctl.request({{"cmd", "variants"}, {"target", "accumulate"}});
        for (const auto& v : variants["result"]["variants"]) {
          if (v.value("verdict", "").find("withdrawn by a shadow check") != std::string::npos)
            withdrawn = v;
        }
        return !withdrawn.is_null();
      },
      240s))
      << d->log();
  EXPECT_EQ(withdrawn.value("state", ""), "rejected") << withdrawn.dump(2);
  json k = ctl.kernel("accumulate");
  uint64_t served_at_withdrawal = k.value("variant_launches", uint64_t(0));
  EXPECT_GT(served_at_withdrawal, 60u) << k.dump(2);

  // honectl show says why, naming the pattern.
  RunResult show = run_honectl({"show", withdrawn.value("id", ""), "--socket", d->socket()});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("withdrawn by a shadow check"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("correct-while-checked"), std::string::npos) << show.out;
  auto metrics = run_honectl({"metrics", "--socket", d->socket()});
  EXPECT_NE(metrics.out.find("hone_shadow_checks_total{result=\"failed\"} 1"), std::string::npos)
      << metrics.out;
  EXPECT_EQ(metrics.out.find("hone_shadow_checks_total{result=\"passed\"} 0"), std::string::npos)
      << "no check passed while the variant was right: " << metrics.out;

  // The original serves again: 60 more launches as honed counts them, none by the variant, and at
  // least the last 30 of the application's right. honed's counts trail the application by a
  // report (200 ms): launches the variant served before the withdrawal may still arrive, so the
  // count it starts from is taken once they have.
  std::this_thread::sleep_for(1s);
  json k0 = ctl.kernel("accumulate");
  json k1;
  ASSERT_TRUE(wait_for(
      [&] {
        k1 = ctl.kernel("accumulate");
        return k1.value("launches", uint64_t(0)) >= k0.value("launches", uint64_t(0)) + 60;
      },
      120s))
      << k1.dump(2);
  AppResult r = app.finish();
  EXPECT_GT(r.mismatches, 0) << "the variant never went wrong: " << r.run.out << r.run.err;
  EXPECT_GE(r.launches - r.last_mismatch, 30) << r.run.out << r.run.err;
  json k2 = ctl.kernel("accumulate");
  EXPECT_EQ(k2.value("variant_launches", uint64_t(0)), k0.value("variant_launches", uint64_t(0)))
      << "the variant kept serving after its withdrawal: " << k0.dump(2) << k2.dump(2);
}

