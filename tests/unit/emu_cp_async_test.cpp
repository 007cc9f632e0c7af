// Every form of cp.async (PTX ISA "Data Movement and Conversion Instructions: cp.async") on the
// emulated device, through the interpreter and compiled code, against a CPU reference: copy sizes
// 4, 8 and 16 with .ca and .cg, the .L2::cache_hint form with a cache policy from createpolicy,
// the .L2::64B/128B/256B prefetch sizes, the src-size operand (the bytes past it zero-filled, and
// none read: a copy at the end of a buffer may name bytes past it), the ignore-src predicate, and
// cp.async.commit_group / wait_group / wait_all. Copies complete when issued here, so every group
// is complete whenever a thread waits.
#include "primary_context.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr uint32_t k_threads = 64;
constexpr uint32_t k_pattern = 0xaaaaaaaa; // what shared memory holds where nothing was copied

CUresult use_context() { return hone::test::use_primary_context(); }

// Thread t fills its 16 bytes of shared memory with the pattern, copies with `copy` from
// src + t * 16 (%rs: its global address; %rp: a cache policy; %rn: t % 17, a src-size; %pi: t odd,
// an ignore-src predicate), waits, and writes its 16 bytes of shared memory to out + t * 16.
std::string kernel(const std::string& copy) {
  return R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 src) {
.reg .pred %pi;
.reg .b32 %r<8>;
.reg .b32 %rn;
.reg .b64 %rd<8>;
.reg .b64 %rs;
.reg .b64 %rp;
.shared .align 16 .b8 sh[1024];
mov.u32 %r0, %tid.x;
mul.wide.u32 %rd0, %r0, 16;
mov.u64 %rd1, sh;
add.s64 %rd1, %rd1, %rd0;
st.shared.v4.u32 [%rd1], {0xaaaaaaaa, 0xaaaaaaaa, 0xaaaaaaaa, 0xaaaaaaaa};
ld.param.u64 %rs, [src];
add.s64 %rs, %rs, %rd0;
rem.u32 %rn, %r0, 17;
and.b32 %r1, %r0, 1;
setp.ne.u32 %pi, %r1, 0;
createpolicy.fractional.L2::evict_last.b64 %rp, 1.0;
)" + copy + R"(
cp.async.commit_group;
cp.async.wait_group 0;
cp.async.wait_all;
bar.sync 0;
ld.shared.v4.u32 {%r2, %r3, %r4, %r5}, [%rd1];
ld.param.u64 %rd2, [out];
add.s64 %rd2, %rd2, %rd0;
st.global.v4.u32 [%rd2], {%r2, %r3, %r4, %r5};
ret;
}
)";
}

struct Form {
  const char* name;
  const char* copy;
  uint32_t cp_size;
  // bytes read for thread t (the rest of cp_size zero-filled)
  uint32_t (*read)(uint32_t t, uint32_t cp_size);
};

void PrintTo(const Form& f, std::ostream* os) { *os << f.name; }

uint32_t all(uint32_t, uint32_t cp) { return cp; }
uint32_t src_size(uint32_t t, uint32_t) { return t % 17; }
uint32_t ignore_odd(uint32_t t, uint32_t cp) { return t % 2 ? 0 : cp; }

const Form k_forms[] = {
    {"ca_4", "cp.async.ca.shared.global [%rd1], [%rs], 4;", 4, all},
    {"ca_8", "cp.async.ca.shared.global [%rd1], [%rs], 8;", 8, all},
    {"ca_16", "cp.async.ca.shared.global [%rd1], [%rs], 16;", 16, all},
    {"cg_16", "cp.async.cg.shared.global [%rd1], [%rs], 16;", 16, all},
    {"cta_space", "cp.async.cg.shared::cta.global [%rd1], [%rs], 16;", 16, all},
    {"prefetch_64B", "cp.async.cg.shared.global.L2::64B [%rd1], [%rs], 16;", 16, all},
    {"prefetch_128B", "cp.async.ca.shared.global.L2::128B [%rd1], [%rs], 8;", 8, all},
    {"prefetch_256B", "cp.async.cg.shared.global.L2::256B [%rd1], [%rs], 16;", 16, all},
    {"cache_hint", "cp.async.ca.shared.global.L2::cache_hint [%rd1], [%rs], 16, %rp;", 16, all},
    {"src_size", "cp.async.ca.shared.global [%rd1], [%rs], 16, %rn;", 16, src_size},
    {"src_size_immediate", "cp.async.cg.shared.global [%rd1], [%rs], 16, 5;", 16,
     [](uint32_t, uint32_t) { return 5u; }},
    {"src_size_cache_hint_prefetch",
     "cp.async.cg.shared.global.L2::cache_hint.L2::256B [%rd1], [%rs], 16, %rn, %rp;", 16, src_size},
    {"ignore_src", "cp.async.ca.shared.global [%rd1], [%rs], 8, %pi;", 8, ignore_odd},
    {"ignore_src_cache_hint", "cp.async.cg.shared.global.L2::cache_hint [%rd1], [%rs], 16, %pi, %rp;",
     16, ignore_odd},
    {"guarded", "@%pi cp.async.ca.shared.global [%rd1], [%rs], 16;", 16, nullptr},
};

struct Outcome {
  std::vector<uint8_t> out;
  float ms = 0;
  CUresult status = CUDA_SUCCESS;
  std::string log;
};

// The kernel on `path` over a source of `src_bytes` bytes (i * 7 + 1 at byte i).
Outcome run(const std::string& ptx, const char* path, size_t src_bytes, uint32_t threads = k_threads) {
  Outcome r;
  EXPECT_EQ(use_context(), CUDA_SUCCESS);
  testing::internal::CaptureStderr();
  setenv("HONE_EMU_EXEC", path, 1);
  CUmodule m = nullptr;
  CUfunction f = nullptr;
  CUdeviceptr out = 0, src = 0;
  std::vector<uint8_t> bytes(src_bytes);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 7 + 1);
  CUevent start = nullptr, end = nullptr;
  EXPECT_EQ(cuModuleLoadData(&m, ptx.c_str()), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&f, m, "k"), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&out, threads * 16), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&src, src_bytes), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyHtoD(src, bytes.data(), src_bytes), CUDA_SUCCESS);
  EXPECT_EQ(cuEventCreate(&start, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuEventCreate(&end, 0), CUDA_SUCCESS);
  void* params[] = {&out, &src};
  cuEventRecord(start, nullptr);
  r.status = cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, 0, nullptr, params, nullptr);
  cuEventRecord(end, nullptr);
  if (r.status == CUDA_SUCCESS) r.status = cuCtxSynchronize();
  if (r.status == CUDA_SUCCESS) {
    cuEventElapsedTime(&r.ms, start, end);
    r.out.resize(threads * 16);
    cuMemcpyDtoH(r.out.data(), out, r.out.size());
  }
  cuEventDestroy(start);
  cuEventDestroy(end);
  cuMemFree(out);
  cuMemFree(src);
  cuModuleUnload(m);
  unsetenv("HONE_EMU_EXEC");
  r.log = testing::internal::GetCapturedStderr();
  return r;
}

// A fault is sticky: the primary context is reset (and retained again) for what follows.
void reset_after_fault() {
  CUdevice dev = 0;
  ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
}

class CpAsync : public testing::TestWithParam<Form> {};

TEST_P(CpAsync, CopiesWhatTheIsaSays) {
  const Form& f = GetParam();
  std::vector<uint8_t> want(k_threads * 16);
  for (uint32_t t = 0; t < k_threads; ++t) {
    const bool runs = f.read || t % 2;
    const uint32_t n = f.read ? f.read(t, f.cp_size) : f.cp_size;
    for (uint32_t b = 0; b < 16; ++b) {
      uint8_t v = uint8_t(k_pattern);
      if (runs && b < f.cp_size) v = b < n ? uint8_t((t * 16 + b) * 7 + 1) : 0;
      want[t * 16 + b] = v;
    }
  }
  const Outcome interp = run(kernel(f.copy), "interpret", k_threads * 16);
  const Outcome compiled = run(kernel(f.copy), "compile", k_threads * 16);
  ASSERT_EQ(interp.status, CUDA_SUCCESS) << interp.log;
  ASSERT_EQ(compiled.status, CUDA_SUCCESS) << compiled.log;
  EXPECT_EQ(interp.out, want) << f.name;
  EXPECT_EQ(compiled.out, want) << f.name;
  EXPECT_EQ(std::bit_cast<uint32_t>(interp.ms), std::bit_cast<uint32_t>(compiled.ms))
      << interp.ms << " vs " << compiled.ms << " ms";
}

std::string form_name(const testing::TestParamInfo<Form>& info) { return info.param.name; }
INSTANTIATE_TEST_SUITE_P(Forms, CpAsync, testing::ValuesIn(k_forms), form_name);

// src-size bounds what is read: the last thread's 16-byte copy names bytes past the end of a
// source of 16 * threads - 9 bytes, and reads only the 7 that are there. Without src-size the
// same copy is an illegal address, as on a GPU.
TEST(CpAsyncEdges, SrcSizeReadsOnlyWhatItNames) {
  const std::string copy =
      "setp.eq.u32 %pi, %r0, 63;\nselp.u32 %rn, 7, 16, %pi;\n"
      "cp.async.cg.shared.global [%rd1], [%rs], 16, %rn;";
  for (const char* path : {"interpret", "compile"}) {
    const Outcome r = run(kernel(copy), path, k_threads * 16 - 9);
    ASSERT_EQ(r.status, CUDA_SUCCESS) << path << r.log;
    for (uint32_t b = 0; b < 16; ++b)
      EXPECT_EQ(r.out[63 * 16 + b], b < 7 ? uint8_t((63 * 16 + b) * 7 + 1) : 0) << path << " byte " << b;
    const Outcome whole = run(kernel("cp.async.cg.shared.global [%rd1], [%rs], 16;"), path,
                              k_threads * 16 - 9);
    EXPECT_EQ(whole.status, CUDA_ERROR_ILLEGAL_ADDRESS) << path;
    reset_after_fault();
  }
}

// Both addresses must be aligned to the copy size (PTX ISA: "cp-size ... the addresses must be
// aligned to cp-size"): a source 8 bytes off is a misaligned access.
TEST(CpAsyncEdges, AMisalignedSourceFaults) {
  for (const char* path : {"interpret", "compile"}) {
    const Outcome r = run(kernel("add.s64 %rs, %rs, 8;\ncp.async.cg.shared.global [%rd1], [%rs], 16;"),
                          path, k_threads * 16 + 16);
    EXPECT_EQ(r.status, CUDA_ERROR_MISALIGNED_ADDRESS) << path << r.log;
    reset_after_fault();
  }
}

} // namespace
