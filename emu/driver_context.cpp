// Contexts: the per-thread context stack, created contexts, the refcounted primary context, and
// the per-context settings (limits, flags, cache config).
#include "emu/driver.hpp"

#include "emu/graph.hpp"

#include "emu/log.hpp"

#include <algorithm>
#include <chrono>

namespace hone::emu {

namespace {

// Defaults of an sm_90 context (cuCtxGetLimit on the real driver).
constexpr std::array<size_t, CU_LIMIT_MAX> k_default_limits = [] {
  std::array<size_t, CU_LIMIT_MAX> l{};
  l[CU_LIMIT_STACK_SIZE] = 1024;
  l[CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20;
  l[CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20;
  l[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
  l[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
  l[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64;
  l[CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0;
  return l;
}();

constexpr unsigned k_ctx_flags_mask = CU_CTX_FLAGS_MASK;

void init_context(Context& ctx, Registry& r, unsigned flags) {
  ctx.flags = flags;
  ctx.limits = k_default_limits;
  ctx.cache_config = CU_FUNC_CACHE_PREFER_NONE;
  ctx.legacy = Stream{};
  ctx.legacy.legacy = true;
  ctx.legacy.ctx = ctx.handle;
  ctx.legacy.id = r.new_id();
  ctx.host_clock_ns = 0;
  ctx.created_unix_ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
}

CUresult create_context(CUcontext* pctx, unsigned flags, CUdevice dev) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~k_ctx_flags_mask) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto ctx = std::make_unique<Context>();
  ctx->handle = r.new_handle();
  ctx->id = r.new_id();
  ctx->device = dev;
  init_context(*ctx, r, flags);
  Handle h = ctx->handle;
  r.contexts.emplace(h, std::move(ctx));
  context_stack().push_back(h); // cuCtxCreate makes the new context current
  *pctx = to_cu<CUcontext>(h);
  log(LogLevel::debug, "cuCtxCreate: context " + std::to_string(h));
  return CUDA_SUCCESS;
}

// The context `h` names for a query: NULL means the current one.
CUresult query_context(Registry& r, CUcontext h, Context*& out) {
  if (h == nullptr) return current_context(r, out);
  out = live_context(r, from_cu(h));
  return out != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult primary_release(CUdevice dev) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  if (r.primary_refcount == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (r.primary_refcount == 1) wait_device_idle(r, lock);
  if (r.primary_refcount == 0) return CUDA_ERROR_INVALID_CONTEXT; // released meanwhile
  if (--r.primary_refcount == 0) {
    Context* ctx = r.context(r.primary);
    release_context_resources(r, *ctx);
    ctx->active = false;
  }
  return CUDA_SUCCESS;
}

CUresult primary_reset(CUdevice dev) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  wait_device_idle(r, lock);
  Context* ctx = r.context(r.primary);
  // Everything goes, the refcount included: the next retain starts a fresh context under the same
  // handle, so threads that still have it current work again.
  release_context_resources(r, *ctx);
  ctx->active = false;
  r.primary_refcount = 0;
  log(LogLevel::debug, "cuDevicePrimaryCtxReset: primary context reset");
  return CUDA_SUCCESS;
}

CUresult primary_set_flags(CUdevice dev, unsigned flags) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
  if ((flags & ~k_ctx_flags_mask) != 0) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.context(r.primary)->flags = flags;
  return CUDA_SUCCESS;
}

CUresult ctx_destroy(CUcontext hctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (hctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  wait_device_idle(r, lock);
  Handle h = from_cu(hctx);
  Context* ctx = r.context(h);
  // The primary context is released, never destroyed.
  if (ctx == nullptr || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  release_context_resources(r, *ctx);
  r.contexts.erase(h);
  // Popped if current to this thread; other threads keep the stale handle on their stacks and get
  // CUDA_ERROR_CONTEXT_IS_DESTROYED, as on the real driver.
  auto& stack = context_stack();
  if (!stack.empty() && stack.back() == h) stack.pop_back();
  log(LogLevel::debug, "cuCtxDestroy: context " + std::to_string(h));
  return CUDA_SUCCESS;
}

CUresult ctx_push(CUcontext hctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (hctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.context(from_cu(hctx)) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  context_stack().push_back(from_cu(hctx));
  return CUDA_SUCCESS;
}

CUresult ctx_pop(CUcontext* pctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  auto& stack = context_stack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = to_cu<CUcontext>(stack.back());
  stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult ctx_synchronize(CUcontext hctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = query_context(r, hctx, ctx); rc != CUDA_SUCCESS) return rc;
  // Work completes before the call that issued it returns: only an earlier fault is left to report.
  if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  // Waiting for a capturing stream invalidates its capture; otherwise the synchronization is an
  // unsafe call the capture mode may forbid.
  bool capturing = false;
  for (Handle h : ctx->streams) {
    if (const Stream* s = r.stream(h); s != nullptr && s->capture != 0) {
      capture_invalidate(r, *s);
      capturing = true;
    }
  }
  if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (CUresult rc = capture_forbids_unsafe(r); rc != CUDA_SUCCESS) return rc;
  // In modeled time the host now waits for every stream of the context.
  uint64_t t = ctx->legacy.clock_ns;
  for (Handle h : ctx->streams) {
    if (const Stream* s = r.stream(h)) t = std::max(t, s->clock_ns);
  }
  host_waits(*ctx, t);
  return CUDA_SUCCESS;
}

CUresult ctx_get_device(CUdevice* device, CUcontext hctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = query_context(r, hctx, ctx); rc != CUDA_SUCCESS) return rc;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

} // namespace

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return guarded([&] { return create_context(pctx, flags, dev); });
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return guarded([&] { return create_context(pctx, flags, dev); });
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams,
                                unsigned int flags, CUdevice dev) {
  return guarded([&] {
    if (numParams < 0 || (numParams > 0 && paramsArray == nullptr)) return CUDA_ERROR_INVALID_VALUE;
    // Execution affinity (an SM count limit) is not modeled.
    if (numParams > 0) return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
    return create_context(pctx, flags, dev);
  });
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams,
                                unsigned int flags, CUdevice dev) {
  return guarded([&] {
    if (ctxCreateParams != nullptr) {
      if (ctxCreateParams->numExecAffinityParams > 0 || ctxCreateParams->execAffinityParams)
        return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
      if (ctxCreateParams->cigParams != nullptr) return CUDA_ERROR_NOT_SUPPORTED;
    }
    return create_context(pctx, flags, dev);
  });
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) {
  return guarded([&] { return ctx_destroy(ctx); });
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  return guarded([&] { return ctx_destroy(ctx); });
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    auto& stack = context_stack();
    if (ctx == nullptr) {
      if (!stack.empty()) stack.pop_back();
      return CUDA_SUCCESS;
    }
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    if (r.context(from_cu(ctx)) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (stack.empty()) {
      stack.push_back(from_cu(ctx));
    } else {
      stack.back() = from_cu(ctx);
    }
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& stack = context_stack();
  *pctx = stack.empty() ? nullptr : to_cu<CUcontext>(stack.back());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  return guarded([&] { return ctx_push(ctx); });
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  return guarded([&] { return ctx_push(ctx); });
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) {
  return guarded([&] { return ctx_pop(pctx); });
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  return guarded([&] { return ctx_pop(pctx); });
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  return guarded([&] { return ctx_synchronize(nullptr); });
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  return guarded([&] { return ctx_synchronize(ctx); });
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  return guarded([&] { return ctx_get_device(device, nullptr); });
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  return guarded([&] { return ctx_get_device(device, ctx); });
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    *flags = ctx->flags;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxSetFlags(unsigned int flags) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if ((flags & ~k_ctx_flags_mask) != 0) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    ctx->flags = flags;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext hctx, unsigned int* version) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = query_context(r, hctx, ctx); rc != CUDA_SUCCESS) return rc;
    *version = k_ctx_api_version;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxGetId(CUcontext hctx, unsigned long long* ctxId) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (ctxId == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = query_context(r, hctx, ctx); rc != CUDA_SUCCESS) return rc;
    *ctxId = ctx->id;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxGetLimit(size_t* pvalue, CUlimit limit) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pvalue == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const int l = enum_value(limit);
    if (l < 0 || l >= CU_LIMIT_MAX) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    *pvalue = ctx->limits[l];
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    const int l = enum_value(limit);
    if (l < 0 || l >= CU_LIMIT_MAX) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    if (l == CU_LIMIT_MAX_L2_FETCH_GRANULARITY && value > 128) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    // Stored and reported back; the executor does not enforce them (a kernel's stack and heap are
    // bounded by host memory).
    ctx->limits[l] = value;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (leastPriority != nullptr) *leastPriority = k_stream_priority_least;
  if (greatestPriority != nullptr) *greatestPriority = k_stream_priority_greatest;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache* pconfig) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pconfig == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    *pconfig = ctx->cache_config;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    const int c = enum_value(config);
    if (c < CU_FUNC_CACHE_PREFER_NONE || c > CU_FUNC_CACHE_PREFER_EQUAL)
      return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    ctx->cache_config = static_cast<CUfunc_cache>(c);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = r.context(r.primary);
    if (!ctx->active) {
      // Flags set while inactive (cuDevicePrimaryCtxSetFlags) survive activation.
      init_context(*ctx, r, ctx->flags);
      ctx->sticky = CUDA_SUCCESS;
      ctx->active = true;
    }
    ++r.primary_refcount;
    *pctx = to_cu<CUcontext>(ctx->handle);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  return guarded([&] { return primary_release(dev); });
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return guarded([&] { return primary_release(dev); });
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) {
  return guarded([&] { return primary_reset(dev); });
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return guarded([&] { return primary_reset(dev); });
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return guarded([&] { return primary_set_flags(dev, flags); });
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  return guarded([&] { return primary_set_flags(dev, flags); });
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= k_device_count) return CUDA_ERROR_INVALID_DEVICE;
    if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = r.context(r.primary);
    *flags = ctx->flags;
    *active = ctx->active ? 1 : 0;
    return CUDA_SUCCESS;
  });
}

} // extern "C"
