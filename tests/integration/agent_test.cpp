// The agent in the whole loop, with real processes on the emulated device: honed finds a hot
// kernel in an application under libhone.so, its built-in strategies propose candidates, the
// worker validates and measures them, and a verified variant is swapped in — serving only the
// launches its guard admits. The application checks every launch on the host throughout.
#include "daemon_process.hpp"
#include "llm_server.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The optimizer on, thresholds low, the whole GPU share: things happen within seconds.
std::string agent_config(const std::string& extra = "") {
  return emu_agent_config(HONE_EMU_LIBRARY_DIR, extra);
}

std::unique_ptr<DaemonProcess> start_daemon(const std::string& config, fs::path dir = {}) {
  DaemonOptions o;
  o.config = config;
  o.dir = std::move(dir);
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "400000000");
  auto d = DaemonProcess::start(std::move(o));
  if (!d) {
    ADD_FAILURE() << d.error().message;
    return nullptr;
  }
  return std::move(*d);
}

// A test application (apps/) under the shim, attached to `socket`, checking every launch.
AppOptions test_app(const char* name, const std::string& socket, std::vector<std::string> args) {
  AppOptions o;
  o.program = std::string(HONE_TESTAPP_DIR) + "/" + name;
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

// hone-testapp-spec: mix_rounds(out, in, n, rounds).
AppOptions spec_app(const std::string& socket, std::vector<std::string> args) {
  // 1M elements; `rounds` as the test passes it.
  args.insert(args.begin(), {"--n", "1048576"});
  return test_app("hone-testapp-spec", socket, std::move(args));
}

// The application ran, checked every launch, and found nothing wrong; its output.
std::string expect_correct(BackgroundApp& app) {
  RunResult r = app.finish();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mismatches 0"), std::string::npos) << r.out << r.err;
  return r.out;
}

uint64_t count(const json& kernel, const char* field) {
  return kernel.is_null() ? 0 : kernel.value(field, uint64_t(0));
}

// What every strategy proposed and what the worker said, for the test log.
void print_jobs(Ctl& ctl) {
  json jobs = ctl.request({{"cmd", "jobs"}});
  for (const auto& j : jobs["result"]["jobs"]) {
    std::printf("job %s %-14s %-12s %5.2fx  %s\n", j.value("id", json()).dump().c_str(),
                j.value("strategy", "").c_str(), j.value("verdict", "").c_str(),
                j.value("speedup", 0.0), j.value("description", "").c_str());
  }
}

// hone-testapp-serve: accumulate(out, in, n, reps), on 1M elements; reps = 64 makes it issue-bound
// in the modeled time, so that the kernel without the loop is faster.
AppOptions serve_app(const std::string& socket, const char* reps = "64") {
  return test_app("hone-testapp-serve", socket, {"--n", "1048576", "--reps", reps});
}

// A rewrite of accumulate as a model writes it: hone_candidate, and `body` after the bounds check.
std::string accumulate_rewrite(const std::string& body) {
  return "extern \"C\" __global__ void hone_candidate(int* out, const int* in, int n, int reps)\n"
         "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= n) return;\n" +
         body + "}\n";
}

// The agent's config with the LLM strategy on, against the scripted endpoint `llm`, and `keys`
// ("max_turns = 1\n...") in [agent.llm].
std::string llm_config(const LlmServer& llm, const std::string& keys) {
  return agent_config("[agent.llm]\nenabled = true\nbase_url = \"" + llm.base_url() +
                      "\"\nmodel = \"scripted\"\nrequest_timeout_s = 30\n" + keys);
}

// A fenced reply as a model writes it.
std::string fenced(const std::string& code) {
  return "Here is a faster version.\n\n```cuda\n" + code + "```\n";
}

// Launches in `out` with `rounds` ("rounds R launches L").
long launches_with(const std::string& out, int rounds) {
  std::smatch m;
  std::regex line("rounds " + std::to_string(rounds) + " launches (\\d+)");
  return std::regex_search(out, m, line) ? std::stol(m[1]) : -1;
}

} // namespace

// Launch-shape tuning: the application launches mix_rounds over 9216 elements as 9 blocks of 1024
// threads, as hashcat launches its mask generators (9 of 132 SMs busy); the kernel uses the thread
// index only as blockIdx.x * blockDim.x + threadIdx.x, so the strategy offers smaller blocks with
// the same thread count, the worker finds one bitwise equal and faster in modeled time, and the
// shim launches it reshaped, every launch still checked by the application.
TEST(Agent, LaunchShapeSpreadsAFewLargeBlocksOverTheGpu) {
  auto d = start_daemon(agent_config("[agent]\nstrategies = [\"launch_shape\"]\n"));
  ASSERT_TRUE(d);
  BackgroundApp app(test_app("hone-testapp-spec", d->socket(),
                             {"--n", "9216", "--block", "1024", "--rounds", "16"}));
  Ctl ctl(d->socket());
  json variant;
  ASSERT_TRUE(wait_for(
      [&] { return !(variant = ctl.verified_variant("mix_rounds", "launch_shape")).is_null(); },
      240s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  print_jobs(ctl);
  json shown = ctl.request({{"cmd", "show"}, {"target", variant.value("id", "")}});
  ASSERT_TRUE(shown.value("ok", false)) << shown.dump();
  const json& guard = shown["result"]["guard"];
  EXPECT_EQ(guard["block"], json::array({1024, 1, 1})) << shown.dump(2);
  const uint32_t reshape = guard.value("reshape_block", 0u);
  EXPECT_TRUE(reshape >= 32 && reshape < 1024 && 1024 % reshape == 0) << shown.dump(2);
  EXPECT_EQ(shown["result"]["evidence"].value("comparison", ""), "bitwise") << shown.dump(2);
  // The worker ran the candidate reshaped: its profile has more blocks per SM or more waves than
  // nine blocks of 1024 threads can have, and the verdict is faster.
  EXPECT_GT(variant.value("speedup", 0.0), 1.0) << variant.dump(2);
  RunResult table = run_honectl({"--socket", d->socket(), "show", variant.value("id", "")});
  EXPECT_NE(table.out.find("launched as blocks of " + std::to_string(reshape) + " threads"),
            std::string::npos)
      << table.out;

  json k;
  ASSERT_TRUE(
      wait_for([&] { return count(k = ctl.kernel("mix_rounds"), "variant_launches") > 5; }, 60s))
      << k.dump(2) << d->log();
  EXPECT_EQ(count(k, "fallbacks"), 0u) << k.dump(2);
  EXPECT_EQ(count(k, "guard_misses"), 0u) << k.dump(2);
  expect_correct(app);
}

// The same kernel replayed from a CUDA graph (made by stream capture): the variant serves the
// graph's node reshaped (cuGraphExecKernelNodeSetParams with its grid and block), the application
// checks every replay, and `honectl disable` puts the node back to the original with the
// application's shape.
TEST(Agent, LaunchShapeServesGraphNodesReshapedUntilDisabled) {
  auto d = start_daemon(agent_config("[agent]\nstrategies = [\"launch_shape\"]\n"));
  ASSERT_TRUE(d);
  BackgroundApp app(test_app("hone-testapp-spec", d->socket(),
                             {"--n", "9216", "--block", "1024", "--rounds", "16", "--graph"}));
  Ctl ctl(d->socket());
  json variant;
  ASSERT_TRUE(wait_for(
      [&] { return !(variant = ctl.verified_variant("mix_rounds", "launch_shape")).is_null(); },
      240s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  json k;
  ASSERT_TRUE(wait_for(
      [&] {
        k = ctl.kernel("mix_rounds");
        return count(k, "variant_launches") > 5 && count(k, "graph_nodes_serving") > 0;
      },
      60s))
      << k.dump(2) << d->log();
  EXPECT_EQ(k.value("runs_as", ""), "graph") << k.dump(2);
  EXPECT_EQ(count(k, "guard_misses"), 0u) << k.dump(2);

  RunResult disabled = run_honectl({"--socket", d->socket(), "disable", "mix_rounds"});
  ASSERT_EQ(disabled.exit_code, 0) << disabled.out << disabled.err;
  json before;
  ASSERT_TRUE(wait_for(
      [&] {
        json k1 = ctl.kernel("mix_rounds");
        std::this_thread::sleep_for(400ms); // two report intervals: let counts move if they move
        before = ctl.kernel("mix_rounds");
        return count(before, "launches") > count(k1, "launches") &&
               count(before, "variant_launches") == count(k1, "variant_launches") &&
               count(before, "graph_nodes_serving") == 0;
      },
      60s))
      << ctl.kernel("mix_rounds").dump(2);
  const uint64_t launches = count(before, "launches");
  ASSERT_TRUE(
      wait_for([&] { return count(ctl.kernel("mix_rounds"), "launches") > launches + 10; }, 60s));
  EXPECT_EQ(count(ctl.kernel("mix_rounds"), "variant_launches"),
            count(before, "variant_launches"));
  // The replays the variant served ran reshaped: on the emulated device (modeled time, the same
  // on any host) the shortest took less than the last one (the original again, nine blocks of
  // 1024 threads). A node given the variant's function with the application's shape would have
  // taken as long as the original.
  const std::string out = expect_correct(app);
  double min_us = 0, last_us = 0;
  auto at = out.find("replay_us min ");
  ASSERT_NE(at, std::string::npos) << out;
  ASSERT_EQ(std::sscanf(out.c_str() + at, "replay_us min %lf last %lf", &min_us, &last_us), 2)
      << out;
  std::printf("graph replays: shortest %.3f us (served reshaped), last %.3f us (the original)\n",
              min_us, last_us);
  EXPECT_GT(last_us, 1.3 * min_us) << out;
}

// Runtime specialization: the application keeps `rounds` (a loop bound) at 2, the specialize
// strategy turns the NVRTC source into a kernel with the constant folded in, the worker finds it
// bitwise equal and faster in modeled time, and the shim serves it — until the application
// passes another value, which the guard sends to the original. A restarted honed remembers what
// it tried and serves the stored variant without new work.
TEST(Agent, SpecializationServesOnlyWhileTheArgumentKeepsItsValue) {
  TempDir state("hone-agent");
  auto d = start_daemon(agent_config(), state.path());
  ASSERT_TRUE(d);
  TempDir files("hone-agent-files");
  std::string change = (files.path() / "change").string();
  json variant;
  {
    BackgroundApp app(
        spec_app(d->socket(), {"--rounds", "2", "--new-rounds", "3", "--change-file", change}));
    Ctl ctl(d->socket());
    ASSERT_TRUE(wait_for(
        [&] { return !(variant = ctl.verified_variant("mix_rounds", "specialize")).is_null(); },
        240s))
        << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
    EXPECT_GT(variant.value("speedup", 0.0), 1.05) << variant.dump(2);
    json shown = ctl.request({{"cmd", "show"}, {"target", variant.value("id", "")}});
    ASSERT_TRUE(shown.value("ok", false)) << shown.dump();
    const json& guard = shown["result"]["guard"];
    // rounds (parameter 3) is specialized to 2, n (parameter 2) to 1048576.
    bool has_rounds = false;
    for (const auto& sc : guard["scalar_values"]) {
      has_rounds |= sc.value("param", 99) == 3 && sc.value("bytes", "") == "02000000";
    }
    EXPECT_TRUE(has_rounds) << shown.dump(2);
    EXPECT_EQ(shown["result"]["evidence"].value("comparison", ""), "bitwise") << shown.dump(2);

    // Served in the application while rounds stays 2 ...
    json k;
    ASSERT_TRUE(
        wait_for([&] { return count(k = ctl.kernel("mix_rounds"), "variant_launches") > 5; }, 60s))
        << k.dump(2) << d->log();
    // ... and not once rounds is 3: launches go on, the variant serves none of them.
    std::ofstream(change) << "3\n";
    std::this_thread::sleep_for(2s); // the switch, and a report of the launches before it
    json before = ctl.kernel("mix_rounds");
    ASSERT_TRUE(wait_for(
        [&] {
          return count(k = ctl.kernel("mix_rounds"), "launches") > count(before, "launches") + 20;
        },
        60s))
        << k.dump(2);
    EXPECT_EQ(count(k, "variant_launches"), count(before, "variant_launches")) << k.dump(2);
    std::string out = expect_correct(app);
    EXPECT_GT(launches_with(out, 2), 0) << out;
    EXPECT_GT(launches_with(out, 3), 20) << out;
    // The specializing candidate went first; the others finish on the captures they have.
    ASSERT_TRUE(wait_for(
        [&] {
          json all = ctl.request({{"cmd", "jobs"}})["result"]["jobs"];
          return std::all_of(all.begin(), all.end(),
                             [](const json& j) { return j.value("state", "") == "done"; });
        },
        120s))
        << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
    print_jobs(ctl);
    // The ranking learned from the verdicts: specialization earned more per GPU-second than the
    // re-JIT sweep, whose four candidates were all not faster.
    json strategies = ctl.request({{"cmd", "status"}})["result"]["agent"]["strategies"];
    std::map<std::string, json> by_id;
    for (const auto& st : strategies) by_id[st.value("id", "")] = st;
    EXPECT_EQ(by_id["specialize"].value("verified", 0), 1) << strategies.dump(2);
    EXPECT_EQ(by_id["rejit"].value("verified", 1), 0) << strategies.dump(2);
    EXPECT_GT(by_id["specialize"].value("expected_gain_per_gpu_second", 0.0),
              by_id["rejit"].value("expected_gain_per_gpu_second", 1.0))
        << strategies.dump(2);
    // The worker took the specializing candidate ahead of re-JITs queued before it (queued jobs
    // run in order of their strategy's expected gain per GPU-second): its verdict is in honed's
    // log before the last of theirs.
    {
      std::string log = d->log();
      json jobs = ctl.request({{"cmd", "jobs"}});
      size_t specialize_at = std::string::npos, last_rejit_at = 0;
      for (const auto& j : jobs["result"]["jobs"]) {
        // a job's verdict is the last line honed logs about it
        size_t at = log.rfind("job " + j.value("id", json()).dump() + ": ");
        if (at == std::string::npos) continue;
        if (j.value("strategy", "") == "specialize") specialize_at = std::min(specialize_at, at);
        if (j.value("strategy", "") == "rejit") last_rejit_at = std::max(last_rejit_at, at);
      }
      EXPECT_LT(specialize_at, last_rejit_at) << log;
    }
    // Every strategy was tried once for this kernel, and remembered.
    json tried = ctl.kernel("mix_rounds")["tried"];
    EXPECT_NE(std::find(tried.begin(), tried.end(), "specialize"), tried.end()) << tried.dump();
  }
  ASSERT_TRUE(d->stop().has_value());
  d.reset();

  // A restarted honed: the stored variant serves a new process at once, and nothing is redone.
  d = start_daemon(agent_config(), state.path());
  ASSERT_TRUE(d);
  BackgroundApp app(spec_app(d->socket(), {"--rounds", "2"}));
  Ctl ctl(d->socket());
  json k;
  EXPECT_TRUE(
      wait_for([&] { return count(k = ctl.kernel("mix_rounds"), "variant_launches") > 5; }, 60s))
      << k.dump(2) << d->log();
  std::this_thread::sleep_for(2s); // time for the optimizer to start work, had it any
  json jobs = ctl.request({{"cmd", "jobs"}});
  EXPECT_TRUE(jobs["result"]["jobs"].empty()) << jobs.dump(2);

  // Unless an operator asks for it: `honectl retry` lets one strategy try again.
  RunResult bad =
      run_honectl({"retry", "mix_rounds", "--strategy", "llm", "--socket", d->socket()});
  EXPECT_NE(bad.exit_code, 0) << bad.out;
  EXPECT_NE(bad.err.find("strategy llm has not tried mix_rounds"), std::string::npos) << bad.err;
  RunResult retry =
      run_honectl({"retry", "mix_rounds", "--strategy", "launch_bounds", "--socket", d->socket()});
  EXPECT_EQ(retry.exit_code, 0) << retry.out << retry.err;
  EXPECT_NE(retry.out.find("the agent will try launch_bounds again"), std::string::npos)
      << retry.out;
  EXPECT_TRUE(wait_for(
      [&] {
        json all = ctl.request({{"cmd", "jobs"}})["result"]["jobs"];
        return !all.empty() && std::all_of(all.begin(), all.end(), [](const json& j) {
          return j.value("strategy", "") == "launch_bounds" && j.value("state", "") == "done";
        });
      },
      120s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  expect_correct(app);
}

// The LLM strategy against a scripted OpenAI-compatible endpoint on loopback (a test double: no
// model here). Its first answer is an HTTP 500 that echoes the Authorization header; the retry
// gets a wrong kernel, whose mismatch goes back to the model; the third answer is right and
// faster: verified by the worker and served. The key never appears in honed's log or status.
TEST(Agent, LlmCandidateIsFedItsMismatchAndFixedOnTheNextTurn) {
  LlmServer llm;
  const std::string key = "sk-hone-test-3b8f0c7d21";
  const std::string wrong =
      R"(extern "C" __global__ void hone_candidate(int* out, const int* in, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i] * reps + 1;
}
)";
  const std::string right =
      R"(extern "C" __global__ void hone_candidate(int* out, const int* in, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i] * reps;
}
)";
  LlmResponse echo;
  echo.status = 500;
  echo.body = R"({"error": {"message": "overloaded"}})";
  echo.echo_authorization = true;
  llm.push(echo);
  llm.push(LlmResponse::chat(fenced(wrong), 900));
  llm.push(LlmResponse::chat(fenced(right), 900));

  DaemonOptions o;
  o.config = agent_config("[agent.llm]\nenabled = true\nbase_url = \"" + llm.base_url() +
                          "\"\nmodel = \"scripted\"\napi_key_env = \"HONE_TEST_LLM_KEY\"\n"
                          "max_turns = 3\nrequest_timeout_s = 30\n");
  o.env.emplace("HONE_TEST_LLM_KEY", key);
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "400000000");
  auto started = DaemonProcess::start(std::move(o));
  ASSERT_TRUE(started) << started.error().message;
  auto d = std::move(*started);
  BackgroundApp app(serve_app(d->socket()));
  Ctl ctl(d->socket());

  json variant;
  ASSERT_TRUE(wait_for(
      [&] { return !(variant = ctl.verified_variant("accumulate", "llm")).is_null(); }, 300s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  EXPECT_GT(variant.value("speedup", 0.0), 1.05) << variant.dump(2);
  print_jobs(ctl);

  // The model was asked three times, with the key, and told what was wrong with its kernel.
  std::vector<LlmRequest> requests = llm.requests();
  ASSERT_GE(requests.size(), 3u);
  for (const auto& r : requests) {
    EXPECT_EQ(r.path, "/v1/chat/completions");
    EXPECT_EQ(r.headers.at("authorization"), "Bearer " + key);
  }
  EXPECT_NE(requests[0].body.find("accumulate"), std::string::npos) << requests[0].body;
  EXPECT_NE(requests[0].body.find("Device: hone emulated device (sm_90)"), std::string::npos)
      << requests[0].body;
  EXPECT_NE(requests[2].body.find("differ from the original"), std::string::npos)
      << requests[2].body;
  EXPECT_NE(requests[2].body.find("element 0: got "), std::string::npos) << requests[2].body;
  // The LLM job that failed said why: a mismatch.
  json jobs = ctl.request({{"cmd", "jobs"}});
  bool mismatch = false;
  for (const auto& j : jobs["result"]["jobs"]) {
    mismatch |= j.value("strategy", "") == "llm" && j.value("verdict", "") == "mismatch";
  }
  EXPECT_TRUE(mismatch) << jobs.dump(2);

  json k;
  EXPECT_TRUE(
      wait_for([&] { return count(k = ctl.kernel("accumulate"), "variant_launches") > 5; }, 60s))
      << k.dump(2);
  expect_correct(app);
  json status = ctl.request({{"cmd", "status"}});
  EXPECT_EQ(status.dump().find(key), std::string::npos);
  EXPECT_EQ(d->log().find(key), std::string::npos) << "the API key is in honed's log";
  EXPECT_NE(d->log().find("[redacted]"), std::string::npos)
      << "the echoed key should show up redacted: " << d->log();
}

// Three samples in one turn (the request's n = 3): the first is right but keeps half the
// original's loop, the second is right without it, the third is wrong. Each is validated, and the
// second, the fastest correct one, is the one served. The next turn is told what bounds it.
TEST(Agent, LlmSamplesTheFastestCorrectOneIsServed) {
  LlmServer llm;
  const std::string half_loop = accumulate_rewrite(
      "    unsigned acc = 0;\n    for (int k = 0; k < reps / 2; ++k) acc += unsigned(in[i]);\n"
      "    out[i] = int(acc * 2u + unsigned(reps & 1) * unsigned(in[i]));\n");
  const std::string no_loop =
      accumulate_rewrite("    out[i] = int(unsigned(in[i]) * unsigned(reps));\n");
  const std::string wrong = accumulate_rewrite("    out[i] = in[i] * reps + 1;\n");
  json choices = json::array();
  for (const auto& code : {half_loop, no_loop, wrong}) {
    choices.push_back({{"index", choices.size()},
                       {"message", {{"role", "assistant"}, {"content", fenced(code)}}},
                       {"finish_reason", "stop"}});
  }
  LlmResponse three;
  three.body = json{{"object", "chat.completion"},
                    {"choices", choices},
                    {"usage", {{"total_tokens", 900}}}}
                   .dump();
  llm.push(three);
  llm.push(LlmResponse::chat("I see no further way to make it faster.", 300));

  DaemonOptions o;
  o.config = llm_config(llm, "max_turns = 2\nsamples_per_turn = 3\n");
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "400000000");
  auto started = DaemonProcess::start(std::move(o));
  ASSERT_TRUE(started) << started.error().message;
  auto d = std::move(*started);
  BackgroundApp app(serve_app(d->socket()));
  Ctl ctl(d->socket());

  // The three jobs, done.
  std::map<int, json> sample;
  ASSERT_TRUE(wait_for(
      [&] {
        sample.clear();
        const json jobs = ctl.request({{"cmd", "jobs"}}); // kept: the loop walks inside it
        for (const auto& j : jobs["result"]["jobs"]) {
          std::string what = j.value("description", "");
          for (int k = 1; k <= 3; ++k) {
            if (what.find("sample " + std::to_string(k)) != std::string::npos &&
                j.value("state", "") == "done")
              sample[k] = j;
          }
        }
        return sample.size() == 3;
      },
      300s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  print_jobs(ctl);
  EXPECT_EQ(sample[1].value("verdict", ""), "verified") << sample[1].dump(2);
  EXPECT_EQ(sample[2].value("verdict", ""), "verified") << sample[2].dump(2);
  EXPECT_EQ(sample[3].value("verdict", ""), "mismatch") << sample[3].dump(2);
  EXPECT_GT(sample[2].value("speedup", 0.0), sample[1].value("speedup", 0.0));
  // One request for the three; the next turn hears what bounds the best one, from the cost model
  // of the emulated device that timed it.
  ASSERT_TRUE(wait_for([&] { return llm.requests().size() >= 2; }, 60s)) << d->log();
  EXPECT_NE(llm.requests()[0].body.find("\"n\":3"), std::string::npos) << llm.requests()[0].body;
  const std::string feedback = llm.requests()[1].body;
  EXPECT_NE(feedback.find("The conversation goes on from answer 2"), std::string::npos) << feedback;
  for (const char* figure : {"cost model", "- original: ", "- candidate: ", "-bound (",
                             " registers", " warps per SM (limited by ", "DRAM traffic ",
                             "% of the 4.30 TB/s roofline"}) {
    EXPECT_NE(feedback.find(figure), std::string::npos) << figure << " in " << feedback;
  }
  // The second serves.
  const std::string second = sample[2].value("variant", "");
  ASSERT_FALSE(second.empty()) << sample[2].dump(2);
  json k;
  EXPECT_TRUE(wait_for(
      [&] {
        k = ctl.kernel("accumulate");
        return k.value("serving", "") == second && count(k, "variant_launches") > 5;
      },
      60s))
      << "serving " << k.value("serving", "") << ", want sample 2's " << second << "\n"
      << k.dump(2);
  expect_correct(app);
}

// The tools compile and check, offered to the model within a turn: its check of a wrong kernel
// is validated by the worker on a capture and the mismatch comes back as the tool's result; its
// check of the right one says correct; its answer is then validated in full and served. The
// checks leave no variant behind.
TEST(Agent, LlmChecksItsKernelsWithTheToolsBeforeAnswering) {
  LlmServer llm;
  const std::string wrong = accumulate_rewrite("    out[i] = in[i] * reps + 1;\n");
  const std::string right = accumulate_rewrite("    out[i] = in[i] * reps;\n");
  auto check_call = [](const std::string& id, const std::string& source) {
    return LlmResponse::tool_calls({{id, "check", json{{"source", source}}.dump()}}, 300);
  };
  llm.push(check_call("call_wrong", wrong));
  llm.push(check_call("call_right", right));
  llm.push(LlmResponse::chat(fenced(right), 900));

  DaemonOptions o;
  o.config = llm_config(llm, "max_turns = 1\ntool_calls_per_turn = 2\n");
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "400000000");
  auto started = DaemonProcess::start(std::move(o));
  ASSERT_TRUE(started) << started.error().message;
  auto d = std::move(*started);
  BackgroundApp app(serve_app(d->socket()));
  Ctl ctl(d->socket());

  json variant;
  ASSERT_TRUE(wait_for(
      [&] { return !(variant = ctl.verified_variant("accumulate", "llm")).is_null(); }, 300s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  print_jobs(ctl);
  auto requests = llm.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_NE(requests[0].body.find("\"tools\""), std::string::npos);
  json after_wrong = json::parse(requests[1].body)["messages"].back();
  EXPECT_EQ(after_wrong["tool_call_id"], "call_wrong");
  const std::string mismatch = after_wrong["content"].get<std::string>();
  EXPECT_NE(mismatch.find("computed results that differ from the original's"), std::string::npos)
      << mismatch;
  EXPECT_NE(mismatch.find("element"), std::string::npos) << mismatch;
  json after_right = json::parse(requests[2].body)["messages"].back();
  EXPECT_EQ(after_right["tool_call_id"], "call_right");
  EXPECT_NE(after_right["content"].get<std::string>().find("Correct: correct on 1 capture"),
            std::string::npos)
      << after_right.dump();

  // Two checks and the answer went to the worker; only the answer left a variant.
  const json jobs = ctl.request({{"cmd", "jobs"}});
  int checks = 0, answers = 0;
  for (const auto& j : jobs["result"]["jobs"]) {
    if (j.value("strategy", "") != "llm") continue;
    if (j.value("description", "").find("tool check") != std::string::npos) {
      ++checks;
      EXPECT_EQ(j.value("variant", ""), "") << j.dump(2);
    } else {
      ++answers;
    }
  }
  EXPECT_EQ(checks, 2) << jobs.dump(2);
  EXPECT_EQ(answers, 1) << jobs.dump(2);
  json k;
  EXPECT_TRUE(wait_for([&] { return count(k = ctl.kernel("accumulate"), "variant_launches") > 5; },
                       60s))
      << k.dump(2);
  expect_correct(app);
}

// agent.llm.examples: once the model's rewrite of one kernel is verified, the prompt for another
// kernel shows it (its source and speedup) as an example; the first prompt, with nothing verified
// yet, has none.
TEST(Agent, LlmIsShownVerifiedRewritesOfOtherKernels) {
  LlmServer llm;
  llm.push(LlmResponse::chat(fenced(accumulate_rewrite("    out[i] = in[i] * reps;\n")), 900));

  DaemonOptions o;
  o.config = llm_config(llm, "max_turns = 1\nexamples = 2\n");
  o.env.emplace("HONE_EMU_INSTRUCTION_BUDGET", "400000000");
  auto started = DaemonProcess::start(std::move(o));
  ASSERT_TRUE(started) << started.error().message;
  auto d = std::move(*started);
  Ctl ctl(d->socket());
  {
    BackgroundApp app(serve_app(d->socket()));
    json variant;
    ASSERT_TRUE(wait_for(
        [&] { return !(variant = ctl.verified_variant("accumulate", "llm")).is_null(); }, 300s))
        << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
    expect_correct(app);
  }
  ASSERT_GE(llm.requests().size(), 1u);
  EXPECT_EQ(llm.requests()[0].body.find("Verified rewrites"), std::string::npos)
      << llm.requests()[0].body;

  // Another application, another kernel: its prompt holds the verified rewrite.
  BackgroundApp app(spec_app(d->socket(), {"--rounds", "2"}));
  std::string prompt;
  ASSERT_TRUE(wait_for(
      [&] {
        for (const auto& r : llm.requests()) {
          if (r.body.find("mix_rounds") == std::string::npos) continue;
          prompt = json::parse(r.body)["messages"].back()["content"].get<std::string>();
          return true;
        }
        return false;
      },
      300s))
      << d->log();
  EXPECT_NE(prompt.find("## Verified rewrites of other kernels on this host"), std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("### `accumulate`, verified "), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("    out[i] = in[i] * reps;\n"), std::string::npos) << prompt;
  expect_correct(app);
}

// The agent keeps to its share of the GPU: while the applications' load is above
// optimizer.pause_load no validation job starts (the queue waits), and once resumed the worker
// is busy at most about optimizer.gpu_share of the time.
TEST(Agent, ValidationPausesUnderLoadAndKeepsToItsShare) {
  // pause_load far below what any application shows: validation pauses as soon as the shim's
  // first timed launches are reported.
  auto text = [](const std::string& pause_load, const std::string& gpu_share) {
    std::string t = agent_config();
    std::string share = "gpu_share = 1.0";
    t.replace(t.find(share), share.size(),
              "gpu_share = " + gpu_share + "\npause_load = " + pause_load);
    return t;
  };
  // Back to back while not paused: three seconds would see several jobs end.
  auto d = start_daemon(text("0.000001", "1.0"));
  ASSERT_TRUE(d);
  AppOptions o = serve_app(d->socket(), "2"); // no candidate needs to be faster here
  o.env["HONE_SAMPLE_EVERY"] = "1"; // every launch timed: the load is known at once
  BackgroundApp app(o);
  Ctl ctl(d->socket());
  auto workers = [&] { return ctl.request({{"cmd", "status"}})["result"]["workers"]; };
  auto jobs_in = [&](const char* state) {
    json all = ctl.request({{"cmd", "jobs"}})["result"]["jobs"]; // a copy: the reply is a temporary
    return size_t(std::count_if(all.begin(), all.end(),
                                [&](const json& j) { return j.value("state", "") == state; }));
  };
  ASSERT_TRUE(wait_for([&] { return workers().value("paused", false); }, 60s)) << d->log();
  ASSERT_TRUE(wait_for([&] { return jobs_in("queued") >= 2; }, 60s))
      << ctl.request({{"cmd", "jobs"}}).dump(2);
  size_t done = jobs_in("done");
  std::this_thread::sleep_for(3s);
  // At most the job the worker had when the pause began ended; nothing new started.
  EXPECT_LE(jobs_in("done"), done + 1) << ctl.request({{"cmd", "jobs"}}).dump(2);
  EXPECT_TRUE(workers().value("paused", false));

  // Resumed (pause_load = 0: never pause) by a reload, the queue drains within the GPU share.
  d->write_config(text("0", "0.5"));
  d->signal(SIGHUP);
  ASSERT_TRUE(wait_for(
      [&] {
        json all = ctl.request({{"cmd", "jobs"}})["result"]["jobs"];
        return all.size() >= 6 && std::all_of(all.begin(), all.end(), [](const json& j) {
                 return j.value("state", "") == "done";
               });
      },
      240s))
      << ctl.request({{"cmd", "jobs"}}).dump(2) << d->log();
  json w = workers();
  EXPECT_FALSE(w.value("paused", true)) << w.dump();
  double busy = w.value("busy_seconds", 0.0), active = w.value("active_seconds", 0.0);
  ASSERT_GT(busy, 0) << w.dump();
  ASSERT_GT(active, 0) << w.dump();
  std::printf("worker busy %.2f s of %.2f s (%.0f%%; gpu_share 50%%)\n", busy, active,
              100 * busy / active);
  // After each job of T s the next waits T(1 - s)/s: over six jobs or more the busy share stays
  // within 30% of s (the last job's wait is not in the span).
  EXPECT_LE(busy / active, 0.5 * 1.3) << w.dump();
  expect_correct(app);
}
