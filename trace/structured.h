// Structured primitives (trace/structured.def): checks, checkpoint blocks, custom vjps and loops,
// which a trace records whole as equations in program order (Tracer::Equation) instead of
// flattening them into graph nodes. Each transformation runs an equation by its rule for the row,
// the function its column of the table names; the rules are declared here, each defined beside the
// transformation that uses it. A loop (rune::scan, fori_loop, while_loop) is recorded in one
// form, Tracer::Loop, whatever the transformation that traced it.
#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "trace/graph_eval.h"
#include "trace/tracer.h"

namespace rune::detail {

// Visitors built from one lambda per row.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// Whether the traces on this thread are being differentiated (rune::grad, vjp, jvp hold a
// DifferentiatingScope around the trace of f). A trace made inside records no loops: autodiff
// differentiates its replayed graph, so its loops are replayed per iteration into it.
bool differentiating();

// ---- eval: a traced body's equations replayed through the current interpreter ----
// (trace/check_replay.cpp) The check replayed from the values of its nodes: nx::check of (flat
// index != first false index), which fails at the same index with the same data and message.
void eval_check(const Tracer::Check& c, GraphEvaluator& ev);
// Nothing: the block's nodes are the graph's own, replayed with it.
inline void eval_checkpoint(const Tracer::Checkpoint&, GraphEvaluator&) {}
// Nothing: the forward's nodes are the graph's own (only reverse mode reads the rule). rune::jvp
// transposes the vjp graph built by the nodes' own rules.
inline void eval_custom_vjp(const Tracer::CustomVjp&, GraphEvaluator&) {}
// (trace/control_flow.cpp) The loop bound again (bind_loop) on the values of its inputs; its
// results bound to its output params in `ev`.
void eval_loop(const Tracer::Loop& loop, GraphEvaluator& ev);
// Each equation by its eval rule, in order.
void eval_equations(const std::vector<Tracer::Equation>& eqs, GraphEvaluator& ev);

// A loop's evaluation: `loop` bound again through the current interpreter, its params bound to
// `inputs` (the values of loop.inputs; undefined where those are null). Into a trace that
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
// body (the user's function is not called again; its checkpoint blocks, which only autodiff
// reads, are not kept); the loop computes the same bits.
Tracer::Loop lower_rows(const Tracer::Loop& loop, nx::Device device);

// ---- vjp: rune::grad / vjp / value_and_grad (trace/autodiff.cpp) ----
struct Differentiation;  // the forward values, what depends on the params, the seeds
using Backward = std::function<void(Differentiation&)>;
// Forward: the check raised (or recorded in the enclosing trace) before any backward pass, so
// a training step never sees a loss the forward pass alone would have refused. No backward.
Backward vjp_check(const Tracer::Check& c, Differentiation& d);
// The block joins the rematerialised blocks of every backward pass (trace/checkpoint.h).
Backward vjp_checkpoint(const Tracer::Checkpoint& c, Differentiation& d);
// The rule joins the custom rules of every backward pass (vjp_nodes).
Backward vjp_custom_vjp(const Tracer::CustomVjp& c, Differentiation& d);
// Forward: the scan run (saving its carries where a gradient flows through it); backward: the
// reverse scan of its body's vjp (trace/scan_vjp.h) seeding its inputs' cotangents.
Backward vjp_loop(const Tracer::Loop& loop, Differentiation& d);

// ---- jvp: rune::jvp transposes the vjp graph, so its trace replays loops (records none) ----
// Raises std::logic_error: never reached.
void jvp_loop(const Tracer::Loop& loop, GraphEvaluator& ev);

// ---- batch: rune::vmap (trace/vmap.cpp) ----
struct Batching;  // the batched bindings and the batch size
// The check of every example at once: it fails when any example fails, with the first failing
// example's message and " (<api>: example b of B fails)" (trace/check_replay.h).
void batch_check(const Tracer::Check& c, Batching& b);
inline void batch_checkpoint(const Tracer::Checkpoint&, Batching&) {}
// Nothing: the forward's nodes are batched as they are (a gradient of the batched function takes
// the nodes' own rules).
inline void batch_custom_vjp(const Tracer::CustomVjp&, Batching&) {}
// The loop batched as a loop (trace/vmap_loops.h).
void batch_loop(const Tracer::Loop& loop, Batching& b);

// ---- stage: rune::jit (trace/staged_program.cpp) ----
// What a program stages besides its graph: its checks (outputs of the program, read after each
// call; null where none may be, in a loop step's body) and its loop steps.
struct Staging {
  std::vector<Tracer::Check>* checks = nullptr;
  std::vector<Tracer::Loop> loops;
};
void stage_check(const Tracer::Check& c, Staging& s);
inline void stage_checkpoint(const Tracer::Checkpoint&, Staging&) {}
inline void stage_custom_vjp(const Tracer::CustomVjp&, Staging&) {}
void stage_loop(const Tracer::Loop& loop, Staging& s);
// Each equation by its stage rule, in order.
void stage_equations(const std::vector<Tracer::Equation>& eqs, Staging& s);

}  // namespace rune::detail
