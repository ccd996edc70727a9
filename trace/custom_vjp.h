// A value with its own reverse-mode rule (jax.custom_vjp's idea, internal for now): what nx
// compositions such as nx::conv use to state a cheaper backward pass than the one their parts'
// rules would build. Forward, jvp, vmap and jit read the forward composition's nodes as they are;
// rune::grad / vjp / value_and_grad (and their backward passes inside rune::jit) take the
// cotangents of the chosen inputs from the given backward composition instead of propagating
// through the forward's nodes (Tracer::CustomVjp, trace/structured.def).
#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "ir/node.h"
#include "trace/tracer.h"

namespace rune::detail {

using CustomForward = std::function<nx::Tensor(const std::vector<nx::Tensor>& inputs)>;
using CustomBackward = std::function<std::vector<nx::Tensor>(const std::vector<nx::Tensor>& inputs,
                                                             const nx::Tensor& cotangent)>;

// forward(inputs). When the result is a value being traced, the trace that holds it also records
// the rule: under reverse-mode autodiff the cotangents of the inputs marked in `own` are
// backward(inputs, cotangent of the result) (one tensor per marked input, with its dtype and
// shape; nx code with no side effects, traced when a backward pass is built), and those of the
// other inputs come from forward's own nodes. forward and backward must agree (backward's
// results are the vjp of forward for those inputs): nothing checks it. Eagerly, or when two
// inputs are the same value (whose cotangents could not be told apart), the result is plain
// forward(inputs) and its parts' rules apply.
nx::Tensor custom_vjp(const std::vector<nx::Tensor>& inputs, std::vector<bool> own,
                      const CustomForward& forward, CustomBackward backward);

// The rule's cotangents of c's own inputs, given the cotangent g of c.output: c.backward traced
// over stand-ins for the inputs and g, its stand-ins then replaced by c.inputs and g. Raises
// std::logic_error where backward captured a concrete tensor, recorded a check or a loop, or
// returned the wrong number, dtypes or shapes of cotangents.
std::vector<ir::NodeRef> custom_cotangents(const Tracer::CustomVjp& c, ir::NodeRef g);

// The custom vjps among `equations`, in program order.
std::vector<Tracer::CustomVjp> custom_vjps_of(const std::vector<Tracer::Equation>& equations);

}  // namespace rune::detail
