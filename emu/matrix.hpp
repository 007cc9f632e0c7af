// The tensor-core and matrix-fragment instructions of the emulated device (PTX ISA 9.7.14, "Warp
// Level Matrix Multiply-Accumulate Instructions"): mma.sync, wmma.load/store/mma, ldmatrix,
// stmatrix and movmatrix.
//
// This file is their one semantics: where each element of a matrix sits in the registers of a
// warp (the fragment layouts), what an element's bits mean, and what an mma computes. The
// interpreter's handler (exec_interp.cpp, exec_matrix) gathers a warp's registers and memory and
// calls these functions; compiled code (emu/jit) runs the same handler through Helpers::execute.
// Nothing here touches memory, registers of the executor or the cost model.
//
// Fragment layouts are the ISA's figures, cited per shape beside mma_position(). Where the ISA
// leaves the numerics or the layout open, the choice is written next to the code and in
// emu/README.md ("Tensor cores"):
// - products are exact; a dot product and its accumulator are summed in binary64 in k order and
//   rounded once to the accumulator type (round to nearest even); f64 mma is a chain of fmas in k
//   order; integer mma is exact, wrapping modulo 2^32 unless .satfinite clamps;
// - a .tf32 operand's low 13 bits are ignored (rounded toward zero to 10 mantissa bits), so an
//   operand that cvt.rna.tf32.f32 made is used exactly;
// - NaN results are canonical (0x7fffffff, 0x7fff), as the scalar f32/f16 instructions give them;
// - wmma fragments, whose distribution the ISA leaves "unspecified and target architecture
//   dependent", hold the matrix in row-major element order (wmma_position()).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hone::emu::matrix {

// Element types of matrix operands.
enum class Elem : uint8_t { none, f16, bf16, tf32, f32, f64, e4m3, e5m2, s8, u8, s4, u4, b1, s32 };

// Bits one element takes in a register (and in memory).
uint32_t elem_bits(Elem e);
bool elem_is_float(Elem e);
const char* elem_name(Elem e);

enum class Op : uint8_t { mma, wmma_mma, ldmatrix, stmatrix, movmatrix, wmma_load, wmma_store };

// Which matrix of an mma a fragment holds (c: the accumulator, and the result d, which shares
// its layout).
enum class Role : uint8_t { a, b, c };

struct Plan;

// What one decoded matrix instruction does; its register operands are listed beside it
// (CompiledKernel::matrix_operands, d first, then a, b, c).
struct Insn {
  Op op = Op::mma;
  uint16_t m = 0, n = 0, k = 0; // the mma shape; ldmatrix/stmatrix/movmatrix: 8x8
  Elem a = Elem::none, b = Elem::none, c = Elem::none, d = Elem::none;
  bool a_row = true;   // mma m8n8k4 .f16 and wmma: A row-major (.row) or column-major (.col)
  bool b_row = false;  // B: .row or .col (mma: .col except m8n8k4 .f16)
  Role role = Role::a; // wmma.load/store: the fragment (store: c, the d fragment)
  bool row_major = true; // wmma.load/store: the memory layout
  uint8_t num = 1;     // ldmatrix/stmatrix: matrices (.x1 .x2 .x4)
  bool trans = false;  // ldmatrix/stmatrix .trans
  bool satfinite = false;
  bool bit_xor = false; // b1: .xor.popc (else .and.popc)
  uint8_t nd = 0, na = 0, nb = 0, nc = 0; // registers per operand
  bool has_stride = false; // wmma.load/store: a stride operand follows the others
  uint32_t first = 0;  // index of the first operand in CompiledKernel::matrix_operands
  std::shared_ptr<const Plan> plan; // mma, wmma.mma: where each register element goes (make_plan)
};

// Where every element of an mma's fragments lies, computed once per instruction: for each
// register r, lane l and element j of a fragment (in that order), the element's index in the
// operand's matrices, row-major per group: A as [group][row][k], B as [group][k][col], C and D
// as [group][row][col].
struct Plan {
  uint32_t groups = 1;
  std::vector<uint16_t> a, b, c, d;
};
std::shared_ptr<const Plan> make_plan(const Insn& mi);

// The registers of each operand an mma needs: 0 when the combination of shape and types is not
// one the ISA defines for sm_80 to sm_90 (`why` says what).
struct Counts {
  uint8_t a = 0, b = 0, c = 0;
};
Counts mma_counts(const Insn& mi, std::string& why);
Counts wmma_counts(const Insn& mi, std::string& why);

// Elements per register of a fragment of `e` (a .b32 holds two .f16, four .s8, eight .s4, 32 .b1;
// an f32, s32, tf32 or f64 register holds one).
uint32_t elems_per_reg(Elem e);

struct Pos {
  uint16_t row = 0, col = 0;
};

// Where element `e` (counted low to high across the fragment's registers) of `lane`'s fragment of
// `role`, whose elements are of type `type`, lies in its matrix, for mma (ISA 9.7.14.5.1-14
// "Matrix Fragments for mma.mXnYkZ"). m8n8k4 .f16 runs four independent MMAs; `group` receives
// which one the lane takes part in (0 for every other shape).
Pos mma_position(const Insn& mi, Role role, Elem type, uint32_t lane, uint32_t e,
                 uint32_t* group = nullptr);
// The same for wmma (ISA 9.7.14.4.1: the distribution is unspecified; see the file comment).
Pos wmma_position(const Insn& mi, Role role, Elem type, uint32_t lane, uint32_t e);
// Rows and columns of the matrix of `role`.
Pos dims(const Insn& mi, Role role);

// The warp's registers of one operand: regs[i][lane] is register i of the operand in `lane`.
using Lanes = std::array<uint64_t, 32>;

// D = A * B + C for the whole warp. `in` holds the a, b and c registers (mi.na + mi.nb + mi.nc
// operands, in that order), `out` receives mi.nd. Every lane takes part.
void mma(const Insn& mi, const Lanes* in, Lanes* out);

// movmatrix.sync.aligned.m8n8.trans.b16: the 8x8 matrix of 16-bit elements held in `a` in the
// ldmatrix layout, transposed.
Lanes movmatrix(const Lanes& a);

// ldmatrix/stmatrix (m8n8, 16-bit elements): lane `lane`'s register of matrix `i` holds the
// elements (row, col) and (row', col') of that matrix (ISA 9.7.14.5.15, Figure 104, .trans: the
// same with rows and columns exchanged); rows are those whose address lane 8 * i + row gave.
struct PairPos {
  Pos lo, hi;
};
PairPos ldmatrix_position(bool trans, uint32_t lane);

// Value of one element's bits as a number (floats), for tests and the reference computations.
double to_double(Elem e, uint64_t bits);
// Rounded to nearest even into `e` (f16, bf16, f32 bits; NaN canonical).
uint64_t from_double(Elem e, double v);

} // namespace hone::emu::matrix
