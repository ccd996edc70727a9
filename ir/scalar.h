// Scalar semantics of every elementwise primitive: the one place op meaning is defined.
// Used by constant folding, the reference evaluator and the tests. A Value holds a float
// (already rounded to its dtype) in `f`, or an integer / bool in `i`: every integer dtype is kept
// as its value in int64, except uint64, which is kept as its bit pattern (values above INT64_MAX
// are negative in `i`; compares, division and conversions read it unsigned).
#pragma once
#include <cstdint>
#include <vector>

#include "ir/dtype.h"
#include "ir/node.h"

namespace ir {

struct Value {
  DType dtype = DType::Float64;
  double f = 0;
  int64_t i = 0;

  static Value of_float(DType t, double v);  // rounds v to t
  static Value of_int(DType t, int64_t v);   // wraps v to t (bool: v != 0)
  double as_double() const {
    if (is_float(dtype)) return f;
    return dtype == DType::UInt64 ? static_cast<double>(static_cast<uint64_t>(i))
                                  : static_cast<double>(i);
  }
  uint64_t bits() const;  // the stored bit pattern, zero-extended
  static Value from_bits(DType t, uint64_t b);
};

// Rounds a double to dtype t (float32/16/bf16: correctly rounded once).
double round_to(DType t, double v);
// Converts as a Cast node does: float->int truncates toward zero and saturates (NaN gives 0),
// int->float rounds once, anything->bool is != 0.
Value cast(const Value& v, DType to);
// Applies an elementwise op (Unary/Binary/Ternary category) to operands; `out` is the node dtype.
Value apply(Op op, DType out, const std::vector<Value>& a);
// The identity of a reduction op for a dtype (+0 for sum, 1 for prod, -inf/lowest for max, ...).
Value reduce_identity(Op reduce_op, DType t);
// Combines two partial results of a reduction (sum: +, max: NaN-propagating max with -0 < +0).
Value reduce_combine(Op reduce_op, const Value& a, const Value& b);

}  // namespace ir
