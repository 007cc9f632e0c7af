// The read-only cache strategy (agent/readonly.cpp): which loads become ld.global.nc, which stay
// as they were, when the candidate needs the no_alias guard, and when the strategy refuses a
// kernel. Hand-written PTX pins the dataflow rules; NVRTC output checks them on what a compiler
// emits. Every candidate's PTX must parse and assemble with ptxas.
#include "agent/strategy.hpp"
#include "corpus.hpp"
#include "cuda/nvrtc.hpp"
#include "ptx/parser.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>

namespace {

using namespace hone;
namespace fs = std::filesystem;

agent::KernelTask task_of(const std::string& ptx, const std::string& entry) {
  agent::KernelTask t;
  t.key = KernelKey{ImageHash::of(ptx.data(), ptx.size()), entry};
  t.format = proto::ImageFormat::ptx;
  t.image = ptx;
  t.image.push_back('\0'); // as the shim reports PTX images
  t.arch = "sm_90";
  return t;
}

// The strategy's candidate for `entry` of `ptx`, or nullopt when it does not apply.
std::optional<agent::Candidate> readonly_candidate(const std::string& ptx,
                                                   const std::string& entry) {
  auto strategy = agent::make_readonly_strategy();
  auto session = strategy->start(task_of(ptx, entry));
  if (!session) return std::nullopt;
  auto candidates = session->poll();
  EXPECT_TRUE(session->done());
  EXPECT_EQ(candidates.size(), 1u);
  if (candidates.empty()) return std::nullopt;
  return candidates.front();
}

// ptxas assembles `ptx` for sm_90 (the printed module is what the worker will JIT).
void expect_assembles(const std::string& ptx, const std::string& name) {
  fs::path dir = fs::path(HONE_BINARY_DIR) / "tests" / "agent_readonly";
  fs::create_directories(dir);
  std::string path = (dir / (name + ".ptx")).string();
  std::ofstream(path) << ptx;
  auto r = test::run_command({HONE_PTXAS, "-arch=sm_90", path, "-o", "/dev/null"});
  EXPECT_EQ(r.status, 0) << "ptxas rejected " << path << ":\n" << r.output;
}

// Every candidate: same entry, bitwise, PTX that parses again and assembles.
void expect_well_formed(const agent::Candidate& c, const std::string& entry) {
  EXPECT_EQ(c.strategy, "readonly");
  EXPECT_EQ(c.kind, CandidateKind::ptx);
  EXPECT_EQ(c.entry, entry);
  EXPECT_EQ(c.comparison, Comparison::bitwise);
  EXPECT_TRUE(c.guard.block == (std::array<uint32_t, 3>{0, 0, 0}));
  EXPECT_TRUE(c.guard.scalars.empty());
  auto again = ptx::parse(c.code, "candidate");
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_NE(again->function(entry), nullptr);
  expect_assembles(c.code, entry);
}

// Whether `code` holds `line` as an instruction (whitespace between tokens is free).
bool has_instruction(const std::string& code, const std::string& line) {
  std::string pattern;
  for (char ch : line) {
    if (ch == ' ') {
      pattern += "\\s+";
    } else if (std::string("[]{}.+|()$%").find(ch) != std::string::npos) {
      pattern += '\\';
      pattern += ch;
    } else {
      pattern += ch;
    }
  }
  return std::regex_search(code, std::regex("(^|\\s)" + pattern + "\\s*;"));
}

size_t count_of(const std::string& code, const std::string& what) {
  size_t n = 0;
  for (size_t at = code.find(what); at != std::string::npos; at = code.find(what, at + 1)) ++n;
  return n;
}

std::string module_of(const std::string& body) {
  return ".version 8.0\n.target sm_90\n.address_size 64\n\n" + body;
}

// out[i] += in[i] + in[i+2], plus loads the strategy must leave alone: volatile, relaxed, generic,
// and one through a pointer read from memory.
const std::string k_read_modify_write = module_of(R"(
.visible .entry rmw(.param .u64 rmw_in, .param .u64 rmw_out, .param .u32 rmw_n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<14>;
  .reg .b64 %rd<12>;

  ld.param.u64 %rd1, [rmw_in];
  ld.param.u64 %rd2, [rmw_out];
  ld.param.u32 %r1, [rmw_n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.s32 %p1, %r5, %r1;
  @%p1 bra $L_done;
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mul.wide.s32 %rd5, %r5, 4;
  add.s64 %rd6, %rd3, %rd5;
  ld.global.f32 %f1, [%rd6];
  ld.global.v2.f32 {%f2, %f3}, [%rd6+8];
  ld.volatile.global.f32 %f4, [%rd6];
  ld.weak.global.f32 %f12, [%rd6+4];
  ld.relaxed.gpu.global.f32 %f13, [%rd6+4];
  ld.f32 %f5, [%rd1];
  ld.global.u64 %rd8, [%rd3];
  ld.global.f32 %f6, [%rd8];
  add.s64 %rd7, %rd4, %rd5;
  ld.global.f32 %f7, [%rd7];
  add.f32 %f8, %f1, %f7;
  add.f32 %f9, %f8, %f3;
  add.f32 %f10, %f9, %f4;
  add.f32 %f11, %f10, %f5;
  add.f32 %f11, %f11, %f6;
  st.global.f32 [%rd7], %f11;
$L_done:
  ret;
}
)");

TEST(ReadonlyStrategy, LoadsThroughTheReadOnlyParameterBecomeNonCoherent) {
  auto c = readonly_candidate(k_read_modify_write, "rmw");
  ASSERT_TRUE(c);
  expect_well_formed(*c, "rmw");
  // through in, traced through cvta, mul.wide and add: .nc, vector width kept
  EXPECT_TRUE(has_instruction(c->code, "ld.global.nc.f32 %f1, [%rd6]")) << c->code;
  EXPECT_TRUE(has_instruction(c->code, "ld.global.nc.v2.f32 {%f2, %f3}, [%rd6+8]")) << c->code;
  EXPECT_TRUE(has_instruction(c->code, "ld.global.nc.u64 %rd8, [%rd3]")) << c->code;
  // .weak is what a plain load means; ld.global.nc does not take it
  EXPECT_TRUE(has_instruction(c->code, "ld.global.nc.f32 %f12, [%rd6+4]")) << c->code;
  // volatile, relaxed, generic, and through a pointer loaded from memory: as they were
  EXPECT_TRUE(has_instruction(c->code, "ld.volatile.global.f32 %f4, [%rd6]")) << c->code;
  EXPECT_TRUE(has_instruction(c->code, "ld.relaxed.gpu.global.f32 %f13, [%rd6+4]")) << c->code;
  EXPECT_TRUE(has_instruction(c->code, "ld.f32 %f5, [%rd1]")) << c->code;
  EXPECT_TRUE(has_instruction(c->code, "ld.global.f32 %f6, [%rd8]")) << c->code;
  // out is written: its load (read-modify-write) and its store stay
  EXPECT_TRUE(has_instruction(c->code, "ld.global.f32 %f7, [%rd7]")) << c->code;
  EXPECT_TRUE(has_instruction(c->code, "st.global.f32 [%rd7], %f11")) << c->code;
  EXPECT_EQ(count_of(c->code, ".nc"), 4u) << c->code;
  // a write through out into in's allocation would make the .nc loads stale
  EXPECT_TRUE(c->guard.no_alias);
  EXPECT_EQ(c->description, "ld.global.nc through rmw_in (4 loads)");
}

// Reads a and b (a through a pointer bumped in a loop), writes only shared memory: nothing the
// .nc loads read can change, whatever the pointers are.
const std::string k_reads_only = module_of(R"(
.visible .entry sum(.param .u64 sum_a, .param .u64 sum_b, .param .u32 sum_n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .shared .align 4 .b8 partial[4];

  ld.param.u64 %rd1, [sum_a];
  ld.param.u64 %rd2, [sum_b];
  ld.param.u32 %r1, [sum_n];
  cvta.to.global.u64 %rd3, %rd1;
  mov.u32 %r2, 0;
$L_loop:
  ld.global.u32 %r3, [%rd3];
  add.s32 %r2, %r2, %r3;
  add.s64 %rd3, %rd3, 4;
  add.s32 %r1, %r1, -1;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra $L_loop;
  cvta.to.global.u64 %rd4, %rd2;
  ld.global.cg.u32 %r4, [%rd4+16];
  add.s32 %r5, %r2, %r4;
  st.shared.u32 [partial], %r5;
  atom.shared.add.u32 %r6, [partial], %r5;
  ret;
}
)");

TEST(ReadonlyStrategy, KernelWithoutGlobalWritesNeedsNoAliasGuard) {
  auto c = readonly_candidate(k_reads_only, "sum");
  ASSERT_TRUE(c);
  expect_well_formed(*c, "sum");
  EXPECT_TRUE(has_instruction(c->code, "ld.global.nc.u32 %r3, [%rd3]")) << c->code;
  EXPECT_TRUE(has_instruction(c->code, "ld.global.cg.nc.u32 %r4, [%rd4+16]") ||
              has_instruction(c->code, "ld.global.nc.cg.u32 %r4, [%rd4+16]"))
      << c->code;
  EXPECT_FALSE(c->guard.no_alias);
  EXPECT_TRUE(c->guard.any());
  EXPECT_EQ(c->description, "ld.global.nc through sum_a, sum_b (2 loads)");
}

// A histogram: reads in, counts with atomics into hist, and also reads hist.
const std::string k_histogram = module_of(R"(
.visible .entry histogram(.param .u64 histogram_in, .param .u64 histogram_hist)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<10>;

  ld.param.u64 %rd1, [histogram_in];
  ld.param.u64 %rd2, [histogram_hist];
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd3, %rd5;
  ld.global.u32 %r2, [%rd6];
  and.b32 %r3, %r2, 255;
  mul.wide.u32 %rd7, %r3, 4;
  add.s64 %rd8, %rd4, %rd7;
  ld.global.u32 %r4, [%rd8];
  atom.global.add.u32 %r5, [%rd8], 1;
  ret;
}
)");

TEST(ReadonlyStrategy, PointerUsedByAtomicsIsLeftAlone) {
  auto c = readonly_candidate(k_histogram, "histogram");
  ASSERT_TRUE(c);
  expect_well_formed(*c, "histogram");
  EXPECT_TRUE(has_instruction(c->code, "ld.global.nc.u32 %r2, [%rd6]")) << c->code;
  EXPECT_TRUE(has_instruction(c->code, "ld.global.u32 %r4, [%rd8]")) << c->code;
  EXPECT_TRUE(has_instruction(c->code, "atom.global.add.u32 %r5, [%rd8], 1")) << c->code;
  EXPECT_TRUE(c->guard.no_alias);
  EXPECT_EQ(c->description, "ld.global.nc through histogram_in (1 load)");
}

// Kernels the strategy must refuse. Each has a load through a parameter the kernel only reads,
// except where the case says otherwise.
struct Refusal {
  const char* what;
  std::string ptx;
};

const std::string k_copy_head = R"(
.visible .entry copy(.param .u64 copy_in, .param .u64 copy_out, .param .u64 copy_other)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<12>;

  ld.param.u64 %rd1, [copy_in];
  ld.param.u64 %rd2, [copy_out];
  ld.param.u64 %rd9, [copy_other];
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd5, %r1, 4;
)";

std::vector<Refusal> refusals() {
  auto copy = [](const std::string& body) {
    return module_of(".global .align 4 .u32 total;\n" + k_copy_head + body + "  ret;\n}\n");
  };
  return {
      {"only stores", copy("  add.s64 %rd6, %rd4, %rd5;\n  st.global.u32 [%rd6], %r1;\n")},
      {"loads only through the written pointer",
       copy("  add.s64 %rd6, %rd4, %rd5;\n  ld.global.u32 %r2, [%rd6];\n"
            "  add.s32 %r3, %r2, 1;\n  st.global.u32 [%rd6], %r3;\n")},
      {"only generic loads",
       copy("  add.s64 %rd6, %rd1, %rd5;\n  ld.u32 %r2, [%rd6];\n  add.s64 %rd7, %rd4, %rd5;\n"
            "  st.global.u32 [%rd7], %r2;\n")},
      {"address from two parameters",
       copy("  add.s64 %rd6, %rd3, %rd9;\n  ld.global.u32 %r2, [%rd6];\n"
            "  add.s64 %rd7, %rd4, %rd5;\n  st.global.u32 [%rd7], %r2;\n")},
      {"pointer chosen between two parameters",
       copy("  setp.eq.u32 %p1, %r1, 0;\n  selp.b64 %rd6, %rd3, %rd9, %p1;\n"
            "  ld.global.u32 %r2, [%rd6];\n  add.s64 %rd7, %rd4, %rd5;\n"
            "  st.global.u32 [%rd7], %r2;\n")},
      {"write through a pointer loaded from memory",
       copy("  add.s64 %rd6, %rd3, %rd5;\n  ld.global.u32 %r2, [%rd6];\n"
            "  ld.global.u64 %rd7, [%rd4];\n  st.global.u32 [%rd7], %r2;\n")},
      {"generic write to an address the dataflow cannot trace",
       copy("  add.s64 %rd6, %rd3, %rd5;\n  ld.global.u32 %r2, [%rd6];\n"
            "  mov.u64 %rd7, total;\n  st.u32 [%rd7], %r2;\n")},
      {"write to a module variable",
       copy("  add.s64 %rd6, %rd3, %rd5;\n  ld.global.u32 %r2, [%rd6];\n"
            "  st.global.u32 [total], %r2;\n")},
  };
}

TEST(ReadonlyStrategy, RefusesWhatItCannotProveOrDoesNotChange) {
  const auto refusals_list = refusals();
  for (const auto& r : refusals_list) {
    SCOPED_TRACE(r.what);
    // the case itself is valid PTX: the refusal is the strategy's
    auto parsed = ptx::parse(r.ptx, r.what);
    ASSERT_TRUE(parsed) << parsed.error().message;
    expect_assembles(r.ptx, "refused_" + std::to_string(&r - refusals_list.data()));
    EXPECT_FALSE(readonly_candidate(r.ptx, "copy")) << r.ptx;
  }
}

TEST(ReadonlyStrategy, RefusesWhatIsNotAnEntryOfAPtxImage) {
  auto strategy = agent::make_readonly_strategy();
  EXPECT_EQ(strategy->id(), "readonly");
  EXPECT_FALSE(strategy->needs_captures());
  EXPECT_NEAR(strategy->expected_speedup(), 1.1, 1e-9);

  std::string why;
  auto missing = task_of(k_read_modify_write, "no_such_kernel");
  missing.declined = &why;
  EXPECT_EQ(strategy->start(missing), nullptr);
  EXPECT_EQ(why, "no body of the entry in the PTX");
  EXPECT_EQ(strategy->start(task_of("this is not PTX", "rmw")), nullptr);
  auto cubin = task_of(k_read_modify_write, "rmw");
  cubin.format = proto::ImageFormat::cubin;
  EXPECT_EQ(strategy->start(cubin), nullptr);
}

// What a compiler emits: without __restrict__, NVRTC keeps plain ld.global for const pointers.
const char* k_cuda_source = R"(
struct Pair { const float* from; float* to; };

extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void gather(float* out, const float* in, const int* index, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[index[i]];
}
extern "C" __global__ void vec4(float4* out, const float4* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float4 v = in[i]; out[i] = make_float4(v.w, v.z, v.y, v.x); }
}
extern "C" __global__ void pair(Pair p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p.to[i] = 2.0f * p.from[i];
}
extern "C" __global__ void chase(float** outs, const float* in) {
  outs[blockIdx.x][threadIdx.x] = in[threadIdx.x];
}
)";

TEST(ReadonlyStrategy, CompilerOutput) {
  auto compiled =
      cuda::nvrtc_compile(k_cuda_source, "readonly.cu", {"--gpu-architecture=compute_90"});
  ASSERT_TRUE(compiled) << compiled.error().message;
  const std::string& ptx = compiled->ptx;
  ASSERT_EQ(count_of(ptx, ".nc"), 0u) << "NVRTC already emitted .nc loads:\n" << ptx;

  struct Expect {
    const char* entry;
    const char* through;
    size_t loads;
  };
  for (const Expect& e :
       {Expect{"axpy", "axpy_param_1", 1}, Expect{"gather", "gather_param_1, gather_param_2", 2},
        Expect{"vec4", "vec4_param_1", 1}, Expect{"pair", "pair_param_0+0", 1}}) {
    SCOPED_TRACE(e.entry);
    auto c = readonly_candidate(ptx, e.entry);
    ASSERT_TRUE(c) << ptx;
    expect_well_formed(*c, e.entry);
    EXPECT_TRUE(c->guard.no_alias);
    EXPECT_EQ(c->description, std::string("ld.global.nc through ") + e.through + " (" +
                                  std::to_string(e.loads) + (e.loads == 1 ? " load)" : " loads)"));
    // only the entry's loads change: the other kernels of the module are printed as they were
    EXPECT_EQ(count_of(c->code, "ld.global.nc"), e.loads) << c->code;
  }
  auto vec = readonly_candidate(ptx, "vec4");
  ASSERT_TRUE(vec);
  EXPECT_NE(vec->code.find("ld.global.nc.v4.f32"), std::string::npos) << vec->code;
  // chase writes through a pointer it read from memory: it could be in
  EXPECT_FALSE(readonly_candidate(ptx, "chase")) << ptx;
}

} // namespace
