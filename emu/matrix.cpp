#include "emu/matrix.hpp"

#include "emu/semantics.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace hone::emu::matrix {

uint32_t elem_bits(Elem e) {
  switch (e) {
  case Elem::f16: case Elem::bf16: return 16;
  case Elem::tf32: case Elem::f32: case Elem::s32: return 32;
  case Elem::f64: return 64;
  case Elem::e4m3: case Elem::e5m2: case Elem::s8: case Elem::u8: return 8;
  case Elem::s4: case Elem::u4: return 4;
  case Elem::b1: return 1;
  case Elem::none: break;
  }
  return 0;
}

bool elem_is_float(Elem e) {
  switch (e) {
  case Elem::f16: case Elem::bf16: case Elem::tf32: case Elem::f32: case Elem::f64:
  case Elem::e4m3: case Elem::e5m2:
    return true;
  default:
    return false;
  }
}

const char* elem_name(Elem e) {
  switch (e) {
  case Elem::f16: return "f16";
  case Elem::bf16: return "bf16";
  case Elem::tf32: return "tf32";
  case Elem::f32: return "f32";
  case Elem::f64: return "f64";
  case Elem::e4m3: return "e4m3";
  case Elem::e5m2: return "e5m2";
  case Elem::s8: return "s8";
  case Elem::u8: return "u8";
  case Elem::s4: return "s4";
  case Elem::u4: return "u4";
  case Elem::b1: return "b1";
  case Elem::s32: return "s32";
  case Elem::none: break;
  }
  return "none";
}

uint32_t elems_per_reg(Elem e) {
  const uint32_t bits = elem_bits(e);
  return bits == 0 || bits >= 32 ? 1 : 32 / bits;
}

namespace {

bool is_int8(Elem e) { return e == Elem::s8 || e == Elem::u8; }
bool is_int4(Elem e) { return e == Elem::s4 || e == Elem::u4; }
bool is_fp8(Elem e) { return e == Elem::e4m3 || e == Elem::e5m2; }
bool is_f16_or_f32(Elem e) { return e == Elem::f16 || e == Elem::f32; }

std::string shape_name(const Insn& mi) {
  return "m" + std::to_string(mi.m) + "n" + std::to_string(mi.n) + "k" + std::to_string(mi.k);
}

// Registers that hold an rows x cols matrix of `e` across 32 lanes.
uint8_t regs_for(uint32_t rows, uint32_t cols, Elem e) {
  return uint8_t(rows * cols / (32 * elems_per_reg(e)));
}

bool shape_is(const Insn& mi, uint16_t m, uint16_t n, uint16_t k) {
  return mi.m == m && mi.n == n && mi.k == k;
}

} // namespace

Pos dims(const Insn& mi, Role role) {
  switch (role) {
  case Role::a: return {mi.m, mi.k};
  case Role::b: return {mi.k, mi.n};
  case Role::c: break;
  }
  return {mi.m, mi.n};
}

// The shapes and types mma.sync defines for sm_80 to sm_90 (ISA 9.7.14.5.14, "mma"), and one
// addition of PTX 8.7 for fp8 (m16n8k16, f16 accumulators).
Counts mma_counts(const Insn& mi, std::string& why) {
  auto refuse = [&](const std::string& w) {
    why = "mma." + shape_name(mi) + " with ." + elem_name(mi.d) + "." + elem_name(mi.a) + "." +
          elem_name(mi.b) + "." + elem_name(mi.c) + ": " + w;
    return Counts{};
  };
  bool ok = false;
  if (mi.a == Elem::f16 && mi.b == Elem::f16) {
    ok = (shape_is(mi, 8, 8, 4) || shape_is(mi, 16, 8, 8) || shape_is(mi, 16, 8, 16)) &&
         is_f16_or_f32(mi.c) && is_f16_or_f32(mi.d);
  } else if (mi.a == Elem::bf16 && mi.b == Elem::bf16) {
    ok = (shape_is(mi, 16, 8, 8) || shape_is(mi, 16, 8, 16)) && mi.c == Elem::f32 &&
         mi.d == Elem::f32;
  } else if (mi.a == Elem::tf32 && mi.b == Elem::tf32) {
    ok = (shape_is(mi, 16, 8, 4) || shape_is(mi, 16, 8, 8)) && mi.c == Elem::f32 &&
         mi.d == Elem::f32;
  } else if (mi.a == Elem::f64 && mi.b == Elem::f64) {
    ok = (shape_is(mi, 8, 8, 4) || shape_is(mi, 16, 8, 4) || shape_is(mi, 16, 8, 8) ||
          shape_is(mi, 16, 8, 16)) &&
         mi.c == Elem::f64 && mi.d == Elem::f64;
  } else if (is_int8(mi.a) && is_int8(mi.b)) {
    ok = (shape_is(mi, 8, 8, 16) || shape_is(mi, 16, 8, 16) || shape_is(mi, 16, 8, 32)) &&
         mi.c == Elem::s32 && mi.d == Elem::s32;
  } else if (is_int4(mi.a) && is_int4(mi.b)) {
    ok = (shape_is(mi, 8, 8, 32) || shape_is(mi, 16, 8, 32) || shape_is(mi, 16, 8, 64)) &&
         mi.c == Elem::s32 && mi.d == Elem::s32;
  } else if (mi.a == Elem::b1 && mi.b == Elem::b1) {
    ok = (shape_is(mi, 8, 8, 128) || shape_is(mi, 16, 8, 128) || shape_is(mi, 16, 8, 256)) &&
         mi.c == Elem::s32 && mi.d == Elem::s32;
  } else if (is_fp8(mi.a) && is_fp8(mi.b)) {
    ok = (shape_is(mi, 16, 8, 32) || shape_is(mi, 16, 8, 16)) && is_f16_or_f32(mi.c) &&
         mi.c == mi.d;
  }
  if (!ok) return refuse("not a shape and type combination of mma.sync for sm_80 to sm_90");
  if (mi.satfinite && (elem_is_float(mi.a) || mi.a == Elem::b1)) {
    return refuse(".satfinite applies to integer mma only");
  }
  const bool quad = mi.a == Elem::f16 && shape_is(mi, 8, 8, 4);
  if (!quad && !(mi.a_row && !mi.b_row)) return refuse("only .row.col is defined for this shape");
  if (quad) {
    // four 8x8x4 products, one per quad pair (ISA 9.7.14.5.1)
    return Counts{2, 2, uint8_t(mi.c == Elem::f16 ? 4 : 8)};
  }
  return Counts{regs_for(mi.m, mi.k, mi.a), regs_for(mi.k, mi.n, mi.b),
                regs_for(mi.m, mi.n, mi.c == Elem::f16 ? Elem::f16 : Elem::f32)};
}

// The fragment sizes of wmma (ISA 9.7.14.4.1, "Matrix Fragments for WMMA").
Counts wmma_counts(const Insn& mi, std::string& why) {
  auto refuse = [&](const std::string& w) {
    why = "wmma." + shape_name(mi) + " with ." + elem_name(mi.a) + ": " + w;
    return Counts{};
  };
  const bool f16_shapes = shape_is(mi, 16, 16, 16) || shape_is(mi, 32, 8, 16) ||
                          shape_is(mi, 8, 32, 16);
  const Elem t = mi.a;
  auto c_regs = [&](Elem e) -> uint8_t { return e == Elem::f16 ? 4 : 8; };
  if (t == Elem::f16 && f16_shapes) {
    if (!is_f16_or_f32(mi.c)) return refuse("accumulators are .f16 or .f32");
    return Counts{8, 8, c_regs(mi.c)};
  }
  if (t == Elem::bf16 && f16_shapes) {
    return Counts{uint8_t(mi.m * mi.k / 64), uint8_t(mi.k * mi.n / 64), 8};
  }
  if (is_int8(t) && f16_shapes) {
    return Counts{uint8_t(mi.m * mi.k / 128), uint8_t(mi.k * mi.n / 128), 8};
  }
  if (t == Elem::tf32 && shape_is(mi, 16, 16, 8)) return Counts{4, 4, 8};
  if (t == Elem::f64 && shape_is(mi, 8, 8, 4)) return Counts{1, 1, 2};
  if (is_int4(t) && shape_is(mi, 8, 8, 32)) return Counts{1, 1, 2};
  if (t == Elem::b1 && shape_is(mi, 8, 8, 128)) return Counts{1, 1, 2};
  return refuse("not a wmma shape and type combination");
}

Pos mma_position(const Insn& mi, Role role, Elem type, uint32_t lane, uint32_t e,
                 uint32_t* group) {
  const uint32_t g = lane >> 2;  // groupID
  const uint32_t t = lane & 3;   // threadID_in_group
  if (group) *group = 0;
  if (mi.a == Elem::f16 && mi.m == 8 && mi.k == 4) {
    // 9.7.14.5.1: four MMAs, computation q on lanes 4q..4q+3 (low group) and 4q+16..4q+19 (high)
    const uint32_t hi = lane >= 16 ? 4 : 0;
    if (group) *group = (lane % 16) / 4;
    switch (role) {
    case Role::a: // Figures 46 (row-major), 47 (column-major)
      return mi.a_row ? Pos{uint16_t(t + hi), uint16_t(e)} : Pos{uint16_t(e % 4 + hi), uint16_t(t)};
    case Role::b: // Figures 48 (row-major), 49 (column-major)
      return mi.b_row ? Pos{uint16_t(t), uint16_t(e + hi)} : Pos{uint16_t(e), uint16_t(t + hi)};
    case Role::c:
      if (type == Elem::f16) return Pos{uint16_t(t + hi), uint16_t(e)}; // Figure 50
      // Figures 51, 52: row = X (+4 in the high group), X = (laneid & 1) + (i & 2);
      // col = (i & 4) + (laneid & 2) + (i & 1)
      return Pos{uint16_t((lane & 1) + (e & 2) + hi), uint16_t((e & 4) + (lane & 2) + (e & 1))};
    }
  }
  // Every other shape (9.7.14.5.2-13): an M x K matrix A is held as 8-row blocks of 4 * E
  // columns, E elements of a row per thread (groupID selects the row, threadID_in_group the E
  // columns); with M = 16 the registers alternate between rows 0-7 and 8-15 before moving to the
  // next columns (.f16 m16n8k16: a0,a1 row g; a2,a3 row g+8; a4..a7 the same 8 columns on).
  // B is its transpose: blocks of 4 * E rows, column groupID. C and D: c0, c1 in row g at columns
  // 2 * threadID_in_group + i, c2, c3 in row g + 8.
  const uint32_t E = elems_per_reg(type);
  const uint32_t r = e / E, j = e % E;
  switch (role) {
  case Role::a:
    if (mi.m == 16) return Pos{uint16_t(g + 8 * (r % 2)), uint16_t((r / 2) * 4 * E + t * E + j)};
    return Pos{uint16_t(g), uint16_t(r * 4 * E + t * E + j)};
  case Role::b:
    return Pos{uint16_t(r * 4 * E + t * E + j), uint16_t(g)};
  case Role::c:
    if (mi.m == 16) return Pos{uint16_t(g + 8 * (e / 2)), uint16_t(2 * t + e % 2)};
    return Pos{uint16_t(g), uint16_t(2 * t + e)};
  }
  return {};
}

// Register r of lane l holds the E elements that follow (32 * r + l) * E in row-major order of the
// matrix; fragments that hold more elements than the matrix has (.f16 A and B: 16 per thread)
// wrap around, so each element is held by several lanes, as on the GPUs that defined them.
Pos wmma_position(const Insn& mi, Role role, Elem type, uint32_t lane, uint32_t e) {
  const Pos d = dims(mi, role);
  const uint32_t E = elems_per_reg(type);
  const uint32_t r = e / E, j = e % E;
  const uint32_t p = ((r * 32 + lane) * E + j) % (uint32_t(d.row) * d.col);
  return Pos{uint16_t(p / d.col), uint16_t(p % d.col)};
}

double to_double(Elem e, uint64_t bits) {
  switch (e) {
  case Elem::f16: return sem::f16_to_f32(uint16_t(bits));
  case Elem::bf16: return sem::bf16_to_f32(uint16_t(bits));
  case Elem::tf32: return std::bit_cast<float>(uint32_t(bits) & 0xffffe000u);
  case Elem::f32: return std::bit_cast<float>(uint32_t(bits));
  case Elem::f64: return std::bit_cast<double>(bits);
  case Elem::e4m3:
    return sem::f16_to_f32(uint16_t(sem::cvt_f16x2_e4m3x2(uint16_t(bits & 0xff))));
  case Elem::e5m2:
    return sem::f16_to_f32(uint16_t(sem::cvt_f16x2_e5m2x2(uint16_t(bits & 0xff))));
  case Elem::s8: return double(int8_t(bits));
  case Elem::u8: return double(uint8_t(bits));
  case Elem::s4: return double(int32_t(uint32_t(bits & 0xf) << 28) >> 28);
  case Elem::u4: return double(bits & 0xf);
  case Elem::b1: return double(bits & 1);
  case Elem::s32: return double(int32_t(bits));
  case Elem::none: break;
  }
  return 0;
}

namespace {

// Round to nearest even from binary64 to binary16 (one rounding, unlike going through f32).
uint16_t f64_to_f16_rn(double v) {
  const uint16_t s = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a != a) return sem::k_nan_f16;
  if (a >= 65520.0) return s | 0x7c00; // at or past the midpoint above 65504
  if (a < 0x1p-14) {
    // subnormal: units of 2^-24; 1024 units carry into the smallest normal's encoding
    return uint16_t(s | uint16_t(std::nearbyint(a * 0x1p24)));
  }
  int ex = 0;
  std::frexp(a, &ex); // a = f * 2^ex, f in [0.5, 1)
  int E = ex - 1;
  double q = std::nearbyint(std::ldexp(a, 10 - E)); // [1024, 2048]
  uint32_t mant = uint32_t(q);
  if (mant == 2048) {
    mant = 1024;
    ++E;
  }
  if (E > 15) return s | 0x7c00;
  return uint16_t(s | uint32_t(E + 15) << 10 | (mant - 1024));
}

} // namespace

uint64_t from_double(Elem e, double v) {
  switch (e) {
  case Elem::f16: return f64_to_f16_rn(v);
  case Elem::bf16: return sem::f32_to_bf16_rn(float(v));
  case Elem::f32: {
    const float f = float(v); // the executor runs under round-to-nearest (FpEnvGuard)
    return f != f ? sem::k_nan_f32 : std::bit_cast<uint32_t>(f);
  }
  case Elem::f64: return std::bit_cast<uint64_t>(v);
  default: break;
  }
  return 0;
}

namespace {

uint64_t field(uint64_t reg, uint32_t j, uint32_t bits) {
  if (bits >= 64) return reg;
  return (reg >> (j * bits)) & ((uint64_t(1) << bits) - 1);
}

bool quad_pairs(const Insn& mi) {
  return mi.op == Op::mma && mi.a == Elem::f16 && mi.m == 8 && mi.k == 4;
}

Pos place(const Insn& mi, Role role, Elem type, uint32_t lane, uint32_t e, uint32_t* group) {
  if (mi.op == Op::wmma_mma) {
    *group = 0;
    return wmma_position(mi, role, type, lane, e);
  }
  return mma_position(mi, role, type, lane, e, group);
}

// f16 and fp8 values by their bits, built once.
struct Tables {
  std::vector<float> f16 = std::vector<float>(65536);
  float e4m3[256], e5m2[256];
  Tables() {
    for (uint32_t h = 0; h < 65536; ++h) f16[h] = sem::f16_to_f32(uint16_t(h));
    for (uint32_t b = 0; b < 256; ++b) {
      e4m3[b] = sem::f16_to_f32(uint16_t(sem::cvt_f16x2_e4m3x2(uint16_t(b))));
      e5m2[b] = sem::f16_to_f32(uint16_t(sem::cvt_f16x2_e5m2x2(uint16_t(b))));
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

// Writes every element of one operand's registers, decoded by `decode`, at its place.
template <class V, class F>
void gather(const Lanes* regs, uint32_t nregs, Elem type, const uint16_t* at, V* out, F decode) {
  const uint32_t E = elems_per_reg(type), bits = elem_bits(type);
  size_t n = 0;
  for (uint32_t r = 0; r < nregs; ++r) {
    for (uint32_t lane = 0; lane < 32; ++lane) {
      const uint64_t reg = regs[r][lane];
      for (uint32_t j = 0; j < E; ++j) out[at[n++]] = decode(field(reg, j, bits));
    }
  }
}

// An operand as doubles (floats: their values) or int64 (integers, b1: the bit).
template <class V> void decode_operand(const Lanes* regs, uint32_t nregs, Elem type, const uint16_t* at, V* out) {
  const Tables& t = tables();
  switch (type) {
  case Elem::f16: return gather(regs, nregs, type, at, out, [&](uint64_t b) { return V(t.f16[b]); });
  case Elem::bf16: return gather(regs, nregs, type, at, out, [](uint64_t b) { return V(sem::bf16_to_f32(uint16_t(b))); });
  case Elem::e4m3: return gather(regs, nregs, type, at, out, [&](uint64_t b) { return V(t.e4m3[b]); });
  case Elem::e5m2: return gather(regs, nregs, type, at, out, [&](uint64_t b) { return V(t.e5m2[b]); });
  case Elem::f32: return gather(regs, nregs, type, at, out, [](uint64_t b) { return V(std::bit_cast<float>(uint32_t(b))); });
  case Elem::s32: return gather(regs, nregs, type, at, out, [](uint64_t b) { return V(int32_t(uint32_t(b))); });
  case Elem::s8: return gather(regs, nregs, type, at, out, [](uint64_t b) { return V(int8_t(b)); });
  case Elem::u8: return gather(regs, nregs, type, at, out, [](uint64_t b) { return V(uint8_t(b)); });
  default: return gather(regs, nregs, type, at, out, [&](uint64_t b) { return V(to_double(type, b)); });
  }
}

// The largest operands: A of m16n8k256 (b1), B of m16n8k256, C of m8n8k4 .f16 (four 8x8) or
// m16n16k16 wmma.
constexpr size_t k_max_a = 16 * 256, k_max_b = 256 * 8, k_max_c = 256;

} // namespace

std::shared_ptr<const Plan> make_plan(const Insn& mi) {
  auto p = std::make_shared<Plan>();
  p->groups = quad_pairs(mi) ? 4 : 1;
  auto build = [&](Role role, Elem type, uint32_t nregs, std::vector<uint16_t>& at) {
    const uint32_t E = elems_per_reg(type);
    for (uint32_t r = 0; r < nregs; ++r) {
      for (uint32_t lane = 0; lane < 32; ++lane) {
        for (uint32_t j = 0; j < E; ++j) {
          uint32_t g = 0;
          const Pos q = place(mi, role, type, lane, r * E + j, &g);
          uint32_t index = 0;
          switch (role) {
          case Role::a: index = (g * mi.m + q.row) * mi.k + q.col; break;
          case Role::b: index = (g * mi.k + q.row) * mi.n + q.col; break;
          case Role::c: index = (g * mi.m + q.row) * mi.n + q.col; break;
          }
          at.push_back(uint16_t(index));
        }
      }
    }
  };
  build(Role::a, mi.a, mi.na, p->a);
  build(Role::b, mi.b, mi.nb, p->b);
  build(Role::c, mi.c, mi.nc, p->c);
  build(Role::c, mi.d, mi.nd, p->d);
  return p;
}

namespace {

// D[i][j] for every i, j of one group, accumulating over k in increasing order for each output
// (the loop over j innermost, so outputs advance side by side in registers; each output's own sum
// keeps the order the numerics promise). N is a constant for the shapes that exist (8, 16, 32),
// which lets the compiler keep a row of sums in vector registers.
template <uint32_t N, class V, class Step>
void products_n(uint32_t M, uint32_t K, const V* a, const V* b, V* acc, Step step) {
  for (uint32_t i = 0; i < M; ++i) {
    V row[N];
    for (uint32_t j = 0; j < N; ++j) row[j] = acc[size_t(i) * N + j];
    for (uint32_t kk = 0; kk < K; ++kk) {
      const V x = a[size_t(i) * K + kk];
      const V* brow = b + size_t(kk) * N;
      for (uint32_t j = 0; j < N; ++j) row[j] = step(row[j], x, brow[j]);
    }
    for (uint32_t j = 0; j < N; ++j) acc[size_t(i) * N + j] = row[j];
  }
}

template <class V, class Step>
void products(uint32_t M, uint32_t N, uint32_t K, const V* a, const V* b, V* acc, Step step) {
  switch (N) {
  case 8: return products_n<8>(M, K, a, b, acc, step);
  case 16: return products_n<16>(M, K, a, b, acc, step);
  case 32: return products_n<32>(M, K, a, b, acc, step);
  default: break;
  }
  for (uint32_t i = 0; i < M; ++i) {
    for (uint32_t kk = 0; kk < K; ++kk) {
      const V x = a[size_t(i) * K + kk];
      for (uint32_t j = 0; j < N; ++j) acc[size_t(i) * N + j] = step(acc[size_t(i) * N + j], x, b[size_t(kk) * N + j]);
    }
  }
}

} // namespace

void mma(const Insn& mi, const Lanes* in, Lanes* out) {
  const Plan& p = *mi.plan;
  const uint32_t G = p.groups, M = mi.m, N = mi.n, K = mi.k;
  const size_t nc = size_t(G) * M * N;
  uint64_t d[k_max_c];
  const Lanes* ra = in;
  const Lanes* rb = in + mi.na;
  const Lanes* rc = in + mi.na + mi.nb;
  if (mi.a == Elem::b1 || !elem_is_float(mi.a)) {
    // integers: exact products and sums; .satfinite clamps to the s32 range, else the sum wraps.
    // b1: popc(a AND b) or popc(a XOR b) over the row and column (9.7.14.5.14), plus c.
    int64_t a[k_max_a], b[k_max_b], c[k_max_c];
    decode_operand(ra, mi.na, mi.a, p.a.data(), a);
    decode_operand(rb, mi.nb, mi.b, p.b.data(), b);
    decode_operand(rc, mi.nc, mi.c, p.c.data(), c);
    for (uint32_t g = 0; g < G; ++g) {
      const int64_t* ag = a + size_t(g) * M * K;
      const int64_t* bg = b + size_t(g) * K * N;
      int64_t* cg = c + size_t(g) * M * N;
      if (mi.a == Elem::b1 && mi.bit_xor)
        products(M, N, K, ag, bg, cg, [](int64_t s, int64_t x, int64_t y) { return s + (x ^ y); });
      else if (mi.a == Elem::b1)
        products(M, N, K, ag, bg, cg, [](int64_t s, int64_t x, int64_t y) { return s + (x & y); });
      else
        products(M, N, K, ag, bg, cg, [](int64_t s, int64_t x, int64_t y) { return s + x * y; });
    }
    for (size_t i = 0; i < nc; ++i) {
      int64_t sum = c[i];
      if (mi.satfinite) {
        sum = std::clamp<int64_t>(sum, std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max());
      }
      d[i] = uint32_t(sum);
    }
  } else {
    double a[k_max_a], b[k_max_b], c[k_max_c], sum[k_max_c];
    decode_operand(ra, mi.na, mi.a, p.a.data(), a);
    decode_operand(rb, mi.nb, mi.b, p.b.data(), b);
    decode_operand(rc, mi.nc, mi.c, p.c.data(), c);
    if (mi.a == Elem::f64) {
      // a chain of IEEE fmas in k order, round to nearest even
      std::copy(c, c + nc, sum);
      for (uint32_t g = 0; g < G; ++g) {
        products(M, N, K, a + size_t(g) * M * K, b + size_t(g) * K * N, sum + size_t(g) * M * N,
                 [](double s, double x, double y) { return sem::fma_f64(x, y, s); });
      }
    } else {
      // exact products (at most 11 + 11 significant bits), summed in binary64 in k order, the
      // accumulator added last, rounded once to the result type
      std::fill(sum, sum + nc, 0.0);
      for (uint32_t g = 0; g < G; ++g) {
        products(M, N, K, a + size_t(g) * M * K, b + size_t(g) * K * N, sum + size_t(g) * M * N,
                 [](double s, double x, double y) { return s + x * y; });
      }
      for (size_t i = 0; i < nc; ++i) sum[i] += c[i];
    }
    if (mi.d == Elem::f32) {
      for (size_t i = 0; i < nc; ++i) {
        const float f = float(sum[i]); // round to nearest (the executor's FpEnvGuard)
        d[i] = f != f ? sem::k_nan_f32 : std::bit_cast<uint32_t>(f);
      }
    } else {
      for (size_t i = 0; i < nc; ++i) d[i] = from_double(mi.d, sum[i]);
    }
  }
  const uint32_t E = elems_per_reg(mi.d), bits = elem_bits(mi.d);
  const uint64_t mask = bits >= 64 ? ~0ull : (uint64_t(1) << bits) - 1;
  size_t n = 0;
  for (uint32_t r = 0; r < mi.nd; ++r) {
    for (uint32_t lane = 0; lane < 32; ++lane) {
      uint64_t reg = 0;
      for (uint32_t j = 0; j < E; ++j) reg |= (d[p.d[n++]] & mask) << (bits >= 64 ? 0 : j * bits);
      out[r][lane] = reg;
    }
  }
}

PairPos ldmatrix_position(bool trans, uint32_t lane) {
  const uint16_t row = uint16_t(lane / 4), col = uint16_t(2 * (lane % 4));
  if (!trans) return {{row, col}, {row, uint16_t(col + 1)}};
  // .trans: the thread receives column `row` of the rows its group would have read
  return {{col, row}, {uint16_t(col + 1), row}};
}

Lanes movmatrix(const Lanes& a) {
  auto element = [&](uint32_t r, uint32_t c) -> uint64_t {
    return (a[r * 4 + c / 2] >> (16 * (c % 2))) & 0xffff;
  };
  Lanes d{};
  for (uint32_t lane = 0; lane < 32; ++lane) {
    const PairPos p = ldmatrix_position(true, lane);
    d[lane] = element(p.lo.row, p.lo.col) | element(p.hi.row, p.hi.col) << 16;
  }
  return d;
}

} // namespace hone::emu::matrix
