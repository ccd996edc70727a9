// The host thread pool. parallel_for splits [0, n) into contiguous chunks; work below a
// threshold runs on the calling thread alone, so tiny kernels pay no synchronisation.
#pragma once
#include <cstdint>
#include <functional>

namespace runtime {

int host_threads();  // workers + the caller; RUNE_NUM_THREADS overrides the core count

// Work (items x cost, in element operations) below which parallel_for runs on the calling thread
// and the host launcher calls a kernel directly. Measured on the 2-vCPU bench VM (issue 22,
// docs/performance.md "The host thread pool's threshold"): a second thread paid for none of sum,
// x * 2 + 1 and a column sum under 2^20 element operations, and lost up to 2x between 2^16 and
// 2^19 (1 MiB float32 sum: 14-17 us on the calling thread, 14-26 us on two, 46 us in a busier
// moment); heavy elementwise kernels count their operations per element (a tanh about a
// hundred), so they still reach the pool from about 10^4 elements.
inline constexpr int64_t kParallelWork = int64_t{1} << 20;
// Runs fn(lo, hi) over a partition of [0, n). `cost` is the estimated work per item (element
// operations); the pool is used only when n * cost is large enough to repay waking it.
void parallel_for(int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace runtime
