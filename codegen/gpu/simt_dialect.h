// What the CUDA and HIP dialects of the C-like renderer share, written once: both are CUDA's
// C++ (extern "C" __global__ entries, static __device__ __forceinline__ helpers, __restrict__,
// blockIdx / blockDim / threadIdx, the bit-cast and float64 sqrt intrinsics, __shared__ and
// __syncthreads, __launch_bounds__, the vector types), and both exchange values among the 8
// lanes of a reduction group with shuffles, which differ only by the shuffle call. Each dialect
// (codegen/cuda/cuda_dialect.cpp, codegen/hip/hip_dialect.cpp) adds its own words on top.
#pragma once
#include <string>

#include "codegen/gpu/c_renderer.h"

namespace codegen::gpu {

// The shared dialect named `name`. The prelude holds the four lane helpers (rune_shfl_u32 /
// _u64: lane l + k of the group; rune_shfl_idx_u32 / _u64: lane k), whose bodies return
// `shfl_down` and `shfl_idx`: a call spelled over the helper's parameters v and k, e.g.
// "__shfl_down_sync(0xffu << (threadIdx.x & 24u), v, k, 8)". Invariant: the 8 lanes of a group
// are 8-aligned threads of one warp / wavefront, active together (c_renderer.h).
CDialect simt_dialect(const std::string& name, const std::string& shfl_down,
                      const std::string& shfl_idx);

}  // namespace codegen::gpu
