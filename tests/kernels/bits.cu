// Bit manipulation as used by hashing, compression, bitmaps and packing code: population count,
// leading zeros, first set bit, bit reverse, byte permute and funnel shifts, in 32 and 64 bits.

// hone-expect bit_stats_u32: in=r out=w n=-
// hone-run bit_stats_u32: 1D grid over n, block 256, out has 4*n entries; for x = in[i]: out[4i] = __popc(x), out[4i+1] = __clz(x), out[4i+2] = __ffs(x), out[4i+3] = __brev(x)
extern "C" __global__ void bit_stats_u32(const unsigned* in, unsigned* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned x = in[i];
        out[4 * i + 0] = (unsigned)__popc(x);
        out[4 * i + 1] = (unsigned)__clz((int)x);
        out[4 * i + 2] = (unsigned)__ffs((int)x);
        out[4 * i + 3] = __brev(x);
    }
}

// hone-expect bit_stats_u64: in=r out=w n=-
// hone-run bit_stats_u64: 1D grid over n, block 256, out has 4*n entries; for x = in[i]: out[4i] = __popcll(x), out[4i+1] = __clzll(x), out[4i+2] = __ffsll(x), out[4i+3] = __brevll(x)
extern "C" __global__ void bit_stats_u64(const unsigned long long* in, unsigned long long* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned long long x = in[i];
        out[4 * i + 0] = (unsigned long long)__popcll(x);
        out[4 * i + 1] = (unsigned long long)__clzll((long long)x);
        out[4 * i + 2] = (unsigned long long)__ffsll((long long)x);
        out[4 * i + 3] = __brevll(x);
    }
}

// hone-expect byte_perm_funnel: a=r b=r out=w selector=- shift=- n=-
// hone-run byte_perm_funnel: 1D grid over n, block 256, out has 3*n entries; out[3i] = __byte_perm(a[i], b[i], selector), out[3i+1] = __funnelshift_l(a[i], b[i], shift), out[3i+2] = __funnelshift_r(a[i], b[i], shift) (shift taken mod 32 by the intrinsics)
extern "C" __global__ void byte_perm_funnel(const unsigned* a, const unsigned* b, unsigned* out, unsigned selector,
                                            unsigned shift, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned x = a[i], y = b[i];
        out[3 * i + 0] = __byte_perm(x, y, selector);
        out[3 * i + 1] = __funnelshift_l(x, y, shift);
        out[3 * i + 2] = __funnelshift_r(x, y, shift);
    }
}

// hone-expect hash_mix_u32: keys=r out=w n=- seed=-
// hone-run hash_mix_u32: 1D grid over n, block 256; fmix32-style mix of h = keys[i] ^ seed: h ^= h>>16; h *= 0x85ebca6b; h = rotl(h, 13) via __funnelshift_l(h, h, 13); h ^= h>>13; h *= 0xc2b2ae35; h ^= h>>16; out[i] = h
extern "C" __global__ void hash_mix_u32(const unsigned* keys, unsigned* out, int n, unsigned seed)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned h = keys[i] ^ seed;
        h ^= h >> 16;
        h *= 0x85ebca6bu;
        h = __funnelshift_l(h, h, 13);
        h ^= h >> 13;
        h *= 0xc2b2ae35u;
        h ^= h >> 16;
        out[i] = h;
    }
}
