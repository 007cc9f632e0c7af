// The host's version of each kernel of kernels.hpp (in double precision), which the program
// compares the device's results against.
#pragma once

#include <cstddef>
#include <vector>

namespace mlp {

using Floats = std::vector<float>;

// A "same" 1-D convolution of `channels` rows of `length` samples with `width` taps.
Floats conv1d(const Floats& x, const Floats& w, int channels, int length, int width);
// A[M x K] * B[K x N].
Floats matmul(const Floats& a, const Floats& b, int m, int n, int k);
// act(x + bias[column]); act 0: ReLU, 1: GELU (tanh form).
Floats bias_act(const Floats& x, const Floats& bias, int rows, int cols, int act);
Floats layernorm(const Floats& x, const Floats& gamma, const Floats& beta, int rows, int cols,
                 float eps);
Floats softmax(const Floats& x, int rows, int cols);

// The largest |got - want| / (1 + |want|) (relative for large values, absolute near zero), and
// where it is.
struct Difference {
  double error = 0;
  size_t index = 0;
};
Difference max_difference(const Floats& got, const Floats& want);

} // namespace mlp
