// The model and training step of samples/cnn.cpp, shared with bench/bench_conv.cpp (which times
// this very step against torch and JAX): conv3x3(1 -> ch1) + ReLU + 2x2 max pool, conv3x3(ch1 ->
// ch2) + ReLU + 2x2 max pool, dense (7 * 7 * ch2 -> hidden) + ReLU, dense (hidden -> 10); dropout
// before each dense layer; softmax cross-entropy; AdamW with cosine decay.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#include "trace/rune.h"

namespace cnn {

namespace optim = rune::optim;
namespace rnd = nx::random;
using nx::Tensor;

struct Conv {
  Tensor w, b;  // w [3, 3, in, out] (HWIO) or [out, in, 3, 3] (OIHW), b [out]
};
struct Dense {
  Tensor w, b;  // w [in, out], b [out]
};
struct Cnn {
  Conv c1, c2;
  Dense d1, d2;
};

}  // namespace cnn

// Parameters are trees (core/tree.h): rune::jit, rune::grad and rune::optim walk them.
RUNE_TREE(cnn::Conv, w, b)
RUNE_TREE(cnn::Dense, w, b)
RUNE_TREE(cnn::Cnn, c1, c2, d1, d2)

namespace cnn {

using State = optim::AdamState<Cnn>;

struct Config {
  std::string layout = "NHWC";  // images [N, 28, 28, 1], kernels HWIO; or "NCHW" (OIHW)
  int64_t ch1 = 32, ch2 = 64, hidden = 128;
  double lr = 1e-3, weight_decay = 1e-4, dropout = 0.25;
  bool nhwc() const { return layout == "NHWC"; }
};

// He-normal weights (the classifier's scaled by sqrt(1/2)), zero biases.
inline Cnn init(const Config& c, uint64_t seed) {
  Tensor keys = rnd::split(rnd::key(seed), 4);
  auto he = [&](int i, const nx::Shape& shape, int64_t fan_in) {
    return rnd::normal(nx::index(keys, 0, i), shape) * std::sqrt(2.0 / static_cast<double>(fan_in));
  };
  auto kernel = [&](int64_t in, int64_t out) {
    return c.nhwc() ? nx::Shape{3, 3, in, out} : nx::Shape{out, in, 3, 3};
  };
  int64_t flat = c.ch2 * 7 * 7;
  return Cnn{{he(0, kernel(1, c.ch1), 9), nx::zeros(nx::float32, {c.ch1})},
             {he(1, kernel(c.ch1, c.ch2), c.ch1 * 9), nx::zeros(nx::float32, {c.ch2})},
             {he(2, {flat, c.hidden}, flat), nx::zeros(nx::float32, {c.hidden})},
             {he(3, {c.hidden, 10}, c.hidden) * std::sqrt(0.5), nx::zeros(nx::float32, {10})}};
}

// conv 3x3 SAME + bias + ReLU + 2x2 max pool.
inline Tensor block(const Config& c, const Conv& p, const Tensor& x) {
  nx::ConvOptions conv;
  conv.padding = "SAME";
  conv.layout = c.layout;
  Tensor y = nx::conv(x, p.w, conv);
  y = nx::relu(y + (c.nhwc() ? p.b : nx::reshape(p.b, {1, -1, 1, 1})));
  nx::nn::PoolOptions pool;  // strides: the window's
  pool.layout = c.layout;
  return nx::nn::max_pool(y, {2, 2}, pool);
}

// Logits [B, 10] of images [B, 28, 28, 1] (NCHW: [B, 1, 28, 28]); with a key, dropout (one fold
// of the key per site) before each dense layer.
inline Tensor forward(const Config& c, const Cnn& m, const Tensor& x, const Tensor* key) {
  Tensor h = block(c, m.c2, block(c, m.c1, x));
  h = nx::reshape(h, {h.shape()[0], -1});
  if (key) h = rnd::dropout(rnd::fold_in(*key, 0u), h, c.dropout);
  h = nx::relu(nx::matmul(h, m.d1.w) + m.d1.b);
  if (key) h = rnd::dropout(rnd::fold_in(*key, 1u), h, c.dropout);
  return nx::matmul(h, m.d2.w) + m.d2.b;
}

// AdamW (decoupled weight decay on every parameter) with the learning rate decaying along a
// cosine to 0 over `steps`.
inline optim::Adam optimizer(const Config& c, int64_t steps) {
  return optim::adamw(optim::cosine_decay(c.lr, steps), 0.9, 0.999, 1e-8, c.weight_decay);
}

// One training step, compiled once: step(params, state, images, labels, idx, key) gathers the
// batch images[idx], labels[idx] on the device, draws the dropout masks from the key folded with
// the step count, and returns (loss, params, state) after one AdamW update. Params and state are
// consumed (donated) on every call, so the update writes into their buffers.
inline auto train_step(const Config& c, const optim::Adam& opt) {
  return rune::jit(rune::Signature().consume(0).consume(1),
                   [c, opt](Cnn p, State s, Tensor xs, Tensor ys, Tensor idx, Tensor key) {
                     Tensor x = nx::take(xs, idx, 0), y = nx::take(ys, idx, 0);
                     Tensor k = rnd::fold_in(key, s.count);
                     auto loss_of = [&](const Cnn& q) {
                       return nx::nn::cross_entropy(forward(c, q, x, &k), y);
                     };
                     auto [loss, g] = rune::value_and_grad(loss_of, p);
                     auto [p2, s2] = opt.update(p, g, s);
                     return std::make_tuple(loss, p2, s2);
                   });
}

}  // namespace cnn
