// cvt (PTX ISA 9.7.9.21): every scalar pair of integer and floating-point types, and the packed
// f16x2/bf16x2/e4m3x2/e5m2x2/tf32 forms. Values are decoded into sign, integer significand and
// exponent, then rounded once with round_to_format (floats) or round_to_integer (integers), so
// every conversion is exact per mode, u64/s64 -> f32 included.
#include "emu/semantics.hpp"

#include "ptx/ir.hpp"

namespace hone::emu::sem {
namespace {

enum class Kind : uint8_t { invalid, integer, floating };

struct TypeInfo {
  Kind kind = Kind::invalid;
  uint8_t width = 0;
  bool is_signed = false;
  const FloatFormat* fmt = nullptr;
};

TypeInfo info(Type t) {
  switch (t) {
  case Type::u8:
  case Type::b8:
    return {Kind::integer, 8, false, nullptr};
  case Type::u16:
  case Type::b16:
    return {Kind::integer, 16, false, nullptr};
  case Type::u32:
  case Type::b32:
    return {Kind::integer, 32, false, nullptr};
  case Type::u64:
  case Type::b64:
    return {Kind::integer, 64, false, nullptr};
  case Type::s8:
    return {Kind::integer, 8, true, nullptr};
  case Type::s16:
    return {Kind::integer, 16, true, nullptr};
  case Type::s32:
    return {Kind::integer, 32, true, nullptr};
  case Type::s64:
    return {Kind::integer, 64, true, nullptr};
  case Type::f16:
    return {Kind::floating, 16, false, &k_fmt_f16};
  case Type::bf16:
    return {Kind::floating, 16, false, &k_fmt_bf16};
  case Type::f32:
    return {Kind::floating, 32, false, &k_fmt_f32};
  case Type::f64:
    return {Kind::floating, 64, false, &k_fmt_f64};
  case Type::tf32:
    return {Kind::floating, 32, false, &k_fmt_tf32};
  case Type::e4m3:
    return {Kind::floating, 8, false, &k_fmt_e4m3};
  case Type::e5m2:
    return {Kind::floating, 8, false, &k_fmt_e5m2};
  default:
    return {};
  }
}

// A decoded source value: for finite values, (-1)^neg * sig * 2^exp exactly.
struct Value {
  enum Class : uint8_t { zero, finite, inf, nan } cls = zero;
  bool neg = false;
  uint64_t sig = 0;
  int exp = 0;
  uint64_t nan_frac = 0; // a NaN's fraction, left-aligned to f64's 52 bits
};

Value decode_float(uint64_t bits, const FloatFormat& f) {
  const int mb = f.mant_bits, eb = f.exp_bits;
  Value v;
  v.neg = (bits >> (eb + mb)) & 1;
  const uint64_t mag = bits & ((uint64_t(1) << (eb + mb)) - 1);
  const uint64_t be = mag >> mb, frac = mag & ((uint64_t(1) << mb) - 1);
  const uint64_t emask = (uint64_t(1) << eb) - 1;
  if (f.has_inf ? be == emask : mag == (uint64_t(1) << (eb + mb)) - 1) {
    v.cls = frac ? Value::nan : Value::inf;
    v.nan_frac = frac << (52 - mb);
    if (!f.has_inf) v.cls = Value::nan;
    return v;
  }
  if (mag == 0) return v;
  const int bias = (1 << (eb - 1)) - 1;
  v.cls = Value::finite;
  if (be == 0) {
    v.sig = frac;
    v.exp = 1 - bias - mb;
  } else {
    v.sig = frac | uint64_t(1) << mb;
    v.exp = int(be) - bias - mb;
  }
  return v;
}

Value decode_int(uint64_t bits, const TypeInfo& t) {
  Value v;
  if (t.is_signed && t.width < 64 && ((bits >> (t.width - 1)) & 1)) bits |= ~uint64_t(0) << t.width;
  if (bits == 0) return v;
  v.cls = Value::finite;
  v.neg = t.is_signed && int64_t(bits) < 0;
  v.sig = v.neg ? uint64_t(0) - bits : bits;
  return v;
}

Round integer_round(CvtMode m) {
  switch (m) {
  case CvtMode::rn:
  case CvtMode::rni:
    return Round::rn;
  case CvtMode::rm:
  case CvtMode::rmi:
    return Round::rm;
  case CvtMode::rp:
  case CvtMode::rpi:
    return Round::rp;
  case CvtMode::rna:
    return Round::rna;
  default:
    return Round::rz;
  }
}

bool is_integer_mode(CvtMode m) {
  return m == CvtMode::rni || m == CvtMode::rzi || m == CvtMode::rmi || m == CvtMode::rpi;
}

// Round the finite value v to an integer. Returns false when its magnitude is 2^64 or more
// (only possible when the value is already integral: exp > 0).
bool round_to_integer(const Value& v, Round r, uint64_t& mag) {
  if (v.exp >= 0) {
    if (v.exp >= 64 || std::countl_zero(v.sig) < v.exp) return false;
    mag = v.sig << v.exp;
    return true;
  }
  const int shift = -v.exp;
  uint64_t m;
  int cls; // the discarded fraction: 0 none, 1 below half, 2 half, 3 above half
  if (shift > 64) {
    m = 0;
    cls = 1;
  } else {
    const uint64_t half = uint64_t(1) << (shift - 1);
    const uint64_t rem = shift == 64 ? v.sig : v.sig & ((half << 1) - 1);
    m = shift == 64 ? 0 : v.sig >> shift;
    cls = rem == 0 ? 0 : rem < half ? 1 : rem == half ? 2 : 3;
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
    up = cls != 0 && !v.neg;
    break;
  case Round::rm:
    up = cls != 0 && v.neg;
    break;
  }
  mag = m + up;
  return true;
}

uint64_t sign_extend(uint64_t x, unsigned width) {
  if (width >= 64) return x;
  x &= (uint64_t(1) << width) - 1;
  if ((x >> (width - 1)) & 1) x |= ~uint64_t(0) << width;
  return x;
}

uint64_t to_integer(const Value& v, const TypeInfo& d, bool src_is_f64, CvtMode mode) {
  const unsigned w = d.width;
  const uint64_t umax = w == 64 ? ~uint64_t(0) : (uint64_t(1) << w) - 1;
  const uint64_t smax = umax >> 1;
  if (v.cls == Value::nan) {
    if (!src_is_f64 && w != 64) return 0;
    const uint64_t r = uint64_t(1) << (w - 1);
    return d.is_signed ? sign_extend(r, w) : r;
  }
  if (v.cls == Value::zero) return 0;
  uint64_t mag = 0;
  const bool fits = v.cls == Value::finite && round_to_integer(v, integer_round(mode), mag);
  if (d.is_signed) {
    if (!v.neg) return (!fits || mag > smax) ? smax : mag;
    return (!fits || mag > smax + 1) ? sign_extend(smax + 1, w) : uint64_t(0) - mag;
  }
  if (v.neg) return 0;
  return (!fits || mag > umax) ? umax : mag;
}

uint64_t int_to_int(uint64_t bits, const TypeInfo& s, const TypeInfo& d, bool sat) {
  if (s.is_signed) bits = sign_extend(bits, s.width);
  const unsigned w = d.width;
  if (sat) {
    // The source value as a signed 128-bit integer, clamped to the destination's range.
    const __int128 x = s.is_signed ? __int128(int64_t(bits)) : __int128(bits);
    const __int128 hi = d.is_signed ? (__int128(1) << (w - 1)) - 1 : (__int128(1) << w) - 1;
    const __int128 lo = d.is_signed ? -(__int128(1) << (w - 1)) : 0;
    bits = uint64_t(x > hi ? hi : x < lo ? lo : x);
  }
  if (d.is_signed) return sign_extend(bits, w);
  return w == 64 ? bits : bits & ((uint64_t(1) << w) - 1);
}

// The encoding of v in `dst`'s format, before .ftz/.sat/.relu. tf32 is produced in its 19-bit
// form (sign at bit 18).
uint64_t to_float(const Value& v, Type dst, const FloatFormat& f, CvtMode mode, bool satfinite,
                  bool integral) {
  const int sign_bit = f.exp_bits + f.mant_bits;
  const uint64_t sign = uint64_t(v.neg) << sign_bit;
  switch (v.cls) {
  case Value::nan:
    if (dst == Type::f64) return sign | 0x7ff8000000000000ull | v.nan_frac;
    return (uint64_t(1) << sign_bit) - 1; // canonical: all ones but the sign
  case Value::inf:
    if (satfinite || !f.has_inf) return sign | f.max_finite;
    return sign | ((uint64_t(1) << f.exp_bits) - 1) << f.mant_bits;
  case Value::zero:
    return sign;
  case Value::finite:
    break;
  }
  if (integral) {
    uint64_t mag = 0;
    if (!round_to_integer(v, integer_round(mode), mag)) // already integral
      return round_to_format(v.neg, v.sig, v.exp, false, f, Round::rn, satfinite);
    return round_to_format(v.neg, mag, 0, false, f, Round::rn, satfinite);
  }
  return round_to_format(v.neg, v.sig, v.exp, false, f, round_of(mode), satfinite);
}

} // namespace

uint64_t cvt(uint64_t src_bits, Type dst, Type src, CvtMode mode, bool ftz, bool sat, bool relu,
             bool satfinite) {
  const TypeInfo si = info(src), di = info(dst);
  if (si.kind == Kind::invalid || di.kind == Kind::invalid) return 0;
  if (si.width < 64) src_bits &= (uint64_t(1) << si.width) - 1;
  if (si.kind == Kind::integer && di.kind == Kind::integer)
    return int_to_int(src_bits, si, di, sat);

  Value v;
  if (si.kind == Kind::integer) {
    v = decode_int(src_bits, si);
  } else {
    v = decode_float(src_bits, src == Type::tf32 ? k_fmt_f32 : *si.fmt);
    if (ftz && src == Type::f32 && v.cls == Value::finite && (src_bits & 0x7f800000u) == 0)
      v.cls = Value::zero; // .ftz: a subnormal f32 input is a zero of its sign
  }
  if (di.kind == Kind::integer) return to_integer(v, di, src == Type::f64, mode);

  const FloatFormat& f = *di.fmt;
  satfinite = satfinite || dst == Type::e4m3 || dst == Type::e5m2;
  const bool integral = si.kind == Kind::floating && is_integer_mode(mode);
  uint64_t out = to_float(v, dst, f, mode, satfinite, integral);

  const int sign_bit = f.exp_bits + f.mant_bits;
  const uint64_t sign_mask = uint64_t(1) << sign_bit;
  const uint64_t mag_mask = sign_mask - 1;
  const uint64_t inf_bits = ((uint64_t(1) << f.exp_bits) - 1) << f.mant_bits;
  const bool is_nan = f.has_inf ? (out & mag_mask) > inf_bits : (out & mag_mask) == mag_mask;
  if (ftz && dst == Type::f32 && (out & inf_bits) == 0) out &= sign_mask;
  if (sat) {
    const uint64_t one = uint64_t((1 << (f.exp_bits - 1)) - 1) << f.mant_bits;
    if (is_nan || (out & sign_mask))
      out = 0;
    else if (out > one)
      out = one;
  } else if (relu) {
    if (is_nan)
      out = mag_mask;
    else if (out & sign_mask)
      out = 0;
  }
  if (dst == Type::tf32) { // back to the f32 layout
    if (is_nan) return k_nan_f32;
    return ((out >> sign_bit) & 1) << 31 | (out & mag_mask) << 13;
  }
  return out;
}

uint32_t cvt_f16x2_f32(float a, float b, CvtMode mode, bool relu, bool satfinite) {
  const auto one = [&](float x) {
    return uint32_t(cvt(f32_bits(x), Type::f16, Type::f32, mode, false, false, relu, satfinite));
  };
  return one(a) << 16 | one(b);
}

uint32_t cvt_bf16x2_f32(float a, float b, CvtMode mode, bool relu, bool satfinite) {
  const auto one = [&](float x) {
    return uint32_t(cvt(f32_bits(x), Type::bf16, Type::f32, mode, false, false, relu, satfinite));
  };
  return one(a) << 16 | one(b);
}

namespace {

uint16_t fp8x2(uint64_t hi, uint64_t lo, Type dst, Type src, bool relu) {
  const auto one = [&](uint64_t x) {
    return uint16_t(cvt(x, dst, src, CvtMode::rn, false, false, relu, true));
  };
  return uint16_t(one(hi) << 8 | one(lo));
}

uint32_t from_fp8x2(uint16_t a, Type src, bool relu) {
  const auto one = [&](uint64_t x) {
    return uint32_t(cvt(x, Type::f16, src, CvtMode::rn, false, false, relu, false));
  };
  return one(a >> 8) << 16 | one(a & 0xffu);
}

} // namespace

uint16_t cvt_e4m3x2_f32(float a, float b, bool relu) {
  return fp8x2(f32_bits(a), f32_bits(b), Type::e4m3, Type::f32, relu);
}
uint16_t cvt_e5m2x2_f32(float a, float b, bool relu) {
  return fp8x2(f32_bits(a), f32_bits(b), Type::e5m2, Type::f32, relu);
}
uint16_t cvt_e4m3x2_f16x2(uint32_t a, bool relu) {
  return fp8x2(a >> 16, a & 0xffffu, Type::e4m3, Type::f16, relu);
}
uint16_t cvt_e5m2x2_f16x2(uint32_t a, bool relu) {
  return fp8x2(a >> 16, a & 0xffffu, Type::e5m2, Type::f16, relu);
}
uint32_t cvt_f16x2_e4m3x2(uint16_t a, bool relu) {
  return from_fp8x2(a, Type::e4m3, relu);
}
uint32_t cvt_f16x2_e5m2x2(uint16_t a, bool relu) {
  return from_fp8x2(a, Type::e5m2, relu);
}

uint32_t cvt_tf32_f32(float a, CvtMode mode, bool relu, bool satfinite) {
  return uint32_t(cvt(f32_bits(a), Type::tf32, Type::f32, mode, false, false, relu, satfinite));
}

} // namespace hone::emu::sem
