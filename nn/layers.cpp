// rune::nn layers (nn/layers.h) and the shared parts of nn/module.h.
#include "nn/layers.h"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <stdexcept>
#include <string>

#include "core/nn.h"
#include "core/random.h"
#include "core/window.h"
#include "ir/shape.h"
#include "nn/errors.h"

namespace rune::nn {

namespace {

using detail::fail;
using detail::num;

std::string ints(const std::vector<int64_t>& v) { return ir::to_string(v); }

void positive(const std::string& api, const char* what, int64_t v) {
  if (v <= 0) fail(api, std::string(what) + " must be positive, got " + std::to_string(v));
}

void float_dtype(const std::string& api, nx::DType t) {
  if (!ir::is_float(t)) fail(api, "dtype must be a float type, got " + std::string(ir::name(t)));
}

void eps_ok(const std::string& api, double eps) {
  if (!(eps >= 0) || !std::isfinite(eps)) fail(api, "eps must be finite and >= 0, got " + num(eps));
}

Tensor sub_key(const Tensor& key, uint32_t i) { return nx::random::fold_in(key, i); }

// A vector of one value per spatial dimension: `v` or, when empty, `fill` each.
std::vector<int64_t> per_dim(const std::string& api, const char* what,
                             const std::vector<int64_t>& v, size_t n, int64_t fill, int64_t min) {
  if (v.empty()) return std::vector<int64_t>(n, fill);
  if (v.size() != n)
    fail(api, std::string(what) + " needs " + std::to_string(n) + " values (one per spatial " +
                  "dimension), got " + ints(v));
  for (int64_t x : v)
    if (x < min)
      fail(api, std::string(what) + " must be >= " + std::to_string(min) + ", got " + ints(v));
  return v;
}

// Explicit padding pairs (and the SAME flag) from an nx::Padding for n spatial dimensions.
std::pair<std::vector<std::pair<int64_t, int64_t>>, bool> resolve_padding(const std::string& api,
                                                                          const nx::Padding& p,
                                                                          size_t n) {
  if (p.mode.empty()) {
    if (p.pairs.size() != n)
      fail(api, "padding needs " + std::to_string(n) + " (lo, hi) pairs (one per spatial " +
                    "dimension), got " + std::to_string(p.pairs.size()));
    return {p.pairs, false};
  }
  if (p.mode == "VALID" || p.mode == "valid")
    return {std::vector<std::pair<int64_t, int64_t>>(n, {0, 0}), false};
  if (p.mode == "SAME" || p.mode == "same") return {{}, true};
  fail(api, "padding must be \"VALID\", \"SAME\" or (lo, hi) pairs, got \"" + p.mode + "\"");
}

// "NCHW"-style layout names for n = 1..3 spatial dimensions.
std::string layout(size_t n, bool channels_last) {
  static const char* letters[] = {"", "W", "HW", "DHW"};
  std::string s = letters[n];
  return channels_last ? "N" + s + "C" : "NC" + s;
}

void check_rank(const std::string& api, const Tensor& x, size_t spatial) {
  if (x.shape().size() != spatial + 2)
    fail(api, "x must be " + std::to_string(spatial + 2) + "-D (" + layout(spatial, false) +
                  " or " + layout(spatial, true) + "), got " + x.describe());
}

Tensor bias_shaped(const Tensor& bias, size_t spatial, bool channels_last) {
  if (channels_last) return bias;
  nx::Shape s(spatial + 2, 1);
  s[1] = bias.shape()[0];
  return nx::reshape(bias, s);
}

// torch's default weight (kaiming_uniform(a = sqrt(5)), U(+-1/sqrt(fan_in))) and bias
// (U(+-1/sqrt(fan_in))) for a weight of `shape` whose fans are read along `axes`.
Tensor torch_weight(const Tensor& key, const nx::Shape& shape, nx::DType t, init::FanAxes axes) {
  return init::kaiming_uniform(std::sqrt(5.0), init::FanMode::fan_in,
                               init::Nonlinearity::leaky_relu, axes)(key, shape, t);
}
Tensor torch_bias(const Tensor& key, int64_t n, int64_t fan_in, nx::DType t) {
  const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
  return init::uniform(-bound, bound)(key, {n}, t);
}

// A layer's weight (shape ws, fans read along `axes`) and bias ([out], when the options ask for
// one): the options' initialisers, else torch's defaults (Linear, Conv and ConvTranspose, whose
// options carry the same fields).
template <class Layer, class Options>
void init_weight_and_bias(Layer& c, const Tensor& key, const nx::Shape& ws, int64_t out,
                          const init::FanAxes& axes, const Options& o) {
  c.weight = o.weight_init ? o.weight_init(sub_key(key, 0), ws, o.dtype)
                           : torch_weight(sub_key(key, 0), ws, o.dtype, axes);
  if (o.bias)
    c.bias = o.bias_init ? o.bias_init(sub_key(key, 1), {out}, o.dtype)
                         : torch_bias(sub_key(key, 1), out, init::fans(ws, axes).in, o.dtype);
}

}  // namespace

// ---- nn/module.h ----

Context Context::train(std::optional<Tensor> key) {
  Context c;
  c.training_ = true;
  c.key_ = std::move(key);
  return c;
}

Tensor Context::next_key(const char* api) {
  if (!key_) fail(api, "a training pass with dropout needs a key: rune::nn::Context::train(key)");
  return nx::random::fold_in(*key_, count_++);
}

const Context::Update* Context::find(const Tensor& mean) const {
  for (const Update& u : updates_)
    if (u.mean == mean.impl_ptr()) return &u;
  return nullptr;
}

nx::nn::BatchNormState Context::running_stats(const Tensor& mean, const Tensor& var) const {
  if (const Update* u = find(mean)) return u->state;
  return {mean, var};
}

void Context::record(const Tensor& mean, const Tensor& var, const nx::nn::BatchNormState& s) {
  for (Update& u : updates_)
    if (u.mean == mean.impl_ptr()) {
      u.state = s;
      return;
    }
  updates_.push_back({mean.impl_ptr(), var.impl_ptr(), s});
}

bool is_buffer(const std::string& path) {
  auto ends = [&](const std::string& s) {
    return path == s ||
           (path.size() > s.size() && path.compare(path.size() - s.size(), s.size(), s) == 0 &&
            path[path.size() - s.size() - 1] == '.');
  };
  return ends("running_mean") || ends("running_var");
}

// ---- activations ----

Tensor activate(Activation a, const Tensor& x) {
  switch (a) {
    case Activation::identity:
      return x;
    case Activation::relu:
      return nx::relu(x);
    case Activation::gelu:
      return x * (nx::erf(x * (1 / std::numbers::sqrt2)) + 1.0) * 0.5;
    case Activation::gelu_tanh:
      return nx::gelu(x);
    case Activation::tanh:
      return nx::tanh(x);
    case Activation::sigmoid:
      return nx::sigmoid(x);
    case Activation::silu:
      return x * nx::sigmoid(x);
    case Activation::softplus:
      return nx::softplus(x);
  }
  fail("rune::nn::activate", "unknown activation " + std::to_string(static_cast<int>(a)));
}

Tensor Flatten::operator()(const Tensor& x) const {
  const int r = static_cast<int>(x.shape().size());
  const int64_t s = start < 0 ? start + r : start;
  if (s < 0 || s >= std::max(r, 1))
    fail("rune::nn::Flatten",
         "start " + std::to_string(start) + " is out of range for " + x.describe());
  nx::Shape out(x.shape().begin(), x.shape().begin() + s);
  out.push_back(-1);
  return nx::reshape(x, out);
}

// ---- Linear, Embedding ----

Linear Linear::init(const Tensor& key, int64_t in, int64_t out, const LinearOptions& o) {
  const std::string api = "rune::nn::Linear";
  positive(api, "in_features", in);
  positive(api, "out_features", out);
  float_dtype(api, o.dtype);
  Linear l;
  init_weight_and_bias(l, key, {in, out}, out, init::FanAxes{}, o);  // fan_in = in
  return l;
}

Tensor Linear::operator()(const Tensor& x) const {
  const std::string api = "rune::nn::Linear";
  const int64_t in = weight.shape()[0];
  if (x.shape().empty() || x.shape().back() != in)
    fail(api,
         "x's last dimension must be in_features " + std::to_string(in) + ", got " + x.describe());
  nx::Shape s = x.shape();
  s.back() = weight.shape()[1];
  Tensor y = nx::matmul(nx::reshape(x, {-1, in}), weight);
  if (bias) y = y + *bias;
  return nx::reshape(y, s);
}

Embedding Embedding::init(const Tensor& key, int64_t n, int64_t dim, const EmbeddingOptions& o) {
  const std::string api = "rune::nn::Embedding";
  positive(api, "num_embeddings", n);
  positive(api, "dim", dim);
  float_dtype(api, o.dtype);
  const init::Initializer& w = o.weight_init ? o.weight_init : init::normal(1);
  return Embedding{w(sub_key(key, 0), {n, dim}, o.dtype)};
}

Tensor Embedding::operator()(const Tensor& ids) const {
  if (!ir::is_int(ids.dtype()))
    fail("rune::nn::Embedding", "ids must be integers, got " + ids.describe());
  return nx::take(weight, ids, 0);
}

// ---- normalisation ----

LayerNorm LayerNorm::init(int64_t dim, const LayerNormOptions& o) {
  const std::string api = "rune::nn::LayerNorm";
  positive(api, "dim", dim);
  float_dtype(api, o.dtype);
  eps_ok(api, o.eps);
  LayerNorm l;
  l.weight = nx::ones(o.dtype, {dim});
  if (o.bias) l.bias = nx::zeros(o.dtype, {dim});
  l.eps = o.eps;
  return l;
}

Tensor LayerNorm::operator()(const Tensor& x) const {
  return nx::nn::layer_norm(x, weight, bias ? *bias : nx::zeros_like(weight), eps, -1);
}

RMSNorm RMSNorm::init(int64_t dim, const RMSNormOptions& o) {
  const std::string api = "rune::nn::RMSNorm";
  positive(api, "dim", dim);
  float_dtype(api, o.dtype);
  eps_ok(api, o.eps);
  return RMSNorm{nx::ones(o.dtype, {dim}), o.eps};
}

Tensor RMSNorm::operator()(const Tensor& x) const { return nx::nn::rms_norm(x, weight, eps); }

BatchNorm BatchNorm::init(int64_t channels, const BatchNormOptions& o) {
  const std::string api = "rune::nn::BatchNorm";
  positive(api, "channels", channels);
  float_dtype(api, o.dtype);
  eps_ok(api, o.eps);
  if (!(o.momentum >= 0 && o.momentum <= 1))
    fail(api, "momentum must be in [0, 1], got " + num(o.momentum));
  auto s = nx::nn::batch_norm_state(channels, o.dtype);
  return BatchNorm{nx::ones(o.dtype, {channels}),
                   nx::zeros(o.dtype, {channels}),
                   s.mean,
                   s.var,
                   o.momentum,
                   o.eps,
                   o.channels_last};
}

Tensor BatchNorm::operator()(const Tensor& x) const {
  nx::nn::BatchNormOptions o{.axis = channels_last ? -1 : 1, .momentum = momentum, .eps = eps};
  return nx::nn::batch_norm_inference(x, weight, bias, {running_mean, running_var}, o);
}

Tensor BatchNorm::operator()(const Tensor& x, Context& ctx) const {
  if (!ctx.training()) return (*this)(x);
  nx::nn::BatchNormOptions o{.axis = channels_last ? -1 : 1, .momentum = momentum, .eps = eps};
  nx::nn::BatchNormOutput out =
      nx::nn::batch_norm(x, weight, bias, ctx.running_stats(running_mean, running_var), o);
  ctx.record(running_mean, running_var, out.state);
  return out.y;
}

GroupNorm GroupNorm::init(int64_t groups, int64_t channels, const GroupNormOptions& o) {
  const std::string api = "rune::nn::GroupNorm";
  positive(api, "num_groups", groups);
  positive(api, "channels", channels);
  if (channels % groups != 0)
    fail(api, "num_groups " + std::to_string(groups) + " must divide channels " +
                  std::to_string(channels));
  float_dtype(api, o.dtype);
  eps_ok(api, o.eps);
  return GroupNorm{nx::ones(o.dtype, {channels}), nx::zeros(o.dtype, {channels}), groups, o.eps};
}

Tensor GroupNorm::operator()(const Tensor& x) const {
  return nx::nn::group_norm(x, num_groups, weight, bias, eps);
}

Dropout Dropout::init(double rate) {
  if (!(rate >= 0 && rate < 1))
    fail("rune::nn::Dropout", "rate must be in [0, 1), got " + num(rate));
  return Dropout{rate};
}

Tensor Dropout::operator()(const Tensor& x, Context& ctx) const {
  const char* api = "rune::nn::Dropout";
  if (!(rate >= 0 && rate < 1)) fail(api, "rate must be in [0, 1), got " + num(rate));
  if (!ctx.training() || rate == 0) return x;
  return nx::random::dropout(ctx.next_key(api), x, rate);
}

// ---- convolutions and pooling ----

namespace {
// The sizes both convolution layers take: channels, groups dividing them, 1 to 3 kernel extents
// (`kinds` names the layers those counts make), a float dtype.
void check_conv_sizes(const std::string& api, const char* kinds, int64_t in, int64_t out,
                      const std::vector<int64_t>& k, int64_t groups, nx::DType dtype) {
  positive(api, "in_channels", in);
  positive(api, "out_channels", out);
  positive(api, "groups", groups);
  if (k.empty() || k.size() > 3)
    fail(api, "kernel_size needs 1 to 3 extents (" + std::string(kinds) + "), got " + ints(k));
  for (int64_t e : k)
    if (e <= 0) fail(api, "kernel_size must be positive, got " + ints(k));
  if (in % groups || out % groups)
    fail(api, "groups " + std::to_string(groups) + " must divide in_channels " +
                  std::to_string(in) + " and out_channels " + std::to_string(out));
  float_dtype(api, dtype);
}
}  // namespace

Conv Conv::init(const Tensor& key, int64_t in, int64_t out, const std::vector<int64_t>& k,
                const ConvOptions& o) {
  const std::string api = "rune::nn::Conv";
  check_conv_sizes(api, "Conv1d to Conv3d", in, out, k, o.groups, o.dtype);
  const size_t n = k.size();
  Conv c;
  c.spec.strides = per_dim(api, "strides", o.strides, n, 1, 1);
  c.spec.dilation = per_dim(api, "dilation", o.dilation, n, 1, 1);
  std::tie(c.spec.padding, c.spec.same) = resolve_padding(api, o.padding, n);
  c.spec.groups = o.groups;
  c.spec.channels_last = o.channels_last;
  nx::Shape ws;
  if (o.channels_last) {
    ws = k;
    ws.push_back(in / o.groups);
    ws.push_back(out);
  } else {
    ws = {out, in / o.groups};
    ws.insert(ws.end(), k.begin(), k.end());
  }
  const init::FanAxes axes = o.channels_last ? init::FanAxes{} : init::FanAxes::torch();
  init_weight_and_bias(c, key, ws, out, axes, o);
  return c;
}

Tensor Conv::operator()(const Tensor& x) const {
  const size_t n = spec.strides.size();
  check_rank("rune::nn::Conv", x, n);
  nx::ConvOptions o;
  o.strides = spec.strides;
  o.rhs_dilation = spec.dilation;
  o.padding = spec.same ? nx::Padding("SAME") : nx::Padding(spec.padding);
  o.feature_groups = spec.groups;
  o.layout = layout(n, spec.channels_last);
  Tensor y = nx::conv(x, weight, o);
  if (bias) y = y + bias_shaped(*bias, n, spec.channels_last);
  return y;
}

ConvTranspose ConvTranspose::init(const Tensor& key, int64_t in, int64_t out,
                                  const std::vector<int64_t>& k, const ConvTransposeOptions& o) {
  const std::string api = "rune::nn::ConvTranspose";
  check_conv_sizes(api, "ConvTranspose1d to 3d", in, out, k, o.groups, o.dtype);
  const size_t n = k.size();
  ConvTranspose c;
  c.spec.strides = per_dim(api, "strides", o.strides, n, 1, 1);
  c.spec.padding = per_dim(api, "padding", o.padding, n, 0, 0);
  c.spec.output_padding = per_dim(api, "output_padding", o.output_padding, n, 0, 0);
  c.spec.dilation = per_dim(api, "dilation", o.dilation, n, 1, 1);
  c.spec.groups = o.groups;
  c.spec.channels_last = o.channels_last;
  nx::Shape ws;
  if (o.channels_last) {
    ws = k;
    ws.push_back(in);
    ws.push_back(out / o.groups);
  } else {
    ws = {in, out / o.groups};
    ws.insert(ws.end(), k.begin(), k.end());
  }
  // torch reads fan_in from the weight's dimension 1 (out / groups) times the window.
  const init::FanAxes axes = o.channels_last ? init::FanAxes{-1, -2} : init::FanAxes::torch();
  init_weight_and_bias(c, key, ws, out, axes, o);
  return c;
}

Tensor ConvTranspose::operator()(const Tensor& x) const {
  const size_t n = spec.strides.size();
  check_rank("rune::nn::ConvTranspose", x, n);
  nx::ConvTransposeOptions o;
  o.strides = spec.strides;
  o.padding = spec.padding;
  o.output_padding = spec.output_padding;
  o.dilation = spec.dilation;
  o.groups = spec.groups;
  o.layout = layout(n, spec.channels_last);
  Tensor y = nx::conv_transpose(x, weight, o);
  if (bias) y = y + bias_shaped(*bias, n, spec.channels_last);
  return y;
}

namespace {
PoolSpec pool_spec(const std::string& api, const std::vector<int64_t>& window,
                   const PoolOptions& o) {
  if (window.empty() || window.size() > 3)
    fail(api, "window needs 1 to 3 extents, got " + ints(window));
  for (int64_t e : window)
    if (e <= 0) fail(api, "window must be positive, got " + ints(window));
  PoolSpec s;
  s.window = window;
  s.strides = o.strides.empty() ? window : per_dim(api, "strides", o.strides, window.size(), 1, 1);
  std::tie(s.padding, s.same) = resolve_padding(api, o.padding, window.size());
  s.channels_last = o.channels_last;
  s.count_include_pad = o.count_include_pad;
  return s;
}
nx::nn::PoolOptions pool_options(const PoolSpec& s) {
  nx::nn::PoolOptions o;
  o.strides = s.strides;
  o.padding = s.same ? nx::Padding("SAME") : nx::Padding(s.padding);
  o.count_include_pad = s.count_include_pad;
  o.layout = layout(s.window.size(), s.channels_last);
  return o;
}
}  // namespace

MaxPool MaxPool::init(const std::vector<int64_t>& window, const PoolOptions& o) {
  return MaxPool{pool_spec("rune::nn::MaxPool", window, o)};
}
Tensor MaxPool::operator()(const Tensor& x) const {
  check_rank("rune::nn::MaxPool", x, spec.window.size());
  return nx::nn::max_pool(x, spec.window, pool_options(spec));
}
AvgPool AvgPool::init(const std::vector<int64_t>& window, const PoolOptions& o) {
  return AvgPool{pool_spec("rune::nn::AvgPool", window, o)};
}
Tensor AvgPool::operator()(const Tensor& x) const {
  check_rank("rune::nn::AvgPool", x, spec.window.size());
  return nx::nn::avg_pool(x, spec.window, pool_options(spec));
}

// ---- MLP ----

MLP MLP::init(const Tensor& key, const std::vector<int64_t>& sizes, const MLPOptions& o) {
  const std::string api = "rune::nn::MLP";
  if (sizes.size() < 2)
    fail(api, "sizes needs at least 2 entries (in and out), got " + ints(sizes));
  for (int64_t s : sizes)
    if (s <= 0) fail(api, "sizes must be positive, got " + ints(sizes));
  if (!(o.dropout >= 0 && o.dropout < 1))
    fail(api, "dropout must be in [0, 1), got " + num(o.dropout));
  MLP m;
  for (size_t i = 0; i + 1 < sizes.size(); ++i)
    m.layers.push_back(
        Linear::init(sub_key(key, static_cast<uint32_t>(i)), sizes[i], sizes[i + 1], o.linear));
  m.activation = o.activation;
  m.final_activation = o.final_activation;
  m.dropout = o.dropout;
  return m;
}

Tensor MLP::operator()(const Tensor& x) const {
  Context ctx;
  return (*this)(x, ctx);
}

Tensor MLP::operator()(const Tensor& x, Context& ctx) const {
  Tensor h = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    h = layers[i](h);
    if (i + 1 < layers.size()) {
      h = activate(activation, h);
      h = Dropout{dropout}(h, ctx);
    } else {
      h = activate(final_activation, h);
    }
  }
  return h;
}

}  // namespace rune::nn
