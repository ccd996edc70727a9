// Compiled with -O3 -march=native and without -ffast-math (see CMakeLists.txt).
#include "bench/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench/parallel.h"

namespace bench {

int reference_threads() {
  if (const char* e = std::getenv("RUNE_NUM_THREADS")) {
    int v = std::atoi(e);
    if (v > 0) return v;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void copy_kernel(const float* __restrict x, float* __restrict y, int64_t n, int threads) {
  parallel(n, threads, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = x[i];
  });
}

void chain_kernel(const float* __restrict x, float* __restrict y, int64_t n, int threads) {
  parallel(n, threads, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      float v = x[i];
      y[i] = (v * 2.0f + 1.0f) * std::tanh(v) - std::exp(-v * v);
    }
  });
}

float* add_alloc(const float* a, const float* b, int64_t n) {
  float* out = new float[n];
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  return out;
}

}  // namespace bench
