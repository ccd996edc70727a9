// rune::checkpoint (rematerialisation, jax.checkpoint): checkpoint(f) computes what f computes,
// but under rune::grad (and value_and_grad, vjp) the backward pass recomputes the values inside
// f from f's inputs instead of reading the forward pass's, so those need not be kept from the
// forward pass to the backward pass: the residuals of a training step become the blocks' inputs.
// The gradients keep their bits (the recomputation is the same primitives on the same values).
#pragma once
#include <type_traits>
#include <utility>

#include "core/tree.h"
#include "trace/tracer.h"

namespace rune {

template <class F>
auto checkpoint(F f) {
  return [f](const auto&... args) mutable {
    using R = std::decay_t<decltype(f(args...))>;
    Tracer* tracer = active_tracer();
    if (!tracer) return f(args...);  // eager: nothing is differentiated, nothing to recompute
    Flat in;
    (Tree<std::decay_t<decltype(args)>>::flatten(args, in, ""), ...);
    Tracer::Checkpoint block;
    for (const auto& x : in.leaves) block.inputs.push_back(tracer->node_of(x));
    R out = f(args...);
    Flat o;
    Tree<R>::flatten(out, o, "");
    for (const auto& y : o.leaves) block.outputs.push_back(tracer->node_of(y));
    tracer->record_checkpoint(std::move(block));
    return out;
  };
}

}  // namespace rune
