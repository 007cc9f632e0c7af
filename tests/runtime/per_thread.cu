// per_thread: built with `nvcc --default-stream per-thread`, as multi-threaded servers are, so
// the default stream (0) of every call means the calling thread's own stream and the program
// calls the runtime's _ptsz/_ptds entry points. Four host threads each allocate, copy in with
// cudaMemcpyAsync on stream 0, launch <<<>>> on it (and with cudaLaunchKernel), record and
// synchronize an event on it, copy back with cudaMemcpy and check their own results; stream 0 and
// cudaStreamPerThread are the same stream; a created stream still works beside them.
#include "corpus.cuh"

#include <mutex>
#include <thread>
#include <vector>

__global__ void affine(int* data, int n, int mul, int add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * mul + add;
}

constexpr int k_threads = 4;
constexpr int k_n = 777;

struct Result {
  unsigned long long checksum = 0;
  int last = 0;
};

void work(int t, Result* r) {
  CHECK(cudaSetDevice(0));
  std::vector<int> h(k_n);
  for (int i = 0; i < k_n; ++i) h[i] = i + 10 * t;
  int* d;
  CHECK(cudaMalloc(&d, k_n * sizeof(int)));
  CHECK(cudaMemcpyAsync(d, h.data(), k_n * sizeof(int), cudaMemcpyHostToDevice, 0));
  affine<<<(k_n + 127) / 128, 128>>>(d, k_n, t + 2, t);
  CHECK_LAUNCH("affine<<<>>> on the per-thread default stream");
  int n = k_n, mul = 3, add = -t;
  void* args[] = {&d, &n, &mul, &add};
  CHECK(cudaLaunchKernel((const void*)affine, dim3((k_n + 127) / 128), dim3(128), args, 0,
                         cudaStreamPerThread));
  cudaEvent_t e;
  CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CHECK(cudaEventRecord(e, 0));
  CHECK(cudaEventSynchronize(e));
  CHECK(cudaStreamQuery(cudaStreamPerThread));
  CHECK(cudaMemset(d, 0, sizeof(int))); // element 0 cleared by a synchronous _ptds call
  cudaStream_t own;
  CHECK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  affine<<<1, 32, 0, own>>>(d + 1, 1, 1, 1000); // element 1 gets +1000 on a created stream
  CHECK_LAUNCH("affine<<<>>> on a created stream");
  CHECK(cudaStreamSynchronize(own));
  std::vector<int> out(k_n);
  CHECK(cudaMemcpy(out.data(), d, k_n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaStreamSynchronize(0));
  for (int i = 0; i < k_n; ++i) {
    int want = i == 0 ? 0 : ((h[i] * (t + 2) + t) * 3 - t) + (i == 1 ? 1000 : 0);
    if (out[i] != want) corpus::wrong("thread %d element %d = %d, expected %d", t, i, out[i], want);
  }
  corpus::Checksum sum;
  sum.add_all(out.data(), out.size());
  r->checksum = sum.value();
  r->last = out[k_n - 1];
  CHECK(cudaStreamDestroy(own));
  CHECK(cudaEventDestroy(e));
  CHECK(cudaFree(d));
}

int main() {
  Result results[k_threads];
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) threads.emplace_back(work, t, &results[t]);
  for (auto& th : threads) th.join();
  for (int t = 0; t < k_threads; ++t)
    std::printf("per_thread: thread %d last %d checksum %016llx\n", t, results[t].last,
                results[t].checksum);
  CHECK(cudaDeviceSynchronize());
  std::printf("per_thread: ok\n");
  return 0;
}
