// Replays a recorded graph through the current interpreter: eagerly outside any trace, into
// the enclosing trace inside rune::jit (so a gradient compiles into the caller's program).
#pragma once
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "ir/node.h"

namespace rune {

// Evaluates graphs over one set of bindings, each node once: a node evaluated by an earlier call
// is not evaluated again (autodiff evaluates a graph in stages around its scans). Param i is
// bound to bindings[i]. Eagerly, nodes without a device operand (an iota, a constant broadcast
// and padded) run on `device`, the graph's params' device.
class GraphEvaluator {
 public:
  GraphEvaluator(std::vector<nx::Tensor> bindings, nx::Device device)
      : bindings_(std::move(bindings)), device_(device) {}
  std::vector<nx::Tensor> operator()(const std::vector<ir::NodeRef>& roots);
  // Binds param `index`, which no evaluated node may have read yet.
  void bind(int index, nx::Tensor t) { bindings_.at(static_cast<size_t>(index)) = std::move(t); }
  // A new param bound to t: its index.
  int add_binding(nx::Tensor t) {
    bindings_.push_back(std::move(t));
    return static_cast<int>(bindings_.size() - 1);
  }
  nx::Device device() const { return device_; }

 private:
  std::vector<nx::Tensor> bindings_;
  nx::Device device_;
  std::unordered_map<ir::NodeRef, nx::Tensor> val_;
};

// Evaluates `roots` once (a GraphEvaluator used for one call).
std::vector<nx::Tensor> evaluate(const std::vector<ir::NodeRef>& roots,
                                 const std::vector<nx::Tensor>& bindings, nx::Device device);

}  // namespace rune
