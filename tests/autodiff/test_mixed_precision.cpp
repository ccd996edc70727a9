// Mixed precision (docs/mixed-precision.md): 16-bit floats compute at float32 and round once per
// primitive, so matrix products and reductions accumulate at float32; float16 gradients that
// underflow come back with dynamic loss scaling (trace/loss_scale.h), and an overflowing step is
// skipped inside one compiled program. On CPU, CPU:1 and the fake CUDA device, eager and compiled.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "ir/dtype.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
namespace optim = rune::optim;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

class MixedPrecision : public ::testing::TestWithParam<std::string> {
 protected:
  Tensor on(const Tensor& h) const { return GetParam() == "CPU" ? h : nx::place(h, GetParam()); }
};

// A sum of 4096 float16 ones is 4096: accumulated at float32 (a float16 accumulator stops at
// 2048, where 2048 + 1 rounds back to 2048).
TEST_P(MixedPrecision, HalfReductionsAccumulateAtFloat32) {
  for (nx::DType t : {nx::float16, nx::bfloat16}) {
    Tensor ones = on(nx::ones(t, {4096}));
    EXPECT_EQ(nx::item<float>(nx::cast(nx::sum(ones), nx::float32)), 4096.0f) << ir::name(t);
    auto compiled = rune::jit([](const Tensor& x) { return nx::sum(x); })(ones);
    EXPECT_EQ(nx::item<float>(nx::cast(compiled, nx::float32)), 4096.0f) << ir::name(t);
  }
}

// A 16-bit matrix product is the float32 product of the exactly widened operands, rounded once.
TEST_P(MixedPrecision, HalfMatmulIsTheFloat32ProductRoundedOnce) {
  for (nx::DType t : {nx::float16, nx::bfloat16}) {
    Tensor a = on(nx::cast(nx::rand(nx::key(3), nx::float32, {8, 300}) - 0.5, t));
    Tensor b = on(nx::cast(nx::rand(nx::key(4), nx::float32, {300, 5}) - 0.5, t));
    Tensor want = nx::cast(nx::matmul(nx::cast(a, nx::float32), nx::cast(b, nx::float32)), t);
    Tensor got = nx::matmul(a, b);
    Tensor jit = rune::jit([](const Tensor& x, const Tensor& y) { return nx::matmul(x, y); })(a, b);
    auto w = nx::to_vector<float>(nx::cast(want, nx::float32));
    auto g = nx::to_vector<float>(nx::cast(got, nx::float32));
    auto j = nx::to_vector<float>(nx::cast(jit, nx::float32));
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(w[i]), std::bit_cast<uint32_t>(g[i])) << ir::name(t) << i;
      EXPECT_EQ(std::bit_cast<uint32_t>(w[i]), std::bit_cast<uint32_t>(j[i])) << ir::name(t) << i;
    }
  }
}

// float32 master weights, a float16 forward: d/dw mean(w16 * x) = x / n = 1.5e-8 underflows in
// float16's backward pass (below 2^-25) and comes back exactly with the loss scaled by 2^15.
TEST_P(MixedPrecision, LossScalingRecoversUnderflowingGradients) {
  const int64_t n = 65536;
  Tensor w = on(nx::full(nx::float32, {n}, 1.0));
  Tensor x = on(nx::full(nx::float16, {n}, 1e-3));
  auto loss = [&](const Tensor& master) { return nx::mean(nx::cast(master, nx::float16) * x); };
  Tensor plain = rune::grad(loss, w);
  EXPECT_EQ(nx::item<float>(nx::max(nx::abs(plain))), 0.0f) << "float16 gradients underflow";
  optim::DynamicLossScale ls;
  optim::LossScaleState s = ls.init(w.device());
  auto scaled_grad = [&](const Tensor& master, const optim::LossScaleState& st) {
    Tensor g = rune::grad([&](const Tensor& m) { return ls.scale(loss(m), st); }, master);
    return ls.unscale(g, st);
  };
  Tensor g = scaled_grad(w, s);
  // x16 / n, the float16 nearest 1e-3 divided by 2^16: exact in float32.
  float want = ir::f16_bits_to_f32(ir::f32_to_f16_bits(1e-3f)) / 65536.0f;
  auto gv = nx::to_vector<float>(g);
  EXPECT_EQ(gv[0], want);
  EXPECT_EQ(gv[n - 1], want);
  auto gj = rune::jit(std::function<Tensor(Tensor, optim::LossScaleState)>(scaled_grad))(w, s);
  EXPECT_EQ(nx::to_vector<float>(gj), gv) << "compiled";
  EXPECT_TRUE(nx::item<bool>(optim::all_finite(g)));
}

// A compiled float16 step whose scaled gradients overflow keeps its params and halves the scale;
// finite steps update and, every `period` of them, double it. One trace for all of it.
TEST_P(MixedPrecision, OverflowSkipsTheStepAndHalvesTheScale) {
  optim::DynamicLossScale ls{/*initial=*/65536.0 * 16, /*period=*/2};
  optim::Sgd opt{optim::constant(0.5)};
  Tensor x = on(nx::full(nx::float16, {4}, 8.0));
  auto loss = [&](const Tensor& m) {
    Tensor y = nx::cast(m, nx::float16) * x;
    return nx::sum(y * y);  // d/dm = 2 m x^2 = 128 m; scaled by 2^20 it overflows float16
  };
  using State = std::tuple<Tensor, optim::SgdState<Tensor>, optim::LossScaleState>;
  auto step = rune::jit([&](const State& st) {
    auto [m, os, lss] = st;
    Tensor g =
        ls.unscale(rune::grad([&](const Tensor& p) { return ls.scale(loss(p), lss); }, m), lss);
    Tensor finite = optim::all_finite(g);
    auto [m2, os2] = opt.update(m, g, os);
    return State{optim::select_tree(finite, m2, m), optim::select_tree(finite, os2, os),
                 ls.adjust(finite, lss)};
  });
  Tensor m0 = on(nx::full(nx::float32, {4}, 0.001));
  State st{m0, opt.init(m0), ls.init(m0.device())};
  std::vector<float> scales, firsts;
  for (int i = 0; i < 9; ++i) {
    st = step(st);
    scales.push_back(nx::item<float>(std::get<2>(st).scale));
    firsts.push_back(nx::to_vector<float>(std::get<0>(st))[0]);
  }
  EXPECT_EQ(step.traces(), 1u);
  // The scaled float16 gradients overflow (past 65504) until the scale has halved enough.
  EXPECT_EQ(scales[0], 524288.0f);  // overflowed: halved, params kept
  EXPECT_EQ(firsts[0], 0.001f);
  size_t first_finite = 0;
  while (first_finite < scales.size() && firsts[first_finite] == 0.001f) ++first_finite;
  ASSERT_LT(first_finite, scales.size()) << "no step was finite";
  // The first finite step updates m (m - 0.5 * 128 m = -63 m), its gradient computed in float16
  // (m, y and the cotangents rounded to 11 bits: within two float16 epsilons, 2^-10).
  EXPECT_NEAR(firsts[first_finite], -63 * 0.001f, 0.063f * 0x1p-10f);
  EXPECT_EQ(nx::item<int64_t>(std::get<1>(st).count) > 0, true);
  for (size_t i = 1; i <= first_finite; ++i)
    EXPECT_EQ(scales[i], i < first_finite ? scales[i - 1] / 2 : scales[i - 1]) << "step " << i;
}

TEST(LossScale, AdjustGrowsEveryPeriodAndShrinksToTheMinimum) {
  optim::DynamicLossScale ls{4, 2, 2, 1};
  auto s = ls.init();
  Tensor yes = nx::scalar(nx::bool_, 1), no = nx::scalar(nx::bool_, 0);
  std::vector<std::pair<float, int64_t>> seen;
  for (const Tensor& f : {yes, yes, yes, no, no, no, no}) {
    s = ls.adjust(f, s);
    seen.push_back({nx::item<float>(s.scale), nx::item<int64_t>(s.good_steps)});
  }
  EXPECT_EQ(seen, (std::vector<std::pair<float, int64_t>>{
                      {4, 1}, {8, 0}, {8, 1}, {4, 0}, {2, 0}, {1, 0}, {1, 0}}));
  EXPECT_EQ(rt::error_of([] { optim::DynamicLossScale{0}.init(); }),
            "rune::optim::DynamicLossScale: initial scale must be positive and finite, got "
            "0.000000");
}

INSTANTIATE_TEST_SUITE_P(Devices, MixedPrecision, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
