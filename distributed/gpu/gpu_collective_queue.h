// What a collective on a GPU communicator queues on its device's stream: NCCL / RCCL calls, then
// (sum, mean and max by default) a rune-compiled kernel that folds the gathered rows in rank
// order. Used by the collectives' HostCall steps (eagerly and inside rune::jit programs for the
// device) and by the grouped calls over several devices of one process.
//
// Determinism: NCCL's reductions add in its ring's or tree's order, not rank order. So by default
// all_reduce and reduce_scatter never use them: every rank's operand is gathered (ncclAllGather, a
// byte copy: every rank gets the same bytes) into [size, ...] rows, and a kernel rune compiles for
// the device folds the rows left to right, ((x_0 op x_1) op x_2) ..., with the host path's
// arithmetic (distributed/host/collective_kernels.cpp): the dtype's own + (integers wrap), float16
// / bfloat16 widened to float32 and rounded once, Mean that sum divided by the size, Max with NaN
// winning and -0 below +0 (nx::maximum). Elementwise ops round as IEEE says on every device
// (docs/semantics.md §5), so the result has the host path's bits, on every rank. Cost: each rank
// receives (size - 1) x the operand (reduce_scatter: the whole operand of every rank), where NCCL's
// ring receives 2 (size - 1) / size x; scratch of size x the operand. With native reductions
// (GpuCommunicator::native_reductions, RUNE_NCCL_NATIVE=1) sum and max are ncclAllReduce /
// ncclReduceScatter (ncclSum, ncclMax) and mean is that sum divided by the size by a rune kernel:
// NCCL's bits.
#pragma once
#include "distributed/gpu/gpu_communicator_impl.h"
#include "distributed/host/collective_kernels.h"
#include "runtime/allocator.h"

namespace runtime::gpu {
class Context;
}

namespace rune::distributed::detail {

// What a collective keeps between its two phases (the gathered rows).
struct GpuCollectiveWork {
  runtime::BufferRef rows;
};

// The header check of one rank (over the host communicator, or between this process's threads).
void check_gpu_headers(const GpuCommunicator::Impl& g, const char* api, const CollectiveCall& call,
                       ir::DType t, const ir::Shape& in_shape);
// Phase 1: the NCCL call(s) on c's stream (may be inside ncclGroupStart / End). `in` holds the
// operand (t, in_shape), `out` receives the result (as run_collective's).
void queue_nccl(const GpuCommunicator::Impl& g, runtime::gpu::Context& c, const char* api,
                const CollectiveCall& call, ir::DType t, const ir::Shape& in_shape, const void* in,
                void* out, GpuCollectiveWork& work);
// Phase 2 (after the group ended): the fold kernel, where the collective has one.
void queue_fold(const GpuCommunicator::Impl& g, runtime::gpu::Context& c, const char* api,
                const CollectiveCall& call, ir::DType t, const ir::Shape& in_shape, void* out,
                GpuCollectiveWork& work);
// Both phases for one rank (one thread per rank): check, NCCL, fold.
void queue_gpu_collective(const GpuCommunicator::Impl& g, runtime::gpu::Context& c, const char* api,
                          const CollectiveCall& call, ir::DType t, const ir::Shape& in_shape,
                          const void* in, void* out);

}  // namespace rune::distributed::detail
