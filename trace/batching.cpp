#include "trace/batching.h"

#include <iterator>
#include <stdexcept>
#include <string>

namespace rune {

using ir::NodeRef;
using ir::Op;
using ir::Shape;

namespace {

Shape with_batch(int64_t batch, const Shape& s) {
  Shape r{batch};
  r.insert(r.end(), s.begin(), s.end());
  return r;
}
std::vector<int64_t> shifted(const std::vector<int64_t>& axes) {
  std::vector<int64_t> r;
  for (auto a : axes) r.push_back(a + 1);
  return r;
}

// A rule sees the per-example node n and its sources' batched forms, at least one of them
// batched (a node whose sources are all unbatched is shared: batch_nodes keeps it), and returns
// n's batched form over the batch axis of extent B.
using Rule = BatchedNode (*)(NodeRef n, const std::vector<BatchedNode>& src, int64_t B);

std::vector<NodeRef> all_batched(const std::vector<BatchedNode>& src, int64_t B) {
  std::vector<NodeRef> r;
  for (const auto& s : src) r.push_back(with_batch_axis(s, B));
  return r;
}
// n's op over batched sources with the same arg; the result is n's shape behind the batch axis.
BatchedNode same_arg(NodeRef n, const std::vector<BatchedNode>& src, int64_t B) {
  return {ir::make(n->op, n->dtype, with_batch(B, n->shape), all_batched(src, B), n->arg), true};
}
// An axes arg (reductions, Flip) moves one place up behind the batch axis.
BatchedNode shifted_axes(NodeRef n, const std::vector<BatchedNode>& src, int64_t B) {
  return {ir::make(n->op, n->dtype, with_batch(B, n->shape), all_batched(src, B),
                   shifted(ir::arg_ints(n))),
          true};
}
BatchedNode shifted_axis(NodeRef n, const std::vector<BatchedNode>& src, int64_t B) {
  return {
      ir::make(n->op, n->dtype, with_batch(B, n->shape), all_batched(src, B), ir::arg_int(n) + 1),
      true};
}
// Leaves have no sources, so batch_nodes never asks them (a batched Param is an input).
BatchedNode leaf(NodeRef n, const std::vector<BatchedNode>&, int64_t) { return {n, false}; }
// Kernel-level nodes exist only inside lowered kernels, never in a traced graph.
BatchedNode kernel_only(NodeRef n, const std::vector<BatchedNode>&, int64_t) {
  throw std::logic_error("rune::vmap: " + std::string(ir::op_name(n->op)) +
                         " is a kernel-level node; a traced graph never holds it");
}

// ---- one rule per primitive (the names are batch_<Op>; kRules below lists them all) ----
constexpr Rule batch_Param = leaf;
constexpr Rule batch_Const = leaf;
constexpr Rule batch_Iota = leaf;
// Elementwise rows: every source has the node's shape, so unbatched ones broadcast along the
// batch axis and the op applies per element (the same bits as each example alone).
#define X(name, arity, cat)
#define X_UNARY(name, nx, domain, result, lowering, derivative) \
  constexpr Rule batch_##name = same_arg;
#define X_BINARY(name, nx, domain, result, lowering) constexpr Rule batch_##name = same_arg;
#include "ir/ops.def"
#undef X
#undef X_UNARY
#undef X_BINARY
constexpr Rule batch_Where = same_arg;
constexpr Rule batch_ReduceSum = shifted_axes;
constexpr Rule batch_ReduceProd = shifted_axes;
constexpr Rule batch_ReduceMax = shifted_axes;
constexpr Rule batch_ReduceMin = shifted_axes;
// [..., M, K] x [..., K, N]: the batch axis is one more leading batch extent, equal on both
// operands; each output keeps its k chain, so its bits.
constexpr Rule batch_Dot = same_arg;
// Library kernels act along the last axis, which the batch axis at 0 leaves last (nx gives
// them rank >= 1: a 0-d sort or cumsum raises before a node exists).
constexpr Rule batch_Sort = same_arg;
constexpr Rule batch_Argsort = same_arg;
constexpr Rule batch_Cumsum = same_arg;
// Host calls (rune::distributed's collectives) have no batching rule yet.
BatchedNode batch_HostCall(NodeRef n, const std::vector<BatchedNode>&, int64_t) {
  throw std::invalid_argument("rune::vmap: " + ir::arg_host_fn(n).api() +
                              " cannot be batched yet; call it outside rune::vmap");
}
// Gather(x, idx) along `axis`: both gain the batch axis (x.shape[0] == idx.shape[0] == B, as the
// primitive requires off its axis), and the gather axis moves up by one.
constexpr Rule batch_Gather = shifted_axis;
// A row-major reshape behind a leading axis reshapes each example alone.
constexpr Rule batch_Reshape = same_arg;
BatchedNode batch_Permute(NodeRef n, const std::vector<BatchedNode>& src, int64_t B) {
  std::vector<int64_t> perm{0};
  for (auto p : ir::arg_ints(n)) perm.push_back(p + 1);
  return {ir::make(Op::Permute, n->dtype, with_batch(B, n->shape), all_batched(src, B), perm),
          true};
}
// Expand keeps the rank (nx reshapes first), so the batch axis passes through unexpanded.
constexpr Rule batch_Expand = same_arg;
// Shrink and Pad take one pair per axis: the batch axis is kept whole, unpadded.
BatchedNode with_pair(NodeRef n, const std::vector<BatchedNode>& src, int64_t B, ir::Pairs p0) {
  ir::Pairs p{p0};
  const auto& own = ir::arg_pairs(n);
  p.insert(p.end(), own.begin(), own.end());
  return {ir::make(n->op, n->dtype, with_batch(B, n->shape), all_batched(src, B), p), true};
}
BatchedNode batch_Shrink(NodeRef n, const std::vector<BatchedNode>& src, int64_t B) {
  return with_pair(n, src, B, {{0, B}});
}
BatchedNode batch_Pad(NodeRef n, const std::vector<BatchedNode>& src, int64_t B) {
  return with_pair(n, src, B, {{0, 0}});
}
constexpr Rule batch_Flip = shifted_axes;
// Window's axis (its first argument) moves one place up behind the batch axis.
BatchedNode batch_Window(NodeRef n, const std::vector<BatchedNode>& src, int64_t B) {
  std::vector<int64_t> a = ir::arg_ints(n);
  a[0] += 1;
  return {ir::make(Op::Window, n->dtype, with_batch(B, n->shape), all_batched(src, B), a), true};
}
constexpr Rule batch_Copy = same_arg;
constexpr Rule batch_Load = kernel_only;
constexpr Rule batch_Valid = kernel_only;
constexpr Rule batch_Index = kernel_only;
constexpr Rule batch_Acc = kernel_only;
constexpr Rule batch_Var = kernel_only;
constexpr Rule batch_LoadAt = kernel_only;
constexpr Rule batch_RegAt = kernel_only;
constexpr Rule batch_UDiv = kernel_only;
constexpr Rule batch_URem = kernel_only;
constexpr Rule batch_DivT = kernel_only;
constexpr Rule batch_RemT = kernel_only;
constexpr Rule batch_Fma = kernel_only;
constexpr Rule batch_Shuffle = kernel_only;
constexpr Rule batch_ShuffleIdx = kernel_only;

// Indexed by Op, generated from ir/ops.def: a new row does not compile until it has a rule.
constexpr Rule kRules[] = {
#define X(name, arity, cat) batch_##name,
#include "ir/ops.def"
#undef X
};
constexpr size_t kOps = 0
#define X(name, arity, cat) +1
#include "ir/ops.def"
#undef X
    ;
static_assert(std::size(kRules) == kOps, "rune::vmap: every primitive needs a batching rule");

}  // namespace

NodeRef with_batch_axis(BatchedNode x, int64_t batch) {
  if (x.batched) return x.node;
  NodeRef n = x.node;
  Shape one = with_batch(1, n->shape);
  NodeRef r = ir::make(Op::Reshape, n->dtype, one, {n});
  return ir::make(Op::Expand, n->dtype, with_batch(batch, n->shape), {r});
}

std::vector<BatchedNode> batch_nodes(const std::vector<NodeRef>& roots,
                                     const std::unordered_map<NodeRef, NodeRef>& inputs,
                                     int64_t batch) {
  std::unordered_map<NodeRef, BatchedNode> b;
  for (NodeRef n : ir::toposort(roots)) {
    if (auto it = inputs.find(n); it != inputs.end()) {
      b[n] = {it->second, true};
      continue;
    }
    std::vector<BatchedNode> src;
    bool any = false;
    for (NodeRef s : n->src) {
      src.push_back(b.at(s));
      any = any || src.back().batched;
    }
    b[n] = any ? kRules[static_cast<size_t>(n->op)](n, src, batch) : BatchedNode{n, false};
  }
  std::vector<BatchedNode> out;
  for (NodeRef r : roots) out.push_back(b.at(r));
  return out;
}

}  // namespace rune
