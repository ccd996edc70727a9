#include "runtime/gpu/launcher.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>

#include "ir/debug.h"
#include "runtime/gpu/context.h"
#include "runtime/gpu/graphs.h"
#include "runtime/gpu/transfer.h"
#include "runtime/profile.h"

namespace runtime::gpu {

namespace {

class GpuLauncher final : public Launcher {
 public:
  explicit GpuLauncher(Context& c) : c_(c) {}
  Device device() const override { return c_.device(); }
  int64_t temp_alignment() const override { return 256; }
  Device memory() const override { return c_.device(); }
  bool host_memory() const override { return false; }
  bool defers_calls() const override { return false; }
  bool after_runs_at_wait() const override { return true; }

  // The one launch helper: queues `step` on the device's stream with pointer params `bufs` and
  // n = step.items (a library step: calls step.queue). With DEBUG=2 or RUNE_PROFILE it times
  // the step with events (a wait).
  void launch(const Step& step, char* const* bufs) const override {
    if (step.geometry.grid == 0) return;  // no work items
    Context& c = c_;
    c.make_current();
    const DriverTable& d = c.driver();
    // Queues the step: a kernel launch (a driver status) or the library step (which throws).
    auto queue = [&] {
      if (step.kind == Step::Kind::Library) {
        step.queue(c, bufs);
        return 0;
      }
      return queue_kernel(d, step, bufs, c.handle());
    };
    const bool profiled = profile_enabled();
    if (ir::debug_level() < 2 && !profiled) {
      c.check(queue(), "launch");
      return;
    }
    Handle start = nullptr, end = nullptr;
    c.check(d.event_create(&start), "event_create");
    c.check(d.event_create(&end), "event_create");
    float ms = 0;
    int rc = d.event_record(start, c.handle());
    if (!rc) {
      try {
        rc = queue();
      } catch (...) {
        d.event_destroy(start);
        d.event_destroy(end);
        throw;
      }
    }
    if (!rc) rc = d.event_record(end, c.handle());
    if (!rc) rc = d.event_synchronize(end);
    if (!rc) rc = d.event_elapsed_ms(&ms, start, end);
    d.event_destroy(start);
    d.event_destroy(end);
    c.check(rc, "launch (timed)");
    double us = ms * 1e3;
    if (profiled) {  // device time, ending now
      auto end_t = std::chrono::steady_clock::now();
      auto start_t = end_t - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double, std::micro>(us));
      profile_record("kernel", step.name, c.device().name(), start_t, end_t, step.bytes,
                     step.items);
    }
    if (ir::debug_level() < 2) return;
    std::fprintf(stderr, "rune: kernel %s on %s: %lld items, %.1f us, %.2f GB/s\n",
                 step.name.c_str(), c.device().name().c_str(), static_cast<long long>(step.items),
                 us, us > 0 ? step.bytes / us / 1e3 : 0.0);
  }

  std::shared_ptr<void> prepare(const Program& p) const override { return graphs_for(c_, p); }

  // One graph launch where the program replays as a graph (runtime/gpu/graphs.h); else, and
  // whenever each kernel is timed (DEBUG=2, RUNE_PROFILE), one launch per step.
  void launch_steps(const Program& p, char* const* slot_ptrs) const override {
    auto* graphs = static_cast<ProgramGraphs*>(p.launcher_state.get());
    if (graphs && ir::debug_level() < 2 && !profile_enabled() && graphs->launch(p, slot_ptrs))
      return;
    Launcher::launch_steps(p, slot_ptrs);
  }

  // The work is queued now: an input whose failure state is already set skips it (its data
  // may be garbage) and the results take that state; else the results share the first input's
  // state, which a check of that input's producer (run at the next wait) may still set. With
  // `after`, the results get their own state, set by the after task (run in call order at the
  // next wait) from an input's failure first, else from what `after` returns.
  Launched call(const std::shared_ptr<const Program>& p, const Call& call) const override {
    std::shared_ptr<Poison> poison;
    for (size_t i = 0; i < call.n_poisons && !poison; ++i) poison = *call.poisons[i];
    if (poison && poison->get()) return {allocate_outputs(*p, nullptr), std::move(poison)};
    auto outs = p->run(call.inputs, call.n, call.reuse);
    if (call.after) {
      poison = std::make_shared<Poison>();
      std::vector<std::shared_ptr<Poison>> gates;
      for (size_t i = 0; i < call.n_poisons; ++i)
        if (*call.poisons[i]) gates.push_back(*call.poisons[i]);
      c_.stream()->enqueue([outs, gates, poison, after = call.after, keep = call.keep] {
        for (const auto& g : gates)
          if (auto e = g->get()) {
            poison->set(e);
            return;
          }
        if (auto failure = after(outs)) {
          poison->set(failure);
          std::rethrow_exception(failure);
        }
      });
    }
    return {std::move(outs), std::move(poison)};
  }

  void read(void* dst, const void* src, size_t n) const override { copy_to_host(c_, dst, src, n); }
  void write(void* dst, const void* src, size_t n) const override {
    copy_to_device(c_, dst, src, n);
  }

 private:
  Context& c_;
};

}  // namespace

int queue_kernel(const DriverTable& d, const Step& step, char* const* bufs, Handle stream) {
  constexpr size_t kMax = 64;
  size_t np = step.slots.size();
  if (np + 1 > kMax) throw std::logic_error("runtime::gpu::launch: too many kernel params");
  // Each param is passed by address: device pointers as 64-bit values, then n.
  uint64_t values[kMax];
  void* params[kMax];
  for (size_t i = 0; i < np; ++i) {
    values[i] = reinterpret_cast<uintptr_t>(bufs[i]);
    params[i] = &values[i];
  }
  long long n = step.items;
  params[np] = &n;
  return d.launch(step.entry, step.geometry.grid, step.geometry.block, stream, params,
                  static_cast<unsigned>(np + 1));
}

const Launcher& launcher_for(Device d, const char* api) {
  Context& c = context(d, api);  // raises: unavailable
  static std::mutex mu;
  static auto* launchers = new std::map<std::pair<int, int>, std::unique_ptr<GpuLauncher>>;
  std::lock_guard lock(mu);
  auto& l = (*launchers)[{static_cast<int>(d.kind), d.index}];
  if (!l) l = std::make_unique<GpuLauncher>(c);
  return *l;
}

}  // namespace runtime::gpu
