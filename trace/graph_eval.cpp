#include "trace/graph_eval.h"

#include <stdexcept>
#include <string>

#include "core/interpreter.h"
#include "core/ops.h"
#include "ir/scalar.h"

namespace rune {

std::vector<nx::Tensor> GraphEvaluator::operator()(const std::vector<ir::NodeRef>& roots) {
  nx::CreateOn on(device_);
  for (ir::NodeRef n : ir::toposort(roots)) {
    if (val_.count(n)) continue;
    nx::Tensor t;
    if (n->op == ir::Op::Param) {
      t = bindings_.at(static_cast<size_t>(ir::arg_load(n).param));
      if (!t.defined())  // a scan's result read before autodiff ran the scan
        throw std::logic_error("rune: graph param " + std::to_string(ir::arg_load(n).param) +
                               " read before it was bound");
    } else if (n->op == ir::Op::Const) {
      ir::Value v = ir::is_float(n->dtype) ? ir::Value::of_float(n->dtype, ir::arg_float(n))
                                           : ir::Value::of_int(n->dtype, ir::arg_int(n));
      t = nx::current_interpreter().constant(v);
    } else if (n->op == ir::Op::StopGradient) {
      // The identity on a concrete value (no kernel); on a value of an enclosing trace a stop
      // again, so a gradient replayed into a trace that is differentiated in turn (grad of grad,
      // jvp of grad) keeps the stop there too.
      t = nx::stop_gradient(val_.at(n->src[0]));
    } else {
      std::vector<nx::Tensor> src;
      for (auto s : n->src) src.push_back(val_.at(s));
      t = nx::apply(n->op, n->dtype, n->shape, src, n->arg);
    }
    val_[n] = t;
  }
  std::vector<nx::Tensor> out;
  for (auto r : roots) out.push_back(val_.at(r));
  return out;
}

std::vector<nx::Tensor> evaluate(const std::vector<ir::NodeRef>& roots,
                                 const std::vector<nx::Tensor>& bindings, nx::Device device) {
  return GraphEvaluator(bindings, device)(roots);
}

}  // namespace rune
