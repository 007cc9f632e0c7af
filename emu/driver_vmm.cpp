// Virtual memory management: cuMemAddressReserve/Free, cuMemCreate/Release, cuMemMap/Unmap,
// cuMemSetAccess/GetAccess, the granularity, properties and handle retention.
//
// Semantics follow cuda.h's documentation of these functions (CUDA 13.0, "Virtual Memory
// Management"); the mechanism is Memory's (emu/memory.hpp): reservations are PROT_NONE host
// address space, physical allocations are memfds, cuMemMap maps one over a reservation, and a
// mapping enters the table kernels check against only once cuMemSetAccess grants access. Where
// cuda.h leaves a choice open, the stricter reading is taken so that a program that works here
// works on a GPU (emu/README.md, "Virtual memory management").
//
// Reservations and physical allocations belong to the context current when they were made and are
// freed with it, like the rest of its memory; mappings belong to their reservation. Any context
// may map any physical allocation (one device, one address space).
#include "emu/driver.hpp"

#include "emu/log.hpp"
#include "emu/memory.hpp"

namespace hone::emu {

namespace {

constexpr uint64_t k_granularity = Memory::k_vmm_granularity;
constexpr unsigned k_known_usage =
    CU_MEM_CREATE_USAGE_TILE_POOL | CU_MEM_CREATE_USAGE_HW_DECOMPRESS;

// The CUresult a Memory error carries, logged at info level (what was wrong, for the developer).
CUresult failed(const char* call, const Error& e) {
  log(LogLevel::info, std::string(call) + ": " + e.message);
  return e.code != 0 ? static_cast<CUresult>(e.code) : CUDA_ERROR_INVALID_VALUE;
}

// An allocation's properties: pinned device memory on device 0 is what the emulated device has.
CUresult check_prop(const CUmemAllocationProp& p) {
  switch (enum_value(p.type)) {
  case CU_MEM_ALLOCATION_TYPE_PINNED:
    break;
  case CU_MEM_ALLOCATION_TYPE_MANAGED:
    return CUDA_ERROR_NOT_SUPPORTED; // managed memory is absent
                                     // (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  switch (enum_value(p.location.type)) {
  case CU_MEM_LOCATION_TYPE_DEVICE:
    if (p.location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
    break;
  case CU_MEM_LOCATION_TYPE_HOST:
  case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    return CUDA_ERROR_NOT_SUPPORTED; // host allocations through cuMemCreate are not emulated
  default:
    return CUDA_ERROR_INVALID_VALUE; // HOST_NUMA_CURRENT is invalid for cuMemCreate, as documented
  }
  // Exporting to shareable handles (POSIX fds, fabric) is not emulated: the device attributes say
  // so (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 0).
  if (enum_value(p.requestedHandleTypes) != CU_MEM_HANDLE_TYPE_NONE)
    return CUDA_ERROR_NOT_SUPPORTED;
  // "In all other cases [than CU_MEM_HANDLE_TYPE_WIN32], this field is required to be zero."
  if (p.win32HandleMetaData != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((p.allocFlags.usage & ~k_known_usage) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (p.allocFlags.usage != 0) return CUDA_ERROR_NOT_SUPPORTED; // sparse arrays, decompression
  return CUDA_SUCCESS;
}

// A location an access descriptor or query names: device 0, the only one.
CUresult check_access_location(const CUmemLocation& l) {
  if (enum_value(l.type) != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  return l.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

} // namespace

} // namespace hone::emu

using namespace hone::emu;

extern "C" {

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags option) {
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int o = enum_value(option);
  if (o != CU_MEM_ALLOC_GRANULARITY_MINIMUM && o != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = check_prop(*prop); rc != CUDA_SUCCESS) return rc;
  // An H100/H200 reports 2 MiB for both.
  *granularity = k_granularity;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (ptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto base = memory().reserve(size, alignment, addr, ctx->memory_owner());
    if (!base) return failed("cuMemAddressReserve", base.error());
    if (addr != 0 && *base != addr) {
      log(LogLevel::debug, "cuMemAddressReserve: the hint address is taken; reserved elsewhere");
    }
    *ptr = *base;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto done = memory().free_reservation(ptr, size);
    return done ? CUDA_SUCCESS : failed("cuMemAddressFree", done.error());
  });
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                             const CUmemAllocationProp* prop, unsigned long long flags) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (handle == nullptr || prop == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult rc = check_prop(*prop); rc != CUDA_SUCCESS) return rc;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    const Handle h = r.new_handle();
    CUmemAllocationProp recorded = *prop;
    // No compute data compression here: applications query the handle to learn whether they got
    // it (cuda.h, CUmemAllocationProp::allocFlags::compressionType).
    recorded.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_NONE;
    r.vmm_props[h] = recorded;
    auto made = memory().create_physical(h, size, ctx->memory_owner());
    if (!made) {
      r.vmm_props.erase(h);
      return failed("cuMemCreate", made.error());
    }
    *handle = h;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    // cuda.h calls an invalid handle undefined behaviour; here it is CUDA_ERROR_INVALID_VALUE.
    auto done = memory().release_physical(handle);
    if (!done) return failed("cuMemRelease", done.error());
    if (!memory().physical_alive(handle)) r.vmm_props.erase(handle);
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    // cuda.h: "offset ... Note: currently must be zero."
    if (offset != 0) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto done = memory().map(ptr, size, offset, handle);
    return done ? CUDA_SUCCESS : failed("cuMemMap", done.error());
  });
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    Registry& r = registry();
    std::unique_lock lock(r.mutex);
    // Synchronous, like cuMemFree: no kernel still running touches the pages afterwards.
    wait_device_idle(r, lock);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto done = memory().unmap(ptr, size);
    if (!done) return failed("cuMemUnmap", done.error());
    std::erase_if(r.vmm_props,
                  [](const auto& entry) { return !memory().physical_alive(entry.first); });
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                size_t count) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
    Access access = Access::none;
    for (size_t i = 0; i < count; ++i) {
      if (CUresult rc = check_access_location(desc[i].location); rc != CUDA_SUCCESS) return rc;
      switch (enum_value(desc[i].flags)) {
      case CU_MEM_ACCESS_FLAGS_PROT_NONE:
        access = Access::none;
        break;
      case CU_MEM_ACCESS_FLAGS_PROT_READ:
        access = Access::read;
        break;
      case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
        access = Access::read_write;
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    Registry& r = registry();
    std::unique_lock lock(r.mutex);
    // Synchronous: access taken away is gone for every kernel that starts afterwards, and none
    // still runs with the old table.
    wait_device_idle(r, lock);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto done = memory().set_access(ptr, size, access);
    return done ? CUDA_SUCCESS : failed("cuMemSetAccess", done.error());
  });
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                                CUdeviceptr ptr) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult rc = check_access_location(*location); rc != CUDA_SUCCESS) return rc;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto a = memory().access(ptr);
    if (!a) return CUDA_ERROR_INVALID_VALUE;
    *flags = *a == Access::read_write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
             : *a == Access::read     ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                      : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                        CUmemGenericAllocationHandle handle) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = current_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto it = r.vmm_props.find(handle);
    if (it == r.vmm_props.end() || !memory().physical_size(handle)) return CUDA_ERROR_INVALID_VALUE;
    *prop = it->second;
    return CUDA_SUCCESS;
  });
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  return guarded([&] {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    Context* ctx = nullptr;
    if (CUresult rc = usable_context(r, ctx); rc != CUDA_SUCCESS) return rc;
    auto id = memory().retain_physical(reinterpret_cast<uint64_t>(addr));
    if (!id) return failed("cuMemRetainAllocationHandle", id.error());
    *handle = *id;
    return CUDA_SUCCESS;
  });
}

} // extern "C"
