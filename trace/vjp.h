// Reverse-mode differentiation of recorded graphs: one rule per primitive, building new
// nodes of the same graph (so the backward pass fuses and compiles like any other graph).
#pragma once
#include <vector>

#include "ir/node.h"
#include "trace/tracer.h"

namespace rune {

// Cotangents of `wrt` for roots[i] receiving cotangents[i] (same shape and dtype as the root).
// A node of `wrt` that no root depends on gets zeros. The backward pass reads no inner node of
// a `checkpoints` block: it recomputes them from the block's inputs (trace/checkpoint.cpp). The
// cotangent of a `custom_vjps` output goes to its inputs by its rule (trace/custom_vjp.h), not
// through the nodes that computed it.
std::vector<ir::NodeRef> vjp_nodes(const std::vector<ir::NodeRef>& roots,
                                   const std::vector<ir::NodeRef>& cotangents,
                                   const std::vector<ir::NodeRef>& wrt,
                                   const std::vector<Tracer::Checkpoint>& checkpoints = {},
                                   const std::vector<Tracer::CustomVjp>& custom_vjps = {});

// The backward nodes `grads` rewritten so that no inner node of a block (reachable from its
// outputs without passing its inputs) is read: each is recomputed from its block's inputs, read
// through a Copy, so the recomputed nodes are distinct from the forward's (nodes are interned)
// and the forward's values need not live until the backward pass.
std::vector<ir::NodeRef> rematerialise(const std::vector<ir::NodeRef>& grads,
                                       const std::vector<ir::NodeRef>& forward_roots,
                                       const std::vector<Tracer::Checkpoint>& checkpoints);
// How many forward nodes (not Params or Consts) the backward nodes `grads` read: the residuals
// a training step keeps from its forward pass to its backward pass.
size_t count_residuals(const std::vector<ir::NodeRef>& grads,
                       const std::vector<ir::NodeRef>& forward_roots);

}  // namespace rune
