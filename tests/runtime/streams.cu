// streams: a pipeline over pinned host memory on several streams, as real code overlaps copies
// with kernels: cudaMallocHost and cudaHostAlloc buffers, per-stream chunks of cudaMemcpyAsync
// host-to-device, a kernel, device-to-host, each stream synchronized on its own; then a kernel on
// one stream that depends, through cudaEventRecord + cudaStreamWaitEvent, on the results of the
// others; a non-blocking stream and a stream with a priority; a mapped (zero-copy) cudaHostAlloc
// buffer a kernel writes directly. Every result is checked against the host.
#include "corpus.cuh"

#include <vector>

constexpr int k_streams = 3;
constexpr int k_chunk = 1024;

__global__ void square_plus(const int* in, int* out, int n, int add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i] + add;
}

// out[i] = sum over the chunks of chunk[c][i]
__global__ void combine(const int* chunks, int* out, int chunk, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= chunk) return;
  int s = 0;
  for (int c = 0; c < count; ++c) s += chunks[c * chunk + i];
  out[i] = s;
}

__global__ void write_mapped(int* host_visible, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) host_visible[i] = 7 * i + 1;
}

int main() {
  const int n = k_streams * k_chunk;
  int *h_in, *h_out, *h_combined, *h_mapped;
  CHECK(cudaMallocHost(&h_in, n * sizeof(int)));
  CHECK(cudaHostAlloc(&h_out, n * sizeof(int), cudaHostAllocDefault));
  CHECK(cudaHostAlloc(&h_combined, k_chunk * sizeof(int), cudaHostAllocPortable));
  CHECK(cudaHostAlloc(&h_mapped, 256 * sizeof(int), cudaHostAllocMapped));
  unsigned flags = 0;
  CHECK(cudaHostGetFlags(&flags, h_mapped));
  if (!(flags & cudaHostAllocMapped)) corpus::wrong("cudaHostGetFlags: %#x lacks Mapped", flags);
  for (int i = 0; i < n; ++i) h_in[i] = (i % 97) - 40;

  int *d_in, *d_out;
  CHECK(cudaMalloc(&d_in, n * sizeof(int)));
  CHECK(cudaMalloc(&d_out, n * sizeof(int)));

  int least = 0, greatest = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  if (greatest > least) corpus::wrong("priority range %d..%d", least, greatest);
  cudaStream_t streams[k_streams];
  CHECK(cudaStreamCreate(&streams[0]));
  CHECK(cudaStreamCreateWithFlags(&streams[1], cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithPriority(&streams[2], cudaStreamDefault, greatest));
  int priority = 1;
  CHECK(cudaStreamGetPriority(streams[2], &priority));
  if (priority != greatest) corpus::wrong("stream priority %d, expected %d", priority, greatest);
  CHECK(cudaStreamGetFlags(streams[1], &flags));
  if (flags != cudaStreamNonBlocking) corpus::wrong("stream flags %#x", flags);

  cudaEvent_t done[k_streams];
  for (int s = 0; s < k_streams; ++s) {
    CHECK(cudaEventCreateWithFlags(&done[s], cudaEventDisableTiming));
    int* in = d_in + s * k_chunk;
    int* out = d_out + s * k_chunk;
    CHECK(cudaMemcpyAsync(in, h_in + s * k_chunk, k_chunk * sizeof(int), cudaMemcpyHostToDevice,
                          streams[s]));
    square_plus<<<k_chunk / 128, 128, 0, streams[s]>>>(in, out, k_chunk, s);
    CHECK_LAUNCH("square_plus<<<>>>");
    CHECK(cudaEventRecord(done[s], streams[s]));
    CHECK(cudaMemcpyAsync(h_out + s * k_chunk, out, k_chunk * sizeof(int), cudaMemcpyDeviceToHost,
                          streams[s]));
  }
  // The combining kernel runs on stream 0 after every stream's kernel.
  for (int s = 1; s < k_streams; ++s) CHECK(cudaStreamWaitEvent(streams[0], done[s], 0));
  int* d_combined;
  CHECK(cudaMalloc(&d_combined, k_chunk * sizeof(int)));
  combine<<<k_chunk / 256, 256, 0, streams[0]>>>(d_out, d_combined, k_chunk, k_streams);
  CHECK_LAUNCH("combine<<<>>>");
  CHECK(cudaMemcpyAsync(h_combined, d_combined, k_chunk * sizeof(int), cudaMemcpyDeviceToHost,
                        streams[0]));
  for (int s = k_streams - 1; s >= 0; --s) CHECK(cudaStreamSynchronize(streams[s]));
  for (int s = 0; s < k_streams; ++s) CHECK(cudaStreamQuery(streams[s]));

  for (int s = 0; s < k_streams; ++s) {
    for (int i = 0; i < k_chunk; ++i) {
      int x = h_in[s * k_chunk + i], want = x * x + s;
      if (h_out[s * k_chunk + i] != want)
        corpus::wrong("stream %d element %d = %d, expected %d", s, i, h_out[s * k_chunk + i], want);
    }
  }
  for (int i = 0; i < k_chunk; ++i) {
    int want = 0;
    for (int s = 0; s < k_streams; ++s) want += h_in[s * k_chunk + i] * h_in[s * k_chunk + i] + s;
    if (h_combined[i] != want) corpus::wrong("combined %d = %d, expected %d", i, h_combined[i], want);
  }

  // Zero-copy: the kernel writes the mapped host buffer through its device pointer.
  int* d_mapped = nullptr;
  CHECK(cudaHostGetDevicePointer((void**)&d_mapped, h_mapped, 0));
  write_mapped<<<2, 128, 0, streams[1]>>>(d_mapped, 256);
  CHECK_LAUNCH("write_mapped<<<>>>");
  CHECK(cudaStreamSynchronize(streams[1]));
  for (int i = 0; i < 256; ++i) {
    if (h_mapped[i] != 7 * i + 1) corpus::wrong("mapped %d = %d", i, h_mapped[i]);
  }

  corpus::Checksum sum;
  sum.add_all(h_out, n);
  sum.add_all(h_combined, k_chunk);
  std::printf("streams: %d streams x %d, combined[0] %d combined[%d] %d\n", k_streams, k_chunk,
              h_combined[0], k_chunk - 1, h_combined[k_chunk - 1]);
  std::printf("streams: checksum %016llx\n", sum.value());
  for (int s = 0; s < k_streams; ++s) {
    CHECK(cudaEventDestroy(done[s]));
    CHECK(cudaStreamDestroy(streams[s]));
  }
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_out));
  CHECK(cudaFree(d_combined));
  for (int* p : {h_in, h_out, h_combined, h_mapped}) CHECK(cudaFreeHost(p));
  std::printf("streams: ok\n");
  return 0;
}
