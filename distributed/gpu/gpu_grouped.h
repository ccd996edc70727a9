// One thread driving every rank of an in-process GPU communicator (gpu_communicators): the
// collectives' vector overloads (distributed/collectives.h).
#pragma once
#include <vector>

#include "core/tensor.h"
#include "distributed/gpu/gpu_communicator.h"
#include "distributed/host/collective_kernels.h"

namespace rune::distributed::detail {

// Checks that comms are the ranks 0..n-1 of one in-process communicator and xs[i] a concrete
// tensor on comms[i]'s device, every one of xs[0]'s dtype and shape (raising naming the first
// that is not, before anything is queued); then queues every rank's NCCL calls as one group
// (ncclGroupStart / ncclGroupEnd) and, after it, every device's fold. Result i (dtype of xs,
// `out_shape`) is on comms[i]'s device.
std::vector<nx::Tensor> grouped_collective(const char* api,
                                           const std::vector<GpuCommunicator>& comms,
                                           const CollectiveCall& call,
                                           const std::vector<nx::Tensor>& xs,
                                           const nx::Shape& out_shape);

}  // namespace rune::distributed::detail
