#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "ir/env.h"

namespace runtime {

namespace {

// One parallel job at a time: the caller and the workers claim its chunks from a shared
// counter. A claim names the job it is for: the counter holds the job's generation in its high
// 32 bits and the next chunk in its low 32, and a claim is a compare-and-swap against the
// generation the claimer joined. A worker still leaving the previous job can therefore never
// claim a chunk of the next one with the previous job's view of it. (With a plain counter, a
// worker that had just incremented the finished job's counter could read the next job's chunk
// count and run a chunk of it that the reset counter handed out again: that chunk ran twice,
// the done count overshot, and the caller either returned while a chunk still ran or waited
// forever. The GPT bench hung in it.)
class Pool {
 public:
  explicit Pool(int n) : spread_(n <= allowed_cpus()) {
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
    if (spread_) caller_cpu_.store(current_cpu(), std::memory_order_relaxed);  // before posting
    Job job;
    bool sleepers;
    {
      std::lock_guard l(mu_);
      job = Job{++generation_ & kIndexMask, chunks, &task};
      job_ = job;
      done_.store(0);
      next_.store(job.generation << 32);
      sleepers = sleepers_ > 0;
    }
    if (sleepers) cv_.notify_all();
    work(job);
    // The workers still running chunks finish within a kernel's time: spin for them first.
    if (!spin_until([&] { return done_.load() == chunks; })) {
      std::unique_lock l(mu_);
      done_cv_.wait(l, [&] { return done_.load() == chunks; });
    }
    std::lock_guard l(mu_);
    job_.task = nullptr;
  }

 private:
  static constexpr uint64_t kIndexMask = 0xffffffffu;
  static constexpr std::chrono::microseconds kSpin{200};
  struct Job {
    uint64_t generation = 0;  // low 32 bits of the job's number
    int64_t chunks = 0;       // fewer than 2^32 (a few per thread)
    const std::function<void(int64_t)>* task = nullptr;
  };

  // Runs chunks of `job` until none is left or another job has begun.
  void work(const Job& job) {
    for (;;) {
      uint64_t v = next_.load();
      do {
        if ((v >> 32) != job.generation || static_cast<int64_t>(v & kIndexMask) >= job.chunks)
          return;
      } while (!next_.compare_exchange_weak(v, v + 1));
      (*job.task)(static_cast<int64_t>(v & kIndexMask));
      // Every claimed chunk of this job is counted before its caller can see it done, so a
      // count never reaches the next job.
      if (done_.fetch_add(1) + 1 == job.chunks) {
        std::lock_guard l(mu_);
        done_cv_.notify_all();
      }
    }
  }
  // Waits for a job after `seen`: spinning for kSpin first (a training step launches its next
  // parallel kernel within microseconds, and waking a sleeping thread cost 20-70 us on the bench
  // VM), then asleep on cv_ (a poster notifies only when a worker sleeps).
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      spin_until([&] { return next_.load() >> 32 != seen; });  // the posted job's generation
      Job job;
      {
        std::unique_lock l(mu_);
        ++sleepers_;
        cv_.wait(l, [&] { return stop_ || (job_.generation != seen && job_.task); });
        --sleepers_;
        if (stop_) return;
        job = job_;
        seen = job.generation;
      }
      if (spread_) leave_the_callers_cpu();
      work(job);
    }
  }

  // Threads on one CPU: the kernel's scheduler can leave a worker on the CPU of the thread that
  // posted the job (a wake-up places it near its waker) while another CPU idles, and then keep
  // it there: both threads run (or spin) without pause, so each counts as cache-hot and the
  // load balancer declines to move either for a long time. Every job then
  // took the time of its chunks one after the other: a 256^3 product 350-400 against 175-190 us,
  // in some processes and not others (docs/performance.md "Rows that doubled: two threads on one
  // CPU"). So a worker that starts a job on the CPU its caller posted it from moves itself: its
  // allowed CPUs without that one for a moment (the kernel migrates it at once), then all of them
  // again (it stays where it went). Only where the pool has no more threads than the process has
  // CPUs (spread_): with more, sharing a CPU is unavoidable and moving would only churn.
  static int current_cpu() {
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
  }
  static int allowed_cpus() {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
    return 1;
  }
  void leave_the_callers_cpu() {
#if defined(__linux__)
    const int here = current_cpu();
    if (here < 0 || here != caller_cpu_.load(std::memory_order_relaxed)) return;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
    cpu_set_t elsewhere = allowed;
    CPU_CLR(here, &elsewhere);
    if (sched_setaffinity(0, sizeof elsewhere, &elsewhere) == 0)
      sched_setaffinity(0, sizeof allowed, &allowed);
#endif
  }

  // Spins until ready() or kSpin has passed; whether ready() held. It never calls
  // sched_yield: on the 2-vCPU bench VM a yielding spin made a 784-256-10 training step slower
  // than no spin at all (docs/performance.md "The host thread pool's threshold").
  template <typename Ready>
  static bool spin_until(Ready ready) {
    auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 1;; ++i) {
      if (ready()) return true;
      if (i % 64 == 0) {
        if (std::chrono::steady_clock::now() > until) return false;
      } else {
        pause();
      }
    }
  }
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  std::vector<std::thread> workers_;
  std::mutex mu_, job_mu_;
  std::condition_variable cv_, done_cv_;
  Job job_;                        // the current job (task null between jobs); under mu_
  std::atomic<uint64_t> next_{0};  // (generation << 32) | next chunk to claim
  std::atomic<int64_t> done_{0};   // chunks of the current job finished
  uint64_t generation_ = 0;
  int sleepers_ = 0;  // workers waiting on cv_; under mu_
  bool stop_ = false;
  const bool spread_;                // leave_the_callers_cpu applies
  std::atomic<int> caller_cpu_{-1};  // the CPU the current job was posted from
};

int configured_threads() {
  // RUNE_NUM_THREADS in [1, 4096], or 0 when unset or empty: every core. Another value raises
  // here, at the pool's first use.
  if (int v = ir::env::integer(ir::env::Var::NumThreads); v > 0) return v;
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
  if (threads == 1 || n == 1 || n * std::max<int64_t>(cost, 1) < kParallelWork) {
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
