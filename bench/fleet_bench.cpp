// hone-bench-fleet [ROUNDS]: what a warm remote saves a host (issue 15). From the moment honed
// sees a kernel hot to the moment the application's launches are served by a faster variant, on
// the emulated device with real processes: host A, whose remote is empty, runs its strategies,
// validates and publishes; host B, sharing the remote (a redis-server started here on loopback),
// finds A's variant, validates it on its own captures and serves it without a strategy. Each round
// (default 3) uses a fresh redis-server and fresh honeds; prints each round, the medians and their
// ratio (A over B), all from one run. The application is tests/apps/spec_app.cpp at 1M elements.
// Polls every 50 ms; the shim reports every 200 ms, which bounds the resolution. Asserts nothing.
#include "daemon_process.hpp"
#include "remote_servers.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

constexpr uint64_t k_hot = 20; // emu_agent_config's hot_min_launches

struct Times {
  double to_serving = -1; // seconds from hot to served
  bool adopted = false;   // the remote had it
};

uint64_t field(const json& j, const char* name) {
  return j.is_null() ? 0 : j.value(name, uint64_t(0));
}

// Runs one host with `remote_config` until its variant serves; seconds from hot to serving.
Times run_host(const std::string& remote_config, bool wait_published) {
  Times t;
  DaemonOptions o;
  o.config = emu_agent_config(HONE_EMU_LIBRARY_DIR, remote_config);
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "400000000");
  auto d = DaemonProcess::start(std::move(o));
  if (!d) {
    std::fprintf(stderr, "honed did not start: %s\n", d.error().message.c_str());
    return t;
  }
  AppOptions a;
  a.program = std::string(HONE_TESTAPP_DIR) + "/hone-testapp-spec";
  a.args = {"--seconds", "300", "--n", "1048576", "--rounds", "2"};
  a.socket = (*d)->socket();
  a.shim = HONE_SHIM_LIBRARY;
  a.driver_dir = HONE_EMU_LIBRARY_DIR;
  a.env["HONE_EMU_THREADS"] = "1";
  BackgroundApp app(a);
  Ctl ctl((*d)->socket());
  std::optional<Clock::time_point> hot;
  auto deadline = Clock::now() + 300s;
  while (Clock::now() < deadline) {
    json k = ctl.kernel("mix_rounds");
    if (!hot && field(k, "launches") >= k_hot) hot = Clock::now();
    if (hot && field(k, "variant_launches") > 0) {
      t.to_serving = std::chrono::duration<double>(Clock::now() - *hot).count();
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  json fleet = ctl.request({{"cmd", "fleet"}})["result"]["remotes"];
  t.adopted = !fleet.empty() && field(fleet[0], "hits") > 0;
  if (wait_published) {
    while (Clock::now() < deadline &&
           field(ctl.request({{"cmd", "fleet"}})["result"]["remotes"][0], "published") == 0) {
      std::this_thread::sleep_for(50ms);
    }
  }
  app.finish();
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  std::printf("hone-bench-fleet: %d round(s); seconds from 'kernel hot' to 'variant serving'\n",
              rounds);
  std::printf("%-6s %22s %22s %8s\n", "round", "A: strategies (s)", "B: warm remote (s)", "A/B");
  std::vector<double> as, bs;
  for (int r = 0; r < rounds; ++r) {
    Dir dir;
    auto redis = start_redis(dir);
    if (!redis) {
      std::fprintf(stderr, "redis-server did not start (Debian package redis-server)\n");
      return 1;
    }
    std::string config = "[store.remote]\nurls = [\"redis://127.0.0.1:" +
                         std::to_string(redis->port()) + "\"]\n";
    Times a = run_host(config, true);
    Times b = run_host(config, false);
    if (a.to_serving < 0 || b.to_serving < 0 || a.adopted || !b.adopted) {
      std::printf("%-6d %22s %22s %8s  (a host did not serve, or B did not adopt)\n", r + 1,
                  a.to_serving < 0 ? "-" : std::to_string(a.to_serving).c_str(),
                  b.to_serving < 0 ? "-" : std::to_string(b.to_serving).c_str(), "-");
      continue;
    }
    as.push_back(a.to_serving);
    bs.push_back(b.to_serving);
    std::printf("%-6d %22.2f %22.2f %7.2fx\n", r + 1, a.to_serving, b.to_serving,
                a.to_serving / b.to_serving);
  }
  if (as.empty()) return 1;
  double ma = median(as), mb = median(bs);
  std::printf("median %22.2f %22.2f %7.2fx\n", ma, mb, ma / mb);
  return 0;
}
