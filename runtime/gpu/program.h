// A compiled program for a GPU: buffer slots and kernel launches, the device twin of
// runtime::HostProgram (same slot numbering: inputs bound by the caller, then outputs, then
// temporaries; the same inplace_inputs rule for donation). run() queues every launch on the
// device's stream from the calling thread and returns at once.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/gpu/context.h"
#include "runtime/gpu/geometry.h"

namespace runtime::gpu {

// One step of a program: a rendered kernel launched with `fn`, or (when `host` is set) library
// work queued by host code.
struct GpuStep {
  Handle fn = nullptr;
  std::string name;
  int64_t items = 0;        // n of the entry point (grid-stride work items)
  int64_t bytes = 0;        // bytes read and written, for DEBUG=2's GB/s
  std::vector<int> slots;   // pointer param -> slot (scratch last for a two-phase reduction)
  LaunchGeometry geometry;  // grid 0: no work items, nothing runs
  // A host step: instead of launching a kernel, launch() calls host(c, bufs) with the device
  // current, and it queues the work on c's stream (c.handle()) itself, e.g. CUB's radix sorts
  // from librune_cub.so (runtime/cuda/cub_sort.h). It must only queue (no wait), keep to the
  // buffers it is given (bufs[p] is slot slots[p]), and throw std::runtime_error when queueing
  // fails. `fn` is unused; timing, profiling and DEBUG=2 are as for a kernel.
  std::function<void(Context& c, char* const* bufs)> host = {};
};

struct GpuProgram {
  Device device;
  int n_inputs = 0;
  std::vector<int64_t> slot_bytes;  // per slot; inputs: -1
  std::vector<int> output_slots;
  std::vector<GpuStep> steps;
  std::vector<std::vector<int>> inplace_inputs;  // see HostProgram::inplace_inputs
  // Temporaries share one block per run (offsets aligned to 256 bytes); set by finalize().
  std::vector<int64_t> temp_offset;
  int64_t temp_bytes = 0;

  void finalize();

  // Queues the program: `inputs` are device addresses of the n_inputs inputs. Returns one
  // buffer per output: reuse[o] when given, else a fresh one from the device's caching
  // allocator. Temporaries go back to the cache at once: later work is queued after this.
  std::vector<BufferRef> run(char* const* inputs, size_t n, const BufferRef* reuse = nullptr) const;
};

// The one launch helper: queues `step` on the device's stream with pointer params `bufs` and
// n = step.items (a host step: calls step.host). With DEBUG=2 or RUNE_PROFILE it times the kernel
// with events (a wait); DEBUG=2 prints "rune: kernel <name> on CUDA:0: <items> items, <us> us,
// <GB/s> GB/s" and RUNE_PROFILE records a "kernel" span of the device time.
void launch(Context& c, const GpuStep& step, char* const* bufs);

}  // namespace runtime::gpu
