// Managed memory (cuMemAllocManaged, .managed module variables, prefetches, advice, stream
// attachment) and host memory registration (cuMemHostRegister).
//
// Device addresses are host addresses here (memory.hpp), so managed memory is an allocation the
// host and kernels both use directly, and work runs synchronously, so the host may touch it at any
// time (concurrent managed access). Prefetches, advice and attachment change nothing but are
// checked as the documentation says. Registered host memory is the application's own, made an
// allocation kernels may access at its host address; the driver never frees it.
#include "emu/driver.hpp"

#include "emu/graph.hpp"

#include "emu/log.hpp"
#include "emu/memory.hpp"

namespace hone::emu {

namespace {

constexpr unsigned k_host_register_flags =
    CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY |
    CU_MEMHOSTREGISTER_READ_ONLY;

// The range [ptr, ptr + count) inside one managed allocation (the documented requirement of
// prefetches and advice: "devPtr... must have been allocated via cuMemAllocManaged or declared via
// __managed__ variables").
bool in_managed(uint64_t ptr, size_t count) {
  auto a = memory().find(ptr);
  return a && a->managed && count > 0 && a->contains(ptr, count);
}

CUresult check_location(const CUmemLocation& l) {
  switch (l.type) {
  case CU_MEM_LOCATION_TYPE_DEVICE:
    return l.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
  case CU_MEM_LOCATION_TYPE_HOST:
  case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
    return CUDA_SUCCESS;
  case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    return l.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; // one NUMA node
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

// CU_DEVICE_CPU or device 0, as the legacy forms take a destination.
CUresult location_of(CUdevice dev, CUmemLocation& out) {
  if (dev == CU_DEVICE_CPU) {
    out.type = CU_MEM_LOCATION_TYPE_HOST;
    out.id = 0;
    return CUDA_SUCCESS;
  }
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  out.type = CU_MEM_LOCATION_TYPE_DEVICE;
  out.id = 0;
  return CUDA_SUCCESS;
}

// A stream-ordered operation that changes nothing but must be checked like one: the context, the
// stream, then `check`. It takes no modeled time.
template <class Check> CUresult stream_noop(CUstream hs, bool per_thread, Check&& check) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  Stream* s = nullptr;
  if (CUresult rc = resolve_stream(r, *ctx, hs, per_thread, s); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = check(); rc != CUDA_SUCCESS) return rc;
  // Captured: an empty node, which keeps the stream's order and changes nothing.
  bool captured = false;
  if (CUresult rc = capture_check(r, *ctx, *s, captured); rc != CUDA_SUCCESS) return rc;
  if (captured) return capture_node(r, *s, GraphNode{});
  op_finish(*s, op_start(r, *ctx, *s));
  return CUDA_SUCCESS;
}

CUresult prefetch(CUdeviceptr ptr, size_t count, CUmemLocation location, unsigned flags,
                  CUstream hs, bool per_thread) {
  return stream_noop(hs, per_thread, [&] {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult rc = check_location(location); rc != CUDA_SUCCESS) return rc;
    return in_managed(ptr, count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  });
}

CUresult advise(CUdeviceptr ptr, size_t count, CUmem_advise advice, CUmemLocation location) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  const int a = enum_value(advice);
  if (a < CU_MEM_ADVISE_SET_READ_MOSTLY || a > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
    return CUDA_ERROR_INVALID_VALUE;
  // Read-mostly advice names no location; the others do.
  if (a != CU_MEM_ADVISE_SET_READ_MOSTLY && a != CU_MEM_ADVISE_UNSET_READ_MOSTLY) {
    if (CUresult rc = check_location(location); rc != CUDA_SUCCESS) return rc;
  }
  return in_managed(ptr, count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult attach(CUstream hs, CUdeviceptr ptr, size_t length, unsigned flags, bool per_thread) {
  return stream_noop(hs, per_thread, [&] {
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
        flags != CU_MEM_ATTACH_SINGLE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto a = memory().find(ptr);
    if (!a || !a->managed) return CUDA_ERROR_INVALID_VALUE;
    // "length must be zero, to indicate that the entire allocation's stream association is
    // being changed" (for memory not from pageable-access systems): its base, and 0 or its size.
    if (a->base != ptr || (length != 0 && length != a->size)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  });
}

CUresult host_register(void* p, size_t bytesize, unsigned flags) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if ((flags & ~k_host_register_flags) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (p == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  // I/O memory is a device's, mapped by a driver of its own: there is none here.
  if ((flags & CU_MEMHOSTREGISTER_IOMEMORY) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Context* ctx = nullptr;
  if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
  const auto base = reinterpret_cast<uint64_t>(p);
  auto adopted = memory().adopt(base, bytesize, (flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0,
                                ctx->memory_owner());
  if (!adopted) return static_cast<CUresult>(adopted.error().code);
  r.host_alloc_flags[base] = flags;
  return CUDA_SUCCESS;
}

} // namespace

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
      return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto base = memory().allocate(bytesize, AllocKind::device, ctx->memory_owner(), true);
    if (!base) {
      log(LogLevel::info, base.error().message);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = *base;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                    CUstream hStream) {
  return guarded([&] {
    CUmemLocation l{};
    if (CUresult rc = location_of(dstDevice, l); rc != CUDA_SUCCESS) return rc;
    return prefetch(devPtr, count, l, 0, hStream, false);
  });
}

CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                         CUstream hStream) {
  return guarded([&] {
    CUmemLocation l{};
    if (CUresult rc = location_of(dstDevice, l); rc != CUDA_SUCCESS) return rc;
    return prefetch(devPtr, count, l, 0, hStream, true);
  });
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                       unsigned int flags, CUstream hStream) {
  return guarded([&] { return prefetch(devPtr, count, location, flags, hStream, false); });
}

CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                            CUmemLocation location, unsigned int flags,
                                            CUstream hStream) {
  return guarded([&] { return prefetch(devPtr, count, location, flags, hStream, true); });
}

CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                             CUdevice device) {
  return guarded([&] {
    CUmemLocation l{};
    if (CUresult rc = location_of(device, l); rc != CUDA_SUCCESS) return rc;
    return advise(devPtr, count, advice, l);
  });
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                CUmemLocation location) {
  return guarded([&] { return advise(devPtr, count, advice, location); });
}

CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
                                        unsigned int flags) {
  return guarded([&] { return attach(hStream, dptr, length, flags, false); });
}

CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length,
                                             unsigned int flags) {
  return guarded([&] { return attach(hStream, dptr, length, flags, true); });
}

CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  return guarded([&] { return host_register(p, bytesize, Flags); });
}

CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  return guarded([&] { return host_register(p, bytesize, Flags); });
}

CUresult CUDAAPI cuMemHostUnregister(void* p) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::unique_lock lock(r.mutex);
    wait_device_idle(r, lock); // a kernel on another thread may still use it
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    const auto base = reinterpret_cast<uint64_t>(p);
    auto a = memory().find(base);
    if (!a || a->kind != AllocKind::registered || a->base != base)
      return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    memory().release(base); // forgets it; the memory stays the application's
    r.host_alloc_flags.erase(base);
    return CUDA_SUCCESS;
  });
}

// A library's managed variable: one allocation for the library, whatever the context (its first
// program's memory, which every context's module of the library uses).
CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr* dptr, size_t* bytes, CUlibrary library,
                                     const char* name) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (name == nullptr || (dptr == nullptr && bytes == nullptr)) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Library* lib = r.library(from_cu(library));
    if (lib == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    ManagedSymbols managed = lib->prototype->managed();
    auto it = managed.find(std::string_view(name));
    if (it == managed.end()) return CUDA_ERROR_NOT_FOUND;
    if (dptr != nullptr) *dptr = it->second.address;
    if (bytes != nullptr) *bytes = it->second.size;
    return CUDA_SUCCESS;
  });
}

} // extern "C"
