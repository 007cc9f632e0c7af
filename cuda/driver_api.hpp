// The CUDA driver entry points hone calls, resolved at run time from a driver library opened with
// dlopen: hone never links libcuda, so the real driver and the emulated one (build/lib/emu) are
// interchangeable, and a machine without a GPU still runs honed.
//
// Each entry point is resolved by its ABI name (cuMemAlloc_v2, cuEventElapsedTime_v2, ...), the
// name the driver exports for the signature cuda.h declares. Required ones missing make open()
// fail; optional ones (VMM, cuFuncGetParamInfo, cuCtxCreate_v2) are nullptr when the driver lacks
// them, and callers choose another way. symbol() finds what a driver exports beyond cuda.h (the
// emulated device's hone_emu_launch_cost).
//
// CUresult never leaves this layer unconverted (CONVENTIONS.md, "Errors"): call() turns a failure
// into an Error naming the call and carrying the driver's own name and description of the result,
// with the CUresult as Error::code for callers that must tell results apart.
#pragma once

#include "common/result.hpp"

#include <cuda.h>

#include <memory>
#include <string>
#include <utility>

namespace hone::cuda {

// X(member, ABI name, fallback ABI name or "") for every entry point open() requires. The member
// is cuda.h's public name, so its type is exactly the declaration cuda.h selects.
#define HONE_DRIVER_REQUIRED(X)                                                                    \
  X(cuGetErrorName, "cuGetErrorName", "")                                                          \
  X(cuGetErrorString, "cuGetErrorString", "")                                                      \
  X(cuInit, "cuInit", "")                                                                          \
  X(cuDriverGetVersion, "cuDriverGetVersion", "")                                                  \
  X(cuDeviceGetCount, "cuDeviceGetCount", "")                                                      \
  X(cuDeviceGet, "cuDeviceGet", "")                                                                \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", "")                                              \
  X(cuDeviceGetName, "cuDeviceGetName", "")                                                        \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "")                                      \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")        \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", "")                                                        \
  X(cuCtxDestroy, "cuCtxDestroy_v2", "")                                                           \
  X(cuCtxSynchronize, "cuCtxSynchronize", "")                                                      \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx", "")                                                  \
  X(cuModuleUnload, "cuModuleUnload", "")                                                          \
  X(cuModuleGetFunction, "cuModuleGetFunction", "")                                                \
  X(cuMemAlloc, "cuMemAlloc_v2", "")                                                               \
  X(cuMemFree, "cuMemFree_v2", "")                                                                 \
  X(cuMemGetAddressRange, "cuMemGetAddressRange_v2", "")                                           \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", "")                                                           \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", "")                                                           \
  X(cuMemsetD8, "cuMemsetD8_v2", "")                                                               \
  X(cuLaunchKernel, "cuLaunchKernel", "")                                                          \
  X(cuEventCreate, "cuEventCreate", "")                                                            \
  X(cuEventRecord, "cuEventRecord", "")                                                            \
  X(cuEventSynchronize, "cuEventSynchronize", "")                                                  \
  X(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime")                             \
  X(cuEventDestroy, "cuEventDestroy_v2", "")                                                       \
  X(cuStreamCreate, "cuStreamCreate", "")                                                          \
  X(cuStreamDestroy, "cuStreamDestroy_v2", "")                                                     \
  X(cuStreamSynchronize, "cuStreamSynchronize", "")

// Entry points a driver may lack: nullptr then. cuFuncGetParamInfo is CUDA 12.4+; the VMM set
// (CUDA 10.2+) is what restores buffers at their original device addresses; stream priorities
// put the worker's runs behind the applications' work.
#define HONE_DRIVER_OPTIONAL(X)                                                                    \
  X(cuFuncGetParamInfo, "cuFuncGetParamInfo", "")                                                  \
  X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", "")                            \
  X(cuMemAddressReserve, "cuMemAddressReserve", "")                                                \
  X(cuMemAddressFree, "cuMemAddressFree", "")                                                      \
  X(cuMemCreate, "cuMemCreate", "")                                                                \
  X(cuMemRelease, "cuMemRelease", "")                                                              \
  X(cuMemMap, "cuMemMap", "")                                                                      \
  X(cuMemUnmap, "cuMemUnmap", "")                                                                  \
  X(cuMemSetAccess, "cuMemSetAccess", "")                                                          \
  X(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", "")                                \
  X(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", "")                                  \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", "")                                                  \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", "")                                                  \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", "")

class DriverApi {
public:
  // Open the driver library `path` (a path, or a soname the dynamic loader looks up) and resolve
  // every entry point. Fails when the library cannot be loaded or lacks a required entry point.
  // The library stays loaded for the life of the process (drivers do not support unloading).
  static Result<std::shared_ptr<const DriverApi>> open(const std::string& path);

// NOLINTNEXTLINE(bugprone-macro-parentheses): `name` is a declarator here
#define HONE_X(name, abi, fallback) decltype(&::name) name = nullptr;
  HONE_DRIVER_REQUIRED(HONE_X)
  HONE_DRIVER_OPTIONAL(HONE_X)
#undef HONE_X
  // cuCtxCreate_v2 (flags, device): cuda.h 13 declares only the _v4 form publicly. Optional.
  CUresult(CUDAAPI* cuCtxCreate_v2)(CUcontext*, unsigned int, CUdevice) = nullptr;

  // The file the loader found for the requested path.
  const std::string& path() const {
    return m_path;
  }
  // Every VMM entry point is present (the device must still report support).
  bool has_vmm() const;
  // Another symbol the driver library exports, or nullptr.
  void* symbol(const char* name) const;

  // "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered".
  std::string describe(CUresult r) const;
  // An Error for `call` failing with `r`; its code is the CUresult.
  Error error(std::string_view call, CUresult r) const;

  // Call entry point `fn` (named `name` in the error) with `args`.
  template <class... P, class... A>
  Result<void> call(std::string_view name, CUresult(CUDAAPI* fn)(P...), A&&... args) const {
    if (fn == nullptr) {
      return make_error(std::string(name) + ": not provided by the driver " + m_path,
                        int(CUDA_ERROR_NOT_SUPPORTED));
    }
    CUresult r = fn(std::forward<A>(args)...);
    if (r == CUDA_SUCCESS) return ok();
    return error(name, r);
  }

private:
  std::string m_path;
  void* m_lib = nullptr;
};

// Call driver entry point `fn` of DriverApi `drv`, naming it in the error.
#define HONE_CU(drv, fn, ...) (drv).call(#fn, (drv).fn __VA_OPT__(, ) __VA_ARGS__)

// True for the results after which a context is unusable (the GPU reports a kernel fault
// asynchronously and every later call returns it): illegal or misaligned address, timeout, trap,
// assert, illegal instruction, hardware stack error, invalid PC or address space, ECC.
bool is_sticky(CUresult r);

} // namespace hone::cuda
