// graph_memory: graph memory nodes the way NVIDIA's graphMemoryNodes and streamOrderedAllocation
// samples use them. cudaMallocAsync -> kernels -> cudaFreeAsync captured from a stream that forks a
// second stream (created, joined back and destroyed inside the capture), instantiated and launched
// several times; the same graph built with cudaGraphAddMemAllocNode/FreeNode, with an allocation
// that reuses a freed one's address; an allocation left live by the graph and freed outside it
// (cudaFree after a synchronize, cudaFreeAsync in stream order, a free node of another graph);
// relaunching with the allocation still live (refused) and with
// cudaGraphInstantiateFlagAutoFreeOnLaunch (freed and allocated again). Results checked.
#include "corpus.cuh"

#include <cstring>
#include <vector>

constexpr int k_threads = 256;

__global__ void square(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i];
}

__global__ void negate(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = -in[i];
}

// Counts the elements of `got` that differ from `want`.
__global__ void count_mismatches(const float* got, const float* want, int n, int* mismatches) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && got[i] != want[i]) atomicAdd(mismatches, 1);
}

struct Host {
  int n = 0;
  size_t bytes = 0;
  unsigned blocks = 0;
  std::vector<float> in, square, neg_square;

  void reset_outputs() {
    std::fill(square.begin(), square.end(), -1.0f);
    std::fill(neg_square.begin(), neg_square.end(), -1.0f);
  }
  void check(const char* what) const {
    for (int i = 0; i < n; ++i) {
      const float sq = in[i] * in[i];
      if (square[i] != sq) corpus::wrong("%s: square[%d] = %g, expected %g", what, i, square[i], sq);
      if (neg_square[i] != -sq)
        corpus::wrong("%s: neg_square[%d] = %g, expected %g", what, i, neg_square[i], -sq);
    }
    std::printf("graph_memory: %s ok\n", what);
  }
};

// input -> square -> (copy out) and -> negated square -> (copy out), with `input` freed before
// the negated square is allocated, on stream s1 and a second stream forked from it and joined back.
// `keep`: the negated square's buffer is not freed but returned.
void negate_squares_in_stream(cudaStream_t s1, Host& h, float** keep) {
  float *d_in = nullptr, *d_sq = nullptr, *d_neg = nullptr;
  cudaStream_t s2;
  cudaEvent_t squared, negated, square_freed;
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&squared));
  CHECK(cudaEventCreate(&negated));
  CHECK(cudaEventCreate(&square_freed));
  CHECK(cudaMallocAsync(&d_in, h.bytes, s1));
  CHECK(cudaMallocAsync(&d_sq, h.bytes, s1));
  CHECK(cudaMemcpyAsync(d_in, h.in.data(), h.bytes, cudaMemcpyHostToDevice, s1));
  square<<<h.blocks, k_threads, 0, s1>>>(d_in, d_sq, h.n);
  CHECK_LAUNCH("square<<<>>>");
  CHECK(cudaEventRecord(squared, s1));
  CHECK(cudaStreamWaitEvent(s2, squared, 0));
  CHECK(cudaMemcpyAsync(h.square.data(), d_sq, h.bytes, cudaMemcpyDeviceToHost, s2));
  CHECK(cudaFreeAsync(d_in, s1));
  CHECK(cudaMallocAsync(&d_neg, h.bytes, s1));
  negate<<<h.blocks, k_threads, 0, s1>>>(d_sq, d_neg, h.n);
  CHECK_LAUNCH("negate<<<>>>");
  CHECK(cudaEventRecord(negated, s1));
  CHECK(cudaMemcpyAsync(h.neg_square.data(), d_neg, h.bytes, cudaMemcpyDeviceToHost, s1));
  if (keep != nullptr) *keep = d_neg;
  else CHECK(cudaFreeAsync(d_neg, s1));
  CHECK(cudaStreamWaitEvent(s2, negated, 0));
  CHECK(cudaFreeAsync(d_sq, s2));
  CHECK(cudaEventRecord(square_freed, s2));
  CHECK(cudaStreamWaitEvent(s1, square_freed, 0));
  // Destroyed while (in a capture) it still takes part: its work is joined back above.
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaEventDestroy(squared));
  CHECK(cudaEventDestroy(negated));
  CHECK(cudaEventDestroy(square_freed));
}

// The same work as a graph built node by node; `keep` as above.
cudaGraphExec_t negate_squares_graph(Host& h, float** keep, unsigned flags = 0) {
  cudaMemAllocNodeParams alloc;
  std::memset(&alloc, 0, sizeof alloc);
  alloc.bytesize = h.bytes;
  alloc.poolProps.allocType = cudaMemAllocationTypePinned;
  alloc.poolProps.location.type = cudaMemLocationTypeDevice;
  alloc.poolProps.location.id = 0;
  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t a_in, a_sq, a_neg, c_in, c_sq, c_neg, k_sq, k_neg, f_in, f_sq;
  CHECK(cudaGraphAddMemAllocNode(&a_in, g, nullptr, 0, &alloc));
  float* d_in = static_cast<float*>(alloc.dptr);
  CHECK(cudaGraphAddMemAllocNode(&a_sq, g, &a_in, 1, &alloc));
  float* d_sq = static_cast<float*>(alloc.dptr);
  CHECK(cudaGraphAddMemcpyNode1D(&c_in, g, &a_sq, 1, d_in, h.in.data(), h.bytes,
                                 cudaMemcpyHostToDevice));
  cudaKernelNodeParams k = {};
  k.gridDim = dim3(h.blocks);
  k.blockDim = dim3(k_threads);
  void* sq_args[] = {&d_in, &d_sq, &h.n};
  k.func = reinterpret_cast<void*>(square);
  k.kernelParams = sq_args;
  CHECK(cudaGraphAddKernelNode(&k_sq, g, &c_in, 1, &k));
  CHECK(cudaGraphAddMemcpyNode1D(&c_sq, g, &k_sq, 1, h.square.data(), d_sq, h.bytes,
                                 cudaMemcpyDeviceToHost));
  CHECK(cudaGraphAddMemFreeNode(&f_in, g, &k_sq, 1, d_in));
  // Allocated after the input's free: the graph may give it the input's address.
  CHECK(cudaGraphAddMemAllocNode(&a_neg, g, &f_in, 1, &alloc));
  float* d_neg = static_cast<float*>(alloc.dptr);
  void* neg_args[] = {&d_sq, &d_neg, &h.n};
  k.func = reinterpret_cast<void*>(negate);
  k.kernelParams = neg_args;
  CHECK(cudaGraphAddKernelNode(&k_neg, g, &a_neg, 1, &k));
  cudaGraphNode_t both[] = {c_sq, k_neg};
  CHECK(cudaGraphAddMemFreeNode(&f_sq, g, both, 2, d_sq));
  CHECK(cudaGraphAddMemcpyNode1D(&c_neg, g, &k_neg, 1, h.neg_square.data(), d_neg, h.bytes,
                                 cudaMemcpyDeviceToHost));
  if (keep != nullptr) {
    *keep = d_neg;
  } else {
    cudaGraphNode_t f_neg;
    CHECK(cudaGraphAddMemFreeNode(&f_neg, g, &c_neg, 1, d_neg));
  }
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiateWithFlags(&exec, g, flags));
  CHECK(cudaGraphDestroy(g));
  return exec;
}

// How many elements of `d_neg` differ from the reference, checked on the device (the buffer is
// used outside the graph that allocated it, before it is freed).
int device_mismatches(cudaStream_t s, const float* d_neg, const float* d_ref, int* d_count,
                      const Host& h) {
  CHECK(cudaMemsetAsync(d_count, 0, sizeof(int), s));
  count_mismatches<<<h.blocks, k_threads, 0, s>>>(d_neg, d_ref, h.n, d_count);
  CHECK_LAUNCH("count_mismatches<<<>>>");
  int count = -1;
  CHECK(cudaMemcpyAsync(&count, d_count, sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  return count;
}

int main() {
  int pools = 0;
  CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0));
  if (!pools) corpus::wrong("cudaDevAttrMemoryPoolsSupported is 0");
  Host h;
  h.n = 20000;
  h.bytes = h.n * sizeof(float);
  h.blocks = (h.n + k_threads - 1) / k_threads;
  h.in.resize(h.n);
  h.square.resize(h.n);
  h.neg_square.resize(h.n);
  for (int i = 0; i < h.n; ++i) h.in[i] = float(i % 1000) * 0.25f - 100.0f;
  std::vector<float> ref(h.n);
  for (int i = 0; i < h.n; ++i) ref[i] = -(h.in[i] * h.in[i]);
  float* d_ref = nullptr;
  int* d_count = nullptr;
  CHECK(cudaMalloc(&d_ref, h.bytes));
  CHECK(cudaMalloc(&d_count, sizeof(int)));
  CHECK(cudaMemcpy(d_ref, ref.data(), h.bytes, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // Stream-ordered allocation without a graph.
  h.reset_outputs();
  negate_squares_in_stream(s, h, nullptr);
  CHECK(cudaStreamSynchronize(s));
  h.check("in a stream");

  // Captured: the allocations and frees become memory nodes; launched three times.
  cudaStream_t cs;
  CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  negate_squares_in_stream(cs, h, nullptr);
  cudaGraph_t captured;
  CHECK(cudaStreamEndCapture(cs, &captured));
  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(captured, nullptr, &nodes));
  std::printf("graph_memory: the capture has %zu nodes\n", nodes);
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, captured, 0));
  CHECK(cudaStreamDestroy(cs));
  CHECK(cudaGraphDestroy(captured));
  for (int launch = 0; launch < 3; ++launch) {
    h.reset_outputs();
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    h.check(launch == 0 ? "captured graph, launch 1" : launch == 1 ? "captured graph, launch 2"
                                                                   : "captured graph, launch 3");
  }
  CHECK(cudaGraphExecDestroy(exec));

  // Built node by node, launched twice.
  exec = negate_squares_graph(h, nullptr);
  for (int launch = 0; launch < 2; ++launch) {
    h.reset_outputs();
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    h.check(launch == 0 ? "explicit graph, launch 1" : "explicit graph, launch 2");
  }
  CHECK(cudaGraphExecDestroy(exec));

  // The negated square outlives the graph: used by a kernel outside it, then freed by cudaFree
  // after a synchronize...
  float* d_neg = nullptr;
  exec = negate_squares_graph(h, &d_neg);
  h.reset_outputs();
  CHECK(cudaGraphLaunch(exec, s));
  if (int m = device_mismatches(s, d_neg, d_ref, d_count, h); m != 0)
    corpus::wrong("%d mismatches in the kept buffer", m);
  CHECK(cudaFree(d_neg));
  h.check("kept buffer freed by cudaFree");
  // ...then by cudaFreeAsync in stream order after the next launch...
  CHECK(cudaGraphLaunch(exec, s));
  if (int m = device_mismatches(s, d_neg, d_ref, d_count, h); m != 0)
    corpus::wrong("%d mismatches in the kept buffer", m);
  CHECK(cudaFreeAsync(d_neg, s));
  CHECK(cudaStreamSynchronize(s));
  std::printf("graph_memory: kept buffer freed by cudaFreeAsync ok\n");
  // ...then by a free node of another graph.
  cudaGraph_t fg;
  CHECK(cudaGraphCreate(&fg, 0));
  cudaGraphNode_t free_node;
  CHECK(cudaGraphAddMemFreeNode(&free_node, fg, nullptr, 0, d_neg));
  cudaGraphExec_t free_exec;
  CHECK(cudaGraphInstantiate(&free_exec, fg, 0));
  CHECK(cudaGraphDestroy(fg));
  CHECK(cudaGraphLaunch(exec, s));
  if (int m = device_mismatches(s, d_neg, d_ref, d_count, h); m != 0)
    corpus::wrong("%d mismatches in the kept buffer", m);
  CHECK(cudaGraphLaunch(free_exec, s));
  CHECK(cudaStreamSynchronize(s));
  std::printf("graph_memory: kept buffer freed by another graph ok\n");
  // Relaunching while the buffer is still live is refused (cudaGraphLaunch's documentation)...
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK_ERROR(cudaGraphLaunch(exec, s), cudaErrorInvalidValue);
  CHECK(cudaFree(d_neg));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphExecDestroy(free_exec));
  // ...unless the graph frees what its last launch left.
  exec = negate_squares_graph(h, &d_neg, cudaGraphInstantiateFlagAutoFreeOnLaunch);
  for (int launch = 0; launch < 3; ++launch) {
    h.reset_outputs();
    CHECK(cudaGraphLaunch(exec, s));
    if (int m = device_mismatches(s, d_neg, d_ref, d_count, h); m != 0)
      corpus::wrong("%d mismatches in the kept buffer, launch %d", m, launch + 1);
  }
  h.check("auto free on launch, 3 launches");
  CHECK(cudaFreeAsync(d_neg, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGraphExecDestroy(exec));

  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d_ref));
  CHECK(cudaFree(d_count));
  std::printf("graph_memory: ok\n");
  return 0;
}
