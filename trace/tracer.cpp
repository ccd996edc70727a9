#include "trace/tracer.h"

#include "core/ops.h"

namespace rune {

nx::Tensor Tracer::wrap(ir::NodeRef n) {
  auto impl = std::make_shared<nx::TensorImpl>();
  impl->dtype = n->dtype;
  impl->shape = n->shape;
  impl->device = device_;
  impl->node = n;
  impl->tracer = this;
  return nx::Tensor(std::move(impl));
}

nx::Tensor Tracer::stand_in(int index, nx::DType t, const ir::View& layout) {
  return wrap(ir::make(ir::Op::Param, t, layout.shape, {}, ir::LoadArg{index, layout}));
}

ir::NodeRef Tracer::node_of(const nx::Tensor& t) {
  const auto& im = t.impl();
  if (im.node && im.tracer == this) return im.node;
  if (im.node && !nx::is_active(im.tracer))
    throw jit_error("rune::jit: a traced value " + t.describe() +
                    " escaped the function that traced it; return it instead");
  // Concrete tensors, and values of an enclosing trace (grad inside jit), are captured: they
  // become extra params bound to those values whenever the graph runs.
  // A key is an address, so an entry is valid only while the tensor it was made for lives: a
  // TensorImpl freed during the trace (a capture of an inner grad's trace, a temporary) leaves
  // its address to the next one allocated, which must not read the old one's param.
  if (auto it = lifted_.find(&im); it != lifted_.end()) {
    if (it->second.tensor.lock().get() == &im) return it->second.node;
    lifted_.erase(it);
  }
  int index = n_args_ + static_cast<int>(captured_.size());
  ir::View layout = im.node ? ir::View::contiguous(im.shape) : im.view;
  layout.offset = 0;
  ir::NodeRef n = ir::make(ir::Op::Param, im.dtype, im.shape, {}, ir::LoadArg{index, layout});
  // A concrete capture is held as a value of its own over the same storage, so it counts as a
  // live observer of that storage: a later donation of t never lends it to a result
  // (docs/semantics.md §3), and t's death leaves the program's constant alive.
  if (im.node)
    captured_.push_back(t);
  else
    captured_.push_back(nx::make_concrete(im.dtype, im.buffer, im.view, im.device, im.poison));
  lifted_[&im] = Lifted{t.impl_ptr(), n};
  return n;
}

nx::Tensor Tracer::apply(ir::Op op, nx::DType out, const nx::Shape& shape,
                         const std::vector<nx::Tensor>& srcs, const ir::Arg& arg) {
  std::vector<ir::NodeRef> src;
  for (const auto& s : srcs) src.push_back(node_of(s));
  if (op == ir::Op::Copy) return wrap(ir::make(ir::Op::Copy, out, shape, src));
  return wrap(ir::make(op, out, shape, std::move(src), arg));
}

nx::Tensor Tracer::constant(const ir::Value& v) {
  ir::Arg a = ir::is_float(v.dtype) ? ir::Arg{v.f} : ir::Arg{v.i};
  return wrap(ir::make(ir::Op::Const, v.dtype, {}, {}, a));
}

void Tracer::record_check(const nx::Tensor& ok, const std::vector<nx::Tensor>& data,
                          nx::CheckFail fail) {
  // The check becomes an output of the program: the first failing index, computed by a
  // reduction fused with ok's producers. The data are evaluated only when a check fails.
  nx::Tensor held = ok;
  if (!check_guards_.empty()) {
    nx::Tensor taken = check_guards_.front();
    for (size_t i = 1; i < check_guards_.size(); ++i)
      taken = nx::logical_and(taken, check_guards_[i]);
    held = nx::logical_or(ok, nx::logical_not(taken));  // a branch not taken fails nothing
  }
  Check c;
  c.first_false = node_of(nx::detail::first_false(held));
  c.size = ok.size();
  c.shape = ok.shape();
  for (const auto& d : data) c.data.push_back(node_of(d));
  c.fail = std::move(fail);
  equations_.emplace_back(std::move(c));
}

void Tracer::check_readable(const nx::Tensor& t, const char* api) {
  if (t.is_traced())
    throw jit_error(std::string(api) + ": cannot read traced value " + t.describe() +
                    " while tracing; its elements are not known until the compiled program runs "
                    "(use nx::where for data-dependent choices)");
}

nx::Tensor Tracer::unbound_param(nx::DType t, const nx::Shape& shape, std::vector<int>& indices) {
  int index = n_args_ + static_cast<int>(captured_.size());
  captured_.push_back(nx::Tensor());  // bound where a transformation runs the loop
  indices.push_back(index);
  return wrap(ir::contiguous_param(index, t, shape));
}

std::vector<nx::Tensor> Tracer::add_loop(Loop loop) {
  std::vector<nx::Tensor> out;
  loop.outputs.clear();
  for (size_t k = 0; k < loop.body_roots.size(); ++k) {
    ir::NodeRef r = loop.body_roots[k];
    nx::Shape s = r->shape;
    if (k >= loop.n_carry) s.insert(s.begin(), loop.trips);  // a row, stacked
    out.push_back(unbound_param(r->dtype, s, loop.outputs));
  }
  equations_.emplace_back(std::move(loop));
  return out;
}

Tracer* active_tracer() { return dynamic_cast<Tracer*>(&nx::current_interpreter()); }

}  // namespace rune
