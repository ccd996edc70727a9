// A collective as a primitive: an ir::Op::HostCall node whose host function (ir/host_fn.h) runs
// detail::run_collective. The same node serves both paths: eagerly it is a one-op program with
// one host step, under rune::jit one step of the compiled program (in an order fixed by the
// program's structure, the same on every rank), so a collective inside a compiled function has
// the bits of the eager call. Its vjp rule makes it differentiable (docs/distributed.md).
#pragma once
#include "core/tensor.h"
#include "distributed/collective_kernels.h"

namespace rune::distributed::detail {

// call applied to x (concrete or traced) through the current interpreter; the result has
// x's dtype and `out_shape`. A concrete x on any device but the host's CPU runs on a host copy
// (so MPI is only called from the thread that calls the collective) and comes back to x's device.
nx::Tensor collective(const Communicator& comm, const CollectiveCall& call, const nx::Tensor& x,
                      const nx::Shape& out_shape);

}  // namespace rune::distributed::detail
