// Differential test against JAX: first derivatives (grad of sum(f(x) * w)), forward mode (jvp
// with a tangent t) and second derivatives (grad of sum(grad(x) * v)) of every case of
// tests/data/jax_reference.txt (tools/refgen/gen_reference.py, float64 with x64 JAX), at kinks,
// zeros, infinities and NaN, eagerly and compiled with rune::jit, on the default device and on
// CPU:1. The fake CUDA device runs it as fake_cuda.test_jax_reference.
#include <gtest/gtest.h>

#include <functional>

#include "../reference_data.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
using ref::Case;

// The function of case c, as rune code.
Tensor apply(const Case& c, const Tensor& x) {
  const std::string& f = c.op;
  if (f == "exp") return nx::exp(x);
  if (f == "log") return nx::log(x);
  if (f == "tanh") return nx::tanh(x);
  if (f == "sigmoid") return nx::sigmoid(x);
  if (f == "sqrt") return nx::sqrt(x);
  if (f == "rsqrt") return nx::rsqrt(x);
  if (f == "erfc") return nx::erfc(x);
  if (f == "abs") return nx::abs(x);
  if (f == "sign") return nx::sign(x);
  if (f == "sign_x") return nx::sign(x) * x;
  if (f == "relu") return nx::relu(x);
  if (f == "floor") return nx::floor(x);
  if (f == "maximum_c") return nx::maximum(x, nx::scalar_like(x, c.f("c")));
  if (f == "minimum_c") return nx::minimum(x, nx::scalar_like(x, c.f("c")));
  if (f == "clip") return nx::clip(x, c.f("lo"), c.f("hi"));
  if (f == "asin") return nx::asin(x);
  if (f == "acos") return nx::acos(x);
  if (f == "pow_xc") return nx::pow(x, c.f("c"));
  if (f == "pow_cx") return nx::pow(nx::scalar_like(x, c.f("c")), x);
  if (f == "softmax") return nx::softmax(x, static_cast<int>(c.i("axis")));
  if (f == "log_softmax") return nx::log_softmax(x, static_cast<int>(c.i("axis")));
  if (f == "logsumexp") return nx::logsumexp(x, c.axes("axes"));
  if (f == "mean") return nx::mean(x, c.axes("axes"));
  if (f == "sum") return nx::sum(x, c.axes("axes"));
  if (f == "prod") return nx::prod(x, c.axes("axes"));
  throw std::logic_error("no function " + f);
}

struct Derivs {
  Tensor grad, jvp, hvp;
};

Derivs derivatives(const Case& c, const Tensor& x, const Tensor& w, const Tensor& t,
                   const Tensor& v) {
  auto f = [&c](const Tensor& z) { return apply(c, z); };
  auto loss = [&](const Tensor& z) { return nx::sum(f(z) * w); };
  auto second = [&](const Tensor& z) { return nx::sum(rune::grad(loss, z) * v); };
  return {rune::grad(loss, x), rune::jvp<Tensor>(f, x, t).second, rune::grad(second, x)};
}

Derivs compiled(const Case& c, const Tensor& x, const Tensor& w, const Tensor& t, const Tensor& v) {
  auto d = [&c](const Tensor& x, const Tensor& w, const Tensor& t, const Tensor& v, int which) {
    Derivs r = derivatives(c, x, w, t, v);
    return which == 0 ? r.grad : which == 1 ? r.jvp : r.hvp;
  };
  // One program per derivative (an int argument is static: part of the key).
  auto j = rune::jit(d);
  return {j(x, w, t, v, 0), j(x, w, t, v, 1), j(x, w, t, v, 2)};
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = ref::load("jax_reference.txt");
  return all;
}

void check_all(bool jit, const std::string& device) {
  ASSERT_GT(cases().size(), 40u);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name + (jit ? " compiled" : " eager") + (device.empty() ? "" : " on " + device));
    std::vector<Tensor> in;
    for (const auto& r : c.ins)
      in.push_back(device.empty() ? r.make() : nx::place(r.make(), device));
    Derivs d;
    try {
      d = jit ? compiled(c, in[0], in[1], in[2], in[3])
              : derivatives(c, in[0], in[1], in[2], in[3]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw " << e.what();
      continue;
    }
    // Zeros compare by value: the sign of a zero derivative is not part of the contract.
    EXPECT_TRUE(ref::near(d.grad, c.outs[0], c.rel, c.abs)) << "grad";
    EXPECT_TRUE(ref::near(d.jvp, c.outs[1], c.rel, c.abs)) << "jvp";
    EXPECT_TRUE(ref::near(d.hvp, c.outs[2], c.rel, c.abs)) << "second derivative";
  }
}

TEST(JaxReference, Eager) { check_all(false, ""); }
TEST(JaxReference, Compiled) { check_all(true, ""); }
TEST(JaxReference, AsyncHost) {
  RUNE_SKIP_UNLESS_HOST_DEFAULT("places the inputs on CPU:1");
  check_all(false, "CPU:1");
  check_all(true, "CPU:1");
}

}  // namespace
