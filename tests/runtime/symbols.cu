// symbols: __constant__ and __device__ variables as real code configures kernels through them.
// cudaMemcpyToSymbol sets polynomial coefficients in constant memory (whole, then part of it at an
// offset); a kernel evaluates them and counts calls in a __device__ counter read back with
// cudaMemcpyFromSymbol; a __device__ table is written and read with the Async forms at offsets on
// a stream; cudaGetSymbolAddress gives a pointer plain cudaMemcpy and kernels use, and
// cudaGetSymbolSize the variables' sizes. A copy in the wrong direction is refused with
// cudaErrorInvalidMemcpyDirection, one past the end of the symbol with cudaErrorInvalidValue, and
// an address that is not a symbol with cudaErrorInvalidSymbol.
#include "corpus.cuh"

#include <vector>

constexpr int k_coeffs = 8;
constexpr int k_table = 64;

__constant__ int c_coeffs[k_coeffs];
__constant__ int c_bias;
__device__ unsigned d_calls;
__device__ int d_table[k_table];

__global__ void polynomial(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int acc = 0;
  for (int c = k_coeffs - 1; c >= 0; --c) acc = acc * x[i] + c_coeffs[c];
  y[i] = acc + c_bias;
  atomicAdd(&d_calls, 1u);
}

__global__ void table_twice(int* out) {
  int i = threadIdx.x;
  if (i < k_table) out[i] = 2 * d_table[i];
}

int main() {
  const int n = 200;
  std::vector<int> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = i % 5 - 2;
  int coeffs[k_coeffs] = {1, -2, 3, 0, 1, 0, 0, 1};
  const int bias = 100;
  const unsigned zero = 0;
  CHECK(cudaMemcpyToSymbol(c_coeffs, coeffs, sizeof coeffs));
  CHECK(cudaMemcpyToSymbol(c_bias, &bias, sizeof bias, 0, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpyToSymbol(d_calls, &zero, sizeof zero));

  size_t size = 0;
  CHECK(cudaGetSymbolSize(&size, c_coeffs));
  if (size != sizeof coeffs) corpus::wrong("cudaGetSymbolSize(c_coeffs) = %zu", size);
  CHECK(cudaGetSymbolSize(&size, d_table));
  if (size != k_table * sizeof(int)) corpus::wrong("cudaGetSymbolSize(d_table) = %zu", size);
  CHECK(cudaGetSymbolSize(&size, d_calls));
  if (size != sizeof(unsigned)) corpus::wrong("cudaGetSymbolSize(d_calls) = %zu", size);

  int *dx, *dy;
  CHECK(cudaMalloc(&dx, n * sizeof(int)));
  CHECK(cudaMalloc(&dy, n * sizeof(int)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  auto run = [&](const int* c) {
    polynomial<<<(n + 63) / 64, 64>>>(dx, dy, n);
    CHECK_LAUNCH("polynomial<<<>>>");
    CHECK(cudaMemcpy(y.data(), dy, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      int acc = 0;
      for (int k = k_coeffs - 1; k >= 0; --k) acc = acc * x[i] + c[k];
      if (y[i] != acc + bias) corpus::wrong("polynomial(%d) = %d, expected %d", x[i], y[i], acc + bias);
    }
  };
  run(coeffs);
  // Coefficients 2..4 replaced, at an offset into the symbol.
  const int part[3] = {-1, 5, -3};
  CHECK(cudaMemcpyToSymbol(c_coeffs, part, sizeof part, 2 * sizeof(int), cudaMemcpyHostToDevice));
  int now[k_coeffs];
  CHECK(cudaMemcpyFromSymbol(now, c_coeffs, sizeof now));
  for (int k = 0; k < 3; ++k) coeffs[2 + k] = part[k];
  for (int k = 0; k < k_coeffs; ++k) {
    if (now[k] != coeffs[k]) corpus::wrong("c_coeffs[%d] reads back %d, expected %d", k, now[k], coeffs[k]);
  }
  run(coeffs);
  unsigned calls = 0;
  CHECK(cudaMemcpyFromSymbol(&calls, d_calls, sizeof calls, 0, cudaMemcpyDeviceToHost));
  if (calls != 2u * n) corpus::wrong("d_calls = %u, expected %u", calls, 2u * n);

  // The table: halves through the Async forms at offsets, read back the same way.
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  int table[k_table], back[k_table];
  for (int i = 0; i < k_table; ++i) table[i] = i * i - 30;
  const size_t half = k_table / 2 * sizeof(int);
  CHECK(cudaMemcpyToSymbolAsync(d_table, table + k_table / 2, half, half, cudaMemcpyHostToDevice, s));
  CHECK(cudaMemcpyToSymbolAsync(d_table, table, half, 0, cudaMemcpyHostToDevice, s));
  CHECK(cudaMemcpyFromSymbolAsync(back + k_table / 2, d_table, half, half, cudaMemcpyDeviceToHost, s));
  CHECK(cudaMemcpyFromSymbolAsync(back, d_table, half, 0, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < k_table; ++i) {
    if (back[i] != table[i]) corpus::wrong("d_table[%d] reads back %d, expected %d", i, back[i], table[i]);
  }

  // Through its address: a plain copy writes element 10, a kernel reads the table.
  int* table_ptr = nullptr;
  CHECK(cudaGetSymbolAddress((void**)&table_ptr, d_table));
  const int ten = 12345;
  CHECK(cudaMemcpy(table_ptr + 10, &ten, sizeof ten, cudaMemcpyHostToDevice));
  table[10] = ten;
  int* dtwice;
  CHECK(cudaMalloc(&dtwice, k_table * sizeof(int)));
  table_twice<<<1, k_table>>>(dtwice);
  CHECK_LAUNCH("table_twice<<<>>>");
  int twice[k_table];
  CHECK(cudaMemcpy(twice, dtwice, sizeof twice, cudaMemcpyDeviceToHost));
  for (int i = 0; i < k_table; ++i) {
    if (twice[i] != 2 * table[i]) corpus::wrong("table_twice[%d] = %d", i, twice[i]);
  }
  // Device to device into a symbol, from the symbol's own address.
  CHECK(cudaMemcpyToSymbol(c_coeffs, table_ptr, sizeof(int), 0, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpyFromSymbol(now, c_coeffs, sizeof(int)));
  if (now[0] != table[0]) corpus::wrong("c_coeffs[0] after a device copy = %d", now[0]);

  // Refusals.
  CHECK_ERROR(cudaMemcpyToSymbol(c_coeffs, coeffs, sizeof coeffs, 0, cudaMemcpyDeviceToHost),
              cudaErrorInvalidMemcpyDirection);
  CHECK_ERROR(cudaMemcpyFromSymbol(now, c_coeffs, sizeof now, 0, cudaMemcpyHostToDevice),
              cudaErrorInvalidMemcpyDirection);
  CHECK_ERROR(cudaMemcpyToSymbol(c_coeffs, coeffs, 2 * sizeof(int), sizeof coeffs - sizeof(int)),
              cudaErrorInvalidValue);
  CHECK_ERROR(cudaMemcpyFromSymbol(now, c_coeffs, sizeof(int), sizeof coeffs), cudaErrorInvalidValue);
  CHECK_ERROR(cudaMemcpyToSymbolAsync(d_table, table, sizeof table + 4, 0, cudaMemcpyHostToDevice, s),
              cudaErrorInvalidValue);
  static int not_a_symbol;
  void* p = nullptr;
  CHECK_ERROR(cudaGetSymbolAddress(&p, &not_a_symbol), cudaErrorInvalidSymbol);
  CHECK_ERROR(cudaGetSymbolSize(&size, &not_a_symbol), cudaErrorInvalidSymbol);
  std::printf("symbols: refused: wrong direction %s, past the end %s, not a symbol %s\n",
              cudaGetErrorName(cudaErrorInvalidMemcpyDirection),
              cudaGetErrorName(cudaErrorInvalidValue), cudaGetErrorName(cudaErrorInvalidSymbol));

  corpus::Checksum sum;
  sum.add_all(y.data(), y.size());
  sum.add_all(twice, k_table);
  std::printf("symbols: y[0] %d y[%d] %d, %u calls, checksum %016llx\n", y[0], n - 1, y[n - 1],
              calls, sum.value());
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(dtwice));
  std::printf("symbols: ok\n");
  return 0;
}
