// hone on kernels that run only through CUDA graphs, with real processes on the emulated device
// and its runtime: each cuGraphLaunch counts one launch of every kernel node; the hot kernel's
// shadow inputs are captured from an instrumented copy of one replay; the verified variant is
// swapped into the executable graphs (their kernel nodes pointed at it) and serves the replays;
// `honectl disable` puts the original back before the next replay; a replay whose arguments
// break the guard runs the original; and a served variant that goes wrong later is caught by a
// shadow check of a replay and withdrawn. The program checks every replay on the host.
#include "daemon_process.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// hone_rt::bucket<unsigned>(unsigned*, const unsigned*, unsigned, unsigned, unsigned)
constexpr const char* k_bucket = "_ZN7hone_rt6bucketIjEEvPT_PKS1_jjj";

std::string agent_config() {
  return emu_agent_config(HONE_EMU_LIBRARY_DIR);
}

std::unique_ptr<DaemonProcess> start_daemon(const std::string& config) {
  DaemonOptions o;
  o.config = config;
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "400000000");
  auto d = DaemonProcess::start(std::move(o));
  if (!d) {
    ADD_FAILURE() << d.error().message;
    return nullptr;
  }
  return std::move(*d);
}

AppOptions graph_app(const std::string& socket, std::vector<std::string> args) {
  AppOptions o;
  o.program = std::string(HONE_TESTAPP_DIR) + "/hone-testapp-graph";
  o.args = std::move(args);
  o.socket = socket;
  o.shim = HONE_SHIM_LIBRARY;
  o.driver_dir = HONE_EMU_LIBRARY_DIR;
  o.env["HONE_LOG"] = "info";
  return o;
}

uint64_t field(const json& kernel, const char* name) {
  return kernel.is_null() ? 0 : kernel.value(name, uint64_t(0));
}

} // namespace

// Counting: N replays of graphs holding the kernel once are N launches of it, every one a graph
// replay, with the graphs and nodes that hold it while the program runs.
TEST(GraphApp, EachReplayCountsOneLaunchOfEachKernelNode) {
  DaemonOptions o;
  o.config = "[server]\nreport_interval_ms = 200\n[optimizer]\nenabled = false\n";
  auto d = DaemonProcess::start(std::move(o));
  ASSERT_TRUE(d) << d.error().message;
  Ctl ctl((*d)->socket());
  {
    // Three executable graphs (one per batch size), each holding the kernel once.
    AppOptions o = graph_app((*d)->socket(), {"--mode", "pytorch", "--seconds", "300"});
    o.env["HONE_SAMPLE_EVERY"] = "10"; // 1 replay in 10 timed
    BackgroundApp a(o);
    json k;
    ASSERT_TRUE(wait_for([&] { return field(k = ctl.kernel(k_bucket), "sampled") >= 2; }, 60s))
        << ctl.request({{"cmd", "kernels"}}).dump(2) << (*d)->log();
    EXPECT_EQ(k.value("runs_as", ""), "graph") << k.dump(2);
    EXPECT_EQ(field(k, "graphs"), 3u) << k.dump(2);
    EXPECT_EQ(field(k, "graph_nodes"), 3u) << k.dump(2);
    EXPECT_EQ(field(k, "graph_nodes_serving"), 0u) << k.dump(2);
    EXPECT_EQ(field(k, "graph_launches"), field(k, "launches")) << k.dump(2);
    EXPECT_GE(field(k, "launches"), 20u) << k.dump(2);
    EXPECT_GT(field(k, "est_gpu_ns"), 0u) << k.dump(2);
    // The operator's view: how the kernel runs, in its graphs.
    RunResult table = run_honectl({"--socket", (*d)->socket(), "kernels"});
    EXPECT_NE(table.out.find("RUNS AS"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("graph (3g/3n, 0 served)"), std::string::npos) << table.out;
    RunResult show = run_honectl({"--socket", (*d)->socket(), "show", k_bucket});
    EXPECT_NE(show.out.find("launches were graph replays"), std::string::npos) << show.out;
    RunResult r = a.finish();
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  // Exact: a program of exactly 40 replays reports exactly 40 launches.
  RunOptions ro;
  ro.env["LD_PRELOAD"] = HONE_SHIM_LIBRARY;
  ro.env["HONE_SOCKET"] = (*d)->socket();
  ro.env["LD_LIBRARY_PATH"] = HONE_EMU_LIBRARY_DIR;
  RunResult r = run_program({std::string(HONE_TESTAPP_DIR) + "/hone-testapp-graph", "--mode",
                             "llama", "--iterations", "40"},
                            ro);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("replays 40 mismatches 0"), std::string::npos) << r.out;
  json status = ctl.request({{"cmd", "status"}});
  ASSERT_TRUE(wait_for(
      [&] {
        status = ctl.request({{"cmd", "status"}});
        return status["result"]["graphs"].value("replays", uint64_t(0)) >= 40 + 20;
      },
      30s))
      << status.dump(2);
  RunResult metrics = run_honectl({"--socket", (*d)->socket(), "metrics"});
  EXPECT_NE(metrics.out.find("hone_graph_replays_total"), std::string::npos) << metrics.out;
  EXPECT_NE(metrics.out.find("hone_graph_nodes_patched"), std::string::npos) << metrics.out;
}

struct GraphCase {
  const char* name;
  std::vector<std::string> args;
  bool odd = false; // replays with arguments that break the guard, once the variant serves
};
void PrintTo(const GraphCase& c, std::ostream* os) {
  *os << c.name;
}

class GraphLoop : public ::testing::TestWithParam<GraphCase> {};

TEST_P(GraphLoop, GraphKernelIsCapturedValidatedSwappedServedAndDisabled) {
  auto d = start_daemon(agent_config());
  ASSERT_TRUE(d);
  TempDir dir("hone-graph-test");
  const std::string odd_file = (dir.path() / "odd").string();
  // A million keys, each mixed twice: the kernel is not launch-bound.
  std::vector<std::string> args{"--seconds", "300", "--n", "1048576", "--rounds", "2"};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  if (GetParam().odd) args.insert(args.end(), {"--odd-every", "5", "--odd-file", odd_file});
  BackgroundApp a(graph_app(d->socket(), args));
  Ctl ctl(d->socket());

  // Its only launches are replays: the shadow inputs came from a copy of one.
  json variant;
  ASSERT_TRUE(wait_for(
      [&] { return !(variant = ctl.verified_variant(k_bucket, "specialize")).is_null(); }, 300s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << ctl.kernel(k_bucket).dump(2) << d->log();
  EXPECT_GT(variant.value("speedup", 0.0), 1.05) << variant.dump(2);
  std::printf("variant %s: %.3fx\n", variant.value("strategy", "").c_str(),
              variant.value("speedup", 0.0));

  // Swapped into the graphs: nodes point at the variant and replays are served.
  json k;
  ASSERT_TRUE(wait_for(
      [&] {
        k = ctl.kernel(k_bucket);
        return field(k, "variant_launches") > 0 && field(k, "graph_nodes_serving") > 0;
      },
      60s))
      << k.dump(2) << d->log();
  EXPECT_EQ(k.value("runs_as", ""), "graph") << k.dump(2);
  json status = ctl.request({{"cmd", "status"}});
  EXPECT_GT(status["result"]["graphs"].value("nodes_serving_variants", uint64_t(0)), 0u)
      << status.dump(2);

  if (GetParam().odd) {
    // New argument values on the executable graph (buckets 512: the variant was specialized for
    // 1024): those replays run the original, and the program checks them against the host. The
    // variant still serves the others.
    std::ofstream(odd_file) << "odd\n";
    uint64_t served = field(ctl.kernel(k_bucket), "variant_launches");
    uint64_t launches = field(ctl.kernel(k_bucket), "launches");
    ASSERT_TRUE(wait_for(
        [&] {
          json k2 = ctl.kernel(k_bucket);
          return field(k2, "launches") > launches + 20 && field(k2, "variant_launches") > served;
        },
        60s))
        << ctl.kernel(k_bucket).dump(2);
  }

  // honectl disable: every patched node runs the original again from the next replay on.
  RunResult disabled = run_honectl({"--socket", d->socket(), "disable", k_bucket});
  ASSERT_EQ(disabled.exit_code, 0) << disabled.out << disabled.err;
  json before;
  ASSERT_TRUE(wait_for(
      [&] {
        json k1 = ctl.kernel(k_bucket);
        std::this_thread::sleep_for(400ms); // two report intervals: let counts move if they move
        json k2 = ctl.kernel(k_bucket);
        before = k2;
        return field(k2, "launches") > field(k1, "launches") &&
               field(k2, "variant_launches") == field(k1, "variant_launches") &&
               field(k2, "graph_nodes_serving") == 0;
      },
      30s))
      << ctl.kernel(k_bucket).dump(2);
  uint64_t launches = field(before, "launches");
  ASSERT_TRUE(
      wait_for([&] { return field(ctl.kernel(k_bucket), "launches") > launches + 10; }, 60s));
  EXPECT_EQ(field(ctl.kernel(k_bucket), "variant_launches"), field(before, "variant_launches"))
      << "the variant kept serving after disable";

  RunResult r = a.finish();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mismatches 0"), std::string::npos) << r.out << r.err;
  if (GetParam().odd) {
    EXPECT_EQ(r.out.find(" odd 0"), std::string::npos) << r.out;
  }
}

// pytorch: one graph per batch size, replayed in turn (the variant serves the sizes its guard
// takes); llama: captured every step and updated into one executable graph, with every fifth
// replay given arguments that break the guard (they run the original, and the program checks
// them against the host); explicit: memset, child graph, copy and host nodes built by hand.
INSTANTIATE_TEST_SUITE_P(
    Shapes, GraphLoop,
    ::testing::Values(GraphCase{"pytorch", {"--mode", "pytorch"}},
                      GraphCase{"llama", {"--mode", "llama"}, true},
                      GraphCase{"explicit", {"--mode", "explicit"}}),
    [](const ::testing::TestParamInfo<GraphCase>& i) { return std::string(i.param.name); });

// A step of several kernels (--chain: stage, bucket, stage, as a model's layer runs them) whose
// kernels turn hot together: one instrumented replay captures each kernel that asks, not one
// kernel per replay, so that an application replaying its graph a few times still gives all of
// its hot kernels their captures. Both kernels' jobs are judged on those captures, and the
// program's replays stay right.
TEST(GraphApp, OneReplayCapturesEveryKernelOfTheGraphThatAsks) {
  // Hot from their first launch, so that both kernels turn hot in the same report (one replay
  // launches both) and ask for their captures together.
  std::string cfg =
      emu_agent_config(HONE_EMU_LIBRARY_DIR, "[agent]\nstrategies = [\"specialize\"]\n");
  const std::string hot = "hot_min_launches = 20\n";
  cfg.replace(cfg.find(hot), hot.size(), "hot_min_launches = 1\nhot_top = 2\n");
  auto d = start_daemon(cfg);
  ASSERT_TRUE(d);
  AppOptions o = graph_app(d->socket(), {"--mode", "llama", "--chain", "--seconds", "300", "--n",
                                         "4096", "--rounds", "2"});
  BackgroundApp a(o);
  Ctl ctl(d->socket());
  // Both kernels judged: a finished job with captures each.
  std::map<std::string, json> judged;
  ASSERT_TRUE(wait_for(
      [&] {
        json all = ctl.request({{"cmd", "jobs"}})["result"].value("jobs", json::array());
        for (const auto& j : all) {
          if (j.value("state", "") == "done" && j.value("captures_used", 0) > 0)
            judged[j.value("kernel", "")] = j;
        }
        return judged.size() >= 2;
      },
      240s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  for (const auto& [kernel, j] : judged) {
    EXPECT_NE(j.value("verdict", ""), "internal error") << j.dump(2);
    std::printf("%s: %s on %d capture(s)\n", kernel.c_str(), j.value("verdict", "").c_str(),
                j.value("captures_used", 0));
  }
  RunResult r = a.finish();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mismatches 0"), std::string::npos) << r.out << r.err;
  // The shim says when one replay took several captures, and which.
  std::smatch m;
  const std::regex line("captured 2 kernels in one replay of a CUDA graph: ([^\n]*)");
  ASSERT_TRUE(std::regex_search(r.err, m, line)) << r.err;
  EXPECT_NE(m[1].str().find("bucket"), std::string::npos) << m[0];
  EXPECT_NE(m[1].str().find("stage"), std::string::npos) << m[0];
}

// A graph the shim cannot copy safely (it allocates and frees memory: a copy instantiated beside
// it could not be) is observed only: counted and timed, its kernel's capture refused with the
// reason, which `honectl show` prints. The program's results are unchanged.
TEST(GraphApp, GraphWithMemoryNodesIsObservedOnlyAndShowSaysWhy) {
  // Captures waited for up to an hour: the strategies' jobs must end (within the test's two
  // minutes) because the process said why it refuses the captures, not at that deadline.
  std::string config = agent_config();
  const std::string wait = "timeout_s = 60\n";
  ASSERT_NE(config.find(wait), std::string::npos) << config;
  config.replace(config.find(wait), wait.size(), "timeout_s = 3600\n");
  auto d = start_daemon(config);
  ASSERT_TRUE(d);
  BackgroundApp a(graph_app(d->socket(), {"--mode", "memnodes", "--seconds", "300"}));
  Ctl ctl(d->socket());
  json k;
  ASSERT_TRUE(wait_for(
      [&] {
        k = ctl.kernel(k_bucket);
        return !k.is_null() && k.value("capture_refused", "").find("allocates or frees memory") !=
                                   std::string::npos;
      },
      120s))
      << k.dump(2) << d->log();
  EXPECT_EQ(k.value("runs_as", ""), "graph") << k.dump(2);
  EXPECT_GT(field(k, "launches"), 0u);
  RunResult show = run_honectl({"--socket", d->socket(), "show", k_bucket});
  EXPECT_NE(show.out.find("shadow inputs"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("allocates or frees memory"), std::string::npos) << show.out;
  // The kernel's jobs end saying why they had nothing to run on: the process's reason.
  json ended;
  ASSERT_TRUE(wait_for(
      [&] {
        const json all = ctl.request({{"cmd", "jobs"}});
        for (const auto& j : all["result"]["jobs"]) {
          if (j.value("verdict", "") == "unsupported") ended = j;
        }
        return !ended.is_null();
      },
      120s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  EXPECT_NE(ended.dump().find("the process refused to capture the kernel's launches"),
            std::string::npos)
      << ended.dump(2);
  EXPECT_NE(ended.dump().find("allocates or frees memory"), std::string::npos) << ended.dump(2);
  RunResult r = a.finish();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mismatches 0"), std::string::npos) << r.out << r.err;
}

namespace {

// Submit a CUDA candidate for bucket<unsigned>, entry `entry`; the job id, or 0 with a failure.
uint64_t submit_bucket(Ctl& ctl, const std::string& code, const std::string& entry) {
  json r = ctl.submit(
      {{"target", k_bucket}, {"kind", "cuda"}, {"entry", entry}, {"comparison", "bitwise"}}, code);
  if (!r.value("ok", false)) {
    ADD_FAILURE() << "submit: " << r.dump();
    return 0;
  }
  return r["result"]["job"].get<uint64_t>();
}

// bucket<unsigned> with a power-of-two fast path (a mask and a shift for the modulo and the
// division: faster on the emulated device's cost model, and equal bit for bit), which goes wrong
// once its module has counted 300 launches in a __device__ variable: right for every launch
// validation makes, wrong a few hundred replays after it starts serving.
constexpr const char* k_drifting_bucket = R"(
__device__ unsigned launches;

extern "C" __global__ void bucket_drift(unsigned* out, const unsigned* keys, unsigned n,
                                        unsigned buckets, unsigned rounds)
{
    __shared__ unsigned seen;
    if (threadIdx.x == 0) seen = launches;
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&launches, 1u);
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = keys[i], slot = 0;
    if (buckets != 0 && (buckets & (buckets - 1)) == 0) {
        unsigned mask = buckets - 1, shift = __ffs(buckets) - 1;
        for (unsigned r = 0; r < rounds; ++r) {
            h = h * 2654435761u + r;
            h ^= h >> 13;
            slot = ((slot + h) & mask) + (h >> shift);
        }
    } else {
        for (unsigned r = 0; r < rounds; ++r) {
            h = h * 2654435761u + r;
            h ^= h >> 13;
            slot = (slot + h) % buckets + h / buckets;
        }
    }
    out[i] = seen >= 300 ? slot + 1 : slot;
}
)";

struct GraphAppResult {
  long replays = -1, mismatches = -1, last_mismatch = -1;
};
GraphAppResult parse_graph_app(const std::string& out) {
  GraphAppResult r;
  std::smatch m;
  static const std::regex line("replays (\\d+) mismatches (\\d+) odd \\d+ last_mismatch (\\d+)");
  if (std::regex_search(out, m, line)) {
    r.replays = std::stol(m[1]);
    r.mismatches = std::stol(m[2]);
    r.last_mismatch = std::stol(m[3]);
  }
  return r;
}

} // namespace

// Shadow checks reach graph replays. A variant right while validated and wrong after 300 of its
// launches (its count in a __device__ variable: the static checks refuse the declaration of one
// where the original declares none, so they are off here, to let the dynamic defence be seen) is
// submitted and served in a llama.cpp-shaped graph: three kernels a step, the step captured
// anew and cudaGraphExecUpdate'd into one executable graph before every replay. Every
// shadow_every served replays of its node, one replay runs as an instrumented copy of the graph
// with the variant in the node and copies of its buffers around it; the worker runs the original
// on the same inputs. The check that finds the variant's outputs wrong withdraws it (the graph's
// node runs the original from the next replay on), records why and the pattern, and the
// application's later replays are right: it checks every replay on the host.
TEST(GraphApp, ShadowCheckWithdrawsADriftingVariantServedInAGraph) {
  std::ostringstream cfg;
  cfg << "[server]\nreport_interval_ms = 200\n"
      << "[worker]\ndriver = \"" << HONE_EMU_LIBRARY_DIR << "/libcuda.so.1\"\n"
      << "[optimizer]\nenabled = false\ngpu_share = 1.0\n"
      << "[capture]\ncaptures_per_kernel = 1\ntimeout_s = 60\n"
      << "[validation]\nwarmup = 0\nruns = 5\nmin_runs = 3\njob_timeout_s = 120\n"
      << "shadow_every = 25\nstatic_checks = false\n";
  auto d = start_daemon(cfg.str());
  ASSERT_TRUE(d);
  AppOptions o = graph_app(d->socket(), {"--mode", "llama", "--chain", "--seconds", "300", "--n",
                                         "65536", "--rounds", "16"});
  // One core for the application's kernels, the other for the worker's.
  o.env["HONE_EMU_THREADS"] = "1";
  BackgroundApp a(o);
  Ctl ctl(d->socket());
  ASSERT_TRUE(wait_for([&] { return !ctl.kernel(k_bucket).is_null(); }, 60s)) << d->log();

  uint64_t id = submit_bucket(ctl, k_drifting_bucket, "bucket_drift");
  ASSERT_NE(id, 0u);
  json job = ctl.wait_job(id, 240s);
  ASSERT_EQ(job.value("verdict", ""), "verified") << job.dump(2) << d->log();
  std::printf("drifting variant: %.3fx\n", job.value("speedup", 0.0));

  // It serves the graph's node, then a shadow check of a replay catches it.
  json withdrawn;
  ASSERT_TRUE(wait_for(
      [&] {
        json variants = ctl.request({{"cmd", "variants"}, {"target", k_bucket}});
        for (const auto& v : variants["result"]["variants"]) {
          if (v.value("verdict", "").find("withdrawn by a shadow check") != std::string::npos)
            withdrawn = v;
        }
        return !withdrawn.is_null();
      },
      240s))
      << ctl.kernel(k_bucket).dump(2) << d->log();
  EXPECT_EQ(withdrawn.value("state", ""), "rejected") << withdrawn.dump(2);
  json k = ctl.kernel(k_bucket);
  EXPECT_EQ(k.value("runs_as", ""), "graph") << k.dump(2);
  EXPECT_EQ(field(k, "graph_launches"), field(k, "launches")) << k.dump(2);
  EXPECT_GT(field(k, "variant_launches"), 300u) << k.dump(2);
  RunResult show = run_honectl({"show", withdrawn.value("id", ""), "--socket", d->socket()});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("withdrawn by a shadow check"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("correct-while-checked"), std::string::npos) << show.out;
  RunResult metrics = run_honectl({"metrics", "--socket", d->socket()});
  EXPECT_NE(metrics.out.find("hone_shadow_checks_total{result=\"failed\"} 1"), std::string::npos)
      << metrics.out;
  EXPECT_EQ(metrics.out.find("hone_shadow_checks_total{result=\"passed\"} 0"), std::string::npos)
      << "no check passed while the variant was right: " << metrics.out;

  // The original runs in the graph again: no node serves, and 60 more replays (as honed counts
  // them) add no variant launch. honed's counts trail the application by a report: the count
  // the variant reached is taken once no node serves any more.
  json k0;
  ASSERT_TRUE(wait_for(
      [&] {
        json k1 = ctl.kernel(k_bucket);
        std::this_thread::sleep_for(400ms); // two report intervals: let counts move if they move
        k0 = ctl.kernel(k_bucket);
        return field(k0, "graph_nodes_serving") == 0 &&
               field(k0, "variant_launches") == field(k1, "variant_launches") &&
               field(k0, "launches") > field(k1, "launches");
      },
      60s))
      << ctl.kernel(k_bucket).dump(2);
  ASSERT_TRUE(wait_for(
      [&] { return field(ctl.kernel(k_bucket), "launches") >= field(k0, "launches") + 60; }, 120s))
      << ctl.kernel(k_bucket).dump(2);
  EXPECT_EQ(field(ctl.kernel(k_bucket), "variant_launches"), field(k0, "variant_launches"))
      << "the variant kept serving after its withdrawal";
  RunResult r = a.finish();
  GraphAppResult g = parse_graph_app(r.out);
  ASSERT_GE(g.replays, 0) << r.out << r.err;
  std::printf("replays %ld, wrong %ld (the last at replay %ld), variant launches %lu\n", g.replays,
              g.mismatches, g.last_mismatch, (unsigned long)field(k0, "variant_launches"));
  EXPECT_GT(g.mismatches, 0) << "the variant never went wrong: " << r.out << r.err;
  EXPECT_GE(g.replays - g.last_mismatch, 60) << r.out << r.err;
}

// HONE_CUPTI=1 asks for per-node times from CUPTI. It stays off when a profiler is configured
// (CUDA_INJECTION64_PATH) and where CUPTI cannot trace (the emulated device): the shim says why,
// and graph kernels are timed with events as without it. (Where CUPTI works is a GPU's check.)
TEST(GraphApp, CuptiStaysOffWhereItWouldDisturbOrCannotWork) {
  RunOptions ro;
  ro.env["LD_PRELOAD"] = HONE_SHIM_LIBRARY;
  ro.env["HONE_SOCKET"] = "/nonexistent/hone.sock";
  ro.env["LD_LIBRARY_PATH"] = HONE_EMU_LIBRARY_DIR;
  ro.env["HONE_CUPTI"] = "1";
  ro.env["HONE_LOG"] = "info";
  const std::vector<std::string> argv{std::string(HONE_TESTAPP_DIR) + "/hone-testapp-graph",
                                      "--mode", "pytorch", "--iterations", "30"};
  RunOptions profiled = ro;
  profiled.env["CUDA_INJECTION64_PATH"] = "/opt/profiler/libinjection.so";
  RunResult r = run_program(argv, profiled);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("replays 30 mismatches 0"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("HONE_CUPTI: not enabled (a CUDA injection library"), std::string::npos)
      << r.err;
  r = run_program(argv, ro);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("replays 30 mismatches 0"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("HONE_CUPTI: not enabled"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("timed with events"), std::string::npos) << r.err;
}
