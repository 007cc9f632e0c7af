// ptx/retarget: PTX that NVRTC writes for compute_100 and compute_120, lowered to sm_90 with only
// its .target (and, above what this toolkit takes, its .version) changed; ptxas assembles the
// result for sm_90, and on the emulated device it computes bit for bit what the compute_90 build
// does. What sm_90 lacks is refused, naming the instruction and its line; each refused snippet is
// valid for the target it was written for and ptxas refuses it for sm_90, so the table is checked
// against the toolkit, not only against itself. wgmma, setmaxnreg and tensormap.replace give
// sm_90a.
#include "cuda/nvrtc.hpp"
#include "ptx/retarget.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace hone;

namespace {

// Whether ptxas assembles `ptx` for `arch` (the file is named after `name`).
bool ptxas_accepts(const std::string& ptx, const std::string& name, const std::string& arch) {
  const std::string path = std::string(HONE_BINARY_DIR) + "/tests/ptx_retarget_" + name + ".ptx";
  std::ofstream(path, std::ios::binary) << ptx;
  const std::string cmd =
      std::string(HONE_PTXAS) + " -arch=" + arch + " " + path + " -o /dev/null 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// A kernel with integer hashing, a warp shuffle, shared memory and a barrier, a data-dependent
// loop, IEEE float division and square root, and an atomic.
constexpr const char* k_source = R"(
extern "C" __global__ void mix(unsigned* out, float* fout, const unsigned* in, unsigned n) {
  __shared__ unsigned tile[128];
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned v = i < n ? in[i] : 0u;
  unsigned h = v * 2654435761u;
  h ^= h >> 15;
  h += __shfl_xor_sync(0xffffffffu, h, 1);
  tile[threadIdx.x] = h;
  __syncthreads();
  unsigned s = tile[(threadIdx.x + 1) % blockDim.x] ^ tile[threadIdx.x];
  for (unsigned r = 0; r < (v & 7u); ++r) s = s * 33u + (s >> 3);
  if (i < n) {
    out[i] = s;
    float f = (float)(v & 0xffffu) / 7.0f;
    fout[i] = sqrtf(f) * 3.0f + f;
    atomicAdd(&out[n], s & 0xffu);
  }
}
)";

// No contraction, so that NVVM 20 (compute_100+) and NVVM 7 (compute_90) round alike.
std::string compile(const std::string& arch) {
  auto r = cuda::nvrtc_compile(k_source, "mix.cu", {"--gpu-architecture=" + arch, "--fmad=false"});
  EXPECT_TRUE(r) << r.error().message;
  return r ? r->ptx : std::string();
}

struct Outcome {
  std::vector<uint32_t> out;
  std::vector<uint32_t> fout; // float bits
};

Outcome run_mix(const std::string& ptx) {
  Outcome result;
  CUmodule mod = nullptr;
  CUresult loaded = cuModuleLoadData(&mod, ptx.c_str());
  EXPECT_EQ(loaded, CUDA_SUCCESS);
  if (loaded != CUDA_SUCCESS) return result;
  CUfunction fn = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&fn, mod, "mix"), CUDA_SUCCESS);
  unsigned n = 1000;
  std::vector<uint32_t> in(n);
  for (unsigned k = 0; k < n; ++k) in[k] = k * 2246822519u ^ (k >> 2);
  in[0] = 0;
  in[1] = 0xffffffffu;
  in[2] = 0x80000000u;
  CUdeviceptr d_out = 0, d_fout = 0, d_in = 0;
  EXPECT_EQ(cuMemAlloc(&d_out, (n + 1) * 4), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&d_fout, n * 4), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&d_in, n * 4), CUDA_SUCCESS);
  EXPECT_EQ(cuMemsetD8(d_out, 0, (n + 1) * 4), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyHtoD(d_in, in.data(), n * 4), CUDA_SUCCESS);
  void* args[] = {&d_out, &d_fout, &d_in, &n};
  EXPECT_EQ(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  result.out.resize(n + 1);
  result.fout.resize(n);
  EXPECT_EQ(cuMemcpyDtoH(result.out.data(), d_out, (n + 1) * 4), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyDtoH(result.fout.data(), d_fout, n * 4), CUDA_SUCCESS);
  cuMemFree(d_out);
  cuMemFree(d_fout);
  cuMemFree(d_in);
  cuModuleUnload(mod);
  return result;
}

// A hand-written module for `target` whose body runs `body` with registers of every common kind.
std::string snippet(const std::string& target, const std::string& body,
                    const std::string& version = "9.0") {
  return ".version " + version + "\n.target " + target +
         "\n.address_size 64\n"
         "\n"
         ".visible .entry k(.param .u64 p)\n"
         "{\n"
         "  .reg .pred %p<4>;\n"
         "  .reg .b8 %c<4>;\n"
         "  .reg .b16 %h<8>;\n"
         "  .reg .b32 %r<16>;\n"
         "  .reg .b64 %rd<16>;\n"
         "  .reg .f32 %f<16>;\n"
         "  .shared .align 16 .b8 smem[1024];\n"
         "  .shared .align 8 .b64 bar;\n"
         "  ld.param.u64 %rd1, [p];\n" +
         body +
         "\n"
         "  ret;\n"
         "}\n";
}

// The line `body`'s first line lands on in snippet().
constexpr uint32_t k_body_line = 16;

} // namespace

// ---- lowering what NVRTC writes ----------------------------------------------------------------

class PtxRetargetNvrtc : public testing::TestWithParam<const char*> {};

TEST_P(PtxRetargetNvrtc, OnlyTheTargetChangesAndSm90AssemblesAndRunsIt) {
  const std::string arch = GetParam();
  const std::string original = compile(arch);
  ASSERT_FALSE(original.empty());
  const std::string sm = "sm_" + arch.substr(std::string("compute_").size());
  ASSERT_NE(original.find(".target " + sm), std::string::npos) << original;

  auto r = ptx::retarget(original);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->from_target, sm);
  EXPECT_EQ(r->to_target, "sm_90");
  EXPECT_TRUE(r->why_90a.empty()) << r->why_90a;
  EXPECT_EQ(r->version, "9.0"); // NVRTC 13.0 writes 9.0, which this toolkit takes as it is

  // (1) the target, (2) every other line byte for byte.
  const auto before = lines_of(original), after = lines_of(r->ptx);
  ASSERT_EQ(before.size(), after.size());
  int changed = 0;
  for (size_t k = 0; k < before.size(); ++k) {
    if (before[k] == after[k]) continue;
    ++changed;
    EXPECT_EQ(before[k], ".target " + sm);
    EXPECT_EQ(after[k], ".target sm_90");
  }
  EXPECT_EQ(changed, 1);
  EXPECT_EQ(r->ptx.size(), original.size() - (sm.size() - 5));

  // (3) ptxas takes it for sm_90, and did not take the original there.
  EXPECT_TRUE(ptxas_accepts(r->ptx, arch + "_to_sm_90", "sm_90"));
  EXPECT_FALSE(ptxas_accepts(original, arch + "_original", "sm_90"));

  // (4) on the emulated device it computes what the compute_90 build computes.
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUdevice dev;
  ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  CUcontext ctx;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  const std::string reference = compile("compute_90");
  ASSERT_NE(reference, r->ptx); // a different compiler wrote it, not a copy
  Outcome want = run_mix(reference);
  Outcome got = run_mix(r->ptx);
  ASSERT_EQ(want.out.size(), 1001u);
  EXPECT_NE(want.out[1000], 0u); // the atomic sum happened
  EXPECT_TRUE(got.out == want.out);
  EXPECT_TRUE(got.fout == want.fout);
  cuDevicePrimaryCtxRelease(dev);
}

INSTANTIATE_TEST_SUITE_P(NewerArchitectures, PtxRetargetNvrtc,
                         testing::Values("compute_100", "compute_120"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

TEST(PtxRetarget, Compute90OutputIsRefusedAsNothingToDo) {
  auto r = ptx::retarget(compile("compute_90"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("already targets sm_90"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("nothing to do"), std::string::npos) << r.error().message;

  auto a = ptx::retarget(snippet("sm_90a", "  wgmma.fence.sync.aligned;"));
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("already targets sm_90a"), std::string::npos)
      << a.error().message;
  auto old = ptx::retarget(snippet("sm_80", "  add.s32 %r1, %r2, %r3;"));
  ASSERT_FALSE(old);
  EXPECT_NE(old.error().message.find("already targets sm_80, which sm_90 runs"), std::string::npos)
      << old.error().message;
}

// NVRTC itself writes 256-bit loads for compute_100 when a structure is 32-byte aligned.
TEST(PtxRetarget, WideLoadsNvrtcWritesForCompute100AreRefused) {
  constexpr const char* source = R"(
struct __align__(32) f8 { float v[8]; };
extern "C" __global__ void wide(f8* o, const f8* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { f8 x = a[i]; for (int k = 0; k < 8; k++) x.v[k] *= 2.f; o[i] = x; }
}
)";
  auto c = cuda::nvrtc_compile(source, "wide.cu", {"--gpu-architecture=compute_100"});
  ASSERT_TRUE(c) << c.error().message;
  const auto lines = lines_of(c->ptx);
  uint32_t line = 0;
  for (size_t k = 0; k < lines.size() && !line; ++k) {
    if (lines[k].find("ld.global.v8.f32") != std::string::npos) line = uint32_t(k + 1);
  }
  ASSERT_NE(line, 0u) << c->ptx;
  auto r = ptx::retarget(c->ptx);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("ld.global.v8.f32 (line " + std::to_string(line) +
                                   ") needs sm_100; sm_90 has no 256-bit loads"),
            std::string::npos)
      << r.error().message;
}

// ---- the header --------------------------------------------------------------------------------

TEST(PtxRetarget, EditsOnlyTheArchitectureTokenAndKeepsTargetOptions) {
  const std::string text = "// written by hand\n/* .target sm_100a */ .version 9.0\n"
                           ".target   sm_100a ,texmode_independent\n.address_size 64\n"
                           ".visible .entry k(.param .u64 p)\n{\n  ret;\n}\n";
  auto r = ptx::retarget(text);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->from_target, "sm_100a");
  EXPECT_EQ(r->to_target, "sm_90");
  EXPECT_EQ(r->ptx, replace_once(text, "   sm_100a ,", "   sm_90 ,"));
  EXPECT_TRUE(ptxas_accepts(r->ptx, "options", "sm_90"));
}

TEST(PtxRetarget, VersionAboveTheToolkitIsLoweredAndOneItTakesIsKept) {
  static_assert(ptx::k_max_ptx_version_major == 9 && ptx::k_max_ptx_version_minor == 0);
  const std::string body = "  add.s32 %r1, %r2, %r3;";
  const std::string newer = snippet("sm_120", body, "9.1");
  EXPECT_FALSE(ptxas_accepts(replace_once(newer, "sm_120", "sm_90"), "v91", "sm_90"));
  auto r = ptx::retarget(newer);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->version, "9.0");
  EXPECT_EQ(r->ptx, replace_once(replace_once(newer, ".version 9.1", ".version 9.0"),
                                 ".target sm_120", ".target sm_90"));
  EXPECT_TRUE(ptxas_accepts(r->ptx, "v91_lowered", "sm_90"));

  const std::string older = snippet("sm_100f", body, "8.8");
  auto kept = ptx::retarget(older);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->version, "8.8");
  EXPECT_EQ(kept->from_target, "sm_100f");
  EXPECT_EQ(kept->ptx, replace_once(older, ".target sm_100f", ".target sm_90"));
  EXPECT_TRUE(ptxas_accepts(kept->ptx, "v88", "sm_90"));
}

// lower_version: the .version token alone changes (what the emulated device's cost model does
// for ptxas, emu/kernel_registers.cpp); a version not newer, or no directive, is refused.
TEST(PtxRetarget, LowerVersionEditsOnlyTheVersion) {
  const std::string body = "  add.s32 %r1, %r2, %r3;";
  const std::string newer = snippet("sm_90", body, "9.1");
  auto r = ptx::lower_version(newer, 9, 0);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, replace_once(newer, ".version 9.1", ".version 9.0"));
  EXPECT_TRUE(ptxas_accepts(*r, "lower_version", "sm_90"));
  auto same = ptx::lower_version(newer, 9, 1);
  ASSERT_FALSE(same);
  EXPECT_NE(same.error().message.find("not newer"), std::string::npos) << same.error().message;
  EXPECT_FALSE(ptx::lower_version("// no directive\n", 9, 0));
}

TEST(PtxRetarget, TextThatDoesNotParseIsRefused) {
  auto r = ptx::retarget(snippet("sm_100", "  add.s32 %r1, %r2,;"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("does not parse"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(":" + std::to_string(k_body_line) + ":"), std::string::npos)
      << r.error().message;
  auto empty = ptx::retarget("");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("does not parse"), std::string::npos);
}

TEST(PtxRetarget, HeaderThingsSm90CannotKeepAreRefused) {
  struct Case {
    std::string text;
    std::string says;
  };
  const std::string ok_body = "  add.s32 %r1, %r2, %r3;";
  const Case cases[] = {
      {replace_once(snippet("sm_100", ok_body), ".address_size 64", ".address_size 32"),
       ".address_size 32"},
      {snippet("sm_100, map_f64_to_f32", ok_body), "target option 'map_f64_to_f32'"},
      {snippet("sm_100x", ok_body), "unknown target architecture 'sm_100x'"},
      {snippet("sm_100", ok_body, "7.0"), ".version 7.0 is older than sm_90 accepts (7.8)"},
      {replace_once(snippet("sm_100", ok_body), "{\n", "\n.maxntid 128, 1, 1\n.someday 3\n{\n"),
       ".someday of k (line 5) is not known to exist on sm_90"},
  };
  for (const Case& c : cases) {
    auto r = ptx::retarget(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos)
        << "expected \"" << c.says << "\" in: " << r.error().message;
  }
  auto other = ptx::retarget(snippet("sm_100", ok_body), 80);
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("the only supported target is compute capability 90"),
            std::string::npos);
}

// ---- refusals ----------------------------------------------------------------------------------

namespace {

struct Refusal {
  const char* name;
  const char* target; // one that has the instruction
  const char* body;   // on snippet()'s body line (plus `extra` lines before it)
  const char* says;   // in the error, after "(line N)"
};

// The first line of each body is the instruction refused.
const Refusal k_refusals[] = {
    {"tcgen05_alloc", "sm_100a",
     "  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [smem], 32;",
     "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 (line 16) needs sm_100a; sm_90 has "
     "no tcgen05"},
    {"mma_kind", "sm_120a",
     "  mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32 {%f1,%f2,%f3,%f4}, "
     "{%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};",
     "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32 (line 16) needs sm_120a; "
     "sm_90 has no .kind::f8f6f4"},
    {"cvt_e2m1x2", "sm_100a", "  cvt.rn.satfinite.e2m1x2.f32 %c1, %f1, %f2;",
     "cvt.rn.satfinite.e2m1x2.f32 (line 16) needs sm_100a or sm_120a; sm_90 has no .e2m1x2"},
    {"cvt_ue8m0x2", "sm_100a", "  cvt.rn.bf16x2.ue8m0x2 %r1, %h1;",
     "(line 16) needs sm_100a or sm_120a; sm_90 has no .ue8m0x2"},
    {"cvt_rs", "sm_100a", "  cvt.rs.f16x2.f32 %r1, %f1, %f2, %r2;",
     "cvt.rs.f16x2.f32 (line 16) needs sm_100a; sm_90 has no cvt.rs"},
    {"cvt_tf32_satfinite", "sm_100", "  cvt.rn.satfinite.tf32.f32 %r1, %f1;",
     "(line 16) needs sm_100; sm_90 has no .satfinite with .rn/.rz on cvt to .tf32"},
    {"redux_f32", "sm_100a", "  redux.sync.min.f32 %f1, %f2, 0xffffffff;",
     "redux.sync.min.f32 (line 16) needs sm_100a; sm_90 has no floating-point redux.sync"},
    {"cluster_launch_control", "sm_100",
     "  clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 "
     "[smem], [bar];",
     "(line 16) needs sm_100; sm_90 has no clusterlaunchcontrol"},
    {"cta_group", "sm_100a",
     "  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes."
     "cta_group::2 [smem], [%rd1, {%r1, %r2}], [bar];",
     "(line 16) needs sm_100a; sm_90 has no .cta_group::2"},
    {"add_f32x2", "sm_100", "  add.rn.f32x2 %rd1, %rd2, %rd3;",
     "add.rn.f32x2 (line 16) needs sm_100; sm_90 has no .f32x2"},
    {"mixed_precision", "sm_100", "  add.f32.f16 %f1, %h1, %f2;",
     "add.f32.f16 (line 16) needs sm_100; sm_90 has no mixed-precision .f32.f16"},
    {"three_input_max", "sm_100", "  max.f32 %f1, %f2, %f3, %f4;",
     "max.f32 (line 16) needs sm_100; sm_90 has no three-input max.f32"},
    {"st_bulk", "sm_100", "  st.bulk.weak.shared::cta [%rd1], %rd2, 0;",
     "(line 16) needs sm_100; sm_90 has no st.bulk"},
    {"st_v8", "sm_100", "  st.global.v8.b32 [%rd1], {%r1,%r2,%r3,%r4,%r5,%r6,%r7,%r8};",
     "st.global.v8.b32 (line 16) needs sm_100; sm_90 has no 256-bit loads and stores"},
    {"ldmatrix_m16n16", "sm_100a",
     "  ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r1, %r2}, [smem];",
     "(line 16) needs sm_100a or sm_120a; sm_90 has no ldmatrix .m16n16"},
    {"multimem_e4m3x4", "sm_100a",
     "  multimem.st.relaxed.sys.global.v4.e4m3x4 [%rd1], {%r1,%r2,%r3,%r4};",
     "(line 16) needs sm_100a or sm_120a; sm_90 has no .e4m3x4"},
    {"gather4", "sm_100a",
     "  cp.async.bulk.prefetch.tensor.2d.L2.global.tile::gather4 [%rd1, {%r1, %r2, %r3, %r4, "
     "%r5}];",
     "(line 16) needs sm_100a; sm_90 has no .tile::gather4"},
    {"tensormap_elemtype", "sm_100a",
     "  tensormap.replace.tile.elemtype.global.b1024.b32 [%rd1], 13;",
     "(line 16) needs sm_100a; sm_90 has no .elemtype 13"},
    {"mma_fp4", "sm_120a",
     "  mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32 {%f1,%f2,%f3,%f4}, "
     "{%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};",
     "(line 16) needs sm_120a; sm_90 has no .kind::f8f6f4"},
    {"mma_block_scale", "sm_120a",
     "  mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32."
     "ue8m0 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8}, %r9, {0, 0}, "
     "%r10, {0, 0};",
     "(line 16) needs sm_120a; sm_90 has no .kind::mxf4"},
    {"cvt_e3m2x2", "sm_120a", "  cvt.rn.f16x2.e3m2x2 %r1, %h1;",
     "cvt.rn.f16x2.e3m2x2 (line 16) needs sm_100a or sm_120a; sm_90 has no .e3m2x2"},
    {"ldmatrix_unpack", "sm_100a",
     "  ldmatrix.sync.aligned.m8n16.x1.shared.b8x16.b6x16_p32 {%r1}, [smem];",
     "(line 16) needs sm_100a or sm_120a; sm_90 has no .b8x16"},
    {"stmatrix_m16n8", "sm_120a", "  stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [smem], {%r1};",
     "(line 16) needs sm_100a or sm_120a; sm_90 has no stmatrix .m16n8"},
    {"cp_mask", "sm_100",
     "  cp.async.bulk.global.shared::cta.bulk_group.cp_mask [%rd1], [smem], 64, %h1;",
     "(line 16) needs sm_100; sm_90 has no .cp_mask"},
    {"swizzle_atomicity", "sm_100a",
     "  tensormap.replace.tile.swizzle_atomicity.global.b1024.b32 [%rd1], 1;",
     "(line 16) needs sm_100a; sm_90 has no .swizzle_atomicity"},
    // The first refused instruction is the one named, on its own line.
    {"first_of_two", "sm_100a",
     "  add.s32 %r1, %r2, %r3;\n  tcgen05.fence::before_thread_sync;\n  redux.sync.min.f32 %f1, "
     "%f2, 0xffffffff;",
     "tcgen05.fence::before_thread_sync (line 17) needs sm_100a"},
};

} // namespace

class PtxRetargetRefusal : public testing::TestWithParam<Refusal> {};

TEST_P(PtxRetargetRefusal, NamesTheInstructionAndItsLineAndPtxasAgrees) {
  const Refusal& c = GetParam();
  const std::string text = snippet(c.target, c.body);
  // The snippet is real PTX for its own target, and sm_90 really lacks it.
  EXPECT_TRUE(ptxas_accepts(text, std::string(c.name) + "_own", c.target));
  EXPECT_FALSE(
      ptxas_accepts(replace_once(text, std::string(".target ") + c.target, ".target sm_90a"),
                    std::string(c.name) + "_90a", "sm_90a"));
  auto r = ptx::retarget(text);
  ASSERT_FALSE(r) << r->ptx;
  EXPECT_NE(r.error().message.find(c.says), std::string::npos)
      << "expected \"" << c.says << "\" in: " << r.error().message;
  EXPECT_NE(r.error().message.find(std::string("cannot retarget ") + c.target + " to sm_90"),
            std::string::npos)
      << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(Sm90Lacks, PtxRetargetRefusal, testing::ValuesIn(k_refusals),
                         [](const testing::TestParamInfo<Refusal>& info) {
                           return std::string(info.param.name);
                         });

TEST(PtxRetarget, WhatHoneCannotConfirmIsRefused) {
  struct Case {
    std::string body;
    std::string says;
  };
  const Case cases[] = {
      // Not an instruction the IR models: kept as opaque text by the parser.
      {"  frobnicate.b32 %r1, %r2;",
       "frobnicate.b32 (line 16) is not known to exist on sm_90: an instruction hone does not "
       "model"},
      {"  @%p1 frobnicate.b32 %r1, %r2;", "frobnicate.b32 (line 16) is not known"},
      {"  mov.u32 %r1, %tmem_base;",
       "mov.u32 (line 16) is not known to exist on sm_90: register %tmem_base is neither "
       "declared nor a special register of sm_90"},
      {"  multimem.cp.async.bulk.global.shared::cta.bulk_group [%rd1], [smem], 64;",
       "(line 16) is not known to exist on sm_90: hone knows multimem.ld_reduce"},
  };
  for (const Case& c : cases) {
    auto r = ptx::retarget(snippet("sm_100a", c.body));
    ASSERT_FALSE(r) << c.body;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos)
        << "expected \"" << c.says << "\" in: " << r.error().message;
  }
  // Special registers sm_90 has, and declared vector registers' components, pass.
  auto ok = ptx::retarget(snippet("sm_100a", "  mov.u32 %r1, %cluster_ctaid.x;\n"
                                             "  mov.u32 %r2, %envreg31;\n"
                                             "  mov.u64 %rd2, %pm7_64;\n"
                                             "  mov.u32 %r3, %dynamic_smem_size;"));
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(ptxas_accepts(ok->ptx, "special_registers", "sm_90"));
}

// ---- sm_90a -------------------------------------------------------------------------------------

TEST(PtxRetarget, Sm90aFeaturesGiveSm90a) {
  struct Case {
    const char* name;
    const char* target;
    std::string body;
    std::string why;
  };
  const Case cases[] = {
      // wgmma is sm_90a only (sm_100a has none), as in a module written for several targets.
      {"wgmma", "sm_100a",
       "  wgmma.fence.sync.aligned;\n  wgmma.commit_group.sync.aligned;\n"
       "  wgmma.wait_group.sync.aligned 0;",
       "wgmma.fence.sync.aligned (line 16): wgmma"},
      {"setmaxnreg", "sm_100a", "  add.s32 %r1, %r2, %r3;\n  setmaxnreg.inc.sync.aligned.u32 232;",
       "setmaxnreg.inc.sync.aligned.u32 (line 17): setmaxnreg"},
      {"tensormap_replace", "sm_100a",
       "  tensormap.replace.tile.global_address.global.b1024.b64 [%rd1], %rd2;",
       "(line 16): tensormap.replace"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string text = snippet(c.target, c.body);
    auto r = ptx::retarget(text);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->to_target, "sm_90a");
    EXPECT_NE(r->why_90a.find(c.why), std::string::npos) << r->why_90a;
    EXPECT_EQ(r->ptx, replace_once(text, std::string(".target ") + c.target, ".target sm_90a"));
    EXPECT_TRUE(ptxas_accepts(r->ptx, std::string(c.name) + "_90a", "sm_90a"));
    // Plain sm_90 would not do.
    EXPECT_FALSE(ptxas_accepts(replace_once(r->ptx, ".target sm_90a", ".target sm_90"),
                               std::string(c.name) + "_90", "sm_90"));
  }
}
