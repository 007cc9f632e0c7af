// Conformance of the emulated device's tensor-core and matrix-fragment instructions (mma.sync,
// wmma, ldmatrix, stmatrix, movmatrix) to the PTX ISA, on both execution paths.
//
// The fragment layouts below are written from the ISA's figures (PTX ISA 9.7.14.5, "Matrix
// Fragments for mma.mXnYkZ", one function per figure family), independently of emu/matrix.cpp: the
// test packs random matrices into each lane's registers by them, runs the instruction in a small
// PTX kernel, unpacks what it wrote by them, and compares with a CPU reference that computes
// D = A * B + C with the numerics emu/README.md ("Tensor cores") documents. Each kernel runs on
// the interpreter (HONE_EMU_EXEC=interpret) and compiled code (compile); both must match the
// reference bit for bit, and each other in modeled time. wmma's fragment distribution is
// unspecified by the ISA, so wmma is checked through memory: load, multiply, store.
#include "primary_context.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

const bool k_debug_log = setenv("HONE_EMU_LOG", "debug", 1) == 0;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// ---- element types, their bits and values (host side) -------------------------------------------

enum class T { f16, bf16, tf32, f32, f64, e4m3, e5m2, s8, u8, s4, u4, b1, s32 };

const char* name(T t) {
  static const char* n[] = {"f16", "bf16", "tf32", "f32", "f64", "e4m3", "e5m2",
                            "s8",  "u8",   "s4",   "u4",  "b1",  "s32"};
  return n[int(t)];
}

int bits(T t) {
  switch (t) {
  case T::f16: case T::bf16: return 16;
  case T::tf32: case T::f32: case T::s32: return 32;
  case T::f64: return 64;
  case T::e4m3: case T::e5m2: case T::s8: case T::u8: return 8;
  case T::s4: case T::u4: return 4;
  case T::b1: return 1;
  }
  return 0;
}

// elements per register: a .b32 holds 32 / bits of them; f32, s32, tf32 and f64 registers one
int per_reg(T t) { return bits(t) >= 32 ? 1 : 32 / bits(t); }
bool is_float(T t) { return t == T::f16 || t == T::bf16 || t == T::tf32 || t == T::f32 || t == T::f64 || t == T::e4m3 || t == T::e5m2; }

double f16_value(uint32_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double s = h & 0x8000 ? -1 : 1;
  if (e == 31) return m ? NAN : s * INFINITY;
  if (e == 0) return s * std::ldexp(m, -24);
  return s * std::ldexp(1024 + m, e - 25);
}

double value(T t, uint64_t b) {
  switch (t) {
  case T::f16: return f16_value(uint32_t(b));
  case T::bf16: return std::bit_cast<float>(uint32_t(b) << 16);
  case T::tf32: return std::bit_cast<float>(uint32_t(b) & 0xffffe000u); // low 13 bits ignored
  case T::f32: return std::bit_cast<float>(uint32_t(b));
  case T::f64: return std::bit_cast<double>(b);
  case T::e4m3: { // 1-4-3, bias 7, no infinities, S.1111.111 is NaN (OCP FP8)
    const int e = (b >> 3) & 15, m = b & 7;
    const double s = b & 0x80 ? -1 : 1;
    if (e == 15 && m == 7) return NAN;
    return e == 0 ? s * std::ldexp(m, -9) : s * std::ldexp(8 + m, e - 10);
  }
  case T::e5m2: { // 1-5-2, bias 15, IEEE-like
    const int e = (b >> 2) & 31, m = b & 3;
    const double s = b & 0x80 ? -1 : 1;
    if (e == 31) return m ? NAN : s * INFINITY;
    return e == 0 ? s * std::ldexp(m, -16) : s * std::ldexp(4 + m, e - 17);
  }
  case T::s8: return double(int8_t(b));
  case T::u8: return double(uint8_t(b));
  case T::s4: return double(int(b & 7) - int(b & 8));
  case T::u4: return double(b & 15);
  case T::b1: return double(b & 1);
  case T::s32: return double(int32_t(b));
  }
  return 0;
}

// binary64 -> binary16, round to nearest even, NaN canonical (0x7fff)
uint64_t to_f16(double v) {
  if (std::isnan(v)) return 0x7fff;
  const uint32_t s = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (a >= 65520) return s | 0x7c00;
  // scale into units of the last place: 2^-24 for subnormals, 2^(e-10) for normals
  int e = a == 0 ? -15 : std::ilogb(a);
  if (e < -14) e = -14;
  const double units = std::nearbyint(std::ldexp(a, 10 - e)); // half-even under the default mode
  const uint64_t q = uint64_t(units);
  if (e == -14 && q < 1024) return s | q; // subnormal (or zero)
  if (q == 2048) return e + 1 > 15 ? (s | 0x7c00) : (s | uint64_t(e + 1 + 15) << 10);
  return s | uint64_t(e + 15) << 10 | (q - 1024);
}

uint64_t round_to(T t, double v) {
  switch (t) {
  case T::f16: return to_f16(v);
  case T::f32: {
    const float f = float(v);
    return std::isnan(f) ? 0x7fffffffu : std::bit_cast<uint32_t>(f);
  }
  case T::f64: return std::bit_cast<uint64_t>(v);
  default: return uint64_t(int64_t(v)) & 0xffffffffu;
  }
}

// Random element bits: numbers of moderate range for floats (so that sums are exact and the
// comparison is bit for bit), with the occasional zero, subnormal, infinity or NaN.
uint64_t random_elem(T t, uint64_t seed, bool specials) {
  const uint64_t r = mix(seed);
  const uint64_t mask = bits(t) == 64 ? ~0ull : (1ull << bits(t)) - 1;
  if (specials && r % 61 == 0) {
    switch (t) {
    case T::f16: { static const uint64_t v[] = {0x7c00, 0xfc00, 0x7e00, 0x0001, 0x8000}; return v[(r >> 8) % 5]; }
    case T::bf16: { static const uint64_t v[] = {0x7f80, 0xff80, 0x7fc0, 0x0001, 0x8000}; return v[(r >> 8) % 5]; }
    case T::f32: case T::tf32: { static const uint64_t v[] = {0x7f800000, 0xff800000, 0x7fc00000, 0x00000001, 0x80000000}; return v[(r >> 8) % 5]; }
    case T::f64: { static const uint64_t v[] = {0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 1, 0x8000000000000000}; return v[(r >> 8) % 5]; }
    case T::e4m3: { static const uint64_t v[] = {0x7f, 0x01, 0x80, 0x7e}; return v[(r >> 8) % 4]; }
    case T::e5m2: { static const uint64_t v[] = {0x7c, 0xfc, 0x7f, 0x01}; return v[(r >> 8) % 4]; }
    default: break;
    }
  }
  const uint64_t sign = (r >> 63) << (bits(t) - 1);
  switch (t) {
  case T::f16: return sign | (uint64_t(13 + (r >> 20) % 5) << 10) | ((r >> 30) & 0x3ff);   // 2^-2..2^2
  case T::bf16: return sign | (uint64_t(125 + (r >> 20) % 5) << 7) | ((r >> 30) & 0x7f);
  case T::tf32: return (sign | (uint64_t(125 + (r >> 20) % 5) << 23) | ((r >> 30) & 0x7fffff)); // low bits ignored
  case T::f32: return sign | (uint64_t(124 + (r >> 20) % 7) << 23) | ((r >> 30) & 0x7fffff);
  case T::f64: return sign | (uint64_t(1021 + (r >> 20) % 5) << 52) | ((r >> 12) & 0xfffffffffffff);
  case T::e4m3: return (sign | ((4 + (r >> 20) % 7) << 3) | ((r >> 30) & 7)) & 0xff;
  case T::e5m2: return (sign | ((12 + (r >> 20) % 7) << 2) | ((r >> 30) & 3)) & 0xff;
  default: return r & mask;
  }
}

// ---- mma cases and their fragment layouts (PTX ISA 9.7.14.5) ----------------------------------

struct Case {
  int m, n, k;
  T d, a, b, c;
  bool a_row = true, b_row = false;
  bool satfinite = false;
  bool xor_popc = false;
  bool quad() const { return a == T::f16 && m == 8 && k == 4; } // m8n8k4 .f16: four MMAs
  std::string ptx_name() const {
    std::string s = "mma.sync.aligned.m" + std::to_string(m) + "n" + std::to_string(n) + "k" +
                    std::to_string(k) + (a_row ? ".row" : ".col") + (b_row ? ".row" : ".col") +
                    (satfinite ? ".satfinite" : "") + "." + name(d) + "." + name(a) + "." +
                    name(b) + "." + name(c);
    if (a == T::b1) s += xor_popc ? ".xor.popc" : ".and.popc";
    return s;
  }
};

struct Pos {
  int row, col, group = 0;
};

// Element i of lane's A fragment.
Pos a_pos(const Case& c, int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  if (c.quad()) { // Figures 46, 47
    const int hi = lane >= 16 ? 4 : 0, q = (lane % 16) / 4;
    return c.a_row ? Pos{lane % 4 + hi, i, q} : Pos{i % 4 + hi, lane % 4, q};
  }
  switch (c.a) {
  case T::f16: case T::bf16:
    if (c.k == 8) return {i < 2 ? g : g + 8, t * 2 + (i & 1)}; // Figure 71
    return {(i < 2 || (i >= 4 && i < 6)) ? g : g + 8, t * 2 + (i & 1) + (i >= 4 ? 8 : 0)}; // 79
  case T::tf32:
    if (c.k == 4) return {i == 0 ? g : g + 8, t};                        // Figure 68
    return {(i == 0 || i == 2) ? g : g + 8, i < 2 ? t : t + 4};          // Figure 72
  case T::f64:
    if (c.m == 8) return {g, t};                                         // Figure 53
    if (c.k == 4) return {i == 0 ? g : g + 8, t};                        // Figure 69
    if (c.k == 8) return {(i == 0 || i == 2) ? g : g + 8, i < 2 ? t : t + 4}; // Figure 73
    return {i % 2 == 0 ? g : g + 8, i % 2 == 0 ? i * 2 + t : i * 2 - 2 + t};  // Figure 80
  case T::s8: case T::u8: case T::e4m3: case T::e5m2:
    if (c.m == 8) return {g, t * 4 + i};                                 // Figure 56
    if (c.k == 16) return {i < 4 ? g : g + 8, t * 4 + (i & 3)};          // Figure 84
    return {(i < 4 || (i >= 8 && i < 12)) ? g : g + 8, t * 4 + (i & 3) + (i >= 8 ? 16 : 0)}; // 88
  case T::s4: case T::u4:
    if (c.m == 8) return {g, t * 8 + i};                                 // Figure 59
    if (c.k == 32) return {i < 8 ? g : g + 8, t * 8 + (i & 7)};          // Figure 87
    return {(i < 8 || (i >= 16 && i < 24)) ? g : g + 8, t * 8 + (i & 7) + (i >= 16 ? 32 : 0)}; // 93
  case T::b1:
    if (c.m == 8) return {g, t * 32 + i};                                // Figure 62
    if (c.k == 128) return {i < 32 ? g : g + 8, t * 32 + (i & 31)};      // Figure 97
    return {(i < 32 || (i >= 64 && i < 96)) ? g : g + 8, t * 32 + (i & 31) + (i >= 64 ? 128 : 0)};
  default: break;
  }
  return {0, 0};
}

Pos b_pos(const Case& c, int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  if (c.quad()) { // Figures 48, 49
    const int hi = lane >= 16 ? 4 : 0, q = (lane % 16) / 4;
    return c.b_row ? Pos{lane % 4, i + hi, q} : Pos{i, lane % 4 + hi, q};
  }
  switch (c.b) {
  case T::f16: case T::bf16:
    if (c.k == 8) return {t * 2 + i, g};
    return {t * 2 + (i & 1) + (i >= 2 ? 8 : 0), g};
  case T::tf32:
    if (c.k == 4) return {t, g};
    return {i == 0 ? t : t + 4, g};
  case T::f64:
    return {t + 4 * i, g}; // k4: b0 only
  case T::s8: case T::u8: case T::e4m3: case T::e5m2:
    if (c.m == 8 || c.k == 16) return {t * 4 + i, g};
    return {t * 4 + (i & 3) + (i >= 4 ? 16 : 0), g};
  case T::s4: case T::u4:
    if (c.m == 8 || c.k == 32) return {t * 8 + i, g};
    return {t * 8 + (i & 7) + (i >= 8 ? 32 : 0), g};
  case T::b1:
    if (c.m == 8 || c.k == 128) return {t * 32 + i, g};
    return {t * 32 + (i & 31) + (i >= 32 ? 128 : 0), g};
  default: break;
  }
  return {0, 0};
}

// Element i of lane's C (or D) fragment of type `type`.
Pos c_pos(const Case& c, T type, int lane, int i) {
  const int g = lane >> 2, t = lane & 3;
  if (c.quad()) {
    const int hi = lane >= 16 ? 4 : 0, q = (lane % 16) / 4;
    if (type == T::f16) return {lane % 4 + hi, i, q};                      // Figure 50
    return {(lane & 1) + (i & 2) + hi, (i & 4) + (lane & 2) + (i & 1), q}; // Figures 51, 52
  }
  if (c.m == 8) return {g, t * 2 + i};
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}

int elements(int rows, int cols) { return rows * cols / 32; }

// Registers of each fragment.
int regs(const Case& c, char which) {
  const int groups = c.quad() ? 4 : 1;
  if (which == 'a') return elements(c.m, c.k) * groups / per_reg(c.a);
  if (which == 'b') return elements(c.k, c.n) * groups / per_reg(c.b);
  const T t = which == 'c' ? c.c : c.d;
  return elements(c.m, c.n) * groups / (t == T::f16 ? 2 : 1);
}

// A PTX register type for a fragment of `t`.
const char* reg_type(T t) { return t == T::f64 ? "f64" : t == T::f32 ? "f32" : "b32"; }

// The kernel: lane `tid` of a 64-thread block loads register r of its fragments from
// in[r * 64 + tid] (a, then b, then c), runs the instruction, stores register r of d to
// out[r * 64 + tid].
std::string mma_kernel(const Case& c, const std::string& insn) {
  std::ostringstream k;
  const int na = regs(c, 'a'), nb = regs(c, 'b'), nc = regs(c, 'c'), nd = regs(c, 'd');
  k << ".version 8.7\n.target sm_90\n.address_size 64\n"
    << ".visible .entry k(.param .u64 in, .param .u64 out) {\n"
    << ".reg .b32 %r<4>;\n.reg .b64 %rd<8>;\n"
    << ".reg ." << reg_type(c.a) << " %a<" << na << ">;\n"
    << ".reg ." << reg_type(c.b) << " %b<" << nb << ">;\n"
    << ".reg ." << reg_type(c.c) << " %c<" << nc << ">;\n"
    << ".reg ." << reg_type(c.d) << " %d<" << nd << ">;\n"
    << "mov.u32 %r0, %tid.x;\nmul.wide.u32 %rd0, %r0, 8;\n"
    << "ld.param.u64 %rd1, [in];\nadd.s64 %rd1, %rd1, %rd0;\n"
    << "ld.param.u64 %rd2, [out];\nadd.s64 %rd2, %rd2, %rd0;\n";
  int slot = 0;
  auto load = [&](const char* prefix, T t, int n) {
    for (int i = 0; i < n; ++i, ++slot) {
      k << "ld.global." << (t == T::f64 ? "f64" : t == T::f32 ? "f32" : "b32") << " %" << prefix
        << i << ", [%rd1+" << slot * 512 << "];\n";
    }
  };
  load("a", c.a, na);
  load("b", c.b, nb);
  load("c", c.c, nc);
  auto list = [&](const char* prefix, int n) {
    std::string s = "{";
    for (int i = 0; i < n; ++i) s += std::string(i ? ", %" : "%") + prefix + std::to_string(i);
    return s + "}";
  };
  k << insn << " " << list("d", nd) << ", " << list("a", na) << ", " << list("b", nb) << ", "
    << list("c", nc) << ";\n";
  for (int i = 0; i < nd; ++i) {
    k << "st.global." << (c.d == T::f64 ? "f64" : c.d == T::f32 ? "f32" : "b32") << " [%rd2+"
      << i * 512 << "], %d" << i << ";\n";
  }
  k << "ret;\n}\n";
  return k.str();
}

// ---- running a kernel on the emulated device ------------------------------------------------------

CUresult use_context() { return hone::test::use_primary_context(); }

struct Outcome {
  std::vector<uint64_t> out;
  float ms = 0;
  std::string log;
  std::string error;
};

// Runs `k(in, out)` with `threads` threads on `path`; `out_words` u64 words come back.
Outcome run(const std::string& ptx, const std::vector<uint64_t>& in, size_t out_words,
            const char* path, uint32_t threads = 64) {
  Outcome r;
  testing::internal::CaptureStderr();
  setenv("HONE_EMU_EXEC", path, 1);
  CUmodule m = nullptr;
  CUfunction fn = nullptr;
  CUdeviceptr din = 0, dout = 0;
  CUevent start = nullptr, end = nullptr;
  auto fail = [&](const char* what, CUresult res) {
    const char* n = nullptr;
    cuGetErrorName(res, &n);
    r.error = std::string(what) + ": " + (n ? n : "?");
  };
  CUresult res = cuModuleLoadData(&m, ptx.c_str());
  if (res) fail("cuModuleLoadData", res);
  if (!res && (res = cuModuleGetFunction(&fn, m, "k"))) fail("cuModuleGetFunction", res);
  if (!res && (res = cuMemAlloc(&din, std::max<size_t>(8, in.size() * 8)))) fail("cuMemAlloc", res);
  if (!res && (res = cuMemAlloc(&dout, std::max<size_t>(8, out_words * 8)))) fail("cuMemAlloc", res);
  if (!res && !in.empty()) res = cuMemcpyHtoD(din, in.data(), in.size() * 8);
  if (!res) res = cuMemsetD8(dout, 0xcd, std::max<size_t>(8, out_words * 8));
  if (!res) res = cuEventCreate(&start, CU_EVENT_DEFAULT);
  if (!res) res = cuEventCreate(&end, CU_EVENT_DEFAULT);
  if (!res) {
    void* params[] = {&din, &dout};
    cuEventRecord(start, nullptr);
    res = cuLaunchKernel(fn, 1, 1, 1, threads, 1, 1, 0, nullptr, params, nullptr);
    if (res) fail("cuLaunchKernel", res);
    cuEventRecord(end, nullptr);
    if (!res && (res = cuCtxSynchronize())) fail("the launch", res);
    if (!res) cuEventElapsedTime(&r.ms, start, end);
  }
  if (!res) {
    r.out.resize(out_words);
    cuMemcpyDtoH(r.out.data(), dout, out_words * 8);
  }
  if (start) cuEventDestroy(start);
  if (end) cuEventDestroy(end);
  if (din) cuMemFree(din);
  if (dout) cuMemFree(dout);
  if (m) cuModuleUnload(m);
  unsetenv("HONE_EMU_EXEC");
  r.log = testing::internal::GetCapturedStderr();
  if (res && use_context() == CUDA_SUCCESS) {
    // a fault is sticky: start over with a fresh primary context
    CUdevice dev = 0;
    cuDeviceGet(&dev, 0);
    cuDevicePrimaryCtxReset(dev);
    CUcontext ctx = nullptr;
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
  }
  return r;
}

// Runs on both paths; both must succeed, agree with each other (results and modeled time), and
// compiled code must have run.
std::vector<uint64_t> run_both(const std::string& ptx, const std::vector<uint64_t>& in,
                               size_t out_words, uint32_t threads = 64) {
  const Outcome interp = run(ptx, in, out_words, "interpret", threads);
  const Outcome compiled = run(ptx, in, out_words, "compile", threads);
  EXPECT_TRUE(interp.error.empty()) << interp.error << "\n" << ptx << interp.log.substr(0, 3000);
  EXPECT_TRUE(compiled.error.empty()) << compiled.error << "\n" << compiled.log.substr(0, 3000);
  EXPECT_NE(compiled.log.find("; compiled code, "), std::string::npos) << compiled.log.substr(0, 2000);
  EXPECT_EQ(compiled.out, interp.out) << "the execution paths disagree";
  EXPECT_EQ(std::bit_cast<uint32_t>(compiled.ms), std::bit_cast<uint32_t>(interp.ms))
      << "modeled times differ: " << compiled.ms << " vs " << interp.ms << " ms";
  return interp.out;
}

// ---- the reference ----------------------------------------------------------------------------

using Matrix = std::vector<uint64_t>; // element bits, row-major

// D = A * B + C as emu/README.md documents: exact products, summed in binary64 in k order, C
// added last, one rounding; f64: fmas in k order; integers exact (wrapping, or .satfinite);
// b1: popc of AND or XOR.
Matrix reference(const Case& c, const Matrix& A, const Matrix& B, const Matrix& C) {
  Matrix D(size_t(c.m) * c.n);
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < c.n; ++j) {
      const uint64_t cij = C[size_t(i) * c.n + j];
      if (!is_float(c.a)) {
        int64_t s = int32_t(uint32_t(cij));
        for (int kk = 0; kk < c.k; ++kk) {
          const uint64_t x = A[size_t(i) * c.k + kk], y = B[size_t(kk) * c.n + j];
          if (c.a == T::b1) s += c.xor_popc ? int64_t((x ^ y) & 1) : int64_t(x & y & 1);
          else s += int64_t(value(c.a, x)) * int64_t(value(c.b, y));
        }
        if (c.satfinite) s = std::clamp<int64_t>(s, INT32_MIN, INT32_MAX);
        D[size_t(i) * c.n + j] = uint32_t(s);
      } else if (c.a == T::f64) {
        // NaNs as the scalar f64 instructions give them (emu/semantics.hpp): the first NaN
        // operand quieted, in operand order; an invalid operation gives 0xfff8000000000000
        double s = value(T::f64, cij);
        for (int kk = 0; kk < c.k; ++kk) {
          const double x = value(T::f64, A[size_t(i) * c.k + kk]);
          const double y = value(T::f64, B[size_t(kk) * c.n + j]);
          const double nan = std::isnan(x) ? x : std::isnan(y) ? y : s;
          if (std::isnan(nan)) s = std::bit_cast<double>(std::bit_cast<uint64_t>(nan) | 0x0008000000000000ull);
          else s = std::fma(x, y, s);
        }
        D[size_t(i) * c.n + j] = round_to(T::f64, s);
      } else {
        double s = 0;
        for (int kk = 0; kk < c.k; ++kk)
          s += value(c.a, A[size_t(i) * c.k + kk]) * value(c.b, B[size_t(kk) * c.n + j]);
        s += value(c.c, cij);
        D[size_t(i) * c.n + j] = round_to(c.d, s);
      }
    }
  }
  return D;
}

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// ---- mma -------------------------------------------------------------------------------------------

class Mma : public testing::TestWithParam<Case> {};

TEST_P(Mma, FragmentsAndNumericsFollowTheIsa) {
  ASSERT_TRUE(k_debug_log);
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  const Case& c = GetParam();
  const int groups = c.quad() ? 4 : 1;
  const int warps = 2;
  const int na = regs(c, 'a'), nb = regs(c, 'b'), nc = regs(c, 'c'), nd = regs(c, 'd');
  // matrices per warp and group
  std::vector<Matrix> A, B, C;
  uint64_t seed = std::hash<std::string>{}(c.ptx_name());
  for (int w = 0; w < warps * groups; ++w) {
    Matrix a(size_t(c.m) * c.k), b(size_t(c.k) * c.n), cc(size_t(c.m) * c.n);
    for (auto& v : a) v = random_elem(c.a, ++seed, true);
    for (auto& v : b) v = random_elem(c.b, ++seed, true);
    for (auto& v : cc) v = random_elem(c.c, ++seed, true);
    if (c.satfinite && w == 0) cc[0] = 0x7ffffff0u; // overflows: .satfinite clamps
    A.push_back(a);
    B.push_back(b);
    C.push_back(cc);
  }
  // pack the registers of every lane
  std::vector<uint64_t> in(size_t(na + nb + nc) * 64, 0);
  for (int tid = 0; tid < 64; ++tid) {
    const int w = tid / 32, lane = tid % 32;
    auto pack = [&](int base, int nregs, T t, const std::vector<Matrix>& M, int cols, auto pos) {
      const int E = per_reg(t);
      for (int e = 0; e < nregs * E; ++e) {
        const Pos p = pos(lane, e);
        const uint64_t v = M[size_t(w * groups + p.group)][size_t(p.row) * cols + p.col];
        const int r = e / E, j = e % E;
        in[size_t(base + r) * 64 + tid] |= bits(t) >= 64 ? v : v << (j * bits(t));
      }
    };
    pack(0, na, c.a, A, c.k, [&](int l, int e) { return a_pos(c, l, e); });
    pack(na, nb, c.b, B, c.n, [&](int l, int e) { return b_pos(c, l, e); });
    pack(na + nb, nc, c.c, C, c.n, [&](int l, int e) { return c_pos(c, c.c, l, e); });
  }
  const std::vector<uint64_t> out = run_both(mma_kernel(c, c.ptx_name()), in, size_t(nd) * 64);
  ASSERT_EQ(out.size(), size_t(nd) * 64);
  int shown = 0;
  for (int w = 0; w < warps; ++w) {
    for (int q = 0; q < groups; ++q) {
      const Matrix want = reference(c, A[size_t(w * groups + q)], B[size_t(w * groups + q)],
                                    C[size_t(w * groups + q)]);
      for (int lane = 0; lane < 32; ++lane) {
        const int E = c.d == T::f16 ? 2 : 1;
        for (int e = 0; e < nd * E; ++e) {
          const Pos p = c_pos(c, c.d, lane, e);
          if (p.group != q) continue;
          const uint64_t reg = out[size_t(e / E) * 64 + size_t(w * 32 + lane)];
          const uint64_t got = c.d == T::f64 ? reg : (reg >> ((e % E) * bits(c.d))) & ((1ull << bits(c.d)) - 1);
          const uint64_t expected = want[size_t(p.row) * c.n + p.col];
          if (got != expected && shown++ < 8) {
            ADD_FAILURE() << c.ptx_name() << ": warp " << w << " group " << q << " lane " << lane
                          << " element " << e << " (row " << p.row << ", col " << p.col
                          << "): got " << hex(got) << ", reference " << hex(expected);
          }
        }
      }
    }
  }
}

std::vector<Case> mma_cases() {
  std::vector<Case> v;
  for (T d : {T::f16, T::f32})
    for (T cc : {T::f16, T::f32}) {
      for (bool ar : {true, false})
        for (bool br : {true, false}) v.push_back({8, 8, 4, d, T::f16, T::f16, cc, ar, br});
      v.push_back({16, 8, 8, d, T::f16, T::f16, cc});
      v.push_back({16, 8, 16, d, T::f16, T::f16, cc});
    }
  v.push_back({16, 8, 8, T::f32, T::bf16, T::bf16, T::f32});
  v.push_back({16, 8, 16, T::f32, T::bf16, T::bf16, T::f32});
  v.push_back({16, 8, 4, T::f32, T::tf32, T::tf32, T::f32});
  v.push_back({16, 8, 8, T::f32, T::tf32, T::tf32, T::f32});
  for (int m : {8, 16})
    for (int k : {4, 8, 16})
      if (m == 16 || k == 4) v.push_back({m, 8, k, T::f64, T::f64, T::f64, T::f64});
  for (T a : {T::s8, T::u8})
    for (T b : {T::s8, T::u8}) {
      v.push_back({8, 8, 16, T::s32, a, b, T::s32});
      v.push_back({16, 8, 16, T::s32, a, b, T::s32});
      v.push_back({16, 8, 32, T::s32, a, b, T::s32});
    }
  v.push_back({16, 8, 32, T::s32, T::s8, T::s8, T::s32, true, false, true});
  v.push_back({8, 8, 16, T::s32, T::u8, T::u8, T::s32, true, false, true});
  for (T a : {T::s4, T::u4})
    for (T b : {T::s4, T::u4}) {
      v.push_back({8, 8, 32, T::s32, a, b, T::s32});
      v.push_back({16, 8, 32, T::s32, a, b, T::s32});
      v.push_back({16, 8, 64, T::s32, a, b, T::s32});
    }
  v.push_back({16, 8, 64, T::s32, T::s4, T::u4, T::s32, true, false, true});
  for (bool x : {false, true}) {
    v.push_back({8, 8, 128, T::s32, T::b1, T::b1, T::s32, true, false, false, x});
    v.push_back({16, 8, 128, T::s32, T::b1, T::b1, T::s32, true, false, false, x});
    v.push_back({16, 8, 256, T::s32, T::b1, T::b1, T::s32, true, false, false, x});
  }
  for (T a : {T::e4m3, T::e5m2})
    for (T b : {T::e4m3, T::e5m2})
      for (T acc : {T::f32, T::f16}) v.push_back({16, 8, 32, acc, a, b, acc});
  v.push_back({16, 8, 16, T::f32, T::e4m3, T::e5m2, T::f32});
  v.push_back({16, 8, 16, T::f16, T::e5m2, T::e4m3, T::f16});
  return v;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string s = info.param.ptx_name().substr(std::string("mma.sync.aligned.").size());
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

INSTANTIATE_TEST_SUITE_P(Shapes, Mma, testing::ValuesIn(mma_cases()), case_name);

// ---- ldmatrix, stmatrix, movmatrix --------------------------------------------------------------

// 128 rows of 16 bytes in shared memory, filled from in[0..255]; lane `tid` takes its row address
// from in[256 + tid] (a row index).
std::string ldmatrix_kernel(int num, bool trans, bool store) {
  std::ostringstream k;
  const std::string insn = std::string(store ? "stmatrix" : "ldmatrix") +
                           ".sync.aligned.m8n8.x" + std::to_string(num) + (trans ? ".trans" : "") +
                           ".shared.b16";
  std::string list = "{";
  for (int i = 0; i < num; ++i) list += std::string(i ? ", " : "") + "%v" + std::to_string(i);
  list += "}";
  k << ".version 8.0\n.target sm_90\n.address_size 64\n"
    << ".visible .entry k(.param .u64 in, .param .u64 out) {\n"
    << ".reg .b32 %r<8>;\n.reg .b64 %rd<12>;\n.reg .b32 %v<4>;\n.reg .pred %p;\n"
    << ".shared .align 16 .b8 sh[2048];\n"
    << "mov.u32 %r0, %tid.x;\nmul.wide.u32 %rd0, %r0, 8;\n"
    << "ld.param.u64 %rd1, [in];\nld.param.u64 %rd2, [out];\n"
    // every thread copies 8 of the 256 words (or zeroes them for a store)
    << "mov.u32 %r1, 0;\nLOOP:\nmad.lo.u32 %r2, %r1, 32, %r0;\nmul.wide.u32 %rd3, %r2, 8;\n"
    << "add.s64 %rd4, %rd1, %rd3;\nld.global.u64 %rd5, [%rd4];\n"
    << (store ? "mov.u64 %rd5, 0;\n" : "")
    << "mov.u64 %rd6, sh;\nadd.s64 %rd6, %rd6, %rd3;\nst.shared.u64 [%rd6], %rd5;\n"
    << "add.u32 %r1, %r1, 1;\nsetp.lt.u32 %p, %r1, 8;\n@%p bra LOOP;\nbar.sync 0;\n"
    << "add.s64 %rd7, %rd1, %rd0;\nld.global.u64 %rd8, [%rd7+2048];\nshl.b64 %rd8, %rd8, 4;\n"
    << "mov.u64 %rd9, sh;\nadd.s64 %rd9, %rd9, %rd8;\ncvt.u32.u64 %r3, %rd9;\n";
  if (store) {
    for (int i = 0; i < num; ++i)
      k << "ld.global.u32 %v" << i << ", [%rd7+" << 2304 + i * 256 << "];\n";
    k << insn << " [%r3], " << list << ";\nbar.sync 0;\n"
      << "mov.u32 %r1, 0;\nOUT:\nmad.lo.u32 %r2, %r1, 32, %r0;\nmul.wide.u32 %rd3, %r2, 8;\n"
      << "mov.u64 %rd6, sh;\nadd.s64 %rd6, %rd6, %rd3;\nld.shared.u64 %rd5, [%rd6];\n"
      << "add.s64 %rd4, %rd2, %rd3;\nst.global.u64 [%rd4], %rd5;\n"
      << "add.u32 %r1, %r1, 1;\nsetp.lt.u32 %p, %r1, 8;\n@%p bra OUT;\n";
  } else {
    k << insn << " " << list << ", [%r3];\n";
    for (int i = 0; i < num; ++i)
      k << "add.s64 %rd10, %rd2, %rd0;\nst.global.u32 [%rd10+" << i * 256 << "], %v" << i << ";\n";
  }
  k << "ret;\n}\n";
  return k.str();
}

// The 16-bit element `col` of the row at index `row` of the shared buffer.
uint16_t element(const std::vector<uint64_t>& buf, int row, int col) {
  uint16_t v;
  std::memcpy(&v, reinterpret_cast<const uint8_t*>(buf.data()) + row * 16 + col * 2, 2);
  return v;
}

TEST(MatrixLoadStore, LdmatrixFollowsFigure104) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  for (int num : {1, 2, 4}) {
    for (bool trans : {false, true}) {
      std::vector<uint64_t> in(256 + 32);
      for (int i = 0; i < 256; ++i) in[size_t(i)] = mix(uint64_t(i) * 31 + uint64_t(num));
      // rows scattered over the buffer, not contiguous (the ISA allows any row addresses)
      for (int l = 0; l < 32; ++l) in[256 + size_t(l)] = uint64_t((l * 37 + 5) % 128);
      const auto out = run_both(ldmatrix_kernel(num, trans, false), in, size_t(num) * 32, 32);
      ASSERT_EQ(out.size(), size_t(num) * 32);
      for (int i = 0; i < num; ++i) {
        for (int l = 0; l < 32; ++l) {
          // thread l holds row l/4, elements 2(l%4) and 2(l%4)+1 of matrix i (Figure 104);
          // .trans: column l/4, rows 2(l%4) and 2(l%4)+1
          auto row_of = [&](int r) { return int(in[256 + size_t(8 * i + r)]); };
          uint16_t lo, hi;
          if (!trans) {
            lo = element(in, row_of(l / 4), 2 * (l % 4));
            hi = element(in, row_of(l / 4), 2 * (l % 4) + 1);
          } else {
            lo = element(in, row_of(2 * (l % 4)), l / 4);
            hi = element(in, row_of(2 * (l % 4) + 1), l / 4);
          }
          const uint32_t got = uint32_t(out[size_t(i) * 32 + size_t(l)]);
          EXPECT_EQ(got, uint32_t(lo) | uint32_t(hi) << 16)
              << "ldmatrix.x" << num << (trans ? ".trans" : "") << " matrix " << i << " lane " << l;
        }
      }
    }
  }
}

TEST(MatrixLoadStore, StmatrixIsTheInverseOfLdmatrix) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  for (int num : {1, 2, 4}) {
    for (bool trans : {false, true}) {
      std::vector<uint64_t> in(256 + 32 + 4 * 32);
      for (int l = 0; l < 32; ++l) in[256 + size_t(l)] = uint64_t((l * 53 + 9) % 128);
      for (int i = 0; i < num * 32; ++i) in[288 + size_t(i)] = mix(uint64_t(i) + 77) & 0xffffffffu;
      const auto out = run_both(ldmatrix_kernel(num, trans, true), in, 256, 32);
      ASSERT_EQ(out.size(), 256u);
      for (int i = 0; i < num; ++i) {
        for (int l = 0; l < 32; ++l) {
          const uint32_t v = uint32_t(in[288 + size_t(i) * 32 + size_t(l)]);
          auto row_of = [&](int r) { return int(in[256 + size_t(8 * i + r)]); };
          int r0 = row_of(l / 4), c0 = 2 * (l % 4), r1 = r0, c1 = c0 + 1;
          if (trans) {
            r0 = row_of(2 * (l % 4));
            r1 = row_of(2 * (l % 4) + 1);
            c0 = c1 = l / 4;
          }
          EXPECT_EQ(element(out, r0, c0), uint16_t(v)) << "matrix " << i << " lane " << l;
          EXPECT_EQ(element(out, r1, c1), uint16_t(v >> 16)) << "matrix " << i << " lane " << l;
        }
      }
    }
  }
}

TEST(MatrixLoadStore, MovmatrixTransposes) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  const std::string ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 in, .param .u64 out) {
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
mov.u32 %r0, %tid.x;
mul.wide.u32 %rd0, %r0, 8;
ld.param.u64 %rd1, [in];
add.s64 %rd1, %rd1, %rd0;
ld.global.u32 %r1, [%rd1];
movmatrix.sync.aligned.m8n8.trans.b16 %r2, %r1;
ld.param.u64 %rd2, [out];
add.s64 %rd2, %rd2, %rd0;
st.global.u32 [%rd2], %r2;
ret;
}
)";
  std::vector<uint64_t> in(32);
  for (int l = 0; l < 32; ++l) in[size_t(l)] = mix(uint64_t(l) + 5) & 0xffffffffu;
  // the matrix: row r, column c is in lane 4r + c/2, half c%2
  auto at = [&](int r, int c) { return uint32_t(in[size_t(4 * r + c / 2)] >> (16 * (c % 2))) & 0xffff; };
  const auto out = run_both(ptx, in, 32, 32);
  ASSERT_EQ(out.size(), 32u);
  for (int l = 0; l < 32; ++l) {
    const int r = l / 4, c = 2 * (l % 4);
    EXPECT_EQ(uint32_t(out[size_t(l)]), at(c, r) | at(c + 1, r) << 16) << "lane " << l;
  }
}

// ---- what the ISA calls undefined fails the launch, with the line ------------------------------

TEST(MatrixLoadStore, APartialWarpOrAnAddressOutsideSharedMemoryFailsTheLaunch) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  std::vector<uint64_t> in(256 + 32);
  for (int l = 0; l < 32; ++l) in[256 + size_t(l)] = uint64_t(l);
  // 16 threads: lanes 16-31 were never launched
  for (const char* path : {"interpret", "compile"}) {
    const Outcome r = run(ldmatrix_kernel(4, false, false), in, 128, path, 16);
    EXPECT_NE(r.error.find("CUDA_ERROR_ILLEGAL_INSTRUCTION"), std::string::npos) << r.error;
    EXPECT_NE(r.log.find("needs all 32 lanes"), std::string::npos) << r.log.substr(0, 2000);
    EXPECT_NE(r.log.find("PTX line"), std::string::npos) << r.log.substr(0, 2000);
  }
  // a generic address into global memory
  const std::string ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 in, .param .u64 out) {
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [in];
ldmatrix.sync.aligned.m8n8.x1.b16 {%r1}, [%rd1];
ret;
}
)";
  const Outcome g = run(ptx, in, 1, "interpret", 32);
  EXPECT_NE(g.error.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << g.error;
  EXPECT_NE(g.log.find("not in shared memory"), std::string::npos) << g.log.substr(0, 2000);
}

TEST(MatrixLoadStore, ShapesOutsideSm80To90AreRefusedWithTheLine) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  const std::string ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 in, .param .u64 out) {
.reg .b32 %r<16>;
.reg .f32 %f<8>;
mma.sync.aligned.m16n8k16.row.row.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, {%f4, %f5, %f6, %f7};
ret;
}
)";
  const Outcome r = run(ptx, {}, 1, "interpret", 32);
  EXPECT_NE(r.error.find("CUDA_ERROR_NOT_SUPPORTED"), std::string::npos) << r.error;
  EXPECT_NE(r.log.find("PTX line 7"), std::string::npos) << r.log.substr(0, 2000);
  EXPECT_NE(r.log.find(".row.col"), std::string::npos) << r.log.substr(0, 2000);
}

// ---- wmma: load, multiply, store through memory ------------------------------------------------

struct WCase {
  int m, n, k;
  T a, c;            // multiplicand and accumulator types (d = c)
  bool a_row, b_row, c_row;
  bool stride;       // an explicit stride larger than the matrix, or the default
  bool xor_popc = false;
};

std::string wmma_name(const WCase& w) {
  std::string s = std::string("m") + std::to_string(w.m) + "n" + std::to_string(w.n) + "k" +
                  std::to_string(w.k) + "_" + name(w.a) + "_" + name(w.c) + "_" +
                  (w.a_row ? "r" : "c") + (w.b_row ? "r" : "c") + (w.c_row ? "r" : "c") +
                  (w.stride ? "_stride" : "");
  if (w.a == T::b1) s += w.xor_popc ? "_xor" : "_and";
  return s;
}

int wregs(const WCase& w, char which) {
  const T t = which == 'a' || which == 'b' ? w.a : w.c;
  if (t == T::f16 && (which == 'a' || which == 'b')) return 8; // 16 .f16 per thread, duplicated
  const int rows = which == 'b' ? w.k : w.m, cols = which == 'a' ? w.k : w.n;
  return rows * cols / 32 / (t == T::f16 ? 2 : per_reg(t));
}

// Matrices in global memory: A at element 0, B, C after it, each with leading dimension `ld`
// (the matrix's own when not strided); D written where the kernel is told.
struct Placed {
  int ld_a, ld_b, ld_c;
  size_t off_a, off_b, off_c, off_d; // in bytes
};

Placed place(const WCase& w) {
  Placed p;
  const int pad = w.stride ? 16 : 0; // rows stay 32-byte aligned, as the ISA requires
  const int sub = w.a == T::b1 ? 8 : w.a == T::s4 || w.a == T::u4 ? 2 : 1; // keep 32-byte rows
  p.ld_a = (w.a_row ? w.k : w.m) + pad * sub;
  p.ld_b = (w.b_row ? w.n : w.k) + pad * sub;
  p.ld_c = (w.c_row ? w.n : w.m) + pad;
  auto bytes = [](int lines, int ld, T t) { return size_t(lines) * size_t(ld) * size_t(bits(t)) / 8; };
  p.off_a = 0;
  p.off_b = (p.off_a + bytes(w.a_row ? w.m : w.k, p.ld_a, w.a) + 255) / 256 * 256;
  p.off_c = (p.off_b + bytes(w.b_row ? w.k : w.n, p.ld_b, w.a) + 255) / 256 * 256;
  p.off_d = (p.off_c + bytes(w.c_row ? w.m : w.n, p.ld_c, w.c) + 255) / 256 * 256;
  return p;
}

void put(std::vector<uint8_t>& mem, size_t base, T t, uint64_t index, uint64_t v) {
  const uint64_t bit = index * uint64_t(bits(t));
  if (bits(t) >= 8) {
    std::memcpy(mem.data() + base + bit / 8, &v, size_t(bits(t) / 8));
  } else {
    uint8_t& byte = mem[base + bit / 8];
    const uint8_t mask = uint8_t(((1u << bits(t)) - 1) << (bit % 8));
    byte = uint8_t((byte & ~mask) | ((v << (bit % 8)) & mask));
  }
}

uint64_t get(const std::vector<uint8_t>& mem, size_t base, T t, uint64_t index) {
  const uint64_t bit = index * uint64_t(bits(t));
  if (bits(t) >= 8) {
    uint64_t v = 0;
    std::memcpy(&v, mem.data() + base + bit / 8, size_t(bits(t) / 8));
    return v;
  }
  return (mem[base + bit / 8] >> (bit % 8)) & ((1u << bits(t)) - 1);
}

std::string wmma_kernel(const WCase& w, const Placed& p) {
  std::ostringstream k;
  const int na = wregs(w, 'a'), nb = wregs(w, 'b'), nc = wregs(w, 'c');
  const std::string shape = "m" + std::to_string(w.m) + "n" + std::to_string(w.n) + "k" + std::to_string(w.k);
  auto list = [](const char* prefix, int n) {
    std::string s = "{";
    for (int i = 0; i < n; ++i) s += std::string(i ? ", %" : "%") + prefix + std::to_string(i);
    return s + "}";
  };
  const char* ct = w.c == T::f64 ? "f64" : w.c == T::f32 ? "f32" : "b32";
  const char* at = w.a == T::f64 ? "f64" : "b32";
  k << ".version 8.0\n.target sm_90\n.address_size 64\n"
    << ".visible .entry k(.param .u64 in, .param .u64 out) {\n"
    << ".reg .b64 %rd<8>;\n.reg .b32 %s<4>;\n"
    << ".reg ." << at << " %a<" << na << ">;\n.reg ." << at << " %b<" << nb << ">;\n"
    << ".reg ." << ct << " %c<" << nc << ">;\n.reg ." << ct << " %d<" << nc << ">;\n"
    << "ld.param.u64 %rd0, [in];\nld.param.u64 %rd1, [out];\n"
    << "add.s64 %rd2, %rd0, " << p.off_a << ";\nadd.s64 %rd3, %rd0, " << p.off_b << ";\n"
    << "add.s64 %rd4, %rd0, " << p.off_c << ";\n"
    << "mov.u32 %s0, " << p.ld_a << ";\nmov.u32 %s1, " << p.ld_b << ";\nmov.u32 %s2, " << p.ld_c << ";\n";
  const std::string ta = name(w.a), tc = name(w.c);
  auto stride = [&](const char* s) { return w.stride ? std::string(", ") + s : std::string(); };
  k << "wmma.load.a.sync.aligned." << (w.a_row ? "row" : "col") << "." << shape << ".global." << ta
    << " " << list("a", na) << ", [%rd2]" << stride("%s0") << ";\n";
  k << "wmma.load.b.sync.aligned." << (w.b_row ? "row" : "col") << "." << shape << ".global." << ta
    << " " << list("b", nb) << ", [%rd3]" << stride("%s1") << ";\n";
  k << "wmma.load.c.sync.aligned." << (w.c_row ? "row" : "col") << "." << shape << ".global." << tc
    << " " << list("c", nc) << ", [%rd4]" << stride("%s2") << ";\n";
  std::string mma = "wmma.mma";
  if (w.a == T::b1) mma += w.xor_popc ? ".xor.popc" : ".and.popc";
  mma += std::string(".sync.aligned.") + (w.a_row ? "row" : "col") + "." + (w.b_row ? "row" : "col") +
         "." + shape;
  if (w.a == T::f16) mma += "." + tc + "." + tc;
  else mma += "." + tc + "." + ta + "." + ta + "." + tc;
  k << mma << " " << list("d", nc) << ", " << list("a", na) << ", " << list("b", nb) << ", "
    << list("c", nc) << ";\n";
  k << "wmma.store.d.sync.aligned." << (w.c_row ? "row" : "col") << "." << shape << ".global." << tc
    << " [%rd1], " << list("d", nc) << stride("%s2") << ";\nret;\n}\n";
  return k.str();
}

class Wmma : public testing::TestWithParam<WCase> {};

TEST_P(Wmma, LoadMultiplyStoreComputesTheProduct) {
  ASSERT_EQ(use_context(), CUDA_SUCCESS);
  const WCase& w = GetParam();
  const Placed p = place(w);
  Case c{w.m, w.n, w.k, w.c, w.a, w.a, w.c, true, false, false, w.xor_popc};
  std::vector<uint8_t> mem(p.off_d + 64, 0);
  Matrix A(size_t(w.m) * w.k), B(size_t(w.k) * w.n), C(size_t(w.m) * w.n);
  uint64_t seed = std::hash<std::string>{}(wmma_name(w));
  for (auto& v : A) v = random_elem(w.a, ++seed, false);
  for (auto& v : B) v = random_elem(w.a, ++seed, false);
  for (auto& v : C) v = random_elem(w.c, ++seed, false);
  for (int i = 0; i < w.m; ++i)
    for (int kk = 0; kk < w.k; ++kk)
      put(mem, p.off_a, w.a, w.a_row ? uint64_t(i) * p.ld_a + kk : uint64_t(kk) * p.ld_a + i, A[size_t(i) * w.k + kk]);
  for (int kk = 0; kk < w.k; ++kk)
    for (int j = 0; j < w.n; ++j)
      put(mem, p.off_b, w.a, w.b_row ? uint64_t(kk) * p.ld_b + j : uint64_t(j) * p.ld_b + kk, B[size_t(kk) * w.n + j]);
  for (int i = 0; i < w.m; ++i)
    for (int j = 0; j < w.n; ++j)
      put(mem, p.off_c, w.c, w.c_row ? uint64_t(i) * p.ld_c + j : uint64_t(j) * p.ld_c + i, C[size_t(i) * w.n + j]);
  std::vector<uint64_t> in((mem.size() + 7) / 8);
  std::memcpy(in.data(), mem.data(), mem.size());
  const size_t out_bytes = size_t(w.c_row ? w.m : w.n) * p.ld_c * bits(w.c) / 8;
  const auto out = run_both(wmma_kernel(w, p), in, (out_bytes + 7) / 8, 32);
  ASSERT_EQ(out.size(), (out_bytes + 7) / 8);
  std::vector<uint8_t> got(out.size() * 8);
  std::memcpy(got.data(), out.data(), got.size());
  const Matrix want = reference(c, A, B, C);
  int shown = 0;
  for (int i = 0; i < w.m; ++i) {
    for (int j = 0; j < w.n; ++j) {
      const uint64_t v = get(got, 0, w.c, w.c_row ? uint64_t(i) * p.ld_c + j : uint64_t(j) * p.ld_c + i);
      if (v != want[size_t(i) * w.n + j] && shown++ < 8) {
        ADD_FAILURE() << wmma_name(w) << ": D[" << i << "][" << j << "] = " << hex(v)
                      << ", reference " << hex(want[size_t(i) * w.n + j]);
      }
    }
  }
}

std::vector<WCase> wmma_cases() {
  std::vector<WCase> v;
  for (auto [m, n, k] : {std::tuple{16, 16, 16}, std::tuple{32, 8, 16}, std::tuple{8, 32, 16}}) {
    v.push_back({m, n, k, T::f16, T::f32, true, false, true, false});
    v.push_back({m, n, k, T::f16, T::f16, false, true, false, true});
    v.push_back({m, n, k, T::bf16, T::f32, true, true, true, true});
    v.push_back({m, n, k, T::s8, T::s32, true, false, false, false});
    v.push_back({m, n, k, T::u8, T::s32, false, false, true, true});
  }
  v.push_back({16, 16, 8, T::tf32, T::f32, true, false, true, true});
  v.push_back({16, 16, 8, T::tf32, T::f32, false, true, false, false});
  v.push_back({8, 8, 4, T::f64, T::f64, true, false, true, false});
  v.push_back({8, 8, 4, T::f64, T::f64, false, true, false, true});
  v.push_back({8, 8, 32, T::s4, T::s32, true, false, true, false});
  v.push_back({8, 8, 32, T::u4, T::s32, true, false, false, true});
  v.push_back({8, 8, 128, T::b1, T::s32, true, false, true, true, false});
  v.push_back({8, 8, 128, T::b1, T::s32, true, false, true, false, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, Wmma, testing::ValuesIn(wmma_cases()),
                         [](const testing::TestParamInfo<WCase>& info) { return wmma_name(info.param); });

} // namespace
