// Histograms: privatized per-block bins in shared memory (shared atomics), merged into the global
// histogram with one global atomic per non-empty bin; and the plain global-atomic version with a
// run-time bin count. Integer counts, so the result is deterministic despite the atomics.

// hone-expect histogram256_smem: data=r bins=a n=-
// hone-run histogram256_smem: any 1D grid (e.g. 64 blocks), any block (e.g. 256), bins[256] zeroed before launch; grid-stride over n bytes, bins[data[i]] += 1 via shared-memory atomicAdd then global atomicAdd (unsigned counts, deterministic)
extern "C" __global__ void histogram256_smem(const unsigned char* data, unsigned* bins, int n)
{
    __shared__ unsigned local_bins[256];
    for (unsigned b = threadIdx.x; b < 256u; b += blockDim.x) local_bins[b] = 0u;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&local_bins[data[i]], 1u);
    }
    __syncthreads();
    for (unsigned b = threadIdx.x; b < 256u; b += blockDim.x) {
        unsigned c = local_bins[b];
        if (c != 0u) atomicAdd(&bins[b], c);
    }
}

// hone-expect histogram_range_f32: x=r bins=a n=- nbins=- lo=- hi=-
// hone-run histogram_range_f32: 1D grid over n, block 256, bins[nbins] zeroed before launch, lo < hi, nbins >= 1; bin = floor((x-lo)/(hi-lo)*nbins) clamped to [0, nbins-1], NaN skipped; global atomicAdd per element (int counts, deterministic)
extern "C" __global__ void histogram_range_f32(const float* x, int* bins, int n, int nbins, float lo, float hi)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (v != v) return;  // NaN
    float t = (v - lo) / (hi - lo) * (float)nbins;
    int b = t < 0.0f ? 0 : (t >= (float)nbins ? nbins - 1 : (int)t);
    atomicAdd(&bins[b], 1);
}
