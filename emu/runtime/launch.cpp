// Launches by host function (cudaLaunchKernel, cudaLaunchKernelExC, cooperative), what the
// runtime says about kernels (attributes, names, parameters, occupancy), kernel and function
// handles, and the driver's entry points.
//
// Every launch goes to the driver as the kernel's CUkernel (cuLibraryGetKernel), which the driver
// resolves in the current context, as NVIDIA's runtime does.
#include "emu/runtime/runtime.hpp"

#include <cstring>
#include <type_traits>
#include <vector>

using namespace hone::cudart;

namespace {

static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute));
static_assert(int(cudaLaunchAttributeCooperative) == int(CU_LAUNCH_ATTRIBUTE_COOPERATIVE));
static_assert(int(cudaLaunchAttributeClusterDimension) ==
              int(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION));
static_assert(int(cudaFuncAttributeMaxDynamicSharedMemorySize) ==
              int(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES));
static_assert(int(cudaFuncAttributePreferredSharedMemoryCarveout) ==
              int(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT));
static_assert(int(cudaFuncAttributeClusterSchedulingPolicyPreference) ==
              int(CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE));
static_assert(int(cudaEnablePerThreadDefaultStream) ==
              int(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));

CUdevice current_device() {
  int d = thread_device();
  CUcontext c = nullptr;
  CUdevice dev = 0;
  if (call(driver().cuCtxGetCurrent, &c) == CUDA_SUCCESS && c != nullptr &&
      call(driver().cuCtxGetDevice, &dev) == CUDA_SUCCESS) {
    return dev;
  }
  return CUdevice(d);
}

// A registered kernel, loaded, with a context to use it in.
cudaError_t ready_kernel(const void* func, KernelInfo*& k) {
  if (func == nullptr) return cudaErrorInvalidDeviceFunction;
  if (cudaError_t e = kernel_of(func, k)) return e;
  return ensure_context();
}

cudaError_t kernel_attribute(int& out, CUfunction_attribute a, const KernelInfo& k) {
  return to_cuda(call(driver().cuKernelGetAttribute, &out, a, k.kernel, current_device()));
}

} // namespace

HONE_CUDART_PAIR(cudaLaunchKernel, _ptsz,
                 (const void* func, dim3 grid, dim3 block, void** args, size_t shared,
                  cudaStream_t stream),
                 (func, grid, block, args, shared, stream)) {
  KernelInfo* k = nullptr;
  if (cudaError_t e = ready_kernel(func, k)) return e;
  return launch(*k, grid, block, args, shared, stream, per_thread);
}

HONE_CUDART_PAIR(cudaLaunchCooperativeKernel, _ptsz,
                 (const void* func, dim3 grid, dim3 block, void** args, size_t shared,
                  cudaStream_t stream),
                 (func, grid, block, args, shared, stream)) {
  KernelInfo* k = nullptr;
  if (cudaError_t e = ready_kernel(func, k)) return e;
  if (cudaError_t e = check_config(grid, block)) return e;
  if (cudaError_t e = check_args(*k, args)) return e;
  if (shared > 0xffffffffu) return cudaErrorInvalidValue;
  return to_cuda(call(HONE_DRV(per_thread, cuLaunchCooperativeKernel),
                      reinterpret_cast<CUfunction>(k->kernel), grid.x, grid.y, grid.z, block.x,
                      block.y, block.z, unsigned(shared), reinterpret_cast<CUstream>(stream),
                      args));
}

HONE_CUDART_PAIR(cudaLaunchKernelExC, _ptsz,
                 (const cudaLaunchConfig_t* config, const void* func, void** args),
                 (config, func, args)) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) {
    return cudaErrorInvalidValue;
  }
  KernelInfo* k = nullptr;
  if (cudaError_t e = ready_kernel(func, k)) return e;
  if (cudaError_t e = check_config(config->gridDim, config->blockDim)) return e;
  if (cudaError_t e = check_args(*k, args)) return e;
  if (config->dynamicSmemBytes > 0xffffffffu) return cudaErrorInvalidValue;
  // The attribute records have the driver's layout (static_assert above); copied, not cast, so
  // the driver never reads the caller's array through another type.
  std::vector<CUlaunchAttribute> attrs(config->numAttrs);
  if (config->numAttrs > 0) {
    std::memcpy(attrs.data(), config->attrs, attrs.size() * sizeof(CUlaunchAttribute));
  }
  CUlaunchConfig c{};
  c.gridDimX = config->gridDim.x;
  c.gridDimY = config->gridDim.y;
  c.gridDimZ = config->gridDim.z;
  c.blockDimX = config->blockDim.x;
  c.blockDimY = config->blockDim.y;
  c.blockDimZ = config->blockDim.z;
  c.sharedMemBytes = unsigned(config->dynamicSmemBytes);
  c.hStream = reinterpret_cast<CUstream>(config->stream);
  c.attrs = attrs.empty() ? nullptr : attrs.data();
  c.numAttrs = config->numAttrs;
  return to_cuda(call(HONE_DRV(per_thread, cuLaunchKernelEx), &c,
                      reinterpret_cast<CUfunction>(k->kernel), args, nullptr));
}

HONE_CUDART_API cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  return api([&] {
    if (attr == nullptr) return cudaErrorInvalidValue;
    KernelInfo* k = nullptr;
    if (cudaError_t e = ready_kernel(func, k)) return e;
    *attr = cudaFuncAttributes{};
    cudaError_t e = cudaSuccess;
    auto get = [&](auto& field, CUfunction_attribute a) {
      int v = 0;
      if (e == cudaSuccess) e = kernel_attribute(v, a, *k);
      field = static_cast<std::remove_reference_t<decltype(field)>>(v);
    };
    get(attr->sharedSizeBytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    get(attr->constSizeBytes, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES);
    get(attr->localSizeBytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    get(attr->maxThreadsPerBlock, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    get(attr->numRegs, CU_FUNC_ATTRIBUTE_NUM_REGS);
    get(attr->ptxVersion, CU_FUNC_ATTRIBUTE_PTX_VERSION);
    get(attr->binaryVersion, CU_FUNC_ATTRIBUTE_BINARY_VERSION);
    get(attr->cacheModeCA, CU_FUNC_ATTRIBUTE_CACHE_MODE_CA);
    get(attr->maxDynamicSharedSizeBytes, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
    get(attr->preferredShmemCarveout, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
    get(attr->clusterDimMustBeSet, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET);
    get(attr->requiredClusterWidth, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH);
    get(attr->requiredClusterHeight, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT);
    get(attr->requiredClusterDepth, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH);
    get(attr->clusterSchedulingPolicyPreference,
        CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
    get(attr->nonPortableClusterSizeAllowed, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
    return e;
  });
}

HONE_CUDART_API cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr,
                                                 int value) {
  return api([&] {
    KernelInfo* k = nullptr;
    if (cudaError_t e = ready_kernel(func, k)) return e;
    return to_cuda(call(driver().cuKernelSetAttribute, CUfunction_attribute(attr), value, k->kernel,
                        current_device()));
  });
}

HONE_CUDART_API cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel,
                                                            cudaFuncAttribute attr, int value,
                                                            int device) {
  return api([&] {
    if (kernel == nullptr || kernel_by_handle(reinterpret_cast<CUkernel>(kernel)) == nullptr) {
      return cudaErrorInvalidDeviceFunction;
    }
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    return to_cuda(call(driver().cuKernelSetAttribute, CUfunction_attribute(attr), value,
                        reinterpret_cast<CUkernel>(kernel), CUdevice(device)));
  });
}

HONE_CUDART_API cudaError_t cudaFuncSetCacheConfig(const void* func, cudaFuncCache config) {
  return api([&] {
    KernelInfo* k = nullptr;
    if (cudaError_t e = ready_kernel(func, k)) return e;
    return to_cuda(
        call(driver().cuKernelSetCacheConfig, k->kernel, CUfunc_cache(config), current_device()));
  });
}

HONE_CUDART_API cudaError_t cudaFuncGetName(const char** name, const void* func) {
  return api([&] {
    if (name == nullptr) return cudaErrorInvalidValue;
    KernelInfo* k = nullptr;
    if (cudaError_t e = kernel_of(func, k)) return e;
    *name = k->name.c_str(); // lives as long as the registration
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaFuncGetParamInfo(const void* func, size_t index, size_t* offset,
                                                 size_t* size) {
  return api([&] {
    KernelInfo* k = nullptr;
    if (cudaError_t e = kernel_of(func, k)) return e;
    return to_cuda(call(driver().cuKernelGetParamInfo, k->kernel, index, offset, size));
  });
}

HONE_CUDART_API cudaError_t cudaGetFuncBySymbol(cudaFunction_t* function, const void* symbol) {
  return api([&] {
    if (function == nullptr) return cudaErrorInvalidValue;
    KernelInfo* k = nullptr;
    if (cudaError_t e = ready_kernel(symbol, k)) return e;
    CUfunction f = nullptr;
    if (cudaError_t e = function_of(*k, f)) return e;
    *function = reinterpret_cast<cudaFunction_t>(f);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGetKernel(cudaKernel_t* kernel, const void* func) {
  return api([&] {
    if (kernel == nullptr) return cudaErrorInvalidValue;
    KernelInfo* k = nullptr;
    if (cudaError_t e = kernel_of(func, k)) return e;
    *kernel = reinterpret_cast<cudaKernel_t>(k->kernel);
    return cudaSuccess;
  });
}

// --- occupancy -----------------------------------------------------------------------------------

HONE_CUDART_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* blocks, const void* func, int block_size, size_t dynamic_shared, unsigned flags) {
  return api([&] {
    if (blocks == nullptr) return cudaErrorInvalidValue;
    KernelInfo* k = nullptr;
    if (cudaError_t e = ready_kernel(func, k)) return e;
    CUfunction f = nullptr;
    if (cudaError_t e = function_of(*k, f)) return e;
    return to_cuda(call(driver().cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, blocks, f,
                        block_size, dynamic_shared, flags));
  });
}

HONE_CUDART_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks,
                                                                          const void* func,
                                                                          int block_size,
                                                                          size_t dynamic_shared) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size,
                                                                dynamic_shared, 0);
}

HONE_CUDART_API cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* bytes,
                                                                      const void* func, int blocks,
                                                                      int block_size) {
  return api([&] {
    if (bytes == nullptr) return cudaErrorInvalidValue;
    KernelInfo* k = nullptr;
    if (cudaError_t e = ready_kernel(func, k)) return e;
    CUfunction f = nullptr;
    if (cudaError_t e = function_of(*k, f)) return e;
    return to_cuda(
        call(driver().cuOccupancyAvailableDynamicSMemPerBlock, bytes, f, blocks, block_size));
  });
}

// --- driver entry points -------------------------------------------------------------------------

namespace {

cudaError_t entry_point(const char* symbol, void** fn, unsigned version, unsigned long long flags,
                        cudaDriverEntryPointQueryResult* status, bool per_thread) {
  if (symbol == nullptr || fn == nullptr) return cudaErrorInvalidValue;
  *fn = nullptr;
  if (cudaError_t e = init()) return e;
  cuuint64_t cu_flags = flags;
  if (flags == cudaEnableDefault) {
    cu_flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                          : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
  }
  CUdriverProcAddressQueryResult s = CU_GET_PROC_ADDRESS_SUCCESS;
  CUresult r = call(driver().cuGetProcAddress, symbol, fn, int(version), cu_flags, &s);
  if (status != nullptr) *status = cudaDriverEntryPointQueryResult(s);
  // A symbol that is not found is a status, not an error, as documented.
  if (r == CUDA_ERROR_NOT_FOUND) return cudaSuccess;
  return to_cuda(r);
}

} // namespace

HONE_CUDART_PAIR(cudaGetDriverEntryPoint, _ptsz,
                 (const char* symbol, void** fn, unsigned long long flags,
                  cudaDriverEntryPointQueryResult* status),
                 (symbol, fn, flags, status)) {
  return entry_point(symbol, fn, unsigned(k_runtime_version), flags, status, per_thread);
}

HONE_CUDART_PAIR(cudaGetDriverEntryPointByVersion, _ptsz,
                 (const char* symbol, void** fn, unsigned version, unsigned long long flags,
                  cudaDriverEntryPointQueryResult* status),
                 (symbol, fn, version, flags, status)) {
  return entry_point(symbol, fn, version, flags, status, per_thread);
}
