// Reverse-mode differentiation of recorded graphs: one rule per primitive, building new
// nodes of the same graph (so the backward pass fuses and compiles like any other graph).
#pragma once
#include <vector>

#include "ir/node.h"

namespace rune {

// Cotangents of `wrt` for roots[i] receiving cotangents[i] (same shape and dtype as the root).
// A node of `wrt` that no root depends on gets zeros.
std::vector<ir::NodeRef> vjp_nodes(const std::vector<ir::NodeRef>& roots,
                                   const std::vector<ir::NodeRef>& cotangents,
                                   const std::vector<ir::NodeRef>& wrt);

}  // namespace rune
