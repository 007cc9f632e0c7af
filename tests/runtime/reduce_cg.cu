// reduce_cg: sums, maxima and counts of an integer array with cooperative groups: the block as a
// cg::thread_block, warps as cg::tiled_partition<32> tiles reduced with cg::reduce (plus, greater,
// bit_xor) and, for comparison, with tile.shfl_down by hand; 8-thread tiles (static and runtime
// tiled_partition) combining flags with shuffles. Per-block results and the grand totals are checked
// against the host.
#include "corpus.cuh"

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include <climits>
#include <vector>

namespace cg = cooperative_groups;

constexpr int k_block = 256;
constexpr int k_warps = k_block / 32;

struct BlockResult {
  int sum;     // cg::reduce(plus)
  int sum_shfl; // tile.shfl_down by hand
  int max;
  unsigned xor_all;
  int negative_tiles; // 8-thread tiles with any negative element
  int all_even_tiles; // 8-thread tiles whose elements are all even
};

__global__ void reduce_block(const int* in, int n, BlockResult* out, int* total) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  __shared__ int sums[k_warps], sums_shfl[k_warps], maxs[k_warps];
  __shared__ unsigned xors[k_warps];
  __shared__ int negative_tiles, all_even_tiles;

  int i = blockIdx.x * blockDim.x + block.thread_rank();
  int v = i < n ? in[i] : 0;
  if (block.thread_rank() == 0) negative_tiles = all_even_tiles = 0;
  block.sync();

  int s = cg::reduce(warp, v, cg::plus<int>());
  int m = cg::reduce(warp, i < n ? v : INT_MIN, cg::greater<int>());
  unsigned x = cg::reduce(warp, unsigned(v), cg::bit_xor<unsigned>());
  int h = v;
  for (int offset = warp.size() / 2; offset > 0; offset /= 2) h += warp.shfl_down(h, offset);

  // The 8-thread tiles combine their flags with shuffles inside the tile (partitions.cu does it
  // with any/all/ballot, one membermask per partition).
  cg::thread_group eight = cg::tiled_partition(block, 8);
  cg::thread_block_tile<8> eight_static = cg::tiled_partition<8>(block);
  int any_negative = v < 0, all_even = v % 2 == 0;
  for (int offset = 4; offset > 0; offset /= 2) {
    any_negative |= eight_static.shfl_xor(any_negative, offset);
    all_even &= eight_static.shfl_xor(all_even, offset);
  }
  if (eight.size() != 8 || eight.thread_rank() != eight_static.thread_rank()) __trap();
  if (eight.thread_rank() == 0) {
    if (any_negative) atomicAdd(&negative_tiles, 1);
    if (all_even) atomicAdd(&all_even_tiles, 1);
  }

  if (warp.thread_rank() == 0) {
    sums[warp.meta_group_rank()] = s;
    sums_shfl[warp.meta_group_rank()] = h;
    maxs[warp.meta_group_rank()] = m;
    xors[warp.meta_group_rank()] = x;
  }
  block.sync();
  if (warp.meta_group_rank() == 0) {
    int lane = warp.thread_rank();
    int bs = cg::reduce(warp, lane < k_warps ? sums[lane] : 0, cg::plus<int>());
    int bh = cg::reduce(warp, lane < k_warps ? sums_shfl[lane] : 0, cg::plus<int>());
    int bm = cg::reduce(warp, lane < k_warps ? maxs[lane] : INT_MIN, cg::greater<int>());
    unsigned bx = cg::reduce(warp, lane < k_warps ? xors[lane] : 0u, cg::bit_xor<unsigned>());
    if (lane == 0) {
      out[blockIdx.x] = BlockResult{bs, bh, bm, bx, negative_tiles, all_even_tiles};
      atomicAdd(total, bs);
    }
  }
}

int main() {
  const int n = 3000;
  const int blocks = (n + k_block - 1) / k_block;
  std::vector<int> in(n);
  corpus::Random rng(11);
  for (int& x : in) x = rng.in(-1000, 1000);
  for (int t = 0; t < n; t += 80) // every tenth 8-thread tile all even
    for (int j = t; j < t + 8 && j < n; ++j) in[j] = 2 * (j % 5) - 4;

  std::vector<BlockResult> ref(blocks);
  int ref_total = 0;
  for (int b = 0; b < blocks; ++b) {
    BlockResult r{0, 0, INT_MIN, 0u, 0, 0};
    for (int t = 0; t < k_block; t += 8) {
      bool neg = false, even = true;
      for (int j = 0; j < 8; ++j) {
        int i = b * k_block + t + j;
        int v = i < n ? in[i] : 0;
        neg |= v < 0;
        even &= v % 2 == 0;
        r.sum += v;
        r.xor_all ^= unsigned(v);
        if (i < n && v > r.max) r.max = v;
      }
      r.negative_tiles += neg;
      r.all_even_tiles += even;
    }
    r.sum_shfl = r.sum;
    ref[b] = r;
    ref_total += r.sum;
  }

  int *din, *dtotal;
  BlockResult* dout;
  CHECK(cudaMalloc(&din, n * sizeof(int)));
  CHECK(cudaMalloc(&dout, blocks * sizeof(BlockResult)));
  CHECK(cudaMalloc(&dtotal, sizeof(int)));
  CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dtotal, 0, sizeof(int)));
  reduce_block<<<blocks, k_block>>>(din, n, dout, dtotal);
  CHECK_LAUNCH("reduce_block<<<>>>");
  std::vector<BlockResult> out(blocks);
  int total = 0;
  CHECK(cudaMemcpy(out.data(), dout, blocks * sizeof(BlockResult), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&total, dtotal, sizeof(int), cudaMemcpyDeviceToHost));

  corpus::Checksum sum;
  for (int b = 0; b < blocks; ++b) {
    const BlockResult &o = out[b], &r = ref[b];
    if (o.sum != r.sum || o.sum_shfl != r.sum_shfl || o.max != r.max || o.xor_all != r.xor_all ||
        o.negative_tiles != r.negative_tiles || o.all_even_tiles != r.all_even_tiles) {
      corpus::wrong("block %d: sum %d/%d max %d xor %08x tiles %d/%d, expected %d %d %08x %d/%d", b,
                    o.sum, o.sum_shfl, o.max, o.xor_all, o.negative_tiles, o.all_even_tiles, r.sum,
                    r.max, r.xor_all, r.negative_tiles, r.all_even_tiles);
    }
    sum.add(&o, sizeof o);
  }
  if (total != ref_total) corpus::wrong("total %d, expected %d", total, ref_total);
  std::printf("reduce_cg: %d elements in %d blocks, total %d, block 0 max %d xor %08x\n", n, blocks,
              total, out[0].max, out[0].xor_all);
  std::printf("reduce_cg: block results checksum %016llx\n", sum.value());
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
  CHECK(cudaFree(dtotal));
  std::printf("reduce_cg: ok\n");
  return 0;
}
