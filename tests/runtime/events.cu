// events: timing as real code measures kernels. Events recorded around kernels of growing size
// on a stream give elapsed times that are positive and ordered (start..k1 < start..k2 < start..k3,
// and the parts add up to the whole); cudaEventQuery is cudaSuccess once an event has completed
// (and for one never recorded); cudaEventSynchronize waits; an event created with
// cudaEventDisableTiming, or never recorded, is refused by cudaEventElapsedTime with
// cudaErrorInvalidResourceHandle. The kernels' results are checked; no time is printed.
#include "corpus.cuh"

#include <cmath>
#include <vector>

__global__ void busy(float* data, int n, int rounds) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = data[i];
  for (int r = 0; r < rounds; ++r) x = x * 0.5f + 1.0f;
  data[i] = x;
}

int main() {
  const int n = 2048;
  float* d;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  CHECK(cudaMemset(d, 0, n * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));

  cudaEvent_t start, marks[3], blocking, untimed, never;
  CHECK(cudaEventCreate(&start));
  for (auto& e : marks) CHECK(cudaEventCreateWithFlags(&e, cudaEventDefault));
  CHECK(cudaEventCreateWithFlags(&blocking, cudaEventBlockingSync));
  CHECK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
  CHECK(cudaEventCreate(&never));

  // Never recorded: complete, as documented.
  CHECK(cudaEventQuery(never));

  CHECK(cudaEventRecord(start, s));
  const int rounds[3] = {2, 3, 5};
  int elements[3] = {256, 1024, 2048};
  for (int k = 0; k < 3; ++k) {
    busy<<<(elements[k] + 127) / 128, 128, 0, s>>>(d, elements[k], rounds[k]);
    CHECK_LAUNCH("busy<<<>>>");
    CHECK(cudaEventRecordWithFlags(marks[k], s, cudaEventRecordDefault));
  }
  CHECK(cudaEventRecord(untimed, s));
  CHECK(cudaEventRecord(blocking, s));
  // Before the wait the work may still run; a status either way, not an error.
  cudaError_t q = cudaEventQuery(marks[2]);
  if (q != cudaSuccess && q != cudaErrorNotReady) CHECK(q);
  CHECK(cudaEventSynchronize(blocking));
  for (auto& e : marks) CHECK(cudaEventQuery(e));
  CHECK(cudaEventQuery(untimed));

  float t[3], parts[3];
  for (int k = 0; k < 3; ++k) {
    CHECK(cudaEventElapsedTime(&t[k], start, marks[k]));
    CHECK(cudaEventElapsedTime(&parts[k], k == 0 ? start : marks[k - 1], marks[k]));
    if (!(t[k] > 0.0f)) corpus::wrong("elapsed start..mark %d is %g ms, not positive", k, t[k]);
    if (!(parts[k] > 0.0f)) corpus::wrong("kernel %d took %g ms, not positive", k, parts[k]);
  }
  if (!(t[0] < t[1] && t[1] < t[2])) corpus::wrong("elapsed times not ordered: %g %g %g", t[0], t[1], t[2]);
  float whole = parts[0] + parts[1] + parts[2];
  if (std::fabs(whole - t[2]) > 0.01f * t[2] + 0.002f)
    corpus::wrong("parts add up to %g ms, the whole is %g ms", whole, t[2]);
  float reverse = 0;
  CHECK(cudaEventElapsedTime(&reverse, marks[2], start));
  if (!(reverse < 0.0f)) corpus::wrong("end..start is %g ms, not negative", reverse);
  std::printf("events: 3 kernels timed, elapsed positive and ordered, parts add up\n");

  float ms = 0;
  CHECK_ERROR(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  CHECK_ERROR(cudaEventElapsedTime(&ms, untimed, marks[0]), cudaErrorInvalidResourceHandle);
  CHECK_ERROR(cudaEventElapsedTime(&ms, start, never), cudaErrorInvalidResourceHandle);
  std::printf("events: DisableTiming and never-recorded events refused: %s\n",
              cudaGetErrorName(cudaErrorInvalidResourceHandle));

  std::vector<float> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<float> ref(n, 0.0f);
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < elements[k]; ++i)
      for (int r = 0; r < rounds[k]; ++r) ref[i] = ref[i] * 0.5f + 1.0f;
  for (int i = 0; i < n; ++i) {
    if (h[i] != ref[i]) corpus::wrong("data[%d] = %.9g, expected %.9g", i, h[i], ref[i]);
  }
  corpus::Checksum sum;
  sum.add_all(h.data(), h.size());
  std::printf("events: data[0] %.6f data[%d] %.6f checksum %016llx\n", h[0], n - 1, h[n - 1],
              sum.value());

  for (cudaEvent_t e : {start, marks[0], marks[1], marks[2], blocking, untimed, never})
    CHECK(cudaEventDestroy(e));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d));
  std::printf("events: ok\n");
  return 0;
}
