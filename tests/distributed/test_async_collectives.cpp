// Split collectives on 2 ranks (distributed/async_collectives.h): all_reduce_start and wait give
// the blocking all_reduce's bits, eagerly and as two steps of a rune::jit program, with several
// in flight and mixed with blocking collectives; misuse is named; a dropped handle leaves
// nothing behind. data_parallel's overlapped buckets give the bits of the path without overlap.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "core/io_internal.h"
#include "core/nx.h"
#include "distributed/async_collectives.h"
#include "distributed/data_parallel.h"
#include "trace/rune.h"
#include "world.h"

namespace dist = rune::distributed;
using nx::Tensor;

namespace {
using rune_test::world;

// Rank r's input: values whose float sum over ranks depends on rounding.
Tensor input_of(int r, nx::DType t, int64_t n = 7) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(r == 0 ? 1e6 / (i + 1) + 0.1 * i : 0.3 + i * 1.7 - 1e-3 * r);
  return nx::cast(nx::create(nx::float64, {n}, v), t);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         nx::io::read_bytes(a, "test") == nx::io::read_bytes(b, "test");
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

struct Mlp {
  Tensor w1, b1, w2, b2;
};
}  // namespace
RUNE_TREE(Mlp, w1, b1, w2, b2)

TEST(AsyncCollectives, StartThenWaitGivesTheBlockingBits) {
  auto comm = world();
  const int r = comm.rank();
  for (nx::DType t : {nx::float32, nx::float64, nx::float16, nx::bfloat16, nx::int32})
    for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Mean, dist::ReduceOp::Max}) {
      if (op == dist::ReduceOp::Mean && t == nx::int32) continue;
      Tensor x = input_of(r, t);
      Tensor want = dist::all_reduce(comm, x, op);
      dist::PendingCollective h = dist::all_reduce_start(comm, x, op);
      EXPECT_TRUE(same_bytes(h.wait(), want)) << ir::name(t) << " op " << static_cast<int>(op);
    }
}

TEST(AsyncCollectives, SeveralInFlightMixedWithBlockingCallsKeepTheirOrder) {
  auto comm = world();
  const int r = comm.rank();
  Tensor a = input_of(r, nx::float32, 5), b = input_of(r, nx::float32, 1000),
         c = input_of(r, nx::float64, 3);
  Tensor wa = dist::all_reduce(comm, a), wb = dist::all_reduce(comm, b, dist::ReduceOp::Mean),
         wc = dist::all_reduce(comm, c, dist::ReduceOp::Max), wg = dist::all_gather(comm, a);
  dist::PendingCollective ha = dist::all_reduce_start(comm, a);
  dist::PendingCollective hb = dist::all_reduce_start(comm, b, dist::ReduceOp::Mean);
  // A blocking collective issued after two starts moves its messages after theirs.
  Tensor g = dist::all_gather(comm, a);
  dist::PendingCollective hc = dist::all_reduce_start(comm, c, dist::ReduceOp::Max);
  // Waited for in another order than started.
  EXPECT_TRUE(same_bytes(hc.wait(), wc));
  EXPECT_TRUE(same_bytes(g, wg));
  EXPECT_TRUE(same_bytes(hb.wait(), wb));
  EXPECT_TRUE(same_bytes(ha.wait(), wa));
  EXPECT_EQ(dist::detail::collectives_in_flight(comm), 0u);
}

TEST(AsyncCollectives, InsideJitTheTwoHalvesAreStepsWithTheEagerBits) {
  auto comm = world();
  Tensor x = input_of(comm.rank(), nx::float32, 64);
  auto f = rune::jit([comm](const Tensor& v) {
    dist::PendingCollective h = dist::all_reduce_start(comm, v * 3.0 + 0.5);
    Tensor local = nx::sin(v) * 2.0;  // work between the start and the wait
    return h.wait() + local;
  });
  auto pre = rune::jit([](const Tensor& v) { return v * 3.0 + 0.5; });
  auto post = rune::jit([](const Tensor& s, const Tensor& v) { return s + nx::sin(v) * 2.0; });
  Tensor between = post(dist::all_reduce(comm, pre(x)), x);
  Tensor got = f(x);
  EXPECT_TRUE(same_bytes(got, between));
  EXPECT_TRUE(same_bytes(f(x), got));  // the compiled program again: a new ticket, same bits
  EXPECT_EQ(dist::detail::collectives_in_flight(comm), 0u);
}

TEST(AsyncCollectives, MisuseIsNamed) {
  auto comm = world();
  Tensor x = input_of(comm.rank(), nx::float32);
  dist::PendingCollective h = dist::all_reduce_start(comm, x);
  h.wait();
  EXPECT_EQ(message_of([&] { h.wait(); }),
            "rune::distributed::all_reduce: the handle holds no collective (waited for already, "
            "or default-constructed)");
  EXPECT_EQ(message_of([&] {
              dist::all_reduce_start(comm, nx::cast(x, nx::int32), dist::ReduceOp::Mean);
            }),
            "rune::distributed::all_reduce: mean of int32 (mean needs a float dtype)");
  EXPECT_EQ(message_of([&] { dist::all_reduce_start(comm, Tensor()); }),
            "rune::distributed::all_reduce: the tensor is undefined");
  std::string m = message_of([&] {
    rune::grad([&](const Tensor& v) { return nx::sum(dist::all_reduce_start(comm, v).wait()); }, x);
  });
  EXPECT_NE(m.find("rune::distributed::all_reduce: a split collective (start / wait) has no "
                   "gradient"),
            std::string::npos)
      << m;
  EXPECT_EQ(dist::detail::collectives_in_flight(comm), 0u);
}

TEST(AsyncCollectives, ADroppedHandleRunsItsCollectiveAndLeavesNothingBehind) {
  auto comm = world();
  Tensor x = input_of(comm.rank(), nx::float32, 100);
  try {
    dist::PendingCollective h = dist::all_reduce_start(comm, x);
    throw std::runtime_error("between the start and the wait");
  } catch (const std::runtime_error&) {
  }
  // The dropped collective still moved its messages (the other rank expects them): the next
  // call lines up, and the ticket is gone.
  Tensor y = input_of(comm.rank(), nx::float32, 3);
  EXPECT_TRUE(same_bytes(dist::all_reduce_start(comm, y).wait(), dist::all_reduce(comm, y)));
  EXPECT_EQ(dist::detail::collectives_in_flight(comm), 0u);
}

TEST(DataParallel, OverlappedBucketsGiveTheBitsOfTheStepWithoutOverlap) {
  auto comm = world();
  const int w = comm.size();
  const int64_t hidden = 48;
  Tensor x = nx::randn(nx::key(21), nx::float32, {16 * w, 5});
  Tensor y = nx::randn(nx::key(22), nx::float32, {16 * w, 3});
  Mlp m{nx::randn(nx::key(23), nx::float32, {5, hidden}), nx::zeros(nx::float32, {hidden}),
        nx::randn(nx::key(24), nx::float32, {hidden, 3}) * 0.1, nx::zeros(nx::float32, {3})};
  m = dist::broadcast_tree(comm, m);
  auto step = [](const Mlp& p, const Tensor& xs, const Tensor& ys) {
    auto loss = [&](const Mlp& q) {
      Tensor e = nx::matmul(nx::tanh(nx::matmul(xs, q.w1) + q.b1), q.w2) + q.b2 - ys;
      return nx::mean(e * e);
    };
    return rune::value_and_grad(loss, p);
  };
  auto dp = rune::data_parallel(step, comm);
  EXPECT_TRUE(dp.overlap());
  for (size_t cap : {size_t{1}, size_t{200}, size_t{25} << 20}) {
    dp.set_bucket_bytes(cap);
    dp.set_overlap(true);
    auto [lo, go] = dp(m, x, y);
    dp.set_overlap(false);
    auto [lb, gb] = dp(m, x, y);
    EXPECT_TRUE(same_bytes(lo, lb)) << cap;
    auto [a, da] = rune::tree_flatten(go);
    auto [b, db] = rune::tree_flatten(gb);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bytes(a[i], b[i])) << cap << " " << i;
  }
  EXPECT_EQ(dp.overlapped_traces(), 1u);  // a new bucket size is a new compiled step
  dp.set_overlap(true);
  dp(m, x, y);
  EXPECT_EQ(dp.overlapped_traces(), 1u);  // and the same size reuses it
  EXPECT_EQ(dp.traces(), 1u);
  EXPECT_EQ(dist::detail::collectives_in_flight(comm), 0u);
}
