#include "distributed/overlapped_buckets.h"

#include "core/ops.h"
#include "distributed/async_collectives.h"
#include "distributed/buckets.h"
#include "ir/dtype.h"

namespace rune::distributed::detail {

std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> all_reduce_leaves_overlapped(
    const Communicator& comm, const char* api, const std::vector<nx::Tensor>& leaves, ReduceOp op,
    size_t bucket_bytes) {
  if (bucket_bytes == 0)
    throw distributed_error(std::string(api) + ": a bucket size of 0 bytes (it must be positive)");
  const size_t n = leaves.size();
  std::vector<LeafSize> reversed;  // reversed[j] is leaf n - 1 - j
  for (size_t j = 0; j < n; ++j) {
    const nx::Tensor& x = leaves[n - 1 - j];
    if (!x.defined()) throw distributed_error(std::string(api) + ": the tensor is undefined");
    check_reduce_op(api, x.dtype(), op);
    reversed.push_back({x.dtype(), static_cast<size_t>(x.size() * ir::itemsize(x.dtype()))});
  }
  const CollectiveCall call{Collective::Bucket, op, 0};
  std::vector<std::vector<size_t>> members;  // per bucket: leaf indices
  std::vector<nx::Tensor> tokens;
  std::vector<int64_t> elems;
  // Every start first, then every wait: the trace's order is not the program's (the scheduler
  // places them), but it keeps the intent readable.
  for (const std::vector<size_t>& bucket : plan_buckets(reversed, bucket_bytes)) {
    std::vector<size_t> idx;
    std::vector<nx::Tensor> flat;
    for (size_t j : bucket) {
      idx.push_back(n - 1 - j);
      flat.push_back(nx::reshape(leaves[n - 1 - j], {-1}));
    }
    nx::Tensor x = flat.size() == 1 ? flat[0] : nx::concatenate(flat, 0);
    elems.push_back(x.size());
    tokens.push_back(collective_start(comm, api, call, x, x.shape()));
    members.push_back(std::move(idx));
  }
  std::vector<nx::Tensor> waited, out(n);
  for (size_t b = 0; b < tokens.size(); ++b) {
    nx::Tensor r = collective_wait(comm, api, call, tokens[b], {elems[b]});
    int64_t at = 0;
    for (size_t i : members[b]) {
      const int64_t k = leaves[i].size();
      out[i] = nx::reshape(nx::slice(r, {nx::Slice{at, at + k}}), leaves[i].shape());
      at += k;
    }
    waited.push_back(std::move(r));
  }
  return {std::move(waited), std::move(out)};
}

}  // namespace rune::distributed::detail
