// The PTX intermediate representation: a module as parsed, with enough kept to print it back.
//
// Names, modifiers and raw text are string_views into strings owned by the module's arena, so
// parsing allocates little and copies of a module share the (immutable, append-only) arena.
// What the IR does not model is kept as raw text and printed back verbatim.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace hone::ptx {

struct SourceLoc {
  uint32_t line = 0;
  uint32_t col = 0;
};

// Owns the bytes every string_view of a module points into. Append-only and shared between copies
// of a module, so adding a string never invalidates an existing view.
class Arena {
public:
  // Copy `text` into the arena and return a view of the stable copy.
  std::string_view keep(std::string_view text);

private:
  std::mutex m_mutex;
  std::deque<std::string> m_strings;
};

// Base opcodes of the PTX ISA (9.0). The text after the first '.' of an instruction is kept as
// modifiers, so `cp.async.ca.shared.global` is opcode `cp` with modifiers {async, ca, shared, global}.
#define HONE_PTX_OPCODES(X)                                                                        \
  X(abs, "abs") X(activemask, "activemask") X(add, "add") X(addc, "addc") X(alloca, "alloca")      \
  X(and_, "and") X(applypriority, "applypriority") X(atom, "atom") X(bar, "bar")                   \
  X(barrier, "barrier") X(bfe, "bfe") X(bfi, "bfi") X(bfind, "bfind") X(bmsk, "bmsk")              \
  X(bra, "bra") X(brev, "brev") X(brkpt, "brkpt") X(brx, "brx") X(call, "call")                    \
  X(clusterlaunchcontrol, "clusterlaunchcontrol") X(clz, "clz") X(cnot, "cnot")                    \
  X(copysign, "copysign") X(cos, "cos") X(cp, "cp") X(createpolicy, "createpolicy") X(cvt, "cvt")  \
  X(cvta, "cvta") X(discard, "discard") X(div, "div") X(dp2a, "dp2a") X(dp4a, "dp4a")              \
  X(elect, "elect") X(ex2, "ex2") X(exit, "exit") X(fence, "fence") X(fma, "fma") X(fns, "fns")    \
  X(getctarank, "getctarank") X(griddepcontrol, "griddepcontrol") X(isspacep, "isspacep")          \
  X(istypep, "istypep") X(ld, "ld") X(ldmatrix, "ldmatrix") X(ldu, "ldu") X(lg2, "lg2")            \
  X(lop3, "lop3") X(mad, "mad") X(mad24, "mad24") X(madc, "madc") X(mapa, "mapa")                  \
  X(match, "match") X(max, "max") X(mbarrier, "mbarrier") X(membar, "membar") X(min, "min")        \
  X(mma, "mma") X(mov, "mov") X(movmatrix, "movmatrix") X(multimem, "multimem") X(mul, "mul")      \
  X(mul24, "mul24") X(nanosleep, "nanosleep") X(neg, "neg") X(not_, "not") X(or_, "or")            \
  X(pmevent, "pmevent") X(popc, "popc") X(prefetch, "prefetch") X(prefetchu, "prefetchu")          \
  X(prmt, "prmt") X(rcp, "rcp") X(red, "red") X(redux, "redux") X(rem, "rem") X(ret, "ret")        \
  X(rsqrt, "rsqrt") X(sad, "sad") X(selp, "selp") X(set, "set") X(setmaxnreg, "setmaxnreg")        \
  X(setp, "setp") X(shf, "shf") X(shfl, "shfl") X(shl, "shl") X(shr, "shr") X(sin, "sin")          \
  X(slct, "slct") X(sqrt, "sqrt") X(st, "st") X(stackrestore, "stackrestore")                      \
  X(stacksave, "stacksave") X(stmatrix, "stmatrix") X(sub, "sub") X(subc, "subc") X(suld, "suld")  \
  X(suq, "suq") X(sured, "sured") X(sust, "sust") X(szext, "szext") X(tanh, "tanh")                \
  X(tcgen05, "tcgen05") X(tensormap, "tensormap") X(testp, "testp") X(tex, "tex") X(tld4, "tld4")  \
  X(trap, "trap") X(txq, "txq") X(vabsdiff, "vabsdiff") X(vabsdiff2, "vabsdiff2")                  \
  X(vabsdiff4, "vabsdiff4") X(vadd, "vadd") X(vadd2, "vadd2") X(vadd4, "vadd4")                    \
  X(vavrg2, "vavrg2") X(vavrg4, "vavrg4") X(vmad, "vmad") X(vmax, "vmax") X(vmax2, "vmax2")        \
  X(vmax4, "vmax4") X(vmin, "vmin") X(vmin2, "vmin2") X(vmin4, "vmin4") X(vote, "vote")            \
  X(vset, "vset") X(vset2, "vset2") X(vset4, "vset4") X(vshl, "vshl") X(vshr, "vshr")              \
  X(vsub, "vsub") X(vsub2, "vsub2") X(vsub4, "vsub4") X(wgmma, "wgmma") X(wmma, "wmma")            \
  X(xor_, "xor")

enum class Opcode : uint16_t {
#define HONE_X(id, text) id,
  HONE_PTX_OPCODES(HONE_X)
#undef HONE_X
      count
};

// The opcode named `text`, or nullopt when it is not a PTX instruction.
std::optional<Opcode> opcode_from_name(std::string_view text);
std::string_view opcode_name(Opcode op);

// Fundamental types (PTX ISA 5.2.1), plus the opaque and packed types that appear as modifiers.
enum class Type : uint8_t {
  none,
  b8, b16, b32, b64, b128,
  u8, u16, u32, u64,
  s8, s16, s32, s64,
  f16, f16x2, bf16, bf16x2, f32, f64, tf32,
  e4m3, e5m2, e4m3x2, e5m2x2,
  u16x2, s16x2,
  pred,
  texref, samplerref, surfref,
};

// The type named `text` (without the leading dot), or Type::none.
Type type_from_name(std::string_view text);
std::string_view type_name(Type t);
// Size in bytes (pred: 1 as a register of its own; opaque handles: 8).
uint32_t type_size(Type t);
bool is_float(Type t);
bool is_signed(Type t);

// State spaces (PTX ISA 5.1).
enum class Space : uint8_t { none, reg, sreg, const_, global, local, param, shared, tex, generic };
Space space_from_name(std::string_view text);
std::string_view space_name(Space s);

struct Operand {
  enum class Kind : uint8_t {
    reg,      // %r1, %tid.x, or a scope-local name such as `low` (name)
    symbol,   // a variable, function or label name (name)
    imm_int,  // integer literal (value; unsigned_suffix)
    imm_f32,  // 0fXXXXXXXX (bits)
    imm_f64,  // 0dXXXXXXXXXXXXXXXX (bits)
    imm_dec,  // decimal floating literal such as 1.5 (name keeps the text; bits: the double)
    address,  // [base+offset] (name: base, empty when absolute; base_is_reg; value: offset)
              // or [a, b, ...] (elems) as in texture and surface instructions
    vector,   // {a, b, ...} (elems)
    pair,     // a|b dual destination (elems, two)
    list,     // (a, b, ...) parameter list of call (elems)
    sink,     // _
    expr,     // anything else that is balanced: kept as text (name)
  };
  Kind kind = Kind::reg;
  bool negated = false;         // !%p
  bool base_is_reg = false;     // address: base names a register
  bool unsigned_suffix = false; // imm_int: written with U
  std::string_view name;
  int64_t value = 0;
  uint64_t bits = 0;
  std::vector<Operand> elems;

  friend bool operator==(const Operand&, const Operand&) = default;
};

struct Instruction {
  Opcode op = Opcode::count;
  std::vector<std::string_view> mods; // modifiers without their dots, in order
  std::string_view guard;             // predicate register, empty when unguarded
  bool guard_negated = false;
  std::vector<Operand> operands;

  // True when `mod` is one of the modifiers.
  bool has_mod(std::string_view mod) const;
  // The last modifier that names a type (`cvt.rn.f32.s32`: f32 is not last; s32 is), or none.
  Type last_type() const;
  // Every modifier that names a type, in order.
  std::vector<Type> types() const;
  // The state space named by a modifier, or Space::none (generic addressing).
  Space space() const;

  friend bool operator==(const Instruction&, const Instruction&) = default;
};

// `.reg .b32 %r<25>;` or `.reg .b16 low, high;`
struct RegDecl {
  Type type = Type::none;
  uint8_t vector = 0; // 0, 2, 4 (.v2 .v4)
  struct Name {
    std::string_view name;
    int32_t count = -1; // N of `%r<N>`, -1 for a plain name
    friend bool operator==(const Name&, const Name&) = default;
  };
  std::vector<Name> names;
  friend bool operator==(const RegDecl&, const RegDecl&) = default;
};

// One element of a variable initializer, flattened in memory order.
struct InitValue {
  enum class Kind : uint8_t { integer, f32, f64, symbol };
  Kind kind = Kind::integer;
  bool generic = false;   // generic(var)
  uint64_t bits = 0;      // integer value or float bits
  std::string_view name;  // symbol
  int64_t offset = 0;     // symbol+offset
  friend bool operator==(const InitValue&, const InitValue&) = default;
};

// A variable in a state space: at module level or inside a function body.
struct VarDecl {
  std::vector<std::string_view> attrs; // .visible .extern .weak .common, in order, without dots
  Space space = Space::none;
  uint32_t align = 0;                  // 0: natural
  uint8_t vector = 0;
  Type type = Type::none;
  std::string_view name;
  std::vector<int64_t> dims; // [N] per dimension; -1 for an unsized []
  std::string_view init;     // initializer text after '=', empty when none; printed verbatim
  std::vector<InitValue> init_values;
  bool init_parsed = true;   // false when the initializer holds something not modeled above

  bool is_extern() const;
  // Bytes the variable occupies: element size times every dimension (0 when unsized).
  uint64_t size_bytes() const;
  friend bool operator==(const VarDecl&, const VarDecl&) = default;
};

// A parameter of an .entry or .func (or a .func return value).
struct Param {
  Space space = Space::param; // .param, or .reg for .func parameters
  uint32_t align = 0;         // .align N; 0: natural
  Type type = Type::none;
  std::string_view name;
  int64_t array = -1;         // N of `name[N]`, -1 when scalar
  bool ptr = false;           // .ptr attribute present
  Space ptr_space = Space::none;
  uint32_t ptr_align = 0;

  uint32_t size_bytes() const;
  // Alignment the driver uses when it lays the parameter out (explicit or natural).
  uint32_t alignment() const;
  friend bool operator==(const Param&, const Param&) = default;
};

// A directive kept as text: `.pragma "nounroll";`, `.loc 1 4 2`, `.section ...`, and so on.
struct Directive {
  std::string_view text;
  friend bool operator==(const Directive&, const Directive&) = default;
};

struct Label {
  std::string_view name;
  friend bool operator==(const Label&, const Label&) = default;
};

struct ScopeBegin {
  friend bool operator==(const ScopeBegin&, const ScopeBegin&) = default;
};
struct ScopeEnd {
  friend bool operator==(const ScopeEnd&, const ScopeEnd&) = default;
};

// An instruction the IR does not model: its text, printed back verbatim.
struct Opaque {
  std::string_view text;
  friend bool operator==(const Opaque&, const Opaque&) = default;
};

struct Statement {
  SourceLoc loc;
  std::variant<Instruction, Label, RegDecl, VarDecl, ScopeBegin, ScopeEnd, Directive, Opaque> item;

  friend bool operator==(const Statement& a, const Statement& b) { return a.item == b.item; }
};

// A performance-tuning or other function directive written between the parameters and the body:
// `.maxntid 256, 1, 1`, `.minnctapersm 2`, `.noreturn`, `.pragma "nounroll";`.
struct FuncDirective {
  std::string_view name; // without the dot
  std::vector<int64_t> values;
  std::string_view text; // the raw text for directives other than the numeric ones (.pragma)
  friend bool operator==(const FuncDirective&, const FuncDirective&) = default;
};

struct Function {
  SourceLoc loc;
  std::vector<std::string_view> attrs; // .visible .extern .weak, without dots
  bool is_entry = false;
  std::vector<Param> returns;
  bool has_returns = false; // `()` written even when empty
  std::string_view name;
  std::vector<Param> params;
  std::vector<FuncDirective> directives;
  bool has_body = false;    // false for a declaration (prototype) ending in ';'
  std::vector<Statement> body;

  // The first directive named `name`, or nullptr.
  const FuncDirective* directive(std::string_view name) const;
  friend bool operator==(const Function& a, const Function& b);
};

struct ModuleItem {
  SourceLoc loc;
  std::variant<Function, VarDecl, Directive> item;
  friend bool operator==(const ModuleItem& a, const ModuleItem& b) { return a.item == b.item; }
};

struct Module {
  uint32_t version_major = 0;
  uint32_t version_minor = 0;
  std::vector<std::string_view> target; // sm_90, texmode_independent, debug, ...
  uint32_t address_size = 64;
  std::vector<ModuleItem> items;
  std::shared_ptr<Arena> arena = std::make_shared<Arena>();

  // The function named `name` (with a body if one exists), or nullptr.
  const Function* function(std::string_view name) const;
  Function* function(std::string_view name);
  // The module-level variable named `name`, or nullptr.
  const VarDecl* variable(std::string_view name) const;
  // Every .entry with a body, in order.
  std::vector<const Function*> entries() const;
  // Keep a new string alive as long as the module (for transforms that add text).
  std::string_view keep(std::string_view text) const { return arena->keep(text); }

  // Structural equality: same declarations and instructions (source positions and arena ignored).
  friend bool operator==(const Module& a, const Module& b);
};

} // namespace hone::ptx
