// templates: kernels with mangled names, as C++ CUDA code is full of: one template instantiated
// for int, float, double and unsigned long long; a template on a non-type parameter (unrolled
// by 1, 4 and 8); overloads of one name on int* and float*; kernels in a namespace, nested, and a
// template in it; a kernel taking a struct by value. Each is launched with <<<>>> and again with
// cudaLaunchKernel, both results checked against the host; cudaFuncGetName names each kernel.
#include "corpus.cuh"

#include <cstring>
#include <vector>

template <typename T> __global__ void axpy(T a, const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

template <int Unroll> __global__ void sum_strided(const int* in, int* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int s = 0;
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    int i = t * Unroll + u;
    if (i < n) s += in[i];
  }
  if (t * Unroll < n) out[t] = s;
}

__global__ void fill(int* p, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v + i;
}
__global__ void fill(float* p, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v * float(i);
}

namespace corpus_math {
struct Affine {
  int scale;
  int shift;
};
__global__ void apply(Affine f, int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * f.scale + f.shift;
}
namespace detail {
__global__ void negate(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = -p[i];
}
template <typename T, int Shift> __global__ void shift_left(T* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] << Shift;
}
} // namespace detail
} // namespace corpus_math

constexpr int k_n = 300;
constexpr int k_block = 64;
const dim3 k_grid((k_n + k_block - 1) / k_block);

corpus::Checksum g_sum;

template <typename T> void run_axpy(bool api) {
  std::vector<T> x(k_n), y(k_n), ref(k_n);
  for (int i = 0; i < k_n; ++i) {
    x[i] = T(i % 17);
    y[i] = T(3 * i);
  }
  T a = T(5);
  for (int i = 0; i < k_n; ++i) ref[i] = a * x[i] + y[i];
  T *dx, *dy;
  CHECK(cudaMalloc(&dx, k_n * sizeof(T)));
  CHECK(cudaMalloc(&dy, k_n * sizeof(T)));
  CHECK(cudaMemcpy(dx, x.data(), k_n * sizeof(T), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), k_n * sizeof(T), cudaMemcpyHostToDevice));
  int n = k_n;
  if (api) {
    void* args[] = {&a, &dx, &dy, &n};
    CHECK(cudaLaunchKernel((const void*)axpy<T>, k_grid, dim3(k_block), args, 0, nullptr));
  } else {
    axpy<T><<<k_grid, k_block>>>(a, dx, dy, n);
    CHECK_LAUNCH("axpy<<<>>>");
  }
  CHECK(cudaMemcpy(y.data(), dy, k_n * sizeof(T), cudaMemcpyDeviceToHost));
  for (int i = 0; i < k_n; ++i) {
    if (y[i] != ref[i]) corpus::wrong("axpy<%zu bytes> %d: %g, expected %g", sizeof(T), i,
                                      double(y[i]), double(ref[i]));
  }
  g_sum.add_all(y.data(), y.size());
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
}

template <int Unroll> void run_sum(bool api, const int* din, int* dout, const std::vector<int>& in) {
  int n = k_n, threads = (k_n + Unroll - 1) / Unroll;
  dim3 grid((threads + k_block - 1) / k_block);
  CHECK(cudaMemset(dout, 0, k_n * sizeof(int)));
  if (api) {
    void* args[] = {&din, &dout, &n};
    CHECK(cudaLaunchKernel((const void*)sum_strided<Unroll>, grid, dim3(k_block), args, 0, nullptr));
  } else {
    sum_strided<Unroll><<<grid, k_block>>>(din, dout, n);
    CHECK_LAUNCH("sum_strided<<<>>>");
  }
  std::vector<int> out(threads);
  CHECK(cudaMemcpy(out.data(), dout, threads * sizeof(int), cudaMemcpyDeviceToHost));
  for (int t = 0; t < threads; ++t) {
    int want = 0;
    for (int u = 0; u < Unroll && t * Unroll + u < k_n; ++u) want += in[t * Unroll + u];
    if (out[t] != want) corpus::wrong("sum_strided<%d>[%d] = %d, expected %d", Unroll, t, out[t], want);
  }
  g_sum.add_all(out.data(), out.size());
}

void expect_name(const void* func, const char* part) {
  const char* name = nullptr;
  CHECK(cudaFuncGetName(&name, func));
  if (name == nullptr || std::strstr(name, part) == nullptr)
    corpus::wrong("cudaFuncGetName: %s, expected a name with %s", name ? name : "(null)", part);
}

int main() {
  for (bool api : {false, true}) {
    run_axpy<int>(api);
    run_axpy<float>(api);
    run_axpy<double>(api);
    run_axpy<unsigned long long>(api);
  }

  std::vector<int> in(k_n);
  for (int i = 0; i < k_n; ++i) in[i] = (i * 7) % 23 - 11;
  int *din, *dout;
  CHECK(cudaMalloc(&din, k_n * sizeof(int)));
  CHECK(cudaMalloc(&dout, k_n * sizeof(int)));
  CHECK(cudaMemcpy(din, in.data(), k_n * sizeof(int), cudaMemcpyHostToDevice));
  for (bool api : {false, true}) {
    run_sum<1>(api, din, dout, in);
    run_sum<4>(api, din, dout, in);
    run_sum<8>(api, din, dout, in);
  }

  // Overloads: the cast picks one; both launch ways.
  int* di;
  float* df;
  CHECK(cudaMalloc(&di, k_n * sizeof(int)));
  CHECK(cudaMalloc(&df, k_n * sizeof(float)));
  void (*fill_int)(int*, int, int) = fill;
  void (*fill_float)(float*, float, int) = fill;
  int n = k_n;
  for (bool api : {false, true}) {
    int vi = api ? 100 : 10;
    float vf = api ? 0.25f : 0.5f;
    if (api) {
      void* iargs[] = {&di, &vi, &n};
      void* fargs[] = {&df, &vf, &n};
      CHECK(cudaLaunchKernel((const void*)fill_int, k_grid, dim3(k_block), iargs, 0, nullptr));
      CHECK(cudaLaunchKernel((const void*)fill_float, k_grid, dim3(k_block), fargs, 0, nullptr));
    } else {
      fill<<<k_grid, k_block>>>(di, vi, n);
      fill<<<k_grid, k_block>>>(df, vf, n);
      CHECK_LAUNCH("fill<<<>>>");
    }
    std::vector<int> hi(k_n);
    std::vector<float> hf(k_n);
    CHECK(cudaMemcpy(hi.data(), di, k_n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hf.data(), df, k_n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < k_n; ++i) {
      if (hi[i] != vi + i) corpus::wrong("fill(int*)[%d] = %d", i, hi[i]);
      if (hf[i] != vf * float(i)) corpus::wrong("fill(float*)[%d] = %g", i, hf[i]);
    }
    g_sum.add_all(hi.data(), hi.size());
    g_sum.add_all(hf.data(), hf.size());
  }

  // The namespace: apply (struct by value), detail::negate, detail::shift_left<int, 3>.
  std::vector<int> ref(k_n), h(k_n);
  for (int i = 0; i < k_n; ++i) ref[i] = i - 50;
  CHECK(cudaMemcpy(di, ref.data(), k_n * sizeof(int), cudaMemcpyHostToDevice));
  corpus_math::Affine f{3, -7};
  corpus_math::apply<<<k_grid, k_block>>>(f, di, n);
  CHECK_LAUNCH("corpus_math::apply<<<>>>");
  corpus_math::detail::negate<<<k_grid, k_block>>>(di, n);
  CHECK_LAUNCH("corpus_math::detail::negate<<<>>>");
  {
    void* args[] = {&di, &n};
    CHECK(cudaLaunchKernel((const void*)corpus_math::detail::shift_left<int, 3>, k_grid,
                           dim3(k_block), args, 0, nullptr));
    corpus_math::Affine g{2, 1};
    void* apply_args[] = {&g, &di, &n};
    CHECK(cudaLaunchKernel((const void*)corpus_math::apply, k_grid, dim3(k_block), apply_args, 0,
                           nullptr));
  }
  CHECK(cudaMemcpy(h.data(), di, k_n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < k_n; ++i) {
    int want = -(ref[i] * 3 - 7) * 8 * 2 + 1; // shift_left<int, 3> multiplies by 8
    if (h[i] != want) corpus::wrong("namespace kernels [%d] = %d, expected %d", i, h[i], want);
  }
  g_sum.add_all(h.data(), h.size());

  expect_name((const void*)axpy<double>, "axpy");
  expect_name((const void*)sum_strided<8>, "sum_strided");
  expect_name((const void*)fill_float, "fill");
  expect_name((const void*)corpus_math::detail::shift_left<int, 3>, "shift_left");

  std::printf("templates: 4 axpy, 3 sum_strided, 2 fill overloads, each by <<<>>> and "
              "cudaLaunchKernel; 3 namespace kernels\n");
  std::printf("templates: h[0] %d h[%d] %d checksum %016llx\n", h[0], k_n - 1, h[k_n - 1],
              g_sum.value());
  for (void* p : {(void*)din, (void*)dout, (void*)di, (void*)df}) CHECK(cudaFree(p));
  std::printf("templates: ok\n");
  return 0;
}
