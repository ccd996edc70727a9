// Collectives on traced tensors on 2 ranks: inside rune::jit each is one step of the compiled
// program with the bits of the eager call between compiled pieces; rune::grad differentiates
// them (docs/distributed.md "Collectives under jit and grad").
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "core/nx.h"
#include "distributed/collectives.h"
#include "trace/rune.h"
#include "world.h"

namespace dist = rune::distributed;
using nx::Tensor;

namespace {
using rune_test::world;

// Rank r's input: float32 values whose sum over ranks depends on rounding.
Tensor input_of(int r, int64_t n = 6) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(r == 0 ? 1e8 / (i + 1) + 0.1 * i : 0.3 + i * 1.7 - 1e-3 * r);
  return nx::create(nx::float32, {n}, v);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  auto x = nx::to_vector<float>(a), y = nx::to_vector<float>(b);
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(JitCollectives, EveryCollectiveEqualsTheEagerCallBetweenCompiledPieces) {
  auto comm = world();
  Tensor x = input_of(comm.rank());
  auto all = rune::jit([comm](const Tensor& v) {
    Tensor a = v * 3.0 + 0.5;  // fused work before and after each collective
    return std::make_tuple(
        dist::all_reduce(comm, a) * 2.0, dist::all_reduce(comm, a, dist::ReduceOp::Mean) - 1.0,
        dist::all_reduce(comm, a, dist::ReduceOp::Max), dist::all_gather(comm, a) + 1.0,
        dist::reduce_scatter(comm, a), dist::broadcast(comm, a, 1) * a);
  });
  auto [sum, mean, max, gathered, scattered, bcast] = all(x);
  auto pre = rune::jit([](const Tensor& v) { return v * 3.0 + 0.5; });
  Tensor a = pre(x);
  EXPECT_TRUE(same_bits(
      sum, rune::jit([](const Tensor& s) { return s * 2.0; })(dist::all_reduce(comm, a))));
  EXPECT_TRUE(same_bits(mean, rune::jit([](const Tensor& s) { return s - 1.0; })(
                                  dist::all_reduce(comm, a, dist::ReduceOp::Mean))));
  EXPECT_TRUE(same_bits(max, dist::all_reduce(comm, a, dist::ReduceOp::Max)));
  EXPECT_TRUE(same_bits(
      gathered, rune::jit([](const Tensor& s) { return s + 1.0; })(dist::all_gather(comm, a))));
  EXPECT_TRUE(same_bits(scattered, dist::reduce_scatter(comm, a)));
  EXPECT_TRUE(same_bits(bcast, dist::broadcast(comm, a, 1) * a));
  // And the rank-order sum itself, computed here from both ranks' inputs.
  Tensor a0 = pre(input_of(0)), a1 = pre(input_of(1));
  EXPECT_TRUE(same_bits(sum, (a0 + a1) * 2.0));
  EXPECT_EQ(gathered.shape(), nx::Shape({2, 6}));
  EXPECT_EQ(scattered.shape(), nx::Shape({3}));
  // One trace: the collectives are steps of the one program, not calls made while tracing.
  all(x);
  EXPECT_EQ(all.traces(), 1u);
}

TEST(JitCollectives, IndependentCollectivesKeepTheirResults) {
  // Two collectives of one shape whose results come back in the other order: every rank runs
  // them in the same order, so each result is the sum of its own operands.
  auto comm = world();
  const double r = comm.rank();
  auto f = rune::jit([comm](const Tensor& u, const Tensor& v) {
    Tensor a = dist::all_reduce(comm, u);
    Tensor b = dist::all_reduce(comm, v);
    return std::make_pair(b, a);
  });
  auto [b, a] = f(nx::full(nx::float32, {4}, 1.0 + r), nx::full(nx::float32, {4}, 10.0 + r));
  EXPECT_EQ(nx::to_vector<float>(a), std::vector<float>(4, 3.0f));
  EXPECT_EQ(nx::to_vector<float>(b), std::vector<float>(4, 21.0f));
}

TEST(JitCollectives, RetracesOnANewShape) {
  auto comm = world();
  auto f = rune::jit([comm](const Tensor& v) { return dist::all_reduce(comm, v * 2.0); });
  for (int64_t n : {5, 7, 5}) {
    Tensor x = input_of(comm.rank(), n);
    Tensor expected = input_of(0, n) * 2.0 + input_of(1, n) * 2.0;
    EXPECT_TRUE(same_bits(f(x), expected)) << n;
  }
  EXPECT_EQ(f.traces(), 2u);
}

TEST(JitCollectives, GradThroughAllReduceIsTheAnalyticResult) {
  // Each rank's loss L_r = sum(all_reduce(w * x_r) * c_r). As JAX's psum under pmap, the
  // cotangent of w * x_r is all_reduce(c) = c_0 + c_1, so dL_r/dw = (c_0 + c_1) * x_r; with
  // Mean it is ((c_0 + c_1) / 2) * x_r.
  auto comm = world();
  const int r = comm.rank();
  auto x_of = [](int q) { return nx::create(nx::float32, {3}, {1.5 + q, -2.0, 0.25 * (q + 1)}); };
  auto c_of = [](int q) { return nx::create(nx::float32, {3}, {3.0 - q, 0.5 + q, 7.0}); };
  Tensor w = nx::create(nx::float32, {3}, {0.3, 1.1, -4.0});
  Tensor x = x_of(r), c = c_of(r);
  for (auto op : {dist::ReduceOp::Sum, dist::ReduceOp::Mean}) {
    auto loss = [&](const Tensor& p) { return nx::sum(dist::all_reduce(comm, p * x, op) * c); };
    Tensor csum = c_of(0) + c_of(1);
    Tensor expected = (op == dist::ReduceOp::Sum ? csum : csum / 2.0) * x;
    EXPECT_TRUE(same_bits(rune::grad(loss, w), expected));  // eager
    EXPECT_TRUE(same_bits(rune::jit([&](const Tensor& p) { return rune::grad(loss, p); })(w),
                          expected));  // compiled
  }
  // all_gather's vjp is reduce_scatter: L_r = sum(all_gather(w * x_r) * C_r), C_r [2, 3]:
  // dL_r/dw = (C_0[r] + C_1[r]) * x_r.
  auto C_of = [](int q) {
    return nx::reshape(nx::cast(nx::iota({6}, 0), nx::float32) + q, {2, 3});
  };
  auto gloss = [&](const Tensor& p) { return nx::sum(dist::all_gather(comm, p * x) * C_of(r)); };
  Tensor expected = (nx::index(C_of(0), 0, r) + nx::index(C_of(1), 0, r)) * x;
  EXPECT_TRUE(same_bits(rune::grad(gloss, w), expected));
  // reduce_scatter's vjp is all_gather: L_r = sum(reduce_scatter(v) * d_r), v [2, 3]:
  // dL_r/dv = [d_0; d_1] on every rank.
  Tensor v = nx::reshape(x_of(r) * 1.0, {1, 3});
  v = nx::concatenate({v, v}, 0);
  auto d_of = [](int q) { return nx::create(nx::float32, {1, 3}, {1.0 + q, 2.0, -q * 1.0}); };
  auto sloss = [&](const Tensor& p) { return nx::sum(dist::reduce_scatter(comm, p) * d_of(r)); };
  EXPECT_TRUE(same_bits(rune::grad(sloss, v), nx::concatenate({d_of(0), d_of(1)}, 0)));
  // broadcast's vjp: the root gets the sum of every rank's cotangent, the others zero.
  auto bloss = [&](const Tensor& p) { return nx::sum(dist::broadcast(comm, p, 1) * c); };
  EXPECT_TRUE(same_bits(rune::grad(bloss, w), r == 1 ? c_of(0) + c_of(1) : nx::zeros_like(w)));
}

TEST(JitCollectives, MaxHasNoGradientAndVmapNoRule) {
  auto comm = world();
  Tensor w = nx::create(nx::float32, {2}, {1, 2});
  auto loss = [&](const Tensor& p) {
    return nx::sum(dist::all_reduce(comm, p, dist::ReduceOp::Max));
  };
  std::string m = message_of([&] { rune::grad(loss, w); });
  EXPECT_NE(m.find("rune::distributed::all_reduce: ReduceOp::Max has no gradient"),
            std::string::npos)
      << m;
  m = message_of(
      [&] { rune::vmap([&](const Tensor& p) { return dist::all_reduce(comm, p); })(w); });
  EXPECT_NE(m.find("rune::vmap: rune::distributed::all_reduce cannot be batched"),
            std::string::npos)
      << m;
  // Neither call reached the other rank: the next collective still lines up.
  EXPECT_EQ(nx::to_vector<float>(dist::all_reduce(comm, w)), (std::vector<float>{2, 4}));
}
