// Stream-ordered allocation and memory pools (cuda.h 13.0, "Stream Ordered Memory Allocator").
//
// Work runs synchronously on the emulated device, so cuMemAllocAsync's memory is usable once the
// call returns (as it is on a GPU once the stream reaches the allocation) and cuMemFreeAsync frees
// at once, after running device work ends, like cuMemFree. Nothing is kept for reuse: a pool's
// reserved memory is the memory it has handed out, which keeps its counters exact.
#include "emu/driver.hpp"

#include "emu/graph.hpp"

#include "emu/log.hpp"
#include "emu/memory.hpp"

#include <cstring>

namespace hone::emu {

namespace {

constexpr int k_pool_attr_max = CU_MEMPOOL_ATTR_USED_MEM_HIGH;

CUresult check_props(const CUmemPoolProps& p) {
  if (p.allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (p.location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_NOT_SUPPORTED;
  if (p.location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (p.handleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_NOT_SUPPORTED;
  if (p.win32SecurityAttributes != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (p.usage != 0) return CUDA_ERROR_NOT_SUPPORTED;
  for (unsigned char b : p.reserved) {
    if (b != 0) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// An allocation of `bytes` from `pool` on stream `hs`.
CUresult pool_alloc(CUdeviceptr* dptr, size_t bytes, Handle pool_handle, CUstream hs,
                    bool per_thread) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, hs, per_thread, s); rc != CUDA_SUCCESS) return rc;
  MemPool* pool = pool_handle ? r.pool(pool_handle) : nullptr;
  if (pool_handle == 0) {
    pool = r.pool(r.current_pool);
    if (pool == nullptr) pool = &default_pool(r);
  }
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  bool captured = false;
  if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
  if (captured) {
    // A memory allocation node: the graph's memory, at an address fixed from now on.
    GraphNode node;
    node.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    node.pool_props = pool->props;
    Handle h = 0;
    if (CUresult rc = capture_alloc_node(r, *s, std::move(node), bytes, h); rc != CUDA_SUCCESS)
      return rc;
    *dptr = graph_registry().node(h)->alloc->base;
    return CUDA_SUCCESS;
  }
  if (pool->props.maxSize != 0 && pool->used + bytes > pool->props.maxSize) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto base = memory().allocate(bytes, AllocKind::device, ctx->memory_owner(), false, pool->handle);
  if (!base) {
    log(LogLevel::info, base.error().message);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pool->allocations.insert(*base);
  pool->used += bytes;
  pool->used_high = std::max(pool->used_high, pool->used);
  // The allocation is an operation of the stream (it takes no modeled time).
  op_finish(*s, op_start(r, *ctx, *s));
  *dptr = *base;
  return CUDA_SUCCESS;
}

CUresult pool_free(CUdeviceptr dptr, CUstream hs, bool per_thread) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  wait_device_idle(r, lock);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, hs, per_thread, s); rc != CUDA_SUCCESS) return rc;
  bool captured = false;
  if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
  if (captured) {
    // A memory free node; only graph memory can be freed inside a graph.
    if (!is_graph_allocation(r, dptr)) return CUDA_ERROR_INVALID_VALUE;
    GraphNode node;
    node.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    node.free_ptr = dptr;
    return capture_node(r, *s, std::move(node));
  }
  if (CUresult status = CUDA_SUCCESS; graph_memory_free(r, dptr, status)) {
    if (status == CUDA_SUCCESS) op_finish(*s, op_start(r, *ctx, *s));
    return status;
  }
  auto a = memory().find(dptr);
  // Only what a pool handed out, by its base address.
  if (!a || a->base != dptr || a->pool == 0) return CUDA_ERROR_INVALID_VALUE;
  op_finish(*s, op_start(r, *ctx, *s));
  memory().release(dptr);
  pool_forget(r, dptr, a->size);
  return CUDA_SUCCESS;
}

} // namespace

MemPool* Registry::pool(Handle h) {
  auto it = pools.find(h);
  return it == pools.end() || it->second->destroyed ? nullptr : it->second.get();
}

MemPool& default_pool(Registry& r) {
  if (MemPool* p = r.pool(r.default_pool)) return *p;
  auto pool = std::make_unique<MemPool>();
  pool->handle = r.new_handle();
  pool->is_default = true;
  pool->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pool->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pool->props.location.id = 0;
  MemPool& p = *pool;
  r.default_pool = p.handle;
  if (r.current_pool == 0) r.current_pool = p.handle;
  r.pools.emplace(p.handle, std::move(pool));
  return p;
}

void pool_forget(Registry& r, uint64_t base, uint64_t bytes) {
  for (auto it = r.pools.begin(); it != r.pools.end(); ++it) {
    MemPool& p = *it->second;
    if (!p.allocations.erase(base)) continue;
    p.used -= std::min<cuuint64_t>(p.used, bytes);
    if (p.destroyed && p.allocations.empty()) r.pools.erase(it);
    return;
  }
}

std::vector<std::pair<uint64_t, uint64_t>> pool_allocations_of(Registry& r, const void* owner) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& [h, p] : r.pools) {
    for (uint64_t b : p->allocations) {
      if (auto a = memory().find(b); a && a->owner == owner) out.emplace_back(b, a->size);
    }
  }
  return out;
}

} // namespace hone::emu

using namespace hone::emu;

namespace {

Handle pool_of(CUmemoryPool p) {
  return from_cu(p);
}

// The pool for `h`, failing when it is unknown or destroyed. Call locked.
CUresult find_pool(Registry& r, CUmemoryPool h, MemPool*& out) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  out = r.pool(pool_of(h));
  return out != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

} // namespace

extern "C" {

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return guarded([&] { return pool_alloc(dptr, bytesize, 0, hStream, false); });
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return guarded([&] { return pool_alloc(dptr, bytesize, 0, hStream, true); });
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream) {
  return guarded([&] {
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return pool_alloc(dptr, bytesize, pool_of(pool), hStream, false);
  });
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream) {
  return guarded([&] {
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return pool_alloc(dptr, bytesize, pool_of(pool), hStream, true);
  });
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return guarded([&] { return pool_free(dptr, hStream, false); });
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return guarded([&] { return pool_free(dptr, hStream, true); });
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pool == nullptr || poolProps == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult rc = check_props(*poolProps); rc != CUDA_SUCCESS) return rc;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto p = std::make_unique<MemPool>();
    p->handle = r.new_handle();
    p->props = *poolProps;
    *pool = to_cu<CUmemoryPool>(p->handle);
    r.pools.emplace(p->handle, std::move(p));
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  return guarded([&] {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    MemPool* p = nullptr;
    if (CUresult rc = find_pool(r, pool, p); rc != CUDA_SUCCESS) return rc;
    if (p->is_default) return CUDA_ERROR_INVALID_VALUE; // a device's default pool stays
    if (r.current_pool == p->handle) r.current_pool = r.default_pool;
    // Outstanding allocations keep it until they are freed, as documented.
    if (p->allocations.empty()) {
      r.pools.erase(p->handle);
    } else {
      p->destroyed = true;
    }
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  return guarded([&] {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    MemPool* p = nullptr;
    if (CUresult rc = find_pool(r, pool, p); rc != CUDA_SUCCESS) return rc;
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    int i = 0;
    cuuint64_t u = 0;
    switch (enum_value(attr)) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      std::memcpy(&i, value, sizeof i);
      p->reuse_follow_event_dependencies = i != 0;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      std::memcpy(&i, value, sizeof i);
      p->reuse_allow_opportunistic = i != 0;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      std::memcpy(&i, value, sizeof i);
      p->reuse_allow_internal_dependencies = i != 0;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      std::memcpy(&p->release_threshold, value, sizeof p->release_threshold);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      // "It is illegal to set this attribute to a non-zero value": 0 resets it to the current.
      std::memcpy(&u, value, sizeof u);
      if (u != 0) return CUDA_ERROR_INVALID_VALUE;
      p->used_high = p->used;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE; // the current values are read-only
    }
  });
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  return guarded([&] {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    MemPool* p = nullptr;
    if (CUresult rc = find_pool(r, pool, p); rc != CUDA_SUCCESS) return rc;
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto put_int = [&](int v) { std::memcpy(value, &v, sizeof v); };
    auto put_u64 = [&](cuuint64_t v) { std::memcpy(value, &v, sizeof v); };
    const int a = enum_value(attr);
    if (a < 1 || a > k_pool_attr_max) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      put_int(p->reuse_follow_event_dependencies);
      break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      put_int(p->reuse_allow_opportunistic);
      break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      put_int(p->reuse_allow_internal_dependencies);
      break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      put_u64(p->release_threshold);
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      put_u64(p->used); // nothing is cached: reserved is what is in use
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      put_u64(p->used_high);
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  (void)minBytesToKeep; // nothing is cached, so there is nothing to give back
  return guarded([&] {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    MemPool* p = nullptr;
    return find_pool(r, pool, p);
  });
}

CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map, size_t count) {
  return guarded([&] {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    MemPool* p = nullptr;
    if (CUresult rc = find_pool(r, pool, p); rc != CUDA_SUCCESS) return rc;
    if (count > 0 && map == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; ++i) {
      if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
      if (map[i].location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
      // The pool's own device always has read-write access to it.
      if (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool memPool,
                                    CUmemLocation* location) {
  return guarded([&] {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    MemPool* p = nullptr;
    if (CUresult rc = find_pool(r, memPool, p); rc != CUDA_SUCCESS) return rc;
    if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (location->id != 0) return CUDA_ERROR_INVALID_DEVICE;
    *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    *pool_out = to_cu<CUmemoryPool>(default_pool(r).handle);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    MemPool* p = r.pool(r.current_pool);
    if (p == nullptr) p = &default_pool(r);
    *pool = to_cu<CUmemoryPool>(p->handle);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    MemPool* p = nullptr;
    if (CUresult rc = find_pool(r, pool, p); rc != CUDA_SUCCESS) return rc;
    default_pool(r); // exists, so that cuDeviceGetDefaultMemPool keeps meaning the default one
    r.current_pool = p->handle;
    return CUDA_SUCCESS;
  });
}

} // extern "C"
