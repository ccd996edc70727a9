#include "codegen/core_ops.h"

#include <cmath>
#include <stdexcept>

#include "ir/builder.h"
#include "ir/rewrite.h"
#include "ir/scalar.h"

namespace codegen {

using namespace ir;

namespace {

int bits_of(DType t) { return int_bits(t); }
bool is_unsigned(DType t) { return is_unsigned_int(t) || t == DType::Bool; }
DType int_of(DType f) { return f == DType::Float64 ? DType::Int64 : DType::Int32; }

// The arg legalize gives the Cast and shifts it guards: their operands are already in range, so
// a second legalize keeps them (legalize is idempotent; lower legalizes expressions built from
// legalized parts, such as a reduction's combine of its element).
constexpr int64_t kGuarded = 1;
bool guarded(NodeRef n) {
  return std::holds_alternative<int64_t>(n->arg) && std::get<int64_t>(n->arg) == kGuarded;
}

// A core node; folded when every source is a constant (ir::apply is the meaning).
NodeRef core(Op op, DType t, std::vector<NodeRef> src, ir::Arg arg = {}) {
  bool all_const = true;
  for (auto s : src) all_const &= s->op == Op::Const;
  if (all_const) {
    std::vector<Value> v;
    for (auto s : src)
      v.push_back(is_float(s->dtype) ? Value::of_float(s->dtype, arg_float(s))
                                     : Value::of_int(s->dtype, arg_int(s)));
    Value r = apply(op, t, v);
    return is_float(t) ? b::cf(t, r.f) : b::ci(t, r.i);
  }
  return make(op, t, {}, std::move(src), std::move(arg));
}

NodeRef K(DType t, int64_t v) { return b::ci(t, v); }
NodeRef signbit(NodeRef x) {
  DType it = int_of(x->dtype);
  return b::lt(b::bitcast(x, it), K(it, 0));
}
NodeRef isnan(NodeRef x) { return b::ne(x, x); }

NodeRef minmax(bool is_max, NodeRef a, NodeRef c) {
  DType t = a->dtype;
  if (t == DType::Bool) return is_max ? b::bor(a, c) : b::band(a, c);
  if (!is_float(t)) return is_max ? b::where(b::lt(c, a), a, c) : b::where(b::lt(a, c), a, c);
  // Against a constant k that is neither NaN nor zero (a clamp: min(|x|, 9.5) in tanh, exp's
  // +-110) one compare decides: x NaN fails it and gives x, as the first NaN operand wins;
  // x == k means the same bits (only zeros have two encodings), so which is returned is moot.
  // Same bits as the general form below, in 2 operations instead of 9.
  for (int side = 0; side < 2; ++side) {
    NodeRef k = side ? a : c, x = side ? c : a;
    if (k->op != Op::Const || x->op == Op::Const) continue;
    const double kv = arg_float(k);
    if (std::isnan(kv) || kv == 0) continue;
    return is_max ? b::where(b::lt(x, k), k, x) : b::where(b::lt(k, x), k, x);
  }
  // NaN propagates (the first NaN operand wins); equal values order -0 below +0.
  NodeRef sa = signbit(a);
  NodeRef tie = is_max ? b::where(sa, c, a) : b::where(sa, a, c);
  NodeRef gt = b::lt(c, a), lt = b::lt(a, c);
  NodeRef r =
      is_max ? b::where(gt, a, b::where(lt, c, tie)) : b::where(lt, a, b::where(gt, c, tie));
  return b::where(isnan(a), a, b::where(isnan(c), c, r));
}

// numpy's floor division and remainder: x / 0 and x % 0 give 0, MIN / -1 wraps.
NodeRef int_divmod(bool div, NodeRef a, NodeRef c) {
  DType t = a->dtype;
  if (t == DType::Bool) return div ? b::band(a, c) : K(t, 0);
  NodeRef bz = b::eq(c, K(t, 0));
  if (is_unsigned(t)) {  // plain division: no sign to floor towards, no MIN / -1
    NodeRef q = core(div ? Op::DivT : Op::RemT, t, {a, b::where(bz, K(t, 1), c)});
    return b::where(bz, K(t, 0), q);
  }
  NodeRef bm = b::eq(c, K(t, -1));
  NodeRef bad = b::bor(bz, bm);
  NodeRef bs = b::where(bad, K(t, 1), c);
  NodeRef q = core(Op::DivT, t, {a, bs}), r = core(Op::RemT, t, {a, bs});
  NodeRef adj = b::band(b::ne(r, K(t, 0)), b::bxor(b::lt(r, K(t, 0)), b::lt(bs, K(t, 0))));
  if (div) {
    NodeRef qa = b::where(adj, b::sub(q, K(t, 1)), q);
    return b::where(bz, K(t, 0), b::where(bm, b::sub(K(t, 0), a), qa));
  }
  return b::where(bad, K(t, 0), b::where(adj, b::add(r, bs), r));
}

// numpy remainder: fmod, moved into the divisor's sign; a zero result takes the divisor's sign.
NodeRef float_mod(NodeRef a, NodeRef c) {
  DType t = a->dtype, it = int_of(t);
  NodeRef zero = b::cf(t, 0);
  NodeRef r = core(Op::RemT, t, {a, c});
  NodeRef nonzero = b::bor(b::lt(r, zero), b::lt(zero, r));
  NodeRef adj = b::band(nonzero, b::bxor(signbit(r), signbit(c)));
  NodeRef ra = b::where(adj, b::add(r, c), r);
  int64_t sign = t == DType::Float64 ? INT64_MIN : int64_t{INT32_MIN};
  NodeRef signed_zero = b::bitcast(b::band(b::bitcast(c, it), K(it, sign)), t);
  return b::where(b::eq(ra, zero), signed_zero, ra);
}

NodeRef shift(bool left, NodeRef a, NodeRef c) {
  DType t = a->dtype;
  // Bool shifts as ir::apply defines them (on the byte): true << 1 is still nonzero.
  if (t == DType::Bool) return left ? a : b::where(c, K(t, 0), a);
  NodeRef big = b::le(K(t, bits_of(t)), c);
  if (!is_unsigned(t)) big = b::bor(big, b::lt(c, K(t, 0)));
  NodeRef s = core(left ? Op::Shl : Op::Shr, t, {a, b::where(big, K(t, 0), c)}, kGuarded);
  return b::where(big, K(t, 0), s);
}

// float -> integer: truncation toward zero, saturating, NaN gives 0 (ir::cast). The conversion
// itself only ever sees in-range values.
NodeRef float_to_int(NodeRef x, DType to) {
  DType from = x->dtype;
  bool uns = is_unsigned(to);
  int bits = bits_of(to);
  // In range: [lo, hi), both exact in every float dtype that reaches here (float32 / float64).
  double lo = uns ? 0.0 : -std::ldexp(1.0, bits - 1);
  double hi = std::ldexp(1.0, uns ? bits : bits - 1);
  NodeRef below = b::lt(x, b::cf(from, lo)), above = b::le(b::cf(from, hi), x), nan = isnan(x);
  NodeRef safe = b::where(b::bor(b::bor(below, above), nan), b::cf(from, 0), x);
  NodeRef r = core(Op::Cast, to, {safe}, kGuarded);
  r = b::where(below, K(to, int_min(to)), r);
  r = b::where(above, K(to, int_max(to)), r);
  return b::where(nan, K(to, 0), r);
}

NodeRef cast(NodeRef x, DType to) {
  DType from = x->dtype;
  if (from == to) return x;
  if (to == DType::Bool) {
    if (is_half(from)) throw std::logic_error("legalize: a 16-bit cast to bool (decompose first)");
    return b::ne(x, is_float(from) ? b::cf(from, 0) : K(from, 0));
  }
  if (is_float(from) && !is_float(to)) return float_to_int(x, to);
  if ((is_half(from) && to != DType::Float32) || (is_half(to) && from != DType::Float32))
    throw std::logic_error("legalize: 16-bit casts go through float32 (decompose first)");
  return core(Op::Cast, to, {x});
}

NodeRef abs(NodeRef x) {
  DType t = x->dtype;
  if (is_unsigned(t)) return x;
  if (!is_float(t)) return b::where(b::lt(x, K(t, 0)), b::sub(K(t, 0), x), x);
  DType it = int_of(t);
  int64_t mask = t == DType::Float64 ? INT64_MAX : int64_t{INT32_MAX};
  return b::bitcast(b::band(b::bitcast(x, it), K(it, mask)), t);
}

NodeRef legalize_node(NodeRef n, const std::vector<NodeRef>& s) {
  DType t = n->dtype;
  DType st = s.empty() ? t : s[0]->dtype;
  const bool fl = is_float(st), bl = st == DType::Bool;
  if ((is_half(st) || is_half(t)) && !s.empty() && n->op != Op::Cast && n->op != Op::Bitcast &&
      n->op != Op::Where && n->op != Op::LoadAt && n->op != Op::RegAt && n->op != Op::Shuffle &&
      n->op != Op::ShuffleIdx)
    throw std::logic_error("legalize: " + std::string(op_name(n->op)) +
                           " on a 16-bit float (decompose first)");
  switch (n->op) {
    case Op::Neg:
      if (fl) return core(Op::Neg, t, s);
      return bl ? s[0] : b::sub(K(t, 0), s[0]);
    case Op::Abs:
      return abs(s[0]);
    case Op::Not:
      return b::bxor(s[0], K(t, bl ? 1 : -1));
    case Op::IsNan:
      return fl ? isnan(s[0]) : K(DType::Bool, 0);
    case Op::Cast:
      return guarded(n) ? core(Op::Cast, t, s, kGuarded) : cast(s[0], t);
    case Op::Add:
      return bl ? b::bor(s[0], s[1]) : b::add(s[0], s[1]);
    case Op::Sub:
      return bl ? b::bxor(s[0], s[1]) : b::sub(s[0], s[1]);
    case Op::Mul:
      return bl ? b::band(s[0], s[1]) : b::mul(s[0], s[1]);
    case Op::Div:
      return fl ? core(Op::DivT, t, s) : int_divmod(true, s[0], s[1]);
    case Op::Mod:
      return fl ? float_mod(s[0], s[1]) : int_divmod(false, s[0], s[1]);
    case Op::Max:
    case Op::Min:
      return minmax(n->op == Op::Max, s[0], s[1]);
    case Op::Shl:
    case Op::Shr:
      if (guarded(n)) return core(n->op, t, s, kGuarded);
      return shift(n->op == Op::Shl, s[0], s[1]);
    case Op::Sqrt:
    case Op::Floor:
    case Op::Ceil:
    case Op::Round:
      return fl ? core(n->op, t, s) : s[0];
    default:
      break;
  }
  if (!is_core(n))
    throw std::logic_error("legalize: op " + std::string(op_name(n->op)) + " on " +
                           std::string(name(st)) + " must be decomposed first");
  return nullptr;  // already core: rebuilt from the legalised sources
}

}  // namespace

bool is_core(NodeRef n) {
  switch (n->op) {
    case Op::Const:
    case Op::Var:
    case Op::LoadAt:
    case Op::RegAt:
    case Op::Shuffle:
    case Op::ShuffleIdx:
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::DivT:
    case Op::RemT:
    case Op::UDiv:
    case Op::URem:
    case Op::CmpLt:
    case Op::CmpLe:
    case Op::CmpEq:
    case Op::CmpNe:
    case Op::And:
    case Op::Or:
    case Op::Xor:
    case Op::Where:
    case Op::Bitcast:
    case Op::Fma:
    case Op::Cast:
      return true;
    case Op::Neg:
    case Op::Sqrt:
    case Op::Floor:
    case Op::Ceil:
    case Op::Round:
      return is_float(n->dtype);
    case Op::Shl:
    case Op::Shr:
      return n->dtype != DType::Bool;
    default:
      return false;
  }
}

NodeRef legalize(NodeRef root) {
  if (!root) return root;
  return rewrite(root, legalize_node);
}

}  // namespace codegen
