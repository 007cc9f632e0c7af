// Memory: device, pinned, mapped, registered and managed allocations; copies and memsets (1D,
// 2D, to and from symbols), synchronous and stream-ordered; stream-ordered allocation and memory
// pools; pointer attributes, prefetches and advice.
#include "emu/runtime/runtime.hpp"

#include <cstring>

using namespace hone::cudart;

namespace {

static_assert(sizeof(cudaMemPoolProps) == sizeof(CUmemPoolProps));
static_assert(sizeof(cudaMemAccessDesc) == sizeof(CUmemAccessDesc));
static_assert(sizeof(cudaMemLocation) == sizeof(CUmemLocation));
static_assert(int(cudaMemPoolAttrReleaseThreshold) == int(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD));
static_assert(int(cudaMemPoolAttrUsedMemHigh) == int(CU_MEMPOOL_ATTR_USED_MEM_HIGH));
static_assert(int(cudaHostAllocMapped) == int(CU_MEMHOSTALLOC_DEVICEMAP));
static_assert(int(cudaHostRegisterReadOnly) == int(CU_MEMHOSTREGISTER_READ_ONLY));
static_assert(int(cudaMemAttachGlobal) == int(CU_MEM_ATTACH_GLOBAL));

CUdeviceptr dptr(const void* p) {
  return reinterpret_cast<CUdeviceptr>(p);
}
CUstream cu(cudaStream_t s) {
  return reinterpret_cast<CUstream>(s);
}
CUmemLocation cu(const cudaMemLocation& l) {
  CUmemLocation out;
  std::memcpy(&out, &l, sizeof out);
  return out;
}

bool known_kind(cudaMemcpyKind kind) {
  return kind == cudaMemcpyHostToHost || kind == cudaMemcpyHostToDevice ||
         kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice ||
         kind == cudaMemcpyDefault;
}

// One copy, synchronous or stream-ordered, in the direction `kind` names.
cudaError_t copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, bool async,
                 cudaStream_t stream, bool per_thread) {
  if (!known_kind(kind)) return cudaErrorInvalidMemcpyDirection;
  if (cudaError_t e = ensure_context()) return e;
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  CUresult r;
  if (async) {
    switch (kind) {
    case cudaMemcpyHostToDevice:
      r = call(HONE_DRV(per_thread, cuMemcpyHtoDAsync), dptr(dst), src, count, cu(stream));
      break;
    case cudaMemcpyDeviceToHost:
      r = call(HONE_DRV(per_thread, cuMemcpyDtoHAsync), dst, dptr(src), count, cu(stream));
      break;
    case cudaMemcpyDeviceToDevice:
      r = call(HONE_DRV(per_thread, cuMemcpyDtoDAsync), dptr(dst), dptr(src), count, cu(stream));
      break;
    default: // host to host and inferred: unified addressing tells the driver
      r = call(HONE_DRV(per_thread, cuMemcpyAsync), dptr(dst), dptr(src), count, cu(stream));
      break;
    }
  } else {
    switch (kind) {
    case cudaMemcpyHostToDevice:
      r = call(HONE_DRV(per_thread, cuMemcpyHtoD), dptr(dst), src, count);
      break;
    case cudaMemcpyDeviceToHost:
      r = call(HONE_DRV(per_thread, cuMemcpyDtoH), dst, dptr(src), count);
      break;
    case cudaMemcpyDeviceToDevice:
      r = call(HONE_DRV(per_thread, cuMemcpyDtoD), dptr(dst), dptr(src), count);
      break;
    default:
      r = call(HONE_DRV(per_thread, cuMemcpy), dptr(dst), dptr(src), count);
      break;
    }
  }
  return to_cuda(r);
}

cudaError_t copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                    size_t height, cudaMemcpyKind kind, bool async, cudaStream_t stream,
                    bool per_thread) {
  if (!known_kind(kind)) return cudaErrorInvalidMemcpyDirection;
  if (cudaError_t e = ensure_context()) return e;
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  CUDA_MEMCPY2D c{};
  auto side = [](bool device, bool unified, const void* p, CUmemorytype& type, const void*& host,
                 CUdeviceptr& dev) {
    type = unified ? CU_MEMORYTYPE_UNIFIED : device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (type == CU_MEMORYTYPE_HOST) {
      host = p;
    } else {
      dev = dptr(p);
    }
  };
  bool unified = kind == cudaMemcpyDefault;
  bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const void* dst_host = nullptr;
  side(src_device, unified, src, c.srcMemoryType, c.srcHost, c.srcDevice);
  side(dst_device, unified, dst, c.dstMemoryType, dst_host, c.dstDevice);
  c.dstHost = const_cast<void*>(dst_host);
  c.srcPitch = spitch;
  c.dstPitch = dpitch;
  c.WidthInBytes = width;
  c.Height = height;
  CUresult r = async ? call(HONE_DRV(per_thread, cuMemcpy2DAsync), &c, cu(stream))
                     : call(HONE_DRV(per_thread, cuMemcpy2D), &c);
  return to_cuda(r);
}

// The symbol's bytes [offset, offset + count): its device address.
cudaError_t symbol_range(const void* symbol, size_t count, size_t offset, CUdeviceptr& out) {
  Symbol s;
  if (cudaError_t e = symbol_of(symbol, s)) return e;
  if (offset > s.size || count > s.size - offset) return cudaErrorInvalidValue;
  out = s.address + offset;
  return cudaSuccess;
}

} // namespace

// --- allocation
// ------------------------------------------------------------------------------------

HONE_CUDART_API cudaError_t cudaMalloc(void** ptr, size_t size) {
  return api([&] {
    if (ptr == nullptr) return cudaErrorInvalidValue;
    *ptr = nullptr;
    if (cudaError_t e = ensure_context()) return e;
    if (size == 0) return cudaSuccess; // as documented: a null pointer, no error
    CUdeviceptr d = 0;
    if (CUresult r = call(driver().cuMemAlloc, &d, size)) return to_cuda(r);
    *ptr = reinterpret_cast<void*>(d);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaFree(void* ptr) {
  return api([&] {
    // cudaFree(0) is how programs initialize the runtime: it makes the context.
    if (cudaError_t e = ensure_context()) return e;
    if (ptr == nullptr) return cudaSuccess;
    return to_cuda(call(driver().cuMemFree, dptr(ptr)));
  });
}

HONE_CUDART_API cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return api([&] {
    if (ptr == nullptr) return cudaErrorInvalidValue;
    *ptr = nullptr;
    if (cudaError_t e = ensure_context()) return e;
    if (size == 0) return cudaSuccess;
    return to_cuda(call(driver().cuMemAllocHost, ptr, size));
  });
}

HONE_CUDART_API cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned flags) {
  return api([&] {
    if (ptr == nullptr) return cudaErrorInvalidValue;
    *ptr = nullptr;
    if (cudaError_t e = ensure_context()) return e;
    if (size == 0) return cudaSuccess;
    return to_cuda(call(driver().cuMemHostAlloc, ptr, size, flags));
  });
}

HONE_CUDART_API cudaError_t cudaFreeHost(void* ptr) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    if (ptr == nullptr) return cudaSuccess;
    return to_cuda(call(driver().cuMemFreeHost, ptr));
  });
}

HONE_CUDART_API cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned flags) {
  return api([&] {
    if (device == nullptr || flags != 0) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    CUdeviceptr d = 0;
    if (CUresult r = call(driver().cuMemHostGetDevicePointer, &d, host, 0u)) return to_cuda(r);
    *device = reinterpret_cast<void*>(d);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaHostGetFlags(unsigned* flags, void* host) {
  return api([&] {
    if (flags == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuMemHostGetFlags, flags, host));
  });
}

HONE_CUDART_API cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned flags) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuMemHostRegister, ptr, size, flags));
  });
}

HONE_CUDART_API cudaError_t cudaHostUnregister(void* ptr) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuMemHostUnregister, ptr));
  });
}

HONE_CUDART_API cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned flags) {
  return api([&] {
    if (ptr == nullptr) return cudaErrorInvalidValue;
    *ptr = nullptr;
    if (cudaError_t e = ensure_context()) return e;
    CUdeviceptr d = 0;
    if (CUresult r = call(driver().cuMemAllocManaged, &d, size, flags)) return to_cuda(r);
    *ptr = reinterpret_cast<void*>(d);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width,
                                            size_t height) {
  return api([&] {
    if (ptr == nullptr || pitch == nullptr) return cudaErrorInvalidValue;
    *ptr = nullptr;
    if (cudaError_t e = ensure_context()) return e;
    CUdeviceptr d = 0;
    if (CUresult r = call(driver().cuMemAllocPitch, &d, pitch, width, height, 4u))
      return to_cuda(r);
    *ptr = reinterpret_cast<void*>(d);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuMemGetInfo, free, total));
  });
}

HONE_CUDART_API cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes,
                                                     const void* ptr) {
  return api([&] {
    if (attributes == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    unsigned type = 0;
    int ordinal = -2;
    CUdeviceptr device = 0;
    void* host = nullptr;
    unsigned managed = 0;
    CUpointer_attribute which[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER,
        CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void* data[] = {&type, &ordinal, &device, &host, &managed};
    if (CUresult r = call(driver().cuPointerGetAttributes, 5u, which, data, dptr(ptr))) {
      return to_cuda(r);
    }
    *attributes = cudaPointerAttributes{};
    if ((managed & 0xff) != 0) {
      attributes->type = cudaMemoryTypeManaged;
    } else if (type == CU_MEMORYTYPE_DEVICE) {
      attributes->type = cudaMemoryTypeDevice;
    } else if (type == CU_MEMORYTYPE_HOST) {
      attributes->type = cudaMemoryTypeHost;
    } else {
      attributes->type = cudaMemoryTypeUnregistered;
      attributes->device = cudaInvalidDeviceId;
      return cudaSuccess;
    }
    attributes->device = ordinal;
    attributes->devicePointer = reinterpret_cast<void*>(device);
    attributes->hostPointer = host;
    return cudaSuccess;
  });
}

// --- copies and memsets
// ----------------------------------------------------------------------------

HONE_CUDART_PAIR(cudaMemcpy, _ptds, (void* dst, const void* src, size_t count, cudaMemcpyKind kind),
                 (dst, src, count, kind)) {
  return copy(dst, src, count, kind, false, nullptr, per_thread);
}

HONE_CUDART_PAIR(cudaMemcpyAsync, _ptsz,
                 (void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                  cudaStream_t stream),
                 (dst, src, count, kind, stream)) {
  return copy(dst, src, count, kind, true, stream, per_thread);
}

HONE_CUDART_PAIR(cudaMemset, _ptds, (void* ptr, int value, size_t count), (ptr, value, count)) {
  if (cudaError_t e = ensure_context()) return e;
  if (count == 0) return cudaSuccess;
  return to_cuda(
      call(HONE_DRV(per_thread, cuMemsetD8), dptr(ptr), static_cast<unsigned char>(value), count));
}

HONE_CUDART_PAIR(cudaMemsetAsync, _ptsz, (void* ptr, int value, size_t count, cudaStream_t stream),
                 (ptr, value, count, stream)) {
  if (cudaError_t e = ensure_context()) return e;
  if (count == 0) return cudaSuccess;
  return to_cuda(call(HONE_DRV(per_thread, cuMemsetD8Async), dptr(ptr),
                      static_cast<unsigned char>(value), count, cu(stream)));
}

HONE_CUDART_PAIR(cudaMemcpy2D, _ptds,
                 (void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                  size_t height, cudaMemcpyKind kind),
                 (dst, dpitch, src, spitch, width, height, kind)) {
  return copy_2d(dst, dpitch, src, spitch, width, height, kind, false, nullptr, per_thread);
}

HONE_CUDART_PAIR(cudaMemcpy2DAsync, _ptsz,
                 (void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                  size_t height, cudaMemcpyKind kind, cudaStream_t stream),
                 (dst, dpitch, src, spitch, width, height, kind, stream)) {
  return copy_2d(dst, dpitch, src, spitch, width, height, kind, true, stream, per_thread);
}

HONE_CUDART_PAIR(cudaMemset2D, _ptds,
                 (void* ptr, size_t pitch, int value, size_t width, size_t height),
                 (ptr, pitch, value, width, height)) {
  if (cudaError_t e = ensure_context()) return e;
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > pitch) return cudaErrorInvalidPitchValue;
  return to_cuda(call(HONE_DRV(per_thread, cuMemsetD2D8), dptr(ptr), pitch,
                      static_cast<unsigned char>(value), width, height));
}

HONE_CUDART_PAIR(cudaMemset2DAsync, _ptsz,
                 (void* ptr, size_t pitch, int value, size_t width, size_t height,
                  cudaStream_t stream),
                 (ptr, pitch, value, width, height, stream)) {
  if (cudaError_t e = ensure_context()) return e;
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > pitch) return cudaErrorInvalidPitchValue;
  return to_cuda(call(HONE_DRV(per_thread, cuMemsetD2D8Async), dptr(ptr), pitch,
                      static_cast<unsigned char>(value), width, height, cu(stream)));
}

// --- symbols
// ---------------------------------------------------------------------------------------

HONE_CUDART_PAIR(cudaMemcpyToSymbol, _ptds,
                 (const void* symbol, const void* src, size_t count, size_t offset,
                  cudaMemcpyKind kind),
                 (symbol, src, count, offset, kind)) {
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  CUdeviceptr d = 0;
  if (cudaError_t e = symbol_range(symbol, count, offset, d)) return e;
  return copy(reinterpret_cast<void*>(d), src, count, kind, false, nullptr, per_thread);
}

HONE_CUDART_PAIR(cudaMemcpyFromSymbol, _ptds,
                 (void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind),
                 (dst, symbol, count, offset, kind)) {
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  CUdeviceptr d = 0;
  if (cudaError_t e = symbol_range(symbol, count, offset, d)) return e;
  return copy(dst, reinterpret_cast<const void*>(d), count, kind, false, nullptr, per_thread);
}

HONE_CUDART_PAIR(cudaMemcpyToSymbolAsync, _ptsz,
                 (const void* symbol, const void* src, size_t count, size_t offset,
                  cudaMemcpyKind kind, cudaStream_t stream),
                 (symbol, src, count, offset, kind, stream)) {
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  CUdeviceptr d = 0;
  if (cudaError_t e = symbol_range(symbol, count, offset, d)) return e;
  return copy(reinterpret_cast<void*>(d), src, count, kind, true, stream, per_thread);
}

HONE_CUDART_PAIR(cudaMemcpyFromSymbolAsync, _ptsz,
                 (void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind,
                  cudaStream_t stream),
                 (dst, symbol, count, offset, kind, stream)) {
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault) {
    return cudaErrorInvalidMemcpyDirection;
  }
  CUdeviceptr d = 0;
  if (cudaError_t e = symbol_range(symbol, count, offset, d)) return e;
  return copy(dst, reinterpret_cast<const void*>(d), count, kind, true, stream, per_thread);
}

HONE_CUDART_API cudaError_t cudaGetSymbolAddress(void** address, const void* symbol) {
  return api([&] {
    if (address == nullptr) return cudaErrorInvalidValue;
    Symbol s;
    if (cudaError_t e = symbol_of(symbol, s)) return e;
    *address = reinterpret_cast<void*>(s.address);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  return api([&] {
    if (size == nullptr) return cudaErrorInvalidValue;
    Symbol s;
    if (cudaError_t e = symbol_of(symbol, s)) return e;
    *size = s.size;
    return cudaSuccess;
  });
}

// --- stream-ordered allocation and pools
// -----------------------------------------------------------

HONE_CUDART_PAIR(cudaMallocAsync, _ptsz, (void** ptr, size_t size, cudaStream_t stream),
                 (ptr, size, stream)) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  *ptr = nullptr;
  if (cudaError_t e = ensure_context()) return e;
  CUdeviceptr d = 0;
  if (CUresult r = call(HONE_DRV(per_thread, cuMemAllocAsync), &d, size, cu(stream))) {
    return to_cuda(r);
  }
  *ptr = reinterpret_cast<void*>(d);
  return cudaSuccess;
}

HONE_CUDART_PAIR(cudaFreeAsync, _ptsz, (void* ptr, cudaStream_t stream), (ptr, stream)) {
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuMemFreeAsync), dptr(ptr), cu(stream)));
}

HONE_CUDART_PAIR(cudaMallocFromPoolAsync, _ptsz,
                 (void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream),
                 (ptr, size, pool, stream)) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  *ptr = nullptr;
  if (cudaError_t e = ensure_context()) return e;
  CUdeviceptr d = 0;
  if (CUresult r = call(HONE_DRV(per_thread, cuMemAllocFromPoolAsync), &d, size,
                        reinterpret_cast<CUmemoryPool>(pool), cu(stream))) {
    return to_cuda(r);
  }
  *ptr = reinterpret_cast<void*>(d);
  return cudaSuccess;
}

HONE_CUDART_API cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  return api([&] {
    if (pool == nullptr || props == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    CUmemPoolProps p;
    std::memcpy(&p, props, sizeof p);
    return to_cuda(call(driver().cuMemPoolCreate, reinterpret_cast<CUmemoryPool*>(pool), &p));
  });
}

HONE_CUDART_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuMemPoolDestroy, reinterpret_cast<CUmemoryPool>(pool)));
  });
}

HONE_CUDART_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                                    void* value) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuMemPoolSetAttribute, reinterpret_cast<CUmemoryPool>(pool),
                        CUmemPool_attribute(attr), value));
  });
}

HONE_CUDART_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                                    void* value) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuMemPoolGetAttribute, reinterpret_cast<CUmemoryPool>(pool),
                        CUmemPool_attribute(attr), value));
  });
}

HONE_CUDART_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuMemPoolTrimTo, reinterpret_cast<CUmemoryPool>(pool), keep));
  });
}

HONE_CUDART_API cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const cudaMemAccessDesc* descs,
                                                 size_t count) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuMemPoolSetAccess, reinterpret_cast<CUmemoryPool>(pool),
                        reinterpret_cast<const CUmemAccessDesc*>(descs), count));
  });
}

HONE_CUDART_API cudaError_t cudaMemPoolGetAccess(cudaMemAccessFlags* flags, cudaMemPool_t pool,
                                                 cudaMemLocation* location) {
  return api([&] {
    if (flags == nullptr || location == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CUmemLocation l = cu(*location);
    if (CUresult r =
            call(driver().cuMemPoolGetAccess, &f, reinterpret_cast<CUmemoryPool>(pool), &l)) {
      return to_cuda(r);
    }
    *flags = cudaMemAccessFlags(f);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  return api([&] {
    if (pool == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    return to_cuda(call(driver().cuDeviceGetDefaultMemPool, reinterpret_cast<CUmemoryPool*>(pool),
                        CUdevice(device)));
  });
}

HONE_CUDART_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) {
  return api([&] {
    if (pool == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    return to_cuda(
        call(driver().cuDeviceGetMemPool, reinterpret_cast<CUmemoryPool*>(pool), CUdevice(device)));
  });
}

HONE_CUDART_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    return to_cuda(
        call(driver().cuDeviceSetMemPool, CUdevice(device), reinterpret_cast<CUmemoryPool>(pool)));
  });
}

// --- managed memory hints
// --------------------------------------------------------------------------

HONE_CUDART_PAIR(cudaMemPrefetchAsync, _ptsz,
                 (const void* ptr, size_t count, cudaMemLocation location, unsigned flags,
                  cudaStream_t stream),
                 (ptr, count, location, flags, stream)) {
  if (cudaError_t e = ensure_context()) return e;
  return to_cuda(call(HONE_DRV(per_thread, cuMemPrefetchAsync), dptr(ptr), count, cu(location),
                      flags, cu(stream)));
}

HONE_CUDART_API cudaError_t cudaMemAdvise(const void* ptr, size_t count, cudaMemoryAdvise advice,
                                          cudaMemLocation location) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(
        call(driver().cuMemAdvise, dptr(ptr), count, CUmem_advise(advice), cu(location)));
  });
}

// Arrays and textures are not implemented (their entry points are cudaErrorNotSupported stubs),
// but a program may build a channel description without ever using one: it is plain data.
HONE_CUDART_API cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                            cudaChannelFormatKind f) {
  cudaChannelFormatDesc d;
  d.x = x;
  d.y = y;
  d.z = z;
  d.w = w;
  d.f = f;
  return d;
}
