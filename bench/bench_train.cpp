// Issue 5: the chapter's training step, compiled (two float64 scalars, four points), and issue
// 22: the README demo's step (samples/mlp.cpp: a 2-64-2 tanh MLP, softmax cross-entropy, SGD, on
// 400 points): the median time per step. bench/compare_train.py measures the other frameworks on
// the same steps in the same run of bench/run; the 784-256-10 MLP step is bench_mlp.cpp's, next
// to its hand-written reference.
#include <cmath>
#include <cstdio>
#include <vector>

#include "bench/common.h"
#include "trace/rune.h"

using nx::Tensor;

// The README demo's model (samples/mlp.cpp).
struct Mlp {
  Tensor w1, b1, w2, b2;
};
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
  // Goal: under 1 us per step (the compiled call's fixed cost dominates at this size).
  bench::Report r("train");
  r.time("train_chapter_step", bench::median(per), 1.0);
  char buf[96];
  std::snprintf(buf, sizeof buf, "w = %.6g, b = %.6g, loss = %.3g", nx::item<double>(p.first),
                nx::item<double>(p.second), nx::item<double>(loss));
  r.note("train_chapter_step_check", buf);

  // The README demo's step. The points are random (the demo's spirals only change the values),
  // labels alternate between the two classes.
  auto keys = nx::split(nx::key(7));
  Tensor x = nx::randn(keys.first, nx::float32, {400, 2});
  std::vector<double> labels(400);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<double>(i % 2);
  Tensor y = nx::one_hot(nx::create(nx::int64, {400}, labels), 2);
  auto k2 = nx::split(keys.second);
  Mlp m{nx::randn(k2.first, nx::float32, {2, 64}) * std::sqrt(0.5), nx::zeros(nx::float32, {64}),
        nx::randn(k2.second, nx::float32, {64, 2}) * std::sqrt(1.0 / 64),
        nx::zeros(nx::float32, {2})};
  auto xent = [&](const Mlp& q) {
    Tensor logits = nx::matmul(nx::tanh(nx::matmul(x, q.w1) + q.b1), q.w2) + q.b2;
    return nx::mean(-nx::sum(y * nx::log_softmax(logits, 1), {1}));
  };
  auto mlp_step = rune::jit([&](const Mlp& q) {
    auto [l, g] = rune::value_and_grad(xent, q);
    return std::make_pair(l, Mlp{q.w1 - g.w1, q.b1 - g.b1, q.w2 - g.w2, q.b2 - g.b2});
  });
  Tensor mlp_loss, first_loss;
  for (int i = 0; i < 50; ++i) {
    std::tie(mlp_loss, m) = mlp_step(m);
    if (i == 0) first_loss = mlp_loss;
  }
  std::vector<double> mlp_per;
  for (int b = 0; b < 15; ++b) {
    auto t0 = bench::Clock::now();
    for (int i = 0; i < 100; ++i) std::tie(mlp_loss, m) = mlp_step(m);
    nx::wait(mlp_loss);
    mlp_per.push_back(bench::elapsed_us(t0, bench::Clock::now()) / 100);
  }
  // Goal (issue 22): under 20 us per step, ahead of jax.jit.
  r.time("readme_mlp_step", bench::median(mlp_per), 20.0);
  std::snprintf(buf, sizeof buf, "loss %.4f after 1 step, %.4f after %d",
                nx::item<float>(first_loss), nx::item<float>(mlp_loss), 50 + 15 * 100);
  r.note("readme_mlp_step_check", buf);
  r.print_json();
}
