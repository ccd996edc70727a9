#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "codegen/plan.h"
#include "core/donation.h"
#include "core/prim.h"

namespace nx {

using namespace detail;
using ir::Op;

namespace {

Shape kept_shape(const Tensor& x, const std::vector<int64_t>& axes) {
  Shape s = x.shape();
  for (auto a : axes) s[a] = 1;
  return s;
}
Shape dropped_shape(const Tensor& x, const std::vector<int64_t>& axes) {
  Shape s;
  for (int d = 0; d < x.ndim(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) s.push_back(x.shape()[d]);
  return s;
}

Tensor reduce(const std::string& api, Op op, const Tensor& x, const Axes& axes, bool keepdims) {
  auto a = norm_axes(api, axes, x);
  if ((op == Op::ReduceMax || op == Op::ReduceMin)) {
    for (auto d : a)
      if (x.shape()[d] == 0)
        fail(api, "zero-size reduction over axis " + std::to_string(d) + " of " + x.describe() +
                      " has no identity");
  }
  Tensor r = a.empty() ? identity_result(x) : prim(op, x.dtype(), kept_shape(x, a), {x}, a);
  return keepdims ? r : reshape(r, dropped_shape(x, a));
}

// Sums and products of bools and integers accumulate in int64 (as numpy does for signed ones;
// numpy's uint64 for small unsigned ones holds the same values, and rune keeps int64 there, as
// it always has for uint8); uint64 accumulates in uint64 (docs/dtypes.md). 16-bit floats
// accumulate in float32 and round once at the end.
Tensor accumulate(const std::string& api, Op op, const Tensor& x, const Axes& axes, bool keepdims) {
  norm_axes(api, axes, x);  // validate against the caller's tensor, before any cast
  DType t = x.dtype();
  if (t == DType::Bool || (ir::is_int(t) && ir::itemsize(t) < 8))
    return reduce(api, op, cast(x, DType::Int64), axes, keepdims);
  if (ir::is_half(t)) return cast(reduce(api, op, cast(x, DType::Float32), axes, keepdims), t);
  return reduce(api, op, x, axes, keepdims);
}

}  // namespace

Tensor sum(const Tensor& x, Axes axes, bool keepdims) {
  OpScope scope_("nx::sum", {&x});
  return accumulate("nx::sum", Op::ReduceSum, x, axes, keepdims);
}
Tensor prod(const Tensor& x, Axes axes, bool keepdims) {
  OpScope scope_("nx::prod", {&x});
  return accumulate("nx::prod", Op::ReduceProd, x, axes, keepdims);
}
Tensor max(const Tensor& x, Axes axes, bool keepdims) {
  OpScope scope_("nx::max", {&x});
  return reduce("nx::max", Op::ReduceMax, x, axes, keepdims);
}
Tensor min(const Tensor& x, Axes axes, bool keepdims) {
  OpScope scope_("nx::min", {&x});
  return reduce("nx::min", Op::ReduceMin, x, axes, keepdims);
}

// 16-bit floats compute the whole composite at float32 and round once at the end
// (docs/numerics.md), so mean([65504, 65504]) in float16 is 65504, not inf / 2.
static DType compute_dtype(DType t) { return ir::is_half(t) ? DType::Float32 : t; }

Tensor mean(const Tensor& x, Axes axes, bool keepdims) {
  OpScope scope_("nx::mean", {&x});
  auto a = norm_axes("nx::mean", axes, x);
  int64_t n = 1;
  for (auto d : a) n *= x.shape()[d];
  DType t = ir::is_float(x.dtype()) ? compute_dtype(x.dtype()) : DType::Float64;
  Tensor s = sum(cast(x, t), axes, keepdims);
  Tensor m = div(s, scalar_like(s, static_cast<double>(n)));
  return ir::is_float(x.dtype()) ? cast(m, x.dtype()) : m;
}

static Tensor arg_reduce(const std::string& api, bool is_max, const Tensor& x,
                         std::optional<int> axis, bool keepdims) {
  Tensor v = x;
  int a;
  if (!axis) {
    v = flatten(x);
    a = 0;
  } else {
    a = norm_axis(api, *axis, x.ndim(), x);
  }
  int64_t n = v.shape()[a];
  if (n == 0) fail(api, "empty axis of " + x.describe());
  // The first index holding the extreme (a NaN counts as the extreme, as numpy does).
  Tensor m = is_max ? max(v, {a}, true) : min(v, {a}, true);
  Tensor hit = logical_or(equal(v, m), isnan(v));
  Tensor idx = iota(v.shape(), a);
  Tensor cand = where(hit, idx, const_int(DType::Int64, n));
  Tensor r = min(cand, {a}, true);
  if (keepdims) {
    if (!axis) return reshape(r, Shape(x.ndim(), 1));
    return r;
  }
  return axis ? squeeze(r, a) : reshape(r, {});
}
Tensor argmax(const Tensor& x, std::optional<int> axis, bool keepdims) {
  OpScope scope_("nx::argmax", {&x});
  return arg_reduce("nx::argmax", true, x, axis, keepdims);
}
Tensor argmin(const Tensor& x, std::optional<int> axis, bool keepdims) {
  OpScope scope_("nx::argmin", {&x});
  return arg_reduce("nx::argmin", false, x, axis, keepdims);
}

namespace {

// The shift that keeps exp from overflowing: the max over `a` (kept dims) where it is finite,
// else 0 (JAX's logsumexp): a row holding +inf then sums to inf instead of inf - inf = NaN, and
// a row of -inf to 0 (log 0 = -inf). The shift is mathematically irrelevant, so where it is not
// finite no gradient flows through it (the where's false branch).
Tensor finite_shift(const Tensor& x, const std::vector<int64_t>& a) {
  Axes ax(a.begin(), a.end());
  Tensor m = max(x, ax, true);
  return where(less(abs(m), scalar_like(m, INFINITY)), m, scalar_like(m, 0));
}

bool any_empty(const Tensor& x, const std::vector<int64_t>& a) {
  for (auto d : a)
    if (x.shape()[d] == 0) return true;
  return false;
}

}  // namespace

Tensor softmax(const Tensor& x, int axis) {
  OpScope scope_("nx::softmax", {&x});
  require_float("nx::softmax", x);
  int a = norm_axis("nx::softmax", axis, x.ndim(), x);
  if (x.shape()[a] == 0) return identity_result(x);  // empty in, empty out (numpy / JAX)
  Tensor xf = cast(x, compute_dtype(x.dtype()));
  Tensor e = exp(sub(xf, finite_shift(xf, {a})));
  return cast(div(e, sum(e, {a}, true)), x.dtype());
}

Tensor log_softmax(const Tensor& x, int axis) {
  OpScope scope_("nx::log_softmax", {&x});
  require_float("nx::log_softmax", x);
  int a = norm_axis("nx::log_softmax", axis, x.ndim(), x);
  if (x.shape()[a] == 0) return identity_result(x);
  Tensor xf = cast(x, compute_dtype(x.dtype()));
  Tensor shifted = sub(xf, finite_shift(xf, {a}));
  return cast(sub(shifted, log(sum(exp(shifted), {a}, true))), x.dtype());
}

Tensor logsumexp(const Tensor& x, Axes axes, bool keepdims) {
  OpScope scope_("nx::logsumexp", {&x});
  require_float("nx::logsumexp", x);
  auto a = norm_axes("nx::logsumexp", axes, x);
  Tensor xf = cast(x, compute_dtype(x.dtype()));
  Tensor r;
  if (any_empty(x, a)) {
    // log of an empty sum: -inf (scipy, JAX).
    Tensor zero = sum(xf, axes, true);
    r = add(zero, scalar_like(zero, -INFINITY));
  } else {
    Tensor m = finite_shift(xf, a);
    r = add(log(sum(exp(sub(xf, m)), axes, true)), m);
  }
  r = cast(r, x.dtype());
  return keepdims ? r : reshape(r, dropped_shape(x, a));
}

// The result dtype of an integer or bool contraction computed as int64 counts `r`: int64 for
// integers (exact products, docs/numerics.md), bool for bool (any term true: numpy and JAX).
static Tensor bool_or_int64(DType in, const Tensor& r) {
  return in == DType::Bool ? not_equal(r, const_int(DType::Int64, 0)) : r;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  OpScope scope_("nx::matmul", {&a, &b});
  const std::string api = "nx::matmul";
  require_same_dtype(api, a, b);
  if (a.ndim() == 0 || b.ndim() == 0)
    fail(api, "scalar operand: " + a.describe() + " and " + b.describe());
  Tensor x = a.ndim() == 1 ? reshape(a, {1, a.shape()[0]}) : a;
  Tensor y = b.ndim() == 1 ? reshape(b, {b.shape()[0], 1}) : b;
  int64_t k = x.shape()[x.ndim() - 1];
  if (y.shape()[y.ndim() - 2] != k)
    fail(api, "shapes " + a.describe() + " and " + b.describe() + " do not align (" +
                  std::to_string(k) + " != " + std::to_string(y.shape()[y.ndim() - 2]) + ")");
  int64_t m = x.shape()[x.ndim() - 2], n = y.shape()[y.ndim() - 1];
  Shape bx(x.shape().begin(), x.shape().end() - 2), by(y.shape().begin(), y.shape().end() - 2);
  auto batch = ir::broadcast_shapes(bx, by);
  if (!batch)
    fail(api, "batch dimensions of " + a.describe() + " and " + b.describe() + " do not broadcast");
  Tensor r;
  if (ir::is_float(a.dtype())) {
    // Floats: the contraction primitive (a fused multiply-add chain over k, ir/ops.def);
    // 16-bit floats compute at float32 and round once.
    DType t = a.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
    Shape xs = *batch, ys = *batch, rs = *batch;
    xs.insert(xs.end(), {m, k});
    ys.insert(ys.end(), {k, n});
    rs.insert(rs.end(), {m, n});
    Tensor xb = broadcast_to(cast(x, t), xs), yb = broadcast_to(cast(y, t), ys);
    r = cast(prim(Op::Dot, t, rs, {xb, yb}), a.dtype());
  } else {
    // Integers and bool: [..., m, k, 1] * [..., 1, k, n] summed over k in one fused kernel, the
    // products and the sum in int64 (exact until int64 itself wraps).
    Shape xs = bx, ys = by;
    xs.insert(xs.end(), {m, k, 1});
    ys.insert(ys.end(), {1, k, n});
    Shape full = *batch;
    full.insert(full.end(), {m, k, n});
    Tensor x64 = cast(x, DType::Int64), y64 = cast(y, DType::Int64);
    Tensor prod3 = mul(broadcast_to(reshape(x64, xs), full), broadcast_to(reshape(y64, ys), full));
    r = bool_or_int64(a.dtype(), sum(prod3, {static_cast<int>(full.size()) - 2}));
  }
  Shape out = *batch;
  if (a.ndim() > 1) out.push_back(m);
  if (b.ndim() > 1) out.push_back(n);
  return reshape(r, out);
}

void set_matmul_precision(const std::string& precision) {
  auto p = codegen::parse_matmul_precision(precision);
  if (!p)
    throw std::invalid_argument("nx::set_matmul_precision: \"" + precision +
                                "\" is not a matmul precision (expected \"highest\", \"tf32\" "
                                "or \"bf16\")");
  codegen::set_matmul_precision(*p);
}

std::string matmul_precision() { return codegen::precision_name(codegen::matmul_precision()); }

Tensor dot(const Tensor& a, const Tensor& b) {
  OpScope scope_("nx::dot", {&a, &b});
  if (a.ndim() == 0 || b.ndim() == 0) {
    // numpy's (and jnp.dot's) rule for a 0-d operand: the elementwise product, broadcast. The
    // dtypes are those of the other contractions: floats keep theirs, integers multiply in
    // int64, bool gives bool.
    require_same_dtype("nx::dot", a, b);
    if (ir::is_float(a.dtype())) return mul(a, b);
    return bool_or_int64(a.dtype(), mul(cast(a, DType::Int64), cast(b, DType::Int64)));
  }
  if (a.ndim() == 1 && b.ndim() == 1) {
    require_same_dtype("nx::dot", a, b);
    if (a.shape() != b.shape())
      fail("nx::dot", "shapes " + a.describe() + " and " + b.describe() + " differ");
    // As matmul: 16-bit floats at float32 rounded once, integers and bool in int64.
    DType t = a.dtype();
    if (ir::is_float(t)) {
      DType c = compute_dtype(t);
      return cast(sum(mul(cast(a, c), cast(b, c))), t);
    }
    return bool_or_int64(t, sum(mul(cast(a, DType::Int64), cast(b, DType::Int64))));
  }
  // numpy's dot contracts a's last axis with b's second-to-last and keeps every other axis of
  // both (a.shape[:-1] ++ b.shape[:-2] ++ b.shape[-1:]); that is matmul's result except where b
  // has more than two axes and a at least two, where matmul broadcasts batches instead. Those
  // raise rather than silently give matmul's different result.
  if (a.ndim() >= 2 && b.ndim() > 2)
    fail("nx::dot", a.describe() + " and " + b.describe() +
                        ": numpy's dot of these is not a matrix product; use nx::matmul for "
                        "batched products or nx::einsum for numpy's contraction");
  return matmul(a, b);
}

}  // namespace nx
