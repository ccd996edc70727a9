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

NodeRef transcendental(Op op, const std::vector<NodeRef>& s) {
  switch (op) {
    case Op::Exp:
      return math::exp(s[0]);
    case Op::Log:
      return math::log(s[0]);
    case Op::Sin:
      return math::sin(s[0]);
    case Op::Cos:
      return math::cos(s[0]);
    case Op::Tan:
      return math::tan(s[0]);
    case Op::Tanh:
      return math::tanh(s[0]);
    case Op::Atan:
      return math::atan(s[0]);
    case Op::Expm1:
      return math::expm1(s[0]);
    case Op::Log1p:
      return math::log1p(s[0]);
    case Op::Exp2:
      return math::exp2(s[0]);
    case Op::Log2:
      return math::log2(s[0]);
    case Op::Sinh:
      return math::sinh(s[0]);
    case Op::Cosh:
      return math::cosh(s[0]);
    case Op::Asin:
      return math::asin(s[0]);
    case Op::Acos:
      return math::acos(s[0]);
    case Op::Erf:
      return math::erf(s[0]);
    case Op::Erfc:
      return math::erfc(s[0]);
    case Op::Rsqrt:
      return math::rsqrt(s[0]);
    case Op::Pow:
      return math::pow(s[0], s[1]);
    case Op::Atan2:
      return math::atan2(s[0], s[1]);
    default:
      return nullptr;
  }
}

bool is_transcendental(Op op) {
  return op == Op::Exp || op == Op::Log || op == Op::Sin || op == Op::Cos || op == Op::Tan ||
         op == Op::Tanh || op == Op::Pow || op == Op::Atan2 || op == Op::Atan || op == Op::Expm1 ||
         op == Op::Log1p || op == Op::Exp2 || op == Op::Log2 || op == Op::Sinh || op == Op::Cosh ||
         op == Op::Asin || op == Op::Acos || op == Op::Erf || op == Op::Erfc || op == Op::Rsqrt;
}

// IsInf and IsFinite as ops every renderer prints: |x| == inf, and !(|x| == inf or isnan(x)).
// Exact for every float dtype (a 16-bit value is compared after its exact widening), constant
// for integers. Returns nullptr for other ops.
NodeRef classify(Op op, NodeRef x) {
  if (op != Op::IsInf && op != Op::IsFinite) return nullptr;
  if (!is_float(x->dtype)) return b::ci(DType::Bool, op == Op::IsFinite);
  NodeRef w = to_f32(x);
  NodeRef inf = b::eq(b::abs(w), b::cf(w->dtype, __builtin_inf()));
  return op == Op::IsInf ? inf : b::lnot(b::bor(inf, b::isnan(w)));
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
  if (op == Op::Bitcast || op == Op::Where) return make(op, n->dtype, {}, src, n->arg);
  if (NodeRef c = classify(op, src[0])) return c;
  if (op == Op::Rsqrt && is_half(src[0]->dtype)) return rsqrt_half(src[0], n->dtype);
  bool half_in = false;
  for (auto s : src) half_in |= is_half(s->dtype);
  if (half_in) {
    // Compute at float32, round once to the 16-bit result type.
    std::vector<NodeRef> wide;
    for (auto s : src) wide.push_back(to_f32(s));
    DType out32 = is_half(n->dtype) ? DType::Float32 : n->dtype;
    NodeRef r = is_transcendental(op) ? transcendental(op, wide)
                                      : make(op, out32, {}, std::move(wide), n->arg);
    return is_half(n->dtype) ? b::cast(r, n->dtype) : r;
  }
  if (is_transcendental(op)) {
    if (!is_float(src[0]->dtype))
      throw std::logic_error("decompose: " + std::string(op_name(op)) + " of an integer");
    return transcendental(op, src);
  }
  return make(op, n->dtype, {}, src, n->arg);
}

}  // namespace

NodeRef decompose(NodeRef root) {
  if (!root) return root;
  return ir::rewrite(
      root, [](NodeRef n, const std::vector<NodeRef>& src) { return rewrite_node(n, src); });
}

}  // namespace codegen
