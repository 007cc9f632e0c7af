// mempool: stream-ordered allocation as real code (and every framework's caching allocator)
// uses it. cudaMallocAsync / cudaFreeAsync on a stream from the device's default pool, used by a
// kernel in between; the pool's used memory rises while the buffers live and falls to zero once
// they are freed; reserved memory is at least the used memory. A created pool with a release
// threshold set and read back, allocated from with cudaMallocFromPoolAsync and through
// cudaDeviceSetMemPool, its high-water mark, reset, and trimmed to nothing. Results checked.
#include "corpus.cuh"

#include <vector>

__global__ void twice_plus(const int* in, int* out, int n, int add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2 * in[i] + add;
}

unsigned long long attr64(cudaMemPool_t pool, cudaMemPoolAttr a) {
  unsigned long long v = 0;
  CHECK(cudaMemPoolGetAttribute(pool, a, &v));
  return v;
}

// in -> out through the pool's memory on `s`; returns out's values.
std::vector<int> round_trip(const std::vector<int>& in, int add, cudaStream_t s, cudaMemPool_t pool,
                            bool from_pool, cudaMemPool_t watched, unsigned long long* used_live) {
  const int n = int(in.size());
  int *din = nullptr, *dout = nullptr;
  if (from_pool) {
    CHECK(cudaMallocFromPoolAsync((void**)&din, n * sizeof(int), pool, s));
    CHECK(cudaMallocFromPoolAsync((void**)&dout, n * sizeof(int), pool, s));
  } else {
    CHECK(cudaMallocAsync((void**)&din, n * sizeof(int), s));
    CHECK(cudaMallocAsync((void**)&dout, n * sizeof(int), s));
  }
  CHECK(cudaMemcpyAsync(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice, s));
  twice_plus<<<(n + 127) / 128, 128, 0, s>>>(din, dout, n, add);
  CHECK_LAUNCH("twice_plus<<<>>>");
  std::vector<int> out(n);
  CHECK(cudaMemcpyAsync(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  *used_live = attr64(watched, cudaMemPoolAttrUsedMemCurrent);
  unsigned long long reserved = attr64(watched, cudaMemPoolAttrReservedMemCurrent);
  if (*used_live < 2 * n * sizeof(int)) corpus::wrong("used %llu while live", *used_live);
  if (reserved < *used_live) corpus::wrong("reserved %llu below used %llu", reserved, *used_live);
  CHECK(cudaFreeAsync(din, s));
  CHECK(cudaFreeAsync(dout, s));
  CHECK(cudaStreamSynchronize(s));
  if (unsigned long long used = attr64(watched, cudaMemPoolAttrUsedMemCurrent); used != 0)
    corpus::wrong("used %llu after the frees", used);
  for (int i = 0; i < n; ++i) {
    if (out[i] != 2 * in[i] + add) corpus::wrong("out[%d] = %d, expected %d", i, out[i], 2 * in[i] + add);
  }
  return out;
}

int main() {
  int supported = 0;
  CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
  if (!supported) corpus::wrong("cudaDevAttrMemoryPoolsSupported is 0");

  std::vector<int> in(3000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = int(i % 101) - 50;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  corpus::Checksum sum;
  unsigned long long live = 0;

  cudaMemPool_t def = nullptr, current = nullptr;
  CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
  CHECK(cudaDeviceGetMemPool(&current, 0));
  if (current != def) corpus::wrong("the current pool is not the default pool");
  auto out = round_trip(in, 1, s, def, false, def, &live);
  sum.add_all(out.data(), out.size());
  std::printf("mempool: default pool round trip ok, used while live >= %zu\n", 2 * in.size() * sizeof(int));

  // A pool of our own.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  CHECK(cudaMemPoolCreate(&pool, &props));
  unsigned long long threshold = 1ull << 20;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  if (attr64(pool, cudaMemPoolAttrReleaseThreshold) != threshold)
    corpus::wrong("release threshold reads back %llu", attr64(pool, cudaMemPoolAttrReleaseThreshold));
  cudaMemLocation here{cudaMemLocationTypeDevice, 0};
  cudaMemAccessFlags access = cudaMemAccessFlagsProtNone;
  CHECK(cudaMemPoolGetAccess(&access, pool, &here));
  if (access != cudaMemAccessFlagsProtReadWrite) corpus::wrong("pool access %d", int(access));

  out = round_trip(in, 2, s, pool, true, pool, &live);
  sum.add_all(out.data(), out.size());
  // Through the device's current pool.
  CHECK(cudaDeviceSetMemPool(0, pool));
  CHECK(cudaDeviceGetMemPool(&current, 0));
  if (current != pool) corpus::wrong("cudaDeviceGetMemPool does not return the pool just set");
  out = round_trip(in, 3, s, pool, false, pool, &live);
  sum.add_all(out.data(), out.size());
  CHECK(cudaDeviceSetMemPool(0, def));

  unsigned long long high = attr64(pool, cudaMemPoolAttrUsedMemHigh);
  if (high < live) corpus::wrong("used high %llu below %llu", high, live);
  unsigned long long zero = 0;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
  if (attr64(pool, cudaMemPoolAttrUsedMemHigh) != 0) corpus::wrong("used high not reset");
  CHECK(cudaMemPoolTrimTo(pool, 0));
  if (unsigned long long r = attr64(pool, cudaMemPoolAttrReservedMemCurrent); r != 0)
    corpus::wrong("reserved %llu after trimming to 0", r);
  CHECK(cudaMemPoolDestroy(pool));

  std::printf("mempool: created pool: threshold %llu, allocations from it and as the device's pool\n",
              threshold);
  std::printf("mempool: checksum %016llx\n", sum.value());
  CHECK(cudaStreamDestroy(s));
  std::printf("mempool: ok\n");
  return 0;
}
