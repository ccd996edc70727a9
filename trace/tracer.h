// The tracer: an nx interpreter that records primitives into a graph instead of running them.
// Stand-ins for a call's arguments are Param nodes; concrete tensors an op meets (captured
// by the traced function) are lifted to extra params and bound at every call: they are
// constants of the program.
#pragma once
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
  // Concrete tensors the trace captured, in param order after the arguments.
  const std::vector<nx::Tensor>& captured() const { return captured_; }

 private:
  nx::Tensor wrap(ir::NodeRef n);
  nx::Device device_;
  int n_args_;
  std::vector<nx::Tensor> captured_;
  std::vector<Check> checks_;
  std::vector<Checkpoint> checkpoints_;
  std::unordered_map<const nx::TensorImpl*, ir::NodeRef> lifted_;
};

// The tracer active on this thread, if any.
Tracer* active_tracer();

}  // namespace rune
