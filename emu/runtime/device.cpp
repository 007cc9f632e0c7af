// Device management: counting and choosing devices, their properties and attributes, flags,
// limits, synchronization and reset, versions.
#include "emu/runtime/runtime.hpp"

#include <cstring>
#include <type_traits>

using namespace hone::cudart;

namespace {

// cudaDeviceAttr and CUdevice_attribute share their values (driver_types.h, cuda.h).
static_assert(int(cudaDevAttrMaxThreadsPerBlock) == int(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
static_assert(int(cudaDevAttrMultiProcessorCount) == int(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
static_assert(int(cudaDevAttrMemoryPoolsSupported) ==
              int(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED));
static_assert(int(cudaDevAttrHostNumaMultinodeIpcSupported) ==
              int(CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED));
static_assert(int(cudaLimitStackSize) == int(CU_LIMIT_STACK_SIZE));
static_assert(int(cudaLimitPersistingL2CacheSize) == int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE));

cudaError_t check_device(int device) {
  if (cudaError_t e = init()) return e;
  return device >= 0 && device < device_count() ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t attribute(int& out, CUdevice_attribute a, int device) {
  return to_cuda(call(driver().cuDeviceGetAttribute, &out, a, CUdevice(device)));
}

// Every field of cudaDeviceProp, from the driver's attributes: what cudaDeviceGetAttribute
// answers for the same device, field for field.
cudaError_t properties(cudaDeviceProp& p, int device) {
  std::memset(&p, 0, sizeof p);
  const DriverTable& d = driver();
  CUdevice dev = 0;
  if (CUresult r = call(d.cuDeviceGet, &dev, device)) return to_cuda(r);
  if (CUresult r = call(d.cuDeviceGetName, p.name, int(sizeof p.name), dev)) return to_cuda(r);
  CUuuid uuid{};
  if (CUresult r = call(d.cuDeviceGetUuid, &uuid, dev)) return to_cuda(r);
  static_assert(sizeof p.uuid == sizeof uuid);
  std::memcpy(&p.uuid, &uuid, sizeof uuid);
  size_t total = 0;
  if (CUresult r = call(d.cuDeviceTotalMem, &total, dev)) return to_cuda(r);
  p.totalGlobalMem = total;

  cudaError_t e = cudaSuccess;
  auto get = [&](auto& field, CUdevice_attribute a) {
    int v = 0;
    if (e == cudaSuccess) e = attribute(v, a, device);
    using T = std::remove_reference_t<decltype(field)>;
    field = T(v);
  };
  using A = CUdevice_attribute;
  get(p.sharedMemPerBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  get(p.regsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  get(p.warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  get(p.memPitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH);
  get(p.maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  for (int i = 0; i < 3; ++i) {
    get(p.maxThreadsDim[i], A(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i));
    get(p.maxGridSize[i], A(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i));
  }
  get(p.totalConstMem, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
  get(p.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  get(p.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  get(p.textureAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
  get(p.texturePitchAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT);
  get(p.multiProcessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  get(p.integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED);
  get(p.canMapHostMemory, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
  get(p.maxTexture1D, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH);
  get(p.maxTexture1DMipmap, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH);
  get(p.maxTexture2D[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH);
  get(p.maxTexture2D[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT);
  get(p.maxTexture2DMipmap[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH);
  get(p.maxTexture2DMipmap[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT);
  get(p.maxTexture2DLinear[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH);
  get(p.maxTexture2DLinear[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT);
  get(p.maxTexture2DLinear[2], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH);
  get(p.maxTexture2DGather[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH);
  get(p.maxTexture2DGather[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT);
  get(p.maxTexture3D[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH);
  get(p.maxTexture3D[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT);
  get(p.maxTexture3D[2], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH);
  get(p.maxTexture3DAlt[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE);
  get(p.maxTexture3DAlt[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE);
  get(p.maxTexture3DAlt[2], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE);
  get(p.maxTextureCubemap, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH);
  get(p.maxTexture1DLayered[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH);
  get(p.maxTexture1DLayered[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS);
  get(p.maxTexture2DLayered[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH);
  get(p.maxTexture2DLayered[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT);
  get(p.maxTexture2DLayered[2], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS);
  get(p.maxTextureCubemapLayered[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH);
  get(p.maxTextureCubemapLayered[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS);
  get(p.maxSurface1D, CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH);
  get(p.maxSurface2D[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH);
  get(p.maxSurface2D[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT);
  get(p.maxSurface3D[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH);
  get(p.maxSurface3D[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT);
  get(p.maxSurface3D[2], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH);
  get(p.maxSurface1DLayered[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH);
  get(p.maxSurface1DLayered[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS);
  get(p.maxSurface2DLayered[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH);
  get(p.maxSurface2DLayered[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT);
  get(p.maxSurface2DLayered[2], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS);
  get(p.maxSurfaceCubemap, CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH);
  get(p.maxSurfaceCubemapLayered[0], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH);
  get(p.maxSurfaceCubemapLayered[1], CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS);
  get(p.surfaceAlignment, CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT);
  get(p.concurrentKernels, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS);
  get(p.ECCEnabled, CU_DEVICE_ATTRIBUTE_ECC_ENABLED);
  get(p.pciBusID, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
  get(p.pciDeviceID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
  get(p.pciDomainID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
  get(p.tccDriver, CU_DEVICE_ATTRIBUTE_TCC_DRIVER);
  get(p.asyncEngineCount, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
  get(p.unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
  get(p.memoryBusWidth, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  get(p.l2CacheSize, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  get(p.persistingL2CacheMaxSize, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
  get(p.maxThreadsPerMultiProcessor, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  get(p.streamPrioritiesSupported, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED);
  get(p.globalL1CacheSupported, CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED);
  get(p.localL1CacheSupported, CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED);
  get(p.sharedMemPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  get(p.regsPerMultiprocessor, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  get(p.managedMemory, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
  get(p.isMultiGpuBoard, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD);
  get(p.multiGpuBoardGroupID, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID);
  get(p.hostNativeAtomicSupported, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED);
  get(p.pageableMemoryAccess, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS);
  get(p.concurrentManagedAccess, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
  get(p.computePreemptionSupported, CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED);
  get(p.canUseHostPointerForRegisteredMem,
      CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
  get(p.cooperativeLaunch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
  get(p.sharedMemPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  get(p.pageableMemoryAccessUsesHostPageTables,
      CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
  get(p.directManagedMemAccessFromHost, CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
  get(p.maxBlocksPerMultiProcessor, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  get(p.accessPolicyMaxWindowSize, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE);
  get(p.reservedSharedMemPerBlock, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  get(p.hostRegisterSupported, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
  get(p.sparseCudaArraySupported, CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED);
  get(p.hostRegisterReadOnlySupported, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED);
  get(p.timelineSemaphoreInteropSupported,
      CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED);
  get(p.memoryPoolsSupported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
  get(p.gpuDirectRDMASupported, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
  get(p.gpuDirectRDMAFlushWritesOptions, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS);
  get(p.gpuDirectRDMAWritesOrdering, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING);
  get(p.memoryPoolSupportedHandleTypes, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES);
  get(p.deferredMappingCudaArraySupported,
      CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED);
  get(p.ipcEventSupported, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED);
  get(p.clusterLaunch, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH);
  get(p.unifiedFunctionPointers, CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS);
  get(p.deviceNumaConfig, CU_DEVICE_ATTRIBUTE_NUMA_CONFIG);
  get(p.deviceNumaId, CU_DEVICE_ATTRIBUTE_NUMA_ID);
  get(p.mpsEnabled, CU_DEVICE_ATTRIBUTE_MPS_ENABLED);
  get(p.hostNumaId, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
  get(p.gpuPciDeviceID, CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID);
  get(p.gpuPciSubsystemID, CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID);
  get(p.hostNumaMultinodeIpcSupported, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED);
  return e;
}

} // namespace

HONE_CUDART_API cudaError_t cudaGetDeviceCount(int* count) {
  return api([&] {
    if (count == nullptr) return cudaErrorInvalidValue;
    *count = 0;
    if (cudaError_t e = init()) return e;
    *count = device_count();
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaSetDevice(int device) {
  return api([&] {
    if (cudaError_t e = check_device(device)) return e;
    CUcontext primary = nullptr;
    if (cudaError_t e = primary_context(device, primary)) return e;
    set_thread_device(device);
    return to_cuda(call(driver().cuCtxSetCurrent, primary));
  });
}

HONE_CUDART_API cudaError_t cudaInitDevice(int device, unsigned device_flags, unsigned flags) {
  return api([&] {
    if (flags != 0) return cudaErrorInvalidValue;
    if (cudaError_t e = check_device(device)) return e;
    if (device_flags != 0) {
      CUdevice dev = 0;
      driver().cuDeviceGet(&dev, device);
      if (CUresult r = call(driver().cuDevicePrimaryCtxSetFlags, dev, device_flags))
        return to_cuda(r);
    }
    CUcontext primary = nullptr;
    return primary_context(device, primary);
  });
}

HONE_CUDART_API cudaError_t cudaGetDevice(int* device) {
  return api([&] {
    if (device == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = init()) return e;
    // A driver context the application made current decides, as in NVIDIA's runtime.
    CUcontext current = nullptr;
    CUdevice dev = 0;
    if (call(driver().cuCtxGetCurrent, &current) == CUDA_SUCCESS && current != nullptr &&
        call(driver().cuCtxGetDevice, &dev) == CUDA_SUCCESS) {
      *device = int(dev);
    } else {
      *device = thread_device();
    }
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaChooseDevice(int* device, const cudaDeviceProp* prop) {
  return api([&] {
    if (device == nullptr || prop == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = init()) return e;
    *device = 0; // one device: the closest match to anything
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  return api([&] {
    if (prop == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = check_device(device)) return e;
    return properties(*prop, device);
  });
}

HONE_CUDART_API cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  return api([&] {
    if (value == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = check_device(device)) return e;
    return attribute(*value, CUdevice_attribute(attr), device);
  });
}

HONE_CUDART_API cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  return api([&] {
    if (bus_id == nullptr || len <= 0) return cudaErrorInvalidValue;
    if (cudaError_t e = check_device(device)) return e;
    return to_cuda(call(driver().cuDeviceGetPCIBusId, bus_id, len, CUdevice(device)));
  });
}

HONE_CUDART_API cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* bus_id) {
  return api([&] {
    if (device == nullptr || bus_id == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = init()) return e;
    CUdevice dev = 0;
    if (CUresult r = call(driver().cuDeviceGetByPCIBusId, &dev, bus_id)) return to_cuda(r);
    *device = int(dev);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  return api([&] {
    if (can == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = check_device(device)) return e;
    if (cudaError_t e = check_device(peer)) return e;
    return to_cuda(call(driver().cuDeviceCanAccessPeer, can, CUdevice(device), CUdevice(peer)));
  });
}

HONE_CUDART_API cudaError_t cudaSetDeviceFlags(unsigned flags) {
  return api([&] {
    if (cudaError_t e = init()) return e;
    // cudaDeviceMapHost is always on since CUDA 4; the rest are the primary context's flags.
    unsigned ctx_flags = flags & ~unsigned(cudaDeviceMapHost);
    CUdevice dev = 0;
    driver().cuDeviceGet(&dev, thread_device());
    return to_cuda(call(driver().cuDevicePrimaryCtxSetFlags, dev, ctx_flags));
  });
}

HONE_CUDART_API cudaError_t cudaGetDeviceFlags(unsigned* flags) {
  return api([&] {
    if (flags == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = init()) return e;
    CUdevice dev = 0;
    driver().cuDeviceGet(&dev, thread_device());
    unsigned ctx_flags = 0;
    int active = 0;
    if (CUresult r = call(driver().cuDevicePrimaryCtxGetState, dev, &ctx_flags, &active)) {
      return to_cuda(r);
    }
    *flags = ctx_flags | cudaDeviceMapHost;
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaDeviceSynchronize() {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuCtxSynchronize));
  });
}

HONE_CUDART_API cudaError_t cudaDeviceReset() {
  return api([&] {
    if (cudaError_t e = init()) return e;
    return reset_device(thread_device());
  });
}

HONE_CUDART_API cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuCtxSetLimit, CUlimit(limit), value));
  });
}

HONE_CUDART_API cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  return api([&] {
    if (value == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuCtxGetLimit, value, CUlimit(limit)));
  });
}

HONE_CUDART_API cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuCtxGetStreamPriorityRange, least, greatest));
  });
}

HONE_CUDART_API cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* config) {
  return api([&] {
    if (config == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context()) return e;
    CUfunc_cache c = CU_FUNC_CACHE_PREFER_NONE;
    if (CUresult r = call(driver().cuCtxGetCacheConfig, &c)) return to_cuda(r);
    *config = cudaFuncCache(c);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache config) {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuCtxSetCacheConfig, CUfunc_cache(config)));
  });
}

HONE_CUDART_API cudaError_t cudaDriverGetVersion(int* version) {
  return api([&] {
    if (version == nullptr) return cudaErrorInvalidValue;
    // 0 when there is no driver at all, as documented.
    *version = 0;
    if (load_driver() != CUDA_SUCCESS) return cudaSuccess;
    return to_cuda(call(driver().cuDriverGetVersion, version));
  });
}

HONE_CUDART_API cudaError_t cudaRuntimeGetVersion(int* version) {
  return api([&] {
    if (version == nullptr) return cudaErrorInvalidValue;
    *version = k_runtime_version;
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaProfilerStart() {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuProfilerStart));
  });
}

HONE_CUDART_API cudaError_t cudaProfilerStop() {
  return api([&] {
    if (cudaError_t e = ensure_context()) return e;
    return to_cuda(call(driver().cuProfilerStop));
  });
}
