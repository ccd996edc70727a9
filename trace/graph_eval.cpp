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
  for (auto r : roots) {
    nx::Tensor& t = val_.at(r);
    // A value computed from constants alone (a constant and its views) is a host scalar: it
    // stays on the host, where it goes with any device's operands. As a result of a graph that
    // runs on another device (a loop's body, vmap's outputs, a gradient), it belongs on that
    // device: otherwise a loop's rows would stack values of two devices, and a caller would get
    // a result of its CPU:1 call on the host.
    if (r->op != ir::Op::Param && !t.is_traced() && !(t.device() == device_) &&
        t.device() == nx::Device::cpu() && nx::is_host_scalar(t))
      t = nx::place(t, device_);
    out.push_back(t);
  }
  return out;
}

std::vector<nx::Tensor> evaluate(const std::vector<ir::NodeRef>& roots,
                                 const std::vector<nx::Tensor>& bindings, nx::Device device) {
  return GraphEvaluator(bindings, device)(roots);
}

}  // namespace rune
