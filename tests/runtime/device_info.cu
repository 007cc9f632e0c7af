// device_info: what a program asks about the device before it runs, and the launch forms that
// depend on it. Device count, cudaSetDevice/cudaGetDevice (an ordinal past the end refused with
// cudaErrorInvalidDevice); every field of cudaGetDeviceProperties against cudaDeviceGetAttribute
// where an attribute exists (and name, UUID and total memory against the driver's own answers,
// through cudaGetDriverEntryPointByVersion); driver and runtime versions (cuDriverGetVersion
// through the entry point agrees with cudaDriverGetVersion); cudaMemGetInfo; the occupancy
// calculator (cudaOccupancyMaxActiveBlocksPerMultiprocessor, cudaOccupancyMaxPotentialBlockSize);
// cudaLaunchKernelExC with a launch attribute; cudaLaunchCooperativeKernel of a grid that
// synchronizes across blocks; cudaGetFuncBySymbol's function queried through the driver.
#include "corpus.cuh"

#include <cooperative_groups.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstring>
#include <vector>

namespace cg = cooperative_groups;

__global__ void iota(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i;
}

// Every block writes its part, the grid synchronizes, then every block reads another's part.
__global__ void grid_rotate(int* data, int* out, int n) {
  cg::grid_group grid = cg::this_grid();
  int i = int(grid.thread_rank());
  if (i < n) data[i] = i * i;
  grid.sync();
  if (i < n) out[i] = data[(i + blockDim.x) % n];
}

int failures = 0;

template <class T> void same(const char* field, T prop, int attribute) {
  if ((long long)prop != (long long)attribute) {
    std::printf("wrong: cudaDeviceProp.%s = %lld, cudaDeviceGetAttribute says %d\n", field,
                (long long)prop, attribute);
    ++failures;
  }
}

int attr(cudaDeviceAttr a) {
  int v = 0;
  CHECK(cudaDeviceGetAttribute(&v, a, 0));
  return v;
}

// Each field next to the attribute that answers for it (cudaDeviceAttr, driver_types.h).
void compare_properties(const cudaDeviceProp& p) {
#define SAME(field, a) same(#field, p.field, attr(a))
  SAME(sharedMemPerBlock, cudaDevAttrMaxSharedMemoryPerBlock);
  SAME(regsPerBlock, cudaDevAttrMaxRegistersPerBlock);
  SAME(warpSize, cudaDevAttrWarpSize);
  SAME(memPitch, cudaDevAttrMaxPitch);
  SAME(maxThreadsPerBlock, cudaDevAttrMaxThreadsPerBlock);
  SAME(maxThreadsDim[0], cudaDevAttrMaxBlockDimX);
  SAME(maxThreadsDim[1], cudaDevAttrMaxBlockDimY);
  SAME(maxThreadsDim[2], cudaDevAttrMaxBlockDimZ);
  SAME(maxGridSize[0], cudaDevAttrMaxGridDimX);
  SAME(maxGridSize[1], cudaDevAttrMaxGridDimY);
  SAME(maxGridSize[2], cudaDevAttrMaxGridDimZ);
  SAME(totalConstMem, cudaDevAttrTotalConstantMemory);
  SAME(major, cudaDevAttrComputeCapabilityMajor);
  SAME(minor, cudaDevAttrComputeCapabilityMinor);
  SAME(textureAlignment, cudaDevAttrTextureAlignment);
  SAME(texturePitchAlignment, cudaDevAttrTexturePitchAlignment);
  SAME(multiProcessorCount, cudaDevAttrMultiProcessorCount);
  SAME(integrated, cudaDevAttrIntegrated);
  SAME(canMapHostMemory, cudaDevAttrCanMapHostMemory);
  SAME(maxTexture1D, cudaDevAttrMaxTexture1DWidth);
  SAME(maxTexture1DMipmap, cudaDevAttrMaxTexture1DMipmappedWidth);
  SAME(maxTexture2D[0], cudaDevAttrMaxTexture2DWidth);
  SAME(maxTexture2D[1], cudaDevAttrMaxTexture2DHeight);
  SAME(maxTexture2DMipmap[0], cudaDevAttrMaxTexture2DMipmappedWidth);
  SAME(maxTexture2DMipmap[1], cudaDevAttrMaxTexture2DMipmappedHeight);
  SAME(maxTexture2DLinear[0], cudaDevAttrMaxTexture2DLinearWidth);
  SAME(maxTexture2DLinear[1], cudaDevAttrMaxTexture2DLinearHeight);
  SAME(maxTexture2DLinear[2], cudaDevAttrMaxTexture2DLinearPitch);
  SAME(maxTexture2DGather[0], cudaDevAttrMaxTexture2DGatherWidth);
  SAME(maxTexture2DGather[1], cudaDevAttrMaxTexture2DGatherHeight);
  SAME(maxTexture3D[0], cudaDevAttrMaxTexture3DWidth);
  SAME(maxTexture3D[1], cudaDevAttrMaxTexture3DHeight);
  SAME(maxTexture3D[2], cudaDevAttrMaxTexture3DDepth);
  SAME(maxTexture3DAlt[0], cudaDevAttrMaxTexture3DWidthAlt);
  SAME(maxTexture3DAlt[1], cudaDevAttrMaxTexture3DHeightAlt);
  SAME(maxTexture3DAlt[2], cudaDevAttrMaxTexture3DDepthAlt);
  SAME(maxTextureCubemap, cudaDevAttrMaxTextureCubemapWidth);
  SAME(maxTexture1DLayered[0], cudaDevAttrMaxTexture1DLayeredWidth);
  SAME(maxTexture1DLayered[1], cudaDevAttrMaxTexture1DLayeredLayers);
  SAME(maxTexture2DLayered[0], cudaDevAttrMaxTexture2DLayeredWidth);
  SAME(maxTexture2DLayered[1], cudaDevAttrMaxTexture2DLayeredHeight);
  SAME(maxTexture2DLayered[2], cudaDevAttrMaxTexture2DLayeredLayers);
  SAME(maxTextureCubemapLayered[0], cudaDevAttrMaxTextureCubemapLayeredWidth);
  SAME(maxTextureCubemapLayered[1], cudaDevAttrMaxTextureCubemapLayeredLayers);
  SAME(maxSurface1D, cudaDevAttrMaxSurface1DWidth);
  SAME(maxSurface2D[0], cudaDevAttrMaxSurface2DWidth);
  SAME(maxSurface2D[1], cudaDevAttrMaxSurface2DHeight);
  SAME(maxSurface3D[0], cudaDevAttrMaxSurface3DWidth);
  SAME(maxSurface3D[1], cudaDevAttrMaxSurface3DHeight);
  SAME(maxSurface3D[2], cudaDevAttrMaxSurface3DDepth);
  SAME(maxSurface1DLayered[0], cudaDevAttrMaxSurface1DLayeredWidth);
  SAME(maxSurface1DLayered[1], cudaDevAttrMaxSurface1DLayeredLayers);
  SAME(maxSurface2DLayered[0], cudaDevAttrMaxSurface2DLayeredWidth);
  SAME(maxSurface2DLayered[1], cudaDevAttrMaxSurface2DLayeredHeight);
  SAME(maxSurface2DLayered[2], cudaDevAttrMaxSurface2DLayeredLayers);
  SAME(maxSurfaceCubemap, cudaDevAttrMaxSurfaceCubemapWidth);
  SAME(maxSurfaceCubemapLayered[0], cudaDevAttrMaxSurfaceCubemapLayeredWidth);
  SAME(maxSurfaceCubemapLayered[1], cudaDevAttrMaxSurfaceCubemapLayeredLayers);
  SAME(surfaceAlignment, cudaDevAttrSurfaceAlignment);
  SAME(concurrentKernels, cudaDevAttrConcurrentKernels);
  SAME(ECCEnabled, cudaDevAttrEccEnabled);
  SAME(pciBusID, cudaDevAttrPciBusId);
  SAME(pciDeviceID, cudaDevAttrPciDeviceId);
  SAME(pciDomainID, cudaDevAttrPciDomainId);
  SAME(tccDriver, cudaDevAttrTccDriver);
  SAME(asyncEngineCount, cudaDevAttrAsyncEngineCount);
  SAME(unifiedAddressing, cudaDevAttrUnifiedAddressing);
  SAME(memoryBusWidth, cudaDevAttrGlobalMemoryBusWidth);
  SAME(l2CacheSize, cudaDevAttrL2CacheSize);
  SAME(persistingL2CacheMaxSize, cudaDevAttrMaxPersistingL2CacheSize);
  SAME(maxThreadsPerMultiProcessor, cudaDevAttrMaxThreadsPerMultiProcessor);
  SAME(streamPrioritiesSupported, cudaDevAttrStreamPrioritiesSupported);
  SAME(globalL1CacheSupported, cudaDevAttrGlobalL1CacheSupported);
  SAME(localL1CacheSupported, cudaDevAttrLocalL1CacheSupported);
  SAME(sharedMemPerMultiprocessor, cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  SAME(regsPerMultiprocessor, cudaDevAttrMaxRegistersPerMultiprocessor);
  SAME(managedMemory, cudaDevAttrManagedMemory);
  SAME(isMultiGpuBoard, cudaDevAttrIsMultiGpuBoard);
  SAME(multiGpuBoardGroupID, cudaDevAttrMultiGpuBoardGroupID);
  SAME(hostNativeAtomicSupported, cudaDevAttrHostNativeAtomicSupported);
  SAME(pageableMemoryAccess, cudaDevAttrPageableMemoryAccess);
  SAME(concurrentManagedAccess, cudaDevAttrConcurrentManagedAccess);
  SAME(computePreemptionSupported, cudaDevAttrComputePreemptionSupported);
  SAME(canUseHostPointerForRegisteredMem, cudaDevAttrCanUseHostPointerForRegisteredMem);
  SAME(cooperativeLaunch, cudaDevAttrCooperativeLaunch);
  SAME(sharedMemPerBlockOptin, cudaDevAttrMaxSharedMemoryPerBlockOptin);
  SAME(pageableMemoryAccessUsesHostPageTables, cudaDevAttrPageableMemoryAccessUsesHostPageTables);
  SAME(directManagedMemAccessFromHost, cudaDevAttrDirectManagedMemAccessFromHost);
  SAME(maxBlocksPerMultiProcessor, cudaDevAttrMaxBlocksPerMultiprocessor);
  SAME(accessPolicyMaxWindowSize, cudaDevAttrMaxAccessPolicyWindowSize);
  SAME(reservedSharedMemPerBlock, cudaDevAttrReservedSharedMemoryPerBlock);
  SAME(hostRegisterSupported, cudaDevAttrHostRegisterSupported);
  SAME(sparseCudaArraySupported, cudaDevAttrSparseCudaArraySupported);
  SAME(hostRegisterReadOnlySupported, cudaDevAttrHostRegisterReadOnlySupported);
  SAME(timelineSemaphoreInteropSupported, cudaDevAttrTimelineSemaphoreInteropSupported);
  SAME(memoryPoolsSupported, cudaDevAttrMemoryPoolsSupported);
  SAME(gpuDirectRDMASupported, cudaDevAttrGPUDirectRDMASupported);
  SAME(gpuDirectRDMAFlushWritesOptions, cudaDevAttrGPUDirectRDMAFlushWritesOptions);
  SAME(gpuDirectRDMAWritesOrdering, cudaDevAttrGPUDirectRDMAWritesOrdering);
  SAME(memoryPoolSupportedHandleTypes, cudaDevAttrMemoryPoolSupportedHandleTypes);
  SAME(deferredMappingCudaArraySupported, cudaDevAttrDeferredMappingCudaArraySupported);
  SAME(ipcEventSupported, cudaDevAttrIpcEventSupport);
  SAME(clusterLaunch, cudaDevAttrClusterLaunch);
  SAME(deviceNumaConfig, cudaDevAttrNumaConfig);
  SAME(deviceNumaId, cudaDevAttrNumaId);
  SAME(mpsEnabled, cudaDevAttrMpsEnabled);
  SAME(hostNumaId, cudaDevAttrHostNumaId);
  SAME(gpuPciDeviceID, cudaDevAttrGpuPciDeviceId);
  SAME(gpuPciSubsystemID, cudaDevAttrGpuPciSubsystemId);
  SAME(hostNumaMultinodeIpcSupported, cudaDevAttrHostNumaMultinodeIpcSupported);
#undef SAME
  if (failures) corpus::wrong("%d fields of cudaDeviceProp disagree with their attributes", failures);
}

// A driver entry point, at the CUDA version its PFN typedef names.
template <class F> F entry_point(const char* name, unsigned version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointVersionNotSufficent;
  CHECK(cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || fn == nullptr)
    corpus::wrong("cudaGetDriverEntryPointByVersion(%s, %u): status %d", name, version, int(status));
  return reinterpret_cast<F>(fn);
}

int main() {
  int count = 0, device = -1;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 1) corpus::wrong("cudaGetDeviceCount = %d", count);
  CHECK(cudaSetDevice(0));
  CHECK(cudaGetDevice(&device));
  if (device != 0) corpus::wrong("cudaGetDevice = %d after cudaSetDevice(0)", device);
  CHECK_ERROR(cudaSetDevice(count), cudaErrorInvalidDevice);
  CHECK(cudaGetDevice(&device));
  if (device != 0) corpus::wrong("cudaGetDevice = %d after a refused cudaSetDevice", device);

  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  compare_properties(p);
  CHECK_ERROR(cudaGetDeviceProperties(&p, count), cudaErrorInvalidDevice);
  CHECK(cudaGetDeviceProperties(&p, 0));

  // The driver's own answers, through the runtime's entry-point lookup.
  int driver = 0, runtime = 0, via_entry = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  auto get_version = entry_point<PFN_cuDriverGetVersion_v2020>("cuDriverGetVersion", 2020);
  if (get_version(&via_entry) != CUDA_SUCCESS || via_entry != driver)
    corpus::wrong("cuDriverGetVersion through the entry point: %d, cudaDriverGetVersion %d", via_entry, driver);
  if (runtime != CUDART_VERSION || driver < runtime)
    corpus::wrong("runtime %d (built for %d), driver %d", runtime, CUDART_VERSION, driver);
  void* missing = &missing;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
  CHECK(cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &missing, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSymbolNotFound || missing != nullptr)
    corpus::wrong("a missing entry point: status %d", int(status));

  auto get_name = entry_point<PFN_cuDeviceGetName_v2000>("cuDeviceGetName", 2000);
  auto get_uuid = entry_point<PFN_cuDeviceGetUuid_v11040>("cuDeviceGetUuid", 11040);
  auto total_mem = entry_point<PFN_cuDeviceTotalMem_v3020>("cuDeviceTotalMem", 3020);
  char name[256] = {};
  CUuuid uuid{};
  size_t total_driver = 0;
  if (get_name(name, sizeof name, 0) != CUDA_SUCCESS || std::strcmp(name, p.name) != 0)
    corpus::wrong("cudaDeviceProp.name %s, the driver says %s", p.name, name);
  if (get_uuid(&uuid, 0) != CUDA_SUCCESS || std::memcmp(&uuid, &p.uuid, sizeof uuid) != 0)
    corpus::wrong("cudaDeviceProp.uuid differs from the driver's");
  if (total_mem(&total_driver, 0) != CUDA_SUCCESS || total_driver != p.totalGlobalMem)
    corpus::wrong("totalGlobalMem %zu, the driver says %zu", p.totalGlobalMem, total_driver);
  size_t free_mem = 0, total = 0;
  CHECK(cudaMemGetInfo(&free_mem, &total));
  if (total != p.totalGlobalMem || free_mem > total || free_mem == 0)
    corpus::wrong("cudaMemGetInfo free %zu total %zu, totalGlobalMem %zu", free_mem, total, p.totalGlobalMem);
  std::printf("device_info: %d device(s), device 0 \"%s\" sm_%d%d, %d SMs, warp %d, runtime %d\n",
              count, p.name, p.major, p.minor, p.multiProcessorCount, p.warpSize, runtime);
  std::printf("device_info: every cudaDeviceProp field agrees with its attribute and the driver\n");

  // Occupancy.
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, iota, 256, 0));
  if (per_sm < 1 || per_sm * 256 > p.maxThreadsPerMultiProcessor)
    corpus::wrong("%d active blocks of 256 threads per SM", per_sm);
  int min_grid = 0, best_block = 0;
  CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &best_block, iota));
  if (best_block < 32 || best_block > p.maxThreadsPerBlock || best_block % 32 != 0 || min_grid < p.multiProcessorCount)
    corpus::wrong("cudaOccupancyMaxPotentialBlockSize: grid %d block %d", min_grid, best_block);
  int coop_per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&coop_per_sm, grid_rotate, 128, 0));
  if (coop_per_sm < 1) corpus::wrong("grid_rotate: %d blocks per SM", coop_per_sm);

  const int n = 1024;
  int *d, *d2;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMalloc(&d2, n * sizeof(int)));
  std::vector<int> h(n);

  // cudaLaunchKernelExC with a launch attribute.
  cudaLaunchAttribute attrs[1];
  attrs[0].id = cudaLaunchAttributePriority;
  attrs[0].val.priority = 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((n + best_block - 1) / best_block);
  config.blockDim = dim3(best_block);
  config.dynamicSmemBytes = 0;
  config.stream = nullptr;
  config.attrs = attrs;
  config.numAttrs = 1;
  int count_n = n;
  void* args[] = {&d, &count_n};
  CHECK(cudaLaunchKernelExC(&config, (const void*)iota, args));
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    if (h[i] != 3 * i) corpus::wrong("iota[%d] = %d after cudaLaunchKernelExC", i, h[i]);
  }

  // A cooperative launch: 8 blocks, which fit on any device at once.
  const int coop_blocks = 8;
  if (!p.cooperativeLaunch || coop_blocks > coop_per_sm * p.multiProcessorCount)
    corpus::wrong("cooperative launch of %d blocks does not fit", coop_blocks);
  int coop_n = coop_blocks * 128;
  void* coop_args[] = {&d, &d2, &coop_n};
  CHECK(cudaLaunchCooperativeKernel((const void*)grid_rotate, dim3(coop_blocks), dim3(128), coop_args, 0, nullptr));
  CHECK(cudaMemcpy(h.data(), d2, coop_n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < coop_n; ++i) {
    int j = (i + 128) % coop_n;
    if (h[i] != j * j) corpus::wrong("grid_rotate[%d] = %d, expected %d", i, h[i], j * j);
  }

  // The function behind a kernel, asked through the driver.
  cudaFunction_t f = nullptr;
  CHECK(cudaGetFuncBySymbol(&f, (const void*)iota));
  auto func_attr = entry_point<PFN_cuFuncGetAttribute_v2020>("cuFuncGetAttribute", 2020);
  int max_threads = 0;
  cudaFuncAttributes fa;
  CHECK(cudaFuncGetAttributes(&fa, iota));
  if (func_attr(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, (CUfunction)f) != CUDA_SUCCESS ||
      max_threads != fa.maxThreadsPerBlock)
    corpus::wrong("cuFuncGetAttribute on cudaGetFuncBySymbol's function: %d, cudaFuncGetAttributes %d",
                  max_threads, fa.maxThreadsPerBlock);
  CHECK_ERROR(cudaGetFuncBySymbol(&f, (const void*)&compare_properties), cudaErrorInvalidDeviceFunction);

  corpus::Checksum sum;
  sum.add_all(h.data(), coop_n);
  std::printf("device_info: occupancy ok, cudaLaunchKernelExC ok, cooperative grid sync ok, checksum %016llx\n",
              sum.value());
  CHECK(cudaFree(d));
  CHECK(cudaFree(d2));
  std::printf("device_info: ok\n");
  return 0;
}
