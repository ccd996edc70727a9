#include <algorithm>
#include <optional>

#include "core/donation.h"
#include "core/earlier_failure.h"
#include "core/prim.h"

namespace nx {

namespace detail {

void fail(const std::string& api, const std::string& msg) {
  raise_earlier_failure_of_current_op();
  throw std::invalid_argument(api + ": " + msg);
}

int norm_axis(const std::string& api, int axis, int ndim, const Tensor& x) {
  int a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim)
    fail(api, "axis " + std::to_string(axis) + " out of range for " + x.describe());
  return a;
}

std::vector<int64_t> norm_axes(const std::string& api, const Axes& axes, const Tensor& x) {
  std::vector<int64_t> r;
  if (axes.empty()) {
    for (int i = 0; i < x.ndim(); ++i) r.push_back(i);
    return r;
  }
  for (int a : axes) r.push_back(norm_axis(api, a, x.ndim(), x));
  std::sort(r.begin(), r.end());
  if (std::adjacent_find(r.begin(), r.end()) != r.end())
    fail(api, "repeated axis for " + x.describe());
  return r;
}

void require_float(const std::string& api, const Tensor& x) {
  if (!ir::is_float(x.dtype())) fail(api, "expects a float tensor, got " + x.describe());
}
void require_same_dtype(const std::string& api, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    fail(api,
         "dtype mismatch: " + a.describe() + " and " + b.describe() + " (cast one with nx::cast)");
}

std::pair<Tensor, Tensor> broadcast_pair(const std::string& api, const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape()) return {a, b};
  auto s = ir::broadcast_shapes(a.shape(), b.shape());
  if (!s) fail(api, "cannot broadcast " + a.describe() + " with " + b.describe());
  return {broadcast_to(a, *s), broadcast_to(b, *s)};
}

Tensor const_of(DType t, double v) {
  // uint64 values at or above 2^63 are kept as their bit pattern (ir::Value).
  const int64_t i = t == DType::UInt64 && v >= 0x1p63
                        ? static_cast<int64_t>(static_cast<uint64_t>(v))
                        : static_cast<int64_t>(v);
  ir::Value val = ir::is_float(t) ? ir::Value::of_float(t, v) : ir::Value::of_int(t, i);
  return current_interpreter().constant(val);
}
Tensor const_int(DType t, int64_t v) {
  return current_interpreter().constant(ir::Value::of_int(t, v));
}

Tensor binary(const std::string& api, ir::Op op, const Tensor& a, const Tensor& b) {
  require_same_dtype(api, a, b);
  auto [x, y] = broadcast_pair(api, a, b);
  return prim(op, x.dtype(), x.shape(), {x, y});
}
Tensor compare(const std::string& api, ir::Op op, const Tensor& a, const Tensor& b) {
  require_same_dtype(api, a, b);
  auto [x, y] = broadcast_pair(api, a, b);
  return prim(op, DType::Bool, x.shape(), {x, y});
}

Tensor elementwise(ir::Op op, const Tensor& x) {
  return prim(op, ir::op_result(op) == ir::OpResult::Bool ? DType::Bool : x.dtype(), x.shape(),
              {x});
}
Tensor elementwise(const std::string& api, ir::Op op, const Tensor& a, const Tensor& b) {
  return ir::op_result(op) == ir::OpResult::Bool ? compare(api, op, a, b) : binary(api, op, a, b);
}

}  // namespace detail

using namespace detail;
using ir::Op;

Tensor scalar_like(const Tensor& x, double v) { return const_of(x.dtype(), v); }

Tensor cast(const Tensor& x, DType t) {
  OpScope scope_("nx::cast", {&x});
  if (x.dtype() == t) return identity_result(x);
  return prim(Op::Cast, t, x.shape(), {x});
}

Tensor stop_gradient(const Tensor& x) {
  OpScope scope_("nx::stop_gradient", {&x});
  // Outside a trace there is no gradient to stop: the value itself, no kernel.
  if (!x.is_traced()) return identity_result(x);
  return unary(Op::StopGradient, x);
}

Tensor neg(const Tensor& x) {
  OpScope scope_("nx::neg", {&x});
  if (x.dtype() == DType::Bool) fail("nx::neg", "cannot negate " + x.describe());
  return unary(Op::Neg, x);
}
Tensor sign(const Tensor& x) {
  OpScope scope_("nx::sign", {&x});
  // 0, -0 and NaN give themselves, as x * 0: the same value with derivative 0 (sign is flat
  // everywhere it is differentiable, JAX), where returning x would have derivative 1 there.
  Tensor z = scalar_like(x, 0);
  return where(greater(x, z), scalar_like(x, 1), where(less(x, z), scalar_like(x, -1), mul(x, z)));
}

// The nx functions of ir/ops.def's elementwise rows (declared in core/ops.h), by domain: each opens
// the op's scope (its errors and donations name nx::<nx>), checks the operands and applies the
// primitive with the row's result dtype.
#define RUNE_NX_UNARY_Float(fn, OP)   \
  Tensor fn(const Tensor& x) {        \
    OpScope scope_("nx::" #fn, {&x}); \
    require_float("nx::" #fn, x);     \
    return elementwise(Op::OP, x);    \
  }
#define RUNE_NX_UNARY_Any(fn, OP)     \
  Tensor fn(const Tensor& x) {        \
    OpScope scope_("nx::" #fn, {&x}); \
    return elementwise(Op::OP, x);    \
  }
#define RUNE_NX_PREDICATE(fn, OP, other)          \
  Tensor fn(const Tensor& x) {                    \
    OpScope scope_("nx::" #fn, {&x});             \
    if (!ir::is_float(x.dtype())) {               \
      CreateOn on(x.device());                    \
      return full(DType::Bool, x.shape(), other); \
    }                                             \
    return elementwise(Op::OP, x);                \
  }
#define RUNE_NX_UNARY_FloatOrFalse(fn, OP) RUNE_NX_PREDICATE(fn, OP, 0)
#define RUNE_NX_UNARY_FloatOrTrue(fn, OP) RUNE_NX_PREDICATE(fn, OP, 1)
#define RUNE_NX_UNARY_Hand(fn, OP)
#define RUNE_NX_BINARY_Float(fn, OP)              \
  Tensor fn(const Tensor& a, const Tensor& b) {   \
    OpScope scope_("nx::" #fn, {&a, &b});         \
    require_float("nx::" #fn, a);                 \
    return elementwise("nx::" #fn, Op::OP, a, b); \
  }
#define RUNE_NX_BINARY_Any(fn, OP)                \
  Tensor fn(const Tensor& a, const Tensor& b) {   \
    OpScope scope_("nx::" #fn, {&a, &b});         \
    return elementwise("nx::" #fn, Op::OP, a, b); \
  }
#define RUNE_NX_BINARY_Hand(fn, OP)
#define X(name, arity, cat)
#define X_UNARY(name, nx, domain, result, lowering, derivative) RUNE_NX_UNARY_##domain(nx, name)
#define X_BINARY(name, nx, domain, result, lowering) RUNE_NX_BINARY_##domain(nx, name)
#include "ir/ops.def"
#undef X
#undef X_UNARY
#undef X_BINARY
#undef RUNE_NX_UNARY_Float
#undef RUNE_NX_UNARY_Any
#undef RUNE_NX_PREDICATE
#undef RUNE_NX_UNARY_FloatOrFalse
#undef RUNE_NX_UNARY_FloatOrTrue
#undef RUNE_NX_UNARY_Hand
#undef RUNE_NX_BINARY_Float
#undef RUNE_NX_BINARY_Any
#undef RUNE_NX_BINARY_Hand

Tensor square(const Tensor& x) {
  OpScope scope_("nx::square", {&x});
  return mul(x, x);
}
Tensor reciprocal(const Tensor& x) {
  OpScope scope_("nx::reciprocal", {&x});
  require_float("nx::reciprocal", x);
  return div(scalar_like(x, 1), x);
}
Tensor sigmoid(const Tensor& x) {
  OpScope scope_("nx::sigmoid", {&x});
  require_float("nx::sigmoid", x);
  // 1/(1+e^-x) for x >= 0 and e^x/(1+e^x) below, so the negative tail does not flush to 0
  // where e^-x overflows: with e = e^(-|x|), (x >= 0 ? 1 : e) / (1 + e), one exp and one
  // division (the values of the two branches, never an overflow, so the gradient stays finite).
  // -|x| is where(x >= 0, -x, x), not -abs(x), whose derivative would be 0 at x = 0.
  Tensor zero = scalar_like(x, 0), one = scalar_like(x, 1);
  Tensor nonneg = greater_equal(x, zero);
  Tensor e = exp(where(nonneg, neg(x), x));
  return div(where(nonneg, one, e), add(one, e));
}
Tensor softplus(const Tensor& x) {
  OpScope scope_("nx::softplus", {&x});
  require_float("nx::softplus", x);
  // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow, accurate for large |x|.
  return add(maximum(x, scalar_like(x, 0)), log1p(exp(neg(abs(x)))));
}
Tensor gelu(const Tensor& x) {
  OpScope scope_("nx::gelu", {&x});
  require_float("nx::gelu", x);
  // The tanh form (as jax.nn.gelu's default): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  Tensor inner = mul(add(x, mul(scalar_like(x, 0.044715), mul(x, mul(x, x)))),
                     scalar_like(x, 0.7978845608028654));
  return mul(mul(scalar_like(x, 0.5), x), add(scalar_like(x, 1), tanh(inner)));
}
Tensor relu(const Tensor& x) {
  OpScope scope_("nx::relu", {&x});
  // Its own rule rather than maximum(x, 0), whose tie rule would give relu'(0) = 1/2: relu'(0)
  // is 0 (JAX, PyTorch). NaN stays NaN, as x * 0 (derivative 0, as JAX's where(x > 0, g, 0)).
  Tensor z = scalar_like(x, 0);
  return where(greater(x, z), x, where(isnan(x), mul(x, z), z));
}

Tensor pow(const Tensor& a, double b) {
  OpScope scope_("nx::pow", {&a});
  return pow(a, scalar_like(a, b));
}
Tensor clip(const Tensor& x, double lo, double hi) {
  OpScope scope_("nx::clip", {&x});
  if (lo > hi)
    fail("nx::clip",
         "lower bound " + std::to_string(lo) + " exceeds upper bound " + std::to_string(hi));
  if (ir::is_int(x.dtype()) || x.dtype() == DType::Bool) {
    // Bounds outside an integer dtype's range clamp to it instead of wrapping (int64 and uint64
    // to the largest doubles below 2^63 and 2^64, which convert without overflow).
    const DType t = x.dtype();
    const double dmin = static_cast<double>(ir::int_min(t));
    const double dmax = t == DType::Int64    ? 9.2233720368547748e18
                        : t == DType::UInt64 ? 1.8446744073709550e19
                                             : static_cast<double>(ir::int_max(t));
    lo = std::clamp(lo, dmin, dmax);
    hi = std::clamp(hi, dmin, dmax);
  }
  return minimum(maximum(x, scalar_like(x, lo)), scalar_like(x, hi));
}

Tensor greater(const Tensor& a, const Tensor& b) {
  OpScope scope_("nx::greater", {&a, &b});
  return compare("nx::greater", Op::CmpLt, b, a);
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  OpScope scope_("nx::greater_equal", {&a, &b});
  return compare("nx::greater_equal", Op::CmpLe, b, a);
}

static Tensor to_bool(const Tensor& x) {
  return x.dtype() == DType::Bool ? x : not_equal(x, scalar_like(x, 0));
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  OpScope scope_("nx::logical_and", {&a, &b});
  return binary("nx::logical_and", Op::And, to_bool(a), to_bool(b));
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  OpScope scope_("nx::logical_or", {&a, &b});
  return binary("nx::logical_or", Op::Or, to_bool(a), to_bool(b));
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  OpScope scope_("nx::logical_xor", {&a, &b});
  return binary("nx::logical_xor", Op::Xor, to_bool(a), to_bool(b));
}
Tensor logical_not(const Tensor& x) {
  OpScope scope_("nx::logical_not", {&x});
  return unary(Op::Not, to_bool(x));
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  OpScope scope_("nx::where", {&cond, &a, &b});
  const std::string api = "nx::where";
  if (cond.dtype() != DType::Bool) fail(api, "condition must be bool, got " + cond.describe());
  require_same_dtype(api, a, b);
  auto s = ir::broadcast_shapes(a.shape(), b.shape());
  if (s) s = ir::broadcast_shapes(*s, cond.shape());
  if (!s)
    fail(api, "cannot broadcast " + cond.describe() + ", " + a.describe() + " and " + b.describe());
  return prim(Op::Where, a.dtype(), *s,
              {broadcast_to(cond, *s), broadcast_to(a, *s), broadcast_to(b, *s)});
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
namespace {

using detail::ScalarOp;

const char* scalar_api(ScalarOp op) {
  switch (op) {
    case ScalarOp::Add:
      return "nx::add";
    case ScalarOp::Sub:
      return "nx::sub";
    case ScalarOp::Mul:
      return "nx::mul";
    case ScalarOp::Div:
      return "nx::div";
    case ScalarOp::Lt:
      return "nx::less";
    case ScalarOp::Le:
      return "nx::less_equal";
    case ScalarOp::Gt:
      return "nx::greater";
    case ScalarOp::Ge:
      return "nx::greater_equal";
  }
  return "nx::?";
}
bool is_comparison(ScalarOp op) { return op >= ScalarOp::Lt; }

// x op s (s op x when scalar_first); x and s already share a dtype.
Tensor scalar_apply(ScalarOp op, const Tensor& x, const Tensor& s, bool scalar_first) {
  const Tensor& a = scalar_first ? s : x;
  const Tensor& b = scalar_first ? x : s;
  switch (op) {
    case ScalarOp::Add:
      return add(a, b);
    case ScalarOp::Sub:
      return sub(a, b);
    case ScalarOp::Mul:
      return mul(a, b);
    case ScalarOp::Div:
      return div(a, b);
    case ScalarOp::Lt:
      return less(a, b);
    case ScalarOp::Le:
      return less_equal(a, b);
    case ScalarOp::Gt:
      return greater(a, b);
    case ScalarOp::Ge:
      return greater_equal(a, b);
  }
  throw std::logic_error("scalar_apply");
}

// A floating-point scalar: a float tensor's dtype; an integer or bool tensor computes at float32
// (as JAX's weak float with an int array) and compares at float64 (exact for every integer of
// bool, uint8 and int32; int64 beyond 2^53 compares after rounding to float64).
Tensor float_scalar_op(ScalarOp op, const Tensor& x, double v, bool scalar_first) {
  // Same dtype: straight to the op, which is then the public op (its errors, its donations).
  if (ir::is_float(x.dtype())) return scalar_apply(op, x, const_of(x.dtype(), v), scalar_first);
  // Promoted: the op's scope first, so a donated or bad x is reported by it, not by the cast.
  OpScope scope_(scalar_api(op), {&x});
  DType t = is_comparison(op) ? DType::Float64 : DType::Float32;
  return scalar_apply(op, cast(x, t), const_of(t, v), scalar_first);
}

// The integers dtype t holds: [lo, hi] (uint64: up to INT64_MAX here; above_int64 adds the rest).
std::pair<int64_t, int64_t> int_range(DType t) {
  return {ir::int_min(t), t == DType::UInt64 ? INT64_MAX : ir::int_max(t)};
}

}  // namespace

Tensor detail::int_scalar_op(ScalarOp op, const Tensor& x, int64_t v, bool scalar_first,
                             bool above_int64) {
  if (ir::is_float(x.dtype())) {
    double d = above_int64 ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v);
    return scalar_apply(op, x, const_of(x.dtype(), d), scalar_first);
  }
  std::optional<OpScope> scope_;  // as in float_scalar_op: the op names a promoted x's errors
  if (x.dtype() == DType::Bool)
    scope_.emplace(scalar_api(op), std::initializer_list<const Tensor*>{&x});
  // A bool tensor with an integer scalar counts in int32 (JAX: bool + 1 is int32).
  Tensor xi = x.dtype() == DType::Bool ? cast(x, DType::Int32) : x;
  auto [lo, hi] = int_range(xi.dtype());
  // A scalar above INT64_MAX is in range for uint64 (passed as its bit pattern).
  const bool fits = above_int64 ? xi.dtype() == DType::UInt64 : v >= lo && v <= hi;
  if (!fits) {
    std::string shown = above_int64 ? std::to_string(static_cast<uint64_t>(v)) : std::to_string(v);
    // Comparisons stay meaningful (numpy 2): at float64, where the scalar is ordered correctly.
    if (is_comparison(op)) {
      if (!scope_) scope_.emplace(scalar_api(op), std::initializer_list<const Tensor*>{&x});
      double d =
          above_int64 ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v);
      return scalar_apply(op, cast(x, DType::Float64), const_of(DType::Float64, d), scalar_first);
    }
    fail(scalar_api(op), "integer scalar " + shown + " is out of range for " + x.describe() +
                             " (numpy 2 and JAX raise too; cast the tensor with nx::cast)");
  }
  return scalar_apply(op, xi, const_int(xi.dtype(), v), scalar_first);
}

Tensor operator+(const Tensor& a, double b) { return float_scalar_op(ScalarOp::Add, a, b, false); }
Tensor operator-(const Tensor& a, double b) { return float_scalar_op(ScalarOp::Sub, a, b, false); }
Tensor operator*(const Tensor& a, double b) { return float_scalar_op(ScalarOp::Mul, a, b, false); }
Tensor operator/(const Tensor& a, double b) { return float_scalar_op(ScalarOp::Div, a, b, false); }
Tensor operator+(double a, const Tensor& b) { return float_scalar_op(ScalarOp::Add, b, a, true); }
Tensor operator-(double a, const Tensor& b) { return float_scalar_op(ScalarOp::Sub, b, a, true); }
Tensor operator*(double a, const Tensor& b) { return float_scalar_op(ScalarOp::Mul, b, a, true); }
Tensor operator/(double a, const Tensor& b) { return float_scalar_op(ScalarOp::Div, b, a, true); }
Tensor operator<(const Tensor& a, const Tensor& b) { return less(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return less_equal(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return greater(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return greater_equal(a, b); }
Tensor operator<(const Tensor& a, double b) { return float_scalar_op(ScalarOp::Lt, a, b, false); }
Tensor operator<=(const Tensor& a, double b) { return float_scalar_op(ScalarOp::Le, a, b, false); }
Tensor operator>(const Tensor& a, double b) { return float_scalar_op(ScalarOp::Gt, a, b, false); }
Tensor operator>=(const Tensor& a, double b) { return float_scalar_op(ScalarOp::Ge, a, b, false); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor operator!(const Tensor& a) { return logical_not(a); }

}  // namespace nx
