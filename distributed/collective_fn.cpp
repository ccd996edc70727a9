#include "distributed/collective_fn.h"

#include <memory>
#include <string>

#include "core/interpreter.h"
#include "core/ops.h"
#include "ir/node.h"

namespace rune::distributed::detail {

namespace {

using ir::NodeRef;
using ir::Op;

const char* api_of(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "rune::distributed::all_reduce";
    case Collective::AllGather:
      return "rune::distributed::all_gather";
    case Collective::ReduceScatter:
      return "rune::distributed::reduce_scatter";
    case Collective::Broadcast:
      return "rune::distributed::broadcast";
    case Collective::Bucket:
      break;
  }
  return "rune::distributed";
}

const char* op_text(ReduceOp op) {
  return op == ReduceOp::Sum ? "sum" : op == ReduceOp::Mean ? "mean" : "max";
}

class CollectiveFn final : public ir::HostFn {
 public:
  CollectiveFn(Communicator comm, const CollectiveCall& call)
      : comm_(std::move(comm)), call_(call), api_(api_of(call.kind)) {
    // The communicator's identity is part of the key: its state (rank, size, the MPI
    // communicator) is what run() uses, and it lives as long as this function.
    key_ = {static_cast<int64_t>(call.kind), static_cast<int64_t>(call.op), call.root,
            static_cast<int64_t>(reinterpret_cast<intptr_t>(&comm_.impl(api_.c_str())))};
  }
  const std::vector<int64_t>& key() const override { return key_; }
  const std::string& api() const override { return api_; }
  std::string describe() const override {
    std::string s = api_.substr(api_.rfind(':') + 1);
    if (call_.kind == Collective::Broadcast) return s + "(root " + std::to_string(call_.root) + ")";
    if (call_.kind == Collective::AllGather) return s;
    return s + "(" + op_text(call_.op) + ")";
  }
  void run(const void* in, void* out, ir::DType t, const ir::Shape& in_shape,
           const ir::Shape&) const override {
    run_collective(comm_, api_.c_str(), call_, t, in_shape, in, out);
  }
  NodeRef vjp(NodeRef n, NodeRef g) const override;

  NodeRef node(const CollectiveCall& call, NodeRef x, const ir::Shape& shape) const {
    auto fn = std::make_shared<CollectiveFn>(comm_, call);
    return ir::make(Op::HostCall, x->dtype, shape, {x}, ir::HostFnArg{std::move(fn)});
  }

 private:
  Communicator comm_;
  CollectiveCall call_;
  std::string api_;
  std::vector<int64_t> key_;
};

NodeRef constant(ir::DType t, double v, const ir::Shape& shape) {
  ir::Arg a = ir::is_float(t) ? ir::Arg{v} : ir::Arg{static_cast<int64_t>(v)};
  NodeRef c = ir::make(Op::Const, t, {}, {}, a);
  if (shape.empty()) return c;
  NodeRef r = ir::make(Op::Reshape, t, ir::Shape(shape.size(), 1), {c});
  return ir::make(Op::Expand, t, shape, {r});
}

// Transposes under the semantics of JAX's pmap, where every rank holds its own x and the result
// is the same on every rank (psum's transpose is psum): the cotangent of rank r's x is the sum
// over ranks q of d(y_q)/d(x_r)^T g_q.
NodeRef CollectiveFn::vjp(NodeRef n, NodeRef g) const {
  NodeRef x = n->src[0];
  const int w = comm_.size();
  if (call_.op == ReduceOp::Max &&
      (call_.kind == Collective::AllReduce || call_.kind == Collective::ReduceScatter))
    throw distributed_error(api_ + ": ReduceOp::Max has no gradient (rune::grad, vjp and jvp " +
                            "differentiate ReduceOp::Sum and ReduceOp::Mean)");
  switch (call_.kind) {
    case Collective::AllReduce:  // y = sum_q x_q on every rank: dx_r = sum_q g_q (mean: / w)
      return node(call_, g, g->shape);
    case Collective::AllGather: {  // y[q] = x_q: dx_r = sum_q g_q[r], reduce_scatter's block r
      ir::Shape one = g->shape;
      one[0] = 1;
      NodeRef rs = node({Collective::ReduceScatter, ReduceOp::Sum, 0}, g, one);
      return ir::make(Op::Reshape, x->dtype, x->shape, {rs});
    }
    case Collective::ReduceScatter: {  // y_q = sum_r x_r[block q]: dx_r[block q] = g_q (/ w)
      ir::Shape all = g->shape;
      all.insert(all.begin(), w);
      NodeRef ag = ir::make(Op::Reshape, x->dtype, x->shape,
                            {node({Collective::AllGather, ReduceOp::Sum, 0}, g, all)});
      if (call_.op == ReduceOp::Mean)
        ag = ir::make(Op::Div, x->dtype, x->shape, {ag, constant(x->dtype, w, x->shape)});
      return ag;
    }
    case Collective::Broadcast: {  // y_q = x_root: dx_root = sum_q g_q, dx_r = 0 elsewhere
      // Every rank takes part in the sum (a collective); the others then drop it.
      NodeRef sum = node({Collective::AllReduce, ReduceOp::Sum, 0}, g, g->shape);
      NodeRef keep = constant(ir::DType::Bool, comm_.rank() == call_.root ? 1 : 0, g->shape);
      return ir::make(Op::Where, g->dtype, g->shape, {keep, sum, constant(g->dtype, 0, g->shape)});
    }
    case Collective::Bucket:
      break;
  }
  throw std::logic_error("rune::distributed: no vjp for this collective");
}

}  // namespace

nx::Tensor collective(const Communicator& comm, const CollectiveCall& call, const nx::Tensor& x,
                      const nx::Shape& out_shape) {
  if (!x.is_traced() && !(x.device() == nx::Device::cpu()))
    return nx::place(collective(comm, call, nx::place(x, nx::Device::cpu()), out_shape),
                     x.device());
  auto fn = std::make_shared<CollectiveFn>(comm, call);
  return nx::apply(Op::HostCall, x.dtype(), out_shape, {x}, ir::HostFnArg{std::move(fn)});
}

}  // namespace rune::distributed::detail
