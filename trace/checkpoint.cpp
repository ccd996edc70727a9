// The backward half of rune::checkpoint (trace/checkpoint.h): rematerialise and count_residuals
// of trace/vjp.h.
#include <unordered_map>
#include <unordered_set>

#include "ir/rewrite.h"
#include "trace/vjp.h"

namespace rune {

using ir::NodeRef;
using ir::Op;

namespace {

bool is_leaf(NodeRef n) { return n->src.empty(); }

// The nodes of a block: reachable from its outputs without passing its inputs, leaves aside
// (a constant or an iota costs nothing to keep).
std::vector<NodeRef> inner_nodes(const Tracer::Checkpoint& b) {
  std::unordered_set<NodeRef> inputs(b.inputs.begin(), b.inputs.end()), seen;
  std::vector<NodeRef> stack, found;
  for (NodeRef o : b.outputs) stack.push_back(o);
  while (!stack.empty()) {
    NodeRef n = stack.back();
    stack.pop_back();
    if (inputs.count(n) || is_leaf(n) || !seen.insert(n).second) continue;
    found.push_back(n);
    for (NodeRef s : n->src) stack.push_back(s);
  }
  return found;
}

}  // namespace

std::vector<NodeRef> rematerialise(const std::vector<NodeRef>& grads,
                                   const std::vector<NodeRef>& forward_roots,
                                   const std::vector<Tracer::Checkpoint>& checkpoints) {
  auto forward = ir::toposort(forward_roots);
  std::unordered_set<NodeRef> in_forward(forward.begin(), forward.end());
  // recomputed[n]: n rebuilt over Copy(input) for its block's inputs. A Copy is always a buffer
  // of its own (codegen/schedule.cpp), so the rebuilt nodes differ from the forward's and are
  // computed where the backward pass reads them.
  std::unordered_map<NodeRef, NodeRef> recomputed;
  for (const auto& b : checkpoints) {
    auto inner = inner_nodes(b);
    std::unordered_set<NodeRef> mine(inner.begin(), inner.end());
    std::unordered_set<NodeRef> inputs(b.inputs.begin(), b.inputs.end());
    // Inner nodes are rebuilt from their rebuilt sources; the block's inputs read as copies;
    // anything else (leaves, the graph below the inputs) is kept.
    auto rebuilt = ir::rewrite(inner, [&](NodeRef n, const std::vector<NodeRef>&) -> NodeRef {
      if (inputs.count(n)) return ir::make(Op::Copy, n->dtype, n->shape, {n});
      return mine.count(n) ? nullptr : n;
    });
    for (size_t i = 0; i < inner.size(); ++i)
      if (in_forward.count(inner[i])) recomputed.emplace(inner[i], rebuilt[i]);
  }
  // The backward nodes, reading recomputed values in place of the blocks' inner nodes (the
  // other forward nodes are kept as they are).
  return ir::rewrite(grads, [&](NodeRef n, const std::vector<NodeRef>&) -> NodeRef {
    if (auto it = recomputed.find(n); it != recomputed.end()) return it->second;
    return in_forward.count(n) ? n : nullptr;
  });
}

size_t count_residuals(const std::vector<NodeRef>& grads,
                       const std::vector<NodeRef>& forward_roots) {
  // A residual is a forward value computed from the data (it depends on a Param) that the
  // backward pass reads: not a Param itself, nor a view (a movement op other than Copy).
  std::unordered_map<NodeRef, bool> data;
  for (NodeRef n : ir::toposort(forward_roots)) {
    bool d = n->op == Op::Param;
    for (NodeRef s : n->src) d = d || data.at(s);
    data[n] = d;
  }
  std::unordered_set<NodeRef> residuals;
  for (NodeRef n : ir::toposort(grads)) {
    if (data.count(n)) continue;  // a forward node
    for (NodeRef s : n->src) {
      auto it = data.find(s);
      if (it != data.end() && it->second && s->op != Op::Param &&
          !(ir::is_movement(s->op) && s->op != Op::Copy))
        residuals.insert(s);
    }
  }
  return residuals.size();
}

}  // namespace rune
