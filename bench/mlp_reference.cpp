// Compiled with -O3 -march=native, no fast-math, like the other references (CMakeLists.txt).
#include "bench/mlp_reference.h"

#include <algorithm>
#include <cmath>

namespace bench {

void sgemm(const Sgemm& s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
           int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (s.run == blas_detail::dnnl) {
    reinterpret_cast<blas_detail::DnnlSgemm>(s.fn)(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a,
                                                   lda, b, ldb, 0.0f, c, ldc);
    return;
  }
  constexpr int kTrans = 112;
  reinterpret_cast<blas_detail::CblasSgemm>(s.fn)(
      blas_detail::kRowMajor, ta ? kTrans : blas_detail::kNoTrans,
      tb ? kTrans : blas_detail::kNoTrans, int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb),
      0.0f, c, int(ldc));
}

MlpReference::MlpReference(const Sgemm& blas, const float* x, const float* y, int64_t batch,
                           int64_t in, int64_t hidden, int64_t out)
    : blas_(blas),
      x_(x),
      y_(y),
      batch_(batch),
      in_(in),
      hidden_(hidden),
      out_(out),
      h_(batch * hidden),
      logits_(batch * out),
      dlogits_(batch * out),
      dh_(batch * hidden),
      dw1_(in * hidden),
      dw2_(hidden * out) {}

float MlpReference::step(float* w1, float* b1, float* w2, float* b2, float lr) {
  const int64_t B = batch_, I = in_, H = hidden_, O = out_;
  float* h = h_.data();
  float* l = logits_.data();
  float* dl = dlogits_.data();
  float* dh = dh_.data();
  // Forward: h = relu(x W1 + b1), logits = h W2 + b2.
  sgemm(blas_, false, false, B, H, I, x_, I, w1, H, h, H);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < H; ++j) h[i * H + j] = std::max(h[i * H + j] + b1[j], 0.0f);
  sgemm(blas_, false, false, B, O, H, h, H, w2, O, l, O);
  // Loss = mean over rows of -sum(y * log_softmax(logits)); d loss / d logits =
  // (softmax * sum(y) - y) / B.
  double loss = 0;
  for (int64_t i = 0; i < B; ++i) {
    float* li = l + i * O;
    const float* yi = y_ + i * O;
    float m = -INFINITY;
    for (int64_t j = 0; j < O; ++j) m = std::max(m, li[j] += b2[j]);
    float s = 0;
    for (int64_t j = 0; j < O; ++j) s += std::exp(li[j] - m);
    float lse = m + std::log(s), ysum = 0, row = 0;
    for (int64_t j = 0; j < O; ++j) row += yi[j] * (li[j] - lse), ysum += yi[j];
    loss -= row;
    for (int64_t j = 0; j < O; ++j)
      dl[i * O + j] = (std::exp(li[j] - lse) * ysum - yi[j]) / float(B);
  }
  // Backward: dW2 = h^T dl, dh = (dl W2^T) * (h > 0), dW1 = x^T dh; biases: column sums.
  sgemm(blas_, true, false, H, O, B, h, H, dl, O, dw2_.data(), O);
  sgemm(blas_, false, true, B, H, O, dl, O, w2, O, dh, H);
  for (int64_t i = 0; i < B * H; ++i) dh[i] = h[i] > 0 ? dh[i] : 0.0f;
  sgemm(blas_, true, false, I, H, B, x_, I, dh, H, dw1_.data(), H);
  // SGD; each bias gradient is summed over the batch as it is applied.
  for (int64_t i = 0; i < I * H; ++i) w1[i] -= dw1_[i] * lr;
  for (int64_t i = 0; i < H * O; ++i) w2[i] -= dw2_[i] * lr;
  for (int64_t j = 0; j < H; ++j) {
    float g = 0;
    for (int64_t i = 0; i < B; ++i) g += dh[i * H + j];
    b1[j] -= g * lr;
  }
  for (int64_t j = 0; j < O; ++j) {
    float g = 0;
    for (int64_t i = 0; i < B; ++i) g += dl[i * O + j];
    b2[j] -= g * lr;
  }
  return static_cast<float>(loss / double(B));
}

}  // namespace bench
