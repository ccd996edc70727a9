// A compiled program for the host: buffer slots and a list of kernel launches.
// Slots: inputs (bound by the caller), then outputs, then temporaries; the runtime allocates
// outputs and temporaries from the caching allocator for each run.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/allocator.h"

namespace runtime {

using HostKernelFn = void (*)(char** bufs, int64_t lo, int64_t hi);
// A hand-written library kernel (e.g. the matrix product), with its plan as the first argument.
using HostLibraryFn = void (*)(const void* plan, char** bufs, int64_t lo, int64_t hi);

struct HostStep {
  HostKernelFn fn = nullptr;
  std::string name;
  int64_t items = 0;       // work items; the pool splits [0, items)
  int64_t cost = 1;        // element operations per item, to decide on threading
  int64_t bytes = 0;       // bytes moved, for DEBUG=2's GB/s
  std::vector<int> slots;  // kernel param -> slot
  // Set instead of fn for a library kernel; `plan` lives as long as the step.
  HostLibraryFn library = nullptr;
  std::shared_ptr<const void> plan;
  // The loaded code fn (or the plan's epilogue) points into: alive as long as the step.
  std::shared_ptr<const void> keep;

  void call(char** bufs, int64_t lo, int64_t hi) const {
    if (library)
      library(plan.get(), bufs, lo, hi);
    else
      fn(bufs, lo, hi);
  }
};

struct HostProgram {
  int n_inputs = 0;
  std::vector<int64_t> slot_bytes;  // per slot; inputs: -1
  std::vector<int> output_slots;
  std::vector<HostStep> steps;
  // Per output: the inputs whose memory that output may take when donated. Input i qualifies
  // when every kernel reading it runs before the output's kernel, or is that kernel and reads
  // it only at each element's own index (so writing element k never clobbers a later read).
  std::vector<std::vector<int>> inplace_inputs;
  // Temporaries (slots that are neither inputs nor outputs) share one block per run: byte
  // offset of each slot in it (-1 for other slots), and the block's size. Set by finalize().
  std::vector<int64_t> temp_offset;
  int64_t temp_bytes = 0;

  // Computes temp_offset and temp_bytes; call once the slots and outputs are set.
  void finalize();

  // Runs the program on input base pointers; returns one buffer per output: `reuse[o]` when
  // given (a donated input's buffer, see inplace_inputs), else a fresh one.
  std::vector<BufferRef> run(char* const* inputs, size_t n, const BufferRef* reuse = nullptr) const;
  std::vector<BufferRef> run(const std::vector<char*>& inputs) const {
    return run(inputs.data(), inputs.size());
  }
};

}  // namespace runtime
