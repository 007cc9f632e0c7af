// matmul: C = A * B with 16x16 tiles staged in shared memory, for shapes that are not multiples
// of the tile (the edge tiles load zeros), checked element by element against the host.
// Integer-valued floats keep every sum exact, so the comparison is exact in any summation order.
#include "corpus.cuh"

#include <vector>

constexpr int k_tile = 16;

__global__ void matmul_tiled(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float ta[k_tile][k_tile];
  __shared__ float tb[k_tile][k_tile];
  int row = blockIdx.y * k_tile + threadIdx.y;
  int col = blockIdx.x * k_tile + threadIdx.x;
  float sum = 0.0f;
  for (int t = 0; t < k; t += k_tile) {
    int ac = t + threadIdx.x, br = t + threadIdx.y;
    ta[threadIdx.y][threadIdx.x] = row < m && ac < k ? a[row * k + ac] : 0.0f;
    tb[threadIdx.y][threadIdx.x] = br < k && col < n ? b[br * n + col] : 0.0f;
    __syncthreads();
    for (int i = 0; i < k_tile; ++i) sum += ta[threadIdx.y][i] * tb[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = sum;
}

int main() {
  const int m = 40, n = 36, k = 52;
  std::vector<float> a(m * k), b(k * n), c(m * n), ref(m * n, 0.0f);
  corpus::Random rng(7);
  for (float& x : a) x = float(rng.in(-4, 4));
  for (float& x : b) x = float(rng.in(-4, 4));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) ref[i * n + j] += a[i * k + p] * b[p * n + j];

  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, a.size() * sizeof(float)));
  CHECK(cudaMalloc(&db, b.size() * sizeof(float)));
  CHECK(cudaMalloc(&dc, c.size() * sizeof(float)));
  CHECK(cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dc, 0xff, c.size() * sizeof(float))); // NaNs where nothing is written

  dim3 block(k_tile, k_tile), grid((n + k_tile - 1) / k_tile, (m + k_tile - 1) / k_tile);
  matmul_tiled<<<grid, block>>>(da, db, dc, m, n, k);
  CHECK_LAUNCH("matmul_tiled<<<>>>");
  CHECK(cudaMemcpy(c.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost));

  for (int i = 0; i < m * n; ++i) {
    if (c[i] != ref[i]) corpus::wrong("C[%d][%d] = %g, expected %g", i / n, i % n, c[i], ref[i]);
  }
  corpus::Checksum sum;
  sum.add_all(c.data(), c.size());
  std::printf("matmul: %dx%dx%d C[0][0]=%g C[%d][%d]=%g checksum %016llx\n", m, n, k, c[0], m - 1,
              n - 1, c[m * n - 1], sum.value());
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));
  std::printf("matmul: ok\n");
  return 0;
}
