// The eager interpreter: each primitive runs at once. View ops (permute, expand, shrink, flip,
// and reshapes the strides allow) make a new view of the same buffer; every other primitive
// is a one-op program through the same compile pipeline as rune::jit, cached by structure, so
// eager and compiled results share their bits and a repeated op never recompiles.
#include <cstring>

#include "codegen/compile.h"
#include "core/interpreter.h"
#include "core/donation.h"
#include "ir/scalar.h"

namespace nx {

namespace {

// A view normalised for keys: strides of extent-1 axes do not matter, so zero them.
ir::View key_view(const ir::View& v) {
  ir::View k = v;
  k.offset = 0;
  for (size_t d = 0; d < k.shape.size(); ++d)
    if (k.shape[d] == 1) k.strides[d] = 0;
  return k;
}

std::optional<ir::View> view_op(ir::Op op, const ir::View& v, const Shape& shape, const ir::Arg& arg) {
  switch (op) {
    case ir::Op::Reshape: return v.reshape(shape);
    case ir::Op::Permute: {
      const auto& p = std::get<std::vector<int64_t>>(arg);
      return v.permute(std::vector<int>(p.begin(), p.end()));
    }
    case ir::Op::Expand: return v.expand(shape);
    case ir::Op::Shrink: return v.shrink(std::get<ir::Pairs>(arg));
    case ir::Op::Flip: {
      std::vector<bool> axes(v.shape.size(), false);
      for (auto a : std::get<std::vector<int64_t>>(arg)) axes[a] = true;
      return v.flip(axes);
    }
    default: return std::nullopt;
  }
}

class Eager final : public Interpreter {
 public:
  Tensor apply(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
               const ir::Arg& arg) override {
    for (const auto& s : srcs) {
      if (s.is_traced())
        throw rune::jit_error(std::string("nx: a traced value ") + s.describe() +
                              " was used outside the function being traced");
    }
    consume_donations(srcs, "nx::" + std::string(ir::op_name(op)));
    if (ir::is_movement(op) && op != ir::Op::Pad && op != ir::Op::Copy) {
      const Tensor& x = srcs[0];
      if (auto v = view_op(op, x.impl().view, shape, arg))
        return make_concrete(out, x.impl().buffer, *v, x.device());
      // The strides cannot express this reshape: copy to contiguous memory first.
      Tensor c = run_program(ir::Op::Copy, x.dtype(), x.shape(), {x}, {});
      return make_concrete(out, c.impl().buffer, *c.impl().view.reshape(shape), x.device());
    }
    return run_program(op, out, shape, srcs, arg);
  }

  Tensor constant(const ir::Value& v) override {
    uint64_t bits = v.bits();
    return from_bytes(v.dtype, {}, &bits);  // little-endian: the low bytes hold the value
  }

  void check_readable(const Tensor& t, const char* api) override {
    if (t.is_traced())
      throw rune::jit_error(std::string(api) + ": cannot read traced value " + t.describe() +
                            " while tracing (data-dependent choices use nx::where)");
    check_alive(t, api);
  }

 private:
  Tensor run_program(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
                     const ir::Arg& arg) {
    std::vector<ir::NodeRef> params;
    std::vector<char*> ptrs;
    for (size_t i = 0; i < srcs.size(); ++i) {
      const auto& im = srcs[i].impl();
      params.push_back(ir::make(ir::Op::Param, im.dtype, im.shape, {},
                                ir::LoadArg{static_cast<int>(i), key_view(im.view)}));
      ptrs.push_back(static_cast<char*>(im.buffer->data) + im.view.offset * ir::itemsize(im.dtype));
    }
    ir::NodeRef root = op == ir::Op::Copy ? params[0] : ir::make(op, out, shape, params, arg);
    auto program = codegen::compile_host({root}, static_cast<int>(srcs.size()));
    auto outs = program->run(ptrs);
    return make_concrete(out, outs[0], ir::View::contiguous(shape));
  }
};

// The interpreters active on this thread, innermost last.
thread_local std::vector<Interpreter*> g_stack;

}  // namespace

Interpreter& eager_interpreter() {
  static Eager e;
  return e;
}
Interpreter& current_interpreter() { return g_stack.empty() ? eager_interpreter() : *g_stack.back(); }
bool is_active(const Interpreter* i) {
  for (auto* s : g_stack)
    if (s == i) return true;
  return false;
}

InterpreterScope::InterpreterScope(Interpreter* i) : prev_(nullptr) { g_stack.push_back(i); }
InterpreterScope::~InterpreterScope() { g_stack.pop_back(); }

Tensor apply(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs, const ir::Arg& arg) {
  return current_interpreter().apply(op, out, shape, srcs, arg);
}

}  // namespace nx
