// CUDA graphs and stream capture on the emulated driver (emu/driver_graph.cpp,
// emu/driver_capture.cpp): capture in each mode and what invalidates it, fork and join across
// streams, every node kind built explicitly and launched, child graphs, instantiation and the
// independence of template and exec, exec updates, clones, handle errors, and the modeled time of
// independent branches. An ordinary driver-API program linked with the emulated libcuda.so.1.
#include <cuda.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char* k_ptx = R"(
.version 8.0
.target sm_90
.address_size 64

// p[i] += v for i < n
.visible .entry add_const(.param .u64 p, .param .u32 n, .param .u32 v)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r7, [v];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r6, [%rd3];
    add.s32 %r6, %r6, %r7;
    st.global.u32 [%rd3], %r6;
DONE:
    ret;
}

// p[i] *= v for i < n
.visible .entry mul_const(.param .u64 p, .param .u32 n, .param .u32 v)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    ld.param.u32 %r7, [v];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r6, [%rd3];
    mul.lo.s32 %r6, %r6, %r7;
    st.global.u32 [%rd3], %r6;
DONE:
    ret;
}
)";

#define CU_OK(call) ASSERT_EQ(CUDA_SUCCESS, (call)) << #call
#define CU_IS(want, call) EXPECT_EQ(want, (call)) << #call

constexpr unsigned k_n = 256;

// Kernel arguments that outlive the call that passes them (graph nodes copy them at once).
struct Args {
  CUdeviceptr p = 0;
  unsigned n = k_n;
  unsigned v = 0;
  void* ptrs[3] = {&p, &n, &v};
};

class Graphs : public ::testing::Test {
protected:
  void SetUp() override {
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGet(&m_dev, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&m_ctx, m_dev));
    CU_OK(cuCtxSetCurrent(m_ctx));
    CU_OK(cuModuleLoadData(&m_mod, k_ptx));
    CU_OK(cuModuleGetFunction(&m_add, m_mod, "add_const"));
    CU_OK(cuModuleGetFunction(&m_mul, m_mod, "mul_const"));
    CU_OK(cuStreamCreate(&m_s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemAlloc(&m_d, k_n * 4));
    CU_OK(cuMemsetD32(m_d, 0, k_n));
  }
  void TearDown() override {
    cuDevicePrimaryCtxReset(m_dev); // frees everything, clears a sticky error
  }
  // add_const(p, k_n, v) on `s`.
  CUresult add(CUstream s, CUdeviceptr p, unsigned v, CUfunction f = nullptr) {
    unsigned n = k_n;
    void* args[] = {&p, &n, &v};
    return cuLaunchKernel(f != nullptr ? f : m_add, (k_n + 127) / 128, 1, 1, 128, 1, 1, 0, s,
                          args, nullptr);
  }
  std::vector<unsigned> read(CUdeviceptr p, unsigned n = k_n) {
    std::vector<unsigned> out(n, 0xdeadbeef);
    EXPECT_EQ(CUDA_SUCCESS, cuMemcpyDtoH(out.data(), p, n * 4));
    return out;
  }
  static bool all(const std::vector<unsigned>& v, unsigned x) {
    for (unsigned e : v) {
      if (e != x) return false;
    }
    return true;
  }
  CUDA_KERNEL_NODE_PARAMS kernel_params(Args& a, CUfunction f = nullptr) {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = f != nullptr ? f : m_add;
    p.gridDimX = (k_n + 127) / 128;
    p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 128;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = a.ptrs;
    return p;
  }
  // A graph of one kernel node adding `v` to m_d.
  CUgraph one_kernel_graph(unsigned v, CUgraphNode* node = nullptr) {
    CUgraph g = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuGraphCreate(&g, 0));
    Args a;
    a.p = m_d;
    a.v = v;
    CUDA_KERNEL_NODE_PARAMS p = kernel_params(a);
    CUgraphNode n = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuGraphAddKernelNode(&n, g, nullptr, 0, &p));
    if (node != nullptr) *node = n;
    return g;
  }
  std::vector<CUgraphNode> nodes(CUgraph g) {
    size_t count = 0;
    EXPECT_EQ(CUDA_SUCCESS, cuGraphGetNodes(g, nullptr, &count));
    std::vector<CUgraphNode> out(count);
    EXPECT_EQ(CUDA_SUCCESS, cuGraphGetNodes(g, out.data(), &count));
    return out;
  }
  CUgraphNodeType type_of(CUgraphNode n) {
    CUgraphNodeType t{};
    EXPECT_EQ(CUDA_SUCCESS, cuGraphNodeGetType(n, &t));
    return t;
  }
  std::vector<CUgraphNode> deps_of(CUgraphNode n) {
    size_t count = 0;
    EXPECT_EQ(CUDA_SUCCESS, cuGraphNodeGetDependencies(n, nullptr, nullptr, &count));
    std::vector<CUgraphNode> out(count);
    EXPECT_EQ(CUDA_SUCCESS, cuGraphNodeGetDependencies(n, out.data(), nullptr, &count));
    return out;
  }
  CUdevice m_dev = 0;
  CUcontext m_ctx = nullptr;
  CUmodule m_mod = nullptr;
  CUfunction m_add = nullptr, m_mul = nullptr;
  CUstream m_s = nullptr;
  CUdeviceptr m_d = 0;
};

// --- capture ---------------------------------------------------------------------------------

TEST_F(Graphs, CaptureInEachModeRecordsInsteadOfRunningAndReplays) {
  for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                   CU_STREAM_CAPTURE_MODE_RELAXED}) {
    SCOPED_TRACE(mode);
    CU_OK(cuMemsetD32(m_d, 0, k_n));
    std::vector<unsigned> host(k_n, 7);
    CU_OK(cuStreamBeginCapture(m_s, mode));
    CUstreamCaptureStatus status{};
    CU_OK(cuStreamIsCapturing(m_s, &status));
    EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    cuuint64_t id = 0;
    CUgraph capturing = nullptr;
    const CUgraphNode* deps = nullptr;
    const CUgraphEdgeData* edges = nullptr;
    size_t count = 99;
    CU_OK(cuStreamGetCaptureInfo(m_s, &status, &id, &capturing, &deps, &edges, &count));
    EXPECT_NE(id, 0u);
    EXPECT_NE(capturing, nullptr);
    EXPECT_EQ(count, 0u);
    CU_OK(cuMemsetD32Async(m_d, 1, k_n, m_s));
    CU_OK(add(m_s, m_d, 2));
    CU_OK(cuMemcpyDtoHAsync(host.data(), m_d, k_n * 4, m_s));
    CU_OK(cuStreamGetCaptureInfo(m_s, &status, &id, &capturing, &deps, &edges, &count));
    ASSERT_EQ(count, 1u);
    EXPECT_EQ(type_of(deps[0]), CU_GRAPH_NODE_TYPE_MEMCPY);
    CUgraph g = nullptr;
    CU_OK(cuStreamEndCapture(m_s, &g));
    ASSERT_EQ(g, capturing);
    CU_OK(cuStreamIsCapturing(m_s, &status));
    EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
    // Nothing ran: the device buffer and the host copy are as before.
    EXPECT_TRUE(all(read(m_d), 0));
    EXPECT_TRUE(all(host, 7));

    auto list = nodes(g);
    ASSERT_EQ(list.size(), 3u);
    EXPECT_EQ(type_of(list[0]), CU_GRAPH_NODE_TYPE_MEMSET);
    EXPECT_EQ(type_of(list[1]), CU_GRAPH_NODE_TYPE_KERNEL);
    EXPECT_EQ(type_of(list[2]), CU_GRAPH_NODE_TYPE_MEMCPY);
    EXPECT_EQ(deps_of(list[1]), std::vector<CUgraphNode>{list[0]});
    EXPECT_EQ(deps_of(list[2]), std::vector<CUgraphNode>{list[1]});
    CUgraphExec exec = nullptr;
    CU_OK(cuGraphInstantiate(&exec, g, 0));
    for (int i = 0; i < 3; ++i) {
      std::fill(host.begin(), host.end(), 0u);
      CU_OK(cuGraphLaunch(exec, m_s));
      CU_OK(cuStreamSynchronize(m_s));
      EXPECT_TRUE(all(host, 3));
    }
    CU_OK(cuGraphExecDestroy(exec));
    CU_OK(cuGraphDestroy(g));
  }
}

TEST_F(Graphs, ASynchronousCopyDuringGlobalCaptureInvalidatesIt) {
  std::vector<unsigned> host(k_n, 1);
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(add(m_s, m_d, 1));
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemcpyHtoD(m_d, host.data(), k_n * 4));
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemsetD32(m_d, 0, k_n));
  CUstreamCaptureStatus status{};
  CU_OK(cuStreamIsCapturing(m_s, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, add(m_s, m_d, 1));
  CUgraph g = reinterpret_cast<CUgraph>(1);
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(m_s, &g));
  EXPECT_EQ(g, nullptr);
  // The stream works again, and nothing captured ran.
  CU_OK(cuStreamIsCapturing(m_s, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT_TRUE(all(read(m_d), 0));
  CU_OK(add(m_s, m_d, 4));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 4));
}

TEST_F(Graphs, RelaxedAndThreadLocalCapturesAllowWhatGlobalForbids) {
  std::vector<unsigned> host(k_n, 9);
  // Relaxed: unsafe calls are fine on this thread.
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_OK(cuMemcpyHtoD(m_d, host.data(), k_n * 4));
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuCtxSynchronize());
  CUgraph g = nullptr;
  // cuCtxSynchronize waits for the capturing stream: that invalidated the capture.
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(m_s, &g));
  EXPECT_TRUE(all(read(m_d), 9));

  // Thread-local: another thread (global mode) may make unsafe calls; a global capture forbids it.
  auto other_thread_copy = [&] {
    CUresult rc = CUDA_ERROR_UNKNOWN;
    std::thread t([&] {
      cuCtxSetCurrent(m_ctx);
      rc = cuMemcpyHtoD(m_d, host.data(), k_n * 4);
    });
    t.join();
    return rc;
  };
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CU_IS(CUDA_SUCCESS, other_thread_copy());
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuMemcpyHtoD(m_d, host.data(), k_n * 4));
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(m_s, &g));

  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, other_thread_copy());
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(m_s, &g));

  // This thread in relaxed mode may make unsafe calls during its own global capture.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuMemcpyHtoD(m_d, host.data(), k_n * 4));
  CU_OK(add(m_s, m_d, 1));
  CU_OK(cuStreamEndCapture(m_s, &g));
  CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
  EXPECT_EQ(nodes(g).size(), 1u);
  CU_OK(cuGraphDestroy(g));
}

TEST_F(Graphs, LegacyStreamWorkDuringABlockingCaptureIsImplicit) {
  CUstream blocking = nullptr;
  CU_OK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  CU_OK(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_OK(add(blocking, m_d, 1));
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, add(nullptr, m_d, 1));
  CUstreamCaptureStatus status{};
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuStreamIsCapturing(nullptr, &status));
  CU_OK(cuStreamIsCapturing(blocking, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CUgraph g = nullptr;
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(blocking, &g));
  EXPECT_EQ(g, nullptr);
  EXPECT_TRUE(all(read(m_d), 0));
  // A non-blocking stream's capture leaves the legacy stream alone.
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_OK(add(nullptr, m_d, 1));
  CU_OK(cuStreamEndCapture(m_s, &g));
  CU_OK(cuCtxSynchronize());
  EXPECT_TRUE(all(read(m_d), 1));
  CU_OK(cuGraphDestroy(g));
}

TEST_F(Graphs, SynchronizingTheCapturingStreamIsUnsupported) {
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_OK(add(m_s, m_d, 1));
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(m_s));
  CUgraph g = nullptr;
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(m_s, &g));
  EXPECT_EQ(g, nullptr);

  // State errors: not capturing, capturing twice, the legacy stream, the wrong thread.
  CU_IS(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(m_s, &g));
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
        cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_IS(CUDA_ERROR_ILLEGAL_STATE, cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUresult other = CUDA_ERROR_UNKNOWN;
  std::thread t([&] {
    cuCtxSetCurrent(m_ctx);
    CUgraph h = nullptr;
    other = cuStreamEndCapture(m_s, &h);
  });
  t.join();
  EXPECT_EQ(other, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  // An event recorded in the capture cannot be queried.
  CUevent e = nullptr;
  CU_OK(cuEventCreate(&e, 0));
  CU_OK(cuEventRecord(e, m_s));
  CU_IS(CUDA_ERROR_CAPTURED_EVENT, cuEventQuery(e));
  CU_OK(cuStreamEndCapture(m_s, &g));
  ASSERT_NE(g, nullptr);
  CU_OK(cuEventQuery(e));
  CU_OK(cuGraphDestroy(g));
}

TEST_F(Graphs, ForkAndJoinAcrossStreamsThroughEvents) {
  CUstream s2 = nullptr;
  CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUdeviceptr b = 0;
  CU_OK(cuMemAlloc(&b, k_n * 4));
  CU_OK(cuMemsetD32(b, 0, k_n));
  CUevent fork = nullptr, join = nullptr;
  CU_OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));

  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(add(m_s, m_d, 1));
  CU_OK(cuEventRecord(fork, m_s));
  CU_OK(cuStreamWaitEvent(s2, fork, 0));
  CUstreamCaptureStatus status{};
  cuuint64_t id1 = 0, id2 = 0;
  CU_OK(cuStreamGetCaptureInfo(m_s, &status, &id1, nullptr, nullptr, nullptr, nullptr));
  CU_OK(cuStreamGetCaptureInfo(s2, &status, &id2, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(id1, id2);
  CU_OK(add(s2, b, 10));
  CU_OK(cuEventRecord(join, s2));
  CU_OK(cuStreamWaitEvent(m_s, join, 0));
  CU_OK(add(m_s, m_d, 100));
  CUgraph g = nullptr;
  CU_OK(cuStreamEndCapture(m_s, &g));
  CU_OK(cuStreamIsCapturing(s2, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  auto list = nodes(g);
  ASSERT_EQ(list.size(), 3u);
  // The last node waits for both branches; the forked one for the first.
  EXPECT_EQ(deps_of(list[1]), std::vector<CUgraphNode>{list[0]});
  auto last = deps_of(list[2]);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0], list[0]);
  EXPECT_EQ(last[1], list[1]);
  size_t roots = 0;
  CU_OK(cuGraphGetRootNodes(g, nullptr, &roots));
  EXPECT_EQ(roots, 1u);
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, g, 0));
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 101));
  EXPECT_TRUE(all(read(b), 10));

  // Not joined back: the capture fails and both streams leave it.
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(add(m_s, m_d, 1));
  CU_OK(cuEventRecord(fork, m_s));
  CU_OK(cuStreamWaitEvent(s2, fork, 0));
  CU_OK(add(s2, b, 1));
  CUgraph h = reinterpret_cast<CUgraph>(1);
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, cuStreamEndCapture(m_s, &h));
  EXPECT_EQ(h, nullptr);
  CU_OK(cuStreamIsCapturing(s2, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  CU_OK(add(s2, b, 5)); // runs again
  CU_OK(cuStreamSynchronize(s2));
  EXPECT_TRUE(all(read(b), 15));
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(g));
}

TEST_F(Graphs, UpdateCaptureDependenciesAndCapturedAllocations) {
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr p = 0;
  CU_OK(cuMemAllocAsync(&p, k_n * 4, m_s));
  ASSERT_NE(p, 0u);
  CU_OK(cuMemsetD32Async(p, 3, k_n, m_s));
  CU_OK(add(m_s, p, 4));
  CU_OK(cuMemcpyDtoDAsync(m_d, p, k_n * 4, m_s));
  CU_OK(cuMemFreeAsync(p, m_s));
  CUstreamCaptureStatus status{};
  CUgraph g = nullptr;
  const CUgraphNode* deps = nullptr;
  size_t count = 0;
  CU_OK(cuStreamGetCaptureInfo(m_s, &status, nullptr, &g, &deps, nullptr, &count));
  ASSERT_EQ(count, 1u);
  // An empty node with no dependencies, made the stream's only dependency: it joins at the end.
  CUgraphNode empty = nullptr;
  CU_OK(cuGraphAddEmptyNode(&empty, g, nullptr, 0));
  CUgraphNode last = deps[0];
  CU_OK(cuStreamUpdateCaptureDependencies(m_s, &empty, nullptr, 1,
                                          CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
  CU_OK(cuStreamGetCaptureInfo(m_s, &status, nullptr, nullptr, &deps, nullptr, &count));
  ASSERT_EQ(count, 2u);
  EXPECT_EQ(deps[0], last);
  EXPECT_EQ(deps[1], empty);
  CU_OK(cuStreamUpdateCaptureDependencies(m_s, &last, nullptr, 1,
                                          CU_STREAM_SET_CAPTURE_DEPENDENCIES));
  CU_OK(cuStreamGetCaptureInfo(m_s, &status, nullptr, nullptr, &deps, nullptr, &count));
  ASSERT_EQ(count, 1u);
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuStreamUpdateCaptureDependencies(m_s, &last, nullptr, 1, 7));
  CUgraph out = nullptr;
  CU_OK(cuStreamEndCapture(m_s, &out));
  ASSERT_EQ(out, g);
  CU_IS(CUDA_ERROR_ILLEGAL_STATE, cuStreamUpdateCaptureDependencies(
                                      m_s, &last, nullptr, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
  auto list = nodes(g);
  ASSERT_EQ(list.size(), 6u);
  EXPECT_EQ(type_of(list[0]), CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  EXPECT_EQ(type_of(list[4]), CU_GRAPH_NODE_TYPE_MEM_FREE);
  CUDA_MEM_ALLOC_NODE_PARAMS ap{};
  CU_OK(cuGraphMemAllocNodeGetParams(list[0], &ap));
  EXPECT_EQ(ap.dptr, p);
  EXPECT_EQ(ap.bytesize, k_n * 4u);
  CUdeviceptr freed = 0;
  CU_OK(cuGraphMemFreeNodeGetParams(list[4], &freed));
  EXPECT_EQ(freed, p);
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < 2; ++i) {
    CU_OK(cuMemsetD32(m_d, 0, k_n));
    CU_OK(cuGraphLaunch(exec, m_s));
    CU_OK(cuStreamSynchronize(m_s));
    EXPECT_TRUE(all(read(m_d), 7));
  }
  // The DOT description names every node.
  std::string path = ::testing::TempDir() + "emu_graph_test.dot";
  CU_OK(cuGraphDebugDotPrint(g, path.c_str(), CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("digraph"), std::string::npos);
  EXPECT_NE(text.str().find("add_const"), std::string::npos);
  EXPECT_NE(text.str().find("MEM_ALLOC"), std::string::npos);
  std::remove(path.c_str());
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(g));
}

// Graph memory nodes as NVIDIA's graphMemoryNodes sample makes them, through the driver API:
// cuMemAllocAsync on the capturing stream, a second stream created inside the capture, forked
// from it, joined back and destroyed before the capture ends, cuMemFreeAsync on both; launched
// several times; then the allocation kept past the graph and freed outside it, and the relaunch
// rules for a live allocation (refused, or freed first under AUTO_FREE_ON_LAUNCH).
TEST_F(Graphs, MemoryNodesFromACaptureWithAForkedStreamDestroyedInside) {
  CUevent fork = nullptr, join = nullptr;
  CU_OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstream s2 = nullptr;
  CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUdeviceptr a = 0, b = 0;
  CU_OK(cuMemAllocAsync(&a, k_n * 4, m_s));
  CU_OK(cuMemAllocAsync(&b, k_n * 4, m_s));
  CU_OK(cuMemsetD32Async(a, 5, k_n, m_s));
  CU_OK(cuEventRecord(fork, m_s));
  CU_OK(cuStreamWaitEvent(s2, fork, 0));
  CU_OK(cuMemcpyDtoDAsync(b, a, k_n * 4, s2)); // b = 5
  CU_OK(add(s2, b, 2));                         // b = 7
  CU_OK(cuMemFreeAsync(a, s2));
  CU_OK(cuEventRecord(join, s2));
  CU_OK(cuStreamWaitEvent(m_s, join, 0));
  CU_OK(cuStreamDestroy(s2)); // its work is joined back: the capture goes on
  CU_OK(cuMemcpyDtoDAsync(m_d, b, k_n * 4, m_s));
  CU_OK(cuMemFreeAsync(b, m_s));
  CUgraph g = nullptr;
  CU_OK(cuStreamEndCapture(m_s, &g));
  ASSERT_NE(g, nullptr);
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < 3; ++i) {
    CU_OK(cuMemsetD32(m_d, 0, k_n));
    CU_OK(cuGraphLaunch(exec, m_s));
    CU_OK(cuStreamSynchronize(m_s));
    EXPECT_TRUE(all(read(m_d), 7)) << "launch " << i;
  }
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(g));

  // A forked stream destroyed with its last work not joined back: the capture fails unjoined.
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CU_OK(add(m_s, m_d, 1));
  CU_OK(cuEventRecord(fork, m_s));
  CU_OK(cuStreamWaitEvent(s2, fork, 0));
  CU_OK(add(s2, m_d, 1));
  CU_OK(cuStreamDestroy(s2));
  g = reinterpret_cast<CUgraph>(1);
  CU_IS(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, cuStreamEndCapture(m_s, &g));
  EXPECT_EQ(g, nullptr);

  // An allocation the graph leaves live: used and freed outside it.
  CU_OK(cuStreamBeginCapture(m_s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr kept = 0;
  CU_OK(cuMemAllocAsync(&kept, k_n * 4, m_s));
  CU_OK(cuMemsetD32Async(kept, 1, k_n, m_s));
  CU_OK(cuStreamEndCapture(m_s, &g));
  CU_OK(cuGraphInstantiate(&exec, g, 0));
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(add(m_s, kept, 1));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(kept), 2));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(exec, m_s)); // still live
  CU_OK(cuMemFreeAsync(kept, m_s));
  CU_OK(cuGraphLaunch(exec, m_s)); // freed: allocated again, at the same address
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(kept), 1));
  CU_OK(cuMemFree(kept));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(kept, m_s)); // freed twice
  CUgraphExec auto_free = nullptr;
  CU_OK(cuGraphInstantiateWithFlags(&auto_free, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
  for (int i = 0; i < 3; ++i) CU_OK(cuGraphLaunch(auto_free, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(kept), 1));
  CU_OK(cuMemFreeAsync(kept, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  CU_OK(cuGraphExecDestroy(auto_free));
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(g));
}

// --- explicit graphs ----------------------------------------------------------------------------

struct HostLog {
  std::vector<int> order;
};
void host_mark(void* data) {
  static_cast<HostLog*>(data)->order.push_back(1);
}
void host_mark2(void* data) {
  static_cast<HostLog*>(data)->order.push_back(2);
}

TEST_F(Graphs, EveryNodeKindBuiltExplicitlyRuns) {
  CUgraph g = nullptr;
  CU_OK(cuGraphCreate(&g, 0));
  // memset m_d = 5 → kernel +10 → host → copy to host; an alloc'd buffer gets m_d copied in,
  // doubled, and copied out to b; events recorded and waited; empty node joins.
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = m_d;
  ms.value = 5;
  ms.elementSize = 4;
  ms.width = k_n;
  ms.height = 1;
  CUgraphNode memset = nullptr;
  CU_OK(cuGraphAddMemsetNode(&memset, g, nullptr, 0, &ms, m_ctx));
  Args a;
  a.p = m_d;
  a.v = 10;
  CUDA_KERNEL_NODE_PARAMS kp = kernel_params(a);
  CUgraphNode kernel = nullptr;
  CU_OK(cuGraphAddKernelNode(&kernel, g, &memset, 1, &kp));
  a.v = 999; // the node copied the arguments
  HostLog log;
  CUDA_HOST_NODE_PARAMS hp{host_mark, &log};
  CUgraphNode host = nullptr;
  CU_OK(cuGraphAddHostNode(&host, g, &kernel, 1, &hp));
  std::vector<unsigned> out(k_n, 0);
  CUDA_MEMCPY3D cp{};
  cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.srcDevice = m_d;
  cp.dstMemoryType = CU_MEMORYTYPE_HOST;
  cp.dstHost = out.data();
  cp.WidthInBytes = k_n * 4;
  cp.Height = 1;
  cp.Depth = 1;
  CUgraphNode copy = nullptr;
  CU_OK(cuGraphAddMemcpyNode(&copy, g, &host, 1, &cp, m_ctx));
  CUevent ev = nullptr;
  CU_OK(cuEventCreate(&ev, 0));
  CUgraphNode record = nullptr, wait = nullptr;
  CU_OK(cuGraphAddEventRecordNode(&record, g, &copy, 1, ev));
  CU_OK(cuGraphAddEventWaitNode(&wait, g, &record, 1, ev));

  CUDA_MEM_ALLOC_NODE_PARAMS ap{};
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.poolProps.location.id = 0;
  ap.bytesize = k_n * 4;
  CUgraphNode alloc = nullptr;
  CU_OK(cuGraphAddMemAllocNode(&alloc, g, &kernel, 1, &ap));
  ASSERT_NE(ap.dptr, 0u);
  CUDA_MEMCPY3D in = cp;
  in.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  in.dstHost = nullptr;
  in.dstDevice = ap.dptr;
  CUgraphNode fill = nullptr;
  CUgraphNode fill_deps[] = {alloc, kernel};
  CU_OK(cuGraphAddMemcpyNode(&fill, g, fill_deps, 2, &in, m_ctx));
  // Doubling through the generic cuGraphAddNode.
  Args m;
  m.p = ap.dptr;
  m.v = 2;
  CUgraphNodeParams gp{};
  gp.type = CU_GRAPH_NODE_TYPE_KERNEL;
  CUDA_KERNEL_NODE_PARAMS mp = kernel_params(m, m_mul);
  std::memcpy(&gp.kernel, &mp, sizeof mp);
  CUgraphNode doubled = nullptr;
  CU_OK(cuGraphAddNode(&doubled, g, &fill, nullptr, 1, &gp));
  CUdeviceptr b = 0;
  CU_OK(cuMemAlloc(&b, k_n * 4));
  CUDA_MEMCPY3D outb = in;
  outb.srcDevice = ap.dptr;
  outb.dstDevice = b;
  CUgraphNode copy_out = nullptr;
  CU_OK(cuGraphAddMemcpyNode(&copy_out, g, &doubled, 1, &outb, m_ctx));
  CUgraphNode free_node = nullptr;
  CU_OK(cuGraphAddMemFreeNode(&free_node, g, &copy_out, 1, ap.dptr));
  CUgraphNode empty = nullptr;
  CUgraphNode ends[] = {wait, free_node};
  CU_OK(cuGraphAddEmptyNode(&empty, g, ends, 2));

  // What each node reports.
  CUgraphNodeType t{};
  CU_OK(cuGraphNodeGetType(doubled, &t));
  EXPECT_EQ(t, CU_GRAPH_NODE_TYPE_KERNEL);
  CUDA_KERNEL_NODE_PARAMS got{};
  CU_OK(cuGraphKernelNodeGetParams(kernel, &got));
  EXPECT_EQ(got.func, m_add);
  EXPECT_EQ(got.blockDimX, 128u);
  ASSERT_NE(got.kernelParams, nullptr);
  EXPECT_EQ(*static_cast<CUdeviceptr*>(got.kernelParams[0]), m_d);
  EXPECT_EQ(*static_cast<unsigned*>(got.kernelParams[2]), 10u);
  CUDA_MEMSET_NODE_PARAMS gms{};
  CU_OK(cuGraphMemsetNodeGetParams(memset, &gms));
  EXPECT_EQ(gms.value, 5u);
  CUDA_MEMCPY3D gcp{};
  CU_OK(cuGraphMemcpyNodeGetParams(copy, &gcp));
  EXPECT_EQ(gcp.dstHost, out.data());
  CUDA_HOST_NODE_PARAMS ghp{};
  CU_OK(cuGraphHostNodeGetParams(host, &ghp));
  EXPECT_EQ(ghp.userData, &log);
  CUevent gev = nullptr;
  CU_OK(cuGraphEventRecordNodeGetEvent(record, &gev));
  EXPECT_EQ(gev, ev);
  CU_OK(cuGraphEventWaitNodeGetEvent(wait, &gev));
  EXPECT_EQ(gev, ev);
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphMemsetNodeGetParams(kernel, &gms));
  size_t deps = 0;
  CU_OK(cuGraphNodeGetDependentNodes(kernel, nullptr, nullptr, &deps));
  EXPECT_EQ(deps, 3u); // host, alloc, fill
  size_t edges = 0;
  CU_OK(cuGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
  EXPECT_EQ(edges, 13u);

  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < 2; ++i) {
    std::fill(out.begin(), out.end(), 0u);
    CU_OK(cuMemsetD32(b, 0, k_n));
    CU_OK(cuGraphLaunch(exec, m_s));
    CU_OK(cuStreamSynchronize(m_s));
    EXPECT_TRUE(all(out, 15));
    EXPECT_TRUE(all(read(b), 30));
    EXPECT_TRUE(all(read(m_d), 15));
  }
  EXPECT_EQ(log.order, (std::vector<int>{1, 1}));
  CU_OK(cuEventQuery(ev)); // recorded by the graph
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(g));
}

TEST_F(Graphs, ChildGraphsRunInsideTheirParent) {
  CUgraph child = one_kernel_graph(1);
  CUgraph g = nullptr;
  CU_OK(cuGraphCreate(&g, 0));
  CUgraphNode first = nullptr, second = nullptr;
  CU_OK(cuGraphAddChildGraphNode(&first, g, nullptr, 0, child));
  CU_OK(cuGraphAddChildGraphNode(&second, g, &first, 1, child));
  // The child was cloned: changing or destroying the original changes nothing.
  CU_OK(cuGraphDestroy(child));
  CUgraph inner = nullptr;
  CU_OK(cuGraphChildGraphNodeGetGraph(first, &inner));
  EXPECT_EQ(nodes(inner).size(), 1u);
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphDestroy(inner)); // the node owns it
  // A moved child through cuGraphAddNode.
  CUgraph moved = one_kernel_graph(100);
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_GRAPH;
  p.graph.graph = moved;
  p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  CUgraphNode third = nullptr;
  CU_OK(cuGraphAddNode(&third, g, &second, nullptr, 1, &p));
  EXPECT_EQ(p.graph.graph, moved);
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphDestroy(moved));
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, g, 0));
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 102));
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(g));
  size_t count = 0;
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphGetNodes(inner, nullptr, &count));
}

TEST_F(Graphs, TemplateAndExecAreIndependentAndExecParamsChangeTheNextLaunch) {
  CUgraphNode node = nullptr;
  CUgraph g = one_kernel_graph(1, &node);
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, g, 0));
  // A template edit after instantiation does not reach the exec...
  Args a;
  a.p = m_d;
  a.v = 100;
  CUDA_KERNEL_NODE_PARAMS p = kernel_params(a);
  CU_OK(cuGraphKernelNodeSetParams(node, &p));
  for (int i = 0; i < 3; ++i) CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 3));
  // ...but a new instantiation sees it.
  CUgraphExec exec2 = nullptr;
  CU_OK(cuGraphInstantiateWithFlags(&exec2, g, 0));
  CU_OK(cuGraphLaunch(exec2, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 103));
  // cuGraphExecKernelNodeSetParams changes the next launch of that exec only.
  a.v = 7;
  p = kernel_params(a);
  CU_OK(cuGraphExecKernelNodeSetParams(exec, node, &p));
  a.v = 5000; // copied at the call
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 110));
  CUDA_KERNEL_NODE_PARAMS tmpl{};
  CU_OK(cuGraphKernelNodeGetParams(node, &tmpl));
  EXPECT_EQ(*static_cast<unsigned*>(tmpl.kernelParams[2]), 100u);
  // Disabled, the node does nothing.
  CU_OK(cuGraphNodeSetEnabled(exec, node, 0));
  unsigned enabled = 1;
  CU_OK(cuGraphNodeGetEnabled(exec, node, &enabled));
  EXPECT_EQ(enabled, 0u);
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 110));
  cuuint64_t flags = 1;
  CU_OK(cuGraphExecGetFlags(exec, &flags));
  EXPECT_EQ(flags, 0u);
  CU_OK(cuGraphUpload(exec, m_s));
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphExecDestroy(exec2));
  CU_OK(cuGraphDestroy(g));
}

TEST_F(Graphs, ExecUpdateTakesSameTopologiesAndRefusesOthers) {
  CUgraph g = one_kernel_graph(1);
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, g, 0));
  // Same topology, new arguments and even a new function of the same context.
  CUgraph g2 = nullptr;
  CU_OK(cuGraphCreate(&g2, 0));
  Args a;
  a.p = m_d;
  a.v = 3;
  CUDA_KERNEL_NODE_PARAMS p = kernel_params(a, m_mul);
  CUgraphNode n2 = nullptr;
  CU_OK(cuGraphAddKernelNode(&n2, g2, nullptr, 0, &p));
  CU_OK(cuMemsetD32(m_d, 2, k_n));
  CUgraphExecUpdateResultInfo info{};
  CU_OK(cuGraphExecUpdate(exec, g2, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 6));
  // The update's nodes name the exec's nodes now.
  a.v = 5;
  p = kernel_params(a, m_mul);
  CU_OK(cuGraphExecKernelNodeSetParams(exec, n2, &p));
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 30));

  // A node more: the topology changed.
  CUgraph g3 = one_kernel_graph(1);
  CUgraphNode extra = nullptr;
  CU_OK(cuGraphAddEmptyNode(&extra, g3, nullptr, 0));
  CU_IS(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(exec, g3, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  // A node of another type.
  CUgraph g4 = nullptr;
  CU_OK(cuGraphCreate(&g4, 0));
  CUgraphNode memset = nullptr;
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = m_d;
  ms.elementSize = 4;
  ms.width = k_n;
  ms.height = 1;
  CU_OK(cuGraphAddMemsetNode(&memset, g4, nullptr, 0, &ms, m_ctx));
  CU_IS(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(exec, g4, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
  EXPECT_EQ(info.errorNode, memset);
  // Changed edges: two kernels, chained in the exec, independent in the update.
  CUgraph chain = nullptr, split = nullptr;
  CU_OK(cuGraphCreate(&chain, 0));
  CU_OK(cuGraphCreate(&split, 0));
  a.v = 1;
  p = kernel_params(a);
  CUgraphNode c1 = nullptr, c2 = nullptr, s1 = nullptr, s2 = nullptr;
  CU_OK(cuGraphAddKernelNode(&c1, chain, nullptr, 0, &p));
  CU_OK(cuGraphAddKernelNode(&c2, chain, &c1, 1, &p));
  CU_OK(cuGraphAddKernelNode(&s1, split, nullptr, 0, &p));
  CU_OK(cuGraphAddKernelNode(&s2, split, nullptr, 0, &p));
  CUgraphExec chained = nullptr;
  CU_OK(cuGraphInstantiate(&chained, chain, 0));
  CU_IS(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(chained, split, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  EXPECT_EQ(info.errorNode, s2);
  // The failed updates left the exec as it was.
  CU_OK(cuMemsetD32(m_d, 1, k_n));
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 5));
  for (CUgraph x : {g, g2, g3, g4, chain, split}) CU_OK(cuGraphDestroy(x));
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphExecDestroy(chained));
}

TEST_F(Graphs, ClonesAreIndependentAndFindTheirNodes) {
  CUgraphNode node = nullptr;
  CUgraph g = one_kernel_graph(2, &node);
  CUgraphNode tail = nullptr;
  CU_OK(cuGraphAddEmptyNode(&tail, g, &node, 1));
  CUgraph clone = nullptr;
  CU_OK(cuGraphClone(&clone, g));
  CUgraphNode found = nullptr, found_tail = nullptr;
  CU_OK(cuGraphNodeFindInClone(&found, node, clone));
  CU_OK(cuGraphNodeFindInClone(&found_tail, tail, clone));
  EXPECT_NE(found, node);
  EXPECT_EQ(type_of(found), CU_GRAPH_NODE_TYPE_KERNEL);
  EXPECT_EQ(deps_of(found_tail), std::vector<CUgraphNode>{found});
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphNodeFindInClone(&found, node, g));
  CU_OK(cuGraphDestroy(g));
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, clone, 0));
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 2));
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(clone));
}

TEST_F(Graphs, DestroyedAndForeignHandlesAreErrors) {
  CUgraphNode node = nullptr;
  CUgraph g = one_kernel_graph(1, &node);
  CUgraph other = nullptr;
  CU_OK(cuGraphCreate(&other, 0));
  CUgraphNode n = nullptr;
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphAddEmptyNode(&n, other, &node, 1)); // foreign dependency
  CUgraphNode twice[] = {node, node};
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphAddEmptyNode(&n, g, twice, 2));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphAddDependencies(other, &node, &node, nullptr, 1));
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiate(&exec, g, 0));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphExecKernelNodeSetParams(exec, n, nullptr));
  CU_OK(cuGraphDestroyNode(node));
  CUgraphNodeType t{};
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphNodeGetType(node, &t));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphDestroyNode(node));
  CU_OK(cuGraphDestroy(g));
  size_t count = 0;
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphGetNodes(g, nullptr, &count));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphDestroy(g));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiate(&exec, g, 0));
  // The exec outlives its template.
  CU_OK(cuGraphLaunch(exec, m_s));
  CU_OK(cuStreamSynchronize(m_s));
  EXPECT_TRUE(all(read(m_d), 1));
  CU_OK(cuGraphExecDestroy(exec));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(exec, m_s));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphExecDestroy(exec));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(reinterpret_cast<CUgraphExec>(m_s), m_s));
  // A cycle is refused at instantiation.
  CUgraphNode a = nullptr, b = nullptr;
  CU_OK(cuGraphAddEmptyNode(&a, other, nullptr, 0));
  CU_OK(cuGraphAddEmptyNode(&b, other, &a, 1));
  CU_OK(cuGraphAddDependencies(other, &b, &a, nullptr, 1));
  CUDA_GRAPH_INSTANTIATE_PARAMS ip{};
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithParams(&exec, other, &ip));
  EXPECT_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE);
  CU_OK(cuGraphRemoveDependencies(other, &b, &a, nullptr, 1));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphRemoveDependencies(other, &b, &a, nullptr, 1));
  CU_OK(cuGraphInstantiateWithParams(&exec, other, &ip));
  EXPECT_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  CU_OK(cuGraphExecDestroy(exec));
  CU_OK(cuGraphDestroy(other));
}

TEST_F(Graphs, ConditionalNodesAndDeviceLaunchAreNotSupported) {
  CUgraph g = nullptr;
  CU_OK(cuGraphCreate(&g, 0));
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  CUgraphNode n = nullptr;
  CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuGraphAddNode(&n, g, nullptr, nullptr, 0, &p));
  CUgraphConditionalHandle h = 0;
  CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuGraphConditionalHandleCreate(&h, g, m_ctx, 0, 0));
  EXPECT_EQ(nodes(g).size(), 0u);
  CUgraphExec exec = nullptr;
  CU_IS(CUDA_ERROR_NOT_SUPPORTED,
        cuGraphInstantiate(&exec, g, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH));
  CU_IS(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiate(&exec, g, 1ull << 40));
  CU_OK(cuGraphDestroy(g));
}

// --- modeled time --------------------------------------------------------------------------------

TEST_F(Graphs, IndependentBranchesOverlapInModeledTime) {
  constexpr unsigned n = 1 << 16;
  CUdeviceptr x = 0, y = 0;
  CU_OK(cuMemAlloc(&x, n * 4));
  CU_OK(cuMemAlloc(&y, n * 4));
  auto node_of = [&](CUgraph g, CUdeviceptr p, const CUgraphNode* deps, size_t count) {
    unsigned len = n, v = 1;
    void* args[] = {&p, &len, &v};
    CUDA_KERNEL_NODE_PARAMS kp{};
    kp.func = m_add;
    kp.gridDimX = n / 256;
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 256;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraphNode node = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuGraphAddKernelNode(&node, g, deps, count, &kp));
    return node;
  };
  CUgraph parallel = nullptr, serial = nullptr;
  CU_OK(cuGraphCreate(&parallel, 0));
  CU_OK(cuGraphCreate(&serial, 0));
  node_of(parallel, x, nullptr, 0);
  node_of(parallel, y, nullptr, 0);
  CUgraphNode first = node_of(serial, x, nullptr, 0);
  node_of(serial, y, &first, 1);
  CUevent start = nullptr, stop = nullptr;
  CU_OK(cuEventCreate(&start, 0));
  CU_OK(cuEventCreate(&stop, 0));
  auto time_of = [&](CUgraph g) {
    CUgraphExec exec = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuGraphInstantiate(&exec, g, 0));
    EXPECT_EQ(CUDA_SUCCESS, cuEventRecord(start, m_s));
    EXPECT_EQ(CUDA_SUCCESS, cuGraphLaunch(exec, m_s));
    EXPECT_EQ(CUDA_SUCCESS, cuEventRecord(stop, m_s));
    EXPECT_EQ(CUDA_SUCCESS, cuEventSynchronize(stop));
    float ms = 0;
    EXPECT_EQ(CUDA_SUCCESS, cuEventElapsedTime(&ms, start, stop));
    cuGraphExecDestroy(exec);
    return ms;
  };
  float both = time_of(parallel);
  float chained = time_of(serial);
  // The same two kernels issued one after the other on a stream.
  CU_OK(cuEventRecord(start, m_s));
  for (CUdeviceptr p : {x, y}) {
    unsigned len = n, v = 1;
    void* args[] = {&p, &len, &v};
    CU_OK(cuLaunchKernel(m_add, n / 256, 1, 1, 256, 1, 1, 0, m_s, args, nullptr));
  }
  CU_OK(cuEventRecord(stop, m_s));
  CU_OK(cuEventSynchronize(stop));
  float streamed = 0;
  CU_OK(cuEventElapsedTime(&streamed, start, stop));
  EXPECT_GT(both, 0.0f);
  EXPECT_LT(both, chained);
  EXPECT_LT(both, streamed);
  EXPECT_NEAR(chained, streamed, 1e-4);
  EXPECT_NEAR(both * 2, chained, 1e-4); // two equal kernels: the max of them vs their sum
  std::vector<unsigned> host(n);
  CU_OK(cuMemcpyDtoH(host.data(), y, n * 4));
  EXPECT_TRUE(all(host, 3));
  CU_OK(cuGraphDestroy(parallel));
  CU_OK(cuGraphDestroy(serial));
}

// --- lookups -------------------------------------------------------------------------------------

TEST_F(Graphs, GetProcAddressFindsThePerThreadVariants) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  CU_OK(cuGetProcAddress("cuGraphLaunch", &fn, 13000,
                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuGraphLaunch_ptsz"));
  CU_OK(cuGetProcAddress("cuGraphLaunch", &fn, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuGraphLaunch"));
  CU_OK(cuGetProcAddress("cuStreamBeginCapture", &fn, 13000,
                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2_ptsz"));
  CU_OK(cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 13000,
                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuStreamGetCaptureInfo_v3_ptsz"));
  // The per-thread variants capture the per-thread default stream.
  using Begin = CUresult (*)(CUstream, CUstreamCaptureMode);
  using End = CUresult (*)(CUstream, CUgraph*);
  auto begin = reinterpret_cast<Begin>(dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2_ptsz"));
  auto end = reinterpret_cast<End>(dlsym(RTLD_DEFAULT, "cuStreamEndCapture_ptsz"));
  ASSERT_NE(begin, nullptr);
  ASSERT_NE(end, nullptr);
  CU_OK(begin(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus st{};
  CU_OK(cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CU_OK(add(CU_STREAM_PER_THREAD, m_d, 1));
  CUgraph g = nullptr;
  CU_OK(end(nullptr, &g));
  EXPECT_EQ(nodes(g).size(), 1u);
  EXPECT_TRUE(all(read(m_d), 0));
  CU_OK(cuGraphDestroy(g));
}

} // namespace
