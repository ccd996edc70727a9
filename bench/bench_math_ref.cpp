// The reference loops of bench_math: glibc's expf / logf / sinf / tanhf over an array, compiled
// -O3 -march=native without -ffast-math (see bench/CMakeLists.txt) and split over threads as
// rune's pool splits an eager op.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "bench/parallel.h"

namespace bench {

namespace {

template <float (*Fn)(float)>
void apply(const float* __restrict x, float* __restrict y, int64_t n, int threads) {
  parallel(n, threads, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = Fn(x[i]);
  });
}

float f_exp(float v) { return expf(v); }
float f_log(float v) { return logf(v); }
float f_sin(float v) { return sinf(v); }
float f_tanh(float v) { return tanhf(v); }

}  // namespace

// which: 0 exp, 1 log, 2 sin, 3 tanh.
void math_ref_kernel(int which, const float* x, float* y, int64_t n, int threads) {
  switch (which) {
    case 0:
      apply<f_exp>(x, y, n, threads);
      break;
    case 1:
      apply<f_log>(x, y, n, threads);
      break;
    case 2:
      apply<f_sin>(x, y, n, threads);
      break;
    default:
      apply<f_tanh>(x, y, n, threads);
      break;
  }
}

}  // namespace bench
