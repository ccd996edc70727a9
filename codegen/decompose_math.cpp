// Transcendental functions from exact primitives; see decompose_math.h for the contract.
//
// Conventions used throughout:
//  * p is the precision (24 / 53 bits); "ulp" is the unit in the last place of the result.
//  * A pair {hi, lo} (DD) is an unevaluated sum; two_sum / fast_two_sum / two_prod are the classic
//    error-free transformations, valid because every primitive rounds once (no contraction;
//    fma_ is the explicit Fma primitive, one rounding). two_prod's error term is one Fma; it is
//    exact while the product's error stays above the subnormal range (and the product finite),
//    which each use below respects (they were written for Veltkamp splitting, which also needed
//    operands below ~2^996 / 2^115).
//  * The builder folds all-constant subexpressions.
//  * Where evaluates both arms; unselected arms may hold garbage (even NaN) but never trap.
//  * Polynomial coefficients are minimax fits (relative error) computed with mpmath for this file;
//    each table notes its interval and the fitted error with rounded coefficients.
#include "codegen/decompose_math.h"

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/builder.h"

namespace codegen::math {
namespace {

using ir::DType;
using ir::NodeRef;
namespace b = ir::b;

// ---------------------------------------------------------------------------------------------
// Expression sugar over ir::b. E wraps a node; arithmetic with a double makes a constant of the
// other operand's dtype.

struct E {
  NodeRef n;
  E(NodeRef v) : n(v) {}  // NOLINT(google-explicit-constructor)
  operator NodeRef() const { return n; }
  DType dt() const { return n->dtype; }
};

E lit(DType t, double v) { return b::cf(t, v); }
E operator+(E a, E c) { return b::add(a, c); }
E operator-(E a, E c) { return b::sub(a, c); }
E operator*(E a, E c) { return b::mul(a, c); }
E operator/(E a, E c) { return b::div(a, c); }
E operator-(E a) { return b::neg(a); }
E operator+(E a, double c) { return a + lit(a.dt(), c); }
E operator-(E a, double c) { return a - lit(a.dt(), c); }
E operator*(E a, double c) { return a * lit(a.dt(), c); }
E operator+(double c, E a) { return lit(a.dt(), c) + a; }
E operator-(double c, E a) { return lit(a.dt(), c) - a; }

E eq(E a, E c) { return b::eq(a, c); }
E ne(E a, E c) { return b::ne(a, c); }
E lt(E a, double c) { return b::lt(a, lit(a.dt(), c)); }
E lt(double c, E a) { return b::lt(lit(a.dt(), c), a); }
E le(E a, double c) { return b::le(a, lit(a.dt(), c)); }
E le(double c, E a) { return b::le(lit(a.dt(), c), a); }
E eq(E a, double c) { return b::eq(a, lit(a.dt(), c)); }
E land(E a, E c) { return b::band(a, c); }
E lor(E a, E c) { return b::bor(a, c); }
E lnot(E a) { return b::bxor(a, b::ci(DType::Bool, 1)); }

E shr_(E a, E c) { return b::shr(a, c); }
E shl_(E a, E c) { return b::shl(a, c); }
E band_(E a, E c) { return b::band(a, c); }
E bor_(E a, E c) { return b::bor(a, c); }
E bxor_(E a, E c) { return b::bxor(a, c); }
E max_(E a, E c) { return b::max(a, c); }
E min_(E a, E c) { return b::min(a, c); }
E cast_(E a, DType t) { return b::cast(a, t); }
E bitcast_(E a, DType t) { return b::bitcast(a, t); }
E isnan_(E a) { return b::isnan(a); }
E where(E c, E a, E e) { return b::where(c, a, e); }
E where(E c, double a, E e) { return b::where(c, lit(e.dt(), a), e); }
E where(E c, double a, double e, DType t) { return b::where(c, lit(t, a), lit(t, e)); }
E vmin(E a, double c) { return min_(a, lit(a.dt(), c)); }
E vmax(E a, double c) { return max_(a, lit(a.dt(), c)); }
E vabs(E a) { return b::abs(a); }
E vfloor(E a) { return b::floor(a); }
E vround(E a) { return b::round(a); }
E fma_(E a, E c, E d) { return b::fma(a, c, d); }
E fma_(E a, double c, E d) { return b::fma(a, lit(a.dt(), c), d); }
E fma_(E a, E c, double d) { return b::fma(a, c, lit(a.dt(), d)); }

// ---------------------------------------------------------------------------------------------
// Per-format facts.

struct Fmt {
  DType ft, it;  // the float dtype and the integer dtype of its bit pattern
  int p;         // precision in bits (24 / 53)
  int mant;      // stored significand bits (23 / 52)
  int bias;      // exponent bias (127 / 1023)
  double split;  // Veltkamp constant 2^ceil(p/2) + 1
  bool d;        // float64
  int64_t sign_mask() const { return d ? INT64_MIN : INT32_MIN; }
  int64_t mant_mask() const { return (int64_t{1} << mant) - 1; }
};

Fmt fmt_of(NodeRef x) {
  if (x->dtype == DType::Float64)
    return {DType::Float64, DType::Int64, 53, 52, 1023, 134217729.0, true};
  if (x->dtype == DType::Float32) return {DType::Float32, DType::Int32, 24, 23, 127, 4097.0, false};
  throw std::logic_error("codegen::math: expected a float32 or float64 operand, got " +
                         std::string(ir::name(x->dtype)));
}
void check_scalar(NodeRef x) {
  if (!x->shape.empty()) throw std::logic_error("codegen::math: expected a scalar node");
}

E fc(const Fmt& f, double v) { return b::cf(f.ft, v); }
E ic(const Fmt& f, int64_t v) { return b::ci(f.it, v); }
E bits(const Fmt& f, E x) { return bitcast_(x, f.it); }
E from_bits(const Fmt& f, E i) { return bitcast_(i, f.ft); }
// 2^k for an integer-valued float k within the normal exponent range.
E pow2(const Fmt& f, E k) {
  E ki = cast_(k, f.it);
  return from_bits(f, shl_(ki + ic(f, f.bias), ic(f, f.mant)));
}
E sign_bit(const Fmt& f, E x) { return b::lt(bits(f, x), ic(f, 0)); }
// |mag| with the sign bit of s; mag must have a clear sign bit (or be NaN).
E copysign(const Fmt& f, E mag, E s) {
  return from_bits(f, bor_(bits(f, mag), band_(bits(f, s), ic(f, f.sign_mask()))));
}
E inf(const Fmt& f) { return fc(f, __builtin_inf()); }
E nan(const Fmt& f) { return fc(f, __builtin_nan("")); }

// Horner evaluation of c[0] + c[1] x + ... with separately rounded ops.
E horner(E x, const double* c, size_t n) {
  E acc = lit(x.dt(), c[n - 1]);
  for (size_t i = n - 1; i-- > 0;) acc = acc * x + c[i];
  return acc;
}
template <size_t N>
E horner(E x, const double (&c)[N]) {
  return horner(x, c, N);
}
// The same with each step a fused multiply-add (one rounding per step).
template <size_t N>
E horner_fma(E x, const double (&c)[N]) {
  E acc = lit(x.dt(), c[N - 1]);
  for (size_t i = N - 1; i-- > 0;) acc = fma_(acc, x, c[i]);
  return acc;
}
// The float64 or float32 coefficient set, by format.
template <size_t N, size_t M>
E horner(const Fmt& f, E x, const double (&c64)[N], const double (&c32)[M]) {
  return f.d ? horner(x, c64, N) : horner(x, c32, M);
}

// ---------------------------------------------------------------------------------------------
// Error-free transformations.

struct DD {
  E hi, lo;
};
DD two_sum(E a, E c) {
  E s = a + c;
  E bb = s - a;
  return {s, (a - (s - bb)) + (c - bb)};
}
// Requires exponent(a) >= exponent(c) (or a == 0).
DD fast_two_sum(E a, E c) {
  E s = a + c;
  return {s, c - (s - a)};
}
// a * c = p + e exactly: e = fma(a, c, -p) is the exact rounding error of p (2 operations; the
// Veltkamp/Dekker product this replaced took 17 and gave the same e wherever it was exact: operands
// below ~2^996 / 2^115 and partial products above the subnormal range, which every use below
// still respects, so no result changed a bit).
DD two_prod(const Fmt&, E a, E c) {
  E p = a * c;
  return {p, fma_(a, c, -p)};
}

// ---------------------------------------------------------------------------------------------
// Constants (hex floats; float32 variants are exactly representable in float32).

// ln2 = L1 + L2 + L3. L1 has 42 (float64) / 16 (float32) significant bits so k * L1 is exact for
// |k| < 2^11 / 2^8, which covers every k the exp and log reductions produce.
constexpr double kLn2_64[] = {0x1.62e42fefa3800p-1, 0x1.ef35793c76730p-45, 0x1.f97b57a079a19p-103};
constexpr double kLn2_32[] = {0x1.62e4p-1, 0x1.7f7d1cp-20, 0x1.ef357ap-45};
constexpr double kInvLn2 = 0x1.71547652b82fep+0;

// e^r - 1 - r - r^2/2 = r^3 P(r) on |r| <= ln2/2 (+0.05%).
// float64: degree 9, rel err 2^-53.0; float32: degree 4, rel err 2^-23.6.
constexpr double kExpm1P64[] = {0x1.5555555555556p-3,  0x1.5555555555554p-5,  0x1.11111111109b2p-7,
                                0x1.6c16c16c18130p-10, 0x1.a01a01a7c5ed8p-13, 0x1.a01a0198a3a60p-16,
                                0x1.71de0da5bcf4ap-19, 0x1.27e502c8c5c37p-22, 0x1.af38c121f9762p-26,
                                0x1.1f2a337e3aed4p-29};
constexpr double kExpm1P32[] = {0x1.555556p-3, 0x1.55551ap-5, 0x1.11112cp-7, 0x1.6d1118p-10,
                                0x1.a08924p-13};

// 2 atanh(s) = 2s + s z R1(z), z = s^2 <= ((sqrt2-1)/(sqrt2+1))^2 (+0.2%).
// float64: degree 6, rel err 2^-50.9; float32: degree 2, rel err 2^-21.7. (s z R1 is at most 1% of
// the result, so these cost < 0.05 ulp.)
constexpr double kLogR1_64[] = {0x1.5555555555558p-1, 0x1.99999999951c8p-2, 0x1.2492492e0fa30p-2,
                                0x1.c71c62bfa8a07p-3, 0x1.7462bf3d3bebdp-3, 0x1.39fd0682baa4fp-3,
                                0x1.2b68c4ee586d6p-3};
constexpr double kLogR1_32[] = {0x1.55555cp-1, 0x1.997c06p-2, 0x1.2eecfap-2};

// Double-double log for pow: 2 atanh(s) = 2s + s^3 (2/3 + 2z/5 + z^2 Q2(z)), same interval.
// float64: degree 6, rel err 2^-50.0; float32: degree 2, rel err 2^-21.0 (z^2 Q2 is < 4e-4 of Q).
constexpr double kLogQ2_64[] = {0x1.2492492492497p-2, 0x1.c71c71c7152d1p-3, 0x1.745d175530fe9p-3,
                                0x1.3b13a50dab6efp-3, 0x1.1115a6848be18p-3, 0x1.e01e2e82b8dd8p-4,
                                0x1.d9d9b3c9d7581p-4};
constexpr double kLogQ2_32[] = {0x1.249252p-2, 0x1.c6f372p-3, 0x1.82b814p-3};
// 2/3 and 2/5 as hi + lo.
constexpr double kTwoThirds64[] = {0x1.5555555555555p-1, 0x1.5555555555555p-55};
constexpr double kTwoThirds32[] = {0x1.555556p-1, -0x1.555556p-26};
constexpr double kTwoFifths64[] = {0x1.999999999999ap-2, -0x1.999999999999ap-56};
constexpr double kTwoFifths32[] = {0x1.99999ap-2, -0x1.99999ap-28};

// sin r = r + r z S(z), cos r = 1 - z/2 + z^2 C(z), z = r^2 <= (pi/4 (1+2e-4))^2.
// float64: S degree 6 (2^-54.0), C degree 5 (2^-54.0). The float32 path evaluates in float64 with
// S, C of degree 3 (2^-32.4, 2^-34.0), far below float32 rounding.
constexpr double kSinS64[] = {-0x1.5555555555555p-3, 0x1.1111111111110p-7,   -0x1.a01a01a019927p-13,
                              0x1.71de3a545eab4p-19, -0x1.ae64540fb4917p-26, 0x1.61217cc8dc00ep-33,
                              -0x1.ab16942e73567p-41};
constexpr double kCosC64[] = {0x1.5555555555555p-5,  -0x1.6c16c16c16961p-10,
                              0x1.a01a019f4d768p-16, -0x1.27e4fa16691d2p-22,
                              0x1.1eeb678746dc4p-29, -0x1.907cb5f356524p-37};
constexpr double kSinS32[] = {-0x1.555555545a4b8p-3, 0x1.11110de82275ap-7, -0x1.a0139fb8523bfp-13,
                              0x1.6dbbd79ccdfd2p-19};
constexpr double kCosC32[] = {0x1.5555555501f75p-5, -0x1.6c16bf51ac948p-10, 0x1.a015c0d55bf9ep-16,
                              -0x1.2523457bda98ap-22};

// atan t = t + t z A(z), z = t^2 <= 0.2503^2.
// float64: degree 9, rel err 2^-53.9; float32: degree 3, rel err 2^-23.9 (the polynomial term is
// < 2% of the result).
constexpr double kAtanA64[] = {-0x1.5555555555555p-2, 0x1.9999999999993p-3,  -0x1.24924924916d7p-3,
                               0x1.c71c71c5bc62bp-4,  -0x1.745d16b65c88ep-4, 0x1.3b138f963f8aap-4,
                               -0x1.110c3f68230bbp-4, 0x1.e105eab8a8b77p-5,  -0x1.a32c5d53e0997p-5,
                               0x1.26f265d050ba5p-5};
constexpr double kAtanA32[] = {-0x1.555554p-2, 0x1.9996f8p-3, -0x1.23bdb8p-3, 0x1.9bafdcp-4};

// hi + lo of pi/2, pi, and the atan reduction centres atan(1/2), pi/4, atan(2).
constexpr double kPio2_64[] = {0x1.921fb54442d18p+0, 0x1.1a62633145c07p-54};
constexpr double kPio2_32[] = {0x1.921fb6p+0, -0x1.777a5cp-25};
constexpr double kPi_64[] = {0x1.921fb54442d18p+1, 0x1.1a62633145c07p-53};
constexpr double kPi_32[] = {0x1.921fb6p+1, -0x1.777a5cp-24};
constexpr double kPio4_64[] = {0x1.921fb54442d18p-1, 0x1.1a62633145c07p-55};
constexpr double kPio4_32[] = {0x1.921fb6p-1, -0x1.777a5cp-26};
constexpr double kAtanHalf64[] = {0x1.dac670561bb4fp-2, 0x1.a2b7f222f65e2p-56};
constexpr double kAtanHalf32[] = {0x1.dac67p-2, 0x1.586ed4p-28};
constexpr double kAtanTwo64[] = {0x1.1b6e192ebbe44p+0, 0x1.b1b466a88828ep-54};
constexpr double kAtanTwo32[] = {0x1.1b6e1ap+0, -0x1.a28838p-25};

// pi/2 in 22-bit pieces for the float64 Cody-Waite reduction: k * P1..P4 is exact for k < 2^31,
// P5 is the rounded remainder (pi/2 - sum < 2^-149).
constexpr double kPio2Cw[] = {0x1.921fb8p+0, -0x1.5dde98p-23, 0x1.846988p-48, 0x1.8cc518p-72,
                              -0x1.fc8f8cbb5bf6cp-97};
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
// 2/pi as 64-bit words for the float64 Payne-Hanek reduction: word i holds the bits of weight
// 2^-(64i-64) .. 2^-(64i-1), i.e. floor(2/pi 2^(64i-1)) mod 2^64 (word 0, the integer bits, is 0).
// 1216 bits: enough for a 192-bit window starting at any float64 exponent.
constexpr uint64_t kTwoOverPiWords[] = {
    0x0000000000000000ull, 0x517cc1b727220a94ull, 0xfe13abe8fa9a6ee0ull, 0x6db14acc9e21c820ull,
    0xff28b1d5ef5de2b0ull, 0xdb92371d2126e970ull, 0x0324977504e8c90eull, 0x7f0ef58e5894d39full,
    0x74411afa975da242ull, 0x74ce38135a2fbf20ull, 0x9cc8eb1cc1a99cfaull, 0x4e422fc5defc941dull,
    0x8ffc4bffef02cc07ull, 0xf79788c5ad05368full, 0xb69b3f6793e584dbull, 0xa7a31fb34f2ff516ull,
    0xba93dd63f5f2f8bdull, 0x9e839cfbc5294975ull, 0x35fdafd88fc6ae84ull, 0x2b0198237e3db5d5ull};

// ---------------------------------------------------------------------------------------------
// exp, expm1, tanh.

// x = k ln2 + r, |r| <= ln2/2 (+tiny). Returns k (integer-valued float) and r as rh + rl with
// |error| < 2^-84 (float64) / 2^-33 (float32) absolute. xl is an optional low part of x.
struct ExpRed {
  E k, rh, rl;
};
ExpRed exp_reduce(const Fmt& f, E x, const E* xl) {
  const double* L = f.d ? kLn2_64 : kLn2_32;
  E k = vround(x * kInvLn2);
  E a = x - k * L[0];  // exact: k * L1 is exact and within a factor 2 of x (Sterbenz)
  DD r = two_sum(a, -(k * L[1]));
  E rl = r.lo - k * L[2];
  if (!xl) return {k, r.hi, rl};
  // xl may be as large as ulp(x)/2 (2^-44 for x near 709): fold it into rh so that rl is again
  // below ulp(rh), as the first-order treatment of rl in exp_core requires.
  DD rr = fast_two_sum(r.hi, rl + *xl);
  return {k, rr.hi, rr.lo};
}

// exp(xh + xl) for any xh (clamped here: beyond +-750 / +-110 the result is inf / 0 anyway).
// exp(r) = 1 + r + (r^2/2 + r^3 P(r) + rl (1 + r)), with 1 + r exact as a pair: the final sum
// rounds once, and the tail (< 0.06) adds < 0.05 ulp, so the error is about 0.55 ulp. The scale
// 2^k is applied in two exact factors; the last multiply rounds once, also into subnormals.
// exp(xh + xl) before its last rounding: (hi + lo) s1 s2, with |lo| < 0.07 |hi| and the pair
// within ~2^-(p+3) of e^r (the tail's own roundings); s1, s2 are the two normal powers of 2.
struct ExpParts {
  E hi, lo, s1, s2;
};
ExpParts exp_parts(const Fmt& f, E xh, const E* xl) {
  double lim = f.d ? 750.0 : 110.0;
  E x = vmin(vmax(xh, -lim), lim);                                  // Max/Min propagate NaN
  E xl_kept = xl ? where(eq(x, xh), *xl, fc(f, 0.0)) : fc(f, 0.0);  // drop xl once clamped
  ExpRed r = exp_reduce(f, x, xl ? &xl_kept : nullptr);
  E z = r.rh * r.rh;
  E tail = z * (0.5 + r.rh * horner(f, r.rh, kExpm1P64, kExpm1P32)) + (r.rl + r.rl * r.rh);
  DD one = fast_two_sum(fc(f, 1.0), r.rh);
  E k1 = vfloor(r.k * 0.5);
  E k2 = r.k - k1;  // |k1|, |k2| <= 542 / 80: both powers are normal
  return {one.hi, one.lo + tail, pow2(f, k1), pow2(f, k2)};
}
E exp_core(const Fmt& f, E xh, const E* xl) {
  ExpParts e = exp_parts(f, xh, xl);
  return ((e.hi + e.lo) * e.s1) * e.s2;
}

// expm1(x) = (hi + lo) * rest. With e^r - 1 = p (a pair: r + r^2/2 exact, then the tail),
// expm1 = 2^k (1 + p) - 1 = (2^k - 1) + 2^k p, summed with TwoSum. 2^k - 1 is exact for
// |k| <= p (precision); beyond, it is kept as the pair (2^k, -1) or (-1, 2^k). k is capped at
// p + 8 and the rest of the scale applied afterwards (the -1 is then off by 2^-(p+8) relative).
// Clamping x to [-45, 710] / [-20, 89] gives -1 and inf correctly at the ends.
struct Expm1Parts {
  E hi, lo, rest;
};
Expm1Parts expm1_parts(const Fmt& f, E x0) {
  E x = f.d ? vmin(vmax(x0, -45.0), 710.0) : vmin(vmax(x0, -20.0), 89.0);
  ExpRed r = exp_reduce(f, x, nullptr);
  DD z = two_prod(f, r.rh, r.rh);
  DD ph = fast_two_sum(r.rh, z.hi * 0.5);  // |r| >= r^2/2
  E poly = (r.rh * z.hi) * horner(f, r.rh, kExpm1P64, kExpm1P32);
  E pl = ph.lo + (z.lo * 0.5 + (poly + (r.rl + r.rl * r.rh)));
  E kc = vmin(r.k, f.p + 8.0);
  E s = pow2(f, kc);
  E big = lt(static_cast<double>(f.p), kc);
  E small = lt(kc, -static_cast<double>(f.p));
  E ahi = where(big, s, where(small, fc(f, -1.0), s - 1.0));
  E alo = where(big, fc(f, -1.0), where(small, s, fc(f, 0.0)));
  DD h = two_sum(ahi, s * ph.hi);
  DD e = fast_two_sum(h.hi, h.lo + (alo + s * pl));  // normalized: tanh divides by it
  return {e.hi, e.lo, pow2(f, r.k - kc)};
}

// ---------------------------------------------------------------------------------------------
// float32 exp and tanh with fused multiply-adds.
//
// Fma (a * b + c rounded once) is an IEEE fma on every backend (llvm.fma on the host, __fmaf_rn /
// fmaf on CUDA / HIP / the C renderer), so these give the same bits everywhere, like the
// separately rounded algorithms above, in about half their operations: the range reduction needs
// no split of ln2 into short pieces, the polynomial is Horner with one rounding per step, and
// tanh divides once. (sinh, cosh, expm1, pow and exp2 keep exp_parts / expm1_parts, which take a
// low part of the argument; float64 keeps them too.)

// x = k ln2 + r + rl for a float32 x with |x| <= 110 (or NaN):
//  * kf = fma(x, 1/ln2, 1.5 2^23) holds round(x/ln2) in its low significand bits (the sum lies in
//    [2^23, 2^24), where floats are the integers); k = kf - 1.5 2^23 exactly, and the bit pattern
//    of kf minus that of 1.5 2^23 is k as an int32 (ki, for the scale).
//  * rh = fma(k, -L1, x) with L1 = ln2 rounded to float32 is exact: for k != 0, |x| > ln2/2, so x
//    and k L1 are multiples of 2^-25 and 2^-24, and their difference is a multiple of 2^-25 below
//    1/2 (|x/ln2 - k| <= 1/2 + 2^-17): 24 bits.
//  * c = k * -L2, L2 = ln2 - L1 rounded (|c| < 2^-21.6, its error < 2^-45 absolute, as is
//    k (ln2 - L1 - L2)); r = rh + c rounded and rl = c - (r - rh) its rounding error (fast
//    two-sum; where |rh| < |c| both are tiny and rl's own error is below 2^-45).
// tail = e^(r + rl) - 1 - r - r^2/2 = r^3 P(r) + rl (1 + r), to ~2^-33 absolute (P: kExpm1P32,
// degree 4, relative 2^-23.6 of a term below 0.0072; rl r^2 / 2 < 2^-30 is left out).
struct Exp32 {
  E ki, r, z, tail;  // z = r * r rounded
};
constexpr double kMagicRound32 = 0x1.8p23;
constexpr double kLn2Hi32 = 0x1.62e430p-1;    // ln2 rounded to float32
constexpr double kLn2Lo32 = -0x1.05c610p-29;  // ln2 - kLn2Hi32 rounded to float32
Exp32 exp32_parts(const Fmt& f, E x) {
  E kf = fma_(x, fc(f, kInvLn2), kMagicRound32);
  E k = kf - kMagicRound32;
  E rh = fma_(k, fc(f, -kLn2Hi32), x);
  E c = k * -kLn2Lo32;
  E r = rh + c;
  E rl = c - (r - rh);
  E z = r * r;
  E tail = fma_(z * r, horner_fma(r, kExpm1P32), fma_(rl, r, rl));
  E ki = bits(f, kf) - bits(f, fc(f, kMagicRound32));
  return {ki, r, z, tail};
}

// exp(x) for a float32 x in 27 operations (OnlyExactPrimitives' count, bitcasts included; was
// 34), within 0.78 ulp over every float32 input:
//  * x is clamped to +-110 (Max/Min keep NaN), kf = fma(x, 1/ln2, M) with M = 1.5 2^23 + 254
//    holds k + 254 = round(x/ln2) + 254 in its low significand bits (the sum lies in [2^23, 2^24),
//    where floats are the integers; exp32_parts above), so k = kf - M exactly and the bit pattern
//    of kf minus that of 1.5 2^23 is the biased u = k + 254 > 0 for the scale, in one subtraction;
//  * rh = fma(k, -L1, x) is exact (exp32_parts) and r = fma(k, -L2, rh) rounds once: within
//    ulp(r)/2 <= 2^-26 of x - k ln2 (|r| <= ln2/2), the error that dominates (up to ~0.2 ulp of
//    the result); keeping that rounding error as a low part (2 more operations and one more add)
//    gave 0.65 ulp;
//  * e^r = hi + (lo + r^2 q(r)) with hi + lo = 1 + r exactly (fast two-sum) and
//    q = 1/2 + r P(r) = (e^r - 1 - r)/r^2 (P: kExpm1P32, Horner with fma): the terms after hi are
//    below 0.065 with error ~2^-28, and the sum rounds once. (Horner to the end, e^r =
//    fma(r, fma(r, q, 1), 1), takes 20 operations but reaches 0.87 ulp: the rounding of the inner
//    fma costs up to 0.17 ulp more.)
//  * 2^k is applied as two powers of 2 (k1 = floor(k/2), k2 = k - k1 from u, a logical shift
//    halving it): exact in normal results, one more rounding into subnormals, inf / 0 beyond.
// Every float32 input checked against double exp: at most 0.765 ulp for normal results and 0.776
// into subnormals (tests/test_decompose_math.cpp samples it, tests/numerics/test_float32_sweep.cpp
// takes every 4099th bit pattern).
constexpr double kMagicExp32 = 0x1.8p23 + 254;
E exp32(const Fmt& f, E x0) {
  E x = vmin(vmax(x0, -110.0), 110.0);
  E kf = fma_(x, fc(f, kInvLn2), kMagicExp32);
  E k = kf - kMagicExp32;
  E rh = fma_(k, fc(f, -kLn2Hi32), x);
  E r = fma_(k, fc(f, -kLn2Lo32), rh);
  E q = fma_(horner_fma(r, kExpm1P32), r, 0.5);
  E hi = r + 1.0;
  E lo = (1.0 - hi) + r;
  E y = hi + fma_(r * r, q, lo);
  E u = bits(f, kf) - bits(f, fc(f, kMagicRound32));
  E e1 = shr_(u, ic(f, 1));
  E s1 = from_bits(f, shl_(e1, ic(f, f.mant))), s2 = from_bits(f, shl_(u - e1, ic(f, f.mant)));
  return (y * s1) * s2;
}

// tanh |x| = em / (em + 2), em = expm1(2|x|) = (2^k - 1) + 2^k p with p = e^r - 1 as a pair:
//  * p = r + r^2/2 + tail, summed with two fast two-sums (|r| >= r^2/2 >= |tail|) and the
//    rounding error of r^2 (an fma) so that the pair is within ~2^-30 relative;
//  * em = (2^k - 1) + 2^k p by a fast two-sum (2^k - 1 >= 2^k |p| for k >= 1; k = 0 adds to 0),
//    2^k - 1 exact for k <= 24 (above, tanh rounds to 1 and the error is irrelevant);
//  * D = em + 2 as a pair (two-sum ordered by max / min), one division y = 1 / D_hi, q0 = em y,
//    and one Newton correction from the exact residual em_hi - q0 D_hi (an fma) plus the low
//    parts: q = q0 + (em - q0 D) y, whose error is ~2^-24 of a correction of ~1 ulp.
// The quotient then rounds once: within 0.56 ulp over every float32 (exhaustive check). |x| is
// capped at 9.5 (tanh rounds to 1 from 9.01), and below 2^-13 tanh x rounds to x.
E tanh32(const Fmt& f, E x) {
  E ax = vabs(x);
  E u = vmin(ax, 9.5) * 2.0;
  Exp32 e = exp32_parts(f, u);  // k in [0, 28]
  E s = from_bits(f, shl_(e.ki + ic(f, f.bias), ic(f, f.mant)));
  E hz = e.z * 0.5;
  E zl = fma_(e.r, e.r, -e.z);  // r^2 - z exactly
  DD p1 = fast_two_sum(e.r, hz);
  DD p2 = fast_two_sum(p1.hi, e.tail);
  E pl = p1.lo + fma_(zl, 0.5, p2.lo);
  E a = s - 1.0;
  DD h = fast_two_sum(a, s * p2.hi);
  E hl = h.lo + s * pl;
  E two = fc(f, 2.0);
  E dh = h.hi + 2.0;
  E dl = (min_(h.hi, two) - (dh - max_(h.hi, two))) + hl;
  E y = fc(f, 1.0) / dh;
  E q0 = h.hi * y;
  E nq = -q0;
  E rho = fma_(nq, dl, fma_(nq, dh, h.hi) + hl);
  E t = fma_(rho, y, q0);
  t = where(lt(ax, 0x1p-13), ax, t);
  return copysign(f, t, x);
}

// ---------------------------------------------------------------------------------------------
// log, log1p, and the double-double log for pow.

// x = 2^k m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact by Sterbenz). x must be positive and
// finite (other inputs give garbage that the callers replace). Subnormals are scaled by 2^p.
struct LogRed {
  E k, f;
};
LogRed log_reduce(const Fmt& f, E x) {
  E sub = lt(x, f.d ? 0x1p-1022 : 0x1p-126);
  E xs = where(sub, x * (f.d ? 0x1p53 : 0x1p24), x);
  int64_t one = int64_t{f.bias} << f.mant;
  int64_t sqh = f.d ? 0x3fe6a09e667f3bcdLL : 0x3f3504f3LL;  // bits of sqrt(1/2)
  // Adding (one - sqh) carries into the exponent exactly when the significand is >= sqrt(2).
  E ix = bits(f, xs) + ic(f, one - sqh);
  E ke = shr_(ix, ic(f, f.mant)) - ic(f, f.bias);
  E m = from_bits(f, band_(ix, ic(f, f.mant_mask())) + ic(f, sqh));
  E k = cast_(ke, f.ft) - where(sub, static_cast<double>(f.p), fc(f, 0.0));
  return {k, m - 1.0};
}

// log(x) = H + lo, to about 0.6 ulp once summed (the plain-precision part costs ~0.1 ulp).
// With s = f/(2+f): log(1+f) = 2s + s z R1(z), and 2s = f - f^2/2 + f^2 s/2 (an identity), so
// log(1+f) = f - f^2/2 + (f^2 s/2 + s z R1(z)) where f - f^2/2 is kept exactly as a pair (f^2 by
// two_prod) and the rest (< 5% of the result) only needs plain precision, as does s.
// Then log x = k L1 + that (exact pair) + k L2.
DD log_parts(const Fmt& f, E x) {
  const double* L = f.d ? kLn2_64 : kLn2_32;
  LogRed r = log_reduce(f, x);
  DD ff = two_prod(f, r.f, r.f);
  E hf = ff.hi * 0.5, hfl = ff.lo * 0.5;
  E s = r.f / (r.f + 2.0);
  E z = s * s;
  E sr = s * (z * horner(f, z, kLogR1_64, kLogR1_32));
  DD h = fast_two_sum(r.f, -hf);  // |f| >= f^2/2
  E lo = ((sr + hf * s) - hfl) + h.lo;
  DD H = fast_two_sum(r.k * L[0], h.hi);  // k L1 exact; |k L1| >= 0.69 > |h| unless k = 0
  return {H.hi, (lo + H.lo) + (r.k * L[1] + r.k * L[2])};
}

// float32 log(x) = H + lo with fused multiply-adds, for log and log1p: the same algebra as
// log_parts in fewer operations. With h0 = -f/2 (exact):
//  * hi = fma(h0, f, f) = f - f^2/2 rounded once, d = f - hi exactly (Sterbenz: hi is within a
//    factor 2 of f for |f| <= 0.42) and lo = fma(h0, f, d) = (f - f^2/2) - hi, whose own rounding
//    is 2^-24 of a value below ulp(hi)/2: the pair hi + lo is f - f^2/2 to ~2^-48 relative;
//  * the plain-precision rest f^2 s/2 + s z R1(z) (< 5% of the result) takes d = f^2/2 + lo for
//    f^2/2 (one fma; lo < 2^-24 of it) and R1 by Horner with fma;
//  * log x = k L1 + hi (fast two-sum, k L1 exact and >= 0.69 > |hi| unless k = 0) + the rest +
//    k L2 as one fma (k L3 < 2^-36 of the result is left out).
DD log_parts32(const Fmt& f, E x) {
  LogRed r = log_reduce(f, x);
  E h0 = r.f * -0.5;
  E hi = fma_(h0, r.f, r.f);
  E d = r.f - hi;
  E lo = fma_(h0, r.f, d);
  E s = r.f / (r.f + 2.0);
  E z = s * s;
  E rest = fma_(d, s, s * (z * horner_fma(z, kLogR1_32)));
  DD H = fast_two_sum(r.k * kLn2_32[0], hi);
  return {H.hi, fma_(r.k, fc(f, kLn2_32[1]), H.lo + (lo + rest))};
}

// log(x) as a normalized pair with relative error ~2^-(p+12), for pow: |y log x| may reach 745,
// so log x must be much more accurate than the result. 2 atanh(s) is summed as
// 2s (pair, s = f/(2+f) with its division residual) + s^3 Q(z) with s^3 and the leading part of
// Q = 2/3 + 2z/5 + z^2 Q2(z) as pairs; only z^2 Q2 (< 4e-4 of Q, Q < 1% of the sum) is plain.
DD log1pf_dd(const Fmt& f, E fm);
DD log_dd(const Fmt& f, E x) {
  const double* L = f.d ? kLn2_64 : kLn2_32;
  LogRed r = log_reduce(f, x);
  DD M = log1pf_dd(f, r.f);
  DD H = fast_two_sum(r.k * L[0], M.hi);
  E Hl = H.lo + (M.lo + (r.k * L[1] + r.k * L[2]));
  return fast_two_sum(H.hi, Hl);
}

// log(1 + fm) for the reduced fm of log_reduce, as an unnormalized pair (hi, lo) with
// |lo| < ~ulp(hi) and relative error ~2^-(p+12); the core of log_dd and log2.
DD log1pf_dd(const Fmt& f, E fm) {
  const double* q0 = f.d ? kTwoThirds64 : kTwoThirds32;
  const double* q1 = f.d ? kTwoFifths64 : kTwoFifths32;
  DD d = fast_two_sum(fc(f, 2.0), fm);  // 2 + f exactly
  E sh = fm / d.hi;
  DD sp = two_prod(f, sh, d.hi);
  E sl = (((fm - sp.hi) - sp.lo) - sh * d.lo) / d.hi;  // fm - sp.hi is exact (Sterbenz)
  DD z = two_prod(f, sh, sh);
  E zl = z.lo + (sh * sl) * 2.0;
  DD s3 = two_prod(f, z.hi, sh);
  E s3l = s3.lo + (z.hi * sl + zl * sh);
  DD a1 = two_prod(f, z.hi, fc(f, q1[0]));
  E a1l = a1.lo + (zl * q1[0] + z.hi * q1[1]);
  E t2 = (z.hi * z.hi) * horner(f, z.hi, kLogQ2_64, kLogQ2_32);
  DD Q = fast_two_sum(fc(f, q0[0]), a1.hi);
  E Ql = Q.lo + ((a1l + q0[1]) + t2);
  DD T = two_prod(f, s3.hi, Q.hi);
  E Tl = T.lo + (s3.hi * Ql + s3l * Q.hi);
  DD M = fast_two_sum(sh * 2.0, T.hi);
  E Ml = M.lo + (sl * 2.0 + Tl);
  return {M.hi, Ml};
}

// ---------------------------------------------------------------------------------------------
// Trigonometric reduction and kernels.

// x = k pi/2 + r, q = k mod 4 (Int32/Int64 of the format), r as a float64 pair.
struct TrigRed {
  E rh, rl, q;
};

// float64 Cody-Waite: k * P1..P4 exact for k < 2^31, each step tracked with TwoSum, so r is exact
// up to the k * P5 rounding and the truncation of pi/2 (~2^-117 absolute for |x| < 3.37e9, while
// the closest doubles to multiples of pi/2 in that range have |r| ~ 2^-60.5). trig() uses it for
// |x| < 2^31 and reduce_ph (below) beyond.
TrigRed reduce_cw(const Fmt& f, E x) {
  E k = vround(x * kTwoOverPi);
  E a = x - k * kPio2Cw[0];  // exact (Sterbenz) for k < 2^31
  DD s1 = two_sum(a, -(k * kPio2Cw[1]));
  DD s2 = two_sum(s1.hi, -(k * kPio2Cw[2]));
  DD s3 = two_sum(s2.hi, -(k * kPio2Cw[3]));
  E lo = ((s1.lo + s2.lo) + s3.lo) - k * kPio2Cw[4];
  DD r = two_sum(s3.hi, lo);
  E q = cast_(k - vfloor(k * 0.25) * 4.0, f.it);
  // Beyond the accurate range r is garbage; clamping keeps sin/cos in [-1, 1] and tan finite
  // there (and never changes an in-range r: |rh| <= pi/4 + tiny, |rl| <= ulp(rh)).
  return {vmin(vmax(r.hi, -0.8), 0.8), vmin(vmax(r.lo, -0x1p-50), 0x1p-50), q};
}

// float64 Payne-Hanek, in 64-bit integer arithmetic (Int64 Add/Mul wrap mod 2^64, Shr is logical,
// so everything below is exact modular arithmetic on bit patterns). Used for |x| >= 2^31.
// |x| = m 2^e with m < 2^53 an integer and e = ex - 1075 (ex the biased exponent). With b_j the
// bits of 2/pi (2/pi = sum_{j>=1} b_j 2^-j), the bits j <= e - 2 contribute multiples of 4 to
// x 2/pi, so only the 192-bit window T = bits e-1 .. e+190 is needed:
//   y = |x| 2/pi mod 4 = m T 2^-190 (mod 4) + err,  0 <= err < 2^53 2^e 2^-(e+190) = 2^-137.
// The window is cut from the table by Where chains on the word index (the IR has no gather) and a
// shift; P = m T mod 2^192 is formed exactly from 32-bit limbs (m = m1 2^32 + m0, m1 < 2^21, so
// every limb product fits in 64 bits and every column sum stays below 2^35). Then k = round(y)
// mod 4 is read off the top bits and the signed fraction f = y - k, |f| <= 1/2, from the rest: its
// magnitude is the 189 low bits of P (ones' complement when f < 0, off by 2^-190), converted to a
// float64 pair from three exact 53-bit pieces (bits below 2^-160 dropped). So f is known to
// < 2^-136 absolute, i.e. 2^-74 relative even for the closest double to a multiple of pi/2 over
// the whole range (|r| ~ 2^-61), and r = f pi/2 as a pair adds ~2^-104 relative.
TrigRed reduce_ph(const Fmt& f, E x) {
  const DType I = DType::Int64;
  auto c = [&](int64_t v) { return E(b::ci(I, v)); };
  const int64_t M32 = 0xffffffffLL;
  E xb = bits(f, x);
  E ex = band_(shr_(xb, c(52)), c(0x7ff));
  E m = bor_(band_(xb, c(f.mant_mask())), c(int64_t{1} << 52));
  // Bit position of b_{e-1} in the table (bit 0 = the top bit of word 0): p0 = e - 1 + 64. Clamped
  // so that the (unselected) small-|x| lanes index in range too; inf gives ex = 2047, p0 = 1035.
  E p0 = max_(ex, c(1054)) - c(1012);
  E wi = shr_(p0, c(6));  // 0 .. 16
  E sh = band_(p0, c(63));
  constexpr int kWords = sizeof(kTwoOverPiWords) / sizeof(kTwoOverPiWords[0]);
  NodeRef words[kWords];
  for (int i = 0; i < kWords; ++i) words[i] = c(static_cast<int64_t>(kTwoOverPiWords[i]));
  // w[k] = words[wi + k], k = 0..3, by binary trees on the bits of wi that share their subtrees:
  // node(L, o) is the function h -> words[h 2^L + o] of h = wi >> L (o collects the low bits of wi
  // plus k), needed only for the h that some (wi, k) reach; it is a constant when that leaves a
  // single word, else a Where on bit L of wi between node(L+1, o + 2^L) and node(L+1, o).
  constexpr int kMaxWi = kWords - 4;  // 16
  std::map<std::pair<int, int>, NodeRef> memo;
  std::function<NodeRef(int, int)> node = [&](int L, int o) -> NodeRef {
    auto key = std::pair{L, o};
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    bool even = false, odd = false;
    std::set<int> idx;
    for (int v = 0; v <= kMaxWi; ++v)
      for (int k = 0; k < 4; ++k)
        if ((v & ((1 << L) - 1)) + k == o) {
          idx.insert(((v >> L) << L) + o);
          ((v >> L) & 1 ? odd : even) = true;
        }
    NodeRef r;
    if (idx.size() == 1) {
      r = words[*idx.begin()];
    } else if (!odd || !even) {
      r = node(L + 1, odd ? o + (1 << L) : o);
    } else {
      E bit = ne(band_(wi, c(int64_t{1} << L)), c(0));
      r = where(bit, node(L + 1, o + (1 << L)), node(L + 1, o));
    }
    return memo[key] = r;
  };
  E w[4] = {node(0, 0), node(0, 1), node(0, 2), node(0, 3)};
  // T_k = the 64 window bits from word wi + k on; (w >> 1) >> (63 - sh) avoids a shift by 64.
  E t[3] = {x, x, x};
  for (int k = 0; k < 3; ++k) t[k] = bor_(shl_(w[k], sh), shr_(shr_(w[k + 1], c(1)), c(63) - sh));
  E a[6] = {shr_(t[0], c(32)),   band_(t[0], c(M32)), shr_(t[1], c(32)),
            band_(t[1], c(M32)), shr_(t[2], c(32)),   band_(t[2], c(M32))};  // a0 most significant
  E m0 = band_(m, c(M32)), m1 = shr_(m, c(32));
  // Column sums of 32-bit digits of m T (column j has weight 2^(32j)); products of weight >= 2^192
  // are dropped, and column 5 is only needed mod 2^32 (so its top products need no split).
  E col[6] = {x, x, x, x, x, x};
  for (int j = 0; j < 6; ++j) col[j] = c(0);
  auto add_prod = [&](E u, int ia, int weight) {  // u * a[ia] at column `weight`
    E p = u * a[ia];
    if (weight == 5) {
      col[5] = col[5] + p;
      return;
    }
    col[weight] = col[weight] + band_(p, c(M32));
    col[weight + 1] = col[weight + 1] + shr_(p, c(32));
  };
  for (int i = 0; i < 6; ++i) add_prod(m0, i, 5 - i);
  for (int i = 1; i < 6; ++i) add_prod(m1, i, 6 - i);
  E d[6] = {x, x, x, x, x, x};
  E carry = c(0);
  for (int j = 0; j < 6; ++j) {
    E sj = j == 0 ? col[0] : col[j] + carry;
    d[j] = band_(sj, c(M32));
    carry = shr_(sj, c(32));
  }
  // P = sum d_j 2^(32j); y = P 2^-190. Bit 189 is the sign of f = y - round(y).
  E sgn = band_(shr_(d[5], c(29)), c(1));
  E q = band_(shr_(d[5], c(30)) + sgn, c(3));
  E mask = band_(c(0) - sgn, c(M32));
  E e[6] = {x, x, x, x, x, x};
  for (int j = 0; j < 5; ++j) e[j] = bxor_(d[j], mask);
  e[5] = band_(bxor_(d[5], mask), c((int64_t{1} << 29) - 1));
  // |f| 2^190 ~ the 189-bit e; pieces: bits 136..188, 83..135, 30..82.
  E pa = bor_(shl_(e[5], c(24)), shr_(e[4], c(8)));
  E pb = bor_(bor_(shl_(band_(e[4], c(0xff)), c(45)), shl_(e[3], c(13))), shr_(e[2], c(19)));
  E pc = bor_(bor_(shl_(band_(e[2], c(0x7ffff)), c(34)), shl_(e[1], c(2))), shr_(e[0], c(30)));
  E fa = cast_(pa, f.ft) * 0x1p-54, fb = cast_(pb, f.ft) * 0x1p-107;
  E fcc = cast_(pc, f.ft) * 0x1p-160;
  DD s1 = fast_two_sum(fa, fb);  // fa = 0 or fa > fb
  DD fr = fast_two_sum(s1.hi, s1.lo + fcc);
  DD p = two_prod(f, fr.hi, fc(f, kPio2_64[0]));
  DD r = fast_two_sum(p.hi, p.lo + (fr.hi * kPio2_64[1] + fr.lo * kPio2_64[0]));
  E sx = sign_bit(f, x);
  E neg = bxor_(sx, eq(sgn, c(1)));
  E qs = where(sx, band_(c(0) - q, c(3)), q);
  return {where(neg, -r.hi, r.hi), where(neg, -r.lo, r.lo), qs};
}

// float32 x, reduced exactly over the whole float32 range in 64-bit integer arithmetic (the
// float32 counterpart of reduce_ph, after glibc's sinf): |x| = M 2^s with M < 2^24 an integer
// and s = e - 150 (e the biased exponent). The bits b_j of 2/pi with j <= s - 2 contribute
// multiples of 4 to |x| 2/pi, so
//   y = |x| 2/pi mod 4 = M G 2^-94 (mod 4) + err,  0 <= err < M 2^-94 < 2^-70,
// with G the 96-bit window b_{s-1} .. b_{s+94} of kTwoOverPiWords (cut by a shift from the three
// words at index p0 >> 6, p0 = s + 63: Where on two compares, words 0 .. 4). M G is formed from
// three limb products M g_i < 2^56; Q = floor(M G 2^-32) mod 2^64 is exact (the floor drops the
// low 32 bits of M g_0), so y = Q 2^-62 + (< 2^-62): Q's top two bits are
// round(y) mod 4 once 2^61 is added, and the rest, as a signed 62-bit fraction f = y - k, gives
// r = f pi/2 to ~2^-61.3 absolute plus 2^-52 relative (the int64 -> float64 conversion and the
// multiply round). The closest float32 to a multiple of pi/2, 16367173 * 2^72, has |r| = 2^-29.2
// (an exhaustive search over every float32 >= pi/4), so r's relative error stays below 2^-32.
// |x| < pi/4 takes r = |x|, q = 0 (exact; the window would cut tiny arguments' bits). sin is 70
// operations with it, 116 with the float64 Payne-Hanek on 7 chunks of 2/pi it replaced. There is
// no Cody-Waite fast path for small |x|: the IR has no branch, so selecting between two reductions
// would evaluate both on every element.
// Returns r (float64) for |x| and q as an Int64; the caller restores the sign of x.
TrigRed reduce_f32(E ax32) {
  const DType I = DType::Int64;
  auto c = [&](int64_t v) { return E(b::ci(I, v)); };
  const int64_t M32 = 0xffffffffLL;
  E xb = cast_(bitcast_(ax32, DType::Int32), I);  // ax32 >= 0 (or NaN with a clear sign bit)
  E m = bor_(band_(xb, c(0x7fffff)), c(0x800000));
  // p0 = s - 1 + 64 = e - 87, the table position of b_{s-1}; e >= 126 whenever |x| >= pi/4.
  // Below, e is clamped to 125: the window then gives y = M 2^-25 2/pi < 1/3, so k = 0 for every
  // |x| < 1/2 (its r is replaced by |x|), and the shifts stay in range.
  E p0 = max_(shr_(xb, c(23)), c(125)) - c(87);  // 38 .. 168 (inf and NaN: 168)
  E sh = band_(p0, c(63));
  E w1st = b::le(c(64), p0), w2nd = b::le(c(128), p0);  // word index p0 >> 6 is 0, 1 or 2
  auto word = [&](int k) {
    auto w = [&](int i) { return c(static_cast<int64_t>(kTwoOverPiWords[i + k])); };
    return where(w2nd, w(2), where(w1st, w(1), w(0)));
  };
  E w0 = word(0), w1 = word(1), w2 = word(2);
  // The window's top 64 bits and the 32 below; (w >> 1) >> (63 - sh) avoids a shift by 64.
  E hi = bor_(shl_(w0, sh), shr_(shr_(w1, c(1)), c(63) - sh));
  E lo = shr_(bor_(shl_(w1, sh), shr_(shr_(w2, c(1)), c(63) - sh)), c(32));
  E a = m * lo, bm = m * band_(hi, c(M32)), cm = m * shr_(hi, c(32));
  E q64 = (shl_(cm, c(32)) + bm) + shr_(a, c(32));  // floor(M G / 2^32) mod 2^64
  E k = shr_(q64 + c(int64_t{1} << 61), c(62));     // round(y) mod 4
  E fr = q64 - shl_(k, c(62));                      // y - round(y), times 2^62, in [-2^61, 2^61)
  E r = cast_(fr, DType::Float64) * (kPio2_64[0] * 0x1p-62);
  // Below pi/4 (rounded up) r = |x|, exactly. Adding ax - ax (+0, or NaN for inf and NaN) makes
  // r NaN for those, so the result is NaN without a select at the end.
  E ax = cast_(ax32, DType::Float64);
  return {where(lt(ax32, 0x1.921fb6p-1), ax, r) + (ax - ax), nullptr, k};
}

// sin and cos of rh + rl (|r| <= pi/4 + tiny) as pairs, float64.
// sin = rh + (rh z S(z) + rl (1 - z/2)): the tail is < 10% of the result, its rounding errors
// give up to ~0.3 ulp on top of the final rounding. cos = w + ((1 - w) - z/2 + ...) with
// w = 1 - z/2 and z = rh^2 exact as a pair. Measured: sin 0.8, cos 0.75, tan (pair division) 0.9.
DD sin_dd(E rh, E rl) {
  E z = rh * rh;
  E tail = (rh * z) * horner(z, kSinS64) + (rl - (rl * z) * 0.5);
  return fast_two_sum(rh, tail);  // normalized: tan divides by it
}
DD cos_dd(const Fmt& f, E rh, E rl) {
  DD z = two_prod(f, rh, rh);
  E hz = z.hi * 0.5;
  E w = 1.0 - hz;
  E lo = (((1.0 - w) - hz) - z.lo * 0.5) + ((z.hi * z.hi) * horner(z.hi, kCosC64) - rh * rl);
  return fast_two_sum(w, lo);
}

E odd(const Fmt& f, E q) { return ne(band_(q, ic(f, 1)), b::ci(q.dt(), 0)); }
E bit2(const Fmt& f, E q) { return ne(band_(q, ic(f, 2)), b::ci(q.dt(), 0)); }

enum class Trig { Sin, Cos, Tan };

E trig(E x, Trig which) {
  check_scalar(x);
  Fmt f = fmt_of(x);
  E res = x;
  if (f.d) {
    TrigRed rc = reduce_cw(f, x), rp = reduce_ph(f, x);
    E big = le(0x1p31, vabs(x));  // false for NaN: it propagates through the fast path
    TrigRed r{where(big, rp.rh, rc.rh), where(big, rp.rl, rc.rl), where(big, rp.q, rc.q)};
    DD s = sin_dd(r.rh, r.rl);
    DD c = cos_dd(f, r.rh, r.rl);
    E qodd = odd(f, r.q);
    if (which == Trig::Tan) {
      // tan = s / c or -c / s, as a pair division: q + (n - q d) / d with q d exact.
      DD n{where(qodd, c.hi, s.hi), where(qodd, c.lo, s.lo)};
      DD d{where(qodd, s.hi, c.hi), where(qodd, s.lo, c.lo)};
      E qh = n.hi / d.hi;
      DD p = two_prod(f, qh, d.hi);
      E t = qh + ((((n.hi - p.hi) - p.lo) + (n.lo - qh * d.lo)) / d.hi);
      res = where(qodd, -t, t);
    } else {
      E sv = s.hi + s.lo, cv = c.hi + c.lo;
      if (which == Trig::Sin) {
        E v = where(qodd, cv, sv);
        res = where(bit2(f, r.q), -v, v);
      } else {
        E v = where(qodd, sv, cv);
        res = where(bit2(f, r.q + ic(f, 1)), -v, v);
      }
    }
  } else {
    // float32: sin / cos of the reduced |x| in float64 (fma Horner steps), the quadrant and the
    // sign of x applied, rounded once. sin(-0) = -0 and tan(-0) = -0 come out of r = |x| = 0 and
    // the sign; inf and NaN give r = NaN.
    TrigRed r = reduce_f32(vabs(x));
    E z = r.rh * r.rh;
    E sv = fma_(r.rh * z, horner_fma(z, kSinS32), r.rh);
    E cv = fma_(z * z, horner_fma(z, kCosC32), fma_(z, -0.5, lit(z.dt(), 1.0)));
    auto qbit = [&](E q, int64_t bit) {
      return ne(band_(q, b::ci(DType::Int64, bit)), b::ci(DType::Int64, 0));
    };
    E qodd = qbit(r.q, 1), neg = sign_bit(f, x);
    E v = x;
    if (which == Trig::Tan) {
      E t = where(qodd, cv, sv) / where(qodd, sv, cv);
      v = where(bxor_(qodd, neg), -t, t);
    } else if (which == Trig::Sin) {
      E u = where(qodd, cv, sv);
      v = where(bxor_(qbit(r.q, 2), neg), -u, u);
    } else {
      E u = where(qodd, sv, cv);
      v = where(qbit(r.q + b::ci(DType::Int64, 1), 2), -u, u);
    }
    return cast_(v, DType::Float32);  // the only rounding to float32
  }
  if (which != Trig::Cos) res = where(eq(x, 0.0), x, res);  // sin(-0) = tan(-0) = -0
  return where(eq(vabs(x), inf(f)), nan(f), res);
}

// ---------------------------------------------------------------------------------------------
// atan.

// atan(xh + xl) for xh >= 0 (xl is a tiny correction, e.g. a division residual) as
// bh + th + tail. Reduction without tables: atan x = atan c + atan((x - c)/(1 + c x)) with the
// centre c in {0, 1/2, 1, 2} chosen by thresholds 0.25, 0.7208, 1.3874, 4.2361 (balanced so that
// |t| <= 0.25), and atan x = pi/2 + atan(-1/x) above. x - c is exact for these ranges and the
// quotient t is computed as a pair (th, tl) from its exact residual, so the reduction adds no
// error even when atan c and atan t nearly cancel.
struct AtanParts {
  E bh, th, tail;
};
AtanParts atan_core(const Fmt& f, E xh, E xl) {
  const double* half = f.d ? kAtanHalf64 : kAtanHalf32;
  const double* pio4 = f.d ? kPio4_64 : kPio4_32;
  const double* two = f.d ? kAtanTwo64 : kAtanTwo32;
  const double* pio2 = f.d ? kPio2_64 : kPio2_32;
  E c1 = le(0.25, xh), c2 = le(0.7207592200561265, xh), c3 = le(1.387425886722793, xh);
  E c4 = le(4.23606797749979, xh);
  E cv = where(c3, fc(f, 2.0), where(c2, fc(f, 1.0), where(c1, 0.5, 0.0, f.ft)));
  E num_h = where(c4, fc(f, -1.0), xh - cv);
  E num_l = where(c4, fc(f, 0.0), xl);
  DD d = two_sum(fc(f, 1.0), cv * xh);  // c x is exact
  E den_h = where(c4, xh, d.hi);
  E den_l = where(c4, xl, d.lo + cv * xl);
  E th = num_h / den_h;
  DD p = two_prod(f, th, den_h);
  E tl = (((num_h - p.hi) - p.lo) + (num_l - th * den_l)) / den_h;
  tl = where(lt(xh, f.d ? 0x1p900 : 0x1p100), tl, fc(f, 0.0));  // huge x: split would overflow
  E z = th * th;
  E poly = (th * z) * horner(f, z, kAtanA64, kAtanA32);
  E bh = where(c4, fc(f, pio2[0]),
               where(c3, fc(f, two[0]), where(c2, fc(f, pio4[0]), where(c1, half[0], 0.0, f.ft))));
  E bl = where(c4, fc(f, pio2[1]),
               where(c3, fc(f, two[1]), where(c2, fc(f, pio4[1]), where(c1, half[1], 0.0, f.ft))));
  // atan(th + tl) = atan(th) + tl / (1 + th^2)
  E tail = bl + ((tl - tl * z) + poly);
  return {bh, th, tail};
}

// ---------------------------------------------------------------------------------------------
// exp2, log2, sinh, cosh, asin, acos, erf: constants and kernels.

// ln2 and 1/ln2 as hi + lo (hi rounded to the format, lo the rounded remainder).
constexpr double kLn2Pair64[] = {0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56};
constexpr double kLn2Pair32[] = {0x1.62e430p-1, -0x1.05c610p-29};
constexpr double kInvLn2Pair64[] = {0x1.71547652b82fep+0, 0x1.777d0ffda0d24p-56};
constexpr double kInvLn2Pair32[] = {0x1.715476p+0, 0x1.4ae0c0p-26};

// asin v = v + v z P(z), z = v^2 in [0, 1/4] (|v| <= 1/2).
// float64: degree 12, rel err 2^-53.6 (v z P is < 9% of every result it enters, so < 0.03 ulp).
// float32 (evaluated in float64): degree 5, rel err 2^-25.5 (< 2^-29 of the result).
constexpr double kAsinP64[] = {0x1.5555555555556p-3, 0x1.3333333332e84p-4, 0x1.6db6db6e38805p-5,
                               0x1.f1c71c19d533fp-6, 0x1.6e8bb25de247fp-6, 0x1.1c4d286b454ffp-6,
                               0x1.c9d08bccc0d7fp-7, 0x1.7817d8979738fp-7, 0x1.529e19ae7c34bp-7,
                               0x1.62a4a41e7ae0cp-8, 0x1.1f1b14f1d24d0p-6, -0x1.eccfae654bee5p-7,
                               0x1.d9390bbb2b9a5p-6};
constexpr double kAsinP32[] = {0x1.555554dd866dap-3, 0x1.33343bac7f03cp-4, 0x1.6d5902affe9f8p-5,
                               0x1.fdcb1d413897ep-6, 0x1.17dda3166f889p-6, 0x1.14e3256e555f3p-5};

// erf x = x + x R(z), z = x^2 in [0, 1] (|x| < 1); R = erf(x)/x - 1 in [-0.16, 0.13]. Fitted as
// G = 1 + R (relative, so R's absolute error is G's: float64 degree 11, 2^-56.9); R's constant term
// is the rounded c0 - 1 of the exact fit.
constexpr double kErfR64[] = {
    0x1.06eba8214db68p-3,  -0x1.812746b0379bdp-2,  0x1.ce2f21a040d16p-4,  -0x1.b82ce311fa93ep-6,
    0x1.565bccf92b304p-8,  -0x1.c02db03dd73fap-11, 0x1.f9a2baa902c77p-14, -0x1.f4ca4d6f840aap-17,
    0x1.b97fd3dc97f35p-20, -0x1.5c07270490b58p-23, 0x1.d71b0fb1de544p-27, -0x1.abae4afa423abp-31};
// float64 erf on [1/2, 1]: erf(3/4 + t) = E0 + t Q(t), |t| <= 1/4, degree 14 (rel err 2^-60.6;
// Q's leading coefficient is kErfT64[1]); E0 = erf(3/4) as hi + lo. Here x + x R(z) would lose
// ~0.7 ulp: near z = 1 R's Horner sums are larger than R and z = x^2 itself rounds.
constexpr double kErfT64[] = {
    0x1.6c1c9759d0e5fp-1,   0x1.492e42d78d2c5p-1,   -0x1.edc5644353c2bp-2, 0x1.b6e8591f65e4dp-6,
    0x1.349b5eaa14e79p-3,   -0x1.b42a1890775dap-5,  -0x1.b84779687fea1p-6, 0x1.2e0afad7e6e67p-6,
    0x1.2db335d68b7b8p-9,   -0x1.04103d1aa276ap-8,  0x1.861e65364fcabp-13, 0x1.4710d8733cc9fp-11,
    -0x1.bccb26f169101p-14, -0x1.36bad490bb3efp-14, 0x1.614edaed2c6e5p-16};
constexpr double kErfT64Lo = 0x1.b1432f2cbc455p-55;  // erf(3/4) - kErfT64[0]
// erfc x = exp(-x^2) h(x) for x in [1, 6]: h = erfc(x) e^(x^2) (0.43 .. 0.09) as polynomials in
// t = x - centre on four pieces (degree 12, 12, 13, 12; relative error 2^-55.8, 2^-51.2, 2^-49.8,
// 2^-39.4). The needed accuracy falls with erfc: an error e in h costs e erfc(x) of erf ~ 1, and
// erfc(x) is 0.16, 0.034, 0.0015, 7.4e-7 at the piece starts, so each piece costs < 0.1 ulp.
constexpr double kErfHStart[] = {1.0, 1.5, 2.25, 3.5};
constexpr double kErfHCentre[] = {1.25, 1.875, 2.875, 4.75};
constexpr double kErfH[4][14] = {
    {0x1.78a692138767ap-2, -0x1.abaacdbfa8afbp-3, 0x1.b56f45eef7e73p-4, -0x1.9b635ac629999p-5,
     0x1.68a25a663e978p-6, -0x1.299636cceabc9p-7, 0x1.d1b695ac7d752p-9, -0x1.5b8bda320f1fbp-10,
     0x1.f0fe76b3eb723p-12, -0x1.55b26b22ca677p-13, 0x1.c565642391633p-15, -0x1.289925d30887ep-16,
     0x1.6fbe026456f31p-18, 0.0},
    {0x1.13e5743b60480p-2, -0x1.e36580c7f7247p-4, 0x1.8a6efeed23520p-5, -0x1.2ef92f6f42eafp-6,
     0x1.b99589d3f1da6p-8, -0x1.33237be52b7a0p-9, 0x1.99b60e32b050fp-11, -0x1.070e51116ff55p-12,
     0x1.4631eaff66d39p-14, -0x1.87739457f4296p-16, 0x1.c8316e41c6e21p-18, -0x1.0b760aa6e1d95p-19,
     0x1.25b81a998c606p-21, 0.0},
    {0x1.7d0a5e9dd5717p-3, -0x1.dfc0205709b0ep-5, 0x1.21c23afa305adp-6, -0x1.512f92fca8de7p-8,
     0x1.7b404aad9dd0fp-10, -0x1.9d6f222891cd4p-12, 0x1.b5d782c8d2571p-14, -0x1.c35c61553f2c8p-16,
     0x1.c5b85e62e119ap-18, -0x1.bd6115ecba9c0p-20, 0x1.aa9c9a7e9291ep-22, -0x1.91166d9786b1cp-24,
     0x1.8c552cc9dd072p-26, -0x1.63b0ceb7e1fc8p-28},
    {0x1.dc603a3e77c94p-4, -0x1.81149bc42d29cp-6, 0x1.317c144f9bff4p-8, -0x1.dc1af9876d7ccp-11,
     0x1.6cc10c6b32a61p-13, -0x1.12f1214195b54p-15, 0x1.9818703683b3ap-18, -0x1.2a78fbf37faa4p-20,
     0x1.ae392b729c506p-23, -0x1.2ec8903f254a4p-25, 0x1.a955d20b623f2p-28, -0x1.58a2032f15666p-30,
     0x1.d386abbff1719p-33, 0.0}};

// float32 erf, evaluated in float64 (erf32): one degree-10 Horner scheme whose coefficients are
// picked per lane from three pieces (tools/math/erf32_fit.py; Chebyshev fits, near minimax):
//   |x| < 1.25:           erf x = x G(z), z = x^2, G = erf(x)/x (relative error 2^-44.2)
//   1.25 <= |x| < 2.375:  erf(1.8125 + t)                       (absolute error 2^-33.5)
//   2.375 <= |x| < 3.92:  erf(3.125 + t)                        (absolute error 2^-31.0)
// with the rounded coefficients. erf >= 0.92 on the last two pieces, so every fit error is below
// 2^-30 relative (< 2^-6 float32 ulp); the float64 Horner steps add ~2^-50. From 3.92 on
// (erfc < 2^-25.0) erf rounds to 1 in float32.
constexpr double kErf32Split[] = {1.25, 2.375};
constexpr double kErf32Centre[] = {1.8125, 3.125};
constexpr double kErf32One = 3.92;
constexpr double kErf32P[3][11] = {
    {0x1.20dd750429ab2p+0, -0x1.812746b01b456p-2, 0x1.ce2f2194e454ap-4, -0x1.b82ce14a47a16p-6,
     0x1.565ba846a78a7p-8, -0x1.c02a3b44de74bp-11, 0x1.f96e9785aa85dp-14, -0x1.f2cf442696755p-17,
     0x1.ad0fa8a34a758p-20, -0x1.2b3185652cb65p-23, 0x1.f8eb5130e0958p-28},
    {0x1.fab0dd89d1309p-1, 0x1.5a08e8cac1b0ep-5, -0x1.3998121a4e24cp-4, 0x1.4140e1bf37404p-4,
     -0x1.7535e174debb2p-5, 0x1.37547eb626d9ep-7, 0x1.a427eb6eb6971p-8, -0x1.6e3a63913ea93p-8,
     0x1.2b2da18d9967ep-10, 0x1.527df1d247ab7p-11, -0x1.9396c30f4271dp-12},
    {0x1.fffeb3ecaa374p-1, 0x1.0f98de0c03ea5p-14, -0x1.a86c280bf9999p-13, 0x1.a3a03fa6492b4p-12,
     -0x1.2444b4456aa03p-11, 0x1.2da816b774b6cp-11, -0x1.daac5576d492dp-12, 0x1.1df94f9f1eeb5p-12,
     -0x1.d3b536c0b99abp-14, 0x1.f148f534c34ecp-17, 0x1.ac7ff12d65cafp-18},
};

// erfc x = exp(-x^2) h(x) for x in [1/2, 27.5]: h = erfc(x) e^(x^2) (0.62 .. 0.02) on nine pieces,
// each h(centre + t) = H0 + H1 t + t^2 Q(t), degree 17, H0 and H1 as hi + lo
// (tools/math/erfc_fit.py; relative error with the rounded coefficients 2^-58.6 or less on every
// piece). Each centre is a short binary fraction within a factor 2 of its piece, so t = x - centre
// is exact (Sterbenz). Fit: relative error per piece, rounded coefficients: 2^-60.5, 2^-58.9,
// 2^-60.3, 2^-59.4, 2^-59.1, 2^-59.8, 2^-58.6, 2^-60.0, 2^-59.8
constexpr double kErfcHStart[] = {0.5, 1.25, 2.25, 3.5, 5.0, 7.0, 10.0, 14.5, 20.5};
constexpr double kErfcHCentre[] = {0.875, 1.75, 2.875, 4.25, 6.0, 8.5, 12.25, 17.5, 24.0};
constexpr double kErfcHLo[][2] = {{-0x1.5590ddc0f49fbp-56, -0x1.c3039cab8de1bp-58},
                                  {0x1.3b5ba17f990c2p-57, -0x1.e720a6444503dp-57},
                                  {0x1.1eae5fad477c7p-57, 0x1.ce5fb33dcd006p-60},
                                  {-0x1.dc8aecbbb5947p-57, -0x1.14a48a34c3f60p-62},
                                  {0x1.caae5e936343cp-58, 0x1.3ca0969a77104p-62},
                                  {0x1.58b4c10a2f908p-62, -0x1.bacc08a3fc2f8p-65},
                                  {-0x1.3b2091f315438p-59, 0x1.2abfef547016ap-63},
                                  {-0x1.f394d32258fbep-61, 0x1.057e3b6192e84p-65},
                                  {-0x1.89f4895551841p-67, -0x1.04c7dff96656cp-66}};
constexpr double kErfcH[9][18] = {
    {0x1.db747ee409ac5p-2, -0x1.4369f60195edcp-2, 0x1.80ef8f454cf88p-3, -0x1.9d5868de0b581p-4,
     0x1.9831c2c8500a7p-5, -0x1.779dd2a3da277p-6, 0x1.452648d624025p-7, -0x1.0ab3832b96510p-8,
     0x1.a0ef7eeeab513p-10, -0x1.37fe70bfd1c6cp-11, 0x1.c0b376b0a9bf3p-13, -0x1.370a6dd2a9f1dp-14,
     0x1.a0d5ef343dceap-16, -0x1.0e99dc86375bap-17, 0x1.54a0f68c5416ap-19, -0x1.a19b5f77470b4p-21,
     0x1.071172ec61dfap-22, -0x1.31abac7e3e9e4p-24},
    {0x1.23cfc2f1dc7e0p-2, -0x1.0c3d538446447p-3, 0x1.c8d0cef0f810cp-5, -0x1.6cb52fe48945fp-6,
     0x1.13648a11fffb1p-7, -0x1.8bf716a8ead21p-9, 0x1.106bd5c029bc2p-10, -0x1.6838884a9e195p-12,
     0x1.cb4c689f00d2fp-14, -0x1.1b2912dd10849p-15, 0x1.5273e77bc06a9p-17, -0x1.88fb243c8f0f5p-19,
     0x1.bc1521c8c555ep-21, -0x1.e922a6cd3a9ddp-23, 0x1.06548af82bc53p-24, -0x1.13b827ec6025ap-26,
     0x1.30bff4612947fp-28, -0x1.321bde03e5f21p-30},
    {0x1.7d0a5e9dd5710p-3, -0x1.dfc0205709b2cp-5, 0x1.21c23afa33c46p-6, -0x1.512f92fca6d77p-8,
     0x1.7b404aa4deebap-10, -0x1.9d6f22275e36bp-12, 0x1.b5d78b2d883b3p-14, -0x1.c35c651d8a144p-16,
     0x1.c5b48a2ba51cdp-18, -0x1.bd5eb1a482c65p-20, 0x1.ab817455253dfp-22, -0x1.91bec16c17834p-24,
     0x1.720643f94c119p-26, -0x1.4e4e5a362eefbp-28, 0x1.27b55454beaa5p-30, -0x1.01ca985b31a3cp-32,
     0x1.de9d3e9b9292ap-35, -0x1.92afc5873f12cp-37},
    {0x1.08e62ce8c89adp-3, -0x1.da39533524970p-6, 0x1.9ef71691a5520p-8, -0x1.6373226edf541p-10,
     0x1.2a660fdec051dp-12, -0x1.eb88e0e8f3c8fp-15, 0x1.8d8e59752c07ap-17, -0x1.3c077638549e2p-19,
     0x1.ee335eeb48982p-22, -0x1.7c568d5378ce7p-24, 0x1.204ade524cd8dp-26, -0x1.aeb414c13ef62p-29,
     0x1.3d3fb3b63f837p-31, -0x1.cd083bb0817ddp-34, 0x1.49c22d04741a5p-36, -0x1.d30fc8c123c0dp-39,
     0x1.6102cf8786f6dp-41, -0x1.e7283e33bfa34p-44},
    {0x1.7c0348489d721p-4, -0x1.ed7f66d9d09fep-7, 0x1.3c7764a81f462p-9, -0x1.9106a7cd79e3bp-12,
     0x1.f64cd9c07b8ffp-15, -0x1.370d064177721p-17, 0x1.7d0e03ed7f6f8p-20, -0x1.cde4ceccb0021p-23,
     0x1.151346be62d22p-25, -0x1.491bb0ecefe5cp-28, 0x1.83200429cfa83p-31, -0x1.c312b1fa8d472p-34,
     0x1.0464a881349d6p-36, -0x1.29eaed63d6956p-39, 0x1.50b6d87dbe979p-42, -0x1.7aa39af3a0e1ap-45,
     0x1.cd7b02a9de82bp-48, -0x1.fda4b821b5815p-51},
    {0x1.0e078051f491dp-4, -0x1.f57cad15dbe3cp-8, 0x1.cea22f2be068cp-11, -0x1.a80f2934e8b57p-14,
     0x1.82426c752598bp-17, -0x1.5da898d82453fp-20, 0x1.3a9b8149e53c1p-23, -0x1.19623f7d9f210p-26,
     0x1.f463bb570cb98p-30, -0x1.ba5cef10e9fe6p-33, 0x1.84d936ad8379dp-36, -0x1.53e7182ce45dep-39,
     0x1.2788c4e85100bp-42, -0x1.ff0d6f9948093p-46, 0x1.b4dade083d401p-49, -0x1.75c84c7420d3ap-52,
     0x1.6689146dc3831p-55, -0x1.2f3f17c506b24p-58},
    {0x1.780c6345b4de9p-5, -0x1.e7f2059678dd5p-9, 0x1.3b8b7f402a8e4p-12, -0x1.96ce3ebd3b97dp-16,
     0x1.0565cdd23cb92p-19, -0x1.4edf1d76808ebp-23, 0x1.aba9167e4563cp-27, -0x1.103c9ad74eed1p-30,
     0x1.59892dd78cacbp-34, -0x1.b53d7f17fa51cp-38, 0x1.13cee40aa4491p-41, -0x1.5aeba924036f9p-45,
     0x1.b332ef204ae0ap-49, -0x1.10181a851fa85p-52, 0x1.503d0acd40801p-56, -0x1.a20f770b60fe7p-60,
     0x1.2bbc413610715p-63, -0x1.723b7d88b3fbcp-67},
    {0x1.07ad15536656dp-5, -0x1.e096c3c71f7f0p-10, 0x1.b54485023ab61p-14, -0x1.8d36ddca2fb5fp-18,
     0x1.6841368b445d8p-22, -0x1.463740bf23fedp-26, 0x1.26ed3e10b6423p-30, -0x1.0a383ecddbec8p-34,
     0x1.dfdcb0de38d2ap-39, -0x1.afcda2af76635p-43, 0x1.83f43c40cbe03p-47, -0x1.5c056ab36894ep-51,
     0x1.37c8e170896edp-55, -0x1.16d5c457786ffp-59, 0x1.ee4a43eb29a35p-64, -0x1.b8bb80f75aa12p-68,
     0x1.c04d0bd980f51p-72, -0x1.8e5ac9c4ef03ap-76},
    {0x1.80d1e88d3c620p-6, -0x1.001a68f1b5449p-10, 0x1.54964558f64cdp-15, -0x1.c48d27f6c7d0ap-20,
     0x1.2c675fe0706f5p-24, -0x1.8e79b81906918p-29, 0x1.080e891cdf564p-33, -0x1.5daa87b9547a8p-38,
     0x1.cea3521957904p-43, -0x1.31cbb2685a12fp-47, 0x1.93e8e3a3982abp-52, -0x1.0a870657fa58dp-56,
     0x1.5f7ae2e61dd13p-61, -0x1.cf155d87cbf0fp-66, 0x1.2f9a956b4121dp-70, -0x1.8f57f173ba188p-75,
     0x1.213caefef59f4p-79, -0x1.7bc020c13bbd3p-84},
};

// sinh |x| or cosh |x| for ax = |x| >= 0 (NaN propagates).
//  * ax < 22 / 12: with E = expm1(ax) as the pair from expm1_parts (k <= 32 <= p + 8 here, so its
//    `rest` factor is 1), sinh = (E + E/(E+1)) / 2 and cosh = (e + 1/e) / 2 with e = 1 + E,
//    the quotients as pairs from their exact residuals (as in tanh). Both sums have positive
//    terms, so nothing cancels: ~0.5 ulp plus the pair errors (~2^-(p+5)). Below 2^-28 / 2^-13
//    sinh x rounds to x, which also keeps subnormals exact.
//  * beyond: e^-ax / e^ax < e^-44 = 2^-63 / e^-24 = 2^-34.6 is negligible, and
//    sinh = cosh = e^(ax - ln2), where ax - ln2 is exact as a pair (TwoSum) plus ln2's low part,
//    fed to exp_core (~0.55 ulp; it never overflows early, since the halving is inside the exp).
E sinh_cosh(const Fmt& f, E ax, bool is_sinh) {
  const double* ln2 = f.d ? kLn2Pair64 : kLn2Pair32;
  double lim = f.d ? 22.0 : 12.0;
  Expm1Parts e = expm1_parts(f, vmin(ax, lim));
  E eh = e.hi, el = e.lo;
  E small = ax;
  if (is_sinh) {
    DD d = two_sum(eh, fc(f, 1.0));
    E dl = d.lo + el;
    E q = eh / d.hi;
    DD p = two_prod(f, q, d.hi);
    E ql = (((eh - p.hi) - p.lo) + (el - q * dl)) / d.hi;
    DD t = two_sum(eh, q);
    small = (t.hi + (t.lo + (el + ql))) * 0.5;
    small = where(lt(ax, f.d ? 0x1p-28 : 0x1p-13), ax, small);
  } else {
    DD d = two_sum(fc(f, 1.0), eh);  // e^ax
    E dl = d.lo + el;
    E r = fc(f, 1.0) / d.hi;
    DD p = two_prod(f, r, d.hi);
    E rl = (((1.0 - p.hi) - p.lo) - r * dl) / d.hi;
    DD t = two_sum(d.hi, r);
    small = (t.hi + (t.lo + (dl + rl))) * 0.5;
  }
  DD w = two_sum(ax, fc(f, -ln2[0]));  // lo is NaN for ax = inf; exp_core drops it when clamped
  E wl = w.lo - ln2[1];
  E large = exp_core(f, w.hi, &wl);
  return where(lt(ax, lim), small, large);
}

// asin / acos on a float64 x (float32 inputs are widened, and the result rounded once).
// |x| <= 1/2: asin x = x + x z P(z), z = x^2; acos x = pi/2 - asin x (pi/2 as a pair; the result
// is >= 1.04, so the subtraction only rounds once at the end).
// |x| > 1/2: with z = (1 - |x|)/2 (exact) and s = sqrt(z) as a pair s + sl (sl from the exact
// residual z - s^2), asin |x| = pi/2 - 2 asin(s), acos |x| = 2 asin(s), acos(-|x|) = pi - 2
// asin(s), with asin(s) = s + (sl + s z P(z)): pi/2 - 2s and pi - 2s are exact as pairs (TwoSum),
// so the only rounding of consequence is the final one (~0.5 ulp, worst ~0.6 near |x| = 1/2 where
// 2 s z P is ~9% of the result).
E asin_acos64(E x, bool is_asin, bool f32) {
  const Fmt f = fmt_of(x);
  E ax = vabs(x);
  E small = le(ax, 0.5);
  E zb = (1.0 - ax) * 0.5;
  E s = b::sqrt(zb);
  DD sp = two_prod(f, s, s);
  E sl = where(eq(zb, 0.0), fc(f, 0.0), ((zb - sp.hi) - sp.lo) / (s * 2.0));
  E z = where(small, ax * ax, zb);
  E v = where(small, ax, s);
  E t = (v * z) * (f32 ? horner(z, kAsinP32) : horner(z, kAsinP64));
  E r = x;
  if (is_asin) {
    DD h = two_sum(fc(f, kPio2_64[0]), s * -2.0);
    E big = h.hi + (h.lo + (kPio2_64[1] - (sl + t) * 2.0));
    r = copysign(f, where(small, ax + t, big), x);  // keeps asin(-0) = -0
  } else {
    E neg = sign_bit(f, x);
    DD h = two_sum(fc(f, kPio2_64[0]), -x);
    E rs = h.hi + (h.lo + (kPio2_64[1] - where(neg, -t, t)));
    DD g = two_sum(fc(f, kPi_64[0]), s * -2.0);
    E bneg = g.hi + (g.lo + (kPi_64[1] - (sl + t) * 2.0));
    E bpos = s * 2.0 + (sl + t) * 2.0;  // acos(1) = +0
    r = where(small, rs, where(neg, bneg, bpos));
  }
  r = where(lt(1.0, ax), nan(f), r);
  return where(isnan_(x), x, r);
}

// erf on a float64 x (float32 has erf32 above).
//  * |x| < 1/2: erf = x + x R(z), z = x^2: the rounded terms (x R, < 13% of the result) cost
//    < 0.1 ulp. [1/2, 1): kErfT64. Below 2^-1000 the sum is formed on x 2^64
//    and scaled back by one multiply, so (float64) subnormal results round about once (double
//    rounding there: < 0.8 ulp).
//  * 1 <= |x| < 6: erf = 1 - erfc, erfc = exp(-x^2) h(x) with x^2 exact as a pair (two_prod) into
//    exp_core (~0.55 ulp) and h from the piece of kErfH picked by Where. erfc <= 0.16 has an ulp
//    <= 1/4 of erf's, so erfc's ~1.5 ulp cost < 0.4 ulp of erf before the final rounding.
//  * |x| >= 6: erfc < 2^-55, erf rounds to 1 (Where also maps inf to 1).
E erf64(E x) {
  const Fmt f = fmt_of(x);
  E ax = vabs(x);
  E tiny = lt(ax, 0x1p-1000);
  E as = where(tiny, ax * 0x1p64, ax);
  E z = ax * ax;
  E R = horner(z, kErfR64);
  E lo = as + as * R;
  lo = where(tiny, lo * 0x1p-64, lo);
  {  // [1/2, 1): E0 + t Q(t), t = x - 3/4 exact (Sterbenz)
    E t = ax - 0.75;
    E mid = kErfT64[0] + (t * horner(t, kErfT64 + 1, 14) + kErfT64Lo);
    lo = where(lt(ax, 0.5), lo, mid);
  }
  // Tail.
  E xt = vmin(vmax(ax, 1.0), 6.0);
  E c1 = le(kErfHStart[1], xt), c2 = le(kErfHStart[2], xt), c3 = le(kErfHStart[3], xt);
  auto pick = [&](double a0, double a1, double a2, double a3) {
    return where(c3, fc(f, a3), where(c2, fc(f, a2), where(c1, a1, a0, f.ft)));
  };
  E tt = xt - pick(kErfHCentre[0], kErfHCentre[1], kErfHCentre[2], kErfHCentre[3]);
  E h = pick(kErfH[0][13], kErfH[1][13], kErfH[2][13], kErfH[3][13]);
  for (int i = 12; i >= 0; --i)
    h = h * tt + pick(kErfH[0][i], kErfH[1][i], kErfH[2][i], kErfH[3][i]);
  DD x2 = two_prod(f, xt, xt);
  E nl = -x2.lo;
  E erfc = exp_core(f, -x2.hi, &nl) * h;
  E hi = 1.0 - erfc;
  E r = where(lt(ax, 1.0), lo, where(lt(ax, 6.0), hi, fc(f, 1.0)));
  r = copysign(f, r, x);  // erf(-0) = -0
  return where(isnan_(x), x, r);
}

// float32 erf: kErf32P's piece for |x| evaluated in float64 with fma steps, rounded once to
// float32 (~0.5 ulp: the fits and the float64 steps stay below 2^-30 relative). About 45
// operations, against ~180 for the float64 algorithm with shorter polynomials that float32 ran
// before (a double-double exp and a four-piece erfc tail). erf(-0) = -0 (x G(z) keeps the zero,
// then the sign is copied), +-inf give +-1 (clamped to the last piece, then replaced), NaN
// propagates through the polynomial. Subnormal float32 inputs are normal float64 values: x G(z)
// rounds once, to the nearest float32 subnormal.
E erf32(E x32) {
  E x = cast_(x32, DType::Float64);
  const Fmt f = fmt_of(x);
  E ax = vabs(x);
  E mid = le(kErf32Split[0], ax), tail = le(kErf32Split[1], ax);
  auto pick = [&](int i) {
    return where(tail, fc(f, kErf32P[2][i]), where(mid, kErf32P[1][i], kErf32P[0][i], f.ft));
  };
  E t = ax - where(tail, kErf32Centre[1], kErf32Centre[0], f.ft);
  E u = where(mid, t, x * x);
  constexpr int kDeg = sizeof(kErf32P[0]) / sizeof(kErf32P[0][0]) - 1;
  E p = pick(kDeg);
  for (int i = kDeg - 1; i >= 0; --i) p = fma_(p, u, pick(i));
  E r = where(mid, p, ax * p);
  r = where(le(kErf32One, ax), fc(f, 1.0), r);
  return cast_(copysign(f, r, x), DType::Float32);
}

// erfc on a float64 x (float32 inputs are widened, the result rounded once).
//  * |x| < 1/2: erfc = 1 - x - x R(z) (erf's polynomial), 1 - x exact as a pair (TwoSum): the
//    rounded x R is < 4.1% of the result (>= 0.48), so this is ~0.5 ulp.
//  * 1/2 <= x < 27.5: erfc = e^(-x^2) h(x), everything before the last rounding kept as pairs:
//    x^2 exact (two_prod) into exp_parts (e^r as hi + lo, ~2^-56 relative), h from its piece with
//    H0 + H1 t exact as pairs, their product as two_prod plus the cross terms, rounded once, then
//    scaled by the two powers of 2 (subnormal results, x > 26.5, round a second time there).
//    Beyond 27.5 (and at +inf) the clamped x gives e^-750 h, which is 0 in float64.
//  * x <= -1/2: erfc = 2 - erfc(|x|) (the rounded value, <= 0.48: its error costs < 0.25 ulp of a
//    result in [1.5, 2]); 2 below x = -6.
E erfc64(E x) {
  const Fmt f = fmt_of(x);
  E ax = vabs(x);
  // Near 0.
  E z = x * x;
  DD one = two_sum(fc(f, 1.0), -x);
  E near0 = one.hi + (one.lo - x * horner(z, kErfR64));
  // The tail, on |x| clamped to the pieces.
  constexpr int kPieces = sizeof(kErfcHStart) / sizeof(kErfcHStart[0]);
  E xt = vmin(vmax(ax, kErfcHStart[0]), 27.5);
  std::vector<E> in_piece;  // in_piece[i]: xt >= start of piece i + 1
  for (int i = 1; i < kPieces; ++i) in_piece.push_back(le(kErfcHStart[i], xt));
  auto pick = [&](auto coef) {  // the coefficient of xt's piece: a Where chain, last piece first
    E r = fc(f, coef(0));
    for (int i = 1; i < kPieces; ++i) r = where(in_piece[i - 1], fc(f, coef(i)), r);
    return r;
  };
  E t = xt - pick([](int i) { return kErfcHCentre[i]; });
  constexpr int kDeg = sizeof(kErfcH[0]) / sizeof(kErfcH[0][0]) - 1;
  E q = pick([](int i) { return kErfcH[i][kDeg]; });
  for (int k = kDeg - 1; k >= 2; --k) q = q * t + pick([k](int i) { return kErfcH[i][k]; });
  E h1 = pick([](int i) { return kErfcH[i][1]; });
  E h1lo = pick([](int i) { return kErfcHLo[i][1]; });
  E h0lo = pick([](int i) { return kErfcHLo[i][0]; });
  DD hs = fast_two_sum(pick([](int i) { return kErfcH[i][0]; }), t * (h1 + t * q));
  E hl = hs.lo + (h0lo + t * h1lo);
  DD x2 = two_prod(f, xt, xt);
  E nl = -x2.lo;
  ExpParts e = exp_parts(f, -x2.hi, &nl);
  DD p = two_prod(f, e.hi, hs.hi);
  E tail = ((p.hi + (p.lo + (e.hi * hl + e.lo * hs.hi))) * e.s1) * e.s2;
  E r = where(lt(ax, 0.5), near0, where(sign_bit(f, x), 2.0 - tail, tail));
  return where(isnan_(x), x, r);
}

// rsqrt on a float64 x: q = 1/s with s = sqrt(x), then one correction step from exact residuals,
// rounded once: sqrt(x) = s + sl with sl = (x - s^2) / 2s (s^2 exact by two_prod), and
// 1/(s + sl) = q (1 + r - q sl) to 2^-100 relative, r = 1 - q s exact (two_prod; 1 - q s's high
// part is exact by Sterbenz). The correction, about an ulp, carries ~2^-50 of relative error, so
// the result is the correctly rounded one unless the exact value lies within ~2^-49 ulp of a
// midpoint. Arguments below 2^-900 or above 2^1000 are scaled by 2^256 / 2^-256 first (and the
// result by 2^128 / 2^-128, exactly), so the products stay inside two_prod's range. 0, inf,
// negative numbers and NaN take 1/sqrt(x) as it is: +-inf, +0, NaN.
E rsqrt64(E x) {
  const Fmt f = fmt_of(x);
  E tiny = lt(x, 0x1p-900), huge = lt(0x1p1000, x);
  E xs = where(tiny, x * 0x1p256, where(huge, x * 0x1p-256, x));
  E s = b::sqrt(xs);
  DD sp = two_prod(f, s, s);
  E sl = ((xs - sp.hi) - sp.lo) / (s * 2.0);
  E q = fc(f, 1.0) / s;
  DD qp = two_prod(f, q, s);
  E r = (1.0 - qp.hi) - qp.lo;
  E y = q + q * (r - q * sl);
  y = where(tiny, y * 0x1p128, where(huge, y * 0x1p-128, y));
  E plain = fc(f, 1.0) / b::sqrt(x);
  return where(land(lt(0.0, x), lt(x, __builtin_inf())), y, plain);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

NodeRef exp(NodeRef x0) {
  check_scalar(x0);
  Fmt f = fmt_of(x0);
  if (!f.d) return exp32(f, x0);
  return exp_core(f, x0, nullptr);
}

NodeRef expm1(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  Expm1Parts e = expm1_parts(f, x);
  return where(eq(x, 0.0), x, (e.hi + e.lo) * e.rest);  // keeps -0
}

// tanh |x| = em / (em + 2) with em = expm1(2|x|) as a pair, divided as a pair: ~0.5 ulp. No
// cancellation anywhere; |x| is capped where tanh rounds to 1, and below 2^-28 / 2^-13
// tanh x rounds to x.
NodeRef tanh(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  if (!f.d) return tanh32(f, x);
  E ax = vabs(x);
  E u = vmin(ax, f.d ? 22.0 : 9.5) * 2.0;
  Expm1Parts e = expm1_parts(f, u);
  E eh = e.hi * e.rest, el = e.lo * e.rest;  // exact scaling (rest <= 2^3)
  DD d = two_sum(eh, fc(f, 2.0));
  E dl = d.lo + el;
  E q = eh / d.hi;
  DD p = two_prod(f, q, d.hi);
  E t = q + ((((eh - p.hi) - p.lo) + (el - q * dl)) / d.hi);
  t = where(lt(ax, f.d ? 0x1p-28 : 0x1p-13), ax, t);
  return copysign(f, t, x);
}

NodeRef log(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  DD l = f.d ? log_parts(f, x) : log_parts32(f, x);
  E r = l.hi + l.lo;
  r = where(eq(x, inf(f)), inf(f), r);
  r = where(eq(x, 0.0), -inf(f), r);
  return where(le(0.0, x), r, nan(f));  // x < 0 or NaN
}

// log1p x = log(u) + ue/u where u + ue = 1 + x exactly (TwoSum), summed before the single final
// rounding.
NodeRef log1p(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  DD u = two_sum(fc(f, 1.0), x);
  DD l = f.d ? log_parts(f, u.hi) : log_parts32(f, u.hi);
  // ue/u = ue - ue (u-1)/u: ue itself joins the high sum exactly, only the (tiny) second term is
  // rounded. (u - 1 is exact for u in [1/2, 2]; outside, ue/u is negligible anyway.)
  DD h = two_sum(l.hi, u.lo);
  E r = h.hi + ((h.lo + l.lo) - (u.lo * (u.hi - 1.0)) / u.hi);
  r = where(eq(x, inf(f)), inf(f), r);
  r = where(eq(x, -1.0), -inf(f), r);
  r = where(eq(x, 0.0), x, r);
  return where(le(-1.0, x), r, nan(f));  // x < -1 or NaN
}

NodeRef sin(NodeRef x) { return trig(x, Trig::Sin); }
NodeRef cos(NodeRef x) { return trig(x, Trig::Cos); }
NodeRef tan(NodeRef x) { return trig(x, Trig::Tan); }

NodeRef atan(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  AtanParts a = atan_core(f, vabs(x), fc(f, 0.0));
  DD h = fast_two_sum(a.bh, a.th);  // bh = 0 or bh >= 0.46 > |th|
  return copysign(f, h.hi + (h.lo + a.tail), x);
}

// atan2(y, x) = sign(y) (x < 0 ? pi - atan(|y|/|x|) : atan(|y|/|x|)), with t = |y|/|x| carried as
// a pair (its residual computed on operands scaled near 1 so nothing over/underflows), and pi,
// atan's centre and t summed exactly before the final rounding.
NodeRef atan2(NodeRef y0, NodeRef x0) {
  check_scalar(y0);
  check_scalar(x0);
  E y = y0, x = x0;
  Fmt f = fmt_of(x);
  if (y.dt() != x.dt()) throw std::logic_error("codegen::math::atan2: operand dtypes differ");
  const double* pi = f.d ? kPi_64 : kPi_32;
  E ax = vabs(x), ay = vabs(y);
  E both_inf = land(eq(ax, inf(f)), eq(ay, inf(f)));  // atan2(+-inf, +-inf) = +-pi/4, +-3pi/4
  ax = where(both_inf, fc(f, 1.0), ax);
  ay = where(both_inf, fc(f, 1.0), ay);
  E t = where(land(eq(ax, 0.0), eq(ay, 0.0)), fc(f, 0.0), ay / ax);
  // Residual of t on ax, ay scaled by 2^-exponent(ax) (clamped to normal exponents).
  E ef = band_(shr_(bits(f, ax), ic(f, f.mant)), ic(f, 2 * f.bias + 1));
  ef = max_(min_(ef, ic(f, 2 * f.bias - 1)), ic(f, 1));
  E sc = from_bits(f, shl_(ic(f, 2 * f.bias) - ef, ic(f, f.mant)));
  E axs = ax * sc, ays = ay * sc;
  DD p = two_prod(f, t, axs);
  E tl = ((ays - p.hi) - p.lo) / axs;
  E ok = land(le(f.d ? 0x1p-900 : 0x1p-80, t), le(t, f.d ? 0x1p900 : 0x1p60));
  tl = where(ok, tl, fc(f, 0.0));
  AtanParts a = atan_core(f, t, tl);
  E xneg = sign_bit(f, x);
  E sg = where(xneg, -1.0, 1.0, f.ft);
  DD A = two_sum(where(xneg, fc(f, pi[0]), fc(f, 0.0)), sg * a.bh);
  DD H = two_sum(A.hi, sg * a.th);
  E r = H.hi + ((H.lo + A.lo) + (where(xneg, fc(f, pi[1]), fc(f, 0.0)) + sg * a.tail));
  return copysign(f, r, y);
}

// pow(x, y) = exp(y log|x|) with log|x| as an accurate pair (log_dd), y * log as a pair, and
// exp_core taking the pair; then the C99 Annex F special cases and the sign for odd integer y.
NodeRef pow(NodeRef x0, NodeRef y0) {
  check_scalar(x0);
  check_scalar(y0);
  E x = x0, y = y0;
  Fmt f = fmt_of(x);
  if (y.dt() != x.dt()) throw std::logic_error("codegen::math::pow: operand dtypes differ");
  E ax = vabs(x);
  DD L = log_dd(f, ax);
  // |y| beyond 2^80 / 2^40 over/underflows for every finite |x| != 1 (|log|x|| >= 2^-53 / 2^-24);
  // clamping keeps the Veltkamp split finite.
  double yb = f.d ? 0x1p80 : 0x1p40;
  E yc = vmin(vmax(y, -yb), yb);
  DD w = two_prod(f, yc, L.hi);
  E wl = w.lo + yc * L.lo;
  E r = exp_core(f, w.hi, &wl);

  E yint = eq(vfloor(y), y);                          // true for +-inf
  E yodd = land(yint, ne(vfloor(y * 0.5), y * 0.5));  // false for |y| >= 2^p
  E yneg = lt(y, 0.0);
  E ainf = eq(ax, inf(f));
  r = where(eq(ax, 0.0), where(yneg, inf(f), fc(f, 0.0)), r);
  r = where(ainf, where(yneg, fc(f, 0.0), inf(f)), r);
  // y = +-inf: 1 for |x| = 1, else inf when (|x| < 1) == (y < 0), else 0.
  E big = eq(bxor_(lt(ax, 1.0), yneg), b::ci(DType::Bool, 0));
  r = where(eq(vabs(y), inf(f)), where(eq(ax, 1.0), fc(f, 1.0), where(big, inf(f), fc(f, 0.0))), r);
  r = where(land(sign_bit(f, x), yodd), -r, r);
  // Negative finite x with non-integer finite y.
  r = where(land(land(lt(x, 0.0), lnot(ainf)), lnot(yint)), nan(f), r);
  r = where(lor(isnan_(x), isnan_(y)), x + y, r);
  return where(lor(eq(y, 0.0), eq(x, 1.0)), fc(f, 1.0), r);
}

// exp2 x = exp(x ln2) with x ln2 as an exact pair (two_prod) plus x ln2_lo, fed to exp_core:
// ~0.55 ulp (subnormal results: < 0.8, exp_core's double rounding). x is clamped to +-1100 /
// +-200 first (beyond, the result is inf / 0 anyway; it keeps the Veltkamp split finite).
// Integer x gives exactly 2^x: the reduced argument is ~1e-30 and e^r rounds to 1.
NodeRef exp2(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  const double* ln2 = f.d ? kLn2Pair64 : kLn2Pair32;
  double lim = f.d ? 1100.0 : 200.0;
  E xc = vmin(vmax(x, -lim), lim);  // Max/Min propagate NaN
  DD w = two_prod(f, xc, fc(f, ln2[0]));
  E wl = w.lo + xc * ln2[1];
  return exp_core(f, w.hi, &wl);
}

// log2 x = k + log(1+f)/ln2: log(1+f) as the pair of log1pf_dd (rel err ~2^-(p+12)), times
// 1/ln2 as a pair (two_prod), then k (an integer, |k| >= 1 > |log2(1+f)| <= 1/2, or 0) added
// exactly with fast_two_sum: one final rounding, ~0.5 ulp. Powers of two give k exactly.
NodeRef log2(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  const double* il = f.d ? kInvLn2Pair64 : kInvLn2Pair32;
  LogRed red = log_reduce(f, x);
  DD M = log1pf_dd(f, red.f);
  DD P = two_prod(f, M.hi, fc(f, il[0]));
  E Pl = P.lo + (M.hi * il[1] + M.lo * il[0]);
  DD S = fast_two_sum(red.k, P.hi);
  E r = S.hi + (S.lo + Pl);
  r = where(eq(x, inf(f)), inf(f), r);
  r = where(eq(x, 0.0), -inf(f), r);
  r = where(lt(x, 0.0), nan(f), r);
  return where(isnan_(x), x, r);
}

NodeRef sinh(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  E r = copysign(f, sinh_cosh(f, vabs(x), true), x);  // sinh(-0) = -0
  return where(isnan_(x), x, r);
}

NodeRef cosh(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  return where(isnan_(x), x, sinh_cosh(f, vabs(x), false));
}

// float32 asin/acos widen to float64, run the float64 algorithm with shorter polynomials, and
// round once: < 0.5 ulp + 2^-20. float32 erf is erf32 (one polynomial in float64, rounded once).
NodeRef asin(NodeRef x0) {
  check_scalar(x0);
  Fmt f = fmt_of(x0);
  if (f.d) return asin_acos64(x0, true, false);
  return cast_(asin_acos64(cast_(x0, DType::Float64), true, true), DType::Float32);
}

NodeRef acos(NodeRef x0) {
  check_scalar(x0);
  Fmt f = fmt_of(x0);
  if (f.d) return asin_acos64(x0, false, false);
  return cast_(asin_acos64(cast_(x0, DType::Float64), false, true), DType::Float32);
}

NodeRef erf(NodeRef x0) {
  check_scalar(x0);
  Fmt f = fmt_of(x0);
  if (f.d) return erf64(x0);
  return erf32(x0);
}

// float32 erfc runs the float64 algorithm (the same polynomials) and rounds once: < 0.5 ulp +
// 2^-28, subnormal float32 results included (they are normal float64 values).
NodeRef erfc(NodeRef x0) {
  check_scalar(x0);
  Fmt f = fmt_of(x0);
  if (f.d) return erfc64(x0);
  return cast_(erfc64(cast_(x0, DType::Float64)), DType::Float32);
}

// float32 rsqrt is 1 / sqrt(x) in float64, rounded once: correctly rounded for every float32
// (checked over [1, 4) and every subnormal, which covers all by x -> 4x; docs/numerics.md).
NodeRef rsqrt(NodeRef x0) {
  check_scalar(x0);
  Fmt f = fmt_of(x0);
  if (f.d) return rsqrt64(x0);
  E w = cast_(x0, DType::Float64);
  return cast_(lit(DType::Float64, 1.0) / b::sqrt(w), DType::Float32);
}

}  // namespace codegen::math
