#include "ir/eval.h"

#include <unordered_map>

namespace ir {

ScalarProgram::ScalarProgram(NodeRef root) {
  std::unordered_map<NodeRef, size_t> position;
  for (NodeRef n : toposort({root})) {
    Step s{n, {}};
    for (NodeRef src : n->src) s.src.push_back(position.at(src));
    position[n] = steps_.size();
    steps_.push_back(std::move(s));
  }
}

Value ScalarProgram::run(const std::function<Value(NodeRef)>& leaf) const {
  std::vector<Value> val(steps_.size());
  std::vector<Value> operands;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const NodeRef n = steps_[i].node;
    if (n->op == Op::Const) {
      val[i] = is_float(n->dtype) ? Value::of_float(n->dtype, arg_float(n))
                                  : Value::of_int(n->dtype, arg_int(n));
    } else if (n->src.empty()) {
      val[i] = leaf(n);
    } else {
      operands.clear();
      for (size_t s : steps_[i].src) operands.push_back(val[s]);
      val[i] = apply(n->op, n->dtype, operands);
    }
  }
  return val.back();
}

Value eval_scalar(NodeRef root, const std::function<Value(NodeRef)>& leaf) {
  return ScalarProgram(root).run(leaf);
}

}  // namespace ir
