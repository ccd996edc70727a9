#include "trace/graph_eval.h"

#include <unordered_map>

#include "core/interpreter.h"
#include "ir/scalar.h"

namespace rune {

std::vector<nx::Tensor> evaluate(const std::vector<ir::NodeRef>& roots,
                                 const std::vector<nx::Tensor>& bindings, nx::Device device) {
  nx::CreateOn on(device);
  std::unordered_map<ir::NodeRef, nx::Tensor> val;
  for (ir::NodeRef n : ir::toposort(roots)) {
    nx::Tensor t;
    if (n->op == ir::Op::Param) {
      t = bindings.at(static_cast<size_t>(ir::arg_load(n).param));
    } else if (n->op == ir::Op::Const) {
      ir::Value v = ir::is_float(n->dtype) ? ir::Value::of_float(n->dtype, ir::arg_float(n))
                                           : ir::Value::of_int(n->dtype, ir::arg_int(n));
      t = nx::current_interpreter().constant(v);
    } else if (n->op == ir::Op::StopGradient) {
      t = val.at(n->src[0]);  // the identity; autodiff already saw it
    } else {
      std::vector<nx::Tensor> src;
      for (auto s : n->src) src.push_back(val.at(s));
      t = nx::apply(n->op, n->dtype, n->shape, src, n->arg);
    }
    val[n] = t;
  }
  std::vector<nx::Tensor> out;
  for (auto r : roots) out.push_back(val.at(r));
  return out;
}

}  // namespace rune
