// nx::nn::batch_norm, batch_norm_inference and group_norm (core/norm.cpp, docs/norm.md) against
// float64 loops written here from torch's formulas, eagerly and under rune::jit on CPU, CPU:1 and
// the fake CUDA:0 (eager and compiled share their bits); the running statistics' update (torch's
// momentum, the unbiased variance) and its place in a compiled training step whose donated state
// is written in place; gradients against central differences of the loops and against a
// composition of nx::mean / nx::var; no gradient through the running statistics; vmap against a
// loop; errors that name the API and the values.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/norm.h"
#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"
#include "window_test_util.h"

namespace {

using namespace window_test;
using nx::nn::BatchNormOptions;
using nx::nn::BatchNormOutput;
using nx::nn::BatchNormState;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

void each(const Shape& s, const std::function<void(const Ints&)>& f) { rt::for_each_index(s, f); }
int64_t offset(const Shape& s, const Ints& i) { return rt::row_major_offset(s, i); }

// Positive values in [0.5, 1.5): variances.
std::vector<double> positive(const Shape& s, uint64_t seed) {
  auto v = values(s, seed);
  for (double& d : v) d = std::fabs(d) + 0.5;
  return v;
}

struct BnRef {
  std::vector<double> y, mean, var;  // y, the new running mean and variance
};

// torch's batch_norm in training mode: statistics over every axis but `axis`, y with the
// biased variance, the running variance updated with the unbiased one.
BnRef ref_batch_norm(const Shape& xs, const std::vector<double>& x, int axis,
                     const std::vector<double>& g, const std::vector<double>& b,
                     const std::vector<double>& rm, const std::vector<double>& rv, double momentum,
                     double eps) {
  const size_t c_n = static_cast<size_t>(xs[axis]);
  const double n = static_cast<double>(x.size()) / static_cast<double>(c_n);
  std::vector<double> sum(c_n), ss(c_n);
  each(xs, [&](const Ints& i) { sum[i[axis]] += x[offset(xs, i)]; });
  std::vector<double> mean(c_n);
  for (size_t c = 0; c < c_n; ++c) mean[c] = sum[c] / n;
  each(xs, [&](const Ints& i) {
    const double d = x[offset(xs, i)] - mean[i[axis]];
    ss[i[axis]] += d * d;
  });
  BnRef r{std::vector<double>(x.size()), std::vector<double>(c_n), std::vector<double>(c_n)};
  each(xs, [&](const Ints& i) {
    const size_t c = i[axis];
    const int64_t o = offset(xs, i);
    r.y[o] = (x[o] - mean[c]) / std::sqrt(ss[c] / n + eps) * g[c] + b[c];
  });
  for (size_t c = 0; c < c_n; ++c) {
    r.mean[c] = (1 - momentum) * rm[c] + momentum * mean[c];
    r.var[c] = (1 - momentum) * rv[c] + momentum * ss[c] / (n - 1);
  }
  return r;
}

std::vector<double> ref_batch_norm_inference(const Shape& xs, const std::vector<double>& x,
                                             int axis, const std::vector<double>& g,
                                             const std::vector<double>& b,
                                             const std::vector<double>& rm,
                                             const std::vector<double>& rv, double eps) {
  std::vector<double> y(x.size());
  each(xs, [&](const Ints& i) {
    const size_t c = i[axis];
    const int64_t o = offset(xs, i);
    y[o] = (x[o] - rm[c]) / std::sqrt(rv[c] + eps) * g[c] + b[c];
  });
  return y;
}

// torch's group_norm: x [N, C, ...], statistics per (sample, group of C / G channels).
std::vector<double> ref_group_norm(const Shape& xs, const std::vector<double>& x, int64_t groups,
                                   const std::vector<double>& g, const std::vector<double>& b,
                                   double eps) {
  const int64_t n = xs[0], c_n = xs[1], per = c_n / groups;
  const size_t rows = static_cast<size_t>(n * groups);
  std::vector<double> sum(rows), ss(rows), cnt(rows);
  auto row = [&](const Ints& i) { return static_cast<size_t>(i[0] * groups + i[1] / per); };
  each(xs, [&](const Ints& i) { sum[row(i)] += x[offset(xs, i)], cnt[row(i)] += 1; });
  each(xs, [&](const Ints& i) {
    const double d = x[offset(xs, i)] - sum[row(i)] / cnt[row(i)];
    ss[row(i)] += d * d;
  });
  std::vector<double> y(x.size());
  each(xs, [&](const Ints& i) {
    const size_t r = row(i);
    const int64_t o = offset(xs, i);
    y[o] = (x[o] - sum[r] / cnt[r]) / std::sqrt(ss[r] / cnt[r] + eps) * g[i[1]] + b[i[1]];
  });
  return y;
}

void expect_near(const std::string& name, const Tensor& t, const Shape& shape,
                 const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(t.shape(), shape) << name;
  auto got = nx::to_array(host(t));
  ASSERT_EQ(got.size(), want.size()) << name;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i])))
        << name << " element " << i;
}

std::string bits_of(const BatchNormOutput& o) {
  return bits(o.y) + " | " + bits(o.state.mean) + " | " + bits(o.state.var);
}

struct BnCase {
  const char* name;
  Shape xs;
  int axis;
  double momentum, eps;
};

std::vector<BnCase> bn_cases() {
  return {
      {"NCHW", {4, 3, 5, 6}, 1, 0.1, 1e-5},
      {"[N, C] (BatchNorm1d)", {6, 4}, 1, 0.1, 1e-5},
      {"NCL, momentum 0.3, eps 1e-3", {3, 4, 7}, 1, 0.3, 1e-3},
      {"NHWC (axis -1)", {2, 5, 6, 3}, -1, 0.1, 1e-5},
      {"NCDHW", {2, 2, 3, 4, 2}, 1, 0.1, 1e-5},
      {"momentum 1 replaces the state", {3, 2, 4}, 1, 1.0, 1e-5},
  };
}

class Norm : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
};

TEST_P(Norm, BatchNormTrainingMatchesTheLoopEagerAndCompiled) {
  uint64_t seed = 1;
  for (const BnCase& c : bn_cases()) {
    const int a = c.axis < 0 ? static_cast<int>(c.xs.size()) + c.axis : c.axis;
    const Shape cs{c.xs[a]};
    auto xv = values(c.xs, seed++), gv = values(cs, seed++), bv = values(cs, seed++);
    auto rm = values(cs, seed++), rv = positive(cs, seed++);
    BnRef want = ref_batch_norm(c.xs, xv, a, gv, bv, rm, rv, c.momentum, c.eps);
    Tensor x = on(f64(c.xs, xv)), g = on(f64(cs, gv)), b = on(f64(cs, bv));
    BatchNormState s{on(f64(cs, rm)), on(f64(cs, rv))};
    BatchNormOptions o{.axis = c.axis, .momentum = c.momentum, .eps = c.eps};
    auto f = [o](const Tensor& x, const Tensor& g, const Tensor& b, const BatchNormState& s) {
      return nx::nn::batch_norm(x, g, b, s, o);
    };
    BatchNormOutput eager = f(x, g, b, s);
    EXPECT_EQ(eager.y.device(), x.device()) << c.name;
    EXPECT_EQ(eager.state.mean.device(), x.device()) << c.name;
    expect_near(std::string(c.name) + " y", eager.y, c.xs, want.y);
    expect_near(std::string(c.name) + " running mean", eager.state.mean, cs, want.mean);
    expect_near(std::string(c.name) + " running var", eager.state.var, cs, want.var);
    EXPECT_EQ(bits_of(rune::jit(f)(x, g, b, s)), bits_of(eager)) << c.name << " compiled";
  }
  // momentum 0: the state as it was.
  Tensor x = on(f64({3, 2}, values({3, 2}, 50)));
  BatchNormState s{on(f64({2}, {0.25, -1})), on(f64({2}, {2, 3}))};
  auto out = nx::nn::batch_norm(x, on(f64({2}, {1, 1})), on(f64({2}, {0, 0})), s, {.momentum = 0});
  EXPECT_EQ(nx::to_array(host(out.state.mean)), (std::vector<double>{0.25, -1}));
  EXPECT_EQ(nx::to_array(host(out.state.var)), (std::vector<double>{2, 3}));
}

TEST_P(Norm, BatchNormInferenceUsesTheRunningStatistics) {
  uint64_t seed = 100;
  for (const BnCase& c : bn_cases()) {
    const int a = c.axis < 0 ? static_cast<int>(c.xs.size()) + c.axis : c.axis;
    const Shape cs{c.xs[a]};
    auto xv = values(c.xs, seed++), gv = values(cs, seed++), bv = values(cs, seed++);
    auto rm = values(cs, seed++), rv = positive(cs, seed++);
    Tensor x = on(f64(c.xs, xv)), g = on(f64(cs, gv)), b = on(f64(cs, bv));
    BatchNormState s{on(f64(cs, rm)), on(f64(cs, rv))};
    BatchNormOptions o{.axis = c.axis, .eps = c.eps};
    auto f = [o](const Tensor& x, const Tensor& g, const Tensor& b, const BatchNormState& s) {
      return nx::nn::batch_norm_inference(x, g, b, s, o);
    };
    Tensor eager = f(x, g, b, s);
    expect_near(c.name, eager, c.xs, ref_batch_norm_inference(c.xs, xv, a, gv, bv, rm, rv, c.eps));
    EXPECT_EQ(bits(rune::jit(f)(x, g, b, s)), bits(eager)) << c.name << " compiled";
  }
  // The state from batch_norm_state (mean 0, var 1): y = x / sqrt(1 + eps) * g + b.
  BatchNormState init = nx::nn::batch_norm_state(3, nx::float64);
  EXPECT_EQ(nx::to_array(init.mean), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(nx::to_array(init.var), (std::vector<double>{1, 1, 1}));
  Tensor x = on(f64({2, 3}, {1, 2, 3, 4, 5, 6}));
  Tensor y = nx::nn::batch_norm_inference(x, on(f64({3}, {1, 1, 1})), on(f64({3}, {0, 0, 0})),
                                          {on(init.mean), on(init.var)}, {.eps = 0});
  EXPECT_EQ(nx::to_array(host(y)), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

struct GnCase {
  const char* name;
  Shape xs;
  int64_t groups;
};

TEST_P(Norm, GroupNormMatchesTheLoopEagerAndCompiled) {
  const std::vector<GnCase> cases{
      {"NCHW, 3 groups", {2, 6, 4, 5}, 3},
      {"one group", {2, 6, 4, 5}, 1},
      {"instance norm", {2, 6, 4, 5}, 6},
      {"NCL", {3, 4, 7}, 2},
      {"[N, C]", {5, 4}, 2},
      {"NCDHW", {1, 4, 2, 3, 2}, 2},
      {"empty batch", {0, 4, 3}, 2},
  };
  uint64_t seed = 200;
  for (const GnCase& c : cases) {
    const Shape cs{c.xs[1]};
    auto xv = values(c.xs, seed++), gv = values(cs, seed++), bv = values(cs, seed++);
    Tensor x = on(f64(c.xs, xv)), g = on(f64(cs, gv)), b = on(f64(cs, bv));
    for (double eps : {1e-5, 0.5}) {
      auto f = [&c, eps](const Tensor& x, const Tensor& g, const Tensor& b) {
        return nx::nn::group_norm(x, c.groups, g, b, eps);
      };
      Tensor eager = f(x, g, b);
      EXPECT_EQ(eager.device(), x.device()) << c.name;
      expect_near(c.name, eager, c.xs, ref_group_norm(c.xs, xv, c.groups, gv, bv, eps));
      EXPECT_EQ(bits(rune::jit(f)(x, g, b)), bits(eager)) << c.name << " compiled";
    }
  }
}

// 16-bit floats compute at float32 and round once; a float32 state beside bfloat16 x stays
// float32.
TEST_P(Norm, SixteenBitFloatsRoundOnce) {
  const Shape xs{4, 3, 5}, cs{3};
  auto xv = values(xs, 300), gv = values(cs, 301), bv = values(cs, 302);
  for (nx::DType t : {nx::float16, nx::bfloat16}) {
    Tensor x = on(nx::cast(f64(xs, xv), t));
    auto xr = nx::to_array(host(x));  // the rounded inputs
    Tensor g = on(nx::cast(f64(cs, gv), t)), b = on(nx::cast(f64(cs, bv), t));
    auto gr = nx::to_array(host(g)), br = nx::to_array(host(b));
    const double tol = t == nx::float16 ? 2e-3 : 1e-2;
    BatchNormState s = nx::nn::batch_norm_state(3);
    BatchNormOutput o = nx::nn::batch_norm(x, g, b, {on(s.mean), on(s.var)});
    EXPECT_EQ(o.y.dtype(), t);
    EXPECT_EQ(o.state.var.dtype(), nx::float32);
    BnRef want = ref_batch_norm(xs, xr, 1, gr, br, {0, 0, 0}, {1, 1, 1}, 0.1, 1e-5);
    expect_near("batch_norm " + rt::dname(t), o.y, xs, want.y, tol);
    expect_near("running var " + rt::dname(t), o.state.var, cs, want.var, 1e-6);
    Tensor gn = nx::nn::group_norm(x, 3, g, b);
    EXPECT_EQ(gn.dtype(), t);
    expect_near("group_norm " + rt::dname(t), gn, xs, ref_group_norm(xs, xr, 3, gr, br, 1e-5), tol);
  }
}

// A compiled SGD step whose state is donated (nx::donate, or a signature that consumes it): a
// donated leaf is written into the first result of its dtype and size, in the results' order,
// that the program may write in place (trace/jit.cpp), so the step returns the new state first
// and it lands in the old state's memory; losses, parameters and states equal the eager step's
// bits.
TEST_P(Norm, DonatedStateIsUpdatedInPlaceUnderJit) {
  using Params = std::pair<Tensor, Tensor>;  // gamma, beta
  const Shape xs{4, 3, 5}, cs{3};
  Tensor r = on(f64(xs, values(xs, 402)));
  // loss(params; state, x) = sum(sin(batch_norm(x).y) * r), the new state as aux.
  auto step = [r](const Params& p, const BatchNormState& s, const Tensor& x) {
    auto [va, grads] = rune::value_and_grad(
        [&](const Params& q) {
          BatchNormOutput o = nx::nn::batch_norm(x, q.first, q.second, s, {.momentum = 0.2});
          return std::pair<Tensor, BatchNormState>{nx::sum(nx::sin(o.y) * r), o.state};
        },
        p, rune::has_aux);
    Params next{p.first - grads.first * 0.1, p.second - grads.second * 0.1};
    return std::make_tuple(va.second, next, va.first);
  };
  auto state = [&] {
    return BatchNormState{on(f64(cs, {0.5, -0.25, 1})), on(f64(cs, {1, 2, 0.5}))};
  };
  Params ep{on(f64(cs, values(cs, 400))), on(f64(cs, values(cs, 401)))}, p = ep;
  BatchNormState es = state(), s = state();
  auto compiled = rune::jit(step);
  auto consuming = rune::jit(rune::Signature().consume(1), step);
  for (int i = 0; i < 4; ++i) {
    Tensor x = on(f64(xs, values(xs, 410 + i)));
    auto [want_s, want_p, want_loss] = step(ep, es, x);
    ep = want_p, es = want_s;
    void* mean_at = s.mean.impl().buffer->data;
    void* var_at = s.var.impl().buffer->data;
    const BatchNormState old = s;
    auto [got_s, got_p, got_loss] =
        i % 2 == 0 ? compiled(p, BatchNormState{nx::donate(s.mean), nx::donate(s.var)}, x)
                   : consuming(p, s, x);
    EXPECT_EQ(got_s.mean.impl().buffer->data, mean_at) << "step " << i << ": mean not in place";
    EXPECT_EQ(got_s.var.impl().buffer->data, var_at) << "step " << i << ": var not in place";
    EXPECT_EQ(rt::error_of([&] { nx::to_array(old.var); }),
              "nx::to_array: float64 [3] was donated to rune::jit");
    EXPECT_EQ(bits(got_loss), bits(want_loss)) << "loss, step " << i;
    EXPECT_EQ(bits(got_p.first), bits(want_p.first)) << "gamma, step " << i;
    EXPECT_EQ(bits(got_p.second), bits(want_p.second)) << "beta, step " << i;
    EXPECT_EQ(bits(got_s.mean), bits(want_s.mean)) << "running mean, step " << i;
    EXPECT_EQ(bits(got_s.var), bits(want_s.var)) << "running var, step " << i;
    p = got_p, s = got_s;
  }
  EXPECT_EQ(compiled.traces(), 1u);
}

// vmap over an extra leading axis: each example normalised on its own, as a loop.
TEST_P(Norm, VmapMatchesALoop) {
  const Shape xs{3, 2, 4, 5}, cs{4};
  Tensor xb = on(f64(xs, values(xs, 500))), g = on(f64(cs, values(cs, 501)));
  Tensor b = on(f64(cs, values(cs, 502)));
  BatchNormState s{on(f64(cs, values(cs, 503))), on(f64(cs, positive(cs, 504)))};
  auto gn = [](const Tensor& x, const Tensor& g, const Tensor& b) {
    return nx::nn::group_norm(x, 2, g, b);
  };
  auto bn = [s](const Tensor& x, const Tensor& g, const Tensor& b) {
    BatchNormOutput o = nx::nn::batch_norm(x, g, b, s);
    return std::make_pair(o.y, o.state.var);
  };
  std::vector<Tensor> gn_rows, bn_rows, var_rows;
  for (int64_t i = 0; i < xs[0]; ++i) {
    gn_rows.push_back(gn(nx::index(xb, 0, i), g, b));
    auto [y, v] = bn(nx::index(xb, 0, i), g, b);
    bn_rows.push_back(y), var_rows.push_back(v);
  }
  EXPECT_EQ(bits(rune::vmap(gn, {0, rune::none, rune::none})(xb, g, b)), bits(nx::stack(gn_rows)));
  auto [y, v] = rune::vmap(bn, {0, rune::none, rune::none})(xb, g, b);
  EXPECT_EQ(bits(y), bits(nx::stack(bn_rows)));
  EXPECT_EQ(bits(v), bits(nx::stack(var_rows)));
}

// The gradients on the device and compiled have the host's eager bits.
TEST_P(Norm, GradientsOnTheDeviceHaveTheHostsBits) {
  const Shape xs{3, 4, 2, 3}, cs{4};
  Tensor x = f64(xs, values(xs, 600)), g = f64(cs, values(cs, 601)), b = f64(cs, values(cs, 602));
  BatchNormState s{f64(cs, values(cs, 603)), f64(cs, positive(cs, 604))};
  auto grads = [](const Tensor& x, const Tensor& g, const Tensor& b, const BatchNormState& s) {
    auto [gx, gg, gb] = rune::grad(
        [&](const Tensor& x, const Tensor& g, const Tensor& b) {
          Tensor y = nx::nn::batch_norm(x, g, b, s).y;
          return nx::sum(nx::sin(y) + nx::cos(nx::nn::group_norm(y, 2, g, b)));
        },
        rune::argnums<0, 1, 2>)(x, g, b);
    return nx::concatenate({nx::flatten(gx), gg, gb});
  };
  const std::string want = bits(grads(x, g, b, s));
  BatchNormState sd{on(s.mean), on(s.var)};
  EXPECT_EQ(bits(grads(on(x), on(g), on(b), sd)), want) << "eager on " << GetParam();
  EXPECT_EQ(bits(rune::jit(grads)(on(x), on(g), on(b), sd)), want) << "compiled on " << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Devices, Norm, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

// ---- gradients (float64, on the host) ----

// rune::grad of sum(f(x, g, b) * r) against central differences of `ref`.
void check_gradients(
    const std::string& name, const Shape& xs, const Shape& cs,
    const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& f,
    const std::function<std::vector<double>(const std::vector<double>&, const std::vector<double>&,
                                            const std::vector<double>&)>& ref,
    uint64_t seed) {
  std::vector<std::vector<double>> v{values(xs, seed), values(cs, seed + 1), values(cs, seed + 2)};
  auto rv = values(xs, seed + 3);
  Tensor r = f64(xs, rv);
  auto [gx, gg, gb] = rune::grad(
      [&](const Tensor& x, const Tensor& g, const Tensor& b) { return nx::sum(f(x, g, b) * r); },
      rune::argnums<0, 1, 2>)(f64(xs, v[0]), f64(cs, v[1]), f64(cs, v[2]));
  const std::vector<double> got[3] = {nx::to_array(gx), nx::to_array(gg), nx::to_array(gb)};
  for (size_t which = 0; which < 3; ++which) {
    for (size_t i = 0; i < v[which].size(); ++i) {
      auto w = v;
      const double h = 1e-5;
      auto dot = [&](double d) {
        w[which][i] = v[which][i] + d;
        auto y = ref(w[0], w[1], w[2]);
        double s = 0;
        for (size_t k = 0; k < y.size(); ++k) s += y[k] * rv[k];
        return s;
      };
      const double fd = (dot(h) - dot(-h)) / (2 * h);
      EXPECT_NEAR(got[which][i], fd, 1e-7 * std::max(1.0, std::fabs(fd))) << name << ": d/d"
                                                                          << (which == 0   ? "x"
                                                                              : which == 1 ? "gamma"
                                                                                           : "beta")
                                                                          << "[" << i << "]";
    }
  }
}

TEST(NormGrad, BatchNormAgainstCentralDifferences) {
  for (int axis : {1, -1}) {
    const Shape xs = axis == 1 ? Shape{3, 2, 4} : Shape{3, 4, 2}, cs{2};
    const int a = axis == 1 ? 1 : 2;
    const std::vector<double> rm{0.1, -0.2}, rv{1.5, 0.7};
    BatchNormState s{f64(cs, rm), f64(cs, rv)};
    check_gradients(
        "batch_norm axis " + std::to_string(axis), xs, cs,
        [&](const Tensor& x, const Tensor& g, const Tensor& b) {
          return nx::nn::batch_norm(x, g, b, s, {.axis = axis}).y;
        },
        [&](const auto& x, const auto& g, const auto& b) {
          return ref_batch_norm(xs, x, a, g, b, rm, rv, 0.1, 1e-5).y;
        },
        10);
    check_gradients(
        "batch_norm_inference axis " + std::to_string(axis), xs, cs,
        [&](const Tensor& x, const Tensor& g, const Tensor& b) {
          return nx::nn::batch_norm_inference(x, g, b, s, {.axis = axis});
        },
        [&](const auto& x, const auto& g, const auto& b) {
          return ref_batch_norm_inference(xs, x, a, g, b, rm, rv, 1e-5);
        },
        20);
  }
}

TEST(NormGrad, GroupNormAgainstCentralDifferences) {
  const Shape xs{2, 6, 3}, cs{6};
  for (int64_t groups : {1, 3, 6})
    check_gradients(
        "group_norm, " + std::to_string(groups) + " groups", xs, cs,
        [groups](const Tensor& x, const Tensor& g, const Tensor& b) {
          return nx::nn::group_norm(x, groups, g, b);
        },
        [&](const auto& x, const auto& g, const auto& b) {
          return ref_group_norm(xs, x, groups, g, b, 1e-5);
        },
        30 + static_cast<uint64_t>(groups));
}

// The same gradients as the textbook composition of nx::mean and nx::var.
TEST(NormGrad, EqualTheCompositionOfMeanAndVar) {
  const Shape xs{4, 3, 2, 5}, cs{3};
  Tensor x = f64(xs, values(xs, 40)), g = f64(cs, values(cs, 41)), b = f64(cs, values(cs, 42));
  Tensor r = f64(xs, values(xs, 43));
  BatchNormState s = nx::nn::batch_norm_state(3, nx::float64);
  auto along = [](const Tensor& p) { return nx::reshape(p, {1, 3, 1, 1}); };
  auto bn = [&](const Tensor& x, const Tensor& g, const Tensor& b) {
    return nx::nn::batch_norm(x, g, b, s).y;
  };
  auto bn_composed = [&](const Tensor& x, const Tensor& g, const Tensor& b) {
    Tensor m = nx::mean(x, {0, 2, 3}, true), v = nx::var(x, {0, 2, 3}, 0, true);
    return (x - m) / nx::sqrt(v + 1e-5) * along(g) + along(b);
  };
  auto gn = [](const Tensor& x, const Tensor& g, const Tensor& b) {
    return nx::nn::group_norm(x, 3, g, b);
  };
  auto gn_composed = [&](const Tensor& x, const Tensor& g, const Tensor& b) {
    Tensor xg = nx::reshape(x, {4, 3, 10});
    Tensor m = nx::mean(xg, {2}, true), v = nx::var(xg, {2}, 0, true);
    return nx::reshape((xg - m) / nx::sqrt(v + 1e-5), xs) * along(g) + along(b);
  };
  using F = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
  for (auto [name, f, composed] : {std::tuple<const char*, F, F>{"batch_norm", bn, bn_composed},
                                   std::tuple<const char*, F, F>{"group_norm", gn, gn_composed}}) {
    auto grads = [&](const F& fn) {
      auto [gx, gg, gb] =
          rune::grad([&](const Tensor& x, const Tensor& g,
                         const Tensor& b) { return nx::sum(nx::sin(fn(x, g, b)) * r); },
                     rune::argnums<0, 1, 2>)(x, g, b);
      return nx::to_array(nx::concatenate({nx::flatten(gx), gg, gb}));
    };
    expect_near(std::string(name) + " value", f(x, g, b), xs, nx::to_array(composed(x, g, b)));
    const auto want = grads(composed);
    expect_near(std::string(name) + " gradient", f64({static_cast<int64_t>(want.size())}, grads(f)),
                {static_cast<int64_t>(want.size())}, want);
  }
}

// The running statistics are held constant: no gradient reaches x through the new state, nor
// the old state through anything.
TEST(NormGrad, NoGradientFlowsThroughTheRunningStatistics) {
  const Shape xs{3, 2, 4}, cs{2};
  Tensor x = f64(xs, values(xs, 50)), g = f64(cs, {1.5, -0.5}), b = f64(cs, {0, 1});
  BatchNormState s{f64(cs, {0.1, -0.2}), f64(cs, {1.5, 0.7})};
  Tensor through_state = rune::grad(
      [&](const Tensor& x) {
        BatchNormOutput o = nx::nn::batch_norm(x, g, b, s);
        return nx::sum(o.state.mean * 3.0 + o.state.var * 5.0);
      },
      x);
  EXPECT_EQ(nx::to_array(through_state), std::vector<double>(24, 0.0));
  auto [gm, gv] = rune::grad(
      [&](const BatchNormState& st) {
        BatchNormOutput o = nx::nn::batch_norm(x, g, b, st);
        Tensor y = nx::nn::batch_norm_inference(x, g, b, st);
        return nx::sum(o.state.mean + o.state.var) + nx::sum(y * y);
      },
      s);
  EXPECT_EQ(nx::to_array(gm), (std::vector<double>{0, 0}));
  EXPECT_EQ(nx::to_array(gv), (std::vector<double>{0, 0}));
}

TEST(NormErrors, NameTheApiAndTheValues) {
  Tensor x = f64({2, 3, 4}, values({2, 3, 4}, 1));
  Tensor g = f64({3}, {1, 1, 1}), b = f64({3}, {0, 0, 0});
  BatchNormState s = nx::nn::batch_norm_state(3, nx::float64);
  auto bn = [&](const Tensor& xx, const Tensor& gg, const Tensor& bb, const BatchNormState& ss,
                BatchNormOptions o = {}) { nx::nn::batch_norm(xx, gg, bb, ss, o); };
  expect_error(
      [&] {
        bn(x, f64({4}, {1, 1, 1, 1}), b, s);
      },
      {"nx::nn::batch_norm:", "gamma must be float64 [3]", "float64 [2, 3, 4], axis 1",
       "got float64 [4]"});
  expect_error([&] { bn(x, g, nx::cast(b, nx::float32), s); },
               {"nx::nn::batch_norm:", "beta must be float64 [3]", "got float32 [3]"});
  expect_error([&] { bn(x, g, b, s, {.axis = -1}); },
               {"nx::nn::batch_norm:", "gamma must be float64 [4]", "axis 2"});
  expect_error(
      [&] {
        bn(x, g, b, {s.mean, f64({2}, {1, 1})});
      },
      {"nx::nn::batch_norm:", "state.var must be a float [3]", "got float64 [2]"});
  expect_error(
      [&] {
        bn(x, g, b, {nx::cast(s.mean, nx::float32), s.var});
      },
      {"nx::nn::batch_norm:", "state.mean float32 [3] and state.var float64 [3]"});
  expect_error(
      [&] {
        bn(x, g, b, {nx::cast(s.mean, nx::int32), s.var});
      },
      {"nx::nn::batch_norm:", "state.mean must be a float [3]", "int32 [3]"});
  expect_error([&] { bn(x, g, b, s, {.momentum = 1.5}); },
               {"nx::nn::batch_norm:", "momentum must be in [0, 1], got 1.5"});
  expect_error([&] { bn(x, g, b, s, {.eps = -1}); },
               {"nx::nn::batch_norm:", "eps must be >= 0, got -1"});
  expect_error([&] { bn(x, g, b, s, {.axis = 3}); },
               {"nx::nn::batch_norm:", "axis 3 out of range for float64 [2, 3, 4]"});
  expect_error(
      [&] {
        bn(f64({1, 3}, {1, 2, 3}), g, b, s);
      },
      {"nx::nn::batch_norm:", "more than 1 value per channel", "float64 [1, 3] has 1"});
  expect_error(
      [&] {
        bn(f64({3}, {1, 2, 3}), g, b, s);
      },
      {"nx::nn::batch_norm:", "at least 2-d", "float64 [3]"});
  expect_error([&] { bn(nx::cast(x, nx::int32), g, b, s); }, {"nx::nn::batch_norm:", "int32"});
  expect_error(
      [&] {
        nx::nn::batch_norm_inference(x, g, f64({2}, {0, 0}), s);
      },
      {"nx::nn::batch_norm_inference:", "beta must be float64 [3]", "got float64 [2]"});
  expect_error([&] { nx::nn::batch_norm_state(3, nx::int32); },
               {"nx::nn::batch_norm_state:", "dtype must be float, got int32"});
  expect_error(
      [&] { nx::nn::group_norm(x, 2, g, b); },
      {"nx::nn::group_norm:", "num_groups 2 does not divide the 3 channels", "float64 [2, 3, 4]"});
  expect_error([&] { nx::nn::group_norm(x, 0, g, b); },
               {"nx::nn::group_norm:", "num_groups 0 does not divide"});
  expect_error(
      [&] {
        nx::nn::group_norm(x, 3, f64({4}, {1, 1, 1, 1}), b);
      },
      {"nx::nn::group_norm:", "gamma must be float64 [3]", "got float64 [4]"});
  expect_error(
      [&] {
        nx::nn::group_norm(f64({3}, {1, 2, 3}), 1, g, b);
      },
      {"nx::nn::group_norm:", "at least 2-d", "float64 [3]"});
  expect_error([&] { nx::nn::group_norm(x, 3, g, b, -0.5); },
               {"nx::nn::group_norm:", "eps must be >= 0, got -0.5"});
}

}  // namespace
