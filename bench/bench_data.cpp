// rune::data's cost in a training loop (issue 41, docs/data.md "Measurement"): a 784-256-10 MLP
// step (batch 128, softmax cross-entropy masked by the batch's mask, value_and_grad and
// optim::adamw(1e-3) under one rune::jit, params and state consumed) over one epoch of
// Fashion-MNIST-sized data (60000 examples: Fashion-MNIST's training set when installed, else
// random bytes), fed by a Loader (shuffled, last batch padded, prefetch 2), against the same step
// over the same batches sliced and placed before the clock starts. Per-step times are epoch
// medians over blocks of 16 steps, the variants taking turns block by block through --reps
// epochs each, so all see the same background load. Prints the ratio; the goal is
// within 5%.
//
// build/bench/bench_data [--examples N] [--reps R] [--device CPU|CPU:1|CUDA:0]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "bench/common.h"
#include "trace/data.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
namespace data = rune::data;
namespace optim = rune::optim;
using XY = std::pair<Tensor, Tensor>;

struct Mlp {
  Tensor w1, b1, w2, b2;
};

}  // namespace
RUNE_TREE(Mlp, w1, b1, w2, b2)

namespace {

using State = optim::AdamState<Mlp>;

Mlp init(nx::Device d) {
  auto w = [&](uint64_t k, int64_t in, int64_t out) {
    return nx::place(nx::randn(nx::key(k), nx::float32, {in, out}) * (1.0 / std::sqrt(in)), d);
  };
  return {w(1, 784, 256), nx::place(nx::zeros(nx::float32, {256}), d), w(2, 256, 10),
          nx::place(nx::zeros(nx::float32, {10}), d)};
}

// x float32 [60000, 784] in [0, 1], y uint8 [60000].
XY examples(int64_t n) {
  const std::string d = "/usr/share/datasets/fashion-mnist/";
  if (n <= 60000 && std::filesystem::exists(d + "train-images-idx3-ubyte.gz")) {
    Tensor x = nx::slice(nx::load_idx(d + "train-images-idx3-ubyte.gz"), {{0, n}});
    Tensor y = nx::slice(nx::load_idx(d + "train-labels-idx1-ubyte.gz"), {{0, n}});
    std::printf("data: Fashion-MNIST's first %lld training images\n", static_cast<long long>(n));
    return {nx::reshape(nx::cast(x, nx::float32) / 255.0, {n, 784}), y};
  }
  std::printf("data: %lld random images (Fashion-MNIST is not installed)\n",
              static_cast<long long>(n));
  return {nx::rand(nx::key(7), nx::float32, {n, 784}),
          nx::cast(nx::rand(nx::key(8), nx::float32, {n}) * 9.99, nx::uint8)};
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 60000;
  int reps = 7;
  std::string device = "CPU";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--examples")) n = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--device")) device = argv[i + 1];
  }
  nx::Device dev = nx::Device::parse(device, "bench_data");
  const int64_t B = 128;

  auto opt = optim::adamw(1e-3);
  auto step = rune::jit(rune::Signature().consume(0).consume(1), [&](Mlp p, State s, Tensor x,
                                                                     Tensor y, Tensor mask) {
    auto loss = [&](const Mlp& m) {
      Tensor h = nx::tanh(nx::matmul(x, m.w1) + m.b1);
      Tensor logits = nx::matmul(h, m.w2) + m.b2;
      Tensor ce = -nx::sum(nx::one_hot(nx::cast(y, nx::int32), 10) * nx::log_softmax(logits), {1});
      return nx::sum(ce * mask) / nx::sum(mask);
    };
    auto [l, g] = rune::value_and_grad(loss, p);
    auto [p2, s2] = opt.update(p, g, s);
    return std::make_tuple(p2, s2, l);
  });

  data::Dataset<XY> ds(examples(n));
  auto loader_with = [&](int prefetch) {
    return data::Loader<XY>(
        ds,
        {.batch_size = B, .shuffle_key = nx::random::key(0), .device = dev, .prefetch = prefetch});
  };
  data::Loader<XY> pipeline = loader_with(2), inline_loader = loader_with(0);
  // The pre-sliced batches: epoch 0's, built and placed before timing.
  std::vector<data::Batch<XY>> sliced;
  for (auto b : inline_loader.epoch(0)) sliced.push_back(b);
  for (auto& b : sliced) nx::wait(b.mask);
  std::printf("device %s, %lld examples, %zu batches of %lld (last padded), %d reps\n",
              dev.name().c_str(), static_cast<long long>(n), sliced.size(),
              static_cast<long long>(B), reps);

  Mlp p = init(dev);
  State s = opt.init(p);
  Tensor l;
  // One epoch of each first, untimed (the compile, first touches).
  for (const auto& b : sliced) std::tie(p, s, l) = step(p, s, b.data.first, b.data.second, b.mask);
  for (auto b : pipeline.epoch(1000))
    std::tie(p, s, l) = step(p, s, b.data.first, b.data.second, b.mask);
  nx::wait(l);

  // Timed in blocks of K steps, the three variants taking turns (in an order rotated each round)
  // through `reps` epochs each, so that all see the same background load: the machine's load
  // changes within one epoch. A variant's per-step time is the median over its full blocks.
  // Opening an epoch (its permutation) is timed apart and added per step to the loaders' times.
  const int K = 16;
  std::vector<std::vector<double>> per_step(3);
  std::vector<double> open_us(3, 0);
  for (int r = 0; r < reps; ++r) {
    auto t0 = bench::Clock::now();
    data::Epoch<XY> e_pipe = pipeline.epoch(r);
    auto t1 = bench::Clock::now();
    data::Epoch<XY> e_inline = inline_loader.epoch(r);
    open_us[0] += bench::elapsed_us(t0, t1);
    open_us[2] += bench::elapsed_us(t1, bench::Clock::now());
    size_t next_sliced = 0;
    std::vector<bool> done(3, false);
    for (size_t round = 0; !(done[0] && done[1] && done[2]); ++round)
      for (size_t j = 0; j < 3; ++j) {
        size_t v = (j + round) % 3;
        if (done[v]) continue;
        auto a = bench::Clock::now();
        int steps = 0;
        for (; steps < K; ++steps) {
          if (v == 1) {
            if (next_sliced == sliced.size()) break;
            const auto& b = sliced[next_sliced++];
            std::tie(p, s, l) = step(p, s, b.data.first, b.data.second, b.mask);
          } else {
            auto b = (v == 0 ? e_pipe : e_inline).next();
            if (!b) break;
            std::tie(p, s, l) = step(p, s, b->data.first, b->data.second, b->mask);
          }
        }
        nx::wait(l);
        if (steps == K) per_step[v].push_back(bench::elapsed_us(a, bench::Clock::now()) / K);
        if (steps < K) done[v] = true;
      }
  }
  const double batches = static_cast<double>(sliced.size());
  double open_pipe = open_us[0] / reps / batches, open_inline = open_us[2] / reps / batches;
  double alone = bench::median(per_step[1]);
  double pipe = bench::median(per_step[0]) + open_pipe;
  double inl = bench::median(per_step[2]) + open_inline;
  std::printf("%zu blocks of %d steps per variant; opening an epoch: %.1f us per step\n",
              per_step[1].size(), K, open_pipe);
  std::printf("loss after %d epochs: %.4f; step traced %zu time(s)\n", 3 * reps + 2,
              nx::item<float>(nx::place(l, "CPU")), step.traces());
  // The loader alone: an epoch's batches taken (and waited for) with no step between them.
  int64_t epoch = 2000;
  auto loader_only = [&](data::Loader<XY>& loader) {
    return [&] {
      for (auto b : loader.epoch(epoch++)) nx::wait(b.mask);
    };
  };
  auto [o_pipe, o_inline] =
      bench::medians_us(reps, 1, loader_only(pipeline), loader_only(inline_loader));
  std::printf("loader alone per batch: prefetch 2 %.1f us, prefetch 0 %.1f us\n", o_pipe / batches,
              o_inline / batches);
  bench::Report r("data");
  r.add("mlp784 step, rune::data pipeline (prefetch 2) vs pre-sliced batches", pipe, "pre-sliced",
        alone, 1.05);
  r.time("mlp784 step, rune::data without prefetch (prefetch 0)", inl);
  r.time("mlp784 step, pre-sliced batches", alone);
  std::printf(
      "per step: pre-sliced %.1f us, pipeline %.1f us (ratio %.3f), no prefetch %.1f us "
      "(ratio %.3f)\n",
      alone, pipe, pipe / alone, inl, inl / alone);
  r.print_json();
}
