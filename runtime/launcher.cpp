// The host launchers: the synchronous host (CPU) and the asynchronous host devices (CPU:n).
// Both run steps on the thread pool; CPU:n makes each call a task of its stream.
#include "runtime/launcher.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "ir/debug.h"
#include "runtime/gpu/launcher.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace runtime {

namespace {

class HostLauncher : public Launcher {
 public:
  explicit HostLauncher(Device d) : device_(d) {}
  Device device() const override { return device_; }
  int64_t temp_alignment() const override { return 64; }
  // Every CPU device uses host memory; a run's own buffers are the host's.
  Device memory() const override { return Device::cpu(); }
  bool host_memory() const override { return true; }
  bool defers_calls() const override { return false; }
  bool after_runs_at_wait() const override { return false; }

  // Below this much work (items times operations per item) a step runs on the calling thread,
  // called directly: the pool's hand-off costs more than the work (kParallelWork).
  static bool tiny(const Step& st) { return st.items * st.cost < kParallelWork; }
  // Kernels are timed for DEBUG=2 (printed) and for RUNE_PROFILE (recorded).
  static bool printed() { return ir::debug_level() >= 2; }
  static bool timed() { return printed() || profile_enabled(); }

  HostKernelFn inline_kernel(const Step& st) const override {
    return st.kind == Step::Kind::Kernel && tiny(st) && !timed() ? st.host_kernel() : nullptr;
  }

  void launch(const Step& st, char* const* bufs) const override {
    char** b = const_cast<char**>(bufs);  // kernels take char**; they never write the table
    const bool print = printed(), time_it = timed();
    auto t0 = time_it ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (st.kind == Step::Kind::Library) {
      if (tiny(st))
        st.library(st.plan.get(), b, 0, st.items);  // no pool, no std::function
      else
        parallel_for(st.items, st.cost,
                     [&](int64_t lo, int64_t hi) { st.library(st.plan.get(), b, lo, hi); });
    } else {
      HostKernelFn fn = st.host_kernel();
      if (tiny(st))
        fn(b, 0, st.items);
      else
        parallel_for(st.items, st.cost, [&](int64_t lo, int64_t hi) { fn(b, lo, hi); });
    }
    if (!time_it) return;
    auto t1 = std::chrono::steady_clock::now();
    profile_record("kernel", st.name, "CPU", t0, t1, st.bytes, st.items);
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    if (print)
      std::fprintf(stderr, "rune: kernel %s on CPU: %lld items, %.1f us, %.2f GB/s\n",
                   st.name.c_str(), static_cast<long long>(st.items), us,
                   us > 0 ? st.bytes / us / 1e3 : 0.0);
  }

  Launched call(const std::shared_ptr<const Program>& p, const Call& c) const override {
    auto outs = p->run(c.inputs, c.n, c.reuse);
    if (c.after)
      if (auto failure = c.after(outs)) std::rethrow_exception(failure);
    return {std::move(outs), nullptr};
  }

  void read(void* dst, const void* src, size_t n) const override { std::memcpy(dst, src, n); }
  void write(void* dst, const void* src, size_t n) const override { std::memcpy(dst, src, n); }

 private:
  Device device_;
};

// CPU:n: a call is one task of the device's stream. Its outputs exist at once; the task runs
// the program in stream order, unless an input's failure state is set by then (its producer's
// check failed, or it was skipped itself): then the results take that failure instead of
// running on garbage.
class HostStreamLauncher final : public HostLauncher {
 public:
  explicit HostStreamLauncher(Device d) : HostLauncher(d), stream_(stream_for(d)) {}
  bool defers_calls() const override { return true; }

  Launched call(const std::shared_ptr<const Program>& p, const Call& c) const override {
    std::vector<BufferRef> outs = allocate_outputs(*p, c.reuse);
    auto poison = std::make_shared<Poison>();
    std::vector<char*> inputs(c.inputs, c.inputs + c.n);
    std::vector<std::shared_ptr<Poison>> gates;
    for (size_t i = 0; i < c.n_poisons; ++i)
      if (*c.poisons[i]) gates.push_back(*c.poisons[i]);
    stream_->enqueue([p, inputs, outs, gates, poison, after = c.after, keep = c.keep] {
      for (const auto& g : gates)
        if (auto e = g->get()) {
          poison->set(e);
          return;
        }
      auto bufs = p->run(inputs.data(), inputs.size(), outs.data());
      if (after)
        if (auto failure = after(bufs)) {
          poison->set(failure);
          std::rethrow_exception(failure);
        }
    });
    return {std::move(outs), std::move(poison)};
  }

 private:
  Stream* stream_;
};

}  // namespace

void Launcher::launch_steps(const Program& p, char* const* slot_ptrs) const {
  for (const auto& st : p.steps) {
    constexpr size_t kParams = 64;
    char* bufs[kParams];
    std::vector<char*> big;
    char** b = bufs;
    if (st.slots.size() > kParams) {
      big.resize(st.slots.size());
      b = big.data();
    }
    for (size_t q = 0; q < st.slots.size(); ++q) b[q] = slot_ptrs[st.slots[q]];
    launch(st, b);
  }
}

std::vector<BufferRef> allocate_outputs(const Program& p, const BufferRef* reuse) {
  std::vector<BufferRef> outs(p.output_slots.size());
  for (size_t o = 0; o < outs.size(); ++o)
    outs[o] = reuse && reuse[o]
                  ? reuse[o]
                  : allocate(p.device, static_cast<size_t>(p.slot_bytes[p.output_slots[o]]));
  return outs;
}

const Launcher& launcher_for(Device d, const char* api) {
  if (d.kind != DeviceKind::CPU) return gpu::launcher_for(d, api);
  static const HostLauncher host(Device::cpu());
  if (d.index == 0) return host;
  static std::mutex mu;
  static auto* streams = new std::map<int, std::unique_ptr<HostStreamLauncher>>;  // process-long
  std::lock_guard lock(mu);
  auto& l = (*streams)[d.index];
  if (!l) l = std::make_unique<HostStreamLauncher>(d);
  return *l;
}

}  // namespace runtime
