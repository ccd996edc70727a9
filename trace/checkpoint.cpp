// The backward half of rune::checkpoint (trace/checkpoint.h): rematerialise and count_residuals
// of trace/vjp.h.
#include <unordered_map>
#include <unordered_set>

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
    std::unordered_map<NodeRef, NodeRef> local;
    for (NodeRef n : ir::toposort(b.outputs)) {  // sources first
      if (!mine.count(n)) continue;
      std::vector<NodeRef> src;
      for (NodeRef s : n->src) {
        if (inputs.count(s))
          src.push_back(ir::make(Op::Copy, s->dtype, s->shape, {s}));
        else if (auto it = local.find(s); it != local.end())
          src.push_back(it->second);
        else
          src.push_back(s);
      }
      local[n] = ir::make(n->op, n->dtype, n->shape, std::move(src), n->arg);
    }
    for (const auto& [n, r] : local)
      if (in_forward.count(n)) recomputed.emplace(n, r);
  }
  // The backward nodes, reading recomputed values in place of the blocks' inner nodes.
  std::unordered_map<NodeRef, NodeRef> now;
  for (NodeRef n : ir::toposort(grads)) {
    if (auto it = recomputed.find(n); it != recomputed.end()) {
      now[n] = it->second;
      continue;
    }
    if (in_forward.count(n) || is_leaf(n)) {
      now[n] = n;
      continue;
    }
    std::vector<NodeRef> src;
    for (NodeRef s : n->src) src.push_back(now.at(s));
    now[n] = ir::make(n->op, n->dtype, n->shape, std::move(src), n->arg);
  }
  std::vector<NodeRef> out;
  for (NodeRef g : grads) out.push_back(now.at(g));
  return out;
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
