// The executor's form of a kernel: PTX decoded once, at load, into flat instructions whose
// operands are register slots, immediates and resolved addresses. Calls to .func are inlined, so a
// kernel is one instruction array and a thread's position in it is one index.
#pragma once

#include "emu/matrix.hpp"
#include "ptx/ir.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace hone::emu {

// Generic-address windows (PTX ISA 5.1.6, "Generic Addressing"). Global memory is identity-mapped
// host memory, which on x86-64 lies below 2^47; the windows sit above it, where no host pointer is.
constexpr uint64_t k_shared_window = 0x0001'0000'0000'0000ull;
constexpr uint64_t k_local_window = 0x0002'0000'0000'0000ull;
constexpr uint64_t k_param_window = 0x0003'0000'0000'0000ull;
constexpr uint64_t k_window_size = 0x0000'0001'0000'0000ull;

constexpr uint32_t k_no_slot = 0xffffffffu;

// Special registers (PTX ISA 10).
enum class Sreg : uint8_t {
  tid_x, tid_y, tid_z, ntid_x, ntid_y, ntid_z,
  ctaid_x, ctaid_y, ctaid_z, nctaid_x, nctaid_y, nctaid_z,
  laneid, warpid, nwarpid, smid, nsmid, gridid,
  lanemask_eq, lanemask_le, lanemask_lt, lanemask_ge, lanemask_gt,
  clock, clock_hi, clock64, globaltimer, globaltimer_lo, globaltimer_hi,
  total_smem_size, dynamic_smem_size, aggr_smem_size,
  zero, one, // cluster registers of a launch without clusters, %envreg*
  envreg1, envreg2, // a cooperative launch's grid workspace address, high and low halves
};

struct Src {
  enum class Kind : uint8_t { none, reg, imm, sreg } kind = Kind::none;
  Sreg sreg = Sreg::zero;
  bool negate = false; // !%p
  uint32_t slot = k_no_slot;
  uint64_t imm = 0;
};

// Where an address operand points once its symbol is resolved.
enum class AddrSpace : uint8_t {
  global,   // an absolute address: global/const memory, checked against allocations
  shared,   // an offset in the block's shared memory
  local,    // an offset in the thread's local frame (.local and call .param variables)
  kparam,   // an offset in the kernel's parameter buffer
  generic,  // a generic address: a window or global memory
};

struct Addr {
  AddrSpace space = AddrSpace::global;
  uint32_t slot = k_no_slot; // base register, or none
  int64_t offset = 0;
};

// Operations the interpreter executes. Types and modifiers live in the instruction.
// What a memory instruction reaches, for the cost model's latencies and traffic.
enum MemClass : uint8_t {
  k_mem_none,
  k_mem_global,   // .global, or a generic address: decided per access
  k_mem_shared,
  k_mem_local,    // the thread's frame: L1
  k_mem_constant, // .const: the constant cache
  k_mem_param,    // kernel parameters: a constant-bank operand in SASS, no instruction of its own
};

enum class XOp : uint8_t {
  nop, mov, pack, unpack, add, sub, addc, subc, mul, mad, mul24, mad24, sad, div, rem, abs, neg,
  min, max, popc, clz, bfind, brev, bfe, bfi, bmsk, prmt, shf, shl, shr, and_, or_, xor_, not_,
  cnot, lop3, copysign, testp, setp, set, selp, slct, cvt, cvta, cvta_to, isspacep, ld, st,
  atom, red, fma, rcp, sqrt, rsqrt, sin, cos, lg2, ex2, tanh, bra, exit, bar, bar_arrive,
  bar_red, bar_warp, shfl, vote, match, activemask, redux, trap, dp4a, dp2a, cp_async,
  elect, szext, fns,
  // tensor-core and matrix-fragment instructions (emu/matrix.hpp; Insn::matrix says which)
  mma, ldmatrix, stmatrix, movmatrix, wmma_load, wmma_store,
  printf, // the device runtime's vprintf (exec_printf.hpp)
};

// Modifier bits.
enum : uint32_t {
  k_f_ftz = 1 << 0,
  k_f_sat = 1 << 1,
  k_f_hi = 1 << 2,     // .hi
  k_f_wide = 1 << 3,   // .wide
  k_f_cc = 1 << 4,     // .cc: writes the carry flag
  k_f_approx = 1 << 5,
  k_f_relu = 1 << 6,
  k_f_nan = 1 << 7,    // .NaN (min/max)
  k_f_wrap = 1 << 8,   // shf.wrap / bmsk.wrap
  k_f_volatile = 1 << 9, // ld/st volatile, relaxed, acquire, release: host atomics
  k_f_xorsign = 1 << 10,
  k_f_shiftamt = 1 << 11,
  k_f_neg_c = 1 << 12,
  k_f_full = 1 << 13,  // div.full
  k_f_uni = 1 << 14,
  k_f_carry_in = 1 << 15, // madc: adds the carry flag
  k_f_satfinite = 1 << 16,
};

struct Insn {
  XOp op = XOp::nop;
  ptx::Type type = ptx::Type::none;  // the instruction's type (destination type for cvt)
  ptx::Type type2 = ptx::Type::none; // cvt source type, setp/set comparison type, ...
  uint8_t mode = 0;    // rounding, compare op, shuffle/vote/atomic/boolean op, prmt mode...
  uint8_t mode2 = 0;   // setp boolean op, set destination kind, atom scope
  uint8_t vec = 1;     // ld/st vector width
  uint8_t ndst = 0;
  uint8_t nsrc = 0;
  uint32_t flags = 0;
  uint32_t guard = k_no_slot;
  bool guard_negated = false;
  uint32_t target = 0; // branch target; barrier id is a source
  uint32_t line = 0;   // PTX source line
  uint32_t cost = 1;   // cost model: scheduler cycles per warp instruction (its pipe's rate)
  uint16_t latency = 4; // cost model: cycles until its result may be used (memory: see MemClass)
  uint8_t mclass = 0;  // cost model: MemClass of a memory instruction
  Src dst[4];
  Src src[4];
  Addr addr;
  // Matrix instructions: the index of their description in CompiledKernel::matrix, whose
  // register operands (more than dst/src hold) are in CompiledKernel::matrix_operands.
  uint32_t matrix = 0;
};

// Rounding modes (Insn::mode for arithmetic and cvt).
enum RoundMode : uint8_t {
  k_rnd_default = 0, k_rnd_rn, k_rnd_rz, k_rnd_rm, k_rnd_rp, k_rnd_rna,
  k_rnd_rni, k_rnd_rzi, k_rnd_rmi, k_rnd_rpi,
};

// Comparison operators (setp/set), PTX ISA 9.7.3.
enum CmpOp : uint8_t {
  k_cmp_eq, k_cmp_ne, k_cmp_lt, k_cmp_le, k_cmp_gt, k_cmp_ge,
  k_cmp_lo, k_cmp_ls, k_cmp_hi, k_cmp_hs,
  k_cmp_equ, k_cmp_neu, k_cmp_ltu, k_cmp_leu, k_cmp_gtu, k_cmp_geu, k_cmp_num, k_cmp_nan,
};

// Boolean combiners (setp .and/.or/.xor, vote, redux, bar.red).
enum BoolOp : uint8_t { k_bool_none, k_bool_and, k_bool_or, k_bool_xor, k_bool_popc };

enum AtomOp : uint8_t {
  k_atom_add, k_atom_min, k_atom_max, k_atom_inc, k_atom_dec, k_atom_and, k_atom_or,
  k_atom_xor, k_atom_exch, k_atom_cas,
};

enum ShflMode : uint8_t { k_shfl_up, k_shfl_down, k_shfl_bfly, k_shfl_idx };
// cp.async's optional fourth operand (Insn::mode): none (cp-size bytes copied), src-size (bytes
// read, the rest of cp-size zero-filled) or the ignore-src predicate (true: all zero-filled).
enum CpAsyncMode : uint8_t { k_cp_full, k_cp_src_size, k_cp_ignore_src };
enum VoteMode : uint8_t { k_vote_all, k_vote_any, k_vote_uni, k_vote_ballot };

struct CompiledKernel {
  std::string name;
  std::vector<Insn> code;
  std::vector<uint8_t> slot_bytes;  // width of each register slot (1 for predicates)
  uint32_t num_slots = 0;
  uint32_t carry_slot = k_no_slot;  // the per-thread carry flag of add.cc/addc
  uint32_t local_bytes = 0;         // per-thread frame: .local and call .param variables
  uint32_t static_shared_bytes = 0;
  uint32_t dynamic_shared_align = 16;
  uint32_t param_bytes = 0;
  std::vector<uint32_t> param_offsets;
  std::vector<uint32_t> param_sizes;
  // Registers a block starts at zero (exec_defined.hpp); the rest are written before any read.
  std::vector<uint32_t> zeroed_slots;
  // Its code holds the addresses of module variables (.global, .const), which differ from one
  // load of the module to the next.
  bool uses_module_addresses = false;
  // The matrix instructions' descriptions and their register operands (Insn::matrix).
  std::vector<matrix::Insn> matrix;
  std::vector<Src> matrix_operands;
  std::string unsupported; // why this kernel cannot run here; empty when it can
  uint32_t ptx_version = 0;
  uint32_t declared_registers = 0;
};

inline bool is_matrix(XOp op) {
  return op >= XOp::mma && op <= XOp::wmma_store;
}

// The registers a matrix instruction writes (its d fragment) and reads (a, b, c, and a wmma
// stride), from CompiledKernel::matrix_operands.
struct MatrixOperands {
  const Src* writes = nullptr;
  uint32_t nwrites = 0;
  const Src* reads = nullptr;
  uint32_t nreads = 0;
};
inline MatrixOperands matrix_operands(const CompiledKernel& k, const Insn& in) {
  const matrix::Insn& m = k.matrix[in.matrix];
  const Src* first = k.matrix_operands.data() + m.first;
  return {first, m.nd, first + m.nd, uint32_t(m.na + m.nb + m.nc + (m.has_stride ? 1 : 0))};
}

} // namespace hone::emu
