// NCCL on a real CUDA device (tools/gpu-check): the GPU communicator of one device, made both
// ways (ncclCommInitAll; ncclCommInitRank through a host communicator, a world of 1 over TCP),
// its collectives eagerly and inside rune::jit, folded and native, against the host's bits.
// One GPU allows a world of one rank only (NCCL refuses two ranks on one device), so the rank
// order itself is tested with the fake NCCL (test_nccl_collectives.cpp). Skips without a CUDA
// device or without libnccl.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "core/io_internal.h"
#include "distributed/collectives.h"
#include "distributed/gpu/gpu_communicator_impl.h"
#include "runtime/gpu/context.h"
#include "trace/rune.h"

namespace dist = rune::distributed;
using nx::Tensor;

namespace {

const nx::Device kCuda = nx::Device::parse("CUDA:0", "test");

std::string why_skip() {
  std::string why = runtime::gpu::unavailable_reason(kCuda);
  if (!why.empty()) return "no CUDA device: " + why;
  const auto& lib = dist::gpu_collective_library(dist::GpuCollectives::Nccl);
  return lib.error.empty() ? "" : "no NCCL: " + lib.error;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         nx::io::read_bytes(a, "test") == nx::io::read_bytes(b, "test");
}

Tensor operand() {
  return nx::place(nx::create(nx::float32, {2, 3}, {1.5, -0.0, 3e8, -7.25, 1e-8, 2.0}), kCuda);
}

void check_world_of_one(const dist::GpuCommunicator& g) {
  Tensor x = operand();
  EXPECT_TRUE(same_bits(dist::all_reduce(g, x), x));
  EXPECT_TRUE(same_bits(dist::all_reduce(g, x, dist::ReduceOp::Mean), x / 1.0));
  EXPECT_TRUE(same_bits(dist::all_reduce(g, x, dist::ReduceOp::Max), x));
  EXPECT_TRUE(same_bits(dist::all_gather(g, x), nx::reshape(x, {1, 2, 3})));
  EXPECT_TRUE(same_bits(dist::reduce_scatter(g, x), x));
  EXPECT_TRUE(same_bits(dist::broadcast(g, x), x));
  auto f = rune::jit([g](const Tensor& v) { return dist::all_reduce(g, v * 2.0) + 1.0; });
  Tensor y = f(x);
  EXPECT_EQ(y.device(), kCuda);
  EXPECT_TRUE(same_bits(y, x * 2.0 + 1.0));
}

}  // namespace

TEST(NcclDevice, CommInitAllOfOneDevice) {
  if (auto why = why_skip(); !why.empty()) GTEST_SKIP() << why;
  auto comms = dist::gpu_communicators({kCuda});
  check_world_of_one(comms[0]);
  auto r = dist::all_reduce(comms, {operand()});
  EXPECT_TRUE(same_bits(r[0], operand()));
}

TEST(NcclDevice, NativeReductionsOfOneDevice) {
  if (auto why = why_skip(); !why.empty()) GTEST_SKIP() << why;
  auto comms = dist::gpu_communicators({kCuda}, /*native_reductions=*/true);
  check_world_of_one(comms[0]);
}

TEST(NcclDevice, CommInitRankThroughAHostCommunicator) {
  if (auto why = why_skip(); !why.empty()) GTEST_SKIP() << why;
  const std::string addr = "127.0.0.1:" + std::to_string(30000 + getpid() % 20000);
  setenv("RUNE_RANK", "0", 1);
  setenv("RUNE_WORLD_SIZE", "1", 1);
  setenv("RUNE_MASTER_ADDR", addr.c_str(), 1);
  dist::Communicator comm = dist::init();
  check_world_of_one(dist::gpu_communicator(comm, kCuda));
  Tensor x = operand();  // and implicitly, through the host communicator's collectives
  EXPECT_TRUE(same_bits(dist::all_reduce(comm, x), x));
}
