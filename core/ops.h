// Every user op of nx. Each is a composition of primitives (ir/ops.def) applied through the
// current interpreter, so the same code runs eagerly, under rune::jit and under rune::grad.
// Errors raise std::invalid_argument beginning with the op's C++ name and showing the values.
#pragma once
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace nx {

using Axes = std::vector<int>;

// ---- creation ----
// Every creation op below (and nx::from_bytes) puts its result on the default device
// (nx::default_device()); full_like, zeros_like and ones_like on x's device. Inside another
// op (an index grid of argmax, a mask of pad) they create on that op's operands' device.
Tensor create(DType t, const Shape& shape, const std::vector<double>& values);
Tensor full(DType t, const Shape& shape, double value);
Tensor zeros(DType t, const Shape& shape);
Tensor ones(DType t, const Shape& shape);
Tensor scalar(DType t, double value);
Tensor full_like(const Tensor& x, double value);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor arange(DType t, double start, double stop, double step = 1);
Tensor arange(int64_t n);  // int64 [0, n)
Tensor linspace(DType t, double start, double stop, int64_t num, bool endpoint = true);
Tensor eye(DType t, int64_t n, std::optional<int64_t> m = std::nullopt);
Tensor iota(const Shape& shape, int axis);  // int64 index along `axis`

// Random numbers from an explicit key (counter-based: the same key gives the same numbers on
// every device and in eager and compiled code).
struct Key {
  uint64_t value;
};
Key key(uint64_t seed);
std::pair<Key, Key> split(Key k);
Tensor rand(Key k, DType t, const Shape& shape);                    // uniform [0, 1)
Tensor randn(Key k, DType t, const Shape& shape);                   // standard normal
Tensor randint(Key k, int64_t lo, int64_t hi, const Shape& shape);  // int64 in [lo, hi)

// ---- elementwise ----
// The primitives' own functions are declared from the table of primitives, ir/ops.def: each
// elementwise row whose domain is not Hand declares nx::<nx> (its nx column), documented by the
// row's comment. Unary: `Tensor <nx>(const Tensor& x)`, the result of x's dtype (exp, sqrt, erfc,
// rsqrt, abs, floor, ...; domain Float: x must be float) or bool (isnan, isinf, isfinite: a
// constant false / true for integers and bool). Binary: `Tensor <nx>(const Tensor& a, const
// Tensor& b)` (add, sub, mul, div, mod, pow, atan2, maximum, minimum, less, less_equal, equal,
// not_equal): a and b must share a dtype and broadcast together; comparisons give bool.
#define X(name, arity, cat)
#define RUNE_NX_UNARY_Float(fn) Tensor fn(const Tensor& x);
#define RUNE_NX_UNARY_Any(fn) Tensor fn(const Tensor& x);
#define RUNE_NX_UNARY_FloatOrFalse(fn) Tensor fn(const Tensor& x);
#define RUNE_NX_UNARY_FloatOrTrue(fn) Tensor fn(const Tensor& x);
#define RUNE_NX_UNARY_Hand(fn)
#define RUNE_NX_BINARY_Float(fn) Tensor fn(const Tensor& a, const Tensor& b);
#define RUNE_NX_BINARY_Any(fn) Tensor fn(const Tensor& a, const Tensor& b);
#define RUNE_NX_BINARY_Hand(fn)
#define X_UNARY(name, nx, domain, result, lowering, derivative) RUNE_NX_UNARY_##domain(nx)
#define X_BINARY(name, nx, domain, result, lowering) RUNE_NX_BINARY_##domain(nx)
#include "ir/ops.def"
#undef X
#undef X_UNARY
#undef X_BINARY
#undef RUNE_NX_UNARY_Float
#undef RUNE_NX_UNARY_Any
#undef RUNE_NX_UNARY_FloatOrFalse
#undef RUNE_NX_UNARY_FloatOrTrue
#undef RUNE_NX_UNARY_Hand
#undef RUNE_NX_BINARY_Float
#undef RUNE_NX_BINARY_Any
#undef RUNE_NX_BINARY_Hand
// Written by hand (compositions, or primitives with more to check):
Tensor cast(const Tensor& x, DType t);
Tensor neg(const Tensor& x);  // raises for bool
// x, through which no gradient flows (jax.lax.stop_gradient): rune::grad treats it as a constant.
Tensor stop_gradient(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor softplus(const Tensor& x);
Tensor gelu(const Tensor& x);  // tanh approximation, as jax.nn.gelu
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor pow(const Tensor& a, double b);
Tensor clip(const Tensor& x, double lo, double hi);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// A 0-d constant of x's dtype, broadcastable against x (for scalar operands).
Tensor scalar_like(const Tensor& x, double v);

// ---- reductions (axes empty: all axes) ----
Tensor sum(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor prod(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor argmax(const Tensor& x, std::optional<int> axis = std::nullopt, bool keepdims = false);
Tensor argmin(const Tensor& x, std::optional<int> axis = std::nullopt, bool keepdims = false);
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);
Tensor logsumexp(const Tensor& x, Axes axes = {}, bool keepdims = false);

// ---- sorting and scans along one axis (numpy semantics; docs/sort.md) ----
// Ascending and stable; NaN sorts last; -0 and +0 compare equal (their order is kept).
Tensor sort(const Tensor& x, int axis = -1);
Tensor argsort(const Tensor& x, int axis = -1);  // int64 positions along `axis`
// Inclusive running sums, left to right (docs/numerics.md "Cumulative sums"): bool and integers
// sum in int64, float16/bfloat16 in float32 rounded once per output, float32/float64 as they are.
Tensor cumsum(const Tensor& x, int axis = -1);

// ---- indexing (issue 18 "Indexing"; docs/indexing.md) ----
// Index tensors have an integer dtype. One out-of-range rule, JAX's: reads (take,
// take_along_axis, gather, dynamic_slice) map a negative i to i + n, then clamp to [0, n - 1];
// dynamic_slice / dynamic_update_slice clamp each start so the window fits; scatter_add maps
// negatives the same way and drops updates whose index is still outside [0, n).
Tensor take(const Tensor& x, const Tensor& idx, int axis);  // x.shape[:axis] ++ idx.shape ++ ...
Tensor take_along_axis(const Tensor& x, const Tensor& idx, int axis);  // numpy's
Tensor gather(const Tensor& table, const Tensor& idx);  // an embedding lookup: take along axis 0
// x plus, for each position of idx, the matching slice of updates (shape x.shape[:axis] ++
// idx.shape ++ x.shape[axis+1:]) added at x's index idx[...] along axis; duplicates accumulate.
Tensor scatter_add(const Tensor& x, const Tensor& idx, const Tensor& updates, int axis);
Tensor index_add(const Tensor& x, int axis, const Tensor& idx, const Tensor& updates);  // torch
// labels.shape ++ [n]: 1 where the last index equals the label (out-of-range labels: all 0).
Tensor one_hot(const Tensor& labels, int64_t n, DType t = DType::Float32);
// Start indices are 0-d integer tensors (traced under rune::jit: new values do not retrace);
// sizes are static.
Tensor dynamic_slice(const Tensor& x, const std::vector<Tensor>& starts, const Shape& sizes);
Tensor dynamic_update_slice(const Tensor& x, const Tensor& update,
                            const std::vector<Tensor>& starts);
// The k largest along axis, largest first, ties by lower index (NaN counts as the largest):
// (values, int64 indices). Differentiable in the values.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int axis = -1);

// ---- math a model needs (issue 18, part "math"; core/ops_math.cpp, core/einsum.cpp,
// docs/model-math.md) ----
// Variance and standard deviation over `axes` (all when empty), numpy's two passes: the mean
// first, then the mean of squared deviations divided by n - ddof. Integers and bool give
// float64; 16-bit floats compute at float32 and round once.
Tensor var(const Tensor& x, Axes axes = {}, int ddof = 0, bool keepdims = false);
Tensor std(const Tensor& x, Axes axes = {}, int ddof = 0, bool keepdims = false);
// Bool results for any dtype: an element is true when it is nonzero (NaN is true, -0 false).
// Over no elements all is true and any false.
Tensor all(const Tensor& x, Axes axes = {}, bool keepdims = false);
Tensor any(const Tensor& x, Axes axes = {}, bool keepdims = false);
// numpy.linalg.norm's vector norms: ord 2 is sqrt(sum(x^2)) over `axes` (all when empty: the
// Frobenius norm of a matrix), its gradient 0 at x = 0; ord 1 (sum |x|) and ord inf (max |x|)
// need a single axis (or a 1-D x). Integers and bool give float64.
Tensor norm(const Tensor& x, double ord = 2, Axes axes = {}, bool keepdims = false);
// The lower (tril: j <= i + k) and upper (triu: j >= i + k) triangles of the last two axes,
// zeros elsewhere; any batch axes in front.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);
// Inclusive running products along `axis`, dtypes as nx::cumsum (bool and integers in int64,
// 16-bit floats at float32 rounded once per output).
Tensor cumprod(const Tensor& x, int axis = -1);
// numpy.einsum, explicit ("ij,jk->ik") or implicit ("ij,jk") output; repeated letters in one
// operand take a diagonal; "..." stands for the axes no letter names (broadcast as numpy). Any
// number of operands, contracted left to right, each pair as one nx::matmul:
// einsum("ij,jk,kl->il", {a, b, c}) is matmul(matmul(a, b), c).
Tensor einsum(const std::string& subscripts, const std::vector<Tensor>& operands);
Tensor einsum(const std::string& subscripts, const Tensor& a);
Tensor einsum(const std::string& subscripts, const Tensor& a, const Tensor& b);

// ---- movement ----
Tensor reshape(const Tensor& x, const Shape& shape);  // one -1 allowed
Tensor transpose(const Tensor& x);                    // reverses the axes
Tensor permute(const Tensor& x, const Axes& perm);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Tensor expand_dims(const Tensor& x, int axis);
Tensor unsqueeze(const Tensor& x, int axis);
Tensor squeeze(const Tensor& x, std::optional<int> axis = std::nullopt);
Tensor flatten(const Tensor& x);
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
// Slices axis by axis (numpy semantics for negative indices and steps); out-of-range
// bounds clamp as numpy's do. `index` selects one position and drops the axis.
Tensor slice(const Tensor& x, const std::vector<Slice>& slices);
Tensor index(const Tensor& x, int axis, int64_t i);
Tensor concatenate(const std::vector<Tensor>& xs, int axis = 0);
Tensor stack(const std::vector<Tensor>& xs, int axis = 0);
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& widths,
           double value = 0);
Tensor flip(const Tensor& x, Axes axes = {});
Tensor contiguous(const Tensor& x);  // a contiguous copy

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
// The precision float32 matrix products may use on a GPU, as torch.set_float32_matmul_precision:
// "highest" (the default: each output is the fma chain of docs/numerics.md, the host's bits),
// "tf32" or "bf16" (CUDA sm_80 and later: tensor cores with inputs rounded to tf32 / bfloat16
// and float32 accumulation; not the host's bits, within the bound of docs/numerics.md).
// Process-global, read when a program is compiled (and part of the program and rune::jit cache
// keys of GPU programs, so a change recompiles them). The host ignores it, as torch's CPU
// matmul does. Any other string raises std::invalid_argument naming the API and the value.
void set_matmul_precision(const std::string& precision);
std::string matmul_precision();

// ---- placement and waiting (docs/semantics.md §6) ----
// The device creation ops put their results on: RUNE_DEFAULT_DEVICE (CPU, CPU:n, CUDA:n or
// HIP:n), read once, as torch.set_default_device or JAX's default device; the host when unset.
// Every other op runs where its operands are. A bad value raises std::invalid_argument naming
// the variable and the value (at each creation op, and here).
Device default_device();
// A copy of x on device d ("CPU", "CPU:1", ...); a transfer waits for x's device.
Tensor place(const Tensor& x, Device d);
Tensor place(const Tensor& x, const std::string& device);
// Blocks until the work x depends on is done; raises the failures recorded since the last wait
// (and x's own failure if its computation failed).
void wait(const Tensor& x);
void wait(Device d);

// ---- reading (waits for the value; raises rune::jit_error on traced values) ----
template <class T>
std::vector<T> to_vector(const Tensor& x);
std::vector<double> to_array(const Tensor& x);  // the chapter's Nx.to_array: as float64
template <class T>
T item(const Tensor& x);
std::string to_string(const Tensor& x);  // "float64 [3] [1, 2, 3]"
void print(const Tensor& x);             // to_string and a newline on stdout

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
// Scalar operands are weakly typed (docs/semantics.md §1.3, as JAX): a floating-point scalar
// (`x * 2.5`, `x < 0.1`) takes a float tensor's dtype and turns an integer or bool tensor's result
// into float32 (comparisons compare at float64); an integral scalar (`x + 1`) takes the tensor's
// dtype, bool tensors become int32, and a value outside an integer dtype's range raises naming
// the op.
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);

namespace detail {
enum class ScalarOp { Add, Sub, Mul, Div, Lt, Le, Gt, Ge };
// x op s, or s op x when scalar_first, for an integral scalar s (above_int64: s exceeds int64).
Tensor int_scalar_op(ScalarOp op, const Tensor& x, int64_t s, bool scalar_first, bool above_int64);
template <class T>
concept IntScalar = std::integral<T> && !std::same_as<T, bool>;
template <IntScalar T>
Tensor int_scalar_op(ScalarOp op, const Tensor& x, T s, bool scalar_first) {
  return int_scalar_op(op, x, static_cast<int64_t>(s), scalar_first,
                       std::cmp_greater(s, INT64_MAX));
}
}  // namespace detail
// Integral scalars: exact templates, so `x + 1` is not read as the double 1.0.
template <detail::IntScalar T>
Tensor operator+(const Tensor& a, T b) {
  return detail::int_scalar_op(detail::ScalarOp::Add, a, b, false);
}
template <detail::IntScalar T>
Tensor operator-(const Tensor& a, T b) {
  return detail::int_scalar_op(detail::ScalarOp::Sub, a, b, false);
}
template <detail::IntScalar T>
Tensor operator*(const Tensor& a, T b) {
  return detail::int_scalar_op(detail::ScalarOp::Mul, a, b, false);
}
template <detail::IntScalar T>
Tensor operator/(const Tensor& a, T b) {
  return detail::int_scalar_op(detail::ScalarOp::Div, a, b, false);
}
template <detail::IntScalar T>
Tensor operator+(T a, const Tensor& b) {
  return detail::int_scalar_op(detail::ScalarOp::Add, b, a, true);
}
template <detail::IntScalar T>
Tensor operator-(T a, const Tensor& b) {
  return detail::int_scalar_op(detail::ScalarOp::Sub, b, a, true);
}
template <detail::IntScalar T>
Tensor operator*(T a, const Tensor& b) {
  return detail::int_scalar_op(detail::ScalarOp::Mul, b, a, true);
}
template <detail::IntScalar T>
Tensor operator/(T a, const Tensor& b) {
  return detail::int_scalar_op(detail::ScalarOp::Div, b, a, true);
}
template <detail::IntScalar T>
Tensor operator<(const Tensor& a, T b) {
  return detail::int_scalar_op(detail::ScalarOp::Lt, a, b, false);
}
template <detail::IntScalar T>
Tensor operator<=(const Tensor& a, T b) {
  return detail::int_scalar_op(detail::ScalarOp::Le, a, b, false);
}
template <detail::IntScalar T>
Tensor operator>(const Tensor& a, T b) {
  return detail::int_scalar_op(detail::ScalarOp::Gt, a, b, false);
}
template <detail::IntScalar T>
Tensor operator>=(const Tensor& a, T b) {
  return detail::int_scalar_op(detail::ScalarOp::Ge, a, b, false);
}
Tensor operator&&(const Tensor& a, const Tensor& b);
Tensor operator||(const Tensor& a, const Tensor& b);
Tensor operator!(const Tensor& a);

}  // namespace nx
