// Errors: std::invalid_argument whose message begins with the API name ("nx::add: ") and shows
// the offending shapes / dtypes; a failing call leaves its arguments readable and unchanged.
#include <gtest/gtest.h>

#include "test_util.h"

namespace {

using namespace rt;

// Expects fn to throw std::invalid_argument beginning with `api` + ": " and containing each of
// `parts`.
#define EXPECT_ERROR(stmt, api, ...)                                                    \
  do {                                                                                  \
    std::string msg_ = error_of([&] { (void)(stmt); });                                 \
    EXPECT_EQ(msg_.rfind(std::string(api) + ": ", 0), 0u)                               \
        << #stmt << "\n  message: " << msg_ << "\n  should begin with " << api << ": "; \
    for (const std::string& part_ : std::vector<std::string>{__VA_ARGS__})              \
      EXPECT_NE(msg_.find(part_), std::string::npos)                                    \
          << #stmt << "\n  message: " << msg_ << "\n  should contain: " << part_;       \
  } while (0)

Tensor f32(const Shape& s) {
  std::vector<Value> v;
  for (int64_t i = 0; i < ir::numel(s); ++i) v.push_back(F(nx::float32, static_cast<double>(i)));
  return tensor(nx::float32, s, v);
}

TEST(Errors, DtypeMismatch) {
  Tensor a = f32({2}), b = nx::zeros(nx::float64, {2});
  EXPECT_ERROR(nx::add(a, b), "nx::add", "float32 [2]", "float64 [2]");
  EXPECT_ERROR(nx::sub(a, b), "nx::sub", "float32 [2]", "float64 [2]");
  EXPECT_ERROR(nx::mul(b, a), "nx::mul", "float64 [2]", "float32 [2]");
  EXPECT_ERROR(nx::div(a, b), "nx::div", "float32", "float64");
  EXPECT_ERROR(nx::mod(a, b), "nx::mod", "float32", "float64");
  EXPECT_ERROR(nx::maximum(a, b), "nx::maximum", "float32", "float64");
  EXPECT_ERROR(nx::minimum(a, b), "nx::minimum", "float32", "float64");
  EXPECT_ERROR(nx::pow(a, b), "nx::pow", "float32", "float64");
  EXPECT_ERROR(nx::atan2(a, b), "nx::atan2", "float32", "float64");
  EXPECT_ERROR(nx::less(a, b), "nx::less", "float32", "float64");
  EXPECT_ERROR(nx::greater_equal(a, b), "nx::greater_equal", "float32", "float64");
  EXPECT_ERROR(nx::equal(a, b), "nx::equal", "float32", "float64");
  EXPECT_ERROR(nx::where(nx::ones(nx::bool_, {2}), a, b), "nx::where", "float32", "float64");
  EXPECT_ERROR(nx::where(a, a, a), "nx::where", "float32 [2]");  // condition must be bool
  EXPECT_ERROR(nx::add(nx::zeros(nx::int32, {2}), nx::zeros(nx::int64, {2})), "nx::add", "int32",
               "int64");
  EXPECT_ERROR(nx::matmul(nx::zeros(nx::float32, {2, 2}), nx::zeros(nx::float64, {2, 2})),
               "nx::matmul", "float32 [2, 2]", "float64 [2, 2]");
  EXPECT_ERROR(a + b, "nx::add", "float32", "float64");
}

TEST(Errors, ShapeMismatch) {
  Tensor a = f32({2}), b = f32({3}), c = f32({2, 3});
  EXPECT_ERROR(nx::add(a, b), "nx::add", "float32 [2]", "float32 [3]");
  EXPECT_ERROR(nx::mul(c, a), "nx::mul", "float32 [2, 3]", "float32 [2]");
  EXPECT_ERROR(nx::less(c, f32({3, 2})), "nx::less", "[2, 3]", "[3, 2]");
  EXPECT_ERROR(nx::where(nx::ones(nx::bool_, {4}), a, a), "nx::where", "bool [4]", "float32 [2]");
  EXPECT_ERROR(nx::broadcast_to(b, {2, 2}), "nx::broadcast_to", "float32 [3]", "[2, 2]");
  EXPECT_ERROR(nx::broadcast_to(c, {3}), "nx::broadcast_to", "float32 [2, 3]", "[3]");
  EXPECT_ERROR(nx::dot(a, b), "nx::dot", "float32 [2]", "float32 [3]");
}

TEST(Errors, BadAxes) {
  Tensor x = f32({2, 3});
  EXPECT_ERROR(nx::sum(x, {5}), "nx::sum", "5", "float32 [2, 3]");
  EXPECT_ERROR(nx::sum(x, {-3}), "nx::sum", "-3", "float32 [2, 3]");
  EXPECT_ERROR(nx::sum(x, {0, 0}), "nx::sum", "repeated", "float32 [2, 3]");
  EXPECT_ERROR(nx::sum(x, {1, -1}), "nx::sum", "repeated", "float32 [2, 3]");
  EXPECT_ERROR(nx::prod(x, {2}), "nx::prod", "2", "float32 [2, 3]");
  EXPECT_ERROR(nx::mean(x, {2}), "nx::mean", "2", "float32 [2, 3]");
  EXPECT_ERROR(nx::max(x, {2}), "nx::max", "2", "float32 [2, 3]");
  EXPECT_ERROR(nx::min(x, {0, 0}), "nx::min", "repeated", "float32 [2, 3]");
  EXPECT_ERROR(nx::argmax(x, 2), "nx::argmax", "2", "float32 [2, 3]");
  EXPECT_ERROR(nx::argmin(x, -3), "nx::argmin", "-3", "float32 [2, 3]");
  EXPECT_ERROR(nx::flip(x, {3}), "nx::flip", "3", "float32 [2, 3]");
  EXPECT_ERROR(nx::permute(x, {0}), "nx::permute", "float32 [2, 3]");
  EXPECT_ERROR(nx::permute(x, {1, 1}), "nx::permute", "repeated", "float32 [2, 3]");
  EXPECT_ERROR(nx::permute(x, {0, 2}), "nx::permute", "2", "float32 [2, 3]");
  EXPECT_ERROR(nx::squeeze(x, 0), "nx::squeeze", "float32 [2, 3]");
  EXPECT_ERROR(nx::squeeze(x, 4), "nx::squeeze", "4", "float32 [2, 3]");
  EXPECT_ERROR(nx::expand_dims(x, 4), "nx::expand_dims", "4", "float32 [2, 3]");
  EXPECT_ERROR(nx::softmax(x, 2), "nx::softmax", "2", "float32 [2, 3]");
  EXPECT_ERROR(nx::iota({2, 3}, 2), "nx::iota", "2", "[2, 3]");
  EXPECT_ERROR(nx::concatenate({x, x}, 2), "nx::concatenate", "2", "float32 [2, 3]");
}

// The message names the caller's tensor, not an internal int64 / float32 copy of it.
TEST(Errors, BadAxesNameTheArgumentsDtype) {
  Tensor i = nx::zeros(nx::int32, {2, 3});
  EXPECT_ERROR(nx::sum(i, {5}), "nx::sum", "int32 [2, 3]");
  EXPECT_ERROR(nx::prod(i, {5}), "nx::prod", "int32 [2, 3]");
  EXPECT_ERROR(nx::sum(nx::zeros(nx::float16, {2, 3}), {0, 0}), "nx::sum", "float16 [2, 3]");
  EXPECT_ERROR(nx::sum(nx::zeros(nx::bool_, {4}), {1}), "nx::sum", "bool [4]");
}

TEST(Errors, Reshape) {
  Tensor x = f32({2, 3});
  EXPECT_ERROR(nx::reshape(x, {4}), "nx::reshape", "float32 [2, 3]", "[4]");
  EXPECT_ERROR(nx::reshape(x, {4, -1}), "nx::reshape", "float32 [2, 3]", "[4, -1]");
  EXPECT_ERROR(nx::reshape(x, {-1, -1}), "nx::reshape", "[-1, -1]");
  EXPECT_ERROR(nx::reshape(x, {-2, -3}), "nx::reshape", "[-2, -3]");
  EXPECT_ERROR(nx::reshape(x, {7}), "nx::reshape", "6", "7");
}

TEST(Errors, SliceAndIndexOutOfRange) {
  Tensor x = nx::arange(5);
  using S = nx::Slice;
  EXPECT_ERROR(nx::slice(x, {S{6, std::nullopt, 1}}), "nx::slice", "6", "int64 [5]");
  EXPECT_ERROR(nx::slice(x, {S{-6, std::nullopt, 1}}), "nx::slice", "-6", "int64 [5]");
  EXPECT_ERROR(nx::slice(x, {S{0, 7, 1}}), "nx::slice", "7", "int64 [5]");
  EXPECT_ERROR(nx::slice(x, {S{0, -9, 1}}), "nx::slice", "-9", "int64 [5]");
  EXPECT_ERROR(nx::slice(x, {S{6, std::nullopt, -1}}), "nx::slice", "6", "int64 [5]");
  EXPECT_ERROR(nx::slice(x, {S{std::nullopt, -7, -1}}), "nx::slice", "-7", "int64 [5]");
  EXPECT_ERROR(nx::slice(x, {S{0, 5, 0}}), "nx::slice", "step 0");
  EXPECT_ERROR(nx::slice(x, {S{}, S{}}), "nx::slice", "int64 [5]");
  Tensor m = f32({3, 4});
  EXPECT_ERROR(nx::slice(m, {S{}, S{0, 5, 1}}), "nx::slice", "5", "float32 [3, 4]");
  EXPECT_ERROR(nx::index(m, 0, 3), "nx::index", "3", "float32 [3, 4]");
  EXPECT_ERROR(nx::index(m, 0, -4), "nx::index", "-4", "float32 [3, 4]");
  EXPECT_ERROR(nx::index(m, 1, 4), "nx::index", "4", "float32 [3, 4]");
  EXPECT_ERROR(nx::index(m, 2, 0), "nx::index", "2", "float32 [3, 4]");
  EXPECT_ERROR(nx::index(nx::scalar(nx::float32, 1), 0, 0), "nx::index", "float32 []");
}

TEST(Errors, ItemOfManyElements) {
  EXPECT_ERROR(nx::item<double>(f32({3})), "nx::item", "float32 [3]", "3");
  EXPECT_ERROR(nx::item<int64_t>(nx::zeros(nx::int64, {2, 2})), "nx::item", "int64 [2, 2]");
  EXPECT_ERROR(nx::item<float>(nx::zeros(nx::float32, {0})), "nx::item", "float32 [0]");
}

TEST(Errors, Matmul) {
  EXPECT_ERROR(nx::matmul(f32({2, 3}), f32({2, 3})), "nx::matmul", "float32 [2, 3]");
  EXPECT_ERROR(nx::matmul(f32({3}), f32({4})), "nx::matmul", "float32 [3]", "float32 [4]");
  EXPECT_ERROR(nx::matmul(f32({2, 3}), f32({4})), "nx::matmul", "float32 [2, 3]", "float32 [4]");
  EXPECT_ERROR(nx::matmul(f32({}), f32({2})), "nx::matmul", "float32 []");
  EXPECT_ERROR(nx::matmul(f32({2, 2, 3}), f32({3, 3, 2})), "nx::matmul", "float32 [2, 2, 3]",
               "float32 [3, 3, 2]");
}

TEST(Errors, ConcatenateAndStack) {
  Tensor a = f32({2, 3});
  EXPECT_ERROR(nx::concatenate({a, f32({2, 4})}, 0), "nx::concatenate", "float32 [2, 3]",
               "float32 [2, 4]");
  EXPECT_ERROR(nx::concatenate({a, f32({3})}, 0), "nx::concatenate", "float32 [2, 3]",
               "float32 [3]");
  EXPECT_ERROR(nx::concatenate({a, nx::zeros(nx::float64, {2, 3})}), "nx::concatenate",
               "float32 [2, 3]", "float64 [2, 3]");
  EXPECT_ERROR(nx::concatenate({}), "nx::concatenate");
  EXPECT_ERROR(nx::concatenate({f32({}), f32({})}), "nx::concatenate", "float32 []");
  EXPECT_ERROR(nx::stack({a, f32({3, 2})}), "nx::stack", "float32 [2, 3]", "float32 [3, 2]");
  EXPECT_ERROR(nx::stack({}), "nx::stack");
}

TEST(Errors, Pad) {
  Tensor a = f32({2, 3});
  EXPECT_ERROR(nx::pad(a, {{-1, 0}, {0, 0}}), "nx::pad", "-1", "float32 [2, 3]");
  EXPECT_ERROR(nx::pad(a, {{0, 0}, {0, -2}}, 3), "nx::pad", "-2", "float32 [2, 3]");
  EXPECT_ERROR(nx::pad(a, {{1, 1}}), "nx::pad", "float32 [2, 3]");
}

TEST(Errors, EmptyReductions) {
  Tensor e = f32({0, 3});
  EXPECT_ERROR(nx::max(e), "nx::max", "float32 [0, 3]");
  EXPECT_ERROR(nx::max(e, {0}), "nx::max", "float32 [0, 3]");
  EXPECT_ERROR(nx::min(e, {0}, true), "nx::min", "float32 [0, 3]");
  EXPECT_ERROR(nx::argmax(e), "nx::argmax", "float32 [0, 3]");
  EXPECT_ERROR(nx::argmin(e, 0), "nx::argmin", "float32 [0, 3]");
  EXPECT_ERROR(nx::max(nx::zeros(nx::int32, {0})), "nx::max", "int32 [0]");
}

TEST(Errors, DtypeRequirementsAndArguments) {
  Tensor i = nx::zeros(nx::int32, {2});
  EXPECT_ERROR(nx::sqrt(i), "nx::sqrt", "int32 [2]");
  EXPECT_ERROR(nx::exp(i), "nx::exp", "int32 [2]");
  EXPECT_ERROR(nx::log(i), "nx::log", "int32 [2]");
  EXPECT_ERROR(nx::sin(i), "nx::sin", "int32 [2]");
  EXPECT_ERROR(nx::tanh(i), "nx::tanh", "int32 [2]");
  EXPECT_ERROR(nx::pow(i, i), "nx::pow", "int32 [2]");
  EXPECT_ERROR(nx::atan2(i, i), "nx::atan2", "int32 [2]");
  EXPECT_ERROR(nx::reciprocal(i), "nx::reciprocal", "int32 [2]");
  EXPECT_ERROR(nx::sigmoid(i), "nx::sigmoid", "int32 [2]");
  EXPECT_ERROR(nx::softmax(i), "nx::softmax", "int32 [2]");
  EXPECT_ERROR(nx::neg(nx::zeros(nx::bool_, {2})), "nx::neg", "bool [2]");
  EXPECT_ERROR(nx::clip(f32({2}), 3, 1), "nx::clip", "3", "1");
  EXPECT_ERROR(nx::create(nx::float32, {2, 2}, {1, 2, 3}), "nx::create", "3", "[2, 2]");
  EXPECT_ERROR(nx::create(nx::float32, {-1}, {}), "nx::create", "[-1]");
  EXPECT_ERROR(nx::full(nx::float32, {2, -1}, 0), "nx::full", "[2, -1]");
  EXPECT_ERROR(nx::arange(nx::float32, 0, 1, 0), "nx::arange");
  EXPECT_ERROR(nx::linspace(nx::float32, 0, 1, -1), "nx::linspace", "-1");
  EXPECT_ERROR(nx::eye(nx::float32, -1), "nx::eye", "-1");
  EXPECT_ERROR(nx::rand(nx::key(1), nx::int32, {2}), "nx::rand", "int32");
  EXPECT_ERROR(nx::randn(nx::key(1), nx::uint8, {2}), "nx::randn", "uint8");
  EXPECT_ERROR(nx::randint(nx::key(1), 3, 3, {2}), "nx::randint", "3");
}

// ---- a failing call leaves its arguments readable and unchanged ----

void expect_intact(const Tensor& x, DType t, const Shape& s, const std::vector<Value>& v) {
  EXPECT_EQ(x.dtype(), t);
  EXPECT_EQ(x.shape(), s);
  std::vector<Value> got;
  try {
    got = read(x);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the argument is no longer readable: " << e.what();
    return;
  }
  EXPECT_TRUE(match(got, v));
}

TEST(Errors, ArgumentsSurviveFailures) {
  std::vector<Value> va, vi;
  for (int k = 0; k < 6; ++k) va.push_back(F(nx::float32, k * 0.5 - 1));
  for (int k = 0; k < 6; ++k) vi.push_back(I(nx::int32, 100 * k - 250));
  Tensor a = tensor(nx::float32, {2, 3}, va);
  Tensor i = tensor(nx::int32, {2, 3}, vi);
  Tensor t = nx::transpose(a);
  std::vector<Value> vt = {va[0], va[3], va[1], va[4], va[2], va[5]};
  EXPECT_THROW(nx::add(a, nx::zeros(nx::float64, {2, 3})), std::invalid_argument);
  EXPECT_THROW(nx::add(a, f32({3, 2})), std::invalid_argument);
  EXPECT_THROW(nx::reshape(a, {4}), std::invalid_argument);
  EXPECT_THROW(nx::slice(t, {{0, 9, 1}}), std::invalid_argument);
  EXPECT_THROW(nx::sum(i, {5}), std::invalid_argument);
  EXPECT_THROW(nx::mean(i, {0, 0}), std::invalid_argument);
  EXPECT_THROW(nx::concatenate({a, i}), std::invalid_argument);
  EXPECT_THROW(nx::pad(t, {{0, -1}, {0, 0}}), std::invalid_argument);
  EXPECT_THROW(nx::matmul(a, a), std::invalid_argument);
  EXPECT_THROW(nx::item<float>(a), std::invalid_argument);
  EXPECT_THROW(nx::max(nx::slice(a, {{0, 0, 1}}), {0}), std::invalid_argument);
  expect_intact(a, nx::float32, {2, 3}, va);
  expect_intact(i, nx::int32, {2, 3}, vi);
  expect_intact(t, nx::float32, {3, 2}, vt);
  // And they still work as inputs.
  EXPECT_EQ(nx::to_vector<double>(nx::sum(a)), std::vector<double>{1.5});
}

// A donated argument of a call that fails is not consumed (core/donation.h: "Nothing is
// consumed when it raises"), also where the op is composed of several primitives.
TEST(Errors, DonatedArgumentSurvivesFailures) {
  std::vector<Value> vi;
  for (int k = 0; k < 6; ++k) vi.push_back(I(nx::int32, k));
  auto donated = [&] { return nx::donate(tensor(nx::int32, {2, 3}, vi)); };
  auto check = [&](const char* what, const std::function<void(const Tensor&)>& fn) {
    SCOPED_TRACE(what);
    Tensor x = donated();
    EXPECT_THROW(fn(x), std::invalid_argument);
    expect_intact(x, nx::int32, {2, 3}, vi);
  };
  check("add, shape mismatch", [](const Tensor& x) { nx::add(x, nx::zeros(nx::int32, {4})); });
  check("sum, bad axis", [](const Tensor& x) { nx::sum(x, {5}); });
  check("prod, repeated axis", [](const Tensor& x) { nx::prod(x, {0, 0}); });
  check("logical_and, shape mismatch",
        [](const Tensor& x) { nx::logical_and(x, nx::zeros(nx::int32, {4})); });
  {
    // A 1-d left operand is reshaped to [1, k] before the shapes are compared.
    SCOPED_TRACE("matmul, misaligned");
    Tensor v = nx::donate(tensor(nx::int32, {6}, vi));
    EXPECT_THROW(nx::matmul(v, nx::zeros(nx::int32, {4, 2})), std::invalid_argument);
    expect_intact(v, nx::int32, {6}, vi);
  }
  check("stack, shape mismatch", [](const Tensor& x) {
    nx::stack({x, nx::zeros(nx::int32, {3, 2})});
  });
}

// Reading a dead value names the reader, the value and its consumer by their C++ entry points
// (docs/semantics.md §3): "nx::to_array: float64 [3] was donated to nx::add".
TEST(Errors, DonatedValueNamesItsConsumer) {
  Tensor x = nx::donate(tensor(nx::float64, {3}, {1, 2, 3}));
  Tensor y = nx::add(x, tensor(nx::float64, {3}, {1, 1, 1}));
  EXPECT_EQ(nx::to_vector<double>(y), (std::vector<double>{2, 3, 4}));
  EXPECT_EQ(error_of([&] { nx::to_array(x); }), "nx::to_array: float64 [3] was donated to nx::add");
  EXPECT_EQ(x.describe(), "float64 [3]") << "dtype and shape stay readable";
  Tensor z = nx::donate(tensor(nx::int32, {2}, {1, 2}));
  (void)nx::sum(z);
  EXPECT_EQ(error_of([&] { nx::to_vector<int32_t>(z); }),
            "nx::to_vector: int32 [2] was donated to nx::sum");
}

}  // namespace
