// The instruction forms compiled code writes as lane operations (emu/jit/codegen.cpp) compute
// exactly what the interpreter computes: each form runs in a small kernel over thousands of inputs
// (every pair of its type's special values, then random bit patterns), unpredicated and under a
// predicate that leaves lanes out, through HONE_EMU_EXEC=interpret and HONE_EMU_EXEC=compile; the
// outputs and the launch's modeled time must be identical, and the compiled run must have run
// compiled code. Warp-level forms run on converged warps with lane-varying operands.
#include "primary_context.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const bool k_debug_log = setenv("HONE_EMU_LOG", "debug", 1) == 0;
// Blocks on one host thread: atomics that race between blocks give the same results every run.
const bool k_one_thread = setenv("HONE_EMU_THREADS", "1", 1) == 0;

// The PTX type of an operand, and how its bits are chosen.
// lane: small lane numbers; shift: shift amounts; warp: the same value across every lane of even
// warps (random per lane in odd ones).
// f16x2/bf16x2: two halves in 32 bits.
enum class Kind { pred, b16, f16, bf16, b32, s32, f32, b64, s64, f64, lane, shift, warp, f16x2, bf16x2 };

struct Form {
  const char* name;
  const char* insn;  // with {d} {q} {a} {b} {c}
  Kind dst;
  Kind a, b, c;      // Kind::pred for unused operands is never read
  int sources;       // how many of a, b, c it reads
  bool second = false; // {q}: a second (predicate) destination
  bool warp = false;   // warp-synchronous with a full membermask: never predicated
};

const char* reg_type(Kind k) {
  switch (k) {
  case Kind::pred: return "pred";
  case Kind::b16: case Kind::f16: case Kind::bf16: return "b16";
  case Kind::b32: case Kind::s32: case Kind::f32: case Kind::lane: case Kind::shift: case Kind::warp:
  case Kind::f16x2: case Kind::bf16x2: return "b32";
  default: return "b64";
  }
}

int width(Kind k) {
  switch (k) {
  case Kind::pred: return 1;
  case Kind::b16: case Kind::f16: case Kind::bf16: return 16;
  case Kind::b32: case Kind::s32: case Kind::f32: case Kind::lane: case Kind::shift: case Kind::warp:
  case Kind::f16x2: case Kind::bf16x2: return 32;
  default: return 64;
  }
}

// Values that find the edges of each kind: zeros, subnormals, the largest values, infinities,
// NaNs with payloads, integer extremes.
std::vector<uint64_t> specials(Kind k) {
  switch (k) {
  case Kind::pred: return {0, 1};
  case Kind::f16:
    return {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3555, 0x7bff, 0xfbff,
            0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe12, 0x4000, 0x0200, 0x3bff, 0x5640, 0x1400};
  case Kind::bf16:
    return {0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x3eab, 0x7f7f, 0xff7f,
            0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffa5, 0x4000, 0x0040, 0x3f7f, 0x4b00, 0x3400};
  case Kind::f32:
    return {0x00000000, 0x80000000, 0x00000001, 0x007fffff, 0x00800000, 0x80800000, 0x3f800000,
            0xbf800000, 0x3f000000, 0x3eaaaaab, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000,
            0x7fc00000, 0x7f800001, 0xffc12345, 0x4b000000, 0x4f000000, 0xcf000000, 0x3fc00000,
            0x40490fdb, 0x33800000, 0x5f000000};
  case Kind::f64:
    return {0x0000000000000000, 0x8000000000000000, 0x0000000000000001, 0x000fffffffffffff,
            0x0010000000000000, 0x3ff0000000000000, 0xbff0000000000000, 0x3fd5555555555555,
            0x7fefffffffffffff, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000,
            0x7ff0000000000001, 0xfff8123456789abc, 0x4330000000000000, 0x41e0000000000000,
            0xc1e0000000000000, 0x43e0000000000000, 0x400921fb54442d18, 0x3ca0000000000000};
  case Kind::f16x2:
  case Kind::bf16x2: {
    const auto h = specials(k == Kind::f16x2 ? Kind::f16 : Kind::bf16);
    std::vector<uint64_t> v;
    for (size_t i = 0; i < h.size(); ++i) v.push_back(h[i] | h[(i * 7 + 3) % h.size()] << 16);
    return v;
  }
  case Kind::b16: return {0, 1, 0x7fff, 0x8000, 0xffff, 0x00ff, 0x1234, 0x8001};
  case Kind::lane: return {0, 1, 2, 7, 16, 31, 32, 0xffffffff};
  case Kind::warp: return {7};
  case Kind::shift: return {0, 1, 7, 15, 16, 31, 32, 33, 63, 64, 65, 255, 0xffffffff};
  case Kind::b32:
  case Kind::s32:
    return {0, 1, 2, 0x7fffffff, 0x80000000, 0xffffffff, 0xfffffffe, 0x0000ffff, 0x12345678,
            0x80000001, 31, 32, 33};
  case Kind::b64:
  case Kind::s64:
    return {0, 1, 2, 0x7fffffffffffffff, 0x8000000000000000, 0xffffffffffffffff,
            0x00000000ffffffff, 0x0000000100000000, 0x123456789abcdef0, 63, 64, 0xfffffffe};
  }
  return {0};
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A random value of kind k: raw bits, sometimes small numbers (integers) or numbers near 1
// (floats), so that arithmetic meets both ordinary and edge operands.
uint64_t random_value(Kind k, uint64_t seed) {
  const uint64_t r = mix(seed);
  const uint64_t mask = width(k) == 64 ? ~0ull : (1ull << width(k)) - 1;
  switch (k) {
  case Kind::pred: return r & 1;
  case Kind::lane: return (r >> 8) % 40;
  case Kind::warp: return ((seed / 3) / 32) % 2 ? (r >> 8) % 3 : 7 + ((seed / 3) / 32) % 5;
  case Kind::shift: return (r >> 8) % 70;
  case Kind::f32: return (r & 3) == 0 ? 0x3f000000 | (r >> 40) : r & mask;
  case Kind::f16: return (r & 3) == 0 ? 0x3800 | ((r >> 40) & 0x7ff) : r & mask;
  case Kind::f16x2: return random_value(Kind::f16, seed * 2) | random_value(Kind::f16, seed * 2 + 1) << 16;
  case Kind::bf16x2: return random_value(Kind::bf16, seed * 2) | random_value(Kind::bf16, seed * 2 + 1) << 16;
  case Kind::bf16: return (r & 3) == 0 ? 0x3f00 | ((r >> 40) & 0xff) : r & mask;
  case Kind::f64: return (r & 3) == 0 ? 0x3fe0000000000000 | (r >> 12) : r;
  default: return (r & 3) == 0 ? (r >> 32) % 300 : r & mask;
  }
}

// The kernel: thread i reads a, b, c (8 bytes each) from in[i], runs the form, and writes its
// destinations as 8 bytes each to out[i]. With `predicated`, the form runs only where bit 0 of
// the index times 7 over 3 says, its destinations holding 0x5a... elsewhere.
std::string kernel(const Form& f, bool predicated) {
  std::string decl;
  std::string body;
  const char* names[3] = {"a", "b", "c"};
  const Kind kinds[3] = {f.a, f.b, f.c};
  for (int i = 0; i < f.sources; ++i) {
    const std::string n = names[i];
    decl += std::string(".reg .") + reg_type(kinds[i]) + " %" + n + ";\n";
    const std::string in = "%rd" + std::to_string(10 + i);
    switch (width(kinds[i])) {
    case 1: body += "setp.ne.u64 %" + n + ", " + in + ", 0;\n"; break;
    case 16: body += "cvt.u16.u64 %" + n + ", " + in + ";\n"; break;
    case 32: body += "cvt.u32.u64 %" + n + ", " + in + ";\n"; break;
    default: body += "mov.b64 %" + n + ", " + in + ";\n"; break;
    }
  }
  decl += std::string(".reg .") + reg_type(f.dst) + " %d;\n.reg .pred %q;\n";
  // the destinations hold a known value where the form does not run
  switch (width(f.dst)) {
  case 1: body += "setp.eq.u32 %d, 1, 0;\n"; break;
  case 16: body += "mov.b16 %d, 0x5a5a;\n"; break;
  case 32: body += "mov.b32 %d, 0x5a5a5a5a;\n"; break;
  default: body += "mov.b64 %d, 0x5a5a5a5a5a5a5a5a;\n"; break;
  }
  body += "setp.eq.u32 %q, 1, 1;\n";
  std::string insn = f.insn;
  auto put = [&](const std::string& key, const std::string& value) {
    for (size_t at; (at = insn.find(key)) != std::string::npos;) insn.replace(at, key.size(), value);
  };
  put("{d}", "%d");
  put("{q}", "%q");
  put("{a}", "%a");
  put("{b}", "%b");
  put("{c}", "%c");
  // {p}: a global address in the table, {s}: a shared one, {l}: a local one, each 8-byte
  // aligned at 8 + (in[i].a & 63) * 8, so that lanes
  // meet at the same words
  put("{p}", "%tab");
  put("{s}", "%shp");
  put("{l}", "%locp");
  // every line of the form under the predicate
  for (size_t at = 0, next; at <= insn.size(); at = next + 1) {
    next = insn.find('\n', at);
    if (next == std::string::npos) next = insn.size();
    const std::string line = insn.substr(at, next - at);
    if (!line.empty() && line.back() == ':') body += line + "\n"; // a label
    else body += (predicated ? "@%sel " : "") + line + ";\n";
  }
  switch (width(f.dst)) {
  case 1: body += "selp.u64 %rd20, 1, 0, %d;\n"; break;
  case 16: body += "cvt.u64.u16 %rd20, %d;\n"; break;
  case 32: body += "cvt.u64.u32 %rd20, %d;\n"; break;
  default: body += "mov.b64 %rd20, %d;\n"; break;
  }
  body += "selp.u64 %rd21, 1, 0, %q;\n";
  return R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in, .param .u32 n, .param .u64 table) {
.reg .pred %p0;
.reg .pred %sel;
.reg .b32 %r<8>;
.reg .b16 %rs<8>;
.reg .b64 %rd<24>;
.reg .b64 %tab;
.reg .b64 %shp;
.reg .b64 %locp;
.shared .align 8 .b8 sh[1024];
.local .align 8 .b8 loc[1024];
)" + decl + R"(
mov.u32 %r0, %ctaid.x;
mov.u32 %r1, %ntid.x;
mov.u32 %r2, %tid.x;
mad.lo.u32 %r3, %r0, %r1, %r2;
ld.param.u32 %r4, [n];
setp.ge.u32 %p0, %r3, %r4;
@%p0 bra DONE;
mul.lo.u32 %r5, %r3, 7;
and.b32 %r5, %r5, 4;
setp.ne.u32 %sel, %r5, 0;
ld.param.u64 %rd0, [in];
ld.param.u64 %rd1, [out];
mul.wide.u32 %rd2, %r3, 24;
add.s64 %rd3, %rd0, %rd2;
ld.global.u64 %rd10, [%rd3];
ld.global.u64 %rd11, [%rd3+8];
ld.global.u64 %rd12, [%rd3+16];
and.b64 %rd13, %rd10, 63;
shl.b64 %rd13, %rd13, 3;
add.s64 %rd13, %rd13, 8;
ld.param.u64 %tab, [table];
add.s64 %tab, %tab, %rd13;
mov.u64 %shp, sh;
add.s64 %shp, %shp, %rd13;
mov.u64 %locp, loc;
add.s64 %locp, %locp, %rd13;
)" + body + R"(
mul.wide.u32 %rd4, %r3, 16;
add.s64 %rd5, %rd1, %rd4;
st.global.u64 [%rd5], %rd20;
st.global.u64 [%rd5+8], %rd21;
DONE:
ret;
}
)";
}

// Inputs: every pair of specials (a, b), c cycling through its specials, then random values.
std::vector<uint64_t> inputs(const Form& f, uint32_t n) {
  std::vector<uint64_t> v(size_t(n) * 3);
  const auto sa = specials(f.a), sb = specials(f.b), sc = specials(f.c);
  uint32_t i = 0;
  for (uint64_t a : sa) {
    for (uint64_t b : sb) {
      if (i >= n / 2) break;
      v[i * 3] = a;
      v[i * 3 + 1] = b;
      v[i * 3 + 2] = sc[i % sc.size()];
      ++i;
    }
  }
  for (; i < n; ++i) {
    v[i * 3] = random_value(f.a, i * 3 + 1);
    v[i * 3 + 1] = random_value(f.b, i * 3 + 2);
    v[i * 3 + 2] = random_value(f.c, i * 3 + 3);
  }
  return v;
}

CUresult use_context() { return hone::test::use_primary_context(); }

struct Outcome {
  std::vector<uint64_t> out;
  std::vector<uint64_t> table; // what the kernel left in the table
  float ms = 0;
  std::string log;
  std::string error;
};

Outcome run(const std::string& ptx, const std::vector<uint64_t>& in, uint32_t n, const char* path) {
  Outcome r;
  testing::internal::CaptureStderr();
  setenv("HONE_EMU_EXEC", path, 1);
  CUmodule m = nullptr;
  CUfunction fn = nullptr;
  CUdeviceptr din = 0, dout = 0, dtable = 0;
  std::vector<uint64_t> table(72);
  for (size_t i = 0; i < table.size(); ++i) table[i] = mix(i + 977) >> (i % 3 == 0 ? 40 : 0);
  CUevent start = nullptr, end = nullptr;
  auto fail = [&](const char* what, CUresult res) {
    const char* name = nullptr;
    cuGetErrorName(res, &name);
    r.error = std::string(what) + ": " + (name ? name : "?");
  };
  CUresult res = cuModuleLoadData(&m, ptx.c_str());
  if (res) fail("cuModuleLoadData", res);
  if (!res && (res = cuModuleGetFunction(&fn, m, "k"))) fail("cuModuleGetFunction", res);
  if (!res && (res = cuMemAlloc(&din, in.size() * 8))) fail("cuMemAlloc", res);
  if (!res && (res = cuMemAlloc(&dout, size_t(n) * 16))) fail("cuMemAlloc", res);
  if (!res && (res = cuMemAlloc(&dtable, table.size() * 8))) fail("cuMemAlloc", res);
  if (!res) res = cuMemcpyHtoD(dtable, table.data(), table.size() * 8);
  if (!res) res = cuMemcpyHtoD(din, in.data(), in.size() * 8);
  if (!res) res = cuMemsetD8(dout, 0xcc, size_t(n) * 16);
  if (!res) res = cuEventCreate(&start, CU_EVENT_DEFAULT);
  if (!res) res = cuEventCreate(&end, CU_EVENT_DEFAULT);
  if (!res) {
    uint32_t count = n;
    void* params[] = {&dout, &din, &count, &dtable};
    cuEventRecord(start, nullptr);
    res = cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr);
    if (res) fail("cuLaunchKernel", res);
    cuEventRecord(end, nullptr);
    if (!res && (res = cuCtxSynchronize())) fail("the launch", res);
    if (!res) cuEventElapsedTime(&r.ms, start, end);
  }
  if (!res) {
    r.out.resize(size_t(n) * 2);
    cuMemcpyDtoH(r.out.data(), dout, r.out.size() * 8);
    r.table.resize(table.size());
    cuMemcpyDtoH(r.table.data(), dtable, r.table.size() * 8);
  }
  if (dtable) cuMemFree(dtable);
  if (start) cuEventDestroy(start);
  if (end) cuEventDestroy(end);
  if (din) cuMemFree(din);
  if (dout) cuMemFree(dout);
  if (m) cuModuleUnload(m);
  unsetenv("HONE_EMU_EXEC");
  r.log = testing::internal::GetCapturedStderr();
  return r;
}

class JitForms : public testing::TestWithParam<Form> {};

TEST_P(JitForms, CompiledCodeComputesWhatTheInterpreterDoes) {
  ASSERT_TRUE(k_debug_log && k_one_thread);
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  const Form& f = GetParam();
  // a partial last block, and a partial last warp but for warp-synchronous forms, whose full
  // membermask would wait for lanes that exited
  const uint32_t n = f.warp ? 3008 : 3001;
  const auto in = inputs(f, n);
  for (bool predicated : {false, true}) {
    if (predicated && f.warp) continue;
    const std::string ptx = kernel(f, predicated);
    const Outcome interp = run(ptx, in, n, "interpret");
    const Outcome compiled = run(ptx, in, n, "compile");
    ASSERT_TRUE(interp.error.empty()) << interp.error << "\n" << ptx << interp.log.substr(0, 2000);
    ASSERT_TRUE(compiled.error.empty()) << compiled.error << "\n" << compiled.log.substr(0, 2000);
    // the form ran as a lane operation: compiled code ran, and counted no helper instruction
    EXPECT_NE(compiled.log.find("; compiled code, "), std::string::npos) << compiled.log.substr(0, 2000);
    EXPECT_NE(compiled.log.find(" 0 through the interpreter"), std::string::npos)
        << "the form went to the interpreter: " << compiled.log.substr(0, 2000);
    ASSERT_EQ(compiled.out.size(), interp.out.size());
    int shown = 0;
    for (uint32_t i = 0; i < n && shown < 5; ++i) {
      if (compiled.out[i * 2] != interp.out[i * 2] || compiled.out[i * 2 + 1] != interp.out[i * 2 + 1]) {
        ADD_FAILURE() << f.name << (predicated ? " (predicated)" : "") << ", thread " << i << ": a=0x"
                      << std::hex << in[i * 3] << " b=0x" << in[i * 3 + 1] << " c=0x" << in[i * 3 + 2]
                      << ": interpreter 0x" << interp.out[i * 2] << "/" << interp.out[i * 2 + 1]
                      << ", compiled 0x" << compiled.out[i * 2] << "/" << compiled.out[i * 2 + 1];
        ++shown;
      }
    }
    EXPECT_EQ(compiled.table, interp.table) << f.name << (predicated ? " (predicated)" : "")
                                            << ": the memory the form wrote differs";
    EXPECT_EQ(std::bit_cast<uint32_t>(compiled.ms), std::bit_cast<uint32_t>(interp.ms))
        << "modeled times differ: " << compiled.ms << " vs " << interp.ms << " ms";
  }
}

using K = Kind;
const Form k_forms[] = {
    // integers
    {"add_s32", "add.s32 {d}, {a}, {b}", K::s32, K::s32, K::s32, K::pred, 2},
    {"sub_u64", "sub.u64 {d}, {a}, {b}", K::b64, K::b64, K::b64, K::pred, 2},
    {"mul_lo_s32", "mul.lo.s32 {d}, {a}, {b}", K::s32, K::s32, K::s32, K::pred, 2},
    {"mul_wide_s32", "mul.wide.s32 {d}, {a}, {b}", K::s64, K::s32, K::s32, K::pred, 2},
    {"mul_wide_u16", "mul.wide.u16 {d}, {a}, {b}", K::b32, K::b16, K::b16, K::pred, 2},
    {"mad_lo_u32", "mad.lo.u32 {d}, {a}, {b}, {c}", K::b32, K::b32, K::b32, K::b32, 3},
    {"mad_wide_u32", "mad.wide.u32 {d}, {a}, {b}, {c}", K::b64, K::b32, K::b32, K::b64, 3},
    {"div_s32", "div.s32 {d}, {a}, {b}", K::s32, K::s32, K::s32, K::pred, 2},
    {"div_u32", "div.u32 {d}, {a}, {b}", K::b32, K::b32, K::b32, K::pred, 2},
    {"rem_s64", "rem.s64 {d}, {a}, {b}", K::s64, K::s64, K::s64, K::pred, 2},
    {"rem_u64", "rem.u64 {d}, {a}, {b}", K::b64, K::b64, K::b64, K::pred, 2},
    {"div_s16", "div.s16 {d}, {a}, {b}", K::b16, K::b16, K::b16, K::pred, 2},
    {"min_s32", "min.s32 {d}, {a}, {b}", K::s32, K::s32, K::s32, K::pred, 2},
    {"mul_hi_u32", "mul.hi.u32 {d}, {a}, {b}", K::b32, K::b32, K::b32, K::pred, 2},
    {"mul_hi_s64", "mul.hi.s64 {d}, {a}, {b}", K::s64, K::s64, K::s64, K::pred, 2},
    {"mad_hi_s32", "mad.hi.s32 {d}, {a}, {b}, {c}", K::s32, K::s32, K::s32, K::s32, 3},
    {"add_sat_s32", "add.sat.s32 {d}, {a}, {b}", K::s32, K::s32, K::s32, K::pred, 2},
    {"sub_sat_s32", "sub.sat.s32 {d}, {a}, {b}", K::s32, K::s32, K::s32, K::pred, 2},
    {"add_cc_addc", "add.cc.u32 %r6, {a}, {b}\naddc.u32 {d}, {a}, {c}", K::b32, K::b32, K::b32, K::b32, 3},
    {"sub_cc_subc", "sub.cc.u32 %r6, {a}, {b}\nsubc.cc.u32 %r7, {b}, {a}\nsubc.u32 {d}, {c}, {a}", K::b32, K::b32, K::b32, K::b32, 3},
    {"mad_cc_madc", "mad.lo.cc.u32 %r6, {a}, {b}, {c}\nmadc.hi.cc.u32 %r7, {a}, {b}, {c}\naddc.u32 {d}, %r6, %r7", K::b32, K::b32, K::b32, K::b32, 3},
    {"add_cc_u64", "add.cc.u64 %rd14, {a}, {b}\naddc.cc.u64 {d}, {b}, {c}", K::b64, K::b64, K::b64, K::b64, 3},
    {"pack_b64", "mov.b64 {d}, {{a}, {b}}", K::b64, K::b32, K::b32, K::pred, 2},
    {"unpack_b64", "mov.b64 {{d}, %r6}, {a}", K::b32, K::b64, K::pred, K::pred, 1},
    {"unpack_b32", "mov.b32 {%rs6, {d}}, {a}", K::b16, K::b32, K::pred, K::pred, 1},
    {"shf_l_wrap", "shf.l.wrap.b32 {d}, {a}, {b}, {c}", K::b32, K::b32, K::b32, K::shift, 3},
    {"shf_r_clamp", "shf.r.clamp.b32 {d}, {a}, {b}, {c}", K::b32, K::b32, K::b32, K::shift, 3},
    {"prmt_b32", "prmt.b32 {d}, {a}, {b}, {c}", K::b32, K::b32, K::b32, K::b32, 3},
    {"brev_b32", "brev.b32 {d}, {a}", K::b32, K::b32, K::pred, K::pred, 1},
    {"brev_b64", "brev.b64 {d}, {a}", K::b64, K::b64, K::pred, K::pred, 1},
    {"bfind_u32", "bfind.u32 {d}, {a}", K::b32, K::b32, K::pred, K::pred, 1},
    {"bfind_s64", "bfind.s64 {d}, {a}", K::b32, K::s64, K::pred, K::pred, 1},
    {"bfind_shiftamt_s32", "bfind.shiftamt.s32 {d}, {a}", K::b32, K::s32, K::pred, K::pred, 1},
    {"max_u64", "max.u64 {d}, {a}, {b}", K::b64, K::b64, K::b64, K::pred, 2},
    {"shl_b32", "shl.b32 {d}, {a}, {b}", K::b32, K::b32, K::shift, K::pred, 2},
    {"shr_s32", "shr.s32 {d}, {a}, {b}", K::s32, K::s32, K::shift, K::pred, 2},
    {"shr_u64", "shr.u64 {d}, {a}, {b}", K::b64, K::b64, K::shift, K::pred, 2},
    {"shl_b16", "shl.b16 {d}, {a}, {b}", K::b16, K::b16, K::shift, K::pred, 2},
    {"abs_s32", "abs.s32 {d}, {a}", K::s32, K::s32, K::pred, K::pred, 1},
    {"neg_s64", "neg.s64 {d}, {a}", K::s64, K::s64, K::pred, K::pred, 1},
    {"popc_b64", "popc.b64 {d}, {a}", K::b32, K::b64, K::pred, K::pred, 1},
    {"clz_b32", "clz.b32 {d}, {a}", K::b32, K::b32, K::pred, K::pred, 1},
    {"and_b32", "and.b32 {d}, {a}, {b}", K::b32, K::b32, K::b32, K::pred, 2},
    {"xor_b64", "xor.b64 {d}, {a}, {b}", K::b64, K::b64, K::b64, K::pred, 2},
    {"not_b16", "not.b16 {d}, {a}", K::b16, K::b16, K::pred, K::pred, 1},
    {"or_pred", "or.pred {d}, {a}, {b}", K::pred, K::pred, K::pred, K::pred, 2},
    {"not_pred", "not.pred {d}, {a}", K::pred, K::pred, K::pred, K::pred, 1},
    {"cnot_b32", "cnot.b32 {d}, {a}", K::b32, K::b32, K::pred, K::pred, 1},
    {"selp_b64", "selp.b64 {d}, {a}, {b}, {c}", K::b64, K::b64, K::b64, K::pred, 3},
    {"setp_lt_s32", "setp.lt.s32 {d}|{q}, {a}, {b}", K::pred, K::s32, K::s32, K::pred, 2, true},
    {"setp_hs_u64", "setp.hs.u64 {d}, {a}, {b}", K::pred, K::b64, K::b64, K::pred, 2},
    {"setp_ne_and_s32", "setp.ne.and.s32 {d}|{q}, {a}, {b}, {c}", K::pred, K::s32, K::s32, K::pred, 3, true},
    {"cvt_s64_s32", "cvt.s64.s32 {d}, {a}", K::s64, K::s32, K::pred, K::pred, 1},
    {"cvt_u32_u64", "cvt.u32.u64 {d}, {a}", K::b32, K::b64, K::pred, K::pred, 1},
    {"cvt_s16_s32", "cvt.s16.s32 {d}, {a}", K::b16, K::s32, K::pred, K::pred, 1},
    // f32
    {"add_f32", "add.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"sub_rn_f32", "sub.rn.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"mul_f32", "mul.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"fma_rn_f32", "fma.rn.f32 {d}, {a}, {b}, {c}", K::f32, K::f32, K::f32, K::f32, 3},
    {"abs_f32", "abs.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"neg_f32", "neg.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"setp_gtu_f32", "setp.gtu.f32 {d}|{q}, {a}, {b}", K::pred, K::f32, K::f32, K::pred, 2, true},
    {"setp_num_f32", "setp.num.f32 {d}, {a}, {b}", K::pred, K::f32, K::f32, K::pred, 2},
    {"setp_le_f64", "setp.le.f64 {d}, {a}, {b}", K::pred, K::f64, K::f64, K::pred, 2},
    {"add_ftz_sat_f32", "add.ftz.sat.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"add_rz_f32", "add.rz.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"fma_rm_ftz_sat_f32", "fma.rm.ftz.sat.f32 {d}, {a}, {b}, {c}", K::f32, K::f32, K::f32, K::f32, 3},
    {"div_rp_sat_f32", "div.rp.sat.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"sqrt_rz_f32", "sqrt.rz.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"mul_rp_f64", "mul.rp.f64 {d}, {a}, {b}", K::f64, K::f64, K::f64, K::pred, 2},
    {"fma_rz_f64", "fma.rz.f64 {d}, {a}, {b}, {c}", K::f64, K::f64, K::f64, K::f64, 3},
    {"mul_rn_sat_f32", "mul.rn.sat.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"fma_rn_ftz_f32", "fma.rn.ftz.f32 {d}, {a}, {b}, {c}", K::f32, K::f32, K::f32, K::f32, 3},
    {"div_rn_f32", "div.rn.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"div_rn_ftz_sat_f32", "div.rn.ftz.sat.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"div_approx_f32", "div.approx.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"div_full_ftz_f32", "div.full.ftz.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"rcp_rn_f32", "rcp.rn.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"rcp_approx_ftz_f32", "rcp.approx.ftz.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"sqrt_rn_f32", "sqrt.rn.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"sqrt_approx_ftz_f32", "sqrt.approx.ftz.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"rsqrt_approx_f32", "rsqrt.approx.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"rsqrt_approx_ftz_f32", "rsqrt.approx.ftz.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"min_ftz_f32", "min.ftz.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"max_nan_f32", "max.NaN.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"min_xorsign_f32", "min.xorsign.abs.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"max_f32", "max.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"ex2_approx_f32", "ex2.approx.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"ex2_approx_ftz_f32", "ex2.approx.ftz.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"lg2_approx_f32", "lg2.approx.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"lg2_approx_ftz_f32", "lg2.approx.ftz.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"sin_approx_f32", "sin.approx.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"cos_approx_ftz_f32", "cos.approx.ftz.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"tanh_approx_f32", "tanh.approx.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"abs_ftz_f32", "abs.ftz.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"neg_ftz_f32", "neg.ftz.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"testp_normal_f32", "testp.normal.f32 {d}, {a}", K::pred, K::f32, K::pred, K::pred, 1},
    {"testp_subnormal_f32", "testp.subnormal.f32 {d}, {a}", K::pred, K::f32, K::pred, K::pred, 1},
    {"copysign_f32", "copysign.f32 {d}, {a}, {b}", K::f32, K::f32, K::f32, K::pred, 2},
    {"setp_ftz_lt_f32", "setp.lt.ftz.f32 {d}|{q}, {a}, {b}", K::pred, K::f32, K::f32, K::pred, 2, true},
    {"add_f64", "add.f64 {d}, {a}, {b}", K::f64, K::f64, K::f64, K::pred, 2},
    {"sub_rn_f64", "sub.rn.f64 {d}, {a}, {b}", K::f64, K::f64, K::f64, K::pred, 2},
    {"mul_f64", "mul.f64 {d}, {a}, {b}", K::f64, K::f64, K::f64, K::pred, 2},
    {"fma_rn_f64", "fma.rn.f64 {d}, {a}, {b}, {c}", K::f64, K::f64, K::f64, K::f64, 3},
    {"div_rn_f64", "div.rn.f64 {d}, {a}, {b}", K::f64, K::f64, K::f64, K::pred, 2},
    {"rcp_rn_f64", "rcp.rn.f64 {d}, {a}", K::f64, K::f64, K::pred, K::pred, 1},
    {"sqrt_rn_f64", "sqrt.rn.f64 {d}, {a}", K::f64, K::f64, K::pred, K::pred, 1},
    {"min_f64", "min.f64 {d}, {a}, {b}", K::f64, K::f64, K::f64, K::pred, 2},
    {"max_f64", "max.f64 {d}, {a}, {b}", K::f64, K::f64, K::f64, K::pred, 2},
    {"abs_f64", "abs.f64 {d}, {a}", K::f64, K::f64, K::pred, K::pred, 1},
    {"neg_f64", "neg.f64 {d}, {a}", K::f64, K::f64, K::pred, K::pred, 1},
    {"copysign_f64", "copysign.f64 {d}, {a}, {b}", K::f64, K::f64, K::f64, K::pred, 2},
    {"testp_finite_f64", "testp.finite.f64 {d}, {a}", K::pred, K::f64, K::pred, K::pred, 1},
    // half precision
    {"add_f16", "add.f16 {d}, {a}, {b}", K::f16, K::f16, K::f16, K::pred, 2},
    {"add_ftz_sat_f16", "add.ftz.sat.f16 {d}, {a}, {b}", K::f16, K::f16, K::f16, K::pred, 2},
    {"sub_f16x2", "sub.f16x2 {d}, {a}, {b}", K::f16x2, K::f16x2, K::f16x2, K::pred, 2},
    {"mul_ftz_f16x2", "mul.ftz.f16x2 {d}, {a}, {b}", K::f16x2, K::f16x2, K::f16x2, K::pred, 2},
    {"mul_bf16", "mul.rn.bf16 {d}, {a}, {b}", K::bf16, K::bf16, K::bf16, K::pred, 2},
    {"add_bf16x2", "add.rn.bf16x2 {d}, {a}, {b}", K::bf16x2, K::bf16x2, K::bf16x2, K::pred, 2},
    {"fma_rn_f16", "fma.rn.f16 {d}, {a}, {b}, {c}", K::f16, K::f16, K::f16, K::f16, 3},
    {"fma_rn_ftz_sat_f16", "fma.rn.ftz.sat.f16 {d}, {a}, {b}, {c}", K::f16, K::f16, K::f16, K::f16, 3},
    {"fma_rn_relu_f16", "fma.rn.relu.f16 {d}, {a}, {b}, {c}", K::f16, K::f16, K::f16, K::f16, 3},
    {"fma_rn_f16x2", "fma.rn.f16x2 {d}, {a}, {b}, {c}", K::f16x2, K::f16x2, K::f16x2, K::f16x2, 3},
    {"neg_f16", "neg.f16 {d}, {a}", K::f16, K::f16, K::pred, K::pred, 1},
    {"abs_ftz_f16", "abs.ftz.f16 {d}, {a}", K::f16, K::f16, K::pred, K::pred, 1},
    {"neg_bf16x2", "neg.bf16x2 {d}, {a}", K::bf16x2, K::bf16x2, K::pred, K::pred, 1},
    {"min_f16", "min.f16 {d}, {a}, {b}", K::f16, K::f16, K::f16, K::pred, 2},
    {"max_nan_f16x2", "max.NaN.f16x2 {d}, {a}, {b}", K::f16x2, K::f16x2, K::f16x2, K::pred, 2},
    {"min_bf16", "min.bf16 {d}, {a}, {b}", K::bf16, K::bf16, K::bf16, K::pred, 2},
    {"max_xorsign_bf16x2", "max.xorsign.abs.bf16x2 {d}, {a}, {b}", K::bf16x2, K::bf16x2, K::bf16x2, K::pred, 2},
    {"setp_lt_f16", "setp.lt.f16 {d}|{q}, {a}, {b}", K::pred, K::f16, K::f16, K::pred, 2, true},
    {"setp_ftz_equ_f16", "setp.equ.ftz.f16 {d}, {a}, {b}", K::pred, K::f16, K::f16, K::pred, 2},
    {"setp_gt_bf16", "setp.gt.bf16 {d}, {a}, {b}", K::pred, K::bf16, K::bf16, K::pred, 2},
    // conversions
    {"cvt_f32_f16", "cvt.f32.f16 {d}, {a}", K::f32, K::f16, K::pred, K::pred, 1},
    {"cvt_rn_f16_f32", "cvt.rn.f16.f32 {d}, {a}", K::f16, K::f32, K::pred, K::pred, 1},
    {"cvt_f32_bf16", "cvt.f32.bf16 {d}, {a}", K::f32, K::bf16, K::pred, K::pred, 1},
    {"cvt_rn_bf16_f32", "cvt.rn.bf16.f32 {d}, {a}", K::bf16, K::f32, K::pred, K::pred, 1},
    {"cvt_f64_f32", "cvt.f64.f32 {d}, {a}", K::f64, K::f32, K::pred, K::pred, 1},
    {"cvt_rn_f32_f64", "cvt.rn.f32.f64 {d}, {a}", K::f32, K::f64, K::pred, K::pred, 1},
    {"cvt_rn_f32_s32", "cvt.rn.f32.s32 {d}, {a}", K::f32, K::s32, K::pred, K::pred, 1},
    {"cvt_rn_f32_u64", "cvt.rn.f32.u64 {d}, {a}", K::f32, K::b64, K::pred, K::pred, 1},
    {"cvt_rn_f64_s64", "cvt.rn.f64.s64 {d}, {a}", K::f64, K::s64, K::pred, K::pred, 1},
    {"cvt_rzi_s32_f32", "cvt.rzi.s32.f32 {d}, {a}", K::s32, K::f32, K::pred, K::pred, 1},
    {"cvt_rni_s32_f32", "cvt.rni.s32.f32 {d}, {a}", K::s32, K::f32, K::pred, K::pred, 1},
    {"cvt_rmi_u32_f32", "cvt.rmi.u32.f32 {d}, {a}", K::b32, K::f32, K::pred, K::pred, 1},
    {"cvt_rpi_ftz_s32_f32", "cvt.rpi.ftz.s32.f32 {d}, {a}", K::s32, K::f32, K::pred, K::pred, 1},
    {"cvt_rzi_s64_f32", "cvt.rzi.s64.f32 {d}, {a}", K::s64, K::f32, K::pred, K::pred, 1},
    {"cvt_rpi_s64_f64", "cvt.rpi.s64.f64 {d}, {a}", K::s64, K::f64, K::pred, K::pred, 1},
    {"cvt_rzi_s32_f64", "cvt.rzi.s32.f64 {d}, {a}", K::s32, K::f64, K::pred, K::pred, 1},
    {"cvt_rni_u16_f32", "cvt.rni.u16.f32 {d}, {a}", K::b16, K::f32, K::pred, K::pred, 1},
    {"cvt_rni_f32_f32", "cvt.rni.f32.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"cvt_sat_f32_f32", "cvt.sat.f32.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"cvt_ftz_sat_f32_f32", "cvt.ftz.sat.f32.f32 {d}, {a}", K::f32, K::f32, K::pred, K::pred, 1},
    {"cvt_rzi_f64_f64", "cvt.rzi.f64.f64 {d}, {a}", K::f64, K::f64, K::pred, K::pred, 1},
    // memory: atomics where lanes meet at the same words, local memory
    {"atom_global_add_u32", "atom.global.add.u32 {d}, [{p}], {b}", K::b32, K::b32, K::b32, K::pred, 2},
    {"atom_global_cas_b32", "atom.global.cas.b32 {d}, [{p}], {b}, {c}", K::b32, K::b32, K::lane, K::lane, 3},
    {"atom_global_inc_u32", "atom.global.inc.u32 {d}, [{p}], {b}", K::b32, K::b32, K::lane, K::pred, 2},
    {"atom_global_dec_u32", "atom.global.dec.u32 {d}, [{p}], {b}", K::b32, K::b32, K::lane, K::pred, 2},
    {"atom_global_max_s32", "atom.global.max.s32 {d}, [{p}], {b}", K::s32, K::b32, K::s32, K::pred, 2},
    {"atom_global_min_u64", "atom.global.min.u64 {d}, [{p}], {b}", K::b64, K::b64, K::b64, K::pred, 2},
    {"atom_global_exch_b64", "atom.global.exch.b64 {d}, [{p}], {b}", K::b64, K::b64, K::b64, K::pred, 2},
    {"red_global_add_u64", "red.global.add.u64 [{p}], {b}", K::b64, K::b64, K::b64, K::pred, 2},
    {"atom_shared_add_u32", "atom.shared.add.u32 {d}, [{s}], {b}", K::b32, K::b32, K::b32, K::pred, 2},
    {"atom_shared_or_b64", "atom.shared.or.b64 {d}, [{s}], {b}", K::b64, K::b64, K::b64, K::pred, 2},
    {"atom_shared_cas_b32", "atom.shared.cas.b32 {d}, [{s}], {b}, {c}", K::b32, K::b32, K::lane, K::lane, 3},
    {"atom_shared_inc_u32", "atom.shared.inc.u32 {d}, [{s}], {b}", K::b32, K::b32, K::lane, K::pred, 2},
    {"atom_shared_dec_u32", "atom.shared.dec.u32 {d}, [{s}], {b}", K::b32, K::b32, K::lane, K::pred, 2},
    {"atom_shared_max_s32", "atom.shared.max.s32 {d}, [{s}], {b}", K::s32, K::b32, K::s32, K::pred, 2},
    {"atom_shared_min_u64", "atom.shared.min.u64 {d}, [{s}], {b}", K::b64, K::b64, K::b64, K::pred, 2},
    {"atom_shared_exch_b32", "atom.shared.exch.b32 {d}, [{s}], {b}", K::b32, K::b32, K::b32, K::pred, 2},
    {"atom_generic_xor_b32", "atom.xor.b32 {d}, [{p}], {b}", K::b32, K::b32, K::b32, K::pred, 2},
    {"local_store_load", "st.local.u32 [{l}], {b}\nld.local.u32 {d}, [{l}+4]", K::b32, K::b32, K::b32, K::pred, 2},
    {"local_v2", "st.local.v2.u32 [{l}], {{b}, {b}}\nld.local.v2.u32 {{d}, %r6}, [{l}]", K::b32, K::b32, K::b32, K::pred, 2},
    {"generic_local", "cvta.local.u64 %rd14, {l}\nst.u64 [%rd14], {b}\nld.u64 {d}, [%rd14]", K::b64, K::b64, K::b64, K::pred, 2},
    {"generic_shared", "cvta.shared.u64 %rd14, {s}\nst.u16 [%rd14], {b}\nld.u16 {d}, [%rd14+2]", K::b16, K::b64, K::b16, K::pred, 2},
    {"shared_store_load", "st.shared.b64 [{s}], {b}\nld.shared.b64 {d}, [{s}]", K::b64, K::b64, K::b64, K::pred, 2},
    // warp-level (converged warps; every lane's operands differ)
    {"shfl_bfly", "shfl.sync.bfly.b32 {d}|{q}, {a}, {b}, 0x1f, 0xffffffff", K::b32, K::b32, K::lane, K::pred, 2, true, true},
    {"shfl_down", "shfl.sync.down.b32 {d}|{q}, {a}, {b}, 0x1f, 0xffffffff", K::b32, K::b32, K::lane, K::pred, 2, true, true},
    {"shfl_up_seg", "shfl.sync.up.b32 {d}, {a}, {b}, 0x800, 0xffffffff", K::b32, K::b32, K::lane, K::pred, 2, false, true},
    {"shfl_idx", "shfl.sync.idx.b32 {d}|{q}, {a}, {b}, {c}, 0xffffffff", K::b32, K::b32, K::lane, K::b32, 3, true, true},
    {"vote_ballot", "vote.sync.ballot.b32 {d}, {a}, 0xffffffff", K::b32, K::pred, K::pred, K::pred, 1, false, true},
    {"vote_all", "vote.sync.all.pred {d}, {a}, 0xffffffff", K::pred, K::pred, K::pred, K::pred, 1, false, true},
    {"vote_uni", "vote.sync.uni.pred {d}, {a}, 0xffffffff", K::pred, K::pred, K::pred, K::pred, 1, false, true},
    {"activemask", "activemask.b32 {d}", K::b32, K::pred, K::pred, K::pred, 0},
    // in a diverged warp: the even lanes, then the odd ones, each with its own membermask
    {"shfl_diverged",
     "mov.u32 %r6, %laneid\nand.b32 %r7, %r6, 1\nsetp.ne.u32 %p0, %r7, 0\n@%p0 bra ODD\n"
     "shfl.sync.bfly.b32 {d}, {a}, 2, 0x1f, 0x55555555\nvote.sync.ballot.b32 %r6, %p0, 0x55555555\n"
     "add.u32 {d}, {d}, %r6\nbra.uni JOIN\nODD:\nshfl.sync.down.b32 {d}, {a}, 4, 0x1f, 0xaaaaaaaa\n"
     "activemask.b32 %r6\nadd.u32 {d}, {d}, %r6\nJOIN:",
     K::b32, K::b32, K::pred, K::pred, 1, false, true},
    {"redux_add", "redux.sync.add.u32 {d}, {a}, 0xffffffff", K::b32, K::b32, K::pred, K::pred, 1, false, true},
    {"redux_min_s32", "redux.sync.min.s32 {d}, {a}, 0xffffffff", K::b32, K::s32, K::pred, K::pred, 1, false, true},
    {"match_any", "match.any.sync.b32 {d}, {a}, 0xffffffff", K::b32, K::lane, K::pred, K::pred, 1, false, true},
    {"match_all", "match.all.sync.b32 {d}|{q}, {a}, 0xffffffff", K::b32, K::warp, K::pred, K::pred, 1, true, true},
};

std::string form_name(const testing::TestParamInfo<Form>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Forms, JitForms, testing::ValuesIn(k_forms), form_name);

// --- %globaltimer --------------------------------------------------------------------------------

// Each thread writes %globaltimer, %globaltimer_lo and %globaltimer_hi, then, after a loop, reads
// %globaltimer again and %clock64: 5 values of 8 bytes.
const char* k_timer_ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry timer(.param .u64 out) {
.reg .pred %p<2>;
.reg .b32 %r<10>;
.reg .b64 %rd<12>;
mov.u32 %r1, %ctaid.x;
mov.u32 %r2, %ntid.x;
mov.u32 %r3, %tid.x;
mad.lo.u32 %r4, %r1, %r2, %r3;
ld.param.u64 %rd1, [out];
mul.wide.u32 %rd2, %r4, 40;
add.s64 %rd3, %rd1, %rd2;
mov.u64 %rd4, %globaltimer;
mov.u32 %r5, %globaltimer_lo;
mov.u32 %r6, %globaltimer_hi;
mov.u32 %r7, 0;
LOOP:
mad.lo.u32 %r8, %r7, %r7, %r4;
add.u32 %r7, %r7, 1;
setp.lt.u32 %p1, %r7, 200;
@%p1 bra LOOP;
mov.u64 %rd5, %globaltimer;
mov.u64 %rd6, %clock64;
st.global.u64 [%rd3], %rd4;
cvt.u64.u32 %rd7, %r5;
st.global.u64 [%rd3+8], %rd7;
cvt.u64.u32 %rd8, %r6;
st.global.u64 [%rd3+16], %rd8;
st.global.u64 [%rd3+24], %rd5;
st.global.u64 [%rd3+32], %rd6;
ret;
}
)";

constexpr uint32_t k_timer_threads = 256; // 2 blocks of 128

struct TimerRun {
  std::vector<uint64_t> direct; // a launch on the legacy stream, first in a fresh context
  std::vector<uint64_t> graph;  // the same launch replayed from a graph right after it
  std::string log;
  std::string error;
};

// A fresh context (its streams' modeled clocks at 0), the kernel launched once and once more as a
// graph, on execution path `path`.
TimerRun run_timer(const char* path) {
  TimerRun r;
  testing::internal::CaptureStderr();
  setenv("HONE_EMU_EXEC", path, 1);
  CUcontext ctx = nullptr;
  CUmodule m = nullptr;
  CUfunction fn = nullptr;
  CUdeviceptr out = 0;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CUstream stream = nullptr;
  const size_t bytes = k_timer_threads * 40;
  auto step = [&](const char* what, CUresult res) {
    if (res != CUDA_SUCCESS && r.error.empty()) {
      const char* name = nullptr;
      cuGetErrorName(res, &name);
      r.error = std::string(what) + ": " + (name ? name : "?");
    }
    return res == CUDA_SUCCESS && r.error.empty();
  };
  auto launch = [&](CUstream s) {
    void* params[] = {&out};
    return cuLaunchKernel(fn, k_timer_threads / 128, 1, 1, 128, 1, 1, 0, s, params, nullptr);
  };
  auto read = [&](std::vector<uint64_t>& into) {
    into.resize(bytes / 8);
    return cuMemcpyDtoH(into.data(), out, bytes);
  };
  if (step("cuCtxCreate", cuCtxCreate(&ctx, nullptr, 0, 0)) &&
      step("cuModuleLoadData", cuModuleLoadData(&m, k_timer_ptx)) &&
      step("cuModuleGetFunction", cuModuleGetFunction(&fn, m, "timer")) &&
      step("cuMemAlloc", cuMemAlloc(&out, bytes)) &&
      step("cuStreamCreate", cuStreamCreate(&stream, CU_STREAM_DEFAULT)) &&
      step("cuLaunchKernel", launch(stream)) && step("cuStreamSynchronize", cuStreamSynchronize(stream)) &&
      step("cuMemcpyDtoH", read(r.direct)) &&
      step("cuStreamBeginCapture", cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL)) &&
      step("the captured launch", launch(stream)) &&
      step("cuStreamEndCapture", cuStreamEndCapture(stream, &graph)) &&
      step("cuGraphInstantiate", cuGraphInstantiate(&exec, graph, 0)) &&
      step("cuGraphLaunch", cuGraphLaunch(exec, stream)) &&
      step("cuStreamSynchronize", cuStreamSynchronize(stream)) && step("cuMemcpyDtoH", read(r.graph))) {
  }
  if (exec) cuGraphExecDestroy(exec);
  if (graph) cuGraphDestroy(graph);
  if (stream) cuStreamDestroy(stream);
  if (out) cuMemFree(out);
  if (m) cuModuleUnload(m);
  if (ctx) cuCtxDestroy(ctx);
  unsetenv("HONE_EMU_EXEC");
  r.log = testing::internal::GetCapturedStderr();
  return r;
}

// %globaltimer is a global nanosecond clock, as on a GPU: the epoch (HONE_EMU_GLOBALTIMER_EPOCH,
// read at every launch) plus the launch's modeled start on its stream plus the warp's cycles in
// ns; every execution path reads the same values, _lo and _hi are its halves, and a later read
// is later.
TEST(JitSpecialRegisters, GlobaltimerCountsFromTheEpochOnEveryPath) {
  ASSERT_TRUE(k_debug_log && k_one_thread);
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  const uint64_t epoch = 0x1234'5678'0000'0000ull; // its low 32 bits leave room: _hi is stable
  ASSERT_EQ(setenv("HONE_EMU_GLOBALTIMER_EPOCH", std::to_string(epoch).c_str(), 1), 0);
  const TimerRun interp = run_timer("interpret");
  const TimerRun compiled = run_timer("compile");
  const TimerRun reference = run_timer("reference");
  unsetenv("HONE_EMU_GLOBALTIMER_EPOCH");
  for (const TimerRun* r : {&interp, &compiled, &reference})
    ASSERT_TRUE(r->error.empty()) << r->error << "\n" << r->log.substr(0, 2000);
  EXPECT_NE(compiled.log.find("; compiled code, "), std::string::npos) << compiled.log.substr(0, 2000);
  EXPECT_EQ(compiled.direct, interp.direct);
  EXPECT_EQ(reference.direct, interp.direct);
  EXPECT_EQ(compiled.graph, interp.graph);
  EXPECT_EQ(reference.graph, interp.graph);
  for (uint32_t t = 0; t < k_timer_threads; ++t) {
    const uint64_t* v = &interp.direct[t * 5];
    const uint64_t* g = &interp.graph[t * 5];
    // The first launch in a fresh context starts at 0 on its stream's modeled clock; it lasts far
    // less than a modeled second.
    ASSERT_GE(v[0], epoch) << "thread " << t;
    ASSERT_LT(v[0] - epoch, 1'000'000'000u) << "thread " << t;
    EXPECT_EQ(v[2], v[0] >> 32) << "thread " << t;
    EXPECT_LT(uint32_t(v[1]) - uint32_t(v[0]), 1'000'000u) << "thread " << t; // _lo a little later
    EXPECT_GT(v[3], v[0]) << "thread " << t << ": 200 iterations later, the timer has not moved";
    // The second read is the warp's cycles then in ns (the launch starts at 0), %clock64 one
    // instruction later a few cycles more.
    const uint64_t cycles_ns = v[4] * 1'000'000 / 1'980'000;
    EXPECT_LE(v[3] - epoch, cycles_ns) << "thread " << t;
    EXPECT_GE(v[3] - epoch + 100, cycles_ns) << "thread " << t;
    // The graph's launch starts when the first one ended on the stream.
    EXPECT_GT(g[0], v[3]) << "thread " << t;
    EXPECT_LT(g[0] - epoch, 1'000'000'000u) << "thread " << t;
  }
}

// Without HONE_EMU_GLOBALTIMER_EPOCH, %globaltimer counts from the host's real time when the
// context was created: a plausible Unix-epoch clock, as a program on a GPU would read.
TEST(JitSpecialRegisters, GlobaltimerDefaultsToTheHostsClock) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  unsetenv("HONE_EMU_GLOBALTIMER_EPOCH");
  auto now_ns = [] {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count());
  };
  const uint64_t before = now_ns();
  const TimerRun r = run_timer("interpret");
  const uint64_t after = now_ns();
  ASSERT_TRUE(r.error.empty()) << r.error << "\n" << r.log.substr(0, 2000);
  for (uint32_t t = 0; t < k_timer_threads; ++t) {
    EXPECT_GE(r.direct[t * 5], before) << "thread " << t;
    // the context was created before `after`; the launches' modeled time is under a second
    EXPECT_LT(r.graph[t * 5 + 3], after + 1'000'000'000u) << "thread " << t;
  }
}

} // namespace
