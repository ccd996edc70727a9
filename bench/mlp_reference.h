// The MLP training step written by hand in C++ around BLAS calls: what a user calling the best
// BLAS directly would write, the reference for rune's compiled MLP step (bench_mlp.cpp).
// Forward x @ W1 + b1, relu, @ W2 + b2, log-softmax cross-entropy averaged over the batch;
// backward with sgemm calls (transposed operands read in place by the BLAS); SGD update.
// float32 throughout; the BLAS runs on the threads it was loaded with (blas.h).
#pragma once
#include <cstdint>
#include <vector>

#include "bench/blas.h"

namespace bench {

// Row-major C[m, n] = op(A) op(B), op a transpose where ta / tb; lda, ldb, ldc are the stored
// row lengths. Calls cblas_sgemm or dnnl_sgemm, whichever `s` holds.
void sgemm(const Sgemm& s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
           int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);

class MlpReference {
 public:
  // x: batch x in, y: batch x out targets (one-hot), both kept by pointer (not copied).
  MlpReference(const Sgemm& blas, const float* x, const float* y, int64_t batch, int64_t in,
               int64_t hidden, int64_t out);
  // One step on the parameters, updated in place (w1: in x hidden, b1: hidden, w2: hidden x out,
  // b2: out); returns the loss before the update, as rune's step does.
  float step(float* w1, float* b1, float* w2, float* b2, float lr);

 private:
  const Sgemm& blas_;
  const float *x_, *y_;
  int64_t batch_, in_, hidden_, out_;
  std::vector<float> h_, logits_, dlogits_, dh_, dw1_, dw2_;
};

}  // namespace bench
