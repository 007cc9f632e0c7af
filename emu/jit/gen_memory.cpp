// ld and st of global and shared memory made by compiled code.
#include "emu/jit/gen.hpp"

namespace hone::emu::jit {

// Memory instructions compiled code makes itself (fast_memory()'s cases, and atomics): ld and
// st of global, shared or local memory, not volatile, elements of 1 to 8 bytes, up to 4 of them;
// integer atom and red on global or shared memory.
bool Gen::memory_form(const Insn& in) const {
  const bool atomic = in.op == XOp::atom || in.op == XOp::red;
  if (in.op != XOp::ld && in.op != XOp::st && !atomic) return false;
  if (in.flags & k_f_volatile) return false;
  const AddrSpace space = in.addr.space;
  if (space != AddrSpace::global && space != AddrSpace::shared && space != AddrSpace::generic &&
      (atomic || space != AddrSpace::local))
    return false;
  const uint32_t esize = ptx::type_size(in.type);
  if (atomic) return atomic_form(in);
  if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return false;
  return in.vec == 1 || in.vec == 2 || in.vec == 4;
}

// exec_atomic()'s integer forms (its CAS loop of atomic_apply, lane by lane).
bool Gen::atomic_form(const Insn& in) const {
  switch (in.type) {
  case PType::b32:
  case PType::u32:
  case PType::s32:
  case PType::b64:
  case PType::u64:
  case PType::s64:
    break;
  default:
    return false; // floats and packed halves: the helper's
  }
  switch (in.mode) {
  case k_atom_add:
  case k_atom_min:
  case k_atom_max:
  case k_atom_inc:
  case k_atom_dec:
  case k_atom_and:
  case k_atom_or:
  case k_atom_xor:
  case k_atom_exch:
  case k_atom_cas:
    return true;
  default:
    return false;
  }
}

// The atomic operation of `in` at host addresses `host`, lane by lane in lane order, each one
// atomic (other blocks may run at once on other host threads); atom's results to its destination.
void Gen::emit_atomic(const Insn& in, llvm::Value* host, llvm::Value* exec, llvm::Value* mask,
                      bool block_local) {
  const IntInfo t = int_info(in.type);
  llvm::IntegerType* et = B.getIntNTy(t.width);
  llvm::Value* a = narrow(src(in.src[0]), t.width);
  llvm::Value* b = in.nsrc > 1 ? narrow(src(in.src[1]), t.width) : nullptr;
  const auto ordering = llvm::AtomicOrdering::Monotonic;
  llvm::BasicBlock* entry = B.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(C, "", F);
  auto* body = llvm::BasicBlock::Create(C, "", F);
  auto* done = llvm::BasicBlock::Create(C, "", F);
  B.CreateBr(loop);
  B.SetInsertPoint(loop);
  llvm::PHINode* left = B.CreatePHI(i32, 2);
  llvm::PHINode* olds = B.CreatePHI(vec(et), 2);
  left->addIncoming(exec, entry);
  olds->addIncoming(llvm::Constant::getNullValue(vec(et)), entry);
  B.CreateCondBr(B.CreateICmpEQ(left, B.getInt32(0)), done, body);
  B.SetInsertPoint(body);
  llvm::Value* l = B.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, left, B.getTrue());
  llvm::Value* p = B.CreateIntToPtr(B.CreateExtractElement(host, l), et->getPointerTo());
  llvm::Value* al = B.CreateExtractElement(a, l);
  llvm::Value* old = nullptr;
  // atomic_apply(): the new value from the old one
  auto apply = [&](llvm::Value* cur) -> llvm::Value* {
    llvm::Value* zero = llvm::ConstantInt::get(et, 0);
    llvm::Value* one = llvm::ConstantInt::get(et, 1);
    switch (in.mode) {
    case k_atom_add: return B.CreateAdd(cur, al);
    case k_atom_and: return B.CreateAnd(cur, al);
    case k_atom_or: return B.CreateOr(cur, al);
    case k_atom_xor: return B.CreateXor(cur, al);
    case k_atom_exch: return al;
    case k_atom_min: // std::min(old, a): a < old ? a : old
      return B.CreateSelect(t.is_signed ? B.CreateICmpSLT(al, cur) : B.CreateICmpULT(al, cur), al, cur);
    case k_atom_max: // std::max(old, a): old < a ? a : old
      return B.CreateSelect(t.is_signed ? B.CreateICmpSLT(cur, al) : B.CreateICmpULT(cur, al), al, cur);
    case k_atom_cas: return B.CreateSelect(B.CreateICmpEQ(cur, al), B.CreateExtractElement(b, l), cur);
    case k_atom_inc: return B.CreateSelect(B.CreateICmpUGE(cur, al), zero, B.CreateAdd(cur, one));
    default: // dec
      return B.CreateSelect(B.CreateOr(B.CreateICmpEQ(cur, zero), B.CreateICmpUGT(cur, al)), al,
                            B.CreateSub(cur, one));
    }
  };
  const llvm::Align align(t.width / 8);
  if (block_local) {
    // shared memory: only this block's host thread touches it, so a plain read-modify-write is
    // what an atomic one would do
    auto* cur = B.CreateAlignedLoad(et, p, align);
    tag(cur, m_tbaa_memory);
    auto* st = B.CreateAlignedStore(apply(cur), p, align);
    tag(st, m_tbaa_memory);
    old = cur;
  } else {
    using Op = llvm::AtomicRMWInst::BinOp;
    auto rmw = [&](Op op) { return B.CreateAtomicRMW(op, p, al, align, ordering); };
    switch (in.mode) {
    case k_atom_add: old = rmw(Op::Add); break;
    case k_atom_and: old = rmw(Op::And); break;
    case k_atom_or: old = rmw(Op::Or); break;
    case k_atom_xor: old = rmw(Op::Xor); break;
    case k_atom_exch: old = rmw(Op::Xchg); break;
    case k_atom_min: old = rmw(t.is_signed ? Op::Min : Op::UMin); break;
    case k_atom_max: old = rmw(t.is_signed ? Op::Max : Op::UMax); break;
    case k_atom_cas: {
      auto* x = B.CreateAtomicCmpXchg(p, al, B.CreateExtractElement(b, l), align, ordering, ordering);
      old = B.CreateExtractValue(x, 0);
      break;
    }
    default: {
      // inc and dec: a compare-and-swap loop, as the interpreter's
      llvm::BasicBlock* from = B.GetInsertBlock();
      auto* retry = llvm::BasicBlock::Create(C, "", F);
      auto* swapped = llvm::BasicBlock::Create(C, "", F);
      auto* first = B.CreateLoad(et, p);
      first->setAtomic(ordering);
      first->setAlignment(align);
      B.CreateBr(retry);
      B.SetInsertPoint(retry);
      llvm::PHINode* cur = B.CreatePHI(et, 2);
      cur->addIncoming(first, from);
      auto* x = B.CreateAtomicCmpXchg(p, cur, apply(cur), align, ordering, ordering);
      cur->addIncoming(B.CreateExtractValue(x, 0), retry);
      B.CreateCondBr(B.CreateExtractValue(x, 1), swapped, retry);
      B.SetInsertPoint(swapped);
      old = cur;
      break;
    }
    }
  }
  llvm::Value* next_olds = B.CreateInsertElement(olds, old, l);
  llvm::Value* next_left = B.CreateAnd(left, B.CreateSub(left, B.getInt32(1)));
  left->addIncoming(next_left, B.GetInsertBlock());
  olds->addIncoming(next_olds, B.GetInsertBlock());
  B.CreateBr(loop);
  B.SetInsertPoint(done);
  if (in.op == XOp::atom) write(in.dst[0], B.CreateZExt(olds, v64), mask);
}

// The loads or stores of `in` at host addresses `host` (one per lane), for the lanes in `exec`:
// one vector access when the whole warp's accesses are consecutive, else a gather or scatter.
void Gen::emit_access(const Insn& in, llvm::Value* host, llvm::Value* exec, llvm::Value* mask) {
  const uint64_t total = uint64_t(ptx::type_size(in.type)) * in.vec;
  llvm::Value* base0 = B.CreateExtractElement(host, uint64_t(0));
  llvm::Value* consecutive = B.CreateAnd(B.CreateICmpEQ(exec, B.getInt32(~0u)),
                                         all_consecutive(host, base0, total));
  auto* wide_bb = llvm::BasicBlock::Create(C, "", F);
  auto* lanes_bb = llvm::BasicBlock::Create(C, "", F);
  auto* done_bb = llvm::BasicBlock::Create(C, "", F);
  B.CreateCondBr(consecutive, wide_bb, lanes_bb);
  const Known branch = known();
  B.SetInsertPoint(wide_bb);
  emit_wide(in, base0, mask);
  B.CreateBr(done_bb);
  B.SetInsertPoint(lanes_bb);
  restore(branch);
  emit_lanes(in, host, mask);
  B.CreateBr(done_bb);
  B.SetInsertPoint(done_bb);
  restore(branch);
  forget_destinations(in); // written on both paths
}

// Whether lane l of `v` holds base0 + l * step, for every lane.
llvm::Value* Gen::all_consecutive(llvm::Value* v, llvm::Value* base0, uint64_t step) {
  std::vector<llvm::Constant*> steps;
  for (uint32_t l = 0; l < k_lanes; ++l) steps.push_back(llvm::ConstantInt::get(i64, l * step));
  llvm::Value* expect =
      B.CreateAdd(B.CreateVectorSplat(k_lanes, base0), llvm::ConstantVector::get(steps));
  return B.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_and, B.CreateICmpEQ(v, expect));
}

// Every lane's access at once: lane l's element e is element l * vec + e of one access at `base0`.
void Gen::emit_wide(const Insn& in, llvm::Value* base0, llvm::Value* mask) {
  const uint32_t esize = ptx::type_size(in.type);
  const uint32_t vec_n = in.vec;
  llvm::IntegerType* et = B.getIntNTy(esize * 8);
  llvm::VectorType* vt = vec(et);
  auto* wt = llvm::FixedVectorType::get(et, k_lanes * vec_n);
  llvm::Value* wptr = B.CreateIntToPtr(base0, wt->getPointerTo());
  if (in.op == XOp::st) {
    std::vector<llvm::Value*> values; // each element's lanes
    for (uint32_t e = 0; e < vec_n; ++e) values.push_back(B.CreateTrunc(src(in.src[e]), vt));
    llvm::Value* wide = values[0];
    if (vec_n > 1) {
      std::vector<int> concat(2 * k_lanes);
      for (uint32_t i = 0; i < 2 * k_lanes; ++i) concat[i] = int(i);
      std::vector<llvm::Value*> halves;
      for (uint32_t e = 0; e < vec_n; e += 2)
        halves.push_back(B.CreateShuffleVector(values[e], values[e + 1], concat));
      llvm::Value* all = halves[0];
      if (vec_n == 4) {
        std::vector<int> concat4(4 * k_lanes);
        for (uint32_t i = 0; i < 4 * k_lanes; ++i) concat4[i] = int(i);
        all = B.CreateShuffleVector(halves[0], halves[1], concat4);
      }
      // `all` holds element e of lane l at e * 32 + l
      std::vector<int> interleave(k_lanes * vec_n);
      for (uint32_t l = 0; l < k_lanes; ++l)
        for (uint32_t e = 0; e < vec_n; ++e) interleave[l * vec_n + e] = int(e * k_lanes + l);
      wide = B.CreateShuffleVector(all, all, interleave);
    }
    auto* st = B.CreateAlignedStore(wide, wptr, llvm::Align(esize));
    tag(st, m_tbaa_memory);
    return;
  }
  auto* ld = B.CreateAlignedLoad(wt, wptr, llvm::Align(esize));
  tag(ld, m_tbaa_memory);
  for (uint32_t e = 0; e < vec_n; ++e) {
    llvm::Value* lanes = ld;
    if (vec_n > 1) {
      std::vector<int> pick(k_lanes);
      for (uint32_t l = 0; l < k_lanes; ++l) pick[l] = int(l * vec_n + e);
      lanes = B.CreateShuffleVector(ld, ld, pick);
    }
    write(in.dst[e], widen(lanes, ptx::is_signed(in.type)), mask);
  }
}

// Each lane's access on its own: a gather or a scatter of the lanes in `mask`.
void Gen::emit_lanes(const Insn& in, llvm::Value* host, llvm::Value* mask) {
  const uint32_t esize = ptx::type_size(in.type);
  llvm::IntegerType* et = B.getIntNTy(esize * 8);
  llvm::VectorType* vt = vec(et);
  llvm::VectorType* pt = vec(et->getPointerTo());
  for (uint32_t e = 0; e < in.vec; ++e) {
    llvm::Value* ptrs = B.CreateIntToPtr(e ? B.CreateAdd(host, splat(e * esize)) : host, pt);
    if (in.op == XOp::st) {
      // lanes that store to one address store in lane order, the last one's value staying
      auto* st = B.CreateMaskedScatter(B.CreateTrunc(src(in.src[e]), vt), ptrs, llvm::Align(esize),
                                       mask);
      tag(st, m_tbaa_memory);
    } else {
      auto* ld = B.CreateMaskedGather(vt, ptrs, llvm::Align(esize), mask,
                                      llvm::Constant::getNullValue(vt));
      tag(ld, m_tbaa_memory);
      write(in.dst[e], widen(ld, ptx::is_signed(in.type)), mask);
    }
  }
}

// The lanes of `exec` whose `v` differs from that of the lane before them (or whose lane before
// is not in exec): the ones to keep of a list that only its set of values matters for.
llvm::Value* Gen::first_of_runs(llvm::Value* v, llvm::Value* exec) {
  std::vector<int> shift(k_lanes);
  for (uint32_t l = 0; l < k_lanes; ++l) shift[l] = l ? int(l - 1) : 0;
  llvm::Value* prev = B.CreateShuffleVector(v, v, shift);
  llvm::Value* same = B.CreateBitCast(B.CreateICmpEQ(v, prev), i32);
  llvm::Value* dup = B.CreateAnd(B.CreateAnd(same, exec), B.CreateShl(exec, 1));
  return B.CreateAnd(exec, B.CreateNot(dup));
}

// Whether accesses of `total` bytes starting from `lo` to `hi` (inclusive) lie in the allocation
// the instruction at `pc` last touched (its MemoryCache entry), and that allocation is writable
// when `writes`.
llvm::Value* Gen::in_cached_allocation(uint32_t pc, llvm::Value* lo, llvm::Value* hi, uint64_t total,
                                       bool writes) {
  llvm::Value* entry =
      B.CreateConstInBoundsGEP1_64(i8, memory_cache, uint64_t(pc) * sizeof(MemoryCache));
  auto entry_field = [&](size_t offset) {
    auto* l = B.CreateLoad(i64, B.CreateBitCast(B.CreateConstInBoundsGEP1_64(i8, entry, offset),
                                                i64->getPointerTo()));
    tag(l, m_tbaa_frame);
    return l;
  };
  llvm::Value* base = entry_field(offsetof(MemoryCache, base));
  llvm::Value* end = entry_field(offsetof(MemoryCache, end));
  llvm::Value* ok = B.CreateAnd(B.CreateICmpUGE(lo, base), B.CreateICmpULT(hi, end));
  ok = B.CreateAnd(ok, B.CreateICmpUGE(B.CreateSub(end, hi), B.getInt64(total)));
  if (writes)
    ok = B.CreateAnd(ok, B.CreateICmpNE(entry_field(offsetof(MemoryCache, writable)), B.getInt64(0)));
  return ok;
}

// The common case of fast_memory(), made without vector reductions: every lane of the warp runs
// and lane l accesses base + l * size (a coalesced access), aligned, and the whole range lies in
// the block's shared memory or in the allocation the instruction last touched. Branches to those
// paths from the current block, and leaves the builder in the block every other access goes on
// from. Returns each path's latency and the block it ends in (left without a terminator).
std::vector<std::pair<llvm::Value*, llvm::BasicBlock*>>
Gen::emit_consecutive(uint32_t pc, const Insn& in, llvm::Value* exec, llvm::Value* addr,
                      llvm::Value* t) {
  const uint64_t total = uint64_t(ptx::type_size(in.type)) * in.vec;
  const AddrSpace space = in.addr.space;
  const bool generic = space == AddrSpace::generic;
  const bool may_global = generic || space == AddrSpace::global;
  const bool may_shared = generic || space == AddrSpace::shared;
  std::vector<std::pair<llvm::Value*, llvm::BasicBlock*>> out;
  auto* general_bb = llvm::BasicBlock::Create(C, "", F);
  auto* range_bb = llvm::BasicBlock::Create(C, "", F);
  llvm::Value* a0 = B.CreateExtractElement(addr, uint64_t(0));
  // the last lane's access starts at `last` (no wrap past 2^64: the lanes are each other's
  // neighbours in memory too)
  llvm::Value* last = B.CreateAdd(a0, B.getInt64((k_lanes - 1) * total));
  llvm::Value* ok = B.CreateICmpEQ(exec, B.getInt32(~0u));
  ok = B.CreateAnd(ok, B.CreateICmpUGE(last, a0));
  if (total > 1)
    ok = B.CreateAnd(ok, B.CreateICmpEQ(B.CreateAnd(a0, B.getInt64(total - 1)), B.getInt64(0)));
  ok = B.CreateAnd(ok, all_consecutive(addr, a0, total));
  B.CreateCondBr(ok, range_bb, general_bb);
  const Known branch = known();
  B.SetInsertPoint(range_bb);
  llvm::Value* mask = mask_of(exec);
  auto* global_check_bb = may_global ? llvm::BasicBlock::Create(C, "", F) : nullptr;
  // [a0, last + total) inside `size` bytes
  auto inside = [&](llvm::Value* end, llvm::Value* size) {
    return B.CreateAnd(B.CreateICmpULE(end, size),
                       B.CreateICmpUGE(B.CreateSub(size, end), B.getInt64(total)));
  };
  if (may_shared) {
    auto* shared_bb = llvm::BasicBlock::Create(C, "", F);
    llvm::Value* off0 = a0;
    llvm::Value* is_shared;
    if (generic) {
      const uint64_t window = ~(k_window_size - 1);
      off0 = B.CreateSub(a0, B.getInt64(k_shared_window));
      is_shared = B.CreateAnd(
          B.CreateAnd(B.CreateICmpEQ(B.CreateAnd(a0, B.getInt64(window)), B.getInt64(k_shared_window)),
                      B.CreateICmpEQ(B.CreateAnd(last, B.getInt64(window)), B.getInt64(k_shared_window))),
          inside(B.CreateSub(last, B.getInt64(k_shared_window)), shared_size));
    } else {
      is_shared = inside(last, shared_size);
    }
    B.CreateCondBr(is_shared, shared_bb, may_global ? global_check_bb : general_bb);
    B.SetInsertPoint(shared_bb);
    restore(branch);
    emit_wide(in, B.CreateAdd(shared_base, off0), mask);
    // the words the lanes touch, all of them from the first one's on (each of up to 4 bytes
    // touches one; a wider one total / 4)
    llvm::Value* out_words = B.CreateBitCast(load_field(offsetof(Frame, words), i8->getPointerTo()),
                                             i32->getPointerTo());
    llvm::Value* w0 = B.CreateTrunc(B.CreateLShr(off0, B.getInt64(2)), i32);
    llvm::Value* ids = lane_ids();
    llvm::Value* count;
    if (total >= 4) {
      const uint32_t words = uint32_t(total / 4);
      for (uint32_t j = 0; j < words; ++j) {
        llvm::Value* w = B.CreateAdd(B.CreateVectorSplat(k_lanes, B.CreateAdd(w0, B.getInt32(j * k_lanes))), ids);
        auto* st = B.CreateAlignedStore(w, B.CreateBitCast(B.CreateConstInBoundsGEP1_64(i32, out_words, j * k_lanes),
                                                           v32->getPointerTo()), llvm::Align(4));
        tag(st, m_tbaa_frame);
      }
      count = B.getInt32(words * k_lanes);
    } else {
      llvm::Value* w = B.CreateAdd(B.CreateVectorSplat(k_lanes, w0), ids);
      auto* st = B.CreateAlignedStore(w, B.CreateBitCast(out_words, v32->getPointerTo()), llvm::Align(4));
      tag(st, m_tbaa_frame);
      llvm::Value* wl = B.CreateTrunc(B.CreateLShr(B.CreateAdd(off0, B.getInt64((k_lanes - 1) * total)),
                                                   B.getInt64(2)), i32);
      count = B.CreateAdd(B.CreateSub(wl, w0), B.getInt32(1));
    }
    out.push_back({B.CreateCall(helper_type, account_shared, {frame, B.getInt32(pc), count, t}),
                   B.GetInsertBlock()});
  } else {
    B.CreateBr(global_check_bb);
  }
  if (may_global) {
    // inside the allocation the instruction last touched (windows lie above every allocation)
    B.SetInsertPoint(global_check_bb);
    restore(branch);
    auto* global_bb = llvm::BasicBlock::Create(C, "", F);
    B.CreateCondBr(in_cached_allocation(pc, a0, last, total, in.op != XOp::ld), global_bb,
                   general_bb);
    B.SetInsertPoint(global_bb);
    emit_wide(in, a0, mask);
    // the lanes' sectors: every one from the first lane's to the last one's (an aligned access of
    // at most 32 bytes lies in one sector, and neighbours are at most 32 bytes apart)
    llvm::Value* s0 = B.CreateLShr(a0, B.getInt64(5));
    std::vector<llvm::Constant*> iota;
    for (uint32_t l = 0; l < k_lanes; ++l) iota.push_back(llvm::ConstantInt::get(i64, l));
    llvm::Value* sectors = B.CreateAdd(B.CreateVectorSplat(k_lanes, s0), llvm::ConstantVector::get(iota));
    llvm::Value* scratch = B.CreateBitCast(load_field(offsetof(Frame, sectors), i8->getPointerTo()),
                                           v64->getPointerTo());
    auto* st = B.CreateAlignedStore(sectors, scratch, llvm::Align(8));
    tag(st, m_tbaa_frame);
    llvm::Value* count =
        B.CreateTrunc(B.CreateAdd(B.CreateSub(B.CreateLShr(last, B.getInt64(5)), s0), B.getInt64(1)), i32);
    out.push_back({B.CreateCall(helper_type, account_global, {frame, B.getInt32(pc), count, t}),
                   B.GetInsertBlock()});
  }
  B.SetInsertPoint(general_bb);
  return out;
}

// fast_memory(): when every lane's access is aligned and lies in the allocation the instruction
// last touched (global), in the block's shared memory or in the thread's local frame, compiled
// code makes it and has a helper charge it; any other access goes to the helper whole, which
// checks, faults or performs it the interpreter's way (and refreshes the allocation). Returns the
// instruction's latency.
llvm::Value* Gen::emit_memory(uint32_t pc, const Insn& in, llvm::Value* exec, llvm::Value* t) {
  const bool atomic = in.op == XOp::atom || in.op == XOp::red;
  const uint32_t esize = ptx::type_size(in.type);
  const uint64_t total = uint64_t(esize) * (atomic ? 1 : in.vec);
  const bool writes = in.op != XOp::ld;
  // the paths this instruction's state space can take (the rest would be dead code to compile)
  const AddrSpace space = in.addr.space;
  const bool generic = space == AddrSpace::generic;
  const bool may_global = generic || space == AddrSpace::global;
  const bool may_shared = generic || space == AddrSpace::shared;
  const bool may_local = !atomic && (generic || space == AddrSpace::local);
  auto* check_bb = llvm::BasicBlock::Create(C, "", F);
  auto* global_check_bb = may_global ? llvm::BasicBlock::Create(C, "", F) : nullptr;
  auto* global_bb = may_global ? llvm::BasicBlock::Create(C, "", F) : nullptr;
  auto* shared_bb = may_shared ? llvm::BasicBlock::Create(C, "", F) : nullptr;
  auto* local_bb = may_local ? llvm::BasicBlock::Create(C, "", F) : nullptr;
  auto* slow_bb = llvm::BasicBlock::Create(C, "", F);
  auto* join_bb = llvm::BasicBlock::Create(C, "", F);
  llvm::BasicBlock* from = B.GetInsertBlock();
  const Known before = known(); // what the join knows: it is also reached with no lane running
  B.CreateCondBr(B.CreateICmpNE(exec, B.getInt32(0)), check_bb, join_bb);

  B.SetInsertPoint(check_bb);
  llvm::Value* mask = mask_of(exec);
  llvm::Value* addr = splat(uint64_t(in.addr.offset));
  if (in.addr.slot != k_no_slot) addr = B.CreateAdd(load_reg(in.addr.slot), addr);
  // the paths of consecutive accesses, ahead of the general checks below
  std::vector<std::pair<llvm::Value*, llvm::BasicBlock*>> consecutive_latencies;
  if (!atomic && space != AddrSpace::local) {
    const Known at_check = known();
    consecutive_latencies = emit_consecutive(pc, in, exec, addr, t);
    restore(at_check);
  }
  llvm::Value* lo = B.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_umin,
                                           B.CreateSelect(mask, addr, splat(~0ull)));
  llvm::Value* hi = B.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_umax,
                                           B.CreateSelect(mask, addr, splat(0)));
  llvm::Value* aligned = B.getTrue();
  if (total > 1) {
    llvm::Value* any = B.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_or,
                                              B.CreateSelect(mask, addr, splat(0)));
    aligned = B.CreateICmpEQ(B.CreateAnd(any, B.getInt64(total - 1)), B.getInt64(0));
  }
  // [lo, hi + total) inside `size` bytes
  auto inside = [&](llvm::Value* h, llvm::Value* size) {
    return B.CreateAnd(B.CreateICmpULE(h, size),
                       B.CreateICmpUGE(B.CreateSub(size, h), B.getInt64(total)));
  };
  llvm::Value* local_size = B.getInt64(k.local_bytes);
  const Known branch = known(); // every path starts from what the check knew
  llvm::Value* window_offset = addr; // the lanes' offsets in their window (shared or local)
  const uint64_t window = ~(k_window_size - 1);
  auto in_window = [&](uint64_t base) {
    return B.CreateAnd(B.CreateICmpEQ(B.CreateAnd(lo, B.getInt64(window)), B.getInt64(base)),
                       B.CreateICmpEQ(B.CreateAnd(hi, B.getInt64(window)), B.getInt64(base)));
  };
  switch (in.addr.space) {
  case AddrSpace::shared:
    B.CreateCondBr(B.CreateAnd(aligned, inside(hi, shared_size)), shared_bb, slow_bb);
    break;
  case AddrSpace::local:
    B.CreateCondBr(B.CreateAnd(aligned, inside(hi, local_size)), local_bb, slow_bb);
    break;
  case AddrSpace::generic: {
    // every lane in the shared window: shared memory; every lane in the local window: local
    // memory; else global memory, or the helper
    llvm::Value* shi = B.CreateSub(hi, B.getInt64(k_shared_window));
    llvm::Value* lhi = B.CreateSub(hi, B.getInt64(k_local_window));
    (void)lhi;
    llvm::Value* is_shared =
        B.CreateAnd(B.CreateAnd(aligned, in_window(k_shared_window)), inside(shi, shared_size));
    window_offset = B.CreateAnd(addr, splat(k_window_size - 1));
    auto* not_shared = llvm::BasicBlock::Create(C, "", F);
    B.CreateCondBr(is_shared, shared_bb, not_shared);
    B.SetInsertPoint(not_shared);
    if (may_local) {
      llvm::Value* is_local =
          B.CreateAnd(B.CreateAnd(aligned, in_window(k_local_window)), inside(lhi, local_size));
      B.CreateCondBr(is_local, local_bb, global_check_bb);
    } else {
      B.CreateBr(global_check_bb);
    }
    break;
  }
  default:
    B.CreateBr(global_check_bb);
    break;
  }

  llvm::FunctionType* account_type = helper_type; // (Frame*, pc, count, issue_at) -> latency
  auto access = [&](llvm::Value* host, bool shared) {
    if (atomic)
      emit_atomic(in, host, exec, mask, shared);
    else
      emit_access(in, host, exec, mask);
  };
  std::vector<std::pair<llvm::Value*, llvm::BasicBlock*>> latencies; // per path to the join
  latencies.push_back({B.getInt64(0), from});
  for (auto [value, block] : consecutive_latencies) {
    llvm::IRBuilderBase::InsertPointGuard guard(B);
    B.SetInsertPoint(block);
    B.CreateBr(join_bb);
    latencies.push_back({value, block});
  }

  if (may_global) {
    // global: inside the cached allocation (addresses in a window lie above every allocation)
    B.SetInsertPoint(global_check_bb);
  restore(branch);
    B.CreateCondBr(B.CreateAnd(aligned, in_cached_allocation(pc, lo, hi, total, writes)), global_bb,
                   slow_bb);

    B.SetInsertPoint(global_bb);
    llvm::Value* scratch = load_field(offsetof(Frame, sectors), i8->getPointerTo());
    access(addr, false);
    {
      llvm::Value* count;
      // the sectors of the lanes; flush_memory() only counts their set, so a lane that repeats the
      // lane before it is left out
      llvm::Value* sectors = B.CreateLShr(addr, splat(5));
      llvm::Value* keep = first_of_runs(sectors, exec);
      count = B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, keep);
      llvm::Function* compress =
          llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::masked_compressstore, {v64});
      auto* c = B.CreateCall(
          compress, {sectors, B.CreateBitCast(scratch, i64->getPointerTo()), mask_of(keep)});
      tag(c, m_tbaa_frame);
      latencies.push_back(
          {B.CreateCall(account_type, account_global, {frame, B.getInt32(pc), count, t}),
           B.GetInsertBlock()});
    }
    B.CreateBr(join_bb);
  }

  if (may_shared) {
    B.SetInsertPoint(shared_bb);
  restore(branch);
    {
      llvm::Value* count;
      llvm::Value* scratch = load_field(offsetof(Frame, words), i8->getPointerTo());
      access(B.CreateAdd(window_offset, B.CreateVectorSplat(k_lanes, shared_base)), true);
      // the 4-byte words each lane touched: one for accesses of up to 4 bytes, else total / 4
      // (flush_memory() only counts their set: a lane repeating the word before it is left out)
      const uint32_t words = total >= 4 ? uint32_t(total / 4) : 1;
      llvm::Function* compress =
          llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::masked_compressstore, {v32});
      llvm::Value* first_word = B.CreateTrunc(B.CreateLShr(window_offset, splat(2)), v32);
      llvm::Value* keep = words == 1 ? first_of_runs(first_word, exec) : exec;
      llvm::Value* keep_mask = mask_of(keep);
      llvm::Value* n = B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, keep);
      llvm::Value* out = B.CreateBitCast(scratch, i32->getPointerTo());
      for (uint32_t j = 0; j < words; ++j) {
        llvm::Value* w = j ? B.CreateAdd(first_word, splat32(j)) : first_word;
        auto* c = B.CreateCall(
            compress, {w, B.CreateGEP(i32, out, B.CreateMul(n, B.getInt32(j))), keep_mask});
        tag(c, m_tbaa_frame);
      }
      count = B.CreateMul(n, B.getInt32(words));
      latencies.push_back(
          {B.CreateCall(account_type, account_shared, {frame, B.getInt32(pc), count, t}),
           B.GetInsertBlock()});
    }
    B.CreateBr(join_bb);
  }

  // local: lane l's frame starts (warp * 32 + l) * local_bytes into the block's frames
  if (may_local) {
    B.SetInsertPoint(local_bb);
  restore(branch);
    {
      llvm::Value* frames =
          B.CreatePtrToInt(load_field(offsetof(Frame, local), i8->getPointerTo()), i64);
      llvm::Value* thread = B.CreateAdd(
          B.CreateVectorSplat(k_lanes, B.CreateZExt(B.CreateMul(widx, B.getInt32(k_lanes)), i64)),
          B.CreateZExt(lane_ids(), v64));
      llvm::Value* host = B.CreateAdd(B.CreateAdd(B.CreateVectorSplat(k_lanes, frames),
                                                  B.CreateMul(thread, splat(k.local_bytes))),
                                      window_offset);
      access(host, false);
      llvm::Value* bytes = B.CreateMul(B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, exec),
                                       B.getInt32(uint32_t(total)));
      latencies.push_back(
          {B.CreateCall(account_type, account_local, {frame, B.getInt32(pc), bytes, t}),
           B.GetInsertBlock()});
    }
    B.CreateBr(join_bb);
  }

  B.SetInsertPoint(slow_bb);
  restore(branch);
  latencies.push_back({call_helper(pc, exec, t), nullptr});
  latencies.back().second = B.GetInsertBlock();
  B.CreateBr(join_bb);

  B.SetInsertPoint(join_bb);
  restore(before);
  forget_destinations(in); // written on each path
  llvm::PHINode* latency = B.CreatePHI(i64, unsigned(latencies.size()));
  for (auto [value, block] : latencies) latency->addIncoming(value, block);
  return latency;
}

} // namespace hone::emu::jit
