// The tracer: an nx interpreter that records primitives into a graph instead of running them.
// Stand-ins for a call's arguments are Param nodes; concrete tensors an op meets (captured
// by the traced function) are lifted to extra params and bound at every call: they are
// constants of the program.
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/interpreter.h"

namespace rune {

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

  // A check recorded while tracing: its first-failing-index output and what builds its error.
  struct Check {
    ir::NodeRef first_false;  // int64 scalar: first false flat index of ok, or ok's size
    int64_t size;
    nx::Shape shape;
    std::vector<ir::NodeRef> data;
    nx::CheckFail fail;
  };
  const std::vector<Check>& checks() const { return checks_; }

  // A rune::checkpoint block recorded in this trace: its inputs' and outputs' nodes. Its inner
  // nodes are recomputed by the backward pass instead of stored (trace/checkpoint.h).
  struct Checkpoint {
    std::vector<ir::NodeRef> inputs, outputs;
  };
  void record_checkpoint(Checkpoint c) { checkpoints_.push_back(std::move(c)); }
  const std::vector<Checkpoint>& checkpoints() const { return checkpoints_; }

  int n_args() const { return n_args_; }

  // A loop of the program (rune::scan / fori_loop / while_loop under rune::jit,
  // trace/staged_program.h): its compiled body runs `trips` times in one step of the program
  // runner, carry = body(carry).
  struct Loop {
    // The initial carry, then the body's captured operands; nullptr for a body param that is
    // the result of one of body_loops (bound inside the body's program).
    std::vector<ir::NodeRef> inputs;
    // The body's new carry, then its n_ys rows; its params: carry, captures. Iteration t writes
    // row y of its output y straight into row t of the loop's stacked output y ([trips, ...]).
    std::vector<ir::NodeRef> body_roots;
    size_t n_ys = 0;
    int body_params = 0;
    int64_t trips = 0;             // a fixed trip count (scan, fori_loop), or -1: while cond_root
    ir::NodeRef cond_root = {};    // while_loop: a bool scalar over the body's params (no ys)
    std::vector<int> outputs;      // the params standing for the final carry, then the stacked ys
    std::vector<Loop> body_loops;  // loops inside the body: loop steps of the body's program
  };
  // Set by rune::jit on its own tracer: control flow traced directly into it becomes a Loop.
  bool records_loops = false;

  // A rune::scan (or fori_loop) traced directly into a trace that rune::grad / vjp / value_and_grad
  // differentiate (records_scans): kept whole instead of replayed per iteration, so autodiff
  // differentiates it as a loop (trace/scan_vjp.h): it runs forward saving each step's carry,
  // then a reverse scan of the body's vjp. Its results are params of this trace (like a Loop's).
  struct Scan {
    const char* api = "rune::scan";
    std::vector<ir::NodeRef>
        body_outputs;  // new carry then ys, over params: carry, x rows, captures
    size_t n_carry = 0, n_xs = 0;
    int64_t length = 0;
    bool counted = false;  // fori_loop: xs is its step counter, counter_lo, counter_lo + 1, ...
    int64_t counter_lo = 0;
    std::vector<ir::NodeRef> inputs;  // this trace's nodes: init, xs, then the body's captures
    std::vector<int> outputs;         // the params standing for the final carry, then the ys
  };
  bool records_scans = false;
  // Records `scan` (outputs are filled here) and returns its final carry and stacked ys as
  // params without a concrete value, bound when autodiff runs the scan.
  std::vector<nx::Tensor> add_scan(Scan scan);
  const std::vector<Scan>& scans() const { return scans_; }
  // Records `loop` (outputs are filled here) and returns stand-ins for its final carry: params
  // after the captures so far, with no concrete value (captured() holds an undefined tensor).
  std::vector<nx::Tensor> add_loop(Loop loop);
  const std::vector<Loop>& loops() const { return loops_; }
  // Concrete tensors the trace captured, in param order after the arguments.
  const std::vector<nx::Tensor>& captured() const { return captured_; }

 private:
  nx::Tensor wrap(ir::NodeRef n);
  // A new param after the captures so far, bound later (a loop's or scan's result).
  nx::Tensor unbound_param(nx::DType t, const nx::Shape& shape, std::vector<int>& indices);
  nx::Device device_;
  int n_args_;
  std::vector<nx::Tensor> captured_;
  std::vector<Check> checks_;
  std::vector<Checkpoint> checkpoints_;
  std::vector<Loop> loops_;
  std::vector<Scan> scans_;
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
