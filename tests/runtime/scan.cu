// scan: an inclusive prefix sum of an array longer than a block, in three passes as real code
// does it: each block scans its part in shared memory (Hillis-Steele, double-buffered) and writes
// its total; one block scans the totals (exclusive); each block adds its offset. Also an
// exclusive scan derived from it. Every element is checked against the host.
#include "corpus.cuh"

#include <vector>

constexpr int k_block = 256;

__global__ void block_scan(const int* in, int* out, int* block_sums, int n) {
  __shared__ int buf[2][k_block];
  int t = threadIdx.x, i = blockIdx.x * k_block + t;
  int cur = 0;
  buf[cur][t] = i < n ? in[i] : 0;
  __syncthreads();
  for (int offset = 1; offset < k_block; offset *= 2) {
    int v = buf[cur][t];
    if (t >= offset) v += buf[cur][t - offset];
    buf[1 - cur][t] = v;
    cur = 1 - cur;
    __syncthreads();
  }
  if (i < n) out[i] = buf[cur][t];
  if (t == k_block - 1) block_sums[blockIdx.x] = buf[cur][t];
}

// One block: the exclusive scan of the block totals (count <= k_block).
__global__ void scan_sums(int* sums, int count) {
  __shared__ int s[k_block];
  int t = threadIdx.x;
  s[t] = t < count ? sums[t] : 0;
  __syncthreads();
  for (int offset = 1; offset < k_block; offset *= 2) {
    int v = t >= offset ? s[t - offset] : 0;
    __syncthreads();
    s[t] += v;
    __syncthreads();
  }
  if (t < count) sums[t] = t == 0 ? 0 : s[t - 1];
}

__global__ void add_offsets(int* out, int* exclusive, const int* in, const int* offsets, int n) {
  int i = blockIdx.x * k_block + threadIdx.x;
  if (i >= n) return;
  out[i] += offsets[blockIdx.x];
  exclusive[i] = out[i] - in[i];
}

int main() {
  const int n = 4000;
  const int blocks = (n + k_block - 1) / k_block;
  std::vector<int> in(n), out(n), excl(n);
  corpus::Random rng(3);
  for (int& x : in) x = rng.in(-50, 100);

  int *din, *dout, *dexcl, *dsums;
  CHECK(cudaMalloc(&din, n * sizeof(int)));
  CHECK(cudaMalloc(&dout, n * sizeof(int)));
  CHECK(cudaMalloc(&dexcl, n * sizeof(int)));
  CHECK(cudaMalloc(&dsums, blocks * sizeof(int)));
  CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  block_scan<<<blocks, k_block>>>(din, dout, dsums, n);
  CHECK_LAUNCH("block_scan<<<>>>");
  scan_sums<<<1, k_block>>>(dsums, blocks);
  CHECK_LAUNCH("scan_sums<<<>>>");
  add_offsets<<<blocks, k_block>>>(dout, dexcl, din, dsums, n);
  CHECK_LAUNCH("add_offsets<<<>>>");
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(excl.data(), dexcl, n * sizeof(int), cudaMemcpyDeviceToHost));

  int running = 0;
  for (int i = 0; i < n; ++i) {
    if (excl[i] != running) corpus::wrong("exclusive[%d] = %d, expected %d", i, excl[i], running);
    running += in[i];
    if (out[i] != running) corpus::wrong("inclusive[%d] = %d, expected %d", i, out[i], running);
  }
  corpus::Checksum sum;
  sum.add_all(out.data(), out.size());
  std::printf("scan: %d elements, %d blocks, last %d, checksum %016llx\n", n, blocks, out[n - 1],
              sum.value());
  for (int* p : {din, dout, dexcl, dsums}) CHECK(cudaFree(p));
  std::printf("scan: ok\n");
  return 0;
}
