// A collective as a primitive: an ir::Op::HostCall node whose host function (ir/host_fn.h) runs
// detail::run_collective. The same node serves both paths: eagerly it is a one-op program with
// one host step, under rune::jit one step of the compiled program (in an order fixed by the
// program's structure, the same on every rank), so a collective inside a compiled function has
// the bits of the eager call. Its vjp rule makes it differentiable (docs/distributed.md).
#pragma once
#include "core/tensor.h"
#include "distributed/gpu/gpu_communicator.h"
#include "distributed/host/collective_kernels.h"

namespace rune::distributed::detail {

// call applied to x (concrete or traced) through the current interpreter; the result has
// x's dtype and `out_shape`. On a GPU (CUDA:n, HIP:n) the step queues NCCL / RCCL on the device's
// stream (distributed/gpu/gpu_collective_queue.h) over the GPU communicator of comm's rank on that
// device (made on first use), eagerly and inside programs for the device; where the library is
// absent a concrete x runs on a host copy, as on every other device (CPU:n), and comes back
// (so MPI is only called from the thread that calls the collective).
nx::Tensor collective(const Communicator& comm, const CollectiveCall& call, const nx::Tensor& x,
                      const nx::Shape& out_shape);
// The same over a GPU communicator: x (concrete or traced) must be on g's device.
nx::Tensor collective(const GpuCommunicator& g, const CollectiveCall& call, const nx::Tensor& x,
                      const nx::Shape& out_shape);

}  // namespace rune::distributed::detail
