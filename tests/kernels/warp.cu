// Warp-level voting and matching: __activemask, __ballot_sync, __any_sync, __all_sync and
// __match_any_sync, plus ballot-based stream compaction with one atomic per warp.

// hone-expect warp_vote_stats: in=r out=w n=- threshold=-
// hone-run warp_vote_stats: 1D grid, any block (e.g. 256), out has 4 * gridDim.x * ceil(blockDim.x/32) entries; for warp w = blockIdx.x*ceil(blockDim.x/32) + threadIdx.x/32 with m = __activemask() at kernel entry (= the launched lanes): out[4w] = __ballot_sync(m, i < n && in[i] > threshold), out[4w+1] = __any_sync(m, same), out[4w+2] = __all_sync(m, i >= n || in[i] > threshold), out[4w+3] = m
extern "C" __global__ void warp_vote_stats(const float* in, unsigned* out, int n, float threshold)
{
    unsigned m = __activemask();  // taken before any branch: every launched lane is converged here
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool in_range = i < n;
    bool above = in_range && in[i] > threshold;
    unsigned ballot = __ballot_sync(m, above);
    int any = __any_sync(m, above);
    int all = __all_sync(m, !in_range || above);
    if ((threadIdx.x & 31u) == 0) {
        unsigned warps_per_block = (blockDim.x + 31u) >> 5;
        unsigned w = blockIdx.x * warps_per_block + (threadIdx.x >> 5);
        out[4 * w + 0] = ballot;
        out[4 * w + 1] = any ? 1u : 0u;
        out[4 * w + 2] = all ? 1u : 0u;
        out[4 * w + 3] = m;
    }
}

// hone-expect compact_gt_ballot: in=r out=w counter=a n=- threshold=-
// hone-run compact_gt_ballot: 1D grid over n, any block (e.g. 256), *counter zeroed before launch, out sized n; copies every in[i] > threshold to out[0..*counter), ballot + __popc for the slot inside the warp, one atomicAdd on *counter per warp for the warp's base. NONDETERMINISTIC order between warps (atomics): compare *counter exactly and out[0..*counter) as a multiset (sorted)
extern "C" __global__ void compact_gt_ballot(const float* in, float* out, unsigned* counter, int n, float threshold)
{
    unsigned nl = blockDim.x - (threadIdx.x & ~31u);
    nl = nl < 32u ? nl : 32u;
    unsigned mask = nl == 32u ? 0xffffffffu : ((1u << nl) - 1u);
    unsigned lane = threadIdx.x & 31u;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    bool keep = i < n && v > threshold;
    unsigned votes = __ballot_sync(mask, keep);
    unsigned base = 0;
    if (lane == 0 && votes != 0u) base = atomicAdd(counter, (unsigned)__popc(votes));
    base = __shfl_sync(mask, base, 0);
    if (keep) out[base + __popc(votes & ((1u << lane) - 1u))] = v;
}

// hone-expect warp_match_count: keys=r out=w n=-
// hone-run warp_match_count: 1D grid over n, any block (e.g. 256); out[i] = number of lanes in i's warp (threads of the same block, lanes sharing threadIdx.x/32, with index < n) whose key equals keys[i], via __match_any_sync then __popc; deterministic for a given block size
extern "C" __global__ void warp_match_count(const int* keys, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned in_range = __ballot_sync(__activemask(), i < n);
    if (i < n) {
        unsigned peers = __match_any_sync(in_range, keys[i]);
        out[i] = __popc(peers);
    }
}
