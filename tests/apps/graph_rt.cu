// hone-testapp-graph: a CUDA runtime-API application (nvcc, -cudart shared) that runs its hot
// kernel only through CUDA graphs, shaped like the programs that do, and checks every replay's
// result against the host. The end-to-end tests optimize and swap the kernel inside its graphs.
//
//   --mode pytorch   torch.cuda.CUDAGraph-like: one step captured per batch size (<<<>>> into a
//                    capturing stream, global mode), instantiated once each, replayed thousands
//                    of times, cycling through the sizes
//   --mode llama     llama.cpp-like: every step captured anew and cudaGraphExecUpdate'd into the
//                    one executable graph (its arguments move: the output buffer alternates), and
//                    every --odd-every'th step (once --odd-file exists, when given) the kernel's
//                    arguments change value between replays (cudaGraphExecKernelNodeSetParams:
//                    buckets 512 instead of 1024)
//   --mode explicit  a graph built node by node: memset, a child graph holding the kernel, a
//                    device-to-host memcpy and a host node that checks the result
//   --mode memnodes  a graph that allocates its output (memory alloc node), runs the kernel into
//                    it, copies it back and frees it (memory free node)
//   --chain          (llama mode) several kernels per step, as a layer of a model runs them:
//                    stage<unsigned> makes the keys bucket reads (keys + 1), bucket, then
//                    stage<unsigned> again turns its output into the step's result (+ 3), which
//                    is copied back; the kernels depend on each other through device memory
//
// The kernel is serve_rt.cu's bucket<unsigned> (a mangled template). Prints "progress <replays>"
// about once a second and, at the end, "replays <R> mismatches <M> odd <O> last_mismatch <L>" (L:
// the number of the last wrong replay, counting from 1; 0 when none was); exits 1 on a mismatch,
// 2 when a CUDA call fails. Nothing of hone: cuda_runtime.h only.
#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bucket.cuh"

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::printf("error: %s: %s\n", what, cudaGetErrorName(e));
  std::fflush(stdout);
  std::exit(2);
}

constexpr unsigned k_block = 128;
unsigned g_rounds = 64; // mixing steps per key: --rounds
constexpr unsigned k_buckets = 1024;
constexpr unsigned k_odd_buckets = 512;

struct Expect {
  std::vector<unsigned> even, odd; // for k_buckets and k_odd_buckets
};

unsigned* g_host_out = nullptr; // pinned; the explicit graph's memcpy target
std::atomic<long> g_host_checks{0};

void CUDART_CB host_check(void* data) {
  // A host node runs after the copy: it sees the replay's output (and only counts here; the
  // comparison with the expectation is the main loop's).
  (void)data;
  g_host_checks.fetch_add(1);
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  long iterations = -1, odd_every = 0;
  std::string mode = "pytorch", stop_file, odd_file;
  unsigned n = 4096;
  bool chain = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : (char*)""; };
    if (a == "--seconds")
      seconds = std::atof(next());
    else if (a == "--iterations")
      iterations = std::atol(next());
    else if (a == "--stop-file")
      stop_file = next();
    else if (a == "--mode")
      mode = next();
    else if (a == "--n")
      n = unsigned(std::atol(next()));
    else if (a == "--rounds")
      g_rounds = unsigned(std::atol(next()));
    else if (a == "--odd-every")
      odd_every = std::atol(next());
    else if (a == "--odd-file")
      odd_file = next();
    else if (a == "--chain")
      chain = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--mode pytorch|llama|explicit|memnodes] [--seconds S] [--iterations N] "
                   "[--stop-file PATH] [--n N] [--rounds R] [--odd-every K] [--odd-file PATH] "
                   "[--chain]\n",
                   argv[0]);
      return 2;
    }
  }
  if (n < 1024 || g_rounds == 0 ||
      (mode != "pytorch" && mode != "llama" && mode != "explicit" && mode != "memnodes") ||
      (chain && mode != "llama")) {
    std::fprintf(stderr, "graph: bad arguments\n");
    return 2;
  }

  // With --chain, bucket reads keys + 1 (the first stage) and the step's result is its output
  // + 3 (the last stage).
  constexpr unsigned k_key_add = 1, k_result_add = 3;
  std::vector<unsigned> keys(n);
  Expect expect;
  expect.even.resize(n);
  expect.odd.resize(n);
  for (unsigned i = 0; i < n; ++i) {
    keys[i] = i * 2246822519u ^ (i >> 3);
    const unsigned key = chain ? keys[i] + k_key_add : keys[i];
    const unsigned add = chain ? k_result_add : 0;
    expect.even[i] = hone_rt::host_bucket(key, k_buckets, g_rounds) + add;
    expect.odd[i] = hone_rt::host_bucket(key, k_odd_buckets, g_rounds) + add;
  }
  unsigned *d_keys = nullptr, *d_out[2] = {nullptr, nullptr};
  unsigned *d_staged = nullptr, *d_result = nullptr; // --chain: bucket's input, the step's result
  const size_t bytes = n * sizeof(unsigned);
  check(cudaMalloc(&d_keys, bytes), "cudaMalloc");
  check(cudaMalloc(&d_out[0], bytes), "cudaMalloc");
  check(cudaMalloc(&d_out[1], bytes), "cudaMalloc");
  if (chain) {
    check(cudaMalloc(&d_staged, bytes), "cudaMalloc");
    check(cudaMalloc(&d_result, bytes), "cudaMalloc");
  }
  unsigned* const bucket_in = chain ? d_staged : d_keys;
  check(cudaMallocHost(&g_host_out, bytes), "cudaMallocHost");
  check(cudaMemcpy(d_keys, keys.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");

  // One step: clear the output, bucket `count` keys, copy the result back (with --chain, a
  // stage before bucket and one after it).
  auto record_step = [&](unsigned* out, unsigned count, unsigned buckets) {
    const unsigned blocks = (count + k_block - 1) / k_block;
    check(cudaMemsetAsync(out, 0xff, bytes, stream), "cudaMemsetAsync");
    if (chain) {
      hone_rt::stage<unsigned><<<blocks, k_block, 0, stream>>>(d_staged, d_keys, count, k_key_add);
      check(cudaGetLastError(), "stage<<<>>>");
    }
    hone_rt::bucket<unsigned>
        <<<blocks, k_block, 0, stream>>>(out, bucket_in, count, buckets, g_rounds);
    check(cudaGetLastError(), "bucket<<<>>>");
    unsigned* result = out;
    if (chain) {
      hone_rt::stage<unsigned><<<blocks, k_block, 0, stream>>>(d_result, out, count, k_result_add);
      check(cudaGetLastError(), "stage<<<>>>");
      result = d_result;
    }
    check(cudaMemcpyAsync(g_host_out, result, count * sizeof(unsigned), cudaMemcpyDeviceToHost,
                          stream),
          "cudaMemcpyAsync");
  };
  auto capture_step = [&](unsigned* out, unsigned count, unsigned buckets) {
    cudaGraph_t g = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    record_step(out, count, buckets);
    check(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture");
    return g;
  };

  long replays = 0, mismatches = 0, odd = 0, last_mismatch = 0;
  auto verify = [&](unsigned count, bool odd_args) {
    const std::vector<unsigned>& want = odd_args ? expect.odd : expect.even;
    if (std::memcmp(g_host_out, want.data(), count * sizeof(unsigned)) == 0) return;
    last_mismatch = replays;
    if (mismatches++ == 0) {
      for (unsigned i = 0; i < count; ++i) {
        if (g_host_out[i] != want[i]) {
          std::printf("mismatch at replay %ld (%s arguments): out[%u] = %u, want %u\n", replays,
                      odd_args ? "odd" : "usual", i, g_host_out[i], want[i]);
          break;
        }
      }
    }
  };

  // --- pytorch: one graph per batch size, replayed in turn
  std::vector<unsigned> sizes{n / 4, n / 2, n};
  std::vector<cudaGraphExec_t> per_size;
  if (mode == "pytorch") {
    for (unsigned count : sizes) {
      cudaGraph_t g = capture_step(d_out[0], count, k_buckets);
      cudaGraphExec_t e = nullptr;
      check(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate");
      check(cudaGraphDestroy(g), "cudaGraphDestroy"); // as torch does once instantiated
      per_size.push_back(e);
    }
  }

  // --- llama: the one executable graph every step is updated into
  cudaGraphExec_t llama = nullptr;
  cudaGraphNode_t llama_kernel = nullptr; // of the graph it was instantiated from
  cudaGraph_t llama_first = nullptr;

  // --- explicit: memset -> child(kernel) -> memcpy -> host
  cudaGraphExec_t explicit_exec = nullptr;
  if (mode == "explicit") {
    cudaGraph_t g = nullptr, child = nullptr;
    check(cudaGraphCreate(&g, 0), "cudaGraphCreate");
    check(cudaGraphCreate(&child, 0), "cudaGraphCreate");
    cudaMemsetParams ms{};
    ms.dst = d_out[0];
    ms.value = 0xff;
    ms.elementSize = 1;
    ms.width = bytes;
    ms.height = 1;
    cudaGraphNode_t set = nullptr, kernel = nullptr, sub = nullptr, copy = nullptr, host = nullptr;
    check(cudaGraphAddMemsetNode(&set, g, nullptr, 0, &ms), "cudaGraphAddMemsetNode");
    unsigned count = n, buckets = k_buckets, rounds = g_rounds;
    void* args[] = {&d_out[0], &d_keys, &count, &buckets, &rounds};
    cudaKernelNodeParams kp{};
    kp.func = reinterpret_cast<void*>(&hone_rt::bucket<unsigned>);
    kp.gridDim = dim3((n + k_block - 1) / k_block);
    kp.blockDim = dim3(k_block);
    kp.kernelParams = args;
    check(cudaGraphAddKernelNode(&kernel, child, nullptr, 0, &kp), "cudaGraphAddKernelNode");
    check(cudaGraphAddChildGraphNode(&sub, g, &set, 1, child), "cudaGraphAddChildGraphNode");
    check(cudaGraphAddMemcpyNode1D(&copy, g, &sub, 1, g_host_out, d_out[0], bytes,
                                   cudaMemcpyDeviceToHost),
          "cudaGraphAddMemcpyNode1D");
    cudaHostNodeParams hp{host_check, nullptr};
    check(cudaGraphAddHostNode(&host, g, &copy, 1, &hp), "cudaGraphAddHostNode");
    check(cudaGraphInstantiate(&explicit_exec, g, 0), "cudaGraphInstantiate");
    check(cudaGraphDestroy(child), "cudaGraphDestroy");
    check(cudaGraphDestroy(g), "cudaGraphDestroy");
  }

  // --- memnodes: alloc -> memset -> kernel -> memcpy -> free
  cudaGraphExec_t mem_exec = nullptr;
  if (mode == "memnodes") {
    cudaGraph_t g = nullptr;
    check(cudaGraphCreate(&g, 0), "cudaGraphCreate");
    cudaMemAllocNodeParams ap{};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = bytes;
    cudaGraphNode_t alloc = nullptr, set = nullptr, kernel = nullptr, copy = nullptr, freed = nullptr;
    check(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap), "cudaGraphAddMemAllocNode");
    unsigned* out = static_cast<unsigned*>(ap.dptr);
    cudaMemsetParams ms{};
    ms.dst = out;
    ms.value = 0xff;
    ms.elementSize = 1;
    ms.width = bytes;
    ms.height = 1;
    check(cudaGraphAddMemsetNode(&set, g, &alloc, 1, &ms), "cudaGraphAddMemsetNode");
    unsigned count = n, buckets = k_buckets, rounds = g_rounds;
    void* args[] = {&out, &d_keys, &count, &buckets, &rounds};
    cudaKernelNodeParams kp{};
    kp.func = reinterpret_cast<void*>(&hone_rt::bucket<unsigned>);
    kp.gridDim = dim3((n + k_block - 1) / k_block);
    kp.blockDim = dim3(k_block);
    kp.kernelParams = args;
    check(cudaGraphAddKernelNode(&kernel, g, &set, 1, &kp), "cudaGraphAddKernelNode");
    check(cudaGraphAddMemcpyNode1D(&copy, g, &kernel, 1, g_host_out, out, bytes,
                                   cudaMemcpyDeviceToHost),
          "cudaGraphAddMemcpyNode1D");
    check(cudaGraphAddMemFreeNode(&freed, g, &copy, 1, out), "cudaGraphAddMemFreeNode");
    check(cudaGraphInstantiate(&mem_exec, g, 0), "cudaGraphInstantiate");
    check(cudaGraphDestroy(g), "cudaGraphDestroy");
  }

  auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  for (;;) {
    unsigned count = n;
    bool odd_args = odd_every > 0 && replays % odd_every == odd_every - 1 &&
                    (odd_file.empty() || access(odd_file.c_str(), F_OK) == 0);
    if (mode == "pytorch") {
      size_t which = size_t(replays) % sizes.size();
      count = sizes[which];
      check(cudaGraphLaunch(per_size[which], stream), "cudaGraphLaunch");
      odd_args = false;
    } else if (mode == "llama") {
      unsigned* out = d_out[replays % 2];
      cudaGraph_t g = capture_step(out, n, k_buckets);
      {
        // The captured kernel node reads back as the kernel the program launched.
        size_t count_nodes = 0;
        check(cudaGraphGetNodes(g, nullptr, &count_nodes), "cudaGraphGetNodes");
        std::vector<cudaGraphNode_t> nodes(count_nodes);
        check(cudaGraphGetNodes(g, nodes.data(), &count_nodes), "cudaGraphGetNodes");
        for (cudaGraphNode_t node : nodes) {
          cudaGraphNodeType t;
          check(cudaGraphNodeGetType(node, &t), "cudaGraphNodeGetType");
          if (t != cudaGraphNodeTypeKernel) continue;
          cudaKernelNodeParams kp{};
          check(cudaGraphKernelNodeGetParams(node, &kp), "cudaGraphKernelNodeGetParams");
          if (kp.func != reinterpret_cast<void*>(&hone_rt::bucket<unsigned>) &&
              kp.func != reinterpret_cast<void*>(&hone_rt::stage<unsigned>) && mismatches++ == 0) {
            std::printf("mismatch at replay %ld: the captured node reads as function %p, not %p\n",
                        replays, kp.func, reinterpret_cast<void*>(&hone_rt::bucket<unsigned>));
          }
        }
      }
      if (!llama) {
        check(cudaGraphInstantiate(&llama, g, 0), "cudaGraphInstantiate");
        llama_first = g; // kept: its nodes name the executable graph's
        size_t count_nodes = 0;
        check(cudaGraphGetNodes(g, nullptr, &count_nodes), "cudaGraphGetNodes");
        std::vector<cudaGraphNode_t> nodes(count_nodes);
        check(cudaGraphGetNodes(g, nodes.data(), &count_nodes), "cudaGraphGetNodes");
        for (cudaGraphNode_t node : nodes) {
          cudaGraphNodeType t;
          check(cudaGraphNodeGetType(node, &t), "cudaGraphNodeGetType");
          if (t != cudaGraphNodeTypeKernel) continue;
          cudaKernelNodeParams kp{};
          check(cudaGraphKernelNodeGetParams(node, &kp), "cudaGraphKernelNodeGetParams");
          if (kp.func == reinterpret_cast<void*>(&hone_rt::bucket<unsigned>)) llama_kernel = node;
        }
        if (!llama_kernel) {
          std::printf("error: no kernel node in the captured step\n");
          return 2;
        }
      } else {
        cudaGraphExecUpdateResultInfo info{};
        check(cudaGraphExecUpdate(llama, g, &info), "cudaGraphExecUpdate");
        check(cudaGraphDestroy(g), "cudaGraphDestroy");
      }
      if (odd_args) {
        // New argument values for this replay only, set on the executable graph.
        unsigned c = n, buckets = k_odd_buckets, rounds = g_rounds;
        unsigned* in = bucket_in;
        void* args[] = {&out, &in, &c, &buckets, &rounds};
        cudaKernelNodeParams kp{};
        kp.func = reinterpret_cast<void*>(&hone_rt::bucket<unsigned>);
        kp.gridDim = dim3((n + k_block - 1) / k_block);
        kp.blockDim = dim3(k_block);
        kp.kernelParams = args;
        check(cudaGraphExecKernelNodeSetParams(llama, llama_kernel, &kp),
              "cudaGraphExecKernelNodeSetParams");
      }
      check(cudaGraphLaunch(llama, stream), "cudaGraphLaunch");
    } else if (mode == "explicit") {
      check(cudaGraphLaunch(explicit_exec, stream), "cudaGraphLaunch");
      odd_args = false;
    } else {
      check(cudaGraphLaunch(mem_exec, stream), "cudaGraphLaunch");
      odd_args = false;
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    ++replays;
    if (odd_args) ++odd;
    verify(count, odd_args);
    auto now = std::chrono::steady_clock::now();
    if (now - last_progress >= std::chrono::seconds(1)) {
      std::printf("progress %ld\n", replays);
      std::fflush(stdout);
      last_progress = now;
    }
    if (iterations >= 0 && replays >= iterations) break;
    if (iterations < 0 && std::chrono::duration<double>(now - start).count() >= seconds) break;
    if (!stop_file.empty() && access(stop_file.c_str(), F_OK) == 0) break;
  }
  if (mode == "explicit" && g_host_checks.load() != replays) {
    std::printf("error: the host node ran %ld times in %ld replays\n", g_host_checks.load(),
                replays);
    ++mismatches;
  }
  std::printf("replays %ld mismatches %ld odd %ld last_mismatch %ld\n", replays, mismatches, odd,
              last_mismatch);
  for (cudaGraphExec_t e : per_size) check(cudaGraphExecDestroy(e), "cudaGraphExecDestroy");
  if (llama) check(cudaGraphExecDestroy(llama), "cudaGraphExecDestroy");
  if (llama_first) check(cudaGraphDestroy(llama_first), "cudaGraphDestroy");
  if (explicit_exec) check(cudaGraphExecDestroy(explicit_exec), "cudaGraphExecDestroy");
  if (mem_exec) check(cudaGraphExecDestroy(mem_exec), "cudaGraphExecDestroy");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  check(cudaFreeHost(g_host_out), "cudaFreeHost");
  check(cudaFree(d_out[0]), "cudaFree");
  check(cudaFree(d_out[1]), "cudaFree");
  check(cudaFree(d_keys), "cudaFree");
  if (chain) {
    check(cudaFree(d_staged), "cudaFree");
    check(cudaFree(d_result), "cudaFree");
  }
  return mismatches ? 1 : 0;
}
