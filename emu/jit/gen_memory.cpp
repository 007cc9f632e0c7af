// ld and st of global and shared memory made by compiled code.
#include "emu/jit/gen.hpp"

namespace hone::emu::jit {

// ld and st of global or shared memory that compiled code makes itself (fast_memory()'s cases):
// not volatile, elements of 1 to 8 bytes, up to 4 of them.
bool Gen::memory_form(const Insn& in) const {
  if (in.op != XOp::ld && in.op != XOp::st) return false;
  if (in.flags & k_f_volatile) return false;
  if (in.addr.space != AddrSpace::global && in.addr.space != AddrSpace::shared &&
      in.addr.space != AddrSpace::generic)
    return false;
  const uint32_t esize = ptx::type_size(in.type);
  if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return false;
  return in.vec == 1 || in.vec == 2 || in.vec == 4;
}

// The loads or stores of `in` at host addresses `host` (one per lane), for the lanes in `exec`:
// one vector access when the whole warp's accesses are consecutive, else a gather or scatter.
void Gen::emit_access(const Insn& in, llvm::Value* host, llvm::Value* exec, llvm::Value* mask) {
  const uint32_t esize = ptx::type_size(in.type);
  const uint32_t vec_n = in.vec;
  const uint64_t total = uint64_t(esize) * vec_n;
  llvm::IntegerType* et = B.getIntNTy(esize * 8);
  llvm::VectorType* vt = vec(et);
  llvm::VectorType* pt = vec(et->getPointerTo());
  const bool store = in.op == XOp::st;
  std::vector<llvm::Value*> values; // stores: each element's lanes
  if (store) {
    for (uint32_t e = 0; e < vec_n; ++e) values.push_back(B.CreateTrunc(src(in.src[e]), vt));
  }
  std::vector<llvm::Constant*> steps;
  for (uint32_t l = 0; l < k_lanes; ++l) steps.push_back(llvm::ConstantInt::get(i64, l * total));
  llvm::Value* base0 = B.CreateExtractElement(host, uint64_t(0));
  llvm::Value* expect = B.CreateAdd(B.CreateVectorSplat(k_lanes, base0), llvm::ConstantVector::get(steps));
  llvm::Value* consecutive = B.CreateAnd(
      B.CreateICmpEQ(exec, B.getInt32(~0u)),
      B.CreateUnaryIntrinsic(llvm::Intrinsic::vector_reduce_and, B.CreateICmpEQ(host, expect)));
  auto* wide_bb = llvm::BasicBlock::Create(C, "", F);
  auto* lanes_bb = llvm::BasicBlock::Create(C, "", F);
  auto* done_bb = llvm::BasicBlock::Create(C, "", F);
  B.CreateCondBr(consecutive, wide_bb, lanes_bb);

  // lane l's element e is element l * vec + e of one wide access
  B.SetInsertPoint(wide_bb);
  auto* wt = llvm::FixedVectorType::get(et, k_lanes * vec_n);
  llvm::Value* wptr = B.CreateIntToPtr(base0, wt->getPointerTo());
  if (store) {
    llvm::Value* wide = values[0];
    if (vec_n > 1) {
      std::vector<int> concat(2 * k_lanes);
      for (uint32_t i = 0; i < 2 * k_lanes; ++i) concat[i] = int(i);
      std::vector<llvm::Value*> halves;
      for (uint32_t e = 0; e < vec_n; e += 2) halves.push_back(B.CreateShuffleVector(values[e], values[e + 1], concat));
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
  } else {
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
  B.CreateBr(done_bb);

  B.SetInsertPoint(lanes_bb);
  for (uint32_t e = 0; e < vec_n; ++e) {
    llvm::Value* ptrs = B.CreateIntToPtr(e ? B.CreateAdd(host, splat(e * esize)) : host, pt);
    if (store) {
      // lanes that store to one address store in lane order, the last one's value staying
      auto* st = B.CreateMaskedScatter(values[e], ptrs, llvm::Align(esize), mask);
      tag(st, m_tbaa_memory);
    } else {
      auto* ld = B.CreateMaskedGather(vt, ptrs, llvm::Align(esize), mask,
                                      llvm::Constant::getNullValue(vt));
      tag(ld, m_tbaa_memory);
      write(in.dst[e], widen(ld, ptx::is_signed(in.type)), mask);
    }
  }
  B.CreateBr(done_bb);
  B.SetInsertPoint(done_bb);
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

// fast_memory(): when every lane's access is aligned and lies in the allocation the instruction
// last touched (global), or in the block's shared memory, compiled code makes it and has the
// helper charge it; any other access goes to the helper whole, which checks, faults or performs
// it the interpreter's way (and refreshes the allocation). Returns the instruction's latency.
llvm::Value* Gen::emit_memory(uint32_t pc, const Insn& in, llvm::Value* exec, llvm::Value* t) {
  const uint32_t esize = ptx::type_size(in.type);
  const uint64_t total = uint64_t(esize) * in.vec;
  const bool store = in.op == XOp::st;
  auto* check_bb = llvm::BasicBlock::Create(C, "", F);
  auto* global_check_bb = llvm::BasicBlock::Create(C, "", F);
  auto* global_bb = llvm::BasicBlock::Create(C, "", F);
  auto* shared_bb = llvm::BasicBlock::Create(C, "", F);
  auto* slow_bb = llvm::BasicBlock::Create(C, "", F);
  auto* join_bb = llvm::BasicBlock::Create(C, "", F);
  llvm::BasicBlock* from = B.GetInsertBlock();
  B.CreateCondBr(B.CreateICmpNE(exec, B.getInt32(0)), check_bb, join_bb);

  B.SetInsertPoint(check_bb);
  llvm::Value* mask = mask_of(exec);
  llvm::Value* addr = splat(uint64_t(in.addr.offset));
  if (in.addr.slot != k_no_slot) addr = B.CreateAdd(load_reg(in.addr.slot), addr);
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
  // shared: [lo, hi + total) inside the block's bytes
  auto shared_ok = [&](llvm::Value* h) {
    return B.CreateAnd(B.CreateICmpULE(h, shared_size),
                       B.CreateICmpUGE(B.CreateSub(shared_size, h), B.getInt64(total)));
  };
  llvm::Value* shared_offset = addr;
  switch (in.addr.space) {
  case AddrSpace::shared:
    B.CreateCondBr(B.CreateAnd(aligned, shared_ok(hi)), shared_bb, slow_bb);
    break;
  case AddrSpace::generic: {
    // every lane in the shared window: shared memory; else global memory, or the helper
    const uint64_t window = ~(k_window_size - 1);
    llvm::Value* in_window =
        B.CreateAnd(B.CreateICmpEQ(B.CreateAnd(lo, B.getInt64(window)), B.getInt64(k_shared_window)),
                    B.CreateICmpEQ(B.CreateAnd(hi, B.getInt64(window)), B.getInt64(k_shared_window)));
    llvm::Value* shi = B.CreateSub(hi, B.getInt64(k_shared_window));
    shared_offset = B.CreateSub(addr, splat(k_shared_window));
    B.CreateCondBr(B.CreateAnd(B.CreateAnd(aligned, in_window), shared_ok(shi)), shared_bb,
                   global_check_bb);
    break;
  }
  default:
    B.CreateBr(global_check_bb);
    break;
  }

  // global: inside the cached allocation (addresses in a window lie above every allocation)
  B.SetInsertPoint(global_check_bb);
  llvm::Value* entry = B.CreateConstInBoundsGEP1_64(i8, memory_cache, uint64_t(pc) * sizeof(MemoryCache));
  auto entry_field = [&](size_t offset) {
    auto* l = B.CreateLoad(i64, B.CreateBitCast(B.CreateConstInBoundsGEP1_64(i8, entry, offset),
                                                i64->getPointerTo()));
    tag(l, m_tbaa_frame);
    return l;
  };
  llvm::Value* base = entry_field(offsetof(MemoryCache, base));
  llvm::Value* end = entry_field(offsetof(MemoryCache, end));
  llvm::Value* ok = B.CreateAnd(aligned, B.CreateICmpUGE(lo, base));
  ok = B.CreateAnd(ok, B.CreateICmpULT(hi, end));
  ok = B.CreateAnd(ok, B.CreateICmpUGE(B.CreateSub(end, hi), B.getInt64(total)));
  if (store) ok = B.CreateAnd(ok, B.CreateICmpNE(entry_field(offsetof(MemoryCache, writable)), B.getInt64(0)));
  B.CreateCondBr(ok, global_bb, slow_bb);

  llvm::FunctionType* account_type = helper_type; // (Frame*, pc, count, issue_at) -> latency

  B.SetInsertPoint(global_bb);
  llvm::Value* scratch = load_field(offsetof(Frame, sectors), i8->getPointerTo());
  emit_access(in, addr, exec, mask);
  llvm::Value* count;
  {
    // the sectors of the lanes; flush_memory() only counts their set, so a lane that repeats the
    // lane before it is left out
    llvm::Value* sectors = B.CreateLShr(addr, splat(5));
    llvm::Value* keep = first_of_runs(sectors, exec);
    count = B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, keep);
    llvm::Function* compress =
        llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::masked_compressstore, {v64});
    auto* c = B.CreateCall(compress, {sectors, B.CreateBitCast(scratch, i64->getPointerTo()),
                                      mask_of(keep)});
    tag(c, m_tbaa_frame);
  }
  llvm::Value* lat_global = B.CreateCall(account_type, account_global,
                                         {frame, B.getInt32(pc), count, t});
  llvm::BasicBlock* global_end = B.GetInsertBlock();
  B.CreateBr(join_bb);

  B.SetInsertPoint(shared_bb);
  {
    scratch = load_field(offsetof(Frame, words), i8->getPointerTo());
    emit_access(in, B.CreateAdd(shared_offset, B.CreateVectorSplat(k_lanes, shared_base)), exec, mask);
    // the 4-byte words each lane touched: one for accesses of up to 4 bytes, else total / 4
    // (flush_memory() only counts their set: a lane repeating the word before it is left out)
    const uint32_t words = total >= 4 ? uint32_t(total / 4) : 1;
    llvm::Function* compress =
        llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::masked_compressstore, {v32});
    llvm::Value* first_word = B.CreateTrunc(B.CreateLShr(shared_offset, splat(2)), v32);
    llvm::Value* keep = words == 1 ? first_of_runs(first_word, exec) : exec;
    llvm::Value* keep_mask = mask_of(keep);
    llvm::Value* n = B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, keep);
    llvm::Value* out = B.CreateBitCast(scratch, i32->getPointerTo());
    for (uint32_t j = 0; j < words; ++j) {
      llvm::Value* w = j ? B.CreateAdd(first_word, llvm::ConstantVector::getSplat(
                                                       llvm::ElementCount::getFixed(k_lanes),
                                                       llvm::ConstantInt::get(i32, j)))
                         : first_word;
      auto* c = B.CreateCall(compress, {w, B.CreateGEP(i32, out, B.CreateMul(n, B.getInt32(j))), keep_mask});
      tag(c, m_tbaa_frame);
    }
    count = B.CreateMul(n, B.getInt32(words));
  }
  llvm::Value* lat_shared = B.CreateCall(account_type, account_shared,
                                         {frame, B.getInt32(pc), count, t});
  llvm::BasicBlock* shared_end = B.GetInsertBlock();
  B.CreateBr(join_bb);

  B.SetInsertPoint(slow_bb);
  llvm::Value* lat_slow = call_helper(pc, exec, t);
  llvm::BasicBlock* slow_end = B.GetInsertBlock();
  B.CreateBr(join_bb);

  B.SetInsertPoint(join_bb);
  llvm::PHINode* latency = B.CreatePHI(i64, 4);
  latency->addIncoming(B.getInt64(0), from);
  latency->addIncoming(lat_global, global_end);
  latency->addIncoming(lat_shared, shared_end);
  latency->addIncoming(lat_slow, slow_end);
  return latency;
}

} // namespace hone::emu::jit
