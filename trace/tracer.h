// The tracer: an nx interpreter that records primitives into a graph instead of running them.
// Stand-ins for a call's arguments are Param nodes; concrete tensors an op meets (captured
// by the traced function) are lifted to extra params and bound at every call: they are
// constants of the program.
#pragma once
#include <unordered_map>
#include <vector>

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

  nx::Tensor apply(ir::Op op, nx::DType out, const nx::Shape& shape, const std::vector<nx::Tensor>& srcs,
                   const ir::Arg& arg) override;
  nx::Tensor constant(const ir::Value& v) override;
  void check_readable(const nx::Tensor& t, const char* api) override;

  int n_args() const { return n_args_; }
  // Concrete tensors the trace captured, in param order after the arguments.
  const std::vector<nx::Tensor>& captured() const { return captured_; }

 private:
  nx::Tensor wrap(ir::NodeRef n);
  nx::Device device_;
  int n_args_;
  std::vector<nx::Tensor> captured_;
  std::unordered_map<const nx::TensorImpl*, ir::NodeRef> lifted_;
};

// The tracer active on this thread, if any.
Tracer* active_tracer();

}  // namespace rune
