// Where the host pool's threads run (runtime/thread_pool.cpp, leave_the_callers_cpu): a worker
// that starts a job on the CPU its caller posted it from moves to another CPU, so the job's
// chunks run side by side instead of taking turns on one CPU while another idles (the kernel's
// balancer keeps two busy, cache-hot threads where they are). The test puts the worker on the
// caller's CPU itself and checks where the worker's chunks of the next jobs ran.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "runtime/thread_pool.h"

namespace {

pid_t tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

struct Chunk {
  pid_t tid;
  int cpu;
};

// One job of two chunks, each about 2 ms of work so that they overlap; returns who ran them where.
std::vector<Chunk> job() {
  std::mutex mu;
  std::vector<Chunk> ran;
  runtime::parallel_for(2, runtime::kParallelWork, [&](int64_t, int64_t) {
    const int cpu = sched_getcpu();
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (std::chrono::steady_clock::now() < until) {
    }
    std::lock_guard l(mu);
    ran.push_back({tid(), cpu});
  });
  return ran;
}

TEST(ThreadPoolPlacement, AWorkerOnItsCallersCpuMovesToAnother) {
  ASSERT_EQ(runtime::host_threads(), 2) << "the test runs with RUNE_NUM_THREADS=2";
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one CPU: nowhere to move";
  const pid_t me = tid();
  // The worker's thread id, from a job it took part in.
  pid_t worker = 0;
  for (int i = 0; i < 200 && !worker; ++i)
    for (const Chunk& c : job())
      if (c.tid != me) worker = c.tid;
  ASSERT_NE(worker, 0) << "the worker never ran a chunk";
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  // The caller stays on `first`; the worker is put there too, then allowed everywhere again (so
  // only the pool's own move takes it elsewhere).
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  int apart = 0, together = 0;
  for (int round = 0; round < 20; ++round) {
    ASSERT_EQ(sched_setaffinity(worker, sizeof one, &one), 0);
    ASSERT_EQ(sched_setaffinity(worker, sizeof all, &all), 0);
    for (const Chunk& c : job())
      if (c.tid == worker) (c.cpu == first ? together : apart)++;
  }
  sched_setaffinity(0, sizeof all, &all);
  EXPECT_GT(apart, 0);
  EXPECT_EQ(together, 0) << apart << " of the worker's chunks ran on another CPU than the caller's";
}

}  // namespace
