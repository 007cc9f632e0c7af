// histogram: 64-bin histograms of bytes with atomics, three ways real code writes them: atomicAdd
// straight to global memory; per-block privatized bins in shared memory (atomicAdd on shared, then
// one global atomicAdd per bin); and a grid-stride loop with 64-bit counters. Also atomicMax /
// atomicMin of the values and an atomicCAS-built maximum. Each is checked against the host.
#include "corpus.cuh"

#include <vector>

constexpr int k_bins = 64;

__global__ void hist_global(const unsigned char* data, int n, unsigned* bins) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[data[i] % k_bins], 1u);
}

__global__ void hist_shared(const unsigned char* data, int n, unsigned* bins, int* lo, int* hi) {
  __shared__ unsigned local[k_bins];
  for (int b = threadIdx.x; b < k_bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd(&local[data[i] % k_bins], 1u);
    atomicMax(hi, int(data[i]));
    atomicMin(lo, int(data[i]));
  }
  __syncthreads();
  for (int b = threadIdx.x; b < k_bins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
  }
}

// The maximum of the values' squares, with a compare-and-swap loop.
__device__ void cas_max(unsigned long long* target, unsigned long long v) {
  unsigned long long old = *target, seen;
  while (old < v && (seen = atomicCAS(target, old, v)) != old) old = seen;
}

__global__ void hist_strided(const unsigned char* data, int n, unsigned long long* bins,
                             unsigned long long* max_square) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&bins[data[i] / 4], 1ull);
    cas_max(max_square, (unsigned long long)data[i] * data[i]);
  }
}

int main() {
  const int n = 6000;
  std::vector<unsigned char> data(n);
  corpus::Random rng(5);
  for (auto& x : data) x = (unsigned char)(rng.next() >> 24);
  for (int i = 0; i < n; i += 3) data[i] = (unsigned char)(data[i] & 0x0f); // uneven bins

  std::vector<unsigned> ref(k_bins, 0);
  std::vector<unsigned long long> ref64(k_bins, 0);
  int ref_lo = 255, ref_hi = 0;
  unsigned long long ref_sq = 0;
  for (unsigned char x : data) {
    ref[x % k_bins]++;
    ref64[x / 4]++;
    ref_lo = x < ref_lo ? x : ref_lo;
    ref_hi = x > ref_hi ? x : ref_hi;
    ref_sq = (unsigned long long)x * x > ref_sq ? (unsigned long long)x * x : ref_sq;
  }

  unsigned char* ddata;
  unsigned *dglobal, *dshared;
  unsigned long long *d64, *dsq;
  int *dlo, *dhi;
  CHECK(cudaMalloc(&ddata, n));
  CHECK(cudaMalloc(&dglobal, k_bins * sizeof(unsigned)));
  CHECK(cudaMalloc(&dshared, k_bins * sizeof(unsigned)));
  CHECK(cudaMalloc(&d64, k_bins * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&dsq, sizeof(unsigned long long)));
  CHECK(cudaMalloc(&dlo, sizeof(int)));
  CHECK(cudaMalloc(&dhi, sizeof(int)));
  CHECK(cudaMemcpy(ddata, data.data(), n, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dglobal, 0, k_bins * sizeof(unsigned)));
  CHECK(cudaMemset(dshared, 0, k_bins * sizeof(unsigned)));
  CHECK(cudaMemset(d64, 0, k_bins * sizeof(unsigned long long)));
  CHECK(cudaMemset(dsq, 0, sizeof(unsigned long long)));
  const int init_lo = 1000, init_hi = -1;
  CHECK(cudaMemcpy(dlo, &init_lo, sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dhi, &init_hi, sizeof(int), cudaMemcpyHostToDevice));

  const int block = 128, grid = (n + block - 1) / block;
  hist_global<<<grid, block>>>(ddata, n, dglobal);
  CHECK_LAUNCH("hist_global<<<>>>");
  hist_shared<<<grid, block>>>(ddata, n, dshared, dlo, dhi);
  CHECK_LAUNCH("hist_shared<<<>>>");
  hist_strided<<<8, 64>>>(ddata, n, d64, dsq);
  CHECK_LAUNCH("hist_strided<<<>>>");

  std::vector<unsigned> global(k_bins), shared(k_bins);
  std::vector<unsigned long long> wide(k_bins);
  int lo = 0, hi = 0;
  unsigned long long sq = 0;
  CHECK(cudaMemcpy(global.data(), dglobal, k_bins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(shared.data(), dshared, k_bins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(wide.data(), d64, k_bins * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&lo, dlo, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&hi, dhi, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&sq, dsq, sizeof sq, cudaMemcpyDeviceToHost));

  for (int b = 0; b < k_bins; ++b) {
    if (global[b] != ref[b]) corpus::wrong("global bin %d = %u, expected %u", b, global[b], ref[b]);
    if (shared[b] != ref[b]) corpus::wrong("shared bin %d = %u, expected %u", b, shared[b], ref[b]);
    if (wide[b] != ref64[b])
      corpus::wrong("64-bit bin %d = %llu, expected %llu", b, wide[b], ref64[b]);
  }
  if (lo != ref_lo || hi != ref_hi) corpus::wrong("min/max %d/%d, expected %d/%d", lo, hi, ref_lo, ref_hi);
  if (sq != ref_sq) corpus::wrong("max square %llu, expected %llu", sq, ref_sq);
  corpus::Checksum sum;
  sum.add_all(global.data(), global.size());
  sum.add_all(wide.data(), wide.size());
  std::printf("histogram: %d bytes, bin 0 %u, bin 63 %u, min %d max %d max square %llu\n", n,
              global[0], global[63], lo, hi, sq);
  std::printf("histogram: checksum %016llx\n", sum.value());
  for (void* p : {(void*)ddata, (void*)dglobal, (void*)dshared, (void*)d64, (void*)dsq, (void*)dlo,
                  (void*)dhi})
    CHECK(cudaFree(p));
  std::printf("histogram: ok\n");
  return 0;
}
