#include "ir/eval.h"

#include <unordered_map>

namespace ir {

Value eval_scalar(NodeRef root, const std::function<Value(NodeRef)>& leaf) {
  std::unordered_map<NodeRef, Value> val;
  for (NodeRef n : toposort({root})) {
    Value v;
    if (n->op == Op::Const) {
      v = is_float(n->dtype) ? Value::of_float(n->dtype, arg_float(n))
                             : Value::of_int(n->dtype, arg_int(n));
    } else if (n->src.empty()) {
      v = leaf(n);
    } else {
      std::vector<Value> a;
      for (auto s : n->src) a.push_back(val.at(s));
      v = apply(n->op, n->dtype, a);
    }
    val[n] = v;
  }
  return val.at(root);
}

}  // namespace ir
