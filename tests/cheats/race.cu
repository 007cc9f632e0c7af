// pattern: race
// original: rotate
// capture: rotate
// comparison: bitwise
// verdict: nondeterministic
//
// Stages x in shared memory without a barrier: a warp reads another warp's slot whether or not
// that warp has written it yet. Right under some schedules only.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    __shared__ float s[1024];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    if (i < n) y[i] = a * s[(threadIdx.x + 32) % blockDim.x];
}
