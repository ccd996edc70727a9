// rune::data_parallel: data-parallel training over a communicator. Each rank runs the user's
// gradient step, compiled with rune::jit, on its shard of the batch; the loss and gradients are
// all-reduced (one collective per dtype over a flat bucket of every leaf, distributed/
// collectives.h) and averaged, so every rank then holds the same bits and applies the same
// optimizer update: parameters stay identical on every rank.
//
// Guarantee (tested): the result is bit for bit what one process gets by running the same
// compiled step on shard 0, 1, ..., W-1, summing the results left to right in rank order and
// dividing by W.
#pragma once
#include <string>
#include <type_traits>
#include <utility>

#include "core/nx.h"
#include "distributed/collectives.h"
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
inline nx::Tensor shard(const char* api, const nx::Tensor& x, int rank, int size) {
  check_shardable(api, x, size);
  const int64_t n = x.shape()[0] / size;
  return nx::slice(x, {nx::Slice{rank * n, (rank + 1) * n}});
}
}  // namespace distributed::detail

// step(params, batch...) -> std::pair<loss, grads>, with grads any tree (usually params' type),
// typically `rune::value_and_grad(loss_fn, params)`. The returned callable takes the global batch
// (every rank passes the same full batch tensors; each uses its own block of their leading axis)
// and returns (loss, grads), each the mean over ranks of the shard results.
template <class Step>
class DataParallel {
 public:
  DataParallel(Step step, distributed::Communicator comm)
      : comm_(std::move(comm)), step_(rune::jit(std::move(step))) {}

  template <class Params, class... Batch>
  auto operator()(const Params& params, const Batch&... batch) {
    static constexpr const char* api = "rune::data_parallel";
    // Left to right, so the first bad batch tensor is the one named.
    (distributed::detail::check_shardable(api, batch, comm_.size()), ...);
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

  const distributed::Communicator& communicator() const { return comm_; }
  size_t traces() const { return step_.traces(); }

 private:
  template <class Result>
  Result reduce(const char* api, const Result& local) {
    auto [leaves, def] = tree_flatten(local);
    auto reduced =
        distributed::detail::all_reduce_leaves(comm_, api, leaves, distributed::ReduceOp::Mean);
    return tree_unflatten<Result>(def, reduced);
  }

  distributed::Communicator comm_;
  decltype(rune::jit(std::declval<Step>())) step_;
};

template <class Step>
DataParallel<Step> data_parallel(Step step, distributed::Communicator comm) {
  return DataParallel<Step>(std::move(step), std::move(comm));
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
