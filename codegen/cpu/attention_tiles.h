// Per-thread scratch tiles and addressing shared by the host's attention kernels
// (codegen/cpu/attention.cpp, the forward pass; codegen/cpu/attention_gradient.cpp, the
// gradient): a task computes a block of query rows into tiles of its thread, and the compiled
// kernels it runs there address those tiles as if they were the whole buffers they were made for.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/node.h"

namespace codegen::cpu {

// The forward kernel's tiles are 0 (scores) and 1 (weights); the gradient kernel's start here,
// so the two never share a tile.
constexpr size_t kGradientFirstTile = 2;

// Tile `which` of this thread, 64-byte aligned, at least `bytes` long; kept for the thread's
// next task (grown on demand, never shrunk).
char* attention_tile(size_t which, int64_t bytes);

// The offset of batch element `bi` (C order over `batch`) along per-axis strides.
int64_t batch_offset(const ir::Shape& batch, const std::vector<int64_t>& strides, int64_t bi);

// `tile` as the base of a buffer whose byte `before` is the tile's first: a kernel run on the
// tile addresses its rows by their index in the whole buffer. The pointer is only offset and
// never dereferenced below `tile`.
char* rebased(char* tile, int64_t before);

}  // namespace codegen::cpu
