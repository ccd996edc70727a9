// Gradients of every differentiable op against central finite differences (float64), eager
// and compiled bit-identity, second derivatives, vjp/jvp, errors, and the training step.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>

#include "trace/rune.h"

namespace {

using nx::Tensor;
using Fn = std::function<Tensor(const Tensor&)>;

// Central differences of sum(f(x) * w) for a fixed random weight w, element by element.
std::vector<double> numeric_grad(const Fn& f, const Tensor& x, const Tensor& w) {
  auto xs = nx::to_vector<double>(x);
  std::vector<double> g(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    double h = 1e-6 * std::max(1.0, std::fabs(xs[i]));
    auto at = [&](double d) {
      auto v = xs;
      v[i] += d;
      return nx::item<double>(nx::sum(f(nx::create(nx::float64, x.shape(), v)) * w));
    };
    g[i] = (at(h) - at(-h)) / (2 * h);
  }
  return g;
}

void check_grad(const std::string& name, const Fn& f, const Tensor& x) {
  Tensor probe = f(x);
  Tensor w = nx::rand(nx::key(7), nx::float64, probe.shape()) + 0.5;
  auto loss = [&](const Tensor& t) { return nx::sum(f(t) * w); };
  auto g = nx::to_vector<double>(rune::grad(loss, x));
  auto n = numeric_grad(f, x, w);
  ASSERT_EQ(g.size(), n.size()) << name;
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], n[i], 1e-5 * std::max(1.0, std::fabs(n[i]))) << name << " element " << i;
  // Compiled gradients give eager's bits.
  auto gj =
      nx::to_vector<double>(rune::jit([&](const Tensor& t) { return rune::grad(loss, t); })(x));
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(g[i]), std::bit_cast<uint64_t>(gj[i]))
        << name << " compiled, element " << i;
}

Tensor input(const nx::Shape& s, double lo = -2, double hi = 2, uint64_t seed = 1) {
  return nx::rand(nx::key(seed), nx::float64, s) * (hi - lo) + lo;
}

TEST(Grad, Elementwise) {
  auto x = input({2, 3});
  auto pos = input({2, 3}, 0.5, 2.0);
  auto other = input({2, 3}, -2, 2, 9);
  check_grad(
      "neg", [](const Tensor& t) { return -t; }, x);
  check_grad(
      "abs", [](const Tensor& t) { return nx::abs(t); }, x);
  check_grad(
      "mul", [&](const Tensor& t) { return t * other; }, x);
  check_grad(
      "div", [&](const Tensor& t) { return other / (t * t + 1.0); }, x);
  check_grad(
      "sub", [&](const Tensor& t) { return other - t; }, x);
  check_grad(
      "sqrt", [](const Tensor& t) { return nx::sqrt(t); }, pos);
  check_grad(
      "exp", [](const Tensor& t) { return nx::exp(t); }, x);
  check_grad(
      "log", [](const Tensor& t) { return nx::log(t); }, pos);
  check_grad(
      "sin", [](const Tensor& t) { return nx::sin(t); }, x);
  check_grad(
      "cos", [](const Tensor& t) { return nx::cos(t); }, x);
  check_grad(
      "tan", [](const Tensor& t) { return nx::tan(t * 0.5); }, x);
  check_grad(
      "tanh", [](const Tensor& t) { return nx::tanh(t); }, x);
  check_grad(
      "sigmoid", [](const Tensor& t) { return nx::sigmoid(t); }, x);
  check_grad(
      "pow", [](const Tensor& t) { return nx::pow(t, 2.5); }, pos);
  check_grad(
      "pow exponent", [&](const Tensor& t) { return nx::pow(pos, t); }, x);
  check_grad(
      "atan2", [&](const Tensor& t) { return nx::atan2(t, other); }, x);
  check_grad(
      "maximum", [&](const Tensor& t) { return nx::maximum(t, other); }, x);
  check_grad(
      "minimum", [&](const Tensor& t) { return nx::minimum(t, other); }, x);
  check_grad(
      "relu", [](const Tensor& t) { return nx::relu(t); }, x);
  check_grad(
      "where", [&](const Tensor& t) { return nx::where(t > 0.0, t * t, t * 3.0); }, x);
}

TEST(Grad, CastPassesTheGradientThrough) {
  // Finite differences cannot see through float32 rounding, so check the rule exactly.
  auto x = input({4});
  auto g = rune::grad(
      [](const Tensor& t) {
        return nx::sum(nx::cast(nx::cast(t, nx::float32) * 3.0, nx::float64));
      },
      x);
  EXPECT_EQ(nx::to_vector<double>(g), (std::vector<double>{3, 3, 3, 3}));
  auto gi = rune::grad(
      [](const Tensor& t) { return nx::sum(nx::cast(nx::cast(t, nx::int32), nx::float64)); }, x);
  EXPECT_EQ(nx::to_vector<double>(gi),
            (std::vector<double>{0, 0, 0, 0}));  // no gradient through integers
}

TEST(Grad, BroadcastAndNonContiguous) {
  auto x = input({3, 1});
  auto y = input({1, 4}, -1, 1, 3);
  check_grad(
      "broadcast lhs", [&](const Tensor& t) { return t * y + t; }, x);
  check_grad(
      "broadcast rhs", [&](const Tensor& t) { return x / (t * t + 1.0); }, y);
  auto m = nx::transpose(input({4, 3}));
  check_grad(
      "transposed input", [](const Tensor& t) { return t * t; }, m);
  check_grad(
      "scalar param", [&](const Tensor& t) { return x * t; }, nx::scalar(nx::float64, 1.5));
}

TEST(Grad, Reductions) {
  auto x = input({3, 4});
  check_grad(
      "sum", [](const Tensor& t) { return nx::sum(t, {1}); }, x);
  check_grad(
      "sum all", [](const Tensor& t) { return nx::sum(t); }, x);
  check_grad(
      "mean keepdims", [](const Tensor& t) { return nx::mean(t, {0}, true) * t; }, x);
  check_grad(
      "max", [](const Tensor& t) { return nx::max(t, {1}); }, x);
  check_grad(
      "min", [](const Tensor& t) { return nx::min(t, {0}); }, x);
  check_grad(
      "prod", [](const Tensor& t) { return nx::prod(t, {1}); }, input({3, 4}, 0.5, 1.5));
  check_grad(
      "softmax", [](const Tensor& t) { return nx::softmax(t, 1); }, x);
  check_grad(
      "log_softmax", [](const Tensor& t) { return nx::log_softmax(t, 0); }, x);
  check_grad(
      "logsumexp", [](const Tensor& t) { return nx::logsumexp(t, {1}); }, x);
}

TEST(Grad, MaxTiesShareTheGradient) {
  auto x = nx::create(nx::float64, {3}, {1, 5, 5});
  auto g = nx::to_vector<double>(rune::grad([](const Tensor& t) { return nx::max(t); }, x));
  EXPECT_EQ(g, (std::vector<double>{0, 0.5, 0.5}));
}

TEST(Grad, MovementAndMatmul) {
  auto x = input({2, 3});
  auto w = input({3, 4}, -1, 1, 5);
  check_grad(
      "reshape",
      [](const Tensor& t) {
        return nx::reshape(t, {3, 2}) * 2.0;
      },
      x);
  check_grad(
      "transpose", [](const Tensor& t) { return nx::transpose(t) * 2.0; }, x);
  check_grad(
      "slice",
      [](const Tensor& t) {
        return nx::slice(t, {{}, {0, 3, 2}});
      },
      x);
  check_grad(
      "flip", [](const Tensor& t) { return nx::flip(t, {1}); }, x);
  check_grad(
      "pad",
      [](const Tensor& t) {
        return nx::pad(t, {{1, 0}, {0, 2}}, 3.0);
      },
      x);
  check_grad(
      "concatenate",
      [](const Tensor& t) {
        return nx::concatenate({t, t * 2.0}, 1);
      },
      x);
  check_grad(
      "stack",
      [](const Tensor& t) {
        return nx::stack({t, -t}, 0);
      },
      x);
  check_grad(
      "broadcast_to",
      [](const Tensor& t) {
        return nx::broadcast_to(t, {4, 2, 3});
      },
      x);
  check_grad(
      "matmul lhs", [&](const Tensor& t) { return nx::matmul(t, w); }, x);
  check_grad(
      "matmul rhs", [&](const Tensor& t) { return nx::matmul(x, t); }, w);
}

TEST(Grad, SecondDerivatives) {
  auto x = input({5});
  auto d2 = [](auto f) {
    return [f](const Tensor& t) {
      return rune::grad(
          [f](const Tensor& u) {
            return nx::sum(rune::grad([f](const Tensor& v) { return nx::sum(f(v)); }, u));
          },
          t);
    };
  };
  auto check = [&](const char* name, auto f, auto exact) {
    auto got = nx::to_vector<double>(d2(f)(x));
    auto xs = nx::to_vector<double>(x);
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_NEAR(got[i], exact(xs[i]), 1e-9) << name << " at " << xs[i];
  };
  check(
      "x^3", [](const Tensor& t) { return t * t * t; }, [](double v) { return 6 * v; });
  check(
      "sin", [](const Tensor& t) { return nx::sin(t); }, [](double v) { return -std::sin(v); });
  check(
      "exp", [](const Tensor& t) { return nx::exp(t); }, [](double v) { return std::exp(v); });
  check(
      "tanh", [](const Tensor& t) { return nx::tanh(t); },
      [](double v) {
        double th = std::tanh(v);
        return -2 * th * (1 - th * th);
      });
}

TEST(Grad, VjpAndJvp) {
  auto x = input({3});
  auto f = [](const Tensor& t) { return nx::sin(t) * t; };
  auto ct = nx::create(nx::float64, {3}, {1, 2, 3});
  auto [y, g] = rune::vjp(f, x, ct);
  auto [y2, jt] = rune::jvp<Tensor>(f, x, ct);
  auto xs = nx::to_vector<double>(x), gs = nx::to_vector<double>(g), js = nx::to_vector<double>(jt);
  auto cs = nx::to_vector<double>(ct);
  for (size_t i = 0; i < 3; ++i) {
    double d = std::cos(xs[i]) * xs[i] + std::sin(xs[i]);  // diagonal Jacobian
    EXPECT_NEAR(gs[i], d * cs[i], 1e-12);
    EXPECT_NEAR(js[i], d * cs[i], 1e-12);
  }
  EXPECT_EQ(nx::to_vector<double>(y), nx::to_vector<double>(y2));
}

struct Model {
  Tensor w, b;
};

}  // namespace

RUNE_TREE(Model, w, b)

namespace {

TEST(Grad, Errors) {
  auto x = nx::ones(nx::float64, {3});
  try {
    rune::grad([](const Tensor& t) { return t * 2.0; }, x);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "rune::grad: f must return a float scalar, got float64 [3]");
  }
  try {
    rune::grad([](const Model& m) { return nx::sum(m.w); }, Model{x, nx::ones(nx::int32, {2})});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "rune::grad: parameter b is int32 [2]; only float tensors have gradients");
  }
  try {
    rune::vjp([](const Tensor& t) { return t * 2.0; }, x, nx::ones(nx::float64, {2}));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "rune::vjp: cotangent 0 is float64 [2] but output 0 is float64 [3]");
  }
}

TEST(Grad, TrainingStepTracesOnce) {
  using Params = std::pair<Tensor, Tensor>;
  auto inputs = nx::create(nx::float64, {4}, {0, 1, 2, 3});
  auto targets = nx::create(nx::float64, {4}, {1, 3, 5, 7});
  int traces = 0;
  auto mse = [&](const Params& p) {
    auto err = p.first * inputs + p.second - targets;
    return nx::mean(err * err);
  };
  auto step = rune::jit([&](const Params& p) {
    ++traces;
    auto [loss, g] = rune::value_and_grad(mse, p);
    return std::make_pair(loss, Params{p.first - g.first * 0.1, p.second - g.second * 0.1});
  });
  Params p{nx::scalar(nx::float64, 0), nx::scalar(nx::float64, 0)};
  Tensor loss;
  for (int i = 0; i < 200; ++i) std::tie(loss, p) = step(p);
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(nx::to_string(loss), "float64 [] 2.446119840025779e-14");
  // The same steps run eagerly give the same bits.
  Params q{nx::scalar(nx::float64, 0), nx::scalar(nx::float64, 0)};
  for (int i = 0; i < 200; ++i) {
    auto [l, g] = rune::value_and_grad(mse, q);
    q = Params{q.first - g.first * 0.1, q.second - g.second * 0.1};
  }
  EXPECT_EQ(nx::item<double>(q.first), nx::item<double>(p.first));
  EXPECT_EQ(nx::item<double>(q.second), nx::item<double>(p.second));
}

}  // namespace

namespace {
TEST(Grad, MoreTranscendentals) {
  auto x = nx::rand(nx::key(4), nx::float64, {5}) * 4.0 - 2.0;
  check_grad(
      "atan", [](const Tensor& t) { return nx::atan(t); }, x);
  check_grad(
      "expm1", [](const Tensor& t) { return nx::expm1(t); }, x);
  check_grad(
      "log1p", [](const Tensor& t) { return nx::log1p(nx::abs(t)); }, x);
  check_grad(
      "softplus", [](const Tensor& t) { return nx::softplus(t * 3.0); }, x);
  check_grad(
      "gelu", [](const Tensor& t) { return nx::gelu(t); }, x);
  check_grad(
      "exp2", [](const Tensor& t) { return nx::exp2(t); }, x);
  check_grad(
      "log2", [](const Tensor& t) { return nx::log2(nx::abs(t) + 0.5); }, x);
  check_grad(
      "sinh", [](const Tensor& t) { return nx::sinh(t); }, x);
  check_grad(
      "cosh", [](const Tensor& t) { return nx::cosh(t); }, x);
  check_grad(
      "asin", [](const Tensor& t) { return nx::asin(t * 0.4); }, x);
  check_grad(
      "acos", [](const Tensor& t) { return nx::acos(t * 0.4); }, x);
  check_grad(
      "erf", [](const Tensor& t) { return nx::erf(t); }, x);
  check_grad(
      "erfc", [](const Tensor& t) { return nx::erfc(t); }, x);
  check_grad(
      "rsqrt", [](const Tensor& t) { return nx::rsqrt(nx::abs(t) + 0.5); }, x);
}
}  // namespace

namespace {

// rsqrt' = -rsqrt(x) / (2x), JAX's form: -inf at +0 and -0 at +inf (JAX's values); erfc' =
// -2/sqrt(pi) e^(-x^2); isinf and isfinite are bool (no gradient flows through them), so a
// function that only selects with them has the gradient of the selected branch.
TEST(Grad, NewPrimitives) {
  auto grad_of = [](Tensor (*f)(const Tensor&), std::vector<double> v) {
    Tensor x = nx::create(nx::float64, {static_cast<int64_t>(v.size())}, v);
    auto g = [f](const Tensor& t) {
      return rune::grad([f](const Tensor& u) { return nx::sum(f(u)); }, t);
    };
    auto e = nx::to_vector<double>(g(x));
    auto c = nx::to_vector<double>(rune::jit(g)(x));
    EXPECT_EQ(e, c);
    return e;
  };
  auto r = grad_of(nx::rsqrt, {0.0, INFINITY, 4.0, 0.25});
  EXPECT_EQ(r[0], -INFINITY);
  EXPECT_EQ(r[1], 0.0);
  EXPECT_TRUE(std::signbit(r[1]));
  EXPECT_EQ(r[2], -1.0 / 16);  // -0.5 * 0.5 / 4
  EXPECT_EQ(r[3], -4.0);       // -0.5 * 2 / 0.25
  auto e = grad_of(nx::erfc, {0.0, 1.0, -30.0, INFINITY});
  EXPECT_EQ(e[0], -1.1283791670955126);
  EXPECT_NEAR(e[1], -1.1283791670955126 * std::exp(-1.0), 1e-16);
  EXPECT_EQ(e[2], -0.0);
  EXPECT_EQ(e[3], -0.0);
  auto sel = [](const Tensor& u) {
    return nx::where(nx::isfinite(u), u * 3.0, nx::where(nx::isinf(u), u * 0.0, u));
  };
  Tensor x = nx::create(nx::float64, {3}, {2.0, INFINITY, -1.0});
  auto g = nx::to_vector<double>(rune::grad([&](const Tensor& u) { return nx::sum(sel(u)); }, x));
  EXPECT_EQ(g, (std::vector<double>{3, 0, 3}));
}
}  // namespace

namespace {

// Eager and compiled values of h at x, after checking they are the same bits.
std::vector<double> both(const std::function<Tensor(const Tensor&)>& h, const Tensor& x) {
  auto e = nx::to_vector<double>(h(x));
  auto c = nx::to_vector<double>(rune::jit([&](const Tensor& t) { return h(t); })(x));
  EXPECT_EQ(e.size(), c.size());
  for (size_t i = 0; i < e.size() && i < c.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(e[i]), std::bit_cast<uint64_t>(c[i])) << "element " << i;
  return e;
}

// asin' and acos' read (1 - x)(1 + x): 1 - x is exact near 1 and the product rounds once, where
// 1 - x*x loses the low bits of x*x (millions of ulps at x = 0.99999999).
TEST(Grad, AsinAcosNearOne) {
  std::vector<double> xs = {0.99999999, -0.99999999, 1 - 0x1p-30, 0.999999999999, -0.9999999};
  Tensor x = nx::create(nx::float64, {5}, xs);
  auto gs = both(
      [](const Tensor& t) {
        return rune::grad([](const Tensor& u) { return nx::sum(nx::asin(u)); }, t);
      },
      x);
  auto gc = both(
      [](const Tensor& t) {
        return rune::grad([](const Tensor& u) { return nx::sum(nx::acos(u)); }, t);
      },
      x);
  for (size_t i = 0; i < xs.size(); ++i) {
    long double xl = xs[i];
    double want = static_cast<double>(1.0L / std::sqrt((1.0L - xl) * (1.0L + xl)));
    EXPECT_LE(std::fabs(gs[i] - want), 4 * std::fabs(want) * 0x1p-52) << "asin' at " << xs[i];
    EXPECT_LE(std::fabs(gc[i] + want), 4 * std::fabs(want) * 0x1p-52) << "acos' at " << xs[i];
  }
}

// prod's gradient is the product of the other elements (JAX), not prod / x: exact where an
// element is 0, inf or NaN; in jvp and second derivatives too.
TEST(Grad, ProdWithoutDivision) {
  auto g = [](std::vector<double> v) {
    return both(
        [](const Tensor& t) { return rune::grad([](const Tensor& u) { return nx::prod(u); }, t); },
        nx::create(nx::float64, {static_cast<int64_t>(v.size())}, v));
  };
  EXPECT_EQ(g({2, 0, 4}), (std::vector<double>{0, 8, 0}));
  EXPECT_EQ(g({0, 5, 0}), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(g({2, 3, 4}), (std::vector<double>{12, 8, 6}));
  auto inf = g({2, INFINITY, 4});
  EXPECT_EQ(inf[0], INFINITY);
  EXPECT_EQ(inf[1], 8);
  EXPECT_EQ(inf[2], INFINITY);
  auto nan = g({2, NAN, 4});
  EXPECT_TRUE(std::isnan(nan[0]) && std::isnan(nan[2]));
  EXPECT_EQ(nan[1], 8);
  // Second derivative of prod([2, 0, 4]): the Hessian's rows sum to [0 + 4 + 0, 4 + 0 + 2, 0 + 2 +
  // 0].
  Tensor x = nx::create(nx::float64, {3}, {2, 0, 4});
  auto h = both(
      [](const Tensor& t) {
        auto gp = [](const Tensor& u) {
          return nx::sum(rune::grad([](const Tensor& z) { return nx::prod(z); }, u));
        };
        return rune::grad(gp, t);
      },
      x);
  EXPECT_EQ(h, (std::vector<double>{4, 6, 2}));
  auto [y, jt] = rune::jvp<Tensor>([](const Tensor& t) { return nx::prod(t); }, x,
                                   nx::create(nx::float64, {3}, {1, 1, 1}));
  EXPECT_EQ(nx::item<double>(jt), 8);
}

// Kinks: sign is flat (so sign(x) * x has second derivative 0 at 0), relu'(0) = 0, and pow at
// base 0 has finite jvp and second derivatives.
TEST(Grad, Kinks) {
  Tensor x = nx::create(nx::float64, {3}, {0.0, -0.0, 2.0});
  auto d2 = both(
      [](const Tensor& t) {
        auto d1 = [](const Tensor& u) {
          return nx::sum(rune::grad([](const Tensor& z) { return nx::sum(nx::sign(z) * z); }, u));
        };
        return rune::grad(d1, t);
      },
      x);
  EXPECT_EQ(d2, (std::vector<double>{0, 0, 0}));
  auto dr = both(
      [](const Tensor& t) {
        return rune::grad([](const Tensor& z) { return nx::sum(nx::relu(z)); }, t);
      },
      x);
  EXPECT_EQ(dr, (std::vector<double>{0, 0, 1}));
  Tensor z = nx::create(nx::float64, {2}, {0.0, 1.0});
  auto [y, jt] = rune::jvp<Tensor>([](const Tensor& t) { return nx::pow(t, 2.0); }, z,
                                   nx::create(nx::float64, {2}, {1, 1}));
  EXPECT_EQ(nx::to_vector<double>(jt), (std::vector<double>{0, 2}));
  auto p2 = both(
      [](const Tensor& t) {
        auto d1 = [](const Tensor& u) {
          return nx::sum(rune::grad([](const Tensor& w) { return nx::sum(nx::pow(w, 2.0)); }, u));
        };
        return rune::grad(d1, t);
      },
      z);
  EXPECT_EQ(p2, (std::vector<double>{2, 2}));
}

}  // namespace

namespace {

// A long axis: the exclusive products are log-depth scans materialised level by level, so the
// gradient of a 4096-element prod is 12 levels each way (fused, level k would recompute 2^k
// products per element and never finish). One zero: only its own entry is nonzero.
TEST(Grad, ProdOfALongAxis) {
  const int64_t L = 4096;
  std::vector<double> v(L);
  for (int64_t i = 0; i < L; ++i) v[i] = 1 + static_cast<double>(i % 7 - 3) * 1e-3;
  v[100] = 0;
  long double others = 1;
  for (int64_t i = 0; i < L; ++i)
    if (i != 100) others *= v[i];
  Tensor x = nx::create(nx::float64, {L}, v);
  auto g = both(
      [](const Tensor& t) { return rune::grad([](const Tensor& u) { return nx::prod(u); }, t); },
      x);
  for (int64_t i = 0; i < L; ++i)
    if (i != 100) {
      ASSERT_EQ(g[i], 0) << "element " << i;
    }
  EXPECT_NEAR(g[100], static_cast<double>(others), 1e-12 * std::fabs(static_cast<double>(others)));
}

}  // namespace
