// Transcendental throughput: one eager rune op (exp, log, sin, tanh) on 16M float32 against the
// same loop calling glibc's expf / logf / sinf / tanhf (bench_math_ref.cpp: -O3 -march=native, no
// fast-math, as many threads as rune's pool). Goal: rune at least as fast (ratio <= 1). rune's
// functions are its own decompositions (codegen/decompose_math.cpp), accurate to < 1 ulp; glibc's
// float functions are correctly rounded or nearly so, so the notes also give how far apart the two
// results are.
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
void math_ref_kernel(int which, const float* x, float* y, int64_t n, int threads);
}

namespace {

constexpr int64_t kBig = int64_t{1} << 24;  // 16M elements, 64 MiB per float32 array

struct Workload {
  const char* name;
  const char* ref;
  int which;
  float lo, hi;  // inputs uniform in [lo, hi)
  nx::Tensor (*op)(const nx::Tensor&);
};

const Workload kWorkloads[] = {
    {"exp_16M", "expf", 0, -10.0f, 10.0f, nx::exp},
    {"log_16M", "logf", 1, 1e-3f, 1e3f, nx::log},
    {"sin_16M", "sinf", 2, -100.0f, 100.0f, nx::sin},
    {"tanh_16M", "tanhf", 3, -5.0f, 5.0f, nx::tanh},
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

void one(bench::Report& r, const Workload& w, int threads) {
  bench::AlignedFloats x(kBig), y(kBig);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> d(w.lo, w.hi);
  for (int64_t i = 0; i < kBig; ++i) x[i] = d(gen);
  auto ref = [&] { bench::math_ref_kernel(w.which, x.data(), y.data(), kBig, threads); };
  try {
    nx::Tensor t = nx::create(nx::float32, {kBig}, std::vector<double>(x.data(), x.data() + kBig));
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

}  // namespace

int main() {
  bench::Report r("math");
  int threads = bench::reference_threads();
  for (const auto& w : kWorkloads) one(r, w, threads);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d", threads);
  r.note("reference_threads", buf);
  r.print_json();
}
