// A constant of any shape: one Const node (a scalar) broadcast by Reshape + Expand, the form the
// interpreter, autodiff and the collectives' fold programs all build for a literal operand.
#pragma once
#include "ir/node.h"

namespace ir {

// v in dtype t (an integer dtype takes v truncated), broadcast to `shape` ({}: the scalar itself).
inline NodeRef full(DType t, double v, const Shape& shape) {
  Arg a = is_float(t) ? Arg{v} : Arg{static_cast<int64_t>(v)};
  NodeRef c = make(Op::Const, t, {}, {}, a);
  if (shape.empty()) return c;
  NodeRef r = make(Op::Reshape, t, Shape(shape.size(), 1), {c});
  return make(Op::Expand, t, shape, {r});
}

}  // namespace ir
