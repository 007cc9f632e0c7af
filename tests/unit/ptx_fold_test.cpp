// ptx/fold: what it folds and what it leaves alone, that ptxas accepts the result, and that the
// folded kernel computes bit for bit what the original does on the emulated device, on inputs
// chosen to hit the edges (0, 1, 2^k - 1, 2^k, the top bit, all ones), with less work.
#include "cuda/nvrtc.hpp"
#include "ptx/fold.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using namespace hone;

namespace {

// The printed text with every run of blanks as one space (the printer aligns with tabs).
std::string squash(const std::string& text) {
  std::string out;
  for (char c : text) {
    bool blank = c == ' ' || c == '\t';
    if (blank && (out.empty() || out.back() == ' ' || out.back() == '\n')) continue;
    out.push_back(blank ? ' ' : c);
  }
  return out;
}

ptx::Module parse_or_die(const std::string& text) {
  auto m = ptx::parse(text, "test.ptx");
  if (!m) ADD_FAILURE() << m.error().message;
  return m ? std::move(*m) : ptx::Module{};
}

// A kernel as the PTX-level specializer leaves it: its parameters' loads replaced by movs.
constexpr const char* k_specialized = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_out, .param .u64 p_in, .param .u32 p_b, .param .u32 p_s)
{
  .reg .pred %p<3>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [p_out];
  ld.param.u64 %rd2, [p_in];
  mov.u32 %r1, 1024;
  mov.u32 %r2, 7;
  mov.s32 %r3, 16;
  mov.u32 %r4, 8;
  mov.u32 %r4, 8;
  @%p1 mov.u32 %r5, 4;
  mov.u32 %r6, %tid.x;
  cvta.to.global.u64 %rd3, %rd2;
  mul.wide.u32 %rd4, %r6, 4;
  add.s64 %rd5, %rd3, %rd4;
  ld.global.u32 %r7, [%rd5];
  rem.u32 %r8, %r7, %r1;
  div.u32 %r9, %r7, %r1;
  rem.u32 %r10, %r7, %r2;
  rem.s32 %r11, %r7, %r3;
  mul.lo.s32 %r12, %r7, %r3;
  div.u32 %r13, %r7, %r4;
  rem.u32 %r14, %r7, %r5;
  setp.lt.u32 %p2, %r7, %r1;
$L_end:
  mov.u32 %r15, 64;
  rem.u32 %r16, %r7, %r15;
  ret;
}
)";

} // namespace

TEST(PtxFold, PropagatesSingleDefinitionsAndReducesPowersOfTwo) {
  ptx::Module m = parse_or_die(k_specialized);
  ptx::Function* f = m.function("k");
  ASSERT_NE(f, nullptr);
  ptx::FoldStats s = ptx::fold_constants(*f);
  std::string out = squash(ptx::print(m));
  // %r1 = 1024: rem -> and 1023, div -> shr 10, setp reads the immediate.
  EXPECT_NE(out.find("and.b32 %r8, %r7, 1023;"), std::string::npos) << out;
  EXPECT_NE(out.find("shr.u32 %r9, %r7, 10;"), std::string::npos) << out;
  EXPECT_NE(out.find("setp.lt.u32 %p2, %r7, 1024;"), std::string::npos) << out;
  // %r2 = 7 is not a power of two: propagated, not reduced.
  EXPECT_NE(out.find("rem.u32 %r10, %r7, 7;"), std::string::npos) << out;
  // Signed remainder is not a mask; the low product by 16 is a shift, signed or not.
  EXPECT_NE(out.find("rem.s32 %r11, %r7, 16;"), std::string::npos) << out;
  EXPECT_NE(out.find("shl.b32 %r12, %r7, 4;"), std::string::npos) << out;
  // %r4 is written twice, %r5 under a guard, %r15 after a label: left as they are.
  EXPECT_NE(out.find("div.u32 %r13, %r7, %r4;"), std::string::npos) << out;
  EXPECT_NE(out.find("rem.u32 %r14, %r7, %r5;"), std::string::npos) << out;
  EXPECT_NE(out.find("rem.u32 %r16, %r7, %r15;"), std::string::npos) << out;
  // The product feeding the address keeps its register operand (not a constant).
  EXPECT_NE(out.find("mul.wide.u32 %rd4, %r6, 4;"), std::string::npos) << out;
  EXPECT_EQ(s.reduced, 3u);
  EXPECT_EQ(s.propagated, 6u); // r8 r9 r10 r11 r12 and the setp
  // What it prints parses back to the same module.
  ptx::Module again = parse_or_die(ptx::print(m));
  EXPECT_TRUE(again == m);
}

TEST(PtxFold, NothingToFoldLeavesTheBodyUnchanged) {
  const std::string text = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u32 p)
{
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [p];
  rem.u32 %r2, %r1, %r1;
  ret;
}
)";
  ptx::Module m = parse_or_die(text);
  ptx::Module before = m;
  ptx::FoldStats s = ptx::fold_constants(*m.function("k"));
  EXPECT_EQ(s.propagated + s.reduced, 0u);
  EXPECT_TRUE(m == before);
}

// ---- on the emulated device ------------------------------------------------------------------

namespace {

// A bucketing kernel as a hash table probes: the modulus and the rounds are arguments.
constexpr const char* k_source = R"(
extern "C" __global__ void bucket(unsigned* out, const unsigned* keys, unsigned n,
                                  unsigned buckets, unsigned rounds) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned h = keys[i], slot = 0;
  for (unsigned r = 0; r < rounds; ++r) {
    h = h * 2654435761u + r;
    h ^= h >> 13;
    slot = (slot + h) % buckets + h / buckets;
  }
  out[i] = slot;
}
)";

// The kernel's PTX with the loads of `buckets` and `rounds` replaced by movs of their values, as
// the specializer does (the test does it by text: nvcc-style `ld.param.u32 %rN,
// [bucket_param_3];`).
std::string specialize(const std::string& ptx, unsigned buckets, unsigned rounds) {
  std::string out = ptx;
  auto replace = [&](const std::string& param, unsigned value) {
    size_t p = out.find("[" + param + "]");
    if (p == std::string::npos) return false;
    size_t start = out.rfind("ld.param.u32", p);
    size_t end = out.find(';', p);
    std::string reg = out.substr(start + 13, out.find(',', start) - start - 13);
    out.replace(start, end - start, "mov.u32 " + reg + ", " + std::to_string(value));
    return true;
  };
  EXPECT_TRUE(replace("bucket_param_3", buckets)) << ptx;
  EXPECT_TRUE(replace("bucket_param_4", rounds)) << ptx;
  return out;
}

struct Outcome {
  std::vector<unsigned> out;
  float ms = 0;
};

void check(CUresult r, const char* what) {
  ASSERT_EQ(r, CUDA_SUCCESS) << what;
}

Outcome run(const std::string& ptx, const std::vector<unsigned>& keys, unsigned buckets,
            unsigned rounds) {
  Outcome result;
  CUmodule mod = nullptr;
  EXPECT_EQ(cuModuleLoadData(&mod, ptx.c_str()), CUDA_SUCCESS);
  CUfunction fn = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&fn, mod, "bucket"), CUDA_SUCCESS);
  unsigned n = unsigned(keys.size());
  CUdeviceptr d_out = 0, d_keys = 0;
  cuMemAlloc(&d_out, n * 4);
  cuMemAlloc(&d_keys, n * 4);
  cuMemcpyHtoD(d_keys, keys.data(), n * 4);
  void* args[] = {&d_out, &d_keys, &n, &buckets, &rounds};
  CUevent a, b;
  cuEventCreate(&a, 0);
  cuEventCreate(&b, 0);
  cuEventRecord(a, nullptr);
  EXPECT_EQ(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr),
            CUDA_SUCCESS);
  cuEventRecord(b, nullptr);
  cuEventSynchronize(b);
  cuEventElapsedTime(&result.ms, a, b);
  result.out.resize(n);
  cuMemcpyDtoH(result.out.data(), d_out, n * 4);
  cuMemFree(d_out);
  cuMemFree(d_keys);
  cuEventDestroy(a);
  cuEventDestroy(b);
  cuModuleUnload(mod);
  return result;
}

} // namespace

TEST(PtxFold, FoldedKernelComputesTheSameBitsWithLessWork) {
  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain");
  check(cuCtxSetCurrent(ctx), "set current");
  auto compiled = cuda::nvrtc_compile(k_source, "bucket.cu", {"--gpu-architecture=compute_90"});
  ASSERT_TRUE(compiled) << compiled.error().message;
  std::vector<unsigned> keys;
  for (unsigned v : {0u, 1u, 2u, 1023u, 1024u, 1025u, 0x7fffffffu, 0x80000000u, 0xffffffffu})
    keys.push_back(v);
  for (unsigned i = 0; keys.size() < 4096; ++i) keys.push_back(i * 2246822519u ^ (i >> 3));
  for (unsigned buckets : {1024u, 1u, 65536u}) {
    SCOPED_TRACE("buckets " + std::to_string(buckets));
    const unsigned rounds = 48;
    std::string spec = specialize(compiled->ptx, buckets, rounds);
    ptx::Module m = parse_or_die(spec);
    ptx::FoldStats s = ptx::fold_constants(*m.function("bucket"));
    EXPECT_GT(s.reduced, 0u);
    std::string folded = ptx::print(m);
    // ptxas takes what the fold printed.
    std::string path =
        std::string(HONE_BINARY_DIR) + "/tests/ptx_fold_" + std::to_string(buckets) + ".ptx";
    std::ofstream(path) << folded;
    int status =
        std::system((std::string(HONE_PTXAS) + " -arch=sm_90 " + path + " -o /dev/null").c_str());
    EXPECT_EQ(status, 0) << folded;
    Outcome original = run(compiled->ptx, keys, buckets, rounds);
    Outcome mine = run(folded, keys, buckets, rounds);
    ASSERT_EQ(mine.out.size(), original.out.size());
    EXPECT_TRUE(mine.out == original.out);
    // Modeled time: divisions cost 8 issue cycles on the emulated device, masks and shifts 1.
    EXPECT_LT(mine.ms, original.ms * 0.9f) << original.ms << " ms -> " << mine.ms << " ms";
  }
}
