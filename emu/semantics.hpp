// Scalar instruction semantics of the emulated device: what one lane computes for a PTX
// arithmetic, logic, comparison or conversion instruction, bit-exact where the PTX ISA defines the
// result and documented below where it leaves it open ("undefined", "unspecified NaN",
// "machine-specific"). Section numbers refer to the PTX ISA 9.x "Instructions" chapter (9.7).
//
// Everything here is a pure function of its arguments: no state, no allocation, no exceptions,
// safe to call from any number of threads. Hot operations are inline; directed rounding modes,
// the generic cvt and the .approx functions live in semantics_float.cpp and semantics_cvt.cpp.
//
// Representation: f32 is `float`, f64 is `double`, f16/bf16 are their 16-bit patterns in a
// uint16_t, and packed .f16x2/.bf16x2 values are a uint32_t whose low half is element 0 (PTX:
// "fA[0] = a[0:15]").
//
// Host floating-point environment: the fast paths use host float/double arithmetic and assume
// the host default environment (round-to-nearest, no flush-to-zero, no denormals-are-zero). An
// application may have changed it (code built with -ffast-math sets FTZ/DAZ at startup), so the
// executor holds an FpEnvGuard on each thread while it runs PTX.
//
// Choices where PTX leaves the result open:
// - f32/f16/bf16 results that are NaN are canonical: 0x7fffffff, 0x7fff, 0x7fff (what NVIDIA GPUs
//   produce). f64 NaNs propagate their payload (PTX: "NaN payloads are supported for
//   double-precision instructions"): the first NaN operand, quieted, in operand order; an invalid
//   operation on numbers (inf - inf, 0 * inf, sqrt of a negative) gives the host's default NaN,
//   0xfff8000000000000. (Stated here, not left to the host: which operand a host's instruction
//   propagates depends on how the compiler ordered them.)
// - .ftz flushes inputs, and results whose rounded value is subnormal ("tininess after
//   rounding"), to a zero of the same sign.
// - .sat maps -0.0 (like every value that is not > 0) to +0.0; .relu maps every non-NaN value with
//   the sign bit set, -0.0 included, to +0.0 (both behave as max(x, +0.0) with PTX's +0 > -0).
// - Integer division by zero returns what NVIDIA GPUs return: unsigned x/0 = all ones, signed
//   x/0 = -1, x%0 = x. INT_MIN/-1 = INT_MIN and INT_MIN%-1 = 0. Nothing traps on the host.
// - fns with base > 31 returns 0xffffffff.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <fenv.h>
#include <limits>
#include <type_traits>

// NaN tests (x != x), signed zeros and the error-free transformations need IEEE arithmetic.
// Contracting a*b+c into an fma is harmless here: every such product is exact in double.
#if defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__)
#error "emu/semantics.hpp needs IEEE 754 arithmetic: build it without -ffast-math"
#endif

namespace hone::ptx {
enum class Type : uint8_t; // ptx/ir.hpp; cvt() takes the instruction's types as the IR has them
}

namespace hone::emu::sem {

using ptx::Type;

// Rounding of float arithmetic (.rn .rz .rm .rp) and of cvt to f16x2/tf32 (.rna: to nearest,
// ties away from zero).
enum class Round : uint8_t { rn, rz, rm, rp, rna };

// A cvt rounding modifier. Numbered like the executor's RoundMode (exec_code.hpp), so a cast
// converts one to the other.
enum class CvtMode : uint8_t { none, rn, rz, rm, rp, rna, rni, rzi, rmi, rpi };

// The arithmetic rounding a cvt-style modifier names: none (PTX's default) is rn, and the
// integer forms map to their float counterparts.
inline Round round_of(CvtMode m) {
  switch (m) {
  case CvtMode::rz:
  case CvtMode::rzi:
    return Round::rz;
  case CvtMode::rm:
  case CvtMode::rmi:
    return Round::rm;
  case CvtMode::rp:
  case CvtMode::rpi:
    return Round::rp;
  case CvtMode::rna:
    return Round::rna;
  default:
    return Round::rn;
  }
}

// setp/set comparison operators, numbered like the executor's CmpOp.
enum class Cmp : uint8_t {
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  lo,
  ls,
  hi,
  hs,
  equ,
  neu,
  ltu,
  leu,
  gtu,
  geu,
  num,
  nan,
};

enum class TestOp : uint8_t { finite, infinite, number, notanumber, normal, subnormal };

enum class PrmtMode : uint8_t { none, f4e, b4e, rc8, ecl, ecr, rc16 };

// ---------------------------------------------------------------------------------------------
// Bits

inline uint32_t f32_bits(float f) {
  return std::bit_cast<uint32_t>(f);
}
inline uint64_t f64_bits(double d) {
  return std::bit_cast<uint64_t>(d);
}
inline float f32_from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}
inline double f64_from_bits(uint64_t u) {
  return std::bit_cast<double>(u);
}

constexpr uint32_t k_nan_f32 = 0x7fffffffu;
constexpr uint16_t k_nan_f16 = 0x7fffu;
constexpr uint16_t k_nan_bf16 = 0x7fffu;
// The NaN rcp.approx.ftz.f64 and rsqrt.approx.ftz.f64 return (PTX 9.7.3.14, 9.7.3.17).
constexpr uint64_t k_nan_f64_approx = 0x7fffffff00000000ull;

inline bool is_nan_f32(float x) {
  return x != x;
}
inline float canon_f32(float x) {
  return x != x ? f32_from_bits(k_nan_f32) : x;
}

// Flush a subnormal to a zero of its sign (.ftz).
inline float flush_f32(float x) {
  const uint32_t u = f32_bits(x);
  return (u & 0x7f800000u) == 0 ? f32_from_bits(u & 0x80000000u) : x;
}
// .sat on a float result: clamp to [0.0, 1.0]; NaN and -0.0 become +0.0.
inline float sat_f32(float x) {
  if (!(x > 0.0f)) return 0.0f;
  return x > 1.0f ? 1.0f : x;
}

// Saves the thread's floating-point environment and installs the default one (round to nearest,
// no FTZ/DAZ, exceptions masked, no exception flags); restores the saved one, flags included,
// when destroyed. Hold one while running PTX on a thread the application may have configured.
// (Held per block: on x86-64 it touches only what differs, the SSE control and status register
// always and the x87 environment when its control word or flags are not the default's.)
class FpEnvGuard {
public:
  FpEnvGuard();
  ~FpEnvGuard();
  FpEnvGuard(const FpEnvGuard&) = delete;
  FpEnvGuard& operator=(const FpEnvGuard&) = delete;

private:
#if defined(__x86_64__)
  uint32_t m_mxcsr = 0;
  uint16_t m_x87_control = 0;
  uint16_t m_x87_status = 0;
  bool m_x87_saved = false;
#endif
  fenv_t m_saved;
};

// ---------------------------------------------------------------------------------------------
// Rounding to binary formats (shared by arithmetic, cvt and the .approx functions)

// A binary floating-point format: a sign bit, exp_bits of biased exponent and mant_bits of
// fraction. max_finite is the largest finite magnitude's encoding (sign excluded); a format
// without infinities (e4m3) uses the all-ones exponent for finite values and NaN.
struct FloatFormat {
  uint8_t exp_bits;
  uint8_t mant_bits;
  bool has_inf;
  uint64_t max_finite;
};
inline constexpr FloatFormat k_fmt_f16{5, 10, true, 0x7bffu};
inline constexpr FloatFormat k_fmt_bf16{8, 7, true, 0x7f7fu};
inline constexpr FloatFormat k_fmt_f32{8, 23, true, 0x7f7fffffu};
inline constexpr FloatFormat k_fmt_f64{11, 52, true, 0x7fefffffffffffffull};
inline constexpr FloatFormat k_fmt_tf32{8, 10, true, 0x3fbffu}; // f32 bits 31..13
inline constexpr FloatFormat k_fmt_e4m3{4, 3, false, 0x7eu};    // no inf; 0x7f is NaN
inline constexpr FloatFormat k_fmt_e5m2{5, 2, true, 0x7bu};
inline constexpr FloatFormat k_fmt_f64_hi{11, 20, true, 0x7fefffffu}; // the 1.11.20 upper word

// Round the exact value (-1)^neg * (sig + d) * 2^exp, where d is 0 when !sticky and lies strictly
// between 0 and 1 otherwise, to format `f` with mode `r`. Returns the encoding (sign bit at
// exp_bits + mant_bits). Overflow gives infinity or the largest finite value as IEEE 754 says
// for the mode; with `satfinite` (and always for formats without infinity) the largest finite
// value. Subnormal results are kept. Precondition: sticky implies that sig has more significant
// bits than the format keeps (the callers' sig always carries a guard bit).
uint64_t round_to_format(bool neg, uint64_t sig, int exp, bool sticky, const FloatFormat& f,
                         Round r, bool satfinite = false);

// Round s + e to format `f`, where s is a finite double and e the exact error of an error-free
// transformation (|e| <= ulp(s)/2; 0 when s is exact). Precondition: |s| >= 2^-960 when e != 0,
// true for every caller (operands of at most f32 range). s == 0 returns a zero of s's sign.
uint64_t round_double_to_format(double s, double e, const FloatFormat& f, Round r,
                                bool satfinite = false);

// The value of an encoding in format `f` as a double (exact: every format here fits).
double format_to_double(uint64_t bits, const FloatFormat& f);

// ---------------------------------------------------------------------------------------------
// f16 / bf16 <-> f32 (cvt.f32.f16, cvt.rn.f16.f32, cvt.f32.bf16, cvt.rn.bf16.f32)

// Exact; NaN gives the canonical f32 NaN.
inline float f16_to_f32(uint16_t h) {
  const uint32_t s = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return m ? f32_from_bits(k_nan_f32) : f32_from_bits(s | 0x7f800000u);
  if (e == 0) {
    if (m == 0) return f32_from_bits(s);
    const int p = 31 - std::countl_zero(m); // value = 2^(p-24) * (m / 2^p)
    return f32_from_bits(s | uint32_t(p + 103) << 23 | ((m << (23 - p)) & 0x7fffffu));
  }
  return f32_from_bits(s | (e + 112) << 23 | m << 13);
}

// Round to nearest even; NaN gives 0x7fff.
inline uint16_t f32_to_f16_rn(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t s = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return k_nan_f16;
  if (a >= 0x477ff000u) return s | 0x7c00u; // >= 65520: rounds to infinity
  if (a >= 0x38800000u) {                   // >= 2^-14: normal
    a += 0xfffu + ((a >> 13) & 1u);
    return uint16_t(s | ((a - 0x38000000u) >> 13));
  }
  if (a <= 0x33000000u) return s; // <= 2^-25: rounds to zero
  // Subnormal: value = sig * 2^(e-150); in units of 2^-24 that is sig >> (126 - e).
  const uint32_t e = a >> 23;
  const uint32_t sig = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e; // 14..24
  uint32_t m = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (m & 1u))) ++m;
  return uint16_t(s | m);
}

// Exact; NaN gives the canonical f32 NaN.
inline float bf16_to_f32(uint16_t h) {
  if ((h & 0x7fffu) > 0x7f80u) return f32_from_bits(k_nan_f32);
  return f32_from_bits(uint32_t(h) << 16);
}

// Round to nearest even; NaN gives 0x7fff.
inline uint16_t f32_to_bf16_rn(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return k_nan_bf16;
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline uint16_t flush_f16(uint16_t h) {
  return (h & 0x7c00u) == 0 ? uint16_t(h & 0x8000u) : h;
}
inline uint16_t flush_bf16(uint16_t h) {
  return (h & 0x7f80u) == 0 ? uint16_t(h & 0x8000u) : h;
}
inline bool is_nan_f16(uint16_t h) {
  return (h & 0x7fffu) > 0x7c00u;
}
inline bool is_nan_bf16(uint16_t h) {
  return (h & 0x7fffu) > 0x7f80u;
}

// ---------------------------------------------------------------------------------------------
// f32 arithmetic (9.7.3.3-9.7.3.8, 9.7.3.13, 9.7.3.15). ftz: .ftz, sat: .sat.

namespace detail {
float add_f32_dir(float a, float b, Round r, bool ftz, bool sat);
float mul_f32_dir(float a, float b, Round r, bool ftz, bool sat);
float fma_f32_dir(float a, float b, float c, Round r, bool ftz, bool sat);
float div_f32_dir(float a, float b, Round r, bool ftz);
float sqrt_f32_dir(float a, Round r, bool ftz);
double add_f64_dir(double a, double b, Round r);
double mul_f64_dir(double a, double b, Round r);
double fma_f64_dir(double a, double b, double c, Round r);
double div_f64_dir(double a, double b, Round r);
double sqrt_f64_dir(double a, Round r);

inline float finish_f32(float x, bool ftz, bool sat) {
  if (ftz) x = flush_f32(x);
  if (sat) x = sat_f32(x);
  return canon_f32(x);
}
inline bool is_rn(Round r) {
  return r == Round::rn || r == Round::rna;
}
} // namespace detail

inline float add_f32(float a, float b, Round r = Round::rn, bool ftz = false, bool sat = false) {
  if (!detail::is_rn(r)) return detail::add_f32_dir(a, b, r, ftz, sat);
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
  }
  return detail::finish_f32(a + b, ftz, sat);
}
inline float sub_f32(float a, float b, Round r = Round::rn, bool ftz = false, bool sat = false) {
  return add_f32(a, f32_from_bits(f32_bits(b) ^ 0x80000000u), r, ftz, sat);
}
inline float mul_f32(float a, float b, Round r = Round::rn, bool ftz = false, bool sat = false) {
  if (!detail::is_rn(r)) return detail::mul_f32_dir(a, b, r, ftz, sat);
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
  }
  return detail::finish_f32(a * b, ftz, sat);
}
// fma.f32 and mad.f32 (sm_20+): one rounding of a*b+c.
inline float fma_f32(float a, float b, float c, Round r = Round::rn, bool ftz = false,
                     bool sat = false) {
  if (!detail::is_rn(r)) return detail::fma_f32_dir(a, b, c, r, ftz, sat);
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
    c = flush_f32(c);
  }
  return detail::finish_f32(std::fma(a, b, c), ftz, sat);
}
// div.rnd.f32: correctly rounded.
inline float div_f32(float a, float b, Round r = Round::rn, bool ftz = false) {
  if (!detail::is_rn(r)) return detail::div_f32_dir(a, b, r, ftz);
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
  }
  return detail::finish_f32(a / b, ftz, false);
}
// div.full.f32: PTX allows 2 ulp; this returns the correctly rounded quotient.
inline float div_full_f32(float a, float b, bool ftz = false) {
  return div_f32(a, b, Round::rn, ftz);
}
// div.approx.f32: a * rcp(b), with rcp's result flushed when subnormal, so that for
// 2^126 < |b| < 2^128 the result is NaN when a is infinite and a signed zero otherwise (9.7.3.8).
float div_approx_f32(float a, float b, bool ftz = false);
// sqrt.rnd.f32 and rcp.rnd.f32: correctly rounded.
inline float sqrt_f32(float a, Round r = Round::rn, bool ftz = false) {
  if (!detail::is_rn(r)) return detail::sqrt_f32_dir(a, r, ftz);
  if (ftz) a = flush_f32(a);
  return detail::finish_f32(std::sqrt(a), ftz, false);
}
inline float rcp_f32(float a, Round r = Round::rn, bool ftz = false) {
  return div_f32(1.0f, a, r, ftz);
}

// ---------------------------------------------------------------------------------------------
// f64 arithmetic. Directed modes run the host operation under fesetround.

namespace detail {
// What an f64 operation that gave the NaN `r` returns: its first NaN operand, quieted, else the
// default NaN (see "Choices" above); r itself when it is not a NaN.
inline double propagate_f64(double r, double a, double b = 0.0, double c = 0.0) {
  if (r == r) return r;
  constexpr uint64_t quiet = 1ull << 51;
  if (a != a) return f64_from_bits(f64_bits(a) | quiet);
  if (b != b) return f64_from_bits(f64_bits(b) | quiet);
  if (c != c) return f64_from_bits(f64_bits(c) | quiet);
  return f64_from_bits(0xfff8000000000000ull);
}
} // namespace detail

inline double add_f64(double a, double b, Round r = Round::rn) {
  return detail::is_rn(r) ? detail::propagate_f64(a + b, a, b) : detail::add_f64_dir(a, b, r);
}
inline double sub_f64(double a, double b, Round r = Round::rn) {
  return add_f64(a, -b, r);
}
inline double mul_f64(double a, double b, Round r = Round::rn) {
  return detail::is_rn(r) ? detail::propagate_f64(a * b, a, b) : detail::mul_f64_dir(a, b, r);
}
inline double fma_f64(double a, double b, double c, Round r = Round::rn) {
  return detail::is_rn(r) ? detail::propagate_f64(std::fma(a, b, c), a, b, c)
                          : detail::fma_f64_dir(a, b, c, r);
}
inline double div_f64(double a, double b, Round r = Round::rn) {
  return detail::is_rn(r) ? detail::propagate_f64(a / b, a, b) : detail::div_f64_dir(a, b, r);
}
inline double sqrt_f64(double a, Round r = Round::rn) {
  return detail::is_rn(r) ? detail::propagate_f64(std::sqrt(a), a) : detail::sqrt_f64_dir(a, r);
}
inline double rcp_f64(double a, Round r = Round::rn) {
  return div_f64(1.0, a, r);
}

// ---------------------------------------------------------------------------------------------
// .approx functions (9.7.3.13-22, 9.7.4.9-10). Each returns a value within the ISA's stated
// bound (most are correctly rounded or within one rounding of the double result) and the ISA's
// special values. Bounds: rcp 1 ulp; sqrt rel 2^-23; rsqrt.f32 rel 2^-22.9; sin/cos abs 2^-20.5
// on [-2pi, 2pi]; lg2 abs 2^-22 on (0.5, 2), rel 2^-22 elsewhere; ex2.f32 2 ulp; tanh.f32 rel
// 2^-11; ex2.f16 rel 2^-9.9; ex2.bf16 rel 2^-7; tanh.f16 abs 2^-10.987; tanh.bf16 abs 2^-8.

float rcp_approx_f32(float a, bool ftz = false);
float sqrt_approx_f32(float a, bool ftz = false);
float rsqrt_approx_f32(float a, bool ftz = false);
double rsqrt_approx_f64(double a);
// Computed from the upper 32 bits of `a` (1.11.20), result in the upper 32 bits, lower 32 zero.
double rsqrt_approx_ftz_f64(double a);
double rcp_approx_ftz_f64(double a);
float sin_approx_f32(float a, bool ftz = false);
float cos_approx_f32(float a, bool ftz = false);
float lg2_approx_f32(float a, bool ftz = false);
float ex2_approx_f32(float a, bool ftz = false);
float tanh_approx_f32(float a);
uint16_t ex2_approx_f16(uint16_t a);
uint16_t ex2_approx_ftz_bf16(uint16_t a);
uint16_t tanh_approx_f16(uint16_t a);
uint16_t tanh_approx_bf16(uint16_t a);
inline uint32_t ex2_approx_f16x2(uint32_t a) {
  return ex2_approx_f16(uint16_t(a)) | uint32_t(ex2_approx_f16(uint16_t(a >> 16))) << 16;
}
inline uint32_t ex2_approx_ftz_bf16x2(uint32_t a) {
  return ex2_approx_ftz_bf16(uint16_t(a)) | uint32_t(ex2_approx_ftz_bf16(uint16_t(a >> 16))) << 16;
}
inline uint32_t tanh_approx_f16x2(uint32_t a) {
  return tanh_approx_f16(uint16_t(a)) | uint32_t(tanh_approx_f16(uint16_t(a >> 16))) << 16;
}
inline uint32_t tanh_approx_bf16x2(uint32_t a) {
  return tanh_approx_bf16(uint16_t(a)) | uint32_t(tanh_approx_bf16(uint16_t(a >> 16))) << 16;
}

// ---------------------------------------------------------------------------------------------
// abs, neg, min, max, copysign, testp (9.7.3.1-2, 9.7.3.9-12)

// abs/neg act on the sign bit (a NaN keeps its payload: PTX leaves it unspecified for f32).
inline float abs_f32(float a, bool ftz = false) {
  if (ftz) a = flush_f32(a);
  return f32_from_bits(f32_bits(a) & 0x7fffffffu);
}
inline float neg_f32(float a, bool ftz = false) {
  if (ftz) a = flush_f32(a);
  return f32_from_bits(f32_bits(a) ^ 0x80000000u);
}
// abs.f64 passes a NaN through unchanged (9.7.3.9).
inline double abs_f64(double a) {
  return a != a ? a : f64_from_bits(f64_bits(a) & ~(1ull << 63));
}
inline double neg_f64(double a) {
  return f64_from_bits(f64_bits(a) ^ (1ull << 63));
}

namespace detail {
// PTX min/max of two numbers: -0.0 < +0.0.
template <class F> inline F min_num(F a, F b) {
  if (a < b) return a;
  if (b < a) return b;
  return std::signbit(a) ? a : b;
}
template <class F> inline F max_num(F a, F b) {
  if (a > b) return a;
  if (b > a) return b;
  return std::signbit(a) ? b : a;
}
template <bool is_max>
inline float minmax_f32(float a, float b, bool ftz, bool nan, bool xorsign_abs) {
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
  }
  const uint32_t xs = (f32_bits(a) ^ f32_bits(b)) & 0x80000000u;
  if (xorsign_abs) {
    a = f32_from_bits(f32_bits(a) & 0x7fffffffu);
    b = f32_from_bits(f32_bits(b) & 0x7fffffffu);
  }
  const bool na = a != a, nb = b != b;
  float d;
  if (na || nb) {
    if (nan || (na && nb)) return f32_from_bits(k_nan_f32);
    d = na ? b : a;
  } else {
    d = is_max ? max_num(a, b) : min_num(a, b);
  }
  if (xorsign_abs) d = f32_from_bits((f32_bits(d) & 0x7fffffffu) | xs);
  return d;
}
} // namespace detail

// min/max{.ftz}{.NaN}{.xorsign.abs}.f32. Without .NaN a NaN operand yields the other one.
inline float min_f32(float a, float b, bool ftz = false, bool nan = false,
                     bool xorsign_abs = false) {
  return detail::minmax_f32<false>(a, b, ftz, nan, xorsign_abs);
}
inline float max_f32(float a, float b, bool ftz = false, bool nan = false,
                     bool xorsign_abs = false) {
  return detail::minmax_f32<true>(a, b, ftz, nan, xorsign_abs);
}
// Three-input min/max{.ftz}{.NaN}{.abs}.f32 (sm_100).
inline float min3_f32(float a, float b, float c, bool ftz = false, bool nan = false,
                      bool abs = false) {
  if (abs) {
    a = abs_f32(a);
    b = abs_f32(b);
    c = abs_f32(c);
  }
  return min_f32(min_f32(a, b, ftz, nan), c, ftz, nan);
}
inline float max3_f32(float a, float b, float c, bool ftz = false, bool nan = false,
                      bool abs = false) {
  if (abs) {
    a = abs_f32(a);
    b = abs_f32(b);
    c = abs_f32(c);
  }
  return max_f32(max_f32(a, b, ftz, nan), c, ftz, nan);
}
inline double min_f64(double a, double b) {
  if (a != a) return b != b ? detail::propagate_f64(a, a, b) : b;
  if (b != b) return a;
  return detail::min_num(a, b);
}
inline double max_f64(double a, double b) {
  if (a != a) return b != b ? detail::propagate_f64(a, a, b) : b;
  if (b != b) return a;
  return detail::max_num(a, b);
}

// copysign: the value of b with the sign of a (PTX operand order, 9.7.3.2).
inline float copysign_f32(float a, float b) {
  return f32_from_bits((f32_bits(b) & 0x7fffffffu) | (f32_bits(a) & 0x80000000u));
}
inline double copysign_f64(double a, double b) {
  return f64_from_bits((f64_bits(b) & ~(1ull << 63)) | (f64_bits(a) & (1ull << 63)));
}

// testp (9.7.3.1). .normal is true for +-0.0, as the ISA says.
inline bool testp_bits(TestOp op, uint64_t mag, uint64_t inf, uint64_t min_normal) {
  switch (op) {
  case TestOp::finite:
    return mag < inf;
  case TestOp::infinite:
    return mag == inf;
  case TestOp::number:
    return mag <= inf;
  case TestOp::notanumber:
    return mag > inf;
  case TestOp::normal:
    return mag == 0 || (mag >= min_normal && mag < inf);
  case TestOp::subnormal:
    return mag != 0 && mag < min_normal;
  }
  return false;
}
inline bool testp_f32(TestOp op, float a) {
  return testp_bits(op, f32_bits(a) & 0x7fffffffu, 0x7f800000u, 0x00800000u);
}
inline bool testp_f64(TestOp op, double a) {
  return testp_bits(op, f64_bits(a) & ~(1ull << 63), 0x7ff0000000000000ull, 1ull << 52);
}

// ---------------------------------------------------------------------------------------------
// Comparisons (setp/set, 9.7.5.1-2)

// Ordered operators are false and unordered ones (…u) true when an operand is NaN; num and nan
// test for NaN. lo/ls/hi/hs are taken as lt/le/gt/ge on floats.
template <class F> inline bool cmp_float(Cmp op, F a, F b) {
  const bool un = a != a || b != b;
  switch (op) {
  case Cmp::eq:
    return !un && a == b;
  case Cmp::ne:
    return !un && a != b;
  case Cmp::lt:
  case Cmp::lo:
    return !un && a < b;
  case Cmp::le:
  case Cmp::ls:
    return !un && a <= b;
  case Cmp::gt:
  case Cmp::hi:
    return !un && a > b;
  case Cmp::ge:
  case Cmp::hs:
    return !un && a >= b;
  case Cmp::equ:
    return un || a == b;
  case Cmp::neu:
    return un || a != b;
  case Cmp::ltu:
    return un || a < b;
  case Cmp::leu:
    return un || a <= b;
  case Cmp::gtu:
    return un || a > b;
  case Cmp::geu:
    return un || a >= b;
  case Cmp::num:
    return !un;
  case Cmp::nan:
    return un;
  }
  return false;
}
inline bool cmp_f32(Cmp op, float a, float b, bool ftz = false) {
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
  }
  return cmp_float(op, a, b);
}
inline bool cmp_f64(Cmp op, double a, double b) {
  return cmp_float(op, a, b);
}
inline bool cmp_f16(Cmp op, uint16_t a, uint16_t b, bool ftz = false) {
  if (ftz) {
    a = flush_f16(a);
    b = flush_f16(b);
  }
  return cmp_float(op, f16_to_f32(a), f16_to_f32(b));
}
inline bool cmp_bf16(Cmp op, uint16_t a, uint16_t b) {
  return cmp_float(op, bf16_to_f32(a), bf16_to_f32(b));
}
// Integers: T's signedness decides lt/le/gt/ge; lo/ls/hi/hs always compare unsigned; the
// unordered and NaN operators reduce to their ordered forms (num: true, nan: false).
template <class T> inline bool cmp_int(Cmp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  const U ua = U(a), ub = U(b);
  switch (op) {
  case Cmp::eq:
  case Cmp::equ:
    return a == b;
  case Cmp::ne:
  case Cmp::neu:
    return a != b;
  case Cmp::lt:
  case Cmp::ltu:
    return a < b;
  case Cmp::le:
  case Cmp::leu:
    return a <= b;
  case Cmp::gt:
  case Cmp::gtu:
    return a > b;
  case Cmp::ge:
  case Cmp::geu:
    return a >= b;
  case Cmp::lo:
    return ua < ub;
  case Cmp::ls:
    return ua <= ub;
  case Cmp::hi:
    return ua > ub;
  case Cmp::hs:
    return ua >= ub;
  case Cmp::num:
    return true;
  case Cmp::nan:
    return false;
  }
  return false;
}
// set's destination value for an integer (0xffffffff) or float (1.0f) destination.
inline uint32_t set_u32(bool p) {
  return p ? 0xffffffffu : 0u;
}
inline float set_f32(bool p) {
  return p ? 1.0f : 0.0f;
}

// ---------------------------------------------------------------------------------------------
// Half precision (9.7.4): .rn only. add/sub/mul via f32 are correctly rounded: f32 has
// 24 >= 2*11+2 bits, so rounding the exact result to f32 and then to f16 (or bf16, 8 bits) equals
// rounding it once (Figueroa's double-rounding theorem); fma goes through double with an
// error-free transformation (semantics_float.cpp).

namespace detail {
inline uint16_t finish_f16(uint16_t h, bool ftz, bool sat, bool relu) {
  if (ftz) h = flush_f16(h);
  if (is_nan_f16(h)) return sat ? 0 : k_nan_f16;
  if (sat) {
    if (h & 0x8000u) return 0;
    return h > 0x3c00u ? uint16_t(0x3c00u) : h;
  }
  if (relu && (h & 0x8000u)) return 0;
  return h;
}
inline uint16_t finish_bf16(uint16_t h, bool relu) {
  if (is_nan_bf16(h)) return k_nan_bf16;
  if (relu && (h & 0x8000u)) return 0;
  return h;
}
template <class F> inline uint32_t map_x2(uint32_t a, uint32_t b, F f) {
  return uint32_t(f(uint16_t(a), uint16_t(b))) | uint32_t(f(uint16_t(a >> 16), uint16_t(b >> 16)))
                                                     << 16;
}
template <class F> inline uint32_t map_x2(uint32_t a, uint32_t b, uint32_t c, F f) {
  return uint32_t(f(uint16_t(a), uint16_t(b), uint16_t(c))) |
         uint32_t(f(uint16_t(a >> 16), uint16_t(b >> 16), uint16_t(c >> 16))) << 16;
}
} // namespace detail

inline uint16_t add_f16(uint16_t a, uint16_t b, bool ftz = false, bool sat = false) {
  if (ftz) {
    a = flush_f16(a);
    b = flush_f16(b);
  }
  return detail::finish_f16(f32_to_f16_rn(f16_to_f32(a) + f16_to_f32(b)), ftz, sat, false);
}
inline uint16_t sub_f16(uint16_t a, uint16_t b, bool ftz = false, bool sat = false) {
  return add_f16(a, uint16_t(b ^ 0x8000u), ftz, sat);
}
inline uint16_t mul_f16(uint16_t a, uint16_t b, bool ftz = false, bool sat = false) {
  if (ftz) {
    a = flush_f16(a);
    b = flush_f16(b);
  }
  return detail::finish_f16(f32_to_f16_rn(f16_to_f32(a) * f16_to_f32(b)), ftz, sat, false);
}
uint16_t fma_f16(uint16_t a, uint16_t b, uint16_t c, bool ftz = false, bool sat = false,
                 bool relu = false);
inline uint16_t add_bf16(uint16_t a, uint16_t b) {
  return detail::finish_bf16(f32_to_bf16_rn(bf16_to_f32(a) + bf16_to_f32(b)), false);
}
inline uint16_t sub_bf16(uint16_t a, uint16_t b) {
  return add_bf16(a, uint16_t(b ^ 0x8000u));
}
inline uint16_t mul_bf16(uint16_t a, uint16_t b) {
  return detail::finish_bf16(f32_to_bf16_rn(bf16_to_f32(a) * bf16_to_f32(b)), false);
}
uint16_t fma_bf16(uint16_t a, uint16_t b, uint16_t c, bool relu = false);

inline uint16_t neg_f16(uint16_t a, bool ftz = false) {
  return (ftz ? flush_f16(a) : a) ^ 0x8000u;
}
inline uint16_t abs_f16(uint16_t a, bool ftz = false) {
  return (ftz ? flush_f16(a) : a) & 0x7fffu;
}
inline uint16_t neg_bf16(uint16_t a) {
  return a ^ 0x8000u;
}
inline uint16_t abs_bf16(uint16_t a) {
  return a & 0x7fffu;
}

namespace detail {
template <bool is_max, bool bf>
inline uint16_t minmax_h(uint16_t a, uint16_t b, bool ftz, bool nan, bool xorsign_abs) {
  if (ftz) {
    a = bf ? flush_bf16(a) : flush_f16(a);
    b = bf ? flush_bf16(b) : flush_f16(b);
  }
  const uint16_t xs = (a ^ b) & 0x8000u;
  if (xorsign_abs) {
    a &= 0x7fffu;
    b &= 0x7fffu;
  }
  const bool na = bf ? is_nan_bf16(a) : is_nan_f16(a);
  const bool nb = bf ? is_nan_bf16(b) : is_nan_f16(b);
  uint16_t d;
  if (na || nb) {
    if (nan || (na && nb)) return bf ? k_nan_bf16 : k_nan_f16;
    d = na ? b : a;
  } else {
    const float fa = bf ? bf16_to_f32(a) : f16_to_f32(a);
    const float fb = bf ? bf16_to_f32(b) : f16_to_f32(b);
    if (fa == fb) // equal values: only +-0 differ, and -0 < +0
      d = is_max ? ((a & 0x8000u) ? b : a) : ((a & 0x8000u) ? a : b);
    else
      d = ((fa < fb) != is_max) ? a : b;
  }
  if (xorsign_abs) d = uint16_t((d & 0x7fffu) | xs);
  return d;
}
} // namespace detail

inline uint16_t min_f16(uint16_t a, uint16_t b, bool ftz = false, bool nan = false,
                        bool xorsign_abs = false) {
  return detail::minmax_h<false, false>(a, b, ftz, nan, xorsign_abs);
}
inline uint16_t max_f16(uint16_t a, uint16_t b, bool ftz = false, bool nan = false,
                        bool xorsign_abs = false) {
  return detail::minmax_h<true, false>(a, b, ftz, nan, xorsign_abs);
}
inline uint16_t min_bf16(uint16_t a, uint16_t b, bool nan = false, bool xorsign_abs = false) {
  return detail::minmax_h<false, true>(a, b, false, nan, xorsign_abs);
}
inline uint16_t max_bf16(uint16_t a, uint16_t b, bool nan = false, bool xorsign_abs = false) {
  return detail::minmax_h<true, true>(a, b, false, nan, xorsign_abs);
}

// Packed forms: each half independently.
inline uint32_t add_f16x2(uint32_t a, uint32_t b, bool ftz = false, bool sat = false) {
  return detail::map_x2(a, b, [&](uint16_t x, uint16_t y) { return add_f16(x, y, ftz, sat); });
}
inline uint32_t sub_f16x2(uint32_t a, uint32_t b, bool ftz = false, bool sat = false) {
  return detail::map_x2(a, b, [&](uint16_t x, uint16_t y) { return sub_f16(x, y, ftz, sat); });
}
inline uint32_t mul_f16x2(uint32_t a, uint32_t b, bool ftz = false, bool sat = false) {
  return detail::map_x2(a, b, [&](uint16_t x, uint16_t y) { return mul_f16(x, y, ftz, sat); });
}
inline uint32_t fma_f16x2(uint32_t a, uint32_t b, uint32_t c, bool ftz = false, bool sat = false,
                          bool relu = false) {
  return detail::map_x2(a, b, c, [&](uint16_t x, uint16_t y, uint16_t z) {
    return fma_f16(x, y, z, ftz, sat, relu);
  });
}
inline uint32_t add_bf16x2(uint32_t a, uint32_t b) {
  return detail::map_x2(a, b, [](uint16_t x, uint16_t y) { return add_bf16(x, y); });
}
inline uint32_t sub_bf16x2(uint32_t a, uint32_t b) {
  return detail::map_x2(a, b, [](uint16_t x, uint16_t y) { return sub_bf16(x, y); });
}
inline uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  return detail::map_x2(a, b, [](uint16_t x, uint16_t y) { return mul_bf16(x, y); });
}
inline uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c, bool relu = false) {
  return detail::map_x2(
      a, b, c, [&](uint16_t x, uint16_t y, uint16_t z) { return fma_bf16(x, y, z, relu); });
}
inline uint32_t neg_f16x2(uint32_t a, bool ftz = false) {
  return detail::map_x2(a, 0, [&](uint16_t x, uint16_t) { return neg_f16(x, ftz); });
}
inline uint32_t abs_f16x2(uint32_t a, bool ftz = false) {
  return detail::map_x2(a, 0, [&](uint16_t x, uint16_t) { return abs_f16(x, ftz); });
}
inline uint32_t neg_bf16x2(uint32_t a) {
  return a ^ 0x80008000u;
}
inline uint32_t abs_bf16x2(uint32_t a) {
  return a & 0x7fff7fffu;
}
inline uint32_t min_f16x2(uint32_t a, uint32_t b, bool ftz = false, bool nan = false,
                          bool xorsign_abs = false) {
  return detail::map_x2(
      a, b, [&](uint16_t x, uint16_t y) { return min_f16(x, y, ftz, nan, xorsign_abs); });
}
inline uint32_t max_f16x2(uint32_t a, uint32_t b, bool ftz = false, bool nan = false,
                          bool xorsign_abs = false) {
  return detail::map_x2(
      a, b, [&](uint16_t x, uint16_t y) { return max_f16(x, y, ftz, nan, xorsign_abs); });
}
inline uint32_t min_bf16x2(uint32_t a, uint32_t b, bool nan = false, bool xorsign_abs = false) {
  return detail::map_x2(a, b,
                        [&](uint16_t x, uint16_t y) { return min_bf16(x, y, nan, xorsign_abs); });
}
inline uint32_t max_bf16x2(uint32_t a, uint32_t b, bool nan = false, bool xorsign_abs = false) {
  return detail::map_x2(a, b,
                        [&](uint16_t x, uint16_t y) { return max_bf16(x, y, nan, xorsign_abs); });
}

// ---------------------------------------------------------------------------------------------
// Conversions (cvt, 9.7.9.21)

// cvt.mode{.ftz}{.sat}{.relu}{.satfinite}.dst.src for every pair of u8..u64, s8..s64, f16, bf16,
// f32, f64 (b8..b64 read as unsigned), tf32 and e4m3/e5m2 (one element) as destinations, and
// e4m3/e5m2 as sources. The source is the low bits of src_bits for the source width. The result
// is sign-extended to 64 bits for signed destinations and zero-extended otherwise; tf32 comes
// back as its f32 bit pattern (low 13 bits zero), e4m3/e5m2 as one byte.
//
// Rules (PTX 9.7.9.21): float->int rounds with .rni/.rzi/.rmi/.rpi (rn/rz/rm/rp and none are
// taken as rni/rzi/rmi/rpi and rzi), saturates to the destination range, and maps NaN to 0, or to
// 1 << (width-1) when the source is f64 or the destination is 64-bit. int->int truncates or
// extends; .sat clamps to the destination range. float->float and int->float round with the
// mode (none: rn); .rni etc. on float->float round to an integral value in the source format.
// .ftz flushes f32 subnormal inputs and f32 subnormal results. .sat clamps float results to
// [0, 1] (NaN -> +0). .relu clamps negative results to +0 (NaN -> canonical NaN). .satfinite turns
// results beyond the finite range into the largest finite value of that sign (always on for
// e4m3/e5m2). NaN results: canonical for f16/bf16/f32/tf32 (0x7fff, 0x7fffffff), 0x7f for
// e4m3/e5m2, and for f64 the source NaN's payload, quieted. Packed types (f16x2, …) are handled by
// the cvt_*x2 functions below; cvt() returns 0 for them.
uint64_t cvt(uint64_t src_bits, Type dst, Type src, CvtMode mode, bool ftz = false,
             bool sat = false, bool relu = false, bool satfinite = false);

// cvt.frnd{.relu}{.satfinite}.f16x2.f32 d, a, b: a goes to the upper half.
uint32_t cvt_f16x2_f32(float a, float b, CvtMode mode, bool relu = false, bool satfinite = false);
uint32_t cvt_bf16x2_f32(float a, float b, CvtMode mode, bool relu = false, bool satfinite = false);
// cvt.rn.satfinite{.relu}.e4m3x2.f32 d, a, b (a in bits 15..8) and .e5m2x2.
uint16_t cvt_e4m3x2_f32(float a, float b, bool relu = false);
uint16_t cvt_e5m2x2_f32(float a, float b, bool relu = false);
// cvt.rn.satfinite{.relu}.e4m3x2.f16x2 d, a (a[31:16] to bits 15..8) and .e5m2x2.
uint16_t cvt_e4m3x2_f16x2(uint32_t a, bool relu = false);
uint16_t cvt_e5m2x2_f16x2(uint32_t a, bool relu = false);
// cvt.rn{.relu}.f16x2.e4m3x2 d, a (a[15:8] to bits 31..16) and .e5m2x2; exact.
uint32_t cvt_f16x2_e4m3x2(uint16_t a, bool relu = false);
uint32_t cvt_f16x2_e5m2x2(uint16_t a, bool relu = false);
// cvt.rna{.satfinite}.tf32.f32 and cvt.rn/rz{.relu}{.satfinite}.tf32.f32.
uint32_t cvt_tf32_f32(float a, CvtMode mode, bool relu = false, bool satfinite = false);

// Fast forms of the common conversions; they agree bit for bit with cvt().
namespace detail {
// Round to the nearest integer, ties to even, whatever the host rounding mode.
template <class F> inline F round_even(F x) {
  constexpr F big = sizeof(F) == 4 ? F(8388608.0) : F(4503599627370496.0); // 2^23, 2^52
  const F ax = std::fabs(x);
  if (!(ax < big)) return x; // integral already, inf or nan
  F t = std::trunc(x);
  const F frac = ax - std::fabs(t); // exact
  if (frac > F(0.5) || (frac == F(0.5) && (int64_t(t) & 1))) t += std::copysign(F(1), x);
  return t;
}
inline float round_integral_f32(float x, CvtMode m) {
  switch (m) {
  case CvtMode::rni:
  case CvtMode::rn:
    return round_even(x);
  case CvtMode::rmi:
  case CvtMode::rm:
    return std::floor(x);
  case CvtMode::rpi:
  case CvtMode::rp:
    return std::ceil(x);
  default:
    return std::trunc(x);
  }
}
inline double round_integral_f64(double x, CvtMode m) {
  switch (m) {
  case CvtMode::rni:
  case CvtMode::rn:
    return round_even(x);
  case CvtMode::rmi:
  case CvtMode::rm:
    return std::floor(x);
  case CvtMode::rpi:
  case CvtMode::rp:
    return std::ceil(x);
  default:
    return std::trunc(x);
  }
}
} // namespace detail

// cvt.irnd{.ftz}.s32.f32 and .u32.f32: saturating, NaN -> 0.
inline int32_t cvt_s32_f32(float a, CvtMode m = CvtMode::rzi, bool ftz = false) {
  if (a != a) return 0;
  if (ftz) a = flush_f32(a);
  const float r = detail::round_integral_f32(a, m);
  if (r >= 2147483648.0f) return std::numeric_limits<int32_t>::max();
  if (r < -2147483648.0f) return std::numeric_limits<int32_t>::min();
  return int32_t(r);
}
inline uint32_t cvt_u32_f32(float a, CvtMode m = CvtMode::rzi, bool ftz = false) {
  if (a != a) return 0;
  if (ftz) a = flush_f32(a);
  const float r = detail::round_integral_f32(a, m);
  if (!(r > 0.0f)) return 0;
  if (r >= 4294967296.0f) return std::numeric_limits<uint32_t>::max();
  return uint32_t(r);
}
// cvt.irnd.s32.f64: NaN -> INT32_MIN (source is f64).
inline int32_t cvt_s32_f64(double a, CvtMode m = CvtMode::rzi) {
  if (a != a) return std::numeric_limits<int32_t>::min();
  const double r = detail::round_integral_f64(a, m);
  if (r >= 2147483648.0) return std::numeric_limits<int32_t>::max();
  if (r < -2147483648.0) return std::numeric_limits<int32_t>::min();
  return int32_t(r);
}
namespace detail {
float cvt_f32_s32_dir(int32_t a, CvtMode m);
float cvt_f32_u32_dir(uint32_t a, CvtMode m);
} // namespace detail
// cvt.frnd.f32.s32 / .u32.
inline float cvt_f32_s32(int32_t a, CvtMode m = CvtMode::rn) {
  if (m == CvtMode::rn || m == CvtMode::none) return float(a);
  return detail::cvt_f32_s32_dir(a, m);
}
inline float cvt_f32_u32(uint32_t a, CvtMode m = CvtMode::rn) {
  if (m == CvtMode::rn || m == CvtMode::none) return float(a);
  return detail::cvt_f32_u32_dir(a, m);
}
// cvt.f64.f32: exact; a NaN keeps its payload, quieted.
inline double cvt_f64_f32(float a) {
  if (a != a) {
    const uint32_t u = f32_bits(a);
    return f64_from_bits(uint64_t(u >> 31) << 63 | 0x7ff8000000000000ull |
                         uint64_t(u & 0x7fffffu) << 29);
  }
  return double(a);
}
// cvt.rn{.ftz}.f32.f64.
inline float cvt_f32_f64_rn(double a, bool ftz = false) {
  if (a != a) return f32_from_bits(k_nan_f32);
  const float r = float(a);
  return ftz ? flush_f32(r) : r;
}

// ---------------------------------------------------------------------------------------------
// Integer arithmetic (9.7.1)

namespace detail {
template <class T> using U = std::make_unsigned_t<T>;
template <class T> constexpr unsigned width = sizeof(T) * 8;
} // namespace detail

// mul.lo: the low half of the product (wraps).
template <class T> inline T mul_lo(T a, T b) {
  using U = detail::U<T>;
  if constexpr (sizeof(T) < sizeof(unsigned))
    return T(unsigned(U(a)) * unsigned(U(b)));
  else
    return T(U(a) * U(b));
}
inline uint16_t mul_hi_u16(uint16_t a, uint16_t b) {
  return uint16_t((uint32_t(a) * b) >> 16);
}
inline int16_t mul_hi_s16(int16_t a, int16_t b) {
  return int16_t((int32_t(a) * b) >> 16);
}
inline uint32_t mul_hi_u32(uint32_t a, uint32_t b) {
  return uint32_t((uint64_t(a) * b) >> 32);
}
inline int32_t mul_hi_s32(int32_t a, int32_t b) {
  return int32_t((int64_t(a) * b) >> 32);
}
inline uint64_t mul_hi_u64(uint64_t a, uint64_t b) {
  return uint64_t((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline int64_t mul_hi_s64(int64_t a, int64_t b) {
  return int64_t((static_cast<__int128>(a) * b) >> 64);
}
inline uint32_t mul_wide_u16(uint16_t a, uint16_t b) {
  return uint32_t(a) * b;
}
inline int32_t mul_wide_s16(int16_t a, int16_t b) {
  return int32_t(a) * b;
}
inline uint64_t mul_wide_u32(uint32_t a, uint32_t b) {
  return uint64_t(a) * b;
}
inline int64_t mul_wide_s32(int32_t a, int32_t b) {
  return int64_t(a) * b;
}

// add.sat.s32 / sub.sat.s32 / add.sat.u32: clamp to the type's range.
inline int32_t add_sat_s32(int32_t a, int32_t b) {
  const int64_t s = int64_t(a) + b;
  return s > INT32_MAX ? INT32_MAX : s < INT32_MIN ? INT32_MIN : int32_t(s);
}
inline int32_t sub_sat_s32(int32_t a, int32_t b) {
  const int64_t s = int64_t(a) - b;
  return s > INT32_MAX ? INT32_MAX : s < INT32_MIN ? INT32_MIN : int32_t(s);
}
inline uint32_t add_sat_u32(uint32_t a, uint32_t b) {
  const uint64_t s = uint64_t(a) + b;
  return s > UINT32_MAX ? UINT32_MAX : uint32_t(s);
}
// mad.hi.sat.s32: (a*b)<63..32> + c, clamped.
inline int32_t mad_hi_sat_s32(int32_t a, int32_t b, int32_t c) {
  return add_sat_s32(mul_hi_s32(a, b), c);
}

// mul24/mad24 (9.7.1.5-6): the low 24 bits of each operand (sign-extended for .s32) give a 48-bit
// product; .lo returns bits 31..0, .hi bits 47..16.
inline uint32_t mul24_lo_u32(uint32_t a, uint32_t b) {
  return uint32_t(uint64_t(a & 0xffffffu) * (b & 0xffffffu));
}
inline uint32_t mul24_hi_u32(uint32_t a, uint32_t b) {
  return uint32_t((uint64_t(a & 0xffffffu) * (b & 0xffffffu)) >> 16);
}
namespace detail {
inline int64_t mul24_s(int32_t a, int32_t b) {
  return int64_t(int32_t(uint32_t(a) << 8) >> 8) * int64_t(int32_t(uint32_t(b) << 8) >> 8);
}
} // namespace detail
inline int32_t mul24_lo_s32(int32_t a, int32_t b) {
  return int32_t(uint32_t(uint64_t(detail::mul24_s(a, b))));
}
inline int32_t mul24_hi_s32(int32_t a, int32_t b) {
  return int32_t(uint32_t(uint64_t(detail::mul24_s(a, b)) >> 16));
}
// mad24.hi.sat.s32: bits 47..16 of the product plus c, clamped.
inline int32_t mad24_hi_sat_s32(int32_t a, int32_t b, int32_t c) {
  return add_sat_s32(mul24_hi_s32(a, b), c);
}

// sad: c + |a - b|, wrapping.
template <class T> inline T sad(T a, T b, T c) {
  using U = detail::U<T>;
  const U d = a < b ? U(U(b) - U(a)) : U(U(a) - U(b));
  return T(U(U(c) + d));
}

// div/rem never trap: see the header comment for division by zero and INT_MIN/-1.
template <class T> inline T div_int(T a, T b) {
  if (b == 0) return std::is_signed_v<T> ? T(-1) : T(~T(0));
  if constexpr (std::is_signed_v<T>)
    if (b == T(-1)) return T(detail::U<T>(0) - detail::U<T>(a));
  return T(a / b);
}
template <class T> inline T rem_int(T a, T b) {
  if (b == 0) return a;
  if constexpr (std::is_signed_v<T>)
    if (b == T(-1)) return 0;
  return T(a % b);
}
// abs/neg wrap: abs(INT_MIN) = INT_MIN.
template <class T> inline T abs_int(T a) {
  return a < 0 ? T(detail::U<T>(0) - detail::U<T>(a)) : a;
}
template <class T> inline T neg_int(T a) {
  return T(detail::U<T>(0) - detail::U<T>(a));
}
// min/max{.relu}: .relu clamps a negative result to 0 (signed types).
template <class T> inline T min_int(T a, T b, bool relu = false) {
  const T d = a < b ? a : b;
  return (relu && d < 0) ? T(0) : d;
}
template <class T> inline T max_int(T a, T b, bool relu = false) {
  const T d = a > b ? a : b;
  return (relu && d < 0) ? T(0) : d;
}
// Packed 16-bit min/max (.u16x2, .s16x2{.relu}).
template <class H> inline uint32_t min_x2(uint32_t a, uint32_t b, bool relu = false) {
  return detail::map_x2(
      a, b, [&](uint16_t x, uint16_t y) { return uint16_t(min_int(H(x), H(y), relu)); });
}
template <class H> inline uint32_t max_x2(uint32_t a, uint32_t b, bool relu = false) {
  return detail::map_x2(
      a, b, [&](uint16_t x, uint16_t y) { return uint16_t(max_int(H(x), H(y), relu)); });
}
inline uint32_t add_x2(uint32_t a, uint32_t b) {
  return detail::map_x2(a, b, [](uint16_t x, uint16_t y) { return uint16_t(x + y); });
}

inline uint32_t popc(uint64_t a) {
  return uint32_t(std::popcount(a));
}
inline uint32_t clz32(uint32_t a) {
  return uint32_t(std::countl_zero(a));
}
inline uint32_t clz64(uint64_t a) {
  return uint32_t(std::countl_zero(a));
}
inline uint32_t brev32(uint32_t a) {
  a = ((a >> 1) & 0x55555555u) | ((a & 0x55555555u) << 1);
  a = ((a >> 2) & 0x33333333u) | ((a & 0x33333333u) << 2);
  a = ((a >> 4) & 0x0f0f0f0fu) | ((a & 0x0f0f0f0fu) << 4);
  a = ((a >> 8) & 0x00ff00ffu) | ((a & 0x00ff00ffu) << 8);
  return (a >> 16) | (a << 16);
}
inline uint64_t brev64(uint64_t a) {
  return uint64_t(brev32(uint32_t(a))) << 32 | brev32(uint32_t(a >> 32));
}

// bfind{.shiftamt} (9.7.1.16): position of the most significant non-sign bit, 0xffffffff when
// there is none.
template <class T> inline uint32_t bfind(T a, bool shiftamt = false) {
  using U = detail::U<T>;
  constexpr uint32_t msb = detail::width<T> - 1;
  U u = U(a);
  if (std::is_signed_v<T> && a < 0) u = U(~u);
  if (u == 0) return 0xffffffffu;
  const uint32_t d = msb - uint32_t(std::countl_zero(u));
  return shiftamt ? msb - d : d;
}

// bfe (9.7.1.19): position b and length c (each & 0xff); signed types fill with the sign of the
// field (the msb of a when the field reaches past it).
template <class T> inline T bfe(T a, uint32_t b, uint32_t c) {
  using U = detail::U<T>;
  constexpr uint32_t w = detail::width<T>;
  const uint32_t pos = b & 0xffu, len = c & 0xffu;
  if (len == 0) return 0;
  const U ua = U(a);
  const uint32_t n = pos >= w ? 0 : (len < w - pos ? len : w - pos);
  const U mask = n >= w ? U(~U(0)) : U((U(1) << n) - 1);
  U d = n == 0 ? U(0) : U((ua >> pos) & mask);
  if constexpr (std::is_signed_v<T>) {
    const uint32_t sb = pos + len - 1 < w - 1 ? pos + len - 1 : w - 1;
    if ((ua >> sb) & 1u) d |= U(~mask);
  }
  return T(d);
}
// bfi (9.7.1.20): insert the low bits of a into b at position c (& 0xff), length d (& 0xff).
template <class U> inline U bfi(U a, U b, uint32_t c, uint32_t d) {
  constexpr uint32_t w = detail::width<U>;
  const uint32_t pos = c & 0xffu, len = d & 0xffu;
  if (len == 0 || pos >= w) return b;
  const uint32_t n = len < w - pos ? len : w - pos;
  const U mask = U((n >= w ? U(~U(0)) : U((U(1) << n) - 1)) << pos);
  return U((b & ~mask) | (U(a << pos) & mask));
}
// bmsk.mode.b32 (9.7.1.22), following the ISA's pseudocode.
inline uint32_t bmsk(uint32_t a, uint32_t b, bool wrap) {
  const uint32_t a1 = a & 0x1fu, b1 = b & 0x1fu, sum = a1 + b1;
  uint32_t mask0 = ~0u << a1;
  uint32_t mask1 = sum >= 32 ? 0u : ~0u << sum;
  bool overflow = sum >= 32;
  if (!wrap) {
    if (a >= 32) {
      overflow = true;
      mask0 = 0;
    }
    if (b >= 32) overflow = true;
  }
  if (overflow)
    mask1 = 0;
  else if (b1 == 0)
    mask1 = ~0u;
  return mask0 & ~mask1;
}
// szext.mode.type (9.7.1.21), following the ISA's pseudocode.
inline uint32_t szext(uint32_t a, uint32_t b, bool wrap, bool is_signed) {
  const uint32_t b1 = b & 0x1fu;
  const bool too_large = b >= 32 && !wrap;
  const uint32_t mask = too_large ? 0u : ~0u << b1;
  const bool sign = (b1 == 0 || too_large || !is_signed) ? false : ((a >> ((b1 - 1) & 0x1fu)) & 1u);
  return (a & ~mask) | (sign ? mask : 0u);
}
// fns.b32 (9.7.1.17): the offset-th set bit of mask counting from base (up for offset > 0, down
// for offset < 0), 0xffffffff when there is none or base > 31.
inline uint32_t fns(uint32_t mask, uint32_t base, int32_t offset) {
  if (base > 31) return 0xffffffffu;
  if (offset == 0) return ((mask >> base) & 1u) ? base : 0xffffffffu;
  if (offset > 0) {
    uint32_t m = mask & (~0u << base);
    for (int32_t k = 1; k < offset && m; ++k) m &= m - 1;
    return m ? uint32_t(std::countr_zero(m)) : 0xffffffffu;
  }
  uint32_t m = mask & (base == 31 ? ~0u : (2u << base) - 1);
  for (int64_t k = 1; k < -int64_t(offset) && m; ++k) m &= ~(0x80000000u >> std::countl_zero(m));
  return m ? 31 - uint32_t(std::countl_zero(m)) : 0xffffffffu;
}
// prmt.b32{.mode} (9.7.9.7).
inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t c, PrmtMode mode = PrmtMode::none) {
  const uint64_t t = uint64_t(b) << 32 | a;
  uint32_t d = 0;
  if (mode == PrmtMode::none) {
    for (uint32_t k = 0; k < 4; ++k) {
      const uint32_t sel = (c >> (4 * k)) & 0xfu;
      uint32_t v = uint32_t(t >> (8 * (sel & 7u))) & 0xffu;
      if (sel & 8u) v = (v & 0x80u) ? 0xffu : 0u;
      d |= v << (8 * k);
    }
    return d;
  }
  const uint32_t s = c & 3u;
  for (uint32_t k = 0; k < 4; ++k) {
    uint32_t src = 0;
    switch (mode) {
    case PrmtMode::f4e:
      src = s + k;
      break;
    case PrmtMode::b4e:
      src = (s - k) & 7u;
      break;
    case PrmtMode::rc8:
      src = s;
      break;
    case PrmtMode::ecl:
      src = k > s ? k : s;
      break;
    case PrmtMode::ecr:
      src = k < s ? k : s;
      break;
    case PrmtMode::rc16:
      src = (k & 1u) + 2 * (s & 1u);
      break;
    case PrmtMode::none:
      break;
    }
    d |= (uint32_t(t >> (8 * src)) & 0xffu) << (8 * k);
  }
  return d;
}

// shf.l/.r.mode.b32 (9.7.8.7): funnel shift of {b, a} by c clamped to 32 or wrapped mod 32.
inline uint32_t shf_l(uint32_t a, uint32_t b, uint32_t c, bool wrap) {
  const uint32_t n = wrap ? (c & 31u) : (c < 32u ? c : 32u);
  return uint32_t(((uint64_t(b) << 32 | a) << n) >> 32);
}
inline uint32_t shf_r(uint32_t a, uint32_t b, uint32_t c, bool wrap) {
  const uint32_t n = wrap ? (c & 31u) : (c < 32u ? c : 32u);
  return uint32_t((uint64_t(b) << 32 | a) >> n);
}
// shl/shr (9.7.8.8-9): amounts of the register width or more are clamped to it, so shl and
// unsigned shr give 0 and signed shr gives the sign fill.
template <class T> inline T shl(T a, uint32_t n) {
  using U = detail::U<T>;
  return n >= detail::width<T> ? T(0) : T(U(U(a) << n));
}
template <class T> inline T shr(T a, uint32_t n) {
  constexpr uint32_t w = detail::width<T>;
  if constexpr (std::is_signed_v<T>)
    return T(a >> (n >= w ? w - 1 : n));
  else
    return n >= w ? T(0) : T(a >> n);
}

// dp4a/dp2a (9.7.1.23-24): wrapping 32-bit accumulation of byte (and half-word) products.
inline uint32_t dp4a(uint32_t a, uint32_t b, uint32_t c, bool a_signed, bool b_signed) {
  uint32_t d = c;
  for (int i = 0; i < 4; ++i) {
    const int32_t va = a_signed ? int32_t(int8_t(a >> (8 * i))) : int32_t(uint8_t(a >> (8 * i)));
    const int32_t vb = b_signed ? int32_t(int8_t(b >> (8 * i))) : int32_t(uint8_t(b >> (8 * i)));
    d += uint32_t(va * vb);
  }
  return d;
}
inline uint32_t dp2a(uint32_t a, uint32_t b, uint32_t c, bool hi, bool a_signed, bool b_signed) {
  uint32_t d = c;
  const int sel = hi ? 2 : 0;
  for (int i = 0; i < 2; ++i) {
    const int64_t va =
        a_signed ? int64_t(int16_t(a >> (16 * i))) : int64_t(uint16_t(a >> (16 * i)));
    const int64_t vb =
        b_signed ? int64_t(int8_t(b >> (8 * (sel + i)))) : int64_t(uint8_t(b >> (8 * (sel + i))));
    d += uint32_t(uint64_t(va * vb));
  }
  return d;
}

// lop3.b32 (9.7.8.6): bit i of lut is the result for a = bit 2, b = bit 1, c = bit 0 of i
// (lut = F(0xf0, 0xcc, 0xaa)).
template <class U> inline U lop3(U a, U b, U c, uint8_t lut) {
  U r = 0;
  for (int i = 0; i < 8; ++i)
    if ((lut >> i) & 1) r |= U((i & 4 ? a : U(~a)) & (i & 2 ? b : U(~b)) & (i & 1 ? c : U(~c)));
  return r;
}

} // namespace hone::emu::sem
