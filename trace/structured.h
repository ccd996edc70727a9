// Structured primitives: what a trace keeps whole instead of flattening into graph nodes. A
// loop (rune::scan, fori_loop, while_loop) is recorded in one form, Tracer::Loop, whatever the
// transformation that traced it; each transformation runs it through its own rule.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "trace/tracer.h"

namespace rune::detail {

// Whether the traces on this thread are being differentiated (rune::grad, vjp, jvp hold a
// DifferentiatingScope around the trace of f). A trace made inside records no loops: autodiff
// differentiates its replayed graph, so its loops are replayed per iteration into it.
bool differentiating();

// A loop's evaluation rule: `loop` bound again through the current interpreter, its params bound
// to `inputs` (the values of loop.inputs; undefined where those are null). Into a trace that
// records loops it is recorded again (over the trace's nodes of `inputs`); elsewhere (eagerly,
// or into a trace that replays loops) it runs per iteration. Returns the final carry, then the
// stacked ys.
std::vector<nx::Tensor> bind_loop(const Tracer::Loop& loop, const std::vector<nx::Tensor>& inputs,
                                  nx::Device device);

// `loop` with no xs, as a loop step runs it and vmap batches it, and the same for the loops in
// its body (recursively). A scan whose body reads its rows gets one more carry leaf, its trip
// counter i (int32, from 0; its output is -1: nothing reads it), and reads row i of each xs
// leaf (now an operand) with nx::dynamic_slice, or computes it as counter_lo + i (fori_loop);
// a body that reads no row needs no counter. The body is replayed once into the new loop's
// body (the user's function is not called again); the loop computes the same bits.
Tracer::Loop lower_rows(const Tracer::Loop& loop, nx::Device device);

}  // namespace rune::detail
