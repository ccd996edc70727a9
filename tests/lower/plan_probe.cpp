// A child process for tests/lower/test_plans.cpp: computes a fixed set of kernels on the default
// device (CPU, or CUDA:0 under the fake driver) and prints one line per result, "name bits-hash".
// The parent runs it under several RUNE_PLAN values: the lines must not change.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "trace/rune.h"

namespace {

// The values' bits, read as float64 (exact for every dtype and value used here; keeps -0).
uint64_t hash_bits(const nx::Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  for (double v : nx::to_array(t)) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int k = 0; k < 8; ++k) h = (h ^ ((bits >> (8 * k)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

void show(const char* name, const nx::Tensor& t) {
  std::printf("%s %016llx\n", name, static_cast<unsigned long long>(hash_bits(t)));
}

// f(x) compiled by rune::jit: its kernels are scheduled and planned for x's shape. (The same op
// run eagerly on the host is a sized kernel, whose plan is fixed: core/eager_sized.h.)
template <class F>
nx::Tensor compiled(F f, const nx::Tensor& x) {
  return rune::jit(f)(x);
}

}  // namespace

int main() {
  nx::Key key = nx::key(7);
  auto [k1, k2] = nx::split(key);
  nx::Tensor a = nx::randn(k1, nx::float32, {37, 301});
  nx::Tensor b = nx::randn(k2, nx::float32, {301, 40});
  nx::Tensor big = nx::randn(nx::key(3), nx::float32, {2, 70001});  // two blocks per output
  // Four full blocks and a partial one per output: the host interleaves 2 or 4 blocks per work
  // item (plan part blocks) where they are full, the rest one by one.
  nx::Tensor many = nx::randn(nx::key(4), nx::float32, {2, 4 * 65536 + 17});
  nx::Tensor h = nx::cast(a, nx::float16);
  nx::Tensor i = nx::randint(nx::key(5), -1000, 1000, {9, 123});
  // Reductions: rows, columns (strided), every element, several blocks, 16-bit, integers, bool.
  show("sum_rows", compiled([](const nx::Tensor& x) { return nx::sum(x, {1}); }, a));
  show("sum_cols", compiled([](const nx::Tensor& x) { return nx::sum(x, {0}); }, a));
  show("max_rows", compiled([](const nx::Tensor& x) { return nx::max(x, {1}); }, a));
  show("sum_all", compiled([](const nx::Tensor& x) { return nx::sum(x); }, a));
  show("prod_rows", compiled([](const nx::Tensor& x) { return nx::prod(x * 0.01 + 1.0, {1}); }, a));
  show("sum_blocks", nx::sum(big, {1}));
  show("sum_many_blocks", nx::sum(many, {1}));
  show("sum_many_strided", nx::sum(nx::transpose(many), {0}));
  // Columns of a channels-last tensor over two blocks: the host groups 16 adjacent outputs per
  // block (Reduction's grouped_blocks_host).
  show("sum_cols_blocks", nx::sum(nx::randn(nx::key(6), nx::float32, {70001, 16}), {0}));
  show("max_many_blocks", nx::max(many * many, {1}));
  show("mean_many_half", nx::mean(nx::cast(many, nx::float16), {1}));
  show("mean_half", compiled([](const nx::Tensor& x) { return nx::mean(x, {1}); }, h));
  show("sum_int", compiled([](const nx::Tensor& x) { return nx::sum(x, {1}); }, i));
  show("any_rows",
       compiled([](const nx::Tensor& x) { return nx::sum(nx::cast(x > 1.5, nx::bool_), {1}); }, a));
  show("softmax", nx::softmax(a, -1));
  // A matrix product as a reduction over a broadcast product (the host's grouped outputs), the
  // product primitive itself, and elementwise kernels (contiguous, broadcast, strided).
  show("dot_as_sum", rune::jit([](const nx::Tensor& x, const nx::Tensor& y) {
         return nx::sum(nx::reshape(x, {37, 301, 1}) * nx::reshape(y, {1, 301, 40}), {1});
       })(a, b));
  show("matmul", nx::matmul(a, b));
  // At least 64 x 64 outputs: the GPU's tiled plan by default, one thread per output under a
  // forced plan without `tiles` (the same bits).
  show("matmul_tiled",
       nx::matmul(nx::concatenate({a, a * -2.0, a}, 0), nx::concatenate({b, b * 0.5}, 1)));
  show("elementwise", nx::tanh(a) * a + 1.0);
  show("broadcast", compiled([](const nx::Tensor& x) { return x + nx::sum(x, {0}, true); }, a));
  show("strided", compiled([](const nx::Tensor& x) { return nx::transpose(x) * 2.0; }, a));
  show("argmax", compiled([](const nx::Tensor& x) { return nx::argmax(x, 1); }, a));
  show("cumsum", nx::cumsum(a, -1));
  show("sort", nx::sort(a, -1));
  // Row kernels (codegen/kernel.h; compiled, where the scheduler fuses): softmax, log_softmax,
  // logsumexp, layernorm and cross-entropy over 5 rows of 1, 7, 33, 1023 and 65537 elements (the
  // last longer than one reduction block: separate reductions), with -inf, +inf and NaN rows.
  // On a GPU, rows of 16 or more are 8 threads each (plan rows:lanes): 33 and 1023 give lanes
  // unequal counts, and 5 rows (13 below) leave the last warp of 4 rows partial.
  // tests/lower/test_row_kernels.cpp compares these lines with RUNE_ROW_KERNELS=0.
  auto softmax = rune::jit([](const nx::Tensor& x) { return nx::softmax(x, -1); });
  auto log_softmax = rune::jit([](const nx::Tensor& x) { return nx::log_softmax(x, -1); });
  auto logsumexp = rune::jit([](const nx::Tensor& x) { return nx::logsumexp(x, {1}); });
  auto layer_norm = rune::jit([](const nx::Tensor& x, const nx::Tensor& g, const nx::Tensor& b) {
    return nx::nn::layer_norm(x, g, b);
  });
  auto cross_entropy = rune::jit(
      [](const nx::Tensor& x, const nx::Tensor& l) { return nx::nn::cross_entropy(x, l); });
  auto cross_entropy_smooth = rune::jit(
      [](const nx::Tensor& x, const nx::Tensor& l) { return nx::nn::cross_entropy(x, l, 0.1); });
  auto cross_entropy_grad = rune::jit([](const nx::Tensor& x, const nx::Tensor& l) {
    return rune::grad([&](const nx::Tensor& z) { return nx::nn::cross_entropy(z, l); })(x);
  });
  // The inputs are made on the host (no kernels): every plan compiles the programs above, not
  // the ops that would make their inputs (plans forced with RUNE_PLAN reach every kernel).
  std::mt19937_64 gen(10);
  auto normal = [&](const nx::Shape& shape, double scale) {
    std::normal_distribution<double> d(0.0, scale);
    std::vector<double> v(static_cast<size_t>(ir::numel(shape)));
    for (double& e : v) e = static_cast<float>(d(gen));
    return v;
  };
  // PLAN_PROBE_ROW_SIZES (e.g. "7,1023"): only these row lengths. test_plans runs the probe
  // under 8 plans, each compiling every kernel again; rows of 65537 are separate reductions
  // there (like sum_many_blocks above), so it leaves them to test_row_kernels, which runs all.
  std::vector<int64_t> sizes = {1, 7, 33, 1023, 65537};
  if (const char* e = std::getenv("PLAN_PROBE_ROW_SIZES")) {
    sizes.clear();
    for (const char* p = e; *p;) {
      char* end = nullptr;
      const long long n = std::strtoll(p, &end, 10);
      if (end == p) return 2;  // not a number
      sizes.push_back(n);
      p = *end == ',' ? end + 1 : end;
    }
  }
  for (int64_t n : sizes) {
    const std::string at = "_" + std::to_string(n);
    // Row 1 holds -inf, row 2 +inf, row 3 NaN (at column n / 2).
    std::vector<double> xv = normal({5, n}, 6.0);
    xv[static_cast<size_t>(1 * n + n / 2)] = -INFINITY;
    xv[static_cast<size_t>(2 * n + n / 2)] = INFINITY;
    xv[static_cast<size_t>(3 * n + n / 2)] = NAN;
    nx::Tensor x = nx::create(nx::float32, {5, n}, xv);
    nx::Tensor g = nx::create(nx::float32, {n}, normal({n}, 1.0));
    nx::Tensor b = nx::create(nx::float32, {n}, normal({n}, 1.0));
    std::vector<double> lv(5);
    for (double& l : lv) l = static_cast<double>(gen() % static_cast<uint64_t>(n));
    nx::Tensor labels = nx::create(nx::int64, {5}, lv);
    show(("row_softmax" + at).c_str(), softmax(x));
    show(("row_log_softmax" + at).c_str(), log_softmax(x));
    show(("row_logsumexp" + at).c_str(), logsumexp(x));
    show(("row_layer_norm" + at).c_str(), layer_norm(x, g, b));
    show(("row_softmax_half" + at).c_str(), softmax(nx::cast(x, nx::float16)));
    // Donated: the row kernel may write its rows over its input (codegen/inplace.cpp); the bits
    // must be those of row_softmax and row_layer_norm (test_row_kernels.cpp checks).
    show(("row_softmax_donated" + at).c_str(), softmax(nx::donate(x * 1.0)));
    show(("row_layer_norm_donated" + at).c_str(), layer_norm(nx::donate(x * 1.0), g, b));
    nx::Tensor finite = nx::create(nx::float32, {5, n}, normal({5, n}, 1.0));
    show(("row_cross_entropy" + at).c_str(), cross_entropy(finite, labels));
    show(("row_cross_entropy_smooth" + at).c_str(), cross_entropy_smooth(finite, labels));
    show(("row_cross_entropy_grad" + at).c_str(), cross_entropy_grad(finite, labels));
  }
  // 13 rows (3 warps of 4 rows and one row alone on a GPU) of 40 elements.
  nx::Tensor thirteen = nx::create(nx::float32, {13, 40}, normal({13, 40}, 3.0));
  show("row_softmax_13x40", softmax(thirteen));
  show("row_layer_norm_13x40",
       layer_norm(thirteen, nx::create(nx::float32, {40}, normal({40}, 1.0)),
                  nx::create(nx::float32, {40}, normal({40}, 1.0))));
  return 0;
}
