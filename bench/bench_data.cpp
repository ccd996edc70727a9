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
// --model gpt times samples/gpt.cpp's step instead (its model, batch 32 x 128 bytes of a text
// corpus from rune::data::from_text_files, dropout keyed by the step, clipping, AdamW; --data
// FILE|DIR, default Debian's fortunes), in blocks of 4 steps, at most --blocks blocks of each
// variant per epoch (default 4): the sample's step beside the same batches pre-sliced.
//
// build/bench/bench_data [--model mlp784|gpt] [--examples N] [--reps R] [--blocks B]
//                        [--device CPU|CPU:1|CUDA:0] [--data FILE|DIR]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "bench/common.h"
#include "nn/nn.h"
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

// Per-step times of the three variants: the pipeline (prefetch 2), the pre-sliced batches and
// the loader without prefetch, taking turns in blocks of K steps (the order rotated each round)
// through `reps` epochs, at most max_blocks blocks of each per epoch, so that all see the same
// background load (the machine's load changes within one epoch). A variant's per-step time is
// the median over its full blocks. Opening an epoch (its permutation) is timed apart and added
// per step to the loaders' times. `step` runs one step on a batch and returns its loss.
struct Times {
  double alone = 0, pipe = 0, inl = 0, open_pipe = 0;
  size_t blocks = 0;
};
Times interleave(data::Loader<XY>& pipeline, data::Loader<XY>& inline_loader,
                 const std::vector<data::Batch<XY>>& sliced, int reps, int K, size_t max_blocks,
                 const std::function<Tensor(const data::Batch<XY>&)>& step) {
  std::vector<std::vector<double>> per_step(3);
  std::vector<double> open_us(3, 0);
  size_t steps_per_epoch = 0;
  Tensor l;
  for (int r = 0; r < reps; ++r) {
    auto t0 = bench::Clock::now();
    data::Epoch<XY> e_pipe = pipeline.epoch(r);
    auto t1 = bench::Clock::now();
    data::Epoch<XY> e_inline = inline_loader.epoch(r);
    open_us[0] += bench::elapsed_us(t0, t1);
    open_us[2] += bench::elapsed_us(t1, bench::Clock::now());
    size_t next_sliced = 0;
    std::vector<size_t> blocks(3, 0);
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
            l = step(sliced[next_sliced++]);
          } else {
            auto b = (v == 0 ? e_pipe : e_inline).next();
            if (!b) break;
            l = step(*b);
          }
        }
        nx::wait(l);
        if (steps == K) per_step[v].push_back(bench::elapsed_us(a, bench::Clock::now()) / K);
        if (v == 1 && r == 0) steps_per_epoch += steps;
        if (steps < K || ++blocks[v] == max_blocks) done[v] = true;
      }
  }
  Times t;
  const double n = static_cast<double>(reps) * std::max<size_t>(steps_per_epoch, 1);
  t.open_pipe = open_us[0] / n;
  t.alone = bench::median(per_step[1]);
  t.pipe = bench::median(per_step[0]) + t.open_pipe;
  t.inl = bench::median(per_step[2]) + open_us[2] / n;
  t.blocks = per_step[1].size();
  return t;
}

// samples/gpt.cpp's model and step: the pipeline against pre-sliced batches.
int gpt_main(nx::Device dev, const std::string& path, int reps, size_t max_blocks) {
  namespace nn = rune::nn;
  using State = optim::AdamState<nn::GPT2>;
  nn::GPT2Config g{.vocab_size = 256, .n_positions = 128, .n_embd = 128, .n_layer = 4, .n_head = 4};
  const int64_t B = 32, T = g.n_positions, K = 4;
  auto ds = data::from_text_files(data::list_files(path, {".dat", ".u8"}), T);
  auto loader_with = [&](int prefetch) {
    return data::Loader<XY>(ds, {.batch_size = B,
                                 .shuffle_key = nx::random::key(1234),
                                 .remainder = data::Remainder::Drop,
                                 .device = dev,
                                 .prefetch = prefetch});
  };
  data::Loader<XY> pipeline = loader_with(2), inline_loader = loader_with(0);
  std::vector<data::Batch<XY>> sliced;
  const size_t keep = max_blocks * K + 1;
  for (auto b : inline_loader.epoch(999)) {
    sliced.push_back(b);
    if (sliced.size() == keep) break;
  }
  for (auto& b : sliced) nx::wait(b.data.first);
  auto opt = optim::adamw(optim::warmup_cosine_decay(0, 1e-3, 100, 600), 0.9, 0.95, 1e-8, 0.1,
                          [](const std::string&, const Tensor& t) { return t.ndim() >= 2; });
  auto train_step = [&](nn::GPT2 p, State s, Tensor x, Tensor y, Tensor key) {
    auto loss_of = [&](const nn::GPT2& q) {
      nn::Context ctx = nn::Context::train(nx::random::fold_in(key, s.count));
      return nx::nn::cross_entropy(q(x, ctx), y);
    };
    auto [loss, grad] = rune::value_and_grad(loss_of, p);
    auto [p2, s2] = opt.update(p, optim::clip_by_global_norm(grad, 1), s);
    return std::make_tuple(loss, p2, s2);
  };
  auto jstep = rune::jit(rune::Signature().consume(0).consume(1), train_step);
  nn::GPT2 p = nn::GPT2::init(nx::random::key(0), g);
  State s = opt.init(p);
  const Tensor key = nx::random::key(1234);
  auto step = [&](const data::Batch<XY>& b) {
    Tensor loss;
    std::tie(loss, p, s) = jstep(p, s, b.data.first, b.data.second, key);
    return loss;
  };
  for (int i = 0; i < 3; ++i) nx::wait(step(sliced[static_cast<size_t>(i)]));  // the compile
  std::printf("gpt: device %s, batches of %lld x %lld bytes, %d reps of %zu blocks of %lld steps\n",
              dev.name().c_str(), static_cast<long long>(B), static_cast<long long>(T), reps,
              max_blocks, static_cast<long long>(K));
  Times t = interleave(pipeline, inline_loader, sliced, reps, K, max_blocks, step);
  bench::Report r("data_gpt");
  r.add("gpt step, rune::data pipeline (prefetch 2) vs pre-sliced batches", t.pipe, "pre-sliced",
        t.alone, 1.05);
  r.time("gpt step, rune::data without prefetch (prefetch 0)", t.inl);
  std::printf(
      "per step: pre-sliced %.1f us, pipeline %.1f us (ratio %.3f), no prefetch %.1f us "
      "(ratio %.3f); %zu blocks each\n",
      t.alone, t.pipe, t.pipe / t.alone, t.inl, t.inl / t.alone, t.blocks);
  r.print_json();
  return 0;
}

int main(int argc, char** argv) {
  int64_t n = 60000;
  int reps = 7;
  size_t max_blocks = 0;
  std::string device = "CPU", model = "mlp784", text = "/usr/share/games/fortunes";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--examples")) n = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--device")) device = argv[i + 1];
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    if (!std::strcmp(argv[i], "--blocks")) max_blocks = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--data")) text = argv[i + 1];
  }
  nx::Device dev = nx::Device::parse(device, "bench_data");
  if (model == "gpt") return gpt_main(dev, text, reps, max_blocks ? max_blocks : 4);
  if (model != "mlp784") {
    std::fprintf(stderr, "bench_data: --model must be mlp784 or gpt, got %s\n", model.c_str());
    return 2;
  }
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

  // Timed in blocks of 16 steps through `reps` epochs of each (interleave).
  Times t = interleave(pipeline, inline_loader, sliced, reps, 16,
                       max_blocks ? max_blocks : SIZE_MAX, [&](const data::Batch<XY>& b) {
                         std::tie(p, s, l) = step(p, s, b.data.first, b.data.second, b.mask);
                         return l;
                       });
  const double batches = static_cast<double>(sliced.size());
  double alone = t.alone, pipe = t.pipe, inl = t.inl;
  std::printf("%zu blocks of %d steps per variant; opening an epoch: %.1f us per step\n", t.blocks,
              16, t.open_pipe);
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
