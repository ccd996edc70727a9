// The model and training step of samples/cnn.cpp, shared with bench/bench_conv.cpp (which times
// this very step against torch and JAX), in rune::nn layers: conv3x3(1 -> ch1) + ReLU + 2x2 max
// pool, conv3x3(ch1 -> ch2) + ReLU + 2x2 max pool, dense (7 * 7 * ch2 -> hidden) + ReLU, dense
// (hidden -> 10); dropout before each dense layer; softmax cross-entropy; AdamW with cosine decay.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#include "nn/nn.h"

namespace cnn {

namespace nn = rune::nn;
namespace optim = rune::optim;
namespace rnd = nx::random;
using nx::Tensor;

struct Cnn {
  nn::Conv c1, c2;    // 3x3 SAME; weights HWIO [3, 3, in, out] (NCHW: OIHW [out, in, 3, 3])
  nn::Linear d1, d2;  // weights [in, out]
};

}  // namespace cnn

// A tree (core/tree.h) of rune::nn layers: rune::jit, rune::grad and rune::optim walk it.
RUNE_TREE(cnn::Cnn, c1, c2, d1, d2)

namespace cnn {

using State = optim::AdamState<Cnn>;

struct Config {
  std::string layout = "NHWC";  // images [N, 28, 28, 1], kernels HWIO; or "NCHW" (OIHW)
  int64_t ch1 = 32, ch2 = 64, hidden = 128;
  double lr = 1e-3, weight_decay = 1e-4, dropout = 0.25;
  bool nhwc() const { return layout == "NHWC"; }
};

// He-normal weights, N(0, 2 / fan_in), the classifier's LeCun-normal, N(0, 1 / fan_in) (He's
// scaled by sqrt(1/2)); zero biases. Layer i draws from fold_in(key(seed), i) (since issue 41:
// the same distributions as the hand-written init before, other numbers).
inline Cnn init(const Config& c, uint64_t seed) {
  const Tensor key = rnd::key(seed);
  auto k = [&](uint32_t i) { return rnd::fold_in(key, i); };
  const nn::init::FanAxes axes = c.nhwc() ? nn::init::FanAxes{} : nn::init::FanAxes::torch();
  const nn::ConvOptions conv{.padding = "SAME",
                             .channels_last = c.nhwc(),
                             .weight_init = nn::init::he_normal(axes),
                             .bias_init = nn::init::zeros()};
  auto dense = [](const nn::init::Initializer& w) {
    return nn::LinearOptions{.weight_init = w, .bias_init = nn::init::zeros()};
  };
  const int64_t flat = c.ch2 * 7 * 7;
  return Cnn{nn::Conv::init(k(0), 1, c.ch1, {3, 3}, conv),
             nn::Conv::init(k(1), c.ch1, c.ch2, {3, 3}, conv),
             nn::Linear::init(k(2), flat, c.hidden, dense(nn::init::he_normal())),
             nn::Linear::init(k(3), c.hidden, 10, dense(nn::init::lecun_normal()))};
}

// Logits [B, 10] of images [B, 28, 28, 1] (NCHW: [B, 1, 28, 28]): conv + ReLU + 2x2 max pool
// twice, then the dense layers; in training (ctx with a key), dropout before each dense layer.
inline Tensor forward(const Config& c, const Cnn& m, const Tensor& x, nn::Context& ctx) {
  const nn::MaxPool pool = nn::MaxPool::init({2, 2}, {.channels_last = c.nhwc()});
  const nn::Dropout drop = nn::Dropout::init(c.dropout);
  Tensor h = pool(nx::relu(m.c2(pool(nx::relu(m.c1(x))))));
  h = drop(nx::reshape(h, {h.shape()[0], -1}), ctx);
  return m.d2(drop(nx::relu(m.d1(h)), ctx));
}

// AdamW (decoupled weight decay on every parameter) with the learning rate decaying along a
// cosine to 0 over `steps`.
inline optim::Adam optimizer(const Config& c, int64_t steps) {
  return optim::adamw(optim::cosine_decay(c.lr, steps), 0.9, 0.999, 1e-8, c.weight_decay);
}

// One training step, compiled once: step(params, state, x, y, key) on a batch of images x and
// labels y draws the dropout masks from the key folded with the step count and returns (loss,
// params, state) after one AdamW update. Params and state are consumed (donated) on every
// call, so the update writes into their buffers.
inline auto train_step(const Config& c, const optim::Adam& opt) {
  return rune::jit(rune::Signature().consume(0).consume(1),
                   [c, opt](Cnn p, State s, Tensor x, Tensor y, Tensor key) {
                     auto loss_of = [&](const Cnn& q) {
                       nn::Context ctx = nn::Context::train(rnd::fold_in(key, s.count));
                       return nx::nn::cross_entropy(forward(c, q, x, ctx), y);
                     };
                     auto [loss, g] = rune::value_and_grad(loss_of, p);
                     auto [p2, s2] = opt.update(p, g, s);
                     return std::make_tuple(loss, p2, s2);
                   });
}

}  // namespace cnn
