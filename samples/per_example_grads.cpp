// Per-example gradient norms with rune::vmap(rune::grad(loss)) (issue 20): the gradient of a
// logistic regression's loss for each of 6 examples at once, in one compiled program, the bits
// of a loop of rune::grad over the examples; then a step whose per-example gradients are clipped
// to norm 1 before they are averaged (the shape of DP-SGD's update, without its noise).
#include <bit>
#include <cstdio>
#include <vector>

#include "trace/rune.h"

using Params = std::pair<nx::Tensor, nx::Tensor>;  // weights [2], bias []

int main() {
  auto xs = nx::create(nx::float64, {6, 2}, {0.5, 1, -1, 0.5, 2, -0.5, -1.5, -1, 0.2, 0.3, 1, 2});
  auto ys = nx::create(nx::float64, {6}, {1, 0, 1, 0, 1, 1});
  // One example's loss: the binary cross-entropy of sigmoid(w . x + b) against y.
  auto loss = [](const Params& p, const nx::Tensor& x, const nx::Tensor& y) {
    auto z = nx::sum(p.first * x) + p.second;
    return nx::log1p(nx::exp(z)) - y * z;  // -log sigmoid(z)^y (1 - sigmoid(z))^(1 - y)
  };
  auto per_example = rune::vmap(rune::grad(loss, rune::argnums<0>), {rune::none, 0, 0});
  auto norms = rune::jit([&](const Params& p, const nx::Tensor& xs, const nx::Tensor& ys) {
    Params g = per_example(p, xs, ys);  // weights [6, 2], bias [6]
    return nx::sqrt(nx::sum(nx::square(g.first), {1}) + nx::square(g.second));
  });
  Params p{nx::create(nx::float64, {2}, {0.1, -0.2}), nx::scalar(nx::float64, 0)};
  auto n = norms(p, xs, ys);
  std::printf("per-example gradient norms:\n");
  nx::print(n);

  // The same as a loop over the examples, bit for bit.
  bool same = true;
  auto norm_values = nx::to_vector<double>(n);
  for (int64_t i = 0; i < 6; ++i) {
    Params g = rune::grad(loss, rune::argnums<0>)(p, nx::index(xs, 0, i), nx::index(ys, 0, i));
    double v = nx::item<double>(nx::sqrt(nx::sum(nx::square(g.first)) + nx::square(g.second)));
    same = same && std::bit_cast<uint64_t>(v) == std::bit_cast<uint64_t>(norm_values[i]);
  }
  std::printf("a loop of rune::grad gives the same bits: %s\n", same ? "true" : "false");

  // Clipped steps: each example's gradient scaled to norm <= 1, then averaged.
  auto step = rune::jit([&](const Params& p) {
    Params g = per_example(p, xs, ys);
    auto norm = nx::sqrt(nx::sum(nx::square(g.first), {1}) + nx::square(g.second));
    auto scale = 1.0 / nx::maximum(norm, nx::full_like(norm, 1));
    auto gw = nx::mean(g.first * nx::unsqueeze(scale, 1), {0});
    auto gb = nx::mean(g.second * scale);
    return Params{p.first - gw * 0.5, p.second - gb * 0.5};
  });
  for (int i = 0; i < 50; ++i) p = step(p);
  auto total = nx::mean(rune::vmap(loss, {rune::none, 0, 0})(p, xs, ys));
  std::printf("mean loss after 50 clipped steps: %.6f\n", nx::item<double>(total));
}
