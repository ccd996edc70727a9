// Issue 5: training steps, compiled: the chapter's step (two float64 scalars, four points) and
// an MLP step 784-256-10, batch 128, float32 (softmax cross-entropy, SGD). Prints the median
// time per step; bench/compare_train.py measures torch eager, torch.compile and jax.jit on the
// same steps in the same run of bench/run.
#include <cstdio>

#include "bench/common.h"
#include "trace/rune.h"

using nx::Tensor;

namespace {

struct Mlp {
  Tensor w1, b1, w2, b2;
};

}  // namespace

RUNE_TREE(Mlp, w1, b1, w2, b2)

int main() {
  using Params = std::pair<Tensor, Tensor>;
  auto inputs = nx::create(nx::float64, {4}, {0, 1, 2, 3});
  auto targets = nx::create(nx::float64, {4}, {1, 3, 5, 7});
  auto mse = [&](const Params& p) {
    auto err = p.first * inputs + p.second - targets;
    return nx::mean(err * err);
  };
  auto step = rune::jit([&](const Params& p) {
    auto [loss, g] = rune::value_and_grad(mse, p);
    return std::make_pair(loss, Params{p.first - g.first * 0.1, p.second - g.second * 0.1});
  });
  Params p{nx::scalar(nx::float64, 0), nx::scalar(nx::float64, 0)};
  Tensor loss;
  for (int i = 0; i < 100; ++i) std::tie(loss, p) = step(p);
  std::vector<double> per;
  for (int b = 0; b < 21; ++b) {
    auto t0 = bench::Clock::now();
    for (int i = 0; i < 2000; ++i) std::tie(loss, p) = step(p);
    per.push_back(bench::elapsed_us(t0, bench::Clock::now()) / 2000);
  }
  std::printf("train_chapter_step: rune %.3f us\n", bench::median(per));

  // MLP 784-256-10, batch 128.
  auto k = nx::split(nx::key(0));
  auto k2 = nx::split(k.second);
  Tensor x = nx::rand(k.first, nx::float32, {128, 784});
  Tensor labels = nx::randint(k2.first, 0, 10, {128});
  Tensor y = nx::cast(
      nx::equal(nx::reshape(labels, {128, 1}), nx::reshape(nx::arange(10), {1, 10})), nx::float32);
  Mlp m{nx::randn(k2.second, nx::float32, {784, 256}) * 0.05, nx::zeros(nx::float32, {256}),
        nx::randn(k2.first, nx::float32, {256, 10}) * 0.05, nx::zeros(nx::float32, {10})};
  auto loss_fn = [&](const Mlp& q) {
    Tensor h = nx::relu(nx::matmul(x, q.w1) + q.b1);
    Tensor logits = nx::matmul(h, q.w2) + q.b2;
    return nx::mean(-nx::sum(y * nx::log_softmax(logits, 1), {1}));
  };
  auto mlp_step = rune::jit([&](const Mlp& q) {
    auto [l, g] = rune::value_and_grad(loss_fn, q);
    return std::make_pair(
        l, Mlp{q.w1 - g.w1 * 0.1, q.b1 - g.b1 * 0.1, q.w2 - g.w2 * 0.1, q.b2 - g.b2 * 0.1});
  });
  for (int i = 0; i < 3; ++i) std::tie(loss, m) = mlp_step(m);
  std::vector<double> t;
  for (int i = 0; i < 15; ++i) {
    auto t0 = bench::Clock::now();
    std::tie(loss, m) = mlp_step(m);
    (void)nx::item<float>(loss);
    t.push_back(bench::elapsed_us(t0, bench::Clock::now()));
  }
  std::printf("train_mlp_step: rune %.1f us  (loss %.4f)\n", bench::median(t),
              nx::item<float>(loss));
  std::printf(
      "{\"bench\":\"train\",\"results\":[{\"name\":\"train_chapter_step\",\"rune_us\":%.3f},{"
      "\"name\":\"train_mlp_step\",\"rune_us\":%.1f}]}\n",
      bench::median(per), bench::median(t));
}
