// The contract between the block runner (emu/exec_interp.cpp, in libcuda.so.1) and the code the
// compiler (libhone-emu-jit.so) makes from a kernel: what a compiled kernel reads and writes when
// it runs one converged warp, and the one helper it calls back for what it does not do itself.
//
// Compiled code is a faster way to take the interpreter's steps, never another semantics: every
// step it takes is one BlockRunner::State::step() of a converged warp, with the same values, the
// same counters and the same cost-model timeline. Where a step would diverge the warp, wait, or
// leave what compiled code covers, it stops before that instruction and the interpreter goes on.
#pragma once

#include <cstdint>
#include <string>

namespace hone::emu {
struct CompiledKernel;
}

namespace hone::emu::jit {

// Bumped whenever Frame, Helpers or Api change: the runner refuses a library of another version.
constexpr uint32_t k_abi_version = 12;

// Uniform special registers, the same in every lane of a block (Frame::uniform).
enum Uniform : uint32_t {
  k_u_ctaid_x, k_u_ctaid_y, k_u_ctaid_z,
  k_u_ntid_x, k_u_ntid_y, k_u_ntid_z,
  k_u_nctaid_x, k_u_nctaid_y, k_u_nctaid_z,
  k_u_smid, k_u_shared_size, k_u_dynamic_shared, k_u_envreg1, k_u_envreg2,
  k_u_globaltimer, // %globaltimer at the launch's start (LaunchRequest::globaltimer_ns)
  k_u_count,
};

struct Helpers;

// Per memory instruction: the allocation its last global access fell in, which compiled code
// checks a warp's addresses against before it accesses memory itself (else the helper takes the
// instruction, faults included, and refills the entry). Any live allocation is a valid entry.
struct MemoryCache {
  uint64_t base = 1; // empty: no address passes
  uint64_t end = 0;
  uint64_t writable = 0;
  const void* allocation = nullptr; // the interpreter's Allocation
};

// One call of compiled code: one warp, or the group of a diverged warp's lanes that the
// interpreter runs next (those at its lowest pc), from `pc`, for at most `steps` steps. A group
// runs only while it stays below `stop`, the lowest pc of the warp's other runnable lanes: there
// the interpreter would merge them, or run the others. Fields marked "in" are set by the runner;
// "in/out" ones are the runner's values, advanced by the code.
struct Frame {
  uint64_t* regs = nullptr;         // in: the warp's registers, regs[slot * 32 + lane]
  uint64_t* ready = nullptr;        // in: the cost model's ready cycle of each of its slots
  void* state = nullptr;            // in: the block runner, for the helper
  const Helpers* helpers = nullptr; // in
  const uint8_t* params = nullptr;  // in: the kernel's parameter buffer
  const uint32_t* tid = nullptr;    // in: tid.x, tid.y, tid.z of the warp's 32 lanes ([3][32])
  MemoryCache* memory = nullptr;    // in: per instruction (pc)
  uint8_t* shared = nullptr;        // in: the block's shared memory
  uint64_t shared_size = 0;         // in: its bytes
  uint8_t* local = nullptr;         // in: the block's local frames, CompiledKernel::local_bytes each
  uint64_t uniform[k_u_count] = {}; // in
  uint32_t widx = 0;                // in: the warp's index in its block
  uint32_t active = 0;              // in: the lanes that run (a converged warp: all alive lanes)
  uint32_t steps = 0;               // in: steps it may take; out: steps it took
  uint32_t pc = 0;                  // in: where it starts (an entry); out: where it stopped
  int32_t status = 0;               // out: 0, or k_faulted when the helper faulted
  uint32_t diverged = 0;            // in: 1 when `active` is a diverged warp's group
  uint32_t alive = 0;               // in: the warp's lanes that have not exited (Warp::alive)
  uint32_t waiting = 0;             // in: those waiting at a barrier or warp instruction
  uint32_t stop = 0;                // in: a group stops before reaching it (converged: ~0)
  uint32_t spin = 0;                // in/out: Warp::spin, backward branches of a diverged warp
  uint32_t spin_limit = 0;          // in: at this many the interpreter lets other lanes run
  // out: when the code stopped after a branch that split the running lanes, those that took it
  // (to `target`; the others go on at `pc`), else 0
  uint32_t taken = 0;
  uint32_t target = 0;
  // in/out: the warp's timeline (Warp::seq, region_end, cycles) and the block's counters.
  uint64_t seq = 0;
  uint64_t region_end = 0;
  uint64_t cycles = 0;
  uint64_t horizon = 0;
  uint64_t warp_instructions = 0;
  uint64_t thread_instructions = 0;
  uint64_t issue = 0;
  uint64_t unflushed = 0;
  // in: where compiled code lists what a memory access it made touched, for the cost model: the
  // 32-byte sectors of its lanes (global, 32 entries), or the 4-byte words (shared, 128).
  uint64_t* sectors = nullptr;
  uint32_t* words = nullptr;
};

constexpr int32_t k_faulted = 1;

struct Helpers {
  // Executes the instruction at `pc` for the lanes in `exec` (non-zero) the interpreter's way,
  // as issued at cycle `issue_at`. Returns the cycles until its results are ready (its memory
  // latency for a memory instruction, its own latency otherwise), or -1 when it faulted: the
  // runner holds the fault, and the code returns with k_faulted at once.
  int64_t (*execute)(Frame* frame, uint32_t pc, uint32_t exec, uint64_t issue_at) = nullptr;
  // After compiled code made the global (or shared) access of the ld/st at `pc` itself: charges
  // the first `count` of frame->sectors (or frame->words) as the interpreter's memory path does,
  // and returns the instruction's latency.
  int64_t (*account_global)(Frame* frame, uint32_t pc, uint32_t count, uint64_t issue_at) = nullptr;
  int64_t (*account_shared)(Frame* frame, uint32_t pc, uint32_t count, uint64_t issue_at) = nullptr;
  // The same for an access of the threads' local frames, of `count` bytes in all.
  int64_t (*account_local)(Frame* frame, uint32_t pc, uint32_t count, uint64_t issue_at) = nullptr;
  // The host's math functions the .approx f32 instructions round from (emu/semantics_float.cpp),
  // called through these so that compiled code calls exactly what the interpreter calls.
  double (*exp2)(double) = nullptr;
  double (*log2)(double) = nullptr;
  double (*sin)(double) = nullptr;
  double (*cos)(double) = nullptr;
  double (*tanh)(double) = nullptr;
  // f32 and f64 add, sub, mul, fma, div, rcp and sqrt in a directed rounding mode, for one lane:
  // `form` packs the XOp (bits 0-7), the rounding mode (RoundMode, 8-15), .ftz (16) and .sat (17).
  uint32_t (*f32_directed)(uint32_t form, uint32_t a, uint32_t b, uint32_t c) = nullptr;
  uint64_t (*f64_directed)(uint32_t form, uint64_t a, uint64_t b, uint64_t c) = nullptr;
};

// A compiled kernel: `run` takes steps from frame->pc, which must be an entry.
struct Code {
  void (*run)(Frame* frame) = nullptr;
  const uint8_t* entry = nullptr; // entry[pc] != 0: compiled code may start at pc
  uint32_t instructions = 0;      // k.code.size()
  uint32_t inline_forms = 0;      // instructions written as lane operations
  uint32_t helper_forms = 0;      // instructions left to Helpers::execute
  bool from_cache = false;        // loaded from the cache directory, not compiled now
};

// What libhone-emu-jit.so exports, as `hone_emu_jit_api(k_abi_version)` (nullptr for another
// version).
struct Api {
  uint32_t abi_version = k_abi_version;
  // Compiles `kernel`, or loads its code from `cache_dir` (none when empty), where a compile
  // also leaves it; nullptr with `error` set when it cannot. The code stays valid until
  // release(); the same kernel compiled again in the process shares it.
  const Code* (*compile)(const CompiledKernel& kernel, const std::string& cache_dir,
                         std::string& error) = nullptr;
  void (*release)(const Code* code) = nullptr;
};

using ApiFn = const Api* (*)(uint32_t abi_version);
constexpr const char* k_api_symbol = "hone_emu_jit_api";

} // namespace hone::emu::jit
