// The interpreter hook: every nx primitive goes through the current interpreter. The default
// runs eagerly (a one-op program through the compile pipeline); rune's tracers record graphs.
#pragma once
#include <exception>
#include <functional>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "ir/scalar.h"

namespace nx {

class Interpreter {
 public:
  virtual ~Interpreter() = default;
  // Applies primitive `op` producing dtype `out` and shape `shape` from `srcs`.
  virtual Tensor apply(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
                       const ir::Arg& arg) = 0;
  // A 0-d constant holding v (already rounded / wrapped to its dtype).
  virtual Tensor constant(const ir::Value& v) = 0;
  // Where the caller reads `t` (to_vector, item, print): concrete values only.
  virtual void check_readable(const Tensor& t, const char* api) = 0;
  // An nx::check (core/check.h): eagerly evaluated, or recorded by a tracer into its program.
  virtual void record_check(
      const Tensor& ok, const std::vector<Tensor>& data,
      std::function<std::exception_ptr(const std::vector<int64_t>&, const std::vector<Tensor>&)>
          fail) = 0;
};

// The interpreter that handles ops now (per thread): the innermost active tracer, or eager.
Interpreter& current_interpreter();
Interpreter& eager_interpreter();
// Whether `i` is on this thread's stack of active interpreters.
bool is_active(const Interpreter* i);
// Makes `i` current on this thread for the object's lifetime (tracers nest).
class InterpreterScope {
 public:
  explicit InterpreterScope(Interpreter* i);
  ~InterpreterScope();
  InterpreterScope(const InterpreterScope&) = delete;
  InterpreterScope& operator=(const InterpreterScope&) = delete;
};

// Where eager primitives with no operand on a device (none, like Iota, or host scalar constants
// only) run. Such a primitive runs on the device of the innermost CreateOn of this thread; else,
// inside a public op, on the device of that op's first argument that is not a host scalar (so
// an op's internal index grids and masks live with its operands; the host when every argument
// is a host scalar); else on the host.
// Creation ops (core/creation.cpp) open a CreateOn for the device they create on; a replayed
// gradient graph opens one for its primals' device.
class CreateOn {
 public:
  explicit CreateOn(Device d);
  ~CreateOn();
  CreateOn(const CreateOn&) = delete;
  CreateOn& operator=(const CreateOn&) = delete;

 private:
  std::optional<Device> prev_;
};
// The device an operand-less primitive would run on now, if anything but the host default
// decides it: the innermost CreateOn, else the current public op's operands' device.
std::optional<Device> operandless_device();
// A host scalar: a concrete host value with one element, possibly broadcast (every stride 0).
// Such constants combine with operands on any device.
bool is_host_scalar(const Tensor& t);

// Primitive entry point used by every nx op: dispatches to the interpreter that owns the
// operands (a tracer if any operand is traced by an active tracer, else the current one).
Tensor apply(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
             const ir::Arg& arg = {});

}  // namespace nx
