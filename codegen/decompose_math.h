// Decompositions of transcendental functions into exact primitives, so that every backend (LLVM on
// the host, CUDA, HIP) computes bit-identical results with no vendor math library.
//
// Each function takes scalar nodes (shape {}) of dtype Float32 or Float64 and returns a node DAG
// built with ir::b from these ops only: Add Sub Mul Div Sqrt Neg Abs Floor Round Cast Bitcast And
// Or Xor Shl Shr CmpLt CmpLe CmpEq CmpNe Where IsNan Max Min Fma Const. Every add and mul is
// rounded separately (backends never contract a*b+c); the only fused operation is an explicit Fma,
// which every backend renders as an IEEE fma (one rounding). Most algorithms use error-free
// transformations (TwoSum, and exact products whose error term is one Fma: 2 operations where
// the Veltkamp/Dekker product took 17, the same bits) for the extra precision they need; float32
// exp and tanh use Fma further (one-step range reduction, Horner steps, exact division residuals):
// 27 and 61 operations where the TwoSum/Dekker versions took 49 and 123 (tanh: one division, was
// two). No lookup tables: a few constants (and the words of 2/pi for the float64 trig reduction)
// are chosen with Where.
//
// Accuracy: maximum error in ulps of the exact result, measured against long double libm
// (tests/test_decompose_math.cpp with DECOMPOSE_MATH_SCALE=25: ~400k inputs per function, plus a
// strided sweep over all float32 bit patterns), with the contract bound in parentheses:
//            float32      float64
//   exp      0.78 (2)     0.75 (2)   float64: maxima are double roundings into subnormals
//   expm1    0.56 (1)     0.58 (2)
//   log      0.72 (1)     0.67 (2)   float32: every input in [1/4, 4) and the subnormals
//   log1p    0.73 (1)     0.56 (2)   float32: every input in [-0.29, -1/8] and [1/8, 2)
//   sin      0.50 (2)     0.79 (2)
//   cos      0.50 (2)     0.76 (2)
//   tan      0.50 (4)     0.90 (2)
//   tanh     0.56 (2)     0.53 (2)
//   atan     0.55 (2)     0.53 (2)
//   atan2    0.57 (3)     0.56 (2)
//   pow      0.76 (4)     0.75 (2)
//   exp2     0.75 (2)     0.74 (2)   maxima in subnormal results (exp's double rounding)
//   log2     0.50 (1)     0.50 (2)
//   sinh     0.58 (3)     0.58 (2)
//   cosh     0.58 (2)     0.58 (2)
//   asin     0.51 (2)     0.61 (2)
//   acos     0.51 (2)     0.61 (2)
//   erf      0.51 (2)     0.80 (2)   float64 maximum near |x| = 1 (polynomial and erfc tail);
//                                    float32: 0.508 over every input in [2^-14, 4)
//   erfc     0.50 (2)     0.72 (2)   float64: 0.94 at x = 0.5437 in ulp-report's 1M inputs
//   rsqrt    0.50 (1)     0.50 (1)   correctly rounded (float64: unless within ~2^-49 ulp of a tie)
// (exp2 .. erf: DECOMPOSE_MATH_SCALE=6, ~85k inputs per function; no strided float32 sweep;
// erfc, rsqrt: the default scale, ~16k / 12k inputs; tools/ulp-report's 1M: docs/numerics.md.
// float32 exp and tanh (the Fma versions): every float32 input checked against libm, exp 0.765 ulp
// for normal results and 0.776 into subnormals (one rounded reduction step, 27 operations; the
// exact reduction of 34 gave 0.586 / 0.751), tanh 0.559 ulp.)
// Range: everything holds over the whole float32 and float64 range (float64 sin/cos/tan included,
// up to DBL_MAX and down to the closest doubles to multiples of pi/2, |r| ~ 2^-60.9 at
// 6381956970095103 * 2^797; HugeArgumentsFloat64, |x| in [1e9, DBL_MAX], 2 x 88k inputs: sin 0.74,
// cos 0.74, tan 0.85 ulp). float64 sin/cos/tan reduce with Cody-Waite (22-bit
// pieces of pi/2, exact products, TwoSum-tracked) for |x| < 2^31, and with an exact Payne-Hanek
// reduction in 64-bit integer arithmetic beyond (a 192-bit window of 2/pi chosen by the exponent
// with Where trees, multiplied exactly in 32-bit limbs); both are evaluated and one is selected,
// which roughly triples the node count of float64 sin/cos/tan (~420 nodes). float32 sin/cos/tan
// reduce exactly in 64-bit integers (the significand times the 96 bits of 2/pi its exponent
// selects), so they hold up to 3.4e38: every float32 argument within 0.5003 ulp of glibc's double
// sin / cos / tan.
//
// float32 is computed natively in float32 (float-float pairs where extra precision is needed),
// except sin/cos/tan, asin/acos, erf, erfc and rsqrt, which evaluate in float64 and round once at
// the end (float32 erf: one polynomial whose coefficients are picked per element from three
// pieces, 50 operations).
// Subnormal inputs and outputs are handled exactly like normal ones (never flushed). Special values
// follow C99 Annex F (signed zeros, infinities, NaN, the full pow and atan2 tables).
#pragma once
#include "ir/node.h"

namespace codegen::math {

// One function per row of ir/ops.def whose lowering is Decomposed, named after its nx column and
// called by decompose (codegen/decompose.cpp): `ir::NodeRef <nx>(ir::NodeRef x)` for a unary
// row, `<nx>(ir::NodeRef a, ir::NodeRef b)` for a binary one (atan2(y, x), pow(x, y)). The
// numerical algorithms are defined in decompose_math.cpp; rules of a compare or two (isinf,
// isfinite) in decompose.cpp. Bool predicates take every dtype (a constant for non-floats).
#define X(name, arity, cat)
#define RUNE_MATH_Core(nx, params)
#define RUNE_MATH_Decomposed(nx, params) ir::NodeRef nx params;
#define X_UNARY(name, nx, domain, result, lowering, derivative) \
  RUNE_MATH_##lowering(nx, (ir::NodeRef x))
#define X_BINARY(name, nx, domain, result, lowering) \
  RUNE_MATH_##lowering(nx, (ir::NodeRef a, ir::NodeRef b))
#include "ir/ops.def"
#undef X
#undef X_UNARY
#undef X_BINARY
#undef RUNE_MATH_Core
#undef RUNE_MATH_Decomposed

}  // namespace codegen::math
