// The driver entry points the runtime calls, found the way NVIDIA's runtime finds them: dlopen
// libcuda.so.1, dlsym cuGetProcAddress_v2, then one cuGetProcAddress_v2 lookup per entry point
// with the CUDA version of its PFN typedef in cudaTypedefs.h, and for the stream-ordered ones a
// second lookup with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, for the _ptsz/_ptds entry
// points of the runtime. A preload library that hooks dlsym or cuGetProcAddress (hone's shim)
// meets exactly these calls, here as on a GPU.
#pragma once

#include <cuda.h>
#include <cudaProfilerTypedefs.h>
#include <cudaTypedefs.h>

namespace hone::cudart {

// X(name, version): one lookup at `version`. P(name, version, per_thread_version): also a
// per-thread lookup, kept in name##_pt.
#define HONE_CUDART_DRIVER(X, P)                                                                   \
  X(cuInit, 2000)                                                                                  \
  X(cuDriverGetVersion, 2020)                                                                      \
  X(cuGetErrorString, 6000)                                                                        \
  X(cuDeviceGet, 2000)                                                                             \
  X(cuDeviceGetCount, 2000)                                                                        \
  X(cuDeviceGetName, 2000)                                                                         \
  X(cuDeviceGetUuid, 11040)                                                                        \
  X(cuDeviceTotalMem, 3020)                                                                        \
  X(cuDeviceGetAttribute, 2000)                                                                    \
  X(cuDeviceGetPCIBusId, 4010)                                                                     \
  X(cuDeviceGetByPCIBusId, 4010)                                                                   \
  X(cuDeviceCanAccessPeer, 4000)                                                                   \
  X(cuDevicePrimaryCtxRetain, 7000)                                                                \
  X(cuDevicePrimaryCtxReset, 11000)                                                                \
  X(cuDevicePrimaryCtxSetFlags, 11000)                                                             \
  X(cuDevicePrimaryCtxGetState, 7000)                                                              \
  X(cuCtxGetCurrent, 4000)                                                                         \
  X(cuCtxSetCurrent, 4000)                                                                         \
  X(cuCtxGetDevice, 2000)                                                                          \
  X(cuCtxSynchronize, 2000)                                                                        \
  X(cuCtxGetLimit, 3010)                                                                           \
  X(cuCtxSetLimit, 3010)                                                                           \
  X(cuCtxGetStreamPriorityRange, 5050)                                                             \
  X(cuCtxGetCacheConfig, 3020)                                                                     \
  X(cuCtxSetCacheConfig, 3020)                                                                     \
  X(cuLibraryLoadData, 12000)                                                                      \
  X(cuLibraryUnload, 12000)                                                                        \
  X(cuLibraryGetKernel, 12000)                                                                     \
  X(cuLibraryGetGlobal, 12000)                                                                     \
  X(cuLibraryGetManaged, 12000)                                                                    \
  X(cuKernelGetFunction, 12000)                                                                    \
  X(cuKernelGetAttribute, 12000)                                                                   \
  X(cuKernelSetAttribute, 12000)                                                                   \
  X(cuKernelSetCacheConfig, 12000)                                                                 \
  X(cuKernelGetParamInfo, 12040)                                                                   \
  X(cuKernelGetName, 12030)                                                                        \
  X(cuFuncGetAttribute, 2020)                                                                      \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000)                                    \
  X(cuOccupancyAvailableDynamicSMemPerBlock, 10020)                                                \
  X(cuMemAlloc, 3020)                                                                              \
  X(cuMemFree, 3020)                                                                               \
  X(cuMemAllocHost, 3020)                                                                          \
  X(cuMemHostAlloc, 2020)                                                                          \
  X(cuMemFreeHost, 2000)                                                                           \
  X(cuMemHostGetDevicePointer, 3020)                                                               \
  X(cuMemHostGetFlags, 2030)                                                                       \
  X(cuMemHostRegister, 6050)                                                                       \
  X(cuMemHostUnregister, 4000)                                                                     \
  X(cuMemAllocManaged, 6000)                                                                       \
  X(cuMemAllocPitch, 3020)                                                                         \
  X(cuMemGetInfo, 3020)                                                                            \
  X(cuMemGetAddressRange, 3020)                                                                    \
  X(cuMemAdvise, 12020)                                                                            \
  X(cuPointerGetAttributes, 7000)                                                                  \
  X(cuMemPoolCreate, 11020)                                                                        \
  X(cuMemPoolDestroy, 11020)                                                                       \
  X(cuMemPoolSetAttribute, 11020)                                                                  \
  X(cuMemPoolGetAttribute, 11020)                                                                  \
  X(cuMemPoolTrimTo, 11020)                                                                        \
  X(cuMemPoolSetAccess, 11020)                                                                     \
  X(cuMemPoolGetAccess, 11020)                                                                     \
  X(cuDeviceGetDefaultMemPool, 11020)                                                              \
  X(cuDeviceGetMemPool, 11020)                                                                     \
  X(cuDeviceSetMemPool, 11020)                                                                     \
  X(cuStreamCreate, 2000)                                                                          \
  X(cuStreamCreateWithPriority, 5050)                                                              \
  X(cuStreamDestroy, 4000)                                                                         \
  X(cuEventCreate, 2000)                                                                           \
  X(cuEventQuery, 2000)                                                                            \
  X(cuEventSynchronize, 2000)                                                                      \
  X(cuEventElapsedTime, 12080)                                                                     \
  X(cuEventDestroy, 4000)                                                                          \
  X(cuProfilerStart, 4000)                                                                         \
  X(cuProfilerStop, 4000)                                                                          \
  P(cuLaunchKernel, 4000, 7000)                                                                    \
  P(cuLaunchKernelEx, 11060, 11060)                                                                \
  P(cuLaunchCooperativeKernel, 9000, 9000)                                                         \
  P(cuLaunchHostFunc, 10000, 10000)                                                                \
  P(cuMemcpy, 4000, 7000)                                                                          \
  P(cuMemcpyAsync, 4000, 7000)                                                                     \
  P(cuMemcpyHtoD, 3020, 7000)                                                                      \
  P(cuMemcpyDtoH, 3020, 7000)                                                                      \
  P(cuMemcpyDtoD, 3020, 7000)                                                                      \
  P(cuMemcpyHtoDAsync, 3020, 7000)                                                                 \
  P(cuMemcpyDtoHAsync, 3020, 7000)                                                                 \
  P(cuMemcpyDtoDAsync, 3020, 7000)                                                                 \
  P(cuMemcpy2D, 3020, 7000)                                                                        \
  P(cuMemcpy2DAsync, 3020, 7000)                                                                   \
  P(cuMemsetD8, 3020, 7000)                                                                        \
  P(cuMemsetD8Async, 3020, 7000)                                                                   \
  P(cuMemsetD2D8, 3020, 7000)                                                                      \
  P(cuMemsetD2D8Async, 3020, 7000)                                                                 \
  P(cuMemAllocAsync, 11020, 11020)                                                                 \
  P(cuMemFreeAsync, 11020, 11020)                                                                  \
  P(cuMemAllocFromPoolAsync, 11020, 11020)                                                         \
  P(cuMemPrefetchAsync, 12020, 12020)                                                              \
  P(cuStreamSynchronize, 2000, 7000)                                                               \
  P(cuStreamQuery, 2000, 7000)                                                                     \
  P(cuStreamWaitEvent, 3020, 7000)                                                                 \
  P(cuStreamAddCallback, 5000, 7000)                                                               \
  P(cuStreamGetPriority, 5050, 7000)                                                               \
  P(cuStreamGetFlags, 5050, 7000)                                                                  \
  P(cuStreamGetId, 12000, 12000)                                                                   \
  P(cuStreamGetDevice, 12080, 12080)                                                               \
  P(cuStreamAttachMemAsync, 6000, 7000)                                                            \
  P(cuStreamIsCapturing, 10000, 10000)                                                             \
  P(cuEventRecord, 2000, 7000)                                                                     \
  P(cuEventRecordWithFlags, 11010, 11010)                                                          \
  X(cuThreadExchangeStreamCaptureMode, 10010)                                                      \
  X(cuGraphCreate, 10000)                                                                          \
  X(cuGraphDestroy, 10000)                                                                         \
  X(cuGraphClone, 10000)                                                                           \
  X(cuGraphNodeFindInClone, 10000)                                                                 \
  X(cuGraphNodeGetType, 10000)                                                                     \
  X(cuGraphGetNodes, 10000)                                                                        \
  X(cuGraphGetRootNodes, 10000)                                                                    \
  X(cuGraphGetEdges, 12030)                                                                        \
  X(cuGraphNodeGetDependencies, 12030)                                                             \
  X(cuGraphNodeGetDependentNodes, 12030)                                                           \
  X(cuGraphAddDependencies, 12030)                                                                 \
  X(cuGraphRemoveDependencies, 12030)                                                              \
  X(cuGraphDestroyNode, 10000)                                                                     \
  X(cuGraphAddKernelNode, 12000)                                                                   \
  X(cuGraphKernelNodeGetParams, 12000)                                                             \
  X(cuGraphKernelNodeSetParams, 12000)                                                             \
  X(cuGraphAddMemcpyNode, 10000)                                                                   \
  X(cuGraphMemcpyNodeGetParams, 10000)                                                             \
  X(cuGraphMemcpyNodeSetParams, 10000)                                                             \
  X(cuGraphAddMemsetNode, 10000)                                                                   \
  X(cuGraphMemsetNodeGetParams, 10000)                                                             \
  X(cuGraphMemsetNodeSetParams, 10000)                                                             \
  X(cuGraphAddHostNode, 10000)                                                                     \
  X(cuGraphHostNodeGetParams, 10000)                                                               \
  X(cuGraphHostNodeSetParams, 10000)                                                               \
  X(cuGraphAddChildGraphNode, 10000)                                                               \
  X(cuGraphChildGraphNodeGetGraph, 10000)                                                          \
  X(cuGraphAddEmptyNode, 10000)                                                                    \
  X(cuGraphAddEventRecordNode, 11010)                                                              \
  X(cuGraphEventRecordNodeGetEvent, 11010)                                                         \
  X(cuGraphEventRecordNodeSetEvent, 11010)                                                         \
  X(cuGraphAddEventWaitNode, 11010)                                                                \
  X(cuGraphEventWaitNodeGetEvent, 11010)                                                           \
  X(cuGraphEventWaitNodeSetEvent, 11010)                                                           \
  X(cuGraphAddMemAllocNode, 11040)                                                                 \
  X(cuGraphMemAllocNodeGetParams, 11040)                                                           \
  X(cuGraphAddMemFreeNode, 11040)                                                                  \
  X(cuGraphMemFreeNodeGetParams, 11040)                                                            \
  X(cuGraphInstantiateWithFlags, 11040)                                                            \
  X(cuGraphExecGetFlags, 12000)                                                                    \
  X(cuGraphExecDestroy, 10000)                                                                     \
  X(cuGraphExecKernelNodeSetParams, 12000)                                                         \
  X(cuGraphExecMemcpyNodeSetParams, 10020)                                                         \
  X(cuGraphExecMemsetNodeSetParams, 10020)                                                         \
  X(cuGraphExecHostNodeSetParams, 10020)                                                           \
  X(cuGraphExecChildGraphNodeSetParams, 11010)                                                     \
  X(cuGraphExecEventRecordNodeSetEvent, 11010)                                                     \
  X(cuGraphExecEventWaitNodeSetEvent, 11010)                                                       \
  X(cuGraphNodeSetEnabled, 11060)                                                                  \
  X(cuGraphNodeGetEnabled, 11060)                                                                  \
  X(cuGraphExecUpdate, 12000)                                                                      \
  X(cuGraphDebugDotPrint, 11030)                                                                   \
  P(cuStreamBeginCapture, 10010, 10010)                                                            \
  P(cuStreamBeginCaptureToGraph, 12030, 12030)                                                     \
  P(cuStreamEndCapture, 10000, 10000)                                                              \
  P(cuStreamGetCaptureInfo, 12030, 12030)                                                          \
  P(cuStreamUpdateCaptureDependencies, 12030, 12030)                                               \
  P(cuGraphInstantiateWithParams, 12000, 12000)                                                    \
  P(cuGraphUpload, 11010, 11010)                                                                   \
  P(cuGraphLaunch, 10000, 10000)

// Every entry point the runtime uses. A lookup the driver answers "not found" leaves its pointer
// null; calling through call() then yields CUDA_ERROR_NOT_FOUND instead of a jump to 0.
struct DriverTable {
#define HONE_X(name, version) PFN_##name##_v##version name = nullptr;
#define HONE_P(name, version, pt_version)                                                          \
  PFN_##name##_v##version name = nullptr;                                                          \
  PFN_##name##_v##version name##_pt = nullptr;
  HONE_CUDART_DRIVER(HONE_X, HONE_P)
#undef HONE_X
#undef HONE_P
  PFN_cuGetProcAddress_v12000 cuGetProcAddress = nullptr;
};

// The table, filled once by load_driver(); empty (all null) when no driver could be loaded.
const DriverTable& driver();

// dlopen the driver and look every entry point up. CUDA_SUCCESS, or why the driver is missing.
// Safe to call from several threads; only the first call does the work.
CUresult load_driver();

// Call a driver entry point that may be missing.
template <class F, class... A> CUresult call(F f, A... args) {
  return f ? f(args...) : CUDA_ERROR_NOT_FOUND;
}

// The variant of a stream-ordered entry point for a runtime call through a _ptsz/_ptds name.
#define HONE_DRV(per_thread, name) ((per_thread) ? driver().name##_pt : driver().name)

} // namespace hone::cudart
