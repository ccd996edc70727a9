// Batching of recorded graphs (rune::vmap): one rule per primitive of ir/ops.def, building the
// batched graph from nodes of the same kind, so it fuses and compiles like any other graph.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ir/node.h"

namespace rune {

// A node of the batched graph. Invariant: when `batched`, axis 0 of `node` is the batch axis
// (extent B) and the rest is the per-example node's shape; when not, `node` is the per-example
// node itself (it depends on no batched input, so every example shares its value).
struct BatchedNode {
  ir::NodeRef node;
  bool batched;
};

// The batched forms of `roots`, given the batched forms of some Params (`inputs`: the
// per-example Param -> its batched Param). Every other leaf is shared by the examples.
std::vector<BatchedNode> batch_nodes(const std::vector<ir::NodeRef>& roots,
                                     const std::unordered_map<ir::NodeRef, ir::NodeRef>& inputs,
                                     int64_t batch);

// x with a batch axis of extent `batch` at 0: x itself when batched, else x broadcast (a view).
ir::NodeRef with_batch_axis(BatchedNode x, int64_t batch);

}  // namespace rune
