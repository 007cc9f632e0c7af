// CUDA's built-in variables and device functions as host code, for the host versions of the corpus
// kernels (host_kernels.cpp): loops over a launch's blocks, threads and warps; the warp intrinsics
// as loops over a warp's lanes; atomics as plain read-modify-writes (one core, no contention); the
// bit intrinsics; binary16 and bfloat16 with correct rounding; the fast-math intrinsics.
//
// Names drop CUDA's leading underscores (`__popc` is `popc`), which C++ reserves.
#pragma once

#include "host_kernels.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace hone::bench {

// dim3, for blockIdx, threadIdx, blockDim and gridDim.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// Kernel parameter `i` as the kernel's type T.
template <class T> T param(const HostLaunch& launch, unsigned i) {
  T value;
  std::memcpy(&value, launch.params[i], sizeof value);
  return value;
}

inline Dim3 grid_dim(const HostLaunch& launch) {
  return {launch.grid[0], launch.grid[1], launch.grid[2]};
}
inline Dim3 block_dim(const HostLaunch& launch) {
  return {launch.block[0], launch.block[1], launch.block[2]};
}
inline unsigned threads_per_block(const HostLaunch& launch) {
  return launch.block[0] * launch.block[1] * launch.block[2];
}

// f(blockIdx) for every block of the grid, z, y, x order (blocks never wait for one another).
template <class F> void for_each_block(const HostLaunch& launch, F&& f) {
  for (unsigned z = 0; z < launch.grid[2]; ++z)
    for (unsigned y = 0; y < launch.grid[1]; ++y)
      for (unsigned x = 0; x < launch.grid[0]; ++x) f(Dim3{x, y, z});
}

// f(threadIdx) for every thread of a block, z, y, x order: one stretch of a kernel between two
// barriers, run by each thread in turn.
template <class F> void for_each_thread(const HostLaunch& launch, F&& f) {
  for (unsigned z = 0; z < launch.block[2]; ++z)
    for (unsigned y = 0; y < launch.block[1]; ++y)
      for (unsigned x = 0; x < launch.block[0]; ++x) f(Dim3{x, y, z});
}

// The threads of one warp that were launched: linear thread indices first .. first + lanes - 1
// (x fastest, as CUDA groups threads into warps). A block whose size is not a multiple of 32 has
// a last warp with fewer lanes; the missing lanes do not exist.
struct Warp {
  unsigned first;
  unsigned lanes; // 1..32
  Dim3 block;

  Dim3 thread(unsigned lane) const {
    const unsigned t = first + lane;
    if (block.y == 1 && block.z == 1) return {t, 0, 0};
    return {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
  }
  unsigned launched() const { return lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u; }
};

// f(warp) for every warp of a block, in order: a stretch of warp-synchronous code between two
// barriers, run warp by warp; within it, each statement is a loop over the warp's lanes.
template <class F> void for_each_warp(const HostLaunch& launch, F&& f) {
  const unsigned n = threads_per_block(launch);
  for (unsigned first = 0; first < n; first += 32)
    f(Warp{first, n - first < 32 ? n - first : 32, block_dim(launch)});
}

// One variable of a warp's code: its value in each lane (only launched lanes are meaningful).
template <class T> using Lanes = std::array<T, 32>;

// -- warp intrinsics (CUDA C++ Programming Guide, "Warp Shuffle Functions", "Warp Vote Functions",
// "Warp Match Functions"). Every lane of the warp executes them together, as the corpus's
// kernels do (they pass the launched lanes as the mask, or the lanes of a branch for
// __match_any_sync). A lane that reads a lane that was not launched gets an undefined value on a
// GPU; here it keeps its own, and the kernels never use it.

// __shfl_sync(mask, v, src) with width 32: every lane reads lane src % 32.
template <class T>
Lanes<T> shfl_sync(const Warp& w, [[maybe_unused]] unsigned mask, const Lanes<T>& v, unsigned src) {
  Lanes<T> out;
  const unsigned from = src % 32;
  for (unsigned lane = 0; lane < w.lanes; ++lane) out[lane] = from < w.lanes ? v[from] : v[lane];
  return out;
}

// __shfl_down_sync(mask, v, delta): lane l reads lane l + delta; past lane 31 it keeps its own.
template <class T>
Lanes<T> shfl_down_sync(const Warp& w, [[maybe_unused]] unsigned mask, const Lanes<T>& v,
                        unsigned delta) {
  Lanes<T> out;
  for (unsigned lane = 0; lane < w.lanes; ++lane)
    out[lane] = lane + delta < w.lanes ? v[lane + delta] : v[lane];
  return out;
}

// __shfl_up_sync(mask, v, delta): lane l reads lane l - delta; below lane 0 it keeps its own.
template <class T>
Lanes<T> shfl_up_sync(const Warp& w, [[maybe_unused]] unsigned mask, const Lanes<T>& v,
                      unsigned delta) {
  Lanes<T> out;
  for (unsigned lane = 0; lane < w.lanes; ++lane)
    out[lane] = lane >= delta ? v[lane - delta] : v[lane];
  return out;
}

// __shfl_xor_sync(mask, v, lane_mask): lane l reads lane l ^ lane_mask.
template <class T>
Lanes<T> shfl_xor_sync(const Warp& w, [[maybe_unused]] unsigned mask, const Lanes<T>& v,
                       unsigned lane_mask) {
  Lanes<T> out;
  for (unsigned lane = 0; lane < w.lanes; ++lane) {
    const unsigned from = (lane ^ lane_mask) % 32;
    out[lane] = from < w.lanes ? v[from] : v[lane];
  }
  return out;
}

// __ballot_sync(mask, predicate): bit l set where lane l is in `mask` and its predicate holds.
inline unsigned ballot_sync(const Warp& w, unsigned mask, const Lanes<bool>& predicate) {
  unsigned bits = 0;
  for (unsigned lane = 0; lane < w.lanes; ++lane)
    bits |= unsigned(predicate[lane] && (mask >> lane & 1u)) << lane;
  return bits;
}
// __any_sync(mask, predicate): whether the predicate holds in any lane of `mask`.
inline int any_sync(const Warp& w, unsigned mask, const Lanes<bool>& predicate) {
  return ballot_sync(w, mask, predicate) != 0;
}
// __all_sync(mask, predicate): whether it holds in every lane of `mask` that was launched.
inline int all_sync(const Warp& w, unsigned mask, const Lanes<bool>& predicate) {
  return ballot_sync(w, mask, predicate) == (mask & w.launched());
}
// __activemask() where every launched lane is converged (the corpus calls it only there).
inline unsigned activemask(const Warp& w) {
  return w.launched();
}
// __match_any_sync(mask, v): for each lane of `mask`, the lanes of `mask` whose v equals its own.
template <class T> Lanes<unsigned> match_any_sync(const Warp& w, unsigned mask, const Lanes<T>& v) {
  Lanes<unsigned> peers{};
  for (unsigned lane = 0; lane < w.lanes; ++lane) {
    if (!(mask >> lane & 1u)) continue;
    for (unsigned other = 0; other < w.lanes; ++other)
      peers[lane] |= unsigned((mask >> other & 1u) && v[other] == v[lane]) << other;
  }
  return peers;
}

// -- atomics: one core runs one thread at a time, so a read-modify-write is atomic.

template <class T> T atomic_add(T* address, T value) {
  T old = *address;
  *address = old + value;
  return old;
}
inline int atomic_max(int* address, int value) {
  int old = *address;
  if (value > old) *address = value;
  return old;
}
// atomicCAS on the bits of a float, which a kernel reaches through an int* cast of its float*
// (C++ reads and writes them with bit_cast instead).
inline int atomic_cas(float* address, int compare, int value) {
  int old = std::bit_cast<int>(*address);
  if (old == compare) *address = std::bit_cast<float>(value);
  return old;
}

// -- bit intrinsics (CUDA Math API, "Integer Intrinsics")

inline int popc(unsigned x) {
  return std::popcount(x);
}
inline int popcll(unsigned long long x) {
  return std::popcount(x);
}
inline int clz(int x) {
  return std::countl_zero(unsigned(x));
}
inline int clzll(long long x) {
  return std::countl_zero((unsigned long long)x);
}
// Position of the least significant set bit, counting from 1; 0 for 0.
inline int ffs(int x) {
  return x ? std::countr_zero(unsigned(x)) + 1 : 0;
}
inline int ffsll(long long x) {
  return x ? std::countr_zero((unsigned long long)x) + 1 : 0;
}
inline unsigned brev(unsigned x) {
  x = (x >> 1 & 0x55555555u) | (x & 0x55555555u) << 1;
  x = (x >> 2 & 0x33333333u) | (x & 0x33333333u) << 2;
  x = (x >> 4 & 0x0f0f0f0fu) | (x & 0x0f0f0f0fu) << 4;
  return __builtin_bswap32(x);
}
inline unsigned long long brevll(unsigned long long x) {
  return (unsigned long long)brev(unsigned(x)) << 32 | brev(unsigned(x >> 32));
}
// Byte k of the result is byte (s >> 4k) & 7 of the eight bytes y:x (x bytes 0-3, y bytes 4-7).
inline unsigned byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long both = (unsigned long long)y << 32 | x;
  unsigned r = 0;
  for (unsigned k = 0; k < 4; ++k)
    r |= unsigned(both >> (8 * (s >> (4 * k) & 7u)) & 0xffu) << (8 * k);
  return r;
}
// The high 32 bits of hi:lo shifted left by shift mod 32.
inline unsigned funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  return unsigned(((unsigned long long)hi << 32 | lo) << (shift & 31u) >> 32);
}
// The low 32 bits of hi:lo shifted right by shift mod 32.
inline unsigned funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  return unsigned(((unsigned long long)hi << 32 | lo) >> (shift & 31u));
}

// -- fast-math intrinsics: the host's own functions (the harness's tolerances cover the device's
// approximations, and so the host's correctly rounded or faithful results).

inline float fast_expf(float x) { // __expf
  return std::exp(x);
}
inline float fast_logf(float x) { // __logf
  return std::log(x);
}
inline float fdividef(float a, float b) { // __fdividef
  return a / b;
}
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}

// -- binary16 (__half) and bfloat16 (__nv_bfloat16): the 16 bits the kernels store.

struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};
struct Half2 {
  Half x, y;
};
struct Bf162 {
  Bf16 x, y;
};

// `v` rounded to nearest even in a binary format of k_exp exponent and k_mant fraction bits
// (binary16: 5, 10; bfloat16: 8, 7), subnormals included, overflowing to infinity. One rounding:
// every half and bf16 operation below computes its exact result in double first. Always inlined:
// a call costs about as much as the rounding.
template <int k_exp, int k_mant> [[gnu::always_inline]] inline uint16_t round_narrow(double v) {
  constexpr int k_bias = (1 << (k_exp - 1)) - 1;
  constexpr int k_emin = 1 - k_bias;
  constexpr uint32_t k_inf = ((1u << k_exp) - 1u) << k_mant;
  const uint64_t u = std::bit_cast<uint64_t>(v);
  const uint16_t sign = uint16_t(u >> 48 & 0x8000u);
  const uint64_t magnitude = u & 0x7fffffffffffffffull;
  if (magnitude >= 0x7ff0000000000000ull)
    return magnitude == 0x7ff0000000000000ull ? uint16_t(sign | k_inf) : uint16_t(0x7fff);
  if (magnitude >> 52 == 0) return sign; // zero, or a double subnormal: far below the format
  const int e = int(magnitude >> 52) - 1023;
  const uint64_t significand = (magnitude & 0xfffffffffffffull) | 1ull << 52;
  // Below the smallest normal exponent the format has fewer fraction bits: drop more.
  const int drop = 52 - k_mant + (e < k_emin ? k_emin - e : 0);
  if (drop > 60) return sign; // below half the smallest subnormal
  // Adding half a unit less one, plus the kept part's last bit, rounds to nearest even without a
  // branch (a branch on the dropped bits is mispredicted half the time on random data).
  const uint64_t kept =
      (significand + (1ull << (drop - 1)) - 1u + (significand >> drop & 1u)) >> drop;
  // A normal number adds its exponent to `kept`, whose leading one carries into the exponent
  // field (and a rounding up to the next power of two carries once more); a subnormal is `kept`.
  uint64_t r = e >= k_emin ? (uint64_t(e + k_bias - 1) << k_mant) + kept : kept;
  if (r >= k_inf) r = k_inf;
  return uint16_t(sign | r);
}

inline Half half_rn(double v) {
  return Half{round_narrow<5, 10>(v)};
}
inline Bf16 bf16_rn(double v) {
  return Bf16{round_narrow<8, 7>(v)};
}

inline float half_to_float(Half h) { // __half2float: exact
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t e = h.bits >> 10 & 0x1fu, f = h.bits & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | f << 13);
  if (e == 0) return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(float(f) * 0x1p-24f));
  return std::bit_cast<float>(sign | (e + 112u) << 23 | f << 13);
}
inline float bf16_to_float(Bf16 b) { // __bfloat162float: exact
  return std::bit_cast<float>(uint32_t(b.bits) << 16);
}
inline Half float_to_half(float f) { // __float2half: cvt.rn.f16.f32
  return half_rn(f);
}
inline Bf16 float_to_bf16(float f) { // __float2bfloat16: cvt.rn.bf16.f32
  return bf16_rn(f);
}

// __hfma: fma.rn.f16. The product of two binary16 values is exact in double and its sum with a
// third rounds once to double, exactly unless the addends are more than 2^31 apart; then the
// larger decides the binary16 result alone, which the double rounding cannot move.
inline Half hfma(Half a, Half b, Half c) {
  return half_rn(double(half_to_float(a)) * double(half_to_float(b)) + double(half_to_float(c)));
}
// Products and sums of two binary16 or two bfloat16 values are exact in double (a bf16 sum whose
// addends are too far apart for that is decided by the larger alone).
inline Half hmul(Half a, Half b) {
  return half_rn(double(half_to_float(a)) * double(half_to_float(b)));
}
inline Half hadd(Half a, Half b) {
  return half_rn(double(half_to_float(a)) + double(half_to_float(b)));
}
inline Half2 hmul2(Half2 a, Half2 b) {
  return {hmul(a.x, b.x), hmul(a.y, b.y)};
}
inline Half2 hadd2(Half2 a, Half2 b) {
  return {hadd(a.x, b.x), hadd(a.y, b.y)};
}
inline Bf16 hmul(Bf16 a, Bf16 b) {
  return bf16_rn(double(bf16_to_float(a)) * double(bf16_to_float(b)));
}
inline Bf16 hadd(Bf16 a, Bf16 b) {
  return bf16_rn(double(bf16_to_float(a)) + double(bf16_to_float(b)));
}
inline Bf162 hmul2(Bf162 a, Bf162 b) {
  return {hmul(a.x, b.x), hmul(a.y, b.y)};
}
inline Bf162 hadd2(Bf162 a, Bf162 b) {
  return {hadd(a.x, b.x), hadd(a.y, b.y)};
}
// __hgt: an ordered comparison (false with a NaN).
inline bool hgt(Bf16 a, Bf16 b) {
  return bf16_to_float(a) > bf16_to_float(b);
}

} // namespace hone::bench
