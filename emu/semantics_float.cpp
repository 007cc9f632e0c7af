// Rounding to binary formats, float arithmetic with directed rounding, half-precision fma and the
// .approx functions (PTX ISA 9.7.3, 9.7.4).
//
// How directed rounding is made exact:
// - f32 (and f16/bf16 fma) results are computed from operands of at most 24 significant bits in
//   double. A product of two such operands is exact in double. A sum p + c is rounded once in
//   double and TwoSum recovers its exact error e, so s + e is the exact result; a quotient and a
//   square root are rounded once in double and fma gives their exact remainder, whose sign says
//   on which side of s the exact result lies (it is never exactly half an ulp of s away: a
//   quotient or square root of f32 operands is either exact in double or not a double midpoint).
//   round_double_to_format then rounds the exact value once to the target format in any mode.
// - f64 results run the host operation under fesetround, with volatile operands so that the
//   compiler keeps the arithmetic between the mode switches.
#include "emu/semantics.hpp"

#include <cfenv>
#include <cmath>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace hone::emu::sem {

#if defined(__x86_64__)
namespace {
constexpr uint32_t k_default_mxcsr = 0x1f80;    // round to nearest, masked, FTZ and DAZ off
constexpr uint16_t k_default_x87_control = 0x037f; // round to nearest, extended precision, masked
constexpr uint16_t k_x87_flags = 0x3f;
uint16_t x87_control() {
  uint16_t cw;
  __asm__ volatile("fnstcw %0" : "=m"(cw));
  return cw;
}
uint16_t x87_status() {
  uint16_t sw;
  __asm__ volatile("fnstsw %0" : "=m"(sw));
  return sw;
}
} // namespace

// fegetenv/fesetenv save and load the whole x87 environment, slow enough to show per block; the
// SSE register is what PTX arithmetic runs on, and the x87 unit (long double, rsqrt.f64) is
// default almost always.
FpEnvGuard::FpEnvGuard() {
  m_mxcsr = _mm_getcsr();
  m_x87_control = x87_control();
  m_x87_status = x87_status();
  if (m_x87_control != k_default_x87_control || (m_x87_status & k_x87_flags)) {
    fegetenv(&m_saved); // both units, before either changes
    m_x87_saved = true;
    fesetenv(FE_DFL_ENV);
  }
  _mm_setcsr(k_default_mxcsr);
}

FpEnvGuard::~FpEnvGuard() {
  if (m_x87_saved) {
    fesetenv(&m_saved); // the SSE register too
    return;
  }
  if (x87_control() != k_default_x87_control || (x87_status() & k_x87_flags)) {
    // PTX left x87 flags (or a mode): back to the default, which the application had
    fesetenv(FE_DFL_ENV);
  }
  _mm_setcsr(m_mxcsr);
}
#else
FpEnvGuard::FpEnvGuard() {
  fegetenv(&m_saved);
  fesetenv(FE_DFL_ENV);
}

FpEnvGuard::~FpEnvGuard() {
  fesetenv(&m_saved);
}
#endif

// ---------------------------------------------------------------------------------------------
// Rounding core

uint64_t round_to_format(bool neg, uint64_t sig, int exp, bool sticky, const FloatFormat& f,
                         Round r, bool satfinite) {
  const int mb = f.mant_bits;
  const uint64_t sign = uint64_t(neg) << (f.exp_bits + mb);
  if (sig == 0 && !sticky) return sign;
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const int emin = 1 - bias;

  // q: the exponent of the last bit the result keeps. cls: the discarded part compared with half
  // of that bit: 0 nothing, 1 below half, 2 exactly half, 3 above half.
  int q;
  uint64_t m;
  int cls;
  if (sig == 0) { // only a sticky remainder: below half of the smallest subnormal
    q = emin - mb;
    m = 0;
    cls = 1;
  } else {
    const int msb = 63 - std::countl_zero(sig);
    const int e = msb + exp;
    q = (e < emin ? emin : e) - mb;
    const int shift = q - exp;
    if (shift <= 0) {
      m = sig << -shift;
      cls = sticky ? 1 : 0;
    } else if (shift > 64) {
      m = 0;
      cls = 1;
    } else {
      const uint64_t half = uint64_t(1) << (shift - 1);
      const uint64_t rem = shift == 64 ? sig : sig & ((half << 1) - 1);
      m = shift == 64 ? 0 : sig >> shift;
      if (rem == 0)
        cls = sticky ? 1 : 0;
      else if (rem < half)
        cls = 1;
      else if (rem == half)
        cls = sticky ? 3 : 2;
      else
        cls = 3;
    }
  }

  bool up = false;
  switch (r) {
  case Round::rn:
    up = cls == 3 || (cls == 2 && (m & 1));
    break;
  case Round::rna:
    up = cls >= 2;
    break;
  case Round::rz:
    break;
  case Round::rp:
    up = cls != 0 && !neg;
    break;
  case Round::rm:
    up = cls != 0 && neg;
    break;
  }
  m += up;
  if (m >> (mb + 1)) { // carried into the next binade
    m >>= 1;
    ++q;
  }

  const uint64_t max_biased = f.max_finite >> mb;
  bool overflow = false;
  uint64_t mag = m; // subnormal or zero unless the leading bit is set
  if (m >> mb) {
    const int64_t biased = int64_t(q) + mb + bias;
    if (biased > int64_t(max_biased))
      overflow = true;
    else
      mag = uint64_t(biased) << mb | (m & ((uint64_t(1) << mb) - 1));
  }
  if (overflow || mag > f.max_finite) {
    const bool to_inf =
        f.has_inf && !satfinite &&
        (r == Round::rn || r == Round::rna || (r == Round::rp && !neg) || (r == Round::rm && neg));
    mag = to_inf ? ((uint64_t(1) << f.exp_bits) - 1) << mb : f.max_finite;
  }
  return sign | mag;
}

namespace {

// Round s + t to `f`, where t is a term strictly smaller than half an ulp of s (tdir: its sign,
// 0 when there is none) or, with t_is_half, exactly half an ulp of s.
uint64_t round_double_parts(double s, int tdir, bool t_is_half, const FloatFormat& f, Round r,
                            bool satfinite) {
  const uint64_t b = f64_bits(s);
  const bool neg = b >> 63;
  const int bexp = int(b >> 52) & 0x7ff;
  uint64_t sig = b & ((uint64_t(1) << 52) - 1);
  int exp = -1074;
  if (bexp != 0) {
    sig |= uint64_t(1) << 52;
    exp = bexp - 1075;
  }
  bool sticky = false;
  if (tdir != 0 && sig != 0) {
    // One guard bit: the exact value is (2*sig +- 1 or +- d) * 2^(exp-1), 0 < d < 1.
    sig <<= 1;
    --exp;
    const bool same = (tdir > 0) != neg;
    if (t_is_half) {
      sig = same ? sig + 1 : sig - 1;
    } else {
      sticky = true;
      if (!same) sig -= 1;
    }
  }
  return round_to_format(neg, sig, exp, sticky, f, r, satfinite);
}

} // namespace

uint64_t round_double_to_format(double s, double e, const FloatFormat& f, Round r, bool satfinite) {
  if (e == 0 || s == 0) return round_double_parts(s, 0, false, f, r, satfinite);
  // Half an ulp of s is 2^(exponent of s's last bit - 1); representable by the precondition.
  const int bexp = int(f64_bits(s) >> 52) & 0x7ff;
  const int lsb = (bexp == 0 ? -1074 : bexp - 1075);
  const double half = f64_from_bits(uint64_t(lsb - 1 + 1023) << 52);
  return round_double_parts(s, e > 0 ? 1 : -1, std::fabs(e) == half, f, r, satfinite);
}

double format_to_double(uint64_t bits, const FloatFormat& f) {
  const int mb = f.mant_bits, eb = f.exp_bits;
  const bool neg = (bits >> (eb + mb)) & 1;
  const uint64_t mag = bits & ((uint64_t(1) << (eb + mb)) - 1);
  const uint64_t be = mag >> mb, frac = mag & ((uint64_t(1) << mb) - 1);
  const uint64_t emask = (uint64_t(1) << eb) - 1;
  double v;
  if (!f.has_inf && mag == (uint64_t(1) << (eb + mb)) - 1)
    v = std::numeric_limits<double>::quiet_NaN();
  else if (f.has_inf && be == emask)
    v = frac ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else {
    const int bias = (1 << (eb - 1)) - 1;
    v = be == 0 ? std::ldexp(double(frac), 1 - bias - mb)
                : std::ldexp(double(frac | uint64_t(1) << mb), int(be) - bias - mb);
  }
  return neg ? -v : v;
}

// ---------------------------------------------------------------------------------------------
// f32 with directed rounding

namespace {

float to_f32(uint64_t bits) {
  return f32_from_bits(uint32_t(bits));
}

// The sign of an exact zero sum x + y (IEEE 754 6.3): like-signed zeros keep their sign,
// otherwise +0, or -0 when rounding down.
template <class F> F zero_sum(double x, double y, Round r) {
  if (x == 0 && y == 0 && std::signbit(x) == std::signbit(y)) return F(x);
  return r == Round::rm ? F(-0.0) : F(0.0);
}

// x + y rounded once to `f`; x and y finite doubles. Returns the encoding.
uint64_t sum_to_format(double x, double y, const FloatFormat& f, Round r) {
  const double s = x + y;
  if (s == 0) return f64_bits(zero_sum<double>(x, y, r)) >> 63 << (f.exp_bits + f.mant_bits);
  const double bb = s - x;
  const double e = (x - (s - bb)) + (y - bb); // TwoSum: s + e == x + y exactly
  return round_double_to_format(s, e, f, r);
}

bool finite(float x) {
  return (f32_bits(x) & 0x7f800000u) != 0x7f800000u;
}

int fe_mode(Round r) {
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

class RoundingScope {
public:
  explicit RoundingScope(Round r) : m_old(fegetround()) { fesetround(fe_mode(r)); }
  ~RoundingScope() { fesetround(m_old); }
  RoundingScope(const RoundingScope&) = delete;
  RoundingScope& operator=(const RoundingScope&) = delete;

private:
  int m_old;
};

} // namespace

namespace detail {

float add_f32_dir(float a, float b, Round r, bool ftz, bool sat) {
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
  }
  const float d = finite(a) && finite(b) ? to_f32(sum_to_format(a, b, k_fmt_f32, r)) : a + b;
  return finish_f32(d, ftz, sat);
}

float mul_f32_dir(float a, float b, Round r, bool ftz, bool sat) {
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
  }
  const float d = finite(a) && finite(b)
                      ? to_f32(round_double_to_format(double(a) * double(b), 0, k_fmt_f32, r))
                      : a * b;
  return finish_f32(d, ftz, sat);
}

float fma_f32_dir(float a, float b, float c, Round r, bool ftz, bool sat) {
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
    c = flush_f32(c);
  }
  const float d = finite(a) && finite(b) && finite(c)
                      ? to_f32(sum_to_format(double(a) * double(b), c, k_fmt_f32, r))
                      : std::fma(a, b, c);
  return finish_f32(d, ftz, sat);
}

float div_f32_dir(float a, float b, Round r, bool ftz) {
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
  }
  float d;
  if (!finite(a) || !finite(b) || a == 0 || b == 0) {
    d = a / b; // exact: inf, nan or a signed zero
  } else {
    const double x = a, y = b;
    const double q = x / y;
    const double rem = std::fma(-q, y, x); // exact: x - q*y
    const int tdir = rem == 0 ? 0 : ((rem < 0) != (y < 0) ? -1 : 1);
    d = to_f32(round_double_parts(q, tdir, false, k_fmt_f32, r, false));
  }
  return finish_f32(d, ftz, false);
}

float sqrt_f32_dir(float a, Round r, bool ftz) {
  if (ftz) a = flush_f32(a);
  float d;
  if (!(a > 0) || !finite(a)) {
    d = std::sqrt(a); // nan, +-0, +inf: exact
  } else {
    const double x = a;
    const double s = std::sqrt(x);
    const double rem = std::fma(-s, s, x); // exact: x - s*s
    d = to_f32(
        round_double_parts(s, rem == 0 ? 0 : (rem < 0 ? -1 : 1), false, k_fmt_f32, r, false));
  }
  return finish_f32(d, ftz, false);
}

// f64: the host operation under the requested rounding mode.

double add_f64_dir(double a, double b, Round r) {
  RoundingScope scope(r);
  volatile double x = a, y = b;
  volatile double z = x + y;
  return z;
}

double mul_f64_dir(double a, double b, Round r) {
  RoundingScope scope(r);
  volatile double x = a, y = b;
  volatile double z = x * y;
  return z;
}

double fma_f64_dir(double a, double b, double c, Round r) {
  RoundingScope scope(r);
  volatile double x = a, y = b, w = c;
  volatile double z = std::fma(x, y, w);
  return z;
}

double div_f64_dir(double a, double b, Round r) {
  RoundingScope scope(r);
  volatile double x = a, y = b;
  volatile double z = x / y;
  return z;
}

double sqrt_f64_dir(double a, Round r) {
  RoundingScope scope(r);
  volatile double x = a;
  volatile double z = std::sqrt(x);
  return z;
}

float cvt_f32_s32_dir(int32_t a, CvtMode m) {
  const uint64_t mag = a < 0 ? uint64_t(0) - uint64_t(int64_t(a)) : uint64_t(a);
  return to_f32(round_to_format(a < 0, mag, 0, false, k_fmt_f32, round_of(m)));
}

float cvt_f32_u32_dir(uint32_t a, CvtMode m) {
  return to_f32(round_to_format(false, a, 0, false, k_fmt_f32, round_of(m)));
}

} // namespace detail

float div_approx_f32(float a, float b, bool ftz) {
  if (ftz) {
    a = flush_f32(a);
    b = flush_f32(b);
  }
  const float rcp = flush_f32(1.0f / b);
  return detail::finish_f32(a * rcp, ftz, false);
}

// ---------------------------------------------------------------------------------------------
// Half-precision fma: a*b is exact in double (at most 11+11 or 8+8 significant bits, exponents
// far inside double's range); TwoSum makes s + e the exact a*b+c; one rounding to the format.

namespace {

template <bool bf> uint16_t fma_half(uint16_t a, uint16_t b, uint16_t c) {
  const FloatFormat& f = bf ? k_fmt_bf16 : k_fmt_f16;
  const uint16_t emask = bf ? 0x7f80u : 0x7c00u;
  const auto to_f = [](uint16_t h) { return bf ? bf16_to_f32(h) : f16_to_f32(h); };
  if ((a & emask) == emask || (b & emask) == emask || (c & emask) == emask) {
    const float d = std::fma(to_f(a), to_f(b), to_f(c)); // inf or nan: exact
    return bf ? f32_to_bf16_rn(d) : f32_to_f16_rn(d);
  }
  const double p = double(to_f(a)) * double(to_f(b));
  return uint16_t(sum_to_format(p, to_f(c), f, Round::rn));
}

} // namespace

uint16_t fma_f16(uint16_t a, uint16_t b, uint16_t c, bool ftz, bool sat, bool relu) {
  if (ftz) {
    a = flush_f16(a);
    b = flush_f16(b);
    c = flush_f16(c);
  }
  return detail::finish_f16(fma_half<false>(a, b, c), ftz, sat, relu);
}

uint16_t fma_bf16(uint16_t a, uint16_t b, uint16_t c, bool relu) {
  return detail::finish_bf16(fma_half<true>(a, b, c), relu);
}

// ---------------------------------------------------------------------------------------------
// .approx functions

float rcp_approx_f32(float a, bool ftz) {
  if (ftz) a = flush_f32(a);
  return detail::finish_f32(1.0f / a, ftz, false);
}

float sqrt_approx_f32(float a, bool ftz) {
  if (ftz) a = flush_f32(a);
  return detail::finish_f32(std::sqrt(a), ftz, false);
}

float rsqrt_approx_f32(float a, bool ftz) {
  if (ftz) a = flush_f32(a);
  if (a != a || a < 0) return f32_from_bits(k_nan_f32);
  if (a == 0) return f32_from_bits(f32_bits(a) | 0x7f800000u); // +-0 -> +-inf
  const float d = float(1.0 / std::sqrt(double(a)));           // +inf -> +0
  return detail::finish_f32(d, ftz, false);
}

double rsqrt_approx_f64(double a) {
  if (a != a) return a;
  return double(1.0L / std::sqrt(static_cast<long double>(a))); // -0 -> -inf, <0 -> nan
}

namespace {

// The upper word of an f64 in 1.11.20 form, rounded from a double result; subnormals flush.
double upper_word_result(double v) {
  uint64_t r = round_double_to_format(v, 0, k_fmt_f64_hi, Round::rn);
  if ((r & 0x7ff00000u) == 0) r &= 0x80000000u;
  return f64_from_bits(r << 32);
}

} // namespace

double rsqrt_approx_ftz_f64(double a) {
  const uint64_t hi = f64_bits(a) & 0xffffffff00000000ull;
  const uint64_t sign = hi & (1ull << 63), mag = hi & ~(1ull << 63);
  constexpr uint64_t inf = 0x7ff0000000000000ull;
  if (mag > inf) return f64_from_bits(k_nan_f64_approx);
  if (mag < (1ull << 52)) return f64_from_bits(sign | inf); // +-0, +-subnormal -> +-inf
  if (sign) return f64_from_bits(k_nan_f64_approx);         // negative, -inf
  if (mag == inf) return 0.0;
  return upper_word_result(double(1.0L / std::sqrt(static_cast<long double>(f64_from_bits(hi)))));
}

double rcp_approx_ftz_f64(double a) {
  const uint64_t hi = f64_bits(a) & 0xffffffff00000000ull;
  const uint64_t sign = hi & (1ull << 63), mag = hi & ~(1ull << 63);
  constexpr uint64_t inf = 0x7ff0000000000000ull;
  if (mag > inf) return f64_from_bits(k_nan_f64_approx);
  if (mag == inf) return f64_from_bits(sign);               // +-inf -> +-0
  if (mag < (1ull << 52)) return f64_from_bits(sign | inf); // +-0, +-subnormal -> +-inf
  return upper_word_result(1.0 / f64_from_bits(hi));
}

float sin_approx_f32(float a, bool ftz) {
  if (ftz) a = flush_f32(a);
  return detail::finish_f32(float(std::sin(double(a))), ftz, false); // +-inf -> nan
}

float cos_approx_f32(float a, bool ftz) {
  if (ftz) a = flush_f32(a);
  return detail::finish_f32(float(std::cos(double(a))), ftz, false);
}

float lg2_approx_f32(float a, bool ftz) {
  if (ftz) a = flush_f32(a);
  if (a == 0) return -std::numeric_limits<float>::infinity();         // +-0 -> -inf
  return detail::finish_f32(float(std::log2(double(a))), ftz, false); // <0 -> nan
}

float ex2_approx_f32(float a, bool ftz) {
  if (ftz) a = flush_f32(a);
  return detail::finish_f32(float(std::exp2(double(a))), ftz, false);
}

float tanh_approx_f32(float a) {
  return canon_f32(float(std::tanh(double(a))));
}

namespace {

// A double result rounded to nearest f16/bf16; NaN canonical.
uint16_t to_half(double v, const FloatFormat& f) {
  if (v != v) return 0x7fffu;
  if (std::isinf(v))
    return uint16_t((v < 0 ? 0x8000u : 0u) | ((1u << f.exp_bits) - 1) << f.mant_bits);
  return uint16_t(round_double_to_format(v, 0, f, Round::rn));
}

} // namespace

uint16_t ex2_approx_f16(uint16_t a) {
  if (is_nan_f16(a)) return k_nan_f16;
  return to_half(std::exp2(double(f16_to_f32(a))), k_fmt_f16);
}

uint16_t ex2_approx_ftz_bf16(uint16_t a) {
  a = flush_bf16(a);
  if (is_nan_bf16(a)) return k_nan_bf16;
  return flush_bf16(to_half(std::exp2(double(bf16_to_f32(a))), k_fmt_bf16));
}

uint16_t tanh_approx_f16(uint16_t a) {
  if (is_nan_f16(a)) return k_nan_f16;
  return to_half(std::tanh(double(f16_to_f32(a))), k_fmt_f16);
}

uint16_t tanh_approx_bf16(uint16_t a) {
  if (is_nan_bf16(a)) return k_nan_bf16;
  return to_half(std::tanh(double(bf16_to_f32(a))), k_fmt_bf16);
}

} // namespace hone::emu::sem
