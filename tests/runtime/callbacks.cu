// callbacks: host work in stream order, as real code hands results to the host. On one stream: a
// kernel, a device-to-host copy into pinned memory, a cudaStreamAddCallback that checks the copied
// values and sees cudaSuccess and its stream, a cudaLaunchHostFunc, another kernel and copy, and a
// last host function; on a second stream, a host function that waits (cudaStreamWaitEvent) for the
// first stream's second kernel. The order in which they ran and what each saw are checked.
// cudaStreamAddCallback with flags other than 0 is refused with cudaErrorInvalidValue.
#include "corpus.cuh"

#include <mutex>
#include <string>
#include <vector>

__global__ void iota_times(int* out, int n, int factor) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * factor;
}

constexpr int k_n = 512;

struct Log {
  std::mutex mutex;
  std::vector<std::string> order;
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back(what);
  }
};

struct Seen {
  Log* log;
  const int* host; // pinned, written by the copy before the callback
  int factor;
  cudaStream_t expected_stream;
  bool values_ok = false;
  bool status_ok = false;
  bool stream_ok = false;
};

void CUDART_CB after_first_copy(cudaStream_t stream, cudaError_t status, void* user) {
  auto* s = static_cast<Seen*>(user);
  s->status_ok = status == cudaSuccess;
  s->stream_ok = stream == s->expected_stream;
  bool ok = true;
  for (int i = 0; i < k_n; ++i) ok &= s->host[i] == i * s->factor;
  s->values_ok = ok;
  s->log->add("callback(first copy)");
}

void CUDART_CB host_func_checks(void* user) {
  auto* s = static_cast<Seen*>(user);
  bool ok = true;
  for (int i = 0; i < k_n; ++i) ok &= s->host[i] == i * s->factor;
  s->values_ok = ok;
  s->status_ok = s->stream_ok = true;
  s->log->add("host func(second copy)");
}

struct Note {
  Log* log;
  const char* what;
};
void CUDART_CB note(void* user) {
  auto* n = static_cast<Note*>(user);
  n->log->add(n->what);
}

int main() {
  Log log;
  int *d_a, *d_b, *h_a, *h_b;
  CHECK(cudaMalloc(&d_a, k_n * sizeof(int)));
  CHECK(cudaMalloc(&d_b, k_n * sizeof(int)));
  CHECK(cudaMallocHost(&h_a, k_n * sizeof(int)));
  CHECK(cudaMallocHost(&h_b, k_n * sizeof(int)));
  cudaStream_t s, other;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaEvent_t second_kernel;
  CHECK(cudaEventCreateWithFlags(&second_kernel, cudaEventDisableTiming));

  Seen first{&log, h_a, 3, s};
  Seen second{&log, h_b, -5, s};
  Note start{&log, "host func(start)"}, last{&log, "host func(last)"};
  Note waited{&log, "other stream host func(after event)"};

  CHECK(cudaLaunchHostFunc(s, note, &start));
  iota_times<<<k_n / 128, 128, 0, s>>>(d_a, k_n, 3);
  CHECK_LAUNCH("iota_times<<<>>>");
  CHECK(cudaMemcpyAsync(h_a, d_a, k_n * sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamAddCallback(s, after_first_copy, &first, 0));
  iota_times<<<k_n / 128, 128, 0, s>>>(d_b, k_n, -5);
  CHECK_LAUNCH("iota_times<<<>>>");
  CHECK(cudaEventRecord(second_kernel, s));
  CHECK(cudaMemcpyAsync(h_b, d_b, k_n * sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaLaunchHostFunc(s, host_func_checks, &second));
  CHECK(cudaLaunchHostFunc(s, note, &last));
  CHECK(cudaStreamWaitEvent(other, second_kernel, 0));
  CHECK(cudaLaunchHostFunc(other, note, &waited));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaStreamSynchronize(other));

  CHECK_ERROR(cudaStreamAddCallback(s, after_first_copy, &first, 1), cudaErrorInvalidValue);

  // The second stream's host function may run any time after the second kernel: only the first
  // stream's order is fixed, and the other one must come after "callback(first copy)".
  std::vector<std::string> in_stream;
  int waited_at = -1, first_at = -1;
  for (size_t i = 0; i < log.order.size(); ++i) {
    if (log.order[i] == waited.what) {
      waited_at = int(i);
    } else {
      if (log.order[i] == "callback(first copy)") first_at = int(i);
      in_stream.push_back(log.order[i]);
    }
  }
  const std::vector<std::string> expected = {"host func(start)", "callback(first copy)",
                                             "host func(second copy)", "host func(last)"};
  if (in_stream != expected || waited_at < 0 || waited_at < first_at) {
    std::string got;
    for (const auto& o : log.order) got += " [" + o + "]";
    corpus::wrong("order of host work:%s", got.c_str());
  }
  if (!first.values_ok || !first.status_ok || !first.stream_ok)
    corpus::wrong("the callback saw values %d status %d stream %d", first.values_ok,
                  first.status_ok, first.stream_ok);
  if (!second.values_ok) corpus::wrong("the host function did not see the second copy");
  for (const auto& o : expected) std::printf("callbacks: ran %s\n", o.c_str());
  std::printf("callbacks: ran %s after the event\n", waited.what);

  CHECK(cudaEventDestroy(second_kernel));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaStreamDestroy(other));
  CHECK(cudaFree(d_a));
  CHECK(cudaFree(d_b));
  CHECK(cudaFreeHost(h_a));
  CHECK(cudaFreeHost(h_b));
  std::printf("callbacks: ok\n");
  return 0;
}
