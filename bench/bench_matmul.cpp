// Issue 9: matrix products. rune's compiled matmul (codegen/cpu/gemm.cpp) against every BLAS
// that loads (OpenBLAS, BLIS, oneDNN), in the same run, 2 threads: 256^2 and 1024^2 float32,
// and matmul + bias + relu (rune fuses nothing there yet: the epilogue is one elementwise
// kernel; the reference is the best BLAS plus a hand-written epilogue loop).
// Goal: 1024^2 at least 90% of the best BLAS measured (rune/best <= 1.11).
#include <cmath>
#include <cstring>

#include "bench/blas.h"
#include "bench/common.h"
#include "codegen/cpu/gemm.h"
#include "runtime/thread_pool.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;

double gflops(int64_t n, double us) { return 2.0 * n * n * n / us / 1e3; }

// rune's time, the best BLAS time and its name, for C = A B at n x n.
void square(bench::Report& r, const std::vector<bench::Sgemm>& libs, int64_t n, int reps,
            double goal) {
  std::string name = "matmul_" + std::to_string(n);
  Tensor a = nx::randn(nx::key(1), nx::float32, {n, n});
  Tensor b = nx::randn(nx::key(2), nx::float32, {n, n});
  auto f = rune::jit([](const Tensor& x, const Tensor& y) { return nx::matmul(x, y); });
  Tensor c;
  auto rune_run = [&] { c = f(a, b); };
  auto av = nx::to_vector<float>(a), bv = nx::to_vector<float>(b);
  bench::AlignedFloats A(n * n), B(n * n), C(n * n);
  std::memcpy(A.data(), av.data(), av.size() * 4);
  std::memcpy(B.data(), bv.data(), bv.size() * 4);
  double rune_us = bench::medians_us(reps, 3, rune_run)[0];
  std::printf("%s: rune %.1f GFLOP/s\n", name.c_str(), gflops(n, rune_us));
  double best = 0;
  std::string best_name;
  for (const auto& l : libs) {
    double us =
        bench::medians_us(reps, 3, [&] { l.run(l, n, n, n, A.data(), B.data(), C.data()); })[0];
    std::printf("%s: %s %.3f us, %.1f GFLOP/s\n", name.c_str(), l.name.c_str(), us, gflops(n, us));
    // Agreement with rune (BLAS associates differently: agreement to float32 rounding only).
    auto cv = nx::to_vector<float>(c);
    double err = 0, scale = 0;
    for (int64_t i = 0; i < n * n; ++i) {
      err = std::max(err, std::fabs(double(cv[i]) - C[i]));
      scale = std::max(scale, std::fabs(double(C[i])));
    }
    std::printf("%s: max |rune - %s| = %.3g (max |c| %.3g)\n", name.c_str(), l.name.c_str(), err,
                scale);
    if (best == 0 || us < best) best = us, best_name = l.name;
  }
  if (best > 0)
    r.add(name, rune_us, best_name, best, goal);
  else
    r.skip(name, "no BLAS loaded; rune " + std::to_string(rune_us) + " us");
}

void bias_relu(bench::Report& r, const std::vector<bench::Sgemm>& libs, int64_t n) {
  std::string name = "matmul_bias_relu_" + std::to_string(n);
  Tensor a = nx::randn(nx::key(3), nx::float32, {n, n});
  Tensor w = nx::randn(nx::key(4), nx::float32, {n, n});
  Tensor bias = nx::randn(nx::key(5), nx::float32, {n});
  auto f = rune::jit([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return nx::relu(nx::matmul(x, w) + b);
  });
  Tensor c;
  double rune_us = bench::medians_us(15, 3, [&] { c = f(a, w, bias); })[0];
  if (libs.empty()) return r.skip(name, "no BLAS loaded");
  const auto& l = libs.front();  // the caller puts the fastest first
  bench::AlignedFloats A(n * n), B(n * n), C(n * n), bv(n);
  auto av = nx::to_vector<float>(a), wv = nx::to_vector<float>(w), biv = nx::to_vector<float>(bias);
  std::memcpy(A.data(), av.data(), av.size() * 4);
  std::memcpy(B.data(), wv.data(), wv.size() * 4);
  std::memcpy(bv.data(), biv.data(), biv.size() * 4);
  auto ref = [&] {
    l.run(l, n, n, n, A.data(), B.data(), C.data());
    runtime::parallel_for(n, n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t j = 0; j < n; ++j) C[i * n + j] = std::max(C[i * n + j] + bv[j], 0.0f);
    });
  };
  double ref_us = bench::medians_us(15, 3, ref)[0];
  r.add(name, rune_us, l.name + "+loop", ref_us);
}

}  // namespace

int main() {
  bench::Report r("matmul");
  int threads = runtime::host_threads();
  std::vector<std::string> missing;
  auto libs = bench::load_sgemms(threads, &missing);
  for (const auto& m : missing) r.note("blas_missing", m);
  std::printf("threads %d, rune micro-kernel: %s, OPENBLAS_CORETYPE=%s\n", threads,
              codegen::cpu::gemm_kernel_name(), std::getenv("OPENBLAS_CORETYPE"));
  square(r, libs, 256, 61, 0);
  square(r, libs, 1024, 15, 1.0 / 0.9);
  // The fastest library at 1024^2 first, for the epilogue comparison.
  if (libs.size() > 1) {
    std::vector<double> t;
    bench::AlignedFloats A(1024 * 1024, 1), B(1024 * 1024, 1), C(1024 * 1024);
    for (const auto& l : libs)
      t.push_back(bench::medians_us(
          5, 1, [&] { l.run(l, 1024, 1024, 1024, A.data(), B.data(), C.data()); })[0]);
    size_t best = std::min_element(t.begin(), t.end()) - t.begin();
    std::swap(libs[0], libs[best]);
  }
  bias_relu(r, libs, 1024);
  r.print_json();
}
