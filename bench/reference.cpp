// Compiled with -O3 -march=native and without -ffast-math (see CMakeLists.txt).
#include "bench/reference.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

void affine_kernel(const float* __restrict x, float* __restrict y, int64_t n, int threads) {
  parallel(n, threads, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = x[i] * 2.0f + 1.0f;
  });
}

void affine_kernel(const double* __restrict x, double* __restrict y, int64_t n, int threads) {
  parallel(n, threads, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = x[i] * 2.0 + 1.0;
  });
}

void triad_kernel(const float* __restrict b, const float* __restrict c, float* __restrict a,
                  float s, int64_t n, int threads) {
  parallel(n, threads, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
  });
}

namespace {

// 12 independent accumulators cover the FMA latency (4 cycles) times 2 FMA ports with room to
// spare. The result is returned so the loop is not optimised away.
constexpr int kChains = 12;

__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(float(j));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  __m512 t = acc[0];
  for (int j = 1; j < kChains; ++j) t = _mm512_add_ps(t, acc[j]);
  return _mm512_reduce_add_ps(t);
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(float(j));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, a);
  __m256 t = acc[0];
  for (int j = 1; j < kChains; ++j) t = _mm256_add_ps(t, acc[j]);
  float v[8];
  _mm256_storeu_ps(v, t);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

}  // namespace

double fma_peak_gflops(int threads, double ms) {
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f");
  int lanes = avx512 ? 16 : 8;
  if (!avx512 && !__builtin_cpu_supports("fma")) return 0;  // no FMA: no peak to quote
  auto loop = [avx512](int64_t iters) {
    return avx512 ? fma_loop_avx512(iters) : fma_loop_avx2(iters);
  };
  // Calibrates on one thread, then runs `threads` copies of the loop at once.
  int64_t iters = 1 << 16;
  volatile float sink = 0;
  for (;;) {
    auto a = std::chrono::steady_clock::now();
    sink = sink + loop(iters);
    double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    if (t > ms / 4 || iters > (int64_t{1} << 40)) {
      iters = static_cast<int64_t>(iters * ms / std::max(t, 1e-3));
      break;
    }
    iters *= 4;
  }
  // One copy of the loop per thread, each on its own thread: parallel()'s shared counter could
  // let one thread take every chunk before the others start, and halve the measured peak.
  threads = std::max(1, threads);
  auto a = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  std::vector<float> sinks(threads);
  for (int t = 1; t < threads; ++t) workers.emplace_back([&, t] { sinks[t] = loop(iters); });
  sinks[0] = loop(iters);
  for (auto& w : workers) w.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
  sink = sink + sinks[0];
  return 2.0 * lanes * kChains * double(iters) * threads / s / 1e9;
}

float sum_kernel(const float* __restrict x, int64_t n, int threads) {
  std::atomic<int> lock{0};
  float total = 0;
  parallel(n, threads, [&](int64_t lo, int64_t hi) {
    constexpr int kLanes = 64;
    float acc[kLanes] = {};
    int64_t i = lo;
    for (; i + kLanes <= hi; i += kLanes)
      for (int j = 0; j < kLanes; ++j) acc[j] += x[i + j];
    float s = 0;
    for (; i < hi; ++i) s += x[i];
    for (int j = 0; j < kLanes; ++j) s += acc[j];
    while (lock.exchange(1)) {
    }
    total += s;
    lock.store(0);
  });
  return total;
}

void softmax_rows_kernel(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols,
                         int threads) {
  parallel(rows, threads, [=](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      float m = -INFINITY;
      for (int64_t j = 0; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
      float s = 0;
      for (int64_t j = 0; j < cols; ++j) s += (yr[j] = std::exp(xr[j] - m));
      for (int64_t j = 0; j < cols; ++j) yr[j] /= s;
    }
  });
}

void layernorm_rows_kernel(const float* __restrict x, const float* __restrict g,
                           const float* __restrict b, float* __restrict y, int64_t rows,
                           int64_t cols, float eps, int threads) {
  parallel(rows, threads, [=](int64_t lo, int64_t hi) {
    constexpr int kLanes = 16;  // independent partial sums: vectorisable without fast-math
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * cols;
      float* yr = y + r * cols;
      float acc[kLanes] = {}, acc2[kLanes] = {};
      int64_t j = 0;
      for (; j + kLanes <= cols; j += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] += xr[j + l];
      float s = 0;
      for (; j < cols; ++j) s += xr[j];
      for (int l = 0; l < kLanes; ++l) s += acc[l];
      float mean = s / float(cols);
      for (j = 0; j + kLanes <= cols; j += kLanes)
        for (int l = 0; l < kLanes; ++l) {
          float d = xr[j + l] - mean;
          acc2[l] += d * d;
        }
      float v = 0;
      for (; j < cols; ++j) v += (xr[j] - mean) * (xr[j] - mean);
      for (int l = 0; l < kLanes; ++l) v += acc2[l];
      float inv = 1.0f / std::sqrt(v / float(cols) + eps);
      for (j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * inv * g[j] + b[j];
    }
  });
}

float* add_alloc(const float* a, const float* b, int64_t n) {
  float* out = new float[n];
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  return out;
}

}  // namespace bench
