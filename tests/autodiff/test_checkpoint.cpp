// rune::checkpoint: gradients through checkpointed blocks have the plain program's bits (eager
// and compiled, on CPU, CPU:1 and the fake CUDA device), and the backward pass keeps fewer
// residuals from the forward pass (counted in the traced graph).
#include <gtest/gtest.h>

#include <bit>
#include <iostream>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
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
  auto grads = rune::vjp_nodes(t.outputs, {one}, t.params, t.checkpoints);
  EXPECT_EQ(t.checkpoints.size(), remat ? static_cast<size_t>(kLayers) : 0u);
  return rune::count_residuals(grads, t.outputs);
}

TEST(CheckpointResiduals, OnlyTheBlocksInputsAreKept) {
  size_t plain = residuals(false), remat = residuals(true);
  std::cout << "residuals: plain " << plain << ", checkpointed " << remat << "\n";
  EXPECT_EQ(remat, static_cast<size_t>(kLayers - 1)) << "plain: " << plain;
  EXPECT_GT(plain, 2 * static_cast<size_t>(kLayers - 1)) << "remat: " << remat;
}

INSTANTIATE_TEST_SUITE_P(Devices, Checkpoint, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
