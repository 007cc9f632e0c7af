// hone-bench-strategies [SECONDS]: what each built-in strategy of the agent gets out of the demo
// application's kernels: per kernel and strategy, the best verified speedup, or why there is none.
//
// One run with real processes on the emulated device: a fresh honed (its optimizer on, every
// built-in strategy) and hone-example-mlp under libhone.so (examples/mlp: five NVRTC kernels whose
// size arguments never change). It waits until honed has settled — every hot kernel tried by
// every strategy, no strategy session still working, no job waiting or running — or SECONDS
// (default 300) have passed, then reads `status` (kernels, jobs, variants, the agent's
// strategies), which is what `honectl status --json` prints, and the application's own checks.
//
// Speedups are the validation worker's: medians of the emulated device's modeled time (its cost
// model, emu/README.md: an analytical Hopper model), original against candidate on captured
// launches. Prints the table and the application's step time before and after;
// asserts nothing about speed. Exit status 1 only when something failed: honed did not start, or
// the application reported a mismatch (hone changed its results) or an error.
#include "daemon_process.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

constexpr int k_hot_min_launches = 20;
constexpr int k_app_kernels = 5; // conv1d, matmul, bias_act, layernorm, softmax

std::string config_text() {
  return std::string("[server]\nreport_interval_ms = 200\n") + "[worker]\ndriver = \"" +
         HONE_EMU_LIBRARY_DIR + "/libcuda.so.1\"\n" +
         "[optimizer]\nhot_min_launches = " + std::to_string(k_hot_min_launches) +
         "\ngpu_share = 1.0\n"
         // The emulated device's modeled times do not vary from run to run: fewer runs measure
         // the same medians.
         "[validation]\nwarmup = 1\nruns = 11\n";
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// "<image hex>:<entry>" -> "<entry>".
std::string entry_of(const std::string& key) {
  auto colon = key.find(':');
  return colon == std::string::npos ? key : key.substr(colon + 1);
}

json status(Ctl& ctl) {
  json r = ctl.request({{"cmd", "status"}, {"top", 100}});
  return r.value("ok", false) ? r["result"] : json();
}

std::vector<std::string> strategy_ids(const json& st) {
  std::vector<std::string> ids;
  for (const auto& s : st.value("agent", json::object()).value("strategies", json::array())) {
    ids.push_back(s.value("id", ""));
  }
  return ids;
}

bool pending(const json& job) {
  return job.value("state", "") != "done";
}

// Whether honed has nothing more to do for the application's kernels; `why` says what it waits
// for otherwise.
bool settled(const json& st, std::string& why) {
  auto ids = strategy_ids(st);
  size_t hot = 0;
  for (const auto& k : st.value("kernels", json::array())) {
    if (k.value("launches", uint64_t(0)) < uint64_t(k_hot_min_launches)) continue;
    ++hot;
    std::set<std::string> tried;
    for (const auto& t : k.value("tried", json::array())) tried.insert(t.get<std::string>());
    for (const auto& id : ids) {
      if (!tried.count(id)) {
        why = k.value("name", "?") + " not yet tried by " + id;
        return false;
      }
    }
  }
  if (hot < size_t(k_app_kernels)) {
    why = std::to_string(hot) + " of " + std::to_string(k_app_kernels) + " kernels hot";
    return false;
  }
  size_t sessions = st.value("agent", json::object()).value("sessions", json::array()).size();
  if (sessions) {
    why = std::to_string(sessions) + " strategy session(s) working";
    return false;
  }
  size_t waiting = 0;
  for (const auto& j : st.value("jobs", json::array())) waiting += pending(j);
  if (waiting) {
    why = std::to_string(waiting) + " job(s) waiting or running";
    return false;
  }
  return true;
}

// What the jobs of one strategy on one kernel came to.
struct Cell {
  int candidates = 0;
  double best_verified = 0;
  std::string verified_description;
  double best_measured = 0;
  std::string best_measured_verdict; // the verdict of the job that measured best
  std::map<std::string, int> verdicts;
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string summary(const Cell& c, bool tried) {
  if (c.candidates == 0) return tried ? "not applicable" : "not tried (time bound)";
  if (c.best_verified > 0) return fmt("%.2fx", c.best_verified) + "  " + c.verified_description;
  std::string s = "none verified (";
  if (c.best_measured > 0) {
    s += fmt("best measured %.2fx, ", c.best_measured) + c.best_measured_verdict;
  } else {
    bool first = true;
    for (const auto& [v, n] : c.verdicts) {
      s += (first ? "" : ", ") + std::to_string(n) + " " + v;
      first = false;
    }
  }
  return s + ")";
}

// The step time the application measured at its first and its last check ("step_us T").
std::pair<double, double> step_times(const std::string& out) {
  std::regex check(R"(^check \d+ .* step_us ([0-9.]+) )");
  double first = 0, last = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, check)) {
      last = std::stod(m[1]);
      if (first == 0) first = last;
    }
  }
  return {first, last};
}

std::string last_line(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

} // namespace

int main(int argc, char** argv) {
  double limit_s = argc > 1 ? std::atof(argv[1]) : 300;
  if (limit_s <= 0 || argc > 2) {
    std::fprintf(stderr, "usage: %s [SECONDS]\n", argv[0]);
    return 2;
  }
  std::printf("hone-bench-strategies: the best verified speedup of each built-in strategy on the "
              "kernels of hone-example-mlp\n(emulated device, modeled time; one run, at most %.0f "
              "s; the LLM strategy is not included: it needs a model endpoint)\n",
              limit_s);
  std::fflush(stdout);

  DaemonOptions o;
  o.config = config_text();
  o.log_level = "info";
  auto d = DaemonProcess::start(o);
  if (!d) {
    std::printf("honed did not start: %s\n", d.error().message.c_str());
    return 1;
  }
  AppOptions ao;
  ao.program = HONE_EXAMPLE_MLP;
  ao.args = {"--seconds", std::to_string(int(limit_s) + 120), "--check-every", "50"};
  ao.socket = (*d)->socket();
  ao.shim = HONE_SHIM_LIBRARY;
  ao.driver_dir = HONE_EMU_LIBRARY_DIR;
  ao.timeout = std::chrono::milliseconds(int64_t((limit_s + 180) * 1000));
  BackgroundApp app(ao);

  auto t0 = Clock::now();
  json st;
  std::string why = "honed not reached";
  bool done = false;
  double next_progress = 15;
  try {
    Ctl ctl((*d)->socket());
    while (seconds_since(t0) < limit_s) {
      st = status(ctl);
      if (!st.is_null() && settled(st, why)) {
        done = true;
        break;
      }
      if (!(*d)->running()) {
        why = "honed exited";
        break;
      }
      if (seconds_since(t0) >= next_progress) {
        size_t finished = 0;
        for (const auto& j : st.value("jobs", json::array())) finished += !pending(j);
        std::printf("  %3.0f s: %zu job(s) done; waiting: %s\n", seconds_since(t0), finished,
                    why.c_str());
        std::fflush(stdout);
        next_progress += 15;
      }
      std::this_thread::sleep_for(500ms);
    }
    st = status(ctl);
  } catch (const std::exception& e) {
    why = e.what();
  }
  double elapsed = seconds_since(t0);
  RunResult r = app.finish();
  bool honed_ok = (*d)->running();

  // Per kernel (ranked by estimated GPU time) and strategy.
  std::vector<std::string> strategies = strategy_ids(st);
  std::map<std::string, std::map<std::string, Cell>> cells;
  std::map<std::string, std::set<std::string>> tried;
  std::vector<std::string> kernels;
  std::map<std::string, double> original_ns; // the original's median in validation
  for (const auto& k : st.value("kernels", json::array())) {
    std::string name = k.value("name", "?");
    kernels.push_back(name);
    for (const auto& t : k.value("tried", json::array())) tried[name].insert(t.get<std::string>());
  }
  size_t jobs = 0, verified = 0;
  for (const auto& j : st.value("jobs", json::array())) {
    std::string strategy = j.value("strategy", "?");
    if (std::find(strategies.begin(), strategies.end(), strategy) == strategies.end()) {
      strategies.push_back(strategy);
    }
    std::string kernel = entry_of(j.value("kernel", "?"));
    Cell& c = cells[kernel][strategy];
    original_ns[kernel] = std::max(original_ns[kernel], j.value("original_ns", 0.0));
    ++c.candidates;
    ++jobs;
    if (pending(j)) {
      ++c.verdicts["unfinished"];
      continue;
    }
    std::string verdict = j.value("verdict", "?");
    ++c.verdicts[verdict];
    double speedup = j.value("speedup", 0.0);
    if (verdict == "verified") {
      ++verified;
      if (speedup > c.best_verified) {
        c.best_verified = speedup;
        c.verified_description = j.value("description", "");
      }
    } else if (speedup > c.best_measured) {
      c.best_measured = speedup;
      c.best_measured_verdict = verdict;
    }
  }

  std::printf("\n%s after %.0f s: %zu candidates, %zu verified%s\n\n", done ? "settled" : "stopped",
              elapsed, jobs, verified, done ? "" : (" (still " + why + ")").c_str());
  std::printf("  %-10s %9s  %-14s %10s  %s\n", "KERNEL", "ORIGINAL", "STRATEGY", "CANDIDATES",
              "BEST VERIFIED SPEEDUP (modeled)");
  for (const auto& name : kernels) {
    double ns = original_ns[name];
    bool first = true;
    for (const auto& s : strategies) {
      const Cell& c = cells[name][s];
      std::printf("  %-10s %9s  %-14s %10d  %s\n", first ? name.c_str() : "",
                  first ? (ns > 0 ? fmt("%.2f us", ns / 1000) : "-").c_str() : "", s.c_str(),
                  c.candidates, summary(c, tried[name].count(s) > 0).c_str());
      first = false;
    }
  }
  std::printf("\n  %-14s %10s %9s  %s\n", "STRATEGY", "CANDIDATES", "VERIFIED", "BEST");
  for (const auto& s : strategies) {
    int n = 0, v = 0;
    double best = 0;
    for (const auto& [name, by_strategy] : cells) {
      auto it = by_strategy.find(s);
      if (it == by_strategy.end()) continue;
      n += it->second.candidates;
      v += it->second.best_verified > 0;
      best = std::max(best, it->second.best_verified);
    }
    std::printf("  %-14s %10d %9d  %s\n", s.c_str(), n, v,
                best > 0 ? fmt("%.2fx", best).c_str() : "-");
  }
  std::printf(
      "  (ORIGINAL: the original kernel's median time in validation; VERIFIED: kernels with "
      "a verified variant of the strategy)\n");

  auto [first, last] = step_times(r.out);
  std::printf("\napplication: one step took %.2f us of device time at its first check, %.2f us at "
              "its last (%.2fx)\n",
              first, last, last > 0 ? first / last : 0.0);
  std::printf("application: %s\n", last_line(r.out).c_str());
  bool app_ok = r.exit_code == 0 && last_line(r.out).find("result ok") != std::string::npos;
  if (!app_ok) {
    std::printf("FAILED: the application exited with %d%s\n%s\n", r.exit_code,
                r.timed_out ? " (timed out)" : "", r.err.c_str());
  }
  if (!honed_ok) std::printf("FAILED: honed is not running any more:\n%s\n", (*d)->log().c_str());
  return app_ok && honed_ok ? 0 : 1;
}
