// CUDA graph hooks: stream capture, instantiation, updates, destruction and launch. Each passes
// the application's call to the driver as it was made and records only what the driver
// accepted (shim/graph.hpp); only cuGraphLaunch does more than bookkeeping.
#include "shim/cuda_abi.hpp"
#include "shim/graph.hpp"
#include "shim/real.hpp"
#include "shim/shim.hpp"
#include "shim/trace.hpp"

#include <cstring>

using namespace hone::shim;

// The per-thread-default-stream spellings, which cuda.h declares only when compiling for them.
extern "C" {
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS* params);
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream);
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                  const CUgraphNode* dependencies,
                                                  const CUgraphEdgeData* dependencyData,
                                                  size_t numDependencies, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph);
}

#define HONE_REAL(name)                                                                            \
  HONE_TRACE_HOOK(name);                                                                           \
  auto real = real_as<decltype(&::name)>(Fn::name);                                                \
  if (!real) return CUDA_ERROR_NOT_INITIALIZED

namespace {

CUresult began(CUresult r) {
  if (r == CUDA_SUCCESS && enabled()) {
    g_launch_divert.fetch_add(k_divert_capture, std::memory_order_acq_rel);
  }
  return r;
}

// A capture ends with cuStreamEndCapture whatever it returns (an invalidated capture too), unless
// the stream was not capturing at all.
CUresult ended(CUresult r) {
  if (r != CUDA_ERROR_ILLEGAL_STATE && r != CUDA_ERROR_INVALID_HANDLE &&
      r != CUDA_ERROR_INVALID_VALUE && r != CUDA_ERROR_NOT_INITIALIZED &&
      r != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) {
    uint32_t v = g_launch_divert.load(std::memory_order_relaxed);
    while (v >= k_divert_capture &&
           !g_launch_divert.compare_exchange_weak(v, v - k_divert_capture)) {
    }
  }
  return r;
}

CUresult instantiated(CUresult r, CUgraphExec* exec, CUgraph graph) {
  if (r == CUDA_SUCCESS && exec) graph_instantiated(*exec, graph);
  return r;
}

// A v1 kernel node parameter struct (no kern/ctx) in the current layout.
CUDA_KERNEL_NODE_PARAMS from_v1(const CUDA_KERNEL_NODE_PARAMS_v1& p) {
  CUDA_KERNEL_NODE_PARAMS out{};
  out.func = p.func;
  out.gridDimX = p.gridDimX;
  out.gridDimY = p.gridDimY;
  out.gridDimZ = p.gridDimZ;
  out.blockDimX = p.blockDimX;
  out.blockDimY = p.blockDimY;
  out.blockDimZ = p.blockDimZ;
  out.sharedMemBytes = p.sharedMemBytes;
  out.kernelParams = p.kernelParams;
  out.extra = p.extra;
  return out;
}

} // namespace

extern "C" {

// --- stream capture ----------------------------------------------------------------------------

__attribute__((visibility("default"))) CUresult CUDAAPI cuStreamBeginCapture(CUstream s) {
  HONE_REAL(cuStreamBeginCapture);
  return began(real(s));
}
__attribute__((visibility("default"))) CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream s) {
  HONE_REAL(cuStreamBeginCapture_ptsz);
  return began(real(s));
}
__attribute__((visibility("default"))) CUresult CUDAAPI
cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  HONE_REAL(cuStreamBeginCapture_v2);
  return began(real(s, mode));
}
__attribute__((visibility("default"))) CUresult CUDAAPI
cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  HONE_REAL(cuStreamBeginCapture_v2_ptsz);
  return began(real(s, mode));
}
__attribute__((visibility("default"))) CUresult CUDAAPI
cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode* deps,
                            const CUgraphEdgeData* data, size_t n, CUstreamCaptureMode mode) {
  HONE_REAL(cuStreamBeginCaptureToGraph);
  return began(real(s, g, deps, data, n, mode));
}
__attribute__((visibility("default"))) CUresult CUDAAPI
cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode* deps,
                                 const CUgraphEdgeData* data, size_t n, CUstreamCaptureMode mode) {
  HONE_REAL(cuStreamBeginCaptureToGraph_ptsz);
  return began(real(s, g, deps, data, n, mode));
}
__attribute__((visibility("default"))) CUresult CUDAAPI cuStreamEndCapture(CUstream s,
                                                                           CUgraph* g) {
  HONE_REAL(cuStreamEndCapture);
  return ended(real(s, g));
}
__attribute__((visibility("default"))) CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream s,
                                                                                CUgraph* g) {
  HONE_REAL(cuStreamEndCapture_ptsz);
  return ended(real(s, g));
}

// --- instantiation -----------------------------------------------------------------------------

__attribute__((visibility("default"))) CUresult CUDAAPI
cuGraphInstantiate(CUgraphExec* exec, CUgraph g, CUgraphNode* error_node, char* log,
                   size_t log_size) {
  HONE_REAL(cuGraphInstantiate);
  return instantiated(real(exec, g, error_node, log, log_size), exec, g);
}
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph g, CUgraphNode* error_node, char* log,
                      size_t log_size) {
  HONE_REAL(cuGraphInstantiate_v2);
  return instantiated(real(exec, g, error_node, log, log_size), exec, g);
}
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph g, unsigned long long flags) {
  HONE_REAL(cuGraphInstantiateWithFlags);
  return instantiated(real(exec, g, flags), exec, g);
}
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  HONE_REAL(cuGraphInstantiateWithParams);
  return instantiated(real(exec, g, p), exec, g);
}
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  HONE_REAL(cuGraphInstantiateWithParams_ptsz);
  return instantiated(real(exec, g, p), exec, g);
}

// --- launch ------------------------------------------------------------------------------------

__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec,
                                                                      CUstream s) {
  HONE_TRACE_HOOK(cuGraphLaunch);
  return graph_launch(exec, s, false);
}
__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec exec,
                                                                           CUstream s) {
  HONE_TRACE_HOOK(cuGraphLaunch_ptsz);
  return graph_launch(exec, s, true);
}

// --- executable graph updates and destruction ----------------------------------------------------

__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
  HONE_REAL(cuGraphExecDestroy);
  CUresult r = real(exec);
  if (r == CUDA_SUCCESS) graph_exec_destroyed(exec);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphExecKernelNodeSetParams(
    CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  HONE_REAL(cuGraphExecKernelNodeSetParams);
  CUresult r = real(exec, node, p);
  if (r == CUDA_SUCCESS && p) {
    CUDA_KERNEL_NODE_PARAMS v2 = from_v1(*p);
    graph_exec_kernel_params_set(exec, node, &v2);
  }
  return r;
}
__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(
    CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
  HONE_REAL(cuGraphExecKernelNodeSetParams_v2);
  CUresult r = real(exec, node, p);
  if (r == CUDA_SUCCESS) graph_exec_kernel_params_set(exec, node, p);
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphExecNodeSetParams(
    CUgraphExec exec, CUgraphNode node, CUgraphNodeParams* p) {
  HONE_REAL(cuGraphExecNodeSetParams);
  // A child graph replaced: the shim's patches are undone first, so the application's wins.
  if (p && p->type == CU_GRAPH_NODE_TYPE_GRAPH && enabled()) {
    graph_exec_give_up(exec, "a child graph was replaced in place");
  }
  CUresult r = real(exec, node, p);
  if (r == CUDA_SUCCESS && p) {
    if (p->type == CU_GRAPH_NODE_TYPE_KERNEL) {
      static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v3) == sizeof(CUDA_KERNEL_NODE_PARAMS));
      CUDA_KERNEL_NODE_PARAMS k{};
      std::memcpy(&k, &p->kernel, sizeof k); // the same fields in the same order
      graph_exec_kernel_params_set(exec, node, &k);
    } else if (p->type != CU_GRAPH_NODE_TYPE_GRAPH) {
      graph_exec_untrackable(exec, "a node was changed in place, which a copy would not repeat");
    }
  }
  return r;
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphExecUpdate(
    CUgraphExec exec, CUgraph g, CUgraphNode* error_node, CUgraphExecUpdateResult* result) {
  HONE_REAL(cuGraphExecUpdate);
  CUresult r = real(exec, g, error_node, result);
  graph_exec_updated(exec, g, r == CUDA_SUCCESS);
  return r;
}
__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphExecUpdate_v2(
    CUgraphExec exec, CUgraph g, CUgraphExecUpdateResultInfo* info) {
  HONE_REAL(cuGraphExecUpdate_v2);
  CUresult r = real(exec, g, info);
  graph_exec_updated(exec, g, r == CUDA_SUCCESS);
  return r;
}

// Exec-level changes to other kinds of node: counted replays stay right, but a copy of the graph
// would no longer run what the executable graph runs.
#define HONE_EXEC_SET(name, why, params, args)                                                     \
  __attribute__((visibility("default"))) CUresult CUDAAPI name params {                           \
    HONE_REAL(name);                                                                               \
    CUresult r = real args;                                                                        \
    if (r == CUDA_SUCCESS) graph_exec_untrackable(exec, why);                                      \
    return r;                                                                                      \
  }
HONE_EXEC_SET(cuGraphExecMemcpyNodeSetParams, "a copy node was changed in place",
              (CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D* p, CUcontext ctx),
              (exec, node, p, ctx))
HONE_EXEC_SET(cuGraphExecMemsetNodeSetParams, "a memset node was changed in place",
              (CUgraphExec exec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS* p,
               CUcontext ctx),
              (exec, node, p, ctx))
HONE_EXEC_SET(cuGraphExecHostNodeSetParams, "a host node was changed in place",
              (CUgraphExec exec, CUgraphNode node, const CUDA_HOST_NODE_PARAMS* p),
              (exec, node, p))
HONE_EXEC_SET(cuGraphExecEventRecordNodeSetEvent, "an event node was changed in place",
              (CUgraphExec exec, CUgraphNode node, CUevent ev), (exec, node, ev))
HONE_EXEC_SET(cuGraphExecEventWaitNodeSetEvent, "an event node was changed in place",
              (CUgraphExec exec, CUgraphNode node, CUevent ev), (exec, node, ev))
#undef HONE_EXEC_SET

// A child graph replaced in place: its kernels are no longer the ones the shim counted.
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGraphExecChildGraphNodeSetParams(CUgraphExec exec, CUgraphNode node, CUgraph child) {
  HONE_REAL(cuGraphExecChildGraphNodeSetParams);
  // The shim's patches are undone first, so the application's child graph wins.
  if (enabled()) graph_exec_give_up(exec, "a child graph was replaced in place");
  return real(exec, node, child);
}

__attribute__((visibility("default"))) CUresult CUDAAPI
cuGraphNodeSetEnabled(CUgraphExec exec, CUgraphNode node, unsigned enabled) {
  HONE_REAL(cuGraphNodeSetEnabled);
  CUresult r = real(exec, node, enabled);
  if (r == CUDA_SUCCESS) graph_node_enabled(exec, node, enabled != 0);
  return r;
}

// --- graphs --------------------------------------------------------------------------------------

__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
  HONE_REAL(cuGraphDestroy);
  // Executable graphs made from it name their nodes by its nodes: it lives until they are gone.
  if (enabled() && graph_destroy_deferred(g)) return CUDA_SUCCESS;
  return real(g);
}

__attribute__((visibility("default"))) CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode node) {
  HONE_REAL(cuGraphDestroyNode);
  if (enabled()) graph_node_destroying(node);
  return real(node);
}

// A node recorded as a variant during a capture reads as the application's function.
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1* p) {
  HONE_REAL(cuGraphKernelNodeGetParams);
  CUresult r = real(node, p);
  if (r == CUDA_SUCCESS && p && p->func) {
    p->func = static_cast<CUfunction>(application_function(p->func));
  }
  return r;
}
__attribute__((visibility("default"))) CUresult CUDAAPI
cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
  HONE_REAL(cuGraphKernelNodeGetParams_v2);
  CUresult r = real(node, p);
  if (r == CUDA_SUCCESS && p && p->func) {
    p->func = static_cast<CUfunction>(application_function(p->func));
  }
  return r;
}

} // extern "C"
