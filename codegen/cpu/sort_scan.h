// Sorts and cumulative sums on the host (ir::OpCategory::Library: Sort, Argsort, Cumsum), along
// the last axis of a contiguous operand, row by row.
//
// Sorts are ascending and stable under one order shared with the CUDA/HIP rank sort
// (codegen/gpu/c_renderer.cpp): NaN after everything, -0 equal to +0, ties keep their input order.
// A stable sort's result is unique, so every algorithm (Thrust's parallel merge sort, the
// standard library's, the GPU rank sort) gives the same bits. A single long row is sorted with
// thrust::stable_sort on Thrust's OpenMP system where the build found Thrust and OpenMP
// (RUNE_HAVE_THRUST_OMP), else with std::stable_sort; many rows are sorted in parallel over the
// runtime's thread pool, one sequential std::stable_sort per row.
//
// A cumulative sum is the left-to-right chain acc = x[0]; acc = acc + x[i] (int64 wraps), the
// same order as the GPU kernels, so the bits match on every backend (docs/numerics.md).
#pragma once
#include <cstdint>

#include "codegen/kernel.h"

namespace codegen::cpu {

// Buffers: bufs[0] the output (contiguous [rows, n]), bufs[1] the operand (contiguous [rows, n]
// from element `offset`). Work items are rows.
struct SortScanPlan {
  ir::Op op = ir::Op::Sort;
  ir::DType in = ir::DType::Float32, out = ir::DType::Float32;
  int64_t rows = 0, n = 0, offset = 0;

  int64_t cost_per_row() const;  // element operations, for the thread pool
};

// The plan of a library kernel (KernelSpec::library).
SortScanPlan plan_sort_scan(const KernelSpec& k);

// Runs rows [lo, hi) of the plan (a `const SortScanPlan*`); a runtime::HostLibraryFn.
void run_sort_scan(const void* plan, char** bufs, int64_t lo, int64_t hi);

}  // namespace codegen::cpu
