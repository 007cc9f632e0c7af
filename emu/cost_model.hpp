// The cost model: an analytical model of an H100/H200-class GPU (sm_90, 132 SMs) that turns what
// a launch did into its modeled duration. emu/README.md ("Cost model: kernels") explains it and
// gives the source of every constant below.
//
// The interpreter counts, per block, what depends only on the work each warp does (issue cycles,
// L1 wavefronts, the critical path of each warp through its dependences and barriers, the global
// sectors it touches); the launch combines them with the kernel's occupancy into waves on SMs and
// adds device-wide L2 and DRAM traffic. Nothing here depends on the host, its load, or the order
// blocks and warps ran in, so the same launch always models the same time.
#pragma once

#include "emu/exec_code.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace hone::emu::cost {

// ---- the device ---------------------------------------------------------------------------------
constexpr uint32_t k_sm_count = 132;
constexpr uint32_t k_schedulers_per_sm = 4;
constexpr uint64_t k_clock_khz = 1'980'000;          // SM clock under load
constexpr uint32_t k_max_warps_per_sm = 64;
constexpr uint32_t k_max_blocks_per_sm = 32;
constexpr uint32_t k_registers_per_sm = 65536;
constexpr uint32_t k_register_unit = 256;            // registers are allocated per warp in 256s
constexpr uint32_t k_max_registers_per_thread = 255;
constexpr uint32_t k_shared_per_sm = 228 * 1024;
constexpr uint32_t k_shared_reserved_per_block = 1024;
constexpr uint32_t k_shared_unit = 128;
constexpr uint32_t k_l1_shared_per_sm = 256 * 1024;  // L1 and shared memory are one array
constexpr uint64_t k_l2_bytes = 50ull * 1024 * 1024;
constexpr uint32_t k_sector_bytes = 32;
constexpr uint32_t k_line_sectors = 4;               // a 128-byte L1 line
constexpr uint32_t k_banks = 32;                     // shared memory: 32 banks of 4 bytes
// Bytes per SM clock, device-wide: DRAM at 4.3 TB/s (what a device copy achieves on an H200, of
// its 4.8 TB/s peak), L2 at 7 TB/s.
constexpr uint64_t k_dram_bytes_per_kcycle = 2'172'000; // 4.3e12 / 1.98e9 * 1000
constexpr uint64_t k_l2_bytes_per_kcycle = 3'535'000;   // 7.0e12 / 1.98e9 * 1000
constexpr uint64_t k_launch_cycles = 3000;              // a launch's fixed cost, ~1.5 us

// ---- tensor cores (mma.sync, wmma) --------------------------------------------------------------
// Multiply-adds are counted as 2 operations. The H100 SXM5 whitepaper's dense tensor rates are
// 4096 f16/bf16 FLOP per clock per SM (989 TFLOPS at 1.83 GHz), twice that for fp8 and int8, half
// for tf32, 256 for f64; hone's model takes mma.sync (the pre-Hopper instruction, not wgmma) at
// half the dense rate for the narrow types, an assumption that tests/gpu/run.sh checks against an
// H200 when one is lent, and at the full rate for f64 (mma.sync is Hopper's only f64 tensor
// instruction). Per scheduler (a quarter of an SM) per clock:
constexpr uint32_t k_mma_ops_f16 = 512;   // f16, bf16
constexpr uint32_t k_mma_ops_tf32 = 256;
constexpr uint32_t k_mma_ops_8bit = 1024; // s8, u8, e4m3, e5m2; s4/u4 (no 4-bit path on Hopper)
constexpr uint32_t k_mma_ops_b1 = 8192;   // 8x the int8 rate, as on A100 (4992 vs 624 TOPS)
constexpr uint32_t k_mma_ops_f64 = 64;
constexpr uint16_t k_lat_mma = 32;        // an HMMA.16816 on Ampere (Sun et al., 2022)

// ---- latencies (cycles from issue until a dependent instruction may issue) ---------------------
constexpr uint16_t k_lat_alu = 4;
constexpr uint16_t k_lat_f64 = 8;
constexpr uint16_t k_lat_convert = 6;
constexpr uint16_t k_lat_sfu = 16;
constexpr uint16_t k_lat_shuffle = 24;
constexpr uint16_t k_lat_shared = 30;       // + k_lat_shared_wavefront per extra wavefront
constexpr uint16_t k_lat_shared_wavefront = 2;
constexpr uint16_t k_lat_l1 = 36;           // a global or local load that hits L1
constexpr uint16_t k_lat_miss = 560;        // one that misses L1: L2 and HBM
constexpr uint16_t k_lat_atomic_global = 300;
constexpr uint16_t k_lat_atomic_shared = 40;
constexpr uint16_t k_lat_barrier = 20;      // from the last arrival to the first warp going on

// Sets the instruction's issue cost (scheduler cycles per warp instruction) and result latency.
void assign(Insn& insn);
// The same for a matrix instruction, from its description: an mma's operations at its type's
// tensor rate; ldmatrix, stmatrix and wmma.load/store as memory instructions (their shared-memory
// wavefronts and sectors are charged as they execute); movmatrix as a shuffle.
void assign_matrix(Insn& insn, const matrix::Insn& m);

// ---- occupancy ----------------------------------------------------------------------------------
struct Occupancy {
  uint32_t blocks_per_sm = 1;
  uint32_t warps_per_block = 1;
  uint32_t l1_bytes_per_block = 0; // L1 left beside the shared memory of the resident blocks
  const char* limit = "";          // what limits it: "registers", "shared memory", "warps", "blocks"
};

// Resident blocks per SM for a block of `threads` threads using `registers` per thread and
// `shared_bytes` of shared memory (static and dynamic), as the CUDA occupancy calculator computes
// it for sm_90. At least 1: the driver has checked that one block fits.
Occupancy occupancy(uint32_t threads, uint32_t registers, uint32_t shared_bytes);

// ---- what blocks count --------------------------------------------------------------------------

// The distinct global sectors a launch reads and writes, whatever block touched them first and
// in whatever order: a set of sector numbers, filled by blocks as they end.
class SectorSet {
public:
  // Adds `sectors` (sorted, distinct) to the read or the written set; returns how many were new.
  uint64_t add(const std::vector<uint64_t>& sectors, bool written);

private:
  static constexpr uint32_t k_page_bits = 15; // sectors per page: 1 MiB of address space
  static constexpr uint32_t k_shards = 16;
  struct Page {
    uint64_t read[(1u << k_page_bits) / 64] = {};
    uint64_t written[(1u << k_page_bits) / 64] = {};
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<uint64_t, std::unique_ptr<Page>> pages;
  };
  Shard m_shards[k_shards];
};

// Which slot of a warp's L1 history (its direct-mapped share of L1, emu/exec_interp.cpp) a
// sector takes: from the sector's place in its allocation and the order in which the warp first
// touched that allocation, never from host addresses. Where the host happened to map a buffer must
// not decide which sectors evict each other, or the same launch would model another time in
// another run. (A warp's own order of accesses does not depend on the schedule.)
class HistorySlots {
public:
  void reset() { m_count = 0; }
  // The slot of `sector` (an address / 32) in the allocation at `base`, for a history of
  // `mask` + 1 slots.
  uint64_t slot(uint64_t sector, uint64_t base, uint64_t mask) {
    uint32_t ordinal = 0;
    while (ordinal < m_count && m_bases[ordinal] != base) ++ordinal;
    if (ordinal == m_count && m_count < k_remembered) m_bases[m_count++] = base;
    const uint64_t h = (sector - (base >> 5)) + ordinal * 0x9e3779b97f4a7c15ull;
    return (h ^ (h >> 7)) & mask;
  }

private:
  static constexpr uint32_t k_remembered = 8; // allocations past these share one ordinal
  uint64_t m_bases[k_remembered] = {};
  uint32_t m_count = 0;
};

// What one block did, for the model (sums over its warps, or the maximum of their paths).
struct BlockCost {
  uint64_t issue = 0;       // scheduler cycles (each warp instruction's cost)
  uint64_t wavefronts = 0;  // L1/shared-memory data-path cycles: 128-byte lines, bank conflicts
  uint64_t path = 0;        // the longest path of a warp through latencies and barriers
  uint64_t l2_sectors = 0;  // sectors requested from L2: L1 misses, stores, atomics
  uint64_t load_sectors = 0; // global load sectors requested (L1 hits included)
  uint64_t load_hits = 0;   // of those, hits in L1 (reuse within the block)
  uint64_t dram_read = 0;   // sectors this block was the first of the launch to read
  uint64_t dram_written = 0;
};

// ---- the launch ---------------------------------------------------------------------------------

// Where the time of a launch goes, for logs and benchmarks.
struct Breakdown {
  uint32_t registers = 0;
  bool registers_from_ptxas = false;
  Occupancy occupancy;
  uint64_t waves = 0;         // per SM, the most
  uint64_t sm_cycles = 0;     // the busiest SM: sum over its waves of the slowest resource
  uint64_t issue_cycles = 0;  // of which, on that SM: bound by issue,
  uint64_t path_cycles = 0;   // by latency (the longest warp path),
  uint64_t l1_cycles = 0;     // by the L1/shared data path
  uint64_t l2_cycles = 0;     // device-wide: L2 traffic at its bandwidth
  uint64_t dram_cycles = 0;   // device-wide: DRAM traffic at its bandwidth
  uint64_t dram_bytes = 0;
  uint64_t l2_bytes = 0;
  uint64_t total_cycles = 0;
  // "issue", "latency", "L1", "L2", "DRAM": the largest term.
  const char* bound = "";
};

// Accumulates blocks into waves on SMs (block i runs on SM i % 132, in wave (i / 132) / resident
// blocks per SM) and turns the launch into cycles.
class LaunchModel {
public:
  LaunchModel(uint64_t blocks, const Occupancy& occupancy);
  void add(uint64_t block_linear, const BlockCost& cost);
  Breakdown finish(uint32_t registers, bool from_ptxas) const;

private:
  struct Wave {
    uint64_t issue = 0;
    uint64_t wavefronts = 0;
    uint64_t path = 0;
  };
  Occupancy m_occupancy;
  uint64_t m_waves = 1;        // per SM
  uint64_t m_wave_groups = 1;  // kept per SM: waves beyond k_max_groups share a group
  std::vector<Wave> m_cells;   // [sm][group]
  uint64_t m_l2_sectors = 0;
  uint64_t m_load_sectors = 0;
  uint64_t m_load_hits = 0;
  uint64_t m_dram_read = 0;
  uint64_t m_dram_written = 0;
};

uint64_t cycles_to_ns(uint64_t cycles);

} // namespace hone::emu::cost
