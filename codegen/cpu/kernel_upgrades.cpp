#include "codegen/cpu/kernel_upgrades.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <thread>
#include <vector>

#include "codegen/cpu/orc_compiler.h"
#include "codegen/disk_cache.h"
#include "ir/debug.h"
#include "ir/env.h"
#include "runtime/profile.h"

namespace codegen::cpu {

namespace {

class Upgrader {
 public:
  struct StopAtExit {
    ~StopAtExit() { upgrader().stop(); }
  };

  // A process exiting must stop the thread before any static object it may use is destroyed,
  // and LLVM builds some on first use, during a compile (registered after any handler of ours,
  // so destroyed before it runs). The main thread's thread_local objects are destroyed first of
  // all when the process exits (glibc's exit runs them before the atexit handlers and static
  // destructors): a guard made on the main thread stops the thread there. The guard is made when
  // the library is loaded (arm_main_thread_guard, from a static initializer, which runs on the
  // main thread), not at the first upgrade: that may be queued by any thread (a stream's, a
  // pool worker's), and a guard on such a thread does not run at exit (a process whose first
  // upgrade came from CPU:1's stream crashed at exit this way). The atexit handler covers an exit
  // called from another thread.
  static void arm_main_thread_guard() {
    if (syscall(SYS_gettid) != getpid()) return;
    thread_local StopAtExit guard;
    (void)&guard;
  }

  void push(Upgrade u) {
    arm_main_thread_guard();
    std::pair<std::string, std::string> write_now;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      if (!started_) {
        started_ = true;
        thread_ = std::thread([this] { loop(); });
        std::atexit([] { upgrader().stop(); });
      }
      // Bounded: upgrades of kernels no program uses any more (evicted ones) are dropped here,
      // and at most kMaxWrites quick-tier entries wait for the thread, so a process whose shapes
      // never repeat holds no more than its caches do. An entry past that bound is written
      // here, on the caller's thread (a write and an fsync), rather than dropped: a dropped
      // entry made the next run of the program compile that kernel again.
      std::erase_if(jobs_, [](const auto& j) { return j.first.kernel.expired(); });
      if (!u.quick_object.empty()) {
        if (writes_.size() < kMaxWrites)
          writes_.emplace_back(std::move(u.quick_key), std::move(u.quick_object));
        else
          write_now = {std::move(u.quick_key), std::move(u.quick_object)};
      }
      jobs_.emplace_back(std::move(u), std::chrono::steady_clock::now() + kUpgradeDelay);
      wake_.notify_one();
    }
    if (!write_now.first.empty()) DiskCache::instance().put(write_now.first, write_now.second);
  }

  void wait_idle() {
    std::unique_lock lock(mu_);
    hurry_ = true;  // the upgrades queued so far start now, without their delay
    wake_.notify_all();
    idle_.wait(lock, [&] { return (jobs_.empty() && writes_.empty() && !busy_) || stopping_; });
  }

  size_t installed() const { return installed_.load(); }

  bool stopped() {
    std::lock_guard lock(mu_);
    return stopping_;
  }

  static Upgrader& upgrader() {
    static auto* u = new Upgrader;  // never destroyed: the thread may outlive static objects
    return *u;
  }

  // Cancels the compile in progress (its passes left are skipped), drops the upgrades queued
  // and joins the thread; later pushes are ignored. The quick tiers' cache entries still queued
  // are written here, on the exiting thread: each costs a write and an fsync, and without them a
  // short process (one that exits before the thread reached them) left its kernels out of the
  // cache, so every later run of it compiled them all again.
  void stop() {
    std::deque<std::pair<std::string, std::string>> pending;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      jobs_.clear();
      pending.swap(writes_);
    }
    cancel_.store(true);
    wake_.notify_all();
    idle_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    for (const auto& [key, object] : pending) DiskCache::instance().put(key, object);
  }

 private:
  void loop() {
    // The lowest priority: the quick tier keeps running the program on the cores it needs, and
    // the upgrades take what is left.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    for (;;) {
      Upgrade u;
      std::pair<std::string, std::string> write;
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [&] { return stopping_ || !jobs_.empty() || !writes_.empty(); });
        if (stopping_) return;
        if (!writes_.empty()) {  // the quick tiers' entries first: each is cheap
          write = std::move(writes_.front());
          writes_.pop_front();
        } else {
          // An upgrade starts kUpgradeDelay after its kernel was compiled: a process that is
          // over by then (a script, a test, a short sample run) exits without compiling a full
          // tier it would not have used, nor waiting at exit for one in progress. A program
          // that keeps running gets every upgrade after that delay (V8 and the JVM tier up hot
          // code the same way, by use).
          const auto due = jobs_.front().second;
          if (!hurry_ && std::chrono::steady_clock::now() < due) {
            wake_.wait_until(lock, due, [&] { return stopping_ || hurry_; });
            continue;
          }
          u = std::move(jobs_.front().first);
          jobs_.pop_front();
        }
        busy_ = true;
      }
      if (!write.first.empty())
        DiskCache::instance().put(write.first, write.second);
      else
        run(u);
      {
        std::lock_guard lock(mu_);
        busy_ = false;
      }
      idle_.notify_all();
    }
  }

  void run(const Upgrade& u) {
    if (u.kernel.expired()) return;  // no program runs it any more
    try {
      runtime::ProfileSpan span("compile", u.name + " (full tier)", "CPU",
                                static_cast<int64_t>(u.ir.size()));
      std::string obj = compile_to_object(u.ir, u.name, Tier::Full, &cancel_);
      if (obj.empty()) return;  // cancelled: the process is exiting
      DiskCache::instance().put(u.disk_key, obj);
      auto k = u.kernel.lock();
      if (!k) return;
      std::vector<std::string> syms = {u.name};
      if (u.two_phase) syms.push_back(u.name + "_p1");
      LoadedObject loaded = load_object(obj, syms);
      std::lock_guard lock(k->mu);
      k->full_code = std::move(loaded.owner);
      if (u.two_phase) k->phase1.store(loaded.addresses[1], std::memory_order_release);
      k->main.store(loaded.addresses[0], std::memory_order_release);
      installed_.fetch_add(1);
      if (ir::debug_level() >= 1)
        std::fprintf(stderr, "rune: kernel %s upgraded\n", u.name.c_str());
    } catch (const std::exception& e) {
      // The quick tier keeps running the kernel with the same bits: only speed is lost.
      if (ir::debug_level() >= 1)
        std::fprintf(stderr, "rune: kernel %s kept its quick tier: %s\n", u.name.c_str(), e.what());
    }
  }

  static constexpr size_t kMaxWrites = 64;
  static constexpr std::chrono::milliseconds kUpgradeDelay{250};
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::pair<Upgrade, std::chrono::steady_clock::time_point>> jobs_;  // (job, due)
  std::deque<std::pair<std::string, std::string>> writes_;                      // (key, object)
  bool started_ = false, stopping_ = false, busy_ = false;
  bool hurry_ = false;  // wait_for_upgrades was called: no more delays
  std::atomic<bool> cancel_{false};
  std::atomic<size_t> installed_{0};
  std::thread thread_;
};

// Runs when the library is loaded, on the main thread (see arm_main_thread_guard).
[[maybe_unused]] const bool main_thread_guard_armed = [] {
  Upgrader::arm_main_thread_guard();
  return true;
}();

}  // namespace

int kernel_tiers() {
  static const int tiers = static_cast<int>(ir::env::integer(ir::env::Var::KernelTiers));
  return tiers;
}

void queue_upgrade(Upgrade u) { Upgrader::upgrader().push(std::move(u)); }

void wait_for_upgrades() { Upgrader::upgrader().wait_idle(); }

size_t upgrades_installed() { return Upgrader::upgrader().installed(); }

bool upgrades_stopped() { return Upgrader::upgrader().stopped(); }

}  // namespace codegen::cpu
