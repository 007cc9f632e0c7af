// The built-in strategies that read captured launches: specialization of constant scalars
// (source level through NVRTC, PTX level otherwise) and launch bounds. Inputs are real: kernels
// compiled by NVRTC, captures laid out as the PTX analysis says; outputs are compiled again
// (NVRTC) or assembled (ptxas) to show that what the worker would get is valid.
#include "agent/kernel_source.hpp"
#include "agent/strategy.hpp"
#include "cuda/nvrtc.hpp"
#include "ptx/analysis.hpp"
#include "ptx/block_shape.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

namespace fs = std::filesystem;
using namespace hone;
using namespace hone::agent;

namespace {

const std::vector<std::string> k_options = {"--gpu-architecture=compute_90",
                                            "-DMIX_SEED=0x9e3779b9u"};

// The test application's kernel (tests/apps/spec_app.cpp): a hash of `rounds` rounds, the round
// step in a header given to NVRTC by name.
const char* const k_mix_header = R"(#pragma once
// One round of the hash. The divisions by `rounds` are division instructions unless the compiler
// knows `rounds`.
__device__ __forceinline__ unsigned mix_step(unsigned h, unsigned r, unsigned rounds)
{
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h + h % rounds + (h ^ r) / rounds;
}
)";

const char* const k_mix_source = R"(#include "spec_mix.h"
/* A comment that mentions __global__ void mix_rounds( must not be taken for the kernel. */
extern "C" __global__ void mix_rounds(unsigned* out, const unsigned* in, int n, int rounds)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = in[i] ^ MIX_SEED;
    for (int r = 0; r < rounds; ++r) h = mix_step(h, unsigned(r), unsigned(rounds));
    out[i] = h;
}
)";

// Float and double scalars, passed through exactly.
const char* const k_scale_source = R"(
extern "C" __global__ void scale(float* y, const float* x, float a, double b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = float(double(a * x[i]) + b);
}
)";

// A C++ kernel in nested namespaces, declared before it is defined, with launch bounds of its own.
const char* const k_step_source = R"(
namespace outer {
struct Tag { int unused; };
namespace inner {
__global__ void step(int* d, int n, int k);

__global__ void __launch_bounds__(128) step(int* d, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = d[i];
    for (int j = 0; j < k; ++j) v = v * 3 + j;
    d[i] = v;
}
} // namespace inner
} // namespace outer
)";

// Two kernels of one name: the source cannot say which one an entry is without a C++ front end.
const char* const k_overload_source = R"(
__global__ void fill(int* d, int n, int v) { int i = threadIdx.x; if (i < n) d[i] = v; }
__global__ void fill(float* d, int n, int v) { int i = threadIdx.x; if (i < n) d[i] = float(v); }
)";

// Narrow integer scalars: ld.param.u8/.s16 widen into 16-bit registers.
const char* const k_narrow_source = R"(
extern "C" __global__ void narrow(int* d, unsigned char c, signed char s, short h, long long w)
{
    int i = threadIdx.x;
    d[i] = int(c) + int(s) * 3 + int(h) * 5 + int(w >> 3);
}
)";

std::string compile(const std::string& source, const std::vector<cuda::NvrtcHeader>& headers = {}) {
  auto out = cuda::nvrtc_compile(source, "test.cu", k_options, headers);
  EXPECT_TRUE(out) << (out ? "" : out.error().message);
  return out ? out->ptx : std::string();
}

// The PTX entry names of a module, in order (C++ kernels have mangled names).
std::vector<std::string> entry_names(const std::string& ptx_text) {
  auto m = ptx::parse(ptx_text);
  std::vector<std::string> names;
  if (m) {
    for (const auto* f : m->entries()) names.emplace_back(f->name);
  }
  return names;
}

ptx::EntryInfo analyze(const std::string& ptx_text, const std::string& entry) {
  auto m = ptx::parse(ptx_text);
  EXPECT_TRUE(m) << (m ? "" : m.error().message);
  const ptx::Function* f = m ? m->function(entry) : nullptr;
  EXPECT_NE(f, nullptr) << entry;
  return f ? ptx::analyze_entry(*m, *f) : ptx::EntryInfo{};
}

template <class T> std::string bytes_of(T v) {
  std::string b(sizeof v, '\0');
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

// A capture as the shim would make it: the parameter buffer laid out as the PTX says, holding
// `values` (one per parameter, any missing one zero), and a buffer for every pointer parameter.
Capture capture(const ptx::EntryInfo& info, const std::map<size_t, std::string>& values,
                std::array<uint32_t, 3> block = {256, 1, 1}) {
  Capture c;
  c.status = CaptureStatus::ok;
  c.block = block;
  c.grid = {16, 1, 1};
  c.param_bytes.assign(info.param_bytes, '\0');
  for (size_t i = 0; i < info.params.size(); ++i) {
    c.params.push_back({info.params[i].offset, info.params[i].size});
    if (auto v = values.find(i); v != values.end()) {
      c.param_bytes.replace(info.params[i].offset, v->second.size(), v->second);
    }
    if (info.params[i].is_pointer()) {
      CaptureBuffer b;
      b.param = uint32_t(i);
      std::memcpy(&b.pointer, c.param_bytes.data() + info.params[i].offset, sizeof b.pointer);
      b.base = b.pointer;
      c.buffers.push_back(b);
    }
  }
  c.pointers_from_analysis = true;
  return c;
}

KernelTask task_for(const std::string& ptx_text, const std::string& entry,
                    std::optional<proto::SourceInfo> source, std::vector<Capture> captures) {
  KernelTask t;
  t.key.entry = entry;
  t.format = proto::ImageFormat::ptx;
  t.image = ptx_text + std::string(1, '\0');
  t.source = std::move(source);
  t.captures = std::move(captures);
  t.arch = "sm_90";
  return t;
}

proto::SourceInfo mix_source_info() {
  proto::SourceInfo s;
  s.name = "spec.cu";
  s.source = k_mix_source;
  s.headers = {{"spec_mix.h", k_mix_header}};
  s.options = k_options;
  return s;
}

std::vector<cuda::NvrtcHeader> mix_headers() {
  return {{"spec_mix.h", k_mix_header}};
}

// Everything one session hands out, verdicts aside.
std::vector<Candidate> candidates_of(Strategy& s, const KernelTask& task) {
  auto session = s.start(task);
  if (!session) return {};
  return session->poll();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "hone-agent-builtin-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

// Whether ptxas assembles `ptx_text` for sm_90; its messages in `log`.
bool ptxas_accepts(const std::string& ptx_text, std::string& log) {
  TempDir dir;
  std::ofstream(dir.path / "in.ptx") << ptx_text;
  std::string cmd = std::string(HONE_PTXAS) + " -arch=sm_90 " + (dir.path / "in.ptx").string() +
                    " -o " + (dir.path / "out.cubin").string() + " > " +
                    (dir.path / "log").string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(dir.path / "log");
  log.assign(std::istreambuf_iterator<char>(in), {});
  return rc == 0;
}

// Branches to a label above them: the loops that are left.
int backward_branches(const ptx::Function& f) {
  std::map<std::string_view, size_t> labels;
  for (size_t i = 0; i < f.body.size(); ++i) {
    if (const auto* l = std::get_if<ptx::Label>(&f.body[i].item)) labels[l->name] = i;
  }
  int n = 0;
  for (size_t i = 0; i < f.body.size(); ++i) {
    const auto* inst = std::get_if<ptx::Instruction>(&f.body[i].item);
    if (!inst || inst->op != ptx::Opcode::bra || inst->operands.empty()) continue;
    auto it = labels.find(inst->operands.back().name);
    if (it != labels.end() && it->second < i) ++n;
  }
  return n;
}

// The `ld.param` instructions of the entry that read parameter `param`.
std::vector<std::string> param_loads(const ptx::Function& f, std::string_view param) {
  std::vector<std::string> out;
  for (const auto& st : f.body) {
    const auto* inst = std::get_if<ptx::Instruction>(&st.item);
    if (inst && inst->op == ptx::Opcode::ld && inst->space() == ptx::Space::param &&
        inst->operands.size() == 2 && inst->operands[1].name == param) {
      out.push_back(ptx::print(*inst));
    }
  }
  return out;
}

} // namespace

// ---- specialization: source level
// ----------------------------------------------------------------

class SpecializeMix : public ::testing::Test {
protected:
  void SetUp() override {
    ptx_text = compile(k_mix_source, mix_headers());
    info = analyze(ptx_text, "mix_rounds");
    ASSERT_EQ(info.params.size(), 4u);
  }
  // A launch of mix_rounds with its own buffers and the given n and rounds.
  Capture launch(uint64_t out, uint64_t in, int n, int rounds,
                 std::array<uint32_t, 3> block = {256, 1, 1}) {
    return capture(info,
                   {{0, bytes_of(out)}, {1, bytes_of(in)}, {2, bytes_of(n)}, {3, bytes_of(rounds)}},
                   block);
  }
  std::string ptx_text;
  ptx::EntryInfo info;
  std::unique_ptr<Strategy> strategy = make_specialize_strategy();
};

TEST_F(SpecializeMix, SourceLevelFoldsTheConstantsAndUnrollsTheLoop) {
  EXPECT_TRUE(strategy->needs_captures());
  auto task = task_for(ptx_text, "mix_rounds", mix_source_info(),
                       {launch(0x7f0000000000, 0x7f0000100000, 4096, 64),
                        launch(0x7f0000200000, 0x7f0000300000, 4096, 64)});
  auto cands = candidates_of(*strategy, task);
  ASSERT_EQ(cands.size(), 1u);
  const Candidate& c = cands[0];
  EXPECT_EQ(c.kind, CandidateKind::cuda);
  EXPECT_EQ(c.entry, "hone_spec");
  EXPECT_EQ(c.nvrtc_options, k_options);
  EXPECT_EQ(c.comparison, Comparison::bitwise);
  EXPECT_NE(c.description.find("n=4096"), std::string::npos) << c.description;
  EXPECT_NE(c.description.find("rounds=64"), std::string::npos) << c.description;

  // The guard: n and rounds, at their slots, with their exact bytes; any block shape.
  ASSERT_EQ(c.guard.scalars.size(), 2u);
  EXPECT_EQ(c.guard.scalars[0], (ScalarGuard{2, info.params[2].offset, bytes_of(4096)}));
  EXPECT_EQ(c.guard.scalars[1], (ScalarGuard{3, info.params[3].offset, bytes_of(64)}));
  EXPECT_EQ(c.guard.block, (std::array<uint32_t, 3>{0, 0, 0}));
  EXPECT_FALSE(c.guard.no_alias);

  // The header is part of the candidate: the worker compiles one file with no headers.
  EXPECT_EQ(c.code.find("#include \"spec_mix.h\""), std::string::npos) << c.code;
  EXPECT_NE(c.code.find("mix_step"), std::string::npos);
  auto compiled = cuda::nvrtc_compile(c.code, "candidate.cu", c.nvrtc_options);
  ASSERT_TRUE(compiled) << compiled.error().message << "\n" << c.code;
  auto module = ptx::parse(compiled->ptx);
  ASSERT_TRUE(module) << module.error().message;
  const ptx::Function* spec = module->function("hone_spec");
  ASSERT_NE(spec, nullptr) << compiled->ptx;
  EXPECT_EQ(spec->params.size(), 4u); // the same parameters: launched with the original's
  EXPECT_TRUE(param_loads(*spec, "hone_spec_param_3").empty()) << compiled->ptx;
  EXPECT_TRUE(param_loads(*spec, "hone_spec_param_2").empty()) << compiled->ptx;
  auto original = ptx::parse(ptx_text);
  ASSERT_TRUE(original);
  EXPECT_GT(backward_branches(*original->function("mix_rounds")), 0);
  EXPECT_LT(backward_branches(*spec), backward_branches(*original->function("mix_rounds")))
      << compiled->ptx;
}

TEST_F(SpecializeMix, AValueThatDiffersIsNotSpecialized) {
  auto task = task_for(ptx_text, "mix_rounds", mix_source_info(),
                       {launch(0x7f0000000000, 0x7f0000100000, 4096, 64),
                        launch(0x7f0000000000, 0x7f0000100000, 4096, 32)});
  auto cands = candidates_of(*strategy, task);
  ASSERT_EQ(cands.size(), 1u);
  const Candidate& c = cands[0];
  ASSERT_EQ(c.guard.scalars.size(), 1u);
  EXPECT_EQ(c.guard.scalars[0], (ScalarGuard{2, info.params[2].offset, bytes_of(4096)}));
  EXPECT_EQ(c.description.find("rounds="), std::string::npos) << c.description;
  // Pointers are never specialized, even when every launch passes the same one.
  for (const auto& s : c.guard.scalars) EXPECT_GE(s.param, 2u);
  auto compiled = cuda::nvrtc_compile(c.code, "candidate.cu", c.nvrtc_options);
  ASSERT_TRUE(compiled) << compiled.error().message << "\n" << c.code;
  auto module = ptx::parse(compiled->ptx);
  ASSERT_TRUE(module);
  ASSERT_NE(module->function("hone_spec"), nullptr);
  EXPECT_FALSE(param_loads(*module->function("hone_spec"), "hone_spec_param_3").empty());
}

TEST_F(SpecializeMix, NothingConstantMeansNoSession) {
  auto task = task_for(ptx_text, "mix_rounds", mix_source_info(),
                       {launch(1 << 20, 2 << 20, 4096, 64), launch(1 << 20, 2 << 20, 2048, 32)});
  std::string why;
  task.declined = &why;
  EXPECT_EQ(strategy->start(task), nullptr);
  // honectl show says why (not applicable: ...).
  EXPECT_EQ(why, "no scalar argument the kernel reads is the same in every captured launch");
}

TEST_F(SpecializeMix, OnlyCompleteCapturesCount) {
  Capture failed = launch(1 << 20, 2 << 20, 2048, 32);
  failed.status = CaptureStatus::too_large;
  // The failed capture's different values do not stop n and rounds from being constant ...
  auto task = task_for(ptx_text, "mix_rounds", mix_source_info(),
                       {launch(1 << 20, 2 << 20, 4096, 64), failed});
  auto cands = candidates_of(*strategy, task);
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].guard.scalars.size(), 2u);
  // ... and with no complete capture there is nothing to go on.
  task.captures = {failed};
  EXPECT_EQ(strategy->start(task), nullptr);
}

TEST_F(SpecializeMix, WithoutSourceThePtxLoadsBecomeConstants) {
  auto task = task_for(ptx_text, "mix_rounds", std::nullopt,
                       {launch(1 << 20, 2 << 20, 4096, 64), launch(3 << 20, 4 << 20, 4096, 64)});
  auto cands = candidates_of(*strategy, task);
  ASSERT_EQ(cands.size(), 1u);
  const Candidate& c = cands[0];
  EXPECT_EQ(c.kind, CandidateKind::ptx);
  EXPECT_EQ(c.entry, "mix_rounds");
  EXPECT_EQ(c.comparison, Comparison::bitwise);
  ASSERT_EQ(c.guard.scalars.size(), 2u);
  EXPECT_EQ(c.guard.scalars[0], (ScalarGuard{2, info.params[2].offset, bytes_of(4096)}));
  EXPECT_EQ(c.guard.scalars[1], (ScalarGuard{3, info.params[3].offset, bytes_of(64)}));
  EXPECT_NE(c.description.find("mix_rounds_param_3=64"), std::string::npos) << c.description;

  auto module = ptx::parse(c.code);
  ASSERT_TRUE(module) << module.error().message;
  const ptx::Function* f = module->function("mix_rounds");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(param_loads(*f, "mix_rounds_param_3").empty()) << c.code;
  EXPECT_TRUE(param_loads(*f, "mix_rounds_param_2").empty()) << c.code;
  EXPECT_FALSE(param_loads(*f, "mix_rounds_param_0").empty()) << c.code;
  EXPECT_TRUE(std::regex_search(c.code, std::regex("mov\\.u32 \t%r[0-9]+, 64;"))) << c.code;
  EXPECT_TRUE(std::regex_search(c.code, std::regex("mov\\.u32 \t%r[0-9]+, 4096;"))) << c.code;
  std::string log;
  EXPECT_TRUE(ptxas_accepts(c.code, log)) << log << "\n" << c.code;
}

TEST_F(SpecializeMix, ASourceItCannotResolveFallsBackToPtx) {
  // The kernel declared through a macro: the reader sees no __global__ definition of it.
  const std::string declaration = "extern \"C\" __global__";
  proto::SourceInfo source = mix_source_info();
  source.source.replace(source.source.find(declaration), declaration.size(), "KERNEL");
  source.source = "#define KERNEL " + declaration + "\n" + source.source;
  auto task = task_for(ptx_text, "mix_rounds", source, {launch(1 << 20, 2 << 20, 4096, 64)});
  auto cands = candidates_of(*strategy, task);
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].kind, CandidateKind::ptx);
  EXPECT_NE(cands[0].description.find("not at source level: no definition"), std::string::npos)
      << cands[0].description;
}

TEST_F(SpecializeMix, APtxCandidateFollowsASourceCandidateThatFailed) {
  auto task =
      task_for(ptx_text, "mix_rounds", mix_source_info(), {launch(1 << 20, 2 << 20, 4096, 64)});
  for (VerdictKind verdict : {VerdictKind::compile_error, VerdictKind::not_faster}) {
    auto session = strategy->start(task);
    ASSERT_NE(session, nullptr);
    auto first = session->poll();
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].kind, CandidateKind::cuda);
    EXPECT_FALSE(session->done()); // its verdict decides whether the PTX level is tried
    EXPECT_TRUE(session->poll().empty());
    Verdict v;
    v.kind = verdict;
    session->on_verdict(first[0], v);
    auto second = session->poll();
    if (verdict == VerdictKind::compile_error) {
      ASSERT_EQ(second.size(), 1u);
      EXPECT_EQ(second[0].kind, CandidateKind::ptx);
      EXPECT_EQ(second[0].entry, "mix_rounds");
      EXPECT_EQ(second[0].guard.scalars.size(), 2u);
    } else {
      EXPECT_TRUE(second.empty()); // slower at source level: the PTX level folds less
    }
    EXPECT_TRUE(session->done());
  }
}

// A division by a run-time value stays a division; by the specialized 64 it is a shift.
TEST_F(SpecializeMix, TheSpecializedDivisionsBecomeShifts) {
  auto task =
      task_for(ptx_text, "mix_rounds", mix_source_info(), {launch(1 << 20, 2 << 20, 4096, 64)});
  auto cands = candidates_of(*strategy, task);
  ASSERT_EQ(cands.size(), 1u);
  auto compiled = cuda::nvrtc_compile(cands[0].code, "candidate.cu", cands[0].nvrtc_options);
  ASSERT_TRUE(compiled) << compiled.error().message;
  auto divisions = [](const std::string& text) {
    int n = 0;
    for (const char* op : {"div.u32", "rem.u32"}) {
      for (size_t at = text.find(op); at != std::string::npos; at = text.find(op, at + 1)) ++n;
    }
    return n;
  };
  EXPECT_GT(divisions(ptx_text), 0);
  EXPECT_EQ(divisions(compiled->ptx), 0) << compiled->ptx;
}

TEST_F(SpecializeMix, CapturesThatDoNotFitThePtxAreNotTrusted) {
  Capture odd = launch(1 << 20, 2 << 20, 4096, 64);
  odd.params.pop_back(); // a layout the kernel does not have
  auto task = task_for(ptx_text, "mix_rounds", mix_source_info(),
                       {launch(1 << 20, 2 << 20, 4096, 64), odd});
  EXPECT_EQ(strategy->start(task), nullptr);
}

// ---- specialization: scalar types and kernel names -------------------------------------------

proto::SourceInfo source_info(const char* text) {
  proto::SourceInfo s;
  s.name = "kernel.cu";
  s.source = text;
  s.options = k_options;
  return s;
}

TEST(Specialize, FloatsAndDoublesArePassedBitwise) {
  std::string ptx_text = compile(k_scale_source);
  auto info = analyze(ptx_text, "scale");
  const float a = -0.1f;
  const double b = -1.0 / 3.0;
  Capture c = capture(info, {{0, bytes_of(uint64_t(1) << 20)},
                             {1, bytes_of(uint64_t(2) << 20)},
                             {2, bytes_of(a)},
                             {3, bytes_of(b)},
                             {4, bytes_of(256)}});
  auto strategy = make_specialize_strategy();

  // Source level: the bits, reinterpreted, and NVVM folds exactly those into the arithmetic.
  auto cands =
      candidates_of(*strategy, task_for(ptx_text, "scale", source_info(k_scale_source), {c}));
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].kind, CandidateKind::cuda);
  ASSERT_EQ(cands[0].guard.scalars.size(), 3u);
  EXPECT_EQ(cands[0].guard.scalars[0], (ScalarGuard{2, info.params[2].offset, bytes_of(a)}));
  EXPECT_EQ(cands[0].guard.scalars[1], (ScalarGuard{3, info.params[3].offset, bytes_of(b)}));
  EXPECT_NE(cands[0].code.find("__uint_as_float(0xbdcccccdu)"), std::string::npos) << cands[0].code;
  EXPECT_NE(cands[0].code.find("__longlong_as_double("), std::string::npos) << cands[0].code;
  auto compiled = cuda::nvrtc_compile(cands[0].code, "candidate.cu", cands[0].nvrtc_options);
  ASSERT_TRUE(compiled) << compiled.error().message << "\n" << cands[0].code;
  EXPECT_NE(compiled->ptx.find("0fBDCCCCCD"), std::string::npos) << compiled->ptx;
  EXPECT_NE(compiled->ptx.find("0dBFD5555555555555"), std::string::npos) << compiled->ptx;

  // PTX level: the same bits as float immediates.
  cands = candidates_of(*strategy, task_for(ptx_text, "scale", std::nullopt, {c}));
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].kind, CandidateKind::ptx);
  EXPECT_TRUE(std::regex_search(cands[0].code, std::regex("mov\\.f32 \t%f[0-9]+, 0fBDCCCCCD;")))
      << cands[0].code;
  EXPECT_TRUE(
      std::regex_search(cands[0].code, std::regex("mov\\.f64 \t%fd[0-9]+, 0dBFD5555555555555;")))
      << cands[0].code;
  std::string log;
  EXPECT_TRUE(ptxas_accepts(cands[0].code, log)) << log << "\n" << cands[0].code;
}

TEST(Specialize, NarrowIntegersKeepTheirExtension) {
  std::string ptx_text = compile(k_narrow_source);
  auto info = analyze(ptx_text, "narrow");
  Capture c = capture(info, {{0, bytes_of(uint64_t(1) << 20)},
                             {1, bytes_of(uint8_t(200))},
                             {2, bytes_of(int8_t(-3))},
                             {3, bytes_of(int16_t(-10))},
                             {4, bytes_of(int64_t(-16))}});
  auto strategy = make_specialize_strategy();

  auto cands =
      candidates_of(*strategy, task_for(ptx_text, "narrow", source_info(k_narrow_source), {c}));
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0].kind, CandidateKind::cuda);
  EXPECT_NE(cands[0].description.find("c=200, s=-3, h=-10, w=-16"), std::string::npos)
      << cands[0].description;
  auto compiled = cuda::nvrtc_compile(cands[0].code, "candidate.cu", cands[0].nvrtc_options);
  ASSERT_TRUE(compiled) << compiled.error().message << "\n" << cands[0].code;
  // 200 + 3 * -3 + 5 * -10 + (-16 >> 3), folded by NVVM.
  EXPECT_NE(compiled->ptx.find(", 139;"), std::string::npos) << compiled->ptx;

  // ld.param.u8/.s8 widen into 16-bit registers: the value moves as the widened pattern.
  cands = candidates_of(*strategy, task_for(ptx_text, "narrow", std::nullopt, {c}));
  ASSERT_EQ(cands.size(), 1u);
  ASSERT_EQ(cands[0].guard.scalars.size(), 4u);
  auto module = ptx::parse(cands[0].code);
  ASSERT_TRUE(module) << module.error().message;
  const ptx::Function* f = module->function("narrow");
  ASSERT_NE(f, nullptr);
  for (int i = 1; i <= 4; ++i) {
    EXPECT_TRUE(param_loads(*f, "narrow_param_" + std::to_string(i)).empty()) << cands[0].code;
  }
  EXPECT_NE(cands[0].code.find(", 200;"), std::string::npos) << cands[0].code;
  EXPECT_NE(cands[0].code.find(", 65533;"), std::string::npos) << cands[0].code; // -3 as 16 bits
  EXPECT_NE(cands[0].code.find(", 65526;"), std::string::npos) << cands[0].code; // -10
  EXPECT_TRUE(std::regex_search(cands[0].code, std::regex("mov\\.u64 \t%rd[0-9]+, -16;")))
      << cands[0].code;
  std::string log;
  EXPECT_TRUE(ptxas_accepts(cands[0].code, log)) << log << "\n" << cands[0].code;
}

TEST(Specialize, AParameterTheKernelNeverReadsIsLeftOut) {
  const char* source = R"(
extern "C" __global__ void first_only(int* d, int used, int unused) { d[threadIdx.x] = used; }
)";
  std::string ptx_text = compile(source);
  auto info = analyze(ptx_text, "first_only");
  Capture c = capture(info, {{0, bytes_of(uint64_t(1) << 20)}, {1, bytes_of(7)}, {2, bytes_of(9)}});
  auto cands = candidates_of(*make_specialize_strategy(),
                             task_for(ptx_text, "first_only", source_info(source), {c}));
  ASSERT_EQ(cands.size(), 1u);
  ASSERT_EQ(cands[0].guard.scalars.size(), 1u);
  EXPECT_EQ(cands[0].guard.scalars[0].param, 1u);
  EXPECT_EQ(cands[0].description.find("unused="), std::string::npos) << cands[0].description;
}

TEST(Specialize, AMangledKernelInANamespaceIsFoundInTheSource) {
  std::string ptx_text = compile(k_step_source);
  auto entries = entry_names(ptx_text);
  ASSERT_EQ(entries.size(), 1u);
  const std::string entry = entries[0];
  EXPECT_EQ(entry, "_ZN5outer5inner4stepEPiii");
  auto info = analyze(ptx_text, entry);
  Capture c = capture(
      info, {{0, bytes_of(uint64_t(1) << 20)}, {1, bytes_of(1024)}, {2, bytes_of(8)}}, {128, 1, 1});
  auto cands = candidates_of(*make_specialize_strategy(),
                             task_for(ptx_text, entry, source_info(k_step_source), {c}));
  ASSERT_EQ(cands.size(), 1u);
  const Candidate& cand = cands[0];
  EXPECT_EQ(cand.kind, CandidateKind::cuda);
  EXPECT_EQ(cand.entry, "hone_spec");
  EXPECT_NE(cand.description.find("n=1024, k=8"), std::string::npos) << cand.description;
  auto compiled = cuda::nvrtc_compile(cand.code, "candidate.cu", cand.nvrtc_options);
  ASSERT_TRUE(compiled) << compiled.error().message << "\n" << cand.code;
  auto module = ptx::parse(compiled->ptx);
  ASSERT_TRUE(module);
  const ptx::Function* spec = module->function("hone_spec");
  ASSERT_NE(spec, nullptr) << compiled->ptx;
  // The kernel's own launch bounds moved to the new entry with it.
  ASSERT_NE(spec->directive("maxntid"), nullptr) << compiled->ptx;
  EXPECT_EQ(spec->directive("maxntid")->values[0], 128);
  EXPECT_TRUE(param_loads(*spec, "hone_spec_param_1").empty()) << compiled->ptx;
  EXPECT_TRUE(param_loads(*spec, "hone_spec_param_2").empty()) << compiled->ptx;
  EXPECT_EQ(backward_branches(*spec), 0) << compiled->ptx; // 8 rounds: unrolled completely
}

TEST(Specialize, OverloadsFallBackToThePtx) {
  std::string ptx_text = compile(k_overload_source);
  auto entries = entry_names(ptx_text);
  ASSERT_EQ(entries.size(), 2u);
  for (const auto& entry : entries) {
    auto info = analyze(ptx_text, entry);
    Capture c =
        capture(info, {{0, bytes_of(uint64_t(1) << 20)}, {1, bytes_of(64)}, {2, bytes_of(5)}});
    auto cands = candidates_of(*make_specialize_strategy(),
                               task_for(ptx_text, entry, source_info(k_overload_source), {c}));
    ASSERT_EQ(cands.size(), 1u) << entry;
    EXPECT_EQ(cands[0].kind, CandidateKind::ptx) << entry;
    EXPECT_EQ(cands[0].entry, entry);
    EXPECT_NE(cands[0].description.find("(overloads)"), std::string::npos) << cands[0].description;
    std::string log;
    EXPECT_TRUE(ptxas_accepts(cands[0].code, log)) << log;
  }
}

// ---- the source reader -------------------------------------------------------------------------

TEST(KernelSource, SeesOnlyCode) {
  const std::string source = R"(#define DECLARE __global__ void k(int* p, int n) { }
// __global__ void k(float* q) { }
const char* text = "__global__ void k(double d) {";
const char* raw = R"x(__global__ void k(char c) { )x";
const long big = 1'000'000;
const char quote = '{';
extern "C" {
__global__ void __launch_bounds__(256, 2) k(float* __restrict__ out, const std::size_t count, unsigned int u)
{
    if (count > big) out[0] = 1.5e+3f;
}
}
)";
  auto def = find_kernel(source, "k");
  ASSERT_TRUE(def) << def.error().message;
  EXPECT_TRUE(def->namespaces.empty());
  ASSERT_EQ(def->params.size(), 3u);
  EXPECT_EQ(def->params[0].name, "out");
  EXPECT_EQ(def->params[0].type, "float*");
  EXPECT_EQ(def->params[1].name, "count");
  EXPECT_EQ(def->params[1].type, "std::size_t");
  EXPECT_EQ(def->params[1].text, "const std::size_t count");
  EXPECT_EQ(def->params[2].type, "unsigned int");
  EXPECT_EQ(source.substr(def->name_begin, def->name_end - def->name_begin), "k");

  auto wrapped = wrap_kernel(source, *def, "hone_spec", "__body",
                             {std::nullopt, "(std::size_t)5u", std::nullopt});
  ASSERT_TRUE(wrapped) << wrapped.error().message;
  EXPECT_NE(wrapped->find("__device__ __forceinline__ void k__body(float* __restrict__ out"),
            std::string::npos)
      << *wrapped;
  EXPECT_NE(wrapped->find("extern \"C\" __global__ void __launch_bounds__(256, 2) hone_spec("
                          "float* __restrict__ out, const std::size_t count, unsigned int u)"),
            std::string::npos)
      << *wrapped;
  EXPECT_NE(wrapped->find("k__body(out, (std::size_t)5u, u);"), std::string::npos) << *wrapped;
  // The text around the kernel is untouched.
  EXPECT_NE(wrapped->find("#define DECLARE __global__ void k(int* p, int n) { }"),
            std::string::npos);
  EXPECT_NE(wrapped->find("\"__global__ void k(double d) {\""), std::string::npos);
}

TEST(KernelSource, RefusesWhatItCannotResolve) {
  // A template instance: its demangled name has template arguments.
  EXPECT_FALSE(find_kernel("template <class T> __global__ void t(T* p) { }", "_Z1tIiEvPT_"));
  // An unnamed parameter cannot be passed on.
  auto unnamed = find_kernel("extern \"C\" __global__ void u(int* p, int) { }", "u");
  ASSERT_FALSE(unnamed);
  EXPECT_NE(unnamed.error().message.find("has no name"), std::string::npos)
      << unnamed.error().message;
  // A kernel inside an unnamed namespace cannot be reached from the wrapper.
  auto anon = find_kernel("namespace { __global__ void a(int* p) { } }", "_ZN12_GLOBAL__N_11aEPi");
  EXPECT_FALSE(anon);
  // The wrong namespace is not the kernel.
  EXPECT_FALSE(find_kernel("namespace x { __global__ void f(int* p) { } }", "_ZN1y1fEPi"));
  EXPECT_TRUE(find_kernel("namespace x { __global__ void f(int* p) { } }", "_ZN1x1fEPi"));
  // A wrapper name the source already uses.
  std::string source = "extern \"C\" __global__ void f(int* hone_spec) { }";
  auto def = find_kernel(source, "f");
  ASSERT_TRUE(def);
  EXPECT_FALSE(wrap_kernel(source, *def, "hone_spec", "__body", {std::nullopt}));
}

TEST(KernelSource, InlinesTheHeadersItWasGiven) {
  proto::SourceInfo s;
  s.source = "#include \"a.h\"\n#include <b.h>\n#include \"b.h\"\n#include <cuda_fp16.h>\nint "
             "main_part;\n";
  s.headers = {{"a.h", "#include \"b.h\"\nint from_a;\n"}, {"b.h", "#pragma once\nint from_b;\n"}};
  auto text = inline_headers(s);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_NE(text->find("int from_a;"), std::string::npos) << *text;
  // b.h is #pragma once: its text appears once, however often it is included.
  size_t first = text->find("int from_b;");
  ASSERT_NE(first, std::string::npos) << *text;
  EXPECT_EQ(text->find("int from_b;", first + 1), std::string::npos) << *text;
  EXPECT_EQ(text->find("\n#pragma once"), std::string::npos) << *text;
  EXPECT_LT(first, text->find("int from_a;")); // in include order
  // Headers it was not given stay includes.
  EXPECT_NE(text->find("#include <cuda_fp16.h>"), std::string::npos) << *text;
  EXPECT_NE(text->find("int main_part;"), std::string::npos);

  s.headers = {{"a.h", "#include \"b.h\"\n"}, {"b.h", "#include \"a.h\"\n"}};
  auto cycle = inline_headers(s);
  ASSERT_FALSE(cycle);
  EXPECT_NE(cycle.error().message.find("cycle"), std::string::npos) << cycle.error().message;
}

// ---- launch bounds -----------------------------------------------------------------------------

TEST(LaunchBounds, BoundsTheEntryByTheObservedShape) {
  std::string ptx_text = compile(k_mix_source, mix_headers());
  auto info = analyze(ptx_text, "mix_rounds");
  auto launch = [&](int n) {
    return capture(info,
                   {{0, bytes_of(uint64_t(1) << 20)},
                    {1, bytes_of(uint64_t(2) << 20)},
                    {2, bytes_of(n)},
                    {3, bytes_of(64)}},
                   {64, 2, 1});
  };
  auto strategy = make_launch_bounds_strategy();
  EXPECT_TRUE(strategy->needs_captures());
  auto task = task_for(ptx_text, "mix_rounds", mix_source_info(), {launch(4096), launch(1024)});
  auto cands = candidates_of(*strategy, task);
  ASSERT_EQ(cands.size(), 2u);

  const Candidate& bounded = cands[0];
  EXPECT_EQ(bounded.kind, CandidateKind::ptx);
  EXPECT_EQ(bounded.entry, "mix_rounds");
  EXPECT_EQ(bounded.comparison, Comparison::bitwise);
  EXPECT_EQ(bounded.guard.block, (std::array<uint32_t, 3>{64, 2, 1}));
  EXPECT_TRUE(bounded.guard.scalars.empty());
  EXPECT_TRUE(bounded.jit_options.empty());
  auto module = ptx::parse(bounded.code);
  ASSERT_TRUE(module) << module.error().message;
  const ptx::Function* f = module->function("mix_rounds");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(f->directive("maxntid"), nullptr) << bounded.code;
  EXPECT_EQ(f->directive("maxntid")->values, (std::vector<int64_t>{64, 2, 1}));
  std::string log;
  EXPECT_TRUE(ptxas_accepts(bounded.code, log)) << log << "\n" << bounded.code;

  const Candidate& jit = cands[1];
  EXPECT_EQ(jit.kind, CandidateKind::ptx);
  EXPECT_EQ(jit.code + std::string(1, '\0'), task.image); // the original PTX, compiled for that block size
  EXPECT_EQ(jit.jit_options, (std::vector<std::string>{"THREADS_PER_BLOCK=128"}));
  EXPECT_EQ(jit.guard.block, (std::array<uint32_t, 3>{64, 2, 1}));
}

TEST(LaunchBounds, NeedsOneShapeAndNoBoundsOfItsOwn) {
  auto strategy = make_launch_bounds_strategy();
  std::string ptx_text = compile(k_mix_source, mix_headers());
  auto info = analyze(ptx_text, "mix_rounds");
  Capture a = capture(info, {}, {256, 1, 1});
  Capture b = capture(info, {}, {128, 1, 1});
  std::string why;
  auto two_shapes = task_for(ptx_text, "mix_rounds", std::nullopt, {a, b});
  two_shapes.declined = &why;
  EXPECT_EQ(strategy->start(two_shapes), nullptr);
  EXPECT_EQ(why, "the captured launches use different block shapes");
  // A capture that failed does not count, in either direction.
  b.status = CaptureStatus::failed;
  EXPECT_NE(strategy->start(task_for(ptx_text, "mix_rounds", std::nullopt, {a, b})), nullptr);
  EXPECT_EQ(strategy->start(task_for(ptx_text, "mix_rounds", std::nullopt, {b})), nullptr);

  // The kernel's own __launch_bounds__ (.maxntid) stand.
  std::string bounded = compile(k_step_source);
  auto entries = entry_names(bounded);
  ASSERT_EQ(entries.size(), 1u);
  Capture c = capture(analyze(bounded, entries[0]), {}, {128, 1, 1});
  auto own_bounds = task_for(bounded, entries[0], std::nullopt, {c});
  own_bounds.declined = &why;
  EXPECT_EQ(strategy->start(own_bounds), nullptr);
  EXPECT_EQ(why, "the kernel declares its own launch bounds");
}

// Launch-shape tuning: kernels whose threads' work is a function of their linear index alone, as
// NVRTC compiles them, against kernels whose results depend on the block (shared memory, a
// barrier, a shuffle, the thread index used on its own).
namespace {

const char* const k_shape_sources = R"(
extern "C" __global__ void linear(unsigned* out, const unsigned* in, unsigned long long n)
{
    unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = in[i];
    for (int r = 0; r < 8; ++r) h = h * 0x9e3779b9u + (h >> 7);
    out[i] = h;
}
extern "C" __global__ void block_sum(unsigned* out, const unsigned* in)
{
    __shared__ unsigned part[256];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = in[i];
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned s = 0;
        for (unsigned k = 0; k < blockDim.x; ++k) s += part[k];
        out[blockIdx.x] = s;
    }
}
extern "C" __global__ void per_block(unsigned* out, const unsigned* in)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i] + blockIdx.x;
}
extern "C" __global__ void warp_max(unsigned* out, const unsigned* in)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = in[i];
    for (int d = 16; d > 0; d /= 2) v = max(v, __shfl_down_sync(0xffffffffu, v, d));
    out[i] = v;
}
extern "C" __global__ void strided(unsigned* out, const unsigned* in, unsigned n)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = in[i] * 3u;
}
// llama.cpp's element-wise form: a 64-bit index, and programmatic dependent launch.
extern "C" __global__ void wide_pdl(float* out, const float* a, const float* b, long long n)
{
    const long long i = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (i >= n) return;
    out[i] = a[i] * b[i] / (1.0f + __expf(-a[i]));
    asm volatile("griddepcontrol.launch_dependents;" :::);
}
// The 64-bit index, and the thread index on its own as well.
extern "C" __global__ void wide_and_lane(float* out, const float* a, long long n)
{
    const long long i = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    if (i >= n) return;
    out[i] = a[i] + (float)(threadIdx.x & 31);
}
)";

std::optional<std::string> refusal(const std::string& ptx_text, const char* entry) {
  auto m = ptx::parse(ptx_text);
  EXPECT_TRUE(m) << (m ? "" : m.error().message);
  const ptx::Function* f = m ? m->function(entry) : nullptr;
  EXPECT_NE(f, nullptr) << entry;
  if (!f) return std::string("no entry");
  return ptx::block_size_dependence(*f);
}

} // namespace

TEST(LaunchShape, ProvesOnlyKernelsWhoseWorkFollowsTheLinearIndex) {
  std::string ptx_text = compile(k_shape_sources);
  EXPECT_EQ(refusal(ptx_text, "linear"), std::nullopt);
  auto shared = refusal(ptx_text, "block_sum");
  ASSERT_TRUE(shared);
  EXPECT_NE(shared->find("shared"), std::string::npos) << *shared;
  auto block = refusal(ptx_text, "per_block");
  ASSERT_TRUE(block);
  EXPECT_NE(block->find("%ctaid.x"), std::string::npos) << *block;
  auto warp = refusal(ptx_text, "warp_max");
  ASSERT_TRUE(warp);
  EXPECT_NE(warp->find("shfl"), std::string::npos) << *warp;
  // A grid-stride loop reads %nctaid.x: the thread count is the same, but the proof is not made.
  EXPECT_TRUE(refusal(ptx_text, "strided"));
  // The index widened to 64 bits (cvt.u64.u32 of %tid.x, mul.wide.u32, add.s64), with
  // griddepcontrol around it: the same work per linear index.
  const size_t at = ptx_text.find(".entry wide_pdl");
  ASSERT_NE(at, std::string::npos);
  const std::string wide_pdl = ptx_text.substr(at, ptx_text.find(".entry", at + 1) - at);
  EXPECT_NE(wide_pdl.find("mul.wide.u32"), std::string::npos) << wide_pdl;
  EXPECT_NE(wide_pdl.find("cvt.u64.u32"), std::string::npos) << wide_pdl;
  EXPECT_NE(wide_pdl.find("griddepcontrol.wait"), std::string::npos) << wide_pdl;
  EXPECT_EQ(refusal(ptx_text, "wide_pdl"), std::nullopt);
  auto lane = refusal(ptx_text, "wide_and_lane");
  ASSERT_TRUE(lane);
  EXPECT_NE(lane->find("%tid.x"), std::string::npos) << *lane;
}

TEST(LaunchShape, OffersOtherBlockSizesWithTheSameThreadCount) {
  std::string ptx_text = compile(k_shape_sources);
  auto info = analyze(ptx_text, "linear");
  auto launch = [&](uint32_t grid) {
    Capture c = capture(info, {{2, bytes_of(uint64_t(grid) * 1024)}}, {1024, 1, 1});
    c.grid = {grid, 1, 1};
    return c;
  };
  auto strategy = make_launch_shape_strategy();
  EXPECT_TRUE(strategy->needs_captures());
  auto cands = candidates_of(*strategy, task_for(ptx_text, "linear", std::nullopt,
                                                 {launch(9), launch(7)}));
  ASSERT_FALSE(cands.empty());
  EXPECT_LE(cands.size(), 5u);
  for (const Candidate& c : cands) {
    EXPECT_EQ(c.kind, CandidateKind::ptx);
    EXPECT_EQ(c.entry, "linear");
    EXPECT_EQ(c.comparison, Comparison::bitwise);
    EXPECT_EQ(c.code + std::string(1, '\0'), ptx_text + std::string(1, '\0')); // the same code
    EXPECT_EQ(c.guard.block, (std::array<uint32_t, 3>{1024, 1, 1}));
    EXPECT_NE(c.guard.reshape_block, 0u);
    EXPECT_NE(c.guard.reshape_block, 1024u);
    EXPECT_EQ(1024u % c.guard.reshape_block, 0u) << c.guard.reshape_block;
    // Every captured launch can run reshaped, with the same thread count.
    for (uint32_t grid : {9u, 7u}) {
      uint32_t g[3] = {grid, 1, 1}, b[3] = {1024, 1, 1}, g2[3], b2[3];
      ASSERT_TRUE(reshaped(c.guard, g, b, g2, b2));
      EXPECT_EQ(uint64_t(g2[0]) * b2[0], uint64_t(grid) * 1024);
      EXPECT_EQ(b2[0], c.guard.reshape_block);
    }
  }
  EXPECT_EQ(cands.front().guard.reshape_block, 32u);

  // Refused: a kernel whose results depend on the block, two block shapes, a 2-D launch.
  auto sum = analyze(ptx_text, "block_sum");
  EXPECT_EQ(strategy->start(task_for(ptx_text, "block_sum", std::nullopt,
                                     {capture(sum, {}, {256, 1, 1})})),
            nullptr);
  Capture other = launch(9);
  other.block = {512, 1, 1};
  EXPECT_EQ(strategy->start(task_for(ptx_text, "linear", std::nullopt, {launch(9), other})),
            nullptr);
  Capture flat = launch(9);
  flat.grid = {9, 2, 1};
  EXPECT_EQ(strategy->start(task_for(ptx_text, "linear", std::nullopt, {flat})), nullptr);
}

TEST(LaunchShape, GuardReshapeRoundTripsAndRefusesWhatItCannotServe) {
  Guard g;
  g.block = {1024, 1, 1};
  g.reshape_block = 64;
  wire::Writer w;
  encode(w, g);
  wire::Reader r(w.out());
  Guard back;
  ASSERT_TRUE(decode(r, back));
  EXPECT_EQ(back, g);
  // A guard without a reshape encodes as it always did: a boolean where the flags are.
  Guard plain;
  plain.no_alias = true;
  wire::Writer pw;
  encode(pw, plain);
  EXPECT_EQ(uint8_t(pw.out().back()), 1u);

  uint32_t grid[3] = {9, 1, 1}, block[3] = {1024, 1, 1}, g2[3], b2[3];
  ASSERT_TRUE(reshaped(g, grid, block, g2, b2));
  EXPECT_EQ(g2[0], 144u);
  EXPECT_EQ(b2[0], 64u);
  uint32_t grid2d[3] = {9, 2, 1};
  EXPECT_FALSE(reshaped(g, grid2d, block, g2, b2));
  Guard up = g;
  up.reshape_block = 512;
  uint32_t odd[3] = {3, 1, 1}, small[3] = {256, 1, 1};
  EXPECT_FALSE(reshaped(up, odd, small, g2, b2)); // 768 threads are not blocks of 512
}
