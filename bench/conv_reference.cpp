// Compiled with -O3 -march=native, no fast-math, like the other references (CMakeLists.txt).
#include "bench/conv_reference.h"

#include <algorithm>

#include "bench/mlp_reference.h"  // bench::sgemm
#include "bench/parallel.h"

namespace bench {

ConvReference::ConvReference(const Sgemm& blas, int64_t n, int64_t c, int64_t h, int64_t w,
                             int64_t o, int threads)
    : blas_(blas),
      n_(n),
      c_(c),
      h_(h),
      w_(w),
      o_(o),
      threads_(threads),
      col_(static_cast<size_t>(n * c * 9 * h * w)),
      dk_image_(static_cast<size_t>(o * c * 9)) {}

// col[img][(ch * 9 + ky * 3 + kx) * h * w + i * w + j] = x[img, ch, i + ky - 1, j + kx - 1] or 0.
void ConvReference::im2col(const float* x) {
  const int64_t h = h_, w = w_, hw = h_ * w_;
  float* col = col_.data();
  parallel(n_ * c_, threads_, [=](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {  // p = img * c + ch: its 9 rows are at col + p * 9 * hw
      const float* src = x + p * hw;
      for (int64_t ky = 0; ky < 3; ++ky)
        for (int64_t kx = 0; kx < 3; ++kx) {
          float* dst = col + (p * 9 + ky * 3 + kx) * hw;
          for (int64_t i = 0; i < h; ++i) {
            int64_t si = i + ky - 1;
            float* row = dst + i * w;
            if (si < 0 || si >= h) {
              std::fill(row, row + w, 0.0f);
              continue;
            }
            for (int64_t j = 0; j < w; ++j) {
              int64_t sj = j + kx - 1;
              row[j] = sj < 0 || sj >= w ? 0.0f : src[si * w + sj];
            }
          }
        }
    }
  });
}

void ConvReference::forward(const float* x, const float* k, float* y) {
  im2col(x);
  const int64_t kk = c_ * 9, hw = h_ * w_;
  for (int64_t img = 0; img < n_; ++img)
    sgemm(blas_, false, false, o_, hw, kk, k, kk, col_.data() + img * kk * hw, hw,
          y + img * o_ * hw, hw);
}

float ConvReference::forward_backward(const float* x, const float* k, const float* dy, float* y,
                                      float* dx, float* dk) {
  forward(x, k, y);
  const int64_t kk = c_ * 9, hw = h_ * w_, h = h_, w = w_;
  float loss = 0;
  for (int64_t i = 0; i < n_ * o_ * hw; ++i) loss += y[i] * dy[i];
  std::fill(dk, dk + o_ * kk, 0.0f);
  for (int64_t img = 0; img < n_; ++img) {
    float* col = col_.data() + img * kk * hw;
    const float* g = dy + img * o_ * hw;
    // dk += dy[img] [o, hw] x col[img]^T [hw, kk]
    sgemm(blas_, false, true, o_, kk, hw, g, hw, col, hw, dk_image_.data(), kk);
    for (int64_t i = 0; i < o_ * kk; ++i) dk[i] += dk_image_[i];
    // dcol = k^T [kk, o] x dy[img] [o, hw], written over the image's col (no longer needed)
    sgemm(blas_, true, false, kk, hw, o_, k, kk, g, hw, col, hw);
  }
  // col2im: each input element adds the 9 window positions it fed.
  const float* col = col_.data();
  parallel(n_ * c_, threads_, [=](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      float* dst = dx + p * hw;
      std::fill(dst, dst + hw, 0.0f);
      for (int64_t ky = 0; ky < 3; ++ky)
        for (int64_t kx = 0; kx < 3; ++kx) {
          const float* src = col + (p * 9 + ky * 3 + kx) * hw;
          for (int64_t i = 0; i < h; ++i) {
            int64_t si = i + ky - 1;
            if (si < 0 || si >= h) continue;
            for (int64_t j = 0; j < w; ++j) {
              int64_t sj = j + kx - 1;
              if (sj >= 0 && sj < w) dst[si * w + sj] += src[i * w + j];
            }
          }
        }
    }
  });
  return loss;
}

void max_pool_2x2(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int threads) {
  const int64_t oh = h / 2, ow = w / 2;
  parallel(planes, threads, [=](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      const float* src = x + p * h * w;
      float* dst = y + p * oh * ow;
      for (int64_t i = 0; i < oh; ++i) {
        const float* r0 = src + 2 * i * w;
        const float* r1 = r0 + w;
        for (int64_t j = 0; j < ow; ++j)
          dst[i * ow + j] =
              std::max(std::max(r0[2 * j], r0[2 * j + 1]), std::max(r1[2 * j], r1[2 * j + 1]));
      }
    }
  });
}

}  // namespace bench
