// Registries, the context stack, stream clocks and the copy cost model shared by the entry points.
#include "emu/driver.hpp"

#include "emu/exports.hpp"
#include "emu/log.hpp"
#include "emu/memory.hpp"

#include <algorithm>
#include <atomic>
#include <new>
#include <pthread.h>

namespace hone::emu {

namespace {

std::atomic<bool> g_initialized{false};

// Handles start well away from 0, CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2), and step by
// 16 so they look like the aligned pointers applications expect.
constexpr Handle k_first_handle = 0x00e0'0000'1000ull;
constexpr Handle k_handle_step = 0x10;

// Keep the registry usable in a child after fork(): no thread holds the lock across it, and the
// work other threads were running does not exist in the child.
void lock_for_fork() {
  registry().mutex.lock();
}
void unlock_in_parent() {
  registry().mutex.unlock();
}
void unlock_in_child() {
  registry().in_flight = 0;
  // Parent threads waiting on `idle` (in cuMemFree, say) left their state in it; those threads do
  // not exist here. Start a fresh condition variable over the old one (destroying one with
  // waiters is undefined, so it is not destroyed).
  new (&registry().idle) std::condition_variable();
  registry().mutex.unlock();
}

// A host thread's per-thread default stream in each context it used one in.
thread_local std::vector<std::pair<Handle, Handle>> t_per_thread_streams;

} // namespace

Handle Registry::new_handle() {
  static Handle next = k_first_handle;
  Handle h = next;
  next += k_handle_step;
  return h;
}

template <class Map> auto* find_in(Map& map, Handle h) {
  auto it = map.find(h);
  return it == map.end() ? nullptr : it->second.get();
}

Context* Registry::context(Handle h) {
  return find_in(contexts, h);
}
Module* Registry::module(Handle h) {
  return find_in(modules, h);
}
Function* Registry::function(Handle h) {
  return find_in(functions, h);
}
Library* Registry::library(Handle h) {
  return find_in(libraries, h);
}
LibraryKernel* Registry::kernel(Handle h) {
  return find_in(kernels, h);
}
Stream* Registry::stream(Handle h) {
  return find_in(streams, h);
}
Event* Registry::event(Handle h) {
  return find_in(events, h);
}

Registry& registry() {
  // Never destroyed: other libraries' destructors and exit-time threads may still call in.
  static Registry* r = [] {
    auto* reg = new Registry();
    pthread_atfork(lock_for_fork, unlock_in_parent, unlock_in_child);
    return reg;
  }();
  return *r;
}

void start_device_work(Registry& r) {
  ++r.in_flight;
}

void done_device_work(Registry& r) {
  {
    std::lock_guard lock(r.mutex);
    --r.in_flight;
  }
  r.idle.notify_all();
}

void wait_device_idle(Registry& r, std::unique_lock<std::mutex>& lock) {
  r.idle.wait(lock, [&] { return r.in_flight == 0; });
}

bool initialized() {
  return g_initialized.load(std::memory_order_acquire);
}
void set_initialized() {
  g_initialized.store(true, std::memory_order_release);
}

void log_internal_error(const char* what) noexcept {
  try {
    log(LogLevel::warn, std::string("internal error (reported as CUDA_ERROR_UNKNOWN): ") + what);
  } catch (...) {
  }
}

int unsupported_call(const char* name, std::atomic<bool>& logged) noexcept {
  if (!logged.exchange(true)) {
    try {
      log(LogLevel::warn,
          std::string(name) +
              " is not implemented by the emulated device: CUDA_ERROR_NOT_SUPPORTED");
    } catch (...) {
    }
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

std::vector<Handle>& context_stack() {
  thread_local std::vector<Handle> stack;
  return stack;
}

Context* live_context(Registry& r, Handle h) {
  Context* ctx = r.context(h);
  return ctx != nullptr && ctx->active ? ctx : nullptr;
}

CUresult current_context(Registry& r, Context*& out) {
  auto& stack = context_stack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  out = live_context(r, stack.back());
  return out != nullptr ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

CUresult usable_context(Registry& r, Context*& out) {
  CUresult rc = current_context(r, out);
  if (rc != CUDA_SUCCESS) return rc;
  return out->sticky;
}

bool is_sticky_error(int status) {
  switch (status) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
    return true;
  default:
    return false;
  }
}

void release_context_resources(Registry& r, Context& ctx) {
  printf_flush(ctx); // context destruction flushes device printf's FIFO
  for (Handle m : ctx.modules) {
    Module* mod = r.module(m);
    if (mod == nullptr) continue;
    for (const auto& [name, f] : mod->functions) r.functions.erase(f);
    if (Library* lib = r.library(mod->library)) lib->modules.erase(ctx.handle);
    r.modules.erase(m);
  }
  for (Handle s : ctx.streams) r.streams.erase(s);
  for (Handle e : ctx.events) r.events.erase(e);
  ctx.modules.clear();
  ctx.streams.clear();
  ctx.events.clear();
  auto pooled = pool_allocations_of(r, ctx.memory_owner());
  memory().release_owner(ctx.memory_owner());
  for (const auto& [base, bytes] : pooled) pool_forget(r, base, bytes);
  std::erase_if(r.host_alloc_flags, [](const auto& entry) { return !memory().find(entry.first); });
  std::erase_if(r.vmm_props,
                [](const auto& entry) { return !memory().physical_alive(entry.first); });
  ctx.sticky = CUDA_SUCCESS;
  ctx.legacy.clock_ns = 0;
  ctx.host_clock_ns = 0;
}

CUresult resolve_stream(Registry& r, Context& ctx, CUstream h, bool per_thread_default,
                        Stream*& out) {
  Handle handle = from_cu(h);
  if (handle == 0) handle = from_cu(per_thread_default ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY);
  if (handle == from_cu(CU_STREAM_LEGACY)) {
    out = &ctx.legacy;
    return CUDA_SUCCESS;
  }
  if (handle == from_cu(CU_STREAM_PER_THREAD)) {
    for (auto& [c, s] : t_per_thread_streams) {
      if (c != ctx.handle) continue;
      if ((out = r.stream(s)) != nullptr) return CUDA_SUCCESS;
    }
    // First use in this context (or the context was reset since): a blocking stream of its own.
    auto stream = std::make_unique<Stream>();
    stream->handle = r.new_handle();
    stream->ctx = ctx.handle;
    stream->id = r.new_id();
    stream->per_thread = true;
    out = stream.get();
    ctx.streams.insert(stream->handle);
    std::erase_if(t_per_thread_streams, [&](const auto& p) { return p.first == ctx.handle; });
    t_per_thread_streams.emplace_back(ctx.handle, stream->handle);
    r.streams.emplace(stream->handle, std::move(stream));
    return CUDA_SUCCESS;
  }
  out = r.stream(handle);
  if (out == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  // A stream of another context: the real driver's "invalid resource handle".
  if (out->ctx != ctx.handle) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

uint64_t op_start(Registry& r, Context& ctx, const Stream& s) {
  uint64_t t = std::max(s.clock_ns, ctx.host_clock_ns);
  if (s.legacy) {
    // The legacy NULL stream waits for every blocking stream of its context...
    for (Handle h : ctx.streams) {
      const Stream* other = r.stream(h);
      if (other != nullptr && other->blocking()) t = std::max(t, other->clock_ns);
    }
  } else if (s.blocking()) {
    // ...and every blocking stream waits for the legacy NULL stream.
    t = std::max(t, ctx.legacy.clock_ns);
  }
  return t;
}

void op_finish(Stream& s, uint64_t end_ns) {
  s.clock_ns = std::max(s.clock_ns, end_ns);
}

void host_waits(Context& ctx, uint64_t t_ns) {
  ctx.host_clock_ns = std::max(ctx.host_clock_ns, t_ns);
  printf_flush(ctx); // every host synchronization flushes device printf's FIFO
}

// Copies over PCIe (host ↔ device, and pageable host ↔ host through the driver) at 25 GB/s plus
// 2 µs of setup; device-local copies at 1.5 TB/s plus 1 µs; memset like a device-local copy.
uint64_t copy_ns(CopyKind kind, uint64_t bytes) {
  switch (kind) {
  case CopyKind::device_to_device:
    return 1000 + (bytes + 1499) / 1500;
  case CopyKind::host_to_device:
  case CopyKind::device_to_host:
  case CopyKind::host_to_host:
    return 2000 + (bytes + 24) / 25;
  }
  return 0;
}

uint64_t memset_ns(uint64_t bytes) {
  return 1000 + (bytes + 1499) / 1500;
}

} // namespace hone::emu
