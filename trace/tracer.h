// The tracer: an nx interpreter that records primitives into a graph instead of running them.
// Stand-ins for a call's arguments are Param nodes; concrete tensors an op meets (captured
// by the traced function) are lifted to extra params and bound at every call: they are
// constants of the program.
#pragma once
#include <functional>
#include <memory>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/check.h"
#include "core/interpreter.h"

namespace rune {

namespace detail {
// std::variant of the types after the first (which is there so that each row of a list can
// begin with a comma).
template <class First, class... Rows>
struct RowVariant {
  using type = std::variant<Rows...>;
};
}  // namespace detail

class Tracer final : public nx::Interpreter {
 public:
  // `n_args` argument leaves come first among the program's params; captures follow.
  Tracer(nx::Device device, int n_args) : device_(device), n_args_(n_args) {}

  // A stand-in for argument leaf `index` with the given dtype and layout (offset 0).
  nx::Tensor stand_in(int index, nx::DType t, const ir::View& layout);
  // The graph node of a value seen by this trace (lifting concrete tensors).
  ir::NodeRef node_of(const nx::Tensor& t);

  nx::Tensor apply(ir::Op op, nx::DType out, const nx::Shape& shape,
                   const std::vector<nx::Tensor>& srcs, const ir::Arg& arg) override;
  nx::Tensor constant(const ir::Value& v) override;
  void check_readable(const nx::Tensor& t, const char* api) override;
  void record_check(const nx::Tensor& ok, const std::vector<nx::Tensor>& data,
                    nx::CheckFail fail) override;

  // While a branch of rune::cond / switch_ with a traced index is replayed into this trace, its
  // checks hold only where that branch is taken (jax.lax.cond runs one branch; checkify threads
  // the taken branch's error): every check recorded between push and pop is ok where `taken` (a
  // bool scalar of this trace) is false. Guards nest; a check holds where all of them are true.
  void push_check_guard(const nx::Tensor& taken) { check_guards_.push_back(taken); }
  void pop_check_guard() { check_guards_.pop_back(); }

  int n_args() const { return n_args_; }

  // The structured primitives (trace/structured.def): what a trace records whole, as equations
  // of the program in the order they ran, instead of flattening them into graph nodes. Each
  // names its inputs by graph nodes; its results (if any) are params of the trace, bound when
  // a transformation runs it by its rule for the row (trace/structured.h).
  //
  // A check (nx::check) recorded while tracing: its first-failing-index output and what builds
  // its error.
  struct Check {
    ir::NodeRef first_false;  // int64 scalar: first false flat index of ok, or ok's size
    int64_t size;
    nx::Shape shape;
    std::vector<ir::NodeRef> data;
    nx::CheckFail fail;
  };
  // A rune::checkpoint block: its inputs' and outputs' nodes. Its inner nodes are recomputed by
  // the backward pass instead of stored (trace/checkpoint.h).
  struct Checkpoint {
    std::vector<ir::NodeRef> inputs, outputs;
  };
  // A value with its own vjp (trace/custom_vjp.h): `output` was computed from `inputs` by
  // graph nodes of this trace (every transformation but reverse-mode autodiff reads those nodes as
  // they are). Reverse mode does not propagate output's cotangent into those nodes: the cotangents
  // of the inputs marked in `own` are `backward`'s (nx code over the inputs' values and output's
  // cotangent, traced into the backward graph), and those of the other inputs come from the
  // nodes between the inputs and output, as for any graph. The inputs are distinct nodes.
  struct CustomVjp {
    std::vector<ir::NodeRef> inputs;
    ir::NodeRef output;
    std::vector<bool> own;  // one per input
    // The cotangents of the `own` inputs, in order, each with its input's dtype and shape.
    std::function<std::vector<nx::Tensor>(const std::vector<nx::Tensor>& inputs,
                                          const nx::Tensor& cotangent)>
        backward;
    nx::Device device;  // where the traced backward runs
  };
  struct Loop;
  // One equation: a row of trace/structured.def.
  using Equation = detail::RowVariant<void
#define STRUCTURED(Row, eval, vjp, jvp, batch, stage) , Row
#include "trace/structured.def"
#undef STRUCTURED
                                      >::type;
  // A loop of the program (rune::scan, fori_loop, while_loop), kept whole by a trace that
  // records loops (records_loops): the one form of a loop that every transformation reads. Its body
  // is a graph over params bound to `inputs`, in this order: the carry (n_carry), one row of each
  // xs (n_xs), then the operands it captured. One run of the body gives the new carry, then one row
  // of each y; the loop's results are the final carry, then the rows stacked on a new axis 0
  // ([trips, ...]).
  struct Loop {
    const char* api = "rune::scan";  // names the loop in messages
    // This trace's nodes: init, xs, then the operands; nullptr for a body param that is the
    // result of a loop in `body` (bound inside the body).
    std::vector<ir::NodeRef> inputs;
    std::vector<ir::NodeRef> body_roots;  // the new carry, then the ys' rows
    // while_loop: a bool scalar over the body's params, read before each iteration (trips = -1;
    // a while loop has no xs and no ys).
    ir::NodeRef cond_root = {};
    // The structured primitives of the body, recorded in its trace in program order: loops and
    // checkpoint blocks (a body with checks is replayed per iteration, never kept whole).
    std::vector<Equation> body;
    size_t n_carry = 0, n_xs = 0;
    int64_t trips = 0;  // a fixed trip count (scan, fori_loop), or -1: while cond_root holds
    // fori_loop: xs[0] is its step counter counter_lo, counter_lo + 1, ..., so a row is
    // computed from the trip number instead of read.
    bool counted = false;
    int64_t counter_lo = 0;
    // The params standing for the final carry, then the stacked ys (add_loop fills them); -1
    // for a result nothing reads (the trip counter of a lowered loop, trace/structured.h).
    std::vector<int> outputs;
    size_t n_ys() const { return body_roots.size() - n_carry; }
  };
  // Set by the transformations that keep loops whole (rune::jit, vmap, grad / vjp /
  // value_and_grad, and loop bodies traced where loops nest): control flow traced directly into
  // this trace becomes a Loop instead of being replayed per iteration.
  bool records_loops = false;
  // Records `loop` (outputs are filled here) and returns stand-ins for its final carry and
  // stacked ys: params after the captures so far, with no concrete value (captured() holds an
  // undefined tensor), bound when a transformation runs the loop.
  std::vector<nx::Tensor> add_loop(Loop loop);
  void record_checkpoint(Checkpoint c) { equations_.emplace_back(std::move(c)); }
  void record_custom_vjp(CustomVjp c) { equations_.emplace_back(std::move(c)); }
  // The structured primitives recorded, in program order.
  const std::vector<Equation>& equations() const { return equations_; }
  // Concrete tensors the trace captured, in param order after the arguments.
  const std::vector<nx::Tensor>& captured() const { return captured_; }

 private:
  nx::Tensor wrap(ir::NodeRef n);
  // A new param after the captures so far, bound later (a loop's result).
  nx::Tensor unbound_param(nx::DType t, const nx::Shape& shape, std::vector<int>& indices);
  nx::Device device_;
  int n_args_;
  std::vector<nx::Tensor> captured_;
  std::vector<nx::Tensor> check_guards_;  // push_check_guard: innermost last
  std::vector<Equation> equations_;
  // The param each captured value became, by its TensorImpl's address; `tensor` tells whether
  // that TensorImpl is still the one at the address (node_of).
  struct Lifted {
    std::weak_ptr<nx::TensorImpl> tensor;
    ir::NodeRef node;
  };
  std::unordered_map<const nx::TensorImpl*, Lifted> lifted_;
};

// The tracer active on this thread, if any.
Tracer* active_tracer();

}  // namespace rune
