// The README's demo: a two-layer MLP learns two interleaved spirals. The whole training step
// (forward, softmax cross-entropy, backward, SGD update) is one compiled program.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "trace/rune.h"

using nx::Tensor;

struct Mlp {
  Tensor w1, b1, w2, b2;
};
RUNE_TREE(Mlp, w1, b1, w2, b2)

// Two spirals of n points each, with a little noise; labels one-hot.
std::pair<Tensor, Tensor> spirals(int n) {
  std::mt19937 rng(0);
  std::normal_distribution<double> noise(0, 0.15);
  std::vector<double> xy, onehot;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < n; ++i) {
      double t = 0.25 + 3.0 * i / n;  // radius and angle grow together
      double a = t * 3.0 + c * M_PI;
      xy.push_back(t * std::cos(a) + noise(rng));
      xy.push_back(t * std::sin(a) + noise(rng));
      onehot.push_back(c == 0);
      onehot.push_back(c == 1);
    }
  return {nx::create(nx::float32, {2 * n, 2}, xy), nx::create(nx::float32, {2 * n, 2}, onehot)};
}

Tensor logits(const Mlp& m, const Tensor& x) {
  Tensor h = nx::tanh(nx::matmul(x, m.w1) + m.b1);
  return nx::matmul(h, m.w2) + m.b2;
}

int main() {
  auto [x, y] = spirals(200);
  const int64_t hidden = 64;
  auto k = nx::split(nx::key(42));
  Mlp model{nx::randn(k.first, nx::float32, {2, hidden}) * std::sqrt(1.0 / 2),
            nx::zeros(nx::float32, {hidden}),
            nx::randn(k.second, nx::float32, {hidden, 2}) * std::sqrt(1.0 / hidden),
            nx::zeros(nx::float32, {2})};

  auto loss_fn = [&](const Mlp& m) {
    return nx::mean(-nx::sum(y * nx::log_softmax(logits(m, x), 1), {1}));
  };
  auto accuracy = rune::jit([&](const Mlp& m) {
    Tensor right = nx::equal(nx::argmax(logits(m, x), 1), nx::argmax(y, 1));
    return nx::mean(nx::cast(right, nx::float32));
  });
  const double lr = std::getenv("MLP_LR") ? std::atof(std::getenv("MLP_LR")) : 1.0;
  auto step = rune::jit([&](const Mlp& m) {
    auto [loss, g] = rune::value_and_grad(loss_fn, m);
    return std::make_pair(
        loss, Mlp{m.w1 - g.w1 * lr, m.b1 - g.b1 * lr, m.w2 - g.w2 * lr, m.b2 - g.b2 * lr});
  });

  auto t0 = std::chrono::steady_clock::now();
  int steps = 2000;
  if (const char* s = std::getenv("MLP_STEPS")) steps = std::atoi(s);
  Tensor loss;
  for (int i = 1; i <= steps; ++i) {
    std::tie(loss, model) = step(model);
    if (i % 400 == 0)
      std::printf("step %4d  loss %.4f  accuracy %.3f\n", i, nx::item<float>(loss),
                  nx::item<float>(accuracy(model)));
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "final accuracy %.3f on %lld points (%d steps in %.2f s, %.0f us per compiled step)\n",
      nx::item<float>(accuracy(model)), static_cast<long long>(x.shape()[0]), steps, s,
      s / steps * 1e6);
}
