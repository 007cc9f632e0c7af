// managed: unified memory as real code uses it. A cudaMallocManaged array is filled by the host,
// transformed by a kernel and read back by the host with no copy; a __managed__ variable is set by
// the host, accumulated into by a kernel and read by the host; cudaMemAdvise and
// cudaMemPrefetchAsync (to the device and back to the host) are accepted and change no value;
// cudaPointerGetAttributes says cudaMemoryTypeManaged; cudaMallocManaged with
// cudaMemAttachHost works too.
#include "corpus.cuh"

__managed__ long long m_total;
__managed__ int m_scale = 3;

__global__ void scale_and_sum(int* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  data[i] = data[i] * m_scale + 1;
  atomicAdd((unsigned long long*)&m_total, (unsigned long long)(long long)data[i]);
}

int main() {
  int managed = 0;
  CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0));
  if (!managed) corpus::wrong("cudaDevAttrManagedMemory is 0");

  const int n = 1500;
  int* data = nullptr;
  CHECK(cudaMallocManaged(&data, n * sizeof(int)));
  for (int i = 0; i < n; ++i) data[i] = i % 41 - 20;
  cudaPointerAttributes attr;
  CHECK(cudaPointerGetAttributes(&attr, data));
  if (attr.type != cudaMemoryTypeManaged) corpus::wrong("pointer type %d, not managed", attr.type);

  cudaMemLocation device{cudaMemLocationTypeDevice, 0};
  cudaMemLocation host{cudaMemLocationTypeHost, 0};
  CHECK(cudaMemAdvise(data, n * sizeof(int), cudaMemAdviseSetPreferredLocation, device));
  CHECK(cudaMemAdvise(data, n * sizeof(int), cudaMemAdviseSetAccessedBy, device));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemPrefetchAsync(data, n * sizeof(int), device, 0, s));

  m_total = 0;
  m_scale = 5;
  scale_and_sum<<<(n + 255) / 256, 256, 0, s>>>(data, n);
  CHECK_LAUNCH("scale_and_sum<<<>>>");
  CHECK(cudaMemPrefetchAsync(data, n * sizeof(int), host, 0, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaDeviceSynchronize());

  long long want_total = 0;
  for (int i = 0; i < n; ++i) {
    int want = (i % 41 - 20) * 5 + 1;
    want_total += want;
    if (data[i] != want) corpus::wrong("data[%d] = %d, expected %d", i, data[i], want);
  }
  if (m_total != want_total) corpus::wrong("m_total = %lld, expected %lld", m_total, want_total);

  // The host pointer of a __managed__ variable is its symbol: the symbol API reaches it too.
  long long via_symbol = 0;
  CHECK(cudaMemcpyFromSymbol(&via_symbol, m_total, sizeof via_symbol));
  if (via_symbol != want_total) corpus::wrong("m_total through the symbol = %lld", via_symbol);

  // Host-attached managed memory, read by a kernel after the host writes it.
  int* attached = nullptr;
  CHECK(cudaMallocManaged(&attached, 64 * sizeof(int), cudaMemAttachHost));
  for (int i = 0; i < 64; ++i) attached[i] = i;
  CHECK(cudaMemAdvise(attached, 64 * sizeof(int), cudaMemAdviseSetReadMostly, device));
  m_total = 0;
  m_scale = 1;
  scale_and_sum<<<1, 64>>>(attached, 64);
  CHECK_LAUNCH("scale_and_sum<<<>>> on host-attached memory");
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < 64; ++i) {
    if (attached[i] != i + 1) corpus::wrong("attached[%d] = %d", i, attached[i]);
  }
  if (m_total != 64 * 65 / 2) corpus::wrong("m_total = %lld, expected %d", m_total, 64 * 65 / 2);

  corpus::Checksum sum;
  sum.add_all(data, n);
  std::printf("managed: %d elements, total %lld, data[0] %d data[%d] %d checksum %016llx\n", n,
              want_total, data[0], n - 1, data[n - 1], sum.value());
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(data));
  CHECK(cudaFree(attached));
  std::printf("managed: ok\n");
  return 0;
}
