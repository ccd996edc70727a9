// rune::optim (trace/optim.h): each optimizer's update against its formula written out here in
// plain double arithmetic (the formulas of torch.optim.SGD, optax.adam / torch.optim.Adam and
// optax.adamw, docs/training.md), the schedules against optax's definitions, clipping by the
// global norm; eager and compiled give the same bits, a compiled step with a new count does not
// retrace, and a step whose params and state are consumed holds one generation of them. On CPU,
// CPU:1 and the fake CUDA device.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "runtime/allocator.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
namespace optim = rune::optim;
using Params = std::pair<Tensor, Tensor>;  // a [2, 2] matrix and a [2] bias

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

std::vector<double> values(const Tensor& t) { return nx::to_vector<double>(t); }

// Within `ulps` units in the last place (the library's pow and cos are not the C library's).
::testing::AssertionResult near_ulps(double want, double got, int64_t ulps = 4) {
  int64_t a = std::bit_cast<int64_t>(want), b = std::bit_cast<int64_t>(got);
  if (a < 0) a = INT64_MIN - a;
  if (b < 0) b = INT64_MIN - b;
  if (std::llabs(a - b) <= ulps) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "want " << want << " got " << got << " (" << std::llabs(a - b) << " ulps)";
}

// The reference: flat double vectors, one per leaf.
using Flat = std::vector<std::vector<double>>;
const Flat kP0 = {{0.5, -1.25, 2.0, 0.75}, {0.1, -0.2}};
// A gradient that changes with the step and the parameters (the loss of the tests below).
Flat ref_grad(const Flat& p) {
  Flat g = p;
  for (auto& leaf : g)
    for (double& v : leaf) v = 2 * v - 0.5;
  return g;
}
// d/dp sum(p^2 - 0.5 p) = 2p - 0.5, the gradient above.
Tensor loss(const Params& p) {
  auto term = [](const Tensor& t) { return nx::sum(t * t - t * 0.5); };
  return term(p.first) + term(p.second);
}

class Optim : public ::testing::TestWithParam<std::string> {
 protected:
  Tensor on(const Tensor& h) const { return GetParam() == "CPU" ? h : nx::place(h, GetParam()); }
  Params params() const {
    return {on(nx::create(nx::float64, {2, 2}, kP0[0])), on(nx::create(nx::float64, {2}, kP0[1]))};
  }
  static void expect_params(const Flat& want, const Params& got, const std::string& what) {
    auto a = values(got.first), b = values(got.second);
    for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(near_ulps(want[0][i], a[i])) << what << " w" << i;
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(near_ulps(want[1][i], b[i])) << what << " b" << i;
  }
};

TEST_P(Optim, SgdMomentumNesterovWeightDecay) {
  for (bool nesterov : {false, true}) {
    optim::Sgd opt{optim::constant(0.1), 0.9, nesterov, 0.01};
    Params p = params();
    auto s = opt.init(p);
    Flat rp = kP0, rb = {{0, 0, 0, 0}, {0, 0}};
    for (int step = 0; step < 3; ++step) {
      Flat g = ref_grad(rp);
      for (size_t l = 0; l < 2; ++l)
        for (size_t i = 0; i < rp[l].size(); ++i) {
          double gi = g[l][i] + rp[l][i] * 0.01;
          rb[l][i] = rb[l][i] * 0.9 + gi;
          double u = nesterov ? gi + rb[l][i] * 0.9 : rb[l][i];
          rp[l][i] = rp[l][i] - 0.1 * u;
        }
      std::tie(p, s) = opt.update(p, rune::grad(loss, p), s);
    }
    expect_params(rp, p, nesterov ? "nesterov" : "momentum");
    EXPECT_EQ(nx::item<int64_t>(s.count), 3);
  }
}

// Adam (coupled L2) and AdamW (decoupled, masked to the matrix) three steps against the formulas.
TEST_P(Optim, AdamAndAdamW) {
  for (bool decoupled : {false, true}) {
    double b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, lr = 1e-2;
    optim::Adam opt{
        optim::constant(lr), b1, b2, eps, wd, decoupled, [](const std::string&, const Tensor& t) {
          return t.shape().size() >= 2;
        }};
    Params p = params();
    auto s = opt.init(p);
    Flat rp = kP0, m = {{0, 0, 0, 0}, {0, 0}}, v = m;
    for (int step = 0; step < 3; ++step) {
      Flat g = ref_grad(rp);
      double t = step + 1;
      double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
      for (size_t l = 0; l < 2; ++l)
        for (size_t i = 0; i < rp[l].size(); ++i) {
          bool decay = l == 0;  // the mask: rank >= 2
          double gi = g[l][i];
          if (decay && !decoupled) gi = gi + rp[l][i] * wd;
          m[l][i] = m[l][i] * b1 + gi * (1 - b1);
          v[l][i] = v[l][i] * b2 + gi * gi * (1 - b2);
          double u = (m[l][i] / c1) / (std::sqrt(v[l][i] / c2) + eps);
          if (decay && decoupled) u = u + rp[l][i] * wd;
          rp[l][i] = rp[l][i] - lr * u;
        }
      std::tie(p, s) = opt.update(p, rune::grad(loss, p), s);
    }
    expect_params(rp, p, decoupled ? "adamw" : "adam");
    EXPECT_EQ(nx::item<int64_t>(s.count), 3);
  }
}

// A plain number is a constant learning rate (optax.adamw(1e-3), torch.optim.SGD(lr=0.1)): the
// optimizers it makes update to the same bits as with optim::constant, and the optax-named
// makers sgd / adam / adamw take it.
TEST_P(Optim, ANumberIsAConstantLearningRate) {
  auto run = [&](const auto& opt) {
    Params p = params();
    auto s = opt.init(p);
    for (int step = 0; step < 3; ++step) std::tie(p, s) = opt.update(p, rune::grad(loss, p), s);
    return nx::to_vector<double>(
        nx::cast(nx::concatenate({nx::reshape(p.first, {-1}), p.second}, 0), nx::float64));
  };
  EXPECT_EQ(run(optim::adamw(1e-3)), run(optim::adamw(optim::constant(1e-3))));
  EXPECT_EQ(run(optim::adam(1e-3)), run(optim::Adam{optim::constant(1e-3)}));
  EXPECT_EQ(run(optim::sgd(0.1, 0.9)), run(optim::Sgd{optim::constant(0.1), 0.9}));
  EXPECT_EQ(run(optim::Sgd{0.1}), run(optim::Sgd{optim::constant(0.1)}));
  EXPECT_NE(run(optim::sgd(0.1)), run(optim::sgd(0.2)));
  // A callable of the step count is a schedule too.
  optim::Schedule halves = [](const Tensor& count) {
    return nx::scalar_like(nx::cast(count, nx::float64), 0.5);
  };
  EXPECT_EQ(run(optim::sgd(halves)), run(optim::sgd(0.5)));
}

TEST_P(Optim, Schedules) {
  auto at = [&](const optim::Schedule& s, int64_t step) {
    return nx::item<double>(s(on(nx::scalar(nx::int64, static_cast<double>(step)))));
  };
  auto warm = optim::linear(0, 1e-3, 100);
  EXPECT_EQ(at(warm, 0), 0.0);
  EXPECT_TRUE(near_ulps(50.0 / 100 * 1e-3, at(warm, 50)));
  EXPECT_EQ(at(warm, 100), 1e-3);
  EXPECT_EQ(at(warm, 250), 1e-3);
  auto cosine = optim::cosine_decay(2.0, 10, 0.1);
  for (int64_t t : {0, 3, 10, 12}) {
    double tt = std::min<double>(static_cast<double>(t), 10);
    double want = ((std::cos(tt * (std::numbers::pi / 10)) + 1) * 0.5 * 0.9 + 0.1) * 2.0;
    EXPECT_TRUE(near_ulps(want, at(cosine, t))) << "cosine step " << t;
  }
  // optax.warmup_cosine_decay_schedule(0, 1e-3, 100, 1000, 1e-5).
  // optax.warmup_cosine_decay_schedule(0.0, 1.0, 0, 10, 0.1): no warmup, the cosine from step 0
  // (optax 0.2.8's values at steps 0, 1, 5, 10 and 11); warmup_steps = 0 raised.
  auto no_warmup = optim::warmup_cosine_decay(0, 1.0, 0, 10, 0.1);
  EXPECT_EQ(at(no_warmup, 0), 1.0);
  EXPECT_TRUE(near_ulps(0.9779754323328191, at(no_warmup, 1)));
  EXPECT_TRUE(near_ulps(0.55, at(no_warmup, 5)));
  EXPECT_TRUE(near_ulps(0.1, at(no_warmup, 10)));
  EXPECT_TRUE(near_ulps(0.1, at(no_warmup, 11)));
  auto wc = optim::warmup_cosine_decay(0, 1e-3, 100, 1000, 1e-5);
  EXPECT_TRUE(near_ulps(0.5e-3, at(wc, 50)));
  EXPECT_EQ(at(wc, 100), 1e-3);
  double t = 450 - 100, T = 900, alpha = 1e-5 / 1e-3;
  double want = ((std::cos(t * (std::numbers::pi / T)) + 1) * 0.5 * (1 - alpha) + alpha) * 1e-3;
  EXPECT_TRUE(near_ulps(want, at(wc, 450)));
  EXPECT_TRUE(near_ulps(1e-5, at(wc, 1000)));
  EXPECT_TRUE(near_ulps(1e-5, at(wc, 5000)));
}

TEST_P(Optim, ClipByGlobalNorm) {
  Params g{on(nx::create(nx::float64, {2, 2}, {3, 0, 0, 0})),
           on(nx::create(nx::float64, {2}, {0, 4}))};  // norm 5
  EXPECT_EQ(nx::item<double>(optim::global_norm(g)), 5.0);
  Params c = optim::clip_by_global_norm(g, 1.0);
  // optax (float64): [0.6000000000000001, 0, 0, 0] and [0, 0.8], i.e. 3 * (1 / 5), 4 * (1 / 5).
  EXPECT_EQ(values(c.first), (std::vector<double>{3 * (1.0 / 5), 0, 0, 0}));
  EXPECT_EQ(values(c.second), (std::vector<double>{0, 4 * (1.0 / 5)}));
  Params same = optim::clip_by_global_norm(g, 10.0);
  EXPECT_EQ(values(same.first), values(g.first));
  EXPECT_EQ(values(same.second), values(g.second));
}

std::vector<uint32_t> f32_bits(const Tensor& t) {
  std::vector<uint32_t> r;
  for (float v : nx::to_vector<float>(t)) r.push_back(std::bit_cast<uint32_t>(v));
  return r;
}

// A norm exactly at max_norm is clipped, as optax's (`g_norm < max_norm` keeps the tree):
// optax.clip_by_global_norm(5.0) of float32 [0x403fffd9, 0x4080000e], whose global norm is
// exactly 5, gives [0x403fffda, 0x4080000e] ((g / 5) * 5 is 1 ulp off g in its first element).
TEST_P(Optim, ClipAtExactlyMaxNormScalesAsOptax) {
  Tensor g = on(nx::create(nx::float32, {2},
                           {std::bit_cast<float>(0x403fffd9u), std::bit_cast<float>(0x4080000eu)}));
  ASSERT_EQ(nx::item<float>(optim::global_norm(std::vector<Tensor>{g})), 5.0f);
  const std::vector<uint32_t> optax{0x403fffda, 0x4080000e};
  EXPECT_EQ(f32_bits(optim::clip_by_global_norm(std::vector<Tensor>{g}, 5.0)[0]), optax);
  auto clip = rune::jit(
      [](const Tensor& t) { return optim::clip_by_global_norm(std::vector<Tensor>{t}, 5.0)[0]; });
  EXPECT_EQ(f32_bits(clip(g)), optax);
}

// optax returns an empty tree for an empty tree (and optax.global_norm of it is 0).
TEST_P(Optim, ClipOfAnEmptyTreeIsEmpty) {
  EXPECT_TRUE(optim::clip_by_global_norm(std::vector<Tensor>{}, 1.0).empty());
  using Tree = std::vector<std::pair<Tensor, Tensor>>;
  EXPECT_TRUE(optim::clip_by_global_norm(Tree{}, 1.0).empty());
  Tensor n = optim::global_norm(std::vector<Tensor>{});
  EXPECT_EQ(n.dtype(), nx::float32);
  EXPECT_EQ(nx::item<float>(n), 0.0f);
}

// One compiled step (gradient, clip, AdamW with a warmup-cosine schedule), params and state
// consumed: the eager loop's bits and one trace for every step (the memory a consumed step holds
// is ConsumedStepAllocatesNoSecondGeneration's).
TEST_P(Optim, CompiledStepMatchesEager) {
  auto opt = optim::adamw(optim::warmup_cosine_decay(0, 1e-2, 2, 10), 0.9, 0.95, 1e-8, 0.1);
  using State = optim::AdamState<Params>;
  auto update = [&](const Params& p, const State& s) {
    Params g = optim::clip_by_global_norm(rune::grad(loss, p), 1.0);
    return opt.update(p, g, s);
  };
  auto step = rune::jit(rune::Signature().consume(0).consume(1),
                        std::function<std::pair<Params, State>(Params, State)>(update));
  Params pe = params(), pj = params();
  State se = opt.init(pe), sj = opt.init(pj);
  for (int i = 0; i < 6; ++i) {
    std::tie(pe, se) = update(pe, se);
    std::tie(pj, sj) = step(pj, sj);
  }
  EXPECT_EQ(step.traces(), 1u);
  for (auto [a, b] : {std::pair{pe.first, pj.first},
                      {pe.second, pj.second},
                      {se.mu.first, sj.mu.first},
                      {se.nu.second, sj.nu.second}}) {
    auto x = values(a), y = values(b);
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(std::bit_cast<uint64_t>(x[i]), std::bit_cast<uint64_t>(y[i])) << i;
  }
  EXPECT_EQ(nx::item<int64_t>(sj.count), 6);
}

// A consumed step holds one generation: with 6 MiB of params and state, the allocator's peak
// during five steps stays below a second generation (measured: 2.1 MiB above the live one, the
// gradient; 6.3 MiB without consuming).
TEST_P(Optim, ConsumedStepAllocatesNoSecondGeneration) {
  auto opt = optim::adamw(optim::constant(1e-3));
  using State = optim::AdamState<Params>;
  auto update = [&](const Params& p, const State& s) {
    return opt.update(p, optim::clip_by_global_norm(rune::grad(loss, p), 1.0), s);
  };
  auto step = rune::jit(rune::Signature().consume(0).consume(1),
                        std::function<std::pair<Params, State>(Params, State)>(update));
  Params p{on(nx::full(nx::float64, {512, 512}, 0.5)), on(nx::full(nx::float64, {512}, 0.5))};
  State s = opt.init(p);
  std::tie(p, s) = step(p, s);  // compiles
  nx::wait(p.first);
  auto& alloc = runtime::device_allocator(p.first.device());
  size_t generation = 3 * (512 * 512 + 512) * sizeof(double);
  alloc.reset_peak();
  size_t before = alloc.stats().in_use;
  // Waiting each step: on CPU:1 a queued step holds its temporaries until it ran.
  for (int i = 0; i < 5; ++i) {
    std::tie(p, s) = step(p, s);
    nx::wait(p.first);
  }
  size_t extra = alloc.stats().peak - before;
  EXPECT_LT(extra, generation) << "peak above the live generation: " << extra << " bytes";
  EXPECT_EQ(nx::item<int64_t>(s.count), 6);
}

TEST(OptimErrors, NameTheApiAndTheLeaves) {
  optim::Sgd opt{optim::constant(0.1)};
  Params p{nx::zeros(nx::float64, {2, 2}), nx::zeros(nx::float64, {2})};
  auto s = opt.init(p);
  Params g{nx::zeros(nx::float64, {2, 2}), nx::zeros(nx::float32, {2})};
  EXPECT_EQ(rt::error_of([&] { opt.update(p, g, s); }),
            "rune::optim::Sgd::update: leaf 1 is float32 [2] but parameter 1 is float64 [2]");
  Params ints{nx::zeros(nx::int32, {2, 2}), nx::zeros(nx::float64, {2})};
  EXPECT_EQ(rt::error_of([&] { opt.init(ints); }),
            "rune::optim::Sgd::init: parameter int32 [2, 2] is not a float tensor");
  EXPECT_EQ(rt::error_of([&] { optim::warmup_cosine_decay(0, 1, 10, 10); }),
            "rune::optim::warmup_cosine_decay: decay_steps (10) must exceed warmup_steps (10)");
  EXPECT_EQ(rt::error_of([&] { optim::clip_by_global_norm(p, 0.0); }),
            "rune::optim::clip_by_global_norm: max_norm must be positive, got 0.000000");
  EXPECT_EQ(rt::error_of([&] { optim::clip_by_global_norm(ints, 1.0); }),
            "rune::optim::clip_by_global_norm: leaf int32 [2, 2] is not a float tensor");
  EXPECT_EQ(rt::error_of([&] { optim::global_norm(ints); }),
            "rune::optim::global_norm: leaf int32 [2, 2] is not a float tensor");
  EXPECT_EQ(rt::error_of([&] { optim::warmup_cosine_decay(0, 1, -1, 10); }),
            "rune::optim::warmup_cosine_decay: warmup_steps must be nonnegative, got -1");
}

INSTANTIATE_TEST_SUITE_P(Devices, Optim, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
