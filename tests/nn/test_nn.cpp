// rune::nn layers and modules (nn/layers.h, nn/module.h): each layer's forward against a float64
// loop written here with the same weights (float32 layers, within float32 rounding); torch's
// default initialisation of each layer (bounds and moments, one fold of the key per tensor);
// eager and compiled forwards and initialisations with the same bits on CPU, CPU:1 and the fake
// CUDA:0; gradients through Sequential models against central differences (float64); a small
// MLP whose loss falls under a compiled AdamW step; BatchNorm's running statistics through
// Context::updated and with_buffers in a compiled step; named_params paths, count_params,
// statics kept through the gradient, the optimiser and a checkpoint; errors naming the API and
// the values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "nn/nn.h"
#include "test_util.h"
#include "window_test_util.h"

namespace {

namespace nn = rune::nn;
namespace init = rune::nn::init;
using nx::Shape;
using nx::Tensor;
using window_test::expect_error;
using window_test::host;
using V = std::vector<double>;
using Ints = std::vector<int64_t>;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

// Deterministic values in [-1, 1), rounded to float32 (what a float32 tensor of them holds).
V vals(const Shape& s, uint64_t seed) {
  V v = window_test::values(s, seed);
  for (double& d : v) d = static_cast<double>(static_cast<float>(d));
  return v;
}
Tensor t32(const Shape& s, const V& v) { return nx::create(nx::float32, s, v); }
Tensor t64(const Shape& s, const V& v) { return nx::create(nx::float64, s, v); }
int64_t off(const Shape& s, const Ints& i) { return rt::row_major_offset(s, i); }
void each(const Shape& s, const std::function<void(const Ints&)>& f) { rt::for_each_index(s, f); }
Tensor key(uint32_t i = 0) { return nx::random::fold_in(nx::random::key(41), i); }

// got (float32) within float32 rounding of the float64 reference: 4e-6 relative to the
// larger of 1 and the element's magnitude.
void expect_close(const std::string& what, const Tensor& got, const Shape& shape, const V& want,
                  double tol = 4e-6) {
  ASSERT_EQ(got.shape(), shape) << what;
  V g = nx::to_array(host(got));
  ASSERT_EQ(g.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i)
    if (!(std::fabs(g[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i])))) {
      ADD_FAILURE() << what << " [" << i << "]: got " << g[i] << ", want " << want[i];
      ++bad;
    }
}

// ---- float64 references ----

// x [rows, in] @ w [in, out] + b
V ref_linear(const V& x, int64_t rows, const V& w, int64_t in, int64_t out, const V* b) {
  V y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0;
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[i * out + o];
      y[r * out + o] = s;
    }
  return y;
}

double ref_act(nn::Activation a, double x) {
  switch (a) {
    case nn::Activation::relu:
      return std::max(x, 0.0);
    case nn::Activation::gelu:
      return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2));
    case nn::Activation::gelu_tanh: {
      const double c = std::sqrt(2 / std::numbers::pi);
      return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
    }
    case nn::Activation::tanh:
      return std::tanh(x);
    case nn::Activation::sigmoid:
      return 1 / (1 + std::exp(-x));
    case nn::Activation::silu:
      return x / (1 + std::exp(-x));
    case nn::Activation::softplus:
      return std::log1p(std::exp(x));
    default:
      return x;
  }
}

// Normalisation of each row of `n` elements: (x - mean) / sqrt(var + eps) (rms: x / sqrt(ms +
// eps)), then * w[k(j)] + b[k(j)].
V ref_layer_norm(const V& x, int64_t n, const V& w, const V* b, double eps, bool rms) {
  V y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += x[r * n + j];
    mean = rms ? 0 : mean / n;
    for (int64_t j = 0; j < n; ++j) var += (x[r * n + j] - mean) * (x[r * n + j] - mean);
    var /= n;
    for (int64_t j = 0; j < n; ++j)
      y[r * n + j] = (x[r * n + j] - mean) / std::sqrt(var + eps) * w[j] + (b ? (*b)[j] : 0);
  }
  return y;
}

// torch's conv, channels first: x [N, C, S...], w [O, C / g, K...], explicit pads.
V ref_conv(const Shape& xs, const V& x, const Shape& ws, const V& w, const Ints& stride,
           const std::vector<std::pair<int64_t, int64_t>>& pad, const Ints& dil, int64_t groups,
           const V* bias, Shape& ys) {
  const size_t n = xs.size() - 2;
  ys = {xs[0], ws[0]};
  for (size_t a = 0; a < n; ++a)
    ys.push_back(
        (xs[a + 2] + pad[a].first + pad[a].second - dil[a] * (ws[a + 2] - 1) - 1) / stride[a] + 1);
  const int64_t cg = ws[1], og = ws[0] / groups;
  V y(static_cast<size_t>(ir::numel(ys)));
  Shape ks(ws.begin() + 2, ws.end());
  each(ys, [&](const Ints& o) {
    const int64_t g = o[1] / og;
    double s = bias ? (*bias)[o[1]] : 0;
    for (int64_t c = 0; c < cg; ++c)
      each(ks, [&](const Ints& k) {
        Ints xi{o[0], g * cg + c}, wi{o[1], c};
        for (size_t a = 0; a < n; ++a) {
          const int64_t p = o[a + 2] * stride[a] + k[a] * dil[a] - pad[a].first;
          if (p < 0 || p >= xs[a + 2]) return;
          xi.push_back(p);
          wi.push_back(k[a]);
        }
        s += x[off(xs, xi)] * w[off(ws, wi)];
      });
    y[off(ys, o)] = s;
  });
  return y;
}

// torch's conv_transpose, channels first: x [N, Cin, S...], w [Cin, Cout / g, K...].
V ref_conv_transpose(const Shape& xs, const V& x, const Shape& ws, const V& w, const Ints& stride,
                     const Ints& pad, const Ints& out_pad, const Ints& dil, int64_t groups,
                     const V* bias, Shape& ys) {
  const size_t n = xs.size() - 2;
  const int64_t cg = xs[1] / groups, og = ws[1];
  ys = {xs[0], og * groups};
  for (size_t a = 0; a < n; ++a)
    ys.push_back((xs[a + 2] - 1) * stride[a] - 2 * pad[a] + dil[a] * (ws[a + 2] - 1) + out_pad[a] +
                 1);
  V y(static_cast<size_t>(ir::numel(ys)), 0);
  each(ys, [&](const Ints& o) {
    if (bias) y[off(ys, o)] = (*bias)[o[1]];
  });
  Shape ks(ws.begin() + 2, ws.end());
  each(xs, [&](const Ints& i) {
    const int64_t g = i[1] / cg;
    for (int64_t o = 0; o < og; ++o)
      each(ks, [&](const Ints& k) {
        Ints yi{i[0], g * og + o}, wi{i[1], o};
        for (size_t a = 0; a < n; ++a) {
          const int64_t p = i[a + 2] * stride[a] - pad[a] + k[a] * dil[a];
          if (p < 0 || p >= ys[a + 2]) return;
          yi.push_back(p);
          wi.push_back(k[a]);
        }
        y[off(ys, yi)] += x[off(xs, i)] * w[off(ws, wi)];
      });
  });
  return y;
}

// Channels first <-> channels last, exactly (a permutation of elements).
Tensor to_last(const Tensor& x) {
  nx::Axes p{0};
  for (int a = 2; a < x.ndim(); ++a) p.push_back(a);
  p.push_back(1);
  return nx::permute(x, p);
}
Tensor to_first(const Tensor& x) {
  nx::Axes p{0, x.ndim() - 1};
  for (int a = 1; a < x.ndim() - 1; ++a) p.push_back(a);
  return nx::permute(x, p);
}
// A channels-first kernel [O, I, K...] as channels last [K..., I, O] (ConvTranspose: [I, O, K...]
// as [K..., I, O], the same permutation).
Tensor kernel_to_last(const Tensor& w) {
  nx::Axes p;
  for (int a = 2; a < w.ndim(); ++a) p.push_back(a);
  p.push_back(1);
  p.push_back(0);
  return nx::permute(w, p);
}
Tensor transpose_kernel_to_last(const Tensor& w) {
  nx::Axes p;
  for (int a = 2; a < w.ndim(); ++a) p.push_back(a);
  p.push_back(0);
  p.push_back(1);
  return nx::permute(w, p);
}

// ---- forwards against the loops ----

TEST(NnLayers, LinearAndEmbedding) {
  const V x = vals({2, 3, 4}, 1), w = vals({4, 5}, 2), b = vals({5}, 3);
  nn::Linear lin{t32({4, 5}, w), t32({5}, b)};
  EXPECT_EQ(lin.in_features(), 4);
  EXPECT_EQ(lin.out_features(), 5);
  expect_close("Linear", lin(t32({2, 3, 4}, x)), {2, 3, 5}, ref_linear(x, 6, w, 4, 5, &b));
  nn::Linear nob{t32({4, 5}, w), std::nullopt};
  expect_close("Linear without bias", nob(t32({4}, V(x.begin(), x.begin() + 4))), {5},
               ref_linear(x, 1, w, 4, 5, nullptr));

  const V table = vals({6, 3}, 4);
  nn::Embedding emb{t32({6, 3}, table)};
  Tensor ids = nx::create(nx::int32, {2, 2}, {5, 0, 2, 5});
  V want;
  for (int id : {5, 0, 2, 5})
    for (int j = 0; j < 3; ++j) want.push_back(table[id * 3 + j]);
  expect_close("Embedding", emb(ids), {2, 2, 3}, want, 0);
}

TEST(NnLayers, Activations) {
  const V x = vals({3, 7}, 5);
  Tensor t = t32({3, 7}, x);
  auto check = [&](const std::string& name, nn::Activation a, const Tensor& got) {
    V want;
    for (double v : x) want.push_back(ref_act(a, v));
    expect_close(name, got, {3, 7}, want);
  };
  check("ReLU", nn::Activation::relu, nn::ReLU{}(t));
  check("GELU", nn::Activation::gelu, nn::GELU{}(t));
  check("GELU tanh", nn::Activation::gelu_tanh, nn::GELU{true}(t));
  check("Tanh", nn::Activation::tanh, nn::Tanh{}(t));
  check("Sigmoid", nn::Activation::sigmoid, nn::Sigmoid{}(t));
  check("SiLU", nn::Activation::silu, nn::SiLU{}(t));
  check("softplus", nn::Activation::softplus, nn::activate(nn::Activation::softplus, t));
  check("Identity", nn::Activation::identity, nn::Identity{}(t));
  check("Lambda", nn::Activation::relu, nn::Lambda{[](const Tensor& v) { return nx::relu(v); }}(t));
  EXPECT_EQ(nn::Flatten{}(nx::zeros(nx::float32, {2, 3, 4})).shape(), (Shape{2, 12}));
  EXPECT_EQ(nn::Flatten{2}(nx::zeros(nx::float32, {2, 3, 4, 5})).shape(), (Shape{2, 3, 20}));
}

TEST(NnLayers, LayerNormAndRMSNorm) {
  const V x = vals({3, 2, 6}, 6), w = vals({6}, 7), b = vals({6}, 8);
  nn::LayerNorm ln{t32({6}, w), t32({6}, b), 1e-3};
  expect_close("LayerNorm", ln(t32({3, 2, 6}, x)), {3, 2, 6},
               ref_layer_norm(x, 6, w, &b, 1e-3, false));
  nn::LayerNorm nob{t32({6}, w), std::nullopt, 1e-5};
  expect_close("LayerNorm without bias", nob(t32({3, 2, 6}, x)), {3, 2, 6},
               ref_layer_norm(x, 6, w, nullptr, 1e-5, false));
  nn::RMSNorm rms{t32({6}, w), 1e-6};
  expect_close("RMSNorm", rms(t32({3, 2, 6}, x)), {3, 2, 6},
               ref_layer_norm(x, 6, w, nullptr, 1e-6, true));
}

TEST(NnLayers, BatchNormEvalTrainAndRunningStatistics) {
  const Shape xs{4, 3, 2, 5};
  const V x = vals(xs, 9), w = vals({3}, 10), b = vals({3}, 11), rm = vals({3}, 12);
  V rv = vals({3}, 13);
  for (double& v : rv) v = std::fabs(v) + 0.5;
  nn::BatchNorm bn{t32({3}, w), t32({3}, b), t32({3}, rm), t32({3}, rv), 0.2, 1e-4, false};
  // Evaluation: the running statistics.
  V want(x.size());
  each(xs, [&](const Ints& i) {
    const int64_t o = off(xs, i), c = i[1];
    want[o] = (x[o] - rm[c]) / std::sqrt(rv[c] + 1e-4) * w[c] + b[c];
  });
  expect_close("BatchNorm eval", bn(t32(xs, x)), xs, want);
  nn::Context eval;
  expect_close("BatchNorm Context::eval", bn(t32(xs, x), eval), xs, want);
  EXPECT_EQ(eval.num_updates(), 0u);
  // Training: the batch's statistics, the running ones updated with the unbiased variance.
  V mean(3, 0), var(3, 0);
  const double n = 4 * 2 * 5;
  each(xs, [&](const Ints& i) { mean[i[1]] += x[off(xs, i)] / n; });
  each(xs, [&](const Ints& i) {
    var[i[1]] += (x[off(xs, i)] - mean[i[1]]) * (x[off(xs, i)] - mean[i[1]]) / n;
  });
  each(xs, [&](const Ints& i) {
    const int64_t o = off(xs, i), c = i[1];
    want[o] = (x[o] - mean[c]) / std::sqrt(var[c] + 1e-4) * w[c] + b[c];
  });
  nn::Context ctx = nn::Context::train();
  expect_close("BatchNorm train", bn(t32(xs, x), ctx), xs, want);
  EXPECT_EQ(ctx.num_updates(), 1u);
  nn::BatchNorm next = ctx.updated(bn);
  V nm(3), nv(3);
  for (int c = 0; c < 3; ++c) {
    nm[c] = 0.8 * rm[c] + 0.2 * mean[c];
    nv[c] = 0.8 * rv[c] + 0.2 * var[c] * n / (n - 1);
  }
  expect_close("running_mean", next.running_mean, {3}, nm);
  expect_close("running_var", next.running_var, {3}, nv);
  EXPECT_EQ(window_test::bits(next.weight), window_test::bits(bn.weight));
  // Channels last: the same values permuted.
  nn::BatchNorm last = bn;
  last.channels_last = true;
  nn::Context ctx2 = nn::Context::train();
  Tensor yl = last(to_last(t32(xs, x)), ctx2);
  expect_close("BatchNorm train channels last", to_first(yl), xs, want);
  // A layer called twice in one pass starts its second update from its first.
  nn::Context twice = nn::Context::train();
  bn(t32(xs, x), twice);
  bn(t32(xs, x), twice);
  nn::BatchNorm two = twice.updated(bn);
  for (int c = 0; c < 3; ++c) nm[c] = 0.8 * nm[c] + 0.2 * mean[c];
  expect_close("running_mean after two calls", two.running_mean, {3}, nm);
  // updated() of a model the pass did not run.
  expect_error([&] { ctx.updated(nn::BatchNorm::init(3)); },
               {"rune::nn::Context::updated", "1 of the 1 BatchNorm"});
}

TEST(NnLayers, GroupNorm) {
  const Shape xs{2, 6, 5};
  const V x = vals(xs, 14), w = vals({6}, 15), b = vals({6}, 16);
  nn::GroupNorm gn{t32({6}, w), t32({6}, b), 3, 1e-5};
  V want(x.size());
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t g = 0; g < 3; ++g) {
      double mean = 0, var = 0;
      for (int64_t c = 2 * g; c < 2 * g + 2; ++c)
        for (int64_t p = 0; p < 5; ++p) mean += x[(s * 6 + c) * 5 + p] / 10;
      for (int64_t c = 2 * g; c < 2 * g + 2; ++c)
        for (int64_t p = 0; p < 5; ++p) {
          const double d = x[(s * 6 + c) * 5 + p] - mean;
          var += d * d / 10;
        }
      for (int64_t c = 2 * g; c < 2 * g + 2; ++c)
        for (int64_t p = 0; p < 5; ++p) {
          const int64_t o = (s * 6 + c) * 5 + p;
          want[o] = (x[o] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c];
        }
    }
  expect_close("GroupNorm", gn(t32(xs, x)), xs, want);
}

TEST(NnLayers, Dropout) {
  Tensor x = nx::ones(nx::float32, {100000});
  nn::Dropout d = nn::Dropout::init(0.25);
  EXPECT_EQ(window_test::bits(d(x)), window_test::bits(x));
  nn::Context eval;
  EXPECT_EQ(window_test::bits(d(x, eval)), window_test::bits(x));
  nn::Context ctx = nn::Context::train(key(1));
  Tensor y1 = d(x, ctx), y2 = d(x, ctx);
  // Each call folds the next counter into the key.
  EXPECT_EQ(window_test::bits(y1),
            window_test::bits(nx::random::dropout(nx::random::fold_in(key(1), 0u), x, 0.25)));
  EXPECT_EQ(window_test::bits(y2),
            window_test::bits(nx::random::dropout(nx::random::fold_in(key(1), 1u), x, 0.25)));
  V v = nx::to_array(y1);
  double zeros = 0;
  for (double e : v) {
    if (e == 0) {
      ++zeros;
    } else {
      ASSERT_EQ(e, static_cast<double>(1 / 0.75f)) << "kept elements scale by 1 / (1 - rate)";
    }
  }
  const double n = static_cast<double>(v.size());
  EXPECT_NEAR(zeros / n, 0.25, 5 * std::sqrt(0.25 * 0.75 / n));
  // Rate 0 in training is the identity and draws no key.
  nn::Context nokey = nn::Context::train();
  EXPECT_EQ(window_test::bits(nn::Dropout::init(0)(x, nokey)), window_test::bits(x));
  expect_error([&] { d(x, nokey); }, {"rune::nn::Dropout", "needs a key", "Context::train(key)"});
  expect_error([] { nn::Dropout::init(1); }, {"rune::nn::Dropout", "[0, 1)", "got 1"});
}

struct ConvCase {
  std::string name;
  Shape xs, ks;  // input [N, C, S...], kernel_size
  int64_t out;
  nn::ConvOptions o;
  Ints stride, dil;
  std::vector<std::pair<int64_t, int64_t>> pads;
};

TEST(NnLayers, ConvAgainstTheLoop) {
  std::vector<ConvCase> cases = {
      {"1d", {2, 3, 9}, {3}, 4, {}, {1}, {1}, {{0, 0}}},
      {"1d stride 2 padding (1, 2) dilation 2",
       {2, 2, 11},
       {3},
       3,
       {.strides = {2}, .padding = {{1, 2}}, .dilation = {2}},
       {2},
       {2},
       {{1, 2}}},
      {"2d SAME", {2, 3, 6, 5}, {3, 3}, 4, {.padding = "SAME"}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},
      {"2d groups 2 stride (2, 1) no bias",
       {1, 4, 7, 6},
       {2, 3},
       6,
       {.strides = {2, 1}, .groups = 2, .bias = false},
       {2, 1},
       {1, 1},
       {{0, 0}, {0, 0}}},
      {"3d",
       {1, 2, 4, 5, 3},
       {2, 3, 2},
       3,
       {.padding = {{1, 0}, {0, 1}, {1, 1}}},
       {1, 1, 1},
       {1, 1, 1},
       {{1, 0}, {0, 1}, {1, 1}}},
  };
  uint64_t seed = 100;
  for (const ConvCase& c : cases) {
    nn::Conv conv = nn::Conv::init(key(2), c.xs[1], c.out, c.ks, c.o);
    Shape ws = conv.weight.shape();
    EXPECT_EQ(ws[0], c.out) << c.name;
    EXPECT_EQ(ws[1], c.xs[1] / c.o.groups) << c.name;
    const V x = vals(c.xs, seed++), w = vals(ws, seed++), b = vals({c.out}, seed++);
    conv.weight = t32(ws, w);
    if (conv.bias) conv.bias = t32({c.out}, b);
    Shape ys;
    const V want =
        ref_conv(c.xs, x, ws, w, c.stride, c.pads, c.dil, c.o.groups, c.o.bias ? &b : nullptr, ys);
    expect_close("Conv " + c.name, conv(t32(c.xs, x)), ys, want);
    // Channels last: the kernel [K..., I, O] and the input [N, S..., C] permuted.
    nn::ConvOptions lo = c.o;
    lo.channels_last = true;
    nn::Conv last = nn::Conv::init(key(2), c.xs[1], c.out, c.ks, lo);
    Tensor wl = kernel_to_last(t32(ws, w));
    EXPECT_EQ(last.weight.shape(), wl.shape()) << c.name;
    last.weight = wl;
    if (last.bias) last.bias = t32({c.out}, b);
    expect_close("Conv channels last " + c.name, to_first(last(to_last(t32(c.xs, x)))), ys, want);
  }
}

TEST(NnLayers, ConvTransposeAgainstTheLoop) {
  struct Case {
    std::string name;
    Shape xs, ks;
    int64_t out;
    nn::ConvTransposeOptions o;
    Ints stride, pad, out_pad, dil;
  };
  std::vector<Case> cases = {
      {"1d", {2, 3, 5}, {3}, 2, {}, {1}, {0}, {0}, {1}},
      {"1d stride 2 padding 1 output_padding 1",
       {1, 2, 4},
       {3},
       3,
       {.strides = {2}, .padding = {1}, .output_padding = {1}},
       {2},
       {1},
       {1},
       {1}},
      {"2d groups 2 dilation (1, 2)",
       {2, 4, 3, 4},
       {2, 2},
       6,
       {.dilation = {1, 2}, .groups = 2},
       {1, 1},
       {0, 0},
       {0, 0},
       {1, 2}},
  };
  uint64_t seed = 200;
  for (const Case& c : cases) {
    nn::ConvTranspose ct = nn::ConvTranspose::init(key(3), c.xs[1], c.out, c.ks, c.o);
    Shape ws = ct.weight.shape();
    EXPECT_EQ(ws[0], c.xs[1]) << c.name;
    EXPECT_EQ(ws[1], c.out / c.o.groups) << c.name;
    const V x = vals(c.xs, seed++), w = vals(ws, seed++), b = vals({c.out}, seed++);
    ct.weight = t32(ws, w);
    ct.bias = t32({c.out}, b);
    Shape ys;
    const V want =
        ref_conv_transpose(c.xs, x, ws, w, c.stride, c.pad, c.out_pad, c.dil, c.o.groups, &b, ys);
    expect_close("ConvTranspose " + c.name, ct(t32(c.xs, x)), ys, want);
    nn::ConvTransposeOptions lo = c.o;
    lo.channels_last = true;
    nn::ConvTranspose last = nn::ConvTranspose::init(key(3), c.xs[1], c.out, c.ks, lo);
    Tensor wl = transpose_kernel_to_last(t32(ws, w));
    EXPECT_EQ(last.weight.shape(), wl.shape()) << c.name;
    last.weight = wl;
    last.bias = t32({c.out}, b);
    expect_close("ConvTranspose channels last " + c.name, to_first(last(to_last(t32(c.xs, x)))), ys,
                 want);
  }
}

TEST(NnLayers, Pools) {
  const Shape xs{2, 3, 7, 6};
  const V x = vals(xs, 300);
  // 3x2 windows, stride (2, 2), VALID: out [2, 3, 3, 3].
  nn::MaxPool mp = nn::MaxPool::init({3, 2}, {.strides = {2, 2}});
  nn::AvgPool ap = nn::AvgPool::init({3, 2}, {.strides = {2, 2}});
  const Shape ys{2, 3, 3, 3};
  V wmax(static_cast<size_t>(ir::numel(ys))), wavg(wmax.size());
  each(ys, [&](const Ints& o) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const double v = x[off(xs, {o[0], o[1], o[2] * 2 + i, o[3] * 2 + j})];
        m = std::max(m, v);
        s += v;
      }
    wmax[off(ys, o)] = m;
    wavg[off(ys, o)] = s / 6;
  });
  expect_close("MaxPool", mp(t32(xs, x)), ys, wmax, 0);
  expect_close("AvgPool", ap(t32(xs, x)), ys, wavg);
  nn::MaxPool mpl = nn::MaxPool::init({3, 2}, {.strides = {2, 2}, .channels_last = true});
  expect_close("MaxPool channels last", to_first(mpl(to_last(t32(xs, x)))), ys, wmax, 0);
  // The default stride is the window (torch's).
  EXPECT_EQ(nn::MaxPool::init({2, 2})(t32(xs, x)).shape(), (Shape{2, 3, 3, 3}));
}

TEST(NnLayers, MlpAndSequentialCompose) {
  const V x = vals({5, 3}, 400);
  nn::MLP mlp = nn::MLP::init(
      key(4), {3, 8, 6, 2},
      {.activation = nn::Activation::tanh, .final_activation = nn::Activation::sigmoid});
  ASSERT_EQ(mlp.layers.size(), 3u);
  V h = x;
  int64_t in = 3;
  for (size_t i = 0; i < 3; ++i) {
    const nn::Linear& l = mlp.layers[i];
    // Layer i is Linear::init(fold_in(key, i), ...).
    nn::Linear again = nn::Linear::init(nx::random::fold_in(key(4), static_cast<uint32_t>(i)),
                                        l.in_features(), l.out_features());
    EXPECT_EQ(window_test::bits(again.weight), window_test::bits(l.weight));
    const V w = nx::to_array(l.weight), b = nx::to_array(*l.bias);
    h = ref_linear(h, 5, w, in, l.out_features(), &b);
    for (double& v : h) v = ref_act(i < 2 ? nn::Activation::tanh : nn::Activation::sigmoid, v);
    in = l.out_features();
  }
  expect_close("MLP", mlp(t32({5, 3}, x)), {5, 2}, h);

  nn::Sequential seq{nn::Linear::init(key(5), 3, 4), nn::ReLU{}, nn::Linear::init(key(6), 4, 2),
                     nn::GELU{}};
  static_assert(decltype(seq)::size() == 4);
  const V w0 = nx::to_array(seq.get<0>().weight), b0 = nx::to_array(*seq.get<0>().bias);
  const V w2 = nx::to_array(seq.get<2>().weight), b2 = nx::to_array(*seq.get<2>().bias);
  V s = ref_linear(x, 5, w0, 3, 4, &b0);
  for (double& v : s) v = ref_act(nn::Activation::relu, v);
  s = ref_linear(s, 5, w2, 4, 2, &b2);
  for (double& v : s) v = ref_act(nn::Activation::gelu, v);
  expect_close("Sequential", seq(t32({5, 3}, x)), {5, 2}, s);
}

// ---- default initialisation (torch's) ----

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : nx::to_array(host(t))) m = std::max(m, std::fabs(v));
  return m;
}
double variance(const Tensor& t) {
  V v = nx::to_array(host(t));
  double mean = 0, var = 0;
  for (double d : v) mean += d / static_cast<double>(v.size());
  for (double d : v) var += (d - mean) * (d - mean) / static_cast<double>(v.size());
  return var;
}

TEST(NnLayers, TorchDefaultInitialisation) {
  // Linear(300, 400): weight and bias U(-1/sqrt(300), 1/sqrt(300)), from fold_in(key, 0 / 1).
  nn::Linear lin = nn::Linear::init(key(7), 300, 400);
  const double bound = 1 / std::sqrt(300.0);
  EXPECT_EQ(lin.weight.shape(), (Shape{300, 400}));
  EXPECT_LT(max_abs(lin.weight), bound);
  EXPECT_GT(max_abs(lin.weight), 0.99 * bound);
  EXPECT_NEAR(variance(lin.weight), bound * bound / 3, 0.02 * bound * bound / 3);
  EXPECT_LT(max_abs(*lin.bias), bound);
  EXPECT_GT(max_abs(*lin.bias), 0.95 * bound);
  EXPECT_EQ(window_test::bits(lin.weight), window_test::bits(init::uniform(-bound, bound)(
                                               nx::random::fold_in(key(7), 0u), {300, 400})));
  EXPECT_EQ(window_test::bits(*lin.bias), window_test::bits(init::uniform(-bound, bound)(
                                              nx::random::fold_in(key(7), 1u), {400})));
  // The same key, the same layer; options override the initialisers.
  EXPECT_EQ(window_test::bits(nn::Linear::init(key(7), 300, 400).weight),
            window_test::bits(lin.weight));
  nn::Linear custom = nn::Linear::init(
      key(7), 4, 3,
      {.weight_init = init::constant(0.5), .bias_init = init::ones(), .dtype = nx::float64});
  EXPECT_EQ(nx::to_array(custom.weight), V(12, 0.5));
  EXPECT_EQ(nx::to_array(*custom.bias), V(3, 1));
  EXPECT_EQ(custom.weight.dtype(), nx::float64);
  EXPECT_FALSE(nn::Linear::init(key(7), 4, 3, {.bias = false}).bias.has_value());
  // Conv2d(16 -> 32, 3x5, groups 2): fan_in = 8 * 15, both channel layouts.
  for (bool last : {false, true}) {
    nn::Conv c = nn::Conv::init(key(8), 16, 32, {3, 5}, {.groups = 2, .channels_last = last});
    const double cb = 1 / std::sqrt(8.0 * 15);
    EXPECT_EQ(c.weight.shape(), last ? Shape({3, 5, 8, 32}) : Shape({32, 8, 3, 5}));
    EXPECT_LT(max_abs(c.weight), cb);
    EXPECT_GT(max_abs(c.weight), 0.99 * cb);
    EXPECT_NEAR(variance(c.weight), cb * cb / 3, 0.08 * cb * cb / 3);
    EXPECT_LT(max_abs(*c.bias), cb);
  }
  // ConvTranspose2d(16 -> 12, 3x3, groups 2): torch's fan_in = out / groups * 9 = 54.
  for (bool last : {false, true}) {
    nn::ConvTranspose c =
        nn::ConvTranspose::init(key(9), 16, 12, {3, 3}, {.groups = 2, .channels_last = last});
    const double cb = 1 / std::sqrt(54.0);
    EXPECT_EQ(c.weight.shape(), last ? Shape({3, 3, 16, 6}) : Shape({16, 6, 3, 3}));
    EXPECT_LT(max_abs(c.weight), cb);
    EXPECT_GT(max_abs(c.weight), 0.97 * cb);
    EXPECT_LT(max_abs(*c.bias), cb);
  }
  // Embedding: N(0, 1).
  nn::Embedding e = nn::Embedding::init(key(10), 1000, 100);
  EXPECT_NEAR(variance(e.weight), 1, 0.03);
  // Norms: ones and zeros; BatchNorm's running statistics 0 and 1.
  nn::LayerNorm ln = nn::LayerNorm::init(5);
  EXPECT_EQ(nx::to_array(ln.weight), V(5, 1));
  EXPECT_EQ(nx::to_array(*ln.bias), V(5, 0));
  EXPECT_EQ(static_cast<double>(ln.eps), 1e-5);
  EXPECT_EQ(nx::to_array(nn::RMSNorm::init(4).weight), V(4, 1));
  nn::BatchNorm bn = nn::BatchNorm::init(3);
  EXPECT_EQ(nx::to_array(bn.weight), V(3, 1));
  EXPECT_EQ(nx::to_array(bn.bias), V(3, 0));
  EXPECT_EQ(nx::to_array(bn.running_mean), V(3, 0));
  EXPECT_EQ(nx::to_array(bn.running_var), V(3, 1));
  EXPECT_EQ(static_cast<double>(bn.momentum), 0.1);
  nn::GroupNorm gn = nn::GroupNorm::init(2, 4);
  EXPECT_EQ(nx::to_array(gn.weight), V(4, 1));
  EXPECT_EQ(nx::to_array(gn.bias), V(4, 0));
}

// ---- trees: paths, counts, statics ----

struct Block {
  nn::LayerNorm ln;
  nn::Linear attn;
};
struct Model {
  nn::Embedding wte;
  std::vector<Block> blocks;
  nn::BatchNorm bn;
};

}  // namespace

RUNE_TREE(Block, ln, attn)
RUNE_TREE(Model, wte, blocks, bn)

namespace {

Model small_model() {
  Model m{nn::Embedding::init(key(11), 10, 4), {}, nn::BatchNorm::init(4)};
  for (uint32_t i = 0; i < 2; ++i)
    m.blocks.push_back({nn::LayerNorm::init(4), nn::Linear::init(key(12 + i), 4, 4)});
  return m;
}

TEST(NnTrees, NamedParamsPathsAndCounts) {
  Model m = small_model();
  std::vector<std::string> paths;
  for (const auto& [p, t] : nn::named_params(m)) paths.push_back(p);
  EXPECT_EQ(paths,
            (std::vector<std::string>{
                "wte.weight", "blocks.0.ln.weight", "blocks.0.ln.bias", "blocks.0.attn.weight",
                "blocks.0.attn.bias", "blocks.1.ln.weight", "blocks.1.ln.bias",
                "blocks.1.attn.weight", "blocks.1.attn.bias", "bn.weight", "bn.bias"}));
  std::vector<std::string> buffers;
  for (const auto& [p, t] : nn::named_buffers(m)) buffers.push_back(p);
  EXPECT_EQ(buffers, (std::vector<std::string>{"bn.running_mean", "bn.running_var"}));
  EXPECT_EQ(nn::count_params(m), 40 + 2 * (4 + 4 + 16 + 4) + 4 + 4);
  // A Sequential's layers are named by index, as torch's.
  nn::Sequential seq{nn::Linear::init(key(14), 3, 5), nn::ReLU{}, nn::Dropout::init(0.1),
                     nn::Linear::init(key(15), 5, 2, {.bias = false}), nn::BatchNorm::init(2)};
  paths.clear();
  for (const auto& [p, t] : nn::named_params(seq)) paths.push_back(p);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "4.weight", "4.bias"}));
  EXPECT_EQ(nn::count_params(seq), 15 + 5 + 10 + 2 + 2);
  EXPECT_EQ(nn::count_params(nx::zeros(nx::float32, {3, 7})), 21);
  EXPECT_TRUE(nn::is_buffer("running_var"));
  EXPECT_TRUE(nn::is_buffer("4.running_mean"));
  EXPECT_FALSE(nn::is_buffer("4.not_running_mean"));
  EXPECT_FALSE(nn::is_buffer("running_mean.weight"));
}

TEST(NnTrees, StaticsSurviveGradientsOptimisersAndCheckpoints) {
  nn::Sequential net{
      nn::Conv::init(key(16), 2, 3, {3}, {.strides = {2}, .padding = {{1, 1}}}),
      nn::BatchNorm::init(3, {.momentum = 0.3, .eps = 1e-3}),
      nn::GELU{true},
      nn::Flatten{},
      nn::Dropout::init(0.2),
      nn::Linear::init(key(17), 9, 2),
      nn::LayerNorm::init(2, {.eps = 1e-2}),
  };
  using Net = decltype(net);
  Tensor x = t32({4, 2, 6}, vals({4, 2, 6}, 500));
  auto loss = [&](const Net& n) {
    nn::Context ctx = nn::Context::train(key(18));
    return nx::sum(nx::square(n(x, ctx)));
  };
  Net g = rune::grad(loss, net);
  auto opt = rune::optim::adamw(1e-2);
  auto state = opt.init(net);
  auto [next, state2] = opt.update(net, g, state);
  for (const Net* n : {&g, &next}) {
    const nn::Conv& c = n->get<0>();
    EXPECT_EQ(c.spec.strides, Ints{2});
    EXPECT_EQ(c.spec.padding, (std::vector<std::pair<int64_t, int64_t>>{{1, 1}}));
    EXPECT_EQ(static_cast<double>(n->get<1>().momentum), 0.3);
    EXPECT_EQ(static_cast<double>(n->get<1>().eps), 1e-3);
    EXPECT_TRUE(n->get<2>().approximate);
    EXPECT_EQ(static_cast<double>(n->get<4>().rate), 0.2);
    EXPECT_EQ(static_cast<double>(n->get<6>().eps), 1e-2);
  }
  // The running statistics get no gradient.
  EXPECT_EQ(nx::to_array(g.get<1>().running_mean), V(3, 0));
  EXPECT_EQ(nx::to_array(g.get<1>().running_var), V(3, 0));
  // A checkpoint round trip into a model from another key.
  const std::string file = ::testing::TempDir() + "/nn_statics.safetensors";
  nx::save(file, next);
  Net other{nn::Conv::init(key(19), 2, 3, {3}, {.strides = {2}, .padding = {{1, 1}}}),
            nn::BatchNorm::init(3, {.momentum = 0.3, .eps = 1e-3}),
            nn::GELU{true},
            nn::Flatten{},
            nn::Dropout::init(0.2),
            nn::Linear::init(key(20), 9, 2),
            nn::LayerNorm::init(2, {.eps = 1e-2})};
  nx::load_into(file, other);
  auto a = nn::named_params(other), b = nn::named_params(next);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(window_test::bits(a[i].second), window_test::bits(b[i].second)) << a[i].first;
  }
  std::remove(file.c_str());
  // A changed static retraces a compiled call; the same one does not.
  int traces = 0;
  auto f = rune::jit([&](const nn::Dropout& d, const Tensor& x) {
    ++traces;
    nn::Context ctx = nn::Context::train(key(21));
    return d(x, ctx);
  });
  f(nn::Dropout::init(0.5), x);
  f(nn::Dropout::init(0.5), x);
  EXPECT_EQ(traces, 1);
  Tensor y = f(nn::Dropout::init(0.25), x);
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(window_test::bits(y),
            window_test::bits(nx::random::dropout(nx::random::fold_in(key(21), 0u), x, 0.25)));
}

// ---- gradients against central differences (float64) ----

template <class M>
void expect_gradients_match_differences(const std::string& what, const M& model,
                                        const std::function<Tensor(const M&)>& loss) {
  M g = rune::grad(loss, model);
  auto [leaves, def] = rune::tree_flatten(model);
  auto gl = rune::tree_leaves(g);
  auto named = rune::detail::flatten_with_paths(model);
  ASSERT_EQ(gl.size(), leaves.size());
  for (size_t l = 0; l < leaves.size(); ++l) {
    const V base = nx::to_array(leaves[l]), got = nx::to_array(gl[l]);
    for (size_t i = 0; i < base.size(); ++i) {
      auto at = [&](double delta) {
        V v = base;
        v[i] += delta;
        std::vector<Tensor> ls = leaves;
        ls[l] = nx::create(nx::float64, leaves[l].shape(), v);
        return nx::item<double>(loss(rune::tree_unflatten<M>(def, ls)));
      };
      const double h = 1e-5;
      const double want = (at(h) - at(-h)) / (2 * h);
      EXPECT_NEAR(got[i], want, 1e-6 * std::max(1.0, std::fabs(want)))
          << what << " " << named.paths[l] << "[" << i << "]";
    }
  }
}

TEST(NnGradients, SequentialModelsMatchCentralDifferences) {
  const nn::LinearOptions f64{.dtype = nx::float64};
  nn::Sequential mlp{nn::Linear::init(key(22), 3, 4, f64), nn::Tanh{},
                     nn::LayerNorm::init(4, {.dtype = nx::float64}),
                     nn::Linear::init(key(23), 4, 2, f64), nn::SiLU{}};
  mlp.get<2>().weight = t64({4}, vals({4}, 600));
  *mlp.get<2>().bias = t64({4}, vals({4}, 601));
  Tensor x = t64({5, 3}, vals({5, 3}, 602)), r = t64({5, 2}, vals({5, 2}, 603));
  expect_gradients_match_differences<decltype(mlp)>(
      "MLP", mlp, [&](const decltype(mlp)& m) { return nx::sum(m(x) * r); });

  // Conv, BatchNorm in training mode, GroupNorm, pooling and RMSNorm.
  nn::Sequential cnn{nn::Conv::init(key(24), 2, 4, {2}, {.padding = "SAME", .dtype = nx::float64}),
                     nn::BatchNorm::init(4, {.dtype = nx::float64}),
                     nn::GELU{},
                     nn::GroupNorm::init(2, 4, {.dtype = nx::float64}),
                     nn::AvgPool::init({2}),
                     nn::Flatten{},
                     nn::RMSNorm::init(12, {.dtype = nx::float64}),
                     nn::Linear::init(key(25), 12, 2, f64)};
  Tensor xc = t64({3, 2, 6}, vals({3, 2, 6}, 604)), rc = t64({3, 2}, vals({3, 2}, 605));
  expect_gradients_match_differences<decltype(cnn)>("CNN", cnn, [&](const decltype(cnn)& m) {
    nn::Context ctx = nn::Context::train();
    return nx::sum(m(xc, ctx) * rc);
  });
}

// ---- training ----

TEST(NnTraining, MlpLossFallsUnderCompiledAdamW) {
  // Two interleaved classes: label = (x0 * x1 > 0), XOR-like, 128 points.
  const V pts = window_test::values({128, 2}, 700);
  V labels;
  for (size_t i = 0; i < 128; ++i) labels.push_back(pts[2 * i] * pts[2 * i + 1] > 0 ? 1 : 0);
  Tensor x = t32({128, 2}, pts), y = nx::create(nx::int32, {128}, labels);
  nn::MLP model = nn::MLP::init(key(26), {2, 32, 32, 2}, {.dropout = 0.1});
  auto opt = rune::optim::adamw(1e-2);
  auto state = opt.init(model);
  auto step = rune::jit([opt, x, y](const nn::MLP& m, const decltype(state)& s, const Tensor& k) {
    auto loss = [&](const nn::MLP& p) {
      nn::Context ctx = nn::Context::train(nx::random::fold_in(k, s.count));
      return nx::nn::cross_entropy(p(x, ctx), y);
    };
    auto [l, g] = rune::value_and_grad(loss, m);
    auto [m2, s2] = opt.update(m, g, s);
    return std::make_tuple(l, m2, s2);
  });
  auto eval_loss = [&](const nn::MLP& m) {
    return nx::item<float>(nx::nn::cross_entropy(m(x), y));
  };
  const float first = eval_loss(model);
  for (int i = 0; i < 150; ++i) {
    Tensor l;
    std::tie(l, model, state) = step(model, state, key(27));
  }
  const float last = eval_loss(model);
  EXPECT_LT(last, 0.5f * first) << "loss " << first << " -> " << last;
  EXPECT_EQ(static_cast<double>(model.dropout), 0.1);
}

TEST(NnTraining, BatchNormRunningStatisticsInACompiledStep) {
  nn::Sequential model{nn::Linear::init(key(28), 3, 5), nn::BatchNorm::init(5), nn::ReLU{},
                       nn::Linear::init(key(29), 5, 2)};
  using Net = decltype(model);
  Tensor x = t32({16, 3}, vals({16, 3}, 800)), y = nx::create(nx::int32, {16}, V(16, 1));
  auto opt = rune::optim::adamw(1e-2, 0.9, 0.999, 1e-8, 0.5);  // a large weight decay
  auto state = opt.init(model);
  auto step = rune::jit([opt, x, y](const Net& m, const decltype(state)& s) {
    auto loss = [&](const Net& p) {
      nn::Context ctx = nn::Context::train();
      Tensor l = nx::nn::cross_entropy(p(x, ctx), y);
      return std::make_pair(l, ctx.updated(p));
    };
    auto [value, g] = rune::value_and_grad(loss, m, rune::has_aux);
    auto [m2, s2] = opt.update(m, g, s);
    return std::make_pair(nn::with_buffers(m2, value.second), s2);
  });
  // The first step's running statistics: 0.9 * (0, 1) + 0.1 * (batch mean, unbiased var) of the
  // first Linear's output.
  Tensor h = model.get<0>()(x);
  V mean = nx::to_array(nx::mean(h, {0})), var = nx::to_array(nx::var(h, {0}, 1));
  for (double& v : mean) v *= 0.1;
  for (double& v : var) v = 0.9 + 0.1 * v;
  auto [next, s1] = step(model, state);
  expect_close("running_mean after a step", next.get<1>().running_mean, {5}, mean);
  expect_close("running_var after a step", next.get<1>().running_var, {5}, var);
  // The parameters moved.
  EXPECT_NE(window_test::bits(next.get<0>().weight), window_test::bits(model.get<0>().weight));
}

// ---- eager and compiled, on every device ----

class NnDevices : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
};

template <class M>
std::string model_bits(const M& m) {
  std::string s;
  for (const auto& [p, t] : nn::named_params(m)) s += p + " " + window_test::bits(t) + "\n";
  for (const auto& [p, t] : nn::named_buffers(m)) s += p + " " + window_test::bits(t) + "\n";
  return s;
}

auto make_cnn(const Tensor& k, bool last) {
  using nx::random::fold_in;
  return nn::Sequential{
      nn::Conv::init(fold_in(k, 0u), 2, 4, {3, 3}, {.padding = "SAME", .channels_last = last}),
      nn::BatchNorm::init(4, {.channels_last = last}),
      nn::ReLU{},
      nn::MaxPool::init({2, 2}, {.channels_last = last}),
      nn::ConvTranspose::init(fold_in(k, 1u), 4, 2, {2, 2},
                              {.strides = {2, 2}, .channels_last = last}),
      nn::SiLU{},
      nn::Flatten{},
      nn::Dropout::init(0.3),
      nn::MLP::init(fold_in(k, 2u), {2 * 6 * 4, 8, 3}, {.activation = nn::Activation::gelu}),
      nn::LayerNorm::init(3),
  };
}

TEST_P(NnDevices, EagerAndCompiledGiveTheHostsBits) {
  for (bool last : {false, true}) {
    const std::string layout = last ? "channels last" : "channels first";
    const Shape xs = last ? Shape{2, 6, 4, 2} : Shape{2, 2, 6, 4};
    auto model = make_cnn(key(30), last);
    using Net = decltype(model);
    Tensor x = t32(xs, vals(xs, 900));
    auto forward = [](const Net& m, const Tensor& x, const Tensor& k) {
      nn::Context ctx = nn::Context::train(k);
      Tensor y = m(x, ctx);
      return std::make_tuple(y, m(x), ctx.updated(m));
    };
    auto [y, ye, mm] = forward(model, x, key(31));
    const std::string want = window_test::bits(y) + window_test::bits(ye) + model_bits(mm);
    // The model initialised from the key on the device has the host's bits.
    EXPECT_EQ(model_bits(make_cnn(on(key(30)), last)), model_bits(model))
        << layout << " init on " << GetParam();
    auto dm = rune::tree_map([&](const Tensor& t) { return on(t); }, model);
    auto [y1, ye1, mm1] = forward(dm, on(x), on(key(31)));
    EXPECT_EQ(y1.device(), on(x).device());
    EXPECT_EQ(window_test::bits(y1) + window_test::bits(ye1) + model_bits(mm1), want)
        << layout << " eager on " << GetParam();
    auto [y2, ye2, mm2] = rune::jit(forward)(dm, on(x), on(key(31)));
    EXPECT_EQ(window_test::bits(y2) + window_test::bits(ye2) + model_bits(mm2), want)
        << layout << " compiled on " << GetParam();
  }
  // Embedding, RMSNorm, GroupNorm.
  nn::Embedding emb = nn::Embedding::init(on(key(32)), 7, 6);
  EXPECT_EQ(window_test::bits(emb.weight),
            window_test::bits(nn::Embedding::init(key(32), 7, 6).weight));
  nn::RMSNorm rms = nn::RMSNorm::init(6);
  nn::GroupNorm gn = nn::GroupNorm::init(3, 6);
  auto f = [](const nn::Embedding& e, const nn::RMSNorm& r, const nn::GroupNorm& g,
              const Tensor& ids) {
    Tensor h = r(e(ids));                 // [2, 3, 6]
    return g(nx::permute(h, {0, 2, 1}));  // [2, 6, 3]
  };
  Tensor ids = nx::create(nx::int64, {2, 3}, {0, 6, 3, 2, 2, 5});
  const std::string want = window_test::bits(f(nn::Embedding::init(key(32), 7, 6), rms, gn, ids));
  auto place_rms = rune::tree_map([&](const Tensor& t) { return on(t); }, rms);
  auto place_gn = rune::tree_map([&](const Tensor& t) { return on(t); }, gn);
  EXPECT_EQ(window_test::bits(f(emb, place_rms, place_gn, on(ids))), want) << "eager";
  EXPECT_EQ(window_test::bits(rune::jit(f)(emb, place_rms, place_gn, on(ids))), want) << "compiled";
}

INSTANTIATE_TEST_SUITE_P(Devices, NnDevices, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

// ---- errors ----

TEST(NnErrors, NameTheApiAndTheValues) {
  expect_error([] { nn::Linear::init(key(), 0, 3); },
               {"rune::nn::Linear: in_features must be positive, got 0"});
  expect_error([] { nn::Linear::init(key(), 3, -2); }, {"rune::nn::Linear", "out_features", "-2"});
  expect_error([] { nn::Linear::init(key(), 3, 2, {.dtype = nx::int32}); },
               {"rune::nn::Linear", "float", "int32"});
  expect_error(
      [] {
        nn::Linear::init(key(), 3, 2)(nx::zeros(nx::float32, {4, 5}));
      },
      {"rune::nn::Linear", "in_features 3", "float32 [4, 5]"});
  expect_error([] { nn::Embedding::init(key(), 4, 2)(nx::zeros(nx::float32, {3})); },
               {"rune::nn::Embedding", "integers", "float32 [3]"});
  expect_error([] { nn::Conv::init(key(), 3, 4, {}); }, {"rune::nn::Conv", "kernel_size", "[]"});
  expect_error(
      [] {
        nn::Conv::init(key(), 3, 4, {3, 0});
      },
      {"rune::nn::Conv", "kernel_size must be positive", "[3, 0]"});
  expect_error([] { nn::Conv::init(key(), 3, 4, {3}, {.groups = 2}); },
               {"rune::nn::Conv", "groups 2", "in_channels 3", "out_channels 4"});
  expect_error(
      [] {
        nn::Conv::init(key(), 2, 4, {3, 3}, {.strides = {1, 2, 3}});
      },
      {"rune::nn::Conv", "strides needs 2 values", "[1, 2, 3]"});
  expect_error([] { nn::Conv::init(key(), 2, 4, {3}, {.padding = "FULL"}); },
               {"rune::nn::Conv", "padding", "\"FULL\""});
  expect_error(
      [] {
        nn::Conv::init(key(), 2, 4, {3, 3})(nx::zeros(nx::float32, {2, 2, 5}));
      },
      {"rune::nn::Conv", "4-D", "float32 [2, 2, 5]"});
  expect_error([] { nn::ConvTranspose::init(key(), 2, 4, {3}, {.padding = {-1}}); },
               {"rune::nn::ConvTranspose", "padding must be >= 0", "[-1]"});
  expect_error([] { nn::GroupNorm::init(3, 4); },
               {"rune::nn::GroupNorm", "num_groups 3", "channels 4"});
  expect_error([] { nn::BatchNorm::init(3, {.momentum = 1.5}); },
               {"rune::nn::BatchNorm", "momentum", "1.5"});
  expect_error([] { nn::LayerNorm::init(0); }, {"rune::nn::LayerNorm", "dim", "got 0"});
  expect_error([] { nn::RMSNorm::init(4, {.eps = -1}); }, {"rune::nn::RMSNorm", "eps", "-1"});
  expect_error([] { nn::MLP::init(key(), {3}); }, {"rune::nn::MLP", "at least 2", "[3]"});
  expect_error(
      [] {
        nn::MLP::init(key(), {3, 4}, {.dropout = 1});
      },
      {"rune::nn::MLP", "dropout", "got 1"});
  expect_error([] { nn::MaxPool::init({}); }, {"rune::nn::MaxPool", "window", "[]"});
  expect_error(
      [] {
        nn::Flatten{5}(nx::zeros(nx::float32, {2, 3}));
      },
      {"rune::nn::Flatten", "start 5", "float32 [2, 3]"});
}

}  // namespace
