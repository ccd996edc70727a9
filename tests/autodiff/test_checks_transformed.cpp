// nx::check under the transformations: a check keeps its forward meaning under rune::grad,
// value_and_grad, vjp, jvp and vmap, eagerly and inside rune::jit, on CPU, CPU:1 and the fake
// CUDA device. The case that matters: a training step (value_and_grad of a cross-entropy) with
// an out-of-range label raises the forward pass's error instead of training on a loss of 0.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

class ChecksTransformed : public ::testing::TestWithParam<std::string> {
 protected:
  Tensor on(const Tensor& h) const { return GetParam() == "CPU" ? h : nx::place(h, GetParam()); }
  // 4 examples of 3 classes.
  Tensor logits() const {
    return on(nx::create(nx::float32, {4, 3}, {0.5, -1, 2, 1, 0, -0.5, 0.25, 0.75, -2, 1.5, 1, 0}));
  }
  Tensor labels(std::vector<double> v) const { return on(nx::create(nx::int32, {4}, v)); }
};

Tensor mean_loss(const Tensor& z, const Tensor& y) { return nx::mean(nx::nn::cross_entropy(z, y)); }
// One example's loss: logits [3], label [].
Tensor example_loss(const Tensor& z, const Tensor& y) { return nx::nn::cross_entropy(z, y); }

// The error `fn` raises once its results are read (an asynchronous device raises at the wait).
template <class Fn>
std::string raised(Fn fn) {
  return rt::error_of([&] {
    for (const Tensor& t : fn()) nx::to_vector<double>(t);
  });
}

const char* kBatch = "nx::nn::cross_entropy: label 5 at [2] is outside [0, 3)";
// vmap's form: the first failing example (1 of labels {0, 7, 5, 1}) and the index in it.
const char* kExample =
    "nx::nn::cross_entropy: label 7 at [] is outside [0, 3) (rune::vmap: example 1 of 4 fails)";

TEST_P(ChecksTransformed, AutodiffKeepsTheForwardCheck) {
  Tensor z = logits(), bad = labels({0, 2, 5, 1});
  auto loss = [&](const Tensor& p) { return mean_loss(p, bad); };
  ASSERT_EQ(raised([&] { return std::vector<Tensor>{loss(z)}; }), kBatch);
  EXPECT_EQ(raised([&] { return std::vector<Tensor>{rune::grad(loss, z)}; }), kBatch);
  EXPECT_EQ(raised([&] {
              auto [v, g] = rune::value_and_grad(loss, z);
              return std::vector<Tensor>{v, g};
            }),
            kBatch);
  EXPECT_EQ(raised([&] {
              auto [v, g] = rune::vjp(loss, z, on(nx::scalar(nx::float32, 1.0)));
              return std::vector<Tensor>{v, g};
            }),
            kBatch);
  EXPECT_EQ(raised([&] {
              auto [v, t] = rune::jvp<Tensor>(loss, z, nx::ones_like(z));
              return std::vector<Tensor>{v, t};
            }),
            kBatch);
  auto step = rune::jit([&](const Tensor& p, const Tensor& y) {
    return rune::value_and_grad([&](const Tensor& q) { return mean_loss(q, y); }, p);
  });
  EXPECT_EQ(raised([&] {
              auto [v, g] = step(z, bad);
              return std::vector<Tensor>{v, g};
            }),
            kBatch);
  // The same compiled step with valid labels gives the values of the eager step.
  Tensor good = labels({0, 2, 1, 1});
  auto [v, g] = step(z, good);
  auto [ve, ge] = rune::value_and_grad([&](const Tensor& q) { return mean_loss(q, good); }, z);
  EXPECT_EQ(nx::to_vector<float>(v), nx::to_vector<float>(ve));
  EXPECT_EQ(nx::to_vector<float>(g), nx::to_vector<float>(ge));
}

TEST_P(ChecksTransformed, VmapNamesTheFirstFailingExample) {
  Tensor z = logits(), bad = labels({0, 7, 5, 1});
  auto per_example = rune::vmap(example_loss);
  EXPECT_EQ(raised([&] { return std::vector<Tensor>{per_example(z, bad)}; }), kExample);
  auto grads = rune::vmap(rune::grad(example_loss, rune::argnums<0>));
  EXPECT_EQ(raised([&] { return std::vector<Tensor>{grads(z, bad)}; }), kExample);
  auto compiled = rune::jit([&](const Tensor& p, const Tensor& y) { return grads(p, y); });
  EXPECT_EQ(raised([&] { return std::vector<Tensor>{compiled(z, bad)}; }), kExample);
  // grad of a vmapped loss keeps the batched check too.
  EXPECT_EQ(raised([&] {
              return std::vector<Tensor>{
                  rune::grad([&](const Tensor& p) { return nx::sum(per_example(p, bad)); }, z)};
            }),
            kExample);
  // Valid labels: each example's gradient is the one-example gradient, bit for bit, eager and
  // compiled.
  Tensor good = labels({0, 2, 1, 1});
  Tensor batched = grads(z, good), jitted = compiled(z, good);
  for (int64_t b = 0; b < 4; ++b) {
    Tensor one =
        rune::grad(example_loss, rune::argnums<0>)(nx::index(z, 0, b), nx::index(good, 0, b));
    EXPECT_EQ(nx::to_vector<float>(nx::index(batched, 0, b)), nx::to_vector<float>(one)) << b;
    EXPECT_EQ(nx::to_vector<float>(nx::index(jitted, 0, b)), nx::to_vector<float>(one)) << b;
  }
}

// A check inside a branch of cond / switch_ holds only where that branch is taken, as
// jax.lax.cond runs one branch: with a traced predicate (rune::jit, rune::vmap, rune::grad) every
// branch is traced and its result selected, and the branch not taken must not raise (before the
// fix jit and vmap raised the untaken branch's label error). The taken branch still raises.
TEST_P(ChecksTransformed, ABranchNotTakenRaisesNothing) {
  Tensor z = logits(), bad = labels({0, 2, 5, 1});
  Tensor yes = on(nx::scalar(nx::bool_, 1)), no = on(nx::scalar(nx::bool_, 0));
  auto f = [](const Tensor& p, const Tensor& y, const Tensor& pred) {
    return rune::cond(
        pred, [&](const Tensor& q) { return mean_loss(q, y); },
        [](const Tensor& q) { return nx::sum(q); }, p);
  };
  auto jf = rune::jit(f);
  auto gf = rune::jit([&](const Tensor& p, const Tensor& y, const Tensor& pred) {
    return rune::grad(f, rune::argnums<0>)(p, y, pred);
  });
  const double sum_z = nx::item<double>(nx::cast(nx::sum(z), nx::float64));
  EXPECT_EQ(nx::item<double>(nx::cast(jf(z, bad, no), nx::float64)), sum_z);
  EXPECT_EQ(raised([&] { return std::vector<Tensor>{jf(z, bad, yes)}; }), kBatch);
  EXPECT_EQ(nx::to_vector<float>(gf(z, bad, no)), std::vector<float>(12, 1.0f));
  EXPECT_EQ(raised([&] { return std::vector<Tensor>{gf(z, bad, yes)}; }), kBatch);
  // switch_: branch 1 reads the labels; indices 0 and 2 must not raise its error.
  auto sw = rune::jit([](const Tensor& p, const Tensor& y, const Tensor& i) -> Tensor {
    return rune::switch_<Tensor, Tensor>(i,
                                         {[](const Tensor& q) { return nx::sum(q); },
                                          [&](const Tensor& q) { return mean_loss(q, y); },
                                          [](const Tensor& q) { return nx::max(q); }},
                                         p);
  });
  auto at = [&](int64_t k) { return on(nx::scalar(nx::int32, static_cast<double>(k))); };
  EXPECT_EQ(nx::item<double>(nx::cast(sw(z, bad, at(0)), nx::float64)), sum_z);
  EXPECT_EQ(nx::item<double>(nx::cast(sw(z, bad, at(2)), nx::float64)), 2.0);
  EXPECT_EQ(raised([&] { return std::vector<Tensor>{sw(z, bad, at(1))}; }), kBatch);
  // vmap: per example, only the taken branch's check holds (example 1 takes the other branch).
  auto per_example = [](const Tensor& p, const Tensor& y, const Tensor& pred) {
    return rune::cond(
        pred, [&](const Tensor& q) { return example_loss(q, y); },
        [](const Tensor& q) { return nx::sum(q); }, p);
  };
  Tensor preds = on(nx::create(nx::bool_, {4}, {1, 0, 1, 1}));
  Tensor skipped = labels({0, 7, 2, 1}), taken = labels({0, 1, 7, 1});
  auto batched = rune::vmap(per_example);
  auto compiled = rune::jit([&](const Tensor& p, const Tensor& y, const Tensor& pred) -> Tensor {
    return batched(p, y, pred);
  });
  Tensor want = batched(z, skipped, preds);
  EXPECT_EQ(nx::to_vector<float>(compiled(z, skipped, preds)), nx::to_vector<float>(want));
  EXPECT_EQ(nx::to_vector<float>(nx::index(want, 0, 1)),
            nx::to_vector<float>(nx::sum(nx::index(z, 0, 1))));
  const std::string kTaken =
      "nx::nn::cross_entropy: label 7 at [] is outside [0, 3) (rune::vmap: example 2 of 4 fails)";
  EXPECT_EQ(raised([&] { return std::vector<Tensor>{batched(z, taken, preds)}; }), kTaken);
  EXPECT_EQ(raised([&] { return std::vector<Tensor>{compiled(z, taken, preds)}; }), kTaken);
}

INSTANTIATE_TEST_SUITE_P(Devices, ChecksTransformed, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
