// The reference evaluator for scalar (lowered) node DAGs: evaluates every node once, in
// topological order, through ir::apply. `leaf` supplies Load/Valid/Index/Acc values.
#pragma once
#include <functional>

#include "ir/scalar.h"

namespace ir {
Value eval_scalar(NodeRef root, const std::function<Value(NodeRef)>& leaf);
}
