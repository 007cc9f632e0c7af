// hone-bench-loop [ROUNDS]: how long a kernel that became hot waits for a faster variant to serve
// it, on the emulated device, with real processes (the application under libhone.so, honed,
// its worker).
//
// Each round (default 5) starts a fresh honed and a fresh application (tests/apps/serve_app.cpp,
// n = 1024, reps = 4096). When honed's kernel list shows the kernel hot ([optimizer]
// hot_min_launches launches), the bench submits the faster kernel, as the agent or an engineer
// would, and times, from that moment:
//   capture  until the job leaves `waiting` (the shim captured launches; a worker took the job),
//   verdict  until the job is done (compile, validate on every capture, benchmark),
//   serving  until the application reports launches served by the variant.
// The candidate's own creation is not in these times (the agent's share of the loop). Polls
// every 20 ms (faster polling loads the 2-core machine it shares with the application); the
// shim reports every 100 ms (the least honed allows), which bounds the resolution of `serving`.
// Prints every round and the medians; asserts nothing.
#include "daemon_process.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

constexpr int k_hot_min_launches = 100;

constexpr const char* k_fast = R"(
extern "C" __global__ void accumulate(int* out, const int* in, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i] * reps;
}
)";

std::string config_text() {
  return std::string("[server]\nreport_interval_ms = 100\n") + "[worker]\ndriver = \"" +
         HONE_EMU_LIBRARY_DIR + "/libcuda.so.1\"\n" +
         "[optimizer]\nenabled = false\nhot_min_launches = " + std::to_string(k_hot_min_launches) +
         "\n[validation]\nwarmup = 3\nruns = 21\n";
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Round {
  double capture_ms = -1, verdict_ms = -1, serving_ms = -1;
  double speedup = 0;
  std::string failure;
};

json request(Client& c, const json& req, int fd = -1) {
  auto f = c.control(req.dump(), fd);
  if (!f) return json{{"ok", false}, {"error", f.error().message}};
  if (f->fd >= 0) ::close(f->fd);
  auto j = json::parse(f->payload, nullptr, false);
  return j.is_discarded() ? json{{"ok", false}} : j;
}

json kernel(Client& c) {
  json r = request(c, {{"cmd", "kernels"}});
  for (const auto& k : r.value("result", json::object()).value("kernels", json::array())) {
    if (k.value("name", "") == "accumulate") return k;
  }
  return nullptr;
}

Round run_round() {
  Round out;
  DaemonOptions o;
  o.config = config_text();
  o.log_level = "info";
  auto d = DaemonProcess::start(o);
  if (!d) {
    out.failure = d.error().message;
    return out;
  }
  TempDir dir("hone-bench-loop");
  std::string stop = (dir.path() / "stop").string();
  RunOptions ro;
  ro.timeout = 300s;
  ro.env["LD_PRELOAD"] = HONE_SHIM_LIBRARY;
  ro.env["LD_LIBRARY_PATH"] = HONE_EMU_LIBRARY_DIR;
  ro.env["HONE_SOCKET"] = (*d)->socket();
  auto app = std::async(std::launch::async, [&] {
    return run_program({std::string(HONE_TESTAPP_DIR) + "/hone-testapp-serve", "--seconds", "240",
                        "--n", "1024", "--reps", "4096", "--stop-file", stop},
                       ro);
  });
  auto finish = [&] {
    std::ofstream(stop) << "stop\n";
    RunResult r = app.get();
    if (r.exit_code != 0 && out.failure.empty()) {
      out.failure = "the application failed: " + r.err;
    }
  };
  auto c = connect_as((*d)->socket(), proto::ClientKind::ctl);
  if (!c) {
    out.failure = c.error().message;
    finish();
    return out;
  }
  bool hot = wait_for(
      [&] {
        json k = kernel(*c);
        std::this_thread::sleep_for(20ms);
        return !k.is_null() && k.value("launches", 0) >= k_hot_min_launches;
      },
      120s);
  if (!hot) {
    out.failure = "the kernel never became hot";
    finish();
    return out;
  }
  auto t0 = Clock::now();
  int fd = ::memfd_create("candidate", MFD_CLOEXEC);
  std::string code = k_fast;
  if (fd < 0 || ::write(fd, code.data(), code.size()) != ssize_t(code.size())) {
    out.failure = "memfd";
    finish();
    return out;
  }
  json sub = request(
      *c,
      {{"cmd", "submit"}, {"target", "accumulate"}, {"kind", "cuda"}, {"comparison", "bitwise"}},
      fd);
  ::close(fd);
  if (!sub.value("ok", false)) {
    out.failure = "submit: " + sub.dump();
    finish();
    return out;
  }
  uint64_t id = sub["result"]["job"].get<uint64_t>();
  json job;
  bool done = wait_for(
      [&] {
        job = request(*c, {{"cmd", "job"}, {"id", id}}).value("result", json::object());
        std::string state = job.value("state", "");
        if (state != "waiting" && out.capture_ms < 0) out.capture_ms = ms_since(t0);
        std::this_thread::sleep_for(20ms);
        return state == "done";
      },
      240s);
  out.verdict_ms = ms_since(t0);
  if (!done || job.value("verdict", "") != "verified") {
    out.failure = "job: " + job.dump();
    finish();
    return out;
  }
  out.speedup = job.value("speedup", 0.0);
  bool serving = wait_for(
      [&] {
        json k = kernel(*c);
        std::this_thread::sleep_for(20ms);
        return !k.is_null() && k.value("variant_launches", 0) > 0;
      },
      60s);
  if (serving)
    out.serving_ms = ms_since(t0);
  else
    out.failure = "the variant never served: " + kernel(*c).dump();
  if (std::getenv("HONE_BENCH_LOG")) std::fprintf(stderr, "%s\n", (*d)->log().c_str());
  finish();
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  if (rounds <= 0 || argc > 2) {
    std::fprintf(stderr, "usage: %s [ROUNDS]\n", argv[0]);
    return 2;
  }
  std::printf("hone-bench-loop: hot kernel -> submitted candidate -> variant serving, emulated "
              "device, %d rounds (fresh honed and application each)\n",
              rounds);
  std::printf("  round  capture ms  verdict ms  serving ms  speedup\n");
  std::vector<double> cap, ver, serve;
  int failed = 0;
  for (int r = 0; r < rounds; ++r) {
    Round x = run_round();
    if (!x.failure.empty()) {
      std::printf("  %5d  failed: %s\n", r + 1, x.failure.c_str());
      ++failed;
      continue;
    }
    std::printf("  %5d  %10.1f  %10.1f  %10.1f  %6.2fx\n", r + 1, x.capture_ms, x.verdict_ms,
                x.serving_ms, x.speedup);
    cap.push_back(x.capture_ms);
    ver.push_back(x.verdict_ms);
    serve.push_back(x.serving_ms);
  }
  if (!serve.empty()) {
    std::printf("  median %10.1f  %10.1f  %10.1f\n", median(cap), median(ver), median(serve));
    std::printf("hot -> serving: median %.0f ms over %zu rounds; validation (capture -> verdict) "
                "is %.0f%% of it\n",
                median(serve), serve.size(),
                100.0 * (median(ver) - median(cap)) / std::max(median(serve), 1e-9));
  }
  return failed ? 1 : 0;
}
