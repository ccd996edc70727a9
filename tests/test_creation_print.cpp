// Creation (create, full, zeros, ones, scalar, *_like, arange, linspace, eye, iota), random
// numbers (rand, randn, randint: determinism and distribution), reading (to_vector, item,
// to_array) and printing.
#include <gtest/gtest.h>

#include <set>

#include "test_util.h"
#include "trace/rune.h"

namespace {

using namespace rt;
using V = std::vector<int64_t>;
using D = std::vector<double>;

V iv(const Tensor& x) { return nx::to_vector<int64_t>(x); }
D dv(const Tensor& x) { return nx::to_vector<double>(x); }

TEST(Create, RoundsAndTruncatesToTheDtype) {
  Tensor f = nx::create(nx::float64, {2, 2}, {1, 2.5, -3, 0.1});
  EXPECT_EQ(f.dtype(), nx::float64);
  EXPECT_EQ(f.shape(), (Shape{2, 2}));
  EXPECT_EQ(dv(f), (D{1, 2.5, -3, 0.1}));
  EXPECT_EQ(dv(nx::create(nx::float32, {1}, {0.1})), D{static_cast<double>(0.1f)});
  EXPECT_EQ(dv(nx::create(nx::float16, {2}, {0.1, 1e6})),
            (D{ir::round_to(nx::float16, 0.1), INFINITY}));
  EXPECT_EQ(dv(nx::create(nx::bfloat16, {1}, {1.00390625})), D{1.0});  // ties to even
  EXPECT_EQ(iv(nx::create(nx::int32, {4}, {2.7, -2.7, 0, 7})), (V{2, -2, 0, 7}));
  EXPECT_EQ(iv(nx::create(nx::uint8, {3}, {255, 255.9, -0.5})), (V{255, 255, 0}));
  EXPECT_EQ(nx::to_vector<bool>(nx::create(nx::bool_, {3}, {0, 2, -0.5})),
            (std::vector<bool>{false, true, false}));
  Tensor e = nx::create(nx::float32, {0, 3}, {});
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_EQ(e.size(), 0);
  Tensor s = nx::create(nx::int64, {}, {42});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(nx::item<int64_t>(s), 42);
}

TEST(Create, FullZerosOnesScalarLike) {
  Tensor f = nx::full(nx::int32, {2, 3}, 7);
  EXPECT_EQ(f.dtype(), nx::int32);
  EXPECT_EQ(iv(f), (V{7, 7, 7, 7, 7, 7}));
  EXPECT_EQ(dv(nx::full(nx::float32, {2}, -0.5)), (D{-0.5, -0.5}));
  EXPECT_TRUE(std::isnan(dv(nx::full(nx::float64, {1}, NAN))[0]));
  EXPECT_EQ(nx::to_vector<bool>(nx::full(nx::bool_, {2}, 1)), (std::vector<bool>{true, true}));
  EXPECT_EQ(dv(nx::zeros(nx::float16, {3})), (D{0, 0, 0}));
  EXPECT_EQ(iv(nx::ones(nx::uint8, {2, 1})), (V{1, 1}));
  EXPECT_EQ(nx::ones(nx::uint8, {2, 1}).shape(), (Shape{2, 1}));
  EXPECT_EQ(nx::zeros(nx::int64, {0}).shape(), (Shape{0}));
  // Eager values are materialised: an ordinary contiguous layout (docs/design-notes.md).
  EXPECT_TRUE(nx::zeros(nx::float32, {2, 3}).impl().view.is_contiguous());
  EXPECT_TRUE(nx::full(nx::int32, {4}, 2).impl().view.is_contiguous());
  EXPECT_EQ(nx::zeros(nx::int64, {}).shape(), Shape{});
  Tensor s = nx::scalar(nx::bfloat16, 3.0);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.dtype(), nx::bfloat16);
  EXPECT_EQ(nx::item<double>(s), 3.0);
  Tensor x = nx::create(nx::float32, {2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(dv(nx::full_like(x, 9)), (D{9, 9, 9, 9}));
  EXPECT_EQ(nx::zeros_like(x).shape(), x.shape());
  EXPECT_EQ(nx::ones_like(x).dtype(), nx::float32);
  EXPECT_EQ(dv(nx::ones_like(x)), (D{1, 1, 1, 1}));
  Tensor c = nx::scalar_like(nx::create(nx::int32, {3}, {1, 2, 3}), 5.9);
  EXPECT_EQ(c.shape(), Shape{});
  EXPECT_EQ(c.dtype(), nx::int32);
  EXPECT_EQ(nx::item<int64_t>(c), 5);
}

TEST(Create, Arange) {
  Tensor a = nx::arange(5);
  EXPECT_EQ(a.dtype(), nx::int64);
  EXPECT_EQ(iv(a), (V{0, 1, 2, 3, 4}));
  EXPECT_EQ(nx::arange(0).shape(), (Shape{0}));
  // start + i * step in float64, converted once.
  Tensor f = nx::arange(nx::float64, 0, 1, 0.1);
  ASSERT_EQ(f.size(), 10);
  D want;
  for (int i = 0; i < 10; ++i) want.push_back(i * 0.1);
  EXPECT_EQ(dv(f), want);
  EXPECT_EQ(dv(nx::arange(nx::float64, 0, 0.3, 0.1)).size(), 3u);
  EXPECT_EQ(iv(nx::arange(nx::int32, 0, 10, 3)), (V{0, 3, 6, 9}));
  EXPECT_EQ(nx::arange(nx::int32, 0, 10, 3).dtype(), nx::int32);
  EXPECT_EQ(dv(nx::arange(nx::float32, 5, 0, -2)), (D{5, 3, 1}));
  EXPECT_EQ(dv(nx::arange(nx::float64, -1.5, 1)), (D{-1.5, -0.5, 0.5}));
  EXPECT_EQ(nx::arange(nx::float64, 3, 1, 1).shape(), (Shape{0}));
  EXPECT_EQ(dv(nx::arange(nx::float32, 0, 1, 0.25)), (D{0, 0.25, 0.5, 0.75}));
}

TEST(Create, Linspace) {
  EXPECT_EQ(dv(nx::linspace(nx::float64, 0, 1, 5)), (D{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(dv(nx::linspace(nx::float64, 0, 1, 5, false)),
            (D{0, 0.2, 0.4, 0.6000000000000001, 0.8}));
  EXPECT_EQ(dv(nx::linspace(nx::float64, 2, 3, 1)), (D{2}));
  EXPECT_EQ(nx::linspace(nx::float64, 2, 3, 0).shape(), (Shape{0}));
  // The endpoint is exact even where start + i * step is not.
  D l = dv(nx::linspace(nx::float64, 0, 0.3, 4));
  EXPECT_EQ(l.back(), 0.3);
  EXPECT_EQ(l[1], 0.09999999999999999);
  EXPECT_EQ(dv(nx::linspace(nx::float32, 1, -1, 3)), (D{1, 0, -1}));
  EXPECT_EQ(iv(nx::linspace(nx::int32, 0, 10, 4)), (V{0, 3, 6, 10}));
}

// Integer linspace floors each sample as numpy's does (truncation would round -1.67 up to -1).
TEST(Create, IntegerLinspaceFloors) {
  EXPECT_EQ(iv(nx::linspace(nx::int32, -5, 5, 4)), (V{-5, -2, 1, 5}));
  EXPECT_EQ(iv(nx::linspace(nx::int64, -5, 5, 4, false)), (V{-5, -3, 0, 2}));
  EXPECT_EQ(iv(nx::linspace(nx::int32, 2, -2, 4)), (V{2, 0, -1, -2}));
  EXPECT_EQ(iv(nx::linspace(nx::uint8, 0, 255, 3)), (V{0, 127, 255}));
  // Floats are unaffected.
  EXPECT_EQ(dv(nx::linspace(nx::float64, -5, 5, 4))[1], -5 + 10.0 / 3);
  auto f = rune::jit([] { return nx::linspace(nx::int32, -5, 5, 4); });
  EXPECT_EQ(iv(f()), (V{-5, -2, 1, 5}));
}

// arange(n) with n < 0 is empty, as numpy's arange(-3) and rune's arange(int64, 0, -3, 1).
TEST(Create, NegativeArangeIsEmpty) {
  for (int64_t n : {int64_t{-1}, int64_t{-3}, INT64_MIN}) {
    Tensor a = nx::arange(n);
    EXPECT_EQ(a.shape(), (Shape{0}));
    EXPECT_EQ(a.dtype(), nx::int64);
    EXPECT_EQ(a.device(), nx::default_device());
  }
  EXPECT_EQ(nx::arange(nx::int64, 0, -3, 1).shape(), (Shape{0}));
  auto f = rune::jit([] { return nx::arange(int64_t{-3}) + 1.0; });
  EXPECT_EQ(f().shape(), (Shape{0}));
}

// Values out of an integer dtype's range raise in every creation op (eager and traced); in
// range, fractions truncate toward zero (np.full(2, 2.5, dtype=np.int32) is [2, 2]); NaN raises
// for every non-float dtype; nx::cast still saturates.
TEST(Create, OutOfRangeIntegerValuesRaise) {
  auto expect_range_error = [](const std::function<Tensor()>& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no error for " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(what, 0), 0u) << e.what();
    }
  };
  expect_range_error([] { return nx::full(nx::int32, {2}, 3e9); },
                     "nx::full: value 3000000000 is out of range for int32 [-2147483648, "
                     "2147483647]");
  expect_range_error(
      [] {
        return nx::create(nx::int32, {2}, {1, -3e9});
      },
      "nx::create: value -3000000000 is out of range for int32");
  expect_range_error([] { return nx::create(nx::uint8, {1}, {256}); },
                     "nx::create: value 256 is out of range for uint8 [0, 255]");
  expect_range_error([] { return nx::create(nx::uint8, {1}, {-1}); },
                     "nx::create: value -1 is out of range for uint8");
  expect_range_error([] { return nx::create(nx::int64, {1}, {0x1p63}); },
                     "nx::create: value 9.2233720368547758e+18 is out of range for int64 "
                     "[-9.2233720368547758e+18, 9223372036854775807]");
  expect_range_error([] { return nx::scalar(nx::int32, INFINITY); },
                     "nx::scalar: value inf is out of range for int32");
  expect_range_error([] { return nx::create(nx::int32, {1}, {NAN}); },
                     "nx::create: value nan cannot be int32");
  expect_range_error([] { return nx::full(nx::bool_, {1}, NAN); },
                     "nx::full: value nan cannot be bool");
  expect_range_error([] { return nx::full_like(nx::zeros(nx::uint8, {2}), 300); },
                     "nx::full_like: value 300 is out of range for uint8");
  // The last value, 3e9, is out of range (arange(int32, 0, 3e9, 1e9) ends at 2e9 and fits).
  expect_range_error([] { return nx::arange(nx::int32, 0, 4e9, 1e9); },
                     "nx::arange: value 3000000000 is out of range for int32");
  EXPECT_EQ(iv(nx::arange(nx::int32, 0, 3e9, 1e9)), (V{0, 1000000000, 2000000000}));
  expect_range_error([] { return nx::arange(nx::uint8, -1, 3); },
                     "nx::arange: value -1 is out of range for uint8");
  expect_range_error([] { return nx::linspace(nx::uint8, 0, 300, 3); },
                     "nx::linspace: value 300 is out of range for uint8");
  // Compiled: the same error while tracing, and nothing is installed.
  auto f = rune::jit([] { return nx::full(nx::int32, {2}, 3e9); });
  expect_range_error([&] { return f(); }, "nx::full: value 3000000000 is out of range for int32");
  // In range: truncation toward zero, the extremes exact.
  EXPECT_EQ(iv(nx::full(nx::int32, {2}, 2.5)), (V{2, 2}));
  EXPECT_EQ(iv(nx::full(nx::int32, {1}, -2.5)), (V{-2}));
  EXPECT_EQ(iv(nx::create(nx::int32, {2}, {2147483647.9, -2147483648.9})),
            (V{2147483647, -2147483648}));
  EXPECT_EQ(iv(nx::create(nx::int64, {1}, {-0x1p63})), (V{INT64_MIN}));
  EXPECT_EQ(iv(nx::create(nx::uint8, {1}, {-0.99})), (V{0}));
  EXPECT_EQ(nx::to_vector<bool>(nx::full(nx::bool_, {2}, INFINITY)), (std::vector<bool>{1, 1}));
  auto g = rune::jit([] { return nx::full(nx::int32, {2}, 2.5) + nx::scalar(nx::int32, -1.5); });
  EXPECT_EQ(iv(g()), (V{1, 1}));
  // Floats keep rounding (to inf past their range), and cast keeps saturating.
  EXPECT_EQ(dv(nx::full(nx::float16, {1}, 1e6)), (D{INFINITY}));
  EXPECT_EQ(iv(nx::cast(nx::create(nx::float64, {2}, {3e9, -3e9}), nx::int32)),
            (V{2147483647, -2147483648}));
}

TEST(Create, EyeAndIota) {
  EXPECT_EQ(dv(nx::eye(nx::float32, 3)), (D{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  Tensor r = nx::eye(nx::int32, 2, 3);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.dtype(), nx::int32);
  EXPECT_EQ(iv(r), (V{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(iv(nx::eye(nx::uint8, 3, 2)), (V{1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(nx::eye(nx::float64, 0).shape(), (Shape{0, 0}));
  EXPECT_EQ(nx::to_vector<bool>(nx::eye(nx::bool_, 2)),
            (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(iv(nx::iota({2, 3}, 1)), (V{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(iv(nx::iota({2, 3}, 0)), (V{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(iv(nx::iota({2, 3}, -1)), (V{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(nx::iota({2, 3}, 0).dtype(), nx::int64);
  EXPECT_EQ(iv(nx::iota({2, 1, 2}, 2)), (V{0, 1, 0, 1}));
}

// ---- random numbers ----

TEST(Random, SameKeySameValues) {
  nx::Key k = nx::key(7);
  for (DType t : kFloatTypes) {
    EXPECT_EQ(dv(nx::rand(k, t, {4, 5})), dv(nx::rand(k, t, {4, 5}))) << dname(t);
  }
  EXPECT_EQ(iv(nx::randint(k, -3, 9, {50})), iv(nx::randint(k, -3, 9, {50})));
  EXPECT_EQ(dv(nx::rand(nx::key(7), nx::float64, {8})), dv(nx::rand(k, nx::float64, {8})));
  // The element at a flat index does not depend on the shape around it.
  D flat = dv(nx::rand(k, nx::float64, {12}));
  EXPECT_EQ(dv(nx::rand(k, nx::float64, {3, 4})), flat);
}

TEST(Random, DifferentKeysDiffer) {
  nx::Key k = nx::key(1);
  auto [a, b] = nx::split(k);
  EXPECT_NE(a.value, b.value);
  EXPECT_NE(a.value, k.value);
  D r = dv(nx::rand(k, nx::float64, {64}));
  D ra = dv(nx::rand(a, nx::float64, {64}));
  D rb = dv(nx::rand(b, nx::float64, {64}));
  EXPECT_NE(r, ra);
  EXPECT_NE(r, rb);
  EXPECT_NE(ra, rb);
  EXPECT_NE(dv(nx::rand(nx::key(2), nx::float64, {64})), r);
  EXPECT_EQ(nx::split(k).first.value, a.value) << "split is deterministic";
  // Values inside one draw are not all equal.
  EXPECT_GT(std::set<double>(r.begin(), r.end()).size(), 60u);
}

TEST(Random, RandIsUniformInUnitInterval) {
  nx::Key k = nx::key(3);
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dname(t));
    Tensor r = nx::rand(k, t, {100000});
    EXPECT_EQ(r.dtype(), t);
    EXPECT_EQ(r.shape(), (Shape{100000}));
    D v = dv(r);
    double lo = *std::min_element(v.begin(), v.end());
    double hi = *std::max_element(v.begin(), v.end());
    EXPECT_GE(lo, 0.0);
    EXPECT_LT(hi, 1.0);
    EXPECT_GT(hi, 0.99);
    EXPECT_LT(lo, 0.01);
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    EXPECT_NEAR(mean, 0.5, 0.01);
  }
  // Values that round up to 1 in a narrow dtype are kept below 1.
  Tensor h = nx::rand(k, nx::bfloat16, {200000});
  EXPECT_LT(nx::item<double>(nx::max(h)), 1.0);
}

TEST(Random, RandnIsStandardNormal) {
  nx::Key k = nx::key(11);
  for (DType t : {nx::float32, nx::float64}) {
    SCOPED_TRACE(dname(t));
    D v = dv(nx::randn(k, t, {100000}));
    ASSERT_EQ(v.size(), 100000u);
    double m = 0, s2 = 0;
    for (double x : v) {
      ASSERT_TRUE(std::isfinite(x));
      m += x;
    }
    m /= static_cast<double>(v.size());
    for (double x : v) s2 += (x - m) * (x - m);
    double sd = std::sqrt(s2 / static_cast<double>(v.size()));
    EXPECT_NEAR(m, 0.0, 0.02);
    EXPECT_NEAR(sd, 1.0, 0.02);
    size_t within1 = std::count_if(v.begin(), v.end(), [](double x) { return std::fabs(x) < 1; });
    EXPECT_NEAR(static_cast<double>(within1) / static_cast<double>(v.size()), 0.6827, 0.01);
  }
  EXPECT_EQ(dv(nx::randn(k, nx::float64, {16})), dv(nx::randn(k, nx::float64, {16})));
}

TEST(Random, RandintRange) {
  Tensor r = nx::randint(nx::key(5), -3, 4, {10000});
  EXPECT_EQ(r.dtype(), nx::int64);
  V v = iv(r);
  std::set<int64_t> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3}));
  std::vector<int> count(7, 0);
  for (int64_t x : v) ++count[x + 3];
  for (int c : count) EXPECT_NEAR(c, 10000 / 7.0, 200);
  EXPECT_EQ(iv(nx::randint(nx::key(5), 10, 11, {5})), (V{10, 10, 10, 10, 10}));
}

// ---- reading ----

TEST(Read, ToVectorItemToArray) {
  Tensor x = nx::create(nx::float32, {2, 2}, {1.5, -2, 3, 4});
  EXPECT_EQ(nx::to_vector<float>(x), (std::vector<float>{1.5f, -2.f, 3.f, 4.f}));
  EXPECT_EQ(nx::to_vector<int32_t>(x), (std::vector<int32_t>{1, -2, 3, 4}));
  EXPECT_EQ(nx::to_vector<bool>(x), (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(nx::to_array(x), (D{1.5, -2, 3, 4}));
  EXPECT_EQ(nx::to_array(nx::create(nx::uint8, {2}, {255, 3})), (D{255, 3}));
  EXPECT_EQ(nx::to_vector<uint8_t>(nx::create(nx::uint8, {2}, {255, 3})),
            (std::vector<uint8_t>{255, 3}));
  EXPECT_EQ(nx::to_array(nx::transpose(x)), (D{1.5, 3, -2, 4}));
  EXPECT_EQ(nx::item<double>(nx::scalar(nx::float64, 2.25)), 2.25);
  EXPECT_EQ(nx::item<int64_t>(nx::create(nx::int64, {1, 1}, {-9})), -9);
  EXPECT_EQ(nx::item<float>(nx::scalar(nx::float16, 0.5)), 0.5f);
  EXPECT_EQ(nx::item<bool>(nx::scalar(nx::bool_, 1)), true);
  EXPECT_EQ(nx::item<uint8_t>(nx::scalar(nx::uint8, 200)), 200);
  EXPECT_EQ(nx::item<int32_t>(nx::scalar(nx::int32, -5)), -5);
  EXPECT_TRUE(nx::to_vector<double>(nx::zeros(nx::float64, {0, 2})).empty());
  int64_t big = (int64_t{1} << 62) + 1;  // not a double: to_vector<int64_t> is exact
  EXPECT_EQ(iv(tensor(nx::int64, {1}, std::vector<Value>{I(nx::int64, big)})), V{big});
}

// ---- printing ----

TEST(Print, ExactFormat) {
  EXPECT_EQ(nx::to_string(nx::create(nx::float64, {3}, {1, 2, 3})), "float64 [3] [1, 2, 3]");
  EXPECT_EQ(nx::to_string(nx::scalar(nx::float64, 2.446119840025779e-14)),
            "float64 [] 2.446119840025779e-14");
  EXPECT_EQ(nx::to_string(nx::create(nx::float32, {2, 3}, {1, 2, 3, 4, 5, 6})),
            "float32 [2, 3] [[1, 2, 3],\n                [4, 5, 6]]");
  EXPECT_EQ(nx::to_string(nx::create(nx::bool_, {3}, {1, 0, 1})), "bool [3] [true, false, true]");
  EXPECT_EQ(nx::to_string(nx::create(nx::int32, {2}, {-1, 7})), "int32 [2] [-1, 7]");
  EXPECT_EQ(nx::to_string(nx::create(nx::uint8, {2}, {255, 0})), "uint8 [2] [255, 0]");
  EXPECT_EQ(nx::to_string(nx::create(nx::float32, {4}, {NAN, INFINITY, -INFINITY, -0.0})),
            "float32 [4] [nan, inf, -inf, -0]");
  EXPECT_EQ(nx::to_string(nx::create(nx::float64, {2}, {0.1, 1e20})), "float64 [2] [0.1, 1e+20]");
  // Shortest round-trip digits of the stored value.
  EXPECT_EQ(nx::to_string(nx::create(nx::float32, {2}, {0.1, 1.0 / 3})),
            "float32 [2] [0.1, 0.33333334]");
  EXPECT_EQ(nx::to_string(nx::create(nx::float16, {3}, {0.1, 2048, 1.5})),
            "float16 [3] [0.1, 2048, 1.5]");
  EXPECT_EQ(nx::to_string(nx::create(nx::bfloat16, {2}, {0.1, 3})), "bfloat16 [2] [0.1, 3]");
  EXPECT_EQ(nx::to_string(nx::scalar(nx::int64, -3)), "int64 [] -3");
  EXPECT_EQ(nx::to_string(nx::scalar(nx::bool_, 0)), "bool [] false");
  EXPECT_EQ(nx::to_string(nx::zeros(nx::float32, {0})), "float32 [0] []");
  // Views print their logical values.
  EXPECT_EQ(nx::to_string(nx::transpose(nx::reshape(nx::arange(6), {2, 3}))),
            "int64 [3, 2] [[0, 3],\n              [1, 4],\n              [2, 5]]");
}

// 16-bit floats print like float32 (plain notation for moderate integers), not "1e+02".
TEST(Print, HalfPrecisionUsesPlainNotation) {
  EXPECT_EQ(nx::to_string(nx::create(nx::float32, {3}, {100, 1000, 0.5})),
            "float32 [3] [100, 1000, 0.5]");
  EXPECT_EQ(nx::to_string(nx::create(nx::float16, {3}, {100, 1000, 0.5})),
            "float16 [3] [100, 1000, 0.5]");
  EXPECT_EQ(nx::to_string(nx::create(nx::bfloat16, {2}, {100, 0.5})), "bfloat16 [2] [100, 0.5]");
}

TEST(Print, SummarisesLargeTensors) {
  EXPECT_EQ(nx::to_string(nx::arange(2000)), "int64 [2000] [0, 1, 2, ..., 1997, 1998, 1999]");
  // 1000 elements or fewer print in full.
  std::string full = nx::to_string(nx::arange(1000));
  EXPECT_EQ(full.find("..."), std::string::npos);
  EXPECT_NE(full.find(", 500, 501, "), std::string::npos);
  std::string s = nx::to_string(nx::reshape(nx::arange(1600), {40, 40}));
  std::string pad(16, ' ');
  EXPECT_EQ(s, "int64 [40, 40] [[0, 1, 2, ..., 37, 38, 39],\n" + pad +
                   "[40, 41, 42, ..., 77, 78, 79],\n" + pad +
                   "[80, 81, 82, ..., 117, 118, 119],\n" + pad + "...,\n" + pad +
                   "[1480, 1481, 1482, ..., 1517, 1518, 1519],\n" + pad +
                   "[1520, 1521, 1522, ..., 1557, 1558, 1559],\n" + pad +
                   "[1560, 1561, 1562, ..., 1597, 1598, 1599]]");
}

// Only the printed items are read: a huge view prints at once (it used to be read in full).
TEST(Print, HugeValuesReadOnlyThePrintedItems) {
  const int64_t n = int64_t{1} << 40;
  Tensor b = nx::broadcast_to(nx::scalar(nx::float32, 1.5), {n});
  EXPECT_EQ(nx::to_string(b), "float32 [1099511627776] [1.5, 1.5, 1.5, ..., 1.5, 1.5, 1.5]");
  Tensor rows = nx::broadcast_to(nx::reshape(nx::arange(3), {3, 1}), {3, n});
  std::string pad(26, ' ');
  EXPECT_EQ(nx::to_string(rows), "int64 [3, 1099511627776] [[0, 0, 0, ..., 0, 0, 0],\n" + pad +
                                     "[1, 1, 1, ..., 1, 1, 1],\n" + pad +
                                     "[2, 2, 2, ..., 2, 2, 2]]");
  // The value printed is still usable (printing consumed nothing).
  EXPECT_EQ(nx::item<int64_t>(nx::index(nx::index(rows, 0, 2), 0, n - 1)), 2);
}

TEST(Print, PrintWritesToStringAndNewline) {
  testing::internal::CaptureStdout();
  nx::print(nx::create(nx::int32, {2}, {4, 5}));
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "int32 [2] [4, 5]\n");
}

TEST(Describe, DtypeAndShape) {
  EXPECT_EQ(nx::zeros(nx::bfloat16, {2, 0, 3}).describe(), "bfloat16 [2, 0, 3]");
  EXPECT_EQ(nx::scalar(nx::uint8, 1).describe(), "uint8 []");
  Tensor x = nx::zeros(nx::float32, {2, 5});
  EXPECT_EQ(x.dim(-1), 5);
  EXPECT_EQ(x.dim(0), 2);
  EXPECT_EQ(x.ndim(), 2);
  EXPECT_EQ(x.size(), 10);
  EXPECT_THROW(x.dim(2), std::invalid_argument);
}

}  // namespace
