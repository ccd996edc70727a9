// The grouped collectives of one thread over an in-process GPU communicator
// (distributed/gpu/gpu_grouped.h).
#include "distributed/gpu/gpu_grouped.h"

#include <string>

#include "core/ops.h"
#include "distributed/gpu/gpu_collective_queue.h"
#include "runtime/gpu/context.h"

namespace rune::distributed::detail {

namespace {

void check_group(const char* api, const std::vector<GpuCommunicator>& comms,
                 const std::vector<nx::Tensor>& xs) {
  const std::string a(api);
  if (comms.empty()) throw distributed_error(a + ": no GPU communicators given");
  if (xs.size() != comms.size())
    throw distributed_error(a + ": " + std::to_string(xs.size()) + " tensors for " +
                            std::to_string(comms.size()) + " ranks (one per rank, in rank order)");
  const GpuCommunicator::Impl& first = comms[0].impl(api);
  for (size_t i = 0; i < comms.size(); ++i) {
    const GpuCommunicator::Impl& g = comms[i].impl(api);
    if (!g.local || g.local != first.local || g.rank != static_cast<int>(i) ||
        g.size != static_cast<int>(comms.size()))
      throw distributed_error(a + ": communicator " + std::to_string(i) + " is rank " +
                              std::to_string(g.rank) + " of " + std::to_string(g.size) +
                              (g.local == first.local ? "" : " of another communicator") +
                              ": pass every rank of one gpu_communicators() result, in order");
    const nx::Tensor& x = xs[i];
    if (x.is_traced())
      throw distributed_error(a + ": tensor " + std::to_string(i) + " (" + x.describe() +
                              ") is traced: inside rune::jit call the collective per rank");
    if (!(x.device() == g.device))
      throw distributed_error(a + ": tensor " + std::to_string(i) + " (" + x.describe() +
                              ") is on " + x.device().name() + " but rank " + std::to_string(i) +
                              " is on " + g.device.name());
    if (x.dtype() != xs[0].dtype() || x.shape() != xs[0].shape())
      throw distributed_error(a + ": the ranks disagree: rank " + std::to_string(i) + " passed " +
                              x.describe() + " but rank 0 passed " + xs[0].describe());
  }
}

// x's elements, contiguous on its device (x itself, or a copy).
nx::Tensor dense(const nx::Tensor& x) {
  return x.impl().view.is_contiguous() ? x : nx::contiguous(x);
}
const void* data_of(const nx::Tensor& x) {
  return static_cast<const char*>(x.impl().buffer->data) +
         x.impl().view.offset * ir::itemsize(x.dtype());
}

}  // namespace

std::vector<nx::Tensor> grouped_collective(const char* api,
                                           const std::vector<GpuCommunicator>& comms,
                                           const CollectiveCall& call,
                                           const std::vector<nx::Tensor>& xs,
                                           const nx::Shape& out_shape) {
  check_group(api, comms, xs);
  const size_t n = comms.size();
  const ir::DType t = xs[0].dtype();
  const GpuCollectiveLibrary& lib = *comms[0].impl(api).lib;
  std::vector<nx::Tensor> in, out;
  std::vector<runtime::gpu::Context*> ctx;
  for (size_t i = 0; i < n; ++i) {
    const nx::Device d = comms[i].device();
    ctx.push_back(&runtime::gpu::context(d, api));
    in.push_back(dense(xs[i]));
    runtime::BufferRef buf =
        runtime::allocate(d, static_cast<size_t>(ir::numel(out_shape) * ir::itemsize(t)));
    out.push_back(nx::make_concrete(t, std::move(buf), ir::View::contiguous(out_shape), d));
  }
  std::vector<GpuCollectiveWork> work(n);
  // Every rank's NCCL calls in one group: one thread cannot block in rank 0's call while rank 1
  // has not been called. The group is ended even when queueing failed.
  if (int rc = lib.group_start(); rc != 0)
    throw distributed_error(
        gpu_collective_error(lib, api, "ncclGroupStart", rc, nullptr, comms[0].device()));
  try {
    for (size_t i = 0; i < n; ++i) {
      ctx[i]->make_current();
      queue_nccl(comms[i].impl(api), *ctx[i], api, call, t, xs[0].shape(), data_of(in[i]),
                 out[i].impl().buffer->data, work[i]);
    }
  } catch (...) {
    lib.group_end();
    throw;
  }
  if (int rc = lib.group_end(); rc != 0)
    throw distributed_error(
        gpu_collective_error(lib, api, "ncclGroupEnd", rc, nullptr, comms[0].device()));
  for (size_t i = 0; i < n; ++i) {
    ctx[i]->make_current();
    queue_fold(comms[i].impl(api), *ctx[i], api, call, t, xs[0].shape(), out[i].impl().buffer->data,
               work[i]);
  }
  return out;
}

}  // namespace rune::distributed::detail
