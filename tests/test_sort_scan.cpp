// nx::sort, nx::argsort and nx::cumsum against references computed here: std::stable_sort with
// the NaN-last comparator (-0 and +0 equal, so their input order is kept) and sequential
// left-to-right sums. Every dtype, axes 0/1/-1 of 2-D and 3-D inputs, strided layouts, special
// values, empty and length-1 axes, eager vs compiled bit-identity, gradients, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "test_util.h"
#include "trace/rune.h"

namespace {

using namespace rt;

// ---- references over logical C-order values ----

// The sort order: NaN after everything, -0 == +0.
bool before(const Value& a, const Value& b) {
  if (ir::is_float(a.dtype)) return a.f < b.f || (std::isnan(b.f) && !std::isnan(a.f));
  if (a.dtype == nx::uint64) return static_cast<uint64_t>(a.i) < static_cast<uint64_t>(b.i);
  return a.i < b.i;
}

// Positions of the elements of each line along `axis` (C order of the other axes).
std::vector<std::vector<int64_t>> lines(const Shape& shape, int axis) {
  auto strides = ir::contiguous_strides(shape);
  int64_t n = ir::numel(shape), len = shape[axis];
  std::vector<std::vector<int64_t>> out;
  if (len == 0) return out;
  for (int64_t k = 0; k < n; ++k) {
    if ((k / strides[axis]) % len != 0) continue;  // a line starts at index 0 along axis
    std::vector<int64_t> line;
    for (int64_t i = 0; i < len; ++i) line.push_back(k + i * strides[axis]);
    out.push_back(line);
  }
  return out;
}

struct Sorted {
  std::vector<Value> values, indices;
};
Sorted ref_sort(const std::vector<Value>& x, const Shape& shape, int axis) {
  Sorted r{x, std::vector<Value>(x.size(), I(nx::int64, 0))};
  for (const auto& line : lines(shape, axis)) {
    std::vector<int64_t> order(line.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return before(x[line[a]], x[line[b]]); });
    for (size_t i = 0; i < line.size(); ++i) {
      r.values[line[i]] = x[line[order[i]]];
      r.indices[line[i]] = I(nx::int64, order[i]);
    }
  }
  return r;
}

// The chain acc = x[0]; acc = acc + x[i], at the accumulation dtype of nx::cumsum (integers:
// int64, uint64 its own).
std::vector<Value> ref_cumsum(const std::vector<Value>& x, DType t, const Shape& shape, int axis) {
  DType out = ir::is_float(t) || t == nx::uint64 ? t : nx::int64;
  std::vector<Value> r(x.size(), num(out, 0));
  for (const auto& line : lines(shape, axis)) {
    float f32 = 0;
    double f64 = 0;
    uint64_t i64 = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      const Value& v = x[line[i]];
      if (t == nx::float64) {
        f64 = i == 0 ? v.f : f64 + v.f;
        r[line[i]] = F(out, f64);
      } else if (ir::is_float(t)) {  // float32; float16/bfloat16 at float32, rounded once
        f32 = i == 0 ? static_cast<float>(v.f) : f32 + static_cast<float>(v.f);
        r[line[i]] = F(out, f32);
      } else {
        i64 = i == 0 ? static_cast<uint64_t>(v.i) : i64 + static_cast<uint64_t>(v.i);
        r[line[i]] = I(out, static_cast<int64_t>(i64));
      }
    }
  }
  return r;
}

// Values with many ties (stability shows) and the special values of the dtype.
std::vector<Value> data(DType t, int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<Value> v;
  for (int64_t k = 0; k < n; ++k) {
    uint64_t pick = rng.next() % 16;
    if (t == nx::bool_) {
      v.push_back(I(t, pick & 1));
    } else if (!ir::is_float(t)) {
      const bool sig = ir::is_signed_int(t);
      int64_t lo = sig ? -6 : 0;
      if (pick == 0 && sig)
        v.push_back(I(t, ir::int_min(t)));
      else if (pick == 1)
        v.push_back(I(t, ir::int_max(t)));  // uint64: the pattern of -1, 2^64 - 1
      else if (pick == 2 && t == nx::uint64)
        v.push_back(I(t, INT64_MIN));  // 2^63: above every int64, below the maximum
      else
        v.push_back(I(t, rng.range(lo, lo + 12)));
    } else {
      switch (pick) {
        case 0:
          v.push_back(F(t, NAN));
          break;
        case 1:
          v.push_back(F(t, INFINITY));
          break;
        case 2:
          v.push_back(F(t, -INFINITY));
          break;
        case 3:
          v.push_back(F(t, -0.0));
          break;
        case 4:
          v.push_back(F(t, 0.0));
          break;
        default:
          v.push_back(F(t, static_cast<double>(rng.range(-8, 8)) * 0.375));
      }
    }
  }
  return v;
}
// Finite values (sums stay finite and order-sensitive).
std::vector<Value> finite(DType t, int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<Value> v;
  for (int64_t k = 0; k < n; ++k)
    v.push_back(ir::is_float(t) ? F(t, (rng.uniform() - 0.5) * std::exp(rng.uniform() * 12))
                                : I(t, rng.range(ir::is_signed_int(t) ? -100 : 0, 100)));
  return v;
}

std::string where_of(const Shape& shape, int axis, const std::string& layout) {
  return "shape " + show(shape) + " axis " + std::to_string(axis) + " " + layout;
}

// Checks the three ops on x (logical values `vals` over x's shape) eagerly and compiled.
void check_all(const Tensor& x, const std::vector<Value>& vals, int axis, const std::string& what) {
  SCOPED_TRACE(what + " " + x.describe());
  Shape shape = x.shape();
  int a = axis < 0 ? axis + x.ndim() : axis;
  Sorted want = ref_sort(vals, shape, a);
  auto want_sum = ref_cumsum(vals, x.dtype(), shape, a);
  Tensor s = nx::sort(x, axis), i = nx::argsort(x, axis), c = nx::cumsum(x, axis);
  EXPECT_EQ(s.dtype(), x.dtype());
  EXPECT_EQ(i.dtype(), nx::int64);
  EXPECT_EQ(s.shape(), shape);
  EXPECT_TRUE(match(s, want.values)) << "sort";
  EXPECT_TRUE(match(i, want.indices)) << "argsort";
  EXPECT_TRUE(match(c, want_sum)) << "cumsum";
  auto f = rune::jit([axis](const Tensor& t) {
    return std::make_tuple(nx::sort(t, axis), nx::argsort(t, axis), nx::cumsum(t, axis));
  });
  auto [sj, ij, cj] = f(x);
  EXPECT_TRUE(match(sj, read(s))) << "compiled sort";
  EXPECT_TRUE(match(ij, read(i))) << "compiled argsort";
  EXPECT_TRUE(match(cj, read(c))) << "compiled cumsum";
}

class SortScan : public ::testing::TestWithParam<DType> {};

TEST_P(SortScan, TwoAndThreeDimensionsEveryAxis) {
  DType t = GetParam();
  for (Shape shape : {Shape{5, 7}, Shape{3, 4, 5}, Shape{1, 9}, Shape{6, 1}}) {
    auto vals = data(t, ir::numel(shape), ir::numel(shape) * 31 + shape.size());
    Tensor x = tensor(t, shape, vals);
    for (int axis = -1; axis < static_cast<int>(shape.size()); ++axis)
      check_all(x, vals, axis, where_of(shape, axis, "contiguous"));
  }
}

TEST_P(SortScan, StridedLayouts) {
  DType t = GetParam();
  const int64_t R = 6, C = 9;
  auto vals = data(t, R * C, 99);
  for (Layout l : {Layout::Transposed, Layout::Stepped, Layout::NegStep, Layout::Flipped}) {
    Tensor x = with_layout(t, R, C, vals, l);
    for (int axis : {0, 1, -1}) check_all(x, vals, axis, where_of({R, C}, axis, layout_name(l)));
  }
  // A permuted 3-D tensor and a broadcast one.
  auto v3 = data(t, 60, 7);
  Tensor base = tensor(t, {3, 4, 5}, v3);
  Tensor p = nx::permute(base, {2, 0, 1});
  std::vector<Value> pv = read(nx::contiguous(p));
  for (int axis : {0, 1, 2}) check_all(p, pv, axis, "permuted, axis " + std::to_string(axis));
  Tensor b = nx::broadcast_to(tensor(t, {1, 5}, data(t, 5, 3)), {4, 5});
  check_all(b, read(nx::contiguous(b)), 0, "broadcast");
}

TEST_P(SortScan, FiniteSumsFollowTheChain) {
  DType t = GetParam();
  auto vals = finite(t, 4 * 300, 5);
  Tensor x = tensor(t, {4, 300}, vals);
  for (int axis : {0, 1}) check_all(x, vals, axis, "finite, axis " + std::to_string(axis));
}

TEST_P(SortScan, EmptyAndLengthOneAxes) {
  DType t = GetParam();
  for (Shape shape : {Shape{0, 4}, Shape{3, 0}, Shape{0}, Shape{4, 1}, Shape{1}}) {
    auto vals = data(t, ir::numel(shape), 1);
    Tensor x = tensor(t, shape, vals);
    for (int axis = -1; axis < static_cast<int>(shape.size()); ++axis)
      check_all(x, vals, axis, where_of(shape, axis, "small"));
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SortScan, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return dname(info.param); });

TEST(SortScanLarge, OneLongRowAndManyRows) {
  if (rt::fake_cuda() && !rt::host_is_default())
    GTEST_SKIP() << "on the fake CUDA driver sorts run the rank sort (O(n^2) per row) on host "
                    "threads: far too slow for rows of 200000";
  // One row of 200000: the parallel (Thrust) path where the build has it; 300 rows of 1500: rows
  // in parallel over the thread pool.
  for (Shape shape : {Shape{200000}, Shape{300, 1500}}) {
    for (DType t : kAllTypes) {
      auto vals = data(t, ir::numel(shape), 11);
      check_all(tensor(t, shape, vals), vals, -1, "large " + show(shape));
    }
  }
  // Without -0 and NaN, Thrust sorts float keys alone and maps them back.
  for (DType t : {nx::float32, nx::float64}) {
    auto vals = finite(t, 200000, 12);
    check_all(tensor(t, {200000}, vals), vals, 0, "large finite");
  }
}

TEST(SortScanValues, NumpyExamples) {
  Tensor x = nx::create(nx::float64, {6}, {3, NAN, -0.0, 0.0, -INFINITY, 1});
  auto s = nx::to_vector<double>(nx::sort(x));
  EXPECT_EQ(s[0], -INFINITY);
  EXPECT_TRUE(std::signbit(s[1]) && s[1] == 0);  // -0 came first in the input: stays first
  EXPECT_TRUE(!std::signbit(s[2]) && s[2] == 0);
  EXPECT_EQ(s[3], 1);
  EXPECT_EQ(s[4], 3);
  EXPECT_TRUE(std::isnan(s[5]));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::argsort(x)), (std::vector<int64_t>{4, 2, 3, 5, 0, 1}));
  // Integers and bools sum in int64; 16-bit floats come back in their dtype.
  Tensor b = nx::create(nx::bool_, {4}, {1, 0, 1, 1});
  EXPECT_EQ(nx::cumsum(b).dtype(), nx::int64);
  EXPECT_EQ(nx::to_vector<int64_t>(nx::cumsum(b)), (std::vector<int64_t>{1, 1, 2, 3}));
  Tensor u = nx::create(nx::uint8, {3}, {200, 200, 200});
  EXPECT_EQ(nx::to_vector<int64_t>(nx::cumsum(u)), (std::vector<int64_t>{200, 400, 600}));
  EXPECT_EQ(nx::cumsum(nx::create(nx::float16, {2}, {1, 2})).dtype(), nx::float16);
  // The chain starts from x[0], not from +0: a leading -0 stays -0.
  EXPECT_TRUE(
      std::signbit(nx::to_vector<double>(nx::cumsum(nx::create(nx::float64, {1}, {-0.0})))[0]));
}

TEST(SortScanCompiled, ComputedAndStridedOperands) {
  // Inside a compiled function the operand may be a computation or a strided parameter: the
  // scheduler materialises it contiguously first.
  Tensor x = tensor(nx::float32, {8, 6}, data(nx::float32, 48, 21));
  auto f = rune::jit([](const Tensor& t) {
    return std::make_tuple(nx::sort(t * 2.0, 0), nx::cumsum(nx::transpose(t)),
                           nx::argsort(nx::slice(t, {{1, std::nullopt, 2}, {}}), 1));
  });
  auto [a, b, c] = f(x);
  EXPECT_TRUE(match(a, read(nx::sort(x * 2.0, 0))));
  EXPECT_TRUE(match(b, read(nx::cumsum(nx::transpose(x)))));
  EXPECT_TRUE(match(c, read(nx::argsort(nx::slice(x, {{1, std::nullopt, 2}, {}}), 1))));
  Tensor xt = nx::transpose(x);
  auto [at, bt, ct] = f(xt);  // a strided argument: a new key, the same values
  EXPECT_TRUE(match(at, read(nx::sort(xt * 2.0, 0))));
  EXPECT_TRUE(match(bt, read(nx::cumsum(nx::transpose(xt)))));
}

TEST(SortScanDonation, DonatedOperandIsNotOverwrittenWhileRead) {
  Tensor x = nx::create(nx::float32, {5}, {5, 4, 3, 2, 1});
  auto f = rune::jit([](const Tensor& t) { return nx::sort(t); });
  Tensor s = f(nx::donate(nx::contiguous(x)));
  EXPECT_EQ(nx::to_vector<float>(s), (std::vector<float>{1, 2, 3, 4, 5}));
  Tensor c = nx::cumsum(nx::donate(nx::contiguous(x)));
  EXPECT_EQ(nx::to_vector<float>(c), (std::vector<float>{5, 9, 12, 14, 15}));
}

TEST(SortScanErrors, NameTheApiAndTheValues) {
  Tensor x = nx::zeros(nx::float32, {2, 3});
  Tensor s = nx::create(nx::float32, {}, {1});
  EXPECT_EQ(error_of([&] { nx::sort(s); }),
            "nx::sort: needs at least one axis; got the 0-d float32 []");
  EXPECT_EQ(error_of([&] { nx::argsort(x, 2); }),
            "nx::argsort: axis 2 out of range for float32 [2, 3]");
  EXPECT_EQ(error_of([&] { nx::cumsum(x, -3); }),
            "nx::cumsum: axis -3 out of range for float32 [2, 3]");
  // Integers are cast to int64 only after the checks: the message names the caller's tensor.
  EXPECT_EQ(error_of([&] { nx::cumsum(nx::zeros(nx::int32, {4}), 1); }),
            "nx::cumsum: axis 1 out of range for int32 [4]");
  EXPECT_EQ(error_of([&] { nx::cumsum(nx::create(nx::bool_, {}, {1})); }),
            "nx::cumsum: needs at least one axis; got the 0-d bool []");
}

// ---- gradients against central differences (as tests/autodiff does) ----

using Fn = std::function<Tensor(const Tensor&)>;

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
  Tensor w = nx::rand(nx::key(7), nx::float64, f(x).shape()) + 0.5;
  auto loss = [&](const Tensor& t) { return nx::sum(f(t) * w); };
  auto g = nx::to_vector<double>(rune::grad(loss, x));
  auto n = numeric_grad(f, x, w);
  ASSERT_EQ(g.size(), n.size()) << name;
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], n[i], 1e-5 * std::max(1.0, std::fabs(n[i]))) << name << " element " << i;
  auto gj =
      nx::to_vector<double>(rune::jit([&](const Tensor& t) { return rune::grad(loss, t); })(x));
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(g[i]), std::bit_cast<uint64_t>(gj[i]))
        << name << " compiled, element " << i;
}

TEST(SortScanGrad, CumsumAndSortMatchFiniteDifferences) {
  // Distinct values (no ties within h) so the sort is differentiable at x.
  Tensor x = nx::rand(nx::key(3), nx::float64, {3, 5}) * 4.0 - 2.0;
  for (int axis : {0, 1, -1}) {
    std::string a = " axis " + std::to_string(axis);
    check_grad(
        "cumsum" + a, [axis](const Tensor& t) { return nx::cumsum(t, axis); }, x);
    check_grad(
        "sort" + a, [axis](const Tensor& t) { return nx::sort(t, axis); }, x);
    check_grad(
        "sort of a product" + a, [axis](const Tensor& t) { return nx::sort(t * t, axis) * 3.0; },
        x);
  }
  Tensor y = nx::rand(nx::key(4), nx::float64, {2, 3, 4});
  check_grad(
      "cumsum 3-D", [](const Tensor& t) { return nx::cumsum(t, 1); }, y);
  check_grad(
      "sort 3-D", [](const Tensor& t) { return nx::sort(t, 0); }, y);
}

TEST(SortScanGrad, ArgsortHasNoGradient) {
  Tensor x = nx::create(nx::float64, {3}, {2, 1, 3});
  auto loss = [](const Tensor& t) { return nx::sum(t * nx::cast(nx::argsort(t), nx::float64)); };
  // d/dt sum(t * argsort(t)) = argsort(t): the indices are constants.
  EXPECT_EQ(nx::to_vector<double>(rune::grad(loss, x)), (std::vector<double>{1, 0, 2}));
}

}  // namespace
