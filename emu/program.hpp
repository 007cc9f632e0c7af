// A PTX module loaded on the emulated device, and the launch of its kernels.
//
// This is the boundary between the driver API layer (contexts, streams, the C entry points) and
// the PTX executor. The driver hands Program::load the PTX text of an image; a launch runs to
// completion on the calling thread (blocks in parallel on the executor's worker threads) and
// reports what happened as a LaunchOutcome, never by throwing or aborting.
#pragma once

#include "common/result.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hone::emu {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t(x) * y * z; }
};

// The emulated device's fixed properties (a plausible sm_90 part), shared by the driver's
// cuDeviceGetAttribute and the executor's launch checks.
struct DeviceLimits {
  static constexpr uint32_t k_sm_count = 132;
  static constexpr uint32_t k_warp_size = 32;
  static constexpr uint32_t k_max_threads_per_block = 1024;
  static constexpr uint32_t k_max_block_dim_xy = 1024;
  static constexpr uint32_t k_max_block_dim_z = 64;
  static constexpr uint32_t k_max_grid_dim_x = 0x7fffffff;
  static constexpr uint32_t k_max_grid_dim_yz = 65535;
  static constexpr uint32_t k_shared_per_block = 48 * 1024;         // without opt-in
  static constexpr uint32_t k_shared_per_block_optin = 227 * 1024;  // cuFuncSetAttribute
  static constexpr uint32_t k_shared_per_sm = 228 * 1024;
  static constexpr uint32_t k_const_bytes = 64 * 1024;
  static constexpr uint32_t k_regs_per_block = 65536;
  static constexpr uint32_t k_max_threads_per_sm = 2048;
  static constexpr uint32_t k_clock_khz = 1980000;
  static constexpr uint32_t k_cc_major = 9;
  static constexpr uint32_t k_cc_minor = 0;
};

// Attributes of a kernel (cuFuncGetAttribute); max_dynamic_shared_bytes is settable.
struct KernelAttributes {
  uint32_t max_threads_per_block = DeviceLimits::k_max_threads_per_block;
  uint32_t static_shared_bytes = 0;
  uint32_t const_bytes = 0;
  uint32_t local_bytes = 0;
  uint32_t num_regs = 0;
  uint32_t ptx_version = 0;    // major*10 + minor
  uint32_t binary_version = 90;
  uint32_t max_dynamic_shared_bytes = DeviceLimits::k_shared_per_block; // minus static, see below
  int32_t preferred_shared_carveout = -1;
  uint32_t required_cluster_width = 0;
};

struct ParamSlot {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct LaunchRequest {
  Dim3 grid;
  Dim3 block;
  uint32_t dynamic_shared_bytes = 0;
  const uint8_t* params = nullptr; // the parameter buffer, laid out as Kernel::params() says
  size_t params_size = 0;
  // Thread-instructions one launch may execute before it ends with CUDA_ERROR_LAUNCH_TIMEOUT.
  uint64_t instruction_budget = 0; // 0: the executor's default (HONE_EMU_INSTRUCTION_BUDGET)
  // Non-zero: vary the schedule deterministically from this seed (the order blocks start in, the
  // order warps take turns, the length of a turn), so that results depending on the order of
  // racing accesses change with it. 0: the fixed schedule. The modeled time never depends on it.
  uint64_t schedule_seed = 0;
  // Non-zero: every block's shared memory (static and dynamic), each thread's local memory and the
  // registers a thread may read before writing them start with pseudo-random values derived from
  // this seed and the block's and thread's indices (emu/exec_fill.hpp), so that a kernel reading
  // what it never wrote gives results that change with the seed. 0: they start at zero.
  uint64_t fill_seed = 0;
  // What %globaltimer reads at the launch's start, in ns: the context's epoch
  // (HONE_EMU_GLOBALTIMER_EPOCH, else the host's real time at context creation) plus the launch's
  // modeled start on its stream. A warp reads it plus its own modeled cycles in ns.
  uint64_t globaltimer_ns = 0;
  // A cooperative launch (cuLaunchCooperativeKernel, CU_LAUNCH_ATTRIBUTE_COOPERATIVE): every block
  // runs at once, on a host thread of its own, and the kernel finds the workspace of grid-wide
  // barriers (cg::this_grid().sync()) where cooperative groups looks for it.
  bool cooperative = false;
  // The printf FIFO bytes left (CU_LIMIT_PRINTF_FIFO_SIZE less what is buffered): no block keeps
  // records beyond it.
  uint64_t print_fifo_bytes = 0;
};

// Where a launch's modeled time goes (emu/README.md, "Cost model: kernels"): the terms the model
// took the time from, each as if it alone bounded the kernel.
struct ModeledCost {
  uint32_t registers = 0;          // per thread, from ptxas for sm_90
  bool registers_assumed = false;  // ptxas gave none (nvJitLink missing, or it rejected the PTX)
  uint32_t blocks_per_sm = 0;      // resident blocks per SM (occupancy)
  uint32_t warps_per_sm = 0;
  std::string occupancy_limit;     // "registers", "shared memory", "warps" or "blocks"
  uint64_t waves = 0;              // waves of resident blocks on the busiest SM
  uint64_t issue_ns = 0;           // that SM's schedulers
  uint64_t latency_ns = 0;         // its warps' longest dependent paths, wave after wave
  uint64_t l1_ns = 0;              // its L1/shared-memory data path
  uint64_t l2_ns = 0;              // device-wide L2 traffic at the L2's bandwidth
  uint64_t dram_ns = 0;            // device-wide DRAM traffic at HBM bandwidth
  uint64_t l2_bytes = 0;
  uint64_t dram_bytes = 0;
  std::string bound;               // the largest term: "issue", "latency", "L1", "L2" or "DRAM"
};

enum class ExecPath : uint8_t { interpreter, compiled };

// One device printf record (emu/exec_printf.hpp) as it reaches the printf FIFO.
struct DevicePrint {
  std::string text;        // what the host prints for it
  uint32_t fifo_bytes = 0; // what it takes of CU_LIMIT_PRINTF_FIFO_SIZE
};

struct LaunchOutcome {
  int status = 0;           // a CUresult: 0, or the error the launch ended with
  std::string message;      // for errors: kernel, PTX line, thread, address
  uint64_t modeled_ns = 0;  // deterministic modeled duration (emu/README.md, "Cost model")
  uint64_t warp_instructions = 0;
  uint64_t thread_instructions = 0;
  uint64_t memory_sectors = 0;
  ModeledCost cost;
  // Which path executed it (emu/exec_jit.hpp): the interpreter, or the
  // kernel's compiled code (with the interpreter for what that code leaves to it).
  ExecPath path = ExecPath::interpreter;
  uint64_t compiled_warp_instructions = 0; // of warp_instructions, those compiled code executed
  // Device printf records in block order, each block's in the order its threads made them (the
  // driver keeps what its FIFO holds); calls whose records were not kept.
  std::vector<DevicePrint> prints;
  uint64_t prints_dropped = 0;
};

class Program;

class Kernel {
public:
  virtual ~Kernel() = default;
  virtual const std::string& name() const = 0;
  // Where each parameter lives in the parameter buffer, in declaration order.
  virtual const std::vector<ParamSlot>& params() const = 0;
  virtual uint32_t param_bytes() const = 0;
  virtual KernelAttributes& attributes() = 0;
  // Run the kernel to completion. Checks the launch shape and shared memory first
  // (CUDA_ERROR_INVALID_VALUE), then runs; a fault ends the launch with its CUresult.
  virtual LaunchOutcome launch(const LaunchRequest& request) = 0;

  // The cost of the last launch that completed (hone_emu_launch_cost), written and read under the
  // registry's mutex.
  struct LastLaunch {
    bool done = false;
    uint64_t modeled_ns = 0;
    ModeledCost cost;
  };
  LastLaunch last;
};

struct GlobalSymbol {
  uint64_t address = 0;
  uint64_t size = 0;
};

// Module variables declared `.attribute(.managed)`, by name.
using ManagedSymbols = std::map<std::string, GlobalSymbol, std::less<>>;

// JIT options that change how ptxas allocates registers (cuModuleLoadDataEx, cuLibraryLoadData):
// the cost model's occupancy follows them, as a GPU's does. 0: not given.
struct CompileOptions {
  uint32_t max_registers = 0;     // CU_JIT_MAX_REGISTERS
  uint32_t threads_per_block = 0; // CU_JIT_THREADS_PER_BLOCK
};

class Program {
public:
  virtual ~Program() = default;
  // Parse and prepare `ptx` (the text of a PTX image). Module variables are allocated in device
  // memory owned by the program, except the managed ones `shared` names: those are the memory of
  // another program of the same library (one managed variable per library, whatever the context),
  // which must outlive this one. Errors carry a CUresult code: CUDA_ERROR_INVALID_PTX for text that
  // does not parse, CUDA_ERROR_NOT_SUPPORTED for an instruction the executor cannot run.
  static Result<std::shared_ptr<Program>> load(std::string_view ptx, std::string_view name,
                                                const ManagedSymbols* shared = nullptr,
                                                const CompileOptions& options = {});

  // The entry named `name`, or nullptr.
  virtual Kernel* kernel(std::string_view name) = 0;
  virtual std::vector<std::string> kernel_names() const = 0;
  // A module-scope .global or .const variable, or nullopt.
  virtual std::optional<GlobalSymbol> global(std::string_view name) const = 0;
  // Its `.attribute(.managed)` variables.
  virtual ManagedSymbols managed() const = 0;
};

} // namespace hone::emu
