// Control: blocks, branches, the instruction loop, counters and the cost model's timeline.
#include "emu/jit/gen.hpp"

#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

namespace hone::emu::jit {

llvm::Value* Gen::exec_of(const Insn& in) {
  if (in.guard == k_no_slot) return active;
  llvm::Value* on = B.CreateBitCast(B.CreateICmpNE(load_reg(in.guard), splat(0)), i32);
  if (in.guard_negated) on = B.CreateNot(on);
  return B.CreateAnd(on, active);
}

void Gen::count(const Insn& in, llvm::Value* exec) {
  llvm::Value* n = B.CreateZExt(B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, exec), i64);
  add(l_warp_instructions, B.getInt64(1));
  add(l_thread_instructions, n);
  add(l_issue, B.getInt64(in.cost));
  add(l_cycles, B.getInt64(in.cost));
  add(l_unflushed, n);
  add(l_steps, B.getInt32(1));
}

llvm::Value* Gen::issue_time(const Deps& d) {
  llvm::Value* t = get(l_seq);
  for (uint32_t r : d.read) t = umax(t, load_ready(r));
  return t;
}

void Gen::retire(const Insn& in, const Deps& d, llvm::Value* t, llvm::Value* nonzero,
                 llvm::Value* latency) {
  set(l_seq, B.CreateAdd(get(l_seq), B.getInt64(in.cost)));
  set(l_region_end, umax(get(l_region_end), B.CreateAdd(t, B.getInt64(1))));
  llvm::Value* done = B.CreateAdd(t, latency);
  set(l_horizon, B.CreateSelect(nonzero, umax(get(l_horizon), done), get(l_horizon)));
  for (uint32_t w : d.write) store_ready(w, B.CreateSelect(nonzero, done, load_ready(w)));
  if (in.op == XOp::bra || in.op == XOp::exit) {
    llvm::Value* start = umax(get(l_region_end), get(l_seq));
    set(l_seq, start);
    set(l_region_end, start);
  }
}

void Gen::exit_at(uint32_t pc) {
  m_exit_pc->addIncoming(B.getInt32(pc), B.GetInsertBlock());
  B.CreateBr(m_exit);
}

void Gen::exit_if(llvm::Value* cond, uint32_t pc) {
  auto* go_on = llvm::BasicBlock::Create(C, "", F);
  m_exit_pc->addIncoming(B.getInt32(pc), B.GetInsertBlock());
  B.CreateCondBr(cond, m_exit, go_on);
  B.SetInsertPoint(go_on);
}

// Leaders: where a warp can arrive in compiled code (pc 0, branch targets, after a branch) or come
// back to it from the interpreter (after an instruction compiled code leaves to it). A block runs
// from its leader to a branch, to the next leader, or to an instruction it leaves to the
// interpreter; its length is the steps it takes.
void Gen::find_blocks() {
  const uint32_t n = uint32_t(k.code.size());
  m_leader.assign(n + 1, 0);
  m_leader[0] = 1;
  for (uint32_t pc = 0; pc < n; ++pc) {
    const Insn& in = k.code[pc];
    if (in.op == XOp::bra) {
      if (in.target < n) m_leader[in.target] = 1;
      m_leader[pc + 1] = 1;
    } else if (leaves(in.op) || is_warp_sync(in.op)) {
      m_leader[pc + 1] = 1;
    }
  }
  m_length.assign(n, 0);
  for (uint32_t pc = 0; pc < n; ++pc) {
    if (!m_leader[pc]) continue;
    uint32_t len = 0;
    for (uint32_t i = pc; i < n; ++i) {
      if (i != pc && m_leader[i]) break;
      if (leaves(k.code[i].op)) break;
      ++len;
      if (k.code[i].op == XOp::bra) break;
    }
    m_length[pc] = len;
  }
}

void Gen::emit_branch(uint32_t pc) {
  const Insn& in = k.code[pc];
  const uint32_t n = uint32_t(k.code.size());
  llvm::Value* exec = exec_of(in);
  if (in.target <= pc) {
    // note_backward(): a diverged warp counts the backward branches its lanes take; at the
    // limit the interpreter lets the other lanes run
    llvm::Value* counts = B.CreateAnd(diverged, B.CreateICmpNE(exec, B.getInt32(0)));
    llvm::Value* spin = get(l_spin);
    llvm::Value* next = B.CreateAdd(spin, B.getInt32(1));
    exit_if(B.CreateAnd(counts, B.CreateICmpUGE(next, spin_limit)), pc);
    set(l_spin, B.CreateSelect(counts, next, spin));
  }
  const Deps d = deps_of(k, in);
  count(in, exec);
  llvm::Value* t = issue_time(d);
  retire(in, d, t, B.CreateICmpNE(exec, B.getInt32(0)), B.getInt64(in.latency));
  auto target = [&](uint32_t to) { return to < n ? m_block[to] : nullptr; };
  llvm::BasicBlock* taken = target(in.target);
  llvm::BasicBlock* fall = target(pc + 1);
  if (in.guard == k_no_slot) {
    if (taken) B.CreateBr(taken);
    else exit_at(in.target);
    return;
  }
  // Lanes going both ways: the branch is taken, and compiled code returns with the lanes that
  // take it in Frame::taken; the runner diverges the warp as step() does.
  llvm::Value* split = B.CreateAnd(B.CreateICmpNE(exec, active), B.CreateICmpNE(exec, B.getInt32(0)));
  auto* split_bb = llvm::BasicBlock::Create(C, "", F);
  auto* uniform_bb = llvm::BasicBlock::Create(C, "", F);
  B.CreateCondBr(split, split_bb, uniform_bb);
  B.SetInsertPoint(split_bb);
  store_field(offsetof(Frame, taken), exec);
  store_field(offsetof(Frame, target), B.getInt32(in.target));
  exit_at(pc + 1);
  B.SetInsertPoint(uniform_bb);
  if (!taken || !fall) {
    // past the end of the code: the interpreter reports it
    llvm::Value* to = B.CreateSelect(B.CreateICmpEQ(exec, active), B.getInt32(in.target), B.getInt32(pc + 1));
    m_exit_pc->addIncoming(to, B.GetInsertBlock());
    B.CreateBr(m_exit);
    return;
  }
  B.CreateCondBr(B.CreateICmpEQ(exec, active), taken, fall);
}

void Gen::emit_instruction(uint32_t pc) {
  const Insn& in = k.code[pc];
  llvm::Value* exec = exec_of(in);
  if (is_matrix(in.op)) {
    // .sync.aligned over the whole warp: compiled code runs it only when all 32 lanes are here
    // and none waits; anything else is the interpreter's to wait for or to fail
    exit_if(B.CreateOr(B.CreateICmpNE(exec, B.getInt32(-1)),
                       B.CreateICmpNE(waiting, B.getInt32(0))),
            pc);
  } else if (is_warp_sync(in.op)) {
    // sync_arrive(): the lanes of the membermask that are alive must all be here, else the
    // interpreter makes the arriving ones wait
    const Src& ms = in.op == XOp::bar_warp || in.op == XOp::elect ? in.src[0]
                    : in.op == XOp::shfl                           ? in.src[3]
                                                                   : in.src[1];
    llvm::Value* first = B.CreateAnd(B.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, exec, B.getFalse()),
                                     B.getInt32(31));
    llvm::Value* masks = narrow(src(ms), 32);
    llvm::Value* member_mask = B.CreateExtractElement(masks, first);
    llvm::Value* need = B.CreateAnd(member_mask, alive);
    llvm::Value* missing = B.CreateICmpNE(B.CreateAnd(need, B.CreateNot(exec)), B.getInt32(0));
    // lanes of the warp that wait (at a barrier, or at this instruction already) are the
    // interpreter's to count
    llvm::Value* waits = B.CreateICmpNE(waiting, B.getInt32(0));
    llvm::Value* leave = B.CreateOr(waits, B.CreateAnd(B.CreateICmpNE(exec, B.getInt32(0)), missing));
    if (ms.kind == Src::Kind::reg) {
      // lanes naming different membermasks (a labeled partition) run in groups: the
      // interpreter's (sync_arrive, for_groups)
      llvm::Value* differ = B.CreateICmpNE(masks, B.CreateVectorSplat(k_lanes, member_mask));
      leave = B.CreateOr(leave, B.CreateICmpNE(B.CreateAnd(B.CreateBitCast(differ, i32), exec),
                                               B.getInt32(0)));
    }
    exit_if(leave, pc);
  }
  const Deps d = deps_of(k, in);
  count(in, exec);
  llvm::Value* t = issue_time(d);
  llvm::Value* nonzero = B.CreateICmpNE(exec, B.getInt32(0));
  if (inline_form(in)) {
    emit_inline(in, mask_of(exec));
    // a parameter load's latency is the memory path's: an ALU operation's (flush_memory)
    const uint64_t lat = in.op == XOp::ld ? cost::k_lat_alu : in.latency;
    retire(in, d, t, nonzero, B.getInt64(lat));
    return;
  }
  if (memory_form(in)) {
    ++m_inline;
    retire(in, d, t, nonzero, emit_memory(pc, in, exec, t));
    return;
  }
  ++m_helper;
  auto* call_bb = llvm::BasicBlock::Create(C, "", F);
  auto* join_bb = llvm::BasicBlock::Create(C, "", F);
  llvm::BasicBlock* from = B.GetInsertBlock();
  B.CreateCondBr(nonzero, call_bb, join_bb);
  B.SetInsertPoint(call_bb);
  llvm::Value* lat = call_helper(pc, exec, t);
  llvm::BasicBlock* called = B.GetInsertBlock();
  B.CreateBr(join_bb);
  B.SetInsertPoint(join_bb);
  forget_destinations(in); // the helper wrote them in memory
  llvm::PHINode* latency = B.CreatePHI(i64, 2);
  latency->addIncoming(B.getInt64(0), from);
  latency->addIncoming(lat, called);
  retire(in, d, t, nonzero, latency);
}

// Helpers::execute for the instruction at `pc`; a fault leaves at once. Returns its latency.
llvm::Value* Gen::call_helper(uint32_t pc, llvm::Value* exec, llvm::Value* t) {
  store_field(offsetof(Frame, cycles), get(l_cycles)); // %clock reads it
  llvm::Value* lat = B.CreateCall(helper_type, helper, {frame, B.getInt32(pc), exec, t});
  auto* ok = llvm::BasicBlock::Create(C, "", F);
  m_fault_pc->addIncoming(B.getInt32(pc), B.GetInsertBlock());
  B.CreateCondBr(B.CreateICmpSLT(lat, B.getInt64(0)), m_fault, ok);
  B.SetInsertPoint(ok);
  return lat;
}

// One copy of the kernel's code, entered at `dispatch_bb` by the warp's pc (`none` when no block
// starts there), for the lanes `active` holds.
void Gen::emit_body(llvm::BasicBlock* dispatch_bb, llvm::Value* start_pc, llvm::BasicBlock* none) {
  const uint32_t n = uint32_t(k.code.size());
  m_block.assign(n, nullptr);
  for (uint32_t pc = 0; pc < n; ++pc) {
    if (m_leader[pc]) m_block[pc] = llvm::BasicBlock::Create(C, "pc" + std::to_string(pc), F);
  }
  B.SetInsertPoint(dispatch_bb);
  auto* dispatch = B.CreateSwitch(start_pc, none);
  for (uint32_t pc = 0; pc < n; ++pc) {
    if (m_leader[pc] && m_length[pc]) dispatch->addCase(B.getInt32(pc), m_block[pc]);
  }

  bool open = false; // the current block falls through to the next instruction
  for (uint32_t pc = 0; pc < n; ++pc) {
    if (m_leader[pc]) {
      if (open) B.CreateBr(m_block[pc]);
      B.SetInsertPoint(m_block[pc]);
      forget_all(); // reached from several places
      open = true;
      if (!m_length[pc]) {
        exit_at(pc);
        open = false;
        continue;
      }
      // The whole block must fit in the warp's turn, and a diverged group must stay below the
      // other lanes; else the interpreter takes these steps.
      llvm::Value* after = B.CreateAdd(get(l_steps), B.getInt32(m_length[pc]));
      exit_if(B.CreateOr(B.CreateICmpUGT(after, limit),
                         B.CreateICmpUGT(B.getInt32(pc + m_length[pc]), stop)),
              pc);
    }
    if (!open) continue; // unreachable: no leader since the last branch
    const Insn& in = k.code[pc];
    if (leaves(in.op)) {
      exit_at(pc);
      open = false;
    } else if (in.op == XOp::bra) {
      emit_branch(pc);
      open = false;
    } else {
      emit_instruction(pc);
    }
  }
  if (open) exit_at(n);
  forget_all();
}

Generated Gen::run() {
  i8 = B.getInt8Ty();
  i32 = B.getInt32Ty();
  i64 = B.getInt64Ty();
  v64 = vec(i64);
  v32 = vec(i32);
  v16 = vec(B.getInt16Ty());
  vf32 = vec(B.getFloatTy());
  vf64 = vec(B.getDoubleTy());
  vbool = vec(B.getInt1Ty());
  llvm::MDBuilder md(C);
  llvm::MDNode* root = md.createTBAARoot("hone.jit");
  auto scalar_tag = [&](const char* name) {
    llvm::MDNode* type = md.createTBAAScalarTypeNode(name, root);
    return md.createTBAAStructTagNode(type, type, 0);
  };
  m_tbaa_regs = scalar_tag("registers");
  m_tbaa_ready = scalar_tag("ready");
  m_tbaa_frame = scalar_tag("frame");
  m_tbaa_param = scalar_tag("parameters");
  m_tbaa_memory = scalar_tag("device memory");

  auto* fn_type = llvm::FunctionType::get(B.getVoidTy(), {i8->getPointerTo()}, false);
  F = llvm::Function::Create(fn_type, llvm::Function::ExternalLinkage, m_name, M.get());
  F->addParamAttr(0, llvm::Attribute::NoAlias);
  F->addFnAttr(llvm::Attribute::NoUnwind);
  helper_type = llvm::FunctionType::get(i64, {i8->getPointerTo(), i32, i32, i64}, false);

  auto* entry = llvm::BasicBlock::Create(C, "entry", F);
  B.SetInsertPoint(entry);
  frame = F->getArg(0);
  auto local = [&](const char* name) { return B.CreateAlloca(i64, nullptr, name); };
  l_seq = local("seq");
  l_region_end = local("region_end");
  l_cycles = local("cycles");
  l_horizon = local("horizon");
  l_warp_instructions = local("warp_instructions");
  l_thread_instructions = local("thread_instructions");
  l_issue = local("issue");
  l_unflushed = local("unflushed");
  l_steps = B.CreateAlloca(i32, nullptr, "steps");
  l_spin = B.CreateAlloca(i32, nullptr, "spin");
  llvm::Type* p64 = i64->getPointerTo();
  regs = load_field(offsetof(Frame, regs), p64);
  ready = load_field(offsetof(Frame, ready), p64);
  tid = load_field(offsetof(Frame, tid), i32->getPointerTo());
  params = load_field(offsetof(Frame, params), i8->getPointerTo());
  active = load_field(offsetof(Frame, active), i32);
  alive = load_field(offsetof(Frame, alive), i32);
  waiting = load_field(offsetof(Frame, waiting), i32);
  limit = load_field(offsetof(Frame, steps), i32);
  widx = load_field(offsetof(Frame, widx), i32);
  diverged = B.CreateICmpNE(load_field(offsetof(Frame, diverged), i32), B.getInt32(0));
  stop = load_field(offsetof(Frame, stop), i32);
  spin_limit = load_field(offsetof(Frame, spin_limit), i32);
  for (uint32_t u = 0; u < k_u_count; ++u)
    uniform[u] = load_field(offsetof(Frame, uniform) + u * sizeof(uint64_t), i64);
  llvm::Value* helpers = load_field(offsetof(Frame, helpers), i8->getPointerTo());
  helpers_table = helpers;
  auto helper_at = [&](size_t offset) {
    return B.CreateLoad(helper_type->getPointerTo(),
                        B.CreateBitCast(B.CreateConstInBoundsGEP1_64(i8, helpers, offset),
                                        helper_type->getPointerTo()->getPointerTo()));
  };
  helper = helper_at(offsetof(Helpers, execute));
  account_global = helper_at(offsetof(Helpers, account_global));
  account_shared = helper_at(offsetof(Helpers, account_shared));
  account_local = helper_at(offsetof(Helpers, account_local));
  memory_cache = load_field(offsetof(Frame, memory), i8->getPointerTo());
  shared_base = B.CreatePtrToInt(load_field(offsetof(Frame, shared), i8->getPointerTo()), i64);
  shared_size = load_field(offsetof(Frame, shared_size), i64);
  const std::pair<llvm::AllocaInst*, size_t> counters[] = {
      {l_seq, offsetof(Frame, seq)},
      {l_region_end, offsetof(Frame, region_end)},
      {l_cycles, offsetof(Frame, cycles)},
      {l_horizon, offsetof(Frame, horizon)},
      {l_warp_instructions, offsetof(Frame, warp_instructions)},
      {l_thread_instructions, offsetof(Frame, thread_instructions)},
      {l_issue, offsetof(Frame, issue)},
      {l_unflushed, offsetof(Frame, unflushed)},
  };
  for (auto [a, off] : counters) set(a, load_field(off, i64));
  set(l_steps, B.getInt32(0));
  set(l_spin, load_field(offsetof(Frame, spin), i32));
  llvm::Value* start_pc = load_field(offsetof(Frame, pc), i32);

  // The exit: the counters and timeline back into the frame, with where the warp stopped.
  m_exit = llvm::BasicBlock::Create(C, "exit", F);
  m_fault = llvm::BasicBlock::Create(C, "fault", F);
  B.SetInsertPoint(m_fault);
  m_fault_pc = B.CreatePHI(i32, 4);
  store_field(offsetof(Frame, status), B.getInt32(k_faulted));
  llvm::BasicBlock* fault_end = B.GetInsertBlock();
  B.CreateBr(m_exit);
  B.SetInsertPoint(m_exit);
  m_exit_pc = B.CreatePHI(i32, 16);
  m_exit_pc->addIncoming(m_fault_pc, fault_end);
  for (auto [a, off] : counters) store_field(off, get(a));
  store_field(offsetof(Frame, steps), get(l_steps));
  store_field(offsetof(Frame, spin), get(l_spin));
  store_field(offsetof(Frame, pc), m_exit_pc);
  B.CreateRetVoid();

  find_blocks();
  const uint32_t n = uint32_t(k.code.size());
  Generated out;
  out.entry.assign(n, 0);
  for (uint32_t pc = 0; pc < n; ++pc) out.entry[pc] = m_leader[pc] && m_length[pc];
  llvm::BasicBlock* none = llvm::BasicBlock::Create(C, "none", F);
  B.SetInsertPoint(none);
  m_exit_pc->addIncoming(start_pc, none);
  B.CreateBr(m_exit);

  // The code twice: for a warp whose 32 lanes all run, where every lane operation that no
  // predicate guards writes all lanes (no blend with the lanes' old values, no masks), and for
  // any other set of lanes. A call never changes its lanes (exits and divergent branches leave),
  // so the choice is made once, on entry.
  llvm::Value* frame_active = active;
  auto* full_bb = llvm::BasicBlock::Create(C, "full", F);
  auto* partial_bb = llvm::BasicBlock::Create(C, "partial", F);
  B.SetInsertPoint(entry);
  B.CreateCondBr(B.CreateICmpEQ(frame_active, B.getInt32(~0u)), full_bb, partial_bb);
  const uint32_t counted_inline = m_inline, counted_helper = m_helper;
  active = B.getInt32(~0u);
  emit_body(full_bb, start_pc, none);
  m_inline = counted_inline; // the forms are counted once, in the code for any lanes
  m_helper = counted_helper;
  active = frame_active;
  emit_body(partial_bb, start_pc, none);

  std::string error;
  llvm::raw_string_ostream os(error);
  if (llvm::verifyFunction(*F, &os)) {
    os.flush();
    throw std::runtime_error("generated code does not verify: " + error.substr(0, 400));
  }
  out.module = std::move(M);
  out.inline_forms = m_inline;
  out.helper_forms = m_helper;
  return out;
}

Generated generate(const CompiledKernel& kernel, llvm::LLVMContext& context,
                   const std::string& name) {
  return Gen(kernel, context, name).run();
}

} // namespace hone::emu::jit
