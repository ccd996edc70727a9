// rune::nn::init (nn/init.h): each initialiser's distribution by its moments over 2^17 draws
// (mean within 5 standard errors, variance within 5 standard errors of the sample variance,
// estimated from the sample's fourth moment), the bounds of the uniform and truncated ones,
// torch's fans and gains, the same bits for the same key eagerly and under rune::jit on CPU,
// CPU:1 and the fake CUDA:0 and new bits for another key, dtypes, and errors naming the API and
// the values.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "nn/nn.h"
#include "test_util.h"
#include "window_test_util.h"

namespace {

namespace init = rune::nn::init;
using init::FanAxes;
using init::FanMode;
using init::Initializer;
using init::Nonlinearity;
using nx::Shape;
using nx::Tensor;
using window_test::expect_error;
using window_test::host;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

// [256, 512]: fan_in 256, fan_out 512 with the default axes; 2^17 draws.
const Shape kShape{256, 512};
const double kIn = 256, kOut = 512;

struct Moments {
  double mean, var, m4, min, max;
  size_t n;
};
Moments moments(const Tensor& t) {
  std::vector<double> v = nx::to_array(host(t));
  Moments m{0, 0, 0, INFINITY, -INFINITY, v.size()};
  for (double d : v) {
    m.mean += d;
    m.min = std::min(m.min, d);
    m.max = std::max(m.max, d);
  }
  m.mean /= static_cast<double>(v.size());
  for (double d : v) {
    const double c = (d - m.mean) * (d - m.mean);
    m.var += c;
    m.m4 += c * c;
  }
  m.var /= static_cast<double>(v.size());
  m.m4 /= static_cast<double>(v.size());
  return m;
}

// The sample's mean and variance within 5 standard errors of `mean` and `var`.
void expect_moments(const std::string& what, const Tensor& t, double mean, double var) {
  Moments m = moments(t);
  const double n = static_cast<double>(m.n);
  const double se_mean = std::sqrt(var / n), se_var = std::sqrt((m.m4 - m.var * m.var) / n);
  EXPECT_NEAR(m.mean, mean, 5 * se_mean) << what << " mean";
  EXPECT_NEAR(m.var, var, 5 * se_var) << what << " variance (want " << var << ")";
}

// Every element in [lo, hi] (hi_open: [lo, hi)), and the extremes come within 1% of the range of
// the bounds (the draws fill the interval).
void expect_bounds(const std::string& what, const Tensor& t, double lo, double hi,
                   bool hi_open = false) {
  Moments m = moments(t);
  EXPECT_GE(m.min, lo) << what;
  if (hi_open) {
    EXPECT_LT(m.max, hi) << what;
  } else {
    EXPECT_LE(m.max, hi) << what;
  }
  EXPECT_LT(m.min, lo + 0.01 * (hi - lo)) << what;
  EXPECT_GT(m.max, hi - 0.01 * (hi - lo)) << what;
}

Tensor key(uint32_t i = 0) { return nx::random::fold_in(nx::random::key(2024), i); }

// The standard normal truncated to [a, b]: its mean and variance.
std::pair<double, double> truncated_moments(double a, double b) {
  auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi); };
  auto cdf = [](double x) { return 0.5 * (1 + std::erf(x / std::numbers::sqrt2)); };
  const double z = cdf(b) - cdf(a);
  const double mean = (phi(a) - phi(b)) / z;
  const double var = 1 + (a * phi(a) - b * phi(b)) / z - mean * mean;
  return {mean, var};
}

TEST(NnInit, Fans) {
  auto f = init::fans({5, 7});
  EXPECT_EQ(f.in, 5);
  EXPECT_EQ(f.out, 7);
  f = init::fans({5, 7}, FanAxes::torch());  // torch's [out, in]
  EXPECT_EQ(f.in, 7);
  EXPECT_EQ(f.out, 5);
  // A conv kernel: torch's [out, in, kh, kw] and the channels-last [kh, kw, in, out] agree.
  f = init::fans({16, 8, 3, 5}, FanAxes::torch());
  EXPECT_EQ(f.in, 8 * 15);
  EXPECT_EQ(f.out, 16 * 15);
  f = init::fans({3, 5, 8, 16});
  EXPECT_EQ(f.in, 8 * 15);
  EXPECT_EQ(f.out, 16 * 15);
  f = init::fans({4, 2, 3});  // torch's Conv1d kernel [out 4, in 2, k 3] read channels-last
  EXPECT_EQ(f.in, 2 * 4);
  EXPECT_EQ(f.out, 3 * 4);
  expect_error([] { init::fans({5}); }, {"rune::nn::init::fans", "at least 2", "[5]"});
  expect_error([] { init::fans({5, 6}, {0, 0}); }, {"rune::nn::init::fans", "differ"});
  expect_error(
      [] {
        init::fans({5, 6}, {2, 0});
      },
      {"rune::nn::init::fans", "out of range", "[5, 6]", "in axis 2"});
}

TEST(NnInit, Gains) {
  EXPECT_EQ(init::gain(Nonlinearity::linear), 1);
  EXPECT_EQ(init::gain(Nonlinearity::conv), 1);
  EXPECT_EQ(init::gain(Nonlinearity::sigmoid), 1);
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::tanh), 5.0 / 3);
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::relu), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::leaky_relu), std::sqrt(2 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::leaky_relu, std::sqrt(5.0)), std::sqrt(1.0 / 3));
  EXPECT_DOUBLE_EQ(init::gain(Nonlinearity::selu), 0.75);
}

TEST(NnInit, Constants) {
  EXPECT_EQ(nx::to_array(init::zeros()(key(), {2, 3})), std::vector<double>(6, 0));
  EXPECT_EQ(nx::to_array(init::ones()(key(), {4}, nx::float64)), std::vector<double>(4, 1));
  Tensor c = init::constant(0.25)(key(), {2, 2}, nx::bfloat16);
  EXPECT_EQ(c.dtype(), nx::bfloat16);
  EXPECT_EQ(nx::to_array(c), std::vector<double>(4, 0.25));
}

TEST(NnInit, NormalAndUniformMoments) {
  expect_moments("normal(0.5, 1)", init::normal(0.5, 1)(key(1), kShape), 1, 0.25);
  expect_moments("normal()", init::normal()(key(2), kShape, nx::float64), 0, 1);
  Tensor u = init::uniform(-3, 5)(key(3), kShape);
  expect_moments("uniform(-3, 5)", u, 1, 64.0 / 12);
  expect_bounds("uniform(-3, 5)", u, -3, 5, true);
}

TEST(NnInit, TruncatedNormalMomentsAndBounds) {
  // +-2 standard deviations (torch's trunc_normal_(std=s, a=-2s, b=2s), flax's default).
  Tensor t = init::truncated_normal(0.02)(key(4), kShape);
  auto [m, v] = truncated_moments(-2, 2);
  expect_moments("truncated_normal(0.02)", t, 0.02 * m, 0.0004 * v);
  expect_bounds("truncated_normal(0.02)", t, -0.04, 0.04);
  // Asymmetric bounds and a mean, at float64.
  Tensor a = init::truncated_normal(3, -1, 2.5, 10)(key(5), kShape, nx::float64);
  std::tie(m, v) = truncated_moments(-1, 2.5);
  expect_moments("truncated_normal(3, -1, 2.5, 10)", a, 10 + 3 * m, 9 * v);
  expect_bounds("truncated_normal(3, -1, 2.5, 10)", a, 7, 17.5);
  // Far tails: all draws in [4, 6] standard deviations.
  Tensor tail = init::truncated_normal(1, 4, 6)(key(6), {4096}, nx::float64);
  std::tie(m, v) = truncated_moments(4, 6);
  expect_moments("truncated_normal(1, 4, 6)", tail, m, v);
  Moments tm = moments(tail);
  EXPECT_GE(tm.min, 4);
  EXPECT_LE(tm.max, 6);
}

TEST(NnInit, VarianceScalingFamilies) {
  const double avg = (kIn + kOut) / 2;
  // glorot / xavier: bound gain sqrt(6 / (fan_in + fan_out)), stddev gain sqrt(2 / (...)).
  Tensor gu = init::glorot_uniform(2)(key(7), kShape);
  const double gb = 2 * std::sqrt(6 / (kIn + kOut));
  expect_moments("glorot_uniform(2)", gu, 0, gb * gb / 3);
  expect_bounds("glorot_uniform(2)", gu, -gb, gb, true);
  expect_moments("glorot_normal", init::glorot_normal()(key(8), kShape), 0, 1 / avg);
  expect_moments("xavier_uniform", init::xavier_uniform()(key(9), kShape), 0, 1 / avg);
  // kaiming / he: torch's defaults (a = 0, fan_in, leaky_relu: gain sqrt(2)).
  Tensor ku = init::kaiming_uniform()(key(10), kShape);
  expect_moments("kaiming_uniform()", ku, 0, 2 / kIn);
  expect_bounds("kaiming_uniform()", ku, -std::sqrt(6 / kIn), std::sqrt(6 / kIn), true);
  expect_moments("kaiming_normal(0.2, fan_out)",
                 init::kaiming_normal(0.2, FanMode::fan_out)(key(11), kShape), 0,
                 2 / (1 + 0.04) / kOut);
  expect_moments("kaiming_normal(tanh)",
                 init::kaiming_normal(0, FanMode::fan_in, Nonlinearity::tanh)(key(12), kShape), 0,
                 25.0 / 9 / kIn);
  expect_moments("he_normal", init::he_normal()(key(13), kShape), 0, 2 / kIn);
  expect_moments("he_uniform", init::he_uniform()(key(14), kShape), 0, 2 / kIn);
  // torch's Linear default, kaiming_uniform(a = sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  Tensor lin = init::kaiming_uniform(std::sqrt(5.0))(key(15), kShape);
  expect_bounds("kaiming_uniform(sqrt(5))", lin, -1 / std::sqrt(kIn), 1 / std::sqrt(kIn), true);
  expect_moments("kaiming_uniform(sqrt(5))", lin, 0, 1 / (3 * kIn));
  // lecun: variance 1 / fan_in.
  expect_moments("lecun_normal", init::lecun_normal()(key(16), kShape), 0, 1 / kIn);
  Tensor lu = init::lecun_uniform()(key(17), kShape);
  expect_moments("lecun_uniform", lu, 0, 1 / kIn);
  expect_bounds("lecun_uniform", lu, -std::sqrt(3 / kIn), std::sqrt(3 / kIn), true);
  // flax's truncated variance scaling: the draws have the target variance, within +-2 of the
  // underlying normal's stddev.
  Tensor vt = init::variance_scaling(2, FanMode::fan_avg, init::Distribution::truncated_normal)(
      key(18), kShape);
  expect_moments("variance_scaling(2, fan_avg, truncated_normal)", vt, 0, 2 / avg);
  const double tb = 2 * std::sqrt(2 / avg) / 0.87962566103423978;
  expect_bounds("variance_scaling(2, fan_avg, truncated_normal)", vt, -tb, tb);
  // A channels-first conv kernel read with torch's axes: fan_in = 32 * 9, fan_out = 64 * 9.
  expect_moments("kaiming_normal on [64, 32, 3, 3]",
                 init::kaiming_normal(0, FanMode::fan_out, Nonlinearity::relu, FanAxes::torch())(
                     key(19), {64, 32, 3, 3}),
                 0, 2.0 / (64 * 9));
}

TEST(NnInit, DtypesAndEmptyShapes) {
  for (nx::DType t : {nx::float16, nx::bfloat16, nx::float32, nx::float64}) {
    for (const Initializer& i :
         {init::normal(), init::truncated_normal(), init::uniform(), init::glorot_uniform(),
          init::kaiming_normal(), init::lecun_normal(), init::zeros()}) {
      Tensor x = i(key(20), {64, 32}, t);
      EXPECT_EQ(x.dtype(), t) << i.name();
      EXPECT_EQ(x.shape(), (Shape{64, 32})) << i.name();
      Tensor e = i(key(20), {0, 32}, t);
      EXPECT_EQ(e.shape(), (Shape{0, 32})) << i.name();
    }
  }
  // 16-bit draws have the distribution too.
  expect_moments("normal(2) float16", init::normal(2)(key(21), kShape, nx::float16), 0, 4);
}

TEST(NnInit, Errors) {
  expect_error([] { init::normal(-1); }, {"rune::nn::init::normal", "stddev", "-1"});
  expect_error([] { init::uniform(1, 1); }, {"rune::nn::init::uniform", "low 1", "high 1"});
  expect_error([] { init::truncated_normal(1, 2, -2); },
               {"rune::nn::init::truncated_normal", "lower 2", "upper -2"});
  expect_error([] { init::truncated_normal(1, -INFINITY, 2); },
               {"rune::nn::init::truncated_normal", "finite", "lower -inf"});
  expect_error([] { init::kaiming_uniform(0, FanMode::fan_avg); },
               {"rune::nn::init::kaiming_uniform", "fan_in or fan_out", "fan_avg"});
  expect_error([] { init::glorot_uniform(0); }, {"rune::nn::init::glorot_uniform", "scale", "0"});
  expect_error([] { init::glorot_uniform()(key(), {5}); },
               {"rune::nn::init::glorot_uniform", "at least 2 dimensions", "[5]"});
  expect_error(
      [] {
        init::normal()(key(), {2, 2}, nx::int32);
      },
      {"rune::nn::init::normal", "float", "int32"});
  expect_error([] { Initializer()(key(), {2}); }, {"empty"});
  expect_error(
      [] {
        init::normal()(key(), {2, -1});
      },
      {"rune::nn::init::normal", "negative", "[2, -1]"});
}

// The same key gives the same bits eagerly and compiled, on every device; another key others.
class NnInitDevices : public ::testing::TestWithParam<const char*> {};

TEST_P(NnInitDevices, SameKeySameBitsEagerAndCompiled) {
  const std::vector<std::pair<std::string, Initializer>> inits = {
      {"normal", init::normal(0.5, 1)},
      {"truncated_normal", init::truncated_normal(0.02)},
      {"uniform", init::uniform(-1, 3)},
      {"glorot_uniform", init::glorot_uniform()},
      {"glorot_normal", init::glorot_normal()},
      {"kaiming_uniform", init::kaiming_uniform(std::sqrt(5.0))},
      {"kaiming_normal", init::kaiming_normal()},
      {"lecun_normal", init::lecun_normal()},
      {"variance_scaling",
       init::variance_scaling(1, FanMode::fan_avg, init::Distribution::truncated_normal)},
      {"ones", init::ones()},
  };
  const Shape s{33, 17};
  for (const auto& [name, i] : inits) {
    const std::string want = window_test::bits(i(key(30), s));
    Tensor k = nx::place(key(30), GetParam());
    Tensor eager = i(k, s);
    EXPECT_EQ(eager.device(), k.device()) << name;
    EXPECT_EQ(window_test::bits(eager), want) << name << " eager on " << GetParam();
    auto compiled = rune::jit([i, s](const Tensor& k) { return i(k, s); });
    EXPECT_EQ(window_test::bits(compiled(k)), want) << name << " compiled on " << GetParam();
    if (name != "ones") {
      EXPECT_NE(window_test::bits(i(nx::place(key(31), GetParam()), s)), want)
          << name << ": another key, the same values";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, NnInitDevices, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

}  // namespace
