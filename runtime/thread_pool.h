// The host thread pool. parallel_for splits [0, n) into contiguous chunks; work below a
// threshold runs on the calling thread alone, so tiny kernels pay no synchronisation.
#pragma once
#include <cstdint>
#include <functional>

namespace runtime {

int host_threads();  // workers + the caller; RUNE_NUM_THREADS overrides the core count
// Runs fn(lo, hi) over a partition of [0, n). `cost` is the estimated work per item (element
// operations); the pool is used only when n * cost is large enough to repay waking it.
void parallel_for(int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace runtime
