// The interpreter hook: every nx primitive goes through the current interpreter. The default
// runs eagerly (a one-op program through the compile pipeline); rune's tracers record graphs.
#pragma once
#include <exception>
#include <functional>
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

// Primitive entry point used by every nx op: dispatches to the interpreter that owns the
// operands (a tracer if any operand is traced by an active tracer, else the current one).
Tensor apply(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
             const ir::Arg& arg = {});

}  // namespace nx
