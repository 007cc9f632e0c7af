// pattern: precision-downgrade
// original: scale
// capture: scale
// comparison: tolerance
// verdict: refused
//
// Computes in half precision inside an f32 kernel (the conversions and the multiply written in
// PTX: NVRTC here has no cuda_fp16.h on its include path).
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
    unsigned short ha;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(ha) : "f"(a));
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned short hx, hr;
        float r;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(hx) : "f"(x[i]));
        asm("mul.rn.f16 %0, %1, %2;" : "=h"(hr) : "h"(ha), "h"(hx));
        asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(hr));
        y[i] = r;
    }
}
