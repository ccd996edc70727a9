// rune::distributed's collectives on every rank of `mpirun -np 2` (each rank runs these tests in
// the same order). Each rank can compute every rank's input, so each checks the exact result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/nx.h"
#include "distributed/collectives.h"
#include "distributed/gpu/gpu_collectives.h"
#include "world.h"

namespace dist = rune::distributed;
using nx::Tensor;

namespace {
using rune_test::world;

// Rank r's input: values whose float32 sum depends on the order of the terms.
std::vector<float> input_of(int r) {
  return {r == 0 ? 1e8f : 1.0f, r == 0 ? 0.1f : 0.2f, static_cast<float>(r) - 0.5f,
          r == 0 ? -0.0f : 0.0f, std::ldexp(1.0f, -20) * static_cast<float>(r + 1)};
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
}  // namespace

TEST(Distributed, WorldHasTwoRanks) {
  ASSERT_TRUE(dist::available());
  EXPECT_EQ(world().size(), 2);
  EXPECT_GE(world().rank(), 0);
  EXPECT_LT(world().rank(), 2);
}

TEST(Distributed, AllReduceSumIsTheRankOrderFold) {
  auto comm = world();
  std::vector<float> expected = input_of(0);
  for (int r = 1; r < comm.size(); ++r) {
    auto in = input_of(r);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = expected[i] + in[i];
  }
  auto mine = input_of(comm.rank());
  Tensor x = nx::create(nx::float32, {5}, std::vector<double>(mine.begin(), mine.end()));
  Tensor s = dist::all_reduce(comm, x);
  EXPECT_EQ(s.shape(), nx::Shape({5}));
  EXPECT_TRUE(same_bits(nx::to_vector<float>(s), expected));
  // Mean: the same sum, divided by the world size.
  for (float& e : expected) e = e / static_cast<float>(comm.size());
  EXPECT_TRUE(
      same_bits(nx::to_vector<float>(dist::all_reduce(comm, x, dist::ReduceOp::Mean)), expected));
}

TEST(Distributed, AllReduceMaxAndIntegers) {
  auto comm = world();
  const int r = comm.rank();
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = nx::create(nx::float64, {3}, {r == 0 ? 1.0 : 2.0, r == 0 ? nan : 5.0, -1.0 * r});
  auto m = nx::to_vector<double>(dist::all_reduce(comm, x, dist::ReduceOp::Max));
  EXPECT_EQ(m[0], 2.0);
  EXPECT_TRUE(std::isnan(m[1]));  // NaN wins, as nx::maximum
  EXPECT_EQ(m[2], 0.0);
  // Integer sums wrap as int64 arithmetic does.
  Tensor i = nx::create(nx::int64, {2}, {r == 0 ? 9.0 : 10.0, 3.0});
  auto s = nx::to_vector<int64_t>(dist::all_reduce(comm, i));
  EXPECT_EQ(s, (std::vector<int64_t>{19, 6}));
}

TEST(Distributed, LargeAllReduceCoversEveryChunk) {
  auto comm = world();
  const int64_t n = 100003;  // not a multiple of the world size: chunks of unequal length
  Tensor x = nx::cast(nx::iota({n}, 0), nx::float32) + comm.rank() * 1000.0;
  auto s = nx::to_vector<float>(dist::all_reduce(comm, x));
  for (int64_t i = 0; i < n; i += 997)
    ASSERT_EQ(s[i], static_cast<float>(i) + static_cast<float>(i + 1000)) << i;
  ASSERT_EQ(s[n - 1], static_cast<float>(n - 1) + static_cast<float>(n - 1 + 1000));
}

TEST(Distributed, AllGatherReduceScatterBroadcast) {
  auto comm = world();
  const int r = comm.rank();
  const double base = 10.0 * r;
  Tensor x = nx::create(nx::int32, {2, 2}, {base, base + 1, base + 2, base + 3});
  Tensor g = dist::all_gather(comm, x);
  EXPECT_EQ(g.shape(), nx::Shape({2, 2, 2}));
  EXPECT_EQ(nx::to_vector<int32_t>(g), (std::vector<int32_t>{0, 1, 2, 3, 10, 11, 12, 13}));
  // reduce_scatter: the sum is [[10, 12], [14, 16]]; rank r gets row r.
  Tensor rs = dist::reduce_scatter(comm, x);
  EXPECT_EQ(rs.shape(), nx::Shape({1, 2}));
  const std::vector<int32_t> row =
      r == 0 ? std::vector<int32_t>{10, 12} : std::vector<int32_t>{14, 16};
  EXPECT_EQ(nx::to_vector<int32_t>(rs), row);
  Tensor b = dist::broadcast(comm, x, 1);
  EXPECT_EQ(nx::to_vector<int32_t>(b), (std::vector<int32_t>{10, 11, 12, 13}));
}

TEST(Distributed, BadArgumentsRaiseNamingTheApi) {
  auto comm = world();
  Tensor x = nx::create(nx::float32, {3}, {1, 2, 3});
  try {
    dist::reduce_scatter(comm, x);
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("rune::distributed::reduce_scatter: float32 [3]"),
              std::string::npos)
        << e.what();
  }
  try {
    dist::all_reduce(comm, nx::create(nx::int32, {1}, {1}), dist::ReduceOp::Mean);
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("mean of int32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dist::broadcast(comm, x, 2), dist::distributed_error);
  // The argument is unchanged by a failing call.
  EXPECT_EQ(nx::to_vector<float>(x), (std::vector<float>{1, 2, 3}));
}

// The step before ncclCommInitRank: rank 0's unique id on every rank (no GPU needed for it).
TEST(Distributed, GpuUniqueIdIsRankZerosOnEveryRank) {
  auto comm = world();
  // Every rank runs on this machine: the library is there for all of them or for none.
  if (!dist::gpu_collective_library(dist::GpuCollectives::Nccl).error.empty())
    GTEST_SKIP() << "NCCL is not installed";
  dist::GpuUniqueId id = dist::gpu_collective_unique_id(comm, dist::GpuCollectives::Nccl);
  EXPECT_NE(id, dist::GpuUniqueId{});
  std::vector<double> bytes(id.begin(), id.end());
  Tensor all = dist::all_gather(comm, nx::create(nx::uint8, {128}, bytes));
  auto got = nx::to_vector<uint8_t>(all);
  for (int r = 1; r < comm.size(); ++r)
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + 128, got.begin() + 128 * r)) << r;
}
