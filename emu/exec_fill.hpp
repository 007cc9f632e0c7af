// What a block's memory and registers start with under a fill seed (LaunchRequest::fill_seed,
// HONE_EMU_FILL_SEED): pseudo-random bytes derived from the seed, the block's index and, for
// local memory and registers, the thread's. Every execution path fills through these functions,
// so a kernel that reads what it never wrote reads the same bytes on each of them.
#pragma once

#include "emu/exec_code.hpp"
#include "emu/exec_interp.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hone::emu {

// SplitMix64's increment: word i of a stream is the generator's i-th output.
constexpr uint64_t k_fill_gamma = 0x9e3779b97f4a7c15ull;

// Independent streams of one block: its shared memory, each thread's local memory, its registers.
enum class FillSpace : uint64_t { shared = 1, local = 2, registers = 3 };

// The key of the stream `space` of block `block_linear` (and thread `thread`, for local memory)
// under `seed`. Different seeds, blocks, threads and spaces give unrelated streams.
inline uint64_t fill_key(uint64_t seed, uint64_t block_linear, FillSpace space,
                         uint64_t thread = 0) {
  uint64_t k = schedule_mix(seed ^ schedule_mix(block_linear));
  k = schedule_mix(k ^ uint64_t(space));
  return schedule_mix(k ^ thread);
}

// Word `i` of the stream `key` (SplitMix64 at position i: each word stands alone).
inline uint64_t fill_word(uint64_t key, uint64_t i) {
  return schedule_mix(key + i * k_fill_gamma);
}

// Fills `n` bytes at `p` with the stream `key`: word i at bytes [8i, 8i + 8), in host order.
inline void fill_bytes(uint64_t key, uint8_t* p, size_t n) {
  size_t at = 0;
  for (uint64_t i = 0; at + 8 <= n; ++i, at += 8) {
    const uint64_t w = fill_word(key, i);
    std::memcpy(p + at, &w, 8);
  }
  if (at < n) {
    const uint64_t w = fill_word(key, at / 8);
    std::memcpy(p + at, &w, n - at);
  }
}

// The value register `slot` of thread `thread` starts with, `key` being the block's register
// stream: a value the register could hold after a write (exec_interp.cpp's wr()): masked to its
// width, and 0 or 1 for one-byte registers (predicates) and the carry flag, which instructions
// test as booleans.
inline uint64_t fill_register(uint64_t key, const CompiledKernel& k, uint32_t slot,
                              uint32_t thread) {
  const uint64_t v = fill_word(key, (uint64_t(thread) << 32) | slot);
  const uint8_t w = k.slot_bytes[slot];
  if (w == 1 || slot == k.carry_slot) return v & 1;
  return w < 8 ? v & ((1ull << (w * 8)) - 1) : v;
}

} // namespace hone::emu
