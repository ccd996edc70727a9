// Queues and caches give memory back (docs/design-notes.md "Bounded queues and caches"): the
// asynchronous host device's queue blocks the caller when full, so a loop that never waits holds
// a bounded amount of queued work.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "ir/node.h"
#include "runtime/stream.h"
#include "trace/rune.h"

namespace {

// Small bounds so the caches cycle within a short test (read once, before the first use).
__attribute__((constructor)) void small_bounds() {
  setenv("RUNE_EAGER_CACHE_SIZE", "32", 0);
  setenv("RUNE_NODE_TABLE_MIN", "5000", 0);
}

using nx::Tensor;

double rss_mib() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// Each new shape costs a compile (~15 ms, more on a loaded machine): few enough for CI, enough
// for growth to show (bench/bench_memory runs 10^4 shapes and 10^5 calls).
#if defined(__SANITIZE_ADDRESS__)
constexpr long kShapes = 120;  // the sanitizer's shadow memory and quarantine hide RSS anyway
#else
constexpr long kShapes = 300;
#endif

// Over many distinct shapes, programs are evicted with their jit entries and eager cache
// slots; their kernels are unloaded and their nodes collected, so the node table and the
// process stay bounded after the first round (docs/design-notes.md states the bounds).
TEST(Caches, ManyDistinctShapesHoldBoundedMemory) {
  rune::Signature sig;
  sig.options.cache_size = 32;
  auto step = rune::jit(sig, [](const Tensor& x) { return nx::tanh(x * 0.5 + 1.0); });
  // Compiled calls on every shape; eager ops (one compile each) on every fourth.
  auto round = [&](long from, long to) {
    for (long n = from; n < to; ++n) {
      Tensor x = nx::full(nx::float32, {n}, 0.25);
      ASSERT_EQ(nx::to_vector<float>(step(x)).size(), static_cast<size_t>(n));
      if (n % 4 == 0) {
        ASSERT_EQ(nx::to_vector<float>(nx::exp(x)).size(), static_cast<size_t>(n));
      }
    }
  };
  round(1, kShapes / 4);
  double rss0 = rss_mib();
  round(kShapes / 4, kShapes);
  double rss1 = rss_mib();
  size_t nodes = ir::interned_nodes();
  EXPECT_EQ(step.cached_programs(), 32u);
  // Without collection every shape leaves ~140 nodes behind (~56,000 here); with it the table
  // stays within twice what the caches hold, or the minimum.
  EXPECT_LT(nodes, 3u * 5000u) << nodes << " nodes after " << kShapes << " shapes";
  std::printf("RSS %.1f MiB after %ld shapes, %.1f MiB after %ld; %zu nodes\n", rss0, kShapes / 4,
              rss1, kShapes, nodes);
#if !defined(__SANITIZE_ADDRESS__)
  // Without unloading, each shape's kernels and nodes keep ~60 KB: ~17 MiB over these shapes.
  EXPECT_LT(rss1 - rss0, 6.0) << "RSS grew from " << rss0 << " to " << rss1 << " MiB over "
                              << kShapes * 3 / 4 << " new shapes";
#endif
}

// A node collection frees exactly what nothing holds: programs alive in a cache keep theirs.
TEST(Caches, CollectionKeepsWhatLiveProgramsHold) {
  auto f = rune::jit([](const Tensor& x) { return nx::sum(nx::exp(x) * 2.0); });
  Tensor x = nx::create(nx::float32, {3}, {0, 1, 2});
  float before = nx::item<float>(f(x));
  float eager = nx::item<float>(nx::sum(nx::exp(x) * 2.0));
  ir::collect_nodes();
  size_t after = ir::interned_nodes();
  EXPECT_EQ(nx::item<float>(f(x)), before);  // the cached programs still run
  EXPECT_EQ(f.traces(), 1u);
  EXPECT_EQ(nx::item<float>(nx::sum(nx::exp(x) * 2.0)), eager);
  EXPECT_EQ(eager, before);
  EXPECT_EQ(ir::collect_nodes(), 0u);  // nothing new became garbage...
  EXPECT_EQ(ir::interned_nodes(), after);
  {
    ir::NodeUse use;  // ... and nothing is collected while a thread holds nodes
    ir::NodeRef n = ir::make(ir::Op::Const, nx::float32, {}, {}, 12345.0);
    EXPECT_EQ(ir::collect_nodes(), 0u);
    EXPECT_EQ(n->op, ir::Op::Const);
  }
  EXPECT_GE(ir::collect_nodes(), 1u);  // the const above is garbage now
}

TEST(AsyncQueue, TenThousandCallsWithoutAWaitHoldBoundedMemory) {
  nx::Device dev = nx::Device::parse("CPU:1", "test");
  auto step = rune::jit([](const Tensor& x) { return x * 0.5 + 1.0; });
  const int64_t n = 1 << 16;  // 256 KiB of float32 per result
  const size_t bytes = n * sizeof(float);
  Tensor x = nx::place(nx::full(nx::float32, {n}, 1.0), dev);
  nx::wait(step(x));  // compiled once, outside the measurement
  auto& alloc = runtime::device_allocator(dev);
  nx::wait(dev);
  alloc.reset_peak();
  size_t before = alloc.stats().in_use;
  Tensor last;
  // Each call allocates its result now and the queued task holds it until it ran; the result
  // handle is dropped at once, so only the queue keeps memory alive.
  for (int i = 0; i < 10000; ++i) last = step(x);
  nx::wait(last);
  size_t peak = alloc.stats().peak - before;
  size_t bound = (runtime::Stream::queue_depth() + 4) * bytes;
  EXPECT_LE(peak, bound) << "peak " << peak << " bytes over " << runtime::Stream::queue_depth()
                         << " queued tasks of " << bytes;
  EXPECT_EQ(nx::to_vector<float>(last)[0], 1.5f);
}

TEST(AsyncQueue, EagerOpsWithoutAWaitHoldBoundedMemory) {
  nx::Device dev = nx::Device::parse("CPU:1", "test");
  const int64_t n = 1 << 16;
  Tensor x = nx::place(nx::full(nx::float32, {n}, 2.0), dev);
  nx::wait(nx::neg(x));
  auto& alloc = runtime::device_allocator(dev);
  nx::wait(dev);
  alloc.reset_peak();
  size_t before = alloc.stats().in_use;
  Tensor last;
  for (int i = 0; i < 10000; ++i) last = nx::neg(x);
  nx::wait(last);
  size_t peak = alloc.stats().peak - before;
  EXPECT_LE(peak, (runtime::Stream::queue_depth() + 4) * n * sizeof(float)) << "peak " << peak;
  EXPECT_EQ(nx::to_vector<float>(last)[0], -2.0f);
}

// A task that enqueues on its own stream never blocks on the full queue it is draining.
TEST(AsyncQueue, ATaskMayEnqueueOnItsOwnFullStream) {
  runtime::Stream* s = runtime::stream_for(nx::Device::parse("CPU:3", "test"));
  std::atomic<int> ran{0};
  for (size_t i = 0; i < runtime::Stream::queue_depth() * 2; ++i)
    s->enqueue([&, s] {
      s->enqueue([&] { ++ran; });
      ++ran;
    });
  s->synchronize();
  EXPECT_EQ(ran.load(), static_cast<int>(runtime::Stream::queue_depth() * 4));
}

}  // namespace
