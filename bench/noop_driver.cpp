// A CUDA driver that does nothing: build/lib/noop/libcuda.so.1, for measuring what a hook adds to
// a driver call (hone-bench-shim-launch). Every entry point the shim calls or hooks on its init and
// launch paths answers CUDA_SUCCESS at once with fake handles; nothing runs and nothing is checked.
//
// It does not include cuda.h: the header's macros rename entry points (cuEventElapsedTime is
// cuEventElapsedTime_v2 there), and this library exports the ABI names themselves. The types below
// have the same size and calling convention as cuda.h's (handles are pointers, CUresult an int).
//
// Linked with -Bsymbolic: the addresses cuGetProcAddress hands out are this library's own
// functions, never a preloaded hook of the same name.
#include <atomic>
#include <cstdint>
#include <cstring>

namespace {

using CUresult = int;
using Handle = void*;
constexpr CUresult k_success = 0;
constexpr CUresult k_invalid_value = 1;
constexpr CUresult k_not_found = 500;
constexpr unsigned long long k_per_thread_flag = 1ull << 1; // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

std::atomic<uintptr_t> g_next_handle{0x10000};
Handle new_handle() {
  return reinterpret_cast<Handle>(g_next_handle.fetch_add(0x10, std::memory_order_relaxed));
}

Handle const k_context = reinterpret_cast<Handle>(uintptr_t(0xc0000));
thread_local Handle t_current = nullptr;

// Counted per thread with plain increments (initial-exec TLS): an atomic, or a counter every
// thread writes, would add its own cost to both sides of the comparison, and with several threads
// launching at once a cache line they take from each other. The counts read are the calling
// thread's (the benchmark's single-threaded loops).
__thread uint64_t t_launches __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_event_records __attribute__((tls_model("initial-exec"))) = 0;

} // namespace

extern "C" {

__attribute__((visibility("default"))) uint64_t hone_noop_launches() { return t_launches; }
__attribute__((visibility("default"))) uint64_t hone_noop_event_records() { return t_event_records; }

#define NOOP_API extern "C" __attribute__((visibility("default")))

NOOP_API CUresult cuInit(unsigned) { return k_success; }
NOOP_API CUresult cuDriverGetVersion(int* v) {
  if (v) *v = 13000;
  return k_success;
}
NOOP_API CUresult cuDeviceGet(int* d, int) {
  if (d) *d = 0;
  return k_success;
}
NOOP_API CUresult cuDeviceGetCount(int* n) {
  if (n) *n = 1;
  return k_success;
}
NOOP_API CUresult cuDeviceGetName(char* name, int len, int) {
  if (name && len > 0) std::strncpy(name, "hone no-op device", size_t(len) - 1), name[len - 1] = '\0';
  return k_success;
}
NOOP_API CUresult cuDeviceGetAttribute(int* v, int attribute, int) {
  if (v) *v = attribute == 75 ? 9 : attribute == 76 ? 0 : 1; // compute capability 9.0
  return k_success;
}
NOOP_API CUresult cuDevicePrimaryCtxRetain(Handle* ctx, int) {
  if (ctx) *ctx = k_context;
  return k_success;
}
NOOP_API CUresult cuDevicePrimaryCtxRelease(int) { return k_success; }
NOOP_API CUresult cuDevicePrimaryCtxRelease_v2(int) { return k_success; }
NOOP_API CUresult cuCtxCreate_v2(Handle* ctx, unsigned, int) {
  if (ctx) *ctx = t_current = k_context;
  return k_success;
}
NOOP_API CUresult cuCtxSetCurrent(Handle ctx) {
  t_current = ctx;
  return k_success;
}
NOOP_API CUresult cuCtxGetCurrent(Handle* ctx) {
  if (ctx) *ctx = t_current;
  return k_success;
}
NOOP_API CUresult cuCtxPushCurrent_v2(Handle ctx) {
  t_current = ctx;
  return k_success;
}
NOOP_API CUresult cuCtxPopCurrent_v2(Handle* ctx) {
  if (ctx) *ctx = t_current;
  return k_success;
}
NOOP_API CUresult cuCtxSynchronize() { return k_success; }

NOOP_API CUresult cuModuleLoadData(Handle* m, const void*) {
  if (m) *m = new_handle();
  return k_success;
}
NOOP_API CUresult cuModuleLoadDataEx(Handle* m, const void*, unsigned, void*, void**) {
  if (m) *m = new_handle();
  return k_success;
}
NOOP_API CUresult cuModuleUnload(Handle) { return k_success; }
NOOP_API CUresult cuModuleGetFunction(Handle* f, Handle, const char*) {
  if (f) *f = new_handle();
  return k_success;
}
NOOP_API CUresult cuFuncGetName(const char** name, Handle) {
  if (name) *name = "noop_kernel";
  return k_success;
}

NOOP_API CUresult cuLaunchKernel(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 unsigned, Handle, void**, void**) {
  ++t_launches;
  return k_success;
}
NOOP_API CUresult cuLaunchKernel_ptsz(Handle, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, unsigned, Handle, void**, void**) {
  ++t_launches;
  return k_success;
}

NOOP_API CUresult cuStreamIsCapturing(Handle, int* status) {
  if (status) *status = 0;
  return k_success;
}
NOOP_API CUresult cuStreamIsCapturing_ptsz(Handle, int* status) {
  if (status) *status = 0;
  return k_success;
}
NOOP_API CUresult cuEventCreate(Handle* e, unsigned) {
  if (e) *e = new_handle();
  return k_success;
}
NOOP_API CUresult cuEventDestroy(Handle) { return k_success; }
NOOP_API CUresult cuEventDestroy_v2(Handle) { return k_success; }
NOOP_API CUresult cuEventRecord(Handle, Handle) {
  ++t_event_records;
  return k_success;
}
NOOP_API CUresult cuEventRecord_ptsz(Handle, Handle) {
  ++t_event_records;
  return k_success;
}
NOOP_API CUresult cuEventQuery(Handle) { return k_success; }
NOOP_API CUresult cuEventSynchronize(Handle) { return k_success; }
NOOP_API CUresult cuEventElapsedTime(float* ms, Handle, Handle) {
  if (ms) *ms = 0.001f;
  return k_success;
}
NOOP_API CUresult cuEventElapsedTime_v2(float* ms, Handle, Handle) {
  if (ms) *ms = 0.001f;
  return k_success;
}
// --- graphs: enough to build kernel-node graphs, instantiate and launch them (hone-bench-graph-
// launch). A launch does nothing; the shim's walk at instantiation reads the nodes back.
struct KernelNodeParams { // CUDA_KERNEL_NODE_PARAMS_v2's layout
  Handle func;
  unsigned grid[3], block[3], shared;
  void** kernel_params;
  void** extra;
  Handle kern;
  Handle ctx;
};
struct NoopNode {
  KernelNodeParams p{};
  uint64_t arg = 0; // the one 8-byte parameter of the benchmark's kernel
  void* arg_ptr = nullptr;
};
struct NoopGraph {
  NoopNode* nodes[1024];
  size_t count = 0;
};
uint64_t g_graph_launches = 0;

NOOP_API uint64_t hone_noop_graph_launches() { return g_graph_launches; }

NOOP_API CUresult cuGraphCreate(Handle* g, unsigned) {
  if (!g) return k_invalid_value;
  *g = new NoopGraph;
  return k_success;
}
NOOP_API CUresult cuGraphDestroy(Handle g) {
  auto* graph = static_cast<NoopGraph*>(g);
  for (size_t i = 0; graph && i < graph->count; ++i) delete graph->nodes[i];
  delete graph;
  return k_success;
}
NOOP_API CUresult cuGraphAddKernelNode_v2(Handle* node, Handle g, const Handle*, size_t,
                                          const KernelNodeParams* p) {
  auto* graph = static_cast<NoopGraph*>(g);
  if (!node || !graph || !p || graph->count >= 1024) return k_invalid_value;
  auto* n = new NoopNode;
  n->p = *p;
  if (p->kernel_params && p->kernel_params[0]) std::memcpy(&n->arg, p->kernel_params[0], 8);
  graph->nodes[graph->count++] = n;
  *node = n;
  return k_success;
}
NOOP_API CUresult cuGraphGetNodes(Handle g, Handle* nodes, size_t* count) {
  auto* graph = static_cast<NoopGraph*>(g);
  if (!graph || !count) return k_invalid_value;
  if (!nodes) {
    *count = graph->count;
    return k_success;
  }
  size_t n = *count < graph->count ? *count : graph->count;
  for (size_t i = 0; i < n; ++i) nodes[i] = graph->nodes[i];
  *count = n;
  return k_success;
}
NOOP_API CUresult cuGraphNodeGetType(Handle, int* type) {
  if (type) *type = 0; // CU_GRAPH_NODE_TYPE_KERNEL
  return k_success;
}
NOOP_API CUresult cuGraphKernelNodeGetParams_v2(Handle node, KernelNodeParams* out) {
  auto* n = static_cast<NoopNode*>(node);
  if (!n || !out) return k_invalid_value;
  *out = n->p;
  n->arg_ptr = &n->arg;
  out->kernel_params = &n->arg_ptr;
  out->extra = nullptr;
  return k_success;
}
NOOP_API CUresult cuFuncGetParamInfo(Handle, size_t index, size_t* offset, size_t* size) {
  if (index != 0) return k_invalid_value;
  if (offset) *offset = 0;
  if (size) *size = 8;
  return k_success;
}
NOOP_API CUresult cuGraphInstantiateWithFlags(Handle* exec, Handle g, unsigned long long) {
  if (!exec || !g) return k_invalid_value;
  *exec = g; // the graph itself stands for its executable graph
  return k_success;
}
NOOP_API CUresult cuGraphExecDestroy(Handle) { return k_success; }
NOOP_API CUresult cuGraphLaunch(Handle exec, Handle) {
  if (!exec) return k_invalid_value;
  ++g_graph_launches;
  return k_success;
}
NOOP_API CUresult cuGraphLaunch_ptsz(Handle exec, Handle s) { return cuGraphLaunch(exec, s); }

NOOP_API CUresult cuGetErrorName(CUresult, const char** s) {
  if (s) *s = "CUDA_SUCCESS";
  return k_success;
}
NOOP_API CUresult cuGetErrorString(CUresult, const char** s) {
  if (s) *s = "no error (no-op driver)";
  return k_success;
}

NOOP_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, unsigned long long flags,
                                      int* status);

// By base name, as cuGetProcAddress looks symbols up (cuMemAlloc, not cuMemAlloc_v2).
struct Entry {
  const char* base;
  void* legacy;
  void* per_thread;
};
const Entry k_entries[] = {
    {"cuInit", reinterpret_cast<void*>(&cuInit), nullptr},
    {"cuDriverGetVersion", reinterpret_cast<void*>(&cuDriverGetVersion), nullptr},
    {"cuDeviceGet", reinterpret_cast<void*>(&cuDeviceGet), nullptr},
    {"cuDeviceGetCount", reinterpret_cast<void*>(&cuDeviceGetCount), nullptr},
    {"cuDeviceGetName", reinterpret_cast<void*>(&cuDeviceGetName), nullptr},
    {"cuDeviceGetAttribute", reinterpret_cast<void*>(&cuDeviceGetAttribute), nullptr},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&cuDevicePrimaryCtxRetain), nullptr},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&cuDevicePrimaryCtxRelease_v2), nullptr},
    {"cuCtxSetCurrent", reinterpret_cast<void*>(&cuCtxSetCurrent), nullptr},
    {"cuCtxGetCurrent", reinterpret_cast<void*>(&cuCtxGetCurrent), nullptr},
    {"cuCtxPushCurrent", reinterpret_cast<void*>(&cuCtxPushCurrent_v2), nullptr},
    {"cuCtxPopCurrent", reinterpret_cast<void*>(&cuCtxPopCurrent_v2), nullptr},
    {"cuCtxSynchronize", reinterpret_cast<void*>(&cuCtxSynchronize), nullptr},
    {"cuModuleLoadData", reinterpret_cast<void*>(&cuModuleLoadData), nullptr},
    {"cuModuleLoadDataEx", reinterpret_cast<void*>(&cuModuleLoadDataEx), nullptr},
    {"cuModuleUnload", reinterpret_cast<void*>(&cuModuleUnload), nullptr},
    {"cuModuleGetFunction", reinterpret_cast<void*>(&cuModuleGetFunction), nullptr},
    {"cuFuncGetName", reinterpret_cast<void*>(&cuFuncGetName), nullptr},
    {"cuLaunchKernel", reinterpret_cast<void*>(&cuLaunchKernel), reinterpret_cast<void*>(&cuLaunchKernel_ptsz)},
    {"cuStreamIsCapturing", reinterpret_cast<void*>(&cuStreamIsCapturing),
     reinterpret_cast<void*>(&cuStreamIsCapturing_ptsz)},
    {"cuEventCreate", reinterpret_cast<void*>(&cuEventCreate), nullptr},
    {"cuEventDestroy", reinterpret_cast<void*>(&cuEventDestroy_v2), nullptr},
    {"cuEventRecord", reinterpret_cast<void*>(&cuEventRecord), reinterpret_cast<void*>(&cuEventRecord_ptsz)},
    {"cuEventQuery", reinterpret_cast<void*>(&cuEventQuery), nullptr},
    {"cuEventSynchronize", reinterpret_cast<void*>(&cuEventSynchronize), nullptr},
    {"cuEventElapsedTime", reinterpret_cast<void*>(&cuEventElapsedTime), nullptr},
    {"cuGetErrorName", reinterpret_cast<void*>(&cuGetErrorName), nullptr},
    {"cuGetErrorString", reinterpret_cast<void*>(&cuGetErrorString), nullptr},
    {"cuGetProcAddress", reinterpret_cast<void*>(&cuGetProcAddress_v2), nullptr},
};

NOOP_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, unsigned long long flags,
                                      int* status) {
  if (!symbol || !pfn) return k_invalid_value;
  for (const Entry& e : k_entries) {
    if (std::strcmp(e.base, symbol) != 0) continue;
    *pfn = (flags & k_per_thread_flag) && e.per_thread ? e.per_thread : e.legacy;
    if (status) *status = 0;
    return k_success;
  }
  *pfn = nullptr;
  if (status) *status = 1; // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  return k_not_found;
}
NOOP_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}

} // extern "C"
