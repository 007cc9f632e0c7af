// Warp-level forms: shuffles, votes, reductions, matches, elect.
#include "emu/jit/gen.hpp"

namespace hone::emu::jit {

// The warp-level forms of exec_warp(), for a converged warp whose lanes in `exec` all arrived, all
// naming the same membermask (emit_instruction() leaves other cases to the interpreter).
void Gen::emit_warp(const Insn& in, llvm::Value* exec, llvm::Value* mask) {
  auto splat32 = [&](llvm::Value* v) { return B.CreateVectorSplat(k_lanes, v); };
  auto c32 = [&](uint32_t v) {
    return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes),
                                          llvm::ConstantInt::get(i32, v));
  };
  auto bits_of = [&](llvm::Value* lanes_true) { return B.CreateBitCast(lanes_true, i32); };
  auto first_lane = [&] {
    return B.CreateAnd(B.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, exec, B.getFalse()),
                       B.getInt32(31));
  };
  // the lanes each lane's vote, match, reduction or election is over: its membermask's lanes
  // among those executing (exec_warp's for_groups)
  auto group_of = [&] {
    const Src& ms = in.op == XOp::elect ? in.src[0] : in.src[1];
    return B.CreateAnd(exec, B.CreateExtractElement(narrow(src(ms), 32), first_lane()));
  };
  switch (in.op) {
  case XOp::activemask:
    write(in.dst[0], B.CreateVectorSplat(k_lanes, B.CreateZExt(exec, i64)), mask);
    return;
  case XOp::shfl: {
    // every lane's value, read from the lane the shuffle names (any lane, live or not)
    llvm::Value* lane = lane_ids();
    llvm::Value* b = B.CreateAnd(narrow(src(in.src[1]), 32), c32(31));
    llvm::Value* c = narrow(src(in.src[2]), 32);
    llvm::Value* cval = B.CreateAnd(c, c32(31));
    llvm::Value* seg = B.CreateAnd(B.CreateLShr(c, c32(8)), c32(31));
    llvm::Value* not_seg = B.CreateXor(seg, c32(~0u));
    llvm::Value* max_lane = B.CreateOr(B.CreateAnd(lane, seg), B.CreateAnd(cval, not_seg));
    llvm::Value* j = nullptr;
    llvm::Value* p = nullptr;
    switch (in.mode) {
    case k_shfl_up:
      j = B.CreateSub(lane, b);
      p = B.CreateICmpSGE(j, max_lane);
      break;
    case k_shfl_down:
      j = B.CreateAdd(lane, b);
      p = B.CreateICmpSLE(j, max_lane);
      break;
    case k_shfl_bfly:
      j = B.CreateXor(lane, b);
      p = B.CreateICmpSLE(j, max_lane);
      break;
    default:
      j = B.CreateOr(B.CreateAnd(lane, seg), B.CreateAnd(b, not_seg));
      p = B.CreateICmpSLE(j, max_lane);
      break;
    }
    j = B.CreateAnd(B.CreateSelect(p, j, lane), c32(31));
    llvm::Value* row = nullptr;
    if (in.src[0].kind == Src::Kind::reg) {
      row = B.CreateBitCast(reg_ptr(in.src[0].slot), i64->getPointerTo());
    } else {
      llvm::AllocaInst* tmp = nullptr;
      {
        llvm::IRBuilder<> at(&F->getEntryBlock(), F->getEntryBlock().begin());
        tmp = at.CreateAlloca(v64);
      }
      B.CreateStore(src(in.src[0]), tmp);
      row = B.CreateBitCast(tmp, i64->getPointerTo());
    }
    llvm::Value* ptrs = B.CreateGEP(i64, row, B.CreateZExt(j, v64));
    auto* vals = B.CreateMaskedGather(v64, ptrs, llvm::Align(8), mask, splat(0));
    tag(vals, m_tbaa_regs);
    write(in.dst[0], B.CreateAnd(vals, splat(0xffffffffu)), mask);
    if (in.ndst == 2) write(in.dst[1], B.CreateZExt(p, v64), mask);
    return;
  }
  case XOp::vote: {
    llvm::Value* group = group_of();
    llvm::Value* ballot = B.CreateAnd(bits_of(B.CreateICmpNE(src(in.src[0]), splat(0))), group);
    llvm::Value* r = nullptr;
    switch (in.mode) {
    case k_vote_all: r = B.CreateZExt(B.CreateICmpEQ(ballot, group), i64); break;
    case k_vote_any: r = B.CreateZExt(B.CreateICmpNE(ballot, B.getInt32(0)), i64); break;
    case k_vote_uni:
      r = B.CreateZExt(B.CreateOr(B.CreateICmpEQ(ballot, B.getInt32(0)), B.CreateICmpEQ(ballot, group)), i64);
      break;
    default: r = B.CreateZExt(ballot, i64); break;
    }
    write(in.dst[0], B.CreateVectorSplat(k_lanes, r), mask);
    return;
  }
  case XOp::redux: {
    const bool is_signed = in.type == PType::s32;
    llvm::Value* v = narrow(src(in.src[0]), 32);
    llvm::Intrinsic::ID id = llvm::Intrinsic::vector_reduce_add;
    uint32_t identity = 0;
    switch (in.mode) {
    case k_atom_and: id = llvm::Intrinsic::vector_reduce_and; identity = ~0u; break;
    case k_atom_or: id = llvm::Intrinsic::vector_reduce_or; break;
    case k_atom_xor: id = llvm::Intrinsic::vector_reduce_xor; break;
    case k_atom_min:
      id = is_signed ? llvm::Intrinsic::vector_reduce_smin : llvm::Intrinsic::vector_reduce_umin;
      identity = is_signed ? 0x7fffffffu : ~0u;
      break;
    case k_atom_max:
      id = is_signed ? llvm::Intrinsic::vector_reduce_smax : llvm::Intrinsic::vector_reduce_umax;
      identity = is_signed ? 0x80000000u : 0u;
      break;
    default: break;
    }
    llvm::Value* group = group_of();
    llvm::Value* acc = B.CreateUnaryIntrinsic(id, B.CreateSelect(mask_of(group), v, c32(identity)));
    // an empty group (a membermask without the lane itself: undefined) gives 0, as exec_warp
    acc = B.CreateSelect(B.CreateICmpEQ(group, B.getInt32(0)), B.getInt32(0), acc);
    write(in.dst[0], B.CreateVectorSplat(k_lanes, B.CreateZExt(acc, i64)), mask);
    return;
  }
  case XOp::match: {
    llvm::Value* vals = src(in.src[0]);
    llvm::Value* group = group_of();
    if (in.mode == 0) {
      // .any: each lane, the lanes of its group holding its value
      llvm::Value* out = splat(0);
      for (uint32_t l = 0; l < k_lanes; ++l) {
        llvm::Value* same = bits_of(B.CreateICmpEQ(vals, B.CreateVectorSplat(k_lanes, B.CreateExtractElement(vals, l))));
        out = B.CreateInsertElement(out, B.CreateZExt(B.CreateAnd(same, group), i64), l);
      }
      write(in.dst[0], out, mask);
    } else {
      // the group's first lane (none when the group is empty: then all of nothing agree)
      llvm::Value* lead = B.CreateAnd(B.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, group, B.getFalse()),
                                      B.getInt32(31));
      llvm::Value* first = B.CreateVectorSplat(k_lanes, B.CreateExtractElement(vals, lead));
      llvm::Value* differ = B.CreateAnd(bits_of(B.CreateICmpNE(vals, first)), group);
      llvm::Value* all = B.CreateICmpEQ(differ, B.getInt32(0));
      write(in.dst[0], B.CreateVectorSplat(k_lanes, B.CreateZExt(B.CreateSelect(all, group, B.getInt32(0)), i64)), mask);
      if (in.ndst == 2) write(in.dst[1], B.CreateVectorSplat(k_lanes, B.CreateZExt(all, i64)), mask);
    }
    return;
  }
  case XOp::elect: {
    llvm::Value* members = group_of();
    llvm::Value* none = B.CreateICmpEQ(members, B.getInt32(0));
    llvm::Value* leader = B.CreateSelect(none, B.getInt32(0),
                                         B.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, members, B.getFalse()));
    write(in.dst[0], B.CreateVectorSplat(k_lanes, B.CreateZExt(leader, i64)), mask);
    llvm::Value* is_leader = B.CreateAnd(B.CreateICmpEQ(lane_ids(), splat32(leader)),
                                         B.CreateVectorSplat(k_lanes, B.CreateNot(none)));
    if (in.ndst == 2) write(in.dst[1], B.CreateZExt(is_leader, v64), mask);
    return;
  }
  default:
    return;
  }
}

} // namespace hone::emu::jit
