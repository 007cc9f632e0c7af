// What an entry point needs and does: its parameter layout as the driver lays it out, which
// parameters are pointers and what the kernel does through them, what its writes to global memory
// derive from, the types its instructions name, and the resources it uses.
//
// The pointer analysis is conservative: a pointer whose uses cannot be followed (stored to memory,
// passed to a call, used by an instruction the IR keeps opaque) is reported as read and written.
#pragma once

#include "ptx/ir.hpp"

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hone::ptx {

enum Access : uint8_t {
  k_access_none = 0,
  k_access_read = 1,
  k_access_write = 2,
  k_access_atomic = 4,
};

// "r", "w", "rw", "a", "ra", "rwa", or "-" for none.
std::string access_string(uint8_t access);

// A pointer held in a parameter, at `offset` bytes into it (0 for a plain pointer parameter).
struct PointerUse {
  uint32_t offset = 0;
  uint8_t access = k_access_none;
  bool escapes = false; // its uses could not all be followed: access is the conservative rw
  // Element types of the memory instructions (ld, st, atom, red, ...) whose address derives from
  // it, sorted and unique: what the kernel reads and writes through it (`ld.global.v4.f32`: f32).
  std::vector<Type> types{};
};

struct ParamInfo {
  std::string name;
  Type type = Type::none;
  uint32_t size = 0;
  uint32_t align = 0;
  uint32_t offset = 0;     // byte offset in the launch parameter buffer
  bool aggregate = false;  // a by-value array or struct (`.b8 name[N]`)
  std::vector<PointerUse> pointers;
  bool address_taken = false; // read through its address: any 8-byte field may be a pointer

  bool is_pointer() const { return !pointers.empty(); }
  // Union of the accesses through every pointer in the parameter.
  uint8_t access() const;
};

// A pointer held in a parameter of the entry: `offset` bytes into parameter `param`.
struct ParamPointer {
  uint32_t param = 0;
  uint32_t offset = 0;
  friend bool operator==(const ParamPointer&, const ParamPointer&) = default;
  friend auto operator<=>(const ParamPointer&, const ParamPointer&) = default;
};

// A variable whose address an address derives from.
struct VariableRef {
  std::string name;
  Space space = Space::none;
  bool module_scope = false; // declared at module level, not in a function body
};

// A state-changing memory instruction (st, atom, red, wmma.store, multimem.st/red, the destination
// of cp) whose target is global or generic memory, and what the analysis traced its address to.
// Flow-insensitive like the pointer analysis: the address derives from these, and from nothing
// else the analysis tracks (it tracks parameter pointers and variable addresses; a pointer loaded
// from memory is not tracked). Both lists empty: the analysis does not know what it writes.
struct MemoryWrite {
  std::string function;    // the .entry or .func that holds it
  std::string instruction; // as printed
  SourceLoc loc;
  // Pointers from the entry's parameters, sorted and unique; always empty in called functions
  // (arguments are not followed into calls: a pointer passed to one escapes).
  std::vector<ParamPointer> pointers;
  std::vector<VariableRef> variables; // sorted by name, unique
};

// An access to global memory (or to memory through a generic address) that can execute before the
// kernel has waited for the grids it depends on: some path from the entry's first instruction
// reaches it through no unguarded `griddepcontrol.wait` and no unguarded call to a function that
// executes one on every path. The wait is per thread (PTX ISA, "Parallel Synchronization and
// Communication Instructions: griddepcontrol"): until it returns, what the prerequisite grid of a
// programmatic dependent launch writes may not be visible yet, and that grid may still be reading
// what this one writes. Reads are ld and ldu on global or generic addresses (ld.param,
// ld.shared, ld.const and ld.local are not), tex, tld4, suld, wmma.load, multimem.ld_reduce and the
// global source of cp.async[.bulk[.tensor]]; writes are the writes of MemoryWrite plus sust;
// atom, red, sured and cp.reduce into global memory are atomic. prefetch is neither. An instruction
// the IR keeps as text, an indirect call and a call to a function without a body (other than the
// CUDA runtime's vprintf, malloc, free and __assertfail) count as untraced reads and writes.
struct UnwaitedAccess {
  std::string function;    // the .entry or .func that holds it
  std::string instruction; // as printed
  SourceLoc loc;
  // k_access_read, k_access_write or k_access_atomic (a read and a write); read and write where
  // the instruction is not known.
  uint8_t access = k_access_none;
  // Pointers from the entry's parameters its address derives from, sorted and unique (flow-
  // insensitive, as MemoryWrite). Empty: the analysis cannot trace the address to a parameter
  // (a pointer loaded from memory, an address in a called function, an opaque instruction).
  std::vector<ParamPointer> pointers;
};

// A type an instruction names in its modifiers (`cvt.rn.f16.f32`: f16 and f32), and the first
// instruction that names it.
struct TypeUse {
  Type type = Type::none;
  std::string function;    // the .entry or .func that holds the instruction
  std::string instruction; // as printed
  SourceLoc loc;
};

struct RegisterCount {
  Type type = Type::none;
  uint32_t count = 0;
};

// Special registers whose values depend on when or where a thread runs, or on what the driver
// sets up, never on the kernel's inputs (PTX ISA, "Special Registers"), by what they expose.
enum class External : uint8_t {
  clock,     // %clock, %clock_hi, %clock64: the SM's cycle counter
  timer,     // %globaltimer, %globaltimer_lo, %globaltimer_hi: a nanosecond wall clock
  counters,  // %pm0..%pm7, %pm0_64..%pm7_64: performance-monitoring counters
  placement, // %smid, %nsmid, %warpid, %nwarpid, %gridid: where (and which launch) it runs on
  driver,    // %envreg0..%envreg31, %reserved_smem_offset_*, %current_graph_exec
};

// The kind of the special register `name` (`%clock64`, `%envreg3`; a `.x` component is ignored),
// or nullopt for any other register (%tid.x, %ctaid.x, %laneid, ... depend on the launch shape
// only, which validation replays as the application launched it).
std::optional<External> external_kind(std::string_view name);
// "a cycle counter", "the global timer", ... for messages.
std::string_view external_text(External kind);

// A store, or another effect an application can see, whose value, address or execution can
// depend on an External special register. What "depends" means (a dataflow analysis over the
// entry and every function it calls, ptx/analysis_external.cpp): a register written by an
// instruction that reads such a register, or any register it derives from, depends on it; so
// does a value loaded from memory of a space (shared, local, parameter, global) into which a
// dependent value was stored, or at a dependent address; and every register written and every
// effect executed where a branch or guard on a dependent predicate decides whether it executes
// (control dependence, from post-dominators: what follows the join of the branch's paths does
// not depend on it, so a spin loop on %clock64 that only delays taints nothing after it).
// Effects are stores, atomics and other writes to global or generic memory, `trap`, and calls
// whose target does not have a body here (other than vprintf, malloc and free); printf output is
// not compared, so its arguments are not effects.
struct ExternalDependence {
  External kind = External::clock;
  std::string sreg;           // the register read, as written: %globaltimer
  std::string read_function;  // the first instruction that reads it
  std::string read_instruction;
  SourceLoc read_loc;
  std::string function;       // the effect
  std::string instruction;
  SourceLoc loc;
  // How, the first that holds of: its guard predicate derives from it; a branch that derives from
  // it decides whether it executes; the value it writes derives from it; its address does.
  enum class Via : uint8_t { value, address, guard, branch };
  Via via = Via::value;
  // Via::branch: a branch (or guarded return, exit, call) whose predicate depends on it and that
  // decides whether the effect executes.
  std::string branch_function;
  std::string branch_instruction;
  SourceLoc branch_loc;
};

struct EntryInfo {
  std::string name;
  std::vector<ParamInfo> params;
  uint32_t param_bytes = 0;

  uint64_t static_shared_bytes = 0; // module and entry .shared variables it (or a callee) uses
  bool dynamic_shared = false;      // uses an `.extern .shared` array
  uint64_t local_bytes = 0;         // .local variables of the entry itself

  bool uses_barrier = false;
  bool uses_shuffle = false;
  bool uses_vote = false;
  bool uses_match = false;
  bool uses_atomics_global = false; // atom/red on global or generic addresses
  bool uses_atomics_shared = false;
  bool uses_fp64 = false;
  bool uses_fp16 = false;           // f16 or bf16 arithmetic or conversion
  bool uses_texture = false;
  bool has_opaque = false;          // holds instructions the IR keeps as text

  std::vector<std::string> special_registers; // sorted: %tid.x, %ctaid.x, ...
  std::vector<RegisterCount> registers;       // declared virtual registers by type
  uint32_t total_registers = 0;
  uint32_t instructions = 0;
  std::vector<std::string> callees; // .func names called directly, transitively
  // Writes to global or generic memory in the entry, then in each callee (in `callees` order).
  std::vector<MemoryWrite> writes;
  // Every type the instructions of the entry and its callees name, in the order of the first
  // instruction naming each (the entry first, then the callees).
  std::vector<TypeUse> types_used;
  // Executes griddepcontrol.wait somewhere, in the entry or a function it calls (guarded or not):
  // the kernel expects a programmatic dependent launch after a kernel whose results it reads.
  bool waits_grid_dependency = false;
  // Only when waits_grid_dependency (empty otherwise): the accesses that can execute before a
  // wait, in the entry, then in each callee a call before a wait reaches (in `callees` order).
  // Accesses whose address derives only from the kernel's own variables (its local depot, shared
  // memory, its module's variables) are left out: no other kernel reaches them.
  std::vector<UnwaitedAccess> unwaited_accesses;
  // For each kind of External register, the first effect (the entry's, then each callee's in
  // `callees` order) that can depend on one of that kind; at most one per kind, in kind order.
  std::vector<ExternalDependence> external_dependences;

  std::optional<std::array<int64_t, 3>> maxntid;
  std::optional<std::array<int64_t, 3>> reqntid;
  std::optional<int64_t> minnctapersm;
  std::optional<int64_t> maxnreg;

  const ParamInfo* param(std::string_view pname) const;
};

// Analyze one entry of `module`.
EntryInfo analyze_entry(const Module& module, const Function& entry);
// EntryInfo::external_dependences of `entry` (analyze_entry fills it in).
std::vector<ExternalDependence> external_dependences(const Module& module, const Function& entry);
// Analyze every entry with a body, in module order.
std::vector<EntryInfo> analyze(const Module& module);

} // namespace hone::ptx
