// Registers, sources, special registers and destinations as 32-lane vectors.
#include "emu/jit/gen.hpp"

namespace hone::emu::jit {

llvm::Value* Gen::field_ptr(size_t offset, llvm::Type* type) {
  return B.CreateBitCast(B.CreateConstInBoundsGEP1_64(i8, frame, offset), type->getPointerTo());
}

llvm::Value* Gen::load_field(size_t offset, llvm::Type* type) {
  auto* l = B.CreateLoad(type, field_ptr(offset, type));
  tag(l, m_tbaa_frame);
  return l;
}

void Gen::store_field(size_t offset, llvm::Value* v) {
  auto* s = B.CreateStore(v, field_ptr(offset, v->getType()));
  tag(s, m_tbaa_frame);
}

llvm::Value* Gen::reg_ptr(uint32_t slot) {
  return B.CreateBitCast(B.CreateConstInBoundsGEP1_64(i64, regs, uint64_t(slot) * k_lanes),
                         v64->getPointerTo());
}

llvm::Value* Gen::load_reg(uint32_t slot) {
  if (auto it = m_known_regs.find(slot); it != m_known_regs.end()) return it->second;
  auto* l = B.CreateAlignedLoad(v64, reg_ptr(slot), llvm::Align(8));
  tag(l, m_tbaa_regs);
  m_known_regs[slot] = l;
  return l;
}

// Lanes outside `mask` keep their values, as each() in the interpreter writes only exec lanes.
void Gen::store_reg(uint32_t slot, llvm::Value* v, llvm::Value* mask) {
  llvm::Value* merged = B.CreateSelect(mask, v, load_reg(slot));
  auto* s = B.CreateAlignedStore(merged, reg_ptr(slot), llvm::Align(8));
  tag(s, m_tbaa_regs);
  m_known_regs[slot] = merged;
}

llvm::Value* Gen::ready_ptr(uint32_t slot) {
  return B.CreateConstInBoundsGEP1_64(i64, ready, slot);
}

llvm::Value* Gen::load_ready(uint32_t slot) {
  if (auto it = m_known_ready.find(slot); it != m_known_ready.end()) return it->second;
  auto* l = B.CreateLoad(i64, ready_ptr(slot));
  tag(l, m_tbaa_ready);
  m_known_ready[slot] = l;
  return l;
}

void Gen::store_ready(uint32_t slot, llvm::Value* v) {
  auto* s = B.CreateStore(v, ready_ptr(slot));
  tag(s, m_tbaa_ready);
  m_known_ready[slot] = v;
}

// dest() and wr(): the value masked to the register's width.
void Gen::write(const Src& d, llvm::Value* v, llvm::Value* mask) {
  if (d.kind != Src::Kind::reg) return;
  const uint8_t w = k.slot_bytes[d.slot];
  if (w < 8) v = B.CreateAnd(v, splat((1ull << (w * 8)) - 1));
  store_reg(d.slot, v, mask);
}

llvm::Value* Gen::sreg(Sreg s) {
  auto lanes_of = [&](auto f) {
    std::vector<llvm::Constant*> c;
    for (uint32_t l = 0; l < k_lanes; ++l) c.push_back(llvm::ConstantInt::get(i64, f(l)));
    return llvm::ConstantVector::get(c);
  };
  auto tid_lanes = [&](unsigned dim) {
    llvm::Value* p = B.CreateBitCast(B.CreateConstInBoundsGEP1_64(i32, tid, dim * k_lanes),
                                     v32->getPointerTo());
    auto* l = B.CreateAlignedLoad(v32, p, llvm::Align(4));
    tag(l, m_tbaa_frame);
    return B.CreateZExt(l, v64);
  };
  auto uni = [&](Uniform u) { return B.CreateVectorSplat(k_lanes, uniform[u]); };
  auto scalar = [&](llvm::Value* v) { return B.CreateVectorSplat(k_lanes, v); };
  auto low32 = [&](llvm::Value* v) { return B.CreateZExt(B.CreateTrunc(v, i32), i64); };
  // the interpreter's globaltimer(): the launch's start plus the warp's cycles in ns
  auto timer = [&] {
    return B.CreateAdd(uniform[k_u_globaltimer],
                       B.CreateUDiv(B.CreateMul(get(l_cycles), B.getInt64(1'000'000)),
                                    B.getInt64(DeviceLimits::k_clock_khz)));
  };
  switch (s) {
  case Sreg::tid_x: return tid_lanes(0);
  case Sreg::tid_y: return tid_lanes(1);
  case Sreg::tid_z: return tid_lanes(2);
  case Sreg::ntid_x: return uni(k_u_ntid_x);
  case Sreg::ntid_y: return uni(k_u_ntid_y);
  case Sreg::ntid_z: return uni(k_u_ntid_z);
  case Sreg::ctaid_x: return uni(k_u_ctaid_x);
  case Sreg::ctaid_y: return uni(k_u_ctaid_y);
  case Sreg::ctaid_z: return uni(k_u_ctaid_z);
  case Sreg::nctaid_x: return uni(k_u_nctaid_x);
  case Sreg::nctaid_y: return uni(k_u_nctaid_y);
  case Sreg::nctaid_z: return uni(k_u_nctaid_z);
  case Sreg::laneid: return lanes_of([](uint32_t l) { return uint64_t(l); });
  case Sreg::warpid: return scalar(B.CreateZExt(widx, i64));
  case Sreg::nwarpid: return splat(64);
  case Sreg::smid: return uni(k_u_smid);
  case Sreg::nsmid: return splat(DeviceLimits::k_sm_count);
  case Sreg::gridid: return splat(1);
  case Sreg::lanemask_eq: return lanes_of([](uint32_t l) { return uint64_t(1u << l); });
  case Sreg::lanemask_le:
    return lanes_of([](uint32_t l) { return uint64_t(l == 31 ? 0xffffffffu : (2u << l) - 1); });
  case Sreg::lanemask_lt: return lanes_of([](uint32_t l) { return uint64_t((1u << l) - 1); });
  case Sreg::lanemask_ge: return lanes_of([](uint32_t l) { return uint64_t(~((1u << l) - 1)); });
  case Sreg::lanemask_gt:
    return lanes_of([](uint32_t l) { return uint64_t(l == 31 ? 0u : ~((2u << l) - 1)); });
  case Sreg::clock: return scalar(low32(get(l_cycles)));
  case Sreg::clock_hi: return scalar(low32(B.CreateLShr(get(l_cycles), 32)));
  case Sreg::clock64: return scalar(get(l_cycles));
  case Sreg::globaltimer: return scalar(timer());
  case Sreg::globaltimer_lo: return scalar(low32(timer()));
  case Sreg::globaltimer_hi: return scalar(low32(B.CreateLShr(timer(), 32)));
  case Sreg::total_smem_size:
  case Sreg::aggr_smem_size: return uni(k_u_shared_size);
  case Sreg::dynamic_smem_size: return uni(k_u_dynamic_shared);
  case Sreg::envreg1: return uni(k_u_envreg1);
  case Sreg::envreg2: return uni(k_u_envreg2);
  case Sreg::zero: return splat(0);
  case Sreg::one: return splat(1);
  }
  return splat(0);
}

// lanes()/rd(): a source's 32 lane values.
llvm::Value* Gen::src(const Src& s) {
  llvm::Value* v = nullptr;
  switch (s.kind) {
  case Src::Kind::reg: v = load_reg(s.slot); break;
  case Src::Kind::imm: v = splat(s.imm); break;
  case Src::Kind::sreg: v = sreg(s.sreg); break;
  case Src::Kind::none: v = splat(0); break;
  }
  if (s.negate) v = B.CreateZExt(B.CreateICmpEQ(v, splat(0)), v64);
  return v;
}

llvm::Value* Gen::lane_ids() {
  std::vector<llvm::Constant*> c;
  for (uint32_t l = 0; l < k_lanes; ++l) c.push_back(llvm::ConstantInt::get(i32, l));
  return llvm::ConstantVector::get(c);
}

} // namespace hone::emu::jit
