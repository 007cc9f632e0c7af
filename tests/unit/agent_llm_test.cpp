// agent/llm*: the LLM strategy against a scripted OpenAI-compatible endpoint on loopback
// (support/llm_server.*): what it asks, what it makes of the answers, how verdicts are fed back,
// how it ends (turns, budgets, errors, cancellation) and that the API key never leaks.
#include "agent/llm.hpp"
#include "agent/llm_answer.hpp"
#include "agent/llm_feedback.hpp"
#include "cuda/nvrtc.hpp"
#include "llm_server.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace {

using namespace hone;
using namespace hone::agent;
using hone::test::LlmResponse;
using hone::test::LlmServer;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* k_key = "sk-hone-test-4f9c1e7a2b";

// y = a * x + y, as NVRTC would emit it: x (param 0) is read, y (param 1) read and written.
constexpr const char* k_ptx = R"(.version 7.0
.target sm_70
.address_size 64

.visible .entry saxpy(
	.param .u64 saxpy_param_0,
	.param .u64 saxpy_param_1,
	.param .f32 saxpy_param_2,
	.param .u32 saxpy_param_3
)
{
	.reg .pred %p<2>;
	.reg .f32 %f<5>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [saxpy_param_0];
	ld.param.u64 %rd2, [saxpy_param_1];
	ld.param.f32 %f1, [saxpy_param_2];
	ld.param.u32 %r2, [saxpy_param_3];
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.s32 %r1, %r3, %r4, %r5;
	setp.ge.u32 %p1, %r1, %r2;
	@%p1 bra $L__BB0_2;
	cvta.to.global.u64 %rd3, %rd1;
	mul.wide.u32 %rd4, %r1, 4;
	add.s64 %rd5, %rd3, %rd4;
	ld.global.f32 %f2, [%rd5];
	cvta.to.global.u64 %rd6, %rd2;
	add.s64 %rd7, %rd6, %rd4;
	ld.global.f32 %f3, [%rd7];
	fma.rn.f32 %f4, %f2, %f1, %f3;
	st.global.f32 [%rd7], %f4;
$L__BB0_2:
	ret;
}

.visible .entry unrelated_kernel()
{
	ret;
}
)";

constexpr const char* k_source = R"(#include "saxpy_params.h"
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";
constexpr const char* k_header = "#pragma once\n#define SAXPY_UNROLL 4\n";

template <class T> std::string bytes_of(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

Capture capture() {
  Capture c;
  c.status = CaptureStatus::ok;
  c.grid = {4096, 1, 1};
  c.block = {256, 1, 1};
  c.shared_bytes = 0;
  c.params = {{0, 8}, {8, 8}, {16, 4}, {20, 4}};
  c.param_bytes = bytes_of(uint64_t(0x7f0000001000)) + bytes_of(uint64_t(0x7f0000800000)) +
                  bytes_of(2.5f) + bytes_of(uint32_t(1048576));
  CaptureBuffer x{.param = 0, .pointer = 0x7f0000001000, .base = 0x7f0000001000, .size = 4194304};
  CaptureBuffer y{.param = 1, .pointer = 0x7f0000800000, .base = 0x7f0000800000, .size = 4194304};
  c.buffers = {x, y};
  c.arch = "sm_90";
  return c;
}

KernelTask ptx_task() {
  KernelTask t;
  t.key.entry = "saxpy";
  t.format = proto::ImageFormat::ptx;
  t.image = std::string(k_ptx) + '\0';
  t.captures = {capture(), capture()};
  t.arch = "sm_90";
  t.device = "NVIDIA Test GPU";
  return t;
}

KernelTask source_task() {
  KernelTask t = ptx_task();
  proto::SourceInfo src;
  src.name = "saxpy.cu";
  src.source = k_source;
  src.headers = {{"saxpy_params.h", k_header}};
  src.options = {"--gpu-architecture=compute_90",
                 "-std=c++17",
                 "-DSCALE=2",
                 "--use_fast_math",
                 "-I/opt/include",
                 "-lineinfo"};
  t.source = src;
  return t;
}

LlmSettings settings(const LlmServer& server) {
  LlmSettings s;
  s.enabled = true;
  s.base_url = server.base_url();
  s.model = "test-model";
  s.api_key = k_key;
  s.connect_timeout_s = 2;
  s.request_timeout_s = 10;
  s.max_turns = 4;
  s.wall_budget_s_per_kernel = 60;
  return s;
}

std::string kernel_reply(const std::string& marker = "first try") {
  return "Here is a faster version.\n\n```cuda\n#include \"saxpy_params.h\"\n// " + marker +
         "\nextern \"C\" __global__ void hone_candidate(const float* x, float* y, float a, "
         "unsigned n) {\n  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) "
         "y[i] = fmaf(a, x[i], y[i]);\n}\n```\n\nIt fuses the multiply-add.";
}

// Wait for `done` with a generous deadline (these tests check that things end, not how fast).
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 30s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// The next candidates the session hands over; empty when it finished without one.
std::vector<Candidate> next_candidates(Session& session) {
  std::vector<Candidate> out;
  eventually([&] {
    out = session.poll();
    return !out.empty() || session.done();
  });
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

json body(const hone::test::LlmRequest& r) {
  return json::parse(r.body);
}

std::string message(const hone::test::LlmRequest& r, size_t index) {
  return body(r)["messages"][index]["content"].get<std::string>();
}

std::string last_message(const hone::test::LlmRequest& r) {
  return body(r)["messages"].back()["content"].get<std::string>();
}

Verdict verdict(VerdictKind kind, std::string text = {}) {
  Verdict v;
  v.kind = kind;
  v.message = std::move(text);
  if (kind == VerdictKind::verified || kind == VerdictKind::not_faster) {
    v.original_ns = 3000;
    v.candidate_ns = kind == VerdictKind::verified ? 2000 : 2950;
    v.speedup = v.original_ns / v.candidate_ns;
  }
  return v;
}

TEST(LlmStrategy, DescribesItself) {
  LlmSettings s;
  s.max_turns = 6;
  auto strategy = make_llm_strategy(s);
  EXPECT_EQ(strategy->id(), "llm");
  EXPECT_TRUE(strategy->needs_captures());
  EXPECT_GT(strategy->expected_speedup(), 1.0);
  EXPECT_EQ(strategy->cost_gpu_seconds(), 6.0);
}

TEST(LlmStrategy, NeedsSourceOrPtx) {
  LlmServer server;
  auto strategy = make_llm_strategy(settings(server));
  KernelTask cubin = ptx_task();
  cubin.format = proto::ImageFormat::cubin;
  cubin.image = "\177ELF";
  EXPECT_EQ(strategy->start(cubin), nullptr);
  KernelTask missing = ptx_task();
  missing.key.entry = "not_in_the_module";
  EXPECT_EQ(strategy->start(missing), nullptr);
  // The source alone is enough (a cubin built by NVRTC from a captured source).
  cubin.source = source_task().source;
  server.push(LlmResponse::chat(kernel_reply()));
  auto session = strategy->start(cubin);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(next_candidates(*session).size(), 1u);
  EXPECT_TRUE(server.wait_for_requests(1, 1s));
  EXPECT_TRUE(contains(message(server.requests()[0], 1), "param 2 = bytes 00 00 20 40"));
}

TEST(LlmStrategy, PromptTooLargeForTheBudgetIsNotTried) {
  LlmServer server;
  LlmSettings s = settings(server);
  s.token_budget_per_kernel = 1000;
  EXPECT_EQ(make_llm_strategy(s)->start(ptx_task()), nullptr);
  EXPECT_TRUE(server.requests().empty());
}

// The model is told this host's validation settings, not generic ones.
TEST(LlmStrategy, PromptQuotesTheValidationSettings) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  LlmSettings s = settings(server);
  s.f32_rel = 1e-4;
  s.min_speedup = 1.10;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(next_candidates(*session).size(), 1u) << session->state();
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  std::string system = body(requests[0])["messages"][0]["content"];
  EXPECT_TRUE(contains(system, "about 0.0001 relative for float")) << system;
  EXPECT_TRUE(contains(system, "by at least 10% beyond the measurement noise")) << system;
  EXPECT_FALSE(contains(system, "{F32_REL}")) << system;
}

TEST(LlmStrategy, GoodReplyBecomesACandidate) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  auto candidates = next_candidates(*session);
  ASSERT_EQ(candidates.size(), 1u) << session->state();
  const Candidate& c = candidates[0];
  EXPECT_EQ(c.strategy, "llm");
  EXPECT_EQ(c.kind, CandidateKind::cuda);
  EXPECT_EQ(c.entry, "hone_candidate");
  EXPECT_EQ(c.comparison, Comparison::tolerance);
  EXPECT_EQ(c.tag, 1u);
  EXPECT_EQ(c.description, "LLM turn 1 (test-model)");
  // The fenced block only, with the original's header inlined in place of its #include.
  EXPECT_TRUE(contains(c.code, "extern \"C\" __global__ void hone_candidate("));
  EXPECT_TRUE(contains(c.code, "#define SAXPY_UNROLL 4"));
  EXPECT_FALSE(contains(c.code, "#include \"saxpy_params.h\""));
  EXPECT_FALSE(contains(c.code, "Here is"));
  EXPECT_FALSE(contains(c.code, "```"));
  // The options that keep their meaning, include paths too (for files the source includes from
  // disk): no architecture, debug or fast math.
  EXPECT_EQ(c.nvrtc_options,
            (std::vector<std::string>{"-std=c++17", "-DSCALE=2", "-I/opt/include"}));
  // Every capture used block 256: the candidate serves only such launches.
  EXPECT_EQ(c.guard.block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_TRUE(eventually([&] { return contains(session->state(), "waiting for the verdict"); }))
      << session->state();
  EXPECT_EQ(session->state(), "turn 1 of 4: waiting for the verdict");
  EXPECT_FALSE(session->done());

  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  const auto& r = requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/chat/completions");
  EXPECT_EQ(r.headers.at("authorization"), std::string("Bearer ") + k_key);
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  json b = body(r);
  EXPECT_EQ(b["model"], "test-model");
  EXPECT_EQ(b["max_tokens"], 4096);
  EXPECT_DOUBLE_EQ(b["temperature"].get<double>(), 0.2);
  ASSERT_EQ(b["messages"].size(), 2u);
  EXPECT_EQ(b["messages"][0]["role"], "system");
  EXPECT_EQ(b["messages"][1]["role"], "user");
  std::string system = message(r, 0);
  EXPECT_TRUE(contains(system, "hone_candidate")) << system;
  EXPECT_TRUE(contains(system, "tolerance")) << system;
  std::string user = message(r, 1);
  for (const char* part :
       {"extern \"C\" __global__ void saxpy(", // the source
        "### Header `saxpy_params.h`", "#define SAXPY_UNROLL 4", "-std=c++17",
        "0. `saxpy_param_0`: .u64, 8 bytes, pointer to f32 data, read",
        "1. `saxpy_param_1`: .u64, 8 bytes, pointer to f32 data, read, written",
        "2. `saxpy_param_2`: .f32, 4 bytes, scalar", "3. `saxpy_param_3`: .u32, 4 bytes, scalar",
        "grid (4096, 1, 1), block (256, 1, 1), dynamic shared memory 0 bytes", "param 2 = 2.5",
        "param 3 = 1048576", "(2 launches)",
        "param 1 points into an allocation of 4194304 bytes at offset 0", "NVIDIA Test GPU (sm_90)",
        "block (256, 1, 1): your kernel will only serve"}) {
    EXPECT_TRUE(contains(user, part)) << part << "\n---\n" << user;
  }
  // With the source known, the PTX is not sent.
  EXPECT_FALSE(contains(user, "ld.global.f32")) << user;
}

// What the worker does with a candidate: NVRTC on the code alone (no headers beside it), with the
// candidate's options after the architecture.
TEST(LlmStrategy, CandidateCompilesOnItsOwn) {
  LlmServer server;
  server.push(LlmResponse::chat(
      "```cuda\n#include \"saxpy_params.h\"\n#include \"saxpy_params.h\"\n"
      "extern \"C\" __global__ void hone_candidate(const float* x, float* y, float a, unsigned n) "
      "{\n  unsigned i = (blockIdx.x * blockDim.x + threadIdx.x) * SAXPY_UNROLL;\n"
      "#pragma unroll\n  for (unsigned k = 0; k < SAXPY_UNROLL; ++k)\n"
      "    if (i + k < n) y[i + k] = fmaf(a * SCALE / 2, x[i + k], y[i + k]);\n}\n```\n"));
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  auto candidates = next_candidates(*session);
  ASSERT_EQ(candidates.size(), 1u) << session->state();
  const Candidate& c = candidates[0];
  std::vector<std::string> options{"--gpu-architecture=compute_90"};
  options.insert(options.end(), c.nvrtc_options.begin(), c.nvrtc_options.end());
  auto compiled = cuda::nvrtc_compile(c.code, "candidate.cu", options);
  ASSERT_TRUE(compiled) << compiled.error().message << "\n" << c.code;
  EXPECT_TRUE(contains(compiled->ptx, ".entry hone_candidate(")) << compiled->ptx;
}

TEST(LlmStrategy, WithoutSourceThePtxIsSent) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  auto session = make_llm_strategy(settings(server))->start(ptx_task());
  ASSERT_NE(session, nullptr);
  auto candidates = next_candidates(*session);
  ASSERT_EQ(candidates.size(), 1u) << session->state();
  EXPECT_TRUE(candidates[0].nvrtc_options.empty());
  std::string user = message(server.requests().at(0), 1);
  EXPECT_TRUE(contains(user, ".entry saxpy")) << user;
  EXPECT_TRUE(contains(user, "fma.rn.f32")) << user;
  EXPECT_FALSE(contains(user, "unrelated_kernel")) << user; // only the entry's own code
  EXPECT_TRUE(contains(user, "3. `saxpy_param_3`: .u32")) << user;
}

TEST(LlmStrategy, MismatchIsFedBackAndTheNextAnswerIsTurnTwo) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply("first try")));
  server.push(LlmResponse::chat(kernel_reply("second try")));
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  auto first = next_candidates(*session);
  ASSERT_EQ(first.size(), 1u) << session->state();
  session->on_verdict(first[0], verdict(VerdictKind::mismatch,
                                        "buffer 1 (param 1): element 17: got 3.5, want 3.25"));
  auto second = next_candidates(*session);
  ASSERT_EQ(second.size(), 1u) << session->state();
  EXPECT_EQ(second[0].tag, 2u);
  EXPECT_EQ(second[0].description, "LLM turn 2 (test-model)");
  EXPECT_TRUE(contains(second[0].code, "second try"));

  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  json messages = body(requests[1])["messages"];
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[2]["role"], "assistant");
  EXPECT_TRUE(contains(messages[2]["content"].get<std::string>(), "first try"));
  EXPECT_EQ(messages[3]["role"], "user");
  std::string feedback = messages[3]["content"];
  EXPECT_TRUE(contains(feedback, "differ from the original")) << feedback;
  EXPECT_TRUE(contains(feedback, "buffer 1 (param 1): element 17: got 3.5, want 3.25")) << feedback;
}

TEST(LlmStrategy, VerifiedIsFedBackWithItsTimings) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  server.push(LlmResponse::chat(kernel_reply("faster still")));
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  auto first = next_candidates(*session);
  ASSERT_EQ(first.size(), 1u);
  session->on_verdict(first[0], verdict(VerdictKind::verified));
  ASSERT_EQ(next_candidates(*session).size(), 1u);
  std::string feedback = last_message(server.requests().at(1));
  EXPECT_TRUE(contains(feedback, "verified")) << feedback;
  EXPECT_TRUE(contains(feedback, "2000 ns against the original's 3000 ns (1.50x)")) << feedback;
  EXPECT_TRUE(contains(feedback, "faster still")) << feedback;
  EXPECT_TRUE(eventually([&] { return contains(session->state(), "waiting for the verdict"); }));
  EXPECT_EQ(session->state(), "turn 2 of 4: waiting for the verdict; best 1.50x (turn 1)");
}

// The profile the worker records (daemon/worker/job_run.cpp), as the emulated device gives it:
// a register-limited, latency-bound original and its rewrite at 32 registers.
std::string emulated_profile_evidence() {
  auto side = [](double ns, int regs, int blocks, const char* limit, int waves, uint64_t latency) {
    return json{{"ns", ns},
                {"registers", regs},
                {"local_bytes", 0},
                {"static_shared_bytes", 0},
                {"blocks_per_sm", blocks},
                {"warps_per_sm", blocks * 4},
                {"max_warps_per_sm", 64},
                {"bound", "latency"},
                {"occupancy_limit", limit},
                {"waves", waves},
                {"modeled_ns", uint64_t(ns)},
                {"terms_ns",
                 {{"issue", 1665}, {"latency", latency}, {"L1", 919}, {"L2", 1148}, {"DRAM", 925}}},
                {"dram_bytes", 3974880},
                {"l2_bytes", 8035584},
                {"dram_bytes_per_s_peak", 4300560000000.0}};
  };
  json profile = {{"source", "emulated device cost model"},
                  {"capture", 0},
                  {"buffer_bytes", 4667392},
                  {"original", side(38836, 78, 6, "registers", 2, 37320)},
                  {"candidate", side(20177, 32, 16, "warps", 1, 18660)}};
  return json{{"schema", "hone.evidence/1"}, {"profile", profile}}.dump();
}

TEST(LlmFeedback, TheCostModelSaysWhatBoundsEachKernel) {
  std::string text = profile_feedback(emulated_profile_evidence());
  EXPECT_TRUE(contains(text, "cost model")) << text;
  EXPECT_TRUE(contains(text, "- original: 38.84 us; latency-bound (latency 37.32 us, issue 1.67 us, "
                             "L2 1.15 us, DRAM 0.93 us, L1 0.92 us); 78 registers, 0 B local "
                             "memory per thread (spills, stack), 0 B static shared memory; 24 of "
                             "64 warps per SM (limited by registers), 2 waves; DRAM traffic "
                             "3.97 MB = 0.10 TB/s, 2% of the 4.30 TB/s roofline, L2 traffic "
                             "8.04 MB"))
      << text;
  EXPECT_TRUE(contains(text, "- candidate: 20.18 us; latency-bound (latency 18.66 us")) << text;
  EXPECT_TRUE(contains(text, "32 registers")) << text;
  EXPECT_TRUE(contains(text, "64 of 64 warps per SM (limited by warps), 1 wave;")) << text;
}

TEST(LlmFeedback, OnAGpuTheDriversResourcesAndTheImpliedBandwidth) {
  json profile = {{"source", "driver"},
                  {"buffer_bytes", 8000000},
                  {"dram_bytes_per_s_peak", 4.8e12},
                  {"original",
                   {{"ns", 4000},
                    {"registers", 40},
                    {"local_bytes", 16},
                    {"static_shared_bytes", 4096},
                    {"blocks_per_sm", 6},
                    {"warps_per_sm", 48},
                    {"max_warps_per_sm", 64}}},
                  {"candidate", {{"ns", 2000}, {"registers", 32}}}};
  std::string text = profile_feedback(json{{"profile", profile}}.dump());
  EXPECT_TRUE(contains(text, "ptxas")) << text;
  EXPECT_TRUE(contains(text, "- original: 4.00 us; 40 registers, 16 B local memory per thread "
                             "(spills, stack), 4096 B static shared memory; 48 of 64 warps per "
                             "SM; its buffers (8.00 MB) moved once in that time would be 2.00 "
                             "TB/s, 42% of the 4.80 TB/s peak"))
      << text;
  EXPECT_TRUE(contains(text, "- candidate: 2.00 us; 32 registers; its buffers (8.00 MB) moved "
                             "once in that time would be 4.00 TB/s, 83% of the 4.80 TB/s peak"))
      << text;
  EXPECT_FALSE(contains(text, "-bound")) << text; // the driver does not say; nothing is made up
}

TEST(LlmFeedback, NoProfileNoLines) {
  EXPECT_EQ(profile_feedback(""), "");
  EXPECT_EQ(profile_feedback("{not json"), "");
  EXPECT_EQ(profile_feedback(R"({"schema": "hone.evidence/1"})"), "");
  EXPECT_EQ(profile_feedback(R"({"profile": {"original": 3}})"), "");
}

TEST(LlmStrategy, VerifiedIsFedBackWithWhatBoundsEachKernel) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  server.push(LlmResponse::chat(kernel_reply("faster still")));
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  auto first = next_candidates(*session);
  ASSERT_EQ(first.size(), 1u);
  Verdict v = verdict(VerdictKind::verified);
  v.evidence_json = emulated_profile_evidence();
  session->on_verdict(first[0], v);
  ASSERT_EQ(next_candidates(*session).size(), 1u);
  std::string feedback = last_message(server.requests().at(1));
  EXPECT_TRUE(contains(feedback, "2000 ns against the original's 3000 ns (1.50x).\n")) << feedback;
  EXPECT_TRUE(contains(feedback, "- original: 38.84 us; latency-bound")) << feedback;
  EXPECT_TRUE(contains(feedback, "(limited by registers)")) << feedback;
  EXPECT_TRUE(contains(feedback, "Make it faster still")) << feedback;
}

TEST(LlmStrategy, ExamplesOfOtherKernelsAreShownOnlyWhenAskedFor) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  server.push(LlmResponse::chat(kernel_reply()));
  LlmSettings off = settings(server);
  EXPECT_EQ(make_llm_strategy(off)->examples_wanted(), 0u);
  LlmSettings on = settings(server);
  on.examples = 2;
  auto strategy = make_llm_strategy(on);
  EXPECT_EQ(strategy->examples_wanted(), 2u);

  const std::string rewrite =
      "extern \"C\" __global__ void hone_candidate(int* out, const int* in, int n, int reps)\n"
      "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "    if (i < n) out[i] = in[i] * reps;\n}\n";
  KernelTask task = source_task();
  task.examples = {{"accumulate", 1.32, rewrite}, {"_Z6reduceILi4EEvPf", 1.10, "// reduce\n"}};
  auto with = strategy->start(task);
  ASSERT_NE(with, nullptr);
  ASSERT_EQ(next_candidates(*with).size(), 1u);
  std::string prompt = last_message(server.requests().at(0));
  EXPECT_TRUE(contains(prompt, "## Verified rewrites of other kernels on this host")) << prompt;
  EXPECT_TRUE(contains(prompt, "### `accumulate`, verified 1.32x faster than its original\n```cuda\n" +
                                   rewrite + "```"))
      << prompt;
  EXPECT_TRUE(contains(prompt, "### `void reduce<4>(float*)`, verified 1.10x")) << prompt;
  // The examples come before the request, which stays the prompt's last word.
  EXPECT_LT(prompt.find("Verified rewrites"), prompt.find("Write hone_candidate.")) << prompt;
  with.reset();

  // A strategy that did not ask is given none by the optimizer; without any, no section.
  auto without = make_llm_strategy(off)->start(source_task());
  ASSERT_NE(without, nullptr);
  ASSERT_EQ(next_candidates(*without).size(), 1u);
  EXPECT_FALSE(contains(last_message(server.requests().at(1)), "Verified rewrites"));
}

TEST(LlmStrategy, NotFasterAndCompileErrorsAreFedBack) {
  LlmServer server;
  for (int i = 0; i < 3; ++i) server.push(LlmResponse::chat(kernel_reply()));
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  auto c = next_candidates(*session);
  ASSERT_EQ(c.size(), 1u);
  session->on_verdict(c[0], verdict(VerdictKind::not_faster, "1.02x is within the noise"));
  c = next_candidates(*session);
  ASSERT_EQ(c.size(), 1u);
  session->on_verdict(c[0], verdict(VerdictKind::compile_error,
                                    "candidate.cu(3): error: identifier \"fmaff\" is undefined"));
  ASSERT_EQ(next_candidates(*session).size(), 1u);
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  std::string slow = last_message(requests[1]);
  EXPECT_TRUE(contains(slow, "not faster")) << slow;
  EXPECT_TRUE(contains(slow, "2950 ns against the original's 3000 ns")) << slow;
  EXPECT_TRUE(contains(slow, "1.02x is within the noise")) << slow;
  std::string compile = last_message(requests[2]);
  EXPECT_TRUE(contains(compile, "did not compile")) << compile;
  EXPECT_TRUE(contains(compile, "identifier \"fmaff\" is undefined")) << compile;
}

TEST(LlmStrategy, MalformedRepliesAreFedBackAndCountAsTurns) {
  LlmServer server;
  server.push(LlmResponse::chat("I would unroll the loop."));
  server.push(LlmResponse::chat("```cuda\n__global__ void faster(float* x) {}\n```\n"
                                "```cuda\n__global__ void fastest(float* x) {}\n```\n"));
  server.push(LlmResponse::chat(
      "```cuda\n__global__ void saxpy(const float* x, float* y, float a, unsigned n) {}\n"
      "void run(float* x) { float* d; cudaMalloc(&d, 4); }\n```\n"));
  LlmResponse not_json;
  not_json.body = "<html>gateway</html>";
  server.push(not_json);
  LlmResponse no_choices;
  no_choices.body = R"({"object": "chat.completion", "choices": []})";
  server.push(no_choices);
  server.push(LlmResponse::chat(kernel_reply("at last")));
  LlmSettings s = settings(server);
  s.max_turns = 6;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  auto candidates = next_candidates(*session);
  ASSERT_EQ(candidates.size(), 1u) << session->state();
  EXPECT_EQ(candidates[0].tag, 6u); // five turns went to the malformed replies
  EXPECT_TRUE(contains(candidates[0].code, "at last"));
  EXPECT_TRUE(eventually([&] { return session->done(); }));
  EXPECT_EQ(session->state(), "done: 6 of 6 turns used");
  EXPECT_TRUE(session->poll().empty());

  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 6u);
  const char* expected[] = {"no fenced code block",
                            "defines 2 kernels (faster, fastest) and none is named hone_candidate",
                            "holds host code (cudaMalloc) outside main()",
                            "the reply is not JSON: <html>gateway</html>",
                            "no choices[0].message.content"};
  for (size_t i = 0; i < 5; ++i) {
    std::string feedback = last_message(requests[i + 1]);
    EXPECT_TRUE(contains(feedback, expected[i])) << i << ": " << feedback;
    // The roles keep alternating, as some chat templates require.
    json messages = body(requests[i + 1])["messages"];
    for (size_t m = 1; m < messages.size(); ++m) {
      EXPECT_EQ(messages[m]["role"], m % 2 ? "user" : "assistant") << i << ", " << m;
    }
  }
}

TEST(LlmStrategy, OneServerErrorIsRetried) {
  LlmServer server;
  LlmResponse error;
  error.status = 500;
  error.body = R"({"error": "overloaded"})";
  server.push(error);
  server.push(LlmResponse::chat(kernel_reply()));
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  auto candidates = next_candidates(*session);
  ASSERT_EQ(candidates.size(), 1u) << session->state();
  EXPECT_EQ(candidates[0].tag, 2u);
  // The retry is the same conversation.
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].body, requests[1].body);
}

TEST(LlmStrategy, TwoServerErrorsInARowEndTheSession) {
  LlmServer server;
  LlmResponse error;
  error.status = 500;
  error.body = "upstream\nfailed";
  server.push(error);
  server.push(error);
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(next_candidates(*session).empty());
  ASSERT_TRUE(session->done());
  std::string state = session->state();
  EXPECT_EQ(state.rfind("done: gave up: HTTP 500 from http://127.0.0.1:", 0), 0u) << state;
  EXPECT_TRUE(contains(state, "/v1/chat/completions: upstream failed")) << state;
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(LlmStrategy, UnauthorizedEndsTheSessionAtOnce) {
  LlmServer server;
  LlmResponse denied;
  denied.status = 401;
  denied.body = R"({"error": {"message": "invalid api key"}})";
  server.push(denied);
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(next_candidates(*session).empty());
  std::string state = session->state();
  EXPECT_EQ(state.rfind("done: gave up: HTTP 401", 0), 0u) << state;
  EXPECT_TRUE(contains(state, "invalid api key")) << state;
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(LlmStrategy, NoKeyNoAuthorizationHeader) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  LlmSettings s = settings(server);
  s.api_key.clear();
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(next_candidates(*session).size(), 1u);
  EXPECT_EQ(server.requests().at(0).headers.count("authorization"), 0u);
}

TEST(LlmStrategy, SlowServerTimesOutAndTheSessionEnds) {
  LlmServer server;
  LlmResponse slow = LlmResponse::chat(kernel_reply());
  slow.delay_ms = 5000;
  server.push(slow);
  server.push(slow);
  LlmSettings s = settings(server);
  s.request_timeout_s = 0.3;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(next_candidates(*session).empty());
  ASSERT_TRUE(session->done());
  std::string state = session->state();
  EXPECT_EQ(state.rfind("done: gave up: no reply from", 0), 0u) << state;
  EXPECT_TRUE(contains(state, "within 0.3 s")) << state;
}

TEST(LlmStrategy, DroppedConnectionsEndTheSession) {
  LlmServer server;
  LlmResponse drop;
  drop.close_without_reply = true;
  server.push(drop);
  server.push(drop);
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(next_candidates(*session).empty());
  std::string state = session->state();
  EXPECT_EQ(state.rfind("done: gave up: request to http://127.0.0.1:", 0), 0u) << state;
}

TEST(LlmStrategy, DestroyingASessionDoesNotWaitForAHungServer) {
  LlmServer server;
  LlmResponse hang;
  hang.hang = true;
  server.push(hang);
  LlmSettings s = settings(server);
  s.request_timeout_s = 600;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(server.wait_for_requests(1, 30s));
  EXPECT_EQ(session->state(), "turn 1 of 4: waiting for the model");
  EXPECT_TRUE(session->poll().empty());
  EXPECT_FALSE(session->done());
  auto before = std::chrono::steady_clock::now();
  session.reset();
  // Far less than the request timeout: the transfer notices the cancellation itself.
  EXPECT_LT(std::chrono::steady_clock::now() - before, 60s);
}

TEST(LlmStrategy, DestroyingASessionWaitingForAVerdictIsPrompt) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  LlmSettings s = settings(server);
  s.wall_budget_s_per_kernel = 3600;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(next_candidates(*session).size(), 1u);
  auto before = std::chrono::steady_clock::now();
  session.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 60s);
}

TEST(LlmStrategy, OversizedReplyIsRefused) {
  LlmServer server;
  LlmResponse huge;
  huge.oversize_bytes = 1 << 20;
  server.push(huge);
  LlmResponse declared = LlmResponse::chat(std::string(8192, 'x'));
  server.push(declared); // its Content-Length already says too much
  server.push(LlmResponse::chat(kernel_reply()));
  LlmSettings s = settings(server);
  s.max_reply_bytes = 4096;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  auto candidates = next_candidates(*session);
  ASSERT_EQ(candidates.size(), 1u) << session->state();
  EXPECT_EQ(candidates[0].tag, 3u);
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_TRUE(contains(last_message(requests[1]), "reply larger than 4096 bytes"))
      << last_message(requests[1]);
  EXPECT_TRUE(contains(last_message(requests[2]), "reply larger than 4096 bytes"));
}

TEST(LlmStrategy, MaxTurnsEndTheSession) {
  LlmServer server;
  for (int i = 0; i < 3; ++i) server.push(LlmResponse::chat(kernel_reply()));
  LlmSettings s = settings(server);
  s.max_turns = 2;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  auto first = next_candidates(*session);
  ASSERT_EQ(first.size(), 1u);
  session->on_verdict(first[0], verdict(VerdictKind::verified));
  auto second = next_candidates(*session);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_TRUE(eventually([&] { return session->done(); }));
  EXPECT_EQ(session->state(), "done: 2 of 2 turns used; best 1.50x (turn 1)");
  // The last verdict still counts for the summary.
  Verdict better = verdict(VerdictKind::verified);
  better.speedup = 2.0;
  session->on_verdict(second[0], better);
  EXPECT_EQ(session->state(), "done: 2 of 2 turns used; best 2.00x (turn 2)");
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(LlmStrategy, TokenBudgetEndsTheSession) {
  LlmServer server;
  for (int i = 0; i < 4; ++i) server.push(LlmResponse::chat(kernel_reply(), 2000));
  LlmSettings s = settings(server);
  s.max_reply_tokens = 100;
  s.token_budget_per_kernel = 3000;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  auto c = next_candidates(*session);
  ASSERT_EQ(c.size(), 1u) << session->state();
  EXPECT_EQ(body(server.requests().at(0))["max_tokens"], 100);
  session->on_verdict(c[0], verdict(VerdictKind::mismatch, "element 0"));
  c = next_candidates(*session); // 2000 of 3000 spent: one more turn
  ASSERT_EQ(c.size(), 1u) << session->state();
  session->on_verdict(c[0], verdict(VerdictKind::mismatch, "element 1"));
  EXPECT_TRUE(next_candidates(*session).empty());
  EXPECT_TRUE(session->done());
  EXPECT_EQ(session->state(), "done: budget spent (tokens)");
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(LlmStrategy, WallBudgetEndsTheSession) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  LlmSettings s = settings(server);
  s.wall_budget_s_per_kernel = 0.5;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(next_candidates(*session).size(), 1u);
  // No verdict comes: the session ends when its time is up.
  EXPECT_TRUE(eventually([&] { return session->done(); })) << session->state();
  EXPECT_EQ(session->state(), "done: budget spent (wall time)");
}

TEST(LlmStrategy, UnsupportedVerdictEndsTheSession) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  auto c = next_candidates(*session);
  ASSERT_EQ(c.size(), 1u);
  session->on_verdict(c[0], verdict(VerdictKind::unsupported, "a buffer holds pointers"));
  EXPECT_TRUE(eventually([&] { return session->done(); }));
  EXPECT_EQ(session->state(),
            "done: gave up: the candidate could not be validated (unsupported): a buffer holds "
            "pointers");
  EXPECT_EQ(server.requests().size(), 1u);
}

// A guard that no captured launch passes is the same for every answer of the session: it ends.
TEST(LlmStrategy, NotApplicableVerdictEndsTheSession) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  auto session = make_llm_strategy(settings(server))->start(source_task());
  ASSERT_NE(session, nullptr);
  auto c = next_candidates(*session);
  ASSERT_EQ(c.size(), 1u);
  session->on_verdict(c[0], verdict(VerdictKind::not_applicable, "no capture passes the guard"));
  EXPECT_TRUE(eventually([&] { return session->done(); }));
  EXPECT_EQ(session->state(), "done: gave up: the candidate could not be validated (not "
                              "applicable): no capture passes the guard");
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(LlmStrategy, ConcurrencyIsSharedByTheSessions) {
  LlmServer server;
  for (int i = 0; i < 3; ++i) {
    LlmResponse r = LlmResponse::chat(kernel_reply());
    r.delay_ms = 100;
    server.push(r);
  }
  LlmSettings s = settings(server);
  s.concurrency = 1;
  auto strategy = make_llm_strategy(s);
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < 3; ++i) sessions.push_back(strategy->start(source_task()));
  for (auto& session : sessions) {
    ASSERT_NE(session, nullptr);
    EXPECT_EQ(next_candidates(*session).size(), 1u) << session->state();
  }
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_EQ(server.peak_concurrency(), 1u);
}

// ---- the API key --------------------------------------------------------------------------------

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "hone-llm-test-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text, mode_t mode) const {
    fs::path p = path / name;
    std::ofstream(p, std::ios::binary) << text;
    ::chmod(p.c_str(), mode);
    return p.string();
  }
};

TEST(LlmApiKey, FromAFileOfMode0600) {
  TempDir dir;
  auto key = resolve_api_key("", dir.write("key", std::string(k_key) + "\n", 0600));
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(*key, k_key);
  key = resolve_api_key("", dir.write("key400", k_key, 0400));
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(*key, k_key);
}

TEST(LlmApiKey, FileReadableByOthersIsRefused) {
  TempDir dir;
  std::string path = dir.write("key", k_key, 0644);
  auto key = resolve_api_key("", path);
  ASSERT_FALSE(key);
  EXPECT_EQ(key.error().message, "cannot use the API key file " + path +
                                     " (agent.llm.api_key_file): its mode is 0644; it must be "
                                     "0600 or stricter (chmod 600 " +
                                     path + ")");
  EXPECT_FALSE(resolve_api_key("", dir.write("key640", k_key, 0640)));
}

TEST(LlmApiKey, BadFilesAreRefusedWithoutShowingTheKey) {
  TempDir dir;
  EXPECT_FALSE(resolve_api_key("", (dir.path / "missing").string()));
  auto not_file = resolve_api_key("", dir.path.string());
  ASSERT_FALSE(not_file);
  EXPECT_TRUE(contains(not_file.error().message, "not a regular file"));
  auto empty = resolve_api_key("", dir.write("empty", "\n", 0600));
  ASSERT_FALSE(empty);
  EXPECT_TRUE(contains(empty.error().message, "is empty"));
  auto two_lines = resolve_api_key("", dir.write("two", std::string(k_key) + "\nmore\n", 0600));
  ASSERT_FALSE(two_lines);
  EXPECT_FALSE(contains(two_lines.error().message, k_key));
  EXPECT_TRUE(contains(two_lines.error().message, "HTTP header"));
}

TEST(LlmApiKey, FromTheEnvironment) {
  ::setenv("HONE_LLM_TEST_KEY", k_key, 1);
  auto key = resolve_api_key("HONE_LLM_TEST_KEY", "");
  ::unsetenv("HONE_LLM_TEST_KEY");
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(*key, k_key);
  auto unset = resolve_api_key("HONE_LLM_TEST_KEY", "");
  ASSERT_FALSE(unset);
  EXPECT_EQ(unset.error().message, "the environment variable HONE_LLM_TEST_KEY "
                                   "(agent.llm.api_key_env) that should hold the API key is not "
                                   "set");
}

TEST(LlmApiKey, NoneOrBoth) {
  auto none = resolve_api_key("", "");
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, "");
  EXPECT_FALSE(resolve_api_key("SOME_VAR", "/some/file"));
}

// An ostream sink on the default logger for one test, at the most verbose level.
struct CapturedLog {
  std::ostringstream text;
  std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  CapturedLog() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
    auto logger = std::make_shared<spdlog::logger>("captured", sink);
    logger->set_level(spdlog::level::trace);
    logger->flush_on(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous); }
};

TEST(LlmApiKey, NeverLeaksEvenWhenTheServerEchoesIt) {
  CapturedLog log;
  std::vector<std::string> seen; // every string the strategy hands out
  {
    LlmServer server;
    LlmResponse echo_500;
    echo_500.status = 500;
    echo_500.body = "proxy error";
    echo_500.echo_authorization = true;
    server.push(echo_500);
    // The key inside the model's content: in a comment of the kernel and in the prose.
    server.push(LlmResponse::chat(std::string("Key ") + k_key + "\n" +
                                  kernel_reply(std::string("key ") + k_key)));
    LlmResponse echo_401;
    echo_401.status = 401;
    echo_401.body = "bad credentials";
    echo_401.echo_authorization = true;
    server.push(echo_401);

    auto session = make_llm_strategy(settings(server))->start(source_task());
    ASSERT_NE(session, nullptr);
    seen.push_back(session->state());
    auto c = next_candidates(*session);
    ASSERT_EQ(c.size(), 1u) << session->state();
    seen.push_back(session->state());
    for (const auto& candidate : c) {
      seen.insert(seen.end(), {candidate.code, candidate.description, candidate.entry});
      for (const auto& o : candidate.nvrtc_options) seen.push_back(o);
    }
    EXPECT_TRUE(contains(c[0].code, "[redacted]")) << c[0].code;
    session->on_verdict(c[0], verdict(VerdictKind::mismatch, "element 3"));
    EXPECT_TRUE(eventually([&] { return session->done(); }));
    std::string state = session->state();
    seen.push_back(state);
    EXPECT_TRUE(contains(state, "HTTP 401")) << state;
    EXPECT_TRUE(contains(state, "Bearer [redacted]")) << state;

    // The key did go to the server, where it belongs.
    auto requests = server.requests();
    ASSERT_EQ(requests.size(), 3u);
    for (const auto& r : requests) {
      EXPECT_EQ(r.headers.at("authorization"), std::string("Bearer ") + k_key);
    }
    // The conversation carries the redacted reply, not the key.
    EXPECT_FALSE(contains(requests[2].body, k_key));
  }
  spdlog::default_logger()->flush();
  std::string logged = log.text.str();
  EXPECT_TRUE(contains(logged, "HTTP 500")) << logged; // the log did see the errors
  EXPECT_FALSE(contains(logged, k_key)) << logged;
  for (const auto& s : seen) EXPECT_FALSE(contains(s, k_key)) << s;
}

} // namespace

// ---- answers as models really give them --------------------------------------------------------

namespace {

// The candidate a session makes of one reply `body` on its first turn, or nullopt (with the
// reason the session sent back in `why`).
std::optional<Candidate> first_candidate(LlmResponse reply, std::string* why = nullptr,
                                         LlmServer* keep = nullptr) {
  LlmServer local;
  LlmServer& server = keep ? *keep : local;
  server.push(std::move(reply));
  server.push(LlmResponse::chat(kernel_reply("second turn")));
  LlmSettings s = settings(server);
  s.max_turns = 2;
  auto session = make_llm_strategy(s)->start(source_task());
  if (!session) return std::nullopt;
  auto candidates = next_candidates(*session);
  if (candidates.empty()) return std::nullopt;
  if (candidates[0].tag == 1) return candidates[0];
  auto requests = server.requests();
  if (why && requests.size() >= 2) *why = last_message(requests[1]);
  return std::nullopt;
}

// It compiles on its own, as the worker compiles it, and defines the entry it names.
void expect_compiles(const Candidate& c) {
  std::vector<std::string> options{"--gpu-architecture=compute_90"};
  options.insert(options.end(), c.nvrtc_options.begin(), c.nvrtc_options.end());
  auto compiled = cuda::nvrtc_compile(c.code, "candidate.cu", options);
  ASSERT_TRUE(compiled) << compiled.error().message << "\n" << c.code;
  EXPECT_TRUE(contains(compiled->ptx, ".entry " + c.entry + "(")) << c.entry << "\n" << c.code;
}

// A chat completion with these message fields (content may be null) and finish reason.
LlmResponse completion(json message, const std::string& finish = "stop") {
  message["role"] = "assistant";
  LlmResponse r;
  r.body = json{{"id", "chatcmpl-7"},
                {"object", "chat.completion"},
                {"created", 1764892800},
                {"model", "test-model"},
                {"choices", json::array({{{"index", 0},
                                          {"message", message},
                                          {"logprobs", nullptr},
                                          {"finish_reason", finish}}})},
                {"usage", {{"prompt_tokens", 900}, {"completion_tokens", 300},
                           {"total_tokens", 1200}}}}
               .dump();
  return r;
}

const std::string k_kernel_as_saxpy =
    "```cuda\nextern \"C\" __global__ void saxpy(const float* x, float* y, float a, unsigned n) "
    "{\n  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = fmaf(a, x[i], "
    "y[i]);\n}\n```\n";

} // namespace

TEST(LlmAnswers, TheOriginalsNameIsTaken) {
  auto c = first_candidate(LlmResponse::chat("Faster:\n" + k_kernel_as_saxpy));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->entry, "saxpy");
  expect_compiles(*c);
}

TEST(LlmAnswers, TheOnlyKernelWithoutExternCIsTakenWithCLinkage) {
  auto c = first_candidate(LlmResponse::chat(
      "```cpp\n__device__ float mul(float a, float b) { return a * b; }\n"
      "__global__ void __launch_bounds__(256) saxpy_fast(const float* x, float* y, float a, "
      "unsigned n) {\n  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) y[i] = mul(a, x[i]) + y[i];\n}\n```\n"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->entry, "saxpy_fast");
  EXPECT_TRUE(contains(c->code, "extern \"C\" __global__ void __launch_bounds__(256) saxpy_fast"))
      << c->code;
  expect_compiles(*c);
}

TEST(LlmAnswers, TheBlockDefiningTheKernelIsPickedAndTheHarnessDropped) {
  auto c = first_candidate(LlmResponse::chat(
      "The idea, in a snippet:\n```cuda\ny[i] = fmaf(a, x[i], y[i]);\n```\n"
      "The whole thing, with a test:\n```cuda\n#include <cuda_runtime.h>\n#include <cstdio>\n"
      "extern \"C\" __global__ void hone_candidate(const float* x, float* y, float a, unsigned n) "
      "{\n  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = fmaf(a, x[i], "
      "y[i]);\n}\n\nint main() {\n  float *x, *y;\n  cudaMalloc(&x, 4096);\n  cudaMalloc(&y, 4096);\n"
      "  hone_candidate<<<4, 256>>>(x, y, 2.0f, 1024);\n  cudaDeviceSynchronize();\n"
      "  printf(\"done\\n\");\n  return 0;\n}\n```\nRun it with nvcc.\n"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->entry, "hone_candidate");
  EXPECT_FALSE(contains(c->code, "main(")) << c->code;
  EXPECT_FALSE(contains(c->code, "cuda_runtime.h")) << c->code;
  EXPECT_FALSE(contains(c->code, "<<<")) << c->code;
  expect_compiles(*c);
}

TEST(LlmAnswers, ThinkingInTheContentIsStrippedAndNotSentBack) {
  // llama-server (and vLLM without a reasoning parser) leave the reasoning in the content.
  LlmServer server;
  server.push(LlmResponse::chat("<think>\nThe loop could use fmaf... or __global__ void x(); "
                                "no. SECRET-THOUGHT\n</think>\n\n" + kernel_reply()));
  server.push(LlmResponse::chat(kernel_reply("second turn")));
  LlmSettings s = settings(server);
  s.max_turns = 2;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  auto candidates = next_candidates(*session);
  ASSERT_EQ(candidates.size(), 1u) << session->state();
  EXPECT_EQ(candidates[0].tag, 1u);
  EXPECT_EQ(candidates[0].entry, "hone_candidate");
  EXPECT_FALSE(contains(candidates[0].code, "think"));
  session->on_verdict(candidates[0], verdict(VerdictKind::mismatch, "element 3 differs"));
  ASSERT_EQ(next_candidates(*session).size(), 1u) << session->state();
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_FALSE(contains(requests[1].body, "SECRET-THOUGHT")) << requests[1].body;
  EXPECT_TRUE(contains(requests[1].body, "fmaf(a, x[i], y[i])")) << requests[1].body;
}

TEST(LlmAnswers, ReasoningFieldsAreReadAndNeverSentBack) {
  // vLLM and SGLang with a reasoning parser: reasoning_content; Ollama: reasoning.
  for (const char* field : {"reasoning_content", "reasoning"}) {
    SCOPED_TRACE(field);
    LlmServer server;
    server.push(completion({{field, "Let me think about coalescing... SECRET-THOUGHT"},
                            {"content", kernel_reply()}}));
    server.push(LlmResponse::chat(kernel_reply("second turn")));
    LlmSettings s = settings(server);
    s.max_turns = 2;
    auto session = make_llm_strategy(s)->start(source_task());
    ASSERT_NE(session, nullptr);
    auto candidates = next_candidates(*session);
    ASSERT_EQ(candidates.size(), 1u) << session->state();
    EXPECT_EQ(candidates[0].tag, 1u);
    session->on_verdict(candidates[0], verdict(VerdictKind::mismatch, "element 3 differs"));
    ASSERT_EQ(next_candidates(*session).size(), 1u) << session->state();
    auto requests = server.requests();
    ASSERT_EQ(requests.size(), 2u);
    EXPECT_FALSE(contains(requests[1].body, "SECRET-THOUGHT")) << requests[1].body;
    EXPECT_FALSE(contains(requests[1].body, field)) << requests[1].body;
  }
}

TEST(LlmAnswers, OnlyReasoningCutAtTheLimitAsksForTheKernelAloneShorter) {
  std::string why;
  auto c = first_candidate(
      completion({{"reasoning_content", "Step 1... step 97..."}, {"content", nullptr}}, "length"),
      &why);
  EXPECT_FALSE(c);
  EXPECT_TRUE(contains(why, "only reasoning, no code")) << why;
  EXPECT_TRUE(contains(why, "cut at max_tokens: send the kernel alone")) << why;
}

TEST(LlmAnswers, ATemplateKernelIsRefusedWithTheReason) {
  std::string why;
  auto c = first_candidate(
      LlmResponse::chat("```cuda\ntemplate <int U>\n__global__ void hone_candidate(const float* x, "
                        "float* y, float a, unsigned n) {}\n```\n"),
      &why);
  EXPECT_FALSE(c);
  EXPECT_TRUE(contains(why, "is a template")) << why;
}

// The response shapes of the servers docs/llm.md names, as their documentation shows them: each
// answer is used on its first turn.
TEST(LlmAnswers, ServerShapesAreEachUsedOnTheirFirstTurn) {
  struct Shape {
    const char* server;
    LlmResponse reply;
  };
  json vllm_message = {{"reasoning_content", "We fuse the multiply-add."},
                       {"content", kernel_reply()},
                       {"tool_calls", json::array()}};
  std::vector<Shape> shapes = {
      {"vLLM (reasoning parser)", completion(vllm_message)},
      {"SGLang (reasoning parser)",
       completion({{"reasoning_content", "Think."}, {"content", k_kernel_as_saxpy}})},
      {"llama-server (reasoning in the content)",
       completion({{"content", "<think>fma</think>\n" + kernel_reply()}})},
      {"Ollama (OpenAI-compatible)",
       completion({{"reasoning", "Coalesced already."}, {"content", kernel_reply()}})},
      {"hosted API", completion({{"content", kernel_reply()}, {"refusal", nullptr}})},
  };
  for (auto& shape : shapes) {
    SCOPED_TRACE(shape.server);
    auto c = first_candidate(shape.reply);
    ASSERT_TRUE(c);
    expect_compiles(*c);
  }
}

// A hosted API's rate limit: 429 with Retry-After and its error body. The client waits as told
// and asks again within the same turn.
TEST(LlmAnswers, RateLimitWithRetryAfterIsWaitedOutWithinTheTurn) {
  LlmServer server;
  LlmResponse limited;
  limited.status = 429;
  limited.headers = "Retry-After: 1\r\n";
  limited.body = R"({"error": {"message": "Rate limit reached for requests", "type": "requests",
                     "param": null, "code": "rate_limit_exceeded"}})";
  auto start = std::chrono::steady_clock::now();
  auto c = first_candidate(limited, nullptr, &server);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->tag, 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 900ms);
  EXPECT_EQ(server.requests().size(), 2u); // the 429, then the answer
}


// ---- several samples per turn ------------------------------------------------------------------

namespace {

// A chat completion with one choice per content (what an endpoint that honours `n` sends).
LlmResponse choices(const std::vector<std::string>& contents) {
  json all = json::array();
  for (size_t i = 0; i < contents.size(); ++i) {
    all.push_back({{"index", i},
                   {"message", {{"role", "assistant"}, {"content", contents[i]}}},
                   {"finish_reason", "stop"}});
  }
  LlmResponse r;
  r.body = json{{"object", "chat.completion"},
                {"choices", all},
                {"usage", {{"total_tokens", 300}}}}
               .dump();
  return r;
}

// The candidates a session hands over until there are `n` or it is done.
std::vector<Candidate> collect(Session& session, size_t n) {
  std::vector<Candidate> out;
  eventually([&] {
    auto more = session.poll();
    out.insert(out.end(), more.begin(), more.end());
    return out.size() >= n || session.done();
  });
  return out;
}

Verdict timed(VerdictKind kind, double speedup) {
  Verdict v = verdict(kind);
  v.original_ns = 3000;
  v.candidate_ns = 3000 / speedup;
  v.speedup = speedup;
  return v;
}

} // namespace

// Three samples in one request (n = 3): each is a candidate; the second is the fastest verified
// one, and the conversation goes on from it, with every sample's verdict told.
TEST(LlmSamples, TheBestOfThreeIsKeptAndTheNextTurnStartsFromIt) {
  LlmServer server;
  server.push(choices({kernel_reply("sample one"), kernel_reply("sample two"),
                       kernel_reply("sample three")}));
  server.push(LlmResponse::chat(kernel_reply("turn two")));
  LlmSettings s = settings(server);
  s.samples_per_turn = 3;
  s.max_turns = 2;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  std::vector<Candidate> candidates = collect(*session, 3);
  ASSERT_EQ(candidates.size(), 3u) << session->state();
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(candidates[k].tag, 100u + k + 1);
    EXPECT_TRUE(contains(candidates[k].description, "turn 1 sample " + std::to_string(k + 1)))
        << candidates[k].description;
  }
  EXPECT_TRUE(contains(candidates[1].code, "sample two"));
  ASSERT_EQ(server.requests().size(), 1u); // one request for the three
  EXPECT_EQ(body(server.requests()[0])["n"], 3);

  session->on_verdict(candidates[0], timed(VerdictKind::verified, 1.2));
  session->on_verdict(candidates[2], verdict(VerdictKind::mismatch, "element 5 differs"));
  session->on_verdict(candidates[1], timed(VerdictKind::verified, 1.8));
  auto next = next_candidates(*session);
  ASSERT_EQ(next.size(), 1u) << session->state();
  // Turn 2: the endpoint sent one choice and failed the requests for more; one sample then.
  EXPECT_EQ(next[0].tag, 201u);
  EXPECT_TRUE(contains(session->state(), "best 1.80x (turn 1 sample 2)")) << session->state();

  auto requests = server.requests();
  ASSERT_GE(requests.size(), 2u);
  json messages = body(requests[1])["messages"];
  ASSERT_GE(messages.size(), 4u);
  std::string answer = messages[messages.size() - 2]["content"];
  EXPECT_TRUE(contains(answer, "sample two")) << answer;
  std::string feedback = messages.back()["content"];
  for (const char* part : {"answer 1: verified (1.20x)", "answer 2: verified (1.80x)",
                           "answer 3: mismatch", "goes on from answer 2"}) {
    EXPECT_TRUE(contains(feedback, part)) << part << "\n" << feedback;
  }
}

// An endpoint that ignores `n` (llama-server) answers once: the session asks again for the rest.
TEST(LlmSamples, AnEndpointWithoutNIsAskedAgain) {
  LlmServer server;
  for (const char* m : {"a", "b", "c"}) server.push(LlmResponse::chat(kernel_reply(m)));
  LlmSettings s = settings(server);
  s.samples_per_turn = 3;
  s.max_turns = 1;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  std::vector<Candidate> candidates = collect(*session, 3);
  EXPECT_EQ(candidates.size(), 3u) << session->state();
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_TRUE(eventually([&] { return session->done(); }));
}

// ---- tools: compile and check within a turn -------------------------------------------------------

namespace {

const std::string k_tool_source =
    "#include \"saxpy_params.h\"\nextern \"C\" __global__ void hone_candidate(const float* x, "
    "float* y, float a, unsigned n) {\n  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = fmaf(a, x[i], y[i]);\n}\n";

// A reply that calls tools (LlmResponse::tool_calls), each with the complete source, ids
// "call_<name><index>".
LlmResponse tool_reply(const std::vector<std::pair<std::string, std::string>>& calls) {
  std::vector<std::tuple<std::string, std::string, std::string>> list;
  for (const auto& [name, source] : calls) {
    list.emplace_back("call_" + name + std::to_string(list.size()), name,
                      json{{"source", source}}.dump());
  }
  return LlmResponse::tool_calls(list);
}

// The same as Ollama sends it: arguments as an object, no id.
LlmResponse ollama_tool_reply(const std::string& name, const std::string& source) {
  LlmResponse r;
  r.body = json{{"object", "chat.completion"},
                {"choices",
                 {{{"index", 0},
                   {"message",
                    {{"role", "assistant"},
                     {"content", ""},
                     {"tool_calls",
                      {{{"function", {{"name", name}, {"arguments", {{"source", source}}}}}}}}}},
                   {"finish_reason", "tool_calls"}}}}}
               .dump();
  return r;
}

} // namespace

TEST(LlmTools, CompileAndCheckRunWithinTheTurnThroughTheWorker) {
  LlmServer server;
  std::string typo = k_tool_source;
  typo.replace(typo.find("x[i], y[i]"), 10, "x[i] y[i]");
  server.push(tool_reply({{"compile", typo}}));
  server.push(ollama_tool_reply("check", k_tool_source));
  server.push(LlmResponse::chat(kernel_reply("after the tools")));
  LlmSettings s = settings(server);
  s.tool_calls_per_turn = 3;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);

  // The compile call: a candidate that is only compiled.
  auto compile = next_candidates(*session);
  ASSERT_EQ(compile.size(), 1u) << session->state();
  EXPECT_EQ(compile[0].check, JobCheck::compile);
  EXPECT_GE(compile[0].tag, uint64_t(1) << 40);
  EXPECT_TRUE(contains(compile[0].description, "tool compile")) << compile[0].description;
  EXPECT_TRUE(contains(session->state(), "running the model's compile")) << session->state();
  session->on_verdict(compile[0], verdict(VerdictKind::compile_error,
                                          "candidate.cu(1): error: expected a \")\""));
  // The check call: validated only, on one capture.
  auto check = next_candidates(*session);
  ASSERT_EQ(check.size(), 1u) << session->state();
  EXPECT_EQ(check[0].check, JobCheck::validate);
  EXPECT_NE(check[0].tag, compile[0].tag);
  EXPECT_TRUE(contains(check[0].code, "fmaf(a, x[i], y[i])")) << check[0].code;
  Verdict correct;
  correct.kind = VerdictKind::verified;
  correct.message = "check: correct on 1 capture (bitwise); not timed";
  session->on_verdict(check[0], correct);
  // The answer: the turn's candidate, a full job.
  auto answer = next_candidates(*session);
  ASSERT_EQ(answer.size(), 1u) << session->state();
  EXPECT_EQ(answer[0].check, JobCheck::none);
  EXPECT_EQ(answer[0].tag, 1u);
  EXPECT_TRUE(contains(answer[0].code, "after the tools"));

  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  json first = body(requests[0]);
  ASSERT_TRUE(first.contains("tools")) << first.dump();
  EXPECT_EQ(first["tools"][0]["function"]["name"], "compile");
  EXPECT_EQ(first["tools"][1]["function"]["name"], "check");
  EXPECT_EQ(first["tool_choice"], "auto");
  EXPECT_TRUE(contains(message(requests[0], 0), "up to 3 calls per turn"));
  // The model's call and its result went back, paired by id.
  json second = body(requests[1])["messages"];
  const json& asked = second[second.size() - 2];
  EXPECT_EQ(asked["role"], "assistant");
  EXPECT_EQ(asked["tool_calls"][0]["id"], "call_compile0");
  EXPECT_EQ(asked["tool_calls"][0]["function"]["name"], "compile");
  const json& told = second.back();
  EXPECT_EQ(told["role"], "tool");
  EXPECT_EQ(told["tool_call_id"], "call_compile0");
  EXPECT_TRUE(contains(told["content"], "did not compile")) << told.dump();
  EXPECT_TRUE(contains(told["content"], "expected a \")\"")) << told.dump();
  // Ollama's call had no id: one was given, and its arguments object went back as JSON text.
  json third = body(requests[2])["messages"];
  EXPECT_EQ(third[third.size() - 2]["tool_calls"][0]["id"], "call_1");
  EXPECT_TRUE(third[third.size() - 2]["tool_calls"][0]["function"]["arguments"].is_string());
  EXPECT_EQ(third.back()["tool_call_id"], "call_1");
  EXPECT_TRUE(contains(third.back()["content"], "Correct: correct on 1 capture (bitwise); not timed"))
      << third.back().dump();
}

TEST(LlmTools, AnEndpointThatRefusesToolsIsAskedWithoutThemFromThenOn) {
  LlmServer server;
  // vLLM started without --enable-auto-tool-choice.
  LlmResponse refusal;
  refusal.status = 400;
  refusal.body = R"({"object": "error", "message": "\"auto\" tool choice requires )"
                 R"(--enable-auto-tool-choice and --tool-call-parser to be set", )"
                 R"("type": "BadRequestError", "param": null, "code": 400})";
  server.push(refusal);
  server.push(LlmResponse::chat(kernel_reply()));
  server.push(LlmResponse::chat(kernel_reply()));
  LlmSettings s = settings(server);
  s.tool_calls_per_turn = 2;
  auto strategy = make_llm_strategy(s);
  auto session = strategy->start(source_task());
  ASSERT_NE(session, nullptr);
  auto first = next_candidates(*session);
  ASSERT_EQ(first.size(), 1u) << session->state();
  EXPECT_EQ(first[0].tag, 1u); // the refusal cost no turn
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_TRUE(body(requests[0]).contains("tools"));
  EXPECT_FALSE(body(requests[1]).contains("tools"));
  session.reset();
  // The next session is not offered them either.
  auto again = strategy->start(source_task());
  ASSERT_EQ(next_candidates(*again).size(), 1u);
  EXPECT_FALSE(body(server.requests().at(2)).contains("tools"));
}

TEST(LlmTools, NoToolsWithSeveralSamplesOrWhenOff) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  auto session = make_llm_strategy(settings(server))->start(source_task()); // 0 calls: off
  ASSERT_EQ(next_candidates(*session).size(), 1u);
  EXPECT_FALSE(body(server.requests().at(0)).contains("tools"));
  EXPECT_FALSE(contains(message(server.requests().at(0), 0), "tools compile and check"));
  session.reset();

  // Calls allowed, but two samples a turn: no tools either.
  LlmSettings samples = settings(server);
  samples.tool_calls_per_turn = 3;
  samples.samples_per_turn = 2;
  server.push(LlmResponse::chat(kernel_reply()));
  server.push(LlmResponse::chat(kernel_reply("the second sample")));
  auto two = make_llm_strategy(samples)->start(source_task());
  ASSERT_EQ(collect(*two, 2).size(), 2u) << two->state();
  ASSERT_GE(server.requests().size(), 2u);
  EXPECT_FALSE(body(server.requests().at(1)).contains("tools"));
  EXPECT_FALSE(contains(message(server.requests().at(1), 0), "tools compile and check"));
}

TEST(LlmTools, CallsPastTheLimitAreNotRunAndATurnThatKeepsCallingIsRefused) {
  LlmServer server;
  server.push(tool_reply({{"compile", k_tool_source}, {"check", k_tool_source}}));
  server.push(tool_reply({{"check", k_tool_source}}));
  server.push(LlmResponse::chat(kernel_reply("turn two")));
  LlmSettings s = settings(server);
  s.tool_calls_per_turn = 1;
  auto session = make_llm_strategy(s)->start(source_task());
  auto compile = next_candidates(*session);
  ASSERT_EQ(compile.size(), 1u);
  EXPECT_EQ(compile[0].check, JobCheck::compile);
  Verdict ok;
  ok.kind = VerdictKind::verified;
  ok.message = "check: compiled and loaded; it takes the original's 4 parameters";
  session->on_verdict(compile[0], ok);
  // The check in the same reply was past the limit: not run. The model called again: the turn
  // is refused, and turn 2's answer is the next candidate.
  auto next = next_candidates(*session);
  ASSERT_EQ(next.size(), 1u) << session->state();
  EXPECT_EQ(next[0].check, JobCheck::none);
  EXPECT_EQ(next[0].tag, 2u);
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  json second = body(requests[1])["messages"];
  EXPECT_TRUE(contains(second.back()["content"], "Not run: the 1 tool calls of this turn are spent"))
      << second.dump();
  EXPECT_TRUE(contains(second[second.size() - 2]["content"], "Compiled and loaded"));
  std::string refused = last_message(requests[2]);
  EXPECT_TRUE(contains(refused, "it called tools after the 1 calls of the turn were spent"))
      << refused;
}

// ---- SASS-only kernels (agent.llm.sass_kernels) ------------------------------------------------------

TEST(LlmSass, ASassOnlyKernelIsWrittenFromItsBehaviourOnlyWhenEnabled) {
  LlmServer server;
  server.push(LlmResponse::chat(kernel_reply()));
  KernelTask task;
  task.key.entry = "_ZN2at6native18elementwise_kernelILi128ELi4EEEvifT0_"; // a made-up at:: kernel
  task.format = proto::ImageFormat::cubin;
  task.image = "\x7f" "ELF: machine code only";
  Capture other_n = capture();
  other_n.param_bytes.replace(20, 4, bytes_of(uint32_t(65536))); // n changes between launches
  task.captures = {capture(), other_n};
  task.arch = "sm_90";
  task.device = "NVIDIA Test GPU";

  LlmSettings off = settings(server);
  EXPECT_FALSE(make_llm_strategy(off)->works_without_code());
  EXPECT_EQ(make_llm_strategy(off)->start(task), nullptr); // off by default: not tried
  EXPECT_TRUE(server.requests().empty());

  LlmSettings on = settings(server);
  on.sass_kernels = true;
  auto strategy = make_llm_strategy(on);
  EXPECT_TRUE(strategy->works_without_code());
  auto session = strategy->start(task);
  ASSERT_NE(session, nullptr);
  auto candidates = next_candidates(*session);
  ASSERT_EQ(candidates.size(), 1u) << session->state();
  // Guarded by what every launch had: the block shape and the scalar that never changed.
  const Guard& g = candidates[0].guard;
  EXPECT_EQ(g.block, (std::array<uint32_t, 3>{256, 1, 1}));
  ASSERT_EQ(g.scalars.size(), 1u);
  EXPECT_EQ(g.scalars[0].param, 2u);
  EXPECT_EQ(g.scalars[0].offset, 16u);
  EXPECT_EQ(g.scalars[0].bytes, bytes_of(2.5f));
  EXPECT_EQ(candidates[0].comparison, Comparison::tolerance);

  std::string prompt = last_message(server.requests().at(0));
  EXPECT_TRUE(contains(prompt, "`void at::native::elementwise_kernel<128, 4>(")) << prompt;
  EXPECT_TRUE(contains(prompt, "machine code only (SASS: no CUDA source, no PTX)")) << prompt;
  EXPECT_TRUE(contains(prompt, "0. offset 0, 8 bytes: a pointer into an allocation")) << prompt;
  EXPECT_TRUE(contains(prompt, "2. offset 16, 4 bytes: the same in every captured launch: bytes "
                               "00 00 20 40 (as u32 1075838976, as s32 1075838976, as f32 2.5)"))
      << prompt;
  EXPECT_TRUE(contains(prompt, "3. offset 20, 4 bytes: a value that changes between launches"))
      << prompt;
  EXPECT_TRUE(contains(prompt, "points into an allocation of 4194304 bytes")) << prompt;
  EXPECT_TRUE(contains(prompt, "serve only launches with block (256, 1, 1) and the scalar values "
                               "listed as the same in every launch"))
      << prompt;
  EXPECT_TRUE(contains(prompt, "Begin the kernel with `asm volatile(\"griddepcontrol.wait;\"")) << prompt;
  // No cuobjdump listing of an image that is not a real cubin.
  EXPECT_FALSE(contains(prompt, "## Its SASS")) << prompt;
}

// A model that calls a tool although none was offered (tools off) is told so, and the turn is
// spent like any unusable answer.
TEST(LlmTools, ACallWhenNoToolsAreOfferedIsRefusedSayingSo) {
  LlmServer server;
  server.push(tool_reply({{"check", k_tool_source}}));
  server.push(LlmResponse::chat(kernel_reply("turn two")));
  auto session = make_llm_strategy(settings(server))->start(source_task()); // tools off
  auto next = next_candidates(*session);
  ASSERT_EQ(next.size(), 1u) << session->state();
  EXPECT_EQ(next[0].tag, 2u);
  EXPECT_EQ(next[0].check, JobCheck::none);
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_FALSE(body(requests[0]).contains("tools"));
  EXPECT_TRUE(contains(last_message(requests[1]), "it called a tool, but no tools are offered here"))
      << last_message(requests[1]);
}

// Found while writing llm_answer_fuzz (issue 33): the client copied choices[0].message, and
// nlohmann's copy recurses, so a reply nesting arrays 100,000 deep (200 KB, well inside
// max_reply_bytes) overflowed honed's stack. Such a reply is now refused like any malformed one,
// and the session goes on to its next turn.
TEST(LlmAnswers, AReplyNestedTooDeepIsRefusedAndTheSessionGoesOn) {
  const size_t depth = 200000;
  std::string deep = R"({"choices":[{"message":{"content":"x","junk":)" +
                     std::string(depth, '[') + std::string(depth, ']') + "}}]}";
  auto parsed = parse_chat_reply(deep, 1, 0);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(failure_of(parsed.error()), ChatFailure::reply);
  EXPECT_TRUE(contains(parsed.error().message, "nests JSON deeper than")) << parsed.error().message;
  // Ollama's object-shaped arguments were printed back with dump(), which recurses too.
  std::string deep_arguments =
      R"({"choices":[{"message":{"content":"","tool_calls":[{"function":{"name":"check",)"
      R"("arguments":)" + std::string(depth, '[') + std::string(depth, ']') + "}}]}}]}";
  EXPECT_FALSE(parse_chat_reply(deep_arguments, 1, 0));

  LlmServer server;
  LlmResponse nested;
  nested.body = deep;
  server.push(nested);
  server.push(LlmResponse::chat(kernel_reply("after the deep one")));
  LlmSettings s = settings(server);
  s.max_turns = 2;
  auto session = make_llm_strategy(s)->start(source_task());
  ASSERT_NE(session, nullptr);
  auto candidates = next_candidates(*session);
  ASSERT_EQ(candidates.size(), 1u) << session->state();
  EXPECT_EQ(candidates[0].tag, 2u);
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_TRUE(contains(last_message(requests[1]), "nests JSON deeper than"))
      << last_message(requests[1]);
}

// The reply parser on the shapes servers send (parse_chat_reply, llm_answer_fuzz's first half).
TEST(LlmAnswers, ChatRepliesParseAsServersSendThem) {
  auto plain = parse_chat_reply(LlmResponse::chat("hello", 77).body, 1, 400);
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->content, "hello");
  EXPECT_EQ(plain->total_tokens, 77u);
  EXPECT_FALSE(plain->truncated);
  // No usage: estimated from the request's and the content's lengths, 4 bytes a token.
  auto estimated = parse_chat_reply(
      R"({"choices":[{"message":{"content":"12345678"},"finish_reason":"length"}]})", 1, 400);
  ASSERT_TRUE(estimated);
  EXPECT_EQ(estimated->total_tokens, 102u);
  EXPECT_TRUE(estimated->truncated);
  // Ollama: arguments as an object, no id; OpenAI: arguments as text, with an id.
  auto ollama = parse_chat_reply(ollama_tool_reply("check", "src").body, 1, 0);
  ASSERT_TRUE(ollama);
  ASSERT_EQ(ollama->tool_calls.size(), 1u);
  EXPECT_EQ(ollama->tool_calls[0].id, "call_1");
  EXPECT_EQ(json::parse(ollama->tool_calls[0].arguments), json({{"source", "src"}}));
  auto openai = parse_chat_reply(tool_reply({{"compile", "src"}}).body, 1, 0);
  ASSERT_TRUE(openai);
  ASSERT_EQ(openai->tool_calls.size(), 1u);
  EXPECT_EQ(openai->tool_calls[0].id, "call_compile0");
  auto source = tool_call_source(openai->tool_calls[0].arguments);
  ASSERT_TRUE(source);
  EXPECT_EQ(*source, "```cuda\nsrc\n```\n");
  EXPECT_FALSE(tool_call_source("[1, 2]"));
  EXPECT_FALSE(tool_call_source(R"({"source": 3})"));
  // Further choices up to the samples asked for.
  auto three = parse_chat_reply(
      R"({"choices":[{"message":{"content":"a"}},{"message":{"content":"b"}},)"
      R"("junk",{"message":{"content":"c"}},{"message":{"content":"d"}}]})",
      4, 0);
  ASSERT_TRUE(three);
  EXPECT_EQ(three->more_choices, (std::vector<std::string>{"b", "c"}));
}

// Found by llm_answer_fuzz (issue 33): the kernel search scanned from every `__global__` to the
// bracket closing its parameter list, so a reply repeating an unclosed kernel head took time
// quadratic in its length (this 3 MB one: minutes of honed's CPU; the fuzzer's 200 KB ones, over
// its 10 s limit). The search is now one pass over the code: the kernel after them is found. The
// call runs on a thread waited on with a deadline far above what a linear search needs, so a
// regression fails here instead of hanging the suite.
TEST(LlmAnswers, RepeatedUnclosedKernelHeadsAreSearchedInOnePass) {
  std::string reply = "```cuda\n";
  for (int i = 0; i < 170000; ++i) reply += "__global__ void f(";
  reply += "\n}}}}\nextern \"C\" __global__ void hone_candidate(float* y) { y[0] = 1; }\n```\n";
  std::promise<Result<Answer>> promise;
  auto result = promise.get_future();
  std::thread search([&] { promise.set_value(extract_answer(reply, "hone_candidate", "f")); });
  const bool done = result.wait_for(120s) == std::future_status::ready;
  if (!done) {
    search.detach(); // still scanning: fail now rather than wait for it
    FAIL() << "extract_answer on a 3 MB reply did not finish within 120 s";
  }
  search.join();
  auto answer = result.get();
  ASSERT_TRUE(answer) << answer.error().message;
  EXPECT_EQ(answer->entry, "hone_candidate");
}

// The same search keeps at most 64 kernels per block: more is refused, saying why.
TEST(LlmAnswers, ABlockDefiningMoreThan64KernelsIsRefused) {
  std::string reply = "```cuda\n";
  for (int i = 0; i < 65; ++i) {
    reply += "extern \"C\" __global__ void k" + std::to_string(i) + "(float* y) { y[0] = 1; }\n";
  }
  reply += "```\n";
  auto answer = extract_answer(reply, "k3", "");
  ASSERT_FALSE(answer);
  EXPECT_TRUE(contains(answer.error().message, "more than 64 kernels")) << answer.error().message;
  // 64 are fine.
  reply = "```cuda\n";
  for (int i = 0; i < 64; ++i) {
    reply += "extern \"C\" __global__ void k" + std::to_string(i) + "(float* y) { y[0] = 1; }\n";
  }
  reply += "```\n";
  auto ok = extract_answer(reply, "k3", "");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->entry, "k3");
}
