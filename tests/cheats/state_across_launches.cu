// pattern: state-across-launches
// original: scale
// capture: scale
// comparison: bitwise
// verdict: refused
//
// Correct while it is checked: counts its launches in a module-scope variable and stops doing
// the work after the first thousand (GPU MODE's 2026 winner did its work in a later call).
__device__ unsigned launches;

extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    __shared__ unsigned seen;
    if (threadIdx.x == 0) {
        seen = launches;
        if (blockIdx.x == 0) atomicAdd(&launches, 1u);
    }
    __syncthreads();
    if (seen > 1000) return;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i];
}
