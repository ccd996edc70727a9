// Queues and caches give memory back (docs/design-notes.md "Bounded queues and caches"): the
// asynchronous host device's queue blocks the caller when full, so a loop that never waits holds
// a bounded amount of queued work.
#include <gtest/gtest.h>

#include "runtime/stream.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;

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
