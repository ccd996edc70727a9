// The core ops: the scalar operations a renderer spells. `legalize` rewrites a decomposed DAG
// (codegen/decompose.h) so that only these remain, each with one obvious spelling in LLVM IR and
// in C, defined for every input it can receive:
//   Const, Var, LoadAt, RegAt, Shuffle,     leaves and lowered reads (codegen/lowered.h)
//   ShuffleIdx
//   Neg                                     floats (sign flip)
//   Add, Sub, Mul                           integers wrap; floats IEEE (never bool)
//   DivT, RemT                              floats: IEEE division, fmod; integers: truncating,
//                                           never by 0, never MIN / -1 (legalize guards them)
//   UDiv, URem                              int64 index arithmetic (non-negative)
//   Sqrt, Floor, Ceil, Round                floats (Round: half to even)
//   CmpLt, CmpLe, CmpEq, CmpNe              floats: ordered, != unordered; Int32/Int64 signed;
//                                           UInt8 / Bool unsigned
//   And, Or, Xor                            integers and bool
//   Shl, Shr                                amount always in [0, bits) (Shr: logical)
//   Where, Bitcast, Fma
//   Cast                                    int <-> int (truncate / extend by the source's
//                                           signedness), int -> float, float <-> float with
//                                           16-bit types only to and from float32, float -> int
//                                           only for in-range values, bool from bool only
// Every other elementwise op is written here once in terms of these: numpy's floor division and
// remainder, NaN-propagating min and max with -0 < +0, saturating float -> int casts, shifts by
// any amount, bool arithmetic, abs, not, isnan. ir::apply gives each op's meaning, and the
// legalised form must agree with it on every input (tests/lower/test_core_ops.cpp).
#pragma once
#include "ir/node.h"

namespace codegen {

// Whether `n` is a core op (its sources may still be anything).
bool is_core(ir::NodeRef n);

// Rewrites `root` (decomposed: no transcendentals, 16-bit arithmetic at float32) into core ops.
ir::NodeRef legalize(ir::NodeRef root);

}  // namespace codegen
