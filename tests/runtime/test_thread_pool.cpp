// The host thread pool under back-to-back jobs: every item of every job runs exactly once, and
// the caller returns only when its job is done (no hang). A worker still leaving one job must
// never run a chunk of the next one twice (runtime/thread_pool.cpp: claims name their job).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"

namespace {

TEST(ThreadPool, EveryItemOfBackToBackJobsRunsExactlyOnce) {
  ASSERT_GT(runtime::host_threads(), 1) << "the test needs workers (RUNE_NUM_THREADS)";
  constexpr int kJobs = 100000;
  constexpr int64_t kMaxItems = 64;
  std::vector<std::atomic<int>> runs(kMaxItems);
  for (int job = 0; job < kJobs; ++job) {
    const int64_t n = 2 + job % (kMaxItems - 1);
    for (int64_t i = 0; i < n; ++i) runs[i].store(0, std::memory_order_relaxed);
    // A cost large enough that every job goes to the pool.
    runtime::parallel_for(n, runtime::kParallelWork, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) runs[i].fetch_add(1, std::memory_order_relaxed);
    });
    // parallel_for has returned: every item ran, once, and nothing of this job runs later.
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(runs[i].load(), 1) << "job " << job << " of " << n << " items: item " << i;
  }
}

// Workers spin for a while after a job, then sleep (runtime/thread_pool.cpp): jobs posted after
// pauses shorter than, about equal to and longer than the spin reach workers in either state;
// each runs every item once and returns (a lost wake-up would hang here).
TEST(ThreadPool, JobsAfterPausesReachSpinningAndSleepingWorkers) {
  ASSERT_GT(runtime::host_threads(), 1) << "the test needs workers (RUNE_NUM_THREADS)";
  constexpr int64_t n = 16;
  for (int job = 0; job < 300; ++job) {
    std::this_thread::sleep_for(std::chrono::microseconds(50 * (job % 12)));
    std::vector<std::atomic<int>> runs(n);
    runtime::parallel_for(n, runtime::kParallelWork, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) runs[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "job " << job << " item " << i;
  }
}

}  // namespace
