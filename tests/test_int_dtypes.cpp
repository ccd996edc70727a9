// The integer dtypes of issue 18 (int8, int16, uint16, uint32, uint64) against references
// written in plain C++ of each type: wrapping + - * and negation, numpy's floor division and
// remainder (plain division for unsigned types), min / max, abs, compares, casts to and from
// every width and float at the range edges (saturating, NaN -> 0), reductions, sorts and
// cumulative sums, eagerly and compiled, on CPU, CPU:1 and the fake CUDA:0 (fake_driver.h).
// The references never call ir::apply: test_elementwise checks the kernels against ir::apply
// on every dtype; this file checks ir::apply's meaning (through the kernels) against C++.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::DType;
using nx::Tensor;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, int8_t>) return nx::int8;
  if constexpr (std::is_same_v<T, int16_t>) return nx::int16;
  if constexpr (std::is_same_v<T, uint16_t>) return nx::uint16;
  if constexpr (std::is_same_v<T, uint32_t>) return nx::uint32;
  if constexpr (std::is_same_v<T, uint64_t>) return nx::uint64;
  if constexpr (std::is_same_v<T, uint8_t>) return nx::uint8;
  if constexpr (std::is_same_v<T, int32_t>) return nx::int32;
  if constexpr (std::is_same_v<T, int64_t>) return nx::int64;
  if constexpr (std::is_same_v<T, float>) return nx::float32;
  if constexpr (std::is_same_v<T, double>) return nx::float64;
  if constexpr (std::is_same_v<T, bool>) return nx::bool_;
}

// Both ends of the range, their neighbours, -1, 0, 1 and a few values whose products wrap.
template <class T>
std::vector<T> edges() {
  using L = std::numeric_limits<T>;
  std::vector<T> v = {
      L::min(), static_cast<T>(L::min() + 1), static_cast<T>(L::max() - 1),    L::max(), 0, 1, 2, 3,
      7,        static_cast<T>(L::max() / 2), static_cast<T>(L::max() / 2 + 1)};
  if constexpr (std::is_signed_v<T>) {
    for (T x : {T(-1), T(-2), T(-3), T(-7), static_cast<T>(L::min() / 2)}) v.push_back(x);
  }
  return v;
}

// Plain C++ of T: the arithmetic wraps modulo 2^bits (computed in uint64, which is modular).
template <class T>
T wrap_add(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <class T>
T wrap_sub(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
template <class T>
T wrap_mul(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
template <class T>
T wrap_neg(T a) {
  return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(a));
}
// numpy's //: floor division; x // 0 is 0; MIN // -1 wraps to MIN. Unsigned: plain division.
template <class T>
T floor_div(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return wrap_neg(a);
    T q = static_cast<T>(a / b);
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return static_cast<T>(a / b);
  }
}
// numpy's %: the sign of the divisor; x % 0 is 0.
template <class T>
T floor_mod(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return 0;
    T r = static_cast<T>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  } else {
    return static_cast<T>(a % b);
  }
}
template <class T>
T abs_ref(T a) {
  if constexpr (std::is_signed_v<T>) return a < 0 ? wrap_neg(a) : a;  // abs(MIN) is MIN
  return a;
}
// float -> integer: truncation toward zero, NaN 0, saturating at both ends (docs/dtypes.md).
template <class T>
T from_float(double v) {
  using L = std::numeric_limits<T>;
  if (std::isnan(v)) return 0;
  const double t = std::trunc(v);
  if (t <= static_cast<double>(L::min())) return L::min();
  if (t >= std::ldexp(1.0, L::digits)) return L::max();  // 2^digits: one above the maximum
  return static_cast<T>(t);
}

template <class T>
Tensor make(const std::vector<T>& v, const nx::Shape& s, const std::string& dev) {
  Tensor h = nx::host_from_bytes(dtype_of<T>(), s, v.data());
  return dev == "CPU" ? h : nx::place(h, dev);
}

// Every pair (a[i], b[j]) of the edges as two [n, n] tensors.
template <class T>
struct Pairs {
  std::vector<T> a, b;
  int64_t n;
  Pairs() {
    auto e = edges<T>();
    n = static_cast<int64_t>(e.size());
    for (T x : e)
      for (T y : e) a.push_back(x), b.push_back(y);
  }
};

class IntDtypes : public ::testing::TestWithParam<std::string> {};

// f on the device, eagerly and through rune::jit, must give want (read as R) both times.
template <class R, class F>
void expect_both(F f, const std::vector<Tensor>& in, const std::vector<R>& want,
                 const std::string& what) {
  SCOPED_TRACE(what);
  Tensor eager = in.size() == 1 ? f(in[0], in[0]) : f(in[0], in[1]);
  auto g = rune::jit([f](const Tensor& x, const Tensor& y) { return f(x, y); });
  Tensor compiled = in.size() == 1 ? g(in[0], in[0]) : g(in[0], in[1]);
  EXPECT_EQ(eager.dtype(), dtype_of<R>());
  EXPECT_EQ(compiled.dtype(), dtype_of<R>());
  EXPECT_EQ(eager.device(), in[0].device());
  EXPECT_EQ(compiled.device(), in[0].device());
  EXPECT_EQ(nx::to_vector<R>(eager), want) << "eager";
  EXPECT_EQ(nx::to_vector<R>(compiled), want) << "compiled";
}

template <class T>
void check_elementwise(const std::string& dev) {
  SCOPED_TRACE(std::string(ir::name(dtype_of<T>())));
  Pairs<T> p;
  Tensor a = make(p.a, {p.n, p.n}, dev), b = make(p.b, {p.n, p.n}, dev);
  auto each = [&](auto fn) {
    std::vector<std::invoke_result_t<decltype(fn), T, T>> r;
    for (size_t k = 0; k < p.a.size(); ++k) r.push_back(fn(p.a[k], p.b[k]));
    return r;
  };
  using TT = const Tensor&;
  expect_both<T>([](TT x, TT y) { return nx::add(x, y); }, {a, b}, each(wrap_add<T>), "add");
  expect_both<T>([](TT x, TT y) { return nx::sub(x, y); }, {a, b}, each(wrap_sub<T>), "sub");
  expect_both<T>([](TT x, TT y) { return nx::mul(x, y); }, {a, b}, each(wrap_mul<T>), "mul");
  expect_both<T>([](TT x, TT y) { return nx::div(x, y); }, {a, b}, each(floor_div<T>), "div");
  expect_both<T>([](TT x, TT y) { return nx::mod(x, y); }, {a, b}, each(floor_mod<T>), "mod");
  expect_both<T>([](TT x, TT y) { return nx::maximum(x, y); }, {a, b},
                 each([](T x, T y) { return std::max(x, y); }), "maximum");
  expect_both<T>([](TT x, TT y) { return nx::minimum(x, y); }, {a, b},
                 each([](T x, T y) { return std::min(x, y); }), "minimum");
  expect_both<bool>([](TT x, TT y) { return nx::less(x, y); }, {a, b},
                    each([](T x, T y) { return x < y; }), "less");
  expect_both<bool>([](TT x, TT y) { return nx::less_equal(x, y); }, {a, b},
                    each([](T x, T y) { return x <= y; }), "less_equal");
  expect_both<bool>([](TT x, TT y) { return nx::equal(x, y); }, {a, b},
                    each([](T x, T y) { return x == y; }), "equal");
  expect_both<T>([](TT x, TT) { return nx::neg(x); }, {a}, each([](T x, T) { return wrap_neg(x); }),
                 "neg");
  expect_both<T>([](TT x, TT) { return nx::abs(x); }, {a}, each([](T x, T) { return abs_ref(x); }),
                 "abs");
}

// Casts from T to every integer width and to the floats, and from float edges back to T.
template <class T, class To>
void cast_to(const Tensor& x, const std::vector<T>& v) {
  std::vector<To> want;
  for (T e : v) want.push_back(static_cast<To>(e));  // C++20: modular; floats: rounded once
  expect_both<To>([](const Tensor& a, const Tensor&) { return nx::cast(a, dtype_of<To>()); }, {x},
                  want, "cast to " + std::string(ir::name(dtype_of<To>())));
}

template <class T>
void check_casts(const std::string& dev) {
  SCOPED_TRACE(std::string(ir::name(dtype_of<T>())));
  auto v = edges<T>();
  Tensor x = make(v, {static_cast<int64_t>(v.size())}, dev);
  cast_to<T, int8_t>(x, v);
  cast_to<T, uint8_t>(x, v);
  cast_to<T, int16_t>(x, v);
  cast_to<T, uint16_t>(x, v);
  cast_to<T, int32_t>(x, v);
  cast_to<T, uint32_t>(x, v);
  cast_to<T, int64_t>(x, v);
  cast_to<T, uint64_t>(x, v);
  cast_to<T, float>(x, v);
  cast_to<T, double>(x, v);
  // Floats into T: NaN, infinities, -0.0, fractions and the doubles around both ends.
  using L = std::numeric_limits<T>;
  const double lo = static_cast<double>(L::min()), top = std::ldexp(1.0, L::digits);
  std::vector<double> f = {NAN,
                           INFINITY,
                           -INFINITY,
                           -0.0,
                           0.0,
                           0.9,
                           -0.9,
                           2.5,
                           -2.5,
                           lo,
                           lo - 1,
                           lo + 0.5,
                           std::nextafter(lo, -INFINITY),
                           top,
                           std::nextafter(top, 0.0),
                           top + 1e3,
                           -top,
                           1e300,
                           -1e300};
  std::vector<T> want;
  for (double d : f) want.push_back(from_float<T>(d));
  Tensor xf = make(f, {static_cast<int64_t>(f.size())}, dev);
  expect_both<T>([](const Tensor& a, const Tensor&) { return nx::cast(a, dtype_of<T>()); }, {xf},
                 want, "float64 to T");
  std::vector<float> f32;
  std::vector<T> want32;
  for (double d : f) {
    f32.push_back(static_cast<float>(d));
    want32.push_back(from_float<T>(static_cast<float>(d)));
  }
  Tensor x32 = make(f32, {static_cast<int64_t>(f32.size())}, dev);
  expect_both<T>([](const Tensor& a, const Tensor&) { return nx::cast(a, dtype_of<T>()); }, {x32},
                 want32, "float32 to T");
}

// sum / prod in int64 (uint64: in uint64), max / min / argmax in T, along each axis of a grid.
template <class T>
void check_reductions(const std::string& dev) {
  SCOPED_TRACE(std::string(ir::name(dtype_of<T>())));
  using Acc = std::conditional_t<std::is_same_v<T, uint64_t>, uint64_t, int64_t>;
  Pairs<T> p;
  const int64_t n = p.n;
  Tensor a = make(p.a, {n, n}, dev);
  Tensor mixed = make(p.b, {n, n}, dev);  // each row holds every edge: a real max and min
  std::vector<Acc> sum0(n, 0), prod1(n, 1);
  std::vector<T> max1(n), min1(n);
  std::vector<int64_t> argmax1(n), argmin1(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      // Wrapping in the accumulator type, computed in uint64 (modular).
      sum0[j] = static_cast<Acc>(static_cast<uint64_t>(sum0[j]) +
                                 static_cast<uint64_t>(static_cast<Acc>(p.a[i * n + j])));
    }
    const T* row = &p.b[i * n];
    for (int64_t j = 0; j < n; ++j)
      prod1[i] = static_cast<Acc>(static_cast<uint64_t>(prod1[i]) *
                                  static_cast<uint64_t>(static_cast<Acc>(row[j])));
    max1[i] = *std::max_element(row, row + n);
    min1[i] = *std::min_element(row, row + n);
    argmax1[i] = std::max_element(row, row + n) - row;  // the first maximum, as numpy
    argmin1[i] = std::min_element(row, row + n) - row;
  }
  using TT = const Tensor&;
  expect_both<Acc>([](TT x, TT) { return nx::sum(x, {0}); }, {a}, sum0, "sum axis 0");
  expect_both<Acc>([](TT x, TT) { return nx::prod(x, {1}); }, {mixed}, prod1, "prod axis 1");
  expect_both<T>([](TT x, TT) { return nx::max(x, {1}); }, {mixed}, max1, "max axis 1");
  expect_both<T>([](TT x, TT) { return nx::min(x, {1}); }, {mixed}, min1, "min axis 1");
  expect_both<int64_t>([](TT x, TT) { return nx::argmax(x, 1); }, {mixed}, argmax1, "argmax");
  expect_both<int64_t>([](TT x, TT) { return nx::argmin(x, 1); }, {mixed}, argmin1, "argmin");
}

// Stable sorts and cumulative sums of each row (std::stable_sort and a wrapping loop).
template <class T>
void check_sort_scan(const std::string& dev) {
  SCOPED_TRACE(std::string(ir::name(dtype_of<T>())));
  using Acc = std::conditional_t<std::is_same_v<T, uint64_t>, uint64_t, int64_t>;
  Pairs<T> p;
  const int64_t n = p.n;
  std::vector<T> rows = p.a;  // row i: a rotation of the edges, with repeats from p.a
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) rows[i * n + j] = p.b[i * n + (i + j) % n] ^ p.a[i * n + j];
  Tensor x = make(rows, {n, n}, dev);
  std::vector<T> sorted;
  std::vector<int64_t> order;
  std::vector<Acc> cum;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<T> r(rows.begin() + i * n, rows.begin() + (i + 1) * n);
    std::vector<int64_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t u, int64_t w) { return r[u] < r[w]; });
    for (int64_t k : idx) sorted.push_back(r[k]), order.push_back(k);
    uint64_t acc = 0;
    for (T e : r)
      cum.push_back(static_cast<Acc>(acc += static_cast<uint64_t>(static_cast<Acc>(e))));
  }
  using TT = const Tensor&;
  expect_both<T>([](TT a, TT) { return nx::sort(a); }, {x}, sorted, "sort");
  expect_both<int64_t>([](TT a, TT) { return nx::argsort(a); }, {x}, order, "argsort");
  expect_both<Acc>([](TT a, TT) { return nx::cumsum(a); }, {x}, cum, "cumsum");
}

template <class F>
void for_each_new_int(F&& f) {
  f(int8_t{});
  f(int16_t{});
  f(uint16_t{});
  f(uint32_t{});
  f(uint64_t{});
}

TEST_P(IntDtypes, ElementwiseMatchesPlainCpp) {
  ASSERT_TRUE(installed);
  for_each_new_int([&](auto t) { check_elementwise<decltype(t)>(GetParam()); });
}
TEST_P(IntDtypes, CastsMatchPlainCpp) {
  for_each_new_int([&](auto t) { check_casts<decltype(t)>(GetParam()); });
}
TEST_P(IntDtypes, ReductionsMatchPlainCpp) {
  for_each_new_int([&](auto t) { check_reductions<decltype(t)>(GetParam()); });
}
TEST_P(IntDtypes, SortAndCumsumMatchPlainCpp) {
  for_each_new_int([&](auto t) { check_sort_scan<decltype(t)>(GetParam()); });
}

// Integer scalars: in range they keep the tensor's dtype; out of range they raise (compares
// excepted), and uint64 takes scalars above INT64_MAX.
TEST_P(IntDtypes, IntegerScalars) {
  const std::string dev = GetParam();
  Tensor x = make(std::vector<int8_t>{-128, 127}, {2}, dev);
  EXPECT_EQ(nx::to_vector<int8_t>(x + 1), (std::vector<int8_t>{-127, -128}));
  EXPECT_EQ((x * 2).dtype(), nx::int8);
  try {
    (void)(x + 128);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "nx::add: integer scalar 128 is out of range for int8 [2] (numpy 2 and JAX raise "
              "too; cast the tensor with nx::cast)");
  }
  EXPECT_EQ(nx::to_vector<bool>(x < 1000), (std::vector<bool>{true, true}));
  Tensor u = make(std::vector<uint64_t>{0, 1}, {2}, dev);
  EXPECT_EQ(nx::to_vector<uint64_t>(u + UINT64_MAX), (std::vector<uint64_t>{UINT64_MAX, 0}));
  EXPECT_EQ(nx::to_vector<uint64_t>(u - 1), (std::vector<uint64_t>{UINT64_MAX, 0}));
  Tensor u16 = make(std::vector<uint16_t>{65535, 3}, {2}, dev);
  EXPECT_EQ(nx::to_vector<uint16_t>(u16 * 65535), (std::vector<uint16_t>{1, 65533}));
  EXPECT_THROW((void)(u16 + -1), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Devices, IntDtypes, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

// ---- device-independent: names, sizes, promotion, creation, printing, reads ----

TEST(IntDtypes, NamesAndItemsizes) {
  struct Row {
    DType t;
    const char* name;
    int64_t size;
    bool is_signed;
  };
  for (auto [t, n, size, sig] :
       {Row{nx::int8, "int8", 1, true}, Row{nx::int16, "int16", 2, true},
        Row{nx::uint16, "uint16", 2, false}, Row{nx::uint32, "uint32", 4, false},
        Row{nx::uint64, "uint64", 8, false}}) {
    EXPECT_EQ(ir::name(t), n);
    EXPECT_EQ(ir::itemsize(t), size) << n;
    EXPECT_TRUE(ir::is_int(t)) << n;
    EXPECT_EQ(ir::is_signed_int(t), sig) << n;
    EXPECT_FALSE(ir::is_float(t)) << n;
  }
  // The original dtypes keep their enum values (the compile cache and files key on them).
  EXPECT_EQ(static_cast<int>(nx::bool_), 0);
  EXPECT_EQ(static_cast<int>(nx::float64), 7);
  EXPECT_EQ(static_cast<int>(nx::uint64), 12);
}

// numpy's promotion of two integer arrays (np.result_type), written out by hand, and the float
// rule rune keeps (the float's dtype).
TEST(IntDtypes, PromotionTable) {
  const DType order[] = {nx::bool_, nx::uint8, nx::uint16, nx::uint32, nx::uint64,
                         nx::int8,  nx::int16, nx::int32,  nx::int64};
  // Rows and columns in `order`; f8 = float64.
  const char* table[9][9] = {
      {"bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"},
      {"uint8", "uint8", "uint16", "uint32", "uint64", "int16", "int16", "int32", "int64"},
      {"uint16", "uint16", "uint16", "uint32", "uint64", "int32", "int32", "int32", "int64"},
      {"uint32", "uint32", "uint32", "uint32", "uint64", "int64", "int64", "int64", "int64"},
      {"uint64", "uint64", "uint64", "uint64", "uint64", "float64", "float64", "float64",
       "float64"},
      {"int8", "int16", "int32", "int64", "float64", "int8", "int16", "int32", "int64"},
      {"int16", "int16", "int32", "int64", "float64", "int16", "int16", "int32", "int64"},
      {"int32", "int32", "int32", "int64", "float64", "int32", "int32", "int32", "int64"},
      {"int64", "int64", "int64", "int64", "float64", "int64", "int64", "int64", "int64"},
  };
  for (int i = 0; i < 9; ++i)
    for (int j = 0; j < 9; ++j)
      EXPECT_EQ(ir::name(ir::promote(order[i], order[j])), table[i][j])
          << ir::name(order[i]) << " with " << ir::name(order[j]);
  for (DType t : order) {
    EXPECT_EQ(ir::promote(t, nx::float16), nx::float16);
    EXPECT_EQ(ir::promote(nx::bfloat16, t), nx::bfloat16);
    EXPECT_EQ(ir::promote(t, nx::float32), nx::float32);
  }
}

TEST(IntDtypes, CreationPrintingAndReads) {
  EXPECT_EQ(nx::to_string(nx::create(nx::int8, {3}, {-128, 0, 127})), "int8 [3] [-128, 0, 127]");
  EXPECT_EQ(nx::to_string(nx::create(nx::uint16, {2}, {0, 65535})), "uint16 [2] [0, 65535]");
  EXPECT_EQ(nx::to_string(nx::full(nx::uint32, {}, 4294967295.0)), "uint32 [] 4294967295");
  Tensor big = nx::cast(nx::create(nx::float64, {2}, {1.8446744073709550e19, -1}), nx::uint64);
  EXPECT_EQ(nx::to_string(big), "uint64 [2] [18446744073709549568, 0]");
  EXPECT_EQ(nx::to_string(nx::sub(nx::zeros(nx::uint64, {1}), nx::ones(nx::uint64, {1}))),
            "uint64 [1] [18446744073709551615]");
  EXPECT_EQ(nx::item<uint64_t>(nx::full(nx::uint64, {}, 0x1p63)), uint64_t{1} << 63);
  EXPECT_EQ(nx::item<int16_t>(nx::full(nx::int16, {}, -32768)), -32768);
  EXPECT_EQ(nx::to_vector<double>(nx::arange(nx::int8, -2, 2)),
            (std::vector<double>{-2, -1, 0, 1}));
  auto msg = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(msg([] { nx::create(nx::int8, {1}, {128}); }),
            "nx::create: value 128 is out of range for int8 [-128, 127]");
  EXPECT_EQ(msg([] { nx::full(nx::uint16, {1}, -1); }),
            "nx::full: value -1 is out of range for uint16 [0, 65535]");
  EXPECT_EQ(msg([] { nx::full(nx::uint64, {1}, 0x1p64); }),
            "nx::full: value 1.8446744073709552e+19 is out of range for uint64 [0, "
            "18446744073709551615]");
  EXPECT_EQ(msg([] { nx::full(nx::uint32, {1}, NAN); }), "nx::full: value nan cannot be uint32");
  // Clip bounds outside the range clamp to it.
  EXPECT_EQ(nx::to_vector<int8_t>(nx::clip(nx::create(nx::int8, {2}, {-128, 127}), -1e9, 1e9)),
            (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(nx::to_vector<uint64_t>(nx::clip(big, 0, 1e30)),
            (std::vector<uint64_t>{18446744073709549568ull, 0}));
}

// Matrix products of integers compute and return int64, whatever the integer dtype.
TEST(IntDtypes, MatmulComputesInInt64) {
  Tensor a = nx::create(nx::int8, {1, 2}, {-128, 127});
  Tensor b = nx::create(nx::int8, {2, 1}, {127, 127});
  Tensor r = nx::matmul(a, b);
  EXPECT_EQ(r.dtype(), nx::int64);
  EXPECT_EQ(nx::to_vector<int64_t>(r), (std::vector<int64_t>{-127}));
}

}  // namespace
