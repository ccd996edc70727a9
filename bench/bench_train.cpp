// Issue 5: the chapter's training step, compiled (two float64 scalars, four points): the median
// time per step. bench/compare_train.py measures the other frameworks on the same step in the
// same run of bench/run; the MLP step is bench_mlp.cpp's, next to its hand-written reference.
#include <cstdio>

#include "bench/common.h"
#include "trace/rune.h"

using nx::Tensor;

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
  r.print_json();
}
