// Transcendental pointwise math, each in a precise form (libdevice expf/logf/tanhf, IEEE
// division) and a fast form written with intrinsics (__expf, __logf, __fdividef) so the fast path
// exists regardless of the compile's -use_fast_math setting. Plus double precision.

// hone-expect gelu_tanh_f32: in=r out=w n=-
// hone-run gelu_tanh_f32: 1D grid over n, block 256; out[i] = 0.5*x*(1 + tanhf(0.7978845608*(x + 0.044715*x^3))), precise tanhf
extern "C" __global__ void gelu_tanh_f32(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        float u = 0.7978845608f * (x + 0.044715f * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

// hone-expect gelu_tanh_fast_f32: in=r out=w n=-
// hone-run gelu_tanh_fast_f32: 1D grid over n, block 256; same as gelu_tanh_f32 with tanh(u) = 1 - 2/(1 + __expf(2u)) (u clamped to [-10,10]) and __fdividef; compare with ~1e-5 relative + 1e-6 absolute tolerance
extern "C" __global__ void gelu_tanh_fast_f32(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        float u = 0.7978845608f * (x + 0.044715f * x * x * x);
        u = fminf(fmaxf(u, -10.0f), 10.0f);
        float t = 1.0f - __fdividef(2.0f, 1.0f + __expf(2.0f * u));
        out[i] = 0.5f * x * (1.0f + t);
    }
}

// hone-expect softplus_exp_log_f32: in=r out=w n=-
// hone-run softplus_exp_log_f32: 1D grid over n, block 256; out[i] = x > 20 ? x : log1pf(expf(x)) (precise)
extern "C" __global__ void softplus_exp_log_f32(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        out[i] = x > 20.0f ? x : log1pf(expf(x));
    }
}

// hone-expect logsig_f32: in=r out_sig=w out_log=w n=-
// hone-run logsig_f32: 1D grid over n, block 256, inputs in [-20, 20]; out_sig[i] = 1 / (1 + expf(-x)), out_log[i] = logf(out_sig[i]) (precise expf, IEEE division, logf)
extern "C" __global__ void logsig_f32(const float* in, float* out_sig, float* out_log, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 1.0f / (1.0f + expf(-in[i]));
        out_sig[i] = s;
        out_log[i] = logf(s);
    }
}

// hone-expect logsig_fast_f32: in=r out_sig=w out_log=w n=-
// hone-run logsig_fast_f32: 1D grid over n, block 256, inputs in [-20, 20]; same as logsig_f32 with __expf, __fdividef and __logf (fast intrinsics; compare with ~1e-5 relative + 1e-6 absolute tolerance)
extern "C" __global__ void logsig_fast_f32(const float* in, float* out_sig, float* out_log, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = __fdividef(1.0f, 1.0f + __expf(-in[i]));
        out_sig[i] = s;
        out_log[i] = __logf(s);
    }
}

// hone-expect dmath_f64: in=r out=w n=-
// hone-run dmath_f64: 1D grid over n, block 128; double precision: out[i] = fma(sqrt(fabs(x)), exp(-x*x), sin(x))
extern "C" __global__ void dmath_f64(const double* in, double* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        double x = in[i];
        out[i] = fma(sqrt(fabs(x)), exp(-x * x), sin(x));
    }
}
