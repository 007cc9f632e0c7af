// threads: a multi-threaded host program on the legacy default stream and on created streams, as
// a server with a worker pool is. Six std::threads, three on the legacy default stream (0) and
// three on streams of their own, each run rounds of copy in / kernel / copy out on their own data
// and check it; the last error is per thread: one thread's bad launch configuration is seen by its
// own cudaGetLastError and not by another thread's, waiting on it. Per-thread results printed in
// thread order.
#include "corpus.cuh"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

__global__ void mix(unsigned* data, int n, unsigned salt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = data[i] ^ salt;
  x *= 2654435761u;
  data[i] = x ^ (x >> 15);
}

unsigned host_mix(unsigned v, unsigned salt) {
  unsigned x = v ^ salt;
  x *= 2654435761u;
  return x ^ (x >> 15);
}

constexpr int k_threads = 6;
constexpr int k_rounds = 4;
constexpr int k_n = 640;

struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool failed_launch_done = false;
};

struct Result {
  unsigned long long checksum = 0;
  bool last_error_isolated = false;
};

void work(int t, Gate* gate, Result* r) {
  bool own_stream = t >= k_threads / 2;
  cudaStream_t s = nullptr;
  if (own_stream) CHECK(cudaStreamCreate(&s));
  std::vector<unsigned> h(k_n), ref(k_n);
  for (int i = 0; i < k_n; ++i) ref[i] = h[i] = unsigned(i * 31 + t);
  unsigned* d;
  CHECK(cudaMalloc(&d, k_n * sizeof(unsigned)));
  for (int round = 0; round < k_rounds; ++round) {
    unsigned salt = unsigned(t * 100 + round);
    CHECK(cudaMemcpyAsync(d, h.data(), k_n * sizeof(unsigned), cudaMemcpyHostToDevice, s));
    mix<<<(k_n + 63) / 64, 64, 0, s>>>(d, k_n, salt);
    CHECK_LAUNCH("mix<<<>>>");
    CHECK(cudaMemcpyAsync(h.data(), d, k_n * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    CHECK(own_stream ? cudaStreamSynchronize(s) : cudaStreamSynchronize(0));
    for (int i = 0; i < k_n; ++i) {
      ref[i] = host_mix(ref[i], salt);
      if (h[i] != ref[i]) corpus::wrong("thread %d round %d element %d: %08x, expected %08x", t, round, i, h[i], ref[i]);
    }
  }
  // Thread 0 makes a bad launch; thread 1 checks its own last error after it.
  if (t == 0) {
    mix<<<1, 4096, 0, s>>>(d, k_n, 0);
    cudaError_t e = cudaPeekAtLastError();
    {
      std::lock_guard<std::mutex> lock(gate->mutex);
      gate->failed_launch_done = true;
    }
    gate->cv.notify_all();
    r->last_error_isolated = e == cudaErrorInvalidConfiguration;
    CHECK_LAUNCH_ERROR("mix<<<1, 4096>>>", cudaErrorInvalidConfiguration);
  } else if (t == 1) {
    std::unique_lock<std::mutex> lock(gate->mutex);
    gate->cv.wait(lock, [&] { return gate->failed_launch_done; });
    r->last_error_isolated = cudaGetLastError() == cudaSuccess;
  } else {
    r->last_error_isolated = true;
  }
  corpus::Checksum sum;
  sum.add_all(h.data(), h.size());
  r->checksum = sum.value();
  CHECK(cudaFree(d));
  if (own_stream) CHECK(cudaStreamDestroy(s));
}

int main() {
  Gate gate;
  Result results[k_threads];
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) threads.emplace_back(work, t, &gate, &results[t]);
  for (auto& th : threads) th.join();
  for (int t = 0; t < k_threads; ++t) {
    if (!results[t].last_error_isolated) corpus::wrong("thread %d: the last error leaked across threads", t);
    std::printf("threads: thread %d (%s) checksum %016llx\n", t,
                t >= k_threads / 2 ? "own stream" : "legacy stream", results[t].checksum);
  }
  CHECK(cudaDeviceSynchronize());
  std::printf("threads: ok\n");
  return 0;
}
