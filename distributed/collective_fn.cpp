#include "distributed/collective_fn.h"

#include <memory>
#include <string>

#include "core/interpreter.h"
#include "core/ops.h"
#include "distributed/gpu/gpu_collective_queue.h"
#include "ir/full.h"
#include "ir/node.h"
#include "runtime/gpu/context.h"

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

class CollectiveFn final : public ir::HostFn {
 public:
  // Over a host communicator (GPU operands: its rank's GPU communicator on that device, made on
  // first use), or over a GPU communicator (`gpu` defined; then `comm` is not).
  CollectiveFn(Communicator comm, GpuCommunicator gpu, const CollectiveCall& call)
      : comm_(std::move(comm)), gpu_(std::move(gpu)), call_(call), api_(api_of(call.kind)) {
    // The communicator's identity is part of the key: its state (rank, size, the MPI or NCCL
    // communicator) is what run() uses, and it lives as long as this function.
    const void* id = gpu_.defined() ? static_cast<const void*>(&gpu_.impl(api_.c_str()))
                                    : static_cast<const void*>(&comm_.impl(api_.c_str()));
    key_ = {static_cast<int64_t>(call.kind), static_cast<int64_t>(call.op), call.root,
            static_cast<int64_t>(reinterpret_cast<intptr_t>(id))};
  }
  int rank() const { return gpu_.defined() ? gpu_.rank() : comm_.rank(); }
  int size() const { return gpu_.defined() ? gpu_.size() : comm_.size(); }
  const std::vector<int64_t>& key() const override { return key_; }
  const std::string& api() const override { return api_; }
  std::string describe() const override {
    std::string s = api_.substr(api_.rfind(':') + 1);
    if (call_.kind == Collective::Broadcast) return s + "(root " + std::to_string(call_.root) + ")";
    if (call_.kind == Collective::AllGather) return s;
    return s + "(" + op_name(call_.op) + ")";
  }
  void run(const void* in, void* out, ir::DType t, const ir::Shape& in_shape,
           const ir::Shape&) const override {
    if (gpu_.defined())  // collective() checks devices first: a program for a host device
      throw distributed_error(api_ + ": a GPU communicator (on " + gpu_.device().name() +
                              ") in a program for a host device");
    run_collective(comm_, api_.c_str(), call_, t, in_shape, in, out);
  }
  bool runs_on_gpu() const override { return true; }
  void queue_on_gpu(void* gpu_context, const void* in, void* out, ir::DType t,
                    const ir::Shape& in_shape, const ir::Shape&) const override {
    auto& c = *static_cast<runtime::gpu::Context*>(gpu_context);
    const GpuCommunicator* g = &gpu_;
    if (!g->defined()) {
      g = gpu_communicator_of(comm_, c.device(), api_.c_str());
      if (!g)
        throw distributed_error(
            api_ + ": inside a program for " + c.device().name() + " collectives need " +
            (c.device().kind == runtime::DeviceKind::HIP ? "RCCL: " : "NCCL: ") +
            gpu_collective_library(c.device().kind == runtime::DeviceKind::HIP
                                       ? GpuCollectives::Rccl
                                       : GpuCollectives::Nccl)
                .error);
    } else if (!(g->device() == c.device())) {
      throw distributed_error(api_ + ": a GPU communicator on " + g->device().name() +
                              " in a program for " + c.device().name());
    }
    queue_gpu_collective(g->impl(api_.c_str()), c, api_.c_str(), call_, t, in_shape, in, out);
  }
  NodeRef vjp(NodeRef n, NodeRef g) const override;

  NodeRef node(const CollectiveCall& call, NodeRef x, const ir::Shape& shape) const {
    auto fn = std::make_shared<CollectiveFn>(comm_, gpu_, call);
    return ir::make(Op::HostCall, x->dtype, shape, {x}, ir::HostFnArg{std::move(fn)});
  }

 private:
  Communicator comm_;
  GpuCommunicator gpu_;
  CollectiveCall call_;
  std::string api_;
  std::vector<int64_t> key_;
};

// Transposes under the semantics of JAX's pmap, where every rank holds its own x and the result
// is the same on every rank (psum's transpose is psum): the cotangent of rank r's x is the sum
// over ranks q of d(y_q)/d(x_r)^T g_q.
NodeRef CollectiveFn::vjp(NodeRef n, NodeRef g) const {
  NodeRef x = n->src[0];
  const int w = size();
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
        ag = ir::make(Op::Div, x->dtype, x->shape, {ag, ir::full(x->dtype, w, x->shape)});
      return ag;
    }
    case Collective::Broadcast: {  // y_q = x_root: dx_root = sum_q g_q, dx_r = 0 elsewhere
      // Every rank takes part in the sum (a collective); the others then drop it.
      NodeRef sum = node({Collective::AllReduce, ReduceOp::Sum, 0}, g, g->shape);
      NodeRef keep = ir::full(ir::DType::Bool, rank() == call_.root ? 1 : 0, g->shape);
      return ir::make(Op::Where, g->dtype, g->shape, {keep, sum, ir::full(g->dtype, 0, g->shape)});
    }
    case Collective::Bucket:
      break;
  }
  throw std::logic_error("rune::distributed: no vjp for this collective");
}

bool on_gpu(const nx::Device& d) {
  return d.kind == runtime::DeviceKind::CUDA || d.kind == runtime::DeviceKind::HIP;
}

}  // namespace

nx::Tensor collective(const Communicator& comm, const CollectiveCall& call, const nx::Tensor& x,
                      const nx::Shape& out_shape) {
  if (!x.is_traced() && !(x.device() == nx::Device::cpu()) &&
      !(on_gpu(x.device()) && gpu_communicator_of(comm, x.device(), api_of(call.kind))))
    return nx::place(collective(comm, call, nx::place(x, nx::Device::cpu()), out_shape),
                     x.device());
  auto fn = std::make_shared<CollectiveFn>(comm, GpuCommunicator{}, call);
  return nx::apply(Op::HostCall, x.dtype(), out_shape, {x}, ir::HostFnArg{std::move(fn)});
}

nx::Tensor collective(const GpuCommunicator& g, const CollectiveCall& call, const nx::Tensor& x,
                      const nx::Shape& out_shape) {
  const char* api = api_of(call.kind);
  if (!(x.device() == g.impl(api).device))
    throw distributed_error(std::string(api) + ": " + x.describe() + " is on " + x.device().name() +
                            " but the GPU communicator's rank " + std::to_string(g.rank()) +
                            " is on " + g.device().name());
  auto fn = std::make_shared<CollectiveFn>(Communicator{}, g, call);
  return nx::apply(Op::HostCall, x.dtype(), out_shape, {x}, ir::HostFnArg{std::move(fn)});
}

}  // namespace rune::distributed::detail
