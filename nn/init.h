// rune::nn::init: parameter initialisers that draw from a key (flax.linen.initializers,
// torch.nn.init), docs/nn.md. An Initializer is a value: init(key, shape, dtype) is a tensor of
// `shape` and the float `dtype` on the key's device, a function of the key alone (the same bits
// eagerly and under rune::jit, on every device: the draws are nx::random's counter-based ones).
//
// Fans (torch.nn.init._calculate_fan_in_and_fan_out, flax's variance_scaling in_axis/out_axis):
// for a tensor of rank >= 2, fan_in = shape[in] * receptive and fan_out = shape[out] * receptive,
// where receptive is the product of every other dimension (a convolution kernel's window).
// FanAxes says which dimensions are in and out:
//   FanAxes{}            in = -2, out = -1: rune::nn::Linear's [in, out] weight and channels-last
//                        kernels [k..., in, out] (flax's Dense and Conv kernels, HWIO)
//   FanAxes::torch()     in = 1, out = 0: torch's [out, in] Linear weight and channels-first
//                        kernels [out, in, k...] (OIHW), torch's own rule
// so FanAxes::torch() on [out, in, kh, kw] and FanAxes{} on [kh, kw, in, out] give the same fans.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "core/ops.h"

namespace rune::nn::init {

struct FanAxes {
  int in = -2;
  int out = -1;
  static FanAxes torch() { return {1, 0}; }
};

struct Fans {
  int64_t in = 0, out = 0;
};
// fan_in and fan_out of `shape` (rank >= 2, in != out). Raises std::invalid_argument naming the
// shape and the axes otherwise.
Fans fans(const nx::Shape& shape, FanAxes axes = {});

enum class FanMode { fan_in, fan_out, fan_avg };  // fan_avg: (fan_in + fan_out) / 2
enum class Distribution { normal, truncated_normal, uniform };
enum class Nonlinearity { linear, conv, sigmoid, tanh, relu, leaky_relu, selu };

// torch.nn.init.calculate_gain: linear, conv and sigmoid 1, tanh 5/3, relu sqrt(2),
// leaky_relu sqrt(2 / (1 + slope^2)) (slope: `param`, torch's default 0.01), selu 3/4.
double gain(Nonlinearity nonlinearity, double param = 0.01);

// A parameter initialiser: (key, shape, dtype) -> tensor. `name` prefixes its error messages.
class Initializer {
 public:
  using Fn = std::function<nx::Tensor(const nx::Tensor& key, const nx::Shape& shape, nx::DType t)>;
  Initializer() = default;
  Initializer(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  // key: an nx::random key (uint32 [2]); dtype: a float dtype. The result is on key's device.
  nx::Tensor operator()(const nx::Tensor& key, const nx::Shape& shape,
                        nx::DType dtype = nx::float32) const;
  explicit operator bool() const { return static_cast<bool>(fn_); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Fn fn_;
};

// Constants (the key only places the result): torch.nn.init.zeros_ / ones_ / constant_.
Initializer zeros();
Initializer ones();
Initializer constant(double value);

// N(mean, stddev^2) (torch.nn.init.normal_(mean, std); flax's normal(stddev)). stddev >= 0.
Initializer normal(double stddev = 1, double mean = 0);
// The normal N(mean, stddev^2) truncated to [mean + lower * stddev, mean + upper * stddev]
// (bounds in units of stddev, flax's truncated_normal; torch.nn.init.trunc_normal_(mean, std,
// a = mean + lower * std, b = mean + upper * std)): inverse-CDF sampling as
// jax.random.truncated_normal, at float64. stddev is the untruncated normal's (the draws' own
// standard deviation is smaller: 0.8796 stddev for +-2). lower < upper.
Initializer truncated_normal(double stddev = 1, double lower = -2, double upper = 2,
                             double mean = 0);
// U[low, high) (torch.nn.init.uniform_(a, b)). low < high.
Initializer uniform(double low = 0, double high = 1);

// flax's variance_scaling: variance = scale / fan (fan by `mode` and `axes`);
//   normal:           N(0, variance)
//   truncated_normal: N(0, variance / 0.87962566103423978^2) truncated to +-2 of its stddev
//                     (the draws have the target variance)
//   uniform:          U[-sqrt(3 variance), sqrt(3 variance))
Initializer variance_scaling(double scale, FanMode mode, Distribution distribution,
                             FanAxes axes = {});

// torch.nn.init.xavier_uniform_ / xavier_normal_ (Glorot & Bengio 2010): bound
// gain sqrt(6 / (fan_in + fan_out)) / stddev gain sqrt(2 / (fan_in + fan_out)) (an untruncated
// normal, as torch; flax's glorot_normal truncates: variance_scaling(1, fan_avg,
// truncated_normal)).
Initializer glorot_uniform(double gain = 1, FanAxes axes = {});
Initializer glorot_normal(double gain = 1, FanAxes axes = {});
inline Initializer xavier_uniform(double g = 1, FanAxes axes = {}) {
  return glorot_uniform(g, axes);
}
inline Initializer xavier_normal(double g = 1, FanAxes axes = {}) { return glorot_normal(g, axes); }

// torch.nn.init.kaiming_uniform_ / kaiming_normal_ (He et al. 2015), torch's defaults:
// gain = gain(nonlinearity, a), bound gain sqrt(3 / fan) / stddev gain / sqrt(fan), fan by `mode`
// (fan_in or fan_out). kaiming_uniform(sqrt(5)) is torch's Linear and Conv weight default,
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Initializer kaiming_uniform(double a = 0, FanMode mode = FanMode::fan_in,
                            Nonlinearity nonlinearity = Nonlinearity::leaky_relu,
                            FanAxes axes = {});
Initializer kaiming_normal(double a = 0, FanMode mode = FanMode::fan_in,
                           Nonlinearity nonlinearity = Nonlinearity::leaky_relu, FanAxes axes = {});
// He initialisation for ReLU: kaiming_*(0, fan_in, relu), variance 2 / fan_in (an untruncated
// normal; flax's he_normal truncates).
inline Initializer he_uniform(FanAxes axes = {}) {
  return kaiming_uniform(0, FanMode::fan_in, Nonlinearity::relu, axes);
}
inline Initializer he_normal(FanAxes axes = {}) {
  return kaiming_normal(0, FanMode::fan_in, Nonlinearity::relu, axes);
}
// LeCun: variance 1 / fan_in (flax's lecun_uniform; lecun_normal here is the untruncated
// normal, flax's truncates).
Initializer lecun_uniform(FanAxes axes = {});
Initializer lecun_normal(FanAxes axes = {});

}  // namespace rune::nn::init
