// rune::data_parallel on 2 ranks: the reduced gradients have the bits one process gets from the
// same compiled step on each shard, summed in rank order and divided by the world size; every
// rank holds the same bits.
#include <gtest/gtest.h>

#include <cstring>

#include "distributed/buckets.h"
#include "distributed/data_parallel.h"
#include "trace/rune.h"
#include "world.h"

namespace dist = rune::distributed;
using nx::Tensor;

struct Linear {
  Tensor w, b;
};
RUNE_TREE(Linear, w, b)

// Many tiny leaves of two dtypes: what gradient buckets are for.
struct Tiny {
  Tensor a, b, c, d, e, f;
};
RUNE_TREE(Tiny, a, b, c, d, e, f)

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

namespace {
// (loss, grads) of Tiny: float32 leaves of 4 (the loss), 12, 20, 16, 28 and 4 bytes, then one
// float64 leaf of 16 bytes; every gradient depends on the rank's shard.
auto tiny_step = [](const Tiny& m, const Tensor& x) {
  auto loss = [&](const Tiny& p) {
    Tensor s = nx::mean(x);
    return nx::sum(p.a * nx::mean(x, {0})) + nx::sum(p.b * p.b) * s + nx::sum(p.c * p.c * p.c) * s +
           nx::sum(nx::sin(p.d)) * s + p.e * p.e * s +
           nx::cast(nx::sum(p.f * p.f), nx::float32) * s;
  };
  return rune::value_and_grad(loss, m);
};

bool same_bits_any(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.dtype() == nx::float64) {
    auto x = nx::to_vector<double>(a), y = nx::to_vector<double>(b);
    return std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
  }
  return same_bits(a, b);
}
}  // namespace

TEST(DataParallel, BucketPlanPacksEachDtypeInLeafOrderUpToTheCap) {
  using dist::detail::LeafSize;
  const std::vector<LeafSize> leaves{{nx::float32, 4},  {nx::float32, 12}, {nx::float32, 20},
                                     {nx::float32, 16}, {nx::float32, 28}, {nx::float32, 4},
                                     {nx::float64, 16}};
  using Plan = std::vector<std::vector<size_t>>;
  EXPECT_EQ(dist::detail::plan_buckets(leaves, 32), (Plan{{0, 1}, {2}, {3}, {4, 5}, {6}}));
  EXPECT_EQ(dist::detail::plan_buckets(leaves, 1), (Plan{{0}, {1}, {2}, {3}, {4}, {5}, {6}}));
  EXPECT_EQ(dist::detail::plan_buckets(leaves, dist::detail::kDefaultBucketBytes),
            (Plan{{0, 1, 2, 3, 4, 5}, {6}}));
  // Dtypes in order of first appearance, each dtype's leaves in order.
  const std::vector<LeafSize> mixed{{nx::float64, 8}, {nx::float32, 4}, {nx::float64, 8}};
  EXPECT_EQ(dist::detail::plan_buckets(mixed, 100), (Plan{{0, 2}, {1}}));
}

TEST(DataParallel, BucketsGiveThePerLeafBitsWithOneCollectivePerBucket) {
  auto comm = world();
  const int w = comm.size();
  auto k = nx::split(nx::key(11));
  Tensor x = nx::randn(k.first, nx::float32, {4 * w, 3});
  Tiny m{nx::create(nx::float32, {3}, {0.3, -0.7, 1.1}),
         nx::randn(k.second, nx::float32, {5}),
         nx::create(nx::float32, {2, 2}, {0.5, -1.5, 2.5, 0.25}),
         nx::create(nx::float32, {7}, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}),
         nx::create(nx::float32, {}, {1.75}),
         nx::create(nx::float64, {2}, {0.125, -3.0})};
  m = dist::broadcast_tree(comm, m);
  auto dp = rune::data_parallel(tiny_step, comm);
  EXPECT_EQ(dp.bucket_bytes(), size_t{25} << 20);
  // The reference: this rank's compiled shard step, each leaf all_reduced on its own.
  auto local = dp.local_step(m, nx::slice(x, {nx::Slice{comm.rank() * 4, comm.rank() * 4 + 4}}));
  auto [local_leaves, def] = rune::tree_flatten(local);
  std::vector<Tensor> want;
  for (const Tensor& leaf : local_leaves)
    want.push_back(dist::all_reduce(comm, leaf, dist::ReduceOp::Mean));
  // Caps and the buckets they make of the leaves (BucketPlanPacks... above): float32 then float64.
  for (auto [cap, buckets] : std::vector<std::pair<size_t, uint64_t>>{
           {32, 5}, {1, 7}, {dist::detail::kDefaultBucketBytes, 2}}) {
    dp.set_bucket_bytes(cap);
    const uint64_t before = dist::detail::collectives_started();
    auto got = dp(m, x);
    EXPECT_EQ(dist::detail::collectives_started() - before, buckets) << "cap " << cap;
    auto [got_leaves, got_def] = rune::tree_flatten(got);
    ASSERT_EQ(got_leaves.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(same_bits_any(got_leaves[i], want[i])) << "cap " << cap << ", leaf " << i;
  }
  EXPECT_EQ(dp.traces(), 1u);
}

TEST(DataParallel, ABucketSizeOfZeroIsNamed) {
  auto dp = rune::data_parallel(grad_step, world());
  try {
    dp.set_bucket_bytes(0);
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "rune::DataParallel::set_bucket_bytes: 0 bytes (the bucket size must be positive)");
  }
  EXPECT_EQ(dp.bucket_bytes(), size_t{25} << 20);  // unchanged
}
