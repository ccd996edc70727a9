// data_parallel's gradient buckets inside its compiled step: each bucket's all_reduce is split
// into a start, issued as soon as the backward pass has produced the bucket's last leaf, and a
// wait at the end of the step (distributed/async_collectives.h), so later backward kernels run
// while the bucket's messages move, as PyTorch DDP's bucket hooks do.
//
// Order: buckets are planned over the leaves in reverse (DDP's order: the last layers'
// gradients are ready first), the same plan on every rank. The first result lists the waited
// buckets in that order and must be the first outputs of the program: the scheduler issues a
// program's message-moving steps in the order of a walk from its outputs (codegen/schedule.cpp),
// so the starts then run in bucket order, the order the backward pass finishes them in.
//
// Bits: a bucket is its leaves flattened and concatenated, reduced elementwise in rank order;
// each leaf is then cut back out: every element has the bits of an all_reduce of its own leaf,
// the bits of all_reduce_leaves (collectives.h), whatever the cap.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "distributed/collectives.h"

namespace rune::distributed::detail {

// Inside a trace (or eagerly): (the waited buckets in bucket order, each leaf reduced with `op`,
// in leaves' order). Raises naming `api` as all_reduce_leaves does.
std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> all_reduce_leaves_overlapped(
    const Communicator& comm, const char* api, const std::vector<nx::Tensor>& leaves, ReduceOp op,
    size_t bucket_bytes);

}  // namespace rune::distributed::detail
