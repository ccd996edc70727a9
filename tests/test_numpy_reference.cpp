// Differential test against numpy: every value case of tests/data/numpy_reference.txt
// (tools/refgen/gen_reference.py: elementwise ops, weak scalars, reductions, softmax family and
// matmul over each dtype's edge values and empty shapes), eagerly and compiled with rune::jit, on
// the default device and on the asynchronous host device CPU:1. The fake CUDA device runs it as
// fake_cuda.test_numpy_reference (RUNE_DEFAULT_DEVICE=CUDA:0, tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <functional>

#include "reference_data.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
using ref::Case;

Tensor unary(const std::string& op, const Tensor& x) {
  static const std::map<std::string, std::function<Tensor(const Tensor&)>> ops = {
      {"exp", nx::exp},         {"log", nx::log},
      {"tanh", nx::tanh},       {"sin", nx::sin},
      {"cos", nx::cos},         {"sqrt", nx::sqrt},
      {"expm1", nx::expm1},     {"log1p", nx::log1p},
      {"asin", nx::asin},       {"acos", nx::acos},
      {"atan", nx::atan},       {"sinh", nx::sinh},
      {"cosh", nx::cosh},       {"abs", nx::abs},
      {"neg", nx::neg},         {"sign", nx::sign},
      {"floor", nx::floor},     {"ceil", nx::ceil},
      {"square", nx::square},   {"reciprocal", nx::reciprocal},
      {"sigmoid", nx::sigmoid}, {"relu", nx::relu},
      {"rsqrt", nx::rsqrt},     {"erfc", nx::erfc},
      {"isinf", nx::isinf},     {"isfinite", nx::isfinite}};
  auto it = ops.find(op);
  if (it == ops.end()) throw std::logic_error("no unary op " + op);
  return it->second(x);
}

Tensor binary(const std::string& op, const Tensor& a, const Tensor& b) {
  static const std::map<std::string, std::function<Tensor(const Tensor&, const Tensor&)>> ops = {
      {"add", nx::add},
      {"sub", nx::sub},
      {"mul", nx::mul},
      {"div", nx::div},
      {"mod", nx::mod},
      {"pow", [](const Tensor& a, const Tensor& b) { return nx::pow(a, b); }},
      {"atan2", nx::atan2},
      {"maximum", nx::maximum},
      {"minimum", nx::minimum},
      {"less", nx::less},
      {"less_equal", nx::less_equal},
      {"greater", nx::greater},
      {"greater_equal", nx::greater_equal},
      {"equal", nx::equal},
      {"not_equal", nx::not_equal},
      {"matmul", nx::matmul},
      {"dot", nx::dot}};
  auto it = ops.find(op);
  if (it == ops.end()) throw std::logic_error("no binary op " + op);
  return it->second(a, b);
}

// The case's op applied to xs (through the operators for the scalar cases).
Tensor run(const Case& c, const std::vector<Tensor>& xs) {
  const std::string& op = c.op;
  const Tensor& x = xs[0];
  if (xs.size() == 2) return binary(op, xs[0], xs[1]);
  if (op == "mul_s") return x * c.f("s");
  if (op == "add_s") return x + c.f("s");
  if (op == "sub_s") return x - c.f("s");
  if (op == "div_s") return x / c.f("s");
  if (op == "lt_s") return x < c.f("s");
  if (op == "gt_s") return x > c.f("s");
  if (op == "le_s") return x <= c.f("s");
  if (op == "ge_s") return x >= c.f("s");
  if (op == "add_i") return x + c.i("i");
  if (op == "sub_i") return x - c.i("i");
  if (op == "mul_i") return x * c.i("i");
  if (op == "lt_i") return x < c.i("i");
  if (op == "sum") return nx::sum(x, c.axes("axes"), c.i("keep"));
  if (op == "prod") return nx::prod(x, c.axes("axes"), c.i("keep"));
  if (op == "max") return nx::max(x, c.axes("axes"), c.i("keep"));
  if (op == "mean") return nx::mean(x, c.axes("axes"), c.i("keep"));
  if (op == "logsumexp") return nx::logsumexp(x, c.axes("axes"), c.i("keep"));
  if (op == "softmax") return nx::softmax(x, static_cast<int>(c.i("axis")));
  if (op == "log_softmax") return nx::log_softmax(x, static_cast<int>(c.i("axis")));
  if (op == "stack2") return nx::stack({x, x}, static_cast<int>(c.i("axis")));
  return unary(op, x);
}

enum class Mode { Eager, Compiled };

Tensor evaluate(const Case& c, const std::vector<Tensor>& xs, Mode m) {
  if (m == Mode::Eager) return run(c, xs);
  if (xs.size() == 1) return rune::jit([&c](const Tensor& a) { return run(c, {a}); })(xs[0]);
  return rune::jit([&c](const Tensor& a, const Tensor& b) { return run(c, {a, b}); })(xs[0], xs[1]);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = ref::load("numpy_reference.txt");
  return all;
}

void check_all(Mode m, const std::string& device) {
  ASSERT_GT(cases().size(), 200u);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name + (m == Mode::Eager ? " eager" : " compiled") +
                 (device.empty() ? "" : " on " + device));
    std::vector<Tensor> xs;
    for (const auto& t : c.ins)
      xs.push_back(device.empty() ? t.make() : nx::place(t.make(), device));
    if (c.kind == 'E') {
      std::string err = rt::error_of([&] { evaluate(c, xs, m); });
      EXPECT_EQ(err.rfind(c.message, 0), 0u) << "error: " << err;
      continue;
    }
    Tensor y;
    try {
      y = evaluate(c, xs, m);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw " << e.what();
      continue;
    }
    if (!device.empty()) {
      EXPECT_EQ(y.device().name(), device);
    }
    EXPECT_TRUE(ref::close(y, c.outs[0], c.ulps));
  }
}

TEST(NumpyReference, Eager) { check_all(Mode::Eager, ""); }
TEST(NumpyReference, Compiled) { check_all(Mode::Compiled, ""); }
TEST(NumpyReference, AsyncHostEager) {
  RUNE_SKIP_UNLESS_HOST_DEFAULT("places the inputs on CPU:1");
  check_all(Mode::Eager, "CPU:1");
}
TEST(NumpyReference, AsyncHostCompiled) {
  RUNE_SKIP_UNLESS_HOST_DEFAULT("places the inputs on CPU:1");
  check_all(Mode::Compiled, "CPU:1");
}

}  // namespace
