// Mixed precision helpers (docs/mixed-precision.md): dynamic loss scaling for float16 training,
// as jmp.DynamicLossScale and torch.cuda.amp.GradScaler. A float16 gradient below 2^-24
// underflows to 0; scaling the loss by S (a power of two, so exact) scales every gradient by S,
// and dividing the float32 gradients by S afterwards gives them back. When a scaled gradient
// overflows, the step is skipped and S halves; after `period` finite steps S doubles.
//
// The state is a tree of two scalars (scale: float32, good_steps: int64), a rune::jit argument
// like the optimizer's state, so adjusting it never retraces.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/nx.h"
#include "trace/tree_util.h"

namespace rune::optim {

struct LossScaleState {
  nx::Tensor scale;       // float32 scalar, a power of two
  nx::Tensor good_steps;  // int64 scalar: finite steps since the scale last changed
};

// Whether every element of every leaf is finite (a bool scalar); integer leaves always are.
nx::Tensor all_finite(const std::vector<nx::Tensor>& leaves);
template <class T>
nx::Tensor all_finite(const T& tree) {
  return all_finite(tree_leaves(tree));
}

// a where pred is true, else b, leaf by leaf (jmp.select_tree): how a step whose gradients
// overflowed keeps the old params and optimizer state inside one compiled program.
template <class T>
T select_tree(const nx::Tensor& pred, const T& a, const T& b) {
  return tree_map([&](const nx::Tensor& x, const nx::Tensor& y) { return nx::where(pred, x, y); },
                  a, b);
}

struct DynamicLossScale {
  double initial = 32768;  // 2^15, jmp's and torch's default
  int64_t period = 2000;   // finite steps before the scale doubles
  double factor = 2;
  double min_scale = 1;

  // The state on `device` (the default device when omitted).
  LossScaleState init() const;
  LossScaleState init(nx::Device device) const;
  // loss * scale, in the loss's dtype.
  nx::Tensor scale(const nx::Tensor& loss, const LossScaleState& s) const;
  // Each leaf divided by the scale (at float32 at least; the leaf's dtype after).
  std::vector<nx::Tensor> unscale(const std::vector<nx::Tensor>& grads,
                                  const LossScaleState& s) const;
  template <class P>
  P unscale(const P& grads, const LossScaleState& s) const {
    auto [leaves, def] = tree_flatten(grads);
    return tree_unflatten<P>(def, unscale(leaves, s));
  }
  // The next state after a step whose unscaled gradients were `finite` (a bool scalar):
  // finite: good_steps + 1, and at `period` the scale times factor (good_steps back to 0);
  // not finite: the scale divided by factor (at least min_scale), good_steps 0.
  LossScaleState adjust(const nx::Tensor& finite, const LossScaleState& s) const;
};

}  // namespace rune::optim

RUNE_TREE(rune::optim::LossScaleState, scale, good_steps)
