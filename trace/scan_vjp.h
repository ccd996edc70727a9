// Reverse-mode autodiff of a scan kept whole (Tracer::Loop with a fixed trip count, recorded
// under rune::grad / vjp / value_and_grad, where its body has no loops of its own): the forward
// runs as a scan that also stacks each step's incoming carry, and the backward is a reverse scan
// whose body recomputes the step from its saved carry and applies the body's vjp (lax.scan's
// transpose, with the body rematerialised). Both run through scan_flat in the current interpreter,
// so under rune::jit each is one loop step of the program (the body compiled once, whatever the
// length), eagerly each runs per iteration, and in a trace that is itself differentiated each is
// kept whole again (grad of grad).
//
// The bits (docs/numerics.md "Gradients through loops"): step t's cotangents are the body's
// vjp at its saved carry; a captured operand's cotangent is acc = acc + (step t's cotangent) for
// t = length - 1 down to 0, from acc = -0 (the identity of +, so one step gives its own bits).
#pragma once
#include <vector>

#include "core/tensor.h"
#include "trace/tracer.h"

namespace rune::detail {

// A scan run forward: its results (final carry, then the stacked ys) and, when saved, each
// step's incoming carry stacked on a new axis 0 (leaf k: [length, carry k's shape]).
struct ScanRun {
  std::vector<nx::Tensor> outputs;
  std::vector<nx::Tensor> carries;
};

// Runs `s` on `inputs` (the values of s.inputs) through the current interpreter.
ScanRun run_scan(const Tracer::Loop& s, const std::vector<nx::Tensor>& inputs, bool save_carries,
                 nx::Device device);

// The cotangents of s.inputs given those of its outputs (`output_cts`, defined for its float
// outputs), over `run` (saved carries). Defined for every float carry leaf and for the float xs
// and captures where `wants` is set; undefined elsewhere.
std::vector<nx::Tensor> scan_vjp(const Tracer::Loop& s, const std::vector<nx::Tensor>& inputs,
                                 const ScanRun& run, const std::vector<nx::Tensor>& output_cts,
                                 const std::vector<bool>& wants, nx::Device device);

}  // namespace rune::detail
