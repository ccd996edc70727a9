// The threads of one fake-GPU launch as fibers on the launching OS thread (fake_driver.h).
//
// A launch's threads (8 lanes, or a tiled product's 256-thread block) only ever wait for each
// other at barriers: the lane exchange (__shfl_down_sync) and the block barrier
// (__syncthreads). As OS threads on a 2-core machine every barrier woke every thread of the
// launch through the kernel: a reduction paid two such wake-ups per shuffle step and a tiled
// product 256 threads per k slice, so the fake device's tests were bound by context switches
// and slowed by any other load on the machine. Here each thread is a fiber (ucontext) and a
// barrier switches to the next fiber in a fixed round-robin order, so a launch runs on one core
// with a user-space switch per wait, and its threads interleave the same way on every run.
//
// Invariants: fibers switch only inside wait() (the kernels are straight-line C between
// barriers), so whatever the kernel keeps in thread-local storage is re-bound by the `resume`
// callback each time a fiber is resumed; every fiber must reach every barrier (as on a GPU), and
// a barrier that can no longer complete (a fiber finished while others wait) aborts the launch
// with a message instead of hanging.
#pragma once
#include <sys/mman.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define RUNE_FAKE_FIBERS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RUNE_FAKE_FIBERS_ASAN 1
#endif
#endif
#ifdef RUNE_FAKE_FIBERS_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace fake_gpu {

class Fibers {
 public:
  // Runs body(t) for t in [0, n) as n fibers; resume(t) runs each time fiber t (re)starts.
  void run(unsigned n, const std::function<void(unsigned)>& body,
           const std::function<void(unsigned)>& resume) {
    reserve(n);
    n_ = n;
    body_ = &body;
    resume_ = &resume;
    finished_ = arrived_ = 0;
    generation_ = 0;
    state_.assign(n, State::Runnable);
    for (unsigned t = 0; t < n; ++t) {
      getcontext(&fibers_[t]);
      fibers_[t].uc_stack.ss_sp = stacks_[t];
      fibers_[t].uc_stack.ss_size = kStack;
      fibers_[t].uc_link = &scheduler_;
      // makecontext passes ints: the object's address in two halves.
      const auto self = reinterpret_cast<uintptr_t>(this);
      makecontext(&fibers_[t], reinterpret_cast<void (*)()>(&Fibers::entry), 3,
                  static_cast<unsigned>(self >> 32), static_cast<unsigned>(self), t);
    }
    // Round-robin: each pass resumes every unfinished fiber once, in order.
    while (finished_ < n_) {
      bool progressed = false;
      for (unsigned t = 0; t < n_; ++t) {
        if (state_[t] == State::Done) continue;
        if (state_[t] == State::Waiting && generation_ == wait_generation_[t]) continue;
        current_ = t;
        state_[t] = State::Runnable;
        switch_to(&scheduler_, &fibers_[t], stacks_[t]);
        progressed = true;
      }
      if (!progressed) {
        std::fprintf(stderr,
                     "fake gpu: a barrier can no longer complete (%u of %u threads finished, "
                     "%u waiting): every thread must reach every barrier\n",
                     finished_, n_, arrived_);
        std::abort();
      }
    }
  }

  // The barrier of all n fibers; returns once every one has arrived.
  void wait() {
    const unsigned t = current_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    state_[t] = State::Waiting;
    wait_generation_[t] = generation_;
    switch_to(&fibers_[t], &scheduler_, nullptr);
    (*resume_)(t);
  }

  unsigned current() const { return current_; }

 private:
  enum class State { Runnable, Waiting, Done };  // Waiting: at a barrier, since wait_generation_
  static constexpr size_t kStack = 256 * 1024;   // kernels keep a few KiB of locals at most
  static constexpr size_t kGuard = 4096;         // an overflow faults instead of corrupting

  static void entry(unsigned hi, unsigned lo, unsigned t) {
    auto* self = reinterpret_cast<Fibers*>((static_cast<uintptr_t>(hi) << 32) | lo);
#ifdef RUNE_FAKE_FIBERS_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &self->scheduler_stack_bottom_,
                                    &self->scheduler_stack_size_);
#endif
    (*self->resume_)(t);
    (*self->body_)(t);
    self->state_[t] = State::Done;
    ++self->finished_;
    // Back to the scheduler through uc_link; tell ASan this stack is finished.
#ifdef RUNE_FAKE_FIBERS_ASAN
    __sanitizer_start_switch_fiber(nullptr, self->scheduler_stack_bottom_,
                                   self->scheduler_stack_size_);
#endif
  }

  // to_stack: the fiber stack being switched to; null: back to the scheduler's. Under ASan each
  // switch is announced (start) and completed (finish), so its stack bookkeeping follows.
  void switch_to(ucontext_t* from, ucontext_t* to, void* to_stack) {
#ifdef RUNE_FAKE_FIBERS_ASAN
    void* fake = nullptr;
    if (to_stack)
      __sanitizer_start_switch_fiber(&fake, to_stack, kStack);
    else
      __sanitizer_start_switch_fiber(&fake, scheduler_stack_bottom_, scheduler_stack_size_);
    swapcontext(from, to);
    if (to_stack)
      __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
    else
      __sanitizer_finish_switch_fiber(fake, &scheduler_stack_bottom_, &scheduler_stack_size_);
#else
    (void)to_stack;
    swapcontext(from, to);
#endif
  }

  void reserve(unsigned n) {
    while (stacks_.size() < n) {
      void* p = mmap(nullptr, kStack + kGuard, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) {
        std::perror("fake gpu: mmap of a fiber stack");
        std::abort();
      }
      mprotect(p, kGuard, PROT_NONE);
      stacks_.push_back(static_cast<char*>(p) + kGuard);
    }
    fibers_.resize(stacks_.size());
    wait_generation_.resize(stacks_.size());
  }

  std::vector<char*> stacks_;  // reused by every launch; never unmapped
  std::vector<ucontext_t> fibers_;
  std::vector<State> state_;
  std::vector<unsigned long long> wait_generation_;
  ucontext_t scheduler_{};
  const std::function<void(unsigned)>* body_ = nullptr;
  const std::function<void(unsigned)>* resume_ = nullptr;
  unsigned n_ = 0, current_ = 0, finished_ = 0, arrived_ = 0;
  unsigned long long generation_ = 0;
  const void* scheduler_stack_bottom_ = nullptr;
  size_t scheduler_stack_size_ = 0;
};

}  // namespace fake_gpu
