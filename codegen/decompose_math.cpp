// Transcendental functions from exact primitives; see decompose_math.h for the contract.
//
// Conventions used throughout:
//  * p is the precision (24 / 53 bits); "ulp" is the unit in the last place of the result.
//  * A pair {hi, lo} (DD) is an unevaluated sum; two_sum / fast_two_sum / two_prod are the classic
//    error-free transformations, valid because every primitive rounds once (no FMA). two_prod
//    uses Veltkamp splitting, so its operands must stay below ~2^996 (float64) / 2^115 (float32)
//    and its partial products above the subnormal range; each use below respects that.
//  * The builder folds all-constant subexpressions, so splitting a constant costs nothing.
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
DD split(const Fmt& f, E a) {
  E t = a * f.split;
  E hi = t - (t - a);
  return {hi, a - hi};
}
DD two_prod(const Fmt& f, E a, E c) {
  E p = a * c;
  DD as = split(f, a), cs = split(f, c);
  E e = (((as.hi * cs.hi - p) + as.hi * cs.lo) + as.lo * cs.hi) + as.lo * cs.lo;
  return {p, e};
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
// 2/pi truncated into 29-bit chunks at bit offsets 29 i, for the float32 reduction (done in
// float64): x (24 bits) * chunk (29 bits) is exact. Seven chunks keep 203 bits of 2/pi, so even
// for x = 2^128 the fraction of x * 2/pi is known to 2^-75.
constexpr double kTwoOverPiChunks[] = {0x1.45f306dp-1,  0x1.9391054p-30,  0x1.4fe13abp-59,
                                       0x1.d1f534dp-88, 0x1.b81b6c5p-117, 0x1.5993c4p-148,
                                       0x1.c820ff2p-175};

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
E exp_core(const Fmt& f, E xh, const E* xl) {
  double lim = f.d ? 750.0 : 110.0;
  E x = vmin(vmax(xh, -lim), lim);                                  // Max/Min propagate NaN
  E xl_kept = xl ? where(eq(x, xh), *xl, fc(f, 0.0)) : fc(f, 0.0);  // drop xl once clamped
  ExpRed r = exp_reduce(f, x, xl ? &xl_kept : nullptr);
  E z = r.rh * r.rh;
  E tail = z * (0.5 + r.rh * horner(f, r.rh, kExpm1P64, kExpm1P32)) + (r.rl + r.rl * r.rh);
  DD one = fast_two_sum(fc(f, 1.0), r.rh);
  E y = one.hi + (one.lo + tail);
  E k1 = vfloor(r.k * 0.5);
  E k2 = r.k - k1;  // |k1|, |k2| <= 542 / 80: both powers are normal
  return (y * pow2(f, k1)) * pow2(f, k2);
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

// log(x) as a normalized pair with relative error ~2^-(p+12), for pow: |y log x| may reach 745,
// so log x must be much more accurate than the result. 2 atanh(s) is summed as
// 2s (pair, s = f/(2+f) with its division residual) + s^3 Q(z) with s^3 and the leading part of
// Q = 2/3 + 2z/5 + z^2 Q2(z) as pairs; only z^2 Q2 (< 4e-4 of Q, Q < 1% of the sum) is plain.
DD log_dd(const Fmt& f, E x) {
  const double* L = f.d ? kLn2_64 : kLn2_32;
  const double* q0 = f.d ? kTwoThirds64 : kTwoThirds32;
  const double* q1 = f.d ? kTwoFifths64 : kTwoFifths32;
  LogRed r = log_reduce(f, x);
  E fm = r.f;
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
  DD H = fast_two_sum(r.k * L[0], M.hi);
  E Hl = H.lo + (Ml + (r.k * L[1] + r.k * L[2]));
  return fast_two_sum(H.hi, Hl);
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
  for (int k = 0; k < 3; ++k)
    t[k] = bor_(shl_(w[k], sh), shr_(shr_(w[k + 1], c(1)), c(63) - sh));
  E a[6] = {shr_(t[0], c(32)), band_(t[0], c(M32)), shr_(t[1], c(32)),
            band_(t[1], c(M32)), shr_(t[2], c(32)), band_(t[2], c(M32))};  // a0 most significant
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

// float32 x, reduced exactly in float64 (Payne-Hanek in floating point): every x * C_i is exact,
// and T_i = x C_i - 4 round(x C_i / 4) is exact and in [-2, 2], so sum T_i = x 2/pi (mod 4) up to
// 2^-75. The sum is accumulated with TwoSum; k = round(sum), the fraction is exact and r = frac *
// pi/2 with ~2^-52 relative error: more than enough for a float32 result, whatever the
// cancellation.
TrigRed reduce_f32(E x32) {
  Fmt f = fmt_of(x32);
  E x = cast_(x32, DType::Float64);
  E hi = b::cf(DType::Float64, 0.0);
  E lo = b::cf(DType::Float64, 0.0);
  for (int i = 0; i < 7; ++i) {
    E t = x * kTwoOverPiChunks[i];
    if (i < 5) t = t - vround(t * 0.25) * 4.0;  // chunks 6, 7: |x C_i| < 2^-17, no reduction
    if (i == 0) {
      hi = t;
    } else {
      DD s = two_sum(hi, t);
      hi = s.hi;
      lo = lo + s.lo;
    }
  }
  E k = vround(hi);
  E fr = hi - k;  // exact
  E r = fr * kPio2_64[0] + (fr * kPio2_64[1] + lo * kPio2_64[0]);
  E q = cast_(k - vfloor(k * 0.25) * 4.0, f.it);
  return {r, nullptr, q};
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
    TrigRed r = reduce_f32(x);
    E z = r.rh * r.rh;
    E sv = r.rh + (r.rh * z) * horner(z, kSinS32);
    E cv = (1.0 - z * 0.5) + (z * z) * horner(z, kCosC32);
    E qodd = odd(f, r.q);
    E v = x;
    if (which == Trig::Tan) {
      E t = where(qodd, cv, sv) / where(qodd, sv, cv);
      v = where(qodd, -t, t);
    } else if (which == Trig::Sin) {
      E u = where(qodd, cv, sv);
      v = where(bit2(f, r.q), -u, u);
    } else {
      E u = where(qodd, sv, cv);
      v = where(bit2(f, r.q + ic(f, 1)), -u, u);
    }
    res = cast_(v, DType::Float32);  // the only rounding to float32
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

}  // namespace

// ---------------------------------------------------------------------------------------------

NodeRef exp(NodeRef x0) {
  check_scalar(x0);
  Fmt f = fmt_of(x0);
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
  DD l = log_parts(f, x);
  E r = l.hi + l.lo;
  r = where(eq(x, inf(f)), inf(f), r);
  r = where(eq(x, 0.0), -inf(f), r);
  r = where(lt(x, 0.0), nan(f), r);
  return where(isnan_(x), x, r);
}

// log1p x = log(u) + ue/u where u + ue = 1 + x exactly (TwoSum), summed before the single final
// rounding.
NodeRef log1p(NodeRef x0) {
  check_scalar(x0);
  E x = x0;
  Fmt f = fmt_of(x);
  DD u = two_sum(fc(f, 1.0), x);
  DD l = log_parts(f, u.hi);
  // ue/u = ue - ue (u-1)/u: ue itself joins the high sum exactly, only the (tiny) second term is
  // rounded. (u - 1 is exact for u in [1/2, 2]; outside, ue/u is negligible anyway.)
  DD h = two_sum(l.hi, u.lo);
  E r = h.hi + ((h.lo + l.lo) - (u.lo * (u.hi - 1.0)) / u.hi);
  r = where(eq(x, inf(f)), inf(f), r);
  r = where(eq(x, -1.0), -inf(f), r);
  r = where(lt(x, -1.0), nan(f), r);
  r = where(eq(x, 0.0), x, r);
  return where(isnan_(x), x, r);
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

}  // namespace codegen::math
