// The driver API layer of the emulated device: the objects behind CUcontext, CUmodule,
// CUfunction, CUlibrary, CUkernel, CUstream and CUevent, the registries that own them, and the
// helpers the entry points (driver_*.cpp) share.
//
// This file is compiled with __CUDA_API_VERSION_INTERNAL (emu/CMakeLists.txt): cuda.h then
// declares every ABI name libcuda exports — cuMemAlloc_v2 and the legacy cuMemAlloc, cuLaunchKernel
// and cuLaunchKernel_ptsz — under its own spelling, the way NVIDIA builds its driver, so each entry
// point is defined under exactly the name it is exported as.
//
// Handles are not pointers: every object gets a fresh number from one counter, never reused, and
// every handle an application passes in is looked up in a registry before anything is read
// through it. A destroyed or foreign handle is therefore an error (CUDA_ERROR_INVALID_HANDLE),
// never a use after free, and a stale handle can never alias a newer object.
//
// One mutex guards every registry. It is never held while a kernel runs, a module is parsed or
// a large copy is made, so host threads using different streams do not wait for each other.
#pragma once

#include "emu/program.hpp"

#include <cuda.h>

#include <array>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace hone::emu {

// A handle value as the application sees it (a CUcontext, CUstream, ... cast to an integer).
using Handle = uint64_t;

template <class H> H to_cu(Handle h) {
  return reinterpret_cast<H>(static_cast<uintptr_t>(h));
}
template <class H> Handle from_cu(H h) {
  return static_cast<Handle>(reinterpret_cast<uintptr_t>(h));
}

// The value of an enum the application passed, read through its bytes: a C caller may pass any
// integer, and loading an out-of-range value through the enum type is undefined behaviour.
template <class E> int enum_value(const E& e) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<int>(v);
}

// The emulated device's constants beyond DeviceLimits.
inline constexpr int k_driver_version = 13000;
inline constexpr int k_device_count = 1;
inline constexpr const char* k_device_name = "hone emulated device (sm_90)";
inline constexpr const char* k_pci_bus_id = "0000:01:00.0";
inline constexpr int k_stream_priority_least = 0;
inline constexpr int k_stream_priority_greatest = -5;
inline constexpr unsigned k_ctx_api_version = 3020; // what contexts of the v2+ API report

// A stream's modeled clock. Work on the emulated device runs synchronously, but each stream keeps
// the modeled time (ns) at which its last operation ends, so events measure what a GPU would take.
struct Stream {
  Handle handle = 0;
  Handle ctx = 0;
  unsigned flags = 0; // CU_STREAM_DEFAULT or CU_STREAM_NON_BLOCKING
  int priority = 0;
  uint64_t clock_ns = 0;
  uint64_t id = 0;
  bool legacy = false;     // the context's NULL stream
  bool per_thread = false; // a host thread's per-thread default stream
  // Stream capture (emu/graph.hpp): the capture sequence the stream takes part in (0: none), and
  // the nodes its next captured operation depends on, with their edge data (parallel arrays, which
  // cuStreamGetCaptureInfo hands out as they are).
  uint64_t capture = 0;
  std::vector<CUgraphNode> capture_deps;
  std::vector<CUgraphEdgeData> capture_edges;

  bool blocking() const { return (flags & CU_STREAM_NON_BLOCKING) == 0; }
};

struct Event {
  Handle handle = 0;
  Handle ctx = 0;
  unsigned flags = 0;
  bool recorded = false;
  uint64_t time_ns = 0; // the recording stream's clock when recorded
  // Last recorded in capture sequence `capture` (0: outside any), after these nodes: what a
  // cuStreamWaitEvent on it joins (emu/graph.hpp).
  uint64_t capture = 0;
  std::vector<CUgraphNode> capture_nodes;
  std::vector<CUgraphEdgeData> capture_edges;
};

struct Module;

struct Function {
  Handle handle = 0;
  Handle module = 0;
  Handle ctx = 0;
  Handle library_kernel = 0;        // the CUkernel it was obtained from, if any
  std::shared_ptr<Program> program; // keeps `kernel` alive during a launch racing an unload
  Kernel* kernel = nullptr;
  std::string name;
  // Cluster preferences set through cuFuncSetAttribute that KernelAttributes does not hold.
  std::map<int, int> extra_attributes;
};

struct Module {
  Handle handle = 0;
  Handle ctx = 0;
  Handle library = 0; // the CUlibrary it was loaded for, 0 for cuModuleLoad*
  std::shared_ptr<Program> program;
  std::string name;
  std::map<std::string, Handle, std::less<>> functions; // by name: one handle per function
};

// A CUkernel: a kernel of a context-independent CUlibrary. Attributes set on it apply to the
// function it resolves to in every context.
struct LibraryKernel {
  Handle handle = 0;
  Handle library = 0;
  std::string name;
  std::optional<uint32_t> max_dynamic_shared_bytes;
  std::optional<int32_t> preferred_carveout;
};

struct Library {
  Handle handle = 0;
  std::string name;
  std::string ptx;
  // Parsed at load time to report errors then and to answer context-free queries. The first
  // context that needs a module takes it; later contexts load their own (module variables are
  // per context).
  std::shared_ptr<Program> prototype;
  CompileOptions options; // what every context's module is loaded with
  bool prototype_taken = false;
  std::vector<std::string> kernel_names;
  std::map<Handle, Handle> modules; // context → module
  std::map<std::string, Handle, std::less<>> kernels;
};

// A memory pool (cuMemPoolCreate, or a device's default pool). Work runs synchronously, so a
// stream-ordered allocation exists from its call on and a free returns its memory at once: what
// the pool has reserved is what it has handed out (nothing is kept for reuse).
struct MemPool {
  Handle handle = 0;
  CUmemPoolProps props{};
  bool is_default = false;
  bool destroyed = false; // by cuMemPoolDestroy; gone once its last allocation is freed
  cuuint64_t release_threshold = 0;
  int reuse_follow_event_dependencies = 1;
  int reuse_allow_opportunistic = 1;
  int reuse_allow_internal_dependencies = 1;
  cuuint64_t used = 0, used_high = 0;
  std::set<uint64_t> allocations; // bases of its live allocations
};

struct Context {
  Handle handle = 0;
  uint64_t id = 0;
  CUdevice device = 0;
  unsigned flags = 0;
  bool primary = false;
  bool active = true; // false: a primary context released to refcount 0, or reset
  // The first error a kernel reported asynchronously on a real GPU (CUDA_ERROR_ILLEGAL_ADDRESS,
  // ...). Once set, every call that needs a working context returns it until the context is
  // destroyed or, for the primary context, reset.
  CUresult sticky = CUDA_SUCCESS;
  Stream legacy; // the NULL stream
  // Modeled time the host has waited for (stream/event/context synchronization, synchronous
  // copies): nothing it issues afterwards can start earlier.
  uint64_t host_clock_ns = 0;
  // The host's real time when the context was created (or the primary context activated), in ns
  // since the Unix epoch: %globaltimer's epoch unless HONE_EMU_GLOBALTIMER_EPOCH says otherwise.
  uint64_t created_unix_ns = 0;
  std::set<Handle> modules;
  std::set<Handle> streams;
  std::set<Handle> events;
  std::array<size_t, CU_LIMIT_MAX> limits{};
  CUfunc_cache cache_config = CU_FUNC_CACHE_PREFER_NONE;
  // Device printf (emu/driver_printf.cpp): the text of the records waiting for the next flush,
  // the FIFO bytes they take, and the records that did not fit since the last flush.
  std::string printf_pending;
  uint64_t printf_used = 0;
  uint64_t printf_dropped = 0;

  // The owner key of the device memory this context frees with itself.
  const void* memory_owner() const { return reinterpret_cast<const void*>(handle); }
};

// Everything the driver owns. Lock `mutex` around any access.
struct Registry {
  std::mutex mutex;
  std::unordered_map<Handle, std::unique_ptr<Context>> contexts;
  std::unordered_map<Handle, std::unique_ptr<Module>> modules;
  std::unordered_map<Handle, std::unique_ptr<Function>> functions;
  std::unordered_map<Handle, std::unique_ptr<Library>> libraries;
  std::unordered_map<Handle, std::unique_ptr<LibraryKernel>> kernels;
  std::unordered_map<Handle, std::unique_ptr<Stream>> streams;
  std::unordered_map<Handle, std::unique_ptr<Event>> events;
  // cuMemHostAlloc flags of live pinned allocations, by base (cuMemHostGetFlags).
  std::unordered_map<uint64_t, unsigned> host_alloc_flags;
  // The properties of each physical allocation of cuMemCreate (the memory itself is Memory's),
  // kept while it lives (cuMemGetAllocationPropertiesFromHandle).
  std::unordered_map<Handle, CUmemAllocationProp> vmm_props;
  // Memory pools, device 0's default one (made on first use) and the one cuMemAllocAsync uses.
  std::unordered_map<Handle, std::unique_ptr<MemPool>> pools;
  Handle default_pool = 0;
  Handle current_pool = 0;
  Handle primary = 0; // device 0's primary context, created by cuInit, never erased
  int primary_refcount = 0;
  uint64_t next_id = 1;
  // Launches, copies and memsets running now (outside the lock), and the signal that one ended.
  // What frees memory waits for them, as cuMemFree and cuCtxDestroy synchronize on a real GPU:
  // a kernel still running on another thread never touches unmapped memory.
  uint64_t in_flight = 0;
  std::condition_variable idle;

  // A value never handed out before.
  Handle new_handle();
  uint64_t new_id() { return next_id++; }

  Context* context(Handle h);
  Module* module(Handle h);
  Function* function(Handle h);
  Library* library(Handle h);
  LibraryKernel* kernel(Handle h);
  Stream* stream(Handle h);
  Event* event(Handle h);
  MemPool* pool(Handle h); // a live pool (not destroyed), or nullptr
};

Registry& registry();

// Device work about to run outside the lock (call with it held); done_device_work when it ends.
void start_device_work(Registry& r);
void done_device_work(Registry& r); // takes the lock
// Wait until no device work runs (the lock is released while waiting).
void wait_device_idle(Registry& r, std::unique_lock<std::mutex>& lock);

// --- initialization ----------------------------------------------------------------------------

bool initialized();
void set_initialized();

// --- entry point guard ---------------------------------------------------------------------------

void log_internal_error(const char* what) noexcept;

// Run an entry point body: no exception ever crosses the C ABI. Entry points that cannot throw
// (plain queries that allocate nothing) do without.
template <class F> CUresult guarded(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    log_internal_error(e.what());
    return CUDA_ERROR_UNKNOWN;
  } catch (...) {
    log_internal_error("unknown exception");
    return CUDA_ERROR_UNKNOWN;
  }
}

// --- contexts (call with the registry locked) -------------------------------------------------

// The calling thread's context stack, innermost last. Holds handles, which may be stale.
std::vector<Handle>& context_stack();

// The current context: CUDA_ERROR_INVALID_CONTEXT when there is none,
// CUDA_ERROR_CONTEXT_IS_DESTROYED when it was destroyed (or is an inactive primary context).
CUresult current_context(Registry& r, Context*& out);

// The current context, also failing with its sticky error if it has one.
CUresult usable_context(Registry& r, Context*& out);

// Free everything `ctx` owns: modules, functions, streams, events, device memory, and the
// virtual memory reservations and physical allocations made while it was current. Leaves the
// context object itself alone.
void release_context_resources(Registry& r, Context& ctx);

// The context a handle-owning object lives in, if it is alive and active.
Context* live_context(Registry& r, Handle ctx);

// Whether a sticky error class: the errors a real GPU reports asynchronously and that corrupt the
// context for good.
bool is_sticky_error(int status);

// --- memory pools (call with the registry locked) -----------------------------------------------

// Device 0's default pool, made on first use.
MemPool& default_pool(Registry& r);
// Take the pool allocation of `bytes` at `base` off its pool's books (it was freed, or its
// context was).
void pool_forget(Registry& r, uint64_t base, uint64_t bytes);
// The pool allocations (base, size) `owner` (a context's memory owner) holds.
std::vector<std::pair<uint64_t, uint64_t>> pool_allocations_of(Registry& r, const void* owner);

// --- streams and the clock model (call with the registry locked) -------------------------------

// Which stream a handle means. `per_thread_default`: the call came through a _ptsz/_ptds entry
// point, so a 0 handle is the calling thread's per-thread default stream.
CUresult resolve_stream(Registry& r, Context& ctx, CUstream h, bool per_thread_default,
                        Stream*& out);

// The modeled time at which an operation issued now on `s` may start: after the stream's previous
// work, after what the host has waited for and, for the legacy NULL stream and the blocking
// streams, after each other's.
uint64_t op_start(Registry& r, Context& ctx, const Stream& s);
// Record that an operation on `s` ends at `end_ns`.
void op_finish(Stream& s, uint64_t end_ns);
// The host waited until `t_ns` (a synchronization or a synchronous copy).
void host_waits(Context& ctx, uint64_t t_ns);

// --- device printf (emu/driver_printf.cpp; call with the registry locked) ----------------------

// The printf FIFO bytes left for the next launch's records.
uint64_t printf_room(const Context& ctx);
// Keep a launch's printf records, as many as the FIFO holds (the rest are dropped).
void printf_append(Context& ctx, LaunchOutcome& outcome);
// Print what the FIFO holds to stdout and empty it: at the flush points CUDA documents (host
// synchronization, blocking copies, launches, module loads and unloads, context destruction,
// host functions).
void printf_flush(Context& ctx);

// --- the copy and memset cost model (emu/README.md, "Cost model: copies and streams") ----------

enum class CopyKind { host_to_device, device_to_host, device_to_device, host_to_host };
uint64_t copy_ns(CopyKind kind, uint64_t bytes);
uint64_t memset_ns(uint64_t bytes);

// --- modules (call without the registry locked) ------------------------------------------------

// The PTX text an image holds: the text itself, the PTX entry a fatbin carries for sm_90, or the
// PTX of an image the emulated linker made (emu/link_image.hpp), whose link-time register options
// are then stored in `*linked`. `size` is the readable length when known (a file), else
// cuda::k_unknown_size.
Result<std::string> image_ptx(const void* image, size_t size, std::string_view what,
                              std::optional<CompileOptions>* linked = nullptr);

// A JIT log option's output, as the driver writes it (cuda.h, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
// "IN: Log buffer size in bytes ... OUT: Amount of log buffer filled with messages"): `text` cut to
// `capacity` bytes with its terminating NUL, and the bytes written, NUL included, in place of the
// size option's value `values[size_index]`. Nothing without a buffer.
void write_jit_log(char* buffer, size_t capacity, void** values, int size_index,
                   std::string_view text);

// The function handle `h` means in the current context: a CUfunction, or a CUkernel resolved
// (loading its library into the context if needed). Locks the registry itself.
CUresult resolve_function(Handle h, Handle& function_out);

} // namespace hone::emu
