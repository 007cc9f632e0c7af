// The SIMT interpreter: runs one thread block of a decoded kernel.
//
// Each warp executes one instruction for all lanes that are at the same position, which keeps
// lanes together where they agree and lets them diverge where the PTX branches apart. Lanes at
// different positions run lowest position first, so forward branches reconverge where the paths
// meet. Barriers count threads (sm_70+ semantics); threads that exited count as arrived.
#pragma once

#include "emu/cost_model.hpp"
#include "emu/exec_code.hpp"
#include "emu/exec_printf.hpp"
#include "emu/jit/abi.hpp"
#include "emu/memory.hpp"
#include "emu/program.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hone::emu {

// SplitMix64's output function: a bijective 64-bit mix, the source of every seeded schedule
// decision (deterministic on every machine).
inline uint64_t schedule_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Warp steps in one turn of a warp under the fixed schedule.
constexpr uint32_t k_schedule_slice = 512;
// Under a seeded schedule, a turn that lets the warp run on until it waits at a barrier or exits
// (or this many steps, for warps that spin on another warp): one turn in four. Short turns
// interleave the warps finely; long ones let a warp run a whole phase ahead of the others, which
// is what exposes a missing barrier (a warp reads what its neighbours have not written yet), a
// race that turns of similar length keep hidden when the warps do similar work.
constexpr uint32_t k_schedule_long_slice = 1u << 16;

// The length of the next turn under a seeded schedule, from its generator's next output `r`.
inline uint32_t seeded_slice(uint64_t r) {
  if ((r & 3) == 0) return k_schedule_long_slice;
  r >>= 2;
  return k_schedule_slice / 8 + uint32_t(r % (k_schedule_slice - k_schedule_slice / 8 + 1));
}

// What every block of one launch shares.
struct LaunchShared {
  const CompiledKernel* kernel = nullptr;
  Dim3 grid;
  Dim3 block;
  uint32_t dynamic_shared_bytes = 0;
  const uint8_t* params = nullptr;
  const AllocationTable* table = nullptr;
  uint64_t instruction_budget = 0;
  uint64_t schedule_seed = 0;            // LaunchRequest::schedule_seed
  uint64_t fill_seed = 0;                // LaunchRequest::fill_seed
  uint64_t globaltimer_ns = 0;           // LaunchRequest::globaltimer_ns
  uint64_t grid_workspace = 0;           // cooperative launches: the grid barrier's memory
  std::atomic<uint64_t> instructions{0}; // thread-instructions executed so far, all blocks
  std::atomic<bool> abort{false};        // a block failed: others stop early
  // The cost model's view of the launch (emu/cost_model.hpp).
  cost::SectorSet* sectors = nullptr;    // the distinct global sectors read and written
  uint32_t l1_bytes_per_block = 0;       // L1 a block may keep its data in
  uint32_t history_sectors = 16;         // per warp: the sectors it remembers for L1 latency (2^n)
  // The kernel's compiled code, or nullptr: converged warps then take their steps through it
  // wherever it has an entry (emu/jit/abi.hpp).
  const jit::Code* code = nullptr;
  // Device printf (exec_printf.hpp): the FIFO bytes left for this launch's records
  // (CU_LIMIT_PRINTF_FIFO_SIZE less what earlier launches buffered), and what its blocks recorded.
  uint64_t print_fifo_bytes = 0;
  std::atomic<uint64_t> print_bytes{0};
  std::atomic<uint64_t> print_text{0}; // bytes of formatted text they hold
};

// A launch's blocks record printf output until their records together take this many times the
// FIFO space left: more could never be printed (the driver keeps a FIFO's worth in block order),
// and which blocks reach the bound first depends on the order they ran in.
constexpr uint64_t k_print_launch_factor = 16;
// ...and while their formatted text stays under this (a width of 65536 in every record of a full
// FIFO would otherwise be gigabytes of text).
constexpr uint64_t k_print_launch_text = 256ull << 20;

struct BlockResult {
  int status = 0; // CUresult
  std::string message;
  uint64_t warp_instructions = 0;
  uint64_t thread_instructions = 0;
  uint64_t memory_sectors = 0; // 32-byte global sectors touched, distinct per warp instruction
  uint64_t compiled_warp_instructions = 0; // of warp_instructions, those compiled code executed
  cost::BlockCost cost;
  // Device printf records, in the order the block's threads made them, and their FIFO bytes; how
  // many calls found no room.
  std::vector<DevicePrint> prints;
  uint64_t print_bytes = 0;
  uint64_t prints_dropped = 0;
};

// Runs blocks one after another on one host thread, reusing its buffers.
class BlockRunner {
public:
  explicit BlockRunner(LaunchShared& launch);
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  BlockResult run(uint64_t block_linear);

private:
  struct State;
  std::unique_ptr<State> m_state;
};

} // namespace hone::emu
