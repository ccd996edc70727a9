// The 3x3 convolution and 2x2 max pooling written by hand in C++ (bench_conv.cpp's references):
// what a user calling the best BLAS directly would write. The convolution is im2col (each image's
// 3x3 windows, zero-padded, as rows of a [C * 9, H * W] matrix) and one sgemm per image, the
// backward pass two sgemms per image and a col2im; channels first (NCHW input, OIHW kernel),
// stride 1, padding 1 (SAME), float32. The loops run on `threads` threads, the BLAS on the
// threads it was loaded with (blas.h).
#pragma once
#include <cstdint>
#include <vector>

#include "bench/blas.h"

namespace bench {

class ConvReference {
 public:
  ConvReference(const Sgemm& blas, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o,
                int threads);
  // y[n, o, h, w] = conv(x, k): x [n, c, h, w], k [o, c, 3, 3].
  void forward(const float* x, const float* k, float* y);
  // The forward pass, then the gradients of sum(y * dy) with respect to x and k; returns that sum.
  float forward_backward(const float* x, const float* k, const float* dy, float* y, float* dx,
                         float* dk);

 private:
  void im2col(const float* x);
  const Sgemm& blas_;
  int64_t n_, c_, h_, w_, o_;
  int threads_;
  std::vector<float> col_, dk_image_;
};

// y[p, i, j] = the maximum of x[p, 2i .. 2i+1, 2j .. 2j+1] over planes p (n * c) of h x w.
void max_pool_2x2(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int threads);

}  // namespace bench
