// NCCL collectives on GPU devices without a GPU: the fake CUDA driver with 3 devices (host memory)
// and the fake NCCL (tests/distributed/fake_nccl.cpp), loaded through rune's own dlopen path
// (RUNE_NCCL_LIBRARY). The fake's ncclAllReduce / ncclReduceScatter add in REVERSE rank order,
// so rank-order bits can only come from rune's fold kernel; each test's inputs tell the two
// orders apart (checked against the native path, which must differ).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "core/io_internal.h"
#include "distributed/collectives.h"
#include "distributed/data_parallel.h"
#include "distributed/gpu/gpu_communicator_impl.h"
#include "gpu_runtime/fake_driver.h"
#include "runtime/gpu/context.h"
#include "trace/rune.h"

namespace dist = rune::distributed;
using nx::Tensor;

namespace {

// Before any test: three fake devices, the fake NCCL as the library rune loads.
const bool kSetUp = [] {
  fake_gpu::devices() = 3;
  fake_gpu::install_fake_cuda_unless_hooked();
  setenv("RUNE_NCCL_LIBRARY", FAKE_NCCL_PATH, 1);
  return true;
}();

nx::Device cuda(int i) { return nx::Device::parse("CUDA:" + std::to_string(i), "test"); }

std::vector<nx::Device> devices(int n) {
  std::vector<nx::Device> d;
  for (int i = 0; i < n; ++i) d.push_back(cuda(i));
  return d;
}

// The fake's test hooks, from the copy rune loaded.
int nccl_calls(const char* name) {
  dist::gpu_collective_library(dist::GpuCollectives::Nccl);  // loaded (once per process)
  void* h = dlopen(FAKE_NCCL_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return -1;
  auto fn = reinterpret_cast<int (*)(const char*)>(dlsym(h, "fake_nccl_calls"));
  return fn ? fn(name) : -1;
}
void* last_stream(const dist::GpuCommunicator& g) {
  void* h = dlopen(FAKE_NCCL_PATH, RTLD_NOW | RTLD_NOLOAD);
  auto fn = reinterpret_cast<void* (*)(void*)>(dlsym(h, "fake_nccl_last_stream"));
  return fn(g.impl("test").comm);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  return nx::io::read_bytes(a, "test") == nx::io::read_bytes(b, "test");
}

// The host path's fold (distributed/host/collective_kernels.cpp) on the host: left to right in the
// dtype (16-bit floats: in float32, rounded once), Mean divided by the count.
Tensor host_fold(const std::vector<Tensor>& xs, dist::ReduceOp op) {
  const nx::DType t = xs[0].dtype();
  const nx::DType wide = ir::is_half(t) ? nx::float32 : t;
  Tensor acc = nx::cast(nx::place(xs[0], nx::Device::cpu()), wide);
  for (size_t i = 1; i < xs.size(); ++i) {
    Tensor x = nx::cast(nx::place(xs[i], nx::Device::cpu()), wide);
    acc = op == dist::ReduceOp::Max ? nx::maximum(acc, x) : acc + x;
  }
  if (op == dist::ReduceOp::Mean) acc = acc / static_cast<double>(xs.size());
  return nx::cast(acc, t);
}

// Per rank r of 3: values whose float32 sum depends on the order of the terms.
std::vector<Tensor> inputs(nx::DType t, int n) {
  // Columns: small terms, ordinary values, cancellation (float32 sums differ by order), a NaN
  // (wins in max and sum), signed zeros (max and sum give +0).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>> v = {{1.0, 0.1, -3.3, 1e8, 0.0, -0.0},
                                        {1e-8, 0.2, 2.3, -1e8, nan, -0.0},
                                        {1e-8, 0.3, 1.3, 1.0, -0.0, 0.0}};
  if (t == nx::float16)  // 1 + 2^-11 + 2^-11: rounding once differs from rounding per step
    v = {{1.0, 0.1, -3.3, 1, 0, -0.0},
         {std::ldexp(1.0, -11), 0.2, 2, 1, nan, -0.0},
         {std::ldexp(1.0, -11), 0.3, 1, 1, -0.0, 0}};
  if (t == nx::int32) v = {{2147483647, 1, -5, 0, 7, 8}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}};
  std::vector<Tensor> xs;
  for (int r = 0; r < n; ++r)
    xs.push_back(nx::place(nx::create(t, {6}, v[static_cast<size_t>(r)]), cuda(r)));
  return xs;
}

}  // namespace

TEST(NcclCollectives, GroupedCollectivesHaveTheHostPathsBits) {
  auto comms = dist::gpu_communicators(devices(3));
  ASSERT_EQ(comms.size(), 3u);
  for (nx::DType t : {nx::float32, nx::float64, nx::float16, nx::int32}) {
    auto xs = inputs(t, 3);
    for (auto op : {dist::ReduceOp::Sum, dist::ReduceOp::Mean, dist::ReduceOp::Max}) {
      if (op == dist::ReduceOp::Mean && t == nx::int32) continue;
      auto r = dist::all_reduce(comms, xs, op);
      Tensor want = host_fold(xs, op);
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(r[static_cast<size_t>(i)].device(), cuda(i));
        EXPECT_TRUE(same_bits(r[static_cast<size_t>(i)], want))
            << ir::name(t) << " op " << static_cast<int>(op) << " rank " << i << ": "
            << nx::to_string(r[static_cast<size_t>(i)]) << " vs " << nx::to_string(want);
      }
    }
  }
  // The stream each device's last call was queued on is that device's stream.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(last_stream(comms[static_cast<size_t>(i)]),
              runtime::gpu::context(cuda(i), "test").handle());
}

TEST(NcclCollectives, NativeReductionsAreTheLibrarysBitsWhichDifferHere) {
  // Proves the inputs tell the orders apart: NCCL's own reduction (here the fake's reverse
  // order) gives other bits, so the rank-order bits above came from rune's fold.
  auto comms = dist::gpu_communicators(devices(3), /*native_reductions=*/true);
  auto xs = inputs(nx::float32, 3);
  const int before = nccl_calls("ncclAllReduce");
  auto r = dist::all_reduce(comms, xs);
  EXPECT_EQ(nccl_calls("ncclAllReduce"), before + 3);
  EXPECT_FALSE(same_bits(r[0], host_fold(xs, dist::ReduceOp::Sum)));
  std::vector<Tensor> reversed(xs.rbegin(), xs.rend());
  EXPECT_TRUE(same_bits(r[0], host_fold(reversed, dist::ReduceOp::Sum)));
  // Mean: NCCL's sum divided by the count.
  auto m = dist::all_reduce(comms, xs, dist::ReduceOp::Mean);
  EXPECT_TRUE(same_bits(m[1], host_fold(reversed, dist::ReduceOp::Sum) / 3.0));
  // A dtype NCCL has no type for is named.
  std::vector<Tensor> i16;
  for (int i = 0; i < 3; ++i) i16.push_back(nx::place(nx::ones(nx::int16, {2}), cuda(i)));
  try {
    dist::all_reduce(comms, i16);
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("rune::distributed::all_reduce: int16 has no NCCL data type"),
        std::string::npos)
        << e.what();
  }
}

TEST(NcclCollectives, GatherScatterAndBroadcastOnDevices) {
  auto comms = dist::gpu_communicators(devices(3));
  std::vector<Tensor> xs;
  for (int r = 0; r < 3; ++r) {
    std::vector<double> v;
    for (int j = 0; j < 6; ++j)
      v.push_back(r == 0 ? 1e8 * (j + 1) : r == 1 ? 1.0 + j : 0.5 - 1e8 * (j + 1));
    xs.push_back(nx::place(nx::create(nx::float32, {3, 2}, v), cuda(r)));
  }
  auto g = dist::all_gather(comms, xs);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(g[static_cast<size_t>(i)].shape(), (nx::Shape{3, 3, 2}));
    for (int r = 0; r < 3; ++r)
      EXPECT_TRUE(same_bits(nx::slice(g[static_cast<size_t>(i)], {nx::Slice{r, r + 1}}),
                            nx::reshape(xs[static_cast<size_t>(r)], {1, 3, 2})));
  }
  auto b = dist::broadcast(comms, xs, 1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(b[static_cast<size_t>(i)], xs[1]));
  for (auto op : {dist::ReduceOp::Sum, dist::ReduceOp::Mean}) {
    auto rs = dist::reduce_scatter(comms, xs, op);
    Tensor full = host_fold(xs, op);
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(same_bits(rs[static_cast<size_t>(i)], nx::slice(full, {nx::Slice{i, i + 1}})))
          << i << ": " << nx::to_string(rs[static_cast<size_t>(i)]);
  }
}

TEST(NcclCollectives, JitCollectivesOneThreadPerDeviceAreProgramSteps) {
  auto comms = dist::gpu_communicators(devices(3));
  auto xs = inputs(nx::float32, 3);
  std::vector<Tensor> eager(3), compiled(3), grads(3);
  const int gathers = nccl_calls("ncclAllGather");
  std::vector<std::thread> threads;
  std::string errors[3];
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      try {
        const dist::GpuCommunicator& g = comms[static_cast<size_t>(i)];
        const Tensor& x = xs[static_cast<size_t>(i)];
        auto f = rune::jit([g](const Tensor& v) {
          return dist::all_reduce(g, v * 2.0, dist::ReduceOp::Mean) + 1.0;
        });
        compiled[static_cast<size_t>(i)] = f(x);
        eager[static_cast<size_t>(i)] = dist::all_reduce(g, x * 2.0, dist::ReduceOp::Mean) + 1.0;
        // d/dw sum(all_reduce(w * x_r)) = 3 x_r on 3 ranks (the vjp is an all_reduce too).
        auto loss = [&](const Tensor& w) { return nx::sum(dist::all_reduce(g, w * x)); };
        grads[static_cast<size_t>(i)] = rune::jit([&](const Tensor& w) {
          return rune::grad(loss, w);
        })(nx::place(nx::ones(nx::float32, {6}), cuda(i)));
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) ASSERT_EQ(e, "");
  std::vector<Tensor> doubled;
  for (const Tensor& x : xs) doubled.push_back(x * 2.0);
  Tensor want = host_fold(doubled, dist::ReduceOp::Mean) + 1.0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(compiled[static_cast<size_t>(i)].device(), cuda(i));
    EXPECT_TRUE(same_bits(compiled[static_cast<size_t>(i)], want))
        << i << ": " << nx::to_string(compiled[static_cast<size_t>(i)]) << " vs "
        << nx::to_string(want);
    EXPECT_TRUE(same_bits(eager[static_cast<size_t>(i)], want)) << i;
    EXPECT_TRUE(same_bits(grads[static_cast<size_t>(i)], xs[static_cast<size_t>(i)] * 3.0)) << i;
  }
  // Each rank gathered through NCCL: its compiled call, its eager call, the backward
  // all_reduce of the gradient.
  // all_reduce of the gradient (the forward one, whose value the gradient does not read, may be
  // dropped from that program).
  EXPECT_GE(nccl_calls("ncclAllGather"), gathers + 3 * 3);
}

TEST(NcclCollectives, DataParallelOverTwoGpusEqualsTheReferenceBitForBit) {
  auto step = [](const std::pair<Tensor, Tensor>& m, const Tensor& x, const Tensor& y) {
    auto loss = [&](const std::pair<Tensor, Tensor>& p) {
      Tensor e = nx::tanh(nx::matmul(x, p.first) + p.second) - y;
      return nx::mean(e * e);
    };
    return rune::value_and_grad(loss, m);
  };
  auto dp = rune::data_parallel(step, devices(2));
  auto sgd = rune::jit([](const std::pair<Tensor, Tensor>& m, const std::pair<Tensor, Tensor>& g) {
    return std::make_pair(m.first - g.first * 0.1, m.second - g.second * 0.1);
  });
  auto k = nx::split(nx::key(3));
  Tensor x = nx::randn(k.first, nx::float32, {16, 5}),
         y = nx::randn(k.second, nx::float32, {16, 2});
  std::pair<Tensor, Tensor> m{nx::place(nx::zeros(nx::float32, {5, 2}), cuda(0)),
                              nx::place(nx::zeros(nx::float32, {2}), cuda(0))};
  auto ref = std::make_pair(nx::zeros(nx::float32, {5, 2}), nx::zeros(nx::float32, {2}));
  const int gathers = nccl_calls("ncclAllGather");
  for (int s = 0; s < 4; ++s) {
    m = sgd(m, dp(m, x, y).second);
    auto a = dp.local_step(ref, nx::slice(x, {nx::Slice{0, 8}}), nx::slice(y, {nx::Slice{0, 8}}));
    auto b = dp.local_step(ref, nx::slice(x, {nx::Slice{8, 16}}), nx::slice(y, {nx::Slice{8, 16}}));
    ref = sgd(ref, std::make_pair((a.second.first + b.second.first) / 2.0,
                                  (a.second.second + b.second.second) / 2.0));
  }
  EXPECT_GT(nccl_calls("ncclAllGather"), gathers);  // the mean went through NCCL
  EXPECT_EQ(m.first.device(), cuda(0));             // with the parameters
  EXPECT_TRUE(same_bits(m.first, ref.first));
  EXPECT_TRUE(same_bits(m.second, ref.second));
}

TEST(NcclCollectives, MismatchesAreNamedAndLeaveArgumentsAlone) {
  auto comms = dist::gpu_communicators(devices(2));
  std::vector<Tensor> xs{nx::place(nx::ones(nx::float32, {3}), cuda(0)),
                         nx::place(nx::ones(nx::float32, {4}), cuda(1))};
  try {
    dist::all_reduce(comms, xs);
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("rune::distributed::all_reduce: the ranks disagree: rank "
                                         "1 passed float32 [4] but rank 0 passed float32 [3]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(nx::to_vector<float>(xs[1]), std::vector<float>(4, 1.0f));
  // A tensor on another rank's device.
  try {
    dist::all_reduce(comms[0], xs[1]);
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("is on CUDA:1 but the GPU communicator's rank 0 is on "
                                         "CUDA:0"),
              std::string::npos)
        << e.what();
  }
  // One thread per rank, different shapes: both raise, naming both (no hang in the library).
  std::string what[2];
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      try {
        dist::all_gather(comms[static_cast<size_t>(i)], xs[static_cast<size_t>(i)]);
      } catch (const dist::distributed_error& e) {
        what[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2; ++i)
    EXPECT_NE(what[i].find("rune::distributed::all_gather: the ranks disagree: rank 1 passed "
                           "float32 [4] but rank 0 passed float32 [3]"),
              std::string::npos)
        << what[i];
  // The communicator is then broken: a later call raises at once, naming the first failure.
  try {
    dist::all_gather(comms[0], xs[0]);
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("the GPU communicator is broken by an earlier failure: "
                                         "rune::distributed::all_gather: the ranks disagree"),
              std::string::npos)
        << e.what();
  }
  // Devices of two kinds, or listed twice.
  EXPECT_THROW(dist::gpu_communicators({cuda(0), cuda(0)}), dist::distributed_error);
  EXPECT_THROW(dist::gpu_communicators({cuda(0), nx::Device::cpu()}), dist::distributed_error);
  try {
    dist::gpu_communicators({nx::Device::cpu()});
    FAIL();
  } catch (const dist::distributed_error& e) {
    EXPECT_NE(std::string(e.what()).find("rune::distributed::gpu_communicators: CPU is not a GPU "
                                         "device"),
              std::string::npos)
        << e.what();
  }
}

// One process per rank (here a world of 1 over TCP): a host communicator's collective on a GPU
// tensor makes its rank's GPU communicator (ncclCommInitRank with rank 0's unique id) and runs
// through NCCL, eagerly and inside rune::jit.
TEST(NcclCollectives, AHostCommunicatorsGpuTensorsGoThroughNcclCommInitRank) {
  const std::string addr = "127.0.0.1:" + std::to_string(30000 + getpid() % 20000);
  setenv("RUNE_RANK", "0", 1);
  setenv("RUNE_WORLD_SIZE", "1", 1);
  setenv("RUNE_MASTER_ADDR", addr.c_str(), 1);
  dist::Communicator comm = dist::init();
  ASSERT_EQ(comm.size(), 1);
  const int inits = nccl_calls("ncclCommInitRank"), gathers = nccl_calls("ncclAllGather");
  Tensor x = inputs(nx::float32, 1)[0];
  Tensor sum = dist::all_reduce(comm, x), mean = dist::all_reduce(comm, x, dist::ReduceOp::Mean);
  EXPECT_EQ(sum.device(), cuda(0));
  EXPECT_TRUE(same_bits(sum, x));
  EXPECT_TRUE(same_bits(mean, x / 1.0));
  auto f = rune::jit([comm](const Tensor& v) { return dist::all_reduce(comm, v * 2.0) + 1.0; });
  EXPECT_TRUE(same_bits(f(x), x * 2.0 + 1.0));
  EXPECT_TRUE(same_bits(dist::all_gather(comm, x), nx::reshape(x, {1, 6})));
  EXPECT_EQ(nccl_calls("ncclCommInitRank"), inits + 1);  // made once, then kept
  EXPECT_EQ(nccl_calls("ncclAllGather"), gathers + 4);
}
