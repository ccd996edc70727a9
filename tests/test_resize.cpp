// nx::resize (core/resize.cpp, docs/norm.md) against float64 loops written here from torch's
// index rules (nearest, nearest-exact; linear with half-pixel centres, align_corners=False),
// eagerly and under rune::jit on CPU, CPU:1 and the fake CUDA:0 (eager and compiled share their
// bits), channels first and last, 1 to 3 spatial dimensions; values torch returns for small
// inputs (its float32 nearest rule included); gradients against central differences; vmap
// against a loop; errors that name the API and the values.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/resize.h"
#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"
#include "window_test_util.h"

namespace {

using namespace window_test;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

void each(const Shape& s, const std::function<void(const Ints&)>& f) { rt::for_each_index(s, f); }
int64_t offset(const Shape& s, const Ints& i) { return rt::row_major_offset(s, i); }

// One axis's two source indices and weights per output index, in exact arithmetic: nearest
// floor(d in / out), nearest-exact floor((d + 1/2) in / out), linear at p = (d + 1/2) in / out
// - 1/2 clamped at 0.
struct AxisRef {
  Ints i0, i1;
  std::vector<double> w0, w1;
};
AxisRef ref_axis(int64_t in, int64_t out, const std::string& method) {
  AxisRef r;
  for (int64_t d = 0; d < out; ++d) {
    if (in == out) {
      r.i0.push_back(d), r.i1.push_back(d), r.w0.push_back(1), r.w1.push_back(0);
    } else if (method == "nearest" || method == "nearest-exact") {
      const int64_t i = method == "nearest" ? d * in / out : (2 * d + 1) * in / (2 * out);
      r.i0.push_back(std::min(i, in - 1)), r.i1.push_back(0);
      r.w0.push_back(1), r.w1.push_back(0);
    } else {
      const double p = std::max(
          (static_cast<double>(d) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5,
          0.0);
      const int64_t i0 = std::min(static_cast<int64_t>(std::floor(p)), in - 1);
      const double l1 = std::clamp(p - static_cast<double>(i0), 0.0, 1.0);
      r.i0.push_back(i0), r.i1.push_back(std::min(i0 + 1, in - 1));
      r.w0.push_back(1 - l1), r.w1.push_back(l1);
    }
  }
  return r;
}

struct Result {
  Shape shape;
  std::vector<double> v;
};

// x channels first [N, C, spatial...]: each output the sum over the 2^d corners of the product
// of the axes' weights times x there.
Result ref_resize(const Shape& xs, const std::vector<double>& x, const Shape& size,
                  const std::string& method) {
  const size_t d = size.size();
  std::vector<AxisRef> axes;
  Shape os{xs[0], xs[1]};
  for (size_t k = 0; k < d; ++k) {
    axes.push_back(ref_axis(xs[2 + k], size[k], method));
    os.push_back(size[k]);
  }
  Result r{os, std::vector<double>(static_cast<size_t>(ir::numel(os)))};
  each(os, [&](const Ints& o) {
    double acc = 0;
    for (int corner = 0; corner < (1 << d); ++corner) {
      Ints q{o[0], o[1]};
      double w = 1;
      for (size_t k = 0; k < d; ++k) {
        const bool hi = corner >> k & 1;
        const AxisRef& a = axes[k];
        q.push_back(hi ? a.i1[o[2 + k]] : a.i0[o[2 + k]]);
        w *= hi ? a.w1[o[2 + k]] : a.w0[o[2 + k]];
      }
      if (w != 0) acc += w * x[offset(xs, q)];
    }
    r.v[offset(os, o)] = acc;
  });
  return r;
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

// Channels first to last and back.
nx::Axes to_last(int nd) {
  nx::Axes p{0};
  for (int a = 2; a < nd; ++a) p.push_back(a);
  p.push_back(1);
  return p;
}

struct ResizeCase {
  const char* name;
  Shape xs, size;
};

std::vector<ResizeCase> resize_cases() {
  return {
      {"2-d, twice the size", {2, 3, 4, 5}, {8, 10}},
      {"2-d, odd factors", {2, 3, 4, 5}, {7, 13}},
      {"2-d, smaller", {1, 2, 9, 8}, {4, 3}},
      {"2-d, one axis kept", {2, 2, 5, 6}, {5, 4}},
      {"2-d, to 1 x 1", {1, 2, 4, 3}, {1, 1}},
      {"2-d, from 1 x 3", {1, 1, 1, 3}, {4, 6}},
      {"1-d", {2, 3, 5}, {11}},
      {"3-d", {1, 2, 3, 4, 2}, {5, 2, 3}},
      {"empty batch", {0, 2, 3, 3}, {5, 2}},
  };
}

const std::vector<std::string> kMethods{"nearest", "nearest-exact", "linear"};

class Resize : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
};

TEST_P(Resize, MatchesTheLoopEagerCompiledAndChannelsLast) {
  uint64_t seed = 1;
  for (const ResizeCase& c : resize_cases()) {
    auto xv = values(c.xs, seed++);
    Tensor x = on(f64(c.xs, xv));
    const int nd = static_cast<int>(c.xs.size());
    for (const std::string& m : kMethods) {
      const std::string name = std::string(c.name) + ", " + m;
      Result want = ref_resize(c.xs, xv, c.size, m);
      auto f = [&c, m](const Tensor& t) { return nx::resize(t, c.size, m); };
      Tensor eager = f(x);
      EXPECT_EQ(eager.device(), x.device()) << name;
      expect_near(name, eager, want.shape, want.v);
      EXPECT_EQ(bits(rune::jit(f)(x)), bits(eager)) << name << " compiled";
      const std::string last = nd == 3 ? "NWC" : nd == 4 ? "NHWC" : "NDHWC";
      auto fl = [&c, m, last](const Tensor& t) { return nx::resize(t, c.size, m, last); };
      Tensor xl = nx::permute(x, to_last(nd));
      const std::string want_last = bits(nx::permute(eager, to_last(nd)));
      EXPECT_EQ(bits(fl(xl)), want_last) << name << " " << last;
      EXPECT_EQ(bits(rune::jit(fl)(xl)), want_last) << name << " " << last << " compiled";
    }
  }
}

// Values torch.nn.functional.interpolate returns (size given, align_corners=False).
TEST_P(Resize, TorchsValuesForSmallInputs) {
  auto row = [&](std::vector<double> v) {
    return on(f64({1, 1, static_cast<int64_t>(v.size())}, v));
  };
  auto got = [](const Tensor& t) { return nx::to_array(host(t)); };
  Tensor x4 = row({0, 1, 2, 3});
  EXPECT_EQ(got(nx::resize(x4, {8}, "linear")),
            (std::vector<double>{0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3}));
  EXPECT_EQ(got(nx::resize(x4, {2}, "linear")), (std::vector<double>{0.5, 2.5}));
  EXPECT_EQ(got(nx::resize(x4, {6}, "nearest")), (std::vector<double>{0, 0, 1, 2, 2, 3}));
  EXPECT_EQ(got(nx::resize(x4, {6}, "nearest-exact")), (std::vector<double>{0, 1, 1, 2, 3, 3}));
  Tensor x5 = row({0, 1, 2, 3, 4});
  EXPECT_EQ(got(nx::resize(x5, {3}, "nearest")), (std::vector<double>{0, 1, 3}));
  EXPECT_EQ(got(nx::resize(x5, {3}, "nearest-exact")), (std::vector<double>{0, 2, 4}));
  // torch's nearest computes d * float32(in / out): for 2 -> 82, output 41 reads input 0 (41 *
  // float32(2 / 82) rounds below 1), where exact arithmetic gives 1.
  std::vector<double> near = got(nx::resize(row({10, 20}), {82}, "nearest"));
  EXPECT_EQ(near[40], 10);
  EXPECT_EQ(near[41], 10);
  EXPECT_EQ(near[42], 20);
  // 2-d bilinear, 2 x 2 -> 4 x 4: positions 0 (clamped), 1/4, 3/4, 1 (1 1/4 on the edge).
  Tensor x22 = on(f64({1, 1, 2, 2}, {0, 1, 2, 3}));
  EXPECT_EQ(got(nx::resize(x22, {4, 4}, "bilinear")),
            (std::vector<double>{0, 0.25, 0.75, 1, 0.5, 0.75, 1.25, 1.5, 1.5, 1.75, 2.25, 2.5, 2,
                                 2.25, 2.75, 3}));
}

// Nearest keeps any dtype (a gather); linear rounds 16-bit floats once.
TEST_P(Resize, DtypesNearestKeepsAnyLinearRoundsOnce) {
  const Shape xs{1, 2, 3, 4};
  auto iv = values(xs, 7, 200);
  Result want = ref_resize(xs, iv, {5, 7}, "nearest");
  for (nx::DType t : {nx::uint8, nx::int32, nx::int64}) {
    Tensor y = nx::resize(on(nx::cast(f64(xs, iv), t)), {5, 7});
    EXPECT_EQ(y.dtype(), t);
    EXPECT_EQ(nx::to_array(host(y)), want.v) << rt::dname(t);
  }
  Tensor bools = nx::resize(on(nx::cast(f64(xs, values(xs, 8, 2)), nx::bool_)), {6, 2});
  EXPECT_EQ(bools.dtype(), nx::bool_);
  EXPECT_EQ(nx::to_array(host(bools)), ref_resize(xs, values(xs, 8, 2), {6, 2}, "nearest").v);
  auto fv = values(xs, 9);
  for (nx::DType t : {nx::float16, nx::bfloat16, nx::float32}) {
    Tensor x = on(nx::cast(f64(xs, fv), t));
    Tensor y = nx::resize(x, {5, 7}, "linear");
    EXPECT_EQ(y.dtype(), t);
    expect_near("linear " + rt::dname(t), y, {1, 2, 5, 7},
                ref_resize(xs, nx::to_array(host(x)), {5, 7}, "linear").v,
                t == nx::float32   ? 1e-6
                : t == nx::float16 ? 1e-3
                                   : 8e-3);
    EXPECT_EQ(bits(rune::jit([](const Tensor& t) {
                return nx::resize(t, {5, 7}, "linear");
              })(x)),
              bits(y))
        << rt::dname(t);
  }
}

TEST_P(Resize, VmapMatchesALoop) {
  const Shape xs{3, 2, 2, 4, 5};
  Tensor xb = on(f64(xs, values(xs, 20)));
  for (const std::string& m : kMethods) {
    auto f = [m](const Tensor& x) { return nx::resize(x, {3, 7}, m); };
    std::vector<Tensor> rows;
    for (int64_t i = 0; i < xs[0]; ++i) rows.push_back(f(nx::index(xb, 0, i)));
    EXPECT_EQ(bits(rune::vmap(f)(xb)), bits(nx::stack(rows))) << m;
  }
}

TEST_P(Resize, GradientsOnTheDeviceHaveTheHostsBits) {
  const Shape xs{2, 2, 4, 5};
  Tensor x = f64(xs, values(xs, 30));
  for (const std::string& m : kMethods) {
    auto g = [m](const Tensor& t) {
      return rune::grad(
          [&](const Tensor& u) {
            return nx::sum(nx::sin(nx::resize(u, {7, 3}, m)));
          },
          t);
    };
    const std::string want = bits(g(x));
    EXPECT_EQ(bits(g(on(x))), want) << m << " eager on " << GetParam();
    EXPECT_EQ(bits(rune::jit(g)(on(x))), want) << m << " compiled on " << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Resize, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

// rune::grad of sum(resize(x) * r) against central differences of the loop (float64, host); for
// nearest, r scattered to the inputs read, exactly (r's values are small integers).
TEST(ResizeGrad, AgainstCentralDifferencesAndTheScatter) {
  const Shape xs{1, 2, 4, 5};
  auto xv = values(xs, 40);
  for (const Shape& size : {Shape{7, 3}, Shape{3, 8}, Shape{4, 9}})
    for (const std::string& m : kMethods) {
      const std::string name = m + " to " + rt::show(size);
      Result y = ref_resize(xs, xv, size, m);
      auto rv = values(y.shape, 41, 7);
      Tensor r = f64(y.shape, rv);
      auto got = nx::to_array(rune::grad(
          [&](const Tensor& u) { return nx::sum(nx::resize(u, size, m) * r); }, f64(xs, xv)));
      for (size_t i = 0; i < xv.size(); ++i) {
        auto v = xv;
        const double h = 1e-5;
        auto dot = [&](double d) {
          v[i] = xv[i] + d;
          Result o = ref_resize(xs, v, size, m);
          double s = 0;
          for (size_t k = 0; k < o.v.size(); ++k) s += o.v[k] * rv[k];
          return s;
        };
        const double fd = (dot(h) - dot(-h)) / (2 * h);
        if (m == "linear")
          EXPECT_NEAR(got[i], fd, 1e-8 * std::max(1.0, std::fabs(fd))) << name << " element " << i;
        else
          EXPECT_EQ(got[i], std::round(fd)) << name << " element " << i;
      }
    }
}

TEST(ResizeErrors, NameTheApiAndTheValues) {
  Tensor x = f64({2, 3, 4, 5}, values({2, 3, 4, 5}, 1));
  expect_error(
      [&] {
        nx::resize(x, {8, 10}, "cubic");
      },
      {"nx::resize:", "method \"cubic\" is not \"nearest\", \"nearest-exact\", \"linear\""});
  expect_error(
      [&] {
        nx::resize(f64({1, 1, 4}, {1, 2, 3, 4}), {8}, "bilinear");
      },
      {"nx::resize:", "method \"bilinear\" needs 2 spatial dimensions", "for 1 spatial dimension"});
  expect_error(
      [&] {
        nx::resize(x, {8, 10}, "trilinear");
      },
      {"nx::resize:", "\"trilinear\" needs 3 spatial dimensions"});
  expect_error([&] { nx::resize(x, {8}); },
               {"nx::resize:", "size [8] has 1 extents for the 2 spatial dimensions",
                "float64 [2, 3, 4, 5]"});
  expect_error([&] { nx::resize(x, {8, 0}); }, {"nx::resize:", "size [8, 0] must be >= 1"});
  expect_error(
      [&] {
        nx::resize(x, {8, 10}, "nearest", "NHCW");
      },
      {"nx::resize:", "layout \"NHCW\""});
  expect_error(
      [&] {
        nx::resize(nx::cast(x, nx::int32), {8, 10}, "linear");
      },
      {"nx::resize:", "int32 [2, 3, 4, 5]"});
  expect_error(
      [&] {
        nx::resize(f64({2, 3}, values({2, 3}, 2)), {4});
      },
      {"nx::resize:", "with a spatial axis", "float64 [2, 3]"});
  expect_error(
      [&] {
        nx::resize(f64({2, 3, 0}, {}), {4});
      },
      {"nx::resize:", "empty spatial axis 2", "float64 [2, 3, 0]"});
}

}  // namespace
