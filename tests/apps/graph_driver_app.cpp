// hone-testapp-graph-driver: CUDA graphs through the driver API's linked cu* symbols (-lcuda), as
// a program that builds its graphs by hand does: a graph of NODES `add_one` kernel nodes in a
// chain (each adds 1 to every element), instantiated once and replayed REPLAYS times, one replay
// with changed node arguments (cuGraphExecKernelNodeSetParams: the same buffer, a different
// count), then updated from a second graph of the same shape (cuGraphExecUpdate) and replayed
// once more. The template graph is destroyed right after instantiation. Checks the buffer after
// every replay; prints "graph-driver replays <R> nodes <N> mismatches <M>"; exits 1 on a mismatch,
// 2 when a CUDA call fails.
//
// Usage: hone-testapp-graph-driver [NODES] [REPLAYS]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr const char* k_ptx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry add_one(.param .u64 data, .param .u32 n)
{
  .reg .pred %p;
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [data];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p, %r5, %r1;
  @%p bra DONE;
  mul.wide.u32 %rd2, %r5, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r2, [%rd3];
  add.s32 %r2, %r2, 1;
  st.global.u32 [%rd3], %r2;
DONE:
  ret;
}
)";

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::printf("error: %s: %s\n", what, name ? name : "?");
  std::exit(2);
}

} // namespace

int main(int argc, char** argv) {
  int nodes = argc > 1 ? std::atoi(argv[1]) : 4;
  int replays = argc > 2 ? std::atoi(argv[2]) : 25;
  if (nodes < 1 || nodes > 512 || replays < 1) {
    std::fprintf(stderr, "usage: %s [NODES 1-512] [REPLAYS]\n", argv[0]);
    return 64;
  }
  constexpr unsigned n = 1024, half = n / 2;
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction f;
  CUstream stream;
  check(cuInit(0), "cuInit");
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  check(cuModuleLoadData(&mod, k_ptx), "cuModuleLoadData");
  check(cuModuleGetFunction(&f, mod, "add_one"), "cuModuleGetFunction");
  check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUdeviceptr data;
  check(cuMemAlloc(&data, n * 4), "cuMemAlloc");
  check(cuMemsetD32(data, 0, n), "cuMemsetD32");

  auto build = [&](unsigned count, std::vector<CUgraphNode>* out) {
    CUgraph g;
    check(cuGraphCreate(&g, 0), "cuGraphCreate");
    CUgraphNode prev = nullptr;
    for (int i = 0; i < nodes; ++i) {
      void* args[] = {&data, &count};
      CUDA_KERNEL_NODE_PARAMS p{};
      p.func = f;
      p.gridDimX = (n + 127) / 128;
      p.gridDimY = p.gridDimZ = 1;
      p.blockDimX = 128;
      p.blockDimY = p.blockDimZ = 1;
      p.kernelParams = args;
      CUgraphNode node;
      check(cuGraphAddKernelNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &p),
            "cuGraphAddKernelNode");
      if (out) out->push_back(node);
      prev = node;
    }
    return g;
  };
  std::vector<CUgraphNode> first_nodes;
  CUgraph g = build(n, &first_nodes);
  CUgraphExec exec;
  check(cuGraphInstantiate(&exec, g, 0), "cuGraphInstantiate");
  check(cuGraphDestroy(g), "cuGraphDestroy");

  std::vector<unsigned> expect(n, 0), got(n);
  long mismatches = 0, done = 0;
  auto replay = [&](unsigned count) {
    check(cuGraphLaunch(exec, stream), "cuGraphLaunch");
    check(cuStreamSynchronize(stream), "cuStreamSynchronize");
    ++done;
    for (unsigned i = 0; i < count; ++i) expect[i] += unsigned(nodes);
    check(cuMemcpyDtoH(got.data(), data, n * 4), "cuMemcpyDtoH");
    if (got != expect && mismatches++ == 0) std::printf("mismatch after replay %ld\n", done);
  };
  for (int r = 0; r < replays; ++r) replay(n);
  // New arguments for the first node only: it covers half the buffer.
  {
    unsigned count = half;
    void* args[] = {&data, &count};
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = f;
    p.gridDimX = (n + 127) / 128;
    p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 128;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    check(cuGraphExecKernelNodeSetParams(exec, first_nodes[0], &p),
          "cuGraphExecKernelNodeSetParams");
    check(cuGraphLaunch(exec, stream), "cuGraphLaunch");
    check(cuStreamSynchronize(stream), "cuStreamSynchronize");
    ++done;
    for (unsigned i = 0; i < n; ++i) expect[i] += unsigned(nodes) - (i < half ? 0 : 1);
    check(cuMemcpyDtoH(got.data(), data, n * 4), "cuMemcpyDtoH");
    if (got != expect && mismatches++ == 0) std::printf("mismatch after the changed replay\n");
  }
  // Updated from a graph of the same shape (every node over the whole buffer again).
  CUgraph g2 = build(n, nullptr);
  CUgraphExecUpdateResultInfo info{};
  check(cuGraphExecUpdate(exec, g2, &info), "cuGraphExecUpdate");
  check(cuGraphDestroy(g2), "cuGraphDestroy");
  replay(n);

  check(cuGraphExecDestroy(exec), "cuGraphExecDestroy");
  std::printf("graph-driver replays %ld nodes %d mismatches %ld\n", done, nodes, mismatches);
  return mismatches ? 1 : 0;
}
