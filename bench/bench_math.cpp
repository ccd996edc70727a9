// Transcendental throughput, float32.
//  * exp_16M, log_16M, sin_16M, tanh_16M: one eager rune op on 16M elements against the same loop
//    calling glibc's expf / logf / sinf / tanhf (bench_math_ref.cpp: -O3 -march=native, no
//    fast-math, as many threads as rune's pool). Goal: rune at least as fast (ratio <= 1).
//  * <fn>_1M: the per-element time against Sleef's u10 functions (<= 1.0 ulp; PyTorch's CPU
//    kernels call them), the widest vector variant the compiler targets, on 1M elements (4 MiB in,
//    4 MiB out: in the last-level cache, so the functions are timed, not the memory), both split
//    over the same number of threads. rune's function is rune::jit of the op, one fused kernel
//    (sigmoid and gelu are compositions: eagerly they would be several kernels). Sleef has no
//    sigmoid: the reference is 1 / (1 + Sleef_expf_u10(-x)), as PyTorch's vectorised sigmoid;
//    gelu is rune's tanh form (core/ops_elementwise.cpp) around Sleef_tanhf_u10. Goal (issue 43):
//    exp, log, tanh, sigmoid and gelu within 1.25x of Sleef. Without sleef.h at build time these
//    rows are skipped with a note.
// rune's functions are its own decompositions (codegen/decompose_math.cpp) within their
// documented ulp bounds (docs/numerics.md); the notes give how far apart the two results are.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "bench/common.h"
#include "bench/reference.h"
#include "trace/rune.h"

namespace bench {
enum class MathFn { Exp, Log, Sin, Cos, Tanh, Sigmoid, Gelu, Expm1, Log1p, Erf };
void math_ref_kernel(MathFn fn, const float* x, float* y, int64_t n, int threads);
bool sleef_kernel(MathFn fn, const float* x, float* y, int64_t n, int threads);
const char* sleef_variant();
}  // namespace bench

namespace {

using bench::MathFn;

constexpr int64_t kBig = int64_t{1} << 24;     // 16M elements, 64 MiB per float32 array
constexpr int64_t kCached = int64_t{1} << 20;  // 1M elements, 4 MiB per float32 array

struct Workload {
  const char* name;
  const char* ref;
  MathFn fn;
  float lo, hi;  // inputs uniform in [lo, hi)
  nx::Tensor (*op)(const nx::Tensor&);
};

const Workload kGlibc[] = {
    {"exp_16M", "expf", MathFn::Exp, -10.0f, 10.0f, nx::exp},
    {"log_16M", "logf", MathFn::Log, 1e-3f, 1e3f, nx::log},
    {"sin_16M", "sinf", MathFn::Sin, -100.0f, 100.0f, nx::sin},
    {"tanh_16M", "tanhf", MathFn::Tanh, -5.0f, 5.0f, nx::tanh},
};

struct SleefWorkload {
  Workload w;
  double goal;  // rune/Sleef; 0: reported without a goal
};

const SleefWorkload kSleef[] = {
    {{"exp_1M", "Sleef_expf_u10", MathFn::Exp, -10.0f, 10.0f, nx::exp}, 1.25},
    {{"log_1M", "Sleef_logf_u10", MathFn::Log, 1e-3f, 1e3f, nx::log}, 1.25},
    {{"tanh_1M", "Sleef_tanhf_u10", MathFn::Tanh, -5.0f, 5.0f, nx::tanh}, 1.25},
    {{"sigmoid_1M", "1/(1+Sleef_expf_u10(-x))", MathFn::Sigmoid, -10.0f, 10.0f, nx::sigmoid}, 1.25},
    {{"gelu_1M", "gelu(Sleef_tanhf_u10)", MathFn::Gelu, -5.0f, 5.0f, nx::gelu}, 1.25},
    {{"expm1_1M", "Sleef_expm1f_u10", MathFn::Expm1, -5.0f, 5.0f, nx::expm1}, 0},
    {{"log1p_1M", "Sleef_log1pf_u10", MathFn::Log1p, -0.5f, 10.0f, nx::log1p}, 0},
    {{"erf_1M", "Sleef_erff_u10", MathFn::Erf, -3.0f, 3.0f, nx::erf}, 0},
    {{"sin_1M", "Sleef_sinf_u10", MathFn::Sin, -100.0f, 100.0f, nx::sin}, 0},
    {{"cos_1M", "Sleef_cosf_u10", MathFn::Cos, -100.0f, 100.0f, nx::cos}, 0},
};

// Largest distance in float32 ulps between two arrays (NaN only against NaN).
int64_t max_ulp_apart(const std::vector<float>& a, const float* b, int64_t n) {
  auto ord = [](float v) {
    int32_t i;
    std::memcpy(&i, &v, 4);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return -1;
      continue;
    }
    m = std::max(m, std::abs(ord(a[i]) - ord(b[i])));
  }
  return m;
}

void fill(bench::AlignedFloats& x, const Workload& w) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> d(w.lo, w.hi);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = d(gen);
}

void against_glibc(bench::Report& r, const Workload& w, int threads) {
  bench::AlignedFloats x(kBig), y(kBig);
  fill(x, w);
  auto ref = [&] { bench::math_ref_kernel(w.fn, x.data(), y.data(), kBig, threads); };
  try {
    nx::Tensor t = nx::from_bytes(nx::float32, {kBig}, x.data());
    nx::Tensor out;
    auto [rune_us, ref_us] = bench::medians_us(
        15, 2, [&] { out = w.op(t); }, ref);
    r.add(w.name, rune_us, w.ref, ref_us, 1.0);
    std::vector<float> got = nx::to_vector<float>(out);
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "inputs uniform in [%g, %g); rune and %s at most %lld ulp apart; %.0f Melem/s",
                  w.lo, w.hi, w.ref, static_cast<long long>(max_ulp_apart(got, y.data(), kBig)),
                  kBig / rune_us);
    r.note(std::string(w.name) + "_check", buf);
  } catch (const std::exception& e) {
    r.skip(w.name, e.what(), w.ref, bench::medians_us(15, 2, ref)[0], "rune/ref <= 1x");
  }
}

void against_sleef(bench::Report& r, const SleefWorkload& s, int threads) {
  const Workload& w = s.w;
  char goal[32] = "";
  if (s.goal > 0) std::snprintf(goal, sizeof goal, "rune/ref <= %gx", s.goal);
  bench::AlignedFloats x(kCached), y(kCached);
  fill(x, w);
  auto ref = [&] { bench::sleef_kernel(w.fn, x.data(), y.data(), kCached, threads); };
  try {
    nx::Tensor t = nx::from_bytes(nx::float32, {kCached}, x.data());
    auto f = rune::jit(w.op);
    nx::Tensor out;
    auto [rune_us, ref_us] = bench::medians_us(
        51, 3, [&] { out = f(t); }, ref);
    r.add(w.name, rune_us, w.ref, ref_us, s.goal);
    std::vector<float> got = nx::to_vector<float>(out);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "inputs uniform in [%g, %g); rune and Sleef at most %lld ulp apart; per element "
                  "per thread: rune %.3f ns, Sleef %.3f ns",
                  w.lo, w.hi, static_cast<long long>(max_ulp_apart(got, y.data(), kCached)),
                  rune_us * 1e3 * threads / kCached, ref_us * 1e3 * threads / kCached);
    r.note(std::string(w.name) + "_check", buf);
  } catch (const std::exception& e) {
    r.skip(w.name, e.what(), w.ref, bench::medians_us(51, 3, ref)[0], goal);
  }
}

}  // namespace

int main() {
  bench::Report r("math");
  int threads = bench::reference_threads();
  for (const auto& w : kGlibc) against_glibc(r, w, threads);
  if (const char* v = bench::sleef_variant()) {
    r.note("sleef", std::string(v) + " (the widest the reference's -march=native targets)");
    for (const auto& s : kSleef) against_sleef(r, s, threads);
  } else {
    r.note("sleef",
           "skipped: the benchmarks were built without sleef.h (Debian: apt-get install "
           "libsleef-dev, then configure again); no <fn>_1M rows");
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d", threads);
  r.note("reference_threads", buf);
  r.print_json();
}
