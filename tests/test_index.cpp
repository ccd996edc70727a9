// Indexing (issue 18 "Indexing", docs/indexing.md): hand-computed values with numpy / JAX
// semantics for take, take_along_axis, gather, scatter_add / index_add, one_hot, dynamic_slice,
// dynamic_update_slice and topk; every out-of-range rule; eager and compiled bits on CPU, CPU:1
// and the fake CUDA:0; gradients against central finite differences; no retrace for new start
// values; error messages.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
using Fn3 = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;

// ctest runs this binary with RUNE_TEST_FAKE_CUDA=1 (the hook installed the fake driver); run
// alone, it installs it itself.
const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

using rt::bits;

class Index : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
  // f(a, b, c) eagerly and compiled on this device: the expected values and shape, the same
  // bits, and the host's bits.
  void check(const std::string& name, const Fn3& f, const Tensor& a, const Tensor& b,
             const nx::Shape& shape, const std::vector<double>& want,
             const Tensor& c = nx::zeros(nx::float32, {1})) const {
    SCOPED_TRACE(name + " on " + GetParam());
    Tensor pa = on(a), pb = on(b), pc = on(c);
    Tensor eager = f(pa, pb, pc);
    Tensor compiled = rune::jit(f)(pa, pb, pc);
    EXPECT_EQ(eager.device().name(), GetParam());
    EXPECT_EQ(compiled.device().name(), GetParam());
    ASSERT_EQ(eager.shape(), shape);
    ASSERT_EQ(compiled.shape(), shape);
    EXPECT_EQ(nx::to_vector<double>(nx::cast(nx::place(eager, "CPU"), nx::float64)), want);
    EXPECT_EQ(bits(eager), bits(compiled));
    EXPECT_EQ(bits(eager), bits(f(a, b, c))) << "the host's bits";
  }
};

const std::vector<nx::DType> kValueTypes = {nx::float32, nx::float64, nx::int32, nx::int64};
const std::vector<nx::DType> kIndexTypes = {nx::int32, nx::int64};

TEST_P(Index, Take) {
  ASSERT_TRUE(installed);
  for (auto t : kValueTypes)
    for (auto it : kIndexTypes) {
      std::string tn = std::string(ir::name(t)) + "/" + std::string(ir::name(it));
      Tensor x = nx::create(t, {2, 3}, {1, 2, 3, 4, 5, 6});
      // Axis 1, a [2, 2] index with a negative (-1 -> 2) and out-of-range values clamped.
      Tensor i = nx::create(it, {2, 2}, {0, -1, 7, -9});
      check("take axis 1 " + tn,
            [](const Tensor& a, const Tensor& b, const Tensor&) { return nx::take(a, b, 1); }, x, i,
            {2, 2, 2}, {1, 3, 3, 1, 4, 6, 6, 4});
      check("take axis 0 " + tn,
            [](const Tensor& a, const Tensor& b, const Tensor&) { return nx::take(a, b, 0); }, x,
            nx::create(it, {3}, {1, 0, 1}), {3, 3}, {4, 5, 6, 1, 2, 3, 4, 5, 6});
      check("gather " + tn,
            [](const Tensor& a, const Tensor& b, const Tensor&) { return nx::gather(a, b); }, x,
            nx::create(it, {}, {-1}), {3}, {4, 5, 6});
      check("take_along_axis " + tn,
            [](const Tensor& a, const Tensor& b, const Tensor&) {
              return nx::take_along_axis(a, b, -1);
            },
            x, nx::create(it, {2, 2}, {2, 0, -1, 5}), {2, 2}, {3, 1, 6, 6});
      check("take_along_axis broadcast " + tn,
            [](const Tensor& a, const Tensor& b, const Tensor&) {
              return nx::take_along_axis(a, b, 0);
            },
            x, nx::create(it, {1, 3}, {1, 0, 1}), {1, 3}, {4, 2, 6});
    }
  // A strided (transposed) operand and a fused consumer.
  Tensor x = nx::create(nx::float32, {3, 2}, {1, 4, 2, 5, 3, 6});
  check("take of a transposed view, fused",
        [](const Tensor& a, const Tensor& b, const Tensor&) {
          return nx::take(nx::transpose(a), b, 1) * 2.0f;
        },
        x, nx::create(nx::int64, {2}, {2, 0}), {2, 2}, {6, 2, 12, 8});
}

// A gather under a pad (masked positions read nothing) and inside a fused reduction.
TEST_P(Index, TakeUnderPadAndReduction) {
  Tensor x = nx::create(nx::float32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor i = nx::create(nx::int32, {2}, {2, 0});
  check("pad of take",
        [](const Tensor& a, const Tensor& b, const Tensor&) {
          return nx::pad(nx::take(a, b, 1), {{1, 0}, {0, 1}});
        },
        x, i, {3, 3}, {0, 0, 0, 3, 1, 0, 6, 4, 0});
  check("sum of take",
        [](const Tensor& a, const Tensor& b, const Tensor&) {
          return nx::sum(nx::take(a, b, 1) * 3.0f, {1});
        },
        x, i, {2}, {12, 30});
}

TEST_P(Index, ScatterAdd) {
  for (auto t : kValueTypes)
    for (auto it : kIndexTypes) {
      std::string tn = std::string(ir::name(t)) + "/" + std::string(ir::name(it));
      Tensor x = nx::create(t, {2, 3}, {1, 2, 3, 4, 5, 6});
      // Duplicates accumulate; -1 -> 2; 3 and -4 are out of range: dropped.
      Tensor i = nx::create(it, {5}, {0, 0, -1, 3, -4});
      Tensor u = nx::create(t, {2, 5}, {10, 20, 30, 40, 50, 1, 2, 3, 4, 5});
      check(
          "scatter_add " + tn,
          [](const Tensor& a, const Tensor& b, const Tensor& c) {
            return nx::scatter_add(a, b, c, 1);
          },
          x, i, {2, 3}, {31, 2, 33, 7, 5, 9}, u);
      check(
          "index_add " + tn,
          [](const Tensor& a, const Tensor& b, const Tensor& c) {
            return nx::index_add(a, 0, b, c);
          },
          x, nx::create(it, {2}, {1, 1}), {2, 3}, {1, 2, 3, 6, 7, 8}, nx::ones(t, {2, 3}));
    }
}

TEST_P(Index, OneHot) {
  for (auto it : kIndexTypes)
    check(std::string("one_hot ") + std::string(ir::name(it)),
          [](const Tensor& a, const Tensor&, const Tensor&) { return nx::one_hot(a, 3); },
          nx::create(it, {4}, {0, 2, -1, 3}), nx::zeros(nx::float32, {1}), {4, 3},
          {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  Tensor oh = nx::one_hot(nx::create(nx::int32, {1}, {1}), 2, nx::int64);
  EXPECT_EQ(oh.dtype(), nx::int64);
}

TEST_P(Index, DynamicSliceClampsTheStart) {
  Tensor x = nx::create(nx::float32, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto ds = [](const Tensor& a, const Tensor& s, const Tensor&) {
    return nx::dynamic_slice(a, {nx::index(s, 0, 0), nx::index(s, 0, 1)}, {2, 2});
  };
  check("dynamic_slice in range", ds, x, nx::create(nx::int32, {2}, {1, 1}), {2, 2}, {5, 6, 9, 10});
  // Row 5 clamps to 1 (3 - 2), column -1 -> 3 clamps to 2 (4 - 2).
  check("dynamic_slice clamped", ds, x, nx::create(nx::int64, {2}, {5, -1}), {2, 2},
        {6, 7, 10, 11});
  auto dus = [](const Tensor& a, const Tensor& s, const Tensor& u) {
    return nx::dynamic_update_slice(a, u, {nx::index(s, 0, 0), nx::index(s, 0, 1)});
  };
  Tensor u = nx::create(nx::float32, {1, 2}, {-1, -2});
  check("dynamic_update_slice", dus, x, nx::create(nx::int32, {2}, {1, 1}), {3, 4},
        {0, 1, 2, 3, 4, -1, -2, 7, 8, 9, 10, 11}, u);
  check("dynamic_update_slice clamped", dus, x, nx::create(nx::int32, {2}, {9, 3}), {3, 4},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2}, u);
}

TEST_P(Index, TopK) {
  Tensor x = nx::create(nx::float32, {2, 4}, {1, 3, 3, 2, -1, 7, 0, 5});
  check("topk values",
        [](const Tensor& a, const Tensor&, const Tensor&) { return nx::topk(a, 3).first; }, x,
        nx::zeros(nx::float32, {1}), {2, 3}, {3, 3, 2, 7, 5, 0});
  auto idx = nx::to_vector<int64_t>(nx::topk(on(x), 3).second);
  EXPECT_EQ(idx, (std::vector<int64_t>{1, 2, 3, 1, 3, 2}));  // ties by lower index
  auto [v0, i0] = nx::topk(on(nx::create(nx::int32, {3, 2}, {5, 1, 2, 9, 5, 0})), 2, 0);
  EXPECT_EQ(nx::to_vector<int64_t>(i0), (std::vector<int64_t>{0, 1, 2, 0}));
  EXPECT_EQ(nx::to_vector<int32_t>(v0), (std::vector<int32_t>{5, 9, 5, 1}));
}

INSTANTIATE_TEST_SUITE_P(Devices, Index, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

// -0 and +0 tie (the lower index first); NaN counts as the largest (torch.topk).
TEST(IndexValues, TopKZerosAndNaN) {
  auto [v, i] = nx::topk(nx::create(nx::float64, {5}, {0.5, 0.0, -0.0, 2, 0.5}), 4);
  EXPECT_EQ(nx::to_vector<double>(v), (std::vector<double>{2, 0.5, 0.5, 0.0}));
  EXPECT_EQ(nx::to_vector<int64_t>(i), (std::vector<int64_t>{3, 0, 4, 1}));
  EXPECT_FALSE(std::signbit(nx::to_vector<double>(v)[3]));
  auto [vn, in] = nx::topk(nx::create(nx::float32, {3}, {1, NAN, 2}), 2);
  EXPECT_EQ(nx::to_vector<int64_t>(in), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(std::isnan(nx::to_vector<float>(vn)[0]));
}

// Integer sums accumulate in int64 and wrap back to x's dtype (numpy's np.add.at wraps too).
TEST(IndexValues, ScatterAddIntegersWrap) {
  Tensor r = nx::scatter_add(nx::full(nx::int32, {2}, 2147483647),
                             nx::create(nx::int64, {2}, {0, 0}), nx::full(nx::int32, {2}, 1), 0);
  EXPECT_EQ(nx::to_vector<int32_t>(r), (std::vector<int32_t>{-2147483647, 2147483647}));
}

// A new start value is a new value, not a new key: one trace.
TEST(IndexJit, NewStartsDoNotRetrace) {
  auto f = rune::jit([](const Tensor& x, const Tensor& s) {
    return nx::dynamic_slice(x, {s}, {2}) +
           nx::sum(nx::dynamic_update_slice(x, nx::ones(nx::float32, {2}), {s}));
  });
  Tensor x = nx::arange(nx::float32, 0, 6);
  std::vector<std::vector<float>> got;
  for (int64_t s : {0, 3, 9, -2})
    got.push_back(nx::to_vector<float>(f(x, nx::create(nx::int64, {}, {double(s)}))));
  EXPECT_EQ(f.traces(), 1u);
  EXPECT_EQ(got[0], (std::vector<float>{16, 17}));  // [0, 1] + (15 - (0 + 1) + 2)
  EXPECT_EQ(got[1], (std::vector<float>{13, 14}));  // [3, 4] + (15 - 7 + 2)
  EXPECT_EQ(got[2], (std::vector<float>{12, 13}));  // start 9 clamps to 4: [4, 5] + (15 - 9 + 2)
  EXPECT_EQ(got[3], (std::vector<float>{12, 13}));  // -2 -> 4
}

// ---- gradients: central differences in float64 ----
using Fn = std::function<Tensor(const Tensor&)>;
void check_grad(const std::string& name, const Fn& f, const Tensor& x) {
  Tensor w = nx::rand(nx::key(7), nx::float64, f(x).shape()) + 0.5;
  auto loss = [&](const Tensor& t) { return nx::sum(f(t) * w); };
  auto g = nx::to_vector<double>(rune::grad(loss, x));
  auto xs = nx::to_vector<double>(x);
  for (size_t k = 0; k < xs.size(); ++k) {
    double h = 1e-6;
    auto at = [&](double d) {
      auto v = xs;
      v[k] += d;
      return nx::item<double>(loss(nx::create(nx::float64, x.shape(), v)));
    };
    double n = (at(h) - at(-h)) / (2 * h);
    EXPECT_NEAR(g[k], n, 1e-6 * std::max(1.0, std::fabs(n))) << name << " element " << k;
  }
  auto gj =
      nx::to_vector<double>(rune::jit([&](const Tensor& t) { return rune::grad(loss, t); })(x));
  EXPECT_EQ(g, gj) << name << " compiled";
}

TEST(IndexGrad, MatchesFiniteDifferences) {
  Tensor x = nx::rand(nx::key(3), nx::float64, {3, 4}) * 4.0 - 2.0;
  Tensor i = nx::create(nx::int64, {5}, {0, 2, 2, -1, 9});  // duplicates, a negative, clamped
  check_grad(
      "take", [&](const Tensor& t) { return nx::take(t, i, 1); }, x);
  check_grad(
      "gather", [&](const Tensor& t) { return nx::gather(t, i); }, x);
  check_grad(
      "take_along_axis",
      [&](const Tensor& t) {
        return nx::take_along_axis(t, nx::create(nx::int32, {3, 2}, {0, 3, 1, 1, 9, -4}), 1);
      },
      x);
  Tensor u = nx::rand(nx::key(4), nx::float64, {3, 5});
  check_grad(
      "scatter_add x", [&](const Tensor& t) { return nx::scatter_add(t, i, u, 1); }, x);
  check_grad(
      "scatter_add updates",
      [&](const Tensor& t) {
        return nx::scatter_add(nx::zeros(nx::float64, {3, 4}), i, t, 1);
      },
      u);
  Tensor s = nx::create(nx::int64, {}, {1});
  check_grad(
      "dynamic_slice",
      [&](const Tensor& t) {
        return nx::dynamic_slice(t, {s, s}, {2, 2});
      },
      x);
  check_grad(
      "dynamic_update_slice",
      [&](const Tensor& t) {
        return nx::dynamic_update_slice(t, nx::take(t, nx::create(nx::int64, {2}, {0, 1}), 1),
                                        {s, s});
      },
      x);
  check_grad(
      "topk", [&](const Tensor& t) { return nx::topk(t, 2).first; }, x);
}

// ---- errors: the API, the offending values; nothing changes ----
TEST(IndexErrors, Messages) {
  Tensor x = nx::zeros(nx::float32, {2, 3});
  auto msg = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(msg([&] { nx::take(x, nx::zeros(nx::float32, {2}), 0); }),
            "nx::take: index tensor must be an integer dtype, got float32");
  EXPECT_EQ(msg([&] { nx::take(x, nx::zeros(nx::int32, {2}), 2); }),
            "nx::take: axis 2 out of range for float32 [2, 3]");
  EXPECT_EQ(msg([&] { nx::take(nx::zeros(nx::float32, {0}), nx::zeros(nx::int32, {1}), 0); }),
            "nx::take: cannot index the empty axis 0 of float32 [0]");
  EXPECT_EQ(msg([&] { nx::gather(x, nx::zeros(nx::bool_, {1})); }),
            "nx::gather: index tensor must be an integer dtype, got bool");
  EXPECT_EQ(
      msg([&] { nx::take_along_axis(x, nx::zeros(nx::int32, {2}), 0); }),
      "nx::take_along_axis: index tensor must have the rank of x: int32 [2] for float32 [2, 3]");
  EXPECT_EQ(msg([&] {
              nx::scatter_add(x, nx::zeros(nx::int32, {2}), nx::zeros(nx::float32, {2, 3}), 1);
            }),
            "nx::scatter_add: updates must have shape [2, 2] (x float32 [2, 3], index int32 [2], "
            "axis 1), got float32 [2, 3]");
  EXPECT_EQ(msg([&] { nx::one_hot(nx::zeros(nx::float32, {2}), 3); }),
            "nx::one_hot: labels must be an integer dtype, got float32");
  EXPECT_EQ(msg([&] {
              nx::dynamic_slice(x, {nx::zeros(nx::int32, {})}, {1, 1});
            }),
            "nx::dynamic_slice: 1 start indices for the 2-d float32 [2, 3]");
  EXPECT_EQ(msg([&] {
              nx::dynamic_slice(x, {nx::zeros(nx::int32, {1}), nx::zeros(nx::int32, {})}, {1, 1});
            }),
            "nx::dynamic_slice: start index 0 must be a 0-d tensor, got int32 [1]");
  EXPECT_EQ(msg([&] {
              nx::dynamic_slice(x, {nx::zeros(nx::int32, {}), nx::zeros(nx::int32, {})}, {3, 1});
            }),
            "nx::dynamic_slice: sizes [3, 1] do not fit in float32 [2, 3]");
  EXPECT_EQ(msg([&] {
              nx::dynamic_update_slice(x, nx::zeros(nx::float32, {3, 1}),
                                       {nx::zeros(nx::int32, {}), nx::zeros(nx::int32, {})});
            }),
            "nx::dynamic_update_slice: update float32 [3, 1] does not fit in float32 [2, 3]");
  EXPECT_EQ(msg([&] { nx::topk(x, 4); }),
            "nx::topk: k = 4 is outside [0, 3] for float32 [2, 3] along axis 1");
  // A failed call consumes no donation.
  Tensor d = nx::ones(nx::float32, {2, 3});
  nx::donate(d);
  EXPECT_NE(msg([&] { nx::take(d, nx::zeros(nx::float32, {1}), 0); }), "no error");
  EXPECT_EQ(nx::to_vector<float>(nx::take(d, nx::zeros(nx::int32, {1}), 0)),
            (std::vector<float>{1, 1, 1}));
}

}  // namespace
