// The scheduler's decisions for named programs: how many kernels each becomes and what fused
// into each (codegen::describe: kind, shape, reduced shape and operation, params read, fused
// operations). The numbers are pinned as the scheduler makes them today; a change in fusion,
// better or worse, fails here and must be pinned again on purpose, with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/schedule.h"
#include "core/interpreter.h"
#include "trace/rune.h"
#include "trace/tracer.h"

namespace {

using nx::Tensor;

struct Arg {
  nx::DType dtype;
  nx::Shape shape;
};
using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Traces fn over stand-ins of `args` as rune::jit does (captured tensors become params after the
// arguments) and schedules the graph as the host's (or with `gpu` the GPUs') compile path does,
// epilogues fused.
codegen::Schedule schedule_of(const std::vector<Arg>& args, const Fn& fn, bool gpu = false) {
  ir::NodeUse use;  // the traced nodes stay until the schedule is made
  rune::Tracer tracer(nx::Device::cpu(), static_cast<int>(args.size()));
  std::vector<ir::NodeRef> roots;
  {
    nx::InterpreterScope scope(&tracer);
    std::vector<Tensor> ins;
    for (size_t i = 0; i < args.size(); ++i)
      ins.push_back(
          tracer.stand_in(static_cast<int>(i), args[i].dtype, ir::View::contiguous(args[i].shape)));
    for (const auto& r : fn(ins)) roots.push_back(tracer.node_of(r));
  }
  int n_params = static_cast<int>(args.size() + tracer.captured().size());
  return codegen::schedule(roots, n_params, /*fuse_epilogues=*/true, /*half_operands=*/gpu,
                           /*fuse_attention=*/true);
}

std::vector<std::string> kernels_of(const std::vector<Arg>& args, const Fn& fn, bool gpu = false) {
  std::vector<std::string> out;
  for (const auto& k : schedule_of(args, fn, gpu).kernels) out.push_back(codegen::describe(k));
  return out;
}

}  // namespace

// (RUNE_TREE specialises nx::Tree: at namespace scope.)
struct Mlp {
  nx::Tensor w1, b1, w2, b2;
};
RUNE_TREE(Mlp, w1, b1, w2, b2)

TEST(ScheduleFusion, DescribeNamesEveryPart) {
  auto k = kernels_of({{nx::float32, {4, 8}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::sum(x[0] * 2.0, {1}, /*keepdims=*/true) + 1.0};
  });
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0], "reduce float32 [4, 1] over [8] by ReduceSum, 1 param, 1+1 ops");
}

// A chain of elementwise ops is one kernel, whatever its length.
TEST(ScheduleFusion, ElementwiseChain) {
  auto k = kernels_of({{nx::float32, {64}}}, [](const std::vector<Tensor>& x) {
    const Tensor& v = x[0];
    return std::vector<Tensor>{nx::exp(nx::sin((v * 2.0 + 1.0) * nx::tanh(v)) - v) / 3.0};
  });
  EXPECT_EQ(k, (std::vector<std::string>{
                   // everything: mul, add, tanh, mul, sin, sub, exp, div
                   "elementwise float32 [64], 1 param, 8 ops",
               }));
}

// A reduction takes its elementwise producers and its elementwise consumers at its own shape.
// nx reduces with the reduced axes kept (size 1) and reshapes after: an epilogue behind that
// reshape reads the reduction at its own output index too, and fuses the same way.
TEST(ScheduleFusion, ReductionWithElementwiseEpilogue) {
  auto kept = kernels_of({{nx::float32, {16, 32}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::sqrt(nx::sum(x[0] * x[0], {1}, /*keepdims=*/true)) + 1.0};
  });
  EXPECT_EQ(kept, (std::vector<std::string>{
                      // x*x reduced; sqrt and +1 applied to each row's sum in the same kernel
                      "reduce float32 [16, 1] over [32] by ReduceSum, 1 param, 1+2 ops",
                  }));
  auto dropped = kernels_of({{nx::float32, {16, 32}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::sqrt(nx::sum(x[0] * x[0], {1})) + 1.0};
  });
  EXPECT_EQ(dropped, (std::vector<std::string>{
                         // sqrt and +1 after the reshape, in the reduction's kernel
                         "reduce float32 [16] over [32] by ReduceSum, 1 param, 1+2 ops",
                     }));
}

TEST(ScheduleFusion, Softmax) {
  auto k = kernels_of({{nx::float32, {8, 128}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::softmax(x[0], 1)};
  });
  // One row kernel (codegen/kernel.h): per row, the max m; then sum(exp(x - shift)), the shift
  // m where finite, else 0 (5 ops per element); then exp(x - shift) / sum over the row (6).
  // With RUNE_ROW_KERNELS=0, four kernels: the max, the shift, the sum, the division.
  EXPECT_EQ(k,
            (std::vector<std::string>{
                "row float32 [8, 1] over [128] by ReduceMax then ReduceSum, writes rows, 1 param, "
                "0+5+6 ops",
            }));
}

TEST(ScheduleFusion, LogSoftmaxLogsumexpAndCrossEntropyAreRowKernels) {
  auto lsm = kernels_of({{nx::float32, {8, 128}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::log_softmax(x[0], 1)};
  });
  EXPECT_EQ(lsm, (std::vector<std::string>{
                     "row float32 [8, 1] over [128] by ReduceMax then ReduceSum, writes rows, 1 "
                     "param, 0+5+6 ops",
                 }));
  // Written at the outer index: log(sum(exp(x - shift))) + shift, the kept axis dropped.
  auto lse = kernels_of({{nx::float32, {8, 128}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::logsumexp(x[0], {1})};
  });
  EXPECT_EQ(lse, (std::vector<std::string>{
                     "row float32 [8] over [128] by ReduceMax then ReduceSum, 1 param, 0+5+5 ops",
                 }));
  // Cross-entropy: max, sum(exp), and the label's log probability per row in one kernel; the
  // batch mean (a reduction over other rows) is a kernel of its own.
  auto ce =
      kernels_of({{nx::float32, {8, 128}}, {nx::int64, {8}}}, [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{nx::nn::cross_entropy(a[0], a[1])};
      });
  ASSERT_EQ(ce.size(), 2u) << ::testing::PrintToString(ce);
  EXPECT_EQ(ce[0],
            "row float32 [8, 1] over [128] by ReduceMax then ReduceSum then ReduceSum, 2 params, "
            "0+5+8+0 ops");
  // Rows longer than one reduction block keep separate reductions (their blocks' partials
  // combine in another pass).
  auto long_rows = kernels_of({{nx::float32, {2, 65537}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::softmax(x[0], 1)};
  });
  EXPECT_EQ(long_rows.size(), 4u);
  auto block_rows = kernels_of({{nx::float32, {2, 65536}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::softmax(x[0], 1)};
  });
  EXPECT_EQ(block_rows.size(), 1u);
}

TEST(ScheduleFusion, LayerNorm) {
  auto k = kernels_of({{nx::float32, {8, 64}}, {nx::float32, {64}}, {nx::float32, {64}}},
                      [](const std::vector<Tensor>& a) {
                        const Tensor& x = a[0];
                        Tensor mu = nx::mean(x, {1}, true);
                        Tensor d = x - mu;
                        Tensor var = nx::mean(d * d, {1}, true);
                        return std::vector<Tensor>{d / nx::sqrt(var + 1e-5) * a[1] + a[2]};
                      });
  // One row kernel: per row, sum(x); then sum((x - sum / n)^2); then, per element,
  // (x - mean) / sqrt(var / n + eps) * g + b.
  EXPECT_EQ(k,
            (std::vector<std::string>{
                "row float32 [8, 1] over [64] by ReduceSum then ReduceSum, writes rows, 3 params, "
                "0+3+8 ops",
            }));
}

// The host's gemm applies a bias and a relu to each finished tile: one kernel.
TEST(ScheduleFusion, MatmulBiasReluIsOneKernelWithAnEpilogue) {
  auto k = kernels_of({{nx::float32, {32, 16}}, {nx::float32, {16, 24}}, {nx::float32, {24}}},
                      [](const std::vector<Tensor>& a) {
                        return std::vector<Tensor>{nx::relu(nx::matmul(a[0], a[1]) + a[2])};
                      });
  EXPECT_EQ(k, (std::vector<std::string>{
                   // the product; + bias and relu (x > 0, isnan, x * 0, two wheres) as its epilogue
                   "contract float32 [32, 24], 3 params, 6 ops",
               }));
}

// The chapter's training step (samples/training_step.cpp): loss, gradient and update of two
// float64 scalars over four captured points.
TEST(ScheduleFusion, ChapterTrainingStep) {
  auto inputs = nx::create(nx::float64, {4}, {0, 1, 2, 3});
  auto targets = nx::create(nx::float64, {4}, {1, 3, 5, 7});
  using Params = std::pair<Tensor, Tensor>;
  auto mse = [&](const Params& p) {
    auto err = p.first * inputs + p.second - targets;
    return nx::mean(err * err);
  };
  auto k = kernels_of({{nx::float64, {}}, {nx::float64, {}}}, [&](const std::vector<Tensor>& a) {
    auto [loss, g] = rune::value_and_grad(mse, Params{a[0], a[1]});
    return std::vector<Tensor>{loss, a[0] - g.first * 0.1, a[1] - g.second * 0.1};
  });
  EXPECT_EQ(k, (std::vector<std::string>{
                   // the loss: sum(err * err), err = w * inputs + b - targets, and the mean's / 4
                   "reduce float64 [] over [4] by ReduceSum, 4 params, 4+1 ops",
                   "elementwise float64 [], 0 params, 1 ops",  // the mean's cotangent (a constant)
                   // d loss / d w and w - g * 0.1; d loss / d b and b - g * 0.1
                   "reduce float64 [] over [4] by ReduceSum, 5 params, 6+2 ops",
                   "reduce float64 [] over [4] by ReduceSum, 5 params, 5+2 ops",
               }));
}

// The README's MLP step (samples/mlp.cpp, smaller): two layers, softmax cross-entropy,
// backward and SGD update in one program.
TEST(ScheduleFusion, MlpTrainingStep) {
  auto x = nx::rand(nx::key(1), nx::float32, {16, 2});
  auto y = nx::rand(nx::key(2), nx::float32, {16, 2});
  auto logits = [&](const Mlp& m) {
    Tensor h = nx::tanh(nx::matmul(x, m.w1) + m.b1);
    return nx::matmul(h, m.w2) + m.b2;
  };
  auto loss_fn = [&](const Mlp& m) {
    return nx::mean(-nx::sum(y * nx::log_softmax(logits(m), 1), {1}));
  };
  const double lr = 0.5;
  auto k = kernels_of(
      {{nx::float32, {2, 8}}, {nx::float32, {8}}, {nx::float32, {8, 2}}, {nx::float32, {2}}},
      [&](const std::vector<Tensor>& a) {
        auto [loss, g] = rune::value_and_grad(loss_fn, Mlp{a[0], a[1], a[2], a[3]});
        return std::vector<Tensor>{loss, a[0] - g.w1 * lr, a[1] - g.b1 * lr, a[2] - g.w2 * lr,
                                   a[3] - g.b2 * lr};
      });
  EXPECT_EQ(
      k,
      (std::vector<std::string>{
          // forward
          "contract float32 [16, 8], 3 params, 2 ops",  // h = tanh(x @ w1 + b1): bias, tanh fused
          "contract float32 [16, 2], 2 params, 0 ops",  // h @ w2 (its + b2 has many readers)
          "reduce float32 [16, 1] over [2] by ReduceMax, 2 params, 1+0 ops",  // row max of logits
          "elementwise float32 [16, 1], 1 param, 3 ops",                      // finite shift
          "reduce float32 [16, 1] over [2] by ReduceSum, 3 params, 3+0 ops",  // sum(exp(...))
          "elementwise float32 [16, 1], 1 param, 1 ops",                      // its log
          "reduce float32 [16, 1] over [2] by ReduceSum, 5 params, 4+0 ops",  // sum(y * lsm)
          "reduce float32 [] over [16] by ReduceSum, 1 param, 1+1 ops",  // mean of -rows: the loss
          // backward
          "elementwise float32 [], 0 params, 1 ops",   // the mean's cotangent
          "elementwise float32 [16], 1 param, 1 ops",  // per row
          // d loss / d logits: one row kernel (three row sums, among them the ties of the row
          // max, then the gradient over the row)
          "row float32 [16, 1] over [2] by ReduceSum then ReduceSum then ReduceSum, writes rows, "
          "7 params, 2+8+3+15 ops",
          "contract float32 [16, 8], 3 params, 3 ops",  // d h, times tanh's derivative (fused)
          "contract float32 [2, 8], 3 params, 2 ops",   // x^T @ d: w1 - g * lr fused
          "reduce float32 [8] over [16] by ReduceSum, 2 params, 0+2 ops",  // d b1; b1 - g * lr
          "contract float32 [8, 2], 3 params, 2 ops",  // h^T @ d logits: w2 - g * lr fused
          "reduce float32 [2] over [16] by ReduceSum, 2 params, 0+2 ops",  // d b2; b2 - g * lr
      }));
}

// Each reason the scheduler cuts a kernel, one program each.
TEST(ScheduleFusion, ALibraryOperandThatIsAComputationIsMaterialisedFirst) {
  auto k = kernels_of({{nx::float32, {4, 8}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::sort(x[0] * 2.0, 1)};
  });
  EXPECT_EQ(k, (std::vector<std::string>{
                   "elementwise float32 [4, 8], 1 param, 1 ops",  // x * 2
                   "library Sort float32 [4, 8], 1 param",
               }));
}

TEST(ScheduleFusion, ALibraryOperandInAStridedViewIsCopiedContiguousFirst) {
  auto k = kernels_of({{nx::float32, {8, 4}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::cumsum(nx::transpose(x[0]), 1)};
  });
  EXPECT_EQ(k, (std::vector<std::string>{
                   "elementwise float32 [4, 8], 1 param, 0 ops",  // the transpose, copied
                   "library Cumsum float32 [4, 8], 1 param",
               }));
}

TEST(ScheduleFusion, AReshapeNoViewExpressesCopiesItsSource) {
  auto k = kernels_of({{nx::float32, {4, 6}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::reshape(nx::transpose(x[0]), {24}) + 1.0};
  });
  EXPECT_EQ(k,
            (std::vector<std::string>{
                "elementwise float32 [6, 4], 1 param, 0 ops",  // the transpose, copied contiguous
                "elementwise float32 [24], 1 param, 1 ops",    // its reshape + 1
            }));
}

TEST(ScheduleFusion, ABroadcastComputationIsComputedOnce) {
  auto k = kernels_of(
      {{nx::float32, {4, 1}}, {nx::float32, {4, 8}}},
      [](const std::vector<Tensor>& a) { return std::vector<Tensor>{nx::exp(a[0]) * a[1]}; });
  EXPECT_EQ(k, (std::vector<std::string>{
                   "elementwise float32 [4, 1], 1 param, 1 ops",   // exp, once per row
                   "elementwise float32 [4, 8], 2 params, 1 ops",  // broadcast * b
               }));
}

// Expensive elementwise work read by two kernels is computed once: a dropout mask (a threefry
// stream of 125 ops) read by the forward product and by the backward one. Its threefry lanes,
// each read by several ops of the next round, stay inside the mask's kernel: all their readers
// lead to the mask (their post-dominator) through ops that one kernel inlines.
TEST(ScheduleFusion, ACostlySharedComputationIsComputedOnce) {
  auto k = kernels_of(
      {{nx::uint32, {2}}, {nx::float32, {64}}, {nx::float32, {64}}},
      [](const std::vector<Tensor>& a) {
        Tensor keep = nx::random::bernoulli(a[0], 0.9, {64});
        Tensor zero = nx::zeros_like(a[1]);
        return std::vector<Tensor>{nx::where(keep, a[1], zero), nx::where(keep, a[2], zero)};
      });
  // (Without the rule each where() inlined the mask's 125 ops.)
  EXPECT_EQ(k, (std::vector<std::string>{
                   // the key's words, computed once, then broadcast (a [0, 1) draw is returned as
                   // drawn, docs/random.md, so no bounds are computed)
                   "elementwise uint32 [], 1 param, 2 ops",
                   "elementwise bool [64], 2 params, 125 ops",   // the mask, once
                   "elementwise float32 [64], 2 params, 1 ops",  // where(keep, x, 0)
                   "elementwise float32 [64], 2 params, 1 ops",  // where(keep, dy, 0)
               }));
}

// Cheap shared work is recomputed by each reader instead: a buffer round trip costs more.
TEST(ScheduleFusion, ACheapSharedComputationIsRecomputed) {
  auto k = kernels_of({{nx::float32, {64}}}, [](const std::vector<Tensor>& a) {
    Tensor y = nx::exp(a[0] * 2.0 + 1.0);
    return std::vector<Tensor>{y + 1.0, y * 3.0};
  });
  EXPECT_EQ(k, (std::vector<std::string>{
                   "elementwise float32 [64], 1 param, 4 ops",
                   "elementwise float32 [64], 1 param, 4 ops",
               }));
}

// A cheap sum of 16 KiB or more that reads three computed buffers and has two readers is stored
// once: recomputed, each reader would load all three again and keep them alive until the last
// reader ran (a backward pass's residual stream gradient, a running sum of one term per layer).
// Smaller, it is recomputed (a launch costs more), as it is when it reads two.
TEST(ScheduleFusion, ASharedSumOfThreeComputedBuffersIsStored) {
  auto k = kernels_of({{nx::float32, {4096, 8}}}, [](const std::vector<Tensor>& a) {
    Tensor g = nx::sum(a[0], {1}, true) + nx::max(a[0], {1}, true) + nx::min(a[0], {1}, true) +
               nx::prod(a[0], {1}, true);
    return std::vector<Tensor>{g * 3.0, nx::sqrt(g)};
  });
  // (Without the rule each reader recomputed g: the sum twice, and max, min, prod all alive to
  // the second reader.)
  EXPECT_EQ(k, (std::vector<std::string>{
                   "reduce float32 [4096, 1] over [8] by ReduceMax, 1 param, 0+0 ops",
                   "reduce float32 [4096, 1] over [8] by ReduceMin, 1 param, 0+0 ops",
                   "reduce float32 [4096, 1] over [8] by ReduceProd, 1 param, 0+0 ops",
                   "reduce float32 [4096, 1] over [8] by ReduceSum, 4 params, 0+3 ops",  // g
                   "elementwise float32 [4096, 1], 1 param, 1 ops",                      // g * 3
                   "elementwise float32 [4096, 1], 1 param, 1 ops",                      // sqrt(g)
               }));
  auto small = kernels_of({{nx::float32, {4, 8}}}, [](const std::vector<Tensor>& a) {
    Tensor g = nx::sum(a[0], {1}, true) + nx::max(a[0], {1}, true) + nx::min(a[0], {1}, true) +
               nx::prod(a[0], {1}, true);
    return std::vector<Tensor>{g * 3.0, nx::sqrt(g)};
  });
  EXPECT_EQ(small.size(), 5u);  // max, min, prod, then each reader sums and adds again
}

// A shared value of 16 KiB or more whose recomputation is dozens of primitive operations once
// decomposed (a transcendental of at least kRecomputeLimit = 48 operations: float64 exp, 59) is
// stored once, unless one row kernel reads it in its last stage and its body: softmax's
// exp(x - max), read by the row sum and by the division, is then computed once by the row kernel
// (the sum's stage keeps it in the output row, the division reads it back: codegen/lower/rows.cpp
// rows()), so a float64 softmax is one row kernel too (it was two, e stored between them, until
// the scheduler knew the row kernel computes it once). float32 exp (34 operations with fused
// multiply-adds, docs/numerics.md) is below the limit: the same one row kernel.
TEST(ScheduleFusion, ASharedExpOfSixteenKiBOrMoreIsComputedOnce) {
  auto softmax = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{nx::softmax(a[0], 1)};
  };
  auto k = kernels_of({{nx::float64, {64, 1024}}}, softmax);
  EXPECT_EQ(k, (std::vector<std::string>{
                   // the max; e = exp(x - max), the max finite, summed and kept; e / sum(e)
                   "row float64 [64, 1] over [1024] by ReduceMax then ReduceSum, writes rows, 1 "
                   "param, 0+5+6 ops",
               }));
  // Read by two kernels, it is stored once: e and its row sum as outputs of their own.
  auto two = kernels_of({{nx::float64, {64, 1024}}}, [](const std::vector<Tensor>& a) {
    Tensor m = nx::max(a[0], {1}, true);
    Tensor e = nx::exp(a[0] - m);
    return std::vector<Tensor>{nx::sum(e, {1}, true), e * 2.0};
  });
  EXPECT_EQ(two, (std::vector<std::string>{
                     // e = exp(x - max), the max finite, written once
                     "row float64 [64, 1] over [1024] by ReduceMax, writes rows, 1 param, 0+2 ops",
                     "reduce float64 [64, 1] over [1024] by ReduceSum, 1 param, 0+0 ops",
                     "elementwise float64 [64, 1024], 1 param, 1 ops",  // e * 2
                 }));
  auto f32 = kernels_of({{nx::float32, {64, 1024}}}, softmax);
  EXPECT_EQ(f32, (std::vector<std::string>{
                     // exp in the sum's stage, and again, then /, over the row
                     "row float32 [64, 1] over [1024] by ReduceMax then ReduceSum, writes rows, 1 "
                     "param, 0+5+6 ops",
                 }));
  auto small = kernels_of({{nx::float32, {4, 8}}}, softmax);
  EXPECT_EQ(small, (std::vector<std::string>{
                       "row float32 [4, 1] over [8] by ReduceMax then ReduceSum, writes rows, 1 "
                       "param, 0+5+6 ops",
                   }));
  // Cheap shared values of any size are still recomputed (x * 2 + 1 read by the row sum and by
  // the product over the row: one row kernel).
  auto cheap = kernels_of({{nx::float32, {64, 1024}}}, [](const std::vector<Tensor>& a) {
    Tensor y = a[0] * 2.0 + 1.0;
    return std::vector<Tensor>{nx::sum(y, {1}, true) * y};
  });
  EXPECT_EQ(cheap,
            (std::vector<std::string>{
                "row float32 [64, 1] over [1024] by ReduceSum, writes rows, 1 param, 2+3 ops",
            }));
}

TEST(ScheduleFusion, AReductionOfAReductionIsTwoKernels) {
  auto k = kernels_of({{nx::float64, {4, 8}}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{nx::max(nx::sum(x[0], {1}))};
  });
  EXPECT_EQ(k, (std::vector<std::string>{
                   "reduce float64 [4, 1] over [8] by ReduceSum, 1 param, 0+0 ops",
                   "reduce float64 [] over [4] by ReduceMax, 1 param, 0+0 ops",  // reshaped to []
               }));
}

TEST(ScheduleFusion, AReductionWithTwoUsersIsMaterialised) {
  auto k = kernels_of({{nx::float32, {4, 8}}}, [](const std::vector<Tensor>& x) {
    Tensor s = nx::sum(x[0], {1}, /*keepdims=*/true);  // at its own shape, but read twice
    return std::vector<Tensor>{s * 2.0 + s};
  });
  EXPECT_EQ(k, (std::vector<std::string>{
                   "reduce float32 [4, 1] over [8] by ReduceSum, 1 param, 0+0 ops",
                   "elementwise float32 [4, 1], 1 param, 2 ops",  // s * 2 + s
               }));
}

TEST(ScheduleFusion, AProductOfComputedOrPaddedOperands) {
  auto k =
      kernels_of({{nx::float32, {8, 4}}, {nx::float32, {4, 8}}}, [](const std::vector<Tensor>& a) {
        Tensor p = nx::pad(a[1], {{0, 0}, {0, 2}});
        return std::vector<Tensor>{nx::matmul(nx::exp(a[0]), p)};
      });
  EXPECT_EQ(k, (std::vector<std::string>{
                   "elementwise float32 [8, 4], 1 param, 1 ops",   // exp(a)
                   "elementwise float32 [4, 10], 1 param, 1 ops",  // pad(b): where(valid, b, 0)
                   "contract float32 [8, 10], 2 params, 0 ops",
               }));
}

TEST(ScheduleFusion, RepeatedRootsAndInputRootsAreCopies) {
  auto k = kernels_of({{nx::float32, {8}}}, [](const std::vector<Tensor>& x) {
    Tensor y = x[0] + 1.0;
    return std::vector<Tensor>{y, y, x[0]};
  });
  EXPECT_EQ(k, (std::vector<std::string>{
                   "elementwise float32 [8], 1 param, 1 ops",  // y = x + 1
                   "elementwise float32 [8], 1 param, 0 ops",  // y again: a copy
                   "elementwise float32 [8], 1 param, 0 ops",  // x itself: a copy
               }));
}

TEST(ScheduleFusion, WithoutEpilogueFusionAProductIsAKernelOfItsOwn) {
  ir::NodeUse use;
  rune::Tracer tracer(nx::Device::cpu(), 2);
  std::vector<ir::NodeRef> roots;
  {
    nx::InterpreterScope scope(&tracer);
    Tensor a = tracer.stand_in(0, nx::float32, ir::View::contiguous({8, 4}));
    Tensor b = tracer.stand_in(1, nx::float32, ir::View::contiguous({4, 8}));
    roots.push_back(tracer.node_of(nx::relu(nx::matmul(a, b))));
  }
  std::vector<std::string> k;
  for (const auto& s : codegen::schedule(roots, 2, /*fuse_epilogues=*/false).kernels)
    k.push_back(codegen::describe(s));
  EXPECT_EQ(k, (std::vector<std::string>{
                   "contract float32 [8, 8], 2 params, 0 ops",
                   "elementwise float32 [8, 8], 1 param, 5 ops",  // relu
               }));
}

// The attention half of a block of samples/gpt.cpp, as its forward() writes it without dropout,
// at its default shapes (batch 32, context 128, width 128, 4 heads of 32): x + proj(attention(
// qkv(layer_norm(x)))), where the attention is the heads of the qkv projection, the scores
// q k^T / sqrt(D), the causal mask, softmax, the weighted values and the heads joined again.
TEST(ScheduleFusion, GptAttentionBlock) {
  const int64_t B = 32, T = 128, C = 128, H = 4, D = C / H;
  const std::vector<Arg> args{{nx::float32, {B, T, C}}, {nx::float32, {C}},
                              {nx::float32, {C}},       {nx::float32, {C, 3 * C}},
                              {nx::float32, {3 * C}},   {nx::float32, {C, C}},
                              {nx::float32, {C}}};
  const Fn block = [&](const std::vector<Tensor>& a) {
    auto dense = [](const Tensor& x, const Tensor& w, const Tensor& b) {
      nx::Shape s = x.shape();
      const int64_t in = s.back();
      s.back() = w.shape()[1];
      return nx::reshape(nx::matmul(nx::reshape(x, {-1, in}), w) + b, s);
    };
    Tensor causal = nx::less_equal(nx::iota({T, T}, 1), nx::iota({T, T}, 0));
    Tensor qkv = dense(nx::nn::layer_norm(a[0], a[1], a[2]), a[3], a[4]);
    auto heads = [&](int64_t part) {
      Tensor t = nx::slice(qkv, {{}, {}, {part * C, (part + 1) * C}});
      return nx::permute(nx::reshape(t, {B, T, H, D}), {0, 2, 1, 3});
    };
    Tensor q = heads(0), kk = heads(1), v = heads(2);
    Tensor att =
        nx::matmul(q, nx::permute(kk, {0, 1, 3, 2})) * (1 / std::sqrt(static_cast<double>(D)));
    att = nx::where(causal, att, nx::scalar_like(att, -INFINITY));
    att = nx::softmax(att, -1);
    Tensor y = nx::reshape(nx::permute(nx::matmul(att, v), {0, 2, 1, 3}), {B, T, C});
    return std::vector<Tensor>{a[0] + dense(y, a[5], a[6])};
  };
  auto k = kernels_of(args, block);
  // The attention itself was four kernels (the mask, q k^T, softmax, att v), and the last three
  // are one attention kernel on the host now:
  // the scale and the causal mask fuse into softmax's row kernel (its stages and body read the
  // product and the mask), not into the product's epilogue: a product whose value a reduction
  // reads is a buffer anyway. The products stay kernels of their own (a row kernel reads
  // buffers, not products), and so do the mask (a computation broadcast over batch and heads is
  // computed once). The heads' join ([B, T, H, D] as [B T, C], which no strided view of the
  // product expresses) is read by the projection in place: its rows (b, t) and columns (h, d)
  // are grouped axes (codegen/grouped_view.h), packed by the host's gemm through offset tables
  // where a copy of it was a kernel of its own (the same values in the same chains).
  EXPECT_EQ(k, (std::vector<std::string>{
                   "elementwise bool [128, 128], 0 params, 1 ops",  // the causal mask
                   // layer_norm (under the reshape to the product's rows)
                   "row float32 [32, 128, 1] over [128] by ReduceSum then ReduceSum, writes rows, "
                   "3 params, 0+3+8 ops",
                   "contract float32 [4096, 384], 3 params, 1 ops",  // qkv, + b fused
                   // q k^T (q and k views of qkv), * 1 / sqrt(D), where(causal, ., -inf), then
                   // softmax: max, sum(exp(. - max)), exp(. - max) / sum over the row (the exp
                   // computed once, kept in the row), and att v: one attention kernel reading the
                   // mask and qkv (codegen/schedule_attention.h; on a GPU too)
                   "attention float32 [32, 4, 128, 32] from scores [32, 4, 128, 128] by ReduceMax "
                   "then ReduceSum, 2 params, 2+7+8 ops",
                   "contract float32 [4096, 128], 2 params, 0 ops",  // the heads joined, projected
                   // + b and the residual x + ...: the product's epilogue does not reach through
                   // the reshape back to [B, T, C]
                   "elementwise float32 [32, 128, 128], 3 params, 2 ops",
               }));
  // A GPU schedule makes the same kernels (the attention one GPU kernel:
  // codegen/lower/attention.cpp).
  EXPECT_EQ(kernels_of(args, block, /*gpu=*/true), k);
  // Until the scheduler knew better it was eighteen: layer_norm's two sums and its body apart
  // (the body materialised in the product's rows), the qkv product without its bias and q, k
  // and v each adding it in a copy of their own, the max, the finite shift, exp(scaled and
  // masked - shift) stored, the sum and division, and the heads' permute copied and that copy
  // copied again for the reshape.
}

// Issue 37 (fuzz seed 80648): a reduction fused through a reshape of its result runs over the
// reshape's outer shape ([10], not [2, 5]), so each leaf of its body must split into that shape
// ++ the reduced shape. A strided input (a slice with steps) or a permuted one does not: the
// scheduler raised "schedule: reduction view reshape failed". The reduction now gets a kernel
// of its own there, at its own shape (nx reduces with the axes kept), and the output is a copy
// of its buffer through the reshape (an output has a buffer of its own); a contiguous input
// still fuses into one kernel.
TEST(ScheduleFusion, AReductionThroughAReshapeOfAStridedInputIsAKernelOfItsOwn) {
  auto sum_flat = [](const Tensor& x) { return nx::reshape(nx::sum(x, {2}, false), {10}); };
  // The fuzzer's input: a [2, 5, 1] slice with steps {2, 2, 2} of a [5, 11, 3] buffer.
  ir::NodeUse use;
  rune::Tracer tracer(nx::Device::cpu(), 1);
  std::vector<ir::NodeRef> roots;
  {
    nx::InterpreterScope scope(&tracer);
    ir::View strided{{2, 5, 1}, {66, 6, 2}, 37, {}};
    roots.push_back(tracer.node_of(sum_flat(tracer.stand_in(0, nx::int64, strided))));
  }
  std::vector<std::string> k;
  ASSERT_NO_THROW({
    for (const auto& kernel : codegen::schedule(roots, 1, true).kernels)
      k.push_back(codegen::describe(kernel));
  });
  EXPECT_EQ(k, (std::vector<std::string>{
                   "reduce int64 [2, 5, 1] over [1] by ReduceSum, 1 param, 0+0 ops",
                   "elementwise int64 [10], 1 param, 0 ops",
               }));
  // A permuted input: contiguous, but its outer axes do not merge either.
  auto permuted = kernels_of({{nx::float32, {5, 2, 3}}}, [&](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{sum_flat(nx::permute(x[0], {1, 0, 2}))};
  });
  EXPECT_EQ(permuted, (std::vector<std::string>{
                          "reduce float32 [2, 5, 1] over [3] by ReduceSum, 1 param, 0+0 ops",
                          "elementwise float32 [10], 1 param, 0 ops",
                      }));
  // Contiguous: fused through the reshape, one kernel over [10] as before.
  auto fused = kernels_of({{nx::float32, {2, 5, 3}}}, [&](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{sum_flat(x[0])};
  });
  EXPECT_EQ(fused, (std::vector<std::string>{
                       "reduce float32 [10] over [3] by ReduceSum, 1 param, 0+0 ops",
                   }));
  // And the values: the same bits eagerly and compiled.
  auto x = nx::slice(nx::reshape(nx::arange(165), {5, 11, 3}), {{1, 5, 2}, {1, 11, 2}, {1, 3, 2}});
  auto y = nx::permute(nx::reshape(nx::arange(nx::float32, 0, 30), {5, 2, 3}), {1, 0, 2});
  auto f = rune::jit(sum_flat);
  EXPECT_EQ(nx::to_vector<int64_t>(f(x)), nx::to_vector<int64_t>(sum_flat(x)));
  EXPECT_EQ(nx::to_vector<float>(f(y)), nx::to_vector<float>(sum_flat(y)));
}

// A convolution is an implicit GEMM: its windows (ir::Op::Window views of the padded input) are
// the product's operand as they are, a grouped view (codegen/grouped_view.h) that the host's gemm
// packs through offset tables and the GPU's lowering addresses by splitting each index, with no
// im2col buffer; the kernel gradient reads them the same way.
TEST(ScheduleFusion, AConvolutionReadsItsWindowsInPlace) {
  const std::vector<Arg> args{{nx::float32, {2, 3, 6, 6}}, {nx::float32, {4, 3, 3, 3}}};
  nx::ConvOptions same;
  same.padding = "SAME";
  auto conv = [&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{nx::conv(a[0], a[1], same)};
  };
  const int64_t im2col = 2 * 6 * 6 * 3 * 3 * 3;
  auto count = [&](const codegen::Schedule& s, bool* grouped) {
    int copies = 0;
    *grouped = false;
    for (const auto& k : s.kernels) {
      if (k.contract) *grouped |= !k.contract->a_groups.empty() || !k.contract->b_groups.empty();
      copies += !k.contract && ir::numel(k.shape) == im2col;
    }
    return copies;
  };
  bool grouped = false;
  EXPECT_EQ(count(schedule_of(args, conv), &grouped), 0);
  EXPECT_TRUE(grouped);
  EXPECT_EQ(count(schedule_of(args, conv, /*gpu=*/true), &grouped), 0);
  EXPECT_TRUE(grouped);
  // The kernel's gradient: x's windows, transposed, against the output's cotangent.
  auto dk = [&](const std::vector<Tensor>& a) {
    auto f = [&](const Tensor& k) { return nx::sum(nx::conv(a[0], k, same) * a[0].shape()[0]); };
    return std::vector<Tensor>{rune::grad(f)(a[1])};
  };
  EXPECT_EQ(count(schedule_of(args, dk), &grouped), 0);
  EXPECT_TRUE(grouped);
}

// The input's gradient is one implicit GEMM too: the transposed convolution, whose operand is the
// windows of the cotangent (dilated by the stride, padded) read in place. No kernel writes the
// window-shaped cotangent [N, OH, OW, C, KH, KW] (the product's cotangent for the windows) and
// none adds it back over the window offsets (a col2im): the composition's own rules would.
TEST(ScheduleFusion, AConvolutionsInputGradientIsOneImplicitGemm) {
  struct Case {
    const char* name;
    nx::ConvOptions o;
    int64_t positions;  // N OH OW
  };
  const std::vector<Case> cases{{"SAME", {.padding = "SAME"}, 2 * 6 * 6},
                                {"strided", {.strides = {2, 2}, .padding = "SAME"}, 2 * 3 * 3},
                                {"groups", {.padding = "VALID", .feature_groups = 3}, 2 * 4 * 4}};
  for (const Case& c : cases) {
    const int64_t in = c.o.feature_groups;
    const std::vector<Arg> args{{nx::float32, {2, 3, 6, 6}}, {nx::float32, {6, 3 / in, 3, 3}}};
    const int64_t window_shaped = c.positions * (3 / in) * 3 * 3 * in;
    auto dx = [&](const std::vector<Tensor>& a) {
      auto f = [&](const Tensor& x) { return nx::sum(nx::sin(nx::conv(x, a[1], c.o))); };
      return std::vector<Tensor>{rune::grad(f)(a[0])};
    };
    for (bool gpu : {false, true}) {
      int contractions = 0, grouped = 0;
      for (const auto& k : schedule_of(args, dx, gpu).kernels) {
        EXPECT_NE(ir::numel(k.shape), window_shaped)
            << c.name << (gpu ? " gpu: " : ": ") << codegen::describe(k);
        if (!k.contract) continue;
        ++contractions;
        grouped += !k.contract->a_groups.empty() || !k.contract->b_groups.empty();
      }
      EXPECT_EQ(contractions, 2) << c.name << ": the forward and the input's gradient";
      EXPECT_EQ(grouped, 2) << c.name << ": both read their windows in place";
    }
  }
}

// nx::nn::scaled_dot_product_attention (core/attention.h) schedules as the textbook formula
// does: the causal mask, q k^T, the softmax row kernel (the scale and the mask fused) and the
// weights times v; no guard for rows without keys (causal attention leaves key 0 to every row).
// On the host the last three are one attention kernel (codegen/schedule_attention.h: no
// [B, H, T, T] buffer); GPU schedules keep them apart (the same bits).
TEST(ScheduleFusion, AttentionIsTheTextbookFormulaAndOneKernelOnTheHost) {
  const int64_t B = 2, H = 4, T = 128, D = 32;
  const std::vector<Arg> args{
      {nx::float32, {B, H, T, D}}, {nx::float32, {B, H, T, D}}, {nx::float32, {B, H, T, D}}};
  auto sdpa = [](const std::vector<Tensor>& a) {
    nx::nn::AttentionOptions o;
    o.causal = true;
    return std::vector<Tensor>{nx::nn::scaled_dot_product_attention(a[0], a[1], a[2], o)};
  };
  auto textbook = [&](const std::vector<Tensor>& a) {
    Tensor causal = nx::less_equal(nx::iota({T, T}, 1), nx::iota({T, T}, 0));
    Tensor s =
        nx::matmul(a[0], nx::permute(a[1], {0, 1, 3, 2})) * (1 / std::sqrt(static_cast<double>(D)));
    s = nx::softmax(nx::where(causal, s, nx::scalar_like(s, -INFINITY)), -1);
    return std::vector<Tensor>{nx::matmul(s, a[2])};
  };
  auto host = kernels_of(args, sdpa);
  EXPECT_EQ(host, kernels_of(args, textbook));
  EXPECT_EQ(host, (std::vector<std::string>{
                      "elementwise bool [128, 128], 0 params, 1 ops",  // the causal mask
                      // q k^T, softmax (max, sum(exp(. - max)), exp(. - max) / sum) and . v
                      "attention float32 [2, 4, 128, 32] from scores [2, 4, 128, 128] by ReduceMax "
                      "then ReduceSum, 4 params, 2+7+8 ops",
                  }));
  // The scores and the weights have no buffer.
  const codegen::Schedule s = schedule_of(args, sdpa);
  ASSERT_EQ(s.kernels.size(), 2u);
  ASSERT_EQ(s.kernels[1].attention.size(), 3u);
  for (int part : {0, 1}) {
    const int slot = s.kernels[1].attention[static_cast<size_t>(part)].slots[0];
    EXPECT_EQ(s.slots[static_cast<size_t>(slot)].numel, 0) << "part " << part;
  }
  // On a GPU the same chain is one attention kernel too (codegen/lower/attention.cpp).
  auto gpu = kernels_of(args, sdpa, /*gpu=*/true);
  EXPECT_EQ(gpu, kernels_of(args, textbook, /*gpu=*/true));
  EXPECT_EQ(gpu, host);
}

// Long causal attention runs in blocks of 128 query rows (docs/attention.md, "Cost"): each block
// is an attention kernel of its own on the host; a padding mask joins the row kernel (and so
// the attention kernel), as does its guard for rows with no key. A scores product read by
// anything else (here: returned) is not fused, nor one whose right operand every row shares.
TEST(ScheduleFusion, AttentionBlocksAndMasksAreAttentionKernels) {
  const int64_t B = 1, H = 2, T = 300, D = 16;
  const std::vector<Arg> args{{nx::float32, {B, H, T, D}},
                              {nx::float32, {B, H, T, D}},
                              {nx::float32, {B, H, T, D}},
                              {nx::bool_, {B, 1, 1, T}}};
  auto count = [](const std::vector<std::string>& ks, const std::string& kind) {
    return std::count_if(ks.begin(), ks.end(),
                         [&](const std::string& k) { return k.rfind(kind, 0) == 0; });
  };
  auto causal = kernels_of(args, [](const std::vector<Tensor>& a) {
    nx::nn::AttentionOptions o;
    o.causal = true;
    return std::vector<Tensor>{nx::nn::scaled_dot_product_attention(a[0], a[1], a[2], o)};
  });
  EXPECT_EQ(count(causal, "attention "), 3) << testing::PrintToString(causal);
  EXPECT_EQ(count(causal, "contract "), 0) << testing::PrintToString(causal);
  auto masked = kernels_of(args, [](const std::vector<Tensor>& a) {
    nx::nn::AttentionOptions o;
    o.mask = a[3];
    return std::vector<Tensor>{nx::nn::scaled_dot_product_attention(a[0], a[1], a[2], o)};
  });
  EXPECT_EQ(count(masked, "attention "), 1) << testing::PrintToString(masked);
  EXPECT_EQ(count(masked, "contract "), 0) << testing::PrintToString(masked);
  auto scores_kept = kernels_of(args, [](const std::vector<Tensor>& a) {
    Tensor s = nx::matmul(a[0], nx::permute(a[1], {0, 1, 3, 2}));
    return std::vector<Tensor>{nx::matmul(nx::softmax(s, -1), a[2]), s};
  });
  EXPECT_EQ(count(scores_kept, "attention "), 0) << testing::PrintToString(scores_kept);
  EXPECT_EQ(count(scores_kept, "contract "), 2) << testing::PrintToString(scores_kept);
  // The same chain with weights shared by every row (a softmax or a layer norm between two
  // linear layers, or keys broadcast over the batch) stays three kernels: the weights would be
  // packed again for every block of rows.
  auto linear = kernels_of(args, [](const std::vector<Tensor>& a) {
    Tensor x = nx::reshape(a[0], {-1, D});
    Tensor w = nx::reshape(nx::slice(a[1], {{0, 1}, {0, 1}, {0, D}}), {D, D});
    return std::vector<Tensor>{nx::matmul(nx::softmax(nx::matmul(x, w), -1), w)};
  });
  EXPECT_EQ(count(linear, "attention "), 0) << testing::PrintToString(linear);
  auto broadcast = kernels_of(args, [](const std::vector<Tensor>& a) {
    Tensor k = nx::slice(a[1], {{0, 1}, {0, 1}});  // one head's keys for every query head
    Tensor s = nx::matmul(a[0], nx::permute(k, {0, 1, 3, 2}));
    return std::vector<Tensor>{nx::matmul(nx::softmax(s, -1), k)};
  });
  EXPECT_EQ(count(broadcast, "attention "), 0) << testing::PrintToString(broadcast);
}

// The gradient program of attention (its vjp: y and the cotangents of q, k and v given dy, which
// does not depend on y) on the host: the forward and backward passes are one attention gradient
// kernel (codegen/cpu/attention_gradient.h) that holds every [.., Tq, Tk] value (S, the
// softmax's exponentials and P, dP, dS) and the softmax's per-row values in tiles: no other
// kernel writes a [.., Tq, Tk] value and the tiled slots have no buffer. It writes y, dq, k's
// gradient (as dS^T q, [D, Tk], then transposed by its own kernel) and dv. The GPU keeps the
// unfused kernels.
TEST(ScheduleFusion, AttentionGradientIsOneKernelOnTheHost) {
  const int64_t B = 2, H = 4, T = 128, D = 32;
  const std::vector<Arg> args{{nx::float32, {B, H, T, D}},
                              {nx::float32, {B, H, T, D}},
                              {nx::float32, {B, H, T, D}},
                              {nx::float32, {B, H, T, D}}};
  auto vjp = [](const std::vector<Tensor>& a) {
    using QKV = std::tuple<Tensor, Tensor, Tensor>;
    auto f = [](const QKV& x) {
      nx::nn::AttentionOptions o;
      o.causal = true;
      return nx::nn::scaled_dot_product_attention(std::get<0>(x), std::get<1>(x), std::get<2>(x),
                                                  o);
    };
    auto [y, ct] = rune::vjp(f, QKV{a[0], a[1], a[2]}, a[3]);
    return std::vector<Tensor>{y, std::get<0>(ct), std::get<1>(ct), std::get<2>(ct)};
  };
  const codegen::Schedule s = schedule_of(args, vjp);
  std::vector<std::string> host;
  for (const auto& k : s.kernels) host.push_back(codegen::describe(k));
  EXPECT_EQ(host, (std::vector<std::string>{
                      "elementwise bool [128, 128], 0 params, 1 ops",  // the causal mask
                      // S, max, shift, exp, sum, P, y = P v, dP = dy v^T, dS, dq = dS k,
                      // dS^T q, dv = P^T dy
                      "attention gradient float32 [2, 4, 128, 32] from scores [2, 4, 128, 128]: "
                      "12 parts (6 products), 8 tiles, writes 4 slots, 5 params",
                      "elementwise float32 [2, 4, 128, 32], 1 param, 0 ops",  // dk = (dS^T q)^T
                  }));
  ASSERT_EQ(s.kernels.size(), 3u);
  const codegen::KernelSpec& g = s.kernels[1];
  ASSERT_TRUE(g.attention_gradient());
  for (int slot : g.attention_tiles)
    EXPECT_EQ(s.slots[static_cast<size_t>(slot)].numel, 0) << "tile slot " << slot;
  EXPECT_EQ(g.also_writes.size(), 3u);
  int wide = 0;
  for (const auto& part : g.attention) wide += part.out_numel() == B * H * T * T;
  EXPECT_EQ(wide, 5);  // S, exp, P, dP, dS
  auto gpu = kernels_of(args, vjp, /*gpu=*/true);
  EXPECT_EQ(gpu.size(), 14u);
  for (const auto& k : gpu) EXPECT_EQ(k.rfind("attention", 0), std::string::npos) << k;
}

// Where dO depends on y through other kernels (a linear layer after the attention, as in a
// transformer), the forward pass is one attention gradient kernel (writing y and the softmax's
// row values) and the backward pass another, which computes S and the softmax's values again:
// still no kernel writes a [.., Tq, Tk] value.
TEST(ScheduleFusion, AttentionGradientThroughALinearLayerIsTwoKernels) {
  const int64_t B = 2, H = 4, T = 128, D = 32;
  const std::vector<Arg> args{{nx::float32, {B, H, T, D}},
                              {nx::float32, {B, H, T, D}},
                              {nx::float32, {B, H, T, D}},
                              {nx::float32, {D, D}}};
  auto grads = [](const std::vector<Tensor>& a) {
    auto [gq, gk, gv] = rune::grad(
        [&](const Tensor& q, const Tensor& k, const Tensor& v) {
          nx::nn::AttentionOptions o;
          o.causal = true;
          return nx::sum(
              nx::tanh(nx::matmul(nx::nn::scaled_dot_product_attention(q, k, v, o), a[3])));
        },
        rune::argnums<0, 1, 2>)(a[0], a[1], a[2]);
    return std::vector<Tensor>{gq, gk, gv};
  };
  const codegen::Schedule s = schedule_of(args, grads);
  std::vector<std::string> host;
  for (const auto& k : s.kernels) host.push_back(codegen::describe(k));
  const std::string all = testing::PrintToString(host);
  int gradients = 0;
  for (const auto& k : s.kernels) {
    if (k.attention_gradient()) {
      ++gradients;
    } else {
      EXPECT_NE(k.out_numel(), B * H * T * T) << codegen::describe(k) << all;
    }
  }
  EXPECT_EQ(gradients, 2) << all;
  // Every tile of both kernels has no buffer.
  for (const auto& k : s.kernels)
    for (int slot : k.attention_tiles)
      EXPECT_EQ(s.slots[static_cast<size_t>(slot)].numel, 0) << "tile slot " << slot << all;
}
