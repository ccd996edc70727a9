// What differs per device when a program runs, behind one interface chosen by the program's
// device (Program::launcher()):
//   CPU      the synchronous host: steps run at once on the thread pool; a call's check reads
//            run at once and a failure is thrown to the caller.
//   CPU:n    an asynchronous host device: the same steps, but a call is one task of the
//            device's stream (runtime/stream.h); the task skips its work when an input's
//            failure state is set by then, and its check reads run in it.
//   CUDA:n / HIP:n  a GPU (runtime/gpu/launcher.h): steps are queued on the device's driver
//            stream from the caller's thread; an input already failed when the call is made
//            skips it, else the results share the first input's failure state; check reads are
//            a host task run at the next wait (after device work queued later, so what they
//            read must be protected from later writes: after_runs_at_wait()).
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/program.h"
#include "runtime/stream.h"

namespace runtime {

// One call of a program by code that holds values (an eager op, a rune::jit call).
struct Call {
  char* const* inputs = nullptr;  // device addresses of the program's inputs
  size_t n = 0;
  const BufferRef* reuse = nullptr;  // per output, may be null (see Program::run)
  // The failure states of the values the call reads, in argument order (an entry may point to
  // a null state). Only read during call(); the synchronous host has none and ignores them.
  const std::shared_ptr<Poison>* const* poisons = nullptr;
  size_t n_poisons = 0;
  // Host work after the program, in the device's order (reading its checks). A failure it
  // returns poisons the results; on the synchronous host it is thrown at once, elsewhere it is
  // raised at the next wait. Unset: none.
  std::function<std::exception_ptr(const std::vector<BufferRef>& outputs)> after;
  // Held until the call's deferred work ran (the program on CPU:n, `after` on a GPU): the
  // values whose buffers it reads. Needed only where defers_calls() or, with `after`,
  // after_runs_at_wait().
  std::shared_ptr<const void> keep;
};

struct Launched {
  std::vector<BufferRef> outputs;  // one per program output
  std::shared_ptr<Poison> poison;  // the results' failure state; null: none
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual Device device() const = 0;
  // The alignment of each temporary in a run's shared block (Program::finalize).
  virtual int64_t temp_alignment() const = 0;
  // The device Program::run allocates its outputs and temporaries on.
  virtual Device memory() const = 0;
  // Whether programs on the device read host memory directly (host scalars bind as they are;
  // elsewhere they are uploaded with write()).
  virtual bool host_memory() const = 0;
  // Whether call() runs the program later, as a task of the device's stream (CPU:n): what the
  // call reads must then be held in Call::keep.
  virtual bool defers_calls() const = 0;
  // Whether a call's `after` runs only at the next wait, after device work queued later (a
  // GPU): the values it reads are then held as observers of their own by the caller, so no
  // later op writes a donated result into them.
  virtual bool after_runs_at_wait() const = 0;
  // Runs or queues one step with its params (bufs[p] is slot step.slots[p]). DEBUG=2 prints
  // "rune: kernel <name> on <device>: <items> items, <us> us, <GB/s> GB/s" and RUNE_PROFILE
  // records a "kernel" span, for every device.
  virtual void launch(const Step& step, char* const* bufs) const = 0;
  // The function launch(step, ...) would call as fn(bufs, 0, step.items) on the calling thread,
  // with nothing else to do (a small host kernel, neither timed nor profiled), or null. A caller
  // that reruns a step many times (a loop step's body) may call it directly: the same work.
  virtual HostKernelFn inline_kernel(const Step&) const { return nullptr; }
  // State the launcher keeps per program (a GPU's replay graphs, runtime/gpu/graphs.h), made
  // once by Program::finalize; null: none.
  virtual std::shared_ptr<void> prepare(const Program&) const { return nullptr; }
  // Runs or queues every step of `p` in order, slot s at slot_ptrs[s]: launch() per step, or
  // (a GPU) one graph launch replaying them.
  virtual void launch_steps(const Program& p, char* const* slot_ptrs) const;
  // Runs, or orders against the device's stream, one call of `p` (see the table above).
  virtual Launched call(const std::shared_ptr<const Program>& p, const Call& c) const = 0;
  // n bytes between the device's memory and host memory (a GPU's read waits for the device
  // work queued before it; its write may return before the device has the data).
  virtual void read(void* dst, const void* src, size_t n) const = 0;
  virtual void write(void* dst, const void* src, size_t n) const = 0;
};

// The launcher of a device. Throws std::invalid_argument "<api>: device CUDA:0 is unavailable:
// <why>" for a GPU that does not exist here.
const Launcher& launcher_for(Device d, const char* api = "runtime");

// The output buffers of an asynchronous call made now: reuse[o] where given, else fresh memory
// of the output's slot size on the program's device.
std::vector<BufferRef> allocate_outputs(const Program& p, const BufferRef* reuse);

}  // namespace runtime
