// stop_gradient, value_and_grad with has_aux, gradients with respect to chosen arguments
// (argnums) and the tree utilities (trace/tree_util.h): values by hand, eager and compiled bits,
// on CPU, CPU:1 and the fake CUDA device.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

class Transforms : public ::testing::TestWithParam<std::string> {
 protected:
  Tensor on(const Tensor& h) const { return GetParam() == "CPU" ? h : nx::place(h, GetParam()); }
  Tensor vec(std::vector<double> v) const {
    return on(nx::create(nx::float64, {static_cast<int64_t>(v.size())}, v));
  }
};

std::vector<double> values(const Tensor& t) { return nx::to_vector<double>(t); }
void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  auto x = values(a), y = values(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(x[i]), std::bit_cast<uint64_t>(y[i])) << what << " " << i;
}

TEST_P(Transforms, StopGradientIsAConstantToGrad) {
  Tensor x = vec({1.5, -2, 3});
  // d/dx sum(x * sg(x)) = sg(x), not 2x; d/dx sum(sg(x)^2) = 0.
  auto f = [](const Tensor& t) { return nx::sum(t * nx::stop_gradient(t)); };
  auto g = rune::grad(f, x);
  EXPECT_EQ(values(g), (std::vector<double>{1.5, -2, 3}));
  auto h = rune::grad([](const Tensor& t) { return nx::sum(nx::square(nx::stop_gradient(t))); }, x);
  EXPECT_EQ(values(h), (std::vector<double>{0, 0, 0}));
  auto gj = rune::jit([&](const Tensor& t) { return rune::grad(f, t); })(x);
  expect_same_bits(g, gj, "compiled grad through stop_gradient");
  // The value itself passes through, eagerly and compiled, for every dtype.
  EXPECT_EQ(values(nx::stop_gradient(x)), values(x));
  Tensor i = on(nx::create(nx::int32, {2}, {7, -8}));
  EXPECT_EQ(nx::to_vector<int32_t>(nx::stop_gradient(i)), (std::vector<int32_t>{7, -8}));
  auto sj = rune::jit([](const Tensor& t) { return nx::stop_gradient(t) + 1; })(i);
  EXPECT_EQ(nx::to_vector<int32_t>(sj), (std::vector<int32_t>{8, -7}));
}

// The inner gradient keeps its stop when it is differentiated again: d/dx sum(x^2 sg(x)) =
// 2 x sg(x), whose derivative is 2 sg(x) (JAX: jax.grad of that gives [2, 6] at [1, 3]; the
// stop lost in the replay of the inner gradient gave 4x = [4, 12]).
TEST_P(Transforms, SecondDerivativeThroughStopGradient) {
  Tensor x = vec({1, 3});
  auto f = [](const Tensor& t) { return nx::sum(t * t * nx::stop_gradient(t)); };
  auto df = [&](const Tensor& t) { return nx::sum(rune::grad(f, t)); };
  EXPECT_EQ(values(rune::grad(f, x)), (std::vector<double>{2, 18}));  // jax.grad: [2, 18]
  const std::vector<double> jax_second{2, 6};
  EXPECT_EQ(values(rune::grad(df, x)), jax_second);
  EXPECT_EQ(values(rune::jit([&](const Tensor& t) { return rune::grad(df, t); })(x)), jax_second);
  // Forward over reverse (jvp of the gradient) and the stop in the other factor's place.
  auto g = [](const Tensor& t) { return nx::sum(t * nx::stop_gradient(t) * t); };
  EXPECT_EQ(values(rune::grad([&](const Tensor& t) { return nx::sum(rune::grad(g, t)); }, x)),
            jax_second);
  auto [gx, tangent] =
      rune::jvp<Tensor>([&](const Tensor& t) { return rune::grad(f, t); }, x, vec({1, 1}));
  EXPECT_EQ(values(tangent), jax_second);
}

TEST_P(Transforms, ValueAndGradWithAux) {
  Tensor w = vec({1, 2}), x = vec({3, -1});
  using Aux = std::pair<Tensor, Tensor>;
  // loss = sum((w * x)^2); aux = (w * x, the argmax of w * x).
  auto f = [&](const Tensor& p) {
    Tensor y = p * x;
    return std::make_pair(nx::sum(y * y), Aux{y, nx::argmax(y)});
  };
  auto [va, g] = rune::value_and_grad(f, w, rune::has_aux);
  EXPECT_EQ(nx::item<double>(va.first), 13.0);  // 9 + 4
  EXPECT_EQ(values(va.second.first), (std::vector<double>{3, -2}));
  EXPECT_EQ(nx::item<int64_t>(va.second.second), 0);
  EXPECT_EQ(values(g), (std::vector<double>{18, 4}));  // 2 w x^2
  auto [g2, aux2] = rune::grad(f, w, rune::has_aux);
  EXPECT_EQ(values(g2), values(g));
  EXPECT_EQ(values(aux2.first), values(va.second.first));
  auto step = rune::jit([&](const Tensor& p) { return rune::value_and_grad(f, p, rune::has_aux); });
  auto [vaj, gj] = step(w);
  expect_same_bits(va.first, vaj.first, "compiled value");
  expect_same_bits(va.second.first, vaj.second.first, "compiled aux");
  expect_same_bits(g, gj, "compiled gradient");
  EXPECT_EQ(nx::item<int64_t>(vaj.second.second), 0);
}

TEST_P(Transforms, GradWithRespectToChosenArguments) {
  Tensor a = vec({2, 3}), b = vec({5, 7});
  auto f = [](const Tensor& x, const Tensor& y, int power) {
    return nx::sum(nx::pow(x, static_cast<double>(power)) * y);
  };
  auto db = rune::grad(f, rune::argnums<1>)(a, b, 2);  // a^2
  EXPECT_EQ(values(db), (std::vector<double>{4, 9}));
  auto da = rune::grad(f, rune::argnums<0>)(a, b, 2);  // 2 a y
  EXPECT_EQ(values(da), (std::vector<double>{20, 42}));
  auto [v, both] = rune::value_and_grad(f, rune::argnums<0, 1>)(a, b, 2);
  EXPECT_EQ(nx::item<double>(v), 83.0);  // 4*5 + 9*7
  EXPECT_EQ(values(std::get<0>(both)), values(da));
  EXPECT_EQ(values(std::get<1>(both)), values(db));
  auto [vr, rev] = rune::value_and_grad(f, rune::argnums<1, 0>)(a, b, 2);
  EXPECT_EQ(values(std::get<0>(rev)), values(db));
  EXPECT_EQ(values(std::get<1>(rev)), values(da));
  auto jitted = rune::jit(
      [&](const Tensor& x, const Tensor& y) { return rune::grad(f, rune::argnums<0>)(x, y, 2); });
  expect_same_bits(da, jitted(a, b), "compiled argnums<0>");
}

// Without argnums, grad(f) and value_and_grad(f) of a function of several arguments
// differentiate the first, as jax.grad (`rune::grad(loss)(w, x, y)`); the rest are constants.
TEST_P(Transforms, GradOfSeveralArgumentsDifferentiatesTheFirst) {
  Tensor a = vec({2, 3}), b = vec({5, 7});
  auto f = [](const Tensor& x, const Tensor& y, int power) {
    return nx::sum(nx::pow(x, static_cast<double>(power)) * y);
  };
  EXPECT_EQ(values(rune::grad(f)(a, b, 2)), (std::vector<double>{20, 42}));  // 2 a y
  auto [v, g] = rune::value_and_grad(f)(a, b, 2);
  EXPECT_EQ(nx::item<double>(v), 83.0);
  EXPECT_EQ(values(g), (std::vector<double>{20, 42}));
  auto one = [](const Tensor& x) { return nx::sum(x * x); };
  EXPECT_EQ(values(rune::grad(one)(a)), (std::vector<double>{4, 6}));
  EXPECT_EQ(nx::item<double>(rune::value_and_grad(one)(a).first), 13.0);
  auto jitted = rune::jit([&](const Tensor& x, const Tensor& y) { return rune::grad(f)(x, y, 2); });
  expect_same_bits(g, jitted(a, b), "compiled grad(f)(x, y, 2)");
}

TEST_P(Transforms, TreeUtilities) {
  using Model = std::pair<std::vector<Tensor>, std::optional<Tensor>>;
  Model m{{vec({1, 2}), vec({3})}, vec({4, 5, 6})};
  auto leaves = rune::tree_leaves(m);
  ASSERT_EQ(leaves.size(), 3u);
  EXPECT_EQ(values(leaves[1]), (std::vector<double>{3}));
  auto [flat, def] = rune::tree_flatten(m);
  EXPECT_EQ(def.num_leaves, 3u);
  Model back = rune::tree_unflatten<Model>(def, flat);
  EXPECT_EQ(values(back.second.value()), (std::vector<double>{4, 5, 6}));
  // Two trees, leaf by leaf; eager and compiled agree.
  auto axpy = [](const Model& x, const Model& y) {
    return rune::tree_map([](const Tensor& p, const Tensor& q) { return p * 2.0 + q; }, x, y);
  };
  Model s = axpy(m, m);
  EXPECT_EQ(values(s.first[0]), (std::vector<double>{3, 6}));
  EXPECT_EQ(values(s.second.value()), (std::vector<double>{12, 15, 18}));
  Model sj = rune::jit(axpy)(m, m);
  for (size_t i = 0; i < 2; ++i) expect_same_bits(s.first[i], sj.first[i], "compiled tree_map");
  expect_same_bits(*s.second, *sj.second, "compiled tree_map");
  // Paths, as rune::jit's messages name leaves.
  std::vector<std::string> paths;
  rune::tree_map_with_path(
      [&](const std::string& path, const Tensor& t) {
        paths.push_back(path);
        return t;
      },
      m);
  EXPECT_EQ(paths, (std::vector<std::string>{"0.0", "0.1", "1"}));
  // A different structure raises, naming where it differs, and builds nothing.
  Model other{{vec({1, 2})}, std::nullopt};
  EXPECT_EQ(rt::error_of([&] { axpy(m, other); }),
            "rune::tree_map: tree 1 has a different structure than tree 0 (1 leaves against 3, "
            "first difference at '0')");
  EXPECT_EQ(rt::error_of([&] { rune::tree_unflatten<Model>(def, {vec({1})}); }),
            "rune::tree_unflatten: 1 leaves for a structure of 3");
}

TEST(TransformErrors, HasAuxNeedsAFloatScalarFirst) {
  Tensor w = nx::create(nx::float64, {2}, {1, 2});
  auto f = [](const Tensor& p) { return std::make_pair(p * 2.0, p); };
  EXPECT_EQ(rt::error_of([&] { rune::value_and_grad(f, w, rune::has_aux); }),
            "rune::value_and_grad: f must return a float scalar, got float64 [2]");
  EXPECT_EQ(nx::to_vector<double>(w), (std::vector<double>{1, 2}));
}

INSTANTIATE_TEST_SUITE_P(Devices, Transforms, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
