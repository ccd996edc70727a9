// rune::vmap of loops and branches: scan, fori_loop, while_loop (a batched predicate too), cond,
// switch_ and nested loops stay loops (never unrolled) and give each example the bits of its own
// loop, eagerly and inside rune::jit, on CPU, CPU:1 and the fake CUDA device; vmap(grad(f)) of a
// scan (per-example gradients) is two loop steps under jit, whatever the length.
#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"
#include "trace/staged_program.h"

namespace {

using nx::Tensor;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

class VmapLoops : public ::testing::TestWithParam<std::string> {
 protected:
  Tensor on(const Tensor& h) const { return GetParam() == "CPU" ? h : nx::place(h, GetParam()); }
  // [rows, cols] of distinct values.
  Tensor grid(int64_t rows, int64_t cols, double scale) const {
    return on(nx::reshape(nx::cast(nx::arange(rows * cols), nx::float32), {rows, cols}) * scale -
              0.5);
  }
};

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> r;
  for (float v : nx::to_vector<float>(nx::cast(t, nx::float32)))
    r.push_back(std::bit_cast<uint32_t>(v));
  return r;
}

// Example b of the batched result equals f applied to example b alone, bit for bit.
template <class F>
void expect_per_example(const Tensor& batched, int64_t n, F one, const std::string& what) {
  for (int64_t b = 0; b < n; ++b)
    EXPECT_EQ(bits(nx::index(batched, 0, b)), bits(one(b))) << what << ", example " << b;
}

// A recurrence over the rows of xs: h = tanh(h * w + x_t); ys are h * 2.
std::pair<Tensor, Tensor> recur(const Tensor& w, const Tensor& h0, const Tensor& xs) {
  auto step = [&](const Tensor& h, const Tensor& x) {
    Tensor n = nx::tanh(h * w + x);
    return std::make_pair(n, n * 2.0);
  };
  return rune::scan(step, h0, xs);
}

TEST_P(VmapLoops, ScanIsOneLoopForTheBatch) {
  const int64_t T = 6, B = 3;
  Tensor w = on(nx::create(nx::float32, {2}, {0.5, -0.75}));
  Tensor xs = nx::reshape(grid(B * T, 2, 0.05), {B, T, 2});  // batched along axis 0
  Tensor h0 = on(nx::zeros(nx::float32, {2}));               // shared: the carry becomes batched
  auto f = [&](const Tensor& x) {
    auto [h, ys] = recur(w, h0, x);
    return std::make_pair(h, ys);
  };
  auto one = [&](int64_t b) { return f(nx::index(xs, 0, b)); };
  auto batched = rune::vmap(f)(xs);
  expect_per_example(
      batched.first, B, [&](int64_t b) { return one(b).first; }, "carry");
  expect_per_example(
      batched.second, B, [&](int64_t b) { return one(b).second; }, "ys");
  auto jitted = rune::jit([&](const Tensor& x) { return rune::vmap(f)(x); });
  size_t before = rune::loop_step_iterations();
  auto compiled = jitted(xs);
  nx::wait(compiled.first);
  EXPECT_EQ(rune::loop_step_iterations(), before + T) << "one loop step for the whole batch";
  EXPECT_EQ(bits(compiled.first), bits(batched.first));
  EXPECT_EQ(bits(compiled.second), bits(batched.second));
}

TEST_P(VmapLoops, PerExampleGradientsOfAScanAreTwoLoopSteps) {
  const int64_t T = 5, B = 3;
  Tensor w = on(nx::create(nx::float32, {2}, {0.5, -0.75}));
  Tensor xs = nx::reshape(grid(B * T, 2, 0.05), {B, T, 2});
  Tensor h0 = on(nx::create(nx::float32, {2}, {0.1, 0.2}));
  auto loss = [&](const Tensor& p, const Tensor& x) {
    auto [h, ys] = recur(p, h0, x);
    return nx::sum(h) + nx::mean(ys);
  };
  auto per_example = rune::vmap(rune::grad(loss, rune::argnums<0>), {rune::none, 0});
  Tensor g = per_example(w, xs);
  ASSERT_EQ(g.shape(), (nx::Shape{B, 2}));
  auto one = [&](int64_t b) { return rune::grad(loss, rune::argnums<0>)(w, nx::index(xs, 0, b)); };
  expect_per_example(g, B, one, "eager per-example gradient");
  auto jitted = rune::jit([&](const Tensor& p, const Tensor& x) { return per_example(p, x); });
  size_t before = rune::loop_step_iterations();
  Tensor gj = jitted(w, xs);
  nx::wait(gj);
  EXPECT_EQ(rune::loop_step_iterations(), before + 2 * T) << "forward and reverse loop steps";
  expect_per_example(gj, B, one, "compiled per-example gradient");
}

TEST_P(VmapLoops, WhileLoopRunsWhileAnyExampleRuns) {
  using C = std::pair<Tensor, Tensor>;
  // Example b doubles x until it passes the limit: a different trip count per example.
  auto cond = [](const C& c) {
    return nx::less(nx::sum(c.first), nx::scalar_like(nx::sum(c.first), 40));
  };
  auto body = [](const C& c) { return C{c.first * 2.0 + 1.0, c.second + 1}; };
  auto f = [&](const Tensor& x) {
    return rune::while_loop(cond, body, C{x, nx::zeros_like(nx::cast(nx::sum(x), nx::int32))});
  };
  Tensor xs = on(nx::create(nx::float32, {4, 2}, {0.5, 0.25, 3, 1, 50, 2, -1, 0.5}));
  auto batched = rune::vmap(f)(xs);
  auto one = [&](int64_t b) { return f(nx::index(xs, 0, b)); };
  expect_per_example(
      batched.first, 4, [&](int64_t b) { return one(b).first; }, "x");
  expect_per_example(
      batched.second, 4, [&](int64_t b) { return one(b).second; }, "trips");
  EXPECT_EQ(nx::to_vector<int32_t>(batched.second)[2], 0) << "example 2 starts past the limit";
  auto jitted = rune::jit([&](const Tensor& x) { return rune::vmap(f)(x); });
  size_t before = rune::loop_step_iterations();
  auto compiled = jitted(xs);
  nx::wait(compiled.first);
  int32_t most = 0;
  for (int32_t t : nx::to_vector<int32_t>(batched.second)) most = std::max(most, t);
  EXPECT_EQ(rune::loop_step_iterations(), before + static_cast<size_t>(most))
      << "one loop, as long as the longest example";
  EXPECT_EQ(bits(compiled.first), bits(batched.first));
  EXPECT_EQ(bits(compiled.second), bits(batched.second));
  // A shared predicate (it reads only the unbatched counter) keeps one trip count for all.
  auto counted = [&](const Tensor& x) {
    return rune::while_loop(
        [](const C& c) { return nx::less(c.second, nx::scalar_like(c.second, 3)); }, body,
        C{x, on(nx::zeros(nx::int32, {}))});
  };
  auto shared = rune::vmap(counted)(xs);
  expect_per_example(
      shared.first, 4, [&](int64_t b) { return counted(nx::index(xs, 0, b)).first; },
      "shared predicate");
}

TEST_P(VmapLoops, CondSwitchAndNestedLoopsMatchEachExample) {
  Tensor xs = grid(4, 3, 0.25);
  Tensor picks = on(nx::create(nx::bool_, {4}, {1, 0, 0, 1}));
  Tensor index = on(nx::create(nx::int32, {4}, {2, 0, 1, 2}));
  auto by_cond = [](const Tensor& p, const Tensor& x) {
    return rune::cond(
        p, [](const Tensor& v) { return nx::exp(v); }, [](const Tensor& v) { return v * 3.0; }, x);
  };
  auto by_switch = [](const Tensor& i, const Tensor& x) {
    std::vector<std::function<Tensor(const Tensor&)>> fs{
        [](const Tensor& v) { return v + 1.0; }, [](const Tensor& v) { return nx::tanh(v); },
        [](const Tensor& v) { return v * v; }};
    return rune::switch_<Tensor, Tensor>(i, fs, x);
  };
  // A scan whose body runs a fori_loop: both stay loops.
  auto nested = [](const Tensor& x) {
    auto step = [](const Tensor& c, const Tensor& r) {
      Tensor n = rune::fori_loop(
          0, 3, [&](const Tensor&, const Tensor& v) { return nx::sin(v) + r; }, c);
      return std::make_pair(n, n);
    };
    Tensor rows = nx::reshape(x, {3, 1}) * nx::ones_like(nx::reshape(x, {1, 3}));
    return rune::scan(step, x, rows).second;
  };
  Tensor c = rune::vmap(by_cond)(picks, xs), s = rune::vmap(by_switch)(index, xs);
  Tensor n = rune::vmap(nested)(xs);
  expect_per_example(
      c, 4, [&](int64_t b) { return by_cond(nx::index(picks, 0, b), nx::index(xs, 0, b)); },
      "cond");
  expect_per_example(
      s, 4, [&](int64_t b) { return by_switch(nx::index(index, 0, b), nx::index(xs, 0, b)); },
      "switch_");
  expect_per_example(
      n, 4, [&](int64_t b) { return nested(nx::index(xs, 0, b)); }, "nested");
  auto jitted = rune::jit([&](const Tensor& x) { return rune::vmap(nested)(x); });
  size_t before = rune::loop_step_iterations();
  Tensor nj = jitted(xs);
  nx::wait(nj);
  EXPECT_EQ(rune::loop_step_iterations(), before + 3 + 3 * 3) << "the scan and its inner loop";
  EXPECT_EQ(bits(nj), bits(n));
  // A batched switch_ index out of range raises the switch's error for the first bad example.
  Tensor bad = on(nx::create(nx::int32, {4}, {0, 1, 7, 9}));
  EXPECT_EQ(rt::error_of([&] { nx::to_vector<float>(rune::vmap(by_switch)(bad, xs)); }),
            "rune::switch_: index 7 is out of range for 3 branches (rune::vmap: example 2 of 4 "
            "fails)");
}

INSTANTIATE_TEST_SUITE_P(Devices, VmapLoops, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
