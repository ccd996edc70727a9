// The first step of a model in this process: the eager set-up of its parameters and data, then
// the trace, compile and run of its first compiled training step (the loss read back). Run by
// bench/first_step.py in a fresh process with an empty RUNE_CACHE_DIR, beside jax.jit's and
// torch.compile's first step of the same model (docs/performance.md "The first step").
//
// Usage: first_step readme_mlp|mlp784_adamw
//   readme_mlp:   bench_train's readme_mlp_step (the README demo's 2-64-2 tanh MLP, 400 points,
//                 log-softmax cross-entropy, SGD 1.0)
//   mlp784_adamw: bench/mlp_784_step.h's 784-256-10 tanh MLP (batch 128, mean squared error)
//                 with rune::optim::adamw(1e-3)
// Prints "first_step <model>: setup_us <s> step_us <t> loss <l>".
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/common.h"
#include "bench/mlp_784_step.h"
#include "trace/rune.h"

using nx::Tensor;

struct Mlp {
  Tensor w1, b1, w2, b2;
};
RUNE_TREE(Mlp, w1, b1, w2, b2)

namespace {

struct Timing {
  double setup_us, step_us;
  float loss;
};

Timing readme_mlp(bench::Clock::time_point t0) {
  auto keys = nx::split(nx::key(7));
  Tensor x = nx::randn(keys.first, nx::float32, {400, 2});
  std::vector<double> labels(400);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<double>(i % 2);
  Tensor y = nx::one_hot(nx::create(nx::int64, {400}, labels), 2);
  auto k2 = nx::split(keys.second);
  Mlp m{nx::randn(k2.first, nx::float32, {2, 64}) * std::sqrt(0.5), nx::zeros(nx::float32, {64}),
        nx::randn(k2.second, nx::float32, {64, 2}) * std::sqrt(1.0 / 64),
        nx::zeros(nx::float32, {2})};
  nx::wait(m.w2);
  auto t1 = bench::Clock::now();
  auto xent = [&](const Mlp& q) {
    Tensor logits = nx::matmul(nx::tanh(nx::matmul(x, q.w1) + q.b1), q.w2) + q.b2;
    return nx::mean(-nx::sum(y * nx::log_softmax(logits, 1), {1}));
  };
  auto step = rune::jit([&](const Mlp& q) {
    auto [l, g] = rune::value_and_grad(xent, q);
    return std::make_pair(l, Mlp{q.w1 - g.w1, q.b1 - g.b1, q.w2 - g.w2, q.b2 - g.b2});
  });
  auto [loss, next] = step(m);
  float l = nx::item<float>(loss);
  auto t2 = bench::Clock::now();
  return {bench::elapsed_us(t0, t1), bench::elapsed_us(t1, t2), l};
}

Timing mlp784_adamw(bench::Clock::time_point t0) {
  using Params = std::pair<Tensor, Tensor>;
  bench::Mlp784 in = bench::mlp_784_inputs(nx::Device::cpu());
  auto opt = rune::optim::adamw(1e-3);
  Params p{in.w1, in.w2};
  auto state = opt.init(p);
  nx::wait(state.nu.second);
  auto t1 = bench::Clock::now();
  auto step = rune::jit([&](const Params& q, const rune::optim::AdamState<Params>& s,
                            const Tensor& xb, const Tensor& yb) {
    auto loss = [&](const Params& r) {
      auto d = nx::matmul(nx::tanh(nx::matmul(xb, r.first)), r.second) - yb;
      return nx::mean(d * d);
    };
    auto [l, g] = rune::value_and_grad(loss, q);
    auto [q2, s2] = opt.update(q, g, s);
    return std::make_tuple(l, q2, s2);
  });
  auto [loss, p2, s2] = step(p, state, in.xb, in.yb);
  float l = nx::item<float>(loss);
  auto t2 = bench::Clock::now();
  return {bench::elapsed_us(t0, t1), bench::elapsed_us(t1, t2), l};
}

}  // namespace

int main(int argc, char** argv) {
  auto t0 = bench::Clock::now();
  std::string model = argc > 1 ? argv[1] : "";
  Timing t;
  if (model == "readme_mlp") {
    t = readme_mlp(t0);
  } else if (model == "mlp784_adamw") {
    t = mlp784_adamw(t0);
  } else {
    std::fprintf(stderr, "usage: first_step readme_mlp|mlp784_adamw\n");
    return 2;
  }
  std::printf("first_step %s: setup_us %.0f step_us %.0f loss %.6f\n", model.c_str(), t.setup_us,
              t.step_us, t.loss);
}
