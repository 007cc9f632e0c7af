// Warp-synchronous instructions with partial member masks in divergent code, as cooperative
// groups use them (cg::coalesced_threads, cg::labeled_partition, cg::tiled_partition): every lane
// that executes one of them computes over the lanes of its own membermask, and lanes of one warp
// that arrive together with different membermasks (one per partition) each get their partition's
// result. Each kernel runs through the interpreter (HONE_EMU_EXEC=interpret) and compiled code
// (HONE_EMU_EXEC=compile) against a CPU reference written from the PTX ISA's definitions
// ("Parallel Synchronization and Communication Instructions": shfl.sync, vote.sync, match.sync,
// redux.sync, activemask, elect.sync, bar.warp.sync); both paths' modeled times must be equal.
//
// Before this was fixed, a converged warp ran the instruction once with the first lane's
// membermask for every lane, so cg::reduce over a labeled partition returned the maximum of the
// whole warp (issue 31).
#include "primary_context.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const bool k_debug_log = setenv("HONE_EMU_LOG", "debug", 1) == 0;
const bool k_one_thread = setenv("HONE_EMU_THREADS", "1", 1) == 0;

constexpr uint32_t k_threads = 128; // per block
constexpr uint32_t k_blocks = 3;
constexpr uint32_t k_n = k_threads * k_blocks;
constexpr uint32_t k_out = 24;      // result words per thread
constexpr uint32_t k_none = 0xdeadbeef;

CUresult use_context() { return hone::test::use_primary_context(); }

// The partition kernel. Thread i takes part when part[i] is non-zero (a divergent branch: the
// others jump past), and then, as cg::labeled_partition(cg::coalesced_threads(), bucket[i]) does,
// finds its partition's lanes with match.any over the active mask and reduces, votes, matches,
// elects and shuffles over them. Then every thread of the warp, converged again, works in 8-lane
// tiles (cg::tiled_partition<8>): each tile's lanes name the tile's mask, the shuffles its width.
// out[i * k_out + k] is result k (k_none where a thread computed nothing).
const char* k_partition_ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry partitions(.param .u64 out, .param .u64 val, .param .u64 bucket, .param .u64 part) {
.reg .pred %p<12>;
.reg .b32 %r<48>;
.reg .b64 %rd<12>;
mov.u32 %r0, %ctaid.x;
mov.u32 %r1, %ntid.x;
mov.u32 %r2, %tid.x;
mad.lo.u32 %r3, %r0, %r1, %r2;
mul.wide.u32 %rd0, %r3, 4;
ld.param.u64 %rd1, [val];
add.s64 %rd1, %rd1, %rd0;
ld.global.u32 %r4, [%rd1];
ld.param.u64 %rd2, [bucket];
add.s64 %rd2, %rd2, %rd0;
ld.global.u32 %r5, [%rd2];
ld.param.u64 %rd3, [part];
add.s64 %rd3, %rd3, %rd0;
ld.global.u32 %r6, [%rd3];
ld.param.u64 %rd4, [out];
mul.wide.u32 %rd5, %r3, 96;
add.s64 %rd4, %rd4, %rd5;
and.b32 %r7, %r4, 1;
setp.ne.u32 %p1, %r7, 0;
setp.eq.u32 %p0, %r6, 0;
@%p0 bra TILES;
activemask.b32 %r8;
match.any.sync.b32 %r9, %r5, %r8;
st.global.u32 [%rd4], %r8;
st.global.u32 [%rd4+4], %r9;
redux.sync.max.s32 %r10, %r4, %r9;
st.global.u32 [%rd4+8], %r10;
redux.sync.min.u32 %r11, %r4, %r9;
st.global.u32 [%rd4+12], %r11;
redux.sync.add.u32 %r12, %r4, %r9;
st.global.u32 [%rd4+16], %r12;
redux.sync.and.b32 %r13, %r4, %r9;
redux.sync.or.b32 %r14, %r4, %r9;
redux.sync.xor.b32 %r15, %r4, %r9;
xor.b32 %r13, %r13, %r14;
xor.b32 %r13, %r13, %r15;
st.global.u32 [%rd4+20], %r13;
vote.sync.ballot.b32 %r16, %p1, %r9;
st.global.u32 [%rd4+24], %r16;
vote.sync.all.pred %p2, %p1, %r9;
vote.sync.any.pred %p3, %p1, %r9;
vote.sync.uni.pred %p4, %p1, %r9;
selp.u32 %r17, 1, 0, %p2;
selp.u32 %r18, 2, 0, %p3;
selp.u32 %r19, 4, 0, %p4;
or.b32 %r17, %r17, %r18;
or.b32 %r17, %r17, %r19;
st.global.u32 [%rd4+28], %r17;
match.all.sync.b32 %r20|%p5, %r7, %r9;
selp.u32 %r21, 1, 0, %p5;
st.global.u32 [%rd4+32], %r20;
st.global.u32 [%rd4+36], %r21;
elect.sync %r22|%p6, %r9;
selp.u32 %r23, 1, 0, %p6;
st.global.u32 [%rd4+40], %r22;
st.global.u32 [%rd4+44], %r23;
shfl.sync.idx.b32 %r24|%p7, %r4, %r22, 0x1f, %r9;
st.global.u32 [%rd4+48], %r24;
bar.warp.sync %r9;
redux.sync.max.s32 %r25, %r4, %r8;
st.global.u32 [%rd4+52], %r25;
TILES:
bar.warp.sync 0xffffffff;
mov.u32 %r26, %laneid;
and.b32 %r27, %r26, 24;
mov.u32 %r28, 255;
shl.b32 %r28, %r28, %r27;
shfl.sync.bfly.b32 %r29|%p8, %r4, 2, 0x181f, %r28;
shfl.sync.down.b32 %r30|%p9, %r4, 3, 0x181f, %r28;
selp.u32 %r31, %r30, 7, %p9;
shfl.sync.up.b32 %r32|%p10, %r4, 5, 0x1800, %r28;
selp.u32 %r33, %r32, 9, %p10;
shfl.sync.idx.b32 %r34, %r4, 6, 0x181f, %r28;
vote.sync.ballot.b32 %r35, %p1, %r28;
vote.sync.any.pred %p11, %p1, %r28;
selp.u32 %r36, 1, 0, %p11;
redux.sync.add.u32 %r37, %r4, %r28;
st.global.u32 [%rd4+56], %r29;
st.global.u32 [%rd4+60], %r31;
st.global.u32 [%rd4+64], %r33;
st.global.u32 [%rd4+68], %r34;
st.global.u32 [%rd4+72], %r35;
st.global.u32 [%rd4+76], %r36;
st.global.u32 [%rd4+80], %r37;
ret;
}
)";

struct Inputs {
  std::vector<uint32_t> val, bucket, part;
};

Inputs make_inputs(uint32_t seed) {
  Inputs in;
  for (uint32_t i = 0; i < k_n; ++i) {
    uint32_t x = (i + 1) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    // values signed and unsigned: some negative, so that max.s32 and min.u32 disagree
    in.val.push_back(x % 7 == 0 ? uint32_t(-int32_t(x % 1000)) : x % 100000);
    in.bucket.push_back((x >> 8) % 4);
    // warp 0 of each block: every lane takes part; warp 1: none; others: a mix
    const uint32_t warp = (i % k_threads) / 32;
    in.part.push_back(warp == 0 ? 1 : warp == 1 ? 0 : (x >> 20) % 3 != 0);
  }
  // a warp whose partitions all share one bucket value: one group of every lane that takes part
  for (uint32_t i = 2 * 32; i < 3 * 32; ++i) in.bucket[i] = 2;
  return in;
}

// The CPU reference: what the PTX ISA says each lane gets.
std::vector<uint32_t> reference(const Inputs& in) {
  std::vector<uint32_t> out(size_t(k_n) * k_out, k_none);
  for (uint32_t w0 = 0; w0 < k_n; w0 += 32) {
    uint32_t active = 0;
    for (uint32_t l = 0; l < 32; ++l) active |= uint32_t(in.part[w0 + l] != 0) << l;
    for (uint32_t l = 0; l < 32; ++l) {
      uint32_t* o = &out[size_t(w0 + l) * k_out];
      const uint32_t i = w0 + l;
      if (in.part[i]) {
        uint32_t m = 0;
        for (uint32_t j = 0; j < 32; ++j)
          if ((active >> j & 1) && in.bucket[w0 + j] == in.bucket[i]) m |= 1u << j;
        o[0] = active;
        o[1] = m;
        int32_t mx = INT32_MIN;
        uint32_t mn = UINT32_MAX, sum = 0, a = ~0u, orr = 0, x = 0, ballot = 0;
        for (uint32_t j = 0; j < 32; ++j) {
          if (!(m >> j & 1)) continue;
          const uint32_t v = in.val[w0 + j];
          mx = std::max(mx, int32_t(v));
          mn = std::min(mn, v);
          sum += v;
          a &= v;
          orr |= v;
          x ^= v;
          ballot |= (v & 1) << j;
        }
        o[2] = uint32_t(mx);
        o[3] = mn;
        o[4] = sum;
        o[5] = a ^ orr ^ x;
        o[6] = ballot;
        o[7] = uint32_t(ballot == m) | uint32_t(ballot != 0) << 1 | uint32_t(ballot == 0 || ballot == m) << 2;
        const bool same_parity = ballot == 0 || ballot == m;
        o[8] = same_parity ? m : 0;
        o[9] = same_parity;
        const uint32_t leader = uint32_t(std::countr_zero(m));
        o[10] = leader;
        o[11] = l == leader;
        o[12] = in.val[w0 + leader];
        int32_t amx = INT32_MIN;
        for (uint32_t j = 0; j < 32; ++j)
          if (active >> j & 1) amx = std::max(amx, int32_t(in.val[w0 + j]));
        o[13] = uint32_t(amx);
      }
      // 8-lane tiles, every lane
      const uint32_t t0 = l & 24, tl = l & 7;
      auto v = [&](uint32_t tile_lane) { return in.val[w0 + t0 + tile_lane]; };
      o[14] = v(tl ^ 2);
      o[15] = tl + 3 <= 7 ? v(tl + 3) : 7;
      o[16] = tl >= 5 ? v(tl - 5) : 9;
      o[17] = v(6);
      uint32_t ballot = 0, sum = 0;
      for (uint32_t j = 0; j < 8; ++j) {
        ballot |= (v(j) & 1) << (t0 + j);
        sum += v(j);
      }
      o[18] = ballot;
      o[19] = ballot != 0;
      o[20] = sum;
    }
  }
  return out;
}

struct Outcome {
  std::vector<uint32_t> out;
  float ms = 0;
  std::string log;
  std::string error;
};

Outcome run(const char* ptx, const char* entry, const std::vector<std::vector<uint32_t>>& inputs,
            uint32_t blocks, uint32_t threads, size_t out_words, const char* path) {
  Outcome r;
  testing::internal::CaptureStderr();
  setenv("HONE_EMU_EXEC", path, 1);
  CUmodule m = nullptr;
  CUfunction fn = nullptr;
  CUdeviceptr dout = 0;
  std::vector<CUdeviceptr> din(inputs.size());
  CUevent start = nullptr, end = nullptr;
  auto fail = [&](const char* what, CUresult res) {
    const char* name = nullptr;
    cuGetErrorName(res, &name);
    r.error = std::string(what) + ": " + (name ? name : "?");
  };
  CUresult res = cuModuleLoadData(&m, ptx);
  if (res) fail("cuModuleLoadData", res);
  if (!res && (res = cuModuleGetFunction(&fn, m, entry))) fail("cuModuleGetFunction", res);
  if (!res && (res = cuMemAlloc(&dout, out_words * 4))) fail("cuMemAlloc", res);
  if (!res) res = cuMemsetD32(dout, k_none, out_words);
  for (size_t k = 0; k < inputs.size() && !res; ++k) {
    if ((res = cuMemAlloc(&din[k], inputs[k].size() * 4))) fail("cuMemAlloc", res);
    if (!res) res = cuMemcpyHtoD(din[k], inputs[k].data(), inputs[k].size() * 4);
  }
  if (!res) res = cuEventCreate(&start, CU_EVENT_DEFAULT);
  if (!res) res = cuEventCreate(&end, CU_EVENT_DEFAULT);
  if (!res) {
    std::vector<void*> params = {&dout};
    for (auto& d : din) params.push_back(&d);
    cuEventRecord(start, nullptr);
    res = cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, nullptr, params.data(), nullptr);
    if (res) fail("cuLaunchKernel", res);
    cuEventRecord(end, nullptr);
    if (!res && (res = cuCtxSynchronize())) fail("the launch", res);
    if (!res) cuEventElapsedTime(&r.ms, start, end);
  }
  if (!res) {
    r.out.resize(out_words);
    cuMemcpyDtoH(r.out.data(), dout, out_words * 4);
  }
  for (auto d : din)
    if (d) cuMemFree(d);
  if (dout) cuMemFree(dout);
  if (start) cuEventDestroy(start);
  if (end) cuEventDestroy(end);
  if (m) cuModuleUnload(m);
  unsetenv("HONE_EMU_EXEC");
  r.log = testing::internal::GetCapturedStderr();
  return r;
}

const char* k_result_names[] = {
    "activemask", "match.any", "redux.max.s32", "redux.min.u32", "redux.add", "redux.and^or^xor",
    "vote.ballot", "vote.all|any|uni", "match.all", "match.all pred", "elect lane", "elect pred",
    "shfl.idx from the leader", "redux.max over activemask", "tile shfl.bfly", "tile shfl.down",
    "tile shfl.up", "tile shfl.idx", "tile vote.ballot", "tile vote.any", "tile redux.add"};

class WarpSync : public testing::TestWithParam<const char*> {};

TEST_P(WarpSync, PartitionsGetTheirOwnResults) {
  ASSERT_TRUE(k_debug_log && k_one_thread);
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  for (uint32_t seed : {1u, 77u}) {
    const Inputs in = make_inputs(seed);
    const auto want = reference(in);
    const Outcome got = run(k_partition_ptx, "partitions", {in.val, in.bucket, in.part}, k_blocks,
                            k_threads, size_t(k_n) * k_out, GetParam());
    ASSERT_TRUE(got.error.empty()) << got.error << "\n" << got.log.substr(0, 3000);
    if (std::string(GetParam()) == "compile") {
      EXPECT_NE(got.log.find("; compiled code, "), std::string::npos) << got.log.substr(0, 2000);
    }
    int shown = 0;
    for (uint32_t i = 0; i < k_n; ++i) {
      for (uint32_t k = 0; k < std::size(k_result_names); ++k) {
        const uint32_t w = want[size_t(i) * k_out + k], g = got.out[size_t(i) * k_out + k];
        if (w != g && shown++ < 8) {
          ADD_FAILURE() << GetParam() << ", seed " << seed << ", thread " << i << " (lane " << i % 32
                        << ", warp " << (i % k_threads) / 32 << "), " << k_result_names[k]
                        << ": got 0x" << std::hex << g << ", want 0x" << w;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, WarpSync, testing::Values("interpret", "compile"));

TEST(WarpSyncPaths, InterpreterAndCompiledCodeModelTheSameTime) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  const Inputs in = make_inputs(5);
  const Outcome a = run(k_partition_ptx, "partitions", {in.val, in.bucket, in.part}, k_blocks,
                        k_threads, size_t(k_n) * k_out, "interpret");
  const Outcome b = run(k_partition_ptx, "partitions", {in.val, in.bucket, in.part}, k_blocks,
                        k_threads, size_t(k_n) * k_out, "compile");
  ASSERT_TRUE(a.error.empty() && b.error.empty()) << a.error << b.error;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(std::bit_cast<uint32_t>(a.ms), std::bit_cast<uint32_t>(b.ms))
      << a.ms << " vs " << b.ms << " ms";
}

// Lanes 0-15 reach a full-mask shuffle first (it lies before the other lanes' exit) and wait for
// lanes 16-31, which exit instead: "the executing thread waits until all non-exited threads
// corresponding to membermask" have arrived, so once they exit, lanes 0-15 go on. (It used to end
// in a barrier deadlock.)
const char* k_exit_ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry waits_for_exited(.param .u64 out, .param .u64 val) {
.reg .pred %p<4>;
.reg .b32 %r<8>;
.reg .b64 %rd<8>;
mov.u32 %r0, %laneid;
mov.u32 %r1, %tid.x;
ld.param.u64 %rd0, [val];
mul.wide.u32 %rd1, %r1, 4;
add.s64 %rd2, %rd0, %rd1;
ld.global.u32 %r2, [%rd2];
setp.ge.u32 %p0, %r0, 16;
@%p0 bra HIGH;
shfl.sync.idx.b32 %r3, %r2, 3, 0x1f, 0xffffffff;
ld.param.u64 %rd3, [out];
add.s64 %rd4, %rd3, %rd1;
st.global.u32 [%rd4], %r3;
ret;
HIGH:
ret;
}
)";

TEST_P(WarpSync, LanesWaitingForExitedLanesGoOn) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  std::vector<uint32_t> val(64);
  for (uint32_t i = 0; i < 64; ++i) val[i] = 1000 + i;
  const Outcome got = run(k_exit_ptx, "waits_for_exited", {val}, 1, 64, 64, GetParam());
  ASSERT_TRUE(got.error.empty()) << got.error << "\n" << got.log.substr(0, 3000);
  for (uint32_t i = 0; i < 64; ++i) {
    const uint32_t want = i % 32 < 16 ? 1000 + (i / 32) * 32 + 3 : k_none;
    EXPECT_EQ(got.out[i], want) << "thread " << i;
  }
}

} // namespace

// What cooperative groups computes lanes with beside these instructions: fns (a coalesced group's
// rank to lane, PTX ISA "fns": the |offset|-th set bit of the mask from base, upwards for a
// positive offset, downwards for a negative one), PTX's predefined WARP_SZ ("Predefined
// Identifiers"; NVIDIA's reduction and scan samples read warpSize as it), and the performance
// counters %pm0..%pm7 (no profiler here: 0).
const char* k_lane_math_ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry lane_math(.param .u64 out, .param .u64 mask, .param .u64 base, .param .u64 offset) {
.reg .b32 %r<12>;
.reg .b64 %rd<12>;
mov.u32 %r0, %tid.x;
mul.wide.u32 %rd0, %r0, 4;
ld.param.u64 %rd1, [mask];
add.s64 %rd1, %rd1, %rd0;
ld.global.u32 %r1, [%rd1];
ld.param.u64 %rd2, [base];
add.s64 %rd2, %rd2, %rd0;
ld.global.u32 %r2, [%rd2];
ld.param.u64 %rd3, [offset];
add.s64 %rd3, %rd3, %rd0;
ld.global.u32 %r3, [%rd3];
fns.b32 %r4, %r1, %r2, %r3;
mov.u32 %r5, WARP_SZ;
add.u32 %r6, %r0, WARP_SZ;
mov.u32 %r7, %pm3;
mov.u64 %rd4, %pm7_64;
cvt.u32.u64 %r8, %rd4;
add.u32 %r7, %r7, %r8;
ld.param.u64 %rd5, [out];
mul.wide.u32 %rd6, %r0, 16;
add.s64 %rd5, %rd5, %rd6;
st.global.v4.u32 [%rd5], {%r4, %r5, %r6, %r7};
ret;
}
)";

uint32_t fns_reference(uint32_t mask, uint32_t base, int32_t offset) {
  if (base > 31) return 0xffffffffu; // beyond the ISA's range: hone's choice (emu/semantics.hpp)
  if (offset == 0) return (mask >> base) & 1 ? base : 0xffffffffu;
  int64_t count = offset > 0 ? offset - 1 : -int64_t(offset) - 1;
  for (int pos = int(base); pos >= 0 && pos < 32; pos += offset > 0 ? 1 : -1) {
    if ((mask >> pos) & 1) {
      if (count == 0) return uint32_t(pos);
      --count;
    }
  }
  return 0xffffffffu;
}

TEST_P(WarpSync, FnsAndPredefinedIdentifiers) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  const uint32_t n = 256;
  std::vector<uint32_t> mask(n), base(n), offset(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t x = (i + 7) * 2654435761u;
    x ^= x >> 13;
    mask[i] = i % 5 == 0 ? 0xffffffffu : i % 7 == 0 ? 0 : x * 0x9e3779b9u;
    base[i] = i % 11 == 0 ? 31 : (x >> 7) % 32;
    offset[i] = uint32_t(int32_t((x >> 12) % 41) - 20);
  }
  const Outcome got = run(k_lane_math_ptx, "lane_math", {mask, base, offset}, 1, n, n * 4, GetParam());
  ASSERT_TRUE(got.error.empty()) << got.error << "\n" << got.log.substr(0, 3000);
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT_EQ(got.out[i * 4], fns_reference(mask[i], base[i], int32_t(offset[i])))
        << "fns(0x" << std::hex << mask[i] << std::dec << ", " << base[i] << ", "
        << int32_t(offset[i]) << ")";
    EXPECT_EQ(got.out[i * 4 + 1], 32u);
    EXPECT_EQ(got.out[i * 4 + 2], i + 32);
    EXPECT_EQ(got.out[i * 4 + 3], 0u);
  }
}
