// A program's kernels replayed as one graph (runtime/gpu/graphs.h) on the fake CUDA driver,
// which records the launches of a capturing stream and runs them again at each graph launch:
// the same bits as step-by-step launches, a graph only for the addresses it was captured with,
// at most kMaxGraphs per program, freed with the program, none for one-kernel programs.
#include <gtest/gtest.h>

#include "fake_driver.h"
#include "runtime/gpu/graphs.h"
#include "test_util.h"
#include "trace/rune.h"

using nx::Tensor;

namespace {

const bool installed = (fake_gpu::install_fake_cuda(), true);
const nx::Device kCuda{runtime::DeviceKind::CUDA, 0};

using rt::bits;

struct Counts {
  int captures, graph_launches, graph_execs, launches;
};
Counts counts() {
  auto& c = fake_gpu::counters();
  return {c.captures.load(), c.graph_launches.load(), c.graph_execs.load(), c.launches.load()};
}

// Column means, then a softmax along rows scaled by a total: several kernels per call.
Tensor several_kernels(const Tensor& x) {
  Tensor centred = x - nx::mean(x, {0}, true);
  return nx::softmax(centred, {1}) * nx::sum(nx::abs(x));
}

TEST(GpuGraphs, ARepeatedCallReplaysOneGraphWithTheBitsOfTheHost) {
  ASSERT_TRUE(installed);
  auto f = rune::jit([](const Tensor& x) { return several_kernels(x); });
  Tensor host_x = nx::randn(nx::key(1), nx::float32, {37, 300});
  const auto want = bits(f(host_x));
  Tensor x = nx::place(host_x, kCuda);
  Counts before = counts();
  for (int i = 0; i < 5; ++i) {
    // The result is dropped each time: its memory comes back for the next call's output, so
    // every call runs with the same addresses.
    EXPECT_EQ(bits(f(x)), want) << "call " << i;
  }
  Counts after = counts();
  EXPECT_EQ(after.captures - before.captures, 1);  // on the second call
  EXPECT_EQ(after.graph_launches - before.graph_launches, 4);
  EXPECT_GE(runtime::gpu::graph_stats().replays, 4);
}

TEST(GpuGraphs, NewAddressesNeverReplayAnotherCallsGraph) {
  auto f = rune::jit([](const Tensor& x) { return several_kernels(x); });
  Tensor ha = nx::randn(nx::key(2), nx::float32, {9, 70});
  Tensor hb = nx::randn(nx::key(3), nx::float32, {9, 70});
  const auto want_a = bits(f(ha)), want_b = bits(f(hb));
  ASSERT_NE(want_a, want_b);
  Tensor a = nx::place(ha, kCuda), b = nx::place(hb, kCuda);
  Counts before = counts();
  EXPECT_EQ(bits(f(a)), want_a);
  EXPECT_EQ(bits(f(a)), want_a);  // captured: a's addresses
  EXPECT_EQ(bits(f(b)), want_b);  // b's input address: step by step, not a's graph
  EXPECT_EQ(bits(f(b)), want_b);  // captured: b's addresses
  EXPECT_EQ(bits(f(a)), want_a);  // a's graph again
  EXPECT_EQ(bits(f(b)), want_b);  // b's graph again
  Counts after = counts();
  EXPECT_EQ(after.captures - before.captures, 2);
  EXPECT_EQ(after.graph_launches - before.graph_launches, 4);
}

TEST(GpuGraphs, AProgramKeepsAtMostFourGraphsAndFreesThemWithItself) {
  const int execs_before = counts().graph_execs;
  {
    auto f = rune::jit([](const Tensor& x) { return several_kernels(x); });
    std::vector<Tensor> xs;
    for (int i = 0; i < 6; ++i)
      xs.push_back(nx::place(nx::randn(nx::key(10 + i), nx::float32, {4, 20}), kCuda));
    for (const Tensor& x : xs) {
      auto host = bits(f(nx::place(x, nx::Device{})));
      EXPECT_EQ(bits(f(x)), host);
      EXPECT_EQ(bits(f(x)), host);  // each captured once
    }
    EXPECT_EQ(counts().graph_execs - execs_before, static_cast<int>(runtime::gpu::kMaxGraphs));
  }
  EXPECT_EQ(counts().graph_execs, execs_before);  // the program and its graphs are gone
}

TEST(GpuGraphs, OneKernelProgramsLaunchDirectly) {
  Tensor x = nx::place(nx::randn(nx::key(20), nx::float32, {64}), kCuda);
  auto f = rune::jit([](const Tensor& v) { return v * 2.0f + 1.0f; });
  Counts before = counts();
  for (int i = 0; i < 4; ++i) nx::wait(f(x));
  for (int i = 0; i < 4; ++i) nx::wait(nx::exp(x));
  Counts after = counts();
  EXPECT_EQ(after.captures, before.captures);
  EXPECT_EQ(after.launches - before.launches, 8);
}

// A training loop whose parameters are donated each step: the outputs take the inputs'
// memory, so the step runs with the same addresses after the first and replays one graph; the
// parameters end with the host loop's bits.
TEST(GpuGraphs, ADonatingTrainingLoopReplaysItsStep) {
  auto loss = [](const Tensor& w, const Tensor& x, const Tensor& y) {
    auto d = nx::tanh(nx::matmul(x, w)) - y;
    return nx::mean(d * d);
  };
  auto step = rune::jit([&](const Tensor& w, const Tensor& x, const Tensor& y) {
    auto [l, g] = rune::value_and_grad([&](const Tensor& p) { return loss(p, x, y); }, w);
    return std::make_pair(w - g * 0.1, l);
  });
  Tensor hw = nx::rand(nx::key(7), nx::float32, {8, 2});
  Tensor hx = nx::rand(nx::key(8), nx::float32, {16, 8});
  Tensor hy = nx::rand(nx::key(9), nx::float32, {16, 2});
  Tensor w = nx::place(hw, kCuda), x = nx::place(hx, kCuda), y = nx::place(hy, kCuda);
  Counts before = counts();
  Tensor hl, l;
  for (int i = 0; i < 8; ++i) {
    std::tie(hw, hl) = step(nx::donate(hw), hx, hy);
    std::tie(w, l) = step(nx::donate(w), x, y);
    EXPECT_EQ(bits(l), bits(hl)) << "step " << i;
  }
  EXPECT_EQ(bits(w), bits(hw));
  Counts after = counts();
  EXPECT_LE(after.captures - before.captures, 2);
  EXPECT_GE(after.graph_launches - before.graph_launches, 5);
}

}  // namespace
