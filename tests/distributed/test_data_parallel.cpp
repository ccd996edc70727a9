// rune::data_parallel on 2 ranks: the reduced gradients have the bits one process gets from the
// same compiled step on each shard, summed in rank order and divided by the world size; every
// rank holds the same bits.
#include <gtest/gtest.h>

#include <cstring>

#include "distributed/data_parallel.h"
#include "trace/rune.h"
#include "world.h"

namespace dist = rune::distributed;
using nx::Tensor;

struct Linear {
  Tensor w, b;
};
RUNE_TREE(Linear, w, b)

namespace {

using rune_test::world;

bool same_bits(const Tensor& a, const Tensor& b) {
  auto x = nx::to_vector<float>(a), y = nx::to_vector<float>(b);
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

auto grad_step = [](const Linear& m, const Tensor& x, const Tensor& y) {
  auto loss = [&](const Linear& p) {
    Tensor e = nx::matmul(x, p.w) + p.b - y;
    return nx::mean(e * e);
  };
  return rune::value_and_grad(loss, m);
};
}  // namespace

TEST(DataParallel, EqualsTheRankOrderSumOfShardsBitForBit) {
  auto comm = world();
  const int w = comm.size();
  auto k = nx::split(nx::key(7));
  Tensor x = nx::randn(k.first, nx::float32, {8 * w, 3});
  Tensor y = nx::randn(k.second, nx::float32, {8 * w, 1});
  Linear m{nx::create(nx::float32, {3, 1}, {0.3, -0.7, 1.1}), nx::create(nx::float32, {1}, {0.05})};
  m = dist::broadcast_tree(comm, m);
  auto dp = rune::data_parallel(grad_step, comm);
  auto [loss, g] = dp(m, x, y);
  // The reference: the same compiled step on every shard, summed left to right, divided by w.
  std::pair<Tensor, Linear> sum;
  for (int r = 0; r < w; ++r) {
    auto part = dp.local_step(m, nx::slice(x, {nx::Slice{r * 8, (r + 1) * 8}}),
                              nx::slice(y, {nx::Slice{r * 8, (r + 1) * 8}}));
    sum = r == 0 ? part
                 : std::make_pair(sum.first + part.first, Linear{sum.second.w + part.second.w,
                                                                 sum.second.b + part.second.b});
  }
  EXPECT_TRUE(same_bits(loss, sum.first / w));
  EXPECT_TRUE(same_bits(g.w, sum.second.w / w));
  EXPECT_TRUE(same_bits(g.b, sum.second.b / w));
  // Every rank holds the same bits.
  Tensor all = dist::all_gather(comm, g.w);
  for (int r = 0; r < w; ++r) EXPECT_TRUE(same_bits(nx::index(all, 0, r), g.w)) << r;
  EXPECT_EQ(dp.traces(), 1u);  // the shard step compiled once
}

TEST(DataParallel, ABatchThatDoesNotSplitEvenlyIsNamed) {
  auto comm = world();
  auto dp = rune::data_parallel(grad_step, comm);
  Linear m{nx::zeros(nx::float32, {3, 1}), nx::zeros(nx::float32, {1})};
  try {
    dp(m, nx::zeros(nx::float32, {5, 3}), nx::zeros(nx::float32, {5, 1}));
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("rune::data_parallel: batch float32 [5, 3]: the leading "
                                         "axis must be a multiple of the world size 2"),
              std::string::npos)
        << e.what();
  }
}
