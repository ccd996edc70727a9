// The README's demo: a two-layer MLP (rune::nn::MLP, 2 -> 64 -> 2 with tanh) learns two
// interleaved spirals from shuffled batches of a rune::data loader. The whole training step
// (forward, softmax cross-entropy, backward, SGD update) is one compiled program.
// Since issue 41 the weights are LeCun-normal draws of the layers' keys (the same distribution as
// the hand-written N(0, 1 / fan_in) before, other numbers) and each step sees a shuffled batch of
// 100 points instead of all 400, so the printed losses differ from earlier versions'.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "nn/nn.h"
#include "trace/data.h"

namespace nn = rune::nn;
using nx::Tensor;
using XY = std::pair<Tensor, Tensor>;

// Two spirals of n points each, with a little noise: points float32 [2n, 2], labels int32 [2n].
XY spirals(int n) {
  std::mt19937 rng(0);
  std::normal_distribution<double> noise(0, 0.15);
  std::vector<double> xy, label;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < n; ++i) {
      double t = 0.25 + 3.0 * i / n;  // radius and angle grow together
      double a = t * 3.0 + c * M_PI;
      xy.push_back(t * std::cos(a) + noise(rng));
      xy.push_back(t * std::sin(a) + noise(rng));
      label.push_back(c);
    }
  return {nx::create(nx::float32, {2 * n, 2}, xy), nx::create(nx::int32, {2 * n}, label)};
}

int main() {
  const XY points = spirals(200);
  rune::data::Loader<XY> loader(rune::data::from_arrays(points),
                                {.batch_size = 100, .shuffle_key = nx::random::key(1)});
  nn::MLP model = nn::MLP::init(
      nx::random::key(42), {2, 64, 2},
      {.activation = nn::Activation::tanh,
       .linear = {.weight_init = nn::init::lecun_normal(), .bias_init = nn::init::zeros()}});

  auto accuracy = rune::jit([&](const nn::MLP& m) {
    Tensor right = nx::equal(nx::cast(nx::argmax(m(points.first), 1), nx::int32), points.second);
    return nx::mean(nx::cast(right, nx::float32));
  });
  const double lr = std::getenv("MLP_LR") ? std::atof(std::getenv("MLP_LR")) : 1.0;
  auto step = rune::jit([lr](const nn::MLP& m, const Tensor& x, const Tensor& y) {
    auto [loss, g] =
        rune::value_and_grad([&](const nn::MLP& q) { return nx::nn::cross_entropy(q(x), y); }, m);
    return std::make_pair(
        loss, rune::tree_map([lr](const Tensor& w, const Tensor& d) { return w - d * lr; }, m, g));
  });

  auto t0 = std::chrono::steady_clock::now();
  int steps = 2000;
  if (const char* s = std::getenv("MLP_STEPS")) steps = std::atoi(s);
  Tensor loss;
  for (int epoch = 0, i = 0; i < steps; ++epoch)
    for (auto batch : loader.epoch(epoch)) {  // 4 batches of 100 points per epoch
      std::tie(loss, model) = step(model, batch.data.first, batch.data.second);
      if (++i % 400 == 0)
        std::printf("step %4d  loss %.4f  accuracy %.3f\n", i, nx::item<float>(loss),
                    nx::item<float>(accuracy(model)));
      if (i == steps) break;
    }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "final accuracy %.3f on %lld points (%d steps in %.2f s, %.0f us per compiled step)\n",
      nx::item<float>(accuracy(model)), static_cast<long long>(points.first.shape()[0]), steps, s,
      s / steps * 1e6);
}
