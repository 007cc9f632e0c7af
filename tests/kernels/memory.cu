// Memory spaces and calling conventions: a run-time-indexed local array (local memory),
// out-of-line __noinline__ device functions, dynamic (extern) shared memory, initialized
// __constant__ tables, structs passed by value (with and without pointers), and a 3D launch.

// Per-thread histogram of 16 buckets indexed by data: the run-time index forces buf into local
// memory (.local in PTX).
// hone-expect local_hist16: keys=r out=w n=-
// hone-run local_hist16: 1D grid over n, block 128, keys has 8*n bytes, out has 16*n entries; thread i counts the low nibbles of keys[8i..8i+7] into int buf[16] and writes out[16i + k] = count of nibble k
extern "C" __global__ void local_hist16(const unsigned char* keys, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int buf[16];
    for (int k = 0; k < 16; ++k) buf[k] = 0;
    for (int j = 0; j < 8; ++j) buf[keys[8 * i + j] & 15]++;
    for (int k = 0; k < 16; ++k) out[16 * i + k] = buf[k];
}

// Out-of-line helpers: a call keeps them as .func in PTX. lut_lerp receives a kernel pointer, so
// the analysis must treat `lut` as escaping (rw).
__device__ __noinline__ float lut_lerp(const float* lut, int lut_n, float t)
{
    float pos = fminf(fmaxf(t, 0.0f), 1.0f) * (float)(lut_n - 1);
    int k = (int)pos;
    int k1 = k + 1 < lut_n ? k + 1 : k;
    float f = pos - (float)k;
    return lut[k] + f * (lut[k1] - lut[k]);
}

__device__ __noinline__ float smoothstep01(float e0, float e1, float x)
{
    float t = fminf(fmaxf((x - e0) / (e1 - e0), 0.0f), 1.0f);
    return t * t * (3.0f - 2.0f * t);
}

// hone-expect lut_smoothstep_noinline: in=r out=w lut=rw lut_n=- n=- e0=- e1=-
// hone-run lut_smoothstep_noinline: 1D grid over n, block 256, lut_n >= 1, e0 != e1; out[i] = lut_lerp(lut, lut_n, smoothstep01(e0, e1, in[i])) with t clamped to [0,1] and linear interpolation between lut[floor(t*(lut_n-1))] and the next entry (both helpers __noinline__)
extern "C" __global__ void lut_smoothstep_noinline(const float* in, float* out, const float* lut, int lut_n, int n,
                                                   float e0, float e1)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = lut_lerp(lut, lut_n, smoothstep01(e0, e1, in[i]));
    }
}

// hone-expect reverse_blocks_dynsmem: in=r out=w n=-
// hone-run reverse_blocks_dynsmem: 1D grid over n, any block, dynamic shared memory = blockDim.x*sizeof(float); each block reverses its own chunk through extern __shared__: out[b0 + j] = in[b0 + len-1-j] with len = min(blockDim.x, n - b0)
extern "C" __global__ void reverse_blocks_dynsmem(const float* in, float* out, int n)
{
    extern __shared__ float chunk[];
    int b0 = blockIdx.x * blockDim.x;
    int len = n - b0 < (int)blockDim.x ? n - b0 : (int)blockDim.x;
    int t = threadIdx.x;
    if (t < len) chunk[t] = in[b0 + t];
    __syncthreads();
    if (t < len) out[b0 + t] = chunk[len - 1 - t];
}

// Truncated series of 1/(1 + x/2) and the 16-colour VGA palette, both with initializers.
__constant__ float k_poly_coeffs[8] = {1.0f, -0.5f, 0.25f, -0.125f, 0.0625f, -0.03125f, 0.015625f, -0.0078125f};
__constant__ unsigned k_palette[16] = {0x000000u, 0x800000u, 0x008000u, 0x808000u, 0x000080u, 0x800080u,
                                       0x008080u, 0xc0c0c0u, 0x808080u, 0xff0000u, 0x00ff00u, 0xffff00u,
                                       0x0000ffu, 0xff00ffu, 0x00ffffu, 0xffffffu};

// hone-expect poly_eval_const: in=r out=w n=-
// hone-run poly_eval_const: 1D grid over n, block 256; Horner over __constant__ k_poly_coeffs = {1, -1/2, 1/4, -1/8, 1/16, -1/32, 1/64, -1/128}: out[i] = sum_k c[k]*x^k, evaluated as acc = c[7]; acc = fmaf(acc, x, c[k]) for k = 6..0
extern "C" __global__ void poly_eval_const(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        float acc = k_poly_coeffs[7];
        for (int k = 6; k >= 0; --k) acc = fmaf(acc, x, k_poly_coeffs[k]);
        out[i] = acc;
    }
}

// hone-expect palette_lookup_const: idx=r rgb=w n=-
// hone-run palette_lookup_const: 1D grid over n, block 256; rgb[i] = k_palette[idx[i] & 15] (the 16-colour VGA palette in __constant__ memory, run-time index)
extern "C" __global__ void palette_lookup_const(const unsigned char* idx, unsigned* rgb, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        rgb[i] = k_palette[idx[i] & 15];
    }
}

// By-value argument block with pointers at offsets 8 and 16 (after two 4-byte scalars).
struct ScaleArgs {
    int n;
    float scale;
    const float* src;  // offset 8
    float* dst;        // offset 16
};

// hone-expect scale_struct_arg: args=struct(8:r,16:w)
// hone-run scale_struct_arg: 1D grid over args.n, block 256; struct ScaleArgs {int n; float scale; const float* src; float* dst;} (24 bytes, pointers at 8 and 16) passed by value; args.dst[i] = args.src[i] * args.scale
extern "C" __global__ void scale_struct_arg(ScaleArgs args)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < args.n) {
        args.dst[i] = args.src[i] * args.scale;
    }
}

// Extents and origin of a 3D box, by value, no pointers.
struct Box3 {
    int x0, y0, z0;  // origin of the crop inside the source volume
    int nx, ny, nz;  // crop extents
};

// hone-expect crop3d: src=r dst=w sx=- sy=- box=-
// hone-run crop3d: 3D grid ceil(box.nx/8) x ceil(box.ny/8) x ceil(box.nz/4), block 8x8x4; src is a volume with x-extent sx, y-extent sy (x fastest) large enough for the box; struct Box3 {int x0,y0,z0,nx,ny,nz;} by value; dst[x + nx*(y + ny*z)] = src[(x0+x) + sx*((y0+y) + sy*(z0+z))]
extern "C" __global__ void crop3d(const float* src, float* dst, int sx, int sy, Box3 box)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < box.nx && y < box.ny && z < box.nz) {
        long long s = (long long)(box.x0 + x) + (long long)sx * ((long long)(box.y0 + y) + (long long)sy * (box.z0 + z));
        dst[x + (long long)box.nx * (y + (long long)box.ny * z)] = src[s];
    }
}
