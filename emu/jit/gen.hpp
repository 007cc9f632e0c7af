// The code generator's internals, shared by its files (emu/jit/README.md): the kernel's decoded
// instructions become one LLVM function; each gen_*.cpp writes one family of instruction forms.
#pragma once

#include "emu/cost_model.hpp"
#include "emu/jit/abi.hpp"
#include "emu/jit/codegen.hpp"
#include "emu/program.hpp"
#include "ptx/ir.hpp"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <cstddef>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

namespace hone::emu::jit {

using PType = ptx::Type;
constexpr unsigned k_lanes = 32;

struct IntInfo {
  unsigned width = 32;
  bool is_signed = false;
};

// The integer type the interpreter computes `t` in (exec_interp.cpp, with_int).
inline IntInfo int_info(PType t) {
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

inline bool is_integer(PType t) {
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

inline bool is_half(PType t) {
  return t == PType::f16 || t == PType::bf16 || t == PType::f16x2 || t == PType::bf16x2;
}

inline bool is_warp_sync(XOp op) {
  return op == XOp::shfl || op == XOp::vote || op == XOp::match || op == XOp::redux ||
         op == XOp::bar_warp || op == XOp::elect || is_matrix(op);
}

// Instructions compiled code never takes: they change which lanes of the warp run (exit) or end
// its turn (barriers). The interpreter takes them.
inline bool leaves(XOp op) {
  return op == XOp::exit || op == XOp::bar || op == XOp::bar_red || op == XOp::bar_arrive;
}

// The registers an instruction waits for and those it sets: BlockRunner::State::deps_of.
struct Deps {
  std::vector<uint32_t> read;
  std::vector<uint32_t> write;
};

inline Deps deps_of(const CompiledKernel& k, const Insn& in) {
  Deps d;
  for (const Src& s : in.src)
    if (s.kind == Src::Kind::reg) d.read.push_back(s.slot);
  if (in.addr.slot != k_no_slot) d.read.push_back(in.addr.slot);
  if (in.guard != k_no_slot) d.read.push_back(in.guard);
  if (k.carry_slot != k_no_slot &&
      ((in.flags & k_f_carry_in) || in.op == XOp::addc || in.op == XOp::subc))
    d.read.push_back(k.carry_slot);
  const MatrixOperands m = is_matrix(in.op) ? matrix_operands(k, in) : MatrixOperands{};
  for (uint32_t i = 0; i < m.nreads; ++i)
    if (m.reads[i].kind == Src::Kind::reg) d.read.push_back(m.reads[i].slot);
  for (const Src& s : in.dst)
    if (s.kind == Src::Kind::reg) d.write.push_back(s.slot);
  if ((in.flags & k_f_cc) && k.carry_slot != k_no_slot) d.write.push_back(k.carry_slot);
  for (uint32_t i = 0; i < m.nwrites; ++i)
    if (m.writes[i].kind == Src::Kind::reg) d.write.push_back(m.writes[i].slot);
  return d;
}

// Round-to-nearest for arithmetic: what round_of() in the interpreter maps to rn or rna.
inline bool rounds_to_nearest(uint8_t mode) {
  return mode != k_rnd_rz && mode != k_rnd_rm && mode != k_rnd_rp;
}

// An f32/f64 arithmetic form in a directed rounding mode (not .approx or .full, which have none).
inline bool directed(const Insn& in) {
  switch (in.op) {
  case XOp::add: case XOp::sub: case XOp::mul: case XOp::fma: case XOp::div: case XOp::rcp:
  case XOp::sqrt:
    return !(in.flags & (k_f_approx | k_f_full)) && !rounds_to_nearest(in.mode);
  default:
    return false;
  }
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
  llvm::Value* mul_hi(llvm::Value* a, llvm::Value* b, const IntInfo& t);
  void emit_carry(const Insn& in, llvm::Value* mask);
  void emit_setp(const Insn& in, llvm::Value* mask);
  void emit_param_load(const Insn& in, llvm::Value* mask);
  bool memory_form(const Insn& in) const;
  bool atomic_form(const Insn& in) const;
  void emit_atomic(const Insn& in, llvm::Value* host, llvm::Value* exec, llvm::Value* mask,
                   bool block_local);
  void emit_warp(const Insn& in, llvm::Value* exec, llvm::Value* mask);
  llvm::Value* lane_ids(); // <0, 1, ..., 31> as i32
  llvm::Value* emit_memory(uint32_t pc, const Insn& in, llvm::Value* exec, llvm::Value* t);
  void emit_access(const Insn& in, llvm::Value* host_addr, llvm::Value* exec, llvm::Value* mask);
  std::vector<std::pair<llvm::Value*, llvm::BasicBlock*>>
  emit_consecutive(uint32_t pc, const Insn& in, llvm::Value* exec, llvm::Value* addr, llvm::Value* t);
  llvm::Value* in_cached_allocation(uint32_t pc, llvm::Value* lo, llvm::Value* hi, uint64_t total,
                                    bool writes);
  llvm::Value* all_consecutive(llvm::Value* v, llvm::Value* base0, uint64_t step);
  void emit_wide(const Insn& in, llvm::Value* base0, llvm::Value* mask);
  void emit_lanes(const Insn& in, llvm::Value* host, llvm::Value* mask);
  llvm::Value* first_of_runs(llvm::Value* v, llvm::Value* exec);
  llvm::Value* call_helper(uint32_t pc, llvm::Value* exec, llvm::Value* t);

  // ---- one instruction, one block -----------------------------------------------------------------
  void emit_instruction(uint32_t pc);
  void emit_branch(uint32_t pc);
  void find_blocks();
  void emit_body(llvm::BasicBlock* dispatch_bb, llvm::Value* start_pc, llvm::BasicBlock* none);

  // ---- values -------------------------------------------------------------------------------------
  llvm::Value* field_ptr(size_t offset, llvm::Type* type);
  llvm::Value* load_field(size_t offset, llvm::Type* type);
  void store_field(size_t offset, llvm::Value* v);
  llvm::Value* reg_ptr(uint32_t slot);
  llvm::Value* load_reg(uint32_t slot);
  void store_reg(uint32_t slot, llvm::Value* v, llvm::Value* mask);
  llvm::Value* ready_ptr(uint32_t slot);
  llvm::Value* load_ready(uint32_t slot);
  void store_ready(uint32_t slot, llvm::Value* v);
  // What this straight-line stretch of code already holds in SSA values: registers' lanes and
  // ready cycles as last loaded or stored (stores still reach memory at once: helpers and exits
  // read it). Valid while the builder's block is dominated by where they were made: forgotten at
  // every leader, and for an instruction's destinations after paths that write them merge.
  std::unordered_map<uint32_t, llvm::Value*> m_known_regs;
  std::unordered_map<uint32_t, llvm::Value*> m_known_ready;
  void forget_all() {
    m_known_regs.clear();
    m_known_ready.clear();
  }
  // At a branch into paths that merge again: each path starts from what the branch point knew.
  struct Known {
    std::unordered_map<uint32_t, llvm::Value*> regs, ready;
  };
  Known known() const { return {m_known_regs, m_known_ready}; }
  void restore(const Known& k) {
    m_known_regs = k.regs;
    m_known_ready = k.ready;
  }
  void forget_destinations(const Insn& in) {
    for (const Src& d : in.dst)
      if (d.kind == Src::Kind::reg) m_known_regs.erase(d.slot);
    if (is_matrix(in.op)) {
      const MatrixOperands m = matrix_operands(k, in);
      for (uint32_t i = 0; i < m.nwrites; ++i)
        if (m.writes[i].kind == Src::Kind::reg) m_known_regs.erase(m.writes[i].slot);
    }
    if (k.carry_slot != k_no_slot) m_known_regs.erase(k.carry_slot);
  }
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
  // floating point (gen_float.cpp)
  llvm::Value* flush_f32(llvm::Value* f);
  llvm::Value* finish_f32(llvm::Value* f, bool ftz, bool sat);
  llvm::Value* f32_operand(const Src& s, bool ftz);
  llvm::Value* minmax_f32(const Insn& in);
  llvm::Value* emit_f32(const Insn& in);
  llvm::Value* emit_f64(const Insn& in);
  llvm::Value* call_math(size_t helper, llvm::Value* x, llvm::Value* exec);
  llvm::Value* per_lane(size_t helper, llvm::FunctionType* type, const std::vector<llvm::Value*>& args,
                        llvm::Value* exec);
  llvm::Value* emit_directed(const Insn& in, llvm::Value* exec);
  llvm::Value* emit_f32_approx(const Insn& in, llvm::Value* exec);
  llvm::Value* propagate_f64(llvm::Value* r, std::initializer_list<llvm::Value*> operands);
  llvm::Value* testp(llvm::Value* mag, uint64_t inf, uint64_t min_normal, uint8_t op,
                     llvm::VectorType* type);
  llvm::Value* half_to_float(llvm::Value* h16, bool bf);
  llvm::Value* float_to_half(llvm::Value* f, bool bf);
  llvm::Value* double_to_f16(llvm::Value* d);
  llvm::Value* flush_half(llvm::Value* h, bool bf);
  llvm::Value* is_nan_half(llvm::Value* h, bool bf);
  llvm::Value* finish_half(llvm::Value* h, bool bf, bool ftz, bool sat, bool relu);
  llvm::Value* half_element(const Insn& in, llvm::Value* a, llvm::Value* b, llvm::Value* c);
  llvm::Value* emit_half(const Insn& in);
  llvm::Value* emit_float_convert(const Insn& in);
  bool float_convert_form(const Insn& in) const;
  llvm::Constant* splat32(uint32_t v) {
    return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes),
                                          llvm::ConstantInt::get(i32, v));
  }
  llvm::Constant* splat16(uint16_t v) {
    return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes),
                                          llvm::ConstantInt::get(B.getInt16Ty(), v));
  }
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
  llvm::VectorType* v16 = nullptr;
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
  llvm::Value* alive = nullptr;   // i32
  llvm::Value* waiting = nullptr; // i32
  llvm::Value* limit = nullptr;  // i32
  llvm::Value* widx = nullptr;   // i32
  llvm::Value* helper = nullptr; // Helpers::execute
  llvm::Value* helpers_table = nullptr; // the Helpers, as i8*
  llvm::Value* account_global = nullptr;
  llvm::Value* account_shared = nullptr;
  llvm::Value* account_local = nullptr;
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

} // namespace hone::emu::jit
