// hone-bench-apps: real applications, plain and under hone, on the emulated device: what hone
// finds in their kernels and what it does to the application's own figure.
//
//   hone-bench-apps [--apps hashcat,llama] [--rounds N] [--settle S] [--decode N]
//                   [--llama-type q4_0|f16] [--keep DIR]
//
// Per application, in one run:
// 1. the application plain (no libhone.so) on the emulated device: its result and, from the
//    device's account of every launch (HONE_EMU_LOG=debug: "launch K: N ns modeled, ...; X-bound"),
//    the modeled time and bound of each kernel;
// 2. a fresh honed (every built-in strategy, low hotness thresholds) and the application under
//    libhone.so, up to N rounds (default 3), each followed by honed settling (no job waiting, no
//    strategy session working) or S seconds (default 240);
// 3. the application once more under hone, served from the store: its result must equal the plain
//    run's, and its figure is compared with the plain run's.
//
// The applications and their figures (modeled device time: the emulated device's cost model,
// emu/README.md, "Cost model: kernels", the same for every run whatever the host's load):
// - hashcat (Debian's 6.2.6): MD5 (-m 0) with its optimized kernels (-O), a mask attack over
//   100000 candidates (hone?d?d?d?d?d) against two hashes, one of which is in the keyspace; the
//   figure is candidates per second of modeled device time (every kernel of the run). hashcat's
//   own "Speed.#1" line is printed too: it is the host's wall clock through an emulator here.
// - llama.cpp (node-llama-cpp 3.22.1's prebuilt CUDA backend, tests/llama): one Llama-3-8B-shaped
//   layer (4096 wide, 14336 FFN, 32 heads, 8 KV heads; Q4_0 or F16 random weights; a 512-token
//   vocabulary), a 2-token prompt evaluated one token at a time, then --decode tokens (default 8),
//   greedy; the figure is evaluated tokens per second of modeled device time.
//
// Prints, per application, its top kernels by share of modeled time with their bound, CODE, each
// strategy's outcome and what serves, then the figure before and after. Asserts nothing about
// speed; exits 1 when an application failed or its result changed under hone.
#include "daemon_process.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
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
namespace fs = std::filesystem;

namespace {

struct Options {
  std::vector<std::string> apps{"hashcat", "llama"};
  int rounds = 3;
  double settle_s = 240;
  int decode = 8;
  std::string llama_type = "q4_0";
  std::string keep;
  bool whole = false; // captures of whole allocations (HONE_CAPTURE_BOUNDS=whole in the apps)
};

bool g_whole_captures = false;

[[noreturn]] void usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "hone-bench-apps: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: hone-bench-apps [--apps hashcat,llama] [--rounds N] [--settle SECONDS]\n"
               "                       [--decode N] [--llama-type q4_0|f16] [--keep DIR]\n"
               "                       [--captures bounded|whole]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") usage("");
    if (i + 1 >= argc) usage(a + " wants a value");
    std::string v = argv[++i];
    if (a == "--apps") {
      o.apps.clear();
      std::stringstream s(v);
      for (std::string app; std::getline(s, app, ',');) {
        if (app != "hashcat" && app != "llama") usage("unknown application " + app);
        o.apps.push_back(app);
      }
    } else if (a == "--rounds") {
      o.rounds = std::atoi(v.c_str());
      if (o.rounds < 1) usage("--rounds wants a positive number");
    } else if (a == "--settle") {
      o.settle_s = std::atof(v.c_str());
      if (o.settle_s <= 0) usage("--settle wants a positive number");
    } else if (a == "--decode") {
      o.decode = std::atoi(v.c_str());
      if (o.decode < 1) usage("--decode wants a positive number");
    } else if (a == "--llama-type") {
      if (v != "q4_0" && v != "f16") usage("--llama-type is q4_0 or f16");
      o.llama_type = v;
    } else if (a == "--keep") {
      o.keep = v;
    } else if (a == "--captures") {
      if (v != "bounded" && v != "whole") usage("--captures is bounded or whole");
      o.whole = v == "whole";
    } else {
      usage("unknown option " + a);
    }
  }
  return o;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What the emulated device said of one kernel's launches in a run.
struct KernelTime {
  double ns = 0;
  uint64_t launches = 0;
  std::map<std::string, uint64_t> bounds; // bound -> launches
  std::string bound() const {
    std::string best;
    uint64_t n = 0;
    for (const auto& [b, c] : bounds) {
      if (c > n) best = b, n = c;
    }
    return best;
  }
};

struct AppRun {
  bool ok = false;
  std::string error;
  std::string result;   // what must not change: the cracked plaintexts, the generated tokens
  std::string own;      // the application's own speed line, when it prints one
  double units = 0;     // candidates, tokens
  std::map<std::string, KernelTime> kernels;
  double modeled_ns = 0;
  double wall_s = 0;
  double figure() const { return modeled_ns > 0 ? units / (modeled_ns * 1e-9) : 0; }
};

// The device's "launch K: N ns modeled, ...; X-bound, ..." lines.
void read_modeled(const std::string& err, AppRun& run) {
  static const std::regex line(R"(hone-emu: launch ([^ :]+): ([0-9]+) ns modeled[^;]*; ([A-Za-z0-9]+)-bound)");
  std::istringstream in(err);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, line)) continue;
    KernelTime& k = run.kernels[m[1]];
    double ns = std::stod(m[2]);
    k.ns += ns;
    ++k.launches;
    ++k.bounds[m[3]];
    run.modeled_ns += ns;
  }
}

// One application: how to run it, and how to read what it printed.
class App {
public:
  virtual ~App() = default;
  virtual std::string name() const = 0;
  virtual std::string what() const = 0;
  virtual std::string unit() const = 0;
  // Make its inputs in `dir` (once); an error message, or empty.
  virtual std::string prepare(const fs::path& dir) = 0;
  virtual AppRun run(const fs::path& dir, const std::string& socket, bool hone) = 0;
};

std::map<std::string, std::string> emu_env(const fs::path& dir) {
  return {{"HONE_EMU_LOG", "debug"},
          {"HONE_EMU_EXEC", "interpret"},
          {"HONE_EMU_CACHE_DIR", (dir / "emu-cache").string()}};
}

RunResult run_app(const std::vector<std::string>& argv, std::map<std::string, std::string> env,
                  const std::string& ld_path, const std::string& socket, bool hone,
                  std::chrono::milliseconds timeout) {
  RunOptions ro;
  ro.timeout = timeout;
  ro.env = std::move(env);
  ro.env["LD_LIBRARY_PATH"] = ld_path;
  if (hone) {
    ro.env["LD_PRELOAD"] = HONE_SHIM_LIBRARY;
    ro.env["HONE_SOCKET"] = socket;
    if (g_whole_captures) ro.env["HONE_CAPTURE_BOUNDS"] = "whole";
  } else {
    ro.env["LD_PRELOAD"] = "";
  }
  return run_program(argv, ro);
}

std::string tail(const std::string& s, size_t n = 1500) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

class Hashcat final : public App {
public:
  std::string name() const override { return "hashcat"; }
  std::string what() const override {
    return "hashcat -m 0 -a 3 -O (MD5, optimized kernels), mask hone?d?d?d?d?d: 100000 "
           "candidates against 2 hashes";
  }
  std::string unit() const override { return "candidates/s"; }

  std::string prepare(const fs::path& dir) override {
    RunResult v = run_program({"/bin/sh", "-c", "command -v hashcat"});
    if (v.exit_code != 0) return "no hashcat on PATH ('make deps' installs it)";
    m_hashcat = v.out.substr(0, v.out.find('\n'));
    // MD5 of hone58327 (in the keyspace) and of a word that is not: the whole keyspace runs.
    std::ofstream(dir / "hashes.txt") << "33cf5b8938c6f611db3294173f173e84\n"
                                         "1d108c5731171727683be3ab208abe93\n";
    return "";
  }

  AppRun run(const fs::path& dir, const std::string& socket, bool hone) override {
    AppRun out;
    const fs::path home = dir / ("home-" + std::to_string(m_runs++)); // a fresh hashcat home
    fs::create_directories(home);
    const fs::path outfile = home / "cracked.txt";
    auto env = emu_env(dir);
    env["HOME"] = home.string();
    env["XDG_CACHE_HOME"] = (home / ".cache").string();
    env["XDG_DATA_HOME"] = (home / ".local/share").string();
    env["XDG_CONFIG_HOME"] = (home / ".config").string();
    // -n 1 -u 64 -T 64 (hashcat_test.sh says why these sizes on the emulated device): 8448 work
    // items per launch, 64 candidates each.
    std::vector<std::string> argv = {m_hashcat, "-m", "0", "-a", "3", "-O", "-d", "1", "--force",
                                     "-n", "1", "-u", "64", "-T", "64", "--backend-ignore-opencl",
                                     "--potfile-disable", "--session=hone-bench",
                                     "--outfile=" + outfile.string(), "--outfile-format=2",
                                     (dir / "hashes.txt").string(), "hone?d?d?d?d?d"};
    auto t0 = Clock::now();
    RunResult r = run_app(argv, env, std::string(HONE_EMU_LIBRARY_DIR) + ":" + HONE_CUDA_LIB_DIR,
                          socket, hone, 900s);
    out.wall_s = seconds_since(t0);
    // 1: exhausted (one of the two hashes is not in the keyspace), with the other cracked.
    if (r.exit_code != 1 && r.exit_code != 0) {
      out.error = "hashcat exited " + std::to_string(r.exit_code) +
                  (r.timed_out ? " (timed out)" : "") + ":\n" + tail(r.out + r.err);
      return out;
    }
    if ((r.out + r.err).find("elf-test") != std::string::npos &&
        (r.out + r.err).find("Finished self-test") == std::string::npos) {
      out.error = "hashcat's self-test did not finish:\n" + tail(r.out + r.err);
      return out;
    }
    std::ifstream in(outfile);
    std::stringstream cracked;
    cracked << in.rdbuf();
    out.result = cracked.str();
    while (!out.result.empty() && out.result.back() == '\n') out.result.pop_back();
    std::smatch m;
    static const std::regex progress(R"(Progress\.+: ([0-9]+)/([0-9]+))");
    if (std::regex_search(r.out, m, progress)) out.units = std::stod(m[1]);
    static const std::regex speed(R"((Speed\.#1\.+: [^\n]*))");
    if (std::regex_search(r.out, m, speed)) out.own = m[1];
    read_modeled(r.err, out);
    out.ok = !out.result.empty() && out.units > 0;
    if (!out.ok) out.error = "no crack or no progress line:\n" + tail(r.out + r.err);
    return out;
  }

private:
  std::string m_hashcat;
  int m_runs = 0;
};

class Llama final : public App {
public:
  Llama(std::string type, int decode) : m_type(std::move(type)), m_decode(decode) {}
  std::string name() const override { return "llama.cpp"; }
  std::string what() const override {
    return "llama.cpp (node-llama-cpp 3.22.1), one Llama-3-8B-shaped layer, " + m_type +
           " random weights; 2 prompt tokens one at a time, then " + std::to_string(m_decode) +
           " decoded";
  }
  std::string unit() const override { return "tokens/s"; }

  std::string prepare(const fs::path& dir) override {
    if (!fs::exists(HONE_LLAMA_GGUF)) return "no hone-llama-gguf (llama.cpp's deps: make deps)";
    if (!fs::exists(HONE_LLAMA_BINS)) return std::string("no prebuilt llama.cpp in ") + HONE_LLAMA_BINS;
    m_model = dir / ("layer-" + m_type + ".gguf");
    RunResult r = run_program({HONE_LLAMA_GGUF, m_model.string(), "--type", m_type, "--layers",
                               "1", "--embd", "4096", "--ff", "14336", "--heads", "32",
                               "--kv-heads", "8", "--vocab", "512", "--ctx", "64"},
                              RunOptions{std::chrono::milliseconds(300000), {}, {}});
    if (r.exit_code != 0) return "hone-llama-gguf failed: " + r.err;
    return "";
  }

  AppRun run(const fs::path& dir, const std::string& socket, bool hone) override {
    AppRun out;
    auto env = emu_env(dir);
    std::vector<std::string> argv = {"/usr/bin/env", "node", HONE_LLAMA_RUN, "--deps",
                                     HONE_LLAMA_DEPS, "--model", m_model.string(), "--gpu", "cuda",
                                     "--prompt", "2", "--batch", "1", "--decode",
                                     std::to_string(m_decode)};
    auto t0 = Clock::now();
    RunResult r = run_app(argv, env,
                          std::string(HONE_EMU_LIBRARY_DIR) + ":" + HONE_CUDA_LIB_DIR + ":" +
                              HONE_LLAMA_BINS,
                          socket, hone, 1800s);
    out.wall_s = seconds_since(t0);
    if (r.exit_code != 0) {
      out.error = "node run_llama.mjs exited " + std::to_string(r.exit_code) +
                  (r.timed_out ? " (timed out)" : "") + ":\n" + tail(r.err);
      return out;
    }
    json j = json::parse(r.out, nullptr, false);
    if (j.is_discarded() || !j.contains("generated")) {
      out.error = "run_llama.mjs printed no result:\n" + tail(r.out);
      return out;
    }
    out.result = j["prompt"].dump() + " -> " + j["generated"].dump();
    out.units = double(j["prompt"].size() + j["generated"].size());
    read_modeled(r.err, out);
    out.ok = out.modeled_ns > 0;
    if (!out.ok) out.error = "the emulated device logged no launches";
    return out;
  }

private:
  std::string m_type;
  int m_decode;
  fs::path m_model;
};

std::string daemon_config() {
  return std::string("[server]\nreport_interval_ms = 200\n") + "[worker]\ndriver = \"" +
         HONE_EMU_LIBRARY_DIR + "/libcuda.so.1\"\n" +
         "[optimizer]\nenabled = true\nhot_min_launches = 5\ngpu_share = 1.0\n"
         "[capture]\ncaptures_per_kernel = 2\ntimeout_s = 60\n"
         // modeled times do not vary: few runs measure the same medians
         "[validation]\nwarmup = 1\nruns = 5\nmin_runs = 3\njob_timeout_s = 600\n";
}

json status(Ctl& ctl) {
  json r = ctl.request({{"cmd", "status"}, {"top", 64}});
  return r.value("ok", false) ? r["result"] : json();
}

bool settled(const json& st, std::string& why) {
  // A job waiting while no process is attached waits for the application's next run (its
  // capture deadline counts only while one runs the kernel), and so does the strategy session
  // that proposed it: that is for the next round.
  const bool attached = !st.value("processes", json::array()).empty();
  size_t running = 0, waiting = 0;
  for (const auto& j : st.value("jobs", json::array())) {
    const std::string state = j.value("state", "");
    running += state == "running";
    waiting += state == "waiting";
  }
  if (running || (attached && waiting)) {
    why = std::to_string(running + (attached ? waiting : 0)) + " job(s) waiting or running";
    return false;
  }
  size_t sessions = st.value("agent", json::object()).value("sessions", json::array()).size();
  if (sessions && (attached || !waiting)) {
    why = std::to_string(sessions) + " strategy session(s) working";
    return false;
  }
  return true;
}

// Launches honed captured so far, by its log.
size_t captures_in(const std::string& log) {
  size_t n = 0;
  for (size_t at = 0; (at = log.find("captured a launch of", at)) != std::string::npos; ++at) ++n;
  return n;
}

std::string entry_of(const std::string& key) {
  auto colon = key.find(':');
  return colon == std::string::npos ? key : key.substr(colon + 1);
}

// A kernel's name, shortened for the table (llama.cpp's are long mangled templates).
std::string short_name(const std::string& n, size_t max = 38) {
  return n.size() <= max ? n : n.substr(0, max - 3) + "...";
}

struct Outcome {
  int jobs = 0;
  double best_verified = 0;
  std::map<std::string, int> verdicts;
  std::string example; // one message, for a strategy with nothing verified
};

std::string outcome_text(const Outcome& o) {
  if (o.jobs == 0) return "-";
  if (o.best_verified > 0) return fmt("verified %.2fx", o.best_verified);
  std::string s;
  for (const auto& [v, n] : o.verdicts) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + v;
  return s;
}

bool bench_app(App& app, const Options& o, const fs::path& dir) {
  std::printf("\n== %s ==\n%s\n", app.name().c_str(), app.what().c_str());
  std::fflush(stdout);
  fs::create_directories(dir);
  if (std::string e = app.prepare(dir); !e.empty()) {
    std::printf("FAILED: %s\n", e.c_str());
    return false;
  }
  AppRun plain = app.run(dir, "", false);
  if (!plain.ok) {
    std::printf("FAILED: the plain run: %s\n", plain.error.c_str());
    return false;
  }
  std::printf("plain: %.1f us of modeled device time, %s %s (%.0f s of wall time)\n",
              plain.modeled_ns / 1000, fmt("%.4g", plain.figure()).c_str(), app.unit().c_str(),
              plain.wall_s);
  std::fflush(stdout);

  DaemonOptions d_opts;
  d_opts.config = daemon_config();
  d_opts.log_level = "info";
  d_opts.env = emu_env(dir);
  d_opts.env.erase("HONE_EMU_LOG");
  d_opts.dir = dir / "honed";
  fs::create_directories(d_opts.dir);
  auto d = DaemonProcess::start(d_opts);
  if (!d) {
    std::printf("FAILED: honed did not start: %s\n", d.error().message.c_str());
    return false;
  }
  Ctl ctl((*d)->socket());
  bool same = true;
  json st;
  for (int round = 1; round <= o.rounds; ++round) {
    AppRun r = app.run(dir, (*d)->socket(), true);
    if (!r.ok) {
      std::printf("FAILED: round %d under hone: %s\n", round, r.error.c_str());
      return false;
    }
    if (r.result != plain.result) {
      std::printf("FAILED: round %d under hone changed the result:\n  plain: %s\n  hone:  %s\n",
                  round, plain.result.c_str(), r.result.c_str());
      same = false;
    }
    auto t0 = Clock::now();
    std::string why = "honed not reached";
    size_t jobs_before = st.is_null() ? 0 : st.value("jobs", json::array()).size();
    while (seconds_since(t0) < o.settle_s) {
      st = status(ctl);
      if (!st.is_null() && settled(st, why)) break;
      std::this_thread::sleep_for(1s);
    }
    st = status(ctl);
    size_t jobs = st.value("jobs", json::array()).size();
    std::printf("round %d under hone: %s %s, %zu job(s) in all; honed %s after %.0f s\n", round,
                fmt("%.4g", r.figure()).c_str(), app.unit().c_str(), jobs,
                settled(st, why) ? "settled" : ("still busy (" + why + ")").c_str(),
                seconds_since(t0));
    std::fflush(stdout);
    if (round > 1 && jobs == jobs_before && settled(st, why)) break; // nothing new to try
  }
  const size_t captures_before = captures_in((*d)->log());
  AppRun after = app.run(dir, (*d)->socket(), true);
  st = status(ctl);
  const size_t captured_in_last = captures_in((*d)->log()) - captures_before;
  if (!after.ok) {
    std::printf("FAILED: the last run under hone: %s\n", after.error.c_str());
    return false;
  }
  if (after.result != plain.result) {
    std::printf("FAILED: the last run under hone changed the result:\n  plain: %s\n  hone:  %s\n",
                plain.result.c_str(), after.result.c_str());
    same = false;
  }

  // Per kernel: the plain run's share, bound; honed's CODE, state, what serves; per strategy.
  std::map<std::string, json> kernels; // entry -> status kernel
  for (const auto& k : st.value("kernels", json::array())) kernels[k.value("name", "")] = k;
  std::vector<std::string> strategies;
  for (const auto& s : st.value("agent", json::object()).value("strategies", json::array())) {
    strategies.push_back(s.value("id", ""));
  }
  std::map<std::string, std::map<std::string, Outcome>> outcomes;
  std::map<std::string, int> verdict_totals;
  for (const auto& j : st.value("jobs", json::array())) {
    if (j.contains("check")) continue; // a strategy's own compile or validate check
    Outcome& oc = outcomes[entry_of(j.value("kernel", ""))][j.value("strategy", "?")];
    ++oc.jobs;
    std::string v = j.value("state", "") == "done" ? j.value("verdict", "?") : "unfinished";
    ++oc.verdicts[v];
    ++verdict_totals[v];
    if (v == "verified") oc.best_verified = std::max(oc.best_verified, j.value("speedup", 0.0));
  }
  std::vector<std::pair<std::string, KernelTime>> ranked(plain.kernels.begin(), plain.kernels.end());
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::printf("\n  %-38s %6s %8s  %-9s %-10s %s\n", "KERNEL (top 8 by modeled time)", "SHARE",
              "LAUNCHES", "BOUND", "CODE", "SERVES");
  for (size_t i = 0; i < ranked.size() && i < 8; ++i) {
    const auto& [name, t] = ranked[i];
    auto k = kernels.find(name);
    std::string code = k == kernels.end() ? "(not reported)" : k->second.value("code", "?");
    std::string serves = "-";
    if (k != kernels.end() && k->second.value("variant_launches", uint64_t(0)) > 0) {
      serves = std::to_string(k->second.value("variant_launches", uint64_t(0))) + " launches";
    }
    std::printf("  %-38s %5.1f%% %8llu  %-9s %-10s %s\n", short_name(name).c_str(),
                100 * t.ns / plain.modeled_ns, (unsigned long long)t.launches, t.bound().c_str(),
                code.c_str(), serves.c_str());
    for (const auto& s : strategies) {
      auto oc = outcomes[name].find(s);
      std::printf("      %-14s %s\n", s.c_str(),
                  oc == outcomes[name].end() ? "-" : outcome_text(oc->second).c_str());
    }
  }
  std::string totals;
  for (const auto& [v, n] : verdict_totals) totals += (totals.empty() ? "" : ", ") + std::to_string(n) + " " + v;
  std::printf("  verdicts, every kernel: %s\n", totals.empty() ? "none" : totals.c_str());

  std::printf("\n%s figure: plain %s %s, under hone %s %s: %.2fx (modeled device time %.1f us -> "
              "%.1f us); result %s\n",
              app.name().c_str(), fmt("%.4g", plain.figure()).c_str(), app.unit().c_str(),
              fmt("%.4g", after.figure()).c_str(), app.unit().c_str(),
              plain.figure() > 0 ? after.figure() / plain.figure() : 0.0, plain.modeled_ns / 1000,
              after.modeled_ns / 1000, same ? "unchanged" : "CHANGED");
  // Each capture runs a bounds probe of the kernel and copies its ranges on the application's
  // stream: device time the measured run's figure includes.
  std::printf("  launches captured during the measured run: %zu%s\n", captured_in_last,
              captured_in_last ? " (each adds a bounds probe and copies to the figure's device time)"
                               : "");
  if (!plain.own.empty()) {
    std::printf("  the application's own line (host wall clock through the emulator, not a GPU "
                "figure): plain \"%s\", under hone \"%s\"\n",
                plain.own.c_str(), after.own.c_str());
  }
  bool honed_ok = (*d)->running();
  if (!honed_ok) std::printf("FAILED: honed is not running any more\n%s\n", tail((*d)->log()).c_str());
  (void)(*d)->stop();
  return same && honed_ok;
}

} // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  g_whole_captures = o.whole;
  std::printf("hone-bench-apps: real applications plain and under hone on the emulated device "
              "(modeled device time: the emulated device's cost model; one run)\n");
  std::unique_ptr<TempDir> owned;
  fs::path root;
  if (o.keep.empty()) {
    owned = std::make_unique<TempDir>("hone-bench-apps");
    root = owned->path();
  } else {
    root = o.keep;
    fs::create_directories(root);
  }
  bool ok = true;
  for (const auto& a : o.apps) {
    std::unique_ptr<App> app;
    if (a == "hashcat") app = std::make_unique<Hashcat>();
    else app = std::make_unique<Llama>(o.llama_type, o.decode);
    ok = bench_app(*app, o, root / a) && ok;
  }
  return ok ? 0 : 1;
}
