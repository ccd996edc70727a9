// rune::nn layers (docs/nn.md): each a tree (nn/module.h) with torch's default initialisation,
// built by `Layer::init(key, sizes..., options)` (a fold of the key per tensor: fold_in(key, 0)
// for the weight, fold_in(key, 1) for the bias; the layers without random tensors take no key)
// and applied by `layer(x)` (evaluation) or `layer(x, ctx)` (the mode of nn::Context).
//
// Layouts:
//   Linear          weight [in, out] (y = x @ weight + bias, flax's Dense kernel; torch's weight
//                   is its transpose [out, in]), bias [out]
//   Embedding       weight [num_embeddings, dim]
//   Conv            channels first (torch): x [N, C, spatial...], weight [out, in / groups, k...];
//                   channels last (flax): x [N, spatial..., C], weight [k..., in / groups, out]
//   ConvTranspose   channels first (torch): weight [in, out / groups, k...]; channels last:
//                   weight [k..., in, out / groups]
//   LayerNorm, RMSNorm: over the last axis; BatchNorm: channel axis 1 (or -1, channels_last);
//   GroupNorm: x [N, C, ...]
// Tensors of a layer with a key are created on the key's device; the others (the norms) on the
// default device (nx::default_device()). Move a model with rune::tree_map(nx::place...).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/conv.h"
#include "core/ops.h"
#include "nn/init.h"
#include "nn/module.h"

namespace rune::nn {

// ---- activations ----

enum class Activation { identity, relu, gelu, gelu_tanh, tanh, sigmoid, silu, softplus };
// gelu is torch's exact GELU, x Phi(x) = x (1 + erf(x / sqrt(2))) / 2; gelu_tanh its tanh
// approximation (nx::gelu, jax.nn.gelu's default); silu is x sigmoid(x).
Tensor activate(Activation activation, const Tensor& x);

struct Identity {
  Tensor operator()(const Tensor& x) const { return x; }
};
struct ReLU {
  Tensor operator()(const Tensor& x) const { return activate(Activation::relu, x); }
};
struct GELU {
  bool approximate = false;  // true: the tanh approximation (torch's approximate='tanh')
  Tensor operator()(const Tensor& x) const {
    return activate(approximate ? Activation::gelu_tanh : Activation::gelu, x);
  }
};
struct Tanh {
  Tensor operator()(const Tensor& x) const { return activate(Activation::tanh, x); }
};
struct Sigmoid {
  Tensor operator()(const Tensor& x) const { return activate(Activation::sigmoid, x); }
};
struct SiLU {
  Tensor operator()(const Tensor& x) const { return activate(Activation::silu, x); }
};
// torch.nn.Flatten(start_dim): the axes from `start` on become one.
struct Flatten {
  int64_t start = 1;
  Tensor operator()(const Tensor& x) const;
};

// ---- Linear, Embedding ----

struct LinearOptions {
  bool bias = true;
  init::Initializer weight_init;  // empty: torch's kaiming_uniform(a = sqrt(5)), U(+-1/sqrt(in))
  init::Initializer bias_init;    // empty: torch's U(-1/sqrt(in), 1/sqrt(in))
  nx::DType dtype = nx::float32;
};
// torch.nn.Linear: y = x @ weight + bias over x's last axis (x [..., in] -> [..., out]).
struct Linear {
  Tensor weight;               // [in, out]
  std::optional<Tensor> bias;  // [out]
  static Linear init(const Tensor& key, int64_t in_features, int64_t out_features,
                     const LinearOptions& options = {});
  int64_t in_features() const { return weight.shape()[0]; }
  int64_t out_features() const { return weight.shape()[1]; }
  Tensor operator()(const Tensor& x) const;
};

struct EmbeddingOptions {
  init::Initializer weight_init;  // empty: torch's N(0, 1)
  nx::DType dtype = nx::float32;
};
// torch.nn.Embedding: rows of weight at integer indices (ids [...] -> [..., dim]; out-of-range
// ids clamp, as nx::take).
struct Embedding {
  Tensor weight;  // [num_embeddings, dim]
  static Embedding init(const Tensor& key, int64_t num_embeddings, int64_t dim,
                        const EmbeddingOptions& options = {});
  Tensor operator()(const Tensor& ids) const;
};

// ---- normalisation ----

struct LayerNormOptions {
  double eps = 1e-5;
  bool bias = true;
  nx::DType dtype = nx::float32;
};
// torch.nn.LayerNorm(dim) over the last axis (nx::nn::layer_norm): weight ones, bias zeros.
struct LayerNorm {
  Tensor weight;               // [dim]
  std::optional<Tensor> bias;  // [dim]
  Static<double> eps;
  static LayerNorm init(int64_t dim, const LayerNormOptions& options = {});
  Tensor operator()(const Tensor& x) const;
};

struct RMSNormOptions {
  double eps = 1e-6;  // flax's default (torch's None means the dtype's epsilon)
  nx::DType dtype = nx::float32;
};
// torch.nn.RMSNorm(dim) over the last axis (nx::nn::rms_norm): weight ones.
struct RMSNorm {
  Tensor weight;  // [dim]
  Static<double> eps;
  static RMSNorm init(int64_t dim, const RMSNormOptions& options = {});
  Tensor operator()(const Tensor& x) const;
};

struct BatchNormOptions {
  double momentum = 0.1;
  double eps = 1e-5;
  bool channels_last = false;  // the channel axis: false 1 (NC...), true -1 (N...C)
  nx::DType dtype = nx::float32;
};
// torch.nn.BatchNorm1d/2d/3d (nx::nn::batch_norm): weight ones, bias zeros, running_mean
// zeros, running_var ones (buffers: not parameters, see nn::is_buffer). layer(x) and evaluation
// normalise with the running statistics; training (ctx.training()) with the batch's, and records
// the new running statistics in ctx (ctx.updated(model) puts them in the model).
struct BatchNorm {
  Tensor weight, bias;               // [C]
  Tensor running_mean, running_var;  // [C]
  Static<double> momentum, eps;
  bool channels_last = false;
  static BatchNorm init(int64_t channels, const BatchNormOptions& options = {});
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, Context& ctx) const;
};

struct GroupNormOptions {
  double eps = 1e-5;
  nx::DType dtype = nx::float32;
};
// torch.nn.GroupNorm(num_groups, channels) (nx::nn::group_norm): x [N, C, ...], weight ones,
// bias zeros.
struct GroupNorm {
  Tensor weight, bias;  // [C]
  int64_t num_groups = 1;
  Static<double> eps;
  static GroupNorm init(int64_t num_groups, int64_t channels, const GroupNormOptions& options = {});
  Tensor operator()(const Tensor& x) const;
};

// torch.nn.Dropout(rate): in training, each element zeroed with probability `rate` and the rest
// scaled by 1 / (1 - rate) (nx::random::dropout with ctx.next_key()); the identity otherwise.
struct Dropout {
  Static<double> rate;
  static Dropout init(double rate);  // rate in [0, 1)
  Tensor operator()(const Tensor& x) const { return x; }
  Tensor operator()(const Tensor& x, Context& ctx) const;
};

// ---- convolutions and pooling ----

// A convolution's static arguments (one value per spatial dimension).
struct ConvSpec {
  std::vector<int64_t> strides, dilation;
  std::vector<std::pair<int64_t, int64_t>> padding;  // explicit (lo, hi) pairs
  bool same = false;                                 // JAX's "SAME" instead of `padding`
  int64_t groups = 1;
  bool channels_last = false;
};

struct ConvOptions {
  std::vector<int64_t> strides;   // empty: 1 per spatial dimension
  nx::Padding padding = "VALID";  // "VALID", "SAME" or (lo, hi) pairs (torch's padding=p: {p, p})
  std::vector<int64_t> dilation;  // empty: 1
  int64_t groups = 1;
  bool bias = true;
  bool channels_last = false;
  init::Initializer weight_init;  // empty: torch's kaiming_uniform(a = sqrt(5))
  init::Initializer bias_init;    // empty: torch's U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  nx::DType dtype = nx::float32;
};
// torch.nn.Conv1d/2d/3d (nx::conv): kernel_size has 1 to 3 extents; fan_in = in / groups *
// prod(kernel_size).
struct Conv {
  Tensor weight;               // [out, in / groups, k...] or channels last [k..., in / groups, out]
  std::optional<Tensor> bias;  // [out]
  ConvSpec spec;
  static Conv init(const Tensor& key, int64_t in_channels, int64_t out_channels,
                   const std::vector<int64_t>& kernel_size, const ConvOptions& options = {});
  Tensor operator()(const Tensor& x) const;
};

struct ConvTransposeSpec {
  std::vector<int64_t> strides, padding, output_padding, dilation;
  int64_t groups = 1;
  bool channels_last = false;
};
struct ConvTransposeOptions {
  std::vector<int64_t> strides, padding, output_padding, dilation;  // empty: 1, 0, 0, 1
  int64_t groups = 1;
  bool bias = true;
  bool channels_last = false;
  init::Initializer weight_init;  // empty: torch's kaiming_uniform(a = sqrt(5)) (see below)
  init::Initializer bias_init;    // empty: torch's U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  nx::DType dtype = nx::float32;
};
// torch.nn.ConvTranspose1d/2d/3d (nx::conv_transpose). torch's default initialisation takes
// fan_in from the weight's dimension 1, so here fan_in = out / groups * prod(kernel_size).
struct ConvTranspose {
  Tensor weight;               // [in, out / groups, k...] or channels last [k..., in, out / groups]
  std::optional<Tensor> bias;  // [out]
  ConvTransposeSpec spec;
  static ConvTranspose init(const Tensor& key, int64_t in_channels, int64_t out_channels,
                            const std::vector<int64_t>& kernel_size,
                            const ConvTransposeOptions& options = {});
  Tensor operator()(const Tensor& x) const;
};

struct PoolSpec {
  std::vector<int64_t> window, strides;
  std::vector<std::pair<int64_t, int64_t>> padding;
  bool same = false;
  bool channels_last = false;
  bool count_include_pad = true;
};
struct PoolOptions {
  std::vector<int64_t> strides;  // empty: the window (torch's default)
  nx::Padding padding = "VALID";
  bool channels_last = false;
  bool count_include_pad = true;  // AvgPool: divide by the window's extent (torch's default)
};
// torch.nn.MaxPool1d/2d/3d and AvgPool1d/2d/3d (nx::nn::max_pool, avg_pool) over the spatial
// dimensions of x [N, C, spatial...] (channels last: [N, spatial..., C]).
struct MaxPool {
  PoolSpec spec;
  static MaxPool init(const std::vector<int64_t>& window, const PoolOptions& options = {});
  Tensor operator()(const Tensor& x) const;
};
struct AvgPool {
  PoolSpec spec;
  static AvgPool init(const std::vector<int64_t>& window, const PoolOptions& options = {});
  Tensor operator()(const Tensor& x) const;
};

// ---- MLP ----

struct MLPOptions {
  Activation activation = Activation::relu;            // after each hidden layer
  Activation final_activation = Activation::identity;  // after the last layer
  double dropout = 0;    // after each hidden activation, in training (a Dropout's rate)
  LinearOptions linear;  // each Linear's (bias, initialisers, dtype)
};
// Linear layers of sizes[0] -> sizes[1] -> ... -> sizes.back() (at least two sizes), the
// activation between them (equinox.nn.MLP's shape; layer i's key is fold_in(key, i)).
struct MLP {
  std::vector<Linear> layers;
  Static<Activation> activation, final_activation;
  Static<double> dropout;
  static MLP init(const Tensor& key, const std::vector<int64_t>& sizes,
                  const MLPOptions& options = {});
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, Context& ctx) const;
};

}  // namespace rune::nn

RUNE_NN_STATELESS(rune::nn::Identity)
RUNE_NN_STATELESS(rune::nn::ReLU)
RUNE_NN_STATELESS(rune::nn::Tanh)
RUNE_NN_STATELESS(rune::nn::Sigmoid)
RUNE_NN_STATELESS(rune::nn::SiLU)
RUNE_TREE(rune::nn::GELU, approximate)
RUNE_TREE(rune::nn::Flatten, start)
RUNE_TREE(rune::nn::Linear, weight, bias)
RUNE_TREE(rune::nn::Embedding, weight)
RUNE_TREE(rune::nn::LayerNorm, weight, bias, eps)
RUNE_TREE(rune::nn::RMSNorm, weight, eps)
RUNE_TREE(rune::nn::BatchNorm, weight, bias, running_mean, running_var, momentum, eps,
          channels_last)
RUNE_TREE(rune::nn::GroupNorm, weight, bias, num_groups, eps)
RUNE_TREE(rune::nn::Dropout, rate)
RUNE_TREE(rune::nn::ConvSpec, strides, dilation, padding, same, groups, channels_last)
RUNE_TREE(rune::nn::Conv, weight, bias, spec)
RUNE_TREE(rune::nn::ConvTransposeSpec, strides, padding, output_padding, dilation, groups,
          channels_last)
RUNE_TREE(rune::nn::ConvTranspose, weight, bias, spec)
RUNE_TREE(rune::nn::PoolSpec, window, strides, padding, same, channels_last, count_include_pad)
RUNE_TREE(rune::nn::MaxPool, spec)
RUNE_TREE(rune::nn::AvgPool, spec)
RUNE_TREE(rune::nn::MLP, layers, activation, final_activation, dropout)
