// The 784-256-10 MLP step (batch 128, tanh, mean squared error, SGD 0.05) that the GPU
// benchmarks time: bench_gpu on a device, bench_launch's host path on a null driver.
#pragma once
#include <tuple>

#include "trace/rune.h"

namespace bench {

struct Mlp784 {
  nx::Tensor w1, w2, xb, yb;  // parameters, then the batch
};

// Parameters and a batch on `dev` (fixed keys).
inline Mlp784 mlp_784_inputs(nx::Device dev) {
  return {nx::place(nx::randn(nx::key(1), nx::float32, {784, 256}) * 0.05, dev),
          nx::place(nx::randn(nx::key(2), nx::float32, {256, 10}) * 0.05, dev),
          nx::place(nx::rand(nx::key(3), nx::float32, {128, 784}), dev),
          nx::place(nx::rand(nx::key(4), nx::float32, {128, 10}), dev)};
}

// The compiled step: (w1, w2, xb, yb) -> (w1', w2', loss).
inline auto mlp_784_step() {
  return rune::jit(
      [](const nx::Tensor& w1, const nx::Tensor& w2, const nx::Tensor& xb, const nx::Tensor& yb) {
        auto loss = [&](const std::pair<nx::Tensor, nx::Tensor>& p) {
          auto d = nx::matmul(nx::tanh(nx::matmul(xb, p.first)), p.second) - yb;
          return nx::mean(d * d);
        };
        auto [l, g] = rune::value_and_grad(loss, std::make_pair(w1, w2));
        return std::make_tuple(w1 - g.first * 0.05, w2 - g.second * 0.05, l);
      });
}

}  // namespace bench
