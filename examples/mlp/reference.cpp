#include "reference.hpp"

#include <algorithm>
#include <cmath>

namespace mlp {

Floats conv1d(const Floats& x, const Floats& w, int channels, int length, int width) {
  Floats y(size_t(channels) * size_t(length));
  const int half = width / 2;
  for (int c = 0; c < channels; ++c) {
    const float* xc = x.data() + size_t(c) * size_t(length);
    for (int i = 0; i < length; ++i) {
      double acc = 0;
      for (int j = 0; j < width; ++j) {
        int s = i + j - half;
        if (s >= 0 && s < length) acc += double(xc[s]) * w[size_t(j)];
      }
      y[size_t(c) * size_t(length) + size_t(i)] = float(acc);
    }
  }
  return y;
}

Floats matmul(const Floats& a, const Floats& b, int m, int n, int k) {
  Floats c(size_t(m) * size_t(n));
  for (int r = 0; r < m; ++r) {
    for (int col = 0; col < n; ++col) {
      double acc = 0;
      for (int i = 0; i < k; ++i) {
        acc +=
            double(a[size_t(r) * size_t(k) + size_t(i)]) * b[size_t(i) * size_t(n) + size_t(col)];
      }
      c[size_t(r) * size_t(n) + size_t(col)] = float(acc);
    }
  }
  return c;
}

Floats bias_act(const Floats& x, const Floats& bias, int rows, int cols, int act) {
  Floats y(size_t(rows) * size_t(cols));
  for (size_t i = 0; i < y.size(); ++i) {
    double v = double(x[i]) + bias[i % size_t(cols)];
    y[i] = act == 1 ? float(0.5 * v * (1 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v))))
                    : float(std::max(v, 0.0));
  }
  return y;
}

Floats layernorm(const Floats& x, const Floats& gamma, const Floats& beta, int rows, int cols,
                 float eps) {
  Floats y(size_t(rows) * size_t(cols));
  for (int r = 0; r < rows; ++r) {
    const float* xr = x.data() + size_t(r) * size_t(cols);
    double mean = 0, var = 0;
    for (int c = 0; c < cols; ++c) mean += xr[c];
    mean /= cols;
    for (int c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    double rstd = 1 / std::sqrt(var / cols + eps);
    for (int c = 0; c < cols; ++c) {
      y[size_t(r) * size_t(cols) + size_t(c)] =
          float((xr[c] - mean) * rstd * gamma[size_t(c)] + beta[size_t(c)]);
    }
  }
  return y;
}

Floats softmax(const Floats& x, int rows, int cols) {
  Floats y(size_t(rows) * size_t(cols));
  for (int r = 0; r < rows; ++r) {
    const float* xr = x.data() + size_t(r) * size_t(cols);
    double m = *std::max_element(xr, xr + cols), sum = 0;
    for (int c = 0; c < cols; ++c) sum += std::exp(xr[c] - m);
    for (int c = 0; c < cols; ++c) {
      y[size_t(r) * size_t(cols) + size_t(c)] = float(std::exp(xr[c] - m) / sum);
    }
  }
  return y;
}

Difference max_difference(const Floats& got, const Floats& want) {
  Difference d;
  for (size_t i = 0; i < want.size(); ++i) {
    double e = std::fabs(double(got[i]) - want[i]) / (1 + std::fabs(double(want[i])));
    if (!(e <= d.error)) { // NaN counts as the worst
      d.error = std::isnan(e) ? INFINITY : e;
      d.index = i;
    }
  }
  return d;
}

} // namespace mlp
