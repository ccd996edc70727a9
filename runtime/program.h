// A compiled program, for every device: buffer slots and a list of steps.
// Slots: inputs (bound by the caller), then outputs, then temporaries; the runtime allocates
// outputs and temporaries for each run (the device's caching allocator). A step is a kernel
// launch (an entry point of the device's loaded code) or a library call (the host's matrix
// product and sorts with their plans, CUB's sorts on CUDA). How a step reaches its device, how
// temporaries align and how a call orders against the device's stream is the device's
// launcher's business (runtime/launcher.h), chosen by the program's device.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/gpu/geometry.h"

namespace runtime {

namespace gpu {
class Context;
}
class Launcher;
struct TempInterval;  // runtime/temp_placement.h

using HostKernelFn = void (*)(char** bufs, int64_t lo, int64_t hi);
// A hand-written library kernel (e.g. the matrix product), with its plan as the first argument.
using HostLibraryFn = void (*)(const void* plan, char** bufs, int64_t lo, int64_t hi);

struct Step {
  enum class Kind : uint8_t {
    Kernel,   // a rendered kernel: `entry` over `items` work items
    Library,  // library work: host `library(plan, ...)`, or GPU `queue(context, bufs)`
  };
  Kind kind = Kind::Kernel;
  std::string name;
  int64_t items = 0;       // work items: the host pool splits [0, items); a GPU entry's n
  int64_t cost = 1;        // host: element operations per item, to decide on threading
  int64_t bytes = 0;       // bytes moved, for DEBUG=2's GB/s
  std::vector<int> slots;  // param -> slot (a two-phase reduction's scratch last)
  // Kernel: the entry point in the device's loaded code, an opaque handle: a HostKernelFn on
  // the host (host_kernel()), the driver's function handle on a GPU.
  void* entry = nullptr;
  gpu::LaunchGeometry geometry;  // GPU: grid 0 means no work items, nothing runs
  // Library on the host: `library` runs [lo, hi) of `items` with `plan` (alive as the step).
  HostLibraryFn library = nullptr;
  std::shared_ptr<const void> plan;
  // Library on a GPU: host code that queues the work on c's stream (c.handle()) with the device
  // current, e.g. CUB's radix sorts (runtime/cuda/cub_sort.h). It must only queue (no wait),
  // keep to the buffers it is given (bufs[p] is slot slots[p]) and throw std::runtime_error
  // when queueing fails; timing, profiling and DEBUG=2 are as for a kernel.
  std::function<void(gpu::Context& c, char* const* bufs)> queue = {};
  // The loaded code `entry` (or the plan's epilogue) points into: alive as long as the step.
  std::shared_ptr<const void> keep;
  // Host: where the kernel's current entry point is read at each launch instead of `entry`,
  // when set (a tiered kernel whose full tier replaces its quick tier while programs run:
  // codegen/cpu/kernel_upgrades.h); it lives in `keep`. Both tiers compute the same bits.
  const std::atomic<void*>* live_entry = nullptr;

  HostKernelFn host_kernel() const {
    return reinterpret_cast<HostKernelFn>(live_entry ? live_entry->load(std::memory_order_acquire)
                                                     : entry);
  }
  static void* entry_of(HostKernelFn fn) { return reinterpret_cast<void*>(fn); }
};

struct Program {
  Device device;
  int n_inputs = 0;
  std::vector<int64_t> slot_bytes;  // per slot; inputs: -1
  std::vector<int> output_slots;
  std::vector<Step> steps;
  // Per output: the inputs whose memory that output may take when donated. Input i qualifies
  // when every kernel reading it runs before the output's kernel, or is that kernel and reads
  // it only at each element's own index (so writing element k never clobbers a later read).
  std::vector<std::vector<int>> inplace_inputs;
  // Temporaries (slots that are neither inputs nor outputs) share one block per run: byte
  // offset of each slot in it (-1 for other slots), and the block's size. Each offset is
  // aligned as the device's launcher says (host: 64 bytes, GPU: 256). Temporaries are placed by
  // their lifetimes (runtime/temp_placement.h): one whose last step ran gives its bytes to one
  // whose first step comes later, which is safe because a program's steps run in order on one
  // stream and only its own steps see its temporaries. Set by finalize().
  std::vector<int64_t> temp_offset;
  int64_t temp_bytes = 0;
  // The launcher's own state for this program (Launcher::prepare), set by finalize().
  std::shared_ptr<void> launcher_state;

  // Chooses the launcher of `device` (a GPU's must exist: raises "<api>: device ... is
  // unavailable" otherwise) and computes temp_offset and temp_bytes; call once the device,
  // slots, outputs and steps are set.
  void finalize();
  const Launcher& launcher() const { return *launcher_; }

  // Runs the program on input base pointers (device addresses): on the host at once, on the
  // calling thread; on a GPU every step is queued on the device's stream and it returns at
  // once (temporaries go back to the cache at once: later work is queued after this). Returns
  // one buffer per output: `reuse[o]` when given (a donated input's buffer, see
  // inplace_inputs), else a fresh one. An asynchronous host device (CPU:n) runs it here too:
  // ordering a call against a stream is Launcher::call's job.
  std::vector<BufferRef> run(char* const* inputs, size_t n, const BufferRef* reuse = nullptr) const;
  std::vector<BufferRef> run(const std::vector<char*>& inputs) const {
    return run(inputs.data(), inputs.size());
  }
  // Launches every step in order with slot s at slot_ptrs[s] (every slot bound by the caller):
  // run's last part, and what a caller that owns the slots' memory (a loop step rerunning its
  // body, trace/staged_program.cpp) calls directly.
  void launch_steps(char* const* slot_ptrs) const;

 private:
  void print_temp_lifetimes(const std::vector<TempInterval>& intervals, int64_t block) const;
  const Launcher* launcher_ = nullptr;
};

}  // namespace runtime
