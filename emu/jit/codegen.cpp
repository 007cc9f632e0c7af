#include "emu/jit/codegen.hpp"

#include "emu/cost_model.hpp"
#include "emu/jit/abi.hpp"
#include "emu/program.hpp"
#include "ptx/ir.hpp"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <cstddef>

namespace hone::emu::jit {

namespace {

using PType = ptx::Type;
constexpr unsigned k_lanes = 32;

struct IntInfo {
  unsigned width = 32;
  bool is_signed = false;
};

// The integer type the interpreter computes `t` in (exec_interp.cpp, with_int).
IntInfo int_info(PType t) {
  switch (t) {
  case PType::s8: return {8, true};
  case PType::u8:
  case PType::b8: return {8, false};
  case PType::s16: return {16, true};
  case PType::u16:
  case PType::b16: return {16, false};
  case PType::s32: return {32, true};
  case PType::s64: return {64, true};
  case PType::u64:
  case PType::b64: return {64, false};
  default: return {32, false};
  }
}

bool is_integer(PType t) {
  switch (t) {
  case PType::s8: case PType::u8: case PType::b8:
  case PType::s16: case PType::u16: case PType::b16:
  case PType::s32: case PType::u32: case PType::b32:
  case PType::s64: case PType::u64: case PType::b64:
    return true;
  default:
    return false;
  }
}

bool is_half(PType t) {
  return t == PType::f16 || t == PType::bf16 || t == PType::f16x2 || t == PType::bf16x2;
}

bool is_warp_sync(XOp op) {
  return op == XOp::shfl || op == XOp::vote || op == XOp::match || op == XOp::redux ||
         op == XOp::bar_warp || op == XOp::elect;
}

// Instructions compiled code never takes: they change which lanes of the warp run (exit) or end
// its turn (barriers). The interpreter takes them.
bool leaves(XOp op) {
  return op == XOp::exit || op == XOp::bar || op == XOp::bar_red || op == XOp::bar_arrive;
}

// The registers an instruction waits for and those it sets: BlockRunner::State::deps_of.
struct Deps {
  std::vector<uint32_t> read;
  std::vector<uint32_t> write;
};

Deps deps_of(const CompiledKernel& k, const Insn& in) {
  Deps d;
  for (const Src& s : in.src)
    if (s.kind == Src::Kind::reg) d.read.push_back(s.slot);
  if (in.addr.slot != k_no_slot) d.read.push_back(in.addr.slot);
  if (in.guard != k_no_slot) d.read.push_back(in.guard);
  if (k.carry_slot != k_no_slot &&
      ((in.flags & k_f_carry_in) || in.op == XOp::addc || in.op == XOp::subc))
    d.read.push_back(k.carry_slot);
  for (const Src& s : in.dst)
    if (s.kind == Src::Kind::reg) d.write.push_back(s.slot);
  if ((in.flags & k_f_cc) && k.carry_slot != k_no_slot) d.write.push_back(k.carry_slot);
  return d;
}

// Round-to-nearest for arithmetic: what round_of() in the interpreter maps to rn or rna.
bool rounds_to_nearest(uint8_t mode) {
  return mode != k_rnd_rz && mode != k_rnd_rm && mode != k_rnd_rp;
}

class Gen {
public:
  Gen(const CompiledKernel& k, llvm::LLVMContext& context, const std::string& name)
      : k(k), C(context), M(std::make_unique<llvm::Module>(name, context)), B(context),
        m_name(name) {}

  Generated run();

private:
  // ---- the forms written as lane operations ----------------------------------------------------
  bool inline_form(const Insn& in) const;
  void emit_inline(const Insn& in, llvm::Value* mask);
  llvm::Value* emit_int(const Insn& in);
  llvm::Value* emit_compare(const Insn& in);
  void emit_setp(const Insn& in, llvm::Value* mask);
  void emit_param_load(const Insn& in, llvm::Value* mask);
  bool memory_form(const Insn& in) const;
  void emit_warp(const Insn& in, llvm::Value* exec, llvm::Value* mask);
  llvm::Value* lane_ids(); // <0, 1, ..., 31> as i32
  llvm::Value* emit_memory(uint32_t pc, const Insn& in, llvm::Value* exec, llvm::Value* t);
  void emit_access(const Insn& in, llvm::Value* host_addr, llvm::Value* exec, llvm::Value* mask);
  llvm::Value* first_of_runs(llvm::Value* v, llvm::Value* exec);
  llvm::Value* call_helper(uint32_t pc, llvm::Value* exec, llvm::Value* t);

  // ---- one instruction, one block -----------------------------------------------------------------
  void emit_instruction(uint32_t pc);
  void emit_branch(uint32_t pc);
  void find_blocks();

  // ---- values -------------------------------------------------------------------------------------
  llvm::Value* field_ptr(size_t offset, llvm::Type* type);
  llvm::Value* load_field(size_t offset, llvm::Type* type);
  void store_field(size_t offset, llvm::Value* v);
  llvm::Value* reg_ptr(uint32_t slot);
  llvm::Value* load_reg(uint32_t slot);
  void store_reg(uint32_t slot, llvm::Value* v, llvm::Value* mask);
  llvm::Value* ready_ptr(uint32_t slot);
  llvm::Value* get(llvm::AllocaInst* a) { return B.CreateLoad(a->getAllocatedType(), a); }
  void set(llvm::AllocaInst* a, llvm::Value* v) { B.CreateStore(v, a); }
  void add(llvm::AllocaInst* a, llvm::Value* v) { set(a, B.CreateAdd(get(a), v)); }
  llvm::Constant* splat(uint64_t v) {
    return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes),
                                          llvm::ConstantInt::get(i64, v));
  }
  llvm::Value* umax(llvm::Value* a, llvm::Value* b) {
    return B.CreateBinaryIntrinsic(llvm::Intrinsic::umax, a, b);
  }
  llvm::VectorType* vec(llvm::Type* element) { return llvm::FixedVectorType::get(element, k_lanes); }
  llvm::Value* narrow(llvm::Value* v, unsigned width) {
    return width == 64 ? v : B.CreateTrunc(v, vec(B.getIntNTy(width)));
  }
  llvm::Value* widen(llvm::Value* v, bool sign) {
    if (v->getType() == v64) return v;
    return sign ? B.CreateSExt(v, v64) : B.CreateZExt(v, v64);
  }
  llvm::Value* src(const Src& s);
  llvm::Value* sreg(Sreg s);
  void write(const Src& d, llvm::Value* v, llvm::Value* mask);
  llvm::Value* as_f32(llvm::Value* v) { return B.CreateBitCast(narrow(v, 32), vf32); }
  llvm::Value* f32_result(llvm::Value* f); // canonical NaN, as 64-bit lanes
  llvm::Value* exec_of(const Insn& in);
  llvm::Value* mask_of(llvm::Value* exec) { return B.CreateBitCast(exec, vbool); }
  void count(const Insn& in, llvm::Value* exec);
  llvm::Value* issue_time(const Deps& d);
  void retire(const Insn& in, const Deps& d, llvm::Value* t, llvm::Value* nonzero,
              llvm::Value* latency);
  void exit_if(llvm::Value* cond, uint32_t pc);
  void exit_at(uint32_t pc);
  void tag(llvm::Instruction* i, llvm::MDNode* tbaa) { i->setMetadata(llvm::LLVMContext::MD_tbaa, tbaa); }

  const CompiledKernel& k;
  llvm::LLVMContext& C;
  std::unique_ptr<llvm::Module> M;
  llvm::IRBuilder<> B;
  std::string m_name;

  llvm::IntegerType* i8 = nullptr;
  llvm::IntegerType* i32 = nullptr;
  llvm::IntegerType* i64 = nullptr;
  llvm::VectorType* v64 = nullptr;
  llvm::VectorType* v32 = nullptr;
  llvm::VectorType* vf32 = nullptr;
  llvm::VectorType* vf64 = nullptr;
  llvm::VectorType* vbool = nullptr;
  llvm::FunctionType* helper_type = nullptr;

  llvm::Function* F = nullptr;
  llvm::Value* frame = nullptr;  // i8*
  llvm::Value* regs = nullptr;   // i64*
  llvm::Value* ready = nullptr;  // i64*
  llvm::Value* tid = nullptr;    // i32*
  llvm::Value* params = nullptr; // i8*
  llvm::Value* active = nullptr; // i32
  llvm::Value* limit = nullptr;  // i32
  llvm::Value* widx = nullptr;   // i32
  llvm::Value* helper = nullptr; // Helpers::execute
  llvm::Value* account_global = nullptr;
  llvm::Value* account_shared = nullptr;
  llvm::Value* memory_cache = nullptr; // MemoryCache*, as i8*
  llvm::Value* shared_base = nullptr;  // i64: the block's shared memory
  llvm::Value* shared_size = nullptr;  // i64
  llvm::AllocaInst* l_seq = nullptr;
  llvm::AllocaInst* l_region_end = nullptr;
  llvm::AllocaInst* l_cycles = nullptr;
  llvm::AllocaInst* l_horizon = nullptr;
  llvm::AllocaInst* l_warp_instructions = nullptr;
  llvm::AllocaInst* l_thread_instructions = nullptr;
  llvm::AllocaInst* l_issue = nullptr;
  llvm::AllocaInst* l_unflushed = nullptr;
  llvm::AllocaInst* l_steps = nullptr;
  llvm::AllocaInst* l_spin = nullptr;
  llvm::Value* diverged = nullptr; // i1
  llvm::Value* stop = nullptr;     // i32
  llvm::Value* spin_limit = nullptr;
  llvm::Value* uniform[k_u_count] = {};

  llvm::BasicBlock* m_exit = nullptr;
  llvm::PHINode* m_exit_pc = nullptr;
  llvm::BasicBlock* m_fault = nullptr;
  llvm::PHINode* m_fault_pc = nullptr;
  std::vector<llvm::BasicBlock*> m_block; // per pc: the block that starts there (leaders)
  std::vector<uint8_t> m_leader;
  std::vector<uint32_t> m_length;         // per leader: the steps its block takes
  llvm::MDNode* m_tbaa_regs = nullptr;
  llvm::MDNode* m_tbaa_ready = nullptr;
  llvm::MDNode* m_tbaa_frame = nullptr;
  llvm::MDNode* m_tbaa_param = nullptr;
  llvm::MDNode* m_tbaa_memory = nullptr;
  uint32_t m_inline = 0;
  uint32_t m_helper = 0;
};

// ---- values ---------------------------------------------------------------------------------------

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
  auto* l = B.CreateAlignedLoad(v64, reg_ptr(slot), llvm::Align(8));
  tag(l, m_tbaa_regs);
  return l;
}

// Lanes outside `mask` keep their values, as each() in the interpreter writes only exec lanes.
void Gen::store_reg(uint32_t slot, llvm::Value* v, llvm::Value* mask) {
  llvm::Value* merged = B.CreateSelect(mask, v, load_reg(slot));
  auto* s = B.CreateAlignedStore(merged, reg_ptr(slot), llvm::Align(8));
  tag(s, m_tbaa_regs);
}

llvm::Value* Gen::ready_ptr(uint32_t slot) {
  return B.CreateConstInBoundsGEP1_64(i64, ready, slot);
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
  auto timer = [&] {
    return B.CreateUDiv(B.CreateMul(get(l_cycles), B.getInt64(1'000'000)),
                        B.getInt64(DeviceLimits::k_clock_khz));
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

llvm::Value* Gen::f32_result(llvm::Value* f) {
  llvm::Value* bits = B.CreateBitCast(f, v32);
  llvm::Value* nan = B.CreateFCmpUNO(f, f);
  llvm::Value* canon = llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes),
                                                      llvm::ConstantInt::get(i32, 0x7fffffffu));
  return B.CreateZExt(B.CreateSelect(nan, canon, bits), v64);
}

// ---- the instruction's lanes, counters and timeline (BlockRunner::State::step and retire) -------

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
  for (uint32_t r : d.read) {
    auto* l = B.CreateLoad(i64, ready_ptr(r));
    tag(l, m_tbaa_ready);
    t = umax(t, l);
  }
  return t;
}

void Gen::retire(const Insn& in, const Deps& d, llvm::Value* t, llvm::Value* nonzero,
                 llvm::Value* latency) {
  set(l_seq, B.CreateAdd(get(l_seq), B.getInt64(in.cost)));
  set(l_region_end, umax(get(l_region_end), B.CreateAdd(t, B.getInt64(1))));
  llvm::Value* done = B.CreateAdd(t, latency);
  set(l_horizon, B.CreateSelect(nonzero, umax(get(l_horizon), done), get(l_horizon)));
  for (uint32_t w : d.write) {
    auto* old = B.CreateLoad(i64, ready_ptr(w));
    tag(old, m_tbaa_ready);
    auto* s = B.CreateStore(B.CreateSelect(nonzero, done, old), ready_ptr(w));
    tag(s, m_tbaa_ready);
  }
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

// ---- lane operations ------------------------------------------------------------------------------

// The forms emit_inline() writes as lane operations: each exactly the interpreter's expression for
// that form (exec_interp.cpp: exec_arith, exec_convert, fast_memory); every other form is the
// helper's.
bool Gen::inline_form(const Insn& in) const {
  const uint32_t f = in.flags;
  switch (in.op) {
  case XOp::nop:
  case XOp::activemask:
  case XOp::shfl:
  case XOp::vote:
  case XOp::match:
  case XOp::redux:
  case XOp::bar_warp:
  case XOp::elect:
    return true;
  case XOp::mov:
    return in.nsrc == 1 && in.ndst == 1;
  case XOp::and_:
  case XOp::or_:
  case XOp::xor_:
  case XOp::not_:
  case XOp::cnot:
    return !is_half(in.type);
  case XOp::selp:
    return true;
  case XOp::cvta:
  case XOp::cvta_to:
    return in.mode == 0;
  case XOp::add:
  case XOp::sub:
  case XOp::mul:
  case XOp::fma:
    if (in.type == PType::f32)
      return !(f & (k_f_ftz | k_f_sat)) && rounds_to_nearest(in.mode);
    [[fallthrough]];
  case XOp::mad:
    if (!is_integer(in.type) || (f & (k_f_cc | k_f_sat | k_f_hi | k_f_carry_in))) return false;
    if (in.op == XOp::fma) return false;
    if (f & k_f_wide) return (in.op == XOp::mul || in.op == XOp::mad) && int_info(in.type).width <= 32;
    return true;
  case XOp::abs:
  case XOp::neg:
    if (in.type == PType::f32) return !(f & k_f_ftz);
    return is_integer(in.type);
  case XOp::min:
  case XOp::max:
    return is_integer(in.type) && !(f & k_f_relu);
  case XOp::shl:
  case XOp::shr:
  case XOp::popc:
  case XOp::clz:
    return is_integer(in.type);
  case XOp::setp:
    if (in.type2 == PType::f32) return !(f & k_f_ftz);
    return in.type2 == PType::f64 || is_integer(in.type2);
  case XOp::cvt:
    return in.nsrc == 1 && is_integer(in.type) && is_integer(in.type2) &&
           !(f & (k_f_sat | k_f_relu | k_f_satfinite));
  case XOp::ld: {
    if (in.addr.space != AddrSpace::kparam || in.addr.slot != k_no_slot || (f & k_f_volatile))
      return false;
    const uint32_t esize = std::max<uint32_t>(ptx::type_size(in.type), 1);
    const uint32_t total = esize * in.vec;
    if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return false;
    const int64_t off = in.addr.offset;
    return off >= 0 && (total == 1 || off % total == 0) && uint64_t(off) + total <= k.param_bytes;
  }
  default:
    return false;
  }
}

// Integer add, sub, mul(.wide), mad(.wide), min, max, shl, shr, abs, neg, popc, clz of in.type.
llvm::Value* Gen::emit_int(const Insn& in) {
  const IntInfo t = int_info(in.type);
  const unsigned W = t.width;
  llvm::Value* a64 = src(in.src[0]);
  llvm::Value* a = narrow(a64, W);
  auto b = [&] { return narrow(src(in.src[1]), W); };
  auto out = [&](llvm::Value* r) { return widen(r, false); }; // ubits(): zero-extended
  switch (in.op) {
  case XOp::add: return out(B.CreateAdd(a, b()));
  case XOp::sub: return out(B.CreateSub(a, b()));
  case XOp::mul:
  case XOp::mad: {
    if (in.flags & k_f_wide) {
      // Wd(a) * Wd(b) in 64 bits, then mad adds the whole 64-bit third operand
      llvm::Value* p = B.CreateMul(widen(a, t.is_signed), widen(b(), t.is_signed));
      if (in.op == XOp::mad) p = B.CreateAdd(p, src(in.src[2]));
      return p;
    }
    llvm::Value* p = B.CreateMul(a, b());
    if (in.op == XOp::mad) p = B.CreateAdd(p, narrow(src(in.src[2]), W));
    return out(p);
  }
  case XOp::min:
  case XOp::max: {
    llvm::Value* bv = b();
    llvm::Value* lt = t.is_signed ? B.CreateICmpSLT(a, bv) : B.CreateICmpULT(a, bv);
    // std::min(a, b) is b < a ? b : a; std::max(a, b) is a < b ? b : a
    if (in.op == XOp::min) {
      llvm::Value* blt = t.is_signed ? B.CreateICmpSLT(bv, a) : B.CreateICmpULT(bv, a);
      return out(B.CreateSelect(blt, bv, a));
    }
    return out(B.CreateSelect(lt, bv, a));
  }
  case XOp::shl:
  case XOp::shr: {
    llvm::Value* s32 = narrow(src(in.src[1]), 32); // uint32_t(b)
    llvm::Value* s = W == 32 ? s32 : W > 32 ? B.CreateZExt(s32, vec(B.getIntNTy(W)))
                                            : B.CreateTrunc(s32, vec(B.getIntNTy(W)));
    llvm::Value* big = B.CreateICmpUGE(s32, llvm::ConstantVector::getSplat(
                                                llvm::ElementCount::getFixed(k_lanes),
                                                llvm::ConstantInt::get(i32, W)));
    llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
    if (in.op == XOp::shl) return out(B.CreateSelect(big, zero, B.CreateShl(a, s)));
    if (t.is_signed) {
      llvm::Value* top = llvm::ConstantInt::get(a->getType(), W - 1);
      return out(B.CreateAShr(a, B.CreateSelect(big, top, s)));
    }
    return out(B.CreateSelect(big, zero, B.CreateLShr(a, s)));
  }
  case XOp::abs: {
    if (!t.is_signed) return out(a);
    llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
    return out(B.CreateSelect(B.CreateICmpSLT(a, zero), B.CreateSub(zero, a), a));
  }
  case XOp::neg:
    return out(B.CreateSub(llvm::Constant::getNullValue(a->getType()), a));
  case XOp::popc:
    return out(B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, a));
  case XOp::clz:
    return out(B.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, a, B.getFalse()));
  default:
    return splat(0);
  }
}

// setp's comparison (sem::cmp_int, sem::cmp_float) as <32 x i1>.
llvm::Value* Gen::emit_compare(const Insn& in) {
  using P = llvm::CmpInst::Predicate;
  const auto op = CmpOp(in.mode);
  llvm::Value* a = src(in.src[0]);
  llvm::Value* b = src(in.src[1]);
  if (in.type2 == PType::f32 || in.type2 == PType::f64) {
    if (in.type2 == PType::f32) {
      a = as_f32(a);
      b = as_f32(b);
    } else {
      a = B.CreateBitCast(a, vf64);
      b = B.CreateBitCast(b, vf64);
    }
    P p = P::FCMP_FALSE;
    switch (op) {
    case k_cmp_eq: p = P::FCMP_OEQ; break;
    case k_cmp_ne: p = P::FCMP_ONE; break;
    case k_cmp_lt: case k_cmp_lo: p = P::FCMP_OLT; break;
    case k_cmp_le: case k_cmp_ls: p = P::FCMP_OLE; break;
    case k_cmp_gt: case k_cmp_hi: p = P::FCMP_OGT; break;
    case k_cmp_ge: case k_cmp_hs: p = P::FCMP_OGE; break;
    case k_cmp_equ: p = P::FCMP_UEQ; break;
    case k_cmp_neu: p = P::FCMP_UNE; break;
    case k_cmp_ltu: p = P::FCMP_ULT; break;
    case k_cmp_leu: p = P::FCMP_ULE; break;
    case k_cmp_gtu: p = P::FCMP_UGT; break;
    case k_cmp_geu: p = P::FCMP_UGE; break;
    case k_cmp_num: p = P::FCMP_ORD; break;
    case k_cmp_nan: p = P::FCMP_UNO; break;
    }
    return B.CreateFCmp(p, a, b);
  }
  const IntInfo t = int_info(in.type2);
  a = narrow(a, t.width);
  b = narrow(b, t.width);
  const bool s = t.is_signed;
  P p = P::ICMP_EQ;
  switch (op) {
  case k_cmp_eq: case k_cmp_equ: p = P::ICMP_EQ; break;
  case k_cmp_ne: case k_cmp_neu: p = P::ICMP_NE; break;
  case k_cmp_lt: case k_cmp_ltu: p = s ? P::ICMP_SLT : P::ICMP_ULT; break;
  case k_cmp_le: case k_cmp_leu: p = s ? P::ICMP_SLE : P::ICMP_ULE; break;
  case k_cmp_gt: case k_cmp_gtu: p = s ? P::ICMP_SGT : P::ICMP_UGT; break;
  case k_cmp_ge: case k_cmp_geu: p = s ? P::ICMP_SGE : P::ICMP_UGE; break;
  case k_cmp_lo: p = P::ICMP_ULT; break;
  case k_cmp_ls: p = P::ICMP_ULE; break;
  case k_cmp_hi: p = P::ICMP_UGT; break;
  case k_cmp_hs: p = P::ICMP_UGE; break;
  case k_cmp_num: return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes), B.getTrue());
  case k_cmp_nan: return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes), B.getFalse());
  }
  return B.CreateICmp(p, a, b);
}

void Gen::emit_setp(const Insn& in, llvm::Value* mask) {
  llvm::Value* c = emit_compare(in);
  llvm::Value* nc = B.CreateNot(c);
  llvm::Value* p = c;
  llvm::Value* q = nc;
  if (in.mode2 != k_bool_none) {
    llvm::Value* cc = B.CreateICmpNE(src(in.src[2]), splat(0));
    switch (in.mode2) {
    case k_bool_and: p = B.CreateAnd(c, cc); q = B.CreateAnd(nc, cc); break;
    case k_bool_or: p = B.CreateOr(c, cc); q = B.CreateOr(nc, cc); break;
    case k_bool_xor: p = B.CreateXor(c, cc); q = B.CreateXor(nc, cc); break;
    default: break;
    }
  }
  write(in.dst[0], B.CreateZExt(p, v64), mask);
  if (in.ndst == 2) write(in.dst[1], B.CreateZExt(q, v64), mask);
}

// ld.param at a constant offset inside the parameters: one value, the same in every lane.
void Gen::emit_param_load(const Insn& in, llvm::Value* mask) {
  const uint32_t esize = std::max<uint32_t>(ptx::type_size(in.type), 1);
  const bool sign = ptx::is_signed(in.type);
  llvm::IntegerType* et = B.getIntNTy(esize * 8);
  for (uint32_t e = 0; e < in.vec; ++e) {
    llvm::Value* p = B.CreateBitCast(
        B.CreateConstInBoundsGEP1_64(i8, params, uint64_t(in.addr.offset) + e * esize),
        et->getPointerTo());
    auto* l = B.CreateAlignedLoad(et, p, llvm::Align(1));
    tag(l, m_tbaa_param);
    llvm::Value* v = esize == 8 ? static_cast<llvm::Value*>(l)
                                : sign ? B.CreateSExt(l, i64) : B.CreateZExt(l, i64);
    write(in.dst[e], B.CreateVectorSplat(k_lanes, v), mask);
  }
}

void Gen::emit_inline(const Insn& in, llvm::Value* mask) {
  ++m_inline;
  switch (in.op) {
  case XOp::nop:
  case XOp::bar_warp: // the lanes at one position run together already
    return;
  case XOp::activemask:
  case XOp::shfl:
  case XOp::vote:
  case XOp::match:
  case XOp::redux:
  case XOp::elect:
    emit_warp(in, B.CreateBitCast(mask, i32), mask);
    return;
  case XOp::mov:
    write(in.dst[0], src(in.src[0]), mask);
    return;
  case XOp::and_:
    write(in.dst[0], B.CreateAnd(src(in.src[0]), src(in.src[1])), mask);
    return;
  case XOp::or_:
    write(in.dst[0], B.CreateOr(src(in.src[0]), src(in.src[1])), mask);
    return;
  case XOp::xor_:
    write(in.dst[0], B.CreateXor(src(in.src[0]), src(in.src[1])), mask);
    return;
  case XOp::not_:
    if (in.type == PType::pred) {
      write(in.dst[0], B.CreateZExt(B.CreateICmpEQ(src(in.src[0]), splat(0)), v64), mask);
    } else {
      write(in.dst[0], B.CreateNot(src(in.src[0])), mask);
    }
    return;
  case XOp::cnot:
    write(in.dst[0], B.CreateZExt(B.CreateICmpEQ(src(in.src[0]), splat(0)), v64), mask);
    return;
  case XOp::selp: {
    llvm::Value* c = B.CreateICmpNE(src(in.src[2]), splat(0));
    write(in.dst[0], B.CreateSelect(c, src(in.src[0]), src(in.src[1])), mask);
    return;
  }
  case XOp::cvta:
  case XOp::cvta_to: {
    const bool narrow32 = in.type == PType::u32 || in.type == PType::b32;
    llvm::Value* a = src(in.src[0]);
    write(in.dst[0], narrow32 ? widen(narrow(a, 32), false) : a, mask);
    return;
  }
  case XOp::setp:
    emit_setp(in, mask);
    return;
  case XOp::cvt: {
    const IntInfo s = int_info(in.type2);
    const IntInfo d = int_info(in.type);
    llvm::Value* x = widen(narrow(src(in.src[0]), s.width), s.is_signed);
    write(in.dst[0], widen(narrow(x, d.width), d.is_signed), mask);
    return;
  }
  case XOp::ld:
    emit_param_load(in, mask);
    return;
  default:
    break;
  }
  if (in.type == PType::f32) {
    llvm::Value* r = nullptr;
    switch (in.op) {
    case XOp::add: r = f32_result(B.CreateFAdd(as_f32(src(in.src[0])), as_f32(src(in.src[1])))); break;
    case XOp::sub: r = f32_result(B.CreateFSub(as_f32(src(in.src[0])), as_f32(src(in.src[1])))); break;
    case XOp::mul: r = f32_result(B.CreateFMul(as_f32(src(in.src[0])), as_f32(src(in.src[1])))); break;
    case XOp::fma: {
      llvm::Function* fma = llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::fma, {vf32});
      r = f32_result(B.CreateCall(
          fma, {as_f32(src(in.src[0])), as_f32(src(in.src[1])), as_f32(src(in.src[2]))}));
      break;
    }
    case XOp::abs: r = B.CreateAnd(narrow(src(in.src[0]), 32), 0x7fffffffu); r = widen(r, false); break;
    case XOp::neg: r = B.CreateXor(narrow(src(in.src[0]), 32), 0x80000000u); r = widen(r, false); break;
    default: r = splat(0); break;
    }
    write(in.dst[0], r, mask);
    return;
  }
  write(in.dst[0], emit_int(in), mask);
}

llvm::Value* Gen::lane_ids() {
  std::vector<llvm::Constant*> c;
  for (uint32_t l = 0; l < k_lanes; ++l) c.push_back(llvm::ConstantInt::get(i32, l));
  return llvm::ConstantVector::get(c);
}

// The warp-level forms of exec_warp(), for a converged warp whose lanes in `exec` all arrived.
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
    llvm::Value* ballot = B.CreateAnd(bits_of(B.CreateICmpNE(src(in.src[0]), splat(0))), exec);
    llvm::Value* r = nullptr;
    switch (in.mode) {
    case k_vote_all: r = B.CreateZExt(B.CreateICmpEQ(ballot, exec), i64); break;
    case k_vote_any: r = B.CreateZExt(B.CreateICmpNE(ballot, B.getInt32(0)), i64); break;
    case k_vote_uni:
      r = B.CreateZExt(B.CreateOr(B.CreateICmpEQ(ballot, B.getInt32(0)), B.CreateICmpEQ(ballot, exec)), i64);
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
    llvm::Value* acc = B.CreateUnaryIntrinsic(id, B.CreateSelect(mask, v, c32(identity)));
    write(in.dst[0], B.CreateVectorSplat(k_lanes, B.CreateZExt(acc, i64)), mask);
    return;
  }
  case XOp::match: {
    llvm::Value* vals = src(in.src[0]);
    if (in.mode == 0) {
      // .any: each lane, the lanes of exec holding its value
      llvm::Value* out = splat(0);
      for (uint32_t l = 0; l < k_lanes; ++l) {
        llvm::Value* same = bits_of(B.CreateICmpEQ(vals, B.CreateVectorSplat(k_lanes, B.CreateExtractElement(vals, l))));
        out = B.CreateInsertElement(out, B.CreateZExt(B.CreateAnd(same, exec), i64), l);
      }
      write(in.dst[0], out, mask);
    } else {
      llvm::Value* first = B.CreateVectorSplat(k_lanes, B.CreateExtractElement(vals, first_lane()));
      llvm::Value* differ = B.CreateAnd(bits_of(B.CreateICmpNE(vals, first)), exec);
      llvm::Value* all = B.CreateICmpEQ(differ, B.getInt32(0));
      write(in.dst[0], B.CreateVectorSplat(k_lanes, B.CreateZExt(B.CreateSelect(all, exec, B.getInt32(0)), i64)), mask);
      if (in.ndst == 2) write(in.dst[1], B.CreateVectorSplat(k_lanes, B.CreateZExt(all, i64)), mask);
    }
    return;
  }
  case XOp::elect: {
    llvm::Value* members = B.CreateAnd(exec, B.CreateTrunc(B.CreateExtractElement(src(in.src[0]), first_lane()), i32));
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

// ---- control ----------------------------------------------------------------------------------------

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
  if (in.guard != k_no_slot) {
    // lanes going both ways: the interpreter diverges the warp
    llvm::Value* split = B.CreateAnd(B.CreateICmpNE(exec, active), B.CreateICmpNE(exec, B.getInt32(0)));
    exit_if(split, pc);
  }
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
  if (is_warp_sync(in.op)) {
    // sync_arrive(): the lanes of the membermask that are alive must all be here, else the
    // interpreter makes the arriving ones wait
    const Src& ms = in.op == XOp::bar_warp || in.op == XOp::elect ? in.src[0]
                    : in.op == XOp::shfl                           ? in.src[3]
                                                                   : in.src[1];
    llvm::Value* first = B.CreateAnd(B.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, exec, B.getFalse()),
                                     B.getInt32(31));
    llvm::Value* need = B.CreateAnd(B.CreateTrunc(B.CreateExtractElement(src(ms), first), i32), active);
    llvm::Value* missing = B.CreateICmpNE(B.CreateAnd(need, B.CreateNot(exec)), B.getInt32(0));
    // a diverged warp's lanes may wait here already: the interpreter counts them
    exit_if(B.CreateOr(diverged, B.CreateAnd(B.CreateICmpNE(exec, B.getInt32(0)), missing)), pc);
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

Generated Gen::run() {
  i8 = B.getInt8Ty();
  i32 = B.getInt32Ty();
  i64 = B.getInt64Ty();
  v64 = vec(i64);
  v32 = vec(i32);
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
  limit = load_field(offsetof(Frame, steps), i32);
  widx = load_field(offsetof(Frame, widx), i32);
  diverged = B.CreateICmpNE(load_field(offsetof(Frame, diverged), i32), B.getInt32(0));
  stop = load_field(offsetof(Frame, stop), i32);
  spin_limit = load_field(offsetof(Frame, spin_limit), i32);
  for (uint32_t u = 0; u < k_u_count; ++u)
    uniform[u] = load_field(offsetof(Frame, uniform) + u * sizeof(uint64_t), i64);
  llvm::Value* helpers = load_field(offsetof(Frame, helpers), i8->getPointerTo());
  auto helper_at = [&](size_t offset) {
    return B.CreateLoad(helper_type->getPointerTo(),
                        B.CreateBitCast(B.CreateConstInBoundsGEP1_64(i8, helpers, offset),
                                        helper_type->getPointerTo()->getPointerTo()));
  };
  helper = helper_at(offsetof(Helpers, execute));
  account_global = helper_at(offsetof(Helpers, account_global));
  account_shared = helper_at(offsetof(Helpers, account_shared));
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
  m_block.assign(n, nullptr);
  for (uint32_t pc = 0; pc < n; ++pc) {
    if (m_leader[pc]) m_block[pc] = llvm::BasicBlock::Create(C, "pc" + std::to_string(pc), F);
  }
  Generated out;
  out.entry.assign(n, 0);
  B.SetInsertPoint(entry);
  llvm::BasicBlock* none = llvm::BasicBlock::Create(C, "none", F);
  auto* dispatch = B.CreateSwitch(start_pc, none);
  for (uint32_t pc = 0; pc < n; ++pc) {
    if (m_leader[pc] && m_length[pc]) {
      dispatch->addCase(B.getInt32(pc), m_block[pc]);
      out.entry[pc] = 1;
    }
  }
  B.SetInsertPoint(none);
  m_exit_pc->addIncoming(start_pc, none);
  B.CreateBr(m_exit);

  bool open = false; // the current block falls through to the next instruction
  for (uint32_t pc = 0; pc < n; ++pc) {
    if (m_leader[pc]) {
      if (open) B.CreateBr(m_block[pc]);
      B.SetInsertPoint(m_block[pc]);
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

} // namespace

Generated generate(const CompiledKernel& kernel, llvm::LLVMContext& context,
                   const std::string& name) {
  return Gen(kernel, context, name).run();
}

} // namespace hone::emu::jit
