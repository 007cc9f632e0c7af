// partitions: cooperative groups over partial warps in divergent code, the way NVIDIA's samples use
// them: the threads that took a branch as cg::coalesced_threads(), split by a key with
// cg::labeled_partition and reduced with cg::reduce (greater, plus), each partition's size, ranks,
// a shuffle from its first thread, any/all/ballot; the same threads in 4-thread tiles
// (cg::tiled_partition of the coalesced group). Every result is checked against the host, then
// one thread prints a few lines with device printf (fixed values: the output is the same on every
// GPU).
#include "corpus.cuh"

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#include <climits>
#include <vector>

namespace cg = cooperative_groups;

constexpr int k_block = 128;

struct Result {
  int max, sum, size, rank, first, any_odd, all_odd, ballot_odd, tile_sum, tile_rank;
};

__global__ void partitions(const int* value, const int* key, Result* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Result r{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  if (value[i] % 3 != 0) {
    cg::coalesced_group active = cg::coalesced_threads();
    cg::coalesced_group part = cg::labeled_partition(active, key[i]);
    const int v = value[i];
    r.max = cg::reduce(part, v, cg::greater<int>());
    r.sum = cg::reduce(part, v, cg::plus<int>());
    r.size = int(part.size());
    r.rank = int(part.thread_rank());
    r.first = part.shfl(v, 0);
    r.any_odd = part.any(v & 1);
    r.all_odd = part.all(v & 1);
    r.ballot_odd = int(part.ballot(v & 1));
    cg::coalesced_group tile = cg::tiled_partition(active, 4);
    r.tile_rank = int(tile.thread_rank());
    r.tile_sum = cg::reduce(tile, v, cg::plus<int>());
    tile.sync();
  }
  out[i] = r;
}

__global__ void say(int blocks, double check) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    printf("partitions: device printf: %d blocks, %s, %5.2f, %x, %c\n", blocks, "checked", check,
           0xc0ffee, 'k');
    printf("partitions: %d%%\n", 100);
  }
}

int main() {
  const int n = 1000;
  const int blocks = (n + k_block - 1) / k_block;
  std::vector<int> value(n), key(n);
  corpus::Random rng(31);
  for (int t = 0; t < n; ++t) {
    value[t] = rng.in(-500, 500);
    key[t] = rng.in(0, 3);
  }

  std::vector<Result> ref(n, Result{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1});
  for (int w0 = 0; w0 < n; w0 += 32) {
    const int w1 = w0 + 32 < n ? w0 + 32 : n;
    for (int t = w0; t < w1; ++t) {
      if (value[t] % 3 == 0) continue;
      Result& r = ref[t];
      r.max = INT_MIN;
      r.sum = 0;
      r.size = 0;
      r.rank = 0;
      r.first = INT_MIN;
      r.any_odd = 0;
      r.all_odd = 1;
      r.ballot_odd = 0;
      int active_rank = 0, tile_sum = 0;
      for (int j = w0; j < w1; ++j) {
        if (value[j] % 3 == 0) continue;
        if (j < t) ++active_rank;
        if (key[j] != key[t]) continue;
        const int v = value[j];
        if (r.first == INT_MIN) r.first = v;
        if (v > r.max) r.max = v;
        r.sum += v;
        if (j < t) ++r.rank;
        const bool odd = v & 1;
        r.any_odd |= odd;
        r.all_odd &= odd;
        r.ballot_odd |= int(odd) << r.size;
        ++r.size;
      }
      // 4-thread tiles of the active threads, by their rank among them
      int rank = 0;
      for (int j = w0; j < w1; ++j) {
        if (value[j] % 3 == 0) continue;
        if (rank / 4 == active_rank / 4) tile_sum += value[j];
        ++rank;
      }
      r.tile_rank = active_rank % 4;
      r.tile_sum = tile_sum;
    }
  }

  int *dvalue, *dkey;
  Result* dout;
  CHECK(cudaMalloc(&dvalue, n * sizeof(int)));
  CHECK(cudaMalloc(&dkey, n * sizeof(int)));
  CHECK(cudaMalloc(&dout, n * sizeof(Result)));
  CHECK(cudaMemcpy(dvalue, value.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dkey, key.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  partitions<<<blocks, k_block>>>(dvalue, dkey, dout, n);
  CHECK_LAUNCH("partitions<<<>>>");
  std::vector<Result> out(n);
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(Result), cudaMemcpyDeviceToHost));

  corpus::Checksum sum;
  int taking_part = 0;
  for (int t = 0; t < n; ++t) {
    const Result &o = out[t], &r = ref[t];
    if (o.max != r.max || o.sum != r.sum || o.size != r.size || o.rank != r.rank ||
        o.first != r.first || o.any_odd != r.any_odd || o.all_odd != r.all_odd ||
        o.ballot_odd != r.ballot_odd || o.tile_sum != r.tile_sum || o.tile_rank != r.tile_rank) {
      corpus::wrong("thread %d: max %d sum %d size %d rank %d first %d any %d all %d ballot %x "
                    "tile %d/%d, expected %d %d %d %d %d %d %d %x %d/%d",
                    t, o.max, o.sum, o.size, o.rank, o.first, o.any_odd, o.all_odd, o.ballot_odd,
                    o.tile_sum, o.tile_rank, r.max, r.sum, r.size, r.rank, r.first, r.any_odd,
                    r.all_odd, r.ballot_odd, r.tile_sum, r.tile_rank);
    }
    taking_part += r.size >= 0;
    sum.add(&o, sizeof o);
  }
  say<<<2, 32>>>(blocks, 1.5);
  CHECK_LAUNCH("say<<<>>>");
  CHECK(cudaDeviceSynchronize());
  std::printf("partitions: %d threads, %d in partitions, checksum %016llx\n", n, taking_part,
              static_cast<unsigned long long>(sum.value()));
  std::printf("partitions: ok\n");
  return 0;
}
