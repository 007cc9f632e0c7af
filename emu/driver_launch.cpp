// Kernel launches (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel) and the occupancy
// queries that share their resource arithmetic.
//
// A launch is validated here the way the real driver validates it (handles, context, shape, shared
// memory, parameters), then runs to completion in Kernel::launch with no lock held. A fault the
// real GPU would report asynchronously makes the context sticky (driver.hpp, Context::sticky): the
// launch itself returns CUDA_SUCCESS, every later call on the context returns the fault.
#include "emu/driver.hpp"

#include "emu/graph.hpp"
#include "emu/log.hpp"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace hone::emu {

namespace {

using L = DeviceLimits;

// Shared memory the hardware reserves per block on sm_90 (CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_...).
constexpr uint32_t k_reserved_shared_per_block = 1024;
constexpr uint32_t k_max_blocks_per_sm = 32;

// The debug log's note on which path ran a launch (emu/exec_jit.hpp), and for compiled code how
// much of the launch it executed: the rest is what it left to the interpreter.
std::string path_note(const LaunchOutcome& o) {
  switch (o.path) {
  case ExecPath::compiled:
    return "; compiled code, " + std::to_string(o.compiled_warp_instructions) + " of " +
           std::to_string(o.warp_instructions) + " warp instructions";
  case ExecPath::interpreter:
    break;
  }
  return "; interpreted";
}

struct LaunchArgs {
  CUfunction f = nullptr;
  Dim3 grid;
  Dim3 block;
  unsigned shared_bytes = 0;
  CUstream stream = nullptr;
  void** params = nullptr;
  void** extra = nullptr;
  bool per_thread = false;
  bool cooperative = false;
  const CUlaunchAttribute* attrs = nullptr;
  unsigned num_attrs = 0;
};

// Blocks of this shape one SM holds at once (the occupancy calculator's arithmetic, simplified:
// warps, shared memory and registers, no allocation granularity beyond whole warps).
uint32_t blocks_per_sm(const KernelAttributes& a, uint64_t threads, uint64_t dynamic_shared) {
  if (threads == 0) return 0;
  uint64_t warp_threads = (threads + L::k_warp_size - 1) / L::k_warp_size * L::k_warp_size;
  uint64_t n = std::min<uint64_t>(k_max_blocks_per_sm, L::k_max_threads_per_sm / warp_threads);
  uint64_t shared = a.static_shared_bytes + dynamic_shared;
  if (shared > 0)
    n = std::min<uint64_t>(n, L::k_shared_per_sm / (shared + k_reserved_shared_per_block));
  if (a.num_regs > 0) n = std::min<uint64_t>(n, L::k_regs_per_block / (a.num_regs * warp_threads));
  return static_cast<uint32_t>(n);
}

// What the launch asks of the shared memory: within the default 48 KB, or within the kernel's
// opt-in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), never beyond the device's 227 KB.
bool shared_fits(const KernelAttributes& a, uint64_t dynamic_shared) {
  uint64_t total = a.static_shared_bytes + dynamic_shared;
  if (total > L::k_shared_per_block_optin) return false;
  return total <= L::k_shared_per_block || dynamic_shared <= a.max_dynamic_shared_bytes;
}

CUresult check_shape(const Dim3& grid, const Dim3& block) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (block.x > L::k_max_block_dim_xy || block.y > L::k_max_block_dim_xy ||
      block.z > L::k_max_block_dim_z || block.count() > L::k_max_threads_per_block)
    return CUDA_ERROR_INVALID_VALUE;
  if (grid.x > L::k_max_grid_dim_x || grid.y > L::k_max_grid_dim_yz ||
      grid.z > L::k_max_grid_dim_yz)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// The parameter buffer: kernelParams[i] copied to its slot, or the caller's packed buffer.
CUresult build_params(Kernel& kernel, void** params, void** extra, std::vector<uint8_t>& buffer,
                      const uint8_t*& data, size_t& size) {
  if (params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint32_t bytes = kernel.param_bytes();
  if (extra != nullptr) {
    const void* pointer = nullptr;
    const size_t* size_ptr = nullptr;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        pointer = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        size_ptr = static_cast<const size_t*>(extra[i + 1]);
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (bytes == 0 && pointer == nullptr && size_ptr == nullptr) {
      data = nullptr;
      size = 0;
      return CUDA_SUCCESS;
    }
    if (pointer == nullptr || size_ptr == nullptr || *size_ptr < bytes)
      return CUDA_ERROR_INVALID_VALUE;
    data = static_cast<const uint8_t*>(pointer);
    size = *size_ptr;
    return CUDA_SUCCESS;
  }
  const auto& slots = kernel.params();
  if (!slots.empty() && params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  buffer.assign(bytes, 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (uint64_t(slots[i].offset) + slots[i].size > bytes) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(buffer.data() + slots[i].offset, params[i], slots[i].size);
  }
  data = buffer.data();
  size = buffer.size();
  return CUDA_SUCCESS;
}

struct EventMark {
  Handle event = 0;
  bool at_end = false; // programmatic events trigger when the blocks finish; completion events
                       // when they have all started
};

// cuLaunchKernelEx attributes. None may be dropped in a way that changes what the launch computes:
// scheduling hints are ignored (execution is synchronous and in order anyway), events are
// recorded, and what cannot be honoured (clusters) is refused with CUDA_ERROR_NOT_SUPPORTED.
CUresult apply_attributes(Registry& r, Context& ctx, const LaunchArgs& a, bool& cooperative,
                          std::vector<EventMark>& events, std::string& refusal) {
  if (a.num_attrs > 0 && a.attrs == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < a.num_attrs; ++i) {
    const CUlaunchAttribute& at = a.attrs[i];
    const int id = enum_value(at.id);
    switch (id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
      break;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
      cooperative = cooperative || at.value.cooperative != 0;
      break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: {
      const auto& c = at.value.clusterDim;
      if (c.x == 0 || c.y == 0 || c.z == 0) return CUDA_ERROR_INVALID_VALUE;
      if (c.x == 1 && c.y == 1 && c.z == 1) break;
      if (a.grid.x % c.x != 0 || a.grid.y % c.y != 0 || a.grid.z % c.z != 0)
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
      refusal = "thread block clusters (" + std::to_string(c.x) + "x" + std::to_string(c.y) + "x" +
                std::to_string(c.z) + ") are not supported by the emulated device";
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: {
      CUevent e = id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT
                      ? at.value.programmaticEvent.event
                      : at.value.launchCompletionEvent.event;
      Event* ev = r.event(from_cu(e));
      if (ev == nullptr || ev->ctx != ctx.handle) return CUDA_ERROR_INVALID_HANDLE;
      events.push_back({ev->handle, id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT});
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
      // Device-side updates of kernel nodes need device-side graph launch, which is not emulated.
      if (at.value.deviceUpdatableKernelNode.deviceUpdatable != 0) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION: // applies only with a cluster dimension
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      break; // performance hints: results do not depend on them
    default:
      log(LogLevel::debug,
          "cuLaunchKernelEx: ignoring unknown launch attribute " + std::to_string(id));
      break;
    }
  }
  return CUDA_SUCCESS;
}

// A seed from the environment variable `name`, read at every launch, not once: the validation
// worker runs a kernel several times under different seeds (setenv between the runs). A getenv per
// launch costs nothing next to interpreting the kernel. Unset, empty, 0 or not a number (logged
// once, through `logged`, saying `otherwise`): 0. (This is the emulated driver, never the shim on an
// application's launch path.)
uint64_t seed_from_env(const char* name, std::atomic<bool>& logged, const char* otherwise) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(e, &end, 0);
  if (end == e || *end != '\0') {
    if (!logged.exchange(true)) {
      log(LogLevel::warn, std::string(name) + "=" + e + " is not a number; " + otherwise);
    }
    return 0;
  }
  return v;
}

// HONE_EMU_SCHEDULE_SEED: the worker varies the schedule to expose races.
uint64_t schedule_seed() {
  static std::atomic<bool> logged{false};
  return seed_from_env("HONE_EMU_SCHEDULE_SEED", logged, "using the fixed schedule");
}

// HONE_EMU_FILL_SEED: the worker fills shared and local memory and registers with seeded bytes to
// expose reads of memory a kernel never wrote.
uint64_t fill_seed() {
  static std::atomic<bool> logged{false};
  return seed_from_env("HONE_EMU_FILL_SEED", logged, "memory and registers start at zero");
}

// HONE_EMU_GLOBALTIMER_EPOCH: what %globaltimer counts from, in ns since the Unix epoch (decimal or
// 0x hex; 0 is an epoch like any other). Read at every launch, like the seeds: the worker gives each
// validation run another epoch, so a result that depends on the date shows as nondeterminism.
// Unset or empty: the host's real time when the context was created, so that a program reads a
// plausible wall clock, as on a GPU. Not a number (logged once): the same.
uint64_t globaltimer_epoch(const Context& ctx) {
  static std::atomic<bool> logged{false};
  const char* e = std::getenv("HONE_EMU_GLOBALTIMER_EPOCH");
  if (e == nullptr || *e == '\0') return ctx.created_unix_ns;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(e, &end, 0);
  if (*e == '-' || end == e || *end != '\0' || errno == ERANGE) {
    if (!logged.exchange(true)) {
      log(LogLevel::warn, std::string("HONE_EMU_GLOBALTIMER_EPOCH=") + e +
                              " is not a number of nanoseconds; %globaltimer counts from the "
                              "context's creation");
    }
    return ctx.created_unix_ns;
  }
  return v;
}

const char* error_name(CUresult rc) {
  const char* name = nullptr;
  return cuGetErrorName(rc, &name) == CUDA_SUCCESS ? name : "CUDA_ERROR_?";
}

// Run `kernel` (checked, with the device-work count raised) and account for the outcome: the
// device-work count drops, faults become the context's sticky error. `ctx_handle`'s context may
// have been destroyed meanwhile (then CUDA_SUCCESS: nothing is left to report to). Returns with the
// registry locked through `lock`; `ok` says whether the kernel completed.
CUresult execute_kernel(Registry& r, std::unique_lock<std::mutex>& lock, Handle ctx_handle,
                        Kernel* kernel, const LaunchRequest& request, LaunchOutcome& outcome,
                        bool& ok) {
  LaunchRequest req = request;
  {
    // A launch flushes the printf FIFO at its start (the Programming Guide's flush points), so
    // its own records have the whole FIFO.
    std::lock_guard guard(r.mutex);
    if (Context* ctx = live_context(r, ctx_handle)) {
      printf_flush(*ctx);
      req.print_fifo_bytes = printf_room(*ctx);
    }
  }
  try {
    outcome = kernel->launch(req);
  } catch (...) {
    // Kernel::launch reports failures as outcomes; this is only a backstop for the counter below.
    outcome.status = CUDA_ERROR_UNKNOWN;
    outcome.message = "internal error in the executor";
  }
  lock.lock();
  --r.in_flight;
  lock.unlock();
  r.idle.notify_all();
  lock.lock();
  ok = false;
  Context* ctx = live_context(r, ctx_handle);
  if (ctx == nullptr) return CUDA_SUCCESS; // destroyed by another thread while the kernel ran
  printf_append(*ctx, outcome);
  if (outcome.status == CUDA_SUCCESS) {
    ok = true;
    kernel->last = {true, outcome.modeled_ns, outcome.cost};
    if (log_enabled(LogLevel::debug)) {
      const ModeledCost& c = outcome.cost;
      log(LogLevel::debug,
          "launch " + kernel->name() + ": " + std::to_string(outcome.modeled_ns) +
              " ns modeled, " + std::to_string(outcome.thread_instructions) +
              " thread instructions; " + c.bound + "-bound, " + std::to_string(c.registers) +
              (c.registers_assumed ? " registers (assumed), " : " registers, ") +
              std::to_string(c.warps_per_sm) + " warps per SM (" + c.occupancy_limit + "), " +
              std::to_string(c.waves) + " waves; ns: issue " + std::to_string(c.issue_ns) +
              ", latency " + std::to_string(c.latency_ns) + ", L1 " + std::to_string(c.l1_ns) +
              ", L2 " + std::to_string(c.l2_ns) + ", DRAM " + std::to_string(c.dram_ns) +
              "; bytes: L2 " + std::to_string(c.l2_bytes) + ", DRAM " + std::to_string(c.dram_bytes) +
              path_note(outcome));
    }
    return CUDA_SUCCESS;
  }
  CUresult status = static_cast<CUresult>(outcome.status);
  if (is_sticky_error(status)) {
    // As on a GPU: the launch was accepted; the fault surfaces on the next call that touches the
    // context, and on every one after it.
    if (ctx->sticky == CUDA_SUCCESS) ctx->sticky = status;
    log(LogLevel::warn, std::string(error_name(status)) + ": " + outcome.message +
                            " (the context is now unusable; destroy or reset it)");
    return CUDA_SUCCESS;
  }
  log(status == CUDA_ERROR_NOT_SUPPORTED ? LogLevel::warn : LogLevel::info,
      std::string(error_name(status)) + ": " + outcome.message);
  return status;
}

// The configuration checks every launch makes (call locked).
CUresult check_launch(const KernelAttributes& attrs, const Dim3& grid, const Dim3& block,
                      unsigned shared_bytes) {
  if (CUresult rc = check_shape(grid, block); rc != CUDA_SUCCESS) return rc;
  if (block.count() > attrs.max_threads_per_block) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  if (!shared_fits(attrs, shared_bytes)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

bool cooperative_fits(const KernelAttributes& attrs, const Dim3& grid, const Dim3& block,
                      unsigned shared_bytes) {
  // Every block of a cooperative grid must be resident at once (grid-wide barriers).
  uint64_t resident = uint64_t(blocks_per_sm(attrs, block.count(), shared_bytes)) * L::k_sm_count;
  return grid.count() <= resident;
}

CUresult launch(const LaunchArgs& a) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  }
  Handle fn_handle = 0;
  if (a.f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult rc = resolve_function(from_cu(a.f), fn_handle); rc != CUDA_SUCCESS) return rc;

  std::shared_ptr<Program> program; // keeps the kernel alive if its module is unloaded meanwhile
  Kernel* kernel = nullptr;
  std::vector<uint8_t> buffer;
  const uint8_t* params = nullptr;
  size_t params_size = 0;
  std::vector<EventMark> events;
  Handle ctx_handle = 0;
  Handle stream_handle = 0; // 0: the context's legacy stream
  uint64_t start = 0;
  uint64_t globaltimer = 0;
  bool cooperative = a.cooperative;
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    Function* fn = r.function(fn_handle);
    if (fn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (fn->ctx != ctx->handle) return CUDA_ERROR_INVALID_HANDLE; // a function of another context
    kernel = fn->kernel;
    const KernelAttributes attrs = kernel->attributes();
    if (CUresult rc = check_launch(attrs, a.grid, a.block, a.shared_bytes); rc != CUDA_SUCCESS)
      return rc;
    if (CUresult rc = build_params(*kernel, a.params, a.extra, buffer, params, params_size);
        rc != CUDA_SUCCESS)
      return rc;
    std::string refusal;
    if (CUresult rc = apply_attributes(r, *ctx, a, cooperative, events, refusal);
        rc != CUDA_SUCCESS) {
      if (!refusal.empty()) log(LogLevel::warn, "launch of " + fn->name + ": " + refusal);
      return rc;
    }
    Stream* s = nullptr;
    if (CUresult rc = resolve_stream(r, *ctx, a.stream, a.per_thread, s); rc != CUDA_SUCCESS)
      return rc;
    if (cooperative && !cooperative_fits(attrs, a.grid, a.block, a.shared_bytes))
      return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    bool captured = false;
    if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
    if (captured) {
      // Recorded as a kernel node with a copy of its arguments, not run. Launch events of
      // cuLaunchKernelEx have no meaning inside a graph here and are not recorded.
      GraphNode node;
      node.type = CU_GRAPH_NODE_TYPE_KERNEL;
      KernelNode& k = node.kernel;
      k.function = fn_handle;
      k.kern = fn_handle != from_cu(a.f) ? from_cu(a.f) : 0;
      k.ctx = ctx->handle;
      k.grid = a.grid;
      k.block = a.block;
      k.shared_bytes = a.shared_bytes;
      k.args.assign(params, params + params_size);
      k.slots = kernel->params();
      if (cooperative) {
        CUlaunchAttributeValue v{};
        v.cooperative = 1;
        k.attributes[CU_LAUNCH_ATTRIBUTE_COOPERATIVE] = v;
      }
      return capture_node(r, *s, std::move(node));
    }
    program = fn->program;
    ctx_handle = ctx->handle;
    stream_handle = s->legacy ? 0 : s->handle;
    start = op_start(r, *ctx, *s);
    globaltimer = globaltimer_epoch(*ctx) + start;
    if (log_enabled(LogLevel::debug)) {
      log(LogLevel::debug, "launch " + fn->name + " grid " + std::to_string(a.grid.x) + "x" +
                               std::to_string(a.grid.y) + "x" + std::to_string(a.grid.z) +
                               " block " + std::to_string(a.block.x) + "x" +
                               std::to_string(a.block.y) + "x" + std::to_string(a.block.z) +
                               " shared " + std::to_string(a.shared_bytes));
    }
    // Last in the section: nothing between here and the matching decrement below can throw.
    start_device_work(r);
  }

  LaunchRequest request;
  request.grid = a.grid;
  request.block = a.block;
  request.dynamic_shared_bytes = a.shared_bytes;
  request.params = params;
  request.params_size = params_size;
  request.schedule_seed = schedule_seed();
  request.fill_seed = fill_seed();
  request.globaltimer_ns = globaltimer;
  request.cooperative = cooperative;
  LaunchOutcome outcome;
  std::unique_lock lock(r.mutex, std::defer_lock);
  bool ok = false;
  CUresult status = execute_kernel(r, lock, ctx_handle, kernel, request, outcome, ok);
  if (!ok) return status;
  Context* ctx = live_context(r, ctx_handle);
  Stream* s = stream_handle == 0 ? &ctx->legacy : r.stream(stream_handle);
  uint64_t end = start + outcome.modeled_ns;
  if (s != nullptr) op_finish(*s, end);
  for (const EventMark& m : events) {
    if (Event* ev = r.event(m.event)) {
      ev->recorded = true;
      ev->time_ns = m.at_end ? end : start;
    }
  }
  return CUDA_SUCCESS;
}

LaunchArgs classic(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, CUstream s, void** params, void** extra,
                   bool per_thread) {
  LaunchArgs a;
  a.f = f;
  a.grid = {gx, gy, gz};
  a.block = {bx, by, bz};
  a.shared_bytes = shared;
  a.stream = s;
  a.params = params;
  a.extra = extra;
  a.per_thread = per_thread;
  return a;
}

CUresult launch_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra,
                   bool per_thread) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  LaunchArgs a = classic(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                         config->blockDimY, config->blockDimZ, config->sharedMemBytes,
                         config->hStream, params, extra, per_thread);
  a.attrs = config->attrs;
  a.num_attrs = config->numAttrs;
  return launch(a);
}

// The function behind an occupancy query, with its attributes copied out under the lock.
CUresult occupancy_function(CUfunction f, KernelAttributes& out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Handle fn_handle = 0;
  if (CUresult rc = resolve_function(from_cu(f), fn_handle); rc != CUDA_SUCCESS) return rc;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Function* fn = r.function(fn_handle);
  if (fn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  out = fn->kernel->attributes();
  return CUDA_SUCCESS;
}

CUresult max_active_blocks(int* num_blocks, CUfunction f, int block_size, size_t dynamic_shared) {
  if (num_blocks == nullptr || block_size <= 0)
    return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
  KernelAttributes a;
  if (CUresult rc = occupancy_function(f, a); rc != CUDA_SUCCESS) return rc;
  bool fits = uint32_t(block_size) <= a.max_threads_per_block && shared_fits(a, dynamic_shared);
  *num_blocks = fits ? static_cast<int>(blocks_per_sm(a, uint64_t(block_size), dynamic_shared)) : 0;
  return CUDA_SUCCESS;
}

CUresult max_potential_block_size(int* min_grid, int* block_size, CUfunction f,
                                  CUoccupancyB2DSize to_dynamic, size_t dynamic_shared, int limit) {
  if (min_grid == nullptr || block_size == nullptr)
    return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
  KernelAttributes a;
  if (CUresult rc = occupancy_function(f, a); rc != CUDA_SUCCESS) return rc;
  uint32_t max_block = a.max_threads_per_block;
  if (limit > 0) max_block = std::min<uint32_t>(max_block, uint32_t(limit));
  uint64_t best_threads = 0;
  int best_block = 0;
  int best_blocks = 0;
  // Largest resident thread count wins; among equals, the larger block (as cudaOccupancy does).
  for (uint32_t b = max_block / L::k_warp_size * L::k_warp_size; b >= L::k_warp_size;
       b -= L::k_warp_size) {
    size_t dyn = to_dynamic != nullptr ? to_dynamic(static_cast<int>(b)) : dynamic_shared;
    if (!shared_fits(a, dyn)) continue;
    uint32_t blocks = blocks_per_sm(a, b, dyn);
    if (uint64_t(blocks) * b > best_threads) {
      best_threads = uint64_t(blocks) * b;
      best_block = static_cast<int>(b);
      best_blocks = static_cast<int>(blocks);
    }
  }
  if (best_block == 0 && max_block > 0 && max_block < L::k_warp_size) {
    size_t dyn = to_dynamic != nullptr ? to_dynamic(static_cast<int>(max_block)) : dynamic_shared;
    if (shared_fits(a, dyn)) {
      best_block = static_cast<int>(max_block);
      best_blocks = static_cast<int>(blocks_per_sm(a, max_block, dyn));
    }
  }
  *block_size = best_block;
  *min_grid = best_blocks * static_cast<int>(L::k_sm_count);
  return CUDA_SUCCESS;
}

} // namespace

CUresult run_kernel(Handle ctx_handle, Handle fn_handle, Dim3 grid, Dim3 block,
                    uint32_t shared_bytes, const std::vector<uint8_t>& args, bool cooperative,
                    uint64_t start_ns, uint64_t& modeled_ns) {
  Registry& r = registry();
  std::shared_ptr<Program> program;
  Kernel* kernel = nullptr;
  uint64_t globaltimer = 0;
  {
    std::lock_guard lock(r.mutex);
    Context* ctx = live_context(r, ctx_handle);
    if (ctx == nullptr) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
    Function* fn = r.function(fn_handle);
    if (fn == nullptr || fn->ctx != ctx_handle) return CUDA_ERROR_INVALID_HANDLE;
    kernel = fn->kernel;
    const KernelAttributes attrs = kernel->attributes();
    if (CUresult rc = check_launch(attrs, grid, block, shared_bytes); rc != CUDA_SUCCESS)
      return rc;
    if (args.size() < kernel->param_bytes()) return CUDA_ERROR_INVALID_VALUE;
    if (cooperative && !cooperative_fits(attrs, grid, block, shared_bytes))
      return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    program = fn->program;
    globaltimer = globaltimer_epoch(*ctx) + start_ns;
    start_device_work(r);
  }
  LaunchRequest request;
  request.grid = grid;
  request.block = block;
  request.dynamic_shared_bytes = shared_bytes;
  request.params = args.empty() ? nullptr : args.data();
  request.params_size = args.size();
  request.schedule_seed = schedule_seed();
  request.fill_seed = fill_seed();
  request.globaltimer_ns = globaltimer;
  request.cooperative = cooperative;
  LaunchOutcome outcome;
  std::unique_lock lock(r.mutex, std::defer_lock);
  bool ok = false;
  CUresult status = execute_kernel(r, lock, ctx_handle, kernel, request, outcome, ok);
  modeled_ns = ok ? outcome.modeled_ns : 0;
  return status;
}

CUresult pack_kernel_params(Handle fn_handle, void** params, void** extra,
                            std::vector<uint8_t>& args, std::vector<ParamSlot>& slots) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Function* fn = r.function(fn_handle);
  if (fn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<uint8_t> buffer;
  const uint8_t* data = nullptr;
  size_t size = 0;
  if (CUresult rc = build_params(*fn->kernel, params, extra, buffer, data, size);
      rc != CUDA_SUCCESS)
    return rc;
  args.assign(data, data + size);
  slots = fn->kernel->params();
  return CUDA_SUCCESS;
}

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams,
                                void** extra) {
  return guarded([&] {
    return launch(classic(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                          sharedMemBytes, hStream, kernelParams, extra, false));
  });
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX,
                                     unsigned int blockDimY, unsigned int blockDimZ,
                                     unsigned int sharedMemBytes, CUstream hStream,
                                     void** kernelParams, void** extra) {
  return guarded([&] {
    return launch(classic(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                          sharedMemBytes, hStream, kernelParams, extra, true));
  });
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                                  void** extra) {
  return guarded([&] { return launch_ex(config, f, kernelParams, extra, false); });
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                       void** kernelParams, void** extra) {
  return guarded([&] { return launch_ex(config, f, kernelParams, extra, true); });
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                           unsigned int gridDimY, unsigned int gridDimZ,
                                           unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes,
                                           CUstream hStream, void** kernelParams) {
  return guarded([&] {
    LaunchArgs a = classic(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                           sharedMemBytes, hStream, kernelParams, nullptr, false);
    a.cooperative = true;
    return launch(a);
  });
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                unsigned int gridDimY, unsigned int gridDimZ,
                                                unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ, unsigned int sharedMemBytes,
                                                CUstream hStream, void** kernelParams) {
  return guarded([&] {
    LaunchArgs a = classic(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                           sharedMemBytes, hStream, kernelParams, nullptr, true);
    a.cooperative = true;
    return launch(a);
  });
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func,
                                                             int blockSize,
                                                             size_t dynamicSMemSize) {
  return guarded([&] { return max_active_blocks(numBlocks, func, blockSize, dynamicSMemSize); });
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags) {
  return guarded([&] {
    if ((flags & ~static_cast<unsigned>(CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)) != 0)
      return CUDA_ERROR_INVALID_VALUE;
    return max_active_blocks(numBlocks, func, blockSize, dynamicSMemSize);
  });
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize, CUfunction func,
                                                  CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                  size_t dynamicSMemSize, int blockSizeLimit) {
  return guarded([&] {
    return max_potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                    dynamicSMemSize, blockSizeLimit);
  });
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(
    int* minGridSize, int* blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,
    unsigned int flags) {
  return guarded([&] {
    if ((flags & ~static_cast<unsigned>(CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)) != 0)
      return CUDA_ERROR_INVALID_VALUE;
    return max_potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                    dynamicSMemSize, blockSizeLimit);
  });
}

CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize, CUfunction func,
                                                         int numBlocks, int blockSize) {
  return guarded([&] {
    if (dynamicSmemSize == nullptr || numBlocks <= 0 || blockSize <= 0)
      return initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    KernelAttributes a;
    if (CUresult rc = occupancy_function(func, a); rc != CUDA_SUCCESS) return rc;
    uint64_t per_block = L::k_shared_per_sm / uint64_t(numBlocks);
    uint64_t fixed = a.static_shared_bytes + k_reserved_shared_per_block;
    uint64_t avail = per_block > fixed ? per_block - fixed : 0;
    avail = std::min<uint64_t>(avail, a.static_shared_bytes < L::k_shared_per_block_optin
                                          ? L::k_shared_per_block_optin - a.static_shared_bytes
                                          : 0);
    *dynamicSmemSize = avail;
    return CUDA_SUCCESS;
  });
}

} // extern "C"
