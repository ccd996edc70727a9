// nx::reduce_window and nx::nn::max_pool / avg_pool / global_avg_pool (core/window.cpp,
// docs/conv.md) against direct float64 loops written here, eagerly and under rune::jit on CPU,
// CPU:1 and the fake CUDA:0 (eager and compiled share their bits); max pooling's gradient goes
// to the first maximum of each window (ties included), avg pooling's against central
// differences; errors that name the API and the shapes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/window.h"
#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"
#include "window_test_util.h"

namespace {

using namespace window_test;
using nx::WindowReduce;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

// Row-major offsets and index walks of the references (tests/test_util.h).
int64_t offset(const Shape& s, const Ints& i) { return rt::row_major_offset(s, i); }
void each(const Shape& s, const std::function<void(const Ints&)>& f) { rt::for_each_index(s, f); }
int64_t numel(const Shape& s) { return ir::numel(s); }

struct Result {
  Shape shape;
  std::vector<double> v;
  std::vector<int64_t> at;     // max / min: the flat input position chosen (-1: padding only)
  std::vector<double> inside;  // how many window elements lie inside x
};

// The windowed reduction, window offsets in row-major order; max / min keep the first extreme
// (strictly greater / less replaces), padding is the identity and never chosen.
Result ref_window(const Shape& xs, const std::vector<double>& x, WindowReduce op, const Shape& w,
                  Ints stride, Pairs pads, Ints dil) {
  const size_t nd = xs.size();
  if (stride.empty()) stride.assign(nd, 1);
  if (dil.empty()) dil.assign(nd, 1);
  if (pads.empty()) pads.assign(nd, {0, 0});
  Shape os;
  for (size_t a = 0; a < nd; ++a)
    os.push_back((xs[a] + pads[a].first + pads[a].second - (w[a] - 1) * dil[a] - 1) / stride[a] +
                 1);
  Result r{os, std::vector<double>(numel(os)), std::vector<int64_t>(numel(os), -1),
           std::vector<double>(numel(os))};
  each(os, [&](const Ints& p) {
    double acc = op == WindowReduce::Sum ? 0 : op == WindowReduce::Max ? -INFINITY : INFINITY;
    int64_t at = -1;
    double inside = 0;
    each(w, [&](const Ints& j) {
      Ints q;
      for (size_t a = 0; a < nd; ++a) {
        int64_t v = p[a] * stride[a] + j[a] * dil[a] - pads[a].first;
        if (v < 0 || v >= xs[a]) return;
        q.push_back(v);
      }
      inside += 1;
      const int64_t o = offset(xs, q);
      if (op == WindowReduce::Sum)
        acc += x[o];
      else if (at < 0 || (op == WindowReduce::Max ? x[o] > acc : x[o] < acc))
        acc = x[o], at = o;
    });
    const int64_t o = offset(os, p);
    r.v[o] = acc, r.at[o] = at, r.inside[o] = inside;
  });
  return r;
}

void expect_near(const std::string& name, const Tensor& t, const Shape& shape,
                 const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(t.shape(), shape) << name;
  auto got = nx::to_array(host(t));
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {  // equal infinities (windows of padding alone) pass
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i])))
          << name << " element " << i;
    }
  }
}

struct WindowCase {
  const char* name;
  Shape xs, window;
  nx::WindowOptions o;
};

std::vector<WindowCase> window_cases() {
  return {
      {"spatial 3x2, strides", {2, 3, 5, 6}, {1, 1, 3, 2}, {.strides = {1, 1, 2, 1}}},
      {"SAME", {2, 2, 5, 7}, {1, 1, 3, 3}, {.strides = {1, 1, 2, 2}, .padding = "SAME"}},
      {"explicit padding",
       {1, 2, 4, 5},
       {1, 1, 2, 3},
       {.padding = {{0, 0}, {0, 0}, {1, 2}, {2, 0}}}},
      {"dilation", {1, 2, 7, 6}, {1, 1, 3, 2}, {.strides = {1, 1, 1, 2}, .dilation = {1, 1, 2, 3}}},
      {"over the batch axis too", {4, 2, 3, 3}, {2, 1, 2, 2}, {.strides = {2, 1, 1, 1}}},
      {"window as large as the input", {2, 2, 4, 5}, {1, 1, 4, 5}, {}},
      {"empty batch", {0, 2, 4, 4}, {1, 1, 2, 2}, {.strides = {1, 1, 2, 2}}},
      {"1-d", {9}, {3}, {.strides = {2}, .padding = {{1, 1}}}},
      {"3-d", {1, 2, 4, 5, 3}, {1, 1, 2, 3, 2}, {.strides = {1, 1, 2, 1, 1}, .padding = "SAME"}},
  };
}

Pairs pads_of(const WindowCase& c) {
  if (c.o.padding.mode == "SAME") return same_pads(c.xs, c.window, c.o.strides, c.o.dilation);
  if (c.o.padding.mode == "VALID") return {};
  return c.o.padding.pairs;
}

class Window : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
};

TEST_P(Window, ReduceWindowMatchesTheLoopEagerAndCompiled) {
  uint64_t seed = 1;
  for (const WindowCase& c : window_cases())
    for (WindowReduce op : {WindowReduce::Sum, WindowReduce::Max, WindowReduce::Min}) {
      const std::string name = std::string(c.name) + (op == WindowReduce::Sum   ? " sum"
                                                      : op == WindowReduce::Max ? " max"
                                                                                : " min");
      auto xv = values(c.xs, seed++);
      Result want = ref_window(c.xs, xv, op, c.window, c.o.strides, pads_of(c), c.o.dilation);
      Tensor x = on(f64(c.xs, xv));
      auto f = [&c, op](const Tensor& t) { return nx::reduce_window(t, op, c.window, c.o); };
      Tensor eager = f(x);
      EXPECT_EQ(eager.device(), x.device()) << name;
      expect_near(name, eager, want.shape, want.v);
      EXPECT_EQ(bits(rune::jit(f)(x)), bits(eager)) << name << " compiled";
    }
}

TEST_P(Window, IntegersKeepTheirDtypeAndPadWithTheIdentity) {
  Tensor x = on(nx::cast(f64({2, 5}, {3, -7, 2, 9, -1, 4, 4, -8, 0, 6}), nx::int32));
  nx::WindowOptions o{.strides = {1, 2}, .padding = {{0, 0}, {1, 1}}};
  Tensor mx = nx::reduce_window(x, WindowReduce::Max, {1, 3}, o);
  Tensor mn = nx::reduce_window(x, WindowReduce::Min, {1, 3}, o);
  Tensor sm = nx::reduce_window(x, WindowReduce::Sum, {1, 3}, o);
  EXPECT_EQ(mx.dtype(), nx::int32);
  EXPECT_EQ(nx::to_vector<int32_t>(mx), (std::vector<int32_t>{3, 9, 9, 4, 4, 6}));
  EXPECT_EQ(nx::to_vector<int32_t>(mn), (std::vector<int32_t>{-7, -7, -1, 4, -8, 0}));
  EXPECT_EQ(nx::to_vector<int32_t>(sm), (std::vector<int32_t>{-4, 4, 8, 8, -4, 6}));
  Tensor u = on(nx::cast(f64({4}, {5, 1, 7, 2}), nx::uint8));
  EXPECT_EQ(
      nx::to_vector<uint8_t>(nx::reduce_window(u, WindowReduce::Min, {2}, {.padding = {{1, 0}}})),
      (std::vector<uint8_t>{5, 1, 1, 2}));
}

TEST_P(Window, PoolsMatchTheLoopInBothLayouts) {
  const Shape xs{2, 3, 6, 5};
  auto xv = values(xs, 7);
  Tensor x = on(f64(xs, xv));
  Tensor xl = nx::permute(x, {0, 2, 3, 1});
  auto last = [](const Tensor& t) { return nx::permute(t, {0, 2, 3, 1}); };
  // max_pool 2x2, strides default to the window (torch's): floor((6-2)/2)+1 = 3, (5-2)/2+1 = 2.
  Result m = ref_window(xs, xv, WindowReduce::Max, {1, 1, 2, 2}, {1, 1, 2, 2}, {}, {});
  Tensor mp = nx::nn::max_pool(x, {2, 2});
  expect_near("max_pool", mp, m.shape, m.v);
  EXPECT_EQ(bits(rune::jit([](const Tensor& t) {
              return nx::nn::max_pool(t, {2, 2});
            })(x)),
            bits(mp));
  EXPECT_EQ(bits(nx::nn::max_pool(xl, {2, 2}, {.layout = "NHWC"})), bits(last(mp)));
  // max_pool 3x3, stride 2, padding 1, dilation (torch's arguments).
  Result m2 = ref_window(xs, xv, WindowReduce::Max, {1, 1, 3, 2}, {1, 1, 2, 1},
                         {{0, 0}, {0, 0}, {1, 1}, {1, 0}}, {1, 1, 1, 2});
  expect_near("max_pool padded dilated",
              nx::nn::max_pool(
                  x, {3, 2}, {.strides = {2, 1}, .padding = {{1, 1}, {1, 0}}, .dilation = {1, 2}}),
              m2.shape, m2.v);
  // avg_pool with padding, counting the padding (torch's default) or not.
  const Pairs pads{{0, 0}, {0, 0}, {1, 1}, {1, 1}};
  Result s = ref_window(xs, xv, WindowReduce::Sum, {1, 1, 3, 3}, {1, 1, 2, 2}, pads, {});
  std::vector<double> incl(s.v.size()), excl(s.v.size());
  for (size_t i = 0; i < s.v.size(); ++i) incl[i] = s.v[i] / 9, excl[i] = s.v[i] / s.inside[i];
  nx::nn::PoolOptions po{.strides = {2, 2}, .padding = {{1, 1}, {1, 1}}};
  Tensor ai = nx::nn::avg_pool(x, {3, 3}, po);
  expect_near("avg_pool count_include_pad", ai, s.shape, incl);
  po.count_include_pad = false;
  Tensor ae = nx::nn::avg_pool(x, {3, 3}, po);
  expect_near("avg_pool without the padding", ae, s.shape, excl);
  EXPECT_EQ(bits(rune::jit([po](const Tensor& t) {
              return nx::nn::avg_pool(t, {3, 3}, po);
            })(x)),
            bits(ae));
  po.layout = "NHWC";
  EXPECT_EQ(bits(nx::nn::avg_pool(xl, {3, 3}, po)), bits(last(ae)));
  // global_avg_pool: the mean over the spatial axes.
  std::vector<double> g(6);
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 30; ++j) g[i] += xv[i * 30 + j];
    g[i] /= 30;
  }
  expect_near("global_avg_pool", nx::nn::global_avg_pool(x), {2, 3}, g);
  expect_near("global_avg_pool NHWC keepdims", nx::nn::global_avg_pool(xl, "NHWC", true),
              {2, 1, 1, 3}, g);
}

// The gradient of sum(max_pool(x) * r) is r scattered to each window's first maximum (x has
// many ties: small integers), eagerly, compiled and on every device with the same bits.
TEST_P(Window, MaxPoolGradientGoesToTheFirstMaximum) {
  const Shape xs{2, 2, 5, 6};
  auto xv = values(xs, 9, 3);
  const Shape w{1, 1, 3, 3};
  const Ints st{1, 1, 2, 2};
  const Pairs pads{{0, 0}, {0, 0}, {1, 1}, {1, 1}};
  Result m = ref_window(xs, xv, WindowReduce::Max, w, st, pads, {});
  auto rv = values(m.shape, 10);
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < m.at.size(); ++i) want[m.at[i]] += rv[i];  // overlapping windows add
  Tensor x = on(f64(xs, xv)), r = on(f64(m.shape, rv));
  nx::nn::PoolOptions po{.strides = {2, 2}, .padding = {{1, 1}, {1, 1}}};
  auto g = [&](const Tensor& t) {
    return rune::grad(
        [&](const Tensor& u) {
          return nx::sum(nx::nn::max_pool(u, {3, 3}, po) * r);
        },
        t);
  };
  Tensor ge = g(x);
  expect_near("max_pool gradient", ge, xs, want, 0);
  EXPECT_EQ(bits(rune::jit(g)(x)), bits(ge));
  // min through reduce_window: the first minimum.
  Result mn = ref_window(xs, xv, WindowReduce::Min, w, st, pads, {});
  std::vector<double> want_min(xv.size());
  for (size_t i = 0; i < mn.at.size(); ++i) want_min[mn.at[i]] += rv[i];
  nx::WindowOptions wo{.strides = st, .padding = pads};
  expect_near("min gradient",
              rune::grad(
                  [&](const Tensor& u) {
                    return nx::sum(nx::reduce_window(u, WindowReduce::Min, w, wo) * r);
                  },
                  x),
              xs, want_min, 0);
}

// A NaN is the extreme of its window for max and min (as nx::argmax counts it), and the first
// NaN takes the gradient: for small windows (a chain of selects) and large ones (argmax).
TEST_P(Window, ANanIsTheExtremeOfItsWindowAndTheFirstOneTakesTheGradient) {
  const double nan = std::nan("");
  for (int64_t side : {2, 5}) {  // 4 taps: the select chain; 25: argmax and take_along_axis
    std::vector<double> xv(static_cast<size_t>(side * side));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<double>(i % 3);
    xv[1] = nan;
    xv[xv.size() - 1] = nan;
    Tensor x = on(f64({1, 1, side, side}, xv));
    for (WindowReduce op : {WindowReduce::Max, WindowReduce::Min}) {
      const std::string name = std::to_string(side) + (op == WindowReduce::Max ? " max" : " min");
      auto f = [&](const Tensor& u) { return nx::reduce_window(u, op, {1, 1, side, side}); };
      EXPECT_TRUE(std::isnan(nx::to_vector<double>(f(x))[0])) << name;
      Tensor g = rune::grad([&](const Tensor& u) { return nx::sum(f(u)); }, x);
      std::vector<double> want(xv.size(), 0.0);
      want[1] = 1;
      EXPECT_EQ(nx::to_vector<double>(g), want) << name;
      EXPECT_EQ(bits(rune::jit(f)(x)), bits(f(x))) << name << " compiled";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Window, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

// avg_pool and the windowed sum are linear: their gradients against central differences of the
// loop reference (float64, on the host).
TEST(WindowGrad, AvgPoolAndSumAgainstCentralDifferences) {
  const Shape xs{1, 2, 5, 4};
  auto xv = values(xs, 11);
  const Pairs pads{{0, 0}, {0, 0}, {1, 0}, {1, 1}};
  for (bool incl : {true, false}) {
    nx::nn::PoolOptions po{
        .strides = {2, 1}, .padding = {{1, 0}, {1, 1}}, .count_include_pad = incl};
    auto ref = [&](const std::vector<double>& v) {
      Result s = ref_window(xs, v, WindowReduce::Sum, {1, 1, 3, 2}, {1, 1, 2, 1}, pads, {});
      for (size_t i = 0; i < s.v.size(); ++i) s.v[i] /= incl ? 6 : s.inside[i];
      return s;
    };
    Result y = ref(xv);
    auto rv = values(y.shape, 12);
    Tensor r = f64(y.shape, rv);
    auto got = nx::to_array(rune::grad(
        [&](const Tensor& u) {
          return nx::sum(nx::nn::avg_pool(u, {3, 2}, po) * r);
        },
        f64(xs, xv)));
    for (size_t i = 0; i < xv.size(); ++i) {
      auto v = xv;
      const double h = 1e-5;
      auto dot = [&](double d) {
        v[i] = xv[i] + d;
        Result o = ref(v);
        double s = 0;
        for (size_t k = 0; k < o.v.size(); ++k) s += o.v[k] * rv[k];
        return s;
      };
      double fd = (dot(h) - dot(-h)) / (2 * h);
      EXPECT_NEAR(got[i], fd, 1e-8) << "count_include_pad " << incl << " element " << i;
    }
  }
}

TEST(WindowErrors, NameTheApiAndTheShapes) {
  Tensor x = f64({2, 3, 4, 4}, values({2, 3, 4, 4}, 1));
  expect_error(
      [&] {
        nx::reduce_window(x, WindowReduce::Max, {1, 1, 5, 2});
      },
      {"nx::reduce_window:", "window [1, 1, 5, 2]", "larger than the padded input (4)",
       "float64 [2, 3, 4, 4]"});
  expect_error(
      [&] {
        nx::reduce_window(x, WindowReduce::Sum, {2, 2});
      },
      {"nx::reduce_window:", "2 extents for float64 [2, 3, 4, 4]"});
  expect_error(
      [&] {
        nx::reduce_window(nx::cast(x, nx::bool_), WindowReduce::Sum, {1, 1, 1, 1});
      },
      {"nx::reduce_window:", "bool"});
  expect_error(
      [&] {
        nx::reduce_window(nx::cast(x, nx::int64), WindowReduce::Min, {1, 1, 2, 2},
                          {.padding = "SAME"});
      },
      {"nx::reduce_window:", "int64"});
  expect_error(
      [&] {
        nx::nn::max_pool(x, {5, 5});
      },
      {"nx::nn::max_pool:", "larger than the padded input", "float64 [2, 3, 4, 4]"});
  expect_error(
      [&] {
        nx::nn::max_pool(x, {2, 2}, {.layout = "NHCW"});
      },
      {"nx::nn::max_pool:", "layout \"NHCW\""});
  expect_error([&] { nx::nn::avg_pool(x, {2}); },
               {"nx::nn::avg_pool:", "window [2] has 1 extents for the 2 spatial dimensions"});
  expect_error([&] { nx::nn::avg_pool(nx::cast(x, nx::int32), {2, 2}); }, {"nx::nn::avg_pool"});
  expect_error(
      [&] {
        nx::nn::global_avg_pool(nx::reshape(x, {6, 16}));
      },
      {"nx::nn::global_avg_pool:", "float64 [6, 16]"});
}

}  // namespace
