// A GPU communicator: one rank of an NCCL (CUDA) or RCCL (HIP) communicator, bound to one device,
// over which rune::distributed's collectives move tensors that live on that device
// (distributed/collectives.h has the calls; distributed/gpu/gpu_collective_queue.h what they
// queue). Two ways to make one, as NCCL has:
//   - one process per rank: gpu_communicator(comm, device). Rank 0 of the host communicator
//     makes the unique id (ncclGetUniqueId) and broadcasts it over `comm`; every rank then calls
//     ncclCommInitRank(size, id, rank). A host collective on a GPU tensor uses this one,
//     made on first use and kept for the life of the host communicator.
//   - several devices of this process: gpu_communicators(devices), ncclCommInitAll; element i
//     is rank i on devices[i]. One thread may drive them all (the vector overloads of the
//     collectives, grouped with ncclGroupStart / ncclGroupEnd) or one thread each.
//
// Invariant: a GpuCommunicator's ranks make the same collectives in the same order with the
// same dtypes and shapes; that is checked before any data moves (over the host communicator, or
// between the threads of this process), so a mismatch raises on every rank naming both instead
// of hanging in NCCL. Errors name the API, the NCCL call, ncclGetErrorString and
// ncclGetLastError.
#pragma once
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "distributed/communicator.h"
#include "distributed/gpu/gpu_collectives.h"

namespace rune::distributed {

class GpuCommunicator {
 public:
  GpuCommunicator() = default;
  int rank() const;
  int size() const;
  nx::Device device() const;
  bool defined() const { return impl_ != nullptr; }
  // Whether sum, mean and max use NCCL's own reduction (ncclAllReduce / ncclReduceScatter),
  // whose order is its ring's or tree's; rank order (rune's fold) otherwise. Chosen when the
  // communicator is made (default: RUNE_NCCL_NATIVE=1).
  bool native_reductions() const;

  struct Impl;
  explicit GpuCommunicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Impl& impl(const char* api) const;

 private:
  std::shared_ptr<Impl> impl_;
};

// RUNE_NCCL_NATIVE=1 in the environment (read once): NCCL's own sum, mean and max (faster,
// NCCL's order and NaN rule); anything else, unset: rank order. The default of the calls below.
bool native_gpu_reductions();
// This process's rank of `comm` joins a GPU communicator of comm.size() ranks on `device`
// (CUDA:n: NCCL, HIP:n: RCCL). Every rank of `comm` must call it (a collective). Raises naming
// the device, the library and NCCL's error. `native_reductions`: see native_reductions().
GpuCommunicator gpu_communicator(const Communicator& comm, nx::Device device,
                                 bool native_reductions = native_gpu_reductions());
// One GPU communicator over several devices of this process (ncclCommInitAll): element i is rank
// i on devices[i]. The devices must be of one GPU kind, none twice.
std::vector<GpuCommunicator> gpu_communicators(const std::vector<nx::Device>& devices,
                                               bool native_reductions = native_gpu_reductions());

namespace detail {
// The GPU communicator of `comm`'s rank on `device`, made on first use (a collective over
// `comm`: every rank asks for it at the same call) and kept for the life of the process. Null
// where the device kind's library cannot be loaded (the host path then serves: same bits). A
// failed creation is not kept: the next call tries again.
const GpuCommunicator* gpu_communicator_of(const Communicator& comm, nx::Device device,
                                           const char* api);
}  // namespace detail

}  // namespace rune::distributed
