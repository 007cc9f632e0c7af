// The worker's static checks of a candidate's PTX (daemon/worker/candidate_checks.hpp): kernels
// compiled by NVRTC as the worker compiles CUDA candidates, analyzed with ptx::analyze_entry, and
// each cheating rewrite refused with its pattern while honest ones pass. A few hand-written PTX
// entries pin down the address forms the analysis follows.
#include "common/job.hpp"
#include "cuda/nvrtc.hpp"
#include "daemon/worker/candidate_checks.hpp"
#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace hone;

namespace {

ptx::EntryInfo analyze_ptx(const std::string& text, const std::string& entry) {
  auto module = ptx::parse(text, "test.ptx");
  if (!module) throw std::runtime_error(module.error().message);
  const ptx::Function* f = module->function(entry);
  if (!f) throw std::runtime_error("no entry " + entry);
  return ptx::analyze_entry(*module, *f);
}

// The PTX NVRTC makes of `source` for `arch` (the CUDA headers on the include path for
// cuda_fp16.h).
std::string compile_cuda(const std::string& source, const std::string& arch = "compute_90") {
  auto r = cuda::nvrtc_compile(
      source, "test.cu",
      {"--gpu-architecture=" + arch, std::string("--include-path=") + HONE_CUDA_INCLUDE});
  if (!r) throw std::runtime_error(r.error().message);
  return r->ptx;
}

// The same, analyzed at `entry`.
ptx::EntryInfo analyze_cuda(const std::string& source, const std::string& entry,
                            const std::string& arch = "compute_90") {
  return analyze_ptx(compile_cuda(source, arch), entry);
}

const char* k_scale = R"(
extern "C" __global__ void scale(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
)";

const ptx::EntryInfo& scale() {
  static const ptx::EntryInfo info = analyze_cuda(k_scale, "scale");
  return info;
}

std::string describe(const std::optional<worker::Failure>& f) {
  if (!f) return "passed";
  return std::string(to_string(f->kind)) + " [" + std::string(f->pattern) + "]: " + f->message;
}

void expect_refused(const std::optional<worker::Failure>& f, std::string_view pattern,
                    std::initializer_list<std::string_view> pieces) {
  ASSERT_TRUE(f) << "expected a refusal as " << pattern;
  EXPECT_EQ(f->kind, VerdictKind::refused) << describe(f);
  EXPECT_EQ(f->pattern, pattern) << describe(f);
  for (auto p : pieces)
    EXPECT_NE(f->message.find(p), std::string::npos) << p << "\n" << describe(f);
}

// --- state-across-launches ---------------------------------------------------------------------

TEST(StateAcrossLaunches, ACounterTheCandidateIncrementsIsRefused) {
  // Correct for the first three launches, zeros after.
  auto c = analyze_cuda(R"(
__device__ unsigned counter;
extern "C" __global__ void scale_counter(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) atomicAdd(&counter, 1u);
    if (i < n) y[i] = counter < 3 ? a * x[i] : 0.0f;
}
)",
                        "scale_counter");
  expect_refused(worker::check_candidate(scale(), c), "state-across-launches",
                 {"counter", "atom", "scale_counter"});
}

TEST(StateAcrossLaunches, AWriteInACalledFunctionIsRefused) {
  auto c = analyze_cuda(R"(
__device__ unsigned launches;
__device__ __noinline__ void count_launch() { launches = launches + 1; }
extern "C" __global__ void scale_counter(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) count_launch();
    if (i < n) y[i] = a * x[i];
}
)",
                        "scale_counter");
  ASSERT_FALSE(c.callees.empty()) << "NVRTC inlined the helper: the case tests nothing";
  expect_refused(worker::check_candidate(scale(), c), "state-across-launches",
                 {"launches", "st.global", c.callees.front()});
}

TEST(StateAcrossLaunches, ReadingAnInitializedTableIsAllowed) {
  auto c = analyze_cuda(R"(
__device__ float table[4] = {1.0f, 1.0f, 1.0f, 1.0f};
extern "C" __global__ void scale_table(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] * table[i & 3];
}
)",
                        "scale_table");
  EXPECT_EQ(worker::check_candidate(scale(), c), std::nullopt)
      << describe(worker::check_candidate(scale(), c));
}

// An original that keeps module-scope state itself (the last block to finish resets a counter):
// its candidates may too, and meet the dynamic defences instead.
TEST(StateAcrossLaunches, AllowedWhereTheOriginalWritesModuleStateItself) {
  const char* last_block = R"(
__device__ unsigned done;
extern "C" __global__ void sum_last(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
    __threadfence();
    if (threadIdx.x == 0 && atomicAdd(&done, 1u) == gridDim.x - 1) done = 0;
}
)";
  auto original = analyze_cuda(last_block, "sum_last");
  auto candidate = analyze_cuda(last_block, "sum_last");
  EXPECT_EQ(worker::check_candidate(original, candidate), std::nullopt)
      << describe(worker::check_candidate(original, candidate));
  // Against an original without module state, the same code is refused.
  auto plain = analyze_cuda(R"(
extern "C" __global__ void sum_last(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}
)",
                            "sum_last");
  expect_refused(worker::check_candidate(plain, candidate), "state-across-launches", {"done"});
}

// The address forms NVRTC does not happen to use here: a direct `[var+4]`, and an address taken
// with cvta.to.global from a register; a generic store into the function's own local depot is
// not a module variable.
TEST(StateAcrossLaunches, DirectAndConvertedAddressesOfAVariableAreFollowed) {
  const std::string head = R"(
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .b8 state[16];
.visible .entry k(.param .u64 k_param_0)
{
  .local .align 4 .b8 __local_depot0[8];
  .reg .b32 %r<3>;
  .reg .b64 %rd<6>;
  mov.u64 %rd4, __local_depot0;
  cvta.local.u64 %rd5, %rd4;
  st.u32 [%rd5], %r1;
)";
  auto direct = analyze_ptx(head + "  st.global.u32 [state+4], %r1;\n  ret;\n}\n", "k");
  expect_refused(worker::check_candidate(scale(), direct), "state-across-launches",
                 {"state", "st.global.u32 [state+4], %r1;"});
  auto converted = analyze_ptx(head + "  mov.u64 %rd1, state;\n  cvta.to.global.u64 %rd2, %rd1;\n"
                                      "  add.s64 %rd3, %rd2, 8;\n  red.global.add.u32 [%rd3], 1;\n"
                                      "  ret;\n}\n",
                               "k");
  expect_refused(worker::check_candidate(scale(), converted), "state-across-launches",
                 {"state", "red.global.add.u32"});
  // The local store alone: traced to the depot, a .local variable.
  auto local = analyze_ptx(head + "  ret;\n}\n", "k");
  ASSERT_EQ(local.writes.size(), 1u);
  ASSERT_EQ(local.writes[0].variables.size(), 1u);
  EXPECT_EQ(local.writes[0].variables[0].name, "__local_depot0");
  EXPECT_EQ(local.writes[0].variables[0].space, ptx::Space::local);
  EXPECT_EQ(worker::check_candidate(scale(), local), std::nullopt);
}

// --- input-modification ------------------------------------------------------------------------

TEST(InputModification, WritingAnInputAndRestoringItIsRefused) {
  auto c = analyze_cuda(R"(
extern "C" __global__ void scale_restore(float a, float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        x[i] = -1.0f;
        y[i] = a * v;
        x[i] = v;
    }
}
)",
                        "scale_restore");
  expect_refused(worker::check_candidate(scale(), c), "input-modification",
                 {"parameter 1 (scale_param_1)", "st.global.f32"});
}

TEST(InputModification, AtomicsOnAnInputAreRefused) {
  auto c = analyze_cuda(R"(
extern "C" __global__ void scale_atomic(float a, float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&x[i], 1.0f);
        y[i] = a * (x[i] - 1.0f);
        atomicAdd(&x[i], -1.0f);
    }
}
)",
                        "scale_atomic");
  expect_refused(worker::check_candidate(scale(), c), "input-modification",
                 {"parameter 1 (scale_param_1)", "atom"});
}

TEST(InputModification, WritingABufferTheOriginalAlsoWritesIsAllowed) {
  // The original updates x in place: a candidate may write it too.
  auto original = analyze_cuda(R"(
extern "C" __global__ void scale_in_place(float a, float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i];
}
)",
                               "scale_in_place");
  auto c = analyze_cuda(R"(
extern "C" __global__ void scale_in_place2(float a, float* x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] *= a;
}
)",
                        "scale_in_place2");
  EXPECT_EQ(worker::check_candidate(original, c), std::nullopt)
      << describe(worker::check_candidate(original, c));
}

TEST(InputModification, AStoreTheAnalysisCannotAttributeToOneParameterIsNotRefused) {
  // The address is x or y depending on n: not certainly x.
  auto either = analyze_cuda(R"(
extern "C" __global__ void scale_either(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float* out = n < 0 ? const_cast<float*>(x) : y;
    if (i < n) out[i] = a * x[i];
}
)",
                             "scale_either");
  ASSERT_EQ(either.writes.size(), 1u);
  EXPECT_EQ(either.writes[0].pointers, (std::vector<ptx::ParamPointer>{{1, 0}, {2, 0}}));
  EXPECT_EQ(worker::check_candidate(scale(), either), std::nullopt)
      << describe(worker::check_candidate(scale(), either));
  // A pointer the kernel loads from memory is not followed at all.
  auto loaded = analyze_cuda(R"(
extern "C" __global__ void scale_loaded(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float* out = *reinterpret_cast<float* const*>(x + 64);
    if (i < n) out[i] = a * x[i];
}
)",
                             "scale_loaded");
  ASSERT_EQ(loaded.writes.size(), 1u);
  EXPECT_TRUE(loaded.writes[0].pointers.empty());
  EXPECT_EQ(worker::check_candidate(scale(), loaded), std::nullopt)
      << describe(worker::check_candidate(scale(), loaded));
}

TEST(InputModification, AnOriginalWithWritesTheAnalysisCannotFollowRefusesNothing) {
  // The original writes through a pointer it loads: any buffer may be one it writes.
  auto original = analyze_cuda(R"(
extern "C" __global__ void indirect(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float* out = *reinterpret_cast<float* const*>(y);
    if (i < n) out[i] = a * x[i];
}
)",
                               "indirect");
  auto c = analyze_cuda(R"(
extern "C" __global__ void writes_x(float a, float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float* out = *reinterpret_cast<float* const*>(y);
    if (i < n) { out[i] = a * x[i]; x[i] = 2.0f * x[i]; }
}
)",
                        "writes_x");
  // Against the plain original, the write to x is refused; against this one, not.
  expect_refused(worker::check_candidate(scale(), c), "input-modification",
                 {"parameter 1 (scale_param_1)"});
  EXPECT_EQ(worker::check_candidate(original, c), std::nullopt)
      << describe(worker::check_candidate(original, c));
}

// --- precision-downgrade -----------------------------------------------------------------------

TEST(PrecisionDowngrade, HalfArithmeticInAnF32KernelIsRefused) {
  auto c = analyze_cuda(R"(
#include <cuda_fp16.h>
extern "C" __global__ void scale_half(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __half2float(__hmul(__float2half(a), __float2half(x[i])));
}
)",
                        "scale_half");
  expect_refused(worker::check_candidate(scale(), c), "precision-downgrade",
                 {"f16", "f32 code", "cvt.rn.f16.f32"});
}

TEST(PrecisionDowngrade, Tf32ConversionInAnF32KernelIsRefused) {
  auto c = analyze_cuda(R"(
extern "C" __global__ void scale_tf32(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned t;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(t) : "f"(x[i]));
        y[i] = a * __uint_as_float(t);
    }
}
)",
                        "scale_tf32");
  expect_refused(worker::check_candidate(scale(), c), "precision-downgrade",
                 {"tf32", "cvt.rna.tf32.f32"});
}

TEST(PrecisionDowngrade, AHalfTypeTheOriginalAlreadyUsesIsAllowed) {
  // The original reads f16 data and computes in f32; the candidate computes in f16x2.
  const char* original_src = R"(
#include <cuda_fp16.h>
extern "C" __global__ void widen(float a, const __half* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * __half2float(x[i]);
}
)";
  const char* candidate_src = R"(
#include <cuda_fp16.h>
extern "C" __global__ void widen2(float a, const __half* x, float* y, int n)
{
    int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 1 < n) {
        __half2 v = __hmul2(__floats2half2_rn(a, a), *reinterpret_cast<const __half2*>(x + i));
        y[i] = __low2float(v);
        y[i + 1] = __high2float(v);
    }
}
)";
  auto original = analyze_cuda(original_src, "widen");
  auto c = analyze_cuda(candidate_src, "widen2");
  EXPECT_EQ(worker::check_candidate(original, c), std::nullopt)
      << describe(worker::check_candidate(original, c));
  // Against an original that names no f16 at all, the same candidate is refused.
  expect_refused(worker::check_candidate(scale(), c), "precision-downgrade", {"f16"});
}

TEST(PrecisionDowngrade, NativeBf16ForAnOriginalThatEmulatesItIsAllowed) {
  // PTX for sm_75 has no bf16 instructions: cuda_bf16.h computes in f32 on 16-bit integers. The
  // same source for this device uses them.
  const char* source = R"(
#include <cuda_bf16.h>
extern "C" __global__ void relu_bf16(const __nv_bfloat16* in, __nv_bfloat16* out, int n, float s)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __nv_bfloat16 v = __hmul(in[i], __float2bfloat16(s));
        out[i] = __hgt(v, __float2bfloat16(0.0f)) ? v : __float2bfloat16(0.0f);
    }
}
)";
  auto original = analyze_cuda(source, "relu_bf16", "compute_75");
  auto c = analyze_cuda(source, "relu_bf16");
  for (const auto& u : original.types_used) EXPECT_NE(u.type, ptx::Type::bf16) << u.instruction;
  EXPECT_EQ(worker::check_candidate(original, c), std::nullopt)
      << describe(worker::check_candidate(original, c));
  // tf32 is never how data is stored: still refused there.
  auto tf32 = analyze_cuda(R"(
extern "C" __global__ void relu_tf32(const unsigned short* in, unsigned short* out, int n, float s)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned t;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(t) : "f"(__uint_as_float(unsigned(in[i]) << 16) * s));
        out[i] = (unsigned short)(t >> 16);
    }
}
)",
                           "relu_tf32");
  expect_refused(worker::check_candidate(original, tf32), "precision-downgrade", {"tf32"});
}

// --- dependent-launch-race ---------------------------------------------------------------------

// An original for a programmatic dependent launch: it waits for the kernel before it first thing,
// then reads x and writes y, and lets the next kernel start once its stores are issued. The two
// asm statements are what cudaGridDependencySynchronize() and
// cudaTriggerProgrammaticLaunchCompletion() are (cuda_device_runtime_api.h), which NVRTC does not
// declare.
const char* k_pdl_scale = R"(
extern "C" __global__ void pdl_scale(float a, const float* x, float* y, int n)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
    asm volatile("griddepcontrol.launch_dependents;" :::);
}
)";

const ptx::EntryInfo& pdl_scale() {
  static const ptx::EntryInfo info = analyze_cuda(k_pdl_scale, "pdl_scale");
  return info;
}

// The 1-based number of the first line of `text` that holds `piece`, or 0.
uint32_t line_of(const std::string& text, std::string_view piece) {
  uint32_t line = 1;
  for (size_t at = 0; at < text.size(); ++line) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (std::string_view(text).substr(at, end - at).find(piece) != std::string_view::npos) {
      return line;
    }
    at = end + 1;
  }
  return 0;
}

TEST(DependentLaunchRace, GriddepcontrolIsParsedAsAnInstruction) {
  // The two forms of griddepcontrol are instructions the IR models (not kept as text).
  std::string text = compile_cuda(k_pdl_scale);
  auto module = ptx::parse(text, "test.ptx");
  ASSERT_TRUE(module) << module.error().message;
  std::vector<std::string> forms;
  for (const auto& st : module->function("pdl_scale")->body) {
    const auto* inst = std::get_if<ptx::Instruction>(&st.item);
    if (inst && inst->op == ptx::Opcode::griddepcontrol) forms.emplace_back(inst->mods.at(0));
  }
  EXPECT_EQ(forms, (std::vector<std::string>{"wait", "launch_dependents"})) << text;
  EXPECT_FALSE(pdl_scale().has_opaque);
  EXPECT_TRUE(pdl_scale().waits_grid_dependency);
  // Nothing it does with global memory comes before the wait.
  EXPECT_TRUE(pdl_scale().unwaited_accesses.empty());
  // A kernel without the wait, or with only launch_dependents, does not wait.
  EXPECT_FALSE(scale().waits_grid_dependency);
  auto trigger = analyze_cuda(R"(
extern "C" __global__ void trigger(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
    asm volatile("griddepcontrol.launch_dependents;");
}
)",
                              "trigger");
  EXPECT_FALSE(trigger.waits_grid_dependency);
  EXPECT_TRUE(trigger.unwaited_accesses.empty());
}

TEST(DependentLaunchRace, ACandidateThatNeverWaitsIsRefused) {
  auto c = analyze_cuda(R"(
extern "C" __global__ void no_wait(float a, const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
}
)",
                        "no_wait");
  expect_refused(worker::check_candidate(pdl_scale(), c), "dependent-launch-race",
                 {"griddepcontrol.wait", "programmatic dependent launch", "never executes"});
}

TEST(DependentLaunchRace, ReadingAnInputBeforeTheWaitIsRefused) {
  // Starts its load of x before waiting, to hide the latency.
  std::string text = compile_cuda(R"(
extern "C" __global__ void early_read(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (i < n) y[i] = a * v;
}
)");
  auto c = analyze_ptx(text, "early_read");
  uint32_t load = line_of(text, "ld.global");
  ASSERT_NE(load, 0u) << text;
  ASSERT_LT(load, line_of(text, "griddepcontrol.wait")) << text;
  expect_refused(worker::check_candidate(pdl_scale(), c), "dependent-launch-race",
                 {"griddepcontrol.wait", "reads memory through parameter 1 (pdl_scale_param_1)",
                  "before any griddepcontrol.wait", "ld.global",
                  "PTX line " + std::to_string(load) + ")"});
}

TEST(DependentLaunchRace, WritingAnOutputBeforeTheWaitIsRefused) {
  // Clears y before waiting: the kernel before it may still be reading y.
  auto c = analyze_cuda(R"(
extern "C" __global__ void early_clear(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.0f;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (i < n) y[i] += a * x[i];
}
)",
                        "early_clear");
  expect_refused(worker::check_candidate(pdl_scale(), c), "dependent-launch-race",
                 {"writes memory through parameter 2 (pdl_scale_param_2)", "st.global",
                  "may still be reading"});
}

TEST(DependentLaunchRace, WaitingFirstIsAccepted) {
  // Vectorized, waiting first thing; it never lets the next kernel start early, which only
  // costs time.
  auto c = analyze_cuda(R"(
extern "C" __global__ void wait_first(float a, const float* __restrict__ x,
                                      float* __restrict__ y, int n)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    int i = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 3 < n) {
        float4 v = *reinterpret_cast<const float4*>(x + i);
        *reinterpret_cast<float4*>(y + i) = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
    } else {
        for (; i < n; ++i) y[i] = a * x[i];
    }
}
)",
                        "wait_first");
  EXPECT_TRUE(c.waits_grid_dependency);
  EXPECT_TRUE(c.unwaited_accesses.empty());
  EXPECT_EQ(worker::check_candidate(pdl_scale(), c), std::nullopt)
      << describe(worker::check_candidate(pdl_scale(), c));
}

TEST(DependentLaunchRace, WhatTheOriginalReadsBeforeItsWaitMayBeReadBeforeTheWait) {
  // The weights w are not the kernel before's output: the original loads them before waiting.
  auto original = analyze_cuda(R"(
extern "C" __global__ void gated(const float* w, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float wi = i < n ? w[i] : 0.0f;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (i < n) y[i] = wi * x[i];
}
)",
                               "gated");
  ASSERT_TRUE(original.waits_grid_dependency);
  ASSERT_EQ(original.unwaited_accesses.size(), 1u);
  EXPECT_EQ(original.unwaited_accesses[0].pointers, (std::vector<ptx::ParamPointer>{{0, 0}}));
  EXPECT_EQ(original.unwaited_accesses[0].access, ptx::k_access_read);
  auto weights_early = analyze_cuda(R"(
extern "C" __global__ void gated2(const float* w, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float wi = __ldg(w + i);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    y[i] = x[i] * wi;
}
)",
                                    "gated2");
  EXPECT_EQ(worker::check_candidate(original, weights_early), std::nullopt)
      << describe(worker::check_candidate(original, weights_early));
  auto input_early = analyze_cuda(R"(
extern "C" __global__ void gated3(const float* w, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float wi = w[i], xi = x[i];
    asm volatile("griddepcontrol.wait;" ::: "memory");
    y[i] = xi * wi;
}
)",
                                  "gated3");
  expect_refused(worker::check_candidate(original, input_early), "dependent-launch-race",
                 {"reads memory through parameter 1 (gated_param_1)", "ld.global", "PTX line"});
}

TEST(DependentLaunchRace, AWaitOnOneBranchOnlyIsRefused) {
  // Waits only for large n: for the others, x is read before any wait.
  auto c = analyze_cuda(R"(
extern "C" __global__ void one_branch(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (n > 4096) asm volatile("griddepcontrol.wait;" ::: "memory");
    else a = -a;
    if (i < n) y[i] = (n > 4096 ? a : -a) * x[i];
}
)",
                        "one_branch");
  ASSERT_TRUE(c.waits_grid_dependency);
  expect_refused(worker::check_candidate(pdl_scale(), c), "dependent-launch-race",
                 {"reads memory through parameter 1 (pdl_scale_param_1)",
                  "before any griddepcontrol.wait", "ld.global"});
}

// The control flow and calls NVRTC does not happen to produce here: a guarded wait is no wait, a
// call to a function that always waits is one, and what a function called before the wait reads
// is refused (the analysis does not follow pointers into calls).
TEST(DependentLaunchRace, GuardedWaitsAndCallsAreFollowed) {
  const std::string head = R"(
.version 8.0
.target sm_90
.address_size 64
.func waits()
{
  griddepcontrol.wait;
  ret;
}
.func (.param .b32 out) reads(.param .b64 p)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  ld.global.u32 %r1, [%rd1];
  st.param.b32 [out], %r1;
  ret;
}
.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [k_param_0];
  ld.param.u32 %r1, [k_param_1];
  cvta.to.global.u64 %rd2, %rd1;
  setp.eq.s32 %p1, %r1, 0;
)";
  const std::string tail = "  ld.global.u32 %r2, [%rd2];\n  ret;\n}\n";
  const std::string guarded_ptx = head + "  @%p1 griddepcontrol.wait;\n" + tail;
  auto guarded = analyze_ptx(guarded_ptx, "k");
  ASSERT_TRUE(guarded.waits_grid_dependency);
  ASSERT_EQ(guarded.unwaited_accesses.size(), 1u);
  EXPECT_EQ(guarded.unwaited_accesses[0].pointers, (std::vector<ptx::ParamPointer>{{0, 0}}));
  EXPECT_EQ(guarded.unwaited_accesses[0].instruction, "ld.global.u32 %r2, [%rd2];");
  // After the wait in the text, but a branch jumps over it.
  auto jump = analyze_ptx(head + "  bra.uni SKIP;\n  griddepcontrol.wait;\nSKIP:\n" + tail, "k");
  ASSERT_EQ(jump.unwaited_accesses.size(), 1u);
  EXPECT_EQ(jump.unwaited_accesses[0].instruction, "ld.global.u32 %r2, [%rd2];");
  // A loop whose body waits: its first load comes before any wait, the one after the loop not.
  const std::string loop_body =
      "LOOP:\n  ld.global.u32 %r3, [%rd2];\n  griddepcontrol.wait;\n  @%p1 bra LOOP;\n";
  auto loop = analyze_ptx(head + loop_body + tail, "k");
  ASSERT_EQ(loop.unwaited_accesses.size(), 1u);
  EXPECT_EQ(loop.unwaited_accesses[0].instruction, "ld.global.u32 %r3, [%rd2];");
  auto called = analyze_ptx(head + "  call.uni waits, ();\n" + tail, "k");
  EXPECT_TRUE(called.waits_grid_dependency);
  EXPECT_TRUE(called.unwaited_accesses.empty());
  // Called only on one path: no wait for the load.
  auto maybe = analyze_ptx(head + "  @%p1 call.uni waits, ();\n" + tail, "k");
  EXPECT_EQ(maybe.unwaited_accesses.size(), 1u);
  // A function called before the wait reads through its argument: not traced, refused.
  auto callee = analyze_ptx(head + R"(  {
  .param .b64 param0;
  .param .b32 retval0;
  st.param.b64 [param0], %rd1;
  call.uni (retval0), reads, (param0);
  }
  griddepcontrol.wait;
)" + tail,
                            "k");
  ASSERT_EQ(callee.unwaited_accesses.size(), 1u);
  EXPECT_EQ(callee.unwaited_accesses[0].function, "reads");
  EXPECT_TRUE(callee.unwaited_accesses[0].pointers.empty());
  auto original = analyze_ptx(head + "  griddepcontrol.wait;\n" + tail, "k");
  EXPECT_TRUE(original.unwaited_accesses.empty());
  std::string in_callee =
      "in reads, PTX line " + std::to_string(line_of(head, "ld.global.u32 %r1"));
  expect_refused(worker::check_candidate(original, callee), "dependent-launch-race",
                 {"cannot trace", "ld.global.u32 %r1, [%rd1];", in_callee + ")"});
  std::string in_entry = "in k, PTX line " + std::to_string(line_of(guarded_ptx, "%r2, [%rd2]"));
  expect_refused(worker::check_candidate(original, guarded), "dependent-launch-race",
                 {"reads memory through parameter 0 (k_param_0)", in_entry + ")"});
  EXPECT_EQ(worker::check_candidate(original, called), std::nullopt)
      << describe(worker::check_candidate(original, called));
}

TEST(DependentLaunchRace, AnOriginalThatNeverWaitsChangesNothing) {
  EXPECT_TRUE(scale().unwaited_accesses.empty());
  auto no_wait = analyze_cuda(R"(
extern "C" __global__ void plain(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
)",
                              "plain");
  EXPECT_FALSE(no_wait.waits_grid_dependency);
  EXPECT_EQ(worker::check_candidate(scale(), no_wait), std::nullopt)
      << describe(worker::check_candidate(scale(), no_wait));
  // Not even a candidate that waits after reading: the original asks for no order.
  auto late = analyze_cuda(R"(
extern "C" __global__ void late(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (i < n) y[i] = a * v;
}
)",
                           "late");
  EXPECT_EQ(worker::check_candidate(scale(), late), std::nullopt)
      << describe(worker::check_candidate(scale(), late));
}

// An original with no PTX (SASS only) may be a dependent launch or not: nothing says. Its
// rewrite must wait before it touches memory, which costs nothing when the launch is not one.
TEST(DependentLaunchRace, ARewriteOfASassOnlyKernelMustWaitBeforeTouchingMemory) {
  auto no_wait = analyze_cuda(R"(
extern "C" __global__ void plain(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
)",
                              "plain");
  auto f = worker::check_candidate_of_unknown(no_wait);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, VerdictKind::refused);
  EXPECT_NE(f->message.find("the original has no PTX"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("never executes it"), std::string::npos) << f->message;

  auto late = analyze_cuda(R"(
extern "C" __global__ void late(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (i < n) y[i] = a * v;
}
)",
                           "late");
  f = worker::check_candidate_of_unknown(late);
  ASSERT_TRUE(f.has_value());
  EXPECT_NE(f->message.find("reads memory before it"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("ld.global"), std::string::npos) << f->message;

  auto first = analyze_cuda(R"(
extern "C" __global__ void first(float a, const float* x, float* y, int n)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
)",
                            "first");
  EXPECT_EQ(worker::check_candidate_of_unknown(first), std::nullopt)
      << describe(worker::check_candidate_of_unknown(first));
}

// --- external-state ----------------------------------------------------------------------------

// A scale kernel in PTX that reads the special register `sreg` into %rd9 (its width given by
// `wide`) and lets it reach the store of y[i] as `use` says: "value", "address", "guard",
// "branch", or "" (read and never used).
std::string sreg_scale(const std::string& sreg, bool wide, const std::string& use) {
  std::string read = wide ? "mov.u64 %rd9, " + sreg + ";\n"
                          : "mov.u32 %r9, " + sreg + ";\ncvt.u64.u32 %rd9, %r9;\n";
  std::string body;
  std::string store = "st.global.f32 [%rd7], %f3;\n";
  if (use == "value") {
    body = "cvt.rn.f32.u64 %f4, %rd9;\nadd.f32 %f3, %f3, %f4;\n";
  } else if (use == "address") {
    body = "and.b64 %rd10, %rd9, 4;\nadd.s64 %rd7, %rd7, %rd10;\n";
  } else if (use == "guard") {
    body = "setp.eq.u64 %p2, %rd9, 7;\n";
    store = "@!%p2 " + store;
  } else if (use == "branch") {
    body = "setp.eq.u64 %p2, %rd9, 7;\n@%p2 bra DONE;\n";
  }
  return R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .f32 a, .param .u64 x, .param .u64 y, .param .u32 n)
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .f32 %f<8>;
.reg .b64 %rd<16>;
ld.param.f32 %f1, [a];
ld.param.u64 %rd1, [x];
ld.param.u64 %rd2, [y];
ld.param.u32 %r1, [n];
mov.u32 %r2, %ctaid.x;
mov.u32 %r3, %ntid.x;
mov.u32 %r4, %tid.x;
mad.lo.s32 %r5, %r2, %r3, %r4;
setp.ge.s32 %p1, %r5, %r1;
@%p1 bra DONE;
cvta.to.global.u64 %rd3, %rd1;
cvta.to.global.u64 %rd4, %rd2;
mul.wide.s32 %rd5, %r5, 4;
add.s64 %rd6, %rd3, %rd5;
add.s64 %rd7, %rd4, %rd5;
ld.global.f32 %f2, [%rd6];
mul.f32 %f3, %f2, %f1;
)" + read + body + store + R"(DONE:
ret;
}
)";
}

// The plain scale kernel in the same PTX form.
const ptx::EntryInfo& ptx_scale() {
  static const ptx::EntryInfo info = analyze_ptx(sreg_scale("%tid.x", false, "value"), "k");
  return info;
}

// Every special register whose value says when or where a thread runs, reaching a store by its
// value, its address, its guard or a branch before it, is refused naming the register, the store
// and how; %tid.x, which the launch shape fixes, is not.
TEST(ExternalState, EachKindOfRegisterReachingAStoreIsRefused) {
  ASSERT_TRUE(ptx_scale().external_dependences.empty());
  ASSERT_EQ(worker::check_candidate(ptx_scale(), ptx_scale()), std::nullopt);
  struct Reg {
    const char* name;
    bool wide;
    ptx::External kind;
  };
  const Reg regs[] = {
      {"%clock", false, ptx::External::clock},
      {"%clock_hi", false, ptx::External::clock},
      {"%clock64", true, ptx::External::clock},
      {"%globaltimer", true, ptx::External::timer},
      {"%globaltimer_lo", false, ptx::External::timer},
      {"%globaltimer_hi", false, ptx::External::timer},
      {"%pm0", false, ptx::External::counters},
      {"%pm7_64", true, ptx::External::counters},
      {"%smid", false, ptx::External::placement},
      {"%nsmid", false, ptx::External::placement},
      {"%warpid", false, ptx::External::placement},
      {"%nwarpid", false, ptx::External::placement},
      {"%gridid", true, ptx::External::placement},
      {"%envreg0", false, ptx::External::driver},
      {"%envreg31", false, ptx::External::driver},
      {"%reserved_smem_offset_begin", false, ptx::External::driver},
      {"%current_graph_exec", true, ptx::External::driver},
  };
  const std::pair<const char*, const char*> uses[] = {
      {"value", "the value it writes derives from it"},
      {"address", "the address it writes derives from it"},
      {"guard", "its guard predicate derives from it"},
      {"branch", "decides whether it executes"},
  };
  for (const auto& r : regs) {
    ASSERT_EQ(ptx::external_kind(r.name), r.kind) << r.name;
    for (const auto& [use, how] : uses) {
      SCOPED_TRACE(std::string(r.name) + " by " + use);
      auto c = analyze_ptx(sreg_scale(r.name, r.wide, use), "k");
      ASSERT_EQ(c.external_dependences.size(), 1u);
      const auto& d = c.external_dependences.front();
      EXPECT_EQ(d.kind, r.kind);
      EXPECT_EQ(d.sreg, r.name);
      EXPECT_NE(d.instruction.find("st.global.f32"), std::string::npos) << d.instruction;
      EXPECT_NE(d.read_instruction.find(r.name), std::string::npos) << d.read_instruction;
      std::vector<std::string_view> pieces{r.name, "st.global.f32", how,
                                           "the original's stores depend on no register"};
      if (std::string_view(use) == "branch") {
        EXPECT_EQ(d.via, ptx::ExternalDependence::Via::branch);
        EXPECT_NE(d.branch_instruction.find("bra DONE"), std::string::npos);
        pieces.push_back("bra DONE");
      }
      auto f = worker::check_candidate(ptx_scale(), c);
      ASSERT_TRUE(f);
      EXPECT_EQ(f->kind, VerdictKind::refused);
      EXPECT_EQ(f->pattern, "external-state");
      for (auto p : pieces) EXPECT_NE(f->message.find(p), std::string::npos) << p << "\n" << describe(f);
    }
  }
  // Registers of the launch shape are inputs: validation replays the shape the application used.
  for (const char* shape : {"%tid.x", "%ctaid.y", "%nctaid.x", "%laneid", "%lanemask_lt",
                            "%dynamic_smem_size", "%clusterid.x"}) {
    EXPECT_EQ(ptx::external_kind(shape), std::nullopt) << shape;
    auto c = analyze_ptx(sreg_scale(shape, false, "branch"), "k");
    EXPECT_TRUE(c.external_dependences.empty()) << shape;
  }
}

// Reading one for what never reaches a store is allowed: a spin loop that only delays, a read
// whose value is dropped, timing that is only printed.
TEST(ExternalState, TimingThatNeverReachesAStoreIsAllowed) {
  for (const char* sreg : {"%clock64", "%globaltimer", "%smid"}) {
    auto c = analyze_ptx(sreg_scale(sreg, std::string(sreg) != "%smid", ""), "k");
    EXPECT_TRUE(c.external_dependences.empty()) << sreg;
  }
  // The spin loop's exit branch depends on %clock64; the store after its join does not.
  std::string spin = sreg_scale("%tid.x", false, "value");
  spin.replace(spin.find("ld.global.f32"), 0,
               "mov.u64 %rd12, %clock64;\nSPIN:\nmov.u64 %rd13, %clock64;\nsub.s64 %rd14, %rd13, "
               "%rd12;\nsetp.lt.s64 %p3, %rd14, 1000;\n@%p3 bra SPIN;\n");
  auto spinning = analyze_ptx(spin, "k");
  EXPECT_TRUE(spinning.external_dependences.empty());
  EXPECT_EQ(worker::check_candidate(ptx_scale(), spinning), std::nullopt)
      << describe(worker::check_candidate(ptx_scale(), spinning));

  // The same from CUDA C++: a delay loop on clock64(), and the elapsed time printed.
  auto compiled = analyze_cuda(R"(
extern "C" __global__ void scale_timed(float a, const float* x, float* y, int n)
{
    long long t0 = clock64();
    while (clock64() - t0 < 1000) {}
    unsigned long long start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
    unsigned long long end;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
    if (i == 0) printf("took %llu ns, %lld cycles\n", end - start, clock64() - t0);
}
)",
                               "scale_timed");
  ASSERT_NE(std::find(compiled.special_registers.begin(), compiled.special_registers.end(),
                      "%globaltimer"),
            compiled.special_registers.end());
  EXPECT_TRUE(compiled.external_dependences.empty())
      << compiled.external_dependences.front().instruction;
  EXPECT_EQ(worker::check_candidate(scale(), compiled), std::nullopt)
      << describe(worker::check_candidate(scale(), compiled));
}

// The dependence is followed through shared memory, called functions (arguments, results, a
// function that may end the thread) and loops.
TEST(ExternalState, DependenceIsFollowedThroughMemoryCallsAndLoops) {
  // A time bomb in CUDA C++: the timer is read in a helper and the kernel returns early after
  // 1 January 2100.
  auto bomb = analyze_cuda(R"(
__device__ __noinline__ unsigned long long now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
extern "C" __global__ void scale_bomb(float a, const float* x, float* y, int n)
{
    if (now() >= 4102444800ull * 1000000000ull) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
}
)",
                           "scale_bomb");
  ASSERT_FALSE(bomb.callees.empty()) << "NVRTC inlined the helper: the case tests nothing";
  expect_refused(worker::check_candidate(scale(), bomb), "external-state",
                 {"%globaltimer", "st.global.f32", "a time bomb", bomb.callees.front()});

  // Staged through shared memory: one thread reads %smid, every thread reads it back.
  auto shared = analyze_cuda(R"(
extern "C" __global__ void scale_sm(float a, const float* x, float* y, int n)
{
    __shared__ unsigned sm;
    if (threadIdx.x == 0) asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sm > 127 ? 0.0f : a * x[i];
}
)",
                             "scale_sm");
  expect_refused(worker::check_candidate(scale(), shared), "external-state",
                 {"%smid", "st.global.f32", "SM"});

  // A loop that counts how long it ran, and the count reaches the store.
  auto counted = analyze_cuda(R"(
extern "C" __global__ void scale_count(float a, const float* x, float* y, int n)
{
    long long t0 = clock64();
    int spins = 0;
    while (clock64() - t0 < 1000) ++spins;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + (spins > 100000 ? 1.0f : 0.0f);
}
)",
                              "scale_count");
  expect_refused(worker::check_candidate(scale(), counted), "external-state",
                 {"%clock64", "st.global.f32", "timing"});

  // A function that exits the thread on a condition of the timer: what the caller stores after
  // calling it executes only if it did not.
  std::string exits = sreg_scale("%tid.x", false, "value");
  exits.replace(exits.find(".visible .entry"), 0,
                ".func check()\n{\n.reg .pred %q<2>;\n.reg .b64 %t<2>;\n"
                "mov.u64 %t0, %globaltimer;\nsetp.gt.u64 %q0, %t0, 4102444800000000000;\n"
                "@%q0 exit;\nret;\n}\n");
  exits.replace(exits.find("ld.global.f32"), 0, "call.uni check, ();\n");
  auto exiting = analyze_ptx(exits, "k");
  ASSERT_EQ(exiting.external_dependences.size(), 1u);
  EXPECT_EQ(exiting.external_dependences[0].via, ptx::ExternalDependence::Via::branch);
  EXPECT_EQ(exiting.external_dependences[0].read_function, "check");
  EXPECT_NE(exiting.external_dependences[0].branch_instruction.find("call"), std::string::npos);

  // A result passed back through .reg parameters.
  std::string through = sreg_scale("%tid.x", false, "value");
  through.replace(through.find(".visible .entry"), 0,
                  ".func (.reg .b64 %out) lap(.reg .b64 %in)\n{\n"
                  "mov.u64 %out, %clock64;\nadd.u64 %out, %out, %in;\nret;\n}\n");
  through.replace(through.find("st.global.f32"), 0,
                  "call.uni (%rd11), lap, (%rd5);\ncvt.rn.f32.u64 %f5, %rd11;\n"
                  "add.f32 %f3, %f3, %f5;\n");
  auto lapped = analyze_ptx(through, "k");
  ASSERT_EQ(lapped.external_dependences.size(), 1u);
  EXPECT_EQ(lapped.external_dependences[0].via, ptx::ExternalDependence::Via::value);
  EXPECT_EQ(lapped.external_dependences[0].read_function, "lap");
}

// An original whose stores depend on a kind of register may have candidates whose stores depend
// on the same kind (a kernel that records its own timing); another kind is still refused.
TEST(ExternalState, AllowedWhereTheOriginalDependsOnTheSameKind) {
  auto original = analyze_cuda(R"(
extern "C" __global__ void scale_clocked(float a, const float* x, float* y, int n,
                                         long long* cycles)
{
    long long t0 = clock64();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
    if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
}
)",
                               "scale_clocked");
  ASSERT_EQ(original.external_dependences.size(), 1u);
  EXPECT_EQ(original.external_dependences[0].kind, ptx::External::clock);
  auto same = analyze_cuda(R"(
extern "C" __global__ void scale_clocked2(float a, const float* x, float* y, int n,
                                          long long* cycles)
{
    long long t0 = clock64();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
    if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
}
)",
                           "scale_clocked2");
  EXPECT_EQ(worker::check_candidate(original, same), std::nullopt)
      << describe(worker::check_candidate(original, same));
  auto timer = analyze_cuda(R"(
extern "C" __global__ void scale_timed(float a, const float* x, float* y, int n,
                                       long long* cycles)
{
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
    if (threadIdx.x == 0) cycles[blockIdx.x] = (long long)t0;
}
)",
                            "scale_timed");
  expect_refused(worker::check_candidate(original, timer), "external-state",
                 {"%globaltimer", "st.global.u64"});
}

// --- an honest rewrite -------------------------------------------------------------------------

TEST(CandidateChecks, APlainCorrectRewritePasses) {
  auto c = analyze_cuda(R"(
extern "C" __global__ void scale_fast(float a, const float* __restrict__ x, float* __restrict__ y,
                                      int n)
{
    int i = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 3 < n) {
        float4 v = *reinterpret_cast<const float4*>(x + i);
        *reinterpret_cast<float4*>(y + i) = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
    } else {
        for (; i < n; ++i) y[i] = a * x[i];
    }
}
)",
                        "scale_fast");
  EXPECT_EQ(worker::check_candidate(scale(), c), std::nullopt)
      << describe(worker::check_candidate(scale(), c));
  // What the checks rest on: the original reads x and writes y, every write traced to y.
  ASSERT_EQ(scale().params.size(), 4u);
  EXPECT_EQ(scale().params[1].access(), ptx::k_access_read);
  EXPECT_EQ(scale().params[2].access(), ptx::k_access_write);
  ASSERT_FALSE(c.writes.empty());
  for (const auto& w : c.writes) {
    EXPECT_EQ(w.pointers, (std::vector<ptx::ParamPointer>{{2, 0}})) << w.instruction;
    EXPECT_TRUE(w.variables.empty()) << w.instruction;
  }
}

} // namespace
