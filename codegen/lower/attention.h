// The GPU attention kernel's tile (codegen/lower/attention.cpp): a thread block computes a
// block of query rows of one batch element (a (batch, head) pair), keeping those rows' scores,
// their rows of q and the softmax stages' partial results in block-shared memory. The schedule
// (codegen/schedule_attention.h) fuses the chain on a GPU only where one row fits; the kernel
// takes as many rows as fit, at most kGpuAttentionMaxRows.
#pragma once
#include <algorithm>
#include <cstdint>

namespace codegen {

// Block-shared bytes the kernel may use: under the 48 KiB of static shared memory a CUDA block
// may declare (HIP's gfx90a has 64 KiB).
inline constexpr int64_t kGpuAttentionSharedBytes = 44 * 1024;
// Query rows per block at most: a softmax stage runs 8 lane threads per row, 256 in all.
inline constexpr int64_t kGpuAttentionMaxRows = 32;
// The block's threads (the entry's fixed block size).
inline constexpr int64_t kGpuAttentionThreads = 256;

// Shared bytes per query row: its tk scores and d elements of q (of `itemsize` bytes), and per
// softmax stage 8 lane results and the row's result (at most 8 bytes each).
inline int64_t gpu_attention_row_bytes(int64_t tk, int64_t d, int64_t stages, int64_t itemsize) {
  return (std::max<int64_t>(tk, 1) + d) * itemsize + stages * 9 * 8;
}

// Query rows per block for tq queries against tk keys of width d; 0 where one row does not fit
// (the schedule then keeps the three kernels). With D = 64 and softmax's two stages: 11,164
// float32 keys or 5,550 float64 keys at most.
inline int64_t gpu_attention_rows(int64_t tq, int64_t tk, int64_t d, int64_t stages,
                                  int64_t itemsize) {
  const int64_t fit = kGpuAttentionSharedBytes / gpu_attention_row_bytes(tk, d, stages, itemsize);
  if (fit < 1) return 0;
  return std::clamp<int64_t>(std::min(fit, kGpuAttentionMaxRows), 1, std::max<int64_t>(tq, 1));
}

// Groups of rows that share a phase's `width` work items per row (keys for the scores, output
// columns for the values): as many as fill the block's threads, at least 1, at most `rows`.
inline int64_t gpu_attention_groups(int64_t width, int64_t rows) {
  return std::clamp<int64_t>(kGpuAttentionThreads / std::max<int64_t>(width, 1), 1,
                             std::max<int64_t>(rows, 1));
}

}  // namespace codegen
