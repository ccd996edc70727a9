// The reference evaluator for scalar (lowered) node DAGs: evaluates every node once, in
// topological order, through ir::apply. `leaf` supplies Load/Valid/Index/Acc values.
#pragma once
#include <functional>
#include <vector>

#include "ir/scalar.h"

namespace ir {

Value eval_scalar(NodeRef root, const std::function<Value(NodeRef)>& leaf);

// eval_scalar for one DAG evaluated on many inputs (accuracy sweeps): the topological order and
// each node's operand positions are computed once, so a run is one pass over a value array.
class ScalarProgram {
 public:
  explicit ScalarProgram(NodeRef root);
  Value run(const std::function<Value(NodeRef)>& leaf) const;

 private:
  struct Step {
    NodeRef node;
    std::vector<size_t> src;  // positions of the operands' values (earlier steps)
  };
  std::vector<Step> steps_;  // in topological order; the root last
};

}  // namespace ir
