// rune::nn::init (nn/init.h): each initialiser as a composition of nx::random draws and nx ops.
#include "nn/init.h"

#include <cmath>
#include <initializer_list>
#include <numbers>
#include <stdexcept>
#include <string>

#include "core/random.h"
#include "ir/shape.h"
#include "nn/errors.h"

namespace rune::nn::init {

namespace {

using nx::Tensor;

using detail::fail;
using detail::num;

const char* mode_name(FanMode m) {
  switch (m) {
    case FanMode::fan_in:
      return "fan_in";
    case FanMode::fan_out:
      return "fan_out";
    default:
      return "fan_avg";
  }
}

// The result of a constant initialiser on the key's device (eagerly; under rune::jit the
// program's constants live where the program runs).
Tensor on_device_of(const Tensor& key, Tensor t) {
  if (!key.is_traced() && key.device() != t.device()) return nx::place(t, key.device());
  return t;
}

double fan_of(const std::string& api, const nx::Shape& shape, FanMode mode, FanAxes axes) {
  Fans f;
  try {
    f = fans(shape, axes);
  } catch (const std::invalid_argument& e) {
    fail(api, std::string(e.what()).substr(std::string("rune::nn::init::fans: ").size()));
  }
  switch (mode) {
    case FanMode::fan_in:
      return static_cast<double>(f.in);
    case FanMode::fan_out:
      return static_cast<double>(f.out);
    default:
      return (static_cast<double>(f.in) + static_cast<double>(f.out)) / 2;
  }
}

// erfinv of a float64 y in (-1, 1): Giles' single-precision approximation (M. Giles,
// "Approximating the erfinv function", GPU Computing Gems Jade Edition, 2011), then two Newton
// steps on |x| whose residual is computed where it is well conditioned (erf(x) - y below
// |y| = 1/2, (1 - |y|) - erfc(|x|) above, where 1 - |y| is exact): a few float64 ulps.
Tensor erfinv(const Tensor& y) {
  auto poly = [](const Tensor& w, std::initializer_list<double> c) {
    auto it = c.begin();
    Tensor p = nx::scalar_like(w, *it++);
    for (; it != c.end(); ++it) p = nx::scalar_like(w, *it) + p * w;
    return p;
  };
  Tensor w = -nx::log((1.0 - y) * (1.0 + y));
  Tensor central =
      poly(w - 2.5, {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941});
  Tensor tail = poly(nx::sqrt(w) - 3.0,
                     {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                      -0.0076224613, 0.00943887047, 1.00167406, 2.83297682});
  Tensor ya = nx::abs(y);
  Tensor xa = nx::where(w < 5.0, central, tail) * ya;
  const double two_over_sqrt_pi = 2 / std::sqrt(std::numbers::pi);
  for (int step = 0; step < 2; ++step) {
    Tensor residual = nx::where(ya < 0.5, nx::erf(xa) - ya, (1.0 - ya) - nx::erfc(xa));
    xa = xa - residual / (two_over_sqrt_pi * nx::exp(-(xa * xa)));
  }
  return nx::where(y < 0.0, -xa, xa);
}

Initializer make(const std::string& name, Initializer::Fn fn) {
  return Initializer(name, std::move(fn));
}

}  // namespace

Fans fans(const nx::Shape& shape, FanAxes axes) {
  const std::string api = "rune::nn::init::fans";
  const int r = static_cast<int>(shape.size());
  auto where = [&] {
    return " (shape " + ir::to_string(shape) + ", in axis " + std::to_string(axes.in) +
           ", out axis " + std::to_string(axes.out) + ")";
  };
  if (r < 2)
    fail(api, "fan in and fan out need a tensor of at least 2 dimensions, got shape " +
                  ir::to_string(shape));
  int in = axes.in < 0 ? axes.in + r : axes.in, out = axes.out < 0 ? axes.out + r : axes.out;
  if (in < 0 || in >= r || out < 0 || out >= r) fail(api, "axis out of range" + where());
  if (in == out) fail(api, "the in and out axes must differ" + where());
  int64_t receptive = 1;
  for (int a = 0; a < r; ++a)
    if (a != in && a != out) receptive *= shape[a];
  return {shape[in] * receptive, shape[out] * receptive};
}

double gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::linear:
    case Nonlinearity::conv:
    case Nonlinearity::sigmoid:
      return 1;
    case Nonlinearity::tanh:
      return 5.0 / 3;
    case Nonlinearity::relu:
      return std::sqrt(2.0);
    case Nonlinearity::leaky_relu:
      return std::sqrt(2.0 / (1 + param * param));
    case Nonlinearity::selu:
      return 0.75;
  }
  return 1;
}

Tensor Initializer::operator()(const Tensor& key, const nx::Shape& shape, nx::DType dtype) const {
  const std::string api = "rune::nn::init::" + (name_.empty() ? std::string("Initializer") : name_);
  if (!fn_) fail(api, "the initialiser is empty");
  if (!ir::is_float(dtype))
    fail(api, "dtype must be a float type, got " + std::string(ir::name(dtype)));
  for (int64_t d : shape)
    if (d < 0) fail(api, "shape must not have negative extents, got " + ir::to_string(shape));
  return fn_(key, shape, dtype);
}

Initializer zeros() {
  return make("zeros", [](const Tensor& key, const nx::Shape& s, nx::DType t) {
    return on_device_of(key, nx::zeros(t, s));
  });
}
Initializer ones() {
  return make("ones", [](const Tensor& key, const nx::Shape& s, nx::DType t) {
    return on_device_of(key, nx::ones(t, s));
  });
}
Initializer constant(double value) {
  return make("constant", [value](const Tensor& key, const nx::Shape& s, nx::DType t) {
    return on_device_of(key, nx::full(t, s, value));
  });
}

Initializer normal(double stddev, double mean) {
  if (!(stddev >= 0) || !std::isfinite(stddev) || !std::isfinite(mean))
    fail("rune::nn::init::normal", "stddev must be finite and >= 0 and mean finite, got stddev " +
                                       num(stddev) + ", mean " + num(mean));
  return make("normal", [stddev, mean](const Tensor& key, const nx::Shape& s, nx::DType t) {
    Tensor z = nx::random::normal(key, s, t);
    if (stddev != 1) z = z * stddev;
    if (mean != 0) z = z + mean;
    return z;
  });
}

Initializer truncated_normal(double stddev, double lower, double upper, double mean) {
  const char* api = "rune::nn::init::truncated_normal";
  if (!(stddev >= 0) || !std::isfinite(stddev) || !std::isfinite(mean))
    fail(api, "stddev must be finite and >= 0 and mean finite, got stddev " + num(stddev) +
                  ", mean " + num(mean));
  if (!std::isfinite(lower) || !std::isfinite(upper) || !(lower < upper))
    fail(api, "the bounds must be finite with lower < upper, got lower " + num(lower) + ", upper " +
                  num(upper));
  return make("truncated_normal", [=](const Tensor& key, const nx::Shape& s, nx::DType t) {
    const double a = std::erf(lower / std::numbers::sqrt2),
                 b = std::erf(upper / std::numbers::sqrt2);
    Tensor u = nx::random::uniform(key, s, nx::float64, a, b);
    Tensor z = nx::clip(std::numbers::sqrt2 * erfinv(u), lower, upper);
    if (stddev != 1) z = z * stddev;
    if (mean != 0) z = z + mean;
    return nx::cast(z, t);
  });
}

Initializer uniform(double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high) || !(low < high))
    fail("rune::nn::init::uniform",
         "the bounds must be finite with low < high, got low " + num(low) + ", high " + num(high));
  return make("uniform", [low, high](const Tensor& key, const nx::Shape& s, nx::DType t) {
    return nx::random::uniform(key, s, t, low, high);
  });
}

namespace {
// variance_scaling under the name of the caller (its messages).
Initializer scaled(const std::string& name, double scale, FanMode mode, Distribution dist,
                   FanAxes axes) {
  const std::string api = "rune::nn::init::" + name;
  if (!(scale > 0) || !std::isfinite(scale))
    fail(api, "the scale must be finite and positive, got " + num(scale));
  return make(name, [=](const Tensor& key, const nx::Shape& s, nx::DType t) {
    if (ir::numel(s) == 0) return on_device_of(key, nx::zeros(t, s));
    const double fan = fan_of(api, s, mode, axes);
    const double variance = scale / fan;
    switch (dist) {
      case Distribution::normal: {
        return nx::random::normal(key, s, t) * std::sqrt(variance);
      }
      case Distribution::truncated_normal: {
        // The stddev of a standard normal truncated to (-2, 2).
        const double stddev = std::sqrt(variance) / 0.87962566103423978;
        return truncated_normal(stddev, -2, 2)(key, s, t);
      }
      default: {
        const double bound = std::sqrt(3 * variance);
        return nx::random::uniform(key, s, t, -bound, bound);
      }
    }
  });
}
}  // namespace

Initializer variance_scaling(double scale, FanMode mode, Distribution distribution, FanAxes axes) {
  return scaled("variance_scaling", scale, mode, distribution, axes);
}

Initializer glorot_uniform(double g, FanAxes axes) {
  return scaled("glorot_uniform", g * g, FanMode::fan_avg, Distribution::uniform, axes);
}
Initializer glorot_normal(double g, FanAxes axes) {
  return scaled("glorot_normal", g * g, FanMode::fan_avg, Distribution::normal, axes);
}

namespace {
Initializer kaiming(const std::string& name, double a, FanMode mode, Nonlinearity nl,
                    Distribution dist, FanAxes axes) {
  if (mode == FanMode::fan_avg)
    fail("rune::nn::init::" + name,
         std::string("mode must be fan_in or fan_out (torch's), got ") + mode_name(mode));
  const double g = gain(nl, a);
  return scaled(name, g * g, mode, dist, axes);
}
}  // namespace

Initializer kaiming_uniform(double a, FanMode mode, Nonlinearity nonlinearity, FanAxes axes) {
  return kaiming("kaiming_uniform", a, mode, nonlinearity, Distribution::uniform, axes);
}
Initializer kaiming_normal(double a, FanMode mode, Nonlinearity nonlinearity, FanAxes axes) {
  return kaiming("kaiming_normal", a, mode, nonlinearity, Distribution::normal, axes);
}
Initializer lecun_uniform(FanAxes axes) {
  return scaled("lecun_uniform", 1, FanMode::fan_in, Distribution::uniform, axes);
}
Initializer lecun_normal(FanAxes axes) {
  return scaled("lecun_normal", 1, FanMode::fan_in, Distribution::normal, axes);
}

}  // namespace rune::nn::init
