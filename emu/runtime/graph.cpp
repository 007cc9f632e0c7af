// CUDA graphs and stream capture: cudaGraph*, cudaStream*Capture*.
//
// Graph, node and executable-graph handles are the driver's (cudaGraph_t is a CUgraph, and so on),
// so most entry points convert their parameter structs and pass through. What the runtime adds:
// a kernel node names its kernel by its host function (the symbol `kernel<<<>>>` uses), which is
// resolved to the registered CUkernel here and back again when the node is read; and the copy
// and memset parameter structs, which differ from the driver's in layout.
#include "emu/runtime/runtime.hpp"

#include <cstring>
#include <vector>

using namespace hone::cudart;

namespace {

CUstream cu(cudaStream_t s) {
  return reinterpret_cast<CUstream>(s);
}
CUevent cu(cudaEvent_t e) {
  return reinterpret_cast<CUevent>(e);
}
CUgraph cu(cudaGraph_t g) {
  return reinterpret_cast<CUgraph>(g);
}
CUgraphNode cu(cudaGraphNode_t n) {
  return reinterpret_cast<CUgraphNode>(n);
}
CUgraphExec cu(cudaGraphExec_t e) {
  return reinterpret_cast<CUgraphExec>(e);
}
CUgraphNode* cu(cudaGraphNode_t* n) {
  return reinterpret_cast<CUgraphNode*>(n);
}
const CUgraphNode* cu(const cudaGraphNode_t* n) {
  return reinterpret_cast<const CUgraphNode*>(n);
}
CUgraphEdgeData* cu(cudaGraphEdgeData* e) {
  return reinterpret_cast<CUgraphEdgeData*>(e);
}
const CUgraphEdgeData* cu(const cudaGraphEdgeData* e) {
  return reinterpret_cast<const CUgraphEdgeData*>(e);
}

static_assert(sizeof(cudaGraphEdgeData) == sizeof(CUgraphEdgeData));
static_assert(int(cudaStreamCaptureModeGlobal) == int(CU_STREAM_CAPTURE_MODE_GLOBAL));
static_assert(int(cudaStreamCaptureModeThreadLocal) == int(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
static_assert(int(cudaStreamCaptureModeRelaxed) == int(CU_STREAM_CAPTURE_MODE_RELAXED));
static_assert(int(cudaStreamCaptureStatusInvalidated) ==
              int(CU_STREAM_CAPTURE_STATUS_INVALIDATED));
static_assert(int(cudaGraphNodeTypeKernel) == int(CU_GRAPH_NODE_TYPE_KERNEL));
static_assert(int(cudaGraphNodeTypeMemFree) == int(CU_GRAPH_NODE_TYPE_MEM_FREE));
static_assert(int(cudaGraphNodeTypeConditional) == int(CU_GRAPH_NODE_TYPE_CONDITIONAL));
static_assert(int(cudaGraphExecUpdateErrorAttributesChanged) ==
              int(CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED));
static_assert(int(cudaGraphInstantiateMultipleDevicesNotSupported) ==
              int(CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED));
static_assert(sizeof(cudaMemPoolProps) == sizeof(CUmemPoolProps));
static_assert(sizeof(cudaMemAccessDesc) == sizeof(CUmemAccessDesc));

CUcontext current_context() {
  CUcontext ctx = nullptr;
  call(driver().cuCtxGetCurrent, &ctx);
  return ctx;
}

// --- kernel nodes -------------------------------------------------------------------------------

// The driver's form of a kernel node: the registered kernel's CUkernel (as the runtime launches
// it), checked the way a launch is.
cudaError_t to_driver(const cudaKernelNodeParams& in, CUDA_KERNEL_NODE_PARAMS& out) {
  KernelInfo* k = nullptr;
  if (cudaError_t e = kernel_of(in.func, k)) return e;
  if (cudaError_t e = check_config(in.gridDim, in.blockDim)) return e;
  if (in.extra == nullptr) {
    if (cudaError_t e = check_args(*k, in.kernelParams)) return e;
  }
  out = CUDA_KERNEL_NODE_PARAMS{};
  // The context-independent kernel, which the driver keeps and hands back when the node is read.
  out.kern = k->kernel;
  out.ctx = current_context();
  out.gridDimX = in.gridDim.x;
  out.gridDimY = in.gridDim.y;
  out.gridDimZ = in.gridDim.z;
  out.blockDimX = in.blockDim.x;
  out.blockDimY = in.blockDim.y;
  out.blockDimZ = in.blockDim.z;
  out.sharedMemBytes = in.sharedMemBytes;
  out.kernelParams = in.kernelParams;
  out.extra = in.extra;
  return cudaSuccess;
}

// A node the driver holds, in the runtime's terms: the host function of a registered kernel; a
// function the application made itself (a driver-API CUfunction) is handed back as it is.
void from_driver(const CUDA_KERNEL_NODE_PARAMS& in, cudaKernelNodeParams& out) {
  void* func = reinterpret_cast<void*>(in.func);
  if (KernelInfo* k = kernel_by_handle(in.kern)) {
    func = const_cast<void*>(k->host_fun);
  } else if (KernelInfo* k = kernel_by_handle(reinterpret_cast<CUkernel>(in.func))) {
    func = const_cast<void*>(k->host_fun); // a captured <<<>>> launch: the CUkernel as function
  }
  out.func = func;
  out.gridDim = dim3(in.gridDimX, in.gridDimY, in.gridDimZ);
  out.blockDim = dim3(in.blockDimX, in.blockDimY, in.blockDimZ);
  out.sharedMemBytes = in.sharedMemBytes;
  out.kernelParams = in.kernelParams;
  out.extra = in.extra;
}

// --- copies and memsets -------------------------------------------------------------------------

cudaError_t memory_types(cudaMemcpyKind kind, CUmemorytype& src, CUmemorytype& dst) {
  switch (kind) {
  case cudaMemcpyHostToHost: src = dst = CU_MEMORYTYPE_HOST; return cudaSuccess;
  case cudaMemcpyHostToDevice:
    src = CU_MEMORYTYPE_HOST;
    dst = CU_MEMORYTYPE_DEVICE;
    return cudaSuccess;
  case cudaMemcpyDeviceToHost:
    src = CU_MEMORYTYPE_DEVICE;
    dst = CU_MEMORYTYPE_HOST;
    return cudaSuccess;
  case cudaMemcpyDeviceToDevice: src = dst = CU_MEMORYTYPE_DEVICE; return cudaSuccess;
  case cudaMemcpyDefault: src = dst = CU_MEMORYTYPE_UNIFIED; return cudaSuccess;
  }
  return cudaErrorInvalidMemcpyDirection;
}

void set_side(CUmemorytype type, void* ptr, const void*& host_in, void*& host_out,
              CUdeviceptr& device, bool source) {
  if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED) {
    device = reinterpret_cast<CUdeviceptr>(ptr);
  }
  if (type == CU_MEMORYTYPE_HOST || type == CU_MEMORYTYPE_UNIFIED) {
    if (source) {
      host_in = ptr;
    } else {
      host_out = ptr;
    }
  }
}

// cudaMemcpy3DParms of linear memory (the emulated device has no CUDA arrays).
cudaError_t to_driver(const cudaMemcpy3DParms& in, CUDA_MEMCPY3D& out) {
  if (in.srcArray != nullptr || in.dstArray != nullptr) {
    warn_once("graphs: memcpy nodes of CUDA arrays are not supported on the emulated device");
    return cudaErrorNotSupported;
  }
  out = CUDA_MEMCPY3D{};
  CUmemorytype src = CU_MEMORYTYPE_HOST, dst = CU_MEMORYTYPE_HOST;
  if (cudaError_t e = memory_types(in.kind, src, dst)) return e;
  out.srcMemoryType = src;
  out.dstMemoryType = dst;
  const void* unused_in = nullptr;
  void* unused_out = nullptr;
  set_side(src, in.srcPtr.ptr, out.srcHost, unused_out, out.srcDevice, true);
  set_side(dst, in.dstPtr.ptr, unused_in, out.dstHost, out.dstDevice, false);
  out.srcXInBytes = in.srcPos.x;
  out.srcY = in.srcPos.y;
  out.srcZ = in.srcPos.z;
  out.srcPitch = in.srcPtr.pitch;
  out.srcHeight = in.srcPtr.ysize;
  out.dstXInBytes = in.dstPos.x;
  out.dstY = in.dstPos.y;
  out.dstZ = in.dstPos.z;
  out.dstPitch = in.dstPtr.pitch;
  out.dstHeight = in.dstPtr.ysize;
  out.WidthInBytes = in.extent.width;
  out.Height = in.extent.height;
  out.Depth = in.extent.depth;
  return cudaSuccess;
}

cudaMemcpyKind kind_of(CUmemorytype src, CUmemorytype dst) {
  if (src == CU_MEMORYTYPE_UNIFIED || dst == CU_MEMORYTYPE_UNIFIED) return cudaMemcpyDefault;
  const bool from_device = src == CU_MEMORYTYPE_DEVICE;
  const bool to_device = dst == CU_MEMORYTYPE_DEVICE;
  if (from_device) return to_device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost;
  return to_device ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost;
}

void from_driver(const CUDA_MEMCPY3D& in, cudaMemcpy3DParms& out) {
  out = cudaMemcpy3DParms{};
  out.kind = kind_of(in.srcMemoryType, in.dstMemoryType);
  out.srcPtr.ptr = in.srcMemoryType == CU_MEMORYTYPE_HOST ? const_cast<void*>(in.srcHost)
                                                          : reinterpret_cast<void*>(in.srcDevice);
  out.dstPtr.ptr =
      in.dstMemoryType == CU_MEMORYTYPE_HOST ? in.dstHost : reinterpret_cast<void*>(in.dstDevice);
  out.srcPos = cudaPos{in.srcXInBytes, in.srcY, in.srcZ};
  out.dstPos = cudaPos{in.dstXInBytes, in.dstY, in.dstZ};
  out.srcPtr.pitch = in.srcPitch;
  out.srcPtr.ysize = in.srcHeight;
  out.srcPtr.xsize = in.WidthInBytes;
  out.dstPtr.pitch = in.dstPitch;
  out.dstPtr.ysize = in.dstHeight;
  out.dstPtr.xsize = in.WidthInBytes;
  out.extent = cudaExtent{in.WidthInBytes, in.Height, in.Depth};
}

// A one-dimensional copy as the 3D parameters the driver takes.
cudaError_t copy_1d(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                    CUDA_MEMCPY3D& out) {
  cudaMemcpy3DParms p{};
  p.srcPtr = cudaPitchedPtr{const_cast<void*>(src), count, count, 1};
  p.dstPtr = cudaPitchedPtr{dst, count, count, 1};
  p.extent = cudaExtent{count, 1, 1};
  p.kind = kind;
  return to_driver(p, out);
}

CUDA_MEMSET_NODE_PARAMS to_driver(const cudaMemsetParams& in) {
  CUDA_MEMSET_NODE_PARAMS out{};
  out.dst = reinterpret_cast<CUdeviceptr>(in.dst);
  out.pitch = in.pitch;
  out.value = in.value;
  out.elementSize = in.elementSize;
  out.width = in.width;
  out.height = in.height;
  return out;
}

void from_driver(const CUDA_MEMSET_NODE_PARAMS& in, cudaMemsetParams& out) {
  out.dst = reinterpret_cast<void*>(in.dst);
  out.pitch = in.pitch;
  out.value = in.value;
  out.elementSize = in.elementSize;
  out.width = in.width;
  out.height = in.height;
}

CUDA_HOST_NODE_PARAMS to_driver(const cudaHostNodeParams& in) {
  CUDA_HOST_NODE_PARAMS out{};
  out.fn = in.fn;
  out.userData = in.userData;
  return out;
}

CUDA_MEM_ALLOC_NODE_PARAMS to_driver(const cudaMemAllocNodeParams& in) {
  CUDA_MEM_ALLOC_NODE_PARAMS out{};
  std::memcpy(&out.poolProps, &in.poolProps, sizeof out.poolProps);
  out.accessDescs = reinterpret_cast<const CUmemAccessDesc*>(in.accessDescs);
  out.accessDescCount = in.accessDescCount;
  out.bytesize = in.bytesize;
  return out;
}

void from_driver(const CUDA_MEM_ALLOC_NODE_PARAMS& in, cudaMemAllocNodeParams& out) {
  std::memcpy(&out.poolProps, &in.poolProps, sizeof out.poolProps);
  out.accessDescs = reinterpret_cast<const cudaMemAccessDesc*>(in.accessDescs);
  out.accessDescCount = in.accessDescCount;
  out.bytesize = in.bytesize;
  out.dptr = reinterpret_cast<void*>(in.dptr);
}

// Every entry point below needs a context; the ones that name a stream or a kernel need it to be
// the application's (ensure_context makes the device's primary context current when none is).
#define HONE_CONTEXT()                                                                             \
  if (cudaError_t e = ensure_context()) return e

} // namespace

// --- stream capture
// --------------------------------------------------------------------------------

HONE_CUDART_PAIR(cudaStreamBeginCapture, _ptsz,
                 (cudaStream_t stream, cudaStreamCaptureMode mode), (stream, mode)) {
  HONE_CONTEXT();
  return to_cuda(call(HONE_DRV(per_thread, cuStreamBeginCapture), cu(stream),
                      CUstreamCaptureMode(mode)));
}

HONE_CUDART_PAIR(cudaStreamBeginCaptureToGraph, _ptsz,
                 (cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                  const cudaGraphEdgeData* dependencyData, size_t numDependencies,
                  cudaStreamCaptureMode mode),
                 (stream, graph, dependencies, dependencyData, numDependencies, mode)) {
  HONE_CONTEXT();
  return to_cuda(call(HONE_DRV(per_thread, cuStreamBeginCaptureToGraph), cu(stream), cu(graph),
                      cu(dependencies), cu(dependencyData), numDependencies,
                      CUstreamCaptureMode(mode)));
}

HONE_CUDART_PAIR(cudaStreamEndCapture, _ptsz, (cudaStream_t stream, cudaGraph_t* pGraph),
                 (stream, pGraph)) {
  if (pGraph == nullptr) return cudaErrorInvalidValue;
  HONE_CONTEXT();
  return to_cuda(call(HONE_DRV(per_thread, cuStreamEndCapture), cu(stream),
                      reinterpret_cast<CUgraph*>(pGraph)));
}

HONE_CUDART_PAIR(cudaStreamGetCaptureInfo, _ptsz,
                 (cudaStream_t stream, cudaStreamCaptureStatus* captureStatus_out,
                  unsigned long long* id_out, cudaGraph_t* graph_out,
                  const cudaGraphNode_t** dependencies_out,
                  const cudaGraphEdgeData** edgeData_out, size_t* numDependencies_out),
                 (stream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                  numDependencies_out)) {
  if (captureStatus_out == nullptr) return cudaErrorInvalidValue;
  HONE_CONTEXT();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUresult r = call(HONE_DRV(per_thread, cuStreamGetCaptureInfo), cu(stream), &status,
                    id_out ? &id : nullptr, reinterpret_cast<CUgraph*>(graph_out),
                    reinterpret_cast<const CUgraphNode**>(dependencies_out),
                    reinterpret_cast<const CUgraphEdgeData**>(edgeData_out), numDependencies_out);
  if (r != CUDA_SUCCESS) return to_cuda(r);
  *captureStatus_out = cudaStreamCaptureStatus(status);
  if (id_out) *id_out = id;
  return cudaSuccess;
}

HONE_CUDART_PAIR(cudaStreamUpdateCaptureDependencies, _ptsz,
                 (cudaStream_t stream, cudaGraphNode_t* dependencies,
                  const cudaGraphEdgeData* dependencyData, size_t numDependencies, unsigned flags),
                 (stream, dependencies, dependencyData, numDependencies, flags)) {
  HONE_CONTEXT();
  return to_cuda(call(HONE_DRV(per_thread, cuStreamUpdateCaptureDependencies), cu(stream),
                      cu(dependencies), cu(dependencyData), numDependencies, flags));
}

HONE_CUDART_API cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  return api([&] {
    if (mode == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = init()) return e;
    return to_cuda(call(driver().cuThreadExchangeStreamCaptureMode,
                        reinterpret_cast<CUstreamCaptureMode*>(mode)));
  });
}

// --- graphs
// ----------------------------------------------------------------------------------------

HONE_CUDART_API cudaError_t cudaGraphCreate(cudaGraph_t* pGraph, unsigned flags) {
  return api([&] {
    if (pGraph == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphCreate, reinterpret_cast<CUgraph*>(pGraph), flags));
  });
}

HONE_CUDART_API cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphDestroy, cu(graph)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphClone(cudaGraph_t* pGraphClone, cudaGraph_t originalGraph) {
  return api([&] {
    if (pGraphClone == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphClone, reinterpret_cast<CUgraph*>(pGraphClone),
                        cu(originalGraph)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphNodeFindInClone(cudaGraphNode_t* pNode,
                                                     cudaGraphNode_t originalNode,
                                                     cudaGraph_t clonedGraph) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(
        call(driver().cuGraphNodeFindInClone, cu(pNode), cu(originalNode), cu(clonedGraph)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* pType) {
  return api([&] {
    if (pType == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
    if (CUresult r = call(driver().cuGraphNodeGetType, cu(node), &t)) return to_cuda(r);
    *pType = cudaGraphNodeType(t);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes,
                                              size_t* numNodes) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphGetNodes, cu(graph), cu(nodes), numNodes));
  });
}

HONE_CUDART_API cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* pRootNodes,
                                                  size_t* pNumRootNodes) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphGetRootNodes, cu(graph), cu(pRootNodes), pNumRootNodes));
  });
}

HONE_CUDART_API cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from,
                                              cudaGraphNode_t* to, cudaGraphEdgeData* edgeData,
                                              size_t* numEdges) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(
        call(driver().cuGraphGetEdges, cu(graph), cu(from), cu(to), cu(edgeData), numEdges));
  });
}

HONE_CUDART_API cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node,
                                                         cudaGraphNode_t* pDependencies,
                                                         cudaGraphEdgeData* edgeData,
                                                         size_t* pNumDependencies) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphNodeGetDependencies, cu(node), cu(pDependencies),
                        cu(edgeData), pNumDependencies));
  });
}

HONE_CUDART_API cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node,
                                                           cudaGraphNode_t* pDependentNodes,
                                                           cudaGraphEdgeData* edgeData,
                                                           size_t* pNumDependentNodes) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphNodeGetDependentNodes, cu(node), cu(pDependentNodes),
                        cu(edgeData), pNumDependentNodes));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddDependencies(cudaGraph_t graph,
                                                     const cudaGraphNode_t* from,
                                                     const cudaGraphNode_t* to,
                                                     const cudaGraphEdgeData* edgeData,
                                                     size_t numDependencies) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphAddDependencies, cu(graph), cu(from), cu(to),
                        cu(edgeData), numDependencies));
  });
}

HONE_CUDART_API cudaError_t cudaGraphRemoveDependencies(cudaGraph_t graph,
                                                        const cudaGraphNode_t* from,
                                                        const cudaGraphNode_t* to,
                                                        const cudaGraphEdgeData* edgeData,
                                                        size_t numDependencies) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphRemoveDependencies, cu(graph), cu(from), cu(to),
                        cu(edgeData), numDependencies));
  });
}

HONE_CUDART_API cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphDestroyNode, cu(node)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path,
                                                   unsigned flags) {
  return api([&] {
    if (path == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphDebugDotPrint, cu(graph), path, flags));
  });
}

// --- nodes
// -----------------------------------------------------------------------------------------

HONE_CUDART_API cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                   const cudaGraphNode_t* pDependencies,
                                                   size_t numDependencies,
                                                   const cudaKernelNodeParams* pNodeParams) {
  return api([&] {
    if (pGraphNode == nullptr || pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_KERNEL_NODE_PARAMS p{};
    if (cudaError_t e = to_driver(*pNodeParams, p)) return e;
    return to_cuda(call(driver().cuGraphAddKernelNode, cu(pGraphNode), cu(graph),
                        cu(pDependencies), numDependencies, &p));
  });
}

HONE_CUDART_API cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node,
                                                         cudaKernelNodeParams* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_KERNEL_NODE_PARAMS p{};
    if (CUresult r = call(driver().cuGraphKernelNodeGetParams, cu(node), &p)) return to_cuda(r);
    from_driver(p, *pNodeParams);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
                                                         const cudaKernelNodeParams* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_KERNEL_NODE_PARAMS p{};
    if (cudaError_t e = to_driver(*pNodeParams, p)) return e;
    return to_cuda(call(driver().cuGraphKernelNodeSetParams, cu(node), &p));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                   const cudaGraphNode_t* pDependencies,
                                                   size_t numDependencies,
                                                   const cudaMemcpy3DParms* pCopyParams) {
  return api([&] {
    if (pGraphNode == nullptr || pCopyParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEMCPY3D p{};
    if (cudaError_t e = to_driver(*pCopyParams, p)) return e;
    return to_cuda(call(driver().cuGraphAddMemcpyNode, cu(pGraphNode), cu(graph),
                        cu(pDependencies), numDependencies, &p, current_context()));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* pGraphNode,
                                                     cudaGraph_t graph,
                                                     const cudaGraphNode_t* pDependencies,
                                                     size_t numDependencies, void* dst,
                                                     const void* src, size_t count,
                                                     cudaMemcpyKind kind) {
  return api([&] {
    if (pGraphNode == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEMCPY3D p{};
    if (cudaError_t e = copy_1d(dst, src, count, kind, p)) return e;
    return to_cuda(call(driver().cuGraphAddMemcpyNode, cu(pGraphNode), cu(graph),
                        cu(pDependencies), numDependencies, &p, current_context()));
  });
}

HONE_CUDART_API cudaError_t cudaGraphMemcpyNodeGetParams(cudaGraphNode_t node,
                                                         cudaMemcpy3DParms* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEMCPY3D p{};
    if (CUresult r = call(driver().cuGraphMemcpyNodeGetParams, cu(node), &p)) return to_cuda(r);
    from_driver(p, *pNodeParams);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node,
                                                         const cudaMemcpy3DParms* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEMCPY3D p{};
    if (cudaError_t e = to_driver(*pNodeParams, p)) return e;
    return to_cuda(call(driver().cuGraphMemcpyNodeSetParams, cu(node), &p));
  });
}

HONE_CUDART_API cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void* dst,
                                                           const void* src, size_t count,
                                                           cudaMemcpyKind kind) {
  return api([&] {
    HONE_CONTEXT();
    CUDA_MEMCPY3D p{};
    if (cudaError_t e = copy_1d(dst, src, count, kind, p)) return e;
    return to_cuda(call(driver().cuGraphMemcpyNodeSetParams, cu(node), &p));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                   const cudaGraphNode_t* pDependencies,
                                                   size_t numDependencies,
                                                   const cudaMemsetParams* pMemsetParams) {
  return api([&] {
    if (pGraphNode == nullptr || pMemsetParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEMSET_NODE_PARAMS p = to_driver(*pMemsetParams);
    return to_cuda(call(driver().cuGraphAddMemsetNode, cu(pGraphNode), cu(graph),
                        cu(pDependencies), numDependencies, &p, current_context()));
  });
}

HONE_CUDART_API cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node,
                                                         cudaMemsetParams* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEMSET_NODE_PARAMS p{};
    if (CUresult r = call(driver().cuGraphMemsetNodeGetParams, cu(node), &p)) return to_cuda(r);
    from_driver(p, *pNodeParams);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGraphMemsetNodeSetParams(cudaGraphNode_t node,
                                                         const cudaMemsetParams* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEMSET_NODE_PARAMS p = to_driver(*pNodeParams);
    return to_cuda(call(driver().cuGraphMemsetNodeSetParams, cu(node), &p));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                 const cudaGraphNode_t* pDependencies,
                                                 size_t numDependencies,
                                                 const cudaHostNodeParams* pNodeParams) {
  return api([&] {
    if (pGraphNode == nullptr || pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_HOST_NODE_PARAMS p = to_driver(*pNodeParams);
    return to_cuda(call(driver().cuGraphAddHostNode, cu(pGraphNode), cu(graph), cu(pDependencies),
                        numDependencies, &p));
  });
}

HONE_CUDART_API cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node,
                                                       cudaHostNodeParams* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_HOST_NODE_PARAMS p{};
    if (CUresult r = call(driver().cuGraphHostNodeGetParams, cu(node), &p)) return to_cuda(r);
    pNodeParams->fn = p.fn;
    pNodeParams->userData = p.userData;
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node,
                                                       const cudaHostNodeParams* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_HOST_NODE_PARAMS p = to_driver(*pNodeParams);
    return to_cuda(call(driver().cuGraphHostNodeSetParams, cu(node), &p));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* pGraphNode,
                                                       cudaGraph_t graph,
                                                       const cudaGraphNode_t* pDependencies,
                                                       size_t numDependencies,
                                                       cudaGraph_t childGraph) {
  return api([&] {
    if (pGraphNode == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphAddChildGraphNode, cu(pGraphNode), cu(graph),
                        cu(pDependencies), numDependencies, cu(childGraph)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t node,
                                                            cudaGraph_t* pGraph) {
  return api([&] {
    if (pGraph == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphChildGraphNodeGetGraph, cu(node),
                        reinterpret_cast<CUgraph*>(pGraph)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                                  const cudaGraphNode_t* pDependencies,
                                                  size_t numDependencies) {
  return api([&] {
    if (pGraphNode == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphAddEmptyNode, cu(pGraphNode), cu(graph),
                        cu(pDependencies), numDependencies));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t* pGraphNode,
                                                        cudaGraph_t graph,
                                                        const cudaGraphNode_t* pDependencies,
                                                        size_t numDependencies,
                                                        cudaEvent_t event) {
  return api([&] {
    if (pGraphNode == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphAddEventRecordNode, cu(pGraphNode), cu(graph),
                        cu(pDependencies), numDependencies, cu(event)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node,
                                                             cudaEvent_t* event_out) {
  return api([&] {
    if (event_out == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphEventRecordNodeGetEvent, cu(node),
                        reinterpret_cast<CUevent*>(event_out)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphEventRecordNodeSetEvent(cudaGraphNode_t node,
                                                             cudaEvent_t event) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphEventRecordNodeSetEvent, cu(node), cu(event)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t* pGraphNode,
                                                      cudaGraph_t graph,
                                                      const cudaGraphNode_t* pDependencies,
                                                      size_t numDependencies, cudaEvent_t event) {
  return api([&] {
    if (pGraphNode == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphAddEventWaitNode, cu(pGraphNode), cu(graph),
                        cu(pDependencies), numDependencies, cu(event)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphEventWaitNodeGetEvent(cudaGraphNode_t node,
                                                           cudaEvent_t* event_out) {
  return api([&] {
    if (event_out == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphEventWaitNodeGetEvent, cu(node),
                        reinterpret_cast<CUevent*>(event_out)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphEventWaitNodeSetEvent(cudaGraphNode_t node,
                                                           cudaEvent_t event) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphEventWaitNodeSetEvent, cu(node), cu(event)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* pGraphNode,
                                                     cudaGraph_t graph,
                                                     const cudaGraphNode_t* pDependencies,
                                                     size_t numDependencies,
                                                     cudaMemAllocNodeParams* nodeParams) {
  return api([&] {
    if (pGraphNode == nullptr || nodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEM_ALLOC_NODE_PARAMS p = to_driver(*nodeParams);
    CUresult r = call(driver().cuGraphAddMemAllocNode, cu(pGraphNode), cu(graph),
                      cu(pDependencies), numDependencies, &p);
    if (r != CUDA_SUCCESS) return to_cuda(r);
    nodeParams->dptr = reinterpret_cast<void*>(p.dptr);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGraphMemAllocNodeGetParams(cudaGraphNode_t node,
                                                           cudaMemAllocNodeParams* params_out) {
  return api([&] {
    if (params_out == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEM_ALLOC_NODE_PARAMS p{};
    if (CUresult r = call(driver().cuGraphMemAllocNodeGetParams, cu(node), &p)) return to_cuda(r);
    from_driver(p, *params_out);
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* pGraphNode,
                                                    cudaGraph_t graph,
                                                    const cudaGraphNode_t* pDependencies,
                                                    size_t numDependencies, void* dptr) {
  return api([&] {
    if (pGraphNode == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphAddMemFreeNode, cu(pGraphNode), cu(graph),
                        cu(pDependencies), numDependencies, reinterpret_cast<CUdeviceptr>(dptr)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphMemFreeNodeGetParams(cudaGraphNode_t node, void* dptr_out) {
  return api([&] {
    if (dptr_out == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphMemFreeNodeGetParams, cu(node),
                        static_cast<CUdeviceptr*>(dptr_out)));
  });
}

// cudaGraphAddNode and cudaGraphNodeSetParams/cudaGraphExecNodeSetParams take one struct for
// every kind of node; each kind goes through its own entry point above.
namespace {

cudaError_t add_node(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                     size_t count, cudaGraphNodeParams& p) {
  switch (p.type) {
  case cudaGraphNodeTypeKernel: {
    cudaKernelNodeParams k{p.kernel.func,           dim3(p.kernel.gridDim), dim3(p.kernel.blockDim),
                           p.kernel.sharedMemBytes, p.kernel.kernelParams,  p.kernel.extra};
    return cudaGraphAddKernelNode(out, graph, deps, count, &k);
  }
  case cudaGraphNodeTypeMemcpy:
    return cudaGraphAddMemcpyNode(out, graph, deps, count, &p.memcpy.copyParams);
  case cudaGraphNodeTypeMemset: {
    cudaMemsetParams m{p.memset.dst,   p.memset.pitch, p.memset.value, p.memset.elementSize,
                       p.memset.width, p.memset.height};
    return cudaGraphAddMemsetNode(out, graph, deps, count, &m);
  }
  case cudaGraphNodeTypeHost: {
    cudaHostNodeParams h{p.host.fn, p.host.userData};
    return cudaGraphAddHostNode(out, graph, deps, count, &h);
  }
  case cudaGraphNodeTypeGraph:
    return cudaGraphAddChildGraphNode(out, graph, deps, count, p.graph.graph);
  case cudaGraphNodeTypeEmpty: return cudaGraphAddEmptyNode(out, graph, deps, count);
  case cudaGraphNodeTypeWaitEvent:
    return cudaGraphAddEventWaitNode(out, graph, deps, count, p.eventWait.event);
  case cudaGraphNodeTypeEventRecord:
    return cudaGraphAddEventRecordNode(out, graph, deps, count, p.eventRecord.event);
  case cudaGraphNodeTypeMemAlloc: {
    cudaMemAllocNodeParams a{};
    a.poolProps = p.alloc.poolProps;
    a.accessDescs = p.alloc.accessDescs;
    a.accessDescCount = p.alloc.accessDescCount;
    a.bytesize = p.alloc.bytesize;
    cudaError_t e = cudaGraphAddMemAllocNode(out, graph, deps, count, &a);
    if (e == cudaSuccess) p.alloc.dptr = a.dptr;
    return e;
  }
  case cudaGraphNodeTypeMemFree:
    return cudaGraphAddMemFreeNode(out, graph, deps, count, p.free.dptr);
  default:
    warn_once("graphs: node type " + std::to_string(int(p.type)) +
              " is not supported on the emulated device");
    return cudaErrorNotSupported;
  }
}

} // namespace

HONE_CUDART_API cudaError_t cudaGraphAddNode(cudaGraphNode_t* pGraphNode, cudaGraph_t graph,
                                             const cudaGraphNode_t* pDependencies,
                                             const cudaGraphEdgeData* dependencyData,
                                             size_t numDependencies,
                                             cudaGraphNodeParams* nodeParams) {
  return api([&] {
    if (pGraphNode == nullptr || nodeParams == nullptr) return cudaErrorInvalidValue;
    if (dependencyData != nullptr) {
      for (size_t i = 0; i < numDependencies; ++i) {
        const cudaGraphEdgeData& d = dependencyData[i];
        if (d.type != cudaGraphDependencyTypeDefault || d.from_port != 0 || d.to_port != 0) {
          warn_once("graphs: only default edges are supported on the emulated device");
          return cudaErrorNotSupported;
        }
      }
    }
    return add_node(pGraphNode, graph, pDependencies, numDependencies, *nodeParams);
  });
}

// --- executable graphs
// -----------------------------------------------------------------------------

HONE_CUDART_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph,
                                                 unsigned long long flags) {
  return api([&] {
    if (pGraphExec == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphInstantiateWithFlags,
                        reinterpret_cast<CUgraphExec*>(pGraphExec), cu(graph), flags));
  });
}

HONE_CUDART_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec,
                                                          cudaGraph_t graph,
                                                          unsigned long long flags) {
  return cudaGraphInstantiate(pGraphExec, graph, flags);
}

HONE_CUDART_PAIR(cudaGraphInstantiateWithParams, _ptsz,
                 (cudaGraphExec_t * pGraphExec, cudaGraph_t graph,
                  cudaGraphInstantiateParams* instantiateParams),
                 (pGraphExec, graph, instantiateParams)) {
  if (pGraphExec == nullptr || instantiateParams == nullptr) return cudaErrorInvalidValue;
  HONE_CONTEXT();
  CUDA_GRAPH_INSTANTIATE_PARAMS p{};
  p.flags = instantiateParams->flags;
  p.hUploadStream = cu(instantiateParams->uploadStream);
  CUresult r = call(HONE_DRV(per_thread, cuGraphInstantiateWithParams),
                    reinterpret_cast<CUgraphExec*>(pGraphExec), cu(graph), &p);
  instantiateParams->errNode_out = reinterpret_cast<cudaGraphNode_t>(p.hErrNode_out);
  instantiateParams->result_out = cudaGraphInstantiateResult(p.result_out);
  return to_cuda(r);
}

HONE_CUDART_API cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t graphExec,
                                                  unsigned long long* flags) {
  return api([&] {
    if (flags == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    cuuint64_t f = 0;
    if (CUresult r = call(driver().cuGraphExecGetFlags, cu(graphExec), &f)) return to_cuda(r);
    *flags = f;
    return cudaSuccess;
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphExecDestroy, cu(graphExec)));
  });
}

HONE_CUDART_PAIR(cudaGraphUpload, _ptsz, (cudaGraphExec_t graphExec, cudaStream_t stream),
                 (graphExec, stream)) {
  HONE_CONTEXT();
  return to_cuda(call(HONE_DRV(per_thread, cuGraphUpload), cu(graphExec), cu(stream)));
}

HONE_CUDART_PAIR(cudaGraphLaunch, _ptsz, (cudaGraphExec_t graphExec, cudaStream_t stream),
                 (graphExec, stream)) {
  HONE_CONTEXT();
  return to_cuda(call(HONE_DRV(per_thread, cuGraphLaunch), cu(graphExec), cu(stream)));
}

HONE_CUDART_API cudaError_t cudaGraphExecKernelNodeSetParams(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t node, const cudaKernelNodeParams* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_KERNEL_NODE_PARAMS p{};
    if (cudaError_t e = to_driver(*pNodeParams, p)) return e;
    return to_cuda(call(driver().cuGraphExecKernelNodeSetParams, cu(hGraphExec), cu(node), &p));
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecMemcpyNodeSetParams(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t node, const cudaMemcpy3DParms* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEMCPY3D p{};
    if (cudaError_t e = to_driver(*pNodeParams, p)) return e;
    return to_cuda(call(driver().cuGraphExecMemcpyNodeSetParams, cu(hGraphExec), cu(node), &p,
                        current_context()));
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t hGraphExec,
                                                               cudaGraphNode_t node, void* dst,
                                                               const void* src, size_t count,
                                                               cudaMemcpyKind kind) {
  return api([&] {
    HONE_CONTEXT();
    CUDA_MEMCPY3D p{};
    if (cudaError_t e = copy_1d(dst, src, count, kind, p)) return e;
    return to_cuda(call(driver().cuGraphExecMemcpyNodeSetParams, cu(hGraphExec), cu(node), &p,
                        current_context()));
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t hGraphExec,
                                                             cudaGraphNode_t node,
                                                             const cudaMemsetParams* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_MEMSET_NODE_PARAMS p = to_driver(*pNodeParams);
    return to_cuda(call(driver().cuGraphExecMemsetNodeSetParams, cu(hGraphExec), cu(node), &p,
                        current_context()));
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t hGraphExec,
                                                           cudaGraphNode_t node,
                                                           const cudaHostNodeParams* pNodeParams) {
  return api([&] {
    if (pNodeParams == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUDA_HOST_NODE_PARAMS p = to_driver(*pNodeParams);
    return to_cuda(call(driver().cuGraphExecHostNodeSetParams, cu(hGraphExec), cu(node), &p));
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecChildGraphNodeSetParams(cudaGraphExec_t hGraphExec,
                                                                 cudaGraphNode_t node,
                                                                 cudaGraph_t childGraph) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphExecChildGraphNodeSetParams, cu(hGraphExec), cu(node),
                        cu(childGraph)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t hGraphExec,
                                                                 cudaGraphNode_t hNode,
                                                                 cudaEvent_t event) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(
        call(driver().cuGraphExecEventRecordNodeSetEvent, cu(hGraphExec), cu(hNode), cu(event)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecEventWaitNodeSetEvent(cudaGraphExec_t hGraphExec,
                                                               cudaGraphNode_t hNode,
                                                               cudaEvent_t event) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(
        call(driver().cuGraphExecEventWaitNodeSetEvent, cu(hGraphExec), cu(hNode), cu(event)));
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecNodeSetParams(cudaGraphExec_t graphExec,
                                                       cudaGraphNode_t node,
                                                       cudaGraphNodeParams* nodeParams) {
  return api([&] {
    if (nodeParams == nullptr) return cudaErrorInvalidValue;
    cudaGraphNodeParams& p = *nodeParams;
    switch (p.type) {
    case cudaGraphNodeTypeKernel: {
      cudaKernelNodeParams k{p.kernel.func,           dim3(p.kernel.gridDim),
                             dim3(p.kernel.blockDim), p.kernel.sharedMemBytes,
                             p.kernel.kernelParams,   p.kernel.extra};
      return cudaGraphExecKernelNodeSetParams(graphExec, node, &k);
    }
    case cudaGraphNodeTypeMemcpy:
      return cudaGraphExecMemcpyNodeSetParams(graphExec, node, &p.memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
      cudaMemsetParams m{p.memset.dst,   p.memset.pitch, p.memset.value, p.memset.elementSize,
                         p.memset.width, p.memset.height};
      return cudaGraphExecMemsetNodeSetParams(graphExec, node, &m);
    }
    case cudaGraphNodeTypeHost: {
      cudaHostNodeParams h{p.host.fn, p.host.userData};
      return cudaGraphExecHostNodeSetParams(graphExec, node, &h);
    }
    case cudaGraphNodeTypeGraph:
      return cudaGraphExecChildGraphNodeSetParams(graphExec, node, p.graph.graph);
    case cudaGraphNodeTypeWaitEvent:
      return cudaGraphExecEventWaitNodeSetEvent(graphExec, node, p.eventWait.event);
    case cudaGraphNodeTypeEventRecord:
      return cudaGraphExecEventRecordNodeSetEvent(graphExec, node, p.eventRecord.event);
    default: return cudaErrorInvalidValue; // the other kinds cannot be changed in place
    }
  });
}

HONE_CUDART_API cudaError_t cudaGraphNodeSetEnabled(cudaGraphExec_t hGraphExec,
                                                    cudaGraphNode_t hNode, unsigned isEnabled) {
  return api([&] {
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphNodeSetEnabled, cu(hGraphExec), cu(hNode), isEnabled));
  });
}

HONE_CUDART_API cudaError_t cudaGraphNodeGetEnabled(cudaGraphExec_t hGraphExec,
                                                    cudaGraphNode_t hNode, unsigned* isEnabled) {
  return api([&] {
    if (isEnabled == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    return to_cuda(call(driver().cuGraphNodeGetEnabled, cu(hGraphExec), cu(hNode), isEnabled));
  });
}

HONE_CUDART_API cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                                cudaGraphExecUpdateResultInfo* resultInfo) {
  return api([&] {
    if (resultInfo == nullptr) return cudaErrorInvalidValue;
    HONE_CONTEXT();
    CUgraphExecUpdateResultInfo info{};
    CUresult r = call(driver().cuGraphExecUpdate, cu(hGraphExec), cu(hGraph), &info);
    resultInfo->result = cudaGraphExecUpdateResult(info.result);
    resultInfo->errorNode = reinterpret_cast<cudaGraphNode_t>(info.errorNode);
    resultInfo->errorFromNode = reinterpret_cast<cudaGraphNode_t>(info.errorFromNode);
    return to_cuda(r);
  });
}
