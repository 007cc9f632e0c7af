// The real driver and NVRTC behind the hooks: every function the shim hooks or calls, resolved
// lazily and lock-free (no mutex of ours is ever held around the dynamic linker, so a hook called
// from inside dlopen on another thread cannot deadlock), and the map from a real entry point to
// the hook that stands in for it.
#pragma once

#include <atomic>
#include <cstddef>

namespace hone::shim {

// Hooked: the shim exports these names and returns its hooks for them from dlsym and
// cuGetProcAddress.
#define HONE_SHIM_CU_HOOKS(X)                                                                      \
  X(cuModuleLoad) X(cuModuleLoadData) X(cuModuleLoadDataEx) X(cuModuleLoadFatBinary)               \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuLibraryLoadData) X(cuLibraryLoadFromFile)           \
  X(cuLibraryUnload) X(cuLibraryGetKernel) X(cuLibraryGetModule) X(cuKernelGetFunction)            \
  X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz)            \
  X(cuLaunchCooperativeKernel) X(cuLaunchCooperativeKernel_ptsz) X(cuGetProcAddress)               \
  X(cuGetProcAddress_v2) X(cuStreamBeginCapture) X(cuStreamBeginCapture_ptsz)                      \
  X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz) X(cuStreamBeginCaptureToGraph)        \
  X(cuStreamBeginCaptureToGraph_ptsz) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)             \
  X(cuGraphInstantiate) X(cuGraphInstantiate_v2) X(cuGraphInstantiateWithFlags)                    \
  X(cuGraphInstantiateWithParams) X(cuGraphInstantiateWithParams_ptsz) X(cuGraphLaunch)            \
  X(cuGraphLaunch_ptsz) X(cuGraphExecDestroy) X(cuGraphExecKernelNodeSetParams)                    \
  X(cuGraphExecKernelNodeSetParams_v2) X(cuGraphExecNodeSetParams) X(cuGraphExecUpdate)            \
  X(cuGraphExecUpdate_v2) X(cuGraphExecMemcpyNodeSetParams) X(cuGraphExecMemsetNodeSetParams)      \
  X(cuGraphExecHostNodeSetParams) X(cuGraphExecEventRecordNodeSetEvent)                            \
  X(cuGraphExecEventWaitNodeSetEvent) X(cuGraphExecChildGraphNodeSetParams)                        \
  X(cuGraphNodeSetEnabled) X(cuGraphDestroy) X(cuGraphDestroyNode) X(cuGraphKernelNodeGetParams)   \
  X(cuGraphKernelNodeGetParams_v2) X(cuLinkCreate) X(cuLinkCreate_v2) X(cuLinkAddData)           \
  X(cuLinkAddData_v2) X(cuLinkAddFile) X(cuLinkAddFile_v2) X(cuLinkComplete) X(cuLinkDestroy)

#define HONE_SHIM_NVRTC_HOOKS(X)                                                                   \
  X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcGetPTX) X(nvrtcGetCUBIN)                     \
  X(nvrtcDestroyProgram)

// Called by the shim itself, never hooked.
#define HONE_SHIM_CU_USES(X)                                                                       \
  X(cuFuncGetName) X(cuCtxGetCurrent) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2)                 \
  X(cuEventCreate) X(cuEventRecord) X(cuEventRecord_ptsz) X(cuEventQuery) X(cuEventElapsedTime)    \
  X(cuEventDestroy_v2) X(cuStreamIsCapturing) X(cuStreamIsCapturing_ptsz) X(cuDriverGetVersion)    \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuInit) X(cuFuncGetParamInfo)    \
  X(cuMemGetAddressRange_v2) X(cuMemAllocHost_v2) X(cuMemFreeHost) X(cuMemcpyDtoHAsync_v2)        \
  X(cuMemcpyDtoHAsync_v2_ptsz) X(cuGetErrorString) X(cuKernelGetParamInfo) X(cuGraphGetNodes)       \
  X(cuGraphNodeGetType) X(cuGraphChildGraphNodeGetGraph) X(cuGraphClone) X(cuGraphNodeFindInClone) \
  X(cuGraphKernelNodeSetParams_v2) X(cuGraphNodeGetDependencies) X(cuGraphNodeGetDependentNodes)   \
  X(cuGraphAddMemcpyNode) X(cuGraphAddDependencies) X(cuThreadExchangeStreamCaptureMode)        \
  X(cuModuleGetGlobal_v2) X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemcpyHtoDAsync_v2)                 \
  X(cuMemcpyHtoDAsync_v2_ptsz) X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz)                  \
  X(cuFuncGetAttribute) X(cuFuncSetAttribute)

#define HONE_SHIM_NVRTC_USES(X) X(nvrtcGetPTXSize) X(nvrtcGetCUBINSize)

enum class Fn : unsigned {
#define HONE_X(name) name,
  HONE_SHIM_CU_HOOKS(HONE_X) HONE_SHIM_NVRTC_HOOKS(HONE_X) HONE_SHIM_CU_USES(HONE_X)
      HONE_SHIM_NVRTC_USES(HONE_X)
#undef HONE_X
      count
};

bool is_hooked(Fn f);
bool is_nvrtc(Fn f);
const char* fn_name(Fn f);

namespace detail {
extern std::atomic<void*> g_real[unsigned(Fn::count)] __asm__("hone_shim_real");
void* resolve_real(Fn f);
} // namespace detail

// The real entry point, resolved on first use; nullptr when no driver (or NVRTC) provides it.
// Inline: after the first call it is one load on the launch path.
inline void* real(Fn f) {
  void* p = detail::g_real[unsigned(f)].load(std::memory_order_acquire);
  return __builtin_expect(p != nullptr, 1) ? p : detail::resolve_real(f);
}
template <class T> T real_as(Fn f) { return reinterpret_cast<T>(real(f)); }

// Record `p` as the real entry point when none is known yet (an application that dlopened the
// driver or NVRTC from its own path hands the shim the library through dlsym).
void adopt_real(Fn f, void* p);

// The hook standing in for `f`.
void* hook_of(Fn f);
// The hooked function named `name`, or -1.
int hooked_index(const char* name);
// The hook for a real entry point the driver handed out (cuGetProcAddress); nullptr when `p` is
// not one the shim hooks.
void* hook_for_real(void* p);

// glibc's dlsym, found with dlvsym(RTLD_NEXT, ...): the shim's own lookups never go through its
// dlsym override.
using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym();

} // namespace hone::shim
