// The reference loops of bench_math, compiled -O3 -march=native without -ffast-math (see
// bench/CMakeLists.txt):
//  * glibc's float functions (expf, logf, ...) over an array, split over threads as rune's pool
//    splits an eager op (bench::parallel, threads started per call: negligible at 16M elements);
//  * Sleef's u10 float32 functions (<= 1.0 ulp, what PyTorch's CPU kernels call), when the build
//    found sleef.h (RUNE_BENCH_SLEEF): the widest vector variant the compiler targets (AVX-512:
//    Sleef_expf16_u10, AVX2: Sleef_expf8_u10, else the scalar Sleef_expf_u10), run by a pool of
//    threads started once, so that a call on a cache-resident array times the functions rather
//    than thread starts.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/parallel.h"

#if RUNE_BENCH_SLEEF
#include <immintrin.h>
#include <sleef.h>
#endif

namespace bench {

// The functions of bench_math (bench_math.cpp declares the same enum).
enum class MathFn { Exp, Log, Sin, Cos, Tanh, Sigmoid, Gelu, Expm1, Log1p, Erf };

namespace {

// rune's nx::gelu (core/ops_elementwise.cpp): the tanh form, evaluated in this order.
constexpr float kGeluC = 0.044715f;
constexpr float kSqrt2OverPi = 0.7978845608028654f;

template <float (*Fn)(float)>
void apply(const float* __restrict x, float* __restrict y, int64_t n, int threads) {
  parallel(n, threads, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = Fn(x[i]);
  });
}

float f_exp(float v) { return expf(v); }
float f_log(float v) { return logf(v); }
float f_sin(float v) { return sinf(v); }
float f_cos(float v) { return cosf(v); }
float f_tanh(float v) { return tanhf(v); }
float f_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }
float f_gelu(float v) {
  return 0.5f * v * (1.0f + tanhf((v + kGeluC * (v * (v * v))) * kSqrt2OverPi));
}
float f_expm1(float v) { return expm1f(v); }
float f_log1p(float v) { return log1pf(v); }
float f_erf(float v) { return erff(v); }

#if RUNE_BENCH_SLEEF

// A fixed pool of threads - 1 workers plus the caller, started on first use and kept: each run
// hands out chunks of [0, n) from a shared counter (bench::parallel's split, multiples of 16).
class Pool {
 public:
  explicit Pool(int threads) : threads_(std::max(1, threads)) {
    for (int t = 0; t < threads_ - 1; ++t) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return threads_; }
  void run(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    chunks_ = threads_ == 1 ? 1 : int64_t{threads_} * 4;
    per_ = ((n + chunks_ - 1) / chunks_ + 15) / 16 * 16;
    n_ = n;
    fn_ = &fn;
    next_ = 0;
    {
      std::lock_guard<std::mutex> l(m_);
      busy_ = threads_ - 1;
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> l(m_);
    done_.wait(l, [this] { return busy_ == 0; });
  }

 private:
  void work() {
    for (int64_t c; (c = next_.fetch_add(1)) < chunks_;) {
      int64_t lo = std::min(n_, c * per_), hi = std::min(n_, (c + 1) * per_);
      if (lo < hi) (*fn_)(lo, hi);
    }
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      work();
      std::lock_guard<std::mutex> l(m_);
      if (--busy_ == 0) done_.notify_one();
    }
  }
  int threads_;
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_, done_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  int busy_ = 0;
  std::atomic<int64_t> next_{0};
  int64_t chunks_ = 1, per_ = 0, n_ = 0;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
};

Pool& pool(int threads) {
  static Pool* p = nullptr;
  if (!p || p->threads() != threads) {
    delete p;
    p = new Pool(threads);
  }
  return *p;
}

// The vector type, width and Sleef variant suffix the compiler targets.
#if defined(__AVX512F__)
using V = __m512;
constexpr int kW = 16;
inline V load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V splat(float v) { return _mm512_set1_ps(v); }
inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
inline V vmul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V vdiv(V a, V b) { return _mm512_div_ps(a, b); }
#define RUNE_SLEEF(fn) Sleef_##fn##f16_u10
constexpr const char* kVariant = "AVX-512, Sleef_<fn>f16_u10";
#elif defined(__AVX2__)
using V = __m256;
constexpr int kW = 8;
inline V load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V splat(float v) { return _mm256_set1_ps(v); }
inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
inline V vmul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V vdiv(V a, V b) { return _mm256_div_ps(a, b); }
#define RUNE_SLEEF(fn) Sleef_##fn##f8_u10
constexpr const char* kVariant = "AVX2, Sleef_<fn>f8_u10";
#else
using V = float;
constexpr int kW = 1;
inline V load(const float* p) { return *p; }
inline void store(float* p, V v) { *p = v; }
inline V splat(float v) { return v; }
inline V vadd(V a, V b) { return a + b; }
inline V vmul(V a, V b) { return a * b; }
inline V vdiv(V a, V b) { return a / b; }
#define RUNE_SLEEF(fn) Sleef_##fn##f_u10
constexpr const char* kVariant = "scalar, Sleef_<fn>f_u10";
#endif

V s_exp(V v) { return RUNE_SLEEF(exp)(v); }
V s_log(V v) { return RUNE_SLEEF(log)(v); }
V s_sin(V v) { return RUNE_SLEEF(sin)(v); }
V s_cos(V v) { return RUNE_SLEEF(cos)(v); }
V s_tanh(V v) { return RUNE_SLEEF(tanh)(v); }
// Sleef has no sigmoid: 1 / (1 + e^-x), as PyTorch's vectorised CPU sigmoid.
V s_sigmoid(V v) {
  return vdiv(splat(1.0f), vadd(splat(1.0f), RUNE_SLEEF(exp)(vmul(v, splat(-1.0f)))));
}
V s_gelu(V v) {
  V inner = vmul(vadd(v, vmul(splat(kGeluC), vmul(v, vmul(v, v)))), splat(kSqrt2OverPi));
  return vmul(vmul(splat(0.5f), v), vadd(splat(1.0f), RUNE_SLEEF(tanh)(inner)));
}
V s_expm1(V v) { return RUNE_SLEEF(expm1)(v); }
V s_log1p(V v) { return RUNE_SLEEF(log1p)(v); }
V s_erf(V v) { return RUNE_SLEEF(erf)(v); }

template <V (*Fn)(V)>
void sleef_apply(const float* __restrict x, float* __restrict y, int64_t n, int threads) {
  pool(threads).run(n, [=](int64_t lo, int64_t hi) {
    int64_t i = lo;
    for (; i + kW <= hi; i += kW) store(y + i, Fn(load(x + i)));
    if (i < hi) {  // the tail through a padded vector
      alignas(64) float in[kW] = {}, out[kW];
      std::copy(x + i, x + hi, in);
      store(out, Fn(load(in)));
      std::copy(out, out + (hi - i), y + i);
    }
  });
}

#endif  // RUNE_BENCH_SLEEF

}  // namespace

void math_ref_kernel(MathFn fn, const float* x, float* y, int64_t n, int threads) {
  switch (fn) {
    case MathFn::Exp:
      return apply<f_exp>(x, y, n, threads);
    case MathFn::Log:
      return apply<f_log>(x, y, n, threads);
    case MathFn::Sin:
      return apply<f_sin>(x, y, n, threads);
    case MathFn::Cos:
      return apply<f_cos>(x, y, n, threads);
    case MathFn::Tanh:
      return apply<f_tanh>(x, y, n, threads);
    case MathFn::Sigmoid:
      return apply<f_sigmoid>(x, y, n, threads);
    case MathFn::Gelu:
      return apply<f_gelu>(x, y, n, threads);
    case MathFn::Expm1:
      return apply<f_expm1>(x, y, n, threads);
    case MathFn::Log1p:
      return apply<f_log1p>(x, y, n, threads);
    case MathFn::Erf:
      return apply<f_erf>(x, y, n, threads);
  }
}

const char* sleef_variant() {
#if RUNE_BENCH_SLEEF
  return kVariant;
#else
  return nullptr;
#endif
}

// False (and nothing written) when the benchmarks were built without Sleef.
bool sleef_kernel(MathFn fn, const float* x, float* y, int64_t n, int threads) {
#if RUNE_BENCH_SLEEF
  switch (fn) {
    case MathFn::Exp:
      sleef_apply<s_exp>(x, y, n, threads);
      break;
    case MathFn::Log:
      sleef_apply<s_log>(x, y, n, threads);
      break;
    case MathFn::Sin:
      sleef_apply<s_sin>(x, y, n, threads);
      break;
    case MathFn::Cos:
      sleef_apply<s_cos>(x, y, n, threads);
      break;
    case MathFn::Tanh:
      sleef_apply<s_tanh>(x, y, n, threads);
      break;
    case MathFn::Sigmoid:
      sleef_apply<s_sigmoid>(x, y, n, threads);
      break;
    case MathFn::Gelu:
      sleef_apply<s_gelu>(x, y, n, threads);
      break;
    case MathFn::Expm1:
      sleef_apply<s_expm1>(x, y, n, threads);
      break;
    case MathFn::Log1p:
      sleef_apply<s_log1p>(x, y, n, threads);
      break;
    case MathFn::Erf:
      sleef_apply<s_erf>(x, y, n, threads);
      break;
  }
  return true;
#else
  (void)fn, (void)x, (void)y, (void)n, (void)threads;
  return false;
#endif
}

}  // namespace bench
