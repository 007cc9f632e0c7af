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
// cuda_fp16.h), analyzed at `entry`.
ptx::EntryInfo analyze_cuda(const std::string& source, const std::string& entry,
                            const std::string& arch = "compute_90") {
  auto r = cuda::nvrtc_compile(
      source, "test.cu",
      {"--gpu-architecture=" + arch, std::string("--include-path=") + HONE_CUDA_INCLUDE});
  if (!r) throw std::runtime_error(r.error().message);
  return analyze_ptx(r->ptx, entry);
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
