#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "ir/env.h"

namespace runtime {

namespace {
// Work below this many element operations runs inline: waking a worker costs ~10 us.
constexpr int64_t kParallelThreshold = 1 << 16;

class Pool {
 public:
  explicit Pool(int n) {
    for (int i = 0; i < n - 1; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t chunks, const std::function<void(int64_t)>& task) {
    std::lock_guard job_lock(job_mu_);  // one parallel job at a time; callers queue up
    {
      std::lock_guard l(mu_);
      task_ = &task;
      chunks_ = chunks;
      next_.store(0);
      done_.store(0);
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock l(mu_);
    done_cv_.wait(l, [&] { return done_.load() == chunks_; });
    task_ = nullptr;
  }

 private:
  void work() {
    for (;;) {
      int64_t i = next_.fetch_add(1);
      if (i >= chunks_) return;
      (*task_)(i);
      if (done_.fetch_add(1) + 1 == chunks_) {
        std::lock_guard l(mu_);
        done_cv_.notify_all();
      }
    }
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] { return stop_ || (generation_ != seen && task_); });
        if (stop_) return;
        seen = generation_;
      }
      work();
    }
  }
  std::vector<std::thread> workers_;
  std::mutex mu_, job_mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t chunks_ = 0;
  std::atomic<int64_t> next_{0}, done_{0};
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int configured_threads() {
  // Its leading integer, as atoi reads it (so "4 threads" is 4); anything else: every core.
  if (const auto& e = ir::env::value(ir::env::Var::NumThreads)) {
    int v = std::atoi(e->c_str());
    if (v > 0) return v;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Pool& pool() {
  static Pool* p = new Pool(configured_threads());  // leaked: workers may outlive statics
  return *p;
}
}  // namespace

int host_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int threads = host_threads();
  if (threads == 1 || n == 1 || n * std::max<int64_t>(cost, 1) < kParallelThreshold) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balance uneven progress without much overhead.
  int64_t chunks = std::min<int64_t>(n, threads * 4);
  pool().run(chunks, [&](int64_t c) {
    int64_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
    if (lo < hi) fn(lo, hi);
  });
}

}  // namespace runtime
