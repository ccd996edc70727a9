// Collectives over a rune::distributed::Communicator, on concrete tensors (eagerly) and on
// traced ones inside rune::jit, where each becomes one step of the compiled program (the same
// HostCall primitive in both cases, distributed/collective_fn.h, so both give the same bits).
// Every rank of the communicator makes the same calls in the same order with tensors of the same
// dtype and shape; a small header exchange checks that first and raises on every rank, naming
// the ranks that differ and what each passed. Inside one compiled program the collectives run in
// an order fixed by the program's structure (a collective feeding another runs first), the same
// on every rank running the same function.
//
// Determinism: all_reduce and reduce_scatter never use MPI's reductions (whose order over ranks
// is unspecified). The element range is cut into one chunk per rank; rank c receives chunk c
// from every rank and folds it in rank order, ((x_0 op x_1) op x_2) ..., then (all_reduce) every
// rank receives every reduced chunk. So the result has the same bits on every rank, and the same
// bits as one process computing x_0 + x_1 + ... left to right.
//
// Gradients (rune::grad, vjp, jvp), as the transposes of JAX's pmap collectives (every rank
// holds its own x; psum's transpose is psum): all_reduce(Sum)'s vjp is all_reduce(Sum) of the
// cotangent, Mean's all_reduce(Mean); all_gather's is reduce_scatter(Sum) and reduce_scatter's
// all_gather (Mean: divided by the world size); broadcast's is the sum of the cotangents on the
// root and zero elsewhere. ReduceOp::Max raises: it has no gradient here.
#pragma once
#include "core/tensor.h"
#include "distributed/communicator.h"
#include "distributed/gpu/gpu_communicator.h"

namespace rune::distributed {

// Sum: the rank-order sum in x's dtype (integers wrap; float16 and bfloat16 summed in float32
// and rounded once, docs/distributed.md). Mean: that sum, then divided by the world
// size in x's dtype (float dtypes only). Max: the largest element; NaN wins, as nx::maximum.
enum class ReduceOp { Sum, Mean, Max };

// x reduced elementwise over the ranks, on every rank (x's dtype, shape and device).
nx::Tensor all_reduce(const Communicator& comm, const nx::Tensor& x, ReduceOp op = ReduceOp::Sum);
// Every rank's x stacked along a new leading axis, in rank order: shape [size, x.shape...].
nx::Tensor all_gather(const Communicator& comm, const nx::Tensor& x);
// x's leading axis cut into size() equal blocks; rank r gets block r reduced over the ranks
// (x.shape[0] must be a multiple of the world size).
nx::Tensor reduce_scatter(const Communicator& comm, const nx::Tensor& x,
                          ReduceOp op = ReduceOp::Sum);
// Rank root's x on every rank (each rank passes a tensor of that dtype and shape).
nx::Tensor broadcast(const Communicator& comm, const nx::Tensor& x, int root = 0);

// The same collectives over a GPU communicator (distributed/gpu/gpu_communicator.h): x on g's
// device, concrete or traced (inside rune::jit: one step of the device's program), queued on the
// device's stream through NCCL / RCCL, with the bits of the host path (sum, mean and max are
// folded in rank order by a rune kernel unless g.native_reductions()). One thread per rank.
nx::Tensor all_reduce(const GpuCommunicator& g, const nx::Tensor& x, ReduceOp op = ReduceOp::Sum);
nx::Tensor all_gather(const GpuCommunicator& g, const nx::Tensor& x);
nx::Tensor reduce_scatter(const GpuCommunicator& g, const nx::Tensor& x,
                          ReduceOp op = ReduceOp::Sum);
nx::Tensor broadcast(const GpuCommunicator& g, const nx::Tensor& x, int root = 0);

// One thread driving every rank of an in-process GPU communicator (gpu_communicators): xs[i]
// (concrete) on comms[i]'s device, in rank order; result i on that device. The NCCL calls of all
// ranks are one group (ncclGroupStart / ncclGroupEnd), then each device's fold is queued.
std::vector<nx::Tensor> all_reduce(const std::vector<GpuCommunicator>& comms,
                                   const std::vector<nx::Tensor>& xs, ReduceOp op = ReduceOp::Sum);
std::vector<nx::Tensor> all_gather(const std::vector<GpuCommunicator>& comms,
                                   const std::vector<nx::Tensor>& xs);
std::vector<nx::Tensor> reduce_scatter(const std::vector<GpuCommunicator>& comms,
                                       const std::vector<nx::Tensor>& xs,
                                       ReduceOp op = ReduceOp::Sum);
std::vector<nx::Tensor> broadcast(const std::vector<GpuCommunicator>& comms,
                                  const std::vector<nx::Tensor>& xs, int root = 0);

namespace detail {
// all_reduce of several concrete tensors as buckets of at most `bucket_bytes` (one collective
// each; distributed/buckets.h), the way data_parallel reduces gradients: results in `leaves`'
// order, with the bits of one all_reduce per leaf.
std::vector<nx::Tensor> all_reduce_leaves(const Communicator& comm, const char* api,
                                          const std::vector<nx::Tensor>& leaves, ReduceOp op,
                                          size_t bucket_bytes);
// How many collectives this process has started (each begins with one header exchange): what
// the tests count buckets by.
uint64_t collectives_started();
std::vector<nx::Tensor> broadcast_leaves(const Communicator& comm, const char* api,
                                         const std::vector<nx::Tensor>& leaves, int root);
}  // namespace detail

}  // namespace rune::distributed
