// rune::vmap's rule for loops (scan, fori_loop, while_loop): a loop stays a loop. vmap traces f
// with loop recording on, so each loop f runs is a Tracer::Loop, lowered first so that its body
// reads its rows by a trip counter (detail::lower_rows: a body graph over the carry and its
// operands, run `trips` times or while its predicate holds). Batching one is, as lax's
// batching rules: find which carry leaves become batched (a fixed point: a leaf is batched when
// its initial value is, or when the body makes it so from batched inputs), batch the body graph
// once, and issue the loop again through rune's own scan_flat / while_flat with the batched body,
// so it becomes whatever a loop becomes where vmap runs: a loop step of rune::jit's program, a
// scan kept whole for rune::grad, or a loop run eagerly. A while loop whose predicate is batched
// runs while any example's predicate holds; an example whose predicate is false keeps its carry
// (a select), so each example's result is its own loop's, bit for bit.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "trace/graph_eval.h"
#include "trace/tracer.h"

namespace rune::detail {

// x's axis `from` moved to `to` (a view): where vmap puts a batch axis.
nx::Tensor move_axis(const nx::Tensor& x, int64_t from, int64_t to);

// Which of a loop's body params are batched (after the carry fixed point), whether its
// predicate is, which of its outputs (final carry, then stacked ys) are, and the same for the
// loops inside its body, in order.
struct LoopBatching {
  std::vector<bool> params;
  bool pred = false;
  std::vector<bool> outputs;
  std::vector<LoopBatching> inner;
};

// The batching of `loop` (lowered: trace/structured.h) when its body params `batched` (indexed
// like loop.inputs; entries for inner loops' results are ignored) are batched.
LoopBatching loop_batching(const Tracer::Loop& loop, std::vector<bool> batched, int64_t batch);

// Runs `loop` batched through the current interpreter. inputs[k] is body param k's value
// (undefined where loop.inputs[k] is null), with a batch axis 0 of extent `batch` exactly where
// `b.params[k]` is set. Returns the final carry, then the stacked ys, each with its batch axis
// at 0 where b.outputs says it is batched.
std::vector<nx::Tensor> run_batched_loop(const Tracer::Loop& loop, const LoopBatching& b,
                                         const std::vector<nx::Tensor>& inputs, int64_t batch,
                                         nx::Device device);

// rune::vmap's state while it runs a trace's equations (trace/structured.h's batch rules): `ev`
// evaluates the batched graph, `inputs` maps a per-example Param to its batched Param (as
// batch_nodes takes). A loop's results are bound in `ev` by batch_loop: a batched one as a new
// param that `inputs` maps the loop's per-example result param to, a shared one to that param
// itself.
struct Batching {
  const char* api;
  GraphEvaluator& ev;
  std::unordered_map<ir::NodeRef, ir::NodeRef>& inputs;
  int64_t batch;
  nx::Device device;
};

}  // namespace rune::detail
