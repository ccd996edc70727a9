// var, std, all, any, norm, tril, triu, cumprod (core/ops.h, docs/model-math.md): compositions of
// the primitives, so each runs eagerly, under rune::jit and on every device with the same bits,
// and each differentiates through its parts' rules.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/donation.h"
#include "core/prim.h"

namespace nx {

using namespace detail;
using ir::Op;

namespace {

// The dtype the float compositions compute in: float32 for 16-bit floats (rounded once at the
// end), float64 for integers and bool (numpy's result dtype), else x's own.
DType compute_dtype(DType t) {
  if (!ir::is_float(t)) return DType::Float64;
  return ir::is_half(t) ? DType::Float32 : t;
}
DType result_dtype(DType t) { return ir::is_float(t) ? t : DType::Float64; }

int64_t reduced_count(const Tensor& x, const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (auto d : axes) n *= x.shape()[d];
  return n;
}

// Two passes (numpy's _var): m = mean over axes, then sum((x - m)^2) / (n - ddof). A divisor
// <= 0 divides by 0 (inf or NaN, numpy's value without its warning).
Tensor variance(const std::string& api, const Tensor& x, const Axes& axes, int ddof,
                bool keepdims) {
  auto a = norm_axes(api, axes, x);
  const double n = static_cast<double>(reduced_count(x, a));
  Tensor xf = cast(x, compute_dtype(x.dtype()));
  Tensor m = div(sum(xf, axes, true), scalar_like(xf, n));
  Tensor d = sub(xf, m);
  Tensor s = sum(mul(d, d), axes, keepdims);
  return div(s, scalar_like(s, std::max(n - ddof, 0.0)));
}

// True where x is nonzero (NaN included), as bool.
Tensor truth(const Tensor& x) {
  if (x.dtype() == DType::Bool) return x;
  return not_equal(x, zeros_like(x));
}

// Element [..., i, j] of the last two axes is kept when `keep(j - i)`.
template <class Keep>
Tensor triangle(const std::string& api, const Tensor& x, Keep keep) {
  if (x.ndim() < 2) fail(api, "needs at least two axes; got " + x.describe());
  const int nd = x.ndim();
  Shape plane = {x.shape()[nd - 2], x.shape()[nd - 1]};
  Tensor offset = sub(iota(plane, 1), iota(plane, 0));  // j - i
  return where(keep(offset), x, zeros_like(x));
}

// Inclusive running products along the last axis by Hillis-Steele: level k multiplies each
// element by the one k places before it (1 before the start), k = 1, 2, 4, ... Each level is
// materialised (nx::contiguous), so compiled code does L log2 L multiplies, not 2^k per level.
// No division anywhere, so the gradient is right where x holds zeros.
Tensor cumprod_last(Tensor y) {
  const int nd = y.ndim();
  const int64_t len = y.shape()[nd - 1];
  for (int64_t k = 1; k < len; k *= 2) {
    std::vector<Slice> head(nd);
    head[nd - 1] = Slice{0, len - k, 1};
    std::vector<std::pair<int64_t, int64_t>> widths(nd, {0, 0});
    widths[nd - 1] = {k, 0};
    y = contiguous(mul(y, pad(slice(y, head), widths, 1)));
  }
  return y;
}

// |x| with jnp.abs's derivative, select(x >= 0, 1, -1): 1 at both zeros, so norm ord 1 has
// jax.grad(jnp.linalg.norm(x, 1))'s gradient. nx::abs's own derivative is sign(x), 0 at the
// zeros (docs/design-notes.md "Kinks"). The values are abs's bits: -x for x < 0, else x + 0,
// which turns -0 into +0 and keeps every other x (NaN stays NaN).
Tensor abs_jax_slope(const Tensor& x) {
  return where(less(x, zeros_like(x)), neg(x), add(x, zeros_like(x)));
}

}  // namespace

Tensor var(const Tensor& x, Axes axes, int ddof, bool keepdims) {
  OpScope scope_("nx::var", {&x});
  return cast(variance("nx::var", x, axes, ddof, keepdims), result_dtype(x.dtype()));
}

Tensor std(const Tensor& x, Axes axes, int ddof, bool keepdims) {
  OpScope scope_("nx::std", {&x});
  return cast(sqrt(variance("nx::std", x, axes, ddof, keepdims)), result_dtype(x.dtype()));
}

Tensor all(const Tensor& x, Axes axes, bool keepdims) {
  OpScope scope_("nx::all", {&x});
  norm_axes("nx::all", axes, x);
  Tensor falses = sum(cast(logical_not(truth(x)), DType::Int64), axes, keepdims);
  return equal(falses, zeros_like(falses));
}

Tensor any(const Tensor& x, Axes axes, bool keepdims) {
  OpScope scope_("nx::any", {&x});
  norm_axes("nx::any", axes, x);
  Tensor trues = sum(cast(truth(x), DType::Int64), axes, keepdims);
  return not_equal(trues, zeros_like(trues));
}

Tensor norm(const Tensor& x, double ord, Axes axes, bool keepdims) {
  OpScope scope_("nx::norm", {&x});
  const std::string api = "nx::norm";
  auto a = norm_axes(api, axes, x);
  const bool inf = std::isinf(ord) && ord > 0;
  if (ord != 1 && ord != 2 && !inf) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", ord);
    fail(api, std::string("ord must be 1, 2 or inf, got ") + buf);
  }
  if (ord != 2 && a.size() != 1)
    fail(api, "ord " + std::string(inf ? "inf" : "1") +
                  " is a vector norm and needs one axis; got " + std::to_string(a.size()) +
                  " axes of " + x.describe() + " (numpy's matrix norms are not provided)");
  Tensor xf = cast(x, compute_dtype(x.dtype()));
  Tensor r;
  if (ord == 1) {
    r = sum(abs_jax_slope(xf), axes, keepdims);
  } else if (inf) {
    if (x.shape()[a[0]] == 0)
      fail(api, "ord inf over the empty axis " + std::to_string(a[0]) + " of " + x.describe());
    r = max(abs(xf), axes, keepdims);
  } else {
    // sqrt(s) has the derivative 1 / (2 sqrt(s)), infinite at s = 0, where 2x = 0: the product
    // is NaN. The zero sums take sqrt of 1 instead and the where's false branch gives 0, so no
    // cotangent reaches them (torch's choice and optax.safe_norm's; jnp.linalg.norm gives NaN).
    Tensor s = sum(mul(xf, xf), axes, keepdims);
    Tensor zero = equal(s, zeros_like(s));
    r = where(zero, zeros_like(s), sqrt(where(zero, ones_like(s), s)));
  }
  return cast(r, result_dtype(x.dtype()));
}

Tensor tril(const Tensor& x, int64_t k) {
  OpScope scope_("nx::tril", {&x});
  return triangle("nx::tril", x, [k](const Tensor& off) { return off <= k; });
}

Tensor triu(const Tensor& x, int64_t k) {
  OpScope scope_("nx::triu", {&x});
  return triangle("nx::triu", x, [k](const Tensor& off) { return off >= k; });
}

Tensor cumprod(const Tensor& x, int axis) {
  OpScope scope_("nx::cumprod", {&x});
  const std::string api = "nx::cumprod";
  if (x.ndim() == 0) fail(api, "needs at least one axis; got the 0-d " + x.describe());
  const int a = norm_axis(api, axis, x.ndim(), x);
  const DType t = x.dtype();
  Tensor v = cast(x, !ir::is_float(t) ? DType::Int64 : ir::is_half(t) ? DType::Float32 : t);
  const int last = x.ndim() - 1;
  Axes perm(x.ndim());
  for (int d = 0; d < x.ndim(); ++d) perm[d] = d;
  std::swap(perm[a], perm[last]);  // a swap is its own inverse
  Tensor r = a == last ? cumprod_last(v) : permute(cumprod_last(permute(v, perm)), perm);
  return ir::is_half(t) ? cast(r, t) : r;
}

}  // namespace nx
