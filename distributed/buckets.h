// Gradient buckets, as PyTorch DDP groups gradients: many small leaves cost few collectives.
// The plan is a pure function of the leaves' dtypes and byte sizes and of the cap, so every rank
// of a data-parallel job (same model, same step) computes the same plan and issues the same
// collectives in the same order; the header exchange of each collective checks that anyway.
//
// Bits: a bucket is its leaves' elements concatenated, reduced elementwise in rank order
// (distributed/host/collective_kernels.h), so each element gets exactly the fold a per-leaf
// all_reduce gives it, whatever the cap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/dtype.h"

namespace rune::distributed::detail {

// PyTorch DDP's default bucket_cap_mb.
constexpr size_t kDefaultBucketBytes = size_t{25} << 20;

struct LeafSize {
  ir::DType dtype;
  size_t bytes;
};

// The buckets, each a list of leaf indices in leaf order: per dtype (dtypes in order of first
// appearance) its leaves are packed greedily in order, a bucket closing when the next leaf would
// take it past `cap_bytes`; a leaf larger than the cap is a bucket of its own. Empty leaves join
// the open bucket (they cost nothing). cap_bytes must be positive.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<LeafSize>& leaves,
                                              size_t cap_bytes);

}  // namespace rune::distributed::detail
