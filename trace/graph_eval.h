// Replays a recorded graph through the current interpreter: eagerly outside any trace, into
// the enclosing trace inside rune::jit (so a gradient compiles into the caller's program).
#pragma once
#include <vector>

#include "core/tensor.h"
#include "ir/node.h"

namespace rune {

// Evaluates `roots`; Param i is bound to bindings[i]. Eagerly, nodes without a device operand
// (an iota, a constant broadcast and padded) run on `device`, the graph's params' device.
std::vector<nx::Tensor> evaluate(const std::vector<ir::NodeRef>& roots,
                                 const std::vector<nx::Tensor>& bindings, nx::Device device);

}  // namespace rune
