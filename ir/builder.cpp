#include "ir/builder.h"

#include <stdexcept>

#include "ir/scalar.h"

namespace ir::b {

static Value const_value(NodeRef n) {
  if (is_float(n->dtype)) return Value::of_float(n->dtype, arg_float(n));
  return Value::of_int(n->dtype, arg_int(n));
}
static NodeRef from_value(const Value& v) {
  if (is_float(v.dtype)) return make(Op::Const, v.dtype, {}, {}, v.f);
  return make(Op::Const, v.dtype, {}, {}, v.i);
}
static NodeRef build(Op op, DType out, std::vector<NodeRef> src) {
  bool all_const = true;
  for (auto s : src) all_const &= s->op == Op::Const;
  if (all_const) {
    std::vector<Value> vals;
    for (auto s : src) vals.push_back(const_value(s));
    return from_value(apply(op, out, vals));
  }
  return make(op, out, {}, std::move(src));
}

NodeRef cf(DType t, double v) { return from_value(Value::of_float(t, v)); }
NodeRef ci(DType t, int64_t v) { return from_value(Value::of_int(t, v)); }
NodeRef like(NodeRef x, double v) {
  return is_float(x->dtype) ? cf(x->dtype, v) : ci(x->dtype, static_cast<int64_t>(v));
}

// The result dtype: ir/ops.def's result column (Given: the operand's, as Cast and Bitcast are
// built by cast() and bitcast()).
static DType result_of(Op op, NodeRef a) {
  return op_result(op) == OpResult::Bool ? DType::Bool : a->dtype;
}

NodeRef unary(Op op, NodeRef a) { return build(op, result_of(op, a), {a}); }
NodeRef binary(Op op, NodeRef a, NodeRef b) {
  if (a->dtype != b->dtype)
    throw std::logic_error("ir::b::binary: " + std::string(op_name(op)) + " of " +
                           std::string(name(a->dtype)) + " and " + std::string(name(b->dtype)));
  return build(op, result_of(op, a), {a, b});
}
NodeRef where(NodeRef c, NodeRef a, NodeRef b) {
  if (c->op == Op::Const) return arg_int(c) ? a : b;
  if (a == b) return a;
  return build(Op::Where, a->dtype, {c, a, b});
}
NodeRef fma(NodeRef a, NodeRef b, NodeRef c) {
  if (a->dtype != b->dtype || a->dtype != c->dtype ||
      (a->dtype != DType::Float32 && a->dtype != DType::Float64))
    throw std::logic_error("ir::b::fma: operands " + std::string(name(a->dtype)) + ", " +
                           std::string(name(b->dtype)) + ", " + std::string(name(c->dtype)) +
                           " (float32 or float64, one dtype)");
  return build(Op::Fma, a->dtype, {a, b, c});
}
NodeRef cast(NodeRef a, DType to) { return a->dtype == to ? a : build(Op::Cast, to, {a}); }
NodeRef bitcast(NodeRef a, DType to) { return a->dtype == to ? a : build(Op::Bitcast, to, {a}); }

}  // namespace ir::b
