// A compiled program's kernels replayed as one driver graph (CUDA graphs, HIP graphs): one
// graph launch instead of one launch per kernel, the host-side cost of a many-kernel step.
//
// A graph records its kernels' parameters by value, so it is valid only for the slot addresses
// it was captured with. Per program, graphs are kept by the program's whole slot-address list
// (inputs, outputs, temporaries): a training step whose outputs take its donated inputs'
// memory and whose temporaries come back from the caching allocator runs with the same few
// address lists again and again. A list is captured the second time it is seen among the last
// 2 x kMaxGraphs lists run step by step (a program run once, or with ever-new addresses, never
// pays for a capture), at most kMaxGraphs per program
// (least recently used replaced).
//
// Capture runs on a private stream of the device (never the device's stream, so work that
// other threads queue meanwhile is neither recorded nor lost), in thread-local capture mode,
// under a per-device lock; the graph is then launched on the device's stream, ordered like
// the launches it replaces. Any failure to capture or instantiate leaves the program launching
// step by step from then on (the step-by-step launch raises whatever error the kernels give).
//
// Not replayed as graphs: programs with fewer than two kernels or with library steps (CUB's
// sorts), runs under DEBUG >= 2 or RUNE_PROFILE (they time each kernel), drivers without graph
// entries, and everything when RUNE_GPU_GRAPHS=0. The bits are those of step-by-step launches:
// the same kernels with the same parameters in the same order on one stream.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/gpu/driver.h"

namespace runtime {
struct Program;
}

namespace runtime::gpu {

class Context;

inline constexpr size_t kMaxGraphs = 4;

// Process-wide counts, for tests and DEBUG: graphs captured, graph launches, and captures that
// failed (the program then launched step by step).
struct GraphStats {
  int64_t captures = 0, replays = 0, failures = 0;
};
GraphStats graph_stats();

// The graphs of one program on one device.
class ProgramGraphs {
 public:
  explicit ProgramGraphs(Context& c) : c_(c) {}
  ~ProgramGraphs();
  ProgramGraphs(const ProgramGraphs&) = delete;
  ProgramGraphs& operator=(const ProgramGraphs&) = delete;

  // Queues p's steps with slot s at slot_ptrs[s] on the device's stream as one graph launch
  // and returns true, or returns false: the caller launches the steps one by one (a first
  // sighting of these addresses, or graphs no longer used for this program).
  bool launch(const Program& p, char* const* slot_ptrs);

 private:
  struct Entry {
    std::vector<char*> key;
    Handle exec = nullptr;
    uint64_t used = 0;
  };
  Handle capture(const Program& p, char* const* slot_ptrs);

  Context& c_;
  std::mutex mu_;
  std::vector<Entry> entries_;
  // The address lists last run step by step (a training step alternating between two sets of
  // buffers comes back every other call), at most kRemembered.
  static constexpr size_t kRemembered = 2 * kMaxGraphs;
  std::deque<std::vector<char*>> seen_;
  uint64_t clock_ = 0;
  bool off_ = false;  // a capture failed: step by step from now on
};

// Graphs for `p` (finalized, on c's device), or null when p is never replayed as a graph
// (see above; RUNE_GPU_GRAPHS is read once per process).
std::shared_ptr<ProgramGraphs> graphs_for(Context& c, const Program& p);

}  // namespace runtime::gpu
