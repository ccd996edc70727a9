// The public collectives: arguments checked here (naming the API and the values), then one
// HostCall primitive (distributed/collective_fn.h) through the current interpreter, eager or a
// tracer. The bucketed reductions of data_parallel run detail::reduce_chunks on concrete bytes.
#include "distributed/collectives.h"

#include <cstring>
#include <string>

#include "core/io_internal.h"
#include "core/ops.h"
#include "distributed/buckets.h"
#include "distributed/collective_fn.h"
#include "distributed/gpu/gpu_grouped.h"
#include "distributed/host/collective_kernels.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace rune::distributed {

namespace {
using detail::Collective;
using ir::DType;
using nx::Tensor;

void check_defined(const char* api, const Tensor& x) {
  if (!x.defined()) throw distributed_error(std::string(api) + ": the tensor is undefined");
}

void check_op(const char* api, DType t, ReduceOp op) { detail::check_reduce_op(api, t, op); }
}  // namespace

namespace detail {
void check_reduce_op(const char* api, DType t, ReduceOp op) {
  if (op != ReduceOp::Sum && op != ReduceOp::Mean && op != ReduceOp::Max)
    throw distributed_error(std::string(api) + ": unknown ReduceOp " +
                            std::to_string(static_cast<int>(op)));
  if (op == ReduceOp::Mean && !ir::is_float(t))
    throw distributed_error(std::string(api) + ": mean of " + std::string(ir::name(t)) +
                            " (mean needs a float dtype)");
  if (op == ReduceOp::Sum && t == DType::Bool)
    throw distributed_error(std::string(api) + ": sum of bool (cast to an integer dtype)");
}
}  // namespace detail

namespace {

// The result tensor on `device`.
Tensor result(DType t, const nx::Shape& shape, const std::vector<uint8_t>& bytes,
              nx::Device device) {
  Tensor r = nx::host_from_bytes(t, shape, bytes.data());
  return device.kind == runtime::DeviceKind::CPU ? r : nx::place(r, device);
}

// The public calls over either communicator (Communicator, GpuCommunicator): both have rank()
// and size(), and detail::collective overloads on them.
template <class Comm>
Tensor all_reduce_on(const Comm& comm, const Tensor& x, ReduceOp op) {
  const char* api = "rune::distributed::all_reduce";
  check_defined(api, x);
  check_op(api, x.dtype(), op);
  comm.impl(api);
  return detail::collective(comm, {Collective::AllReduce, op, 0}, x, x.shape());
}

nx::Shape scattered_shape(const char* api, const Tensor& x, int w) {
  if (x.ndim() == 0 || x.shape()[0] % w != 0)
    throw distributed_error(std::string(api) + ": " + x.describe() +
                            ": the leading axis must be a multiple of the world size " +
                            std::to_string(w));
  nx::Shape shape = x.shape();
  shape[0] /= w;
  return shape;
}

template <class Comm>
Tensor reduce_scatter_on(const Comm& comm, const Tensor& x, ReduceOp op) {
  const char* api = "rune::distributed::reduce_scatter";
  check_defined(api, x);
  check_op(api, x.dtype(), op);
  comm.impl(api);
  return detail::collective(comm, {Collective::ReduceScatter, op, 0}, x,
                            scattered_shape(api, x, comm.size()));
}

template <class Comm>
Tensor all_gather_on(const Comm& comm, const Tensor& x) {
  const char* api = "rune::distributed::all_gather";
  check_defined(api, x);
  comm.impl(api);
  nx::Shape shape = x.shape();
  shape.insert(shape.begin(), comm.size());
  return detail::collective(comm, {Collective::AllGather, ReduceOp::Sum, 0}, x, shape);
}

void check_root(const char* api, int root, int w) {
  if (root < 0 || root >= w)
    throw distributed_error(std::string(api) + ": root " + std::to_string(root) +
                            " is not a rank of a world of " + std::to_string(w));
}

// The size of an in-process GPU communicator given as its ranks; raises when none is given.
int group_size(const char* api, const std::vector<GpuCommunicator>& comms) {
  if (comms.empty()) throw distributed_error(std::string(api) + ": no GPU communicators given");
  return static_cast<int>(comms.size());
}

template <class Comm>
Tensor broadcast_on(const Comm& comm, const Tensor& x, int root) {
  const char* api = "rune::distributed::broadcast";
  check_defined(api, x);
  comm.impl(api);
  check_root(api, root, comm.size());
  return detail::collective(comm, {Collective::Broadcast, ReduceOp::Sum, root}, x, x.shape());
}
}  // namespace

Tensor all_reduce(const Communicator& comm, const Tensor& x, ReduceOp op) {
  return all_reduce_on(comm, x, op);
}
Tensor reduce_scatter(const Communicator& comm, const Tensor& x, ReduceOp op) {
  return reduce_scatter_on(comm, x, op);
}
Tensor all_gather(const Communicator& comm, const Tensor& x) { return all_gather_on(comm, x); }
Tensor broadcast(const Communicator& comm, const Tensor& x, int root) {
  return broadcast_on(comm, x, root);
}
Tensor all_reduce(const GpuCommunicator& g, const Tensor& x, ReduceOp op) {
  return all_reduce_on(g, x, op);
}
Tensor reduce_scatter(const GpuCommunicator& g, const Tensor& x, ReduceOp op) {
  return reduce_scatter_on(g, x, op);
}
Tensor all_gather(const GpuCommunicator& g, const Tensor& x) { return all_gather_on(g, x); }
Tensor broadcast(const GpuCommunicator& g, const Tensor& x, int root) {
  return broadcast_on(g, x, root);
}

std::vector<Tensor> all_reduce(const std::vector<GpuCommunicator>& comms,
                               const std::vector<Tensor>& xs, ReduceOp op) {
  const char* api = "rune::distributed::all_reduce";
  for (const Tensor& x : xs) {
    check_defined(api, x);
    check_op(api, x.dtype(), op);
  }
  return detail::grouped_collective(api, comms, {Collective::AllReduce, op, 0}, xs,
                                    xs.empty() ? nx::Shape{} : xs[0].shape());
}
std::vector<Tensor> reduce_scatter(const std::vector<GpuCommunicator>& comms,
                                   const std::vector<Tensor>& xs, ReduceOp op) {
  const char* api = "rune::distributed::reduce_scatter";
  for (const Tensor& x : xs) {
    check_defined(api, x);
    check_op(api, x.dtype(), op);
  }
  return detail::grouped_collective(
      api, comms, {Collective::ReduceScatter, op, 0}, xs,
      xs.empty() ? nx::Shape{} : scattered_shape(api, xs[0], group_size(api, comms)));
}
std::vector<Tensor> all_gather(const std::vector<GpuCommunicator>& comms,
                               const std::vector<Tensor>& xs) {
  const char* api = "rune::distributed::all_gather";
  for (const Tensor& x : xs) check_defined(api, x);
  nx::Shape shape = xs.empty() ? nx::Shape{} : xs[0].shape();
  shape.insert(shape.begin(), static_cast<int64_t>(group_size(api, comms)));
  return detail::grouped_collective(api, comms, {Collective::AllGather, ReduceOp::Sum, 0}, xs,
                                    shape);
}
std::vector<Tensor> broadcast(const std::vector<GpuCommunicator>& comms,
                              const std::vector<Tensor>& xs, int root) {
  const char* api = "rune::distributed::broadcast";
  for (const Tensor& x : xs) check_defined(api, x);
  check_root(api, root, group_size(api, comms));
  return detail::grouped_collective(api, comms, {Collective::Broadcast, ReduceOp::Sum, root}, xs,
                                    xs.empty() ? nx::Shape{} : xs[0].shape());
}

namespace detail {

std::vector<Tensor> broadcast_leaves(const Communicator& comm, const char* api,
                                     const std::vector<Tensor>& leaves, int root) {
  check_root(api, root, comm.size());
  std::vector<Tensor> out;
  for (const Tensor& x : leaves) {
    check_defined(api, x);
    out.push_back(collective(comm, {Collective::Broadcast, ReduceOp::Sum, root}, x, x.shape()));
  }
  return out;
}

std::vector<Tensor> all_reduce_leaves(const Communicator& comm, const char* api,
                                      const std::vector<Tensor>& leaves, ReduceOp op,
                                      size_t bucket_bytes) {
  if (bucket_bytes == 0)
    throw distributed_error(std::string(api) + ": a bucket size of 0 bytes (it must be positive)");
  std::vector<LeafSize> sizes;
  for (const Tensor& x : leaves) {
    check_defined(api, x);
    if (x.is_traced())
      throw distributed_error(std::string(api) + ": " + x.describe() +
                              " is a traced value: the bucketed reduction runs on concrete "
                              "tensors (rune::distributed::all_reduce works inside rune::jit)");
    check_op(api, x.dtype(), op);
    sizes.push_back({x.dtype(), static_cast<size_t>(x.size() * ir::itemsize(x.dtype()))});
  }
  std::vector<Tensor> out(leaves.size());
  for (const std::vector<size_t>& members : plan_buckets(sizes, bucket_bytes)) {
    // One collective: the bucket's leaves concatenated in leaf order.
    const DType t = leaves[members[0]].dtype();
    std::vector<uint8_t> bucket;
    for (size_t i : members) {
      std::vector<uint8_t> b = nx::io::read_bytes(leaves[i], api);
      bucket.insert(bucket.end(), b.begin(), b.end());
    }
    const size_t n = bucket.size() / static_cast<size_t>(ir::itemsize(t));
    check_headers(comm, api, {Collective::Bucket, op, 0}, t,
                  {static_cast<int64_t>(members.size()), static_cast<int64_t>(n)});
    std::vector<uint8_t> reduced(bucket.size());
    reduce_chunks(comm, api, t, op, bucket.data(), n, reduced.data(), true);
    size_t at = 0;
    for (size_t i : members) {
      const size_t b = sizes[i].bytes;
      std::vector<uint8_t> part(reduced.begin() + static_cast<ptrdiff_t>(at),
                                reduced.begin() + static_cast<ptrdiff_t>(at + b));
      out[i] = result(t, leaves[i].shape(), part, leaves[i].device());
      at += b;
    }
  }
  return out;
}

}  // namespace detail

}  // namespace rune::distributed
