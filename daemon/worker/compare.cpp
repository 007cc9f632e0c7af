#include "daemon/worker/compare.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace hone::worker {

const char* to_string(Dtype d) {
  switch (d) {
  case Dtype::exact:
    return "exact";
  case Dtype::f16:
    return "f16";
  case Dtype::bf16:
    return "bf16";
  case Dtype::f32:
    return "f32";
  case Dtype::f64:
    return "f64";
  }
  return "exact";
}

ElementType element_type(const std::vector<ptx::Type>& types) {
  using ptx::Type;
  if (types.empty()) return {};
  bool same = true;
  for (auto t : types) same = same && t == types.front();
  if (same) {
    switch (types.front()) {
    case Type::f16:
      return {Dtype::f16, Display::f16, 2};
    case Type::bf16:
      return {Dtype::bf16, Display::bf16, 2};
    case Type::f32:
      return {Dtype::f32, Display::f32, 4};
    case Type::f64:
      return {Dtype::f64, Display::f64, 8};
    default:
      break;
    }
  }
  // Integers of one size (ld.u32 and st.b32 through the same pointer): shown as that integer.
  uint32_t size = ptx::type_size(types.front());
  bool is_signed = ptx::is_signed(types.front());
  for (auto t : types) {
    if (ptx::is_float(t) || ptx::type_size(t) != size) return {};
    is_signed = is_signed && ptx::is_signed(t);
  }
  switch (size) {
  case 1:
    return {Dtype::exact, is_signed ? Display::s8 : Display::u8, 1};
  case 2:
    return {Dtype::exact, is_signed ? Display::s16 : Display::u16, 2};
  case 4:
    return {Dtype::exact, is_signed ? Display::s32 : Display::u32, 4};
  case 8:
    return {Dtype::exact, is_signed ? Display::s64 : Display::u64, 8};
  default:
    return {};
  }
}

namespace {

double half_to_double(uint16_t h) {
  uint32_t sign = h >> 15, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  double v;
  if (exp == 0) {
    v = std::ldexp(double(man), -24);
  } else if (exp == 31) {
    v = man ? NAN : INFINITY;
  } else {
    v = std::ldexp(double(man | 0x400), int(exp) - 25);
  }
  return sign ? -v : v;
}

double bf16_to_double(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool is_float(Display d) {
  return d == Display::f16 || d == Display::bf16 || d == Display::f32 || d == Display::f64;
}

uint64_t load_bits(const char* p, uint32_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size); // little-endian, as every CUDA host is
  return v;
}

double as_double(Display d, uint64_t bits) {
  switch (d) {
  case Display::f16:
    return half_to_double(uint16_t(bits));
  case Display::bf16:
    return bf16_to_double(uint16_t(bits));
  case Display::f32: {
    uint32_t b = uint32_t(bits);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
  case Display::f64: {
    double f;
    std::memcpy(&f, &bits, 8);
    return f;
  }
  default:
    return 0;
  }
}

std::string format(Display d, uint32_t size, uint64_t bits) {
  char buf[96];
  switch (d) {
  case Display::f16:
  case Display::bf16:
  case Display::f32:
  case Display::f64: {
    int digits = d == Display::f64 ? 17 : d == Display::f32 ? 9 : 5;
    std::snprintf(buf, sizeof buf, "%.*g (0x%0*llx)", digits, as_double(d, bits), int(size * 2),
                  (unsigned long long)bits);
    return buf;
  }
  case Display::s8:
    return std::to_string(int8_t(bits));
  case Display::s16:
    return std::to_string(int16_t(bits));
  case Display::s32:
    return std::to_string(int32_t(bits));
  case Display::s64:
    return std::to_string(int64_t(bits));
  case Display::u8:
    return std::to_string(bits);
  case Display::u16:
  case Display::u32:
  case Display::u64: {
    // PTX types a C int as .u32 more often than not: with the top bit set, the signed reading
    // is what the source means as often as the unsigned one.
    std::string text = std::to_string(bits);
    uint32_t width = size * 8;
    if (width >= 16 && width <= 64 && (bits >> (width - 1) & 1)) {
      int64_t as_signed = width == 64 ? int64_t(bits) : int64_t(bits) - (int64_t(1) << width);
      text += " (signed " + std::to_string(as_signed) + ")";
    }
    return text;
  }
  case Display::bytes:
    std::snprintf(buf, sizeof buf, "0x%02x", unsigned(bits & 0xFF));
    return buf;
  }
  return "?";
}

} // namespace

Difference compare(std::string_view want, std::string_view got, const CompareSpec& spec) {
  Difference d;
  const uint64_t n = std::min(want.size(), got.size());
  d.compared_bytes = n;
  uint32_t size = spec.type.size;
  uint64_t phase = size > 1 ? spec.origin % size : 0;
  const bool floating = is_float(spec.type.display) && spec.type.dtype != Dtype::exact;
  auto note_bytes = [&](uint64_t off) {
    if (d.differing++ == 0) {
      d.first_index = int64_t(off);
      d.in_bytes = true;
      d.got = format(Display::bytes, 1, uint8_t(got[off]));
      d.want = format(Display::bytes, 1, uint8_t(want[off]));
    }
  };
  // Bytes before the first whole element and after the last: compared as bytes.
  for (uint64_t i = 0; i < std::min(phase, n); ++i) {
    if (want[i] != got[i]) note_bytes(i);
  }
  // The absolute part of the tolerance never exceeds the relative one at the original's largest
  // magnitude: where every output of the original is tiny, zeros are not "within tolerance".
  double scale = 0;
  if (floating && spec.tolerance) {
    for (uint64_t o = phase; o + size <= n; o += size) {
      double w = std::fabs(as_double(spec.type.display, load_bits(want.data() + o, size)));
      if (std::isfinite(w)) scale = std::max(scale, w);
    }
  }
  uint64_t off = phase;
  for (; off + size <= n; off += size) {
    ++d.elements;
    const bool equal = std::memcmp(want.data() + off, got.data() + off, size) == 0;
    uint64_t wb = 0, gb = 0;
    if (floating || (!equal && size > 1)) {
      wb = load_bits(want.data() + off, size);
      gb = load_bits(got.data() + off, size);
    }
    bool differs = !equal;
    if (floating) {
      double w = as_double(spec.type.display, wb), g = as_double(spec.type.display, gb);
      double err = std::fabs(g - w);
      if (std::isfinite(err)) {
        d.max_abs_err = std::max(d.max_abs_err, err);
        if (w != 0) d.max_rel_err = std::max(d.max_rel_err, err / std::fabs(w));
      }
      if (differs && spec.tolerance) {
        const Tolerance& t = *spec.tolerance;
        double rel = t.f32_rel, abs = t.f32_abs;
        if (spec.type.dtype == Dtype::f64) {
          rel = t.f64_rel;
          abs = t.f64_abs;
        } else if (spec.type.dtype == Dtype::f16 || spec.type.dtype == Dtype::bf16) {
          rel = t.f16_rel;
          abs = t.f16_abs;
        }
        if (scale > 0) abs = std::min(abs, rel * scale);
        double allowed = abs + rel * std::fabs(w);
        if (spec.spread.size() >= off + size) {
          double s = as_double(spec.type.display, load_bits(spec.spread.data() + off, size));
          if (std::isfinite(s)) allowed = std::max(allowed, 2 * std::fabs(s - w));
        }
        if (std::isnan(w) && std::isnan(g)) {
          differs = false;
        } else if (std::isfinite(w) && std::isfinite(g)) {
          differs = !(err <= allowed);
        } // an infinity or a NaN against anything else still differs
      }
    }
    if (differs && d.differing++ == 0) {
      d.first_index = (int64_t(off) - int64_t(spec.origin)) / int64_t(size);
      d.got = format(spec.type.display, size, size > 1 ? gb : uint8_t(got[off]));
      d.want = format(spec.type.display, size, size > 1 ? wb : uint8_t(want[off]));
    }
  }
  for (; off < n; ++off) {
    if (want[off] != got[off]) note_bytes(off);
  }
  return d;
}

bool constant_elements(std::string_view bytes, const ElementType& type, uint64_t origin,
                       uint64_t from, uint64_t to) {
  const uint32_t size = std::max<uint32_t>(1, type.size);
  to = std::min<uint64_t>(to, bytes.size());
  // The first whole element at or after `from`, on the element grid that starts at `origin`.
  uint64_t at = from + (origin % size + size - from % size) % size;
  if (at + size > to) return false;
  std::string_view first = bytes.substr(at, size);
  for (uint64_t o = at + size; o + size <= to; o += size) {
    if (bytes.substr(o, size) != first) return false;
  }
  return true;
}

std::string describe(const Difference& d) {
  std::string s = (d.in_bytes ? "byte " : "element ") + std::to_string(d.first_index) + ": got " +
                  d.got + ", want " + d.want;
  uint64_t total = d.elements ? d.elements : d.compared_bytes;
  s += " (" + std::to_string(d.differing) + " of " + std::to_string(total) +
       (d.elements ? " elements differ)" : " bytes differ)");
  return s;
}

} // namespace hone::worker
