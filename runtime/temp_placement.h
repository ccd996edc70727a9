// Where a compiled program's temporaries lie in its one block per run, placed by their
// lifetimes: two temporaries share bytes only when no step touches both while both are alive.
//
// A temporary is alive from the first step that names it to the last (inclusive). Every step of
// a program runs on its device's one stream, in program order (the host runs a step to its end
// before the next; a GPU queues them on one stream), so memory whose last step has been issued
// may be handed to a temporary whose first step comes later. Two temporaries whose intervals
// meet at a step (one's last step is the other's first) never share: a kernel must not read and
// write overlapping memory unless codegen's in-place rule (codegen/inplace.h, outputs only)
// says so.
//
// The assignment is greedy by size, as XLA's buffer assignment (GlobalDecreasingSizeBestFitHeap)
// and TVM's storage rewrite order it: the largest temporary is placed first, each at the lowest
// offset where it overlaps no placed temporary whose interval meets its own.
#pragma once
#include <cstdint>
#include <vector>

namespace runtime {

struct TempInterval {
  int64_t bytes = 0;  // the temporary's size (0 is placed as 1 byte)
  int first = 0;      // the first and last step that name it: first <= last
  int last = 0;
};

struct TempPlacement {
  std::vector<int64_t> offset;  // per temporary, a multiple of `align`
  int64_t bytes = 0;            // the block's size: every placed temporary ends within it
};

// Places `temps` in one block; `align` (> 0) is each offset's alignment and each size's rounding.
// Deterministic: the same intervals give the same offsets.
TempPlacement place_temporaries(const std::vector<TempInterval>& temps, int64_t align);

}  // namespace runtime
