// The "A training step" section: the loss, its gradient and the update in one compiled program.
#include "trace/rune.h"

using Params = std::pair<nx::Tensor, nx::Tensor>;

int main() {
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
  nx::Tensor loss;
  for (int i = 0; i < 200; ++i) std::tie(loss, p) = step(p);
  nx::print(loss);
  nx::print(p.first);
  nx::print(p.second);
}
