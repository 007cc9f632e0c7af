// cuda.h as libcuda itself sees it: with __CUDA_API_VERSION_INTERNAL every ABI name (cuMemAlloc_v2,
// the legacy cuGetProcAddress, ...) is declared under its own spelling, so hooks are defined under
// exactly the names they are exported as.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

// Per-thread-default-stream variants, which cuda.h declares only when compiling for them.
extern "C" {
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX,
                                     unsigned int blockDimY, unsigned int blockDimZ,
                                     unsigned int sharedMemBytes, CUstream hStream,
                                     void** kernelParams, void** extra);
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                       void** kernelParams, void** extra);
CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                unsigned int gridDimY, unsigned int gridDimZ,
                                                unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ, unsigned int sharedMemBytes,
                                                CUstream hStream, void** kernelParams);
CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus);
}
