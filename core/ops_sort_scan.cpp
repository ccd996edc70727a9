// nx::sort, nx::argsort, nx::cumsum: the library primitives (ir/ops.def) act on the last axis,
// so the user's axis is swapped with the last one before and after (views, no copy where the
// scheduler can read the operand in place).
#include "core/donation.h"
#include "core/prim.h"

namespace nx {

using namespace detail;
using ir::Op;

namespace {

Tensor along_axis(const std::string& api, Op op, DType out, const Tensor& x, int axis) {
  if (x.ndim() == 0) fail(api, "needs at least one axis; got the 0-d " + x.describe());
  int a = norm_axis(api, axis, x.ndim(), x);
  int last = x.ndim() - 1;
  if (a == last) return prim(op, out, x.shape(), {x});
  Axes perm(x.ndim());
  for (int d = 0; d < x.ndim(); ++d) perm[d] = d;
  std::swap(perm[a], perm[last]);  // a swap is its own inverse
  Tensor moved = permute(x, perm);
  return permute(prim(op, out, moved.shape(), {moved}), perm);
}

}  // namespace

Tensor sort(const Tensor& x, int axis) {
  OpScope scope_("nx::sort", {&x});
  return along_axis("nx::sort", Op::Sort, x.dtype(), x, axis);
}

Tensor argsort(const Tensor& x, int axis) {
  OpScope scope_("nx::argsort", {&x});
  return along_axis("nx::argsort", Op::Argsort, DType::Int64, x, axis);
}

Tensor cumsum(const Tensor& x, int axis) {
  OpScope scope_("nx::cumsum", {&x});
  const std::string api = "nx::cumsum";
  if (x.ndim() == 0) fail(api, "needs at least one axis; got the 0-d " + x.describe());
  norm_axis(api, axis, x.ndim(), x);  // validate against the caller's tensor, before any cast
  DType t = x.dtype();
  if (t == DType::UInt64) return along_axis(api, Op::Cumsum, t, x, axis);  // as nx::sum
  if (!ir::is_float(t))
    return along_axis(api, Op::Cumsum, DType::Int64, cast(x, DType::Int64), axis);
  if (ir::is_half(t))
    return cast(along_axis(api, Op::Cumsum, DType::Float32, cast(x, DType::Float32), axis), t);
  return along_axis(api, Op::Cumsum, t, x, axis);
}

}  // namespace nx
