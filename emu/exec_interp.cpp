#include "emu/exec_interp.hpp"

#include "emu/exec_fill.hpp"
#include "emu/exec_printf.hpp"
#include "emu/semantics.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cfenv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <span>
#include <string_view>
#include <limits>
#include <tuple>
#include <type_traits>

#include <cuda.h>

namespace hone::emu {

namespace {

using ptx::Type;
constexpr int k_lanes = 32;
constexpr uint32_t k_slice = k_schedule_slice; // warp steps before the next warp gets a turn
constexpr uint64_t k_budget_flush = 1u << 16;
constexpr int k_barriers = 16;
constexpr uint8_t k_sync_wait = 0xff; // Warp::bar of lanes waiting for a .sync warp instruction
// Diverged lanes that loop this many times in a row while others wait give the others a turn:
// sm_70+ independent thread scheduling guarantees every thread eventually makes progress.
constexpr uint32_t k_spin_limit = 64;
constexpr uint32_t k_rotate_steps = 64;
// The cost model's per-block sector lists: compacted (sorted, distinct) from this size on; past
// k_reuse_sectors distinct sectors (8 MiB, 32 times L1) a block is charged no L1 reuse.
constexpr size_t k_compact_first = 1u << 14;
constexpr size_t k_reuse_sectors = 1u << 18;

struct Fault {
  int status;
  std::string message;
};

// Calls f(lane) for every lane in `mask`, lowest first. A full warp is a plain loop the compiler
// can unroll and vectorize.
template <class F> inline void each(uint32_t mask, F&& f) {
  if (mask == 0xffffffffu) {
    for (int l = 0; l < 32; ++l) f(l);
    return;
  }
  for (uint32_t m = mask; m; m &= m - 1) f(std::countr_zero(m));
}

constexpr uint64_t k_zero_lanes[32] = {};

inline float as_f32(uint64_t v) { return std::bit_cast<float>(uint32_t(v)); }
inline double as_f64(uint64_t v) { return std::bit_cast<double>(v); }
inline uint64_t bits(float f) { return std::bit_cast<uint32_t>(f); }
inline uint64_t bits(double d) { return std::bit_cast<uint64_t>(d); }

inline uint64_t sign_extend(uint64_t v, unsigned bits_) {
  if (bits_ >= 64) return v;
  uint64_t m = 1ull << (bits_ - 1);
  v &= (1ull << bits_) - 1;
  return (v ^ m) - m;
}

inline sem::Round round_of(uint8_t mode) {
  switch (mode) {
  case k_rnd_rz: return sem::Round::rz;
  case k_rnd_rm: return sem::Round::rm;
  case k_rnd_rp: return sem::Round::rp;
  case k_rnd_rna: return sem::Round::rna;
  default: return sem::Round::rn;
  }
}

inline sem::Cmp cmp_of(uint8_t op) { return sem::Cmp(op); }

template <class T> inline T mul_hi(T a, T b) {
  if constexpr (std::is_same_v<T, int16_t>) return sem::mul_hi_s16(a, b);
  else if constexpr (std::is_same_v<T, uint16_t>) return sem::mul_hi_u16(a, b);
  else if constexpr (std::is_same_v<T, int32_t>) return sem::mul_hi_s32(a, b);
  else if constexpr (std::is_same_v<T, uint32_t>) return sem::mul_hi_u32(a, b);
  else if constexpr (std::is_same_v<T, int64_t>) return sem::mul_hi_s64(a, b);
  else if constexpr (std::is_same_v<T, uint64_t>) return sem::mul_hi_u64(a, b);
  else return T(0); // 8-bit multiplies have no .hi form
}

inline bool is_half(Type t) {
  return t == Type::f16 || t == Type::bf16 || t == Type::f16x2 || t == Type::bf16x2;
}

// Call f with a value of the integer C++ type matching t.
template <class F> inline void with_int(Type t, F&& f) {
  switch (t) {
  case Type::s8: f(int8_t{}); break;
  case Type::u8:
  case Type::b8: f(uint8_t{}); break;
  case Type::s16: f(int16_t{}); break;
  case Type::u16:
  case Type::b16: f(uint16_t{}); break;
  case Type::s32: f(int32_t{}); break;
  case Type::s64: f(int64_t{}); break;
  case Type::u64:
  case Type::b64: f(uint64_t{}); break;
  default: f(uint32_t{}); break; // u32, b32, pred
  }
}

template <class T> inline uint64_t ubits(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return bits(v);
  } else {
    return uint64_t(std::make_unsigned_t<T>(v));
  }
}

} // namespace

struct BlockRunner::State {
  enum class Access { load, store, atomic }; // what flush_memory() charges
  struct Warp {
    uint32_t pc[k_lanes];
    uint8_t bar[k_lanes];
    uint32_t alive = 0;
    uint32_t waiting = 0;
    bool converged = true;
    uint32_t cpc = 0;
    uint64_t cycles = 0;
    uint32_t spin = 0;           // backward branches in a row while diverged
    uint32_t rotate_above = 0;   // while rotate_steps: run the lowest group above this position
    uint32_t rotate_steps = 0;
    // The cost model's timeline of this warp alone (cycles): the next issue slot, the end of the
    // straight-line region it is in (instructions in one region issue as their operands become
    // ready, as ptxas schedules them), and when its last instruction issued.
    uint64_t seq = 0;
    uint64_t region_end = 0;
    uint64_t finish = 0;
  };
  struct Barrier {
    uint32_t arrived = 0;
    uint32_t expected = 0;
    uint32_t red_true = 0;
    uint32_t red_slot = k_no_slot;
    uint8_t red_op = 0;
    uint64_t last_arrival = 0; // cost model: the latest arrival in the arriving warps' timelines
  };

  LaunchShared& L;
  const CompiledKernel& k;
  uint32_t threads;
  uint32_t nwarps;
  uint32_t shared_size;
  std::vector<uint64_t> regs;
  std::vector<uint8_t> local;
  std::vector<uint8_t> shared;
  std::vector<Warp> warps;
  std::vector<uint32_t> order; // the seeded warp order (LaunchRequest::schedule_seed)
  Barrier bars[k_barriers];
  uint32_t exited = 0;
  uint64_t block_linear = 0;
  uint32_t ctaid[3] = {0, 0, 0};
  BlockResult res;
  uint64_t unflushed = 0;
  const Allocation* last_alloc = nullptr;
  uint64_t sectors_scratch[k_lanes * 4]; // a wmma register's elements may span two sectors
  int sector_count = 0;

  // ---- cost model (emu/cost_model.hpp): what depends only on each warp's own work -------------
  std::vector<uint64_t> ready;    // [warp][slot]: the cycle each register's value is ready
  // [warp][history_sectors]: sectors it touched (tagged by block) and when their data arrives.
  struct Remembered {
    uint64_t tag = ~0ull;
    uint64_t arrives = 0;
  };
  std::vector<Remembered> history;
  std::vector<cost::HistorySlots> history_slots; // [warp]
  uint64_t history_mask = 0;
  uint64_t history_block = 0;     // tag of this block's entries (the low 20 bits of an entry)
  uint64_t time_base = 0;         // where this block's timelines start: every earlier ready time is past
  uint64_t horizon = 0;           // the latest ready time any instruction has set
  std::vector<uint64_t> block_loads;  // the block's global load sectors (distinct per instruction)
  std::vector<uint64_t> block_stores; // its stored and atomically updated sectors
  size_t loads_compact_at = k_compact_first;
  size_t stores_compact_at = k_compact_first;
  uint64_t load_requests = 0;
  uint64_t volatile_requests = 0; // of those, loads that bypass L1
  bool loads_overflowed = false;  // its distinct load sectors exceed what is kept for L1 reuse
  uint32_t shared_words[k_lanes * 4];
  int shared_count = 0;
  uint64_t local_bytes = 0;       // bytes of local memory the current instruction touched
  bool param_touched = false;
  uint16_t mem_latency = 0;       // the latency of the memory instruction just executed
  uint64_t issue_at = 0;          // when the instruction being executed issues

  // ---- the fast path's decoded form: one handler per instruction ----------------------------
  // The handler for k.code[pc]: a form specialized for its operation, type and modifiers (no
  // dispatch left to do per instruction, and lane loops the compiler can vectorize), or
  // `execute`, the general form. Both compute exactly the same values.
  using Handler = void (State::*)(const Insn&, uint32_t, uint32_t);
  std::vector<Handler> handlers;
  // The registers each instruction waits for and those it sets, for the cost model's timeline:
  // its register sources, address base, guard and carry in; its register destinations and carry
  // out.
  struct Deps {
    uint32_t at = 0; // dep_slots[at, at + nread) are read, the nwrite after them written
    uint16_t nread = 0;
    uint16_t nwrite = 0;
  };
  std::vector<Deps> deps;
  std::vector<uint32_t> dep_slots;
  const uint32_t* reads_of(const Deps& d) const { return dep_slots.data() + d.at; }
  const uint32_t* writes_of(const Deps& d) const { return dep_slots.data() + d.at + d.nread; }
  Deps deps_of(const Insn& in) {
    Deps d;
    d.at = uint32_t(dep_slots.size());
    auto read = [&](uint32_t slot) {
      dep_slots.push_back(slot);
      ++d.nread;
    };
    auto write = [&](uint32_t slot) {
      dep_slots.push_back(slot);
      ++d.nwrite;
    };
    for (const Src& s : in.src)
      if (s.kind == Src::Kind::reg) read(s.slot);
    if (in.addr.slot != k_no_slot) read(in.addr.slot);
    if (in.guard != k_no_slot) read(in.guard);
    if (k.carry_slot != k_no_slot &&
        ((in.flags & k_f_carry_in) || in.op == XOp::addc || in.op == XOp::subc))
      read(k.carry_slot);
    const MatrixOperands m = is_matrix(in.op) ? matrix_operands(k, in) : MatrixOperands{};
    for (uint32_t i = 0; i < m.nreads; ++i)
      if (m.reads[i].kind == Src::Kind::reg) read(m.reads[i].slot);
    for (const Src& s : in.dst)
      if (s.kind == Src::Kind::reg) write(s.slot);
    if ((in.flags & k_f_cc) && k.carry_slot != k_no_slot) write(k.carry_slot);
    for (uint32_t i = 0; i < m.nwrites; ++i)
      if (m.writes[i].kind == Src::Kind::reg) write(m.writes[i].slot);
    return d;
  }
  static Handler pick(const Insn& in);
  template <class SetpOf> static Handler pick_cmp(uint8_t mode);

  // ---- compiled code (emu/jit/abi.hpp) ------------------------------------------------------
  const jit::Code* code = nullptr;
  jit::Frame frame;
  jit::Helpers helpers;
  std::vector<uint32_t> tid_lanes; // per warp: tid.x, tid.y, tid.z of its 32 lanes
  std::vector<jit::MemoryCache> memory_cache; // per pc
  Fault jit_fault{0, ""};           // what the helper caught, rethrown by run_compiled()

  // Takes up to `steps` steps of warp `widx` through the compiled code, if it has an entry where
  // the warp is: the whole warp when it is converged, else the group of lanes the interpreter
  // would run next (step(): those at the lowest pc), while that group stays below the others.
  // Returns how many steps it took (0: the interpreter takes the next one).
  uint32_t run_compiled(uint32_t widx, uint32_t steps) {
    Warp& w = warps[widx];
    jit::Frame& f = frame;
    const uint32_t runnable = w.alive & ~w.waiting;
    if (w.converged) {
      if (!code->entry[w.cpc]) return 0;
      f.pc = w.cpc;
      f.active = runnable;
      f.diverged = 0;
      f.stop = ~0u;
    } else {
      if (w.rotate_steps) return 0; // the interpreter is letting higher lanes run
      uint32_t pc = UINT32_MAX;
      each(runnable, [&](int l) { pc = std::min(pc, w.pc[l]); });
      if (!code->entry[pc]) return 0;
      uint32_t group = 0, stop = ~0u;
      each(runnable, [&](int l) {
        if (w.pc[l] == pc) group |= 1u << l;
        else stop = std::min(stop, w.pc[l]);
      });
      f.pc = pc;
      f.active = group;
      f.diverged = 1;
      f.stop = stop;
    }
    f.alive = w.alive;
    f.waiting = w.waiting;
    f.regs = R(widx, 0);
    f.ready = &ready[size_t(widx) * k.num_slots];
    f.tid = &tid_lanes[size_t(widx) * 3 * k_lanes];
    f.widx = widx;
    f.steps = steps;
    f.status = 0;
    f.taken = 0;
    f.spin = w.spin;
    f.spin_limit = k_spin_limit;
    f.seq = w.seq;
    f.region_end = w.region_end;
    f.cycles = w.cycles;
    f.horizon = horizon;
    f.warp_instructions = res.warp_instructions;
    f.thread_instructions = res.thread_instructions;
    f.issue = res.cost.issue;
    f.unflushed = unflushed;
    code->run(&f);
    if (f.taken) {
      // step()'s divergent branch: its lanes go to the target, the rest to the next instruction
      diverge(w);
      each(f.active, [&](int l) { w.pc[l] = (f.taken >> l) & 1 ? f.target : f.pc; });
      w.spin = f.spin;
      try_converge(w);
      if (w.converged) w.spin = w.rotate_steps = 0;
    } else if (w.converged) {
      w.cpc = f.pc;
      // what step() does after every step of a converged warp
      if (f.steps) w.spin = w.rotate_steps = 0;
    } else {
      each(f.active, [&](int l) { w.pc[l] = f.pc; });
      w.spin = f.spin;
      // what step() does after each step of a diverged warp: only the last one can have
      // brought the group to the other lanes
      if (f.steps) {
        try_converge(w);
        if (w.converged) w.spin = w.rotate_steps = 0;
      }
    }
    w.seq = f.seq;
    w.region_end = f.region_end;
    w.cycles = f.cycles;
    horizon = f.horizon;
    res.compiled_warp_instructions += f.warp_instructions - res.warp_instructions;
    res.warp_instructions = f.warp_instructions;
    res.thread_instructions = f.thread_instructions;
    res.cost.issue = f.issue;
    unflushed = f.unflushed;
    if (f.status == jit::k_faulted) throw jit_fault;
    return f.steps;
  }

  // Helpers::execute: the instruction at `pc` through its handler, as step() runs it.
  static int64_t jit_execute(jit::Frame* f, uint32_t pc, uint32_t exec, uint64_t issue_at) {
    State& s = *static_cast<State*>(f->state);
    const Insn& in = s.k.code[pc];
    s.warps[f->widx].cycles = f->cycles; // %clock
    s.issue_at = issue_at;
    try {
      (s.*s.handlers[pc])(in, f->widx, exec);
    } catch (Fault& fault) {
      s.jit_fault = std::move(fault);
      return -1;
    } catch (const std::bad_alloc&) {
      s.jit_fault = Fault{CUDA_ERROR_OUT_OF_MEMORY, "out of host memory running " + s.k.name};
      return -1;
    } catch (...) {
      s.jit_fault = Fault{CUDA_ERROR_UNKNOWN, "internal error running " + s.k.name};
      return -1;
    }
    if ((in.op == XOp::ld || in.op == XOp::st || in.op == XOp::atom || in.op == XOp::red) &&
        s.last_alloc) {
      // the allocation this instruction's compiled code checks its next accesses against
      const Allocation* a = s.last_alloc;
      s.memory_cache[pc] = {a->base, a->base + a->size,
                            uint64_t(!a->read_only), a};
    }
    return is_memory(in.op) ? s.mem_latency : in.latency;
  }

  // Helpers::account_global and account_shared: what flush_memory() charges for the access
  // compiled code made itself, exactly as after fast_memory().
  static int64_t jit_account_global(jit::Frame* f, uint32_t pc, uint32_t count, uint64_t issue_at) {
    State& s = *static_cast<State*>(f->state);
    const Insn& in = s.k.code[pc];
    s.issue_at = issue_at;
    s.last_alloc = static_cast<const Allocation*>(s.memory_cache[pc].allocation);
    s.sector_count = int(count); // in sectors_scratch (Frame::sectors)
    s.flush_memory(in, f->widx, access_of(in));
    return s.mem_latency;
  }
  // Helpers::f32_directed and f64_directed: exec_arith's expression for one lane.
  static uint32_t jit_f32_directed(uint32_t form, uint32_t a, uint32_t b, uint32_t c) {
    const XOp op = XOp(form & 0xff);
    const sem::Round r = round_of(uint8_t(form >> 8));
    const bool ftz = (form >> 16) & 1, sat = (form >> 17) & 1;
    const float x = std::bit_cast<float>(a), y = std::bit_cast<float>(b), z = std::bit_cast<float>(c);
    float q;
    switch (op) {
    case XOp::add: return std::bit_cast<uint32_t>(sem::add_f32(x, y, r, ftz, sat));
    case XOp::sub: return std::bit_cast<uint32_t>(sem::sub_f32(x, y, r, ftz, sat));
    case XOp::mul: return std::bit_cast<uint32_t>(sem::mul_f32(x, y, r, ftz, sat));
    case XOp::fma: return std::bit_cast<uint32_t>(sem::fma_f32(x, y, z, r, ftz, sat));
    case XOp::rcp: return std::bit_cast<uint32_t>(sem::rcp_f32(x, r, ftz));
    case XOp::sqrt: return std::bit_cast<uint32_t>(sem::sqrt_f32(x, r, ftz));
    case XOp::div:
      q = sem::div_f32(x, y, r, ftz);
      if (sat) q = std::isnan(q) ? 0.0f : std::clamp(q, 0.0f, 1.0f);
      return std::bit_cast<uint32_t>(q);
    default: return 0;
    }
  }
  static uint64_t jit_f64_directed(uint32_t form, uint64_t a, uint64_t b, uint64_t c) {
    const XOp op = XOp(form & 0xff);
    const sem::Round r = round_of(uint8_t(form >> 8));
    const double x = std::bit_cast<double>(a), y = std::bit_cast<double>(b), z = std::bit_cast<double>(c);
    switch (op) {
    case XOp::add: return std::bit_cast<uint64_t>(sem::add_f64(x, y, r));
    case XOp::sub: return std::bit_cast<uint64_t>(sem::sub_f64(x, y, r));
    case XOp::mul: return std::bit_cast<uint64_t>(sem::mul_f64(x, y, r));
    case XOp::fma: return std::bit_cast<uint64_t>(sem::fma_f64(x, y, z, r));
    case XOp::div: return std::bit_cast<uint64_t>(sem::div_f64(x, y, r));
    case XOp::rcp: return std::bit_cast<uint64_t>(sem::rcp_f64(x, r));
    case XOp::sqrt: return std::bit_cast<uint64_t>(sem::sqrt_f64(x, r));
    default: return 0;
    }
  }

  static Access access_of(const Insn& in) {
    return in.op == XOp::st ? Access::store
           : in.op == XOp::atom || in.op == XOp::red ? Access::atomic
                                                      : Access::load;
  }
  static int64_t jit_account_shared(jit::Frame* f, uint32_t pc, uint32_t count, uint64_t issue_at) {
    State& s = *static_cast<State*>(f->state);
    const Insn& in = s.k.code[pc];
    s.issue_at = issue_at;
    s.shared_count = int(count); // in shared_words (Frame::words)
    s.flush_memory(in, f->widx, access_of(in));
    return s.mem_latency;
  }
  static int64_t jit_account_local(jit::Frame* f, uint32_t pc, uint32_t bytes, uint64_t issue_at) {
    State& s = *static_cast<State*>(f->state);
    s.issue_at = issue_at;
    s.local_bytes = bytes;
    s.flush_memory(s.k.code[pc], f->widx, access_of(s.k.code[pc]));
    return s.mem_latency;
  }

  explicit State(LaunchShared& launch)
      : L(launch), k(*launch.kernel), threads(uint32_t(launch.block.count())),
        nwarps((threads + k_lanes - 1) / k_lanes),
        shared_size(0) {
    uint64_t a = k.dynamic_shared_align;
    uint64_t dyn_base = (uint64_t(k.static_shared_bytes) + a - 1) / a * a;
    shared_size = uint32_t(L.dynamic_shared_bytes ? dyn_base + L.dynamic_shared_bytes
                                                  : k.static_shared_bytes);
    regs.resize(size_t(nwarps) * k.num_slots * k_lanes);
    local.resize(size_t(threads) * k.local_bytes);
    shared.resize(shared_size);
    warps.resize(nwarps);
    ready.resize(size_t(nwarps) * k.num_slots);
    history_mask = std::max<uint32_t>(1, launch.history_sectors) - 1;
    history.assign(size_t(nwarps) * (history_mask + 1), Remembered{});
    history_slots.resize(nwarps);
    handlers.reserve(k.code.size());
    deps.reserve(k.code.size());
    for (const Insn& in : k.code) {
      handlers.push_back(pick(in));
      deps.push_back(deps_of(in));
    }
    code = launch.code;
    if (code) {
      tid_lanes.resize(size_t(nwarps) * 3 * k_lanes);
      const uint32_t bx = L.block.x, by = L.block.y;
      for (uint32_t w = 0; w < nwarps; ++w) {
        uint32_t* t = &tid_lanes[size_t(w) * 3 * k_lanes];
        for (uint32_t l = 0; l < k_lanes; ++l) {
          const uint32_t i = w * k_lanes + l;
          t[l] = i % bx;
          t[k_lanes + l] = (i / bx) % by;
          t[2 * k_lanes + l] = i / (bx * by);
        }
      }
      helpers.execute = &State::jit_execute;
      helpers.account_global = &State::jit_account_global;
      helpers.account_shared = &State::jit_account_shared;
      helpers.account_local = &State::jit_account_local;
      helpers.exp2 = [](double x) { return std::exp2(x); };
      helpers.log2 = [](double x) { return std::log2(x); };
      helpers.sin = [](double x) { return std::sin(x); };
      helpers.cos = [](double x) { return std::cos(x); };
      helpers.tanh = [](double x) { return std::tanh(x); };
      helpers.f32_directed = &State::jit_f32_directed;
      helpers.f64_directed = &State::jit_f64_directed;
      memory_cache.resize(k.code.size());
      frame.memory = memory_cache.data();
      frame.shared = shared.data();
      frame.shared_size = shared_size;
      frame.local = local.data();
      frame.sectors = sectors_scratch;
      frame.words = shared_words;
      frame.state = this;
      frame.helpers = &helpers;
      frame.params = L.params;
      frame.uniform[jit::k_u_ntid_x] = L.block.x;
      frame.uniform[jit::k_u_ntid_y] = L.block.y;
      frame.uniform[jit::k_u_ntid_z] = L.block.z;
      frame.uniform[jit::k_u_nctaid_x] = L.grid.x;
      frame.uniform[jit::k_u_nctaid_y] = L.grid.y;
      frame.uniform[jit::k_u_nctaid_z] = L.grid.z;
      frame.uniform[jit::k_u_shared_size] = shared_size;
      frame.uniform[jit::k_u_dynamic_shared] = L.dynamic_shared_bytes;
      frame.uniform[jit::k_u_envreg1] = uint32_t(L.grid_workspace >> 32);
      frame.uniform[jit::k_u_envreg2] = uint32_t(L.grid_workspace);
      frame.uniform[jit::k_u_globaltimer] = L.globaltimer_ns;
    }
  }

  uint64_t* R(uint32_t warp, uint32_t slot) {
    return &regs[(size_t(warp) * k.num_slots + slot) * k_lanes];
  }

  // A block's start under a fill seed (emu/exec_fill.hpp): its shared memory, each thread's local
  // memory and the registers a thread may read before writing them (those of every lane, live or
  // not: a shuffle reads them) hold seeded values.
  void fill(uint64_t block) {
    const uint64_t seed = L.fill_seed;
    fill_bytes(fill_key(seed, block, FillSpace::shared), shared.data(), shared.size());
    for (uint32_t t = 0; k.local_bytes && t < threads; ++t) {
      fill_bytes(fill_key(seed, block, FillSpace::local, t), local.data() + size_t(t) * k.local_bytes,
                 k.local_bytes);
    }
    const uint64_t key = fill_key(seed, block, FillSpace::registers);
    for (uint32_t w = 0; w < nwarps; ++w) {
      for (uint32_t slot : k.zeroed_slots) {
        uint64_t* r = R(w, slot);
        for (uint32_t l = 0; l < k_lanes; ++l) r[l] = fill_register(key, k, slot, w * k_lanes + l);
      }
    }
  }

  // ---- faults -------------------------------------------------------------------------------

  std::string where(const Insn& in, uint32_t warp, int lane) const {
    uint32_t t = warp * k_lanes + uint32_t(lane);
    uint32_t bx = L.block.x, by = L.block.y;
    char buf[256];
    std::snprintf(buf, sizeof buf, "kernel %s, PTX line %u, block (%u,%u,%u) thread (%u,%u,%u)",
                  k.name.c_str(), in.line, ctaid[0], ctaid[1], ctaid[2], t % bx, (t / bx) % by,
                  t / (bx * by));
    return buf;
  }

  [[noreturn]] void fault(int status, const std::string& what, const Insn& in, uint32_t warp,
                          int lane) {
    throw Fault{status, what + " (" + where(in, warp, lane) + ")"};
  }

  std::string describe_global(uint64_t addr, uint32_t size) const {
    char buf[256];
    const auto& all = L.table->all();
    auto it = std::upper_bound(all.begin(), all.end(), addr,
                               [](uint64_t a, const Allocation& al) { return a < al.base; });
    if (it != all.begin()) {
      const Allocation& p = *(it - 1);
      if (addr >= p.base && addr - p.base < p.size + (1u << 20)) {
        std::snprintf(buf, sizeof buf,
                      "%u-byte access at 0x%" PRIx64 " is %" PRIu64
                      " bytes into a %" PRIu64 "-byte allocation at 0x%" PRIx64,
                      size, addr, addr - p.base, p.size, p.base);
        return buf;
      }
    }
    // Only on the fault path: the live state, not the launch's snapshot, names the likely cause.
    const char* why = memory().access(addr) ? " (mapped, but cuMemSetAccess has not granted access)"
                                            : "";
    std::snprintf(buf, sizeof buf,
                  "%u-byte access at 0x%" PRIx64 " is outside every allocation%s", size, addr,
                  why);
    return buf;
  }

  // ---- memory ---------------------------------------------------------------------------------

  uint8_t* global_ptr(uint64_t addr, uint32_t size, bool write, const Insn& in, uint32_t warp,
                      int lane) {
    const Allocation* a = last_alloc;
    if (!a || !a->contains(addr, size)) {
      a = L.table->find(addr);
      if (!a || !a->contains(addr, size)) {
        fault(CUDA_ERROR_ILLEGAL_ADDRESS, "illegal address: " + describe_global(addr, size), in,
              warp, lane);
      }
      last_alloc = a;
    }
    if (write && a->read_only) {
      fault(CUDA_ERROR_ILLEGAL_ADDRESS, "illegal address: write to a mapping with read access "
                                        "only (cuMemSetAccess): " + describe_global(addr, size),
            in, warp, lane);
    }
    return reinterpret_cast<uint8_t*>(addr);
  }

  // The host bytes an address operand designates for `lane`, checked.
  uint8_t* resolve(const Addr& a, uint32_t warp, int lane, uint32_t size, bool write,
                   const Insn& in, bool count_sector = true) {
    uint64_t addr = uint64_t(a.offset);
    if (a.slot != k_no_slot) addr += R(warp, a.slot)[lane];
    AddrSpace space = a.space;
    if (space == AddrSpace::generic) {
      uint64_t window = addr & ~(k_window_size - 1);
      if (window == k_shared_window) {
        space = AddrSpace::shared;
        addr -= k_shared_window;
      } else if (window == k_local_window) {
        space = AddrSpace::local;
        addr -= k_local_window;
      } else if (window == k_param_window) {
        space = AddrSpace::kparam;
        addr -= k_param_window;
      } else {
        space = AddrSpace::global;
      }
    }
    if (size > 1 && (addr & (size - 1)) != 0) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "misaligned address: %u-byte access at 0x%" PRIx64, size,
                    addr);
      fault(CUDA_ERROR_MISALIGNED_ADDRESS, buf, in, warp, lane);
    }
    switch (space) {
    case AddrSpace::global:
      if (count_sector) sectors_scratch[sector_count++] = addr >> 5;
      return global_ptr(addr, size, write, in, warp, lane);
    case AddrSpace::shared:
      if (addr > shared_size || size > shared_size - addr) {
        char buf[128];
        std::snprintf(buf, sizeof buf,
                      "illegal address: shared memory offset 0x%" PRIx64
                      " (%u bytes) is outside the block's %u bytes",
                      addr, size, shared_size);
        fault(CUDA_ERROR_ILLEGAL_ADDRESS, buf, in, warp, lane);
      }
      if (count_sector) {
        for (uint64_t word = addr >> 2; word <= (addr + size - 1) >> 2; ++word) {
          shared_words[shared_count++] = uint32_t(word);
        }
      }
      return shared.data() + addr;
    case AddrSpace::local: {
      if (addr > k.local_bytes || size > k.local_bytes - addr) {
        char buf[128];
        std::snprintf(buf, sizeof buf,
                      "illegal address: local memory offset 0x%" PRIx64
                      " (%u bytes) is outside the thread's %u bytes",
                      addr, size, k.local_bytes);
        fault(CUDA_ERROR_ILLEGAL_ADDRESS, buf, in, warp, lane);
      }
      uint32_t t = warp * k_lanes + uint32_t(lane);
      local_bytes += size;
      return local.data() + size_t(t) * k.local_bytes + addr;
    }
    case AddrSpace::kparam:
      if (write || addr > L.kernel->param_bytes || size > L.kernel->param_bytes - addr) {
        fault(CUDA_ERROR_ILLEGAL_ADDRESS,
              write ? "illegal address: write to kernel parameter space"
                    : "illegal address: read past the kernel parameters",
              in, warp, lane);
      }
      param_touched = true;
      return const_cast<uint8_t*>(L.params) + addr;
    case AddrSpace::generic:
      break;
    }
    return nullptr;
  }

  // The base of the allocation `sector` lies in (for the L1 history's slots): usually the one
  // the access just checked against.
  uint64_t allocation_base(uint64_t sector) const {
    const uint64_t addr = sector << 5;
    if (last_alloc && last_alloc->contains(addr, 1)) return last_alloc->base;
    const Allocation* a = L.table->find(addr);
    if (!a) a = L.table->find(addr + 31); // a registered buffer that starts inside the sector
    return a ? a->base : 0;
  }

  // Charges the memory instruction just executed by warp `widx` and sets its latency: global
  // sectors (one L1 data-path cycle per 128-byte line, L1 reuse, L2 traffic), shared-memory
  // words (one cycle per wavefront: the most distinct words any bank serves), local bytes.
  void flush_memory(const Insn& in, uint32_t widx, Access access) {
    uint16_t lat = 0;
    cost::BlockCost& c = res.cost;
    if (sector_count) {
      // lanes in address order (the common case) are sorted already
      if (!std::is_sorted(sectors_scratch, sectors_scratch + sector_count))
        std::sort(sectors_scratch, sectors_scratch + sector_count);
      const int n = int(std::unique(sectors_scratch, sectors_scratch + sector_count) -
                        sectors_scratch);
      res.memory_sectors += uint64_t(n);
      uint64_t line = ~0ull;
      for (int i = 0; i < n; ++i) {
        if ((sectors_scratch[i] >> 2) != line) {
          line = sectors_scratch[i] >> 2;
          ++c.wavefronts;
        }
      }
      if (access == Access::load) {
        load_requests += uint64_t(n);
        block_loads.insert(block_loads.end(), sectors_scratch, sectors_scratch + n);
        if (block_loads.size() >= loads_compact_at) compact_loads();
        if (in.flags & k_f_volatile) {
          // Volatile, relaxed and acquire loads are performed at L2, the point of coherence:
          // each one misses L1.
          volatile_requests += uint64_t(n);
          lat = cost::k_lat_miss;
        } else {
          // The warp waits for its slowest sector: an L1 hit if it touched it before, once the
          // data it asked for then has arrived.
          uint64_t arrives = issue_at + cost::k_lat_l1;
          Remembered* h = &history[size_t(widx) * (history_mask + 1)];
          cost::HistorySlots& slots = history_slots[widx];
          for (int i = 0; i < n; ++i) {
            const uint64_t s = sectors_scratch[i];
            const uint64_t tag = (s << 20) | history_block;
            Remembered& e = h[slots.slot(s, allocation_base(s), history_mask)];
            if (e.tag != tag) {
              e.tag = tag;
              e.arrives = issue_at + cost::k_lat_miss;
            }
            arrives = std::max(arrives, e.arrives);
          }
          lat = uint16_t(std::min<uint64_t>(arrives - issue_at, UINT16_MAX));
        }
      } else {
        c.l2_sectors += uint64_t(n);
        block_stores.insert(block_stores.end(), sectors_scratch, sectors_scratch + n);
        if (block_stores.size() >= stores_compact_at) compact_stores();
        lat = access == Access::atomic ? cost::k_lat_atomic_global : in.latency;
      }
      sector_count = 0;
    }
    if (shared_count) {
      if (!std::is_sorted(shared_words, shared_words + shared_count))
        std::sort(shared_words, shared_words + shared_count);
      const int n = int(std::unique(shared_words, shared_words + shared_count) - shared_words);
      uint32_t wavefronts = 1;
      if (uint32_t(shared_words[n - 1] - shared_words[0]) == uint32_t(n - 1)) {
        // consecutive words: each bank serves at most ceil(n / banks) of them
        wavefronts = std::max<uint32_t>(1, (uint32_t(n) + cost::k_banks - 1) / cost::k_banks);
      } else {
        uint8_t per_bank[cost::k_banks] = {};
        for (int i = 0; i < n; ++i) {
          wavefronts = std::max<uint32_t>(wavefronts, ++per_bank[shared_words[i] % cost::k_banks]);
        }
      }
      c.wavefronts += wavefronts;
      lat = std::max<uint16_t>(lat, access == Access::atomic
                                        ? cost::k_lat_atomic_shared
                                        : uint16_t(cost::k_lat_shared +
                                                   cost::k_lat_shared_wavefront * (wavefronts - 1)));
      shared_count = 0;
    }
    if (local_bytes) {
      c.wavefronts += (local_bytes + 127) / 128;
      lat = std::max(lat, cost::k_lat_l1);
      local_bytes = 0;
    }
    if (param_touched) {
      lat = std::max(lat, cost::k_lat_alu);
      param_touched = false;
    }
    mem_latency = lat ? lat : in.latency;
  }

  // Keeps the block's sector lists distinct as they grow. Loads past k_reuse_sectors distinct
  // sectors (far more than L1 holds) go to the launch's set at once, and the block is charged no
  // L1 reuse: whether that happens depends on the set alone, never on the order of accesses.
  void compact_loads() {
    std::sort(block_loads.begin(), block_loads.end());
    block_loads.erase(std::unique(block_loads.begin(), block_loads.end()), block_loads.end());
    if (block_loads.size() > k_reuse_sectors) {
      loads_overflowed = true;
      res.cost.dram_read += L.sectors->add(block_loads, false);
      block_loads.clear();
    }
    loads_compact_at = std::max(k_compact_first, block_loads.size() * 2);
  }

  void compact_stores() {
    std::sort(block_stores.begin(), block_stores.end());
    block_stores.erase(std::unique(block_stores.begin(), block_stores.end()), block_stores.end());
    if (block_stores.size() > k_reuse_sectors) {
      res.cost.dram_written += L.sectors->add(block_stores, true);
      block_stores.clear();
    }
    stores_compact_at = std::max(k_compact_first, block_stores.size() * 2);
  }

  // At the end of a block: L1 reuse (loads of sectors the block already brought in, as far as
  // its share of L1 holds them), first touches of the launch, and the block's longest path.
  void finish_cost() {
    cost::BlockCost& c = res.cost;
    compact_loads();
    compact_stores();
    const uint64_t distinct = block_loads.size();
    const uint64_t cached = load_requests - volatile_requests;
    uint64_t hits = loads_overflowed || cached < distinct ? 0 : cached - distinct;
    const uint64_t footprint = distinct * cost::k_sector_bytes;
    if (hits && footprint > L.l1_bytes_per_block) {
      hits = uint64_t((unsigned __int128)hits * L.l1_bytes_per_block / footprint);
    }
    c.load_sectors = load_requests;
    c.load_hits = hits;
    c.l2_sectors += load_requests - hits;
    c.dram_read += L.sectors->add(block_loads, false);
    c.dram_written += L.sectors->add(block_stores, true);
    uint64_t end = time_base;
    for (const Warp& w : warps) end = std::max({end, w.finish, w.region_end});
    c.path = end - time_base;
    // The next block on this runner starts past every ready time set so far, so that none of
    // this block's registers (a load whose value was never used) can delay it.
    time_base = std::max(end, horizon) + 1;
  }

  static uint64_t load_bytes(const uint8_t* p, uint32_t size, bool atomic_) {
    uint64_t v = 0;
    if (atomic_) {
      switch (size) {
      case 1: return __atomic_load_n(p, __ATOMIC_RELAXED);
      case 2: return __atomic_load_n(reinterpret_cast<const uint16_t*>(p), __ATOMIC_RELAXED);
      case 4: return __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_RELAXED);
      case 8: return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
      default: break;
      }
    }
    std::memcpy(&v, p, size);
    return v;
  }

  static void store_bytes(uint8_t* p, uint32_t size, uint64_t v, bool atomic_) {
    if (atomic_) {
      switch (size) {
      case 1: __atomic_store_n(p, uint8_t(v), __ATOMIC_RELAXED); return;
      case 2: __atomic_store_n(reinterpret_cast<uint16_t*>(p), uint16_t(v), __ATOMIC_RELAXED); return;
      case 4: __atomic_store_n(reinterpret_cast<uint32_t*>(p), uint32_t(v), __ATOMIC_RELAXED); return;
      case 8: __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELAXED); return;
      default: break;
      }
    }
    std::memcpy(p, &v, size);
  }

  // ---- registers --------------------------------------------------------------------------------

  uint64_t globaltimer(uint32_t warp) const {
    return L.globaltimer_ns + warps[warp].cycles * 1'000'000 / DeviceLimits::k_clock_khz;
  }

  uint64_t sreg(Sreg s, uint32_t warp, int lane) const {
    uint32_t t = warp * k_lanes + uint32_t(lane);
    uint32_t bx = L.block.x, by = L.block.y;
    switch (s) {
    case Sreg::tid_x: return t % bx;
    case Sreg::tid_y: return (t / bx) % by;
    case Sreg::tid_z: return t / (bx * by);
    case Sreg::ntid_x: return L.block.x;
    case Sreg::ntid_y: return L.block.y;
    case Sreg::ntid_z: return L.block.z;
    case Sreg::ctaid_x: return ctaid[0];
    case Sreg::ctaid_y: return ctaid[1];
    case Sreg::ctaid_z: return ctaid[2];
    case Sreg::nctaid_x: return L.grid.x;
    case Sreg::nctaid_y: return L.grid.y;
    case Sreg::nctaid_z: return L.grid.z;
    case Sreg::laneid: return uint32_t(lane);
    case Sreg::warpid: return warp;
    case Sreg::nwarpid: return 64;
    case Sreg::smid: return uint32_t(block_linear % DeviceLimits::k_sm_count);
    case Sreg::nsmid: return DeviceLimits::k_sm_count;
    case Sreg::gridid: return 1;
    case Sreg::lanemask_eq: return 1u << lane;
    case Sreg::lanemask_le: return lane == 31 ? 0xffffffffu : (2u << lane) - 1;
    case Sreg::lanemask_lt: return (1u << lane) - 1;
    case Sreg::lanemask_ge: return ~((1u << lane) - 1);
    case Sreg::lanemask_gt: return lane == 31 ? 0 : ~((2u << lane) - 1);
    case Sreg::clock: return uint32_t(warps[warp].cycles);
    case Sreg::clock_hi: return uint32_t(warps[warp].cycles >> 32);
    case Sreg::clock64: return warps[warp].cycles;
    // A global nanosecond clock (PTX ISA, "Special Registers: %globaltimer"): the launch's start
    // (LaunchRequest::globaltimer_ns) plus the warp's modeled cycles in ns.
    case Sreg::globaltimer: return globaltimer(warp);
    case Sreg::globaltimer_lo: return uint32_t(globaltimer(warp));
    case Sreg::globaltimer_hi: return uint32_t(globaltimer(warp) >> 32);
    case Sreg::total_smem_size:
    case Sreg::aggr_smem_size: return shared_size;
    case Sreg::dynamic_smem_size: return L.dynamic_shared_bytes;
    case Sreg::envreg1: return uint32_t(L.grid_workspace >> 32);
    case Sreg::envreg2: return uint32_t(L.grid_workspace);
    case Sreg::zero: return 0;
    case Sreg::one: return 1;
    }
    return 0;
  }

  uint64_t rd(const Src& s, uint32_t warp, int lane) {
    uint64_t v = 0;
    switch (s.kind) {
    case Src::Kind::reg: v = R(warp, s.slot)[lane]; break;
    case Src::Kind::imm: v = s.imm; break;
    case Src::Kind::sreg: v = sreg(s.sreg, warp, lane); break;
    case Src::Kind::none: break;
    }
    return s.negate ? uint64_t(v == 0) : v;
  }

  // A source's 32 lanes as an array, read once per instruction instead of once per lane: the
  // register itself, or `tmp` filled with the immediate, special register or negated predicate
  // (lanes outside `exec` are left unset for special registers).
  const uint64_t* lanes(const Src& s, uint32_t warp, uint32_t exec, uint64_t* tmp) {
    switch (s.kind) {
    case Src::Kind::reg: {
      const uint64_t* r = R(warp, s.slot);
      if (!s.negate) return r;
      for (int l = 0; l < k_lanes; ++l) tmp[l] = r[l] == 0;
      return tmp;
    }
    case Src::Kind::imm: {
      const uint64_t v = s.negate ? uint64_t(s.imm == 0) : s.imm;
      for (int l = 0; l < k_lanes; ++l) tmp[l] = v;
      return tmp;
    }
    case Src::Kind::sreg:
      if (!s.negate) {
        switch (s.sreg) {
        case Sreg::tid_x:
          if (L.block.y == 1 && L.block.z == 1) { // a 1D block: thread index = lane position
            for (int l = 0; l < k_lanes; ++l) tmp[l] = uint64_t(warp * k_lanes + uint32_t(l));
            return tmp;
          }
          break;
        case Sreg::ntid_x: case Sreg::ntid_y: case Sreg::ntid_z:
        case Sreg::ctaid_x: case Sreg::ctaid_y: case Sreg::ctaid_z:
        case Sreg::nctaid_x: case Sreg::nctaid_y: case Sreg::nctaid_z: {
          const uint64_t v = sreg(s.sreg, warp, 0); // the same in every lane
          for (int l = 0; l < k_lanes; ++l) tmp[l] = v;
          return tmp;
        }
        default:
          break;
        }
      }
      each(exec, [&](int l) {
        const uint64_t v = sreg(s.sreg, warp, l);
        tmp[l] = s.negate ? uint64_t(v == 0) : v;
      });
      return tmp;
    case Src::Kind::none:
      break;
    }
    if (!s.negate) return k_zero_lanes;
    for (int l = 0; l < k_lanes; ++l) tmp[l] = 1;
    return tmp;
  }

  // A destination's lanes and the mask of its register's width (`sink` when it is not a
  // register).
  std::pair<uint64_t*, uint64_t> dest(const Src& d, uint32_t warp, uint64_t* sink) {
    if (d.kind != Src::Kind::reg) return {sink, ~0ull};
    const uint8_t w = k.slot_bytes[d.slot];
    return {R(warp, d.slot), w < 8 ? (1ull << (w * 8)) - 1 : ~0ull};
  }

  // An instruction's sources as lane arrays, and its first destination (dest()).
  struct Operands {
    const uint64_t* src[4];
    uint64_t* dst;
    uint64_t dst_mask;
    uint64_t tmp[4][k_lanes];
    uint64_t sink[k_lanes];
  };
  void operands(const Insn& in, uint32_t warp, uint32_t exec, Operands& o) {
    for (int i = 0; i < 4; ++i) o.src[i] = lanes(in.src[i], warp, exec, o.tmp[i]);
    std::tie(o.dst, o.dst_mask) = dest(in.dst[0], warp, o.sink);
  }

  void wr(const Src& d, uint32_t warp, int lane, uint64_t v) {
    if (d.kind != Src::Kind::reg) return;
    uint8_t w = k.slot_bytes[d.slot];
    if (w < 8) v &= (1ull << (w * 8)) - 1;
    R(warp, d.slot)[lane] = v;
  }

  // ---- barriers -------------------------------------------------------------------------------

  void release(int b) {
    Barrier& br = bars[b];
    uint32_t result = br.red_op == k_bool_popc  ? br.red_true
                      : br.red_op == k_bool_and ? uint32_t(br.red_true == br.arrived)
                                                : uint32_t(br.red_true > 0);
    for (uint32_t w = 0; w < nwarps; ++w) {
      Warp& wp = warps[w];
      uint32_t m = 0;
      each(wp.waiting, [&](int l) {
        m |= uint32_t(wp.bar[l] == b) << l;
      });
      if (!m) continue;
      const uint64_t go = std::max({wp.seq, wp.region_end, br.last_arrival + cost::k_lat_barrier});
      wp.seq = wp.region_end = go;
      horizon = std::max(horizon, go);
      if (br.red_slot != k_no_slot) {
        Src d;
        d.kind = Src::Kind::reg;
        d.slot = br.red_slot;
        each(m, [&](int l) { wr(d, w, l, result); });
        ready[size_t(w) * k.num_slots + br.red_slot] = go;
      }
      wp.waiting &= ~m;
    }
    br = Barrier{};
  }

  void check_barriers() {
    for (int b = 0; b < k_barriers; ++b) {
      if (bars[b].arrived && bars[b].arrived + exited >= bars[b].expected) release(b);
    }
  }

  // ---- execution --------------------------------------------------------------------------------

  void diverge(Warp& w) {
    if (!w.converged) return;
    each(w.alive, [&](int l) { w.pc[l] = w.cpc; });
    w.converged = false;
  }

  void try_converge(Warp& w) {
    if (w.converged || !w.alive) return;
    if (w.waiting && w.waiting != w.alive) return;
    int first = std::countr_zero(w.alive);
    uint32_t pc = w.pc[first];
    bool same = true;
    each(w.alive, [&](int l) { same = same && w.pc[l] == pc; });
    if (same) {
      w.converged = true;
      w.cpc = pc;
    }
  }

  void advance(Warp& w, uint32_t lanes, uint32_t to) {
    if (w.converged) {
      if (lanes == (w.alive & ~w.waiting) && !(w.waiting & lanes)) {
        w.cpc = to;
        return;
      }
      diverge(w);
    }
    each(lanes, [&](int l) { w.pc[l] = to; });
  }

  void step(uint32_t widx) {
    Warp& w = warps[widx];
    uint32_t runnable = w.alive & ~w.waiting;
    uint32_t pc, active;
    if (w.converged) {
      pc = w.cpc;
      active = runnable;
    } else {
      pc = UINT32_MAX;
      if (w.rotate_steps) {
        --w.rotate_steps;
        each(runnable, [&](int l) {
          if (w.pc[l] > w.rotate_above) pc = std::min(pc, w.pc[l]);
        });
        if (pc == UINT32_MAX) w.rotate_steps = 0;
      }
      if (pc == UINT32_MAX) each(runnable, [&](int l) { pc = std::min(pc, w.pc[l]); });
      active = 0;
      each(runnable, [&](int l) { active |= uint32_t(w.pc[l] == pc) << l; });
    }
    const Insn& in = k.code[pc];
    uint32_t exec = active;
    if (in.guard != k_no_slot) {
      const uint64_t* g = R(widx, in.guard);
      uint32_t m = 0;
      each(active, [&](int l) {
        m |= uint32_t((g[l] != 0) != in.guard_negated) << l;
      });
      exec = m;
    }
    // A matrix instruction needs all 32 lanes (.aligned): with a lane gone or predicated off it
    // runs at once, and exec_matrix fails the launch; other lanes of the warp are waited for.
    const bool whole_warp_missing =
        is_matrix(in.op) && (w.alive != 0xffffffffu || (active & ~exec) != 0);
    if (exec && is_warp_sync(in.op) && !whole_warp_missing) {
      exec = sync_arrive(in, widx, exec, active, pc);
      if (!exec) return; // waits for the rest of its membermask
    }
    // (a full warp is the common case; std::popcount is a library call on baseline x86-64)
    uint32_t n = exec == 0xffffffffu ? 32u : uint32_t(std::popcount(exec));
    res.warp_instructions += 1;
    res.thread_instructions += n;
    res.cost.issue += in.cost;
    w.cycles += in.cost;
    unflushed += n;
    issue_at = issue_time(deps[pc], widx, w);

    switch (in.op) {
    case XOp::bra:
      if (!w.converged && exec && in.target <= pc) note_backward(w, pc);
      if (exec == active) {
        advance(w, active, in.target);
      } else {
        if (exec) {
          diverge(w);
          each(exec, [&](int l) { w.pc[l] = in.target; });
        }
        advance(w, active & ~exec, pc + 1);
      }
      break;
    case XOp::exit:
      if (exec) {
        w.alive &= ~exec;
        exited += n;
        advance(w, active & ~exec, pc + 1);
        if (w.waiting) wake_sync_waiters(w);
        check_barriers();
      } else {
        advance(w, active, pc + 1);
      }
      break;
    case XOp::bar:
    case XOp::bar_red:
      if (exec) arrive(in, widx, exec, active, pc);
      else advance(w, active, pc + 1);
      break;
    default:
      if (exec) (this->*handlers[pc])(in, widx, exec);
      advance(w, active | exec, pc + 1);
      break;
    }
    retire(in, widx, w, exec);
    if (!w.converged) try_converge(w);
    if (w.converged) w.spin = w.rotate_steps = 0;
  }

  // ---- cost model: the warp's own timeline ------------------------------------------------------

  // The earliest cycle `in` can issue: its slot in the warp's order, and every register it reads
  // ready. Instructions of one straight-line region may issue out of order, as ptxas would
  // schedule them; a branch, an exit or a barrier ends the region.
  uint64_t issue_time(const Deps& d, uint32_t widx, const Warp& w) const {
    const uint64_t* r = &ready[size_t(widx) * k.num_slots];
    uint64_t t = w.seq;
    const uint32_t* read = reads_of(d);
    for (uint32_t i = 0; i < d.nread; ++i) t = std::max(t, r[read[i]]);
    return t;
  }

  static bool is_memory(XOp op) {
    return op == XOp::ld || op == XOp::st || op == XOp::atom || op == XOp::red ||
           op == XOp::cp_async || op == XOp::ldmatrix || op == XOp::stmatrix ||
           op == XOp::wmma_load || op == XOp::wmma_store;
  }

  void retire(const Insn& in, uint32_t widx, Warp& w, uint32_t exec) {
    const uint64_t t = issue_at;
    // A barrier's own cost is in its arrival time (arrive()); the release sets where its warps
    // go on, whichever of them arrived last.
    const bool barrier = in.op == XOp::bar || in.op == XOp::bar_red;
    if (!barrier || !exec) w.seq += in.cost;
    w.region_end = std::max(w.region_end, barrier && exec ? w.seq : t + 1);
    if (exec) {
      uint64_t* r = &ready[size_t(widx) * k.num_slots];
      const uint64_t done = t + (is_memory(in.op) ? mem_latency : in.latency);
      horizon = std::max(horizon, done);
      const Deps& d = deps[size_t(&in - k.code.data())];
      const uint32_t* written = writes_of(d);
      for (uint32_t i = 0; i < d.nwrite; ++i) r[written[i]] = done;
    }
    if (in.op == XOp::bra || in.op == XOp::exit) {
      const uint64_t start = std::max(w.region_end, w.seq);
      w.seq = w.region_end = start;
      if (in.op == XOp::exit && exec) w.finish = std::max(w.finish, start);
    }
  }

  static bool is_warp_sync(XOp op) {
    return op == XOp::shfl || op == XOp::vote || op == XOp::match || op == XOp::redux ||
           op == XOp::bar_warp || op == XOp::elect || is_matrix(op);
  }

  void note_backward(Warp& w, uint32_t pc) {
    if (++w.spin < k_spin_limit) return;
    w.spin = 0;
    w.rotate_above = pc;
    w.rotate_steps = k_rotate_steps;
  }

  // The operand holding a warp-synchronous instruction's membermask.
  static const Src& member_mask(const Insn& in) {
    return in.op == XOp::bar_warp || in.op == XOp::elect ? in.src[0]
           : in.op == XOp::shfl                           ? in.src[3]
                                                          : in.src[1];
  }

  // A .sync warp instruction runs for a lane once every live lane of that lane's membermask is at
  // it (PTX ISA 9.7.8.x, shfl.sync/vote.sync/match.sync/redux.sync/bar.warp.sync/elect.sync: "the
  // executing thread waits until all non-exited threads corresponding to membermask have executed
  // [it] with the same qualifiers and same membermask value"). Lanes at one position may carry
  // different membermasks (cg::labeled_partition: one per partition); each lane goes when its own
  // members are all here, the others wait. Returns the lanes that execute now (0: all wait) and
  // takes the waiting ones out of `active`, so that step() does not move them on.
  uint32_t sync_arrive(const Insn& in, uint32_t widx, uint32_t exec, uint32_t& active, uint32_t pc) {
    Warp& w = warps[widx];
    const Src& mask_src = member_mask(in);
    uint32_t here = 0;
    if (!w.converged) {
      each(w.waiting, [&](int l) {
        if (w.bar[l] == k_sync_wait && w.pc[l] == pc) here |= 1u << l;
      });
    }
    const uint32_t arrived = exec | here;
    uint32_t go = 0;
    if (is_matrix(in.op) || mask_src.kind != Src::Kind::reg) {
      // .sync.aligned matrix instructions wait for the whole warp (exec_matrix refuses a warp
      // that is not whole when they run)
      const uint32_t need =
          (is_matrix(in.op) ? 0xffffffffu : uint32_t(rd(mask_src, widx, 0))) & w.alive;
      go = need & ~arrived ? 0 : arrived;
    } else {
      const uint64_t* m = R(widx, mask_src.slot);
      each(arrived, [&](int l) {
        if (!(uint32_t(m[l]) & w.alive & ~arrived)) go |= 1u << l;
      });
    }
    const uint32_t wait = exec & ~go;
    if (wait) {
      // wait at this instruction; lanes whose guard is false move on
      diverge(w);
      w.waiting |= wait;
      each(wait, [&](int l) {
        w.bar[l] = k_sync_wait;
        w.pc[l] = pc;
      });
      active &= ~wait;
      if (!go) {
        each(active, [&](int l) { w.pc[l] = pc + 1; });
        return 0;
      }
    }
    w.waiting &= ~(here & go);
    return go;
  }

  // Lanes that exited may be all that lanes waiting at a .sync warp instruction waited for: those
  // arrive again (their position is still the instruction), and go if nothing else is missing.
  void wake_sync_waiters(Warp& w) {
    uint32_t sync_waiting = 0;
    each(w.waiting & w.alive, [&](int l) { sync_waiting |= uint32_t(w.bar[l] == k_sync_wait) << l; });
    w.waiting &= ~sync_waiting;
  }

  void arrive(const Insn& in, uint32_t widx, uint32_t exec, uint32_t active, uint32_t pc) {
    Warp& w = warps[widx];
    int first = std::countr_zero(exec);
    bool red = in.op == XOp::bar_red;
    uint64_t id = rd(in.src[red ? 0 : 0], widx, first);
    if (red) id = rd(in.src[0], widx, first);
    if (id >= k_barriers) fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, "barrier id out of range", in, widx, first);
    uint32_t expected = threads;
    uint8_t count_src = red ? (in.nsrc == 3 ? 1 : 0xff) : (in.nsrc == 2 ? 1 : 0xff);
    if (count_src != 0xff) expected = uint32_t(rd(in.src[count_src], widx, first));
    Barrier& b = bars[id];
    if (b.arrived == 0) b.expected = expected;
    // The arriving lanes wait; the rest of the warp moves on past the barrier too.
    w.waiting |= exec;
    each(exec, [&](int l) { w.bar[l] = uint8_t(id); });
    b.arrived += uint32_t(std::popcount(exec));
    b.last_arrival = std::max({b.last_arrival, w.region_end, w.seq + in.cost, issue_at + 1});
    if (red) {
      b.red_op = in.mode2;
      b.red_slot = in.dst[0].slot;
      const Src& p = in.src[in.nsrc - 1];
      each(exec, [&](int l) { b.red_true += rd(p, widx, l) != 0; });
    }
    if (w.converged && exec != active) diverge(w);
    if (w.converged) {
      w.cpc = pc + 1;
    } else {
      each(active, [&](int l) { w.pc[l] = pc + 1; });
    }
    if (b.arrived + exited >= b.expected) release(int(id));
  }

  bool run_block() {
    for (uint32_t wi = 0; wi < nwarps; ++wi) {
      Warp& w = warps[wi];
      uint32_t lanes = std::min<uint32_t>(k_lanes, threads - wi * k_lanes);
      w.alive = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
      w.waiting = 0;
      w.converged = true;
      w.cpc = 0;
      w.cycles = 0;
      w.seq = w.region_end = w.finish = time_base;
    }
    exited = 0;
    for (auto& b : bars) b = Barrier{};
    // The schedule: warps take turns in index order, k_slice steps each, unless a seed varies it
    // (LaunchRequest::schedule_seed): then a seeded permutation of the warps, started at a seeded
    // rotation each round, with turns of k_slice/8 to k_slice steps or, one in four, until the
    // warp waits (seeded_slice). Which warp runs when never
    // changes what a race-free block computes, nor its cost (sums over the instructions each warp
    // executes, each warp's own timeline, sets of sectors; only a warp that spins executes more or
    // less).
    uint64_t rng = 0;
    const bool varied = L.schedule_seed != 0;
    if (varied) {
      rng = schedule_mix(L.schedule_seed ^ schedule_mix(block_linear));
      order.resize(nwarps);
      for (uint32_t i = 0; i < nwarps; ++i) order[i] = i;
      for (uint32_t i = nwarps; i > 1; --i) std::swap(order[i - 1], order[next_random(rng) % i]);
    }
    uint32_t done_warps = 0;
    while (true) {
      bool ran = false;
      done_warps = 0;
      const uint32_t first = varied ? uint32_t(next_random(rng) % nwarps) : 0;
      for (uint32_t turn = 0; turn < nwarps; ++turn) {
        uint32_t wi = turn;
        uint32_t slice = k_slice;
        if (varied) {
          wi = order[(first + turn) % nwarps];
          slice = seeded_slice(next_random(rng));
        }
        Warp& w = warps[wi];
        if (!w.alive) {
          ++done_warps;
          continue;
        }
        for (uint32_t s = 0; s < slice && (w.alive & ~w.waiting);) {
          ran = true;
          if (code) {
            const uint32_t took = run_compiled(wi, slice - s);
            s += took;
            if (took) continue;
          }
          step(wi);
          ++s;
        }
        if (unflushed >= k_budget_flush) flush_budget();
      }
      if (done_warps == nwarps) return true;
      if (!ran) return false; // every live thread waits at a barrier no one else will reach
    }
  }

  static uint64_t next_random(uint64_t& state) {
    state += 0x9e3779b97f4a7c15ull;
    return schedule_mix(state);
  }

  void flush_budget() {
    uint64_t total = L.instructions.fetch_add(unflushed, std::memory_order_relaxed) + unflushed;
    unflushed = 0;
    if (total > L.instruction_budget) {
      throw Fault{CUDA_ERROR_LAUNCH_TIMEOUT,
                  "launch timeout: kernel " + k.name + " executed more than " +
                      std::to_string(L.instruction_budget) +
                      " thread-instructions (HONE_EMU_INSTRUCTION_BUDGET)"};
    }
    if (L.abort.load(std::memory_order_relaxed)) throw Fault{0, ""};
  }

  void execute(const Insn& in, uint32_t widx, uint32_t exec);

  // d = f(a, b) on every lane of exec, the operands as 64-bit lane values.
  template <class F> void fast2(const Insn& in, uint32_t widx, uint32_t exec) {
    uint64_t ta[k_lanes], tb[k_lanes], sink[k_lanes];
    const uint64_t* a = lanes(in.src[0], widx, exec, ta);
    const uint64_t* b = lanes(in.src[1], widx, exec, tb);
    auto [d, m] = dest(in.dst[0], widx, sink);
    each(exec, [&](int l) { d[l] = F::apply(a[l], b[l]) & m; });
  }
  template <class F> void fast3(const Insn& in, uint32_t widx, uint32_t exec) {
    uint64_t ta[k_lanes], tb[k_lanes], tc[k_lanes], sink[k_lanes];
    const uint64_t* a = lanes(in.src[0], widx, exec, ta);
    const uint64_t* b = lanes(in.src[1], widx, exec, tb);
    const uint64_t* c = lanes(in.src[2], widx, exec, tc);
    auto [d, m] = dest(in.dst[0], widx, sink);
    each(exec, [&](int l) { d[l] = F::apply(a[l], b[l], c[l]) & m; });
  }
  void fast_mov(const Insn& in, uint32_t widx, uint32_t exec) {
    uint64_t ta[k_lanes], sink[k_lanes];
    const uint64_t* a = lanes(in.src[0], widx, exec, ta);
    auto [d, m] = dest(in.dst[0], widx, sink);
    each(exec, [&](int l) { d[l] = a[l] & m; });
  }
  // setp with no boolean operand: p = compare(a, b), and q = !p when there is a second
  // destination.
  template <class F> void fast_setp(const Insn& in, uint32_t widx, uint32_t exec) {
    uint64_t ta[k_lanes], tb[k_lanes], sink[k_lanes], sink2[k_lanes];
    const uint64_t* a = lanes(in.src[0], widx, exec, ta);
    const uint64_t* b = lanes(in.src[1], widx, exec, tb);
    auto [p, pm] = dest(in.dst[0], widx, sink);
    if (in.ndst == 2) {
      auto [q, qm] = dest(in.dst[1], widx, sink2);
      each(exec, [&](int l) {
        const bool c = F::apply(a[l], b[l]);
        p[l] = uint64_t(c) & pm;
        q[l] = uint64_t(!c) & qm;
      });
    } else {
      each(exec, [&](int l) { p[l] = uint64_t(F::apply(a[l], b[l])) & pm; });
    }
  }
  // cvta and cvta.to of the global window (mode 0) with a .u32 result: the address's low half.
  // (A 64-bit one is the address itself: fast_mov.)
  void fast_cvta_narrow(const Insn& in, uint32_t widx, uint32_t exec) {
    uint64_t ta[k_lanes], sink[k_lanes];
    const uint64_t* a = lanes(in.src[0], widx, exec, ta);
    auto [d, m] = dest(in.dst[0], widx, sink);
    each(exec, [&](int l) { d[l] = uint64_t(uint32_t(a[l])) & m; });
  }

  // Calls f(group, lanes) for each distinct group among the lanes of `exec` that execute a
  // warp-synchronous instruction together: a lane's group is its own membermask's lanes among
  // them, which is whom its vote, match, reduction or election is over; `lanes` are the lanes of
  // that group value. One call when every lane names the same membermask.
  template <class F> void for_groups(const Insn& in, uint32_t widx, uint32_t exec, F&& f) {
    const Src& ms = member_mask(in);
    if (ms.kind != Src::Kind::reg) {
      f(uint32_t(rd(ms, widx, 0)) & exec, exec);
      return;
    }
    const uint64_t* m = R(widx, ms.slot);
    for (uint32_t left = exec; left;) {
      const uint32_t group = uint32_t(m[std::countr_zero(left)]) & exec;
      uint32_t lanes = 0;
      each(left, [&](int l) { lanes |= uint32_t((uint32_t(m[l]) & exec) == group) << l; });
      f(group, lanes);
      left &= ~lanes;
    }
  }

  void exec_printf(const Insn& in, uint32_t widx, uint32_t exec);
  // The bytes from generic address `addr` to the end of the memory holding it (an allocation, the
  // block's shared memory, the lane's local frame), checked as an access of one byte; empty for 0.
  std::span<const uint8_t> bytes_from(uint64_t addr, uint32_t widx, int lane, const Insn& in);

  void exec_arith(const Insn& in, uint32_t widx, uint32_t exec);
  void exec_half(const Insn& in, uint32_t widx, uint32_t exec);
  void exec_memory(const Insn& in, uint32_t widx, uint32_t exec);
  bool fast_memory(const Insn& in, uint32_t widx, uint32_t exec);
  void exec_atomic(const Insn& in, uint32_t widx, uint32_t exec);
  void exec_warp(const Insn& in, uint32_t widx, uint32_t exec);
  void exec_matrix(const Insn& in, uint32_t widx, uint32_t exec);
  uint8_t* matrix_row(const Insn& in, uint32_t widx, int lane, bool write);
  void exec_convert(const Insn& in, uint32_t widx, uint32_t exec);
};

void BlockRunner::State::execute(const Insn& in, uint32_t widx, uint32_t exec) {
  switch (in.op) {
  case XOp::nop:
    return;
  case XOp::ld:
  case XOp::st:
  case XOp::cp_async:
    return exec_memory(in, widx, exec);
  case XOp::atom:
  case XOp::red:
    return exec_atomic(in, widx, exec);
  case XOp::shfl:
  case XOp::vote:
  case XOp::match:
  case XOp::activemask:
  case XOp::redux:
  case XOp::bar_warp:
  case XOp::elect:
    return exec_warp(in, widx, exec);
  case XOp::cvt:
  case XOp::cvta:
  case XOp::cvta_to:
  case XOp::isspacep:
    return exec_convert(in, widx, exec);
  case XOp::mma:
  case XOp::ldmatrix:
  case XOp::stmatrix:
  case XOp::movmatrix:
  case XOp::wmma_load:
  case XOp::wmma_store:
    return exec_matrix(in, widx, exec);
  case XOp::bar_arrive: {
    int first = std::countr_zero(exec);
    uint64_t id = rd(in.src[0], widx, first);
    if (id >= k_barriers) fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, "barrier id out of range", in, widx, first);
    Barrier& b = bars[id];
    if (b.arrived == 0) b.expected = in.nsrc == 2 ? uint32_t(rd(in.src[1], widx, first)) : threads;
    b.arrived += uint32_t(std::popcount(exec));
    if (b.arrived + exited >= b.expected) release(int(id));
    return;
  }
  case XOp::printf:
    return exec_printf(in, widx, exec);
  case XOp::fns:
    each(exec, [&](int l) {
      wr(in.dst[0], widx, l,
         sem::fns(uint32_t(rd(in.src[0], widx, l)), uint32_t(rd(in.src[1], widx, l)),
                  int32_t(uint32_t(rd(in.src[2], widx, l)))));
    });
    return;
  case XOp::trap:
    fault(CUDA_ERROR_LAUNCH_FAILED, "trap instruction executed", in, widx, std::countr_zero(exec));
  default:
    break;
  }
  if (is_half(in.type) && in.op != XOp::mov && in.op != XOp::pack && in.op != XOp::unpack &&
      in.op != XOp::selp && in.op != XOp::and_ && in.op != XOp::or_ && in.op != XOp::xor_ &&
      in.op != XOp::not_) {
    return exec_half(in, widx, exec);
  }
  exec_arith(in, widx, exec);
}

void BlockRunner::State::exec_arith(const Insn& in, uint32_t widx, uint32_t exec) {
  const Type t = in.type;
  const bool ftz = in.flags & k_f_ftz;
  const bool sat = in.flags & k_f_sat;
  Operands o;
  operands(in, widx, exec, o);
  const uint64_t* const* src = o.src;
  uint64_t* const dst = o.dst;
  const uint64_t dst_mask = o.dst_mask;
  auto S = [src](int k, int l) { return src[k][l]; };
  auto D = [dst, dst_mask](int l, uint64_t v) { dst[l] = v & dst_mask; };

  switch (in.op) {
  case XOp::mov:
    each(exec, [&](int l) { D(l, S(0, l)); });
    return;
  case XOp::pack: {
    // mov.b64 d, {a, b}: elements of equal width, lowest first
    unsigned ew = ptx::type_size(t) * 8 / in.nsrc;
    each(exec, [&](int l) {
      uint64_t v = 0;
      for (int e = in.nsrc - 1; e >= 0; --e) {
        v = (ew == 64 ? 0 : v << ew) | (S(e, l) & (ew == 64 ? ~0ull : (1ull << ew) - 1));
      }
      D(l, v);
    });
    return;
  }
  case XOp::unpack: {
    unsigned ew = ptx::type_size(t) * 8 / in.ndst;
    each(exec, [&](int l) {
      uint64_t v = S(0, l);
      for (int e = 0; e < in.ndst; ++e) {
        wr(in.dst[e], widx, l, ew == 64 ? v : v & ((1ull << ew) - 1));
        v = ew == 64 ? 0 : v >> ew;
      }
    });
    return;
  }
  default:
    break;
  }

  if (t == Type::f32) {
    const sem::Round r = round_of(in.mode);
    switch (in.op) {
    case XOp::add: each(exec, [&](int l) { D(l, bits(sem::add_f32(as_f32(S(0, l)), as_f32(S(1, l)), r, ftz, sat))); }); return;
    case XOp::sub: each(exec, [&](int l) { D(l, bits(sem::sub_f32(as_f32(S(0, l)), as_f32(S(1, l)), r, ftz, sat))); }); return;
    case XOp::mul: each(exec, [&](int l) { D(l, bits(sem::mul_f32(as_f32(S(0, l)), as_f32(S(1, l)), r, ftz, sat))); }); return;
    case XOp::fma: each(exec, [&](int l) { D(l, bits(sem::fma_f32(as_f32(S(0, l)), as_f32(S(1, l)), as_f32(S(2, l)), r, ftz, sat))); }); return;
    case XOp::div:
      each(exec, [&](int l) {
        float a = as_f32(S(0, l)), b = as_f32(S(1, l));
        float q = (in.flags & k_f_approx) ? sem::div_approx_f32(a, b, ftz)
                  : (in.flags & k_f_full) ? sem::div_full_f32(a, b, ftz)
                                          : sem::div_f32(a, b, r, ftz);
        if (sat) q = std::isnan(q) ? 0.0f : std::clamp(q, 0.0f, 1.0f);
        D(l, bits(q));
      });
      return;
    case XOp::abs: each(exec, [&](int l) { D(l, bits(sem::abs_f32(as_f32(S(0, l)), ftz))); }); return;
    case XOp::neg: each(exec, [&](int l) { D(l, bits(sem::neg_f32(as_f32(S(0, l)), ftz))); }); return;
    case XOp::min:
      each(exec, [&](int l) { D(l, bits(sem::min_f32(as_f32(S(0, l)), as_f32(S(1, l)), ftz, in.flags & k_f_nan, in.flags & k_f_xorsign))); });
      return;
    case XOp::max:
      each(exec, [&](int l) { D(l, bits(sem::max_f32(as_f32(S(0, l)), as_f32(S(1, l)), ftz, in.flags & k_f_nan, in.flags & k_f_xorsign))); });
      return;
    case XOp::rcp:
      each(exec, [&](int l) { float a = as_f32(S(0, l)); D(l, bits((in.flags & k_f_approx) ? sem::rcp_approx_f32(a, ftz) : sem::rcp_f32(a, r, ftz))); });
      return;
    case XOp::sqrt:
      each(exec, [&](int l) { float a = as_f32(S(0, l)); D(l, bits((in.flags & k_f_approx) ? sem::sqrt_approx_f32(a, ftz) : sem::sqrt_f32(a, r, ftz))); });
      return;
    case XOp::rsqrt: each(exec, [&](int l) { D(l, bits(sem::rsqrt_approx_f32(as_f32(S(0, l)), ftz))); }); return;
    case XOp::sin: each(exec, [&](int l) { D(l, bits(sem::sin_approx_f32(as_f32(S(0, l)), ftz))); }); return;
    case XOp::cos: each(exec, [&](int l) { D(l, bits(sem::cos_approx_f32(as_f32(S(0, l)), ftz))); }); return;
    case XOp::lg2: each(exec, [&](int l) { D(l, bits(sem::lg2_approx_f32(as_f32(S(0, l)), ftz))); }); return;
    case XOp::ex2: each(exec, [&](int l) { D(l, bits(sem::ex2_approx_f32(as_f32(S(0, l)), ftz))); }); return;
    case XOp::tanh: each(exec, [&](int l) { D(l, bits(sem::tanh_approx_f32(as_f32(S(0, l))))); }); return;
    case XOp::setp: case XOp::set: break;
    case XOp::testp: each(exec, [&](int l) { D(l, sem::testp_f32(sem::TestOp(in.mode), as_f32(S(0, l)))); }); return;
    case XOp::copysign: each(exec, [&](int l) { D(l, (S(1, l) & 0x7fffffffu) | (S(0, l) & 0x80000000u)); }); return;
    case XOp::selp: break;
    case XOp::slct: break;
    default:
      if (in.op == XOp::and_ || in.op == XOp::or_ || in.op == XOp::xor_ || in.op == XOp::not_) break;
      fault(CUDA_ERROR_NOT_SUPPORTED, "f32 form of this instruction is not supported", in, widx, std::countr_zero(exec));
    }
  } else if (t == Type::f64) {
    const sem::Round r = round_of(in.mode);
    switch (in.op) {
    case XOp::add: each(exec, [&](int l) { D(l, bits(sem::add_f64(as_f64(S(0, l)), as_f64(S(1, l)), r))); }); return;
    case XOp::sub: each(exec, [&](int l) { D(l, bits(sem::sub_f64(as_f64(S(0, l)), as_f64(S(1, l)), r))); }); return;
    case XOp::mul: each(exec, [&](int l) { D(l, bits(sem::mul_f64(as_f64(S(0, l)), as_f64(S(1, l)), r))); }); return;
    case XOp::fma: each(exec, [&](int l) { D(l, bits(sem::fma_f64(as_f64(S(0, l)), as_f64(S(1, l)), as_f64(S(2, l)), r))); }); return;
    case XOp::div: each(exec, [&](int l) { D(l, bits(sem::div_f64(as_f64(S(0, l)), as_f64(S(1, l)), r))); }); return;
    case XOp::abs: each(exec, [&](int l) { D(l, S(0, l) & 0x7fffffffffffffffull); }); return;
    case XOp::neg: each(exec, [&](int l) { D(l, S(0, l) ^ 0x8000000000000000ull); }); return;
    case XOp::min: each(exec, [&](int l) { D(l, bits(sem::min_f64(as_f64(S(0, l)), as_f64(S(1, l))))); }); return;
    case XOp::max: each(exec, [&](int l) { D(l, bits(sem::max_f64(as_f64(S(0, l)), as_f64(S(1, l))))); }); return;
    case XOp::rcp:
      each(exec, [&](int l) { double a = as_f64(S(0, l)); D(l, bits((in.flags & k_f_approx) ? sem::rcp_approx_ftz_f64(a) : sem::rcp_f64(a, r))); });
      return;
    case XOp::sqrt: each(exec, [&](int l) { D(l, bits(sem::sqrt_f64(as_f64(S(0, l)), r))); }); return;
    case XOp::rsqrt: each(exec, [&](int l) { D(l, bits(sem::rsqrt_approx_f64(as_f64(S(0, l))))); }); return;
    case XOp::testp: each(exec, [&](int l) { D(l, sem::testp_f64(sem::TestOp(in.mode), as_f64(S(0, l)))); }); return;
    case XOp::copysign: each(exec, [&](int l) { D(l, (S(1, l) & 0x7fffffffffffffffull) | (S(0, l) & 0x8000000000000000ull)); }); return;
    case XOp::setp: case XOp::set: case XOp::selp: case XOp::slct: break;
    default:
      if (in.op == XOp::and_ || in.op == XOp::or_ || in.op == XOp::xor_ || in.op == XOp::not_) break;
      fault(CUDA_ERROR_NOT_SUPPORTED, "f64 form of this instruction is not supported", in, widx, std::countr_zero(exec));
    }
  }

  switch (in.op) {
  case XOp::setp:
  case XOp::set: {
    const Type ct = in.type2;
    each(exec, [&](int l) {
      uint64_t a = S(0, l), b = S(1, l);
      bool c;
      const bool ftz = in.flags & k_f_ftz;
      if (ct == Type::f32) c = sem::cmp_f32(cmp_of(in.mode), as_f32(a), as_f32(b), ftz);
      else if (ct == Type::f64) c = sem::cmp_f64(cmp_of(in.mode), as_f64(a), as_f64(b));
      else if (ct == Type::f16) c = sem::cmp_f16(cmp_of(in.mode), uint16_t(a), uint16_t(b), ftz);
      else if (ct == Type::bf16) c = sem::cmp_bf16(cmp_of(in.mode), uint16_t(a), uint16_t(b));
      else {
        c = false;
        with_int(ct, [&](auto z) {
          using T = decltype(z);
          // the operand type decides signedness: lt on .u32 compares unsigned
          c = sem::cmp_int<T>(cmp_of(in.mode), T(a), T(b));
        });
      }
      bool p = c, q = !c;
      if (in.mode2 != k_bool_none) {
        bool cc = S(2, l) != 0;
        switch (in.mode2) {
        case k_bool_and: p = c && cc; q = !c && cc; break;
        case k_bool_or: p = c || cc; q = !c || cc; break;
        case k_bool_xor: p = c != cc; q = !c != cc; break;
        default: break;
        }
      }
      if (in.op == XOp::setp) {
        D(l, p);
        if (in.ndst == 2) wr(in.dst[1], widx, l, q);
      } else {
        // set: 0xffffffff / 1.0f for true, 0 for false
        uint64_t v = in.type == Type::f32 ? bits(sem::set_f32(p)) : sem::set_u32(p);
        D(l, v);
      }
    });
    return;
  }
  case XOp::selp:
    each(exec, [&](int l) { D(l, S(2, l) ? S(0, l) : S(1, l)); });
    return;
  case XOp::slct:
    each(exec, [&](int l) {
      uint64_t c = S(2, l);
      bool ge = in.type2 == Type::f32 ? !(as_f32(c) < 0.0f) || (uint32_t(c) == 0x80000000u)
                                      : int32_t(uint32_t(c)) >= 0;
      if (in.type2 == Type::f32 && std::isnan(as_f32(c))) ge = false;
      D(l, ge ? S(0, l) : S(1, l));
    });
    return;
  case XOp::and_:
    each(exec, [&](int l) { D(l, S(0, l) & S(1, l)); });
    return;
  case XOp::or_:
    each(exec, [&](int l) { D(l, S(0, l) | S(1, l)); });
    return;
  case XOp::xor_:
    each(exec, [&](int l) { D(l, S(0, l) ^ S(1, l)); });
    return;
  case XOp::not_:
    if (t == Type::pred) each(exec, [&](int l) { D(l, S(0, l) == 0); });
    else each(exec, [&](int l) { D(l, ~S(0, l)); });
    return;
  case XOp::cnot:
    each(exec, [&](int l) { D(l, S(0, l) == 0); });
    return;
  case XOp::lop3:
    each(exec, [&](int l) { D(l, sem::lop3<uint32_t>(uint32_t(S(0, l)), uint32_t(S(1, l)), uint32_t(S(2, l)), uint8_t(S(3, l)))); });
    return;
  case XOp::prmt:
    each(exec, [&](int l) { D(l, sem::prmt(uint32_t(S(0, l)), uint32_t(S(1, l)), uint32_t(S(2, l)), sem::PrmtMode(in.mode))); });
    return;
  case XOp::shf:
    each(exec, [&](int l) {
      uint32_t a = uint32_t(S(0, l)), b = uint32_t(S(1, l)), c = uint32_t(S(2, l));
      D(l, in.mode == 1 ? sem::shf_l(a, b, c, in.flags & k_f_wrap) : sem::shf_r(a, b, c, in.flags & k_f_wrap));
    });
    return;
  case XOp::bmsk:
    each(exec, [&](int l) { D(l, sem::bmsk(uint32_t(S(0, l)), uint32_t(S(1, l)), in.flags & k_f_wrap)); });
    return;
  case XOp::dp4a:
    each(exec, [&](int l) { D(l, sem::dp4a(uint32_t(S(0, l)), uint32_t(S(1, l)), uint32_t(S(2, l)), in.type == Type::s32, in.type2 == Type::s32)); });
    return;
  case XOp::dp2a:
    each(exec, [&](int l) { D(l, sem::dp2a(uint32_t(S(0, l)), uint32_t(S(1, l)), uint32_t(S(2, l)), in.flags & k_f_hi, in.type == Type::s32, in.type2 == Type::s32)); });
    return;
  default:
    break;
  }

  // Integer operations.
  bool done = false;
  with_int(t, [&](auto z) {
    using T = decltype(z);
    using U = std::make_unsigned_t<T>;
    constexpr unsigned W = sizeof(T) * 8;
    auto as = [](uint64_t v) { return T(v); };
    done = true;
    switch (in.op) {
    case XOp::add:
      each(exec, [&](int l) {
        T a = as(S(0, l)), b = as(S(1, l));
        if (in.flags & k_f_cc) {
          U r = U(U(a) + U(b));
          R(widx, k.carry_slot)[l] = r < U(a);
          D(l, ubits(r));
        } else if (sat && std::is_same_v<T, int32_t>) {
          D(l, ubits(T(std::clamp<int64_t>(int64_t(a) + int64_t(b), INT32_MIN, INT32_MAX))));
        } else {
          D(l, ubits(T(U(a) + U(b))));
        }
      });
      break;
    case XOp::sub:
      each(exec, [&](int l) {
        T a = as(S(0, l)), b = as(S(1, l));
        if (in.flags & k_f_cc) {
          R(widx, k.carry_slot)[l] = U(a) < U(b);
          D(l, ubits(T(U(a) - U(b))));
        } else if (sat && std::is_same_v<T, int32_t>) {
          D(l, ubits(T(std::clamp<int64_t>(int64_t(a) - int64_t(b), INT32_MIN, INT32_MAX))));
        } else {
          D(l, ubits(T(U(a) - U(b))));
        }
      });
      break;
    case XOp::addc:
    case XOp::subc:
      each(exec, [&](int l) {
        U a = U(as(S(0, l))), b = U(as(S(1, l)));
        U cin = U(R(widx, k.carry_slot)[l] & 1);
        U r;
        uint64_t cout;
        if (in.op == XOp::addc) {
          r = U(a + b + cin);
          cout = (r < a) || (cin && r == a);
        } else {
          r = U(a - b - cin);
          cout = (a < b) || (cin && a == b);
        }
        if (in.flags & k_f_cc) R(widx, k.carry_slot)[l] = cout;
        D(l, ubits(r));
      });
      break;
    case XOp::mul:
    case XOp::mad:
      each(exec, [&](int l) {
        T a = as(S(0, l)), b = as(S(1, l));
        uint64_t r;
        if (in.flags & k_f_wide) {
          if constexpr (W <= 32) {
            using Wd = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
            Wd p = Wd(a) * Wd(b);
            if (in.op == XOp::mad) p = Wd(uint64_t(p) + S(2, l));
            r = uint64_t(p);
          } else {
            r = 0;
          }
        } else {
          U p = (in.flags & k_f_hi) ? U(mul_hi(a, b)) : U(U(a) * U(b));
          if (in.op == XOp::mad && sat && (in.flags & k_f_hi) && std::is_same_v<T, int32_t>) {
            p = U(T(std::clamp<int64_t>(int64_t(T(p)) + int64_t(as(S(2, l))), INT32_MIN, INT32_MAX)));
          } else if (in.op == XOp::mad) {
            U c = U(as(S(2, l)));
            U cin = (in.flags & k_f_carry_in) ? U(R(widx, k.carry_slot)[l] & 1) : U(0);
            U s1 = U(p + c);
            U s2 = U(s1 + cin);
            if (in.flags & k_f_cc) R(widx, k.carry_slot)[l] = (s1 < p) || (s2 < s1);
            p = s2;
          }
          r = ubits(p);
        }
        D(l, r);
      });
      break;
    case XOp::mul24:
    case XOp::mad24:
      each(exec, [&](int l) {
        int64_t a = std::is_signed_v<T> ? int64_t(sign_extend(S(0, l), 24)) : int64_t(S(0, l) & 0xffffff);
        int64_t b = std::is_signed_v<T> ? int64_t(sign_extend(S(1, l), 24)) : int64_t(S(1, l) & 0xffffff);
        int64_t p = a * b;
        uint32_t r = (in.flags & k_f_hi) ? uint32_t(uint64_t(p) >> 16) : uint32_t(p);
        if (in.op == XOp::mad24) r += uint32_t(S(2, l));
        D(l, r);
      });
      break;
    case XOp::sad:
      each(exec, [&](int l) {
        T a = as(S(0, l)), b = as(S(1, l));
        U d = a > b ? U(U(a) - U(b)) : U(U(b) - U(a));
        D(l, ubits(U(d + U(as(S(2, l))))));
      });
      break;
    case XOp::div:
      each(exec, [&](int l) { D(l, ubits(sem::div_int(as(S(0, l)), as(S(1, l))))); });
      break;
    case XOp::rem:
      each(exec, [&](int l) { D(l, ubits(sem::rem_int(as(S(0, l)), as(S(1, l))))); });
      break;
    case XOp::abs:
      each(exec, [&](int l) { T a = as(S(0, l)); D(l, ubits(a < 0 ? T(U(0) - U(a)) : a)); });
      break;
    case XOp::neg:
      each(exec, [&](int l) { D(l, ubits(T(U(0) - U(as(S(0, l)))))); });
      break;
    case XOp::min:
    case XOp::max:
      each(exec, [&](int l) {
        T a = as(S(0, l)), b = as(S(1, l));
        T m = in.op == XOp::min ? std::min(a, b) : std::max(a, b);
        if ((in.flags & k_f_relu) && m < T(0)) m = T(0);
        D(l, ubits(m));
      });
      break;
    case XOp::popc:
      each(exec, [&](int l) { D(l, uint64_t(std::popcount(U(as(S(0, l)))))); });
      break;
    case XOp::clz:
      each(exec, [&](int l) { D(l, uint64_t(std::countl_zero(U(as(S(0, l)))))); });
      break;
    case XOp::brev:
      each(exec, [&](int l) { if constexpr (W == 64) D(l, sem::brev64(uint64_t(as(S(0, l))))); else D(l, sem::brev32(uint32_t(U(as(S(0, l))))) >> (32 - W)); });
      break;
    case XOp::bfind:
      each(exec, [&](int l) { D(l, sem::bfind(as(S(0, l)), in.flags & k_f_shiftamt)); });
      break;
    case XOp::bfe:
      each(exec, [&](int l) { D(l, ubits(sem::bfe(as(S(0, l)), uint32_t(S(1, l)), uint32_t(S(2, l))))); });
      break;
    case XOp::bfi:
      each(exec, [&](int l) { D(l, ubits(sem::bfi(U(as(S(0, l))), U(as(S(1, l))), uint32_t(S(2, l)), uint32_t(S(3, l))))); });
      break;
    case XOp::shl:
      each(exec, [&](int l) {
        uint32_t s = uint32_t(S(1, l));
        D(l, s >= W ? 0 : ubits(T(U(as(S(0, l))) << s)));
      });
      break;
    case XOp::shr:
      each(exec, [&](int l) {
        uint32_t s = uint32_t(S(1, l));
        T a = as(S(0, l));
        if constexpr (std::is_signed_v<T>) {
          D(l, ubits(T(a >> std::min<uint32_t>(s, W - 1))));
        } else {
          D(l, s >= W ? 0 : ubits(T(a >> s)));
        }
      });
      break;
    case XOp::szext:
      each(exec, [&](int l) { D(l, sem::szext(uint32_t(S(0, l)), uint32_t(S(1, l)), in.flags & k_f_wrap, std::is_signed_v<T>)); });
      break;
    default:
      done = false;
    }
  });
  if (!done) {
    fault(CUDA_ERROR_NOT_SUPPORTED, "instruction form is not supported by the emulated device", in,
          widx, std::countr_zero(exec));
  }
}

void BlockRunner::State::exec_half(const Insn& in, uint32_t widx, uint32_t exec) {
  const Type t = in.type;
  const bool bf = t == Type::bf16 || t == Type::bf16x2;
  const int n = (t == Type::f16x2 || t == Type::bf16x2) ? 2 : 1;
  const bool sat = in.flags & k_f_sat, relu = in.flags & k_f_relu, ftz = in.flags & k_f_ftz;
  const bool nan = in.flags & k_f_nan, xs = in.flags & k_f_xorsign;
  Operands o;
  operands(in, widx, exec, o);
  const uint64_t* const* src = o.src;
  auto S = [src](int k, int l) { return src[k][l]; };
  // One element of a (possibly packed) half operation.
  auto one = [&](uint16_t a, uint16_t b, uint16_t c, int l) -> uint16_t {
    switch (in.op) {
    case XOp::add: return bf ? sem::add_bf16(a, b) : sem::add_f16(a, b, ftz, sat);
    case XOp::sub: return bf ? sem::sub_bf16(a, b) : sem::sub_f16(a, b, ftz, sat);
    case XOp::mul: return bf ? sem::mul_bf16(a, b) : sem::mul_f16(a, b, ftz, sat);
    case XOp::fma: return bf ? sem::fma_bf16(a, b, c, relu) : sem::fma_f16(a, b, c, ftz, sat, relu);
    case XOp::neg: return bf ? sem::neg_bf16(a) : sem::neg_f16(a, ftz);
    case XOp::abs: return bf ? sem::abs_bf16(a) : sem::abs_f16(a, ftz);
    case XOp::min: return bf ? sem::min_bf16(a, b, nan, xs) : sem::min_f16(a, b, ftz, nan, xs);
    case XOp::max: return bf ? sem::max_bf16(a, b, nan, xs) : sem::max_f16(a, b, ftz, nan, xs);
    case XOp::ex2: return bf ? sem::ex2_approx_ftz_bf16(a) : sem::ex2_approx_f16(a);
    case XOp::tanh: return bf ? sem::tanh_approx_bf16(a) : sem::tanh_approx_f16(a);
    default:
      fault(CUDA_ERROR_NOT_SUPPORTED, "half-precision form of this instruction is not supported",
            in, widx, l);
    }
  };
  if (in.op == XOp::setp || in.op == XOp::set) {
    each(exec, [&](int l) {
      uint64_t a = S(0, l), b = S(1, l), out = 0;
      for (int e = 0; e < n; ++e) {
        uint16_t x = uint16_t(a >> (16 * e)), y = uint16_t(b >> (16 * e));
        bool c = bf ? sem::cmp_bf16(cmp_of(in.mode), x, y) : sem::cmp_f16(cmp_of(in.mode), x, y, ftz);
        bool p = c, q = !c;
        if (in.mode2 != k_bool_none) {
          bool cc = S(2, l) != 0;
          if (in.mode2 == k_bool_and) { p = c && cc; q = !c && cc; }
          else if (in.mode2 == k_bool_or) { p = c || cc; q = !c || cc; }
          else { p = c != cc; q = !c != cc; }
        }
        if (in.op == XOp::set) {
          out |= uint64_t(p ? 0xffffu : 0) << (16 * e);
        } else if (n == 2) {
          wr(in.dst[e], widx, l, p); // setp.f16x2 p|q: one predicate per half
        } else {
          wr(in.dst[0], widx, l, p);
          if (in.ndst == 2) wr(in.dst[1], widx, l, q);
        }
      }
      if (in.op == XOp::set) wr(in.dst[0], widx, l, out);
    });
    return;
  }
  each(exec, [&](int l) {
    uint64_t a = S(0, l);
    uint64_t b = in.nsrc > 1 ? S(1, l) : 0;
    uint64_t c = in.nsrc > 2 ? S(2, l) : 0;
    uint64_t out = 0;
    for (int e = 0; e < n; ++e) {
      int sh = 16 * e;
      out |= uint64_t(one(uint16_t(a >> sh), uint16_t(b >> sh), uint16_t(c >> sh), l)) << sh;
    }
    wr(in.dst[0], widx, l, out);
  });
}

void BlockRunner::State::exec_convert(const Insn& in, uint32_t widx, uint32_t exec) {
  Operands o;
  operands(in, widx, exec, o);
  const uint64_t* const* src = o.src;
  auto S = [src](int k, int l) { return src[k][l]; };
  switch (in.op) {
  case XOp::cvt: {
    const bool ftz = in.flags & k_f_ftz, sat = in.flags & k_f_sat, relu = in.flags & k_f_relu;
    const bool satfinite = in.flags & k_f_satfinite;
    const sem::CvtMode mode = sem::CvtMode(in.mode);
    if (in.nsrc == 2) {
      // cvt.rn.f16x2.f32 d, a, b: a to the upper half, b to the lower
      if (in.type2 != Type::f32 || (in.type != Type::f16x2 && in.type != Type::bf16x2)) {
        fault(CUDA_ERROR_NOT_SUPPORTED, "packed conversion is not supported", in, widx,
              std::countr_zero(exec));
      }
      each(exec, [&](int l) {
        float a = as_f32(S(0, l)), b = as_f32(S(1, l));
        wr(in.dst[0], widx, l,
           in.type == Type::f16x2 ? sem::cvt_f16x2_f32(a, b, mode, relu, satfinite)
                                  : sem::cvt_bf16x2_f32(a, b, mode, relu, satfinite));
      });
      return;
    }
    each(exec, [&](int l) {
      uint64_t v = sem::cvt(S(0, l), in.type, in.type2, mode, ftz, sat, relu, satfinite);
      if (ptx::is_signed(in.type)) v = sign_extend(v, ptx::type_size(in.type) * 8);
      wr(in.dst[0], widx, l, v);
    });
    return;
  }
  case XOp::cvta:
  case XOp::cvta_to: {
    static constexpr uint64_t windows[4] = {0, k_shared_window, k_local_window, k_param_window};
    uint64_t win = windows[in.mode];
    bool narrow = in.type == Type::u32 || in.type == Type::b32;
    each(exec, [&](int l) {
      uint64_t a = S(0, l);
      uint64_t r;
      if (in.op == XOp::cvta) {
        r = a + win; // a window's offset 0 is a real address (the first __shared__ variable's)
      } else {
        r = (win && (a & ~(k_window_size - 1)) == win) ? a - win : a;
      }
      wr(in.dst[0], widx, l, narrow ? uint32_t(r) : r);
    });
    return;
  }
  case XOp::isspacep:
    each(exec, [&](int l) {
      uint64_t a = S(0, l);
      uint64_t w = a & ~(k_window_size - 1);
      bool r;
      switch (in.mode) {
      case 1: r = w == k_shared_window; break;
      case 2: r = w == k_local_window; break;
      case 3: r = w == k_param_window; break;
      default: r = w != k_shared_window && w != k_local_window && w != k_param_window; break;
      }
      wr(in.dst[0], widx, l, r);
    });
    return;
  default:
    return;
  }
}

// ld and st where every lane's access is in bounds and aligned, in one space: global memory
// within one allocation, the block's shared memory, or the kernel's parameters. The checks are
// made once for the warp (the lowest and highest address) instead of once per lane, and nothing
// is read or written unless all of them pass; any other access goes the per-lane way, which
// faults at the first bad lane exactly as before. What each lane reads or writes, in which order,
// and what the cost model is told are the per-lane way's.
bool BlockRunner::State::fast_memory(const Insn& in, uint32_t widx, uint32_t exec) {
  const uint32_t esize = std::max<uint32_t>(ptx::type_size(in.type), 1);
  const uint32_t total = esize * in.vec;
  const bool store = in.op == XOp::st;
  uint64_t addr[k_lanes];
  const uint64_t base = uint64_t(in.addr.offset);
  if (in.addr.slot != k_no_slot) {
    const uint64_t* r = R(widx, in.addr.slot);
    each(exec, [&](int l) { addr[l] = base + r[l]; });
  } else {
    each(exec, [&](int l) { addr[l] = base; });
  }
  uint64_t lo = ~0ull, hi = 0, misaligned = 0;
  each(exec, [&](int l) {
    lo = std::min(lo, addr[l]);
    hi = std::max(hi, addr[l]);
    misaligned |= addr[l];
  });
  if (total > 1 && (misaligned & (total - 1))) return false;
  AddrSpace space = in.addr.space;
  if (space == AddrSpace::generic) {
    // one window for every lane, or the per-lane way
    const uint64_t window = lo & ~(k_window_size - 1);
    if ((hi & ~(k_window_size - 1)) != window) return false;
    if (window == k_shared_window) {
      space = AddrSpace::shared;
    } else if (window == k_local_window) {
      space = AddrSpace::local;
    } else if (window == k_param_window) {
      return false;
    } else {
      space = AddrSpace::global;
    }
    if (space != AddrSpace::global) {
      each(exec, [&](int l) { addr[l] -= window; });
      lo -= window;
      hi -= window;
    }
  }
  uint8_t* host = nullptr; // addr[l] is an offset from it (0 for global memory)
  switch (space) {
  case AddrSpace::global: {
    const uint64_t span = hi - lo + total;
    const Allocation* a = last_alloc;
    if (!a || !a->contains(lo, span)) {
      a = L.table->find(lo);
      if (!a || !a->contains(lo, span)) return false;
      last_alloc = a;
    }
    if (store && a->read_only) return false;
    each(exec, [&](int l) { sectors_scratch[sector_count++] = addr[l] >> 5; });
    break;
  }
  case AddrSpace::shared:
    if (hi > shared_size || total > shared_size - hi) return false;
    {
      // aligned: an access of 4 bytes or less is one word, a wider one total / 4 whole words
      const uint32_t words = total >= 4 ? total / 4 : 1;
      if (words == 1) {
        each(exec, [&](int l) { shared_words[shared_count++] = uint32_t(addr[l] >> 2); });
      } else {
        each(exec, [&](int l) {
          for (uint32_t j = 0; j < words; ++j)
            shared_words[shared_count++] = uint32_t((addr[l] >> 2) + j);
        });
      }
    }
    host = shared.data();
    break;
  case AddrSpace::local: {
    // each thread's own frame: the offset becomes one from the start of the block's frames
    if (hi > k.local_bytes || total > k.local_bytes - hi) return false;
    const uint64_t frame = k.local_bytes;
    each(exec, [&](int l) { addr[l] += uint64_t(widx * k_lanes + uint32_t(l)) * frame; });
    local_bytes += uint64_t(total) * uint32_t(std::popcount(exec));
    host = local.data();
    break;
  }
  case AddrSpace::kparam:
    if (store || hi > L.kernel->param_bytes || total > L.kernel->param_bytes - hi) return false;
    param_touched = true;
    host = const_cast<uint8_t*>(L.params);
    break;
  default:
    return false;
  }
  const bool vol = in.flags & k_f_volatile;
  // The element type's width as a type, so that each access is one move, not a memcpy call.
  auto sized = [&](auto&& f) {
    switch (esize) {
    case 1: f(uint8_t{}); return true;
    case 2: f(uint16_t{}); return true;
    case 4: f(uint32_t{}); return true;
    case 8: f(uint64_t{}); return true;
    default: return false;
    }
  };
  if (store) {
    Operands o;
    for (uint32_t e = 0; e < in.vec; ++e) o.src[e] = lanes(in.src[e], widx, exec, o.tmp[e]);
    const bool typed = !vol && sized([&](auto z) {
      using T = decltype(z);
      each(exec, [&](int l) {
        uint8_t* p = host + addr[l];
        for (uint32_t e = 0; e < in.vec; ++e) {
          const T v = T(o.src[e][l]);
          std::memcpy(p + e * sizeof(T), &v, sizeof(T));
        }
      });
    });
    if (!typed) {
      each(exec, [&](int l) {
        uint8_t* p = host + addr[l];
        for (uint32_t e = 0; e < in.vec; ++e) store_bytes(p + e * esize, esize, o.src[e][l], vol);
      });
    }
  } else {
    const bool sign = ptx::is_signed(in.type);
    uint64_t* dst[4];
    uint64_t mask[4];
    uint64_t sink[k_lanes];
    for (uint32_t e = 0; e < in.vec; ++e) std::tie(dst[e], mask[e]) = dest(in.dst[e], widx, sink);
    const bool typed = !vol && sized([&](auto z) {
      using T = decltype(z);
      using S = std::make_signed_t<T>;
      each(exec, [&](int l) {
        const uint8_t* p = host + addr[l];
        for (uint32_t e = 0; e < in.vec; ++e) {
          T v;
          std::memcpy(&v, p + e * sizeof(T), sizeof(T));
          const uint64_t x = sign ? uint64_t(int64_t(S(v))) : uint64_t(v);
          dst[e][l] = x & mask[e];
        }
      });
    });
    if (!typed) {
      each(exec, [&](int l) {
        const uint8_t* p = host + addr[l];
        for (uint32_t e = 0; e < in.vec; ++e) {
          uint64_t v = load_bytes(p + e * esize, esize, vol);
          if (sign) v = sign_extend(v, esize * 8);
          dst[e][l] = v & mask[e];
        }
      });
    }
  }
  flush_memory(in, widx, store ? Access::store : Access::load);
  return true;
}

void BlockRunner::State::exec_memory(const Insn& in, uint32_t widx, uint32_t exec) {
  if (in.op != XOp::cp_async && fast_memory(in, widx, exec)) return;
  const uint32_t esize = std::max<uint32_t>(ptx::type_size(in.type), 1);
  const uint32_t total = esize * in.vec;
  const bool vol = in.flags & k_f_volatile;
  const bool sign = ptx::is_signed(in.type);
  if (in.op == XOp::cp_async) {
    // PTX ISA 9.7.9.25.3.1: both addresses aligned to cp-size; src-size bytes (at most cp-size)
    // are read, the rest of the destination's cp-size bytes is zero-filled. The copy completes
    // here, at once, so every commit group is complete when cp.async.wait_group asks.
    const Addr src_addr{AddrSpace::global,
                        in.src[2].kind == Src::Kind::reg ? in.src[2].slot : k_no_slot,
                        int64_t(in.src[3].imm)};
    each(exec, [&](int l) {
      const uint32_t cp = uint32_t(rd(in.src[0], widx, l));
      uint32_t n = cp;
      if (in.mode == k_cp_src_size) n = std::min<uint32_t>(uint32_t(rd(in.src[1], widx, l)), cp);
      else if (in.mode == k_cp_ignore_src && rd(in.src[1], widx, l)) n = 0;
      uint8_t* d = resolve(in.addr, widx, l, cp, true, in);
      uint64_t from = uint64_t(src_addr.offset);
      if (src_addr.slot != k_no_slot) from += R(widx, src_addr.slot)[l];
      if (from & (cp - 1)) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "misaligned address: %u-byte cp.async from 0x%" PRIx64, cp, from);
        fault(CUDA_ERROR_MISALIGNED_ADDRESS, buf, in, widx, l);
      }
      // (aligned to cp-size, any src-size up to it passes resolve()'s alignment check)
      if (n) std::memcpy(d, resolve(src_addr, widx, l, n, false, in), n);
      if (n < cp) std::memset(d + n, 0, cp - n);
    });
    flush_memory(in, widx, Access::load);
    return;
  }
  if (in.op == XOp::ld) {
    each(exec, [&](int l) {
      uint8_t* p = resolve(in.addr, widx, l, total, false, in);
      for (uint32_t e = 0; e < in.vec; ++e) {
        uint64_t v = load_bytes(p + e * esize, esize, vol);
        if (sign) v = sign_extend(v, esize * 8);
        wr(in.dst[e], widx, l, v);
      }
    });
  } else {
    each(exec, [&](int l) {
      uint8_t* p = resolve(in.addr, widx, l, total, true, in);
      for (uint32_t e = 0; e < in.vec; ++e) {
        store_bytes(p + e * esize, esize, rd(in.src[e], widx, l), vol);
      }
    });
  }
  flush_memory(in, widx, in.op == XOp::ld ? Access::load : Access::store);
}

namespace {

template <class T> T atomic_apply(uint8_t op, T old, T a, T b) {
  switch (op) {
  case k_atom_add: return T(old + a);
  case k_atom_min: return std::min(old, a);
  case k_atom_max: return std::max(old, a);
  case k_atom_exch: return a;
  case k_atom_cas: return old == a ? b : old;
  default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
    case k_atom_inc: return U(old) >= U(a) ? T(0) : T(old + 1);
    case k_atom_dec: return (U(old) == 0 || U(old) > U(a)) ? a : T(old - 1);
    case k_atom_and: return T(old & a);
    case k_atom_or: return T(old | a);
    case k_atom_xor: return T(old ^ a);
    default: break;
    }
  }
  return old;
}

} // namespace

void BlockRunner::State::exec_atomic(const Insn& in, uint32_t widx, uint32_t exec) {
  const Type t = in.type;
  const uint32_t size = std::max<uint32_t>(ptx::type_size(t), 1);
  each(exec, [&](int l) {
    uint8_t* p = resolve(in.addr, widx, l, size, true, in);
    uint64_t a = rd(in.src[0], widx, l);
    uint64_t b = in.nsrc > 1 ? rd(in.src[1], widx, l) : 0;
    uint64_t old = 0;
    auto cas_loop = [&](auto z) {
      using T = decltype(z);
      using Bits = std::conditional_t<sizeof(T) == 8, uint64_t,
                                      std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
      Bits* bp = reinterpret_cast<Bits*>(p);
      Bits cur = __atomic_load_n(bp, __ATOMIC_RELAXED);
      while (true) {
        T o = std::bit_cast<T>(cur);
        T r;
        if constexpr (std::is_floating_point_v<T>) {
          T av = std::bit_cast<T>(Bits(a));
          if (in.mode == k_atom_add) r = T(o + av);
          else if (in.mode == k_atom_min && sizeof(T) == 4) r = T(sem::min_f32(float(o), float(av)));
          else if (in.mode == k_atom_max && sizeof(T) == 4) r = T(sem::max_f32(float(o), float(av)));
          else if (in.mode == k_atom_min) r = T(sem::min_f64(double(o), double(av)));
          else if (in.mode == k_atom_max) r = T(sem::max_f64(double(o), double(av)));
          else r = atomic_apply<T>(in.mode, o, av, std::bit_cast<T>(Bits(b)));
        } else {
          r = atomic_apply<T>(in.mode, o, T(a), T(b));
        }
        Bits nb = std::bit_cast<Bits>(r);
        if (__atomic_compare_exchange_n(bp, &cur, nb, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
          old = uint64_t(cur);
          return;
        }
      }
    };
    switch (t) {
    case Type::f32: cas_loop(float{}); break;
    case Type::f64: cas_loop(double{}); break;
    case Type::s32: cas_loop(int32_t{}); break;
    case Type::s64: cas_loop(int64_t{}); break;
    case Type::u64:
    case Type::b64: cas_loop(uint64_t{}); break;
    case Type::f16x2:
    case Type::bf16x2: {
      // packed halves: each half added as a half, the pair updated in one atomic step
      uint32_t* wp = reinterpret_cast<uint32_t*>(p);
      uint32_t cur = __atomic_load_n(wp, __ATOMIC_RELAXED);
      while (true) {
        uint32_t nb = t == Type::bf16x2 ? sem::add_bf16x2(cur, uint32_t(a)) : sem::add_f16x2(cur, uint32_t(a));
        if (__atomic_compare_exchange_n(wp, &cur, nb, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
          old = cur;
          break;
        }
      }
      break;
    }
    case Type::f16:
    case Type::bf16: {
      uint16_t* hp = reinterpret_cast<uint16_t*>(p);
      uint16_t cur = __atomic_load_n(hp, __ATOMIC_RELAXED);
      while (true) {
        uint16_t nb = t == Type::bf16 ? sem::add_bf16(cur, uint16_t(a)) : sem::add_f16(cur, uint16_t(a));
        if (__atomic_compare_exchange_n(hp, &cur, nb, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
          old = cur;
          break;
        }
      }
      break;
    }
    default: cas_loop(uint32_t{}); break;
    }
    if (in.op == XOp::atom) wr(in.dst[0], widx, l, old);
  });
  flush_memory(in, widx, Access::atomic);
}

namespace {

const char* matrix_name(matrix::Op op) {
  switch (op) {
  case matrix::Op::mma: return "mma";
  case matrix::Op::wmma_mma: return "wmma.mma";
  case matrix::Op::ldmatrix: return "ldmatrix";
  case matrix::Op::stmatrix: return "stmatrix";
  case matrix::Op::movmatrix: return "movmatrix";
  case matrix::Op::wmma_load: return "wmma.load";
  case matrix::Op::wmma_store: return "wmma.store";
  }
  return "matrix instruction";
}

} // namespace

// The first byte of the 16-byte matrix row whose address `lane` holds (ldmatrix/stmatrix): shared
// memory only (ISA 9.7.14.5.15: a generic address outside .shared is undefined behaviour, which
// fails the launch here), 16-byte aligned.
uint8_t* BlockRunner::State::matrix_row(const Insn& in, uint32_t widx, int lane, bool write) {
  if (in.addr.space == AddrSpace::generic) {
    uint64_t addr = uint64_t(in.addr.offset);
    if (in.addr.slot != k_no_slot) addr += R(widx, in.addr.slot)[lane];
    if ((addr & ~(k_window_size - 1)) != k_shared_window) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "illegal address: %s row address 0x%" PRIx64 " is not in shared memory",
                    matrix_name(k.matrix[in.matrix].op), addr);
      fault(CUDA_ERROR_ILLEGAL_ADDRESS, buf, in, widx, lane);
    }
  }
  return resolve(in.addr, widx, lane, 16, write, in, false);
}

// Tensor-core and matrix-fragment instructions: the warp's registers and memory gathered here,
// the arithmetic and the layouts in emu/matrix.cpp (the one semantics both execution paths use).
void BlockRunner::State::exec_matrix(const Insn& in, uint32_t widx, uint32_t exec) {
  const matrix::Insn& mi = k.matrix[in.matrix];
  if (exec != 0xffffffffu) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%s.sync.aligned needs all 32 lanes of the warp; lanes 0x%08x do not execute it "
                  "(exited, not launched, or predicated off)",
                  matrix_name(mi.op), ~exec);
    fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, buf, in, widx, std::countr_zero(exec));
  }
  const MatrixOperands ops = matrix_operands(k, in);
  // Every source is read before any destination is written: a fragment register may also be an
  // address or another operand.
  std::array<matrix::Lanes, 32> reads;
  uint64_t tmp[k_lanes];
  for (uint32_t i = 0; i < ops.nreads && i < reads.size(); ++i) {
    const uint64_t* v = lanes(ops.reads[i], widx, exec, tmp);
    std::copy(v, v + k_lanes, reads[i].begin());
  }
  std::array<matrix::Lanes, 8> out;
  auto write_out = [&](uint32_t n) {
    for (uint32_t r = 0; r < n; ++r)
      for (int l = 0; l < k_lanes; ++l) wr(ops.writes[r], widx, l, out[r][size_t(l)]);
  };
  uint16_t latency = 0;
  auto flush = [&](Access access) {
    flush_memory(in, widx, access);
    latency = std::max(latency, mem_latency);
  };
  switch (mi.op) {
  case matrix::Op::mma:
  case matrix::Op::wmma_mma:
    matrix::mma(mi, reads.data(), out.data());
    write_out(mi.nd);
    return;
  case matrix::Op::movmatrix:
    out[0] = matrix::movmatrix(reads[0]);
    write_out(1);
    return;
  case matrix::Op::ldmatrix:
  case matrix::Op::stmatrix: {
    const bool store = mi.op == matrix::Op::stmatrix;
    uint8_t* rows[32];
    for (uint32_t r = 0; r < 8u * mi.num; ++r) rows[r] = matrix_row(in, widx, int(r), store);
    for (uint32_t i = 0; i < mi.num; ++i) {
      uint8_t* const* row = rows + 8 * i;
      for (int l = 0; l < k_lanes; ++l) {
        const matrix::PairPos p = matrix::ldmatrix_position(mi.trans, uint32_t(l));
        uint8_t* lo = row[p.lo.row] + 2 * p.lo.col;
        uint8_t* hi = row[p.hi.row] + 2 * p.hi.col;
        if (store) {
          const uint64_t v = reads[i][size_t(l)];
          store_bytes(lo, 2, v & 0xffff, false);
          store_bytes(hi, 2, (v >> 16) & 0xffff, false);
        } else {
          out[i][size_t(l)] = load_bytes(lo, 2, false) | load_bytes(hi, 2, false) << 16;
        }
      }
      // one shared-memory access per 8x8 matrix: its 8 rows of 16 bytes
      for (uint32_t r = 0; r < 8; ++r) {
        const uint32_t word = uint32_t((row[r] - shared.data()) >> 2);
        for (uint32_t w = 0; w < 4; ++w) shared_words[shared_count++] = word + w;
      }
      flush(store ? Access::store : Access::load);
    }
    if (!store) write_out(mi.num);
    mem_latency = latency;
    return;
  }
  case matrix::Op::wmma_load:
  case matrix::Op::wmma_store: {
    const bool store = mi.op == matrix::Op::wmma_store;
    const matrix::Role role = mi.role;
    const matrix::Elem type = store ? mi.d : role == matrix::Role::a ? mi.a
                                           : role == matrix::Role::b ? mi.b : mi.c;
    const matrix::Pos dm = matrix::dims(mi, role);
    const uint32_t E = matrix::elems_per_reg(type), bits = matrix::elem_bits(type);
    const uint32_t size = std::max<uint32_t>(1, bits / 8);
    const uint32_t nregs = store ? mi.na : mi.nd;
    const uint32_t leading = mi.row_major ? dm.col : dm.row;
    for (uint32_t r = 0; r < nregs; ++r) {
      for (int l = 0; l < k_lanes; ++l) {
        const uint64_t stride =
            mi.has_stride ? uint32_t(reads[store ? nregs : 0][size_t(l)]) : leading;
        uint64_t reg = store ? reads[r][size_t(l)] : 0;
        for (uint32_t j = 0; j < E; ++j) {
          const matrix::Pos p = matrix::wmma_position(mi, role, type, uint32_t(l), r * E + j);
          const uint64_t index = mi.row_major ? p.row * stride + p.col : p.col * stride + p.row;
          const uint64_t bit = index * bits;
          Addr a = in.addr;
          a.offset += int64_t(bit / 8);
          if (sector_count + 1 > int(std::size(sectors_scratch)) ||
              shared_count + 2 > int(std::size(shared_words)))
            flush(store ? Access::store : Access::load);
          uint8_t* ptr = resolve(a, widx, l, size, store, in);
          const uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
          if (bits >= 8) {
            if (store) store_bytes(ptr, size, (bits >= 64 ? reg : reg >> (j * bits)) & mask, false);
            else reg |= (load_bytes(ptr, size, false) & mask) << (bits >= 64 ? 0 : j * bits);
          } else {
            // sub-byte elements: bit (index * bits) % 8 of the byte, low bits first
            const uint32_t shift = uint32_t(bit % 8);
            if (store) {
              const uint8_t v = uint8_t((reg >> (j * bits)) & mask);
              *ptr = uint8_t((*ptr & ~(mask << shift)) | (uint64_t(v) << shift));
            } else {
              reg |= ((uint64_t(*ptr) >> shift) & mask) << (j * bits);
            }
          }
        }
        if (!store) out[r][size_t(l)] = reg;
      }
      flush(store ? Access::store : Access::load); // one load or store instruction per register
    }
    if (!store) write_out(nregs);
    mem_latency = latency;
    return;
  }
  }
}

std::span<const uint8_t> BlockRunner::State::bytes_from(uint64_t addr, uint32_t widx, int lane,
                                                       const Insn& in) {
  if (addr == 0) return {};
  const Addr a{AddrSpace::generic, k_no_slot, int64_t(addr)};
  const uint8_t* p = resolve(a, widx, lane, 1, false, in, false);
  const uint64_t window = addr & ~(k_window_size - 1);
  const uint8_t* end = nullptr;
  if (window == k_shared_window) end = shared.data() + shared_size;
  else if (window == k_local_window)
    end = local.data() + size_t(widx * k_lanes + uint32_t(lane) + 1) * k.local_bytes;
  else if (window == k_param_window) end = L.params + L.kernel->param_bytes;
  else end = reinterpret_cast<const uint8_t*>(last_alloc->base + last_alloc->size);
  return {p, size_t(end - p)};
}

// vprintf(format, args) for each lane, lowest first: the record is formatted now (exec_printf.hpp)
// and kept with the block's; the driver prints a launch's records in block order at the next
// synchronization, as many as CU_LIMIT_PRINTF_FIFO_SIZE holds.
void BlockRunner::State::exec_printf(const Insn& in, uint32_t widx, uint32_t exec) {
  each(exec, [&](int l) {
    uint8_t* frame = local.data() + size_t(widx * k_lanes + uint32_t(l)) * k.local_bytes;
    uint64_t format_addr = 0, args_addr = 0;
    std::memcpy(&format_addr, frame + in.src[0].imm, 8);
    std::memcpy(&args_addr, frame + in.src[1].imm, 8);
    auto read_string = [&](uint64_t addr) -> std::optional<std::string> {
      const auto bytes = bytes_from(addr, widx, l, in);
      const void* nul = std::memchr(bytes.data(), 0, bytes.size());
      if (!nul) {
        char buf[128];
        std::snprintf(buf, sizeof buf,
                      "illegal address: printf reads a string at 0x%" PRIx64
                      " that does not end inside its memory",
                      addr);
        fault(CUDA_ERROR_ILLEGAL_ADDRESS, buf, in, widx, l);
      }
      return std::string(reinterpret_cast<const char*>(bytes.data()),
                         static_cast<const uint8_t*>(nul) - bytes.data());
    };
    int32_t value = -1;
    if (format_addr != 0) {
      const std::string format = *read_string(format_addr);
      DevicePrintResult r = format_device_printf(format, bytes_from(args_addr, widx, l, in), read_string);
      value = r.value;
      // A launch keeps what the FIFO could hold after its own blocks' records, bounded
      // launch-wide so that a kernel printing without end cannot exhaust the host's memory.
      const uint64_t bytes = r.record.fifo_bytes, text = r.record.text.size();
      if (res.print_bytes + bytes <= L.print_fifo_bytes &&
          L.print_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes <=
              k_print_launch_factor * L.print_fifo_bytes &&
          L.print_text.fetch_add(text, std::memory_order_relaxed) + text <= k_print_launch_text) {
        res.print_bytes += bytes;
        res.prints.push_back(std::move(r.record));
      } else {
        ++res.prints_dropped;
      }
    }
    if (in.src[2].imm != k_no_slot) std::memcpy(frame + in.src[2].imm, &value, 4);
  });
}

void BlockRunner::State::exec_warp(const Insn& in, uint32_t widx, uint32_t exec) {
  auto S = [&](int k, int l) { return rd(in.src[k], widx, l); };
  switch (in.op) {
  case XOp::bar_warp:
    return; // lanes at the same position already run together
  case XOp::activemask:
    each(exec, [&](int l) { wr(in.dst[0], widx, l, exec); });
    return;
  case XOp::shfl: {
    uint64_t vals[k_lanes];
    for (int l = 0; l < k_lanes; ++l) vals[l] = in.src[0].kind == Src::Kind::reg ? R(widx, in.src[0].slot)[l] : S(0, l);
    uint64_t out[k_lanes];
    bool pv[k_lanes];
    each(exec, [&](int l) {
      uint32_t b = uint32_t(S(1, l)) & 31, c = uint32_t(S(2, l));
      uint32_t cval = c & 31, seg = (c >> 8) & 31;
      uint32_t lane = uint32_t(l);
      uint32_t max_lane = (lane & seg) | (cval & ~seg);
      uint32_t min_lane = lane & seg;
      int64_t j;
      bool p;
      switch (in.mode) {
      case k_shfl_up: j = int64_t(lane) - b; p = j >= int64_t(max_lane); break;
      case k_shfl_down: j = int64_t(lane) + b; p = j <= int64_t(max_lane); break;
      case k_shfl_bfly: j = int64_t(lane ^ b); p = j <= int64_t(max_lane); break;
      default: j = int64_t(min_lane | (b & ~seg)); p = j <= int64_t(max_lane); break;
      }
      if (!p) j = lane;
      out[l] = vals[j & 31];
      pv[l] = p;
    });
    each(exec, [&](int l) {
      wr(in.dst[0], widx, l, uint32_t(out[l]));
      if (in.ndst == 2) wr(in.dst[1], widx, l, pv[l]);
    });
    return;
  }
  case XOp::vote: {
    uint32_t ballot = 0;
    each(exec, [&](int l) {
      if (S(0, l)) ballot |= 1u << l;
    });
    for_groups(in, widx, exec, [&](uint32_t group, uint32_t lanes) {
      const uint32_t b = ballot & group;
      uint64_t r;
      switch (in.mode) {
      case k_vote_all: r = b == group; break;
      case k_vote_any: r = b != 0; break;
      case k_vote_uni: r = b == 0 || b == group; break;
      default: r = b; break;
      }
      each(lanes, [&](int l) { wr(in.dst[0], widx, l, r); });
    });
    return;
  }
  case XOp::match: {
    uint64_t vals[k_lanes];
    each(exec, [&](int l) { vals[l] = S(0, l); });
    for_groups(in, widx, exec, [&](uint32_t group, uint32_t lanes) {
      if (in.mode == 0) {
        each(lanes, [&](int l) {
          uint32_t m = 0;
          each(group, [&](int o) {
            if (vals[o] == vals[l]) m |= 1u << o;
          });
          wr(in.dst[0], widx, l, m);
        });
        return;
      }
      bool all = true;
      if (group) {
        const uint64_t first = vals[std::countr_zero(group)];
        each(group, [&](int o) { all = all && vals[o] == first; });
      }
      each(lanes, [&](int l) {
        wr(in.dst[0], widx, l, all ? group : 0);
        if (in.ndst == 2) wr(in.dst[1], widx, l, all);
      });
    });
    return;
  }
  case XOp::redux: {
    const bool is_signed = in.type == Type::s32;
    for_groups(in, widx, exec, [&](uint32_t group, uint32_t lanes) {
      uint64_t acc = 0;
      bool first = true;
      each(group, [&](int l) {
        uint32_t v = uint32_t(S(0, l));
        if (first) {
          acc = v;
          first = false;
          return;
        }
        switch (in.mode) {
        case k_atom_add: acc = uint32_t(acc + v); break;
        case k_atom_and: acc &= v; break;
        case k_atom_or: acc |= v; break;
        case k_atom_xor: acc ^= v; break;
        case k_atom_min: acc = is_signed ? uint32_t(std::min(int32_t(acc), int32_t(v))) : std::min<uint32_t>(uint32_t(acc), v); break;
        case k_atom_max: acc = is_signed ? uint32_t(std::max(int32_t(acc), int32_t(v))) : std::max<uint32_t>(uint32_t(acc), v); break;
        default: break;
        }
      });
      each(lanes, [&](int l) { wr(in.dst[0], widx, l, acc); });
    });
    return;
  }
  case XOp::elect: {
    for_groups(in, widx, exec, [&](uint32_t group, uint32_t lanes) {
      const int leader = group ? std::countr_zero(group) : -1;
      each(lanes, [&](int l) {
        wr(in.dst[0], widx, l, uint32_t(leader < 0 ? 0 : leader));
        wr(in.dst[1], widx, l, l == leader);
      });
    });
    return;
  }
  default:
    return;
  }
}

namespace {

// The fast path's operations, each exactly the general form's expression for its case
// (exec_arith): integer results are the type's bits, zero-extended; the destination's width
// masks them after.
template <class T> struct IntOps {
  using U = std::make_unsigned_t<T>;
  static constexpr unsigned W = sizeof(T) * 8;
  struct Add { static uint64_t apply(uint64_t a, uint64_t b) { return ubits(T(U(T(a)) + U(T(b)))); } };
  struct Sub { static uint64_t apply(uint64_t a, uint64_t b) { return ubits(T(U(T(a)) - U(T(b)))); } };
  struct MulLo { static uint64_t apply(uint64_t a, uint64_t b) { return ubits(U(U(T(a)) * U(T(b)))); } };
  struct MadLo {
    static uint64_t apply(uint64_t a, uint64_t b, uint64_t c) {
      return ubits(U(U(U(T(a)) * U(T(b))) + U(T(c))));
    }
  };
  struct Shl {
    static uint64_t apply(uint64_t a, uint64_t b) {
      const uint32_t s = uint32_t(b);
      return s >= W ? 0 : ubits(T(U(T(a)) << s));
    }
  };
  struct Shr {
    static uint64_t apply(uint64_t a, uint64_t b) {
      const uint32_t s = uint32_t(b);
      if constexpr (std::is_signed_v<T>) return ubits(T(T(a) >> std::min<uint32_t>(s, W - 1)));
      else return s >= W ? 0 : ubits(T(T(a) >> s));
    }
  };
  struct MinOp { static uint64_t apply(uint64_t a, uint64_t b) { return ubits(std::min(T(a), T(b))); } };
  struct MaxOp { static uint64_t apply(uint64_t a, uint64_t b) { return ubits(std::max(T(a), T(b))); } };
  // mul.wide: the full product of two 32-bit values
  struct MulWide {
    static uint64_t apply(uint64_t a, uint64_t b) {
      using Wd = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      return uint64_t(Wd(T(a)) * Wd(T(b)));
    }
  };
  template <sem::Cmp C> struct Setp {
    static bool apply(uint64_t a, uint64_t b) { return sem::cmp_int<T>(C, T(a), T(b)); }
  };
};

struct And { static uint64_t apply(uint64_t a, uint64_t b) { return a & b; } };
struct Or { static uint64_t apply(uint64_t a, uint64_t b) { return a | b; } };
struct Xor { static uint64_t apply(uint64_t a, uint64_t b) { return a ^ b; } };
struct Selp { static uint64_t apply(uint64_t a, uint64_t b, uint64_t c) { return c ? a : b; } };
struct AddF32 { static uint64_t apply(uint64_t a, uint64_t b) { return bits(sem::add_f32(as_f32(a), as_f32(b))); } };
struct SubF32 { static uint64_t apply(uint64_t a, uint64_t b) { return bits(sem::sub_f32(as_f32(a), as_f32(b))); } };
struct MulF32 { static uint64_t apply(uint64_t a, uint64_t b) { return bits(sem::mul_f32(as_f32(a), as_f32(b))); } };
struct FmaF32 {
  static uint64_t apply(uint64_t a, uint64_t b, uint64_t c) {
    return bits(sem::fma_f32(as_f32(a), as_f32(b), as_f32(c)));
  }
};
template <sem::Cmp C> struct SetpF32 {
  static bool apply(uint64_t a, uint64_t b) { return sem::cmp_f32(C, as_f32(a), as_f32(b), false); }
};

} // namespace

template <class SetpOf>
BlockRunner::State::Handler BlockRunner::State::pick_cmp(uint8_t mode) {
  using S = BlockRunner::State;
  switch (sem::Cmp(mode)) {
  case sem::Cmp::eq: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::eq>>;
  case sem::Cmp::ne: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::ne>>;
  case sem::Cmp::lt: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::lt>>;
  case sem::Cmp::le: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::le>>;
  case sem::Cmp::gt: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::gt>>;
  case sem::Cmp::ge: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::ge>>;
  case sem::Cmp::lo: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::lo>>;
  case sem::Cmp::ls: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::ls>>;
  case sem::Cmp::hi: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::hi>>;
  case sem::Cmp::hs: return &S::fast_setp<typename SetpOf::template At<sem::Cmp::hs>>;
  default: return nullptr;
  }
}

namespace {
template <class T> struct IntSetp {
  template <sem::Cmp C> using At = typename IntOps<T>::template Setp<C>;
};
struct F32Setp {
  template <sem::Cmp C> using At = SetpF32<C>;
};
} // namespace

// The specialized form of `in`, or the general one. Only forms whose every modifier is covered
// are specialized; the rest stay general.
BlockRunner::State::Handler BlockRunner::State::pick(const Insn& in) {
  using S = BlockRunner::State;
  const Handler general = &S::execute;
  const uint32_t flags = in.flags;
  // f(IntOps<T>{}) for the integer type T of `t`, or no handler for other types
  auto int_type = [&](Type t, auto&& f) -> Handler {
    switch (t) {
    case Type::s32: return f(IntOps<int32_t>{});
    case Type::u32:
    case Type::b32: return f(IntOps<uint32_t>{});
    case Type::s64: return f(IntOps<int64_t>{});
    case Type::u64:
    case Type::b64: return f(IntOps<uint64_t>{});
    default: return nullptr;
    }
  };
  Handler h = nullptr;
  switch (in.op) {
  case XOp::mov:
    if (in.nsrc == 1 && in.ndst == 1) h = &S::fast_mov;
    break;
  case XOp::ld:
  case XOp::st:
    h = &S::exec_memory; // tries fast_memory first
    break;
  case XOp::and_:
    if (!is_half(in.type)) h = &S::fast2<And>;
    break;
  case XOp::or_:
    if (!is_half(in.type)) h = &S::fast2<Or>;
    break;
  case XOp::xor_:
    if (!is_half(in.type)) h = &S::fast2<Xor>;
    break;
  case XOp::selp:
    h = &S::fast3<Selp>;
    break;
  case XOp::cvta:
  case XOp::cvta_to:
    if (in.mode == 0) {
      const bool narrow = in.type == Type::u32 || in.type == Type::b32;
      h = narrow ? Handler(&S::fast_cvta_narrow) : Handler(&S::fast_mov);
    }
    break;
  case XOp::add:
  case XOp::sub:
  case XOp::mul:
  case XOp::fma:
  case XOp::mad:
    if (in.type == Type::f32) {
      if (flags & (k_f_ftz | k_f_sat)) break;
      if (!sem::detail::is_rn(round_of(in.mode))) break;
      if (in.op == XOp::add) h = &S::fast2<AddF32>;
      else if (in.op == XOp::sub) h = &S::fast2<SubF32>;
      else if (in.op == XOp::mul) h = &S::fast2<MulF32>;
      else h = &S::fast3<FmaF32>; // fma and mad.f32: one rounding
      break;
    }
    if (flags & (k_f_cc | k_f_sat | k_f_hi | k_f_carry_in)) break;
    if (flags & k_f_wide) {
      if (in.op != XOp::mul) break;
      if (in.type == Type::s32) h = &S::fast2<IntOps<int32_t>::MulWide>;
      else if (in.type == Type::u32) h = &S::fast2<IntOps<uint32_t>::MulWide>;
      break;
    }
    h = int_type(in.type, [&](auto ops) -> Handler {
      using O = decltype(ops);
      switch (in.op) {
      case XOp::add: return &S::fast2<typename O::Add>;
      case XOp::sub: return &S::fast2<typename O::Sub>;
      case XOp::mul: return &S::fast2<typename O::MulLo>;
      case XOp::mad: return &S::fast3<typename O::MadLo>;
      default: return nullptr;
      }
    });
    break;
  case XOp::shl:
  case XOp::shr:
    h = int_type(in.type, [&](auto ops) -> Handler {
      using O = decltype(ops);
      return in.op == XOp::shl ? Handler(&S::fast2<typename O::Shl>)
                               : Handler(&S::fast2<typename O::Shr>);
    });
    break;
  case XOp::min:
  case XOp::max:
    if (flags & k_f_relu) break;
    h = int_type(in.type, [&](auto ops) -> Handler {
      using O = decltype(ops);
      return in.op == XOp::min ? Handler(&S::fast2<typename O::MinOp>)
                               : Handler(&S::fast2<typename O::MaxOp>);
    });
    break;
  case XOp::setp:
    if (in.mode2 != k_bool_none) break;
    if (in.type2 == Type::f32) {
      if (!(flags & k_f_ftz)) h = pick_cmp<F32Setp>(in.mode);
      break;
    }
    switch (in.type2) {
    case Type::s32: h = pick_cmp<IntSetp<int32_t>>(in.mode); break;
    case Type::u32:
    case Type::b32: h = pick_cmp<IntSetp<uint32_t>>(in.mode); break;
    case Type::s64: h = pick_cmp<IntSetp<int64_t>>(in.mode); break;
    case Type::u64:
    case Type::b64: h = pick_cmp<IntSetp<uint64_t>>(in.mode); break;
    default: break;
    }
    break;
  default:
    break;
  }
  return h ? h : general;
}

BlockRunner::BlockRunner(LaunchShared& launch) : m_state(std::make_unique<State>(launch)) {}
BlockRunner::~BlockRunner() = default;

BlockResult BlockRunner::run(uint64_t block_linear) {
  State& s = *m_state;
  s.res = BlockResult{};
  s.block_linear = block_linear;
  s.ctaid[0] = uint32_t(block_linear % s.L.grid.x);
  s.ctaid[1] = uint32_t((block_linear / s.L.grid.x) % s.L.grid.y);
  s.ctaid[2] = uint32_t(block_linear / (uint64_t(s.L.grid.x) * s.L.grid.y));
  s.frame.uniform[jit::k_u_ctaid_x] = s.ctaid[0];
  s.frame.uniform[jit::k_u_ctaid_y] = s.ctaid[1];
  s.frame.uniform[jit::k_u_ctaid_z] = s.ctaid[2];
  s.frame.uniform[jit::k_u_smid] = block_linear % DeviceLimits::k_sm_count;
  // Registers start at zero, or seeded values under a fill seed; those written before every read
  // need not be set (CompiledKernel::zeroed_slots).
  if (s.L.fill_seed != 0) {
    s.fill(block_linear);
  } else {
    if (s.k.zeroed_slots.size() * 2 >= s.k.num_slots) {
      std::fill(s.regs.begin(), s.regs.end(), 0);
    } else {
      for (uint32_t w = 0; w < s.nwarps; ++w)
        for (uint32_t slot : s.k.zeroed_slots) std::fill_n(s.R(w, slot), k_lanes, 0);
    }
    std::fill(s.local.begin(), s.local.end(), 0);
    std::fill(s.shared.begin(), s.shared.end(), 0);
  }
  s.sector_count = 0;
  s.shared_count = 0;
  s.local_bytes = 0;
  s.param_touched = false;
  s.block_loads.clear();
  s.block_stores.clear();
  s.loads_compact_at = s.stores_compact_at = k_compact_first;
  s.load_requests = 0;
  s.volatile_requests = 0;
  s.loads_overflowed = false;
  for (auto& slots : s.history_slots) slots.reset();
  if (++s.history_block == (1u << 20)) {
    std::fill(s.history.begin(), s.history.end(), State::Remembered{});
    s.history_block = 1;
  }
  // PTX arithmetic assumes the default floating-point environment, whatever the application set.
  sem::FpEnvGuard fp_env;
  try {
    if (!s.run_block()) {
      uint32_t waiting = 0;
      for (const auto& w : s.warps) waiting += uint32_t(std::popcount(w.waiting & w.alive));
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "barrier deadlock: kernel %s, block (%u,%u,%u): %u threads wait at barriers "
                    "that the other %u threads (%u exited) never reach",
                    s.k.name.c_str(), s.ctaid[0], s.ctaid[1], s.ctaid[2], waiting,
                    s.threads - waiting, s.exited);
      s.res.status = CUDA_ERROR_LAUNCH_TIMEOUT;
      s.res.message = buf;
    }
    s.flush_budget();
    s.finish_cost();
  } catch (const Fault& f) {
    s.res.status = f.status;
    s.res.message = f.message;
  }
  return s.res;
}

} // namespace hone::emu
