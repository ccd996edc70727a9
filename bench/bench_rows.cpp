// Issue 9: the machine's limits and the bandwidth-bound workloads, compiled with rune::jit,
// each against a hand-written 2-thread loop (reference.cpp: -O3 -march=native, no fast-math)
// timed in turn with it (medians_us):
//   machine_*: STREAM copy and triad bandwidth (GB/s, bytes read + written, as STREAM counts)
//              and the FMA peak (GFLOP/s), the limits bench/run's table divides by;
//   jit_affine_16M_f32 / _f64: y = x*2+1 on 16M elements (goal within 1.25x of the loop);
//   sum_16M / mean_16M: a full reduction of 16M float32 (goal within 1.2x of the loop);
//   softmax_4096x1024 / layernorm_4096x1024: over the rows of a float32 matrix.
// Every rune result is checked against the loop's and the largest difference printed.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <string>

#include "bench/common.h"
#include "bench/reference.h"
#include "core/interop.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;

constexpr int64_t kBig = int64_t{1} << 24;     // 16M elements
constexpr int64_t kRows = 4096, kCols = 1024;  // 16 MiB float32 matrix
constexpr double kEps = 1e-5;

// A 64-byte aligned array of T filled with uniform values in [lo, hi) (fixed seed).
template <class T>
struct Aligned {
  explicit Aligned(int64_t n, double lo = 0, double hi = 0) : n(n) {
    p.reset(static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64)));
    std::mt19937 gen(42);
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < n; ++i) p[i] = lo == hi ? T(lo) : T(d(gen));  // touches every page
  }
  T* data() const { return p.get(); }
  struct Free {
    void operator()(T* q) const { std::free(q); }
  };
  int64_t n;
  std::unique_ptr<T[], Free> p;
};

template <class T>
double max_abs_diff(const Tensor& t, const T* ref, int64_t n) {
  auto v = nx::to_vector<T>(t);
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(v[i]) - double(ref[i])));
  return m;
}

void note_diff(bench::Report& r, const std::string& name, double diff) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "max |rune - loop| = %.3g", diff);
  r.note(name + "_check", buf);
}

void note_value(bench::Report& r, const std::string& name, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  r.note(name, buf);
}

// STREAM copy and triad on 16M float32 arrays (64 MiB each, far beyond any cache), and the FMA
// peak; medians of several runs, like every other number here.
void machine(bench::Report& r, int threads) {
  Aligned<float> a(kBig, 1.0), b(kBig, 2.0), c(kBig, 0.5);
  auto [copy_us, triad_us] = bench::medians_us(
      15, 2, [&] { bench::copy_kernel(b.data(), a.data(), kBig, threads); },
      [&] { bench::triad_kernel(b.data(), c.data(), a.data(), 3.0f, kBig, threads); });
  note_value(r, "machine_copy_GBps", 2.0 * 4 * kBig / copy_us / 1e3);
  note_value(r, "machine_triad_GBps", 3.0 * 4 * kBig / triad_us / 1e3);
  std::vector<double> peaks;
  for (int i = 0; i < 7; ++i) peaks.push_back(bench::fma_peak_gflops(threads, 40));
  note_value(r, "machine_fma_peak_GFLOPs", bench::median(peaks));
  note_value(r, "machine_threads", threads);
}

template <class T>
void affine(bench::Report& r, int threads, nx::DType dt, const std::string& name) {
  Aligned<T> in(kBig, -1.0, 1.0), out(kBig);
  auto loop = [&] { bench::affine_kernel(in.data(), out.data(), kBig, threads); };
  try {
    Tensor x = nx::from_bytes(dt, {kBig}, in.data());
    auto f = rune::jit([](const Tensor& t) { return t * 2.0 + 1.0; });
    Tensor y;
    // The result is dropped before each call, as in a loop, so rune can recycle its buffer.
    auto [rune_us, ref_us] = bench::medians_us(
        21, 3,
        [&] {
          y = Tensor();
          y = f(x);
        },
        loop);
    r.add(name, rune_us, "loop", ref_us, 1.25);
    note_diff(r, name, max_abs_diff(y, out.data(), kBig));
  } catch (const std::exception& e) {
    r.skip(name, e.what(), "loop", bench::medians_us(21, 3, loop)[0], "rune/ref <= 1.25x");
  }
}

// rune reads the loop's own array (nx::from_blob, no copy). With a copy, the two alternate over
// 128 MiB instead of 64, which on this machine (a VM's share of the L3) halved both: sum_16M
// read 5.7 ms rune / 5.6 ms loop on two buffers against 2.6 / 2.7 ms on one, same process
// (torch's row reads its one tensor). The pages are touched before timing (Aligned's fill).
void reductions(bench::Report& r, int threads) {
  Aligned<float> in(kBig, 0.0, 1.0);
  float ref_sum = 0;
  for (bool mean : {false, true}) {
    std::string name = mean ? "mean_16M" : "sum_16M";
    auto loop = [&, mean] {
      ref_sum = bench::sum_kernel(in.data(), kBig, threads);
      if (mean) ref_sum /= float(kBig);
    };
    try {
      Tensor x = nx::from_blob(in.data(), nx::float32, {kBig});
      auto f = rune::jit([mean](const Tensor& t) { return mean ? nx::mean(t) : nx::sum(t); });
      Tensor y;
      auto [rune_us, ref_us] = bench::medians_us(
          21, 3, [&] { y = f(x); }, loop);
      r.add(name, rune_us, "loop", ref_us, 1.2);
      // Float32 sums of 16M values associate differently: agreement to a few ulps of the sum.
      char buf[96];
      std::snprintf(buf, sizeof buf, "rune %.8g, loop %.8g", nx::item<float>(y), ref_sum);
      r.note(name + "_check", buf);
    } catch (const std::exception& e) {
      r.skip(name, e.what(), "loop", bench::medians_us(21, 3, loop)[0], "rune/ref <= 1.2x");
    }
  }
}

void rows(bench::Report& r, int threads) {
  const int64_t n = kRows * kCols;
  Aligned<float> in(n, -4.0, 4.0), out(n), g(kCols, 0.5, 1.5), b(kCols, -0.5, 0.5);
  auto softmax_loop = [&] {
    bench::softmax_rows_kernel(in.data(), out.data(), kRows, kCols, threads);
  };
  auto ln_loop = [&] {
    bench::layernorm_rows_kernel(in.data(), g.data(), b.data(), out.data(), kRows, kCols,
                                 float(kEps), threads);
  };
  std::string name = "softmax_4096x1024";
  try {
    Tensor x = nx::from_bytes(nx::float32, {kRows, kCols}, in.data());
    auto f = rune::jit([](const Tensor& t) { return nx::softmax(t, 1); });
    Tensor y;
    auto [rune_us, ref_us] = bench::medians_us(
        15, 2,
        [&] {
          y = Tensor();
          y = f(x);
        },
        softmax_loop);
    r.add(name, rune_us, "loop", ref_us);
    note_diff(r, name, max_abs_diff(y, out.data(), n));
  } catch (const std::exception& e) {
    r.skip(name, e.what(), "loop", bench::medians_us(15, 2, softmax_loop)[0]);
  }
  name = "layernorm_4096x1024";
  try {
    Tensor x = nx::from_bytes(nx::float32, {kRows, kCols}, in.data());
    Tensor gt = nx::from_bytes(nx::float32, {kCols}, g.data());
    Tensor bt = nx::from_bytes(nx::float32, {kCols}, b.data());
    auto f = rune::jit([](const Tensor& t, const Tensor& gain, const Tensor& bias) {
      Tensor d = t - nx::mean(t, {1}, true);
      Tensor var = nx::mean(d * d, {1}, true);
      return d / nx::sqrt(var + kEps) * gain + bias;
    });
    Tensor y;
    auto [rune_us, ref_us] = bench::medians_us(
        15, 2,
        [&] {
          y = Tensor();
          y = f(x, gt, bt);
        },
        ln_loop);
    r.add(name, rune_us, "loop", ref_us);
    note_diff(r, name, max_abs_diff(y, out.data(), n));
  } catch (const std::exception& e) {
    r.skip(name, e.what(), "loop", bench::medians_us(15, 2, ln_loop)[0]);
  }
}

}  // namespace

int main() {
  bench::Report r("rows");
  int threads = bench::reference_threads();
  machine(r, threads);
  affine<float>(r, threads, nx::float32, "jit_affine_16M_f32");
  affine<double>(r, threads, nx::float64, "jit_affine_16M_f64");
  reductions(r, threads);
  rows(r, threads);
  r.print_json();
}
