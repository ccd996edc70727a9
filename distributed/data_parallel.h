// rune::data_parallel: data-parallel training over a communicator (one process per rank) or over
// several devices of this process (CPU:1, CPU:2, ...). Each rank or device runs the user's
// gradient step, compiled with rune::jit, on its shard of the batch; the loss and gradients are
// then summed in rank (device) order and divided by their number. Over a communicator that is an
// all_reduce of the leaves grouped into buckets of at most bucket_bytes() (25 MiB by default, as
// PyTorch DDP; one collective per bucket, distributed/buckets.h), so every rank then holds the
// same bits, the bits of one all_reduce per leaf whatever the bucket size, and applies the same
// optimizer update: parameters stay identical on every rank. On host tensors the buckets are
// reduced inside the compiled step, overlapped with its backward pass: each bucket's all_reduce
// starts as soon as its last gradient is computed and is waited for at the end of the step
// (distributed/overlapped_buckets.h), with the same bits; set_overlap(false) reduces them after
// the step returns instead. Over devices
// the shards run concurrently on the devices' streams; the sum is taken on the devices through
// NCCL / RCCL where they are GPUs of one kind and the library loads (gathered, then folded in
// device order by a rune kernel), else on the host; the parameters stay where they are (one
// copy).
//
// Guarantee (tested): the result is bit for bit what one process gets by running the same
// compiled step on shard 0, 1, ..., W-1, summing the results left to right in rank order and
// dividing by W; over W devices it is the same bits as over W ranks.
#pragma once
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/nx.h"
#include "distributed/buckets.h"
#include "distributed/collectives.h"
#include "distributed/overlapped_buckets.h"
#include "trace/jit.h"
#include "trace/tree_util.h"

namespace rune {

namespace distributed::detail {
// Rank `rank`'s block of x's leading axis, of world-size equal blocks (raises naming the sizes
// unless the leading axis divides by the world size).
inline void check_shardable(const char* api, const nx::Tensor& x, int size) {
  if (x.ndim() == 0 || x.shape()[0] % size != 0)
    throw distributed_error(std::string(api) + ": batch " + x.describe() +
                            ": the leading axis must be a multiple of the world size " +
                            std::to_string(size));
}
// Raises naming the list unless it holds at least one device and none twice.
void check_devices(const char* api, const std::vector<nx::Device>& devices);
// The in-process GPU communicator over `devices` where they are all of one GPU kind and its
// library (NCCL, RCCL) loads; else empty, and the mean is taken on the host (the same bits).
std::vector<GpuCommunicator> gpu_group_for(const std::vector<nx::Device>& devices);
// mean_in_order's result computed on the devices: per leaf, all_reduce(Mean) over `comms`
// (gathered by NCCL, folded in device order by a rune kernel on each device), the copy of
// `home`'s device kept (or device 0's, placed on `home`).
std::vector<nx::Tensor> mean_over_gpus(const char* api, const std::vector<GpuCommunicator>& comms,
                                       const std::vector<std::vector<nx::Tensor>>& parts,
                                       nx::Device home);
// parts[i][k]: leaf k of device i's result. Per leaf: the sum over i in order, on the host, then
// divided by the count (the bits of all_reduce(Mean) over that many ranks), placed on `home`.
// Raises naming the leaf unless every leaf has a float dtype.
std::vector<nx::Tensor> mean_in_order(const char* api,
                                      const std::vector<std::vector<nx::Tensor>>& parts,
                                      nx::Device home);
inline nx::Tensor shard(const char* api, const nx::Tensor& x, int rank, int size) {
  check_shardable(api, x, size);
  const int64_t n = x.shape()[0] / size;
  return nx::slice(x, {nx::Slice{rank * n, (rank + 1) * n}});
}
// Whether every leaf of the trees lives in host memory (CPU, CPU:n): where the overlapped
// buckets run (split collectives are host steps).
template <class... T>
bool all_on_host(const T&... trees) {
  bool host = true;
  auto check = [&](const auto& tree) {
    for (const nx::Tensor& leaf : tree_flatten(tree).first)
      host &= leaf.device().kind == runtime::DeviceKind::CPU;
  };
  (check(trees), ...);
  return host;
}

// The step with its gradient buckets reduced inside the compiled program: step's signature
// R(A...) becomes (waited buckets, R) (A...); the buckets come first so the program's starts
// run in bucket order (overlapped_buckets.h).
template <class Sig>
struct Overlapped;
template <class R, class... A>
struct Overlapped<R(A...)> {
  using Result = std::pair<std::vector<nx::Tensor>, R>;
  using type = rune::Jitted<Result(A...)>;
  static type make(std::function<R(A...)> step, Communicator comm, size_t bucket_bytes) {
    JitOptions o;
    o.name = "rune::data_parallel";
    return type(std::function<Result(A...)>([step = std::move(step), comm = std::move(comm),
                                             bucket_bytes](A... a) -> Result {
                  R local = step(std::forward<A>(a)...);
                  auto [leaves, def] = tree_flatten(local);
                  auto [buckets, reduced] = all_reduce_leaves_overlapped(
                      comm, "rune::data_parallel", leaves, ReduceOp::Mean, bucket_bytes);
                  return Result{std::move(buckets), tree_unflatten<R>(def, reduced)};
                }),
                std::move(o));
  }
};
}  // namespace distributed::detail

// step(params, batch...) -> std::pair<loss, grads>, with grads any tree (usually params' type),
// typically `rune::value_and_grad(loss_fn, params)`. The returned callable takes the global batch
// (every rank passes the same full batch tensors; each uses its own block of their leading axis)
// and returns (loss, grads), each the mean over ranks of the shard results.
template <class Step>
class DataParallel {
 public:
  DataParallel(Step step, distributed::Communicator comm)
      : comm_(std::move(comm)),
        fn_(step),
        step_(rune::jit(std::move(step))),
        overlapped_(Overlapped::make(fn_, comm_, bucket_bytes_)) {}
  // Over devices of this process: shard i runs on devices[i] (at least one, no repeats).
  DataParallel(Step step, std::vector<nx::Device> devices)
      : devices_(std::move(devices)),
        fn_(step),
        step_(rune::jit(std::move(step))),
        overlapped_(Overlapped::make(fn_, comm_, bucket_bytes_)) {
    distributed::detail::check_devices("rune::data_parallel", devices_);
  }

  template <class Params, class... Batch>
  auto operator()(const Params& params, const Batch&... batch) {
    static constexpr const char* api = "rune::data_parallel";
    if (!devices_.empty()) return over_devices(api, params, batch...);
    // Left to right, so the first bad batch tensor is the one named.
    (distributed::detail::check_shardable(api, batch, comm_.size()), ...);
    if (overlap_ && !one_bucket_ && distributed::detail::all_on_host(params, batch...)) {
      auto [buckets, result] = overlapped_(
          params, distributed::detail::shard(api, batch, comm_.rank(), comm_.size())...);
      // One bucket has nothing to overlap (its start comes after the whole backward pass) and
      // costs the split's copies: later calls reduce after the step (the same bits). Every rank
      // has the same plan, so every rank switches at the same call.
      one_bucket_ = buckets.size() <= 1;
      return result;
    }
    auto local =
        step_(params, distributed::detail::shard(api, batch, comm_.rank(), comm_.size())...);
    return reduce(api, local);
  }

  // Rank-local (loss, grads) of a shard, then reduced as operator() does: the reference path of
  // the tests and of samples/data_parallel.cpp runs the compiled step itself.
  template <class Params, class... Shard>
  auto local_step(const Params& params, const Shard&... shard) {
    return step_(params, shard...);
  }

  // The largest bucket of the gradient all_reduce, in bytes (a leaf larger than it is a bucket
  // of its own). Raises naming the value unless it is positive; every rank must use the same.
  void set_bucket_bytes(size_t bytes) {
    if (bytes == 0)
      throw distributed::distributed_error(
          "rune::DataParallel::set_bucket_bytes: 0 bytes (the bucket size must be positive)");
    bucket_bytes_ = bytes;
    overlapped_ = Overlapped::make(fn_, comm_, bucket_bytes_);  // the plan is in its programs
    one_bucket_ = false;
  }
  size_t bucket_bytes() const { return bucket_bytes_; }

  // Whether the gradient buckets are reduced inside the compiled step, overlapped with its
  // backward pass (the default; host tensors only), or after it returns. The same on every
  // rank; the bits are the same either way.
  // A step whose leaves make a single bucket has nothing to overlap: after its first overlapped
  // call, data_parallel reduces after the step (until the bucket size or this setting changes).
  void set_overlap(bool on) {
    overlap_ = on;
    one_bucket_ = false;
  }
  bool overlap() const { return overlap_; }

  const distributed::Communicator& communicator() const { return comm_; }
  const std::vector<nx::Device>& devices() const { return devices_; }
  // Traces of the local step (local_step, and operator() without overlap).
  size_t traces() const { return step_.traces(); }
  // Traces of the step with its buckets inside (operator() with overlap; a new bucket size is a
  // new program).
  size_t overlapped_traces() const { return overlapped_.traces(); }

 private:
  // Every shard's step is queued on its device's stream first (they run concurrently), then the
  // results are read back and summed on the host in device order: the all_reduce's fold.
  template <class Params, class... Batch>
  auto over_devices(const char* api, const Params& params, const Batch&... batch) {
    const int n = static_cast<int>(devices_.size());
    (distributed::detail::check_shardable(api, batch, n), ...);
    using Result = decltype(step_(params, batch...));
    std::vector<Result> locals;
    for (int i = 0; i < n; ++i) {
      const nx::Device d = devices_[static_cast<size_t>(i)];
      auto [pl, pdef] = tree_flatten(params);
      for (auto& leaf : pl) leaf = nx::place(leaf, d);
      locals.push_back(step_(tree_unflatten<Params>(pdef, pl),
                             nx::place(distributed::detail::shard(api, batch, i, n), d)...));
    }
    auto [first, def] = tree_flatten(locals[0]);
    std::vector<std::vector<nx::Tensor>> parts{first};
    for (int i = 1; i < n; ++i) parts.push_back(tree_flatten(locals[static_cast<size_t>(i)]).first);
    const nx::Device home = tree_flatten(params).first.empty()
                                ? nx::Device::cpu()
                                : tree_flatten(params).first[0].device();
    if (!gpu_checked_) {  // once: the devices do not change
      gpus_ = distributed::detail::gpu_group_for(devices_);
      gpu_checked_ = true;
    }
    if (!gpus_.empty())
      return tree_unflatten<Result>(def,
                                    distributed::detail::mean_over_gpus(api, gpus_, parts, home));
    return tree_unflatten<Result>(def, distributed::detail::mean_in_order(api, parts, home));
  }

  template <class Result>
  Result reduce(const char* api, const Result& local) {
    auto [leaves, def] = tree_flatten(local);
    auto reduced = distributed::detail::all_reduce_leaves(
        comm_, api, leaves, distributed::ReduceOp::Mean, bucket_bytes_);
    return tree_unflatten<Result>(def, reduced);
  }

  distributed::Communicator comm_;
  std::vector<nx::Device> devices_;  // empty: over comm_
  // Over GPU devices: their NCCL / RCCL communicator, made at the first call (empty: none).
  std::vector<distributed::GpuCommunicator> gpus_;
  bool gpu_checked_ = false;
  using StepFn = decltype(std::function{std::declval<Step>()});
  using Overlapped = distributed::detail::Overlapped<typename rune::detail::FnSig<StepFn>::type>;
  size_t bucket_bytes_ = distributed::detail::kDefaultBucketBytes;
  bool overlap_ = true;
  bool one_bucket_ = false;  // the latest overlapped call had a single bucket
  StepFn fn_;
  decltype(rune::jit(std::declval<Step>())) step_;
  typename Overlapped::type overlapped_;
};

template <class Step>
DataParallel<Step> data_parallel(Step step, distributed::Communicator comm) {
  return DataParallel<Step>(std::move(step), std::move(comm));
}
// Over devices of this process, e.g. data_parallel(step, {nx::Device::parse("CPU:1", ...), ...}).
template <class Step>
DataParallel<Step> data_parallel(Step step, std::vector<nx::Device> devices) {
  return DataParallel<Step>(std::move(step), std::move(devices));
}

namespace distributed {
// Rank root's tree on every rank (e.g. the initial parameters), leaf by leaf.
template <class T>
T broadcast_tree(const Communicator& comm, const T& tree, int root = 0) {
  auto [leaves, def] = tree_flatten(tree);
  return tree_unflatten<T>(
      def, detail::broadcast_leaves(comm, "rune::distributed::broadcast_tree", leaves, root));
}
}  // namespace distributed

}  // namespace rune
