// The cost model's tables and the launch-level part of it (emu/README.md, "Cost model: kernels").
#include "emu/cost_model.hpp"

#include <algorithm>

namespace hone::emu::cost {


// Issue costs follow the CUDA C++ Programming Guide's throughput table for compute capability 9.0
// (results per clock per SM, four schedulers): 128/clock costs 1 cycle of a scheduler per warp
// instruction, 64 costs 2, 32 costs 4, 16 costs 8.
void assign(Insn& i) {
  uint32_t cost = 1;
  uint16_t lat = k_lat_alu;
  const bool f64 = i.type == ptx::Type::f64;
  const bool flt = ptx::is_float(i.type);
  switch (i.op) {
  case XOp::mul:
  case XOp::mad:
  case XOp::mul24:
  case XOp::mad24:
  case XOp::sad:
    if (!flt) cost = 2; // integer multiply: 64/clock
    break;
  case XOp::div:
  case XOp::rem:
    // No divide unit: a reciprocal and a refinement (float), or a sequence of ~20 (integer).
    if (f64) {
      cost = 32;
      lat = 120;
    } else if (flt) {
      cost = (i.flags & k_f_approx) || (i.flags & k_f_full) ? 8 : 16;
      lat = (i.flags & k_f_approx) || (i.flags & k_f_full) ? 24 : 48;
    } else {
      cost = 20;
      lat = 64;
    }
    break;
  case XOp::rcp:
  case XOp::sqrt:
  case XOp::rsqrt:
  case XOp::sin:
  case XOp::cos:
  case XOp::lg2:
  case XOp::ex2:
  case XOp::tanh:
    // The special function unit: 16/clock. IEEE-rounded forms add a refinement sequence.
    cost = 8;
    lat = k_lat_sfu;
    if (f64) {
      cost = 32;
      lat = 100;
    } else if (!(i.flags & k_f_approx) && i.op != XOp::sin && i.op != XOp::cos &&
               i.op != XOp::lg2 && i.op != XOp::ex2 && i.op != XOp::tanh) {
      cost = 12;
      lat = 40;
    }
    break;
  case XOp::cvt:
    cost = 4; // most conversions: 16 to 64/clock
    lat = k_lat_convert;
    break;
  case XOp::popc:
  case XOp::clz:
  case XOp::bfind:
  case XOp::brev:
  case XOp::fns:
    cost = 4;
    lat = k_lat_convert;
    break;
  case XOp::shfl:
    cost = 4; // 32/clock
    lat = k_lat_shuffle;
    break;
  case XOp::match:
    cost = 8;
    lat = 2 * k_lat_shuffle;
    break;
  case XOp::redux:
    cost = 4;
    lat = k_lat_shuffle;
    break;
  case XOp::vote:
  case XOp::activemask:
  case XOp::elect:
  case XOp::bar_warp:
    break;
  case XOp::mov:
  case XOp::pack:
  case XOp::unpack:
  case XOp::cvta_to:
    // Register moves, immediates and bit casts vanish in SASS (ptxas renames and folds them);
    // reading a special register (S2R) is an instruction.
    if (i.src[0].kind != Src::Kind::sreg) {
      cost = 0;
      lat = 0;
    }
    break;
  case XOp::ld:
    if (i.mclass == k_mem_param) {
      cost = 0; // a constant-bank operand of the instruction that uses it
      lat = 0;
      break;
    }
    [[fallthrough]];
  case XOp::st:
  case XOp::cp_async:
    // The data path is charged in wavefronts; the latency is decided per access for global
    // memory (L1 hit or miss) and shared memory (bank conflicts).
    lat = i.mclass == k_mem_shared     ? k_lat_shared
          : i.mclass == k_mem_local    ? k_lat_l1
          : i.mclass == k_mem_constant ? k_lat_alu
                                       : k_lat_miss;
    break;
  case XOp::atom:
  case XOp::red:
    cost = 4;
    lat = i.mclass == k_mem_shared ? k_lat_atomic_shared : k_lat_atomic_global;
    break;
  case XOp::dp4a:
  case XOp::dp2a:
    cost = 2;
    break;
  case XOp::printf:
    // vprintf reserves its record in the FIFO with a global atomic, then writes it: charged as
    // one global atomic (the record's stores and the call's own instructions are not counted)
    cost = 4;
    lat = k_lat_atomic_global;
    break;
  default:
    if (f64) {
      cost = 2; // 64/clock
      lat = k_lat_f64;
    }
    break;
  }
  i.cost = cost;
  i.latency = lat;
}

void assign_matrix(Insn& i, const matrix::Insn& m) {
  using matrix::Elem;
  switch (m.op) {
  case matrix::Op::mma:
  case matrix::Op::wmma_mma: {
    // m8n8k4 .f16 is four 8x8x4 products, one per quad pair
    const bool quad = m.op == matrix::Op::mma && m.a == Elem::f16 && m.m == 8 && m.k == 4;
    const uint64_t ops = 2ull * m.m * m.n * m.k * (quad ? 4 : 1);
    uint32_t rate = k_mma_ops_f16;
    switch (m.a) {
    case Elem::tf32: rate = k_mma_ops_tf32; break;
    case Elem::f64: rate = k_mma_ops_f64; break;
    case Elem::s8: case Elem::u8: case Elem::e4m3: case Elem::e5m2:
    case Elem::s4: case Elem::u4:
      rate = k_mma_ops_8bit;
      break;
    case Elem::b1: rate = k_mma_ops_b1; break;
    default: break;
    }
    i.cost = uint32_t(std::max<uint64_t>(1, (ops + rate - 1) / rate));
    i.latency = k_lat_mma;
    return;
  }
  case matrix::Op::movmatrix:
    i.cost = 4;
    i.latency = k_lat_shuffle;
    return;
  case matrix::Op::ldmatrix:
  case matrix::Op::stmatrix:
    i.cost = 1;
    i.latency = k_lat_shared;
    return;
  case matrix::Op::wmma_load:
  case matrix::Op::wmma_store:
    // one load or store instruction per register of the fragment
    i.cost = std::max<uint32_t>(1, m.op == matrix::Op::wmma_load ? m.nd : m.na);
    i.latency = i.mclass == k_mem_shared ? k_lat_shared : k_lat_miss;
    return;
  }
}

Occupancy occupancy(uint32_t threads, uint32_t registers, uint32_t shared_bytes) {
  Occupancy o;
  o.warps_per_block = std::max<uint32_t>(1, (threads + 31) / 32);
  uint32_t blocks = k_max_blocks_per_sm;
  o.limit = "blocks";
  auto limit = [&](uint32_t n, const char* why) {
    if (n < blocks) {
      blocks = n;
      o.limit = why;
    }
  };
  limit(k_max_warps_per_sm / o.warps_per_block, "warps");
  const uint32_t regs = std::clamp<uint32_t>(registers, 1, k_max_registers_per_thread);
  const uint32_t regs_per_warp = (regs * 32 + k_register_unit - 1) / k_register_unit * k_register_unit;
  // Registers are split between the four schedulers: a warp's registers live in one quarter.
  const uint32_t warps_by_regs = (k_registers_per_sm / k_schedulers_per_sm / regs_per_warp) *
                                 k_schedulers_per_sm;
  limit(warps_by_regs / o.warps_per_block, "registers");
  const uint32_t smem = (shared_bytes + k_shared_unit - 1) / k_shared_unit * k_shared_unit +
                        k_shared_reserved_per_block;
  if (shared_bytes) limit(k_shared_per_sm / smem, "shared memory");
  o.blocks_per_sm = std::max<uint32_t>(1, blocks);
  // The shared-memory carveout is the smallest supported size holding the resident blocks' shared
  // memory; what is left of the 256 KB array is L1.
  static constexpr uint32_t k_carveouts_kb[] = {0, 8, 16, 32, 64, 100, 132, 164, 196, 228};
  const uint64_t need = shared_bytes ? uint64_t(o.blocks_per_sm) * smem : 0;
  uint32_t carveout = 228 * 1024;
  for (uint32_t kb : k_carveouts_kb) {
    if (uint64_t(kb) * 1024 >= need) {
      carveout = kb * 1024;
      break;
    }
  }
  o.l1_bytes_per_block = (k_l1_shared_per_sm - carveout) / o.blocks_per_sm;
  return o;
}

uint64_t SectorSet::add(const std::vector<uint64_t>& sectors, bool written) {
  uint64_t fresh = 0;
  size_t i = 0;
  while (i < sectors.size()) {
    const uint64_t page = sectors[i] >> k_page_bits;
    Shard& shard = m_shards[(page * 0x9e3779b97f4a7c15ull) >> 60];
    std::lock_guard lock(shard.mutex);
    auto& slot = shard.pages[page];
    if (!slot) slot = std::make_unique<Page>();
    uint64_t* bits = written ? slot->written : slot->read;
    for (; i < sectors.size() && (sectors[i] >> k_page_bits) == page; ++i) {
      const uint64_t s = sectors[i] & ((1u << k_page_bits) - 1);
      const uint64_t bit = 1ull << (s & 63);
      if (!(bits[s >> 6] & bit)) {
        bits[s >> 6] |= bit;
        ++fresh;
      }
    }
  }
  return fresh;
}

namespace {

constexpr uint64_t k_max_groups = 4096; // wave groups kept per SM

// max(a, b) smoothed: (a^3 + b^3)^(1/3), between a full overlap of the two (max) and none (sum):
// two resources near saturation overlap imperfectly, one far below the other costs little. Only
// +, *, / (which IEEE 754 rounds exactly) and a fixed number of Newton steps: the same result on
// every machine, unlike std::cbrt or std::pow.
uint64_t smooth_max(uint64_t a, uint64_t b) {
  const uint64_t m = std::max(a, b);
  if (m == 0) return 0;
  const double x = double(a) / double(m), y = double(b) / double(m);
  const double s = x * x * x + y * y * y; // in [1, 2]
  double r = 1.13;                        // cbrt(s) is in [1, 1.26]
  for (int i = 0; i < 8; ++i) r = (2.0 * r + s / (r * r)) / 3.0;
  return uint64_t(double(m) * r + 0.5);
}

} // namespace

LaunchModel::LaunchModel(uint64_t blocks, const Occupancy& occupancy) : m_occupancy(occupancy) {
  const uint64_t per_sm = (blocks + k_sm_count - 1) / k_sm_count;
  m_waves = std::max<uint64_t>(1, (per_sm + occupancy.blocks_per_sm - 1) / occupancy.blocks_per_sm);
  m_wave_groups = std::min(m_waves, k_max_groups);
  m_cells.resize(size_t(k_sm_count) * m_wave_groups);
}

void LaunchModel::add(uint64_t block_linear, const BlockCost& c) {
  const uint64_t sm = block_linear % k_sm_count;
  const uint64_t wave = (block_linear / k_sm_count) / m_occupancy.blocks_per_sm;
  const uint64_t group = m_wave_groups == m_waves ? wave : wave * m_wave_groups / m_waves;
  Wave& w = m_cells[size_t(sm) * m_wave_groups + group];
  w.issue += c.issue;
  w.wavefronts += c.wavefronts;
  w.path = std::max(w.path, c.path);
  m_l2_sectors += c.l2_sectors;
  m_load_sectors += c.load_sectors;
  m_load_hits += c.load_hits;
  m_dram_read += c.dram_read;
  m_dram_written += c.dram_written;
}

Breakdown LaunchModel::finish(uint32_t registers, bool from_ptxas) const {
  Breakdown b;
  b.registers = registers;
  b.registers_from_ptxas = from_ptxas;
  b.occupancy = m_occupancy;
  b.waves = m_waves;
  // Waves merged into one group (very large grids) each wait for their own slowest warp.
  const uint64_t per_group = (m_waves + m_wave_groups - 1) / m_wave_groups;
  for (uint32_t sm = 0; sm < k_sm_count; ++sm) {
    uint64_t total = 0, issue = 0, path = 0, l1 = 0;
    for (uint64_t g = 0; g < m_wave_groups; ++g) {
      const Wave& w = m_cells[size_t(sm) * m_wave_groups + g];
      const uint64_t wi = (w.issue + k_schedulers_per_sm - 1) / k_schedulers_per_sm;
      const uint64_t wp = w.path * per_group;
      total += std::max({wi, wp, w.wavefronts});
      issue += wi;
      path += wp;
      l1 += w.wavefronts;
    }
    if (total > b.sm_cycles) {
      b.sm_cycles = total;
      b.issue_cycles = issue;
      b.path_cycles = path;
      b.l1_cycles = l1;
    }
  }
  // DRAM: every distinct sector read and written once; when the launch's footprint exceeds L2,
  // the share of re-reads that no longer fits misses again.
  const uint64_t distinct = m_dram_read + m_dram_written;
  uint64_t dram_sectors = distinct;
  const uint64_t l2_load_requests = m_load_sectors - std::min(m_load_sectors, m_load_hits);
  const uint64_t l2_rereads = l2_load_requests - std::min(l2_load_requests, m_dram_read);
  const uint64_t footprint = distinct * k_sector_bytes;
  if (footprint > k_l2_bytes) {
    dram_sectors += uint64_t(double(l2_rereads) * double(footprint - k_l2_bytes) / double(footprint));
  }
  b.dram_bytes = dram_sectors * k_sector_bytes;
  b.l2_bytes = m_l2_sectors * k_sector_bytes;
  b.dram_cycles = (b.dram_bytes * 1000 + k_dram_bytes_per_kcycle - 1) / k_dram_bytes_per_kcycle;
  b.l2_cycles = (b.l2_bytes * 1000 + k_l2_bytes_per_kcycle - 1) / k_l2_bytes_per_kcycle;
  const uint64_t device = std::max(b.dram_cycles, b.l2_cycles);
  b.total_cycles = smooth_max(b.sm_cycles, device) + k_launch_cycles;
  struct Term {
    uint64_t cycles;
    const char* name;
  } terms[] = {{b.issue_cycles, "issue"}, {b.path_cycles, "latency"}, {b.l1_cycles, "L1"},
               {b.l2_cycles, "L2"},       {b.dram_cycles, "DRAM"}};
  const Term* top = &terms[0];
  for (const Term& t : terms) {
    if (t.cycles > top->cycles) top = &t;
  }
  b.bound = top->name;
  return b;
}

uint64_t cycles_to_ns(uint64_t cycles) {
  return (cycles * 1'000'000 + k_clock_khz / 2) / k_clock_khz;
}

} // namespace hone::emu::cost
