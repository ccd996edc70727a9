// Helpers that build scalar (shape-less) nodes for lowered kernels and decompositions.
// Operands of binary ops must share a dtype; comparisons return bool. Nodes whose operands are
// all constants are folded through ir::apply, so folding can never disagree with kernels.
#pragma once
#include "ir/node.h"

namespace ir::b {

NodeRef cf(DType t, double v);      // float constant, rounded to t
NodeRef ci(DType t, int64_t v);     // integer / bool constant, wrapped to t
NodeRef like(NodeRef x, double v);  // constant of x's dtype (float or integer)

NodeRef unary(Op op, NodeRef a);
NodeRef binary(Op op, NodeRef a, NodeRef b);
NodeRef where(NodeRef c, NodeRef a, NodeRef b);
// a * b + c rounded once (Op::Fma; float32 / float64 operands of one dtype).
NodeRef fma(NodeRef a, NodeRef b, NodeRef c);
NodeRef cast(NodeRef a, DType to);
NodeRef bitcast(NodeRef a, DType to);

inline NodeRef add(NodeRef a, NodeRef b) { return binary(Op::Add, a, b); }
inline NodeRef sub(NodeRef a, NodeRef b) { return binary(Op::Sub, a, b); }
inline NodeRef mul(NodeRef a, NodeRef b) { return binary(Op::Mul, a, b); }
inline NodeRef div(NodeRef a, NodeRef b) { return binary(Op::Div, a, b); }
inline NodeRef max(NodeRef a, NodeRef b) { return binary(Op::Max, a, b); }
inline NodeRef min(NodeRef a, NodeRef b) { return binary(Op::Min, a, b); }
inline NodeRef lt(NodeRef a, NodeRef b) { return binary(Op::CmpLt, a, b); }
inline NodeRef le(NodeRef a, NodeRef b) { return binary(Op::CmpLe, a, b); }
inline NodeRef eq(NodeRef a, NodeRef b) { return binary(Op::CmpEq, a, b); }
inline NodeRef ne(NodeRef a, NodeRef b) { return binary(Op::CmpNe, a, b); }
inline NodeRef band(NodeRef a, NodeRef b) { return binary(Op::And, a, b); }
inline NodeRef bor(NodeRef a, NodeRef b) { return binary(Op::Or, a, b); }
inline NodeRef bxor(NodeRef a, NodeRef b) { return binary(Op::Xor, a, b); }
inline NodeRef shl(NodeRef a, NodeRef b) { return binary(Op::Shl, a, b); }
inline NodeRef shr(NodeRef a, NodeRef b) { return binary(Op::Shr, a, b); }
inline NodeRef neg(NodeRef a) { return unary(Op::Neg, a); }
inline NodeRef abs(NodeRef a) { return unary(Op::Abs, a); }
inline NodeRef sqrt(NodeRef a) { return unary(Op::Sqrt, a); }
inline NodeRef floor(NodeRef a) { return unary(Op::Floor, a); }
inline NodeRef round(NodeRef a) { return unary(Op::Round, a); }
inline NodeRef lnot(NodeRef a) { return unary(Op::Not, a); }
inline NodeRef isnan(NodeRef a) { return unary(Op::IsNan, a); }

}  // namespace ir::b
