#include "emu/exec_defined.hpp"

#include <algorithm>
#include <deque>

namespace hone::emu {

namespace {

// A set of slots as bits.
struct Slots {
  std::vector<uint64_t> bits;
  explicit Slots(uint32_t n, bool all) : bits((n + 63) / 64, all ? ~0ull : 0) {}
  bool has(uint32_t s) const { return bits[s >> 6] >> (s & 63) & 1; }
  void add(uint32_t s) { bits[s >> 6] |= 1ull << (s & 63); }
  // this = this & o; whether it changed
  bool meet(const Slots& o) {
    bool changed = false;
    for (size_t i = 0; i < bits.size(); ++i) {
      const uint64_t v = bits[i] & o.bits[i];
      changed |= v != bits[i];
      bits[i] = v;
    }
    return changed;
  }
};

} // namespace

std::vector<uint32_t> slots_to_zero(const CompiledKernel& k) {
  const uint32_t n = uint32_t(k.code.size());
  const uint32_t slots = k.num_slots;
  if (n == 0 || slots == 0) return {};
  // written[pc]: slots every path from the entry has written (unguarded) before pc. Start from
  // "all" everywhere but the entry and intersect over the paths found (the greatest fixpoint).
  std::vector<Slots> written(n, Slots(slots, true));
  written[0] = Slots(slots, false);
  auto successors = [&](uint32_t pc, auto&& f) {
    const Insn& in = k.code[pc];
    const bool guarded = in.guard != k_no_slot;
    if (in.op == XOp::bra) {
      if (in.target < n) f(in.target);
      if (guarded && pc + 1 < n) f(pc + 1);
    } else if (in.op == XOp::exit || in.op == XOp::trap) {
      if (guarded && pc + 1 < n) f(pc + 1);
    } else if (pc + 1 < n) {
      f(pc + 1);
    }
  };
  std::deque<uint32_t> work{0};
  std::vector<uint8_t> queued(n, 0);
  queued[0] = 1;
  while (!work.empty()) {
    const uint32_t pc = work.front();
    work.pop_front();
    queued[pc] = 0;
    Slots out = written[pc];
    const Insn& in = k.code[pc];
    if (in.guard == k_no_slot) {
      for (const Src& d : in.dst)
        if (d.kind == Src::Kind::reg) out.add(d.slot);
      if ((in.flags & k_f_cc) && k.carry_slot != k_no_slot) out.add(k.carry_slot);
      if (is_matrix(in.op)) {
        const MatrixOperands m = matrix_operands(k, in);
        for (uint32_t i = 0; i < m.nwrites; ++i)
          if (m.writes[i].kind == Src::Kind::reg) out.add(m.writes[i].slot);
      }
    }
    successors(pc, [&](uint32_t next) {
      if (written[next].meet(out) && !queued[next]) {
        queued[next] = 1;
        work.push_back(next);
      }
    });
  }
  // Unreachable code never runs: its reads do not count.
  std::vector<uint8_t> reached(n, 0);
  {
    std::vector<uint32_t> stack{0};
    reached[0] = 1;
    while (!stack.empty()) {
      const uint32_t pc = stack.back();
      stack.pop_back();
      successors(pc, [&](uint32_t next) {
        if (!reached[next]) {
          reached[next] = 1;
          stack.push_back(next);
        }
      });
    }
  }
  Slots zero(slots, false);
  auto read = [&](uint32_t pc, uint32_t s) {
    if (s != k_no_slot && !written[pc].has(s)) zero.add(s);
  };
  for (uint32_t pc = 0; pc < n; ++pc) {
    if (!reached[pc]) continue;
    const Insn& in = k.code[pc];
    for (const Src& s : in.src)
      if (s.kind == Src::Kind::reg) read(pc, s.slot);
    read(pc, in.addr.slot);
    read(pc, in.guard);
    if ((in.flags & k_f_carry_in) || in.op == XOp::addc || in.op == XOp::subc) read(pc, k.carry_slot);
    if (is_matrix(in.op)) {
      const MatrixOperands m = matrix_operands(k, in);
      for (uint32_t i = 0; i < m.nreads; ++i)
        if (m.reads[i].kind == Src::Kind::reg) read(pc, m.reads[i].slot);
    }
    // a shuffle reads its source in every lane, those that never ran included
    if (in.op == XOp::shfl && in.src[0].kind == Src::Kind::reg) zero.add(in.src[0].slot);
  }
  std::vector<uint32_t> out;
  for (uint32_t s = 0; s < slots; ++s)
    if (zero.has(s)) out.push_back(s);
  return out;
}

} // namespace hone::emu
