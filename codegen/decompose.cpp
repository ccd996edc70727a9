#include "codegen/decompose.h"

#include <stdexcept>
#include <unordered_map>

#include "codegen/decompose_math.h"
#include "ir/builder.h"
#include "ir/rewrite.h"

namespace codegen {

using namespace ir;

namespace {

// float64 -> float32 rounded to odd: an inexact result gets its last bit set, which keeps
// enough information for a second rounding to 16 bits to be correct.
NodeRef f64_to_f32_round_odd(NodeRef d) {
  NodeRef f = b::cast(d, DType::Float32);
  NodeRef back = b::cast(f, DType::Float64);
  NodeRef bits = b::bitcast(f, DType::Int32);
  NodeRef inexact = b::band(b::ne(back, d), b::lnot(b::isnan(d)));
  NodeRef even = b::eq(b::band(bits, b::ci(DType::Int32, 1)), b::ci(DType::Int32, 0));
  NodeRef grow = b::lt(b::abs(back), b::abs(d));
  NodeRef step = b::where(grow, b::ci(DType::Int32, 1), b::ci(DType::Int32, -1));
  NodeRef fixed = b::where(b::band(inexact, even), b::add(bits, step), bits);
  return b::bitcast(fixed, DType::Float32);
}

NodeRef to_f32(NodeRef x) {
  if (x->dtype == DType::Float32) return x;
  if (is_half(x->dtype)) return b::cast(x, DType::Float32);
  return x;
}

NodeRef cast_to_half(NodeRef x, DType to) {
  if (x->dtype == to) return x;
  if (is_half(x->dtype)) x = b::cast(x, DType::Float32);
  if (x->dtype == DType::Float32) return b::cast(x, to);
  if (x->dtype != DType::Float64) x = b::cast(x, DType::Float64);
  return b::cast(f64_to_f32_round_odd(x), to);
}

// rsqrt of a 16-bit float: at float64 (where math::rsqrt rounds once) and rounded once from
// there, so the result is the correctly rounded one, as for float32 and float64.
NodeRef rsqrt_half(NodeRef x, DType to) {
  return cast_to_half(math::rsqrt(b::cast(b::cast(x, DType::Float32), DType::Float64)), to);
}

// The decompose rule for one node whose sources are already decomposed.
NodeRef rewrite_node(NodeRef n, const std::vector<NodeRef>& src) {
  if (src.empty()) return n;
  Op op = n->op;
  if (op == Op::Cast) {
    DType from = src[0]->dtype, to = n->dtype;
    if (is_half(to)) return cast_to_half(src[0], to);
    if (is_half(from)) return b::cast(b::cast(src[0], DType::Float32), to);
    return b::cast(src[0], to);
  }
  if (op == Op::StopGradient) return src[0];  // only autodiff sees it
  if (op == Op::Bitcast || op == Op::Where) return make(op, n->dtype, {}, src, n->arg);
  if (op == Op::Rsqrt && is_half(src[0]->dtype)) return rsqrt_half(src[0], n->dtype);
  bool decomposed = op_decomposed(op);
  if (decomposed && !is_float(src[0]->dtype)) {
    // Bool predicates of other dtypes are constants (math::isinf, ...); nothing else gets here.
    if (op_result(op) != OpResult::Bool)
      throw std::logic_error("decompose: " + std::string(op_name(op)) + " of an integer");
    return decompose_op(op, src);
  }
  bool half_in = false;
  for (auto s : src) half_in |= is_half(s->dtype);
  if (half_in) {
    // Compute at float32, round once to the 16-bit result type.
    std::vector<NodeRef> wide;
    for (auto s : src) wide.push_back(to_f32(s));
    DType out32 = is_half(n->dtype) ? DType::Float32 : n->dtype;
    NodeRef r = decomposed ? decompose_op(op, wide) : make(op, out32, {}, std::move(wide), n->arg);
    return is_half(n->dtype) ? b::cast(r, n->dtype) : r;
  }
  if (decomposed) return decompose_op(op, src);
  return make(op, n->dtype, {}, src, n->arg);
}

}  // namespace

NodeRef math::stop_gradient(NodeRef x) { return x; }

// IsInf and IsFinite as ops every renderer prints: |x| == inf, and !(|x| == inf or isnan(x)).
// Exact for every float dtype (a 16-bit value is compared after its exact widening), constant
// for integers and bool.
NodeRef math::isinf(NodeRef x) {
  if (!is_float(x->dtype)) return b::ci(DType::Bool, 0);
  NodeRef w = to_f32(x);
  return b::eq(b::abs(w), b::cf(w->dtype, __builtin_inf()));
}
NodeRef math::isfinite(NodeRef x) {
  if (!is_float(x->dtype)) return b::ci(DType::Bool, 1);
  NodeRef w = to_f32(x);
  return b::lnot(b::bor(math::isinf(w), b::isnan(w)));
}

NodeRef decompose_op(Op op, const std::vector<NodeRef>& s) {
  switch (op) {
#define X(name, arity, cat)
#define RUNE_DECOMPOSE_Core(name, call)
#define RUNE_DECOMPOSE_Decomposed(name, call) \
  case Op::name:                              \
    return math::call;
#define X_UNARY(name, nx, domain, result, lowering, derivative) \
  RUNE_DECOMPOSE_##lowering(name, nx(s[0]))
#define X_BINARY(name, nx, domain, result, lowering) RUNE_DECOMPOSE_##lowering(name, nx(s[0], s[1]))
#include "ir/ops.def"
#undef X
#undef X_UNARY
#undef X_BINARY
#undef RUNE_DECOMPOSE_Core
#undef RUNE_DECOMPOSE_Decomposed
    default:
      return nullptr;
  }
}

NodeRef decompose(NodeRef root) {
  if (!root) return root;
  return ir::rewrite(
      root, [](NodeRef n, const std::vector<NodeRef>& src) { return rewrite_node(n, src); });
}

}  // namespace codegen
