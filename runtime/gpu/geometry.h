// Launch geometry of the rendered kernels (codegen/gpu/c_renderer.h): every entry point is a
// grid-stride loop over its n work items, so any grid is correct; the grid is sized to fill
// the device (a few blocks per multiprocessor) without launching blocks that would find no work.
#pragma once
#include <cstdint>

namespace runtime::gpu {

inline constexpr unsigned kThreadsPerBlock = 256;
// 8 blocks of 256: the 2048 resident threads of an SM since Volta (fewer where a kernel's
// registers do not allow it; the rest then wait their turn, which a grid-stride loop tolerates).
inline constexpr int kBlocksPerMultiprocessor = 8;

struct LaunchGeometry {
  unsigned grid = 0;   // blocks; 0: nothing to launch (n == 0)
  unsigned block = 0;  // threads per block, a multiple of the warp size
  bool operator==(const LaunchGeometry&) const = default;
};

// grid = min(ceil(n / 256), 8 * multiprocessors); block = 256, or n rounded up to the warp
// size when n is smaller (a 3-element call launches one warp).
inline LaunchGeometry launch_geometry(int64_t n, int multiprocessors, int warp_size) {
  if (n <= 0) return {};
  if (warp_size <= 0) warp_size = 32;
  if (multiprocessors <= 0) multiprocessors = 1;
  int64_t block = kThreadsPerBlock;
  if (n < block) block = (n + warp_size - 1) / warp_size * warp_size;
  if (block > kThreadsPerBlock) block = kThreadsPerBlock;
  int64_t blocks = (n + block - 1) / block;
  int64_t cap = static_cast<int64_t>(kBlocksPerMultiprocessor) * multiprocessors;
  if (blocks > cap) blocks = cap;
  return {static_cast<unsigned>(blocks), static_cast<unsigned>(block)};
}

// An entry that needs exactly `block` threads per block (block-shared tiles, codegen/lowered.h
// Entry::block) over n threads (a multiple of block): grid = min(n / block, 8 * multiprocessors),
// its block-stride loop covers the rest.
inline LaunchGeometry fixed_block_geometry(int64_t n, int64_t block, int multiprocessors) {
  if (n <= 0 || block <= 0) return {};
  if (multiprocessors <= 0) multiprocessors = 1;
  int64_t blocks = (n + block - 1) / block;
  int64_t cap = static_cast<int64_t>(kBlocksPerMultiprocessor) * multiprocessors;
  if (blocks > cap) blocks = cap;
  return {static_cast<unsigned>(blocks), static_cast<unsigned>(block)};
}

}  // namespace runtime::gpu
