// Tests for emu/semantics: every result is checked against a reference computed another way.
// - Rounding to f16/bf16/tf32/e4m3/e5m2: search in the sorted list of every finite value of the
//   format, with exact comparisons (long double or 128-bit integers), never the implementation's
//   bit arithmetic. Exhaustive over every f16/bf16 pattern and every u8/s8/u16/s16 input.
// - f32 arithmetic in directed modes (implemented with error-free transformations in double):
//   the host's own float operations under fesetround.
// - f64 arithmetic in directed modes (implemented with fesetround): error-free transformations
//   (TwoSum, fma-based products and remainders) plus nextafter, and __float128 for fma.
// - Integer operations: the ISA's pseudocode written as bit loops, 32-bit limbs or __int128.
// - .approx functions: long double references over dense samples, against the ISA's bounds; the
//   measured maxima are printed.
// Random inputs come from fixed seeds.
#include "emu/semantics.hpp"

#include "ptx/ir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cfenv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace hone::emu::sem {
namespace {

using ptx::Type;

constexpr Round k_rounds[] = {Round::rn, Round::rz, Round::rm, Round::rp};
constexpr Round k_rounds_rna[] = {Round::rn, Round::rz, Round::rm, Round::rp, Round::rna};

int fe_of(Round r) {
  switch (r) {
  case Round::rz:
    return FE_TOWARDZERO;
  case Round::rm:
    return FE_DOWNWARD;
  case Round::rp:
    return FE_UPWARD;
  default:
    return FE_TONEAREST;
  }
}
CvtMode cvt_of(Round r) {
  switch (r) {
  case Round::rz:
    return CvtMode::rz;
  case Round::rm:
    return CvtMode::rm;
  case Round::rp:
    return CvtMode::rp;
  case Round::rna:
    return CvtMode::rna;
  default:
    return CvtMode::rn;
  }
}
const char* name_of(Round r) {
  static const char* names[] = {"rn", "rz", "rm", "rp", "rna"};
  return names[int(r)];
}

// Runs f with the host rounding mode set to r.
class HostRounding {
public:
  explicit HostRounding(Round r) { std::fesetround(fe_of(r)); }
  ~HostRounding() { std::fesetround(FE_TONEAREST); }
};

std::mt19937_64& rng() {
  static std::mt19937_64 g(0x5eed'0f'5e'11a7ull);
  return g;
}
uint32_t rand32() {
  return uint32_t(rng()());
}
uint64_t rand64() {
  return rng()();
}

// A float with random sign, exponent drawn from the whole range and random mantissa; sometimes a
// special value or a subnormal.
float rand_f32() {
  const uint32_t pick = rand32() % 16;
  if (pick == 0) {
    static const uint32_t specials[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                        1, 0x807fffffu, 0x00800000u, 0x7f7fffffu, 0x3f800000u};
    return f32_from_bits(specials[rand32() % std::size(specials)]);
  }
  if (pick == 1) return f32_from_bits((rand32() & 0x807fffffu)); // subnormal
  return f32_from_bits((rand32() & 0x807fffffu) | (rand32() % 255) << 23);
}
// A float with exponent in [lo, hi] (unbiased) and random sign/mantissa.
float rand_f32_exp(int lo, int hi) {
  const int e = lo + int(rand32() % uint32_t(hi - lo + 1));
  return f32_from_bits((rand32() & 0x807fffffu) | uint32_t(e + 127) << 23);
}
double rand_f64_exp(int lo, int hi) {
  const int e = lo + int(rand32() % uint32_t(hi - lo + 1));
  return f64_from_bits((rand64() & 0x800fffffffffffffull) | uint64_t(e + 1023) << 52);
}

// ---------------------------------------------------------------------------------------------
// Reference rounding: search among every finite value of a small format.

struct Grid {
  FloatFormat fmt;
  std::vector<long double> values; // nonnegative finite values, ascending
  std::vector<uint64_t> bits;      // their encodings
  long double virtual_next;        // the value after the largest one, were the exponent unbounded
};

// Decoded by the definition of a binary format, independently of format_to_double.
long double decode_ref(uint64_t mag, const FloatFormat& f) {
  const uint64_t be = mag >> f.mant_bits, frac = mag & ((uint64_t(1) << f.mant_bits) - 1);
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  if (be == 0) return std::ldexp(static_cast<long double>(frac), 1 - bias - f.mant_bits);
  return std::ldexp(1.0L + static_cast<long double>(frac) / (uint64_t(1) << f.mant_bits),
                    int(be) - bias);
}

Grid make_grid(const FloatFormat& f) {
  Grid g{f, {}, {}, 0};
  for (uint64_t m = 0; m <= f.max_finite; ++m) {
    g.values.push_back(decode_ref(m, f));
    g.bits.push_back(m);
  }
  const size_t n = g.values.size();
  g.virtual_next = g.values[n - 1] + (g.values[n - 1] - g.values[n - 2]);
  return g;
}

const Grid& grid_f16() {
  static const Grid g = make_grid(k_fmt_f16);
  return g;
}
const Grid& grid_bf16() {
  static const Grid g = make_grid(k_fmt_bf16);
  return g;
}
const Grid& grid_e4m3() {
  static const Grid g = make_grid(k_fmt_e4m3);
  return g;
}
const Grid& grid_e5m2() {
  static const Grid g = make_grid(k_fmt_e5m2);
  return g;
}
const Grid& grid_tf32() {
  static const Grid g = make_grid(k_fmt_tf32);
  return g;
}

// x rounded to the grid's format (x exact, finite). Overflow: infinity or the largest value by
// IEEE rules, the largest value with satfinite or without infinities.
uint64_t ref_round(const Grid& g, long double x, Round r, bool satfinite = false) {
  const FloatFormat& f = g.fmt;
  const bool neg = std::signbit(x);
  const long double ax = std::fabs(x);
  const uint64_t sign = uint64_t(neg) << (f.exp_bits + f.mant_bits);
  const size_t i =
      size_t(std::upper_bound(g.values.begin(), g.values.end(), ax) - g.values.begin()) - 1;
  if (g.values[i] == ax) return sign | g.bits[i];
  const bool overflow_side = i + 1 == g.values.size();
  const long double lo = g.values[i], hi = overflow_side ? g.virtual_next : g.values[i + 1];
  const bool lo_even = overflow_side ? false : (g.bits[i] & 1) == 0;
  bool pick_hi = false;
  const long double mid = (lo + hi) / 2;
  switch (r) {
  case Round::rz:
    pick_hi = false;
    break;
  case Round::rp:
    pick_hi = !neg;
    break;
  case Round::rm:
    pick_hi = neg;
    break;
  case Round::rn:
    pick_hi = ax > mid || (ax == mid && !lo_even);
    break;
  case Round::rna:
    pick_hi = ax >= mid;
    break;
  }
  if (!overflow_side) return sign | (pick_hi ? g.bits[i + 1] : g.bits[i]);
  if (!pick_hi || satfinite || !f.has_inf) return sign | f.max_finite;
  return sign | ((uint64_t(1) << f.exp_bits) - 1) << f.mant_bits;
}

// ---------------------------------------------------------------------------------------------
// f16 / bf16 patterns

TEST(SemanticsHalfConvert, EveryF16PatternToF32AndBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t x = uint16_t(h);
    const uint32_t mag = h & 0x7fffu;
    const float f = f16_to_f32(x);
    const uint64_t generic = cvt(h, Type::f32, Type::f16, CvtMode::none);
    ASSERT_EQ(f32_bits(f), uint32_t(generic)) << std::hex << h;
    if (mag > 0x7c00u) {
      EXPECT_EQ(f32_bits(f), k_nan_f32) << std::hex << h;
      EXPECT_EQ(f32_to_f16_rn(f), k_nan_f16);
      continue;
    }
    const long double ref =
        mag == 0x7c00u ? std::numeric_limits<long double>::infinity() : decode_ref(mag, k_fmt_f16);
    ASSERT_EQ(static_cast<long double>(f), (h & 0x8000u) ? -ref : ref) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0);
    EXPECT_EQ(f32_to_f16_rn(f), x) << std::hex << h;
    for (Round r : k_rounds_rna)
      ASSERT_EQ(cvt(f32_bits(f), Type::f16, Type::f32, cvt_of(r)), h) << std::hex << h;
    // f16 -> f64 and back, f16 -> bf16 -> compare with the grid reference.
    const double d = f64_from_bits(cvt(h, Type::f64, Type::f16, CvtMode::none));
    ASSERT_EQ(static_cast<long double>(d), static_cast<long double>(f));
    ASSERT_EQ(cvt(f64_bits(d), Type::f16, Type::f64, CvtMode::rn), h);
    if (mag < 0x7c00u) {
      for (Round r : k_rounds_rna)
        ASSERT_EQ(cvt(h, Type::bf16, Type::f16, cvt_of(r)),
                  ref_round(grid_bf16(), static_cast<long double>(f), r))
            << std::hex << h << " " << name_of(r);
    }
  }
}

TEST(SemanticsHalfConvert, EveryBf16PatternToF32AndBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t x = uint16_t(h);
    const uint32_t mag = h & 0x7fffu;
    const float f = bf16_to_f32(x);
    ASSERT_EQ(f32_bits(f), uint32_t(cvt(h, Type::f32, Type::bf16, CvtMode::none))) << std::hex << h;
    if (mag > 0x7f80u) {
      EXPECT_EQ(f32_bits(f), k_nan_f32);
      EXPECT_EQ(f32_to_bf16_rn(f), k_nan_bf16);
      continue;
    }
    if (mag < 0x7f80u) {
      const long double ref = decode_ref(mag, k_fmt_bf16);
      ASSERT_EQ(static_cast<long double>(f), (h & 0x8000u) ? -ref : ref) << std::hex << h;
    }
    EXPECT_EQ(f32_to_bf16_rn(f), x) << std::hex << h;
    for (Round r : k_rounds_rna) {
      ASSERT_EQ(cvt(f32_bits(f), Type::bf16, Type::f32, cvt_of(r)), h);
      if (mag < 0x7f80u) {
        ASSERT_EQ(cvt(h, Type::f16, Type::bf16, cvt_of(r)),
                  ref_round(grid_f16(), static_cast<long double>(f), r))
            << std::hex << h << " " << name_of(r);
      }
    }
  }
}

// f32 values around every f16/bf16 rounding boundary, plus random ones, in every mode.
void check_f32_to_half(const Grid& g, Type dst, uint16_t (*fast_rn)(float)) {
  std::vector<float> inputs;
  for (size_t i = 0; i + 1 < g.values.size(); ++i) {
    const float lo = float(g.values[i]);
    const float mid = float((g.values[i] + g.values[i + 1]) / 2);
    for (float x : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f),
                    std::nextafter(lo, 1e30f)}) {
      inputs.push_back(x);
      inputs.push_back(-x);
    }
  }
  const float max = float(g.values.back()), vnext = float(g.virtual_next);
  for (float x : {max, (max + vnext) / 2, std::nextafter((max + vnext) / 2, 0.0f), vnext, 1e30f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()}) {
    inputs.push_back(x);
    inputs.push_back(-x);
  }
  for (int i = 0; i < 300000; ++i) inputs.push_back(rand_f32());
  for (float x : inputs) {
    if (x != x || std::isinf(x)) continue;
    for (Round r : k_rounds_rna) {
      const uint64_t want = ref_round(g, static_cast<long double>(x), r);
      ASSERT_EQ(cvt(f32_bits(x), dst, Type::f32, cvt_of(r)), want)
          << std::hexfloat << x << " " << name_of(r);
      if (r == Round::rn) {
        ASSERT_EQ(fast_rn(x), want) << std::hexfloat << x;
      }
    }
    // satfinite: overflow gives the largest finite value.
    const uint64_t sf = cvt(f32_bits(x), dst, Type::f32, CvtMode::rn, false, false, false, true);
    ASSERT_EQ(sf, ref_round(g, static_cast<long double>(x), Round::rn, true)) << std::hexfloat << x;
  }
}

TEST(SemanticsHalfConvert, F32ToF16EveryModeAroundEveryBoundary) {
  check_f32_to_half(grid_f16(), Type::f16, f32_to_f16_rn);
}

TEST(SemanticsHalfConvert, F32ToBf16EveryModeAroundEveryBoundary) {
  check_f32_to_half(grid_bf16(), Type::bf16, f32_to_bf16_rn);
}

TEST(SemanticsHalfConvert, F64ToHalfEveryMode) {
  for (int i = 0; i < 200000; ++i) {
    double x = rand_f64_exp(-30, 17);
    if (i % 4 == 0) x = rand_f64_exp(-140, 130);
    for (Round r : k_rounds_rna) {
      ASSERT_EQ(cvt(f64_bits(x), Type::f16, Type::f64, cvt_of(r)), ref_round(grid_f16(), x, r))
          << std::hexfloat << x << " " << name_of(r);
      ASSERT_EQ(cvt(f64_bits(x), Type::bf16, Type::f64, cvt_of(r)), ref_round(grid_bf16(), x, r))
          << std::hexfloat << x << " " << name_of(r);
    }
  }
}

TEST(SemanticsHalfConvert, SpecialValuesAndModifiers) {
  const auto c = [](float x, Type d, CvtMode m, bool ftz, bool sat, bool relu, bool sf) {
    return cvt(f32_bits(x), d, Type::f32, m, ftz, sat, relu, sf);
  };
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  EXPECT_EQ(c(inf, Type::f16, CvtMode::rn, false, false, false, false), 0x7c00u);
  EXPECT_EQ(c(-inf, Type::f16, CvtMode::rz, false, false, false, false), 0xfc00u);
  EXPECT_EQ(c(inf, Type::f16, CvtMode::rn, false, false, false, true), 0x7bffu);
  EXPECT_EQ(c(-inf, Type::bf16, CvtMode::rn, false, false, false, true), 0xff7fu);
  EXPECT_EQ(c(nan, Type::f16, CvtMode::rn, false, false, false, true), 0x7fffu);
  EXPECT_EQ(c(-nan, Type::bf16, CvtMode::rn, false, false, false, false), 0x7fffu);
  // .relu: negative -> +0, NaN -> canonical NaN.
  EXPECT_EQ(c(-2.5f, Type::f16, CvtMode::rn, false, false, true, false), 0u);
  EXPECT_EQ(c(-0.0f, Type::bf16, CvtMode::rn, false, false, true, false), 0u);
  EXPECT_EQ(c(2.5f, Type::f16, CvtMode::rn, false, false, true, false), 0x4100u);
  EXPECT_EQ(c(-nan, Type::f16, CvtMode::rn, false, false, true, false), 0x7fffu);
  // .sat: [0, 1], NaN -> +0.
  EXPECT_EQ(c(1.5f, Type::f16, CvtMode::rn, false, true, false, false), 0x3c00u);
  EXPECT_EQ(c(-1.5f, Type::f16, CvtMode::rn, false, true, false, false), 0u);
  EXPECT_EQ(c(nan, Type::f16, CvtMode::rn, false, true, false, false), 0u);
  EXPECT_EQ(c(0.25f, Type::f16, CvtMode::rn, false, true, false, false), 0x3400u);
  // .ftz on an f32 subnormal input.
  EXPECT_EQ(c(-1e-40f, Type::f16, CvtMode::rm, true, false, false, false), 0x8000u);
  EXPECT_EQ(c(-1e-40f, Type::f16, CvtMode::rm, false, false, false, false), 0x8001u);
  // Packed forms: a to the upper half.
  EXPECT_EQ(cvt_f16x2_f32(1.0f, -2.0f, CvtMode::rn), 0x3c00c000u);
  EXPECT_EQ(cvt_bf16x2_f32(1.0f, -2.0f, CvtMode::rz), 0x3f80c000u);
  EXPECT_EQ(cvt_f16x2_f32(-1.0f, 70000.0f, CvtMode::rn, true, true), 0x00007bffu);
}

// ---------------------------------------------------------------------------------------------
// f32 <-> f64, tf32, fp8

TEST(SemanticsConvert, F64ToF32EveryModeMatchesHost) {
  std::vector<double> xs;
  for (int i = 0; i < 200000; ++i) {
    const int pick = i % 5;
    if (pick == 0)
      xs.push_back(rand_f64_exp(-1022, 1023));
    else if (pick == 1)
      xs.push_back(rand_f64_exp(-155, -120)); // f32 subnormal range
    else if (pick == 2)
      xs.push_back(rand_f64_exp(125, 130)); // f32 overflow boundary
    else {
      // Exactly a midpoint between two floats, or one double away from it.
      const float f = rand_f32_exp(-126, 127);
      const double mid = (double(f) + double(std::nextafter(f, 1e38f))) / 2;
      xs.push_back(pick == 3 ? mid : std::nextafter(mid, rand32() & 1 ? 0.0 : 1e300));
    }
  }
  for (double s : {0.0, -0.0, 1e-310, -1e-310, 3.4028235677973366e38, 3.4028235677973362e38,
                   0x1.fffffefffffffp127, 0x1p-150, 0x1.0000000000001p-150, 0x1p-149})
    xs.push_back(s);
  for (Round r : k_rounds) {
    std::vector<uint32_t> want(xs.size());
    {
      HostRounding hr(r);
      for (size_t i = 0; i < xs.size(); ++i) {
        volatile double v = xs[i];
        volatile float f = float(v);
        want[i] = f32_bits(f);
      }
    }
    for (size_t i = 0; i < xs.size(); ++i) {
      ASSERT_EQ(uint32_t(cvt(f64_bits(xs[i]), Type::f32, Type::f64, cvt_of(r))), want[i])
          << std::hexfloat << xs[i] << " " << name_of(r);
      if (r == Round::rn) {
        ASSERT_EQ(f32_bits(cvt_f32_f64_rn(xs[i])), want[i]);
      }
      // .ftz: subnormal results flush.
      const uint32_t ftz = uint32_t(cvt(f64_bits(xs[i]), Type::f32, Type::f64, cvt_of(r), true));
      ASSERT_EQ(ftz, (want[i] & 0x7f800000u) == 0 ? want[i] & 0x80000000u : want[i]);
    }
  }
}

TEST(SemanticsConvert, F32ToF64IsExactAndKeepsNaNPayload) {
  for (int i = 0; i < 100000; ++i) {
    const float f = rand_f32();
    const double d = f64_from_bits(cvt(f32_bits(f), Type::f64, Type::f32, CvtMode::none));
    ASSERT_EQ(f64_bits(d), f64_bits(cvt_f64_f32(f)));
    if (f == f) {
      ASSERT_EQ(f64_bits(d), f64_bits(double(f)));
    }
    // Back again exactly.
    if (f == f) {
      ASSERT_EQ(uint32_t(cvt(f64_bits(d), Type::f32, Type::f64, CvtMode::rn)), f32_bits(f));
    }
  }
  EXPECT_EQ(f64_bits(cvt_f64_f32(f32_from_bits(0x7f800001u))), 0x7ff8000020000000ull);
  EXPECT_EQ(f64_bits(cvt_f64_f32(f32_from_bits(0xffc00001u))), 0xfff8000020000000ull);
  EXPECT_EQ(cvt(0x7e01u, Type::f64, Type::f16, CvtMode::none), 0x7ff8040000000000ull);
  EXPECT_EQ(cvt(0x7ff4000000000001ull, Type::f64, Type::f64, CvtMode::rni), 0x7ffc000000000001ull);
  EXPECT_EQ(f32_bits(cvt_f32_f64_rn(f64_from_bits(0x7ff4000000000001ull))), k_nan_f32);
}

TEST(SemanticsConvert, Tf32) {
  // Reference for .rna: add half of the dropped part's weight, clear the 13 dropped bits.
  for (int i = 0; i < 300000; ++i) {
    float x = rand_f32();
    if (i % 3 == 0) x = f32_from_bits((rand32() & 0xffffe000u) | 0x1000u); // ties
    const uint32_t u = f32_bits(x);
    if (x != x) {
      EXPECT_EQ(cvt_tf32_f32(x, CvtMode::rna), k_nan_f32);
      continue;
    }
    if (std::isinf(x)) continue;
    uint32_t want = (u + 0x1000u) & 0xffffe000u;
    if ((want & 0x7f800000u) == 0x7f800000u) want &= 0xff800000u; // rounds past the largest: inf
    ASSERT_EQ(cvt_tf32_f32(x, CvtMode::rna), want) << std::hex << u;
    for (Round r : {Round::rn, Round::rz}) {
      const uint64_t g = ref_round(grid_tf32(), static_cast<long double>(x), r);
      const uint32_t ref = uint32_t((g >> 18) << 31 | (g & 0x3ffffu) << 13);
      ASSERT_EQ(cvt_tf32_f32(x, cvt_of(r)), ref) << std::hex << u << " " << name_of(r);
    }
    const uint64_t gs = ref_round(grid_tf32(), static_cast<long double>(x), Round::rna, true);
    ASSERT_EQ(cvt_tf32_f32(x, CvtMode::rna, false, true),
              uint32_t((gs >> 18) << 31 | (gs & 0x3ffffu) << 13));
  }
  EXPECT_EQ(cvt_tf32_f32(-3.0f, CvtMode::rn, true), 0u);
  EXPECT_EQ(cvt_tf32_f32(std::numeric_limits<float>::max(), CvtMode::rna), 0x7f800000u);
  EXPECT_EQ(cvt_tf32_f32(std::numeric_limits<float>::max(), CvtMode::rna, false, true),
            0x7f7fe000u);
}

TEST(SemanticsConvert, Fp8FromEveryF16AndBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    for (bool relu : {false, true}) {
      const uint16_t e4 = cvt_e4m3x2_f16x2(h << 16 | h, relu);
      const uint16_t e5 = cvt_e5m2x2_f16x2(h << 16 | h, relu);
      ASSERT_EQ(e4 >> 8, e4 & 0xffu);
      ASSERT_EQ(e5 >> 8, e5 & 0xffu);
      uint64_t w4, w5;
      if (f != f) {
        w4 = w5 = 0x7f;
      } else if (relu && std::signbit(f)) {
        w4 = w5 = 0;
      } else if (std::isinf(f)) {
        w4 = f < 0 ? 0xfe : 0x7e;
        w5 = f < 0 ? 0xfb : 0x7b;
      } else {
        w4 = ref_round(grid_e4m3(), f, Round::rn, true);
        w5 = ref_round(grid_e5m2(), f, Round::rn, true);
      }
      ASSERT_EQ(e4 & 0xffu, w4) << std::hex << h;
      ASSERT_EQ(e5 & 0xffu, w5) << std::hex << h;
      ASSERT_EQ(cvt_e4m3x2_f32(f, 1.0f, relu), uint16_t(w4 << 8 | 0x38u));
      ASSERT_EQ(cvt_e5m2x2_f32(-1.0f, f, relu), uint16_t((relu ? 0 : 0xbc) << 8 | w5));
    }
  }
  // Every fp8 pattern to f16 exactly.
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t p4 = cvt_f16x2_e4m3x2(uint16_t(b << 8 | b));
    const uint32_t p5 = cvt_f16x2_e5m2x2(uint16_t(b << 8 | b));
    ASSERT_EQ(p4 >> 16, p4 & 0xffffu);
    const bool neg = b & 0x80u;
    const uint32_t m = b & 0x7fu;
    if (m == 0x7f) {
      EXPECT_EQ(p4 & 0xffffu, 0x7fffu);
    } else {
      const long double v = decode_ref(m, k_fmt_e4m3);
      EXPECT_EQ(static_cast<long double>(f16_to_f32(uint16_t(p4))), neg ? -v : v) << b;
      EXPECT_EQ((p4 & 0x8000u) != 0, neg);
    }
    if (m > 0x7c) {
      EXPECT_EQ(p5 & 0xffffu, 0x7fffu);
    } else if (m == 0x7c) {
      EXPECT_EQ(p5 & 0xffffu, neg ? 0xfc00u : 0x7c00u);
    } else {
      const long double v = decode_ref(m, k_fmt_e5m2);
      EXPECT_EQ(static_cast<long double>(f16_to_f32(uint16_t(p5))), neg ? -v : v) << b;
    }
    EXPECT_EQ(cvt_f16x2_e4m3x2(uint16_t(b), true) & 0xffffu,
              (neg && m != 0x7f) ? 0u : p4 & 0xffffu);
  }
}

// ---------------------------------------------------------------------------------------------
// Integer <-> float

struct IntType {
  Type type;
  unsigned width;
  bool is_signed;
};
constexpr IntType k_int_types[] = {
    {Type::u8, 8, false}, {Type::u16, 16, false}, {Type::u32, 32, false}, {Type::u64, 64, false},
    {Type::s8, 8, true},  {Type::s16, 16, true},  {Type::s32, 32, true},  {Type::s64, 64, true},
};

// The value of the low `width` bits of x as an integer of that type, exactly.
long double int_value(uint64_t x, const IntType& t) {
  if (t.width < 64) x &= (uint64_t(1) << t.width) - 1;
  if (t.is_signed && t.width < 64 && ((x >> (t.width - 1)) & 1)) x |= ~uint64_t(0) << t.width;
  return t.is_signed ? static_cast<long double>(int64_t(x)) : static_cast<long double>(x);
}

// The host's conversion of an exact long double to float/double under mode r.
uint32_t host_to_f32(long double x, Round r) {
  HostRounding hr(r);
  volatile long double v = x;
  volatile float f = float(v);
  return f32_bits(f);
}
uint64_t host_to_f64(long double x, Round r) {
  HostRounding hr(r);
  volatile long double v = x;
  volatile double d = double(v);
  return f64_bits(d);
}

std::vector<uint64_t> int_samples() {
  std::vector<uint64_t> xs;
  for (uint64_t i = 0; i < 70000; ++i) xs.push_back(i); // every u8/s8/u16/s16 value
  for (int i = 0; i < 64; ++i)
    for (int64_t d = -3; d <= 3; ++d) {
      xs.push_back((uint64_t(1) << i) + uint64_t(d));
      xs.push_back(uint64_t(0) - (uint64_t(1) << i) + uint64_t(d));
    }
  for (uint64_t v : {0x1000001ull, 0x1000003ull, 0x20000000000001ull, 0x7fffffffffffffffull,
                     0x8000000000000000ull, 0xffffffffffffffffull, 0xffffff7fffffffffull,
                     0xffffff8000000000ull, 0x8000008000000000ull, 0x8000018000000000ull})
    xs.push_back(v);
  for (int i = 0; i < 20000; ++i) xs.push_back(rand64() >> (rand32() % 64));
  return xs;
}

TEST(SemanticsConvert, IntToFloatEveryMode) {
  const std::vector<uint64_t> xs = int_samples();
  for (const IntType& t : k_int_types) {
    for (uint64_t x : xs) {
      if (t.width <= 16 && (x >> t.width) != 0) continue; // every pattern is already covered
      const long double v = int_value(x, t);
      for (Round r : k_rounds) {
        ASSERT_EQ(uint32_t(cvt(x, Type::f32, t.type, cvt_of(r))), host_to_f32(v, r))
            << x << " " << name_of(r) << " w" << t.width << t.is_signed;
        ASSERT_EQ(cvt(x, Type::f64, t.type, cvt_of(r)), host_to_f64(v, r));
        ASSERT_EQ(cvt(x, Type::f16, t.type, cvt_of(r)), ref_round(grid_f16(), v, r));
        ASSERT_EQ(cvt(x, Type::bf16, t.type, cvt_of(r)), ref_round(grid_bf16(), v, r));
      }
    }
  }
  // The inline forms agree.
  for (int i = 0; i < 100000; ++i) {
    const uint32_t x = rand32() >> (rand32() % 32);
    for (Round r : k_rounds) {
      ASSERT_EQ(f32_bits(cvt_f32_s32(int32_t(x), cvt_of(r))),
                uint32_t(cvt(x, Type::f32, Type::s32, cvt_of(r))));
      ASSERT_EQ(f32_bits(cvt_f32_u32(x, cvt_of(r))),
                uint32_t(cvt(x, Type::f32, Type::u32, cvt_of(r))));
    }
  }
  EXPECT_EQ(f32_bits(cvt_f32_s32(16777217, CvtMode::rp)), f32_bits(16777218.0f));
  EXPECT_EQ(f32_bits(cvt_f32_s32(16777217, CvtMode::rn)), f32_bits(16777216.0f));
  EXPECT_EQ(uint32_t(cvt(0xffffffffffffffffull, Type::f32, Type::u64, CvtMode::rz)), 0x5f7fffffu);
  EXPECT_EQ(uint32_t(cvt(0x8000000000000000ull, Type::f32, Type::s64, CvtMode::rz)), 0xdf000000u);
}

// The reference for float -> int: exact rounding in long double, then the ISA's clamping and
// NaN rule.
uint64_t ref_float_to_int(long double x, bool src_f64, const IntType& t, CvtMode m) {
  const unsigned w = t.width;
  if (x != x) {
    if (!src_f64 && w != 64) return 0;
    const uint64_t v = uint64_t(1) << (w - 1);
    return t.is_signed ? uint64_t(int64_t(v << (64 - w)) >> (64 - w)) : v;
  }
  long double r;
  switch (m) {
  case CvtMode::rni:
    r = std::nearbyint(x);
    break; // host mode is round-to-nearest-even
  case CvtMode::rmi:
    r = std::floor(x);
    break;
  case CvtMode::rpi:
    r = std::ceil(x);
    break;
  default:
    r = std::trunc(x);
    break;
  }
  const long double hi =
      t.is_signed ? std::ldexp(1.0L, int(w) - 1) - 1 : std::ldexp(1.0L, int(w)) - 1;
  const long double lo = t.is_signed ? -std::ldexp(1.0L, int(w) - 1) : 0;
  if (r > hi) r = hi;
  if (r < lo) r = lo;
  return t.is_signed ? uint64_t(static_cast<int64_t>(r)) : static_cast<uint64_t>(r);
}

constexpr CvtMode k_irnd[] = {CvtMode::rni, CvtMode::rzi, CvtMode::rmi, CvtMode::rpi};

TEST(SemanticsConvert, FloatToIntEveryModeSaturatesAndMapsNaN) {
  // Every f16 and bf16 pattern, to every integer type.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const long double vh = f16_to_f32(uint16_t(h)), vb = bf16_to_f32(uint16_t(h));
    for (const IntType& t : k_int_types)
      for (CvtMode m : k_irnd) {
        ASSERT_EQ(cvt(h, t.type, Type::f16, m), ref_float_to_int(vh, false, t, m)) << std::hex << h;
        ASSERT_EQ(cvt(h, t.type, Type::bf16, m), ref_float_to_int(vb, false, t, m))
            << std::hex << h;
      }
  }
  // Random f32 and f64.
  for (int i = 0; i < 60000; ++i) {
    const float f = i % 2 ? rand_f32() : rand_f32_exp(-3, 66);
    const double d = i % 3 ? rand_f64_exp(-3, 66) : f64_from_bits(rand64());
    for (const IntType& t : k_int_types)
      for (CvtMode m : k_irnd) {
        ASSERT_EQ(cvt(f32_bits(f), t.type, Type::f32, m), ref_float_to_int(f, false, t, m))
            << std::hexfloat << f << " w" << t.width << t.is_signed;
        ASSERT_EQ(cvt(f64_bits(d), t.type, Type::f64, m), ref_float_to_int(d, true, t, m))
            << std::hexfloat << d << " w" << t.width << t.is_signed;
      }
    for (CvtMode m : k_irnd) {
      ASSERT_EQ(uint32_t(cvt_s32_f32(f, m)), uint32_t(cvt(f32_bits(f), Type::s32, Type::f32, m)));
      ASSERT_EQ(cvt_u32_f32(f, m), uint32_t(cvt(f32_bits(f), Type::u32, Type::f32, m)));
      ASSERT_EQ(uint32_t(cvt_s32_f64(d, m)), uint32_t(cvt(f64_bits(d), Type::s32, Type::f64, m)));
      ASSERT_EQ(uint32_t(cvt_s32_f32(f, m, true)),
                uint32_t(cvt(f32_bits(f), Type::s32, Type::f32, m, true)));
    }
  }
  // The ISA's NaN rule and .ftz on subnormal inputs.
  const uint64_t nan32 = k_nan_f32, nan64 = 0x7ff8000000000000ull;
  EXPECT_EQ(cvt(nan32, Type::s32, Type::f32, CvtMode::rni), 0u);
  EXPECT_EQ(cvt(nan32, Type::u16, Type::f32, CvtMode::rni), 0u);
  EXPECT_EQ(cvt(nan32, Type::s64, Type::f32, CvtMode::rzi), 0x8000000000000000ull);
  EXPECT_EQ(cvt(nan32, Type::u64, Type::f32, CvtMode::rzi), 0x8000000000000000ull);
  EXPECT_EQ(cvt(nan64, Type::s32, Type::f64, CvtMode::rzi), 0xffffffff80000000ull);
  EXPECT_EQ(cvt(nan64, Type::u32, Type::f64, CvtMode::rzi), 0x80000000ull);
  EXPECT_EQ(cvt(nan64, Type::u8, Type::f64, CvtMode::rzi), 0x80ull);
  EXPECT_EQ(cvt(0x80000001u, Type::s32, Type::f32, CvtMode::rmi), ~uint64_t(0));
  EXPECT_EQ(cvt(0x80000001u, Type::s32, Type::f32, CvtMode::rmi, true), 0u);
  EXPECT_EQ(cvt(0x00000001u, Type::u32, Type::f32, CvtMode::rpi, true), 0u);
  EXPECT_EQ(cvt(0x00000001u, Type::u32, Type::f32, CvtMode::rpi), 1u);
}

// Integral rounding by the host's libm (nearbyint runs in the default round-to-nearest-even mode).
template <class F> F ref_integral(F x, CvtMode m) {
  switch (m) {
  case CvtMode::rni:
    return std::nearbyint(x);
  case CvtMode::rmi:
    return std::floor(x);
  case CvtMode::rpi:
    return std::ceil(x);
  default:
    return std::trunc(x);
  }
}

TEST(SemanticsConvert, FloatToIntegralFloat) {
  for (int i = 0; i < 200000; ++i) {
    const float f = i % 2 ? rand_f32() : rand_f32_exp(-3, 25);
    const double d = i % 2 ? f64_from_bits(rand64()) : rand_f64_exp(-3, 54);
    for (CvtMode m : k_irnd) {
      const float rf = ref_integral(f, m);
      const double rd = ref_integral(d, m);
      ASSERT_EQ(uint32_t(cvt(f32_bits(f), Type::f32, Type::f32, m)),
                f != f ? k_nan_f32 : f32_bits(rf))
          << std::hexfloat << f;
      if (d == d) {
        ASSERT_EQ(cvt(f64_bits(d), Type::f64, Type::f64, m), f64_bits(rd)) << std::hexfloat << d;
      }
    }
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (is_nan_f16(uint16_t(h))) continue;
    const float f = f16_to_f32(uint16_t(h));
    for (CvtMode m : k_irnd)
      ASSERT_EQ(cvt(h, Type::f16, Type::f16, m), f32_to_f16_rn(ref_integral(f, m))) << h;
  }
  EXPECT_EQ(uint32_t(cvt(f32_bits(-0.25f), Type::f32, Type::f32, CvtMode::rpi)), 0x80000000u);
  EXPECT_EQ(uint32_t(cvt(f32_bits(2.5f), Type::f32, Type::f32, CvtMode::rni)), f32_bits(2.0f));
  EXPECT_EQ(uint32_t(cvt(0x80000005u, Type::f32, Type::f32, CvtMode::rmi, true)), 0x80000000u);
  EXPECT_EQ(uint32_t(cvt(0x80000005u, Type::f32, Type::f32, CvtMode::rmi)), f32_bits(-1.0f));
}

TEST(SemanticsConvert, IntToIntTruncatesExtendsAndSaturates) {
  std::vector<uint64_t> xs;
  for (uint64_t i = 0; i < 256; ++i) xs.push_back(i);
  for (int i = 0; i < 4000; ++i) xs.push_back(rand64() >> (rand32() % 64));
  for (const IntType& s : k_int_types)
    for (const IntType& d : k_int_types)
      for (uint64_t x : xs) {
        const long double v = int_value(x, s);
        // Without .sat: the value's two's-complement bits, cut to the destination width and read
        // as the destination type; signed results come back sign-extended to 64 bits.
        const uint64_t twos = s.is_signed ? uint64_t(int64_t(v)) : uint64_t(v);
        const long double dv = int_value(twos, d);
        const uint64_t want = d.is_signed ? uint64_t(int64_t(dv)) : uint64_t(dv);
        ASSERT_EQ(cvt(x, d.type, s.type, CvtMode::none), want)
            << x << " s" << s.width << s.is_signed << " d" << d.width << d.is_signed;
        // With .sat: the value clamped to the destination range.
        const long double hi = d.is_signed ? std::ldexp(1.0L, int(d.width) - 1) - 1
                                           : std::ldexp(1.0L, int(d.width)) - 1;
        const long double lo = d.is_signed ? -std::ldexp(1.0L, int(d.width) - 1) : 0;
        const long double c = std::min(std::max(v, lo), hi);
        const uint64_t wsat = d.is_signed ? uint64_t(int64_t(c)) : uint64_t(c);
        ASSERT_EQ(cvt(x, d.type, s.type, CvtMode::none, false, true), wsat);
      }
  EXPECT_EQ(cvt(0xfffffffbu, Type::u32, Type::s8, CvtMode::none), 0xfffffffbu);
  EXPECT_EQ(cvt(0xfbu, Type::u32, Type::s8, CvtMode::none, false, true), 0u);
  EXPECT_EQ(cvt(0x1234u, Type::s8, Type::u16, CvtMode::none, false, true), 0x7fu);
  EXPECT_EQ(cvt(0x80u, Type::s16, Type::s8, CvtMode::none), 0xffffffffffffff80ull);
}

// ---------------------------------------------------------------------------------------------
// f32 arithmetic: every mode, .ftz, .sat, against the host under fesetround

enum class Op { add, sub, mul, fma, div, sqrt, rcp };

float host_op(Op op, float a, float b, float c) {
  volatile float x = a, y = b, z = c;
  switch (op) {
  case Op::add: {
    volatile float r = x + y;
    return r;
  }
  case Op::sub: {
    volatile float r = x - y;
    return r;
  }
  case Op::mul: {
    volatile float r = x * y;
    return r;
  }
  case Op::fma: {
    volatile float r = std::fma(float(x), float(y), float(z));
    return r;
  }
  case Op::div: {
    volatile float r = x / y;
    return r;
  }
  case Op::sqrt: {
    volatile float r = std::sqrt(float(x));
    return r;
  }
  case Op::rcp: {
    volatile float r = 1.0f / x;
    return r;
  }
  }
  return 0;
}

float impl_op(Op op, float a, float b, float c, Round r, bool ftz, bool sat) {
  switch (op) {
  case Op::add:
    return add_f32(a, b, r, ftz, sat);
  case Op::sub:
    return sub_f32(a, b, r, ftz, sat);
  case Op::mul:
    return mul_f32(a, b, r, ftz, sat);
  case Op::fma:
    return fma_f32(a, b, c, r, ftz, sat);
  case Op::div:
    return div_f32(a, b, r, ftz);
  case Op::sqrt:
    return sqrt_f32(a, r, ftz);
  case Op::rcp:
    return rcp_f32(a, r, ftz);
  }
  return 0;
}

struct Triple {
  float a, b, c;
};

std::vector<Triple> f32_operands(Op op) {
  std::vector<Triple> v;
  for (int i = 0; i < 60000; ++i) {
    Triple t{rand_f32(), rand_f32(), rand_f32()};
    switch (i % 6) {
    case 0: // close exponents: cancellation and exact zeros
      t.a = rand_f32_exp(-10, 10);
      t.b = (rand32() & 1) ? -t.a * (1 + float(rand32() % 16) * 0x1p-23f) : rand_f32_exp(-10, 10);
      t.c = -t.a * t.b;
      if (rand32() & 1) t.c = std::nextafter(t.c, 0.0f);
      break;
    case 1: // subnormal results
      t.a = rand_f32_exp(-75, -50);
      t.b = rand_f32_exp(-75, -50);
      t.c = f32_from_bits(rand32() & 0x80ffffffu);
      break;
    case 2: // overflow
      t.a = rand_f32_exp(60, 127);
      t.b = rand_f32_exp(60, 127);
      t.c = rand_f32_exp(120, 127);
      break;
    case 3: // far-apart magnitudes
      t.a = rand_f32_exp(-60, 60);
      t.b = rand_f32_exp(-60, 60);
      t.c = rand_f32_exp(-126, 127);
      break;
    default:
      break;
    }
    if (op == Op::sqrt && (rand32() & 3)) t.a = std::fabs(t.a);
    v.push_back(t);
  }
  for (float s : {0.0f, -0.0f, 1.0f, -1.0f, 0x1p-149f, -0x1p-149f, 0x1p-126f, 0x1.fffffep127f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::nanf("")})
    for (float t :
         {0.0f, -0.0f, 1.0f, -1.0f, 0x1p-149f, 0x1p-126f, 0x1.fffffep127f, 0.5f,
          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
      v.push_back({s, t, -t});
  return v;
}

float flush_ref(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

TEST(SemanticsF32, EveryOpEveryModeFtzSatMatchesHost) {
  for (Op op : {Op::add, Op::sub, Op::mul, Op::fma, Op::div, Op::sqrt, Op::rcp}) {
    const std::vector<Triple> in = f32_operands(op);
    for (Round r : k_rounds) {
      for (bool ftz : {false, true}) {
        std::vector<float> want(in.size());
        {
          HostRounding hr(r);
          for (size_t i = 0; i < in.size(); ++i) {
            Triple t = in[i];
            if (ftz) t = {flush_ref(t.a), flush_ref(t.b), flush_ref(t.c)};
            want[i] = host_op(op, t.a, t.b, t.c);
          }
        }
        for (size_t i = 0; i < in.size(); ++i) {
          const Triple& t = in[i];
          float w = want[i];
          if (ftz) w = flush_ref(w);
          const uint32_t wb = w != w ? k_nan_f32 : f32_bits(w);
          const float got = impl_op(op, t.a, t.b, t.c, r, ftz, false);
          ASSERT_EQ(f32_bits(got), wb)
              << "op " << int(op) << " " << name_of(r) << " ftz " << ftz << std::hexfloat
              << " a=" << t.a << " b=" << t.b << " c=" << t.c;
          if (op == Op::add || op == Op::sub || op == Op::mul || op == Op::fma) {
            const float s = impl_op(op, t.a, t.b, t.c, r, ftz, true);
            const float ws = !(w > 0) ? 0.0f : (w > 1 ? 1.0f : w);
            ASSERT_EQ(f32_bits(s), f32_bits(ws)) << std::hexfloat << t.a << " " << t.b;
          }
        }
      }
    }
  }
}

TEST(SemanticsF32, ZeroSignsAndNaN) {
  EXPECT_EQ(f32_bits(add_f32(1.0f, -1.0f, Round::rm)), 0x80000000u);
  EXPECT_EQ(f32_bits(add_f32(1.0f, -1.0f, Round::rz)), 0u);
  EXPECT_EQ(f32_bits(add_f32(-0.0f, -0.0f, Round::rp)), 0x80000000u);
  EXPECT_EQ(f32_bits(add_f32(-0.0f, 0.0f, Round::rm)), 0x80000000u);
  EXPECT_EQ(f32_bits(fma_f32(-1.0f, 0.0f, 0.0f, Round::rp)), 0u);
  EXPECT_EQ(f32_bits(fma_f32(-1.0f, 0.0f, -0.0f, Round::rp)), 0x80000000u);
  EXPECT_EQ(f32_bits(add_f32(std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity())),
            k_nan_f32);
  EXPECT_EQ(f32_bits(mul_f32(f32_from_bits(0xffc00001u), 2.0f, Round::rz)), k_nan_f32);
  EXPECT_EQ(f32_bits(add_f32(std::nanf(""), 1.0f, Round::rn, false, true)), 0u);
  EXPECT_EQ(f32_bits(mul_f32(-0.5f, 0.5f, Round::rn, false, true)), 0u);
  EXPECT_EQ(f32_bits(mul_f32(0x1p-100f, 0x1p-30f, Round::rp, true)), 0u);
  EXPECT_EQ(f32_bits(mul_f32(0x1p-100f, 0x1p-30f, Round::rp)), f32_bits(0x1p-130f));
  EXPECT_EQ(f32_bits(mul_f32(0x1.fffffep127f, 2.0f, Round::rz)), 0x7f7fffffu);
  EXPECT_EQ(f32_bits(mul_f32(0x1.fffffep127f, -2.0f, Round::rp)), 0xff7fffffu);
  EXPECT_EQ(f32_bits(div_f32(1.0f, 3.0f, Round::rp)), 0x3eaaaaabu); // 1/3 = 0x3eaaaaaa.aa…
  EXPECT_EQ(f32_bits(div_f32(1.0f, 3.0f, Round::rz)), 0x3eaaaaaau);
  EXPECT_EQ(f32_bits(div_f32(-1.0f, 3.0f, Round::rp)), 0xbeaaaaaau);
  EXPECT_EQ(f32_bits(sqrt_f32(-0.0f, Round::rm)), 0x80000000u);
  EXPECT_EQ(f32_bits(sqrt_f32(-1.0f, Round::rz)), k_nan_f32);
}

// ---------------------------------------------------------------------------------------------
// f64 arithmetic in directed modes against error-free transformations

// s is the rounded-to-nearest result and e the sign of the exact remainder (exact = s + tiny*e,
// never a tie): the directed result.
double directed(double s, double e, Round r) {
  if (e == 0 || std::isinf(s)) return s;
  const double inf = std::numeric_limits<double>::infinity();
  switch (r) {
  case Round::rp:
    return e > 0 ? std::nextafter(s, inf) : s;
  case Round::rm:
    return e < 0 ? std::nextafter(s, -inf) : s;
  case Round::rz:
    return (s > 0) == (e < 0) ? std::nextafter(s, 0.0) : s;
  default:
    return s;
  }
}

TEST(SemanticsF64, DirectedModesMatchErrorFreeTransformations) {
  for (int i = 0; i < 200000; ++i) {
    const double a = rand_f64_exp(-400, 400),
                 b = i % 2 ? rand_f64_exp(-400, 400) : a * rand_f64_exp(-3, 3);
    // add: TwoSum
    const double s = a + b, bb = s - a, e = (a - (s - bb)) + (b - bb);
    // mul: the fma residual
    const double p = a * b, pe = std::fma(a, b, -p);
    // div and sqrt: remainders
    const double q = a / b, qr = std::fma(-q, b, a),
                 qe = (qr == 0) ? 0 : ((qr < 0) == (b < 0) ? 1 : -1);
    const double aa = std::fabs(a), rt = std::sqrt(aa), rr = std::fma(-rt, rt, aa);
    for (Round r : k_rounds) {
      if (s != 0) {
        ASSERT_EQ(f64_bits(add_f64(a, b, r)), f64_bits(directed(s, e, r)))
            << std::hexfloat << a << " " << b;
      }
      ASSERT_EQ(f64_bits(sub_f64(a, -b, r)), f64_bits(add_f64(a, b, r)));
      ASSERT_EQ(f64_bits(mul_f64(a, b, r)), f64_bits(directed(p, pe, r)))
          << std::hexfloat << a << " " << b;
      ASSERT_EQ(f64_bits(div_f64(a, b, r)), f64_bits(directed(q, qe, r)))
          << std::hexfloat << a << " " << b;
      ASSERT_EQ(f64_bits(sqrt_f64(aa, r)), f64_bits(directed(rt, rr, r))) << std::hexfloat << aa;
      ASSERT_EQ(f64_bits(rcp_f64(b, r)), f64_bits(div_f64(1.0, b, r)));
    }
  }
  // fma: a*b + c with overlapping exponents is exact in __float128; one rounding to double.
  for (int i = 0; i < 100000; ++i) {
    const double a = rand_f64_exp(-200, 200), b = rand_f64_exp(-200, 200);
    const int pe = std::ilogb(a) + std::ilogb(b);
    const double c = rand_f64_exp(pe - 4, pe + 4);
    const __float128 exact = __float128(a) * __float128(b) + __float128(c);
    for (Round r : k_rounds) {
      double want;
      {
        HostRounding hr(r);
        volatile __float128 x = exact;
        volatile double d = double(x);
        want = d;
      }
      if (exact == 0) continue;
      ASSERT_EQ(f64_bits(fma_f64(a, b, c, r)), f64_bits(want))
          << std::hexfloat << a << " " << b << " " << c;
    }
  }
  EXPECT_EQ(f64_bits(add_f64(1.0, -1.0, Round::rm)), 0x8000000000000000ull);
  EXPECT_EQ(f64_bits(add_f64(1.0, -1.0, Round::rp)), 0u);
  EXPECT_EQ(mul_f64(0x1.fffffffffffffp1023, 2.0, Round::rz), 0x1.fffffffffffffp1023);
  EXPECT_EQ(mul_f64(0x1.fffffffffffffp1023, 2.0, Round::rm), 0x1.fffffffffffffp1023);
  EXPECT_TRUE(std::isinf(mul_f64(0x1.fffffffffffffp1023, 2.0, Round::rp)));
  EXPECT_EQ(mul_f64(0x1p-1074, 0.5, Round::rp), 0x1p-1074);
  EXPECT_EQ(f64_bits(mul_f64(-0x1p-1074, 0.5, Round::rp)), 0x8000000000000000ull);
  EXPECT_EQ(fma_f64(1.0, 1.0, 0x1p-60, Round::rp), std::nextafter(1.0, 2.0));
  EXPECT_EQ(fma_f64(1.0, 1.0, -0x1p-60, Round::rz), std::nextafter(1.0, 0.0));
  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
}

// ---------------------------------------------------------------------------------------------
// Half-precision arithmetic against exact integer arithmetic

struct Exact {
  __int128 n = 0; // value = n * 2^e
  int e = 0;
};

// A finite f16/bf16 value as an exact pair.
Exact exact_of(uint16_t h, const FloatFormat& f) {
  const uint32_t mag = h & 0x7fffu;
  const uint32_t be = mag >> f.mant_bits, frac = mag & ((1u << f.mant_bits) - 1);
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  Exact x;
  x.n = be == 0 ? frac : (frac | 1u << f.mant_bits);
  x.e = (be == 0 ? 1 : int(be)) - bias - f.mant_bits;
  if (h & 0x8000u) x.n = -x.n;
  return x;
}

int bit_length(__int128 v) {
  const unsigned __int128 u =
      v < 0 ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  const uint64_t hi = uint64_t(u >> 64), lo = uint64_t(u);
  if (hi) return 128 - std::countl_zero(hi);
  return 64 - std::countl_zero(lo);
}

// x + y exactly, when the result fits (false otherwise).
bool exact_add(const Exact& x, const Exact& y, Exact& out) {
  if (x.n == 0) {
    out = y;
    return true;
  }
  if (y.n == 0) {
    out = x;
    return true;
  }
  const int e = std::min(x.e, y.e);
  const int sx = x.e - e, sy = y.e - e;
  if (bit_length(x.n) + sx > 120 || bit_length(y.n) + sy > 120) return false;
  out.n = x.n * (__int128(1) << sx) + y.n * (__int128(1) << sy);
  out.e = e;
  return true;
}

// Compare |x| with |y| exactly: -1, 0, 1.
int compare_mag(const Exact& x, const Exact& y) {
  const __int128 a = x.n < 0 ? -x.n : x.n, b = y.n < 0 ? -y.n : y.n;
  if (a == 0 || b == 0) return (a != 0) - (b != 0);
  const int ba = bit_length(a) + x.e, bb = bit_length(b) + y.e;
  if (ba != bb) return ba < bb ? -1 : 1;
  // Same magnitude class: align to the smaller exponent (no overflow: equal top bits).
  const __int128 sa = x.e > y.e ? a << (x.e - y.e) : a, sb = y.e > x.e ? b << (y.e - x.e) : b;
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

// Every nonnegative finite value of a grid as an exact pair.
const std::vector<Exact>& exact_grid(const Grid& g) {
  static std::vector<Exact> f16, bf16;
  std::vector<Exact>& v = g.fmt.mant_bits == 10 ? f16 : bf16;
  if (v.empty())
    for (uint64_t m : g.bits) v.push_back(exact_of(uint16_t(m), g.fmt));
  return v;
}

// x rounded to nearest even in the grid's format, by exact comparison with its neighbours.
uint16_t ref_round_exact(const Grid& g, const Exact& x) {
  const std::vector<Exact>& ev = exact_grid(g);
  const uint16_t sign = x.n < 0 ? 0x8000u : 0u;
  size_t lo = 0, hi = ev.size(); // the last value <= |x|
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    if (compare_mag(x, ev[mid]) >= 0)
      lo = mid;
    else
      hi = mid;
  }
  if (compare_mag(x, ev[lo]) == 0) return uint16_t(sign | g.bits[lo]);
  const bool top = lo + 1 == ev.size();
  Exact up;
  if (top) { // the next power of two
    up.n = 1;
    up.e = std::ilogb(static_cast<double>(g.virtual_next));
  } else {
    up = ev[lo + 1];
  }
  Exact twice = x, sum;
  twice.e += 1;
  exact_add(ev[lo], up, sum);
  const int c = compare_mag(twice, sum);
  const bool pick_up = c > 0 || (c == 0 && (top || (g.bits[lo] & 1)));
  if (!pick_up) return uint16_t(sign | g.bits[lo]);
  if (top) return uint16_t(sign | ((1u << g.fmt.exp_bits) - 1) << g.fmt.mant_bits);
  return uint16_t(sign | g.bits[lo + 1]);
}

uint16_t rand_half(const FloatFormat& f, int lo_exp, int hi_exp) {
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const uint32_t pick = rand32() % 8;
  if (pick == 0) return uint16_t(rand32() & (0x8000u | ((1u << f.mant_bits) - 1))); // subnormal
  const int e = std::clamp(lo_exp + int(rand32() % uint32_t(hi_exp - lo_exp + 1)), 1 - bias, bias);
  return uint16_t((rand32() & (0x8000u | ((1u << f.mant_bits) - 1))) | uint32_t(e + bias)
                                                                           << f.mant_bits);
}

template <bool bf> void check_half_arith(int samples, int lo_exp, int hi_exp) {
  const FloatFormat& f = bf ? k_fmt_bf16 : k_fmt_f16;
  const Grid& g = bf ? grid_bf16() : grid_f16();
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  int checked = 0;
  for (int i = 0; i < samples; ++i) {
    const uint16_t a = rand_half(f, lo_exp, hi_exp), b = rand_half(f, lo_exp, hi_exp);
    uint16_t c = rand_half(f, lo_exp, hi_exp);
    if (i % 2 == 0) { // c near a*b, so that the sum cancels or carries
      const int ea = int((a >> f.mant_bits) & ((1u << f.exp_bits) - 1)) - bias;
      const int eb = int((b >> f.mant_bits) & ((1u << f.exp_bits) - 1)) - bias;
      const int ec = std::clamp(ea + eb + int(rand32() % 5) - 2, 1 - bias, bias);
      c = uint16_t((rand32() & (0x8000u | ((1u << f.mant_bits) - 1))) | uint32_t(ec + bias)
                                                                            << f.mant_bits);
    }
    const Exact xa = exact_of(a, f), xb = exact_of(b, f), xc = exact_of(c, f);
    Exact sum, prod, fma;
    prod.n = xa.n * xb.n;
    prod.e = xa.e + xb.e;
    const bool sum_ok = exact_add(xa, xb, sum), fma_ok = exact_add(prod, xc, fma);
    const uint16_t got_add = bf ? add_bf16(a, b) : add_f16(a, b);
    const uint16_t got_mul = bf ? mul_bf16(a, b) : mul_f16(a, b);
    const uint16_t got_fma = bf ? fma_bf16(a, b, c) : fma_f16(a, b, c);
    if (sum_ok && sum.n != 0) {
      ASSERT_EQ(got_add, ref_round_exact(g, sum)) << std::hex << a << " " << b;
    }
    if (sum_ok && sum.n == 0) {
      ASSERT_EQ(got_add, (a & b) & 0x8000u) << std::hex << a << " " << b;
    }
    if (prod.n != 0) {
      ASSERT_EQ(got_mul, ref_round_exact(g, prod)) << std::hex << a << " " << b;
    }
    if (fma_ok && fma.n != 0) {
      ASSERT_EQ(got_fma, ref_round_exact(g, fma)) << std::hex << a << " " << b << " " << c;
      ++checked;
    }
  }
  EXPECT_GT(checked, samples / 2);
}

TEST(SemanticsHalfArith, F16AddMulFmaCorrectlyRounded) {
  check_half_arith<false>(600000, -14, 15);
  // Exhaustive in a: every f16 against a few b.
  for (uint32_t a = 0; a < 0x10000; ++a) {
    if ((a & 0x7c00u) == 0x7c00u) continue;
    for (int k = 0; k < 16; ++k) {
      const uint16_t b = rand_half(k_fmt_f16, -14, 15);
      Exact s;
      ASSERT_TRUE(exact_add(exact_of(uint16_t(a), k_fmt_f16), exact_of(b, k_fmt_f16), s));
      if (s.n != 0) {
        ASSERT_EQ(add_f16(uint16_t(a), b), ref_round_exact(grid_f16(), s)) << a << " " << b;
      }
    }
  }
}

TEST(SemanticsHalfArith, Bf16AddMulFmaCorrectlyRounded) {
  check_half_arith<true>(400000, -40, 40);
  check_half_arith<true>(200000, -75, -55); // subnormal products
  check_half_arith<true>(200000, 100, 127); // overflow
}

TEST(SemanticsHalfArith, ModifiersAndSpecials) {
  const uint16_t one = 0x3c00u, two = 0x4000u, inf = 0x7c00u, ninf = 0xfc00u;
  EXPECT_EQ(add_f16(inf, ninf), k_nan_f16);
  EXPECT_EQ(add_f16(0x7e01u, one), k_nan_f16);
  EXPECT_EQ(add_f16(one, two, false, true), one); // .sat
  EXPECT_EQ(sub_f16(one, two, false, true), 0u);
  EXPECT_EQ(add_f16(inf, ninf, false, true), 0u); // NaN -> +0
  EXPECT_EQ(mul_f16(0x0001u, 0x3800u), 0x0000u);  // tie to even: 0
  EXPECT_EQ(mul_f16(0x0003u, 0x3800u), 0x0002u);
  EXPECT_EQ(mul_f16(0x0200u, 0x4000u, true), 0x0000u); // .ftz input
  EXPECT_EQ(mul_f16(0x0400u, 0x3800u, true), 0x0000u); // .ftz result
  EXPECT_EQ(mul_f16(0x8400u, 0x3800u, true), 0x8000u);
  EXPECT_EQ(fma_f16(0xc000u, one, one, false, false, true), 0u); // .relu
  EXPECT_EQ(fma_f16(inf, 0, one, false, false, true), k_nan_f16);
  EXPECT_EQ(fma_f16(one, one, 0xbc00u), 0u);
  EXPECT_EQ(fma_f16(0x8000u, one, 0x8000u), 0x8000u);
  EXPECT_EQ(fma_bf16(0xc000u, 0x3f80u, 0x3f80u, true), 0u);
  EXPECT_EQ(fma_bf16(0x7f80u, 0x3f80u, 0xff80u), k_nan_bf16);
  EXPECT_EQ(add_bf16(0x7f7fu, 0x7f7fu), 0x7f80u);
  EXPECT_EQ(add_f16x2(0x3c004000u, 0x3c003c00u), 0x40004200u); // {2+1, 1+1}
  EXPECT_EQ(fma_f16x2(0x3c004000u, 0x3c004000u, 0x00000000u), 0x3c004400u);
  EXPECT_EQ(neg_f16x2(0x3c000001u, true), 0xbc008000u);
  EXPECT_EQ(abs_bf16x2(0xbf80ffffu), 0x3f807fffu);
  // min/max: -0 < +0, NaN handling, xorsign.abs.
  EXPECT_EQ(min_f16(0x8000u, 0x0000u), 0x8000u);
  EXPECT_EQ(max_f16(0x8000u, 0x0000u), 0x0000u);
  EXPECT_EQ(min_f16(0x7e00u, two), two);
  EXPECT_EQ(min_f16(0x7e00u, two, false, true), k_nan_f16);
  EXPECT_EQ(max_f16(0xc200u, one, false, false, true), 0xc200u); // |-3| vs |1|, sign -^+ = -
  EXPECT_EQ(min_bf16(0xc040u, 0xbf80u, false, true), 0x3f80u);
  EXPECT_EQ(max_f16x2(0x3c00c000u, 0x4000bc00u), 0x4000bc00u);
  EXPECT_EQ(min_f16(0x0001u, 0x8002u, true), 0x8000u); // .ftz: both zero
  EXPECT_TRUE(cmp_f16(Cmp::lt, 0xbc00u, 0x3c00u));
  EXPECT_TRUE(cmp_f16(Cmp::eq, 0x0001u, 0x8000u, true));
  EXPECT_FALSE(cmp_f16(Cmp::eq, 0x0001u, 0x8000u));
  EXPECT_TRUE(cmp_bf16(Cmp::nan, 0x7fc0u, 0x3f80u));
}

// ---------------------------------------------------------------------------------------------
// min/max/abs/neg/copysign/testp/compare on f32 and f64

TEST(SemanticsF32, MinMaxPerIsaPseudocode) {
  const float nan = f32_from_bits(0x7fc00001u), inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_bits(min_f32(-0.0f, 0.0f)), 0x80000000u);
  EXPECT_EQ(f32_bits(min_f32(0.0f, -0.0f)), 0x80000000u);
  EXPECT_EQ(f32_bits(max_f32(-0.0f, 0.0f)), 0u);
  EXPECT_EQ(f32_bits(max_f32(0.0f, -0.0f)), 0u);
  EXPECT_EQ(min_f32(nan, 2.0f), 2.0f);
  EXPECT_EQ(max_f32(-inf, nan), -inf);
  EXPECT_EQ(f32_bits(min_f32(nan, nan)), k_nan_f32);
  EXPECT_EQ(f32_bits(min_f32(nan, 2.0f, false, true)), k_nan_f32);
  EXPECT_EQ(f32_bits(max_f32(1.0f, nan, false, true)), k_nan_f32);
  EXPECT_EQ(min_f32(-3.0f, 2.0f, false, false, true), -2.0f); // min(|-3|, |2|), sign - ^ +
  EXPECT_EQ(max_f32(-3.0f, -2.0f, false, false, true), 3.0f); // sign - ^ - = +
  EXPECT_EQ(f32_bits(min_f32(nan, -2.0f, false, false, true)), f32_bits(-2.0f)); // sign of NaN: +
  EXPECT_EQ(f32_bits(min_f32(nan, 2.0f, false, true, true)), k_nan_f32);
  EXPECT_EQ(f32_bits(min_f32(0x1p-140f, -0x1p-140f, true)), 0x80000000u);
  EXPECT_EQ(f32_bits(max_f32(0x1p-140f, 0.0f)), f32_bits(0x1p-140f));
  EXPECT_EQ(min3_f32(3.0f, nan, -1.0f), -1.0f);
  EXPECT_EQ(max3_f32(-3.0f, 2.0f, -1.0f, false, false, true), 3.0f);
  EXPECT_EQ(f32_bits(max3_f32(-3.0f, 2.0f, nan, false, true)), k_nan_f32);
  EXPECT_EQ(f64_bits(min_f64(-0.0, 0.0)), 0x8000000000000000ull);
  EXPECT_EQ(max_f64(std::nan(""), 1.5), 1.5);
  EXPECT_TRUE(std::isnan(max_f64(std::nan(""), std::nan(""))));
  // Random pairs: ordinary values equal the obvious comparison.
  for (int i = 0; i < 100000; ++i) {
    const float a = rand_f32(), b = rand_f32();
    if (a != a || b != b || a == b) continue;
    ASSERT_EQ(min_f32(a, b), a < b ? a : b);
    ASSERT_EQ(max_f32(a, b), a > b ? a : b);
  }
}

TEST(SemanticsF32, AbsNegCopysignTestp) {
  EXPECT_EQ(f32_bits(abs_f32(-0.0f)), 0u);
  EXPECT_EQ(f32_bits(neg_f32(0.0f)), 0x80000000u);
  EXPECT_EQ(f32_bits(abs_f32(-0x1p-140f, true)), 0u);
  EXPECT_EQ(f32_bits(neg_f32(0x1p-140f, true)), 0x80000000u);
  EXPECT_EQ(f64_bits(abs_f64(f64_from_bits(0xfff8000000000001ull))), 0xfff8000000000001ull);
  EXPECT_EQ(f64_bits(abs_f64(-2.0)), f64_bits(2.0));
  EXPECT_EQ(copysign_f32(-1.0f, 2.5f), -2.5f); // sign of a, value of b
  EXPECT_EQ(copysign_f32(1.0f, -2.5f), 2.5f);
  EXPECT_EQ(copysign_f64(-0.0, 3.0), -3.0);
  struct Case {
    uint32_t bits;
    bool finite, infinite, number, notanumber, normal, subnormal;
  };
  const Case cases[] = {
      {0x00000000u, 1, 0, 1, 0, 1, 0}, {0x80000000u, 1, 0, 1, 0, 1, 0},
      {0x00000001u, 1, 0, 1, 0, 0, 1}, {0x807fffffu, 1, 0, 1, 0, 0, 1},
      {0x00800000u, 1, 0, 1, 0, 1, 0}, {0x7f7fffffu, 1, 0, 1, 0, 1, 0},
      {0x7f800000u, 0, 1, 1, 0, 0, 0}, {0xff800000u, 0, 1, 1, 0, 0, 0},
      {0x7fc00000u, 0, 0, 0, 1, 0, 0}, {0xff800001u, 0, 0, 0, 1, 0, 0},
  };
  for (const Case& c : cases) {
    const float f = f32_from_bits(c.bits);
    const double d = double(f);
    EXPECT_EQ(testp_f32(TestOp::finite, f), c.finite) << std::hex << c.bits;
    EXPECT_EQ(testp_f32(TestOp::infinite, f), c.infinite) << std::hex << c.bits;
    EXPECT_EQ(testp_f32(TestOp::number, f), c.number) << std::hex << c.bits;
    EXPECT_EQ(testp_f32(TestOp::notanumber, f), c.notanumber) << std::hex << c.bits;
    EXPECT_EQ(testp_f32(TestOp::normal, f), c.normal) << std::hex << c.bits;
    EXPECT_EQ(testp_f32(TestOp::subnormal, f), c.subnormal) << std::hex << c.bits;
    EXPECT_EQ(testp_f64(TestOp::finite, d), c.finite);
    EXPECT_EQ(testp_f64(TestOp::notanumber, d), c.notanumber);
    EXPECT_EQ(testp_f64(TestOp::normal, d), c.normal || c.subnormal)
        << std::hex << c.bits; // f32 subnormals are f64 normals
  }
  EXPECT_TRUE(testp_f64(TestOp::subnormal, 0x1p-1074));
  EXPECT_FALSE(testp_f64(TestOp::normal, 0x1p-1074));
}

TEST(SemanticsCompare, FloatOperatorsOverSpecialValues) {
  const float vals[] = {
      std::nanf(""), -std::numeric_limits<float>::infinity(), -1.0f, -0.0f, 0.0f, 0x1p-149f,
      1.0f,          std::numeric_limits<float>::infinity()};
  for (float a : vals)
    for (float b : vals) {
      const bool un = a != a || b != b;
      const bool lt = !un && a < b, eq = !un && a == b, gt = !un && a > b;
      const bool expect[] = {
          eq,       !un && !eq,     lt,       lt || eq,       gt,       gt || eq,
          lt,       lt || eq,       gt,       gt || eq,       un || eq, un || !eq,
          un || lt, un || lt || eq, un || gt, un || gt || eq, !un,      un};
      for (int op = 0; op < 18; ++op) {
        EXPECT_EQ(cmp_f32(Cmp(op), a, b), expect[op]) << op << " " << a << " " << b;
        EXPECT_EQ(cmp_f64(Cmp(op), double(a), double(b)), expect[op]) << op;
        EXPECT_EQ(cmp_f16(Cmp(op), f32_to_f16_rn(a), f32_to_f16_rn(b)),
                  cmp_f32(Cmp(op), f16_to_f32(f32_to_f16_rn(a)), f16_to_f32(f32_to_f16_rn(b))));
      }
    }
  EXPECT_TRUE(cmp_f32(Cmp::eq, 0x1p-140f, 0.0f, true));
  EXPECT_FALSE(cmp_f32(Cmp::eq, 0x1p-140f, 0.0f));
  EXPECT_EQ(set_u32(true), 0xffffffffu);
  EXPECT_EQ(set_f32(true), 1.0f);
  EXPECT_EQ(set_f32(false), 0.0f);
}

TEST(SemanticsCompare, IntegerOperatorsEveryByte) {
  for (int a = 0; a < 256; ++a)
    for (int b = 0; b < 256; ++b) {
      const int sa = int8_t(a), sb = int8_t(b);
      const bool su[] = {a == b, a != b, a<b, a <= b, a> b, a >= b, a<b, a <= b, a> b, a >= b};
      const bool ss[] = {sa == sb, sa != sb,          sa<sb, sa <= sb, sa> sb,
                         sa >= sb, a<b, a <= b, a> b, a >= b};
      for (int op = 0; op < 10; ++op) {
        ASSERT_EQ(cmp_int(Cmp(op), uint8_t(a), uint8_t(b)), su[op]);
        ASSERT_EQ(cmp_int(Cmp(op), int8_t(a), int8_t(b)), ss[op]);
        ASSERT_EQ(cmp_int(Cmp(op), int32_t(sa), int32_t(sb)),
                  ss[op]); // sign-extension keeps the unsigned order
      }
    }
  EXPECT_TRUE(cmp_int(Cmp::lo, int32_t(1), int32_t(-1)));
  EXPECT_TRUE(cmp_int(Cmp::hs, uint64_t(~0ull), uint64_t(5)));
}

// ---------------------------------------------------------------------------------------------
// .approx functions against their ISA bounds

struct MaxErr {
  double value = 0;
  double at = 0;
  void add(double e, double x) {
    if (e > value) {
      value = e;
      at = x;
    }
  }
};

// ulp of the correctly rounded float near y.
long double ulp_f32(long double y) {
  const float f = float(std::fabs(y));
  if (f >= std::numeric_limits<float>::max()) return std::ldexp(1.0L, 104);
  if (f < 0x1p-126f) return std::ldexp(1.0L, -149);
  int e;
  std::frexp(f, &e);
  return std::ldexp(1.0L, e - 24);
}

// Every step-th f32 magnitude pattern, with both signs, that lies in [lo, hi].
template <class F> void for_dense(float lo, float hi, uint32_t step, F f) {
  const float top = std::max(std::fabs(lo), std::fabs(hi));
  for (uint32_t u = 0; u < 0x7f800000u; u += step) {
    const float x = f32_from_bits(u);
    if (x > top) break;
    if (x >= lo && x <= hi) f(x);
    if (x != 0 && -x >= lo && -x <= hi) f(-x);
  }
}

TEST(SemanticsApprox, F32FunctionsWithinIsaBounds) {
  MaxErr ex2, rcp, sqrt_rel, rsqrt_rel, sin_abs, sin_wide, cos_abs, cos_wide, lg2_abs, lg2_rel,
      tanh_rel;
  for_dense(-150.0f, 128.5f, 257, [&](float x) {
    const long double want = std::exp2(static_cast<long double>(x));
    const float got = ex2_approx_f32(x);
    if (std::isinf(got)) {
      ASSERT_GE(want, std::ldexp(1.0L, 128) * (1 - 0x1p-24L));
      return;
    }
    ex2.add(double(std::fabs(got - want) / ulp_f32(want)), x);
  });
  for_dense(-3.4e38f, 3.4e38f, 4099, [&](float x) {
    if (x == 0) return;
    const long double want = 1.0L / x;
    if (std::fabs(want) >= 0x1.ffffffp127L) { // beyond the largest float by half an ulp or more
      ASSERT_TRUE(std::isinf(rcp_approx_f32(x))) << x;
    } else {
      rcp.add(double(std::fabs(rcp_approx_f32(x) - want) / ulp_f32(want)), x);
    }
    if (x > 0) {
      const long double s = std::sqrt(static_cast<long double>(x));
      sqrt_rel.add(double(std::fabs(sqrt_approx_f32(x) - s) / s), x);
      rsqrt_rel.add(double(std::fabs(rsqrt_approx_f32(x) - 1 / s) * s), x);
    }
    if (x >= 0) {
      const long double l = std::log2(static_cast<long double>(x));
      const float got = lg2_approx_f32(x);
      if (x > 0.5f && x < 2.0f)
        lg2_abs.add(double(std::fabs(got - l)), x);
      else
        lg2_rel.add(double(std::fabs((got - l) / l)), x);
    }
    const long double t = std::tanh(static_cast<long double>(x));
    tanh_rel.add(double(std::fabs((tanh_approx_f32(x) - t) / t)), x);
  });
  const float two_pi = 6.2831855f, hundred_pi = 314.15927f;
  for_dense(-hundred_pi, hundred_pi, 1021, [&](float x) {
    const long double s = std::sin(static_cast<long double>(x)),
                      c = std::cos(static_cast<long double>(x));
    const double es = double(std::fabs(sin_approx_f32(x) - s)),
                 ec = double(std::fabs(cos_approx_f32(x) - c));
    if (std::fabs(x) <= two_pi) {
      sin_abs.add(es, x);
      cos_abs.add(ec, x);
    }
    sin_wide.add(es, x);
    cos_wide.add(ec, x);
  });
  std::printf("ex2.approx.f32   max %.4f ulp (bound 2 ulp)\n", ex2.value);
  std::printf("rcp.approx.f32   max %.4f ulp (bound 1 ulp)\n", rcp.value);
  std::printf("sqrt.approx.f32  max rel 2^%.2f (bound 2^-23)\n", std::log2(sqrt_rel.value));
  std::printf("rsqrt.approx.f32 max rel 2^%.2f (bound 2^-22.9)\n", std::log2(rsqrt_rel.value));
  std::printf("sin.approx.f32   max abs 2^%.2f on [-2pi,2pi] (bound 2^-20.5), 2^%.2f on "
              "[-100pi,100pi] (2^-14.7)\n",
              std::log2(sin_abs.value), std::log2(sin_wide.value));
  std::printf("cos.approx.f32   max abs 2^%.2f on [-2pi,2pi] (bound 2^-20.5), 2^%.2f on "
              "[-100pi,100pi] (2^-14.7)\n",
              std::log2(cos_abs.value), std::log2(cos_wide.value));
  std::printf("lg2.approx.f32   max abs 2^%.2f on (0.5,2) (bound 2^-22), max rel 2^%.2f elsewhere "
              "(2^-22)\n",
              std::log2(lg2_abs.value), std::log2(lg2_rel.value));
  std::printf("tanh.approx.f32  max rel 2^%.2f (bound 2^-11)\n", std::log2(tanh_rel.value));
  EXPECT_LE(ex2.value, 2.0) << ex2.at;
  EXPECT_LE(rcp.value, 1.0) << rcp.at;
  EXPECT_LE(sqrt_rel.value, 0x1p-23) << sqrt_rel.at;
  EXPECT_LE(rsqrt_rel.value, std::exp2(-22.9)) << rsqrt_rel.at;
  EXPECT_LE(sin_abs.value, std::exp2(-20.5)) << sin_abs.at;
  EXPECT_LE(cos_abs.value, std::exp2(-20.5)) << cos_abs.at;
  EXPECT_LE(sin_wide.value, std::exp2(-14.7)) << sin_wide.at;
  EXPECT_LE(cos_wide.value, std::exp2(-14.7)) << cos_wide.at;
  EXPECT_LE(lg2_abs.value, 0x1p-22) << lg2_abs.at;
  EXPECT_LE(lg2_rel.value, 0x1p-22) << lg2_rel.at;
  EXPECT_LE(tanh_rel.value, 0x1p-11) << tanh_rel.at;
}

TEST(SemanticsApprox, F32SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const auto bits = [](float f) { return f32_bits(f); };
  // rcp (9.7.3.13)
  EXPECT_EQ(bits(rcp_approx_f32(-inf)), 0x80000000u);
  EXPECT_EQ(bits(rcp_approx_f32(-0.0f)), bits(-inf));
  EXPECT_EQ(bits(rcp_approx_f32(0.0f)), bits(inf));
  EXPECT_EQ(bits(rcp_approx_f32(inf)), 0u);
  EXPECT_EQ(bits(rcp_approx_f32(nan)), k_nan_f32);
  EXPECT_EQ(bits(rcp_approx_f32(0x1p-140f, true)), bits(inf));
  EXPECT_EQ(bits(rcp_approx_f32(0x1.8p126f, true)), 0u);
  EXPECT_NE(bits(rcp_approx_f32(0x1.8p126f)), 0u);
  // sqrt (9.7.3.15)
  EXPECT_EQ(bits(sqrt_approx_f32(-inf)), k_nan_f32);
  EXPECT_EQ(bits(sqrt_approx_f32(-1.0f)), k_nan_f32);
  EXPECT_EQ(bits(sqrt_approx_f32(-0.0f)), 0x80000000u);
  EXPECT_EQ(bits(sqrt_approx_f32(inf)), bits(inf));
  EXPECT_EQ(bits(sqrt_approx_f32(-0x1p-140f, true)), 0x80000000u);
  // rsqrt (9.7.3.16)
  EXPECT_EQ(bits(rsqrt_approx_f32(-inf)), k_nan_f32);
  EXPECT_EQ(bits(rsqrt_approx_f32(-2.0f)), k_nan_f32);
  EXPECT_EQ(bits(rsqrt_approx_f32(-0.0f)), bits(-inf));
  EXPECT_EQ(bits(rsqrt_approx_f32(0.0f)), bits(inf));
  EXPECT_EQ(bits(rsqrt_approx_f32(inf)), 0u);
  EXPECT_EQ(bits(rsqrt_approx_f32(0x1p-140f, true)), bits(inf));
  EXPECT_EQ(rsqrt_approx_f32(4.0f), 0.5f);
  // sin/cos (9.7.3.18-19)
  EXPECT_EQ(bits(sin_approx_f32(-0.0f)), 0x80000000u);
  EXPECT_EQ(bits(sin_approx_f32(inf)), k_nan_f32);
  EXPECT_EQ(bits(cos_approx_f32(-0.0f)), bits(1.0f));
  EXPECT_EQ(bits(cos_approx_f32(-inf)), k_nan_f32);
  EXPECT_EQ(bits(sin_approx_f32(0x1p-140f)), bits(0x1p-140f));
  EXPECT_EQ(bits(sin_approx_f32(-0x1p-140f, true)), 0x80000000u);
  // lg2 (9.7.3.20)
  EXPECT_EQ(bits(lg2_approx_f32(-inf)), k_nan_f32);
  EXPECT_EQ(bits(lg2_approx_f32(-1.0f)), k_nan_f32);
  EXPECT_EQ(bits(lg2_approx_f32(-0.0f)), bits(-inf));
  EXPECT_EQ(bits(lg2_approx_f32(0.0f)), bits(-inf));
  EXPECT_EQ(bits(lg2_approx_f32(inf)), bits(inf));
  EXPECT_EQ(lg2_approx_f32(0x1p-149f), -149.0f);
  EXPECT_EQ(bits(lg2_approx_f32(0x1p-149f, true)), bits(-inf));
  // ex2 (9.7.3.21)
  EXPECT_EQ(bits(ex2_approx_f32(-inf)), 0u);
  EXPECT_EQ(ex2_approx_f32(-0.0f), 1.0f);
  EXPECT_EQ(bits(ex2_approx_f32(inf)), bits(inf));
  EXPECT_EQ(bits(ex2_approx_f32(nan)), k_nan_f32);
  EXPECT_EQ(ex2_approx_f32(-149.0f), 0x1p-149f);
  EXPECT_EQ(bits(ex2_approx_f32(-149.0f, true)), 0u);
  EXPECT_EQ(ex2_approx_f32(10.0f), 1024.0f);
  // tanh (9.7.3.22)
  EXPECT_EQ(tanh_approx_f32(-inf), -1.0f);
  EXPECT_EQ(tanh_approx_f32(inf), 1.0f);
  EXPECT_EQ(bits(tanh_approx_f32(-0.0f)), 0x80000000u);
  EXPECT_EQ(bits(tanh_approx_f32(0x1p-140f)), bits(0x1p-140f));
  // div.approx (9.7.3.8): 2^126 < |b| < 2^128.
  EXPECT_EQ(bits(div_approx_f32(3.0f, 0x1.8p126f)), 0u);
  EXPECT_EQ(bits(div_approx_f32(-3.0f, 0x1.8p126f)), 0x80000000u);
  EXPECT_EQ(bits(div_approx_f32(inf, 0x1.8p126f)), k_nan_f32);
  EXPECT_EQ(div_approx_f32(1.0f, 4.0f), 0.25f);
  MaxErr div;
  for (int i = 0; i < 200000; ++i) {
    const float b = rand_f32_exp(-126, 125); // |b| in [2^-126, 2^126)
    const int eb = std::ilogb(b);
    const float a = rand_f32_exp(std::max(-126, eb - 100), std::min(127, eb + 100));
    const long double q = static_cast<long double>(a) / b;
    div.add(double(std::fabs(div_approx_f32(a, b) - q) / ulp_f32(q)), a);
    ASSERT_EQ(bits(div_full_f32(a, b)), bits(a / b));
  }
  std::printf("div.approx.f32   max %.4f ulp for |b| in [2^-126, 2^126] (bound 2 ulp)\n",
              div.value);
  EXPECT_LE(div.value, 2.0);
}

TEST(SemanticsApprox, F64UpperWordForms) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto bits = [](double d) { return f64_bits(d); };
  // rcp.approx.ftz.f64 (9.7.3.14)
  EXPECT_EQ(bits(rcp_approx_ftz_f64(-inf)), 0x8000000000000000ull);
  EXPECT_EQ(bits(rcp_approx_ftz_f64(-0x1p-1070)), bits(-inf));
  EXPECT_EQ(bits(rcp_approx_ftz_f64(-0.0)), bits(-inf));
  EXPECT_EQ(bits(rcp_approx_ftz_f64(0x1p-1070)), bits(inf));
  EXPECT_EQ(bits(rcp_approx_ftz_f64(inf)), 0u);
  EXPECT_EQ(bits(rcp_approx_ftz_f64(std::nan(""))), k_nan_f64_approx);
  EXPECT_EQ(bits(rcp_approx_ftz_f64(0x1.8p1022)), 0u); // subnormal result flushed
  EXPECT_EQ(rcp_approx_ftz_f64(4.0), 0.25);
  // rsqrt.approx.ftz.f64 (9.7.3.17)
  EXPECT_EQ(bits(rsqrt_approx_ftz_f64(-inf)), k_nan_f64_approx);
  EXPECT_EQ(bits(rsqrt_approx_ftz_f64(-0x1p-1070)), bits(-inf));
  EXPECT_EQ(bits(rsqrt_approx_ftz_f64(-0.0)), bits(-inf));
  EXPECT_EQ(bits(rsqrt_approx_ftz_f64(0.0)), bits(inf));
  EXPECT_EQ(bits(rsqrt_approx_ftz_f64(0x1p-1070)), bits(inf));
  EXPECT_EQ(bits(rsqrt_approx_ftz_f64(inf)), 0u);
  EXPECT_EQ(bits(rsqrt_approx_ftz_f64(-4.0)), k_nan_f64_approx);
  EXPECT_EQ(rsqrt_approx_ftz_f64(4.0), 0.5);
  EXPECT_EQ(bits(rsqrt_approx_f64(-0.0)), bits(-inf));
  EXPECT_EQ(rsqrt_approx_f64(0.25), 2.0);
  double max_rcp = 0, max_rsqrt = 0, max_rsqrt64 = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = rand_f64_exp(-1000, 1000);
    const double r = rcp_approx_ftz_f64(x), s = rsqrt_approx_ftz_f64(std::fabs(x));
    ASSERT_EQ(bits(r) & 0xffffffffu, 0u);
    ASSERT_EQ(bits(s) & 0xffffffffu, 0u);
    // The input's low word is ignored.
    ASSERT_EQ(bits(rcp_approx_ftz_f64(f64_from_bits(bits(x) & ~0xffffffffull))), bits(r));
    const long double hi = f64_from_bits(bits(x) & ~0xffffffffull);
    max_rcp = std::max(max_rcp, double(std::fabs((r - 1 / hi) * hi)));
    max_rsqrt = std::max(max_rsqrt, double(std::fabs(s * std::sqrt(std::fabs(hi)) - 1)));
    const long double t = 1 / std::sqrt(static_cast<long double>(std::fabs(x)));
    max_rsqrt64 =
        std::max(max_rsqrt64, double(std::fabs((rsqrt_approx_f64(std::fabs(x)) - t) / t)));
  }
  std::printf(
      "rcp.approx.ftz.f64 max rel 2^%.2f, rsqrt.approx.ftz.f64 max rel 2^%.2f (20-bit results); "
      "rsqrt.approx.f64 max rel 2^%.2f\n",
      std::log2(max_rcp), std::log2(max_rsqrt), std::log2(max_rsqrt64));
  EXPECT_LE(max_rcp, 0x1.0001p-21);
  EXPECT_LE(max_rsqrt, 0x1.0001p-21);
  EXPECT_LE(max_rsqrt64, 0x1p-52);
}

TEST(SemanticsApprox, HalfFunctionsEveryPatternWithinIsaBounds) {
  double ex2_f16 = 0, ex2_bf16 = 0, tanh_f16 = 0, tanh_bf16 = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t x = uint16_t(h);
    // ex2.approx.f16: relative error 2^-9.9 for normal results; subnormal results within half an
    // ulp of the subnormal grid.
    if (!is_nan_f16(x)) {
      const long double want = std::exp2(static_cast<long double>(f16_to_f32(x)));
      const uint16_t got = ex2_approx_f16(x);
      if (want >= 65520) {
        EXPECT_EQ(got, 0x7c00u) << h;
      } else if (want >= 0x1p-14L)
        ex2_f16 = std::max(ex2_f16, double(std::fabs((f16_to_f32(got) - want) / want)));
      else {
        ASSERT_LE(std::fabs(f16_to_f32(got) - want), 0x1p-25L) << h;
      }
      const long double t = std::tanh(static_cast<long double>(f16_to_f32(x)));
      tanh_f16 = std::max(tanh_f16, double(std::fabs(f16_to_f32(tanh_approx_f16(x)) - t)));
    } else {
      EXPECT_EQ(ex2_approx_f16(x), k_nan_f16);
      EXPECT_EQ(tanh_approx_f16(x), k_nan_f16);
    }
    if (!is_nan_bf16(x)) {
      const float in = bf16_to_f32(flush_bf16(x));
      const long double want = std::exp2(static_cast<long double>(in));
      const uint16_t got = ex2_approx_ftz_bf16(x);
      if (want >= 0x1p-126L && want < 0x1.ffp127L) {
        ex2_bf16 = std::max(ex2_bf16, double(std::fabs((bf16_to_f32(got) - want) / want)));
      } else if (want < 0x1p-126L) {
        ASSERT_EQ(got, 0u) << h; // subnormal and smaller results flush
      }
      const long double t = std::tanh(static_cast<long double>(bf16_to_f32(x)));
      tanh_bf16 = std::max(tanh_bf16, double(std::fabs(bf16_to_f32(tanh_approx_bf16(x)) - t)));
    }
  }
  std::printf(
      "ex2.approx.f16 max rel 2^%.2f (bound 2^-9.9); ex2.approx.ftz.bf16 max rel 2^%.2f (2^-7)\n",
      std::log2(ex2_f16), std::log2(ex2_bf16));
  std::printf(
      "tanh.approx.f16 max abs 2^%.2f (bound 2^-10.987); tanh.approx.bf16 max abs 2^%.2f (2^-8)\n",
      std::log2(tanh_f16), std::log2(tanh_bf16));
  EXPECT_LE(ex2_f16, std::exp2(-9.9));
  EXPECT_LE(ex2_bf16, 0x1p-7);
  EXPECT_LE(tanh_f16, std::exp2(-10.987));
  EXPECT_LE(tanh_bf16, 0x1p-8);
  // Special values (9.7.4.9-10).
  EXPECT_EQ(ex2_approx_f16(0xfc00u), 0u);
  EXPECT_EQ(ex2_approx_f16(0x8000u), 0x3c00u);
  EXPECT_EQ(ex2_approx_f16(0x7c00u), 0x7c00u);
  EXPECT_EQ(ex2_approx_ftz_bf16(0x8001u), 0x3f80u); // -subnormal -> 1
  EXPECT_EQ(ex2_approx_ftz_bf16(0x0001u), 0x3f80u);
  EXPECT_EQ(ex2_approx_ftz_bf16(0xff80u), 0u);
  EXPECT_EQ(ex2_approx_ftz_bf16(0x7f80u), 0x7f80u);
  EXPECT_EQ(tanh_approx_f16(0xfc00u), 0xbc00u);
  EXPECT_EQ(tanh_approx_f16(0x8000u), 0x8000u);
  EXPECT_EQ(tanh_approx_bf16(0x7f80u), 0x3f80u);
  EXPECT_EQ(tanh_approx_bf16(0x0001u), 0x0001u);
  EXPECT_EQ(ex2_approx_f16x2(0x3c000000u), 0x40003c00u);
  EXPECT_EQ(tanh_approx_bf16x2(0xff800000u), 0xbf800000u);
}

// ---------------------------------------------------------------------------------------------
// Integer arithmetic

// The high 64 bits of a 64x64 product from 32-bit limbs.
uint64_t ref_mul_hi_u64(uint64_t a, uint64_t b) {
  const uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
  const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
  return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}
int64_t ref_mul_hi_s64(int64_t a, int64_t b) {
  uint64_t hi = ref_mul_hi_u64(uint64_t(a), uint64_t(b));
  if (a < 0) hi -= uint64_t(b);
  if (b < 0) hi -= uint64_t(a);
  return int64_t(hi);
}

TEST(SemanticsInt, MultiplyForms) {
  for (int i = 0; i < 300000; ++i) {
    const uint64_t a = rand64() >> (rand32() % 64), b = rand64() >> (rand32() % 64);
    const int64_t sa = int64_t(rand32() & 1 ? a : ~a), sb = int64_t(rand32() & 1 ? b : ~b);
    ASSERT_EQ(mul_hi_u64(a, b), ref_mul_hi_u64(a, b));
    ASSERT_EQ(mul_hi_s64(sa, sb), ref_mul_hi_s64(sa, sb));
    const uint32_t a32 = uint32_t(a), b32 = uint32_t(b);
    ASSERT_EQ(mul_hi_u32(a32, b32), uint32_t(ref_mul_hi_u64(uint64_t(a32) << 32, b32)));
    ASSERT_EQ(mul_wide_u32(a32, b32), uint64_t(a32) * b32);
    ASSERT_EQ(mul_wide_s32(int32_t(a32), int32_t(b32)), int64_t(int32_t(a32)) * int32_t(b32));
    ASSERT_EQ(mul_hi_s32(int32_t(a32), int32_t(b32)),
              int32_t((int64_t(int32_t(a32)) * int32_t(b32)) >> 32));
    ASSERT_EQ(mul_lo(int32_t(a32), int32_t(b32)), int32_t(a32 * b32));
    ASSERT_EQ(mul_lo(a, b), a * b);
    ASSERT_EQ(mul_wide_s16(int16_t(a), int16_t(b)), int32_t(int16_t(a)) * int16_t(b));
    ASSERT_EQ(mul_wide_u16(uint16_t(a), uint16_t(b)), uint32_t(uint16_t(a)) * uint16_t(b));
    ASSERT_EQ(mul_hi_s16(int16_t(a), int16_t(b)),
              int16_t((int32_t(int16_t(a)) * int16_t(b)) >> 16));
    ASSERT_EQ(mul_hi_u16(uint16_t(a), uint16_t(b)),
              uint16_t((uint32_t(uint16_t(a)) * uint16_t(b)) >> 16));
    ASSERT_EQ(mul_lo(int16_t(a), int16_t(b)),
              int16_t(uint16_t(uint32_t(uint16_t(a)) * uint16_t(b))));
    // 24-bit forms: sign-extended 24-bit operands, 48-bit product.
    const int64_t x24 = int64_t(int32_t(a32 << 8) >> 8), y24 = int64_t(int32_t(b32 << 8) >> 8);
    ASSERT_EQ(mul24_lo_s32(int32_t(a32), int32_t(b32)), int32_t(uint32_t(uint64_t(x24 * y24))));
    ASSERT_EQ(mul24_hi_s32(int32_t(a32), int32_t(b32)),
              int32_t(uint32_t((uint64_t(x24 * y24) >> 16))));
    ASSERT_EQ(mul24_lo_u32(a32, b32), uint32_t((a32 & 0xffffffu) * uint64_t(b32 & 0xffffffu)));
    ASSERT_EQ(mul24_hi_u32(a32, b32),
              uint32_t(((a32 & 0xffffffu) * uint64_t(b32 & 0xffffffu)) >> 16));
    // Saturating forms.
    const int64_t s = int64_t(int32_t(a32)) + int32_t(b32),
                  d = int64_t(int32_t(a32)) - int32_t(b32);
    ASSERT_EQ(add_sat_s32(int32_t(a32), int32_t(b32)),
              int32_t(std::clamp<int64_t>(s, INT32_MIN, INT32_MAX)));
    ASSERT_EQ(sub_sat_s32(int32_t(a32), int32_t(b32)),
              int32_t(std::clamp<int64_t>(d, INT32_MIN, INT32_MAX)));
    ASSERT_EQ(add_sat_u32(a32, b32), uint32_t(std::min<uint64_t>(uint64_t(a32) + b32, UINT32_MAX)));
    const int32_t c32 = int32_t(rand32());
    const int64_t mh = ((int64_t(int32_t(a32)) * int32_t(b32)) >> 32) + c32;
    ASSERT_EQ(mad_hi_sat_s32(int32_t(a32), int32_t(b32), c32),
              int32_t(std::clamp<int64_t>(mh, INT32_MIN, INT32_MAX)));
    const int64_t m24 = int64_t(int32_t(uint32_t(uint64_t(x24 * y24) >> 16))) + c32;
    ASSERT_EQ(mad24_hi_sat_s32(int32_t(a32), int32_t(b32), c32),
              int32_t(std::clamp<int64_t>(m24, INT32_MIN, INT32_MAX)));
  }
  EXPECT_EQ(mul_hi_s64(INT64_MIN, INT64_MIN), int64_t(1) << 62);
  EXPECT_EQ(mul_hi_u64(~0ull, ~0ull), ~0ull - 1);
  EXPECT_EQ(mul24_hi_u32(0xffffffu, 0xffffffu), 0xfffffe00u);
  EXPECT_EQ(add_sat_s32(INT32_MAX, 1), INT32_MAX);
  EXPECT_EQ(sub_sat_s32(INT32_MIN, 1), INT32_MIN);
}

TEST(SemanticsInt, DivisionRemainderAbsNegMinMaxSad) {
  for (int i = 0; i < 300000; ++i) {
    const uint64_t a = rand64() >> (rand32() % 64), b = rand64() >> (rand32() % 64);
    const int64_t sa = int64_t(rand32() & 1 ? a : ~a), sb = int64_t(rand32() & 1 ? b : ~b);
    if (b != 0) {
      ASSERT_EQ(div_int(a, b), uint64_t(static_cast<unsigned __int128>(a) / b));
      ASSERT_EQ(rem_int(a, b), uint64_t(static_cast<unsigned __int128>(a) % b));
      ASSERT_EQ(div_int(uint32_t(a), uint32_t(b) | 1u), uint32_t(a) / (uint32_t(b) | 1u));
    }
    if (sb != 0) {
      ASSERT_EQ(div_int(sa, sb), int64_t(__int128(sa) / sb));
      ASSERT_EQ(rem_int(sa, sb), int64_t(__int128(sa) % sb));
    }
    const int32_t x = int32_t(a), y = int32_t(b);
    if (y != 0) {
      ASSERT_EQ(div_int(x, y), int32_t(int64_t(x) / y));
      ASSERT_EQ(rem_int(x, y), int32_t(int64_t(x) % y));
    }
    ASSERT_EQ(sad(x, y, int32_t(sa)), int32_t(uint32_t(sa) + uint32_t(std::llabs(int64_t(x) - y))));
    ASSERT_EQ(sad(uint32_t(x), uint32_t(y), uint32_t(sa)),
              uint32_t(sa) + uint32_t(std::llabs(int64_t(uint32_t(x)) - int64_t(uint32_t(y)))));
    ASSERT_EQ(min_int(x, y), std::min(x, y));
    ASSERT_EQ(max_int(x, y, true), std::max(std::max(x, y), 0));
    ASSERT_EQ(min_int(x, y, true), std::max(std::min(x, y), 0));
    ASSERT_EQ(max_int(uint64_t(a), uint64_t(b)), std::max(a, b));
    ASSERT_EQ(abs_int(x), x == INT32_MIN ? INT32_MIN : std::abs(x));
    ASSERT_EQ(neg_int(x), x == INT32_MIN ? INT32_MIN : -x);
  }
  // Division by zero and overflow: what NVIDIA GPUs return; never a trap.
  EXPECT_EQ(div_int(7u, 0u), 0xffffffffu);
  EXPECT_EQ(div_int(uint64_t(7), uint64_t(0)), ~uint64_t(0));
  EXPECT_EQ(div_int(7, 0), -1);
  EXPECT_EQ(div_int(-7, 0), -1);
  EXPECT_EQ(div_int(int64_t(7), int64_t(0)), int64_t(-1));
  EXPECT_EQ(rem_int(7u, 0u), 7u);
  EXPECT_EQ(rem_int(-7, 0), -7);
  EXPECT_EQ(div_int(INT32_MIN, -1), INT32_MIN);
  EXPECT_EQ(rem_int(INT32_MIN, -1), 0);
  EXPECT_EQ(div_int(INT64_MIN, int64_t(-1)), INT64_MIN);
  EXPECT_EQ(rem_int(INT64_MIN, int64_t(-1)), 0);
  EXPECT_EQ(div_int(int16_t(-32768), int16_t(-1)), int16_t(-32768));
  EXPECT_EQ(rem_int(-7, 2), -1);
  EXPECT_EQ(abs_int(INT64_MIN), INT64_MIN);
  EXPECT_EQ(sad(uint32_t(0), uint32_t(0xffffffffu), uint32_t(1)), 0u);
  EXPECT_EQ(min_x2<int16_t>(0xffff0005u, 0x00010003u, true), 0x00000003u);
  EXPECT_EQ(max_x2<uint16_t>(0xffff0005u, 0x00010003u), 0xffff0005u);
  EXPECT_EQ(add_x2(0xffff0001u, 0x00010001u), 0x00000002u);
}

TEST(SemanticsInt, BitCounting) {
  for (int i = 0; i < 200000; ++i) {
    const uint64_t x = rand64() >> (rand32() % 64);
    uint32_t pop = 0, lz64 = 0, lz32 = 0;
    uint64_t rev64 = 0;
    uint32_t rev32 = 0;
    for (int k = 0; k < 64; ++k) {
      pop += (x >> k) & 1;
      rev64 |= ((x >> k) & 1) << (63 - k);
      if (k < 32) rev32 |= uint32_t((x >> k) & 1) << (31 - k);
    }
    while (lz64 < 64 && !((x << lz64) & (1ull << 63))) ++lz64;
    while (lz32 < 32 && !((uint32_t(x) << lz32) & 0x80000000u)) ++lz32;
    ASSERT_EQ(popc(x), pop);
    ASSERT_EQ(clz64(x), lz64);
    ASSERT_EQ(clz32(uint32_t(x)), lz32);
    ASSERT_EQ(brev64(x), rev64);
    ASSERT_EQ(brev32(uint32_t(x)), rev32);
    // bfind, per the ISA's pseudocode.
    for (bool shiftamt : {false, true}) {
      const auto ref = [&](uint64_t a, int msb, bool sgn) {
        if (sgn && ((a >> msb) & 1)) a = ~a;
        uint32_t d = 0xffffffffu;
        for (int k = msb; k >= 0; --k)
          if ((a >> k) & 1) {
            d = uint32_t(k);
            break;
          }
        if (shiftamt && d != 0xffffffffu) d = uint32_t(msb) - d;
        return d;
      };
      ASSERT_EQ(bfind(uint32_t(x), shiftamt), ref(uint32_t(x), 31, false));
      ASSERT_EQ(bfind(int32_t(x), shiftamt), ref(uint32_t(x), 31, true));
      ASSERT_EQ(bfind(x, shiftamt), ref(x, 63, false));
      ASSERT_EQ(bfind(int64_t(x), shiftamt), ref(x, 63, true));
      ASSERT_EQ(bfind(int64_t(~x), shiftamt), ref(~x, 63, true));
    }
  }
  EXPECT_EQ(bfind(0u), 0xffffffffu);
  EXPECT_EQ(bfind(-1), 0xffffffffu);
  EXPECT_EQ(bfind(0u, true), 0xffffffffu);
  EXPECT_EQ(bfind(1u, true), 31u);
  EXPECT_EQ(bfind(INT32_MIN), 30u);
}

TEST(SemanticsInt, BitFieldsEveryPositionAndLength) {
  std::vector<uint64_t> vals = {0, ~0ull, 0x8000000000000000ull, 0x5555aaaa5555aaaaull, 1};
  for (int i = 0; i < 6; ++i) vals.push_back(rand64());
  for (uint64_t a : vals)
    for (uint32_t pos = 0; pos < 256; ++pos)
      for (uint32_t len = 0; len < 256; ++len) {
        const uint32_t b = pos | (rand32() << 8), c = len | (rand32() << 8); // upper bits ignored
        // bfe, per the pseudocode.
        const auto ref_bfe = [&](uint64_t x, int msb, bool sgn) {
          const int sb = std::min<int>(int(pos + len) - 1, msb);
          const uint64_t sbit = (!sgn || len == 0) ? 0 : (x >> sb) & 1;
          uint64_t d = 0;
          for (int k = 0; k <= msb; ++k)
            d |= ((uint32_t(k) < len && pos + uint32_t(k) <= uint32_t(msb)) ? (x >> (pos + k)) & 1
                                                                            : sbit)
                 << k;
          return d;
        };
        ASSERT_EQ(bfe(uint32_t(a), b, c), uint32_t(ref_bfe(uint32_t(a), 31, false)));
        ASSERT_EQ(uint32_t(bfe(int32_t(a), b, c)), uint32_t(ref_bfe(uint32_t(a), 31, true)))
            << pos << " " << len;
        ASSERT_EQ(bfe(a, b, c), ref_bfe(a, 63, false));
        ASSERT_EQ(uint64_t(bfe(int64_t(a), b, c)), ref_bfe(a, 63, true)) << pos << " " << len;
        // bfi, per the pseudocode.
        const uint64_t base = ~a ^ 0x0123456789abcdefull;
        const auto ref_bfi = [&](uint64_t x, uint64_t y, int msb) {
          uint64_t f = y;
          for (uint32_t k = 0; k < len && pos + k <= uint32_t(msb); ++k)
            f = (f & ~(1ull << (pos + k))) | (((x >> k) & 1) << (pos + k));
          return f;
        };
        ASSERT_EQ(bfi(uint32_t(a), uint32_t(base), b, c),
                  uint32_t(ref_bfi(uint32_t(a), uint32_t(base), 31)));
        ASSERT_EQ(bfi(a, base, b, c), ref_bfi(a, base, 63));
      }
}

TEST(SemanticsInt, MaskAndExtendEveryOperand) {
  // bmsk and szext for every a, b in 0..63 (and a few large ones), from their descriptions.
  std::vector<uint32_t> ops;
  for (uint32_t i = 0; i < 64; ++i) ops.push_back(i);
  for (uint32_t v : {255u, 256u, 0x80000000u, 0xffffffffu, 0x20u | 0x100u}) ops.push_back(v);
  for (uint32_t a : ops)
    for (uint32_t b : ops) {
      for (bool wrap : {false, true}) {
        // bmsk: bits [start, start + width) of a 32-bit word.
        uint32_t want = 0;
        if (wrap || a < 32) {
          const uint32_t start = wrap ? a & 31u : a, width = wrap ? b & 31u : std::min(b, 32u);
          for (uint32_t k = start; k < std::min(start + width, 32u); ++k) want |= 1u << k;
        }
        ASSERT_EQ(bmsk(a, b, wrap), want) << a << " " << b << " " << wrap;
      }
      const uint32_t x = rand32();
      for (bool wrap : {false, true})
        for (bool sgn : {false, true}) {
          const uint32_t n = wrap ? b & 31u : std::min(b, 32u);
          uint32_t want;
          if (n == 0)
            want = 0;
          else if (n == 32)
            want = x;
          else {
            want = x & ((1u << n) - 1);
            if (sgn && ((x >> (n - 1)) & 1)) want |= ~0u << n;
          }
          ASSERT_EQ(szext(x, b, wrap, sgn), want) << b;
        }
    }
  EXPECT_EQ(bmsk(1, 2, true), 0x6u);
  EXPECT_EQ(szext(0xffffffffu, 0, true, false), 0u);
}

TEST(SemanticsInt, ShiftsEveryAmount) {
  for (int i = 0; i < 200; ++i) {
    const uint64_t x = rand64(), y = rand64();
    for (uint32_t n = 0; n < 256; ++n) {
      const uint32_t amount = n | (i % 2 ? 0u : rand32() & 0xffffff00u);
      const uint64_t big = amount; // shift amounts past 255 too
      const auto bits_shl = [&](uint64_t v, unsigned w) {
        uint64_t r = 0;
        for (unsigned k = 0; k < w; ++k)
          if (k >= big && ((v >> (k - big)) & 1)) r |= 1ull << k;
        return r;
      };
      const auto bits_shr = [&](uint64_t v, unsigned w, bool sgn) {
        uint64_t r = 0;
        const uint64_t fill = sgn ? (v >> (w - 1)) & 1 : 0;
        for (unsigned k = 0; k < w; ++k) r |= (k + big < w ? (v >> (k + big)) & 1 : fill) << k;
        return r;
      };
      ASSERT_EQ(shl(uint64_t(x), amount), bits_shl(x, 64));
      ASSERT_EQ(shl(uint32_t(x), amount), uint32_t(bits_shl(uint32_t(x), 32)));
      ASSERT_EQ(shl(uint16_t(x), amount), uint16_t(bits_shl(uint16_t(x), 16)));
      ASSERT_EQ(shr(uint64_t(x), amount), bits_shr(x, 64, false));
      ASSERT_EQ(uint64_t(shr(int64_t(x), amount)), bits_shr(x, 64, true));
      ASSERT_EQ(shr(uint32_t(x), amount), uint32_t(bits_shr(uint32_t(x), 32, false)));
      ASSERT_EQ(uint32_t(shr(int32_t(x), amount)), uint32_t(bits_shr(uint32_t(x), 32, true)));
      ASSERT_EQ(uint16_t(shr(int16_t(x), amount)), uint16_t(bits_shr(uint16_t(x), 16, true)));
      ASSERT_EQ(shr(uint16_t(x), amount), uint16_t(bits_shr(uint16_t(x), 16, false)));
      // shf: the 64-bit {b, a} shifted by the clamped/wrapped amount, bit by bit.
      const uint32_t a = uint32_t(x), b = uint32_t(y);
      const uint64_t cat = uint64_t(b) << 32 | a;
      for (bool wrap : {false, true}) {
        const uint64_t s = wrap ? (amount & 31u) : std::min<uint64_t>(amount, 32);
        uint32_t l = 0, r = 0;
        for (unsigned k = 0; k < 32; ++k) {
          const unsigned lk = 32 + k; // bit of the left-shifted 64-bit value
          if (lk >= s) l |= uint32_t((cat >> (lk - s)) & 1) << k;
          if (k + s < 64) r |= uint32_t((cat >> (k + s)) & 1) << k;
        }
        ASSERT_EQ(shf_l(a, b, amount, wrap), l) << amount << wrap;
        ASSERT_EQ(shf_r(a, b, amount, wrap), r) << amount << wrap;
      }
    }
  }
  EXPECT_EQ(shf_l(0x80000001u, 0x80000001u, 1, false), 0x00000003u); // rotate
  EXPECT_EQ(shr(int32_t(-8), 100), -1);
  EXPECT_EQ(shl(uint32_t(1), 32), 0u);
}

TEST(SemanticsInt, PrmtEverySelector) {
  // The default mode for every 16-bit selector, from the ISA's description.
  const uint32_t a = 0x83f2617au, b = 0x0c9d5eb4u;
  const uint8_t src[8] = {0x7a, 0x61, 0xf2, 0x83, 0xb4, 0x5e, 0x9d, 0x0c};
  for (uint32_t c = 0; c < 0x10000; ++c) {
    uint32_t want = 0;
    for (int k = 0; k < 4; ++k) {
      const uint32_t sel = (c >> (4 * k)) & 0xf;
      uint8_t v = src[sel & 7];
      if (sel & 8) v = (v & 0x80) ? 0xff : 0x00;
      want |= uint32_t(v) << (8 * k);
    }
    ASSERT_EQ(prmt(a, b, c | (rand32() << 16)), want) << std::hex << c;
  }
  // The specialised modes, from the ISA's table (d.b3 d.b2 d.b1 d.b0 source bytes).
  struct Row {
    PrmtMode mode;
    uint8_t sel[4][4];
  };
  const Row table[] = {
      {PrmtMode::f4e, {{3, 2, 1, 0}, {4, 3, 2, 1}, {5, 4, 3, 2}, {6, 5, 4, 3}}},
      {PrmtMode::b4e, {{5, 6, 7, 0}, {6, 7, 0, 1}, {7, 0, 1, 2}, {0, 1, 2, 3}}},
      {PrmtMode::rc8, {{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}}},
      {PrmtMode::ecl, {{3, 2, 1, 0}, {3, 2, 1, 1}, {3, 2, 2, 2}, {3, 3, 3, 3}}},
      {PrmtMode::ecr, {{0, 0, 0, 0}, {1, 1, 1, 0}, {2, 2, 1, 0}, {3, 2, 1, 0}}},
      {PrmtMode::rc16, {{1, 0, 1, 0}, {3, 2, 3, 2}, {1, 0, 1, 0}, {3, 2, 3, 2}}},
  };
  for (const Row& row : table)
    for (uint32_t s = 0; s < 4; ++s) {
      const uint32_t want = uint32_t(src[row.sel[s][0]]) << 24 |
                            uint32_t(src[row.sel[s][1]]) << 16 | uint32_t(src[row.sel[s][2]]) << 8 |
                            src[row.sel[s][3]];
      EXPECT_EQ(prmt(a, b, s | 0xfff0u, row.mode), want) << int(row.mode) << " " << s;
    }
}

TEST(SemanticsInt, Lop3EveryTable) {
  for (uint32_t lut = 0; lut < 256; ++lut)
    for (int i = 0; i < 64; ++i) {
      const uint32_t a = rand32(), b = rand32(), c = rand32();
      uint32_t want = 0;
      for (int k = 0; k < 32; ++k) {
        const uint32_t idx = ((a >> k) & 1) << 2 | ((b >> k) & 1) << 1 | ((c >> k) & 1);
        want |= ((lut >> idx) & 1) << k;
      }
      ASSERT_EQ(lop3(a, b, c, uint8_t(lut)), want) << lut;
    }
  // The ISA's construction: lut = F(0xf0, 0xcc, 0xaa).
  EXPECT_EQ(lop3<uint32_t>(0xf0, 0xcc, 0xaa, 0x80), 0xf0u & 0xccu & 0xaau);
  EXPECT_EQ(lop3<uint32_t>(0xf0, 0xcc, 0xaa, 0xfe), 0xf0u | 0xccu | 0xaau);
  EXPECT_EQ(lop3<uint32_t>(0xf0, 0xcc, 0xaa, 0x96), 0xf0u ^ 0xccu ^ 0xaau);
}

TEST(SemanticsInt, DotProductsAndFns) {
  for (int i = 0; i < 200000; ++i) {
    const uint32_t a = rand32(), b = rand32(), c = rand32();
    for (int sa = 0; sa < 2; ++sa)
      for (int sb = 0; sb < 2; ++sb) {
        int64_t d4 = int64_t(int32_t(c));
        for (int k = 0; k < 4; ++k) {
          const int64_t x = sa ? int8_t(a >> (8 * k)) : uint8_t(a >> (8 * k));
          const int64_t y = sb ? int8_t(b >> (8 * k)) : uint8_t(b >> (8 * k));
          d4 += x * y;
        }
        ASSERT_EQ(dp4a(a, b, c, sa, sb), uint32_t(d4));
        for (int hi = 0; hi < 2; ++hi) {
          int64_t d2 = int64_t(int32_t(c));
          for (int k = 0; k < 2; ++k) {
            const int64_t x = sa ? int16_t(a >> (16 * k)) : uint16_t(a >> (16 * k));
            const int64_t y =
                sb ? int8_t(b >> (8 * (2 * hi + k))) : uint8_t(b >> (8 * (2 * hi + k)));
            d2 += x * y;
          }
          ASSERT_EQ(dp2a(a, b, c, hi, sa, sb), uint32_t(d2));
        }
      }
    // fns, per the pseudocode.
    const uint32_t mask = a & rand32();
    const uint32_t base = b % 32;
    const int32_t offset = int32_t(c % 69) - 34;
    uint32_t want = 0xffffffffu;
    if (offset == 0) {
      if ((mask >> base) & 1) want = base;
    } else {
      int pos = int(base), count = std::abs(offset) - 1;
      const int inc = offset > 0 ? 1 : -1;
      while (pos >= 0 && pos < 32) {
        if ((mask >> pos) & 1) {
          if (count == 0) {
            want = uint32_t(pos);
            break;
          }
          --count;
        }
        pos += inc;
      }
    }
    ASSERT_EQ(fns(mask, base, offset), want) << std::hex << mask << " " << base << " " << offset;
  }
  EXPECT_EQ(fns(0xaaaaaaaau, 3, 1), 3u);
  EXPECT_EQ(fns(0xaaaaaaaau, 3, -1), 3u);
  EXPECT_EQ(fns(0xaaaaaaaau, 2, 1), 3u);
  EXPECT_EQ(fns(0xaaaaaaaau, 2, -1), 1u);
  EXPECT_EQ(fns(0xffffffffu, 0, INT32_MIN), 0xffffffffu);
  EXPECT_EQ(fns(0xffffffffu, 32, 1), 0xffffffffu);
}

// ---------------------------------------------------------------------------------------------
// Rounding core edge cases and the host environment guard

TEST(SemanticsRounding, CoreEdgeCases) {
  // A 64-bit significand rounded to f32 in every mode, against the host (via long double).
  for (int i = 0; i < 100000; ++i) {
    const uint64_t sig = rand64() | 1ull << 63;
    const int exp = int(rand32() % 300) - 200;
    const long double v = std::ldexp(static_cast<long double>(sig), exp);
    for (Round r : k_rounds) {
      const bool neg = rand32() & 1;
      ASSERT_EQ(uint32_t(round_to_format(neg, sig, exp, false, k_fmt_f32, r)),
                host_to_f32(neg ? -v : v, r))
          << sig << " " << exp << " " << name_of(r);
    }
  }
  // Sticky bits below a tie decide it.
  EXPECT_EQ(round_to_format(false, 9, -2, false, k_fmt_e5m2, Round::rn), 0x40u); // 2.25 -> 2.0
  EXPECT_EQ(round_to_format(false, 9, -2, true, k_fmt_e5m2, Round::rn), 0x41u);  // 2.25+ -> 2.5
  EXPECT_EQ(round_to_format(false, 9, -2, false, k_fmt_e5m2, Round::rna), 0x41u);
  EXPECT_EQ(round_to_format(false, 11, -2, false, k_fmt_e5m2, Round::rn), 0x42u); // 2.75 -> 3.0
  EXPECT_EQ(round_to_format(true, 0, -200, true, k_fmt_f16, Round::rm), 0x8001u);
  EXPECT_EQ(round_to_format(true, 0, -200, true, k_fmt_f16, Round::rn), 0x8000u);
  // format_to_double inverts every finite f16 and e4m3 value.
  for (uint64_t m = 0; m <= 0x7bff; ++m)
    ASSERT_EQ(round_double_to_format(format_to_double(m, k_fmt_f16), 0, k_fmt_f16, Round::rn), m);
  for (uint64_t m = 0; m <= 0x7e; ++m)
    ASSERT_EQ(static_cast<long double>(format_to_double(m, k_fmt_e4m3)), decode_ref(m, k_fmt_e4m3));
  EXPECT_TRUE(std::isnan(format_to_double(0x7f, k_fmt_e4m3)));
  EXPECT_TRUE(std::isinf(format_to_double(0x7c, k_fmt_e5m2)));
}

// f64 results that are NaN: the first NaN operand in operand order, quieted; the default NaN
// when the operands are numbers (semantics.hpp, "Choices").
TEST(SemanticsF64, NaNResultsFollowOperandOrder) {
  const double qa = f64_from_bits(0x7ff8000000000abcull), sb = f64_from_bits(0xfff0000000000123ull);
  const double qc = f64_from_bits(0x7ff80000000c0c0cull), inf = std::numeric_limits<double>::infinity();
  const uint64_t sb_quiet = 0xfff8000000000123ull;
  EXPECT_EQ(f64_bits(add_f64(qa, sb)), 0x7ff8000000000abcull);
  EXPECT_EQ(f64_bits(add_f64(sb, qa)), sb_quiet);
  EXPECT_EQ(f64_bits(add_f64(1.0, sb)), sb_quiet);
  EXPECT_EQ(f64_bits(sub_f64(1.0, qa)), 0xfff8000000000abcull); // a + (-b): b's sign flipped
  EXPECT_EQ(f64_bits(mul_f64(sb, qc)), sb_quiet);
  EXPECT_EQ(f64_bits(fma_f64(2.0, 3.0, qc)), 0x7ff80000000c0c0cull);
  EXPECT_EQ(f64_bits(fma_f64(sb, qa, qc)), sb_quiet);
  EXPECT_EQ(f64_bits(div_f64(qc, qa)), 0x7ff80000000c0c0cull);
  EXPECT_EQ(f64_bits(sqrt_f64(sb)), sb_quiet);
  EXPECT_EQ(f64_bits(max_f64(qa, sb)), 0x7ff8000000000abcull);
  EXPECT_EQ(f64_bits(min_f64(qa, 2.0)), f64_bits(2.0));
  // invalid operations on numbers
  EXPECT_EQ(f64_bits(add_f64(inf, -inf)), 0xfff8000000000000ull);
  EXPECT_EQ(f64_bits(mul_f64(0.0, inf)), 0xfff8000000000000ull);
  EXPECT_EQ(f64_bits(sqrt_f64(-1.0)), 0xfff8000000000000ull);
  EXPECT_EQ(f64_bits(fma_f64(0.0, inf, 1.0)), 0xfff8000000000000ull);
}

TEST(SemanticsRounding, FpEnvGuardRestoresDefaults) {
  std::fesetround(FE_UPWARD);
#if defined(__x86_64__) || defined(__i386__)
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u); // FTZ and DAZ
#endif
  {
    FpEnvGuard guard;
    volatile float tiny = 0x1p-140f;
    volatile float r = tiny * 2.0f;
    EXPECT_EQ(r, 0x1p-139f); // DAZ/FTZ are off
    EXPECT_EQ(std::fegetround(), FE_TONEAREST);
    EXPECT_EQ(f32_to_f16_rn(1.0f), 0x3c00u);
    EXPECT_EQ(add_f16(0x0001u, 0x0001u), 0x0002u);
  }
  EXPECT_EQ(std::fegetround(), FE_UPWARD);
#if defined(__x86_64__) || defined(__i386__)
  EXPECT_EQ(_mm_getcsr() & 0x8040u, 0x8040u);
  _mm_setcsr(saved);
#endif
  std::fesetround(FE_TONEAREST);
}

} // namespace
} // namespace hone::emu::sem
