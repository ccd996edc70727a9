// Decompose: rewrite a kernel's scalar DAG into primitives every backend renders exactly.
// - Transcendentals (exp, log, sin, ...) become our own polynomial decompositions
//   (codegen/decompose_math.h), so no backend calls a vendor math library and all agree.
// - float16 / bfloat16 arithmetic computes at float32 and rounds once per primitive; the only
//   16-bit operations left are loads, stores, selects, bitcasts and float32 <-> 16-bit casts.
// - Casts from float64 (and integers) to 16-bit types round once, through float32 rounded to odd.
#pragma once
#include <vector>

#include "ir/node.h"

namespace codegen {
ir::NodeRef decompose(ir::NodeRef root);
// The decomposition of one node of op `op` over sources `src` (already decomposed, float32 or
// float64; any dtype for bool predicates): codegen::math::<nx> for the rows of ir/ops.def whose
// lowering is Decomposed, nullptr for every other op.
ir::NodeRef decompose_op(ir::Op op, const std::vector<ir::NodeRef>& src);
}  // namespace codegen
