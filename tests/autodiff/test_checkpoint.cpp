// rune::checkpoint: gradients through checkpointed blocks have the plain program's bits (eager
// and compiled, on CPU, CPU:1 and the fake CUDA device), and the backward pass keeps fewer
// residuals from the forward pass (counted in the traced graph).
#include <gtest/gtest.h>

#include <bit>
#include <iostream>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "runtime/allocator.h"
#include "test_util.h"
#include "trace/rune.h"
#include "trace/trace_flat.h"
#include "trace/vjp.h"

namespace {

using nx::Tensor;
using V = std::vector<Tensor>;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

constexpr int kLayers = 4;

Tensor layer(const Tensor& h, const Tensor& w) { return nx::tanh(nx::matmul(h, w)) * 0.5 + h; }

// A small residual MLP: every layer optionally a checkpointed block.
Tensor loss(const V& ws, const Tensor& x, bool remat) {
  Tensor h = x;
  for (const auto& w : ws)
    h = remat ? rune::checkpoint([](const Tensor& h, const Tensor& w) { return layer(h, w); })(h, w)
              : layer(h, w);
  return nx::sum(nx::square(h));
}

V weights() {
  V ws;
  for (int l = 0; l < kLayers; ++l) {
    std::vector<double> v;
    for (int i = 0; i < 16; ++i) v.push_back(0.05 * ((i * 7 + l * 3) % 11) - 0.25);
    ws.push_back(nx::create(nx::float64, {4, 4}, v));
  }
  return ws;
}
Tensor input() {
  std::vector<double> v;
  for (int i = 0; i < 8; ++i) v.push_back(0.1 * i - 0.3);
  return nx::create(nx::float64, {2, 4}, v);
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  auto x = nx::to_vector<double>(a), y = nx::to_vector<double>(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(x[i]), std::bit_cast<uint64_t>(y[i])) << what << " " << i;
}

class Checkpoint : public ::testing::TestWithParam<std::string> {
 protected:
  Tensor on(const Tensor& h) const { return GetParam() == "CPU" ? h : nx::place(h, GetParam()); }
};

TEST_P(Checkpoint, GradientsKeepTheirBits) {
  V ws;
  for (const auto& w : weights()) ws.push_back(on(w));
  Tensor x = on(input());
  auto grads = [&](bool remat) {
    return rune::jit([remat](const V& ws, const Tensor& x) {
      return rune::grad([&](const V& p) { return loss(p, x, remat); }, ws);
    })(ws, x);
  };
  V plain = grads(false), remat = grads(true);
  for (int l = 0; l < kLayers; ++l)
    expect_same_bits(remat[l], plain[l], "compiled layer " + std::to_string(l));
  if (GetParam() == "CPU") {
    V eager = rune::grad([&](const V& p) { return loss(p, x, true); }, ws);
    for (int l = 0; l < kLayers; ++l)
      expect_same_bits(eager[l], plain[l], "eager layer " + std::to_string(l));
    // Outside a gradient a checkpointed block is f itself.
    expect_same_bits(loss(ws, x, true), loss(ws, x, false), "forward");
  }
}

// The residuals the backward pass reads from the forward pass: with every layer checkpointed,
// only the layers' inputs (one [2, 4] activation per layer after the first, which is x, a
// Param), against the dot and tanh values of every layer without.
size_t residuals(bool remat) {
  ir::NodeUse use;
  V ws = weights();
  Tensor x = input();
  std::vector<rune::detail::Aval> avals;
  for (const auto& w : ws) avals.push_back({w.dtype(), w.shape()});
  auto t = rune::detail::trace_flat(
      "test", avals, nx::Device::cpu(), [&](const V& p) { return V{loss(p, x, remat)}; }, kLayers);
  auto one = ir::make(ir::Op::Const, nx::float64, {}, {}, 1.0);
  auto grads = rune::vjp_nodes(t.outputs, {one}, t.params, rune::detail::checkpoints_of(t));
  EXPECT_EQ(rune::detail::checkpoints_of(t).size(), remat ? static_cast<size_t>(kLayers) : 0u);
  return rune::count_residuals(grads, t.outputs);
}

TEST(CheckpointResiduals, OnlyTheBlocksInputsAreKept) {
  size_t plain = residuals(false), remat = residuals(true);
  std::cout << "residuals: plain " << plain << ", checkpointed " << remat << "\n";
  EXPECT_EQ(remat, static_cast<size_t>(kLayers - 1)) << "plain: " << plain;
  EXPECT_GT(plain, 2 * static_cast<size_t>(kLayers - 1)) << "remat: " << remat;
}

// Issue 20's measurement: a 16-layer residual MLP (64 x 64 float64 weights, a batch of 32), its
// compiled gradient's peak (the device allocator's statistics) with and without every layer
// checkpointed. Temporaries placed by their lifetimes (runtime/temp_placement.h) let the values
// the backward pass no longer reads give their bytes back, so the peak drops by about the
// residuals the blocks drop (counted in the traced graph), one [32, 64] value each.
constexpr int kDeepLayers = 16;
constexpr int64_t kWidth = 64, kBatch = 32;

// A residual MLP block: two products with a tanh between, h + tanh(h w) w / 2. Its hidden
// activation is materialised in the forward pass (the second product's operand) and read by
// the backward pass, unless the block is checkpointed.
Tensor block(const Tensor& h, const Tensor& w) {
  return nx::matmul(nx::tanh(nx::matmul(h, w)), w) * 0.5 + h;
}
Tensor deep_loss(const V& ws, const Tensor& x, bool remat) {
  Tensor h = x;
  for (const auto& w : ws)
    h = remat ? rune::checkpoint([](const Tensor& h, const Tensor& w) { return block(h, w); })(h, w)
              : block(h, w);
  return nx::sum(nx::square(h));
}

V deep_weights() {
  V ws;
  for (int l = 0; l < kDeepLayers; ++l) {
    std::vector<double> v;
    for (int64_t i = 0; i < kWidth * kWidth; ++i)
      v.push_back(0.002 * static_cast<double>((i * 7 + l * 3) % 23) - 0.022);
    ws.push_back(nx::create(nx::float64, {kWidth, kWidth}, v));
  }
  return ws;
}
Tensor deep_input() {
  std::vector<double> v;
  for (int64_t i = 0; i < kBatch * kWidth; ++i) v.push_back(0.01 * static_cast<double>(i % 13));
  return nx::create(nx::float64, {kBatch, kWidth}, v);
}

class CheckpointPeak : public Checkpoint {
 protected:
  // The compiled gradient's peak bytes above what was in use before the call (the call's
  // outputs, the gradients, included).
  // On CPU:1 the figure is printed, not checked: the stream task's deferred releases move the
  // host allocator's in-use bytes under the measurement (it came out below the gradients).
  size_t peak(const V& ws, const Tensor& x, bool remat, V* grads) const {
    auto step = rune::jit([remat](const V& ws, const Tensor& x) {
      return rune::grad([&](const V& p) { return deep_loss(p, x, remat); }, ws);
    });
    for (const auto& g : step(ws, x)) nx::wait(g);  // compiled, its memory cached
    nx::wait(x.device());  // a stream task's hold on the first call's buffers is gone
    auto& alloc = runtime::device_allocator(x.device());
    size_t before = alloc.stats().in_use;
    alloc.reset_peak();
    *grads = step(ws, x);
    nx::wait(x.device());
    return alloc.stats().peak - before;
  }
};

size_t deep_residuals(bool remat) {
  ir::NodeUse use;
  V ws = deep_weights();
  Tensor x = deep_input();
  std::vector<rune::detail::Aval> avals;
  for (const auto& w : ws) avals.push_back({w.dtype(), w.shape()});
  auto t = rune::detail::trace_flat(
      "test", avals, nx::Device::cpu(), [&](const V& p) { return V{deep_loss(p, x, remat)}; },
      kDeepLayers);
  auto one = ir::make(ir::Op::Const, nx::float64, {}, {}, 1.0);
  auto grads = rune::vjp_nodes(t.outputs, {one}, t.params, rune::detail::checkpoints_of(t));
  return rune::count_residuals(grads, t.outputs);
}

TEST_P(CheckpointPeak, CheckpointedPeakIsLowerByTheDroppedResiduals) {
  V ws;
  for (const auto& w : deep_weights()) ws.push_back(on(w));
  Tensor x = on(deep_input());
  V plain_grads, remat_grads;
  size_t plain = peak(ws, x, false, &plain_grads), remat = peak(ws, x, true, &remat_grads);
  for (int l = 0; l < kDeepLayers; ++l)
    expect_same_bits(remat_grads[l], plain_grads[l], "layer " + std::to_string(l));
  const size_t value = kBatch * kWidth * sizeof(double);
  const size_t dropped = deep_residuals(false) - deep_residuals(true);
  std::cout << "peak on " << GetParam() << ": plain " << plain << " bytes, checkpointed " << remat
            << " bytes; " << dropped << " residuals of " << value << " bytes dropped\n";
  if (GetParam() == "CPU:1") return;  // see below
  // The checkpointed peak is lower by at least three quarters of the dropped residuals
  // (measured: 14 of 17); not by all of them, as the backward passes of the last two blocks
  // overlap in the memory order (docs/compilation.md, "Program memory"). Before temporaries
  // were placed by their lifetimes it was higher than plain; before the residual stream's
  // gradient was stored every few layers and allocating kernels sank to their readers, lower
  // by 4; before a shared tanh was stored once, by 10.
  EXPECT_LE(remat + dropped * 3 / 4 * value, plain)
      << "plain " << plain << ", checkpointed " << remat << ", " << dropped << " dropped";
}

INSTANTIATE_TEST_SUITE_P(Devices, CheckpointPeak, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

INSTANTIATE_TEST_SUITE_P(Devices, Checkpoint, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
