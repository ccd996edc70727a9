// Threefry-2x32 and the draws of jax.random built on it, from nx primitives on uint32 tensors
// (Add wraps modulo 2^32, Shl / Shr / Or / Xor act on the bit pattern), so every backend runs
// the same integer arithmetic and gives the same bits.
#include "core/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "core/donation.h"
#include "core/prim.h"

namespace nx::random {

namespace {

using namespace nx::detail;
using ir::Op;
using nx::add;
constexpr DType U32 = DType::UInt32;

Tensor u32(uint32_t v) { return const_int(U32, v); }
Tensor bxor(const Tensor& a, const Tensor& b) { return binary("nx::random", Op::Xor, a, b); }
Tensor bor(const Tensor& a, const Tensor& b) { return binary("nx::random", Op::Or, a, b); }
Tensor band(const Tensor& a, const Tensor& b) { return binary("nx::random", Op::And, a, b); }
Tensor shl(const Tensor& a, int s) {
  return binary("nx::random", Op::Shl, a, const_int(a.dtype(), s));
}
Tensor shr(const Tensor& a, int s) {
  return binary("nx::random", Op::Shr, a, const_int(a.dtype(), s));
}
Tensor rotl(const Tensor& x, int r) { return bor(shl(x, r), shr(x, 32 - r)); }

// Threefry-2x32, 20 rounds: the pair of counters (x0, x1) encrypted under the key (k0, k1).
std::pair<Tensor, Tensor> threefry(const Tensor& k0, const Tensor& k1, Tensor x0, Tensor x1) {
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  Tensor ks[3] = {k0, k1, bxor(bxor(k0, k1), u32(0x1BD11BDA))};
  static constexpr int kInject[5][2] = {{1, 2}, {2, 0}, {0, 1}, {1, 2}, {2, 0}};
  x0 = add(x0, ks[0]);
  x1 = add(x1, ks[1]);
  for (int i = 0; i < 5; ++i) {
    for (int r : kRot[i % 2]) {
      x0 = add(x0, x1);
      x1 = bxor(rotl(x1, r), x0);
    }
    x0 = add(x0, ks[kInject[i][0]]);
    x1 = add(add(x1, ks[kInject[i][1]]), u32(static_cast<uint32_t>(i + 1)));
  }
  return {x0, x1};
}

void check_key(const char* api, const Tensor& key) {
  if (key.dtype() != U32 || key.shape() != Shape{2})
    fail(api, "key must be a uint32 [2] tensor (nx::random::key), got " + key.describe());
}
std::pair<Tensor, Tensor> halves(const Tensor& key) { return {index(key, 0, 0), index(key, 0, 1)}; }

// The counters of each element of `shape`: (flat index >> 32, flat index & 0xFFFFFFFF), as
// JAX's iota_2x32_shape.
std::pair<Tensor, Tensor> counters(const char* api, const Shape& shape) {
  int64_t n = ir::checked_numel(api, shape);
  Tensor i = reshape(arange(n), shape);
  Tensor lo = cast(band(i, const_int(DType::Int64, 0xFFFFFFFFll)), U32);
  if (n <= (int64_t{1} << 32)) return {broadcast_to(u32(0), shape), lo};
  return {cast(shr(i, 32), U32), lo};
}

// Both 32-bit words of each element's draw.
std::pair<Tensor, Tensor> draw(const char* api, const Tensor& key, const Shape& shape) {
  auto [k0, k1] = halves(key);
  auto [c0, c1] = counters(api, shape);
  return threefry(k0, k1, c0, c1);
}

Tensor bitcast(const Tensor& x, DType t) { return prim(Op::Bitcast, t, x.shape(), {x}); }

// Uniform [1, 2) - 1 from the top mantissa bits of a draw, in dtype t (JAX's construction: 32
// bits for float32, 64 for float64, the low 16 for the 16-bit floats).
Tensor unit_floats(const char* api, const Tensor& key, const Shape& shape, DType t) {
  auto [b0, b1] = draw(api, key, shape);
  Tensor f;
  switch (t) {
    case DType::Float32:
      f = bitcast(bor(shr(bxor(b0, b1), 32 - 23), u32(0x3F800000u)), t);
      break;
    case DType::Float64: {
      Tensor hi = shl(cast(b0, DType::Int64), 32), lo = cast(b1, DType::Int64);
      Tensor b64 = bor(hi, lo);
      f = bitcast(bor(shr(b64, 64 - 52), const_int(DType::Int64, 0x3FF0000000000000ll)), t);
      break;
    }
    case DType::Float16:
    case DType::BFloat16: {
      // JAX draws at least 8 bits: float16 (10 mantissa bits) takes the low 16 of the draw,
      // bfloat16 (7) the low 8.
      bool f16 = t == DType::Float16;
      int rng_bits = f16 ? 16 : 8, mant = f16 ? 10 : 7;
      uint32_t one = f16 ? 0x3C00u : 0x3F80u;
      Tensor low = band(bxor(b0, b1), u32(f16 ? 0xFFFFu : 0xFFu));
      f = bitcast(cast(bor(shr(low, rng_bits - mant), u32(one)), DType::UInt16), t);
      break;
    }
    default:
      fail(api, "dtype must be float, got " + std::string(ir::name(t)));
  }
  return sub(f, scalar_like(f, 1));
}

// Exact float64 arithmetic for uniform_in: with round-to-nearest and no overflow or underflow,
// s + e == a + b exactly (Knuth's two-sum), and hi + lo == a * b exactly (Dekker's product over
// Veltkamp's 26-bit halves).
std::pair<Tensor, Tensor> two_sum(const Tensor& a, const Tensor& b) {
  Tensor s = add(a, b), bb = sub(s, a);
  return {s, add(sub(a, sub(s, bb)), sub(b, bb))};
}
std::pair<Tensor, Tensor> halves_of(const Tensor& a) {
  Tensor c = mul(scalar_like(a, 134217729.0), a);  // 2^27 + 1
  Tensor h = sub(c, sub(c, a));
  return {h, sub(a, h)};
}
// a + b rounded to odd: the exact sum, or else the one of its two neighbours whose last bit is
// odd. Rounding that once more to nearest (to float64 or float32) gives the sum rounded once to
// nearest (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
// using rounding to odd", IEEE TC 2008).
Tensor add_odd(const Tensor& a, const Tensor& b) {
  auto [s, e] = two_sum(a, b);
  constexpr DType I64 = DType::Int64;
  Tensor sb = bitcast(s, I64), eb = bitcast(e, I64);
  Tensor even = equal(band(sb, const_int(I64, 1)), const_int(I64, 0));
  Tensor inexact = not_equal(e, scalar_like(e, 0));
  // Toward e: one ulp up in magnitude where e has s's sign, down where not (s is not 0 here:
  // a sum that rounds to 0 is exact).
  Tensor step = where(less(bxor(sb, eb), const_int(I64, 0)), const_int(I64, -1), const_int(I64, 1));
  return bitcast(where(logical_and(even, inexact), add(sb, step), sb), DType::Float64);
}
// a * b + c rounded once, at float64 (XLA's fused multiply-add): Dekker's exact product, its
// high part summed exactly with c, the two low parts added rounded to odd, the whole rounded
// once (Boldo and Melquiond's emulated FMA). Exact while no partial product underflows and
// nothing overflows: uniform_in checks that on its host constants.
Tensor fma64(const Tensor& a, const Tensor& b, const Tensor& c) {
  auto [ah, al] = halves_of(a);
  auto [bh, bl] = halves_of(b);
  Tensor ph = mul(a, b);
  Tensor pl = add(add(add(sub(mul(ah, bh), ph), mul(ah, bl)), mul(al, bh)), mul(al, bl));
  auto [sh, sl] = two_sum(c, ph);
  return add(sh, add_odd(sl, pl));
}

// JAX's max(minval, f * (maxval - minval) + minval), the span computed in dtype t. XLA computes
// float32 and float64 with one fused multiply-add (one rounding); float16 and bfloat16 with each
// operation rounded to t. float32's fused result: the product is exact at float64 (24-bit
// operands), the sum rounded to odd there, then rounded once to float32. float64's: fma64.
Tensor uniform_in(const char* api, const Tensor& key, const Shape& shape, DType t, double lo,
                  double hi) {
  Tensor f = unit_floats(api, key, shape, t);
  Tensor lo_t = scalar_like(f, lo);
  // [0, 1): f * 1 + 0 is f (+0 for f = +0) whatever the rounding.
  if (lo == 0 && hi == 1) return f;
  Tensor span = sub(scalar_like(f, hi), lo_t);
  Tensor v;
  if (t == DType::Float64) {
    // fma64 is exact while its partial products neither overflow nor underflow: spans between
    // 2^-900 and 2^990 and |lo| below 2^1000 (a wider span differs from XLA's fused result by
    // at most one rounding: docs/random.md).
    const double span_h = hi - lo;
    const bool exact = std::isfinite(span_h) && std::abs(span_h) > 0x1p-900 &&
                       std::abs(span_h) < 0x1p990 && std::abs(lo) < 0x1p1000;
    v = exact ? fma64(f, span, lo_t) : add(mul(f, span), lo_t);
  } else if (t == DType::Float32) {
    auto wide = [](const Tensor& x) { return cast(x, DType::Float64); };
    v = cast(add_odd(mul(wide(f), wide(span)), wide(lo_t)), t);
  } else {
    v = add(mul(f, span), lo_t);
  }
  return maximum(v, lo_t);
}

// erfinv at float64: Giles' double-precision approximation (M. Giles, "Approximating the erfinv
// function", GPU Computing Gems Jade Edition, 2011; XLA's float64 erf_inv), a few ulps, refined
// by one Newton step. The step's residual is computed where it is well conditioned: erf(x) - y
// below |y| = 1/2; above, erfc(|x|) - (1 - |y|), as 1 - |y| is exact there and erfc keeps its
// relative accuracy in the tail, where erf(x) rounds to within an ulp of 1 and cannot tell
// neighbouring x apart (two Newton steps on erf left float64 normals 245 ulps from exact).
// y in (-1, 1); every operation an nx primitive with the same bits on every backend.
Tensor erfinv64(const Tensor& y) {
  auto poly = [](const Tensor& w, std::initializer_list<double> c) {
    auto it = c.begin();
    Tensor p = scalar_like(w, *it++);
    for (; it != c.end(); ++it) p = add(scalar_like(w, *it), mul(p, w));
    return p;
  };
  Tensor one = scalar_like(y, 1);
  Tensor w = neg(log(mul(sub(one, y), add(one, y))));
  Tensor central =
      poly(sub(w, scalar_like(w, 3.125)),
           {-3.6444120640178196996e-21, -1.685059138182016589e-19,  1.2858480715256400167e-18,
            1.115787767802518096e-17,   -1.333171662854620906e-16,  2.0972767875968561637e-17,
            6.6376381343583238325e-15,  -4.0545662729752068639e-14, -8.1519341976054721522e-14,
            2.6335093153082322977e-12,  -1.2975133253453532498e-11, -5.4154120542946279317e-11,
            1.051212273321532285e-09,   -4.1126339803469836976e-09, -2.9070369957882005086e-08,
            4.2347877827932403518e-07,  -1.3654692000834678645e-06, -1.3882523362786468719e-05,
            0.0001867342080340571352,   -0.00074070253416626697512, -0.0060336708714301490533,
            0.24015818242558961693,     1.6536545626831027356});
  Tensor sw = sqrt(w);
  Tensor mid =
      poly(sub(sw, scalar_like(w, 3.25)),
           {2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
            1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
            2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
            6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
            0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
            -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
            3.0838856104922207635});
  Tensor tail =
      poly(sub(sw, scalar_like(w, 5)),
           {-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
            -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
            2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
            -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
            7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
            1.0103004648645343977, 4.8499064014085844221});
  Tensor p =
      where(less(w, scalar_like(w, 6.25)), central, where(less(w, scalar_like(w, 16)), mid, tail));
  // The Newton step on |x| = p |y|, the sign put back last (erfinv is odd).
  Tensor ya = abs(y), xa = mul(p, ya);
  Tensor residual =
      where(less(ya, scalar_like(y, 0.5)), sub(erf(xa), ya), sub(sub(one, ya), erfc(xa)));
  const double two_over_sqrt_pi = 2 / std::sqrt(std::numbers::pi);
  Tensor slope = mul(scalar_like(xa, two_over_sqrt_pi), exp(neg(mul(xa, xa))));
  xa = sub(xa, div(residual, slope));
  return where(less(y, scalar_like(y, 0)), neg(xa), xa);
}

}  // namespace

Tensor key(uint64_t seed) {
  return create(U32, {2},
                {static_cast<double>(seed >> 32), static_cast<double>(seed & 0xFFFFFFFFu)});
}

Tensor split(const Tensor& key, int64_t n) {
  const char* api = "nx::random::split";
  OpScope scope_(api, {&key});
  check_key(api, key);
  if (n < 0) fail(api, "n must be >= 0, got " + std::to_string(n));
  auto [k0, k1] = halves(key);
  auto [c0, c1] = counters(api, {n});
  auto [b0, b1] = threefry(k0, k1, c0, c1);
  return stack({b0, b1}, 1);
}

Tensor fold_in(const Tensor& key, const Tensor& data) {
  const char* api = "nx::random::fold_in";
  OpScope scope_(api, {&key, &data});
  check_key(api, key);
  if (!data.shape().empty() || !(ir::is_int(data.dtype()) || data.dtype() == DType::Bool))
    fail(api, "data must be an integer scalar, got " + data.describe());
  auto [k0, k1] = halves(key);
  Tensor d = data.dtype() == U32 ? data : cast(data, U32);
  auto [b0, b1] = threefry(k0, k1, u32(0), d);
  return stack({b0, b1}, 0);
}
Tensor fold_in(const Tensor& key, uint32_t data) { return fold_in(key, u32(data)); }

Tensor bits(const Tensor& key, const Shape& shape) {
  const char* api = "nx::random::bits";
  OpScope scope_(api, {&key});
  check_key(api, key);
  auto [b0, b1] = draw(api, key, shape);
  return bxor(b0, b1);
}

Tensor uniform(const Tensor& key, const Shape& shape, DType t, double minval, double maxval) {
  const char* api = "nx::random::uniform";
  OpScope scope_(api, {&key});
  check_key(api, key);
  if (!(minval < maxval))
    fail(api,
         "minval " + std::to_string(minval) + " must be below maxval " + std::to_string(maxval));
  return uniform_in(api, key, shape, t, minval, maxval);
}

Tensor normal(const Tensor& key, const Shape& shape, DType t) {
  const char* api = "nx::random::normal";
  OpScope scope_(api, {&key});
  check_key(api, key);
  if (!ir::is_float(t)) fail(api, "dtype must be float, got " + std::string(ir::name(t)));
  // JAX's interval: (the float after -1 toward 0, 1) in dtype t.
  double lo = -1;
  switch (t) {
    case DType::Float64:
      lo = std::nextafter(-1.0, 0.0);
      break;
    case DType::Float32:
      lo = std::nextafter(-1.0f, 0.0f);
      break;
    case DType::Float16:
      lo = -1 + std::ldexp(1.0, -11);
      break;
    default:
      lo = -1 + std::ldexp(1.0, -8);
      break;  // bfloat16
  }
  Tensor u = uniform_in(api, key, shape, t, lo, 1);
  Tensor z = mul(const_of(DType::Float64, std::numbers::sqrt2), erfinv64(cast(u, DType::Float64)));
  return cast(z, t);
}

Tensor bernoulli(const Tensor& key, double p, const Shape& shape) {
  const char* api = "nx::random::bernoulli";
  OpScope scope_(api, {&key});
  check_key(api, key);
  Tensor u = uniform_in(api, key, shape, DType::Float32, 0, 1);
  return less(u, scalar_like(u, p));
}
Tensor bernoulli(const Tensor& key, const Tensor& p) {
  const char* api = "nx::random::bernoulli";
  OpScope scope_(api, {&key, &p});
  check_key(api, key);
  require_float(api, p);
  Tensor u = uniform_in(api, key, p.shape(), p.dtype(), 0, 1);
  return less(u, p);
}

Tensor randint(const Tensor& key, const Shape& shape, int64_t minval, int64_t maxval, DType t) {
  const char* api = "nx::random::randint";
  OpScope scope_(api, {&key});
  check_key(api, key);
  if (t != DType::Int32 && t != DType::Int64)
    fail(api, "dtype must be int32 or int64, got " + std::string(ir::name(t)));
  if (maxval <= minval)
    fail(api, "empty range [" + std::to_string(minval) + ", " + std::to_string(maxval) + ")");
  // int32: bounds outside int32 clip to it, as JAX's (a maxval past INT32_MAX draws up to
  // INT32_MAX itself); a range holding no int32 raises, where JAX would return a clipped bound.
  const int64_t lo_v = t == DType::Int32 ? std::max<int64_t>(minval, INT32_MIN) : minval;
  const int64_t hi_v = t == DType::Int32 ? std::min<int64_t>(maxval, int64_t{1} << 31) : maxval;
  if (hi_v <= lo_v)
    fail(api, "range [" + std::to_string(minval) + ", " + std::to_string(maxval) +
                  ") holds no int32 value");
  ir::checked_numel(api, shape);  // before any draw: a shape too large names this call
  // JAX's algorithm: two draws of bits (keys split(key)[0] and [1]), span = maxval - minval in
  // the unsigned type, offset = ((hi % span) * (2^(n/2) % span)^2 % span + lo % span) % span.
  Tensor ks = split(key, 2);
  Tensor key_hi = index(ks, 0, 0), key_lo = index(ks, 0, 1);
  Tensor off;
  if (t == DType::Int32) {
    // span in [1, 2^32], computed in int64 (it does not fit int32's unsigned type at 2^32).
    const uint64_t span64 = static_cast<uint64_t>(hi_v - lo_v);
    Tensor lo = bits(key_lo, shape);
    if (span64 == uint64_t{1} << 32) {
      // The whole int32 range: JAX's span wraps to 0 in uint32, and XLA's remainder by 0 returns
      // the dividend, so the offset is the second draw's bits (the modulus below would divide
      // by zero).
      off = lo;
    } else {
      const auto span_v = static_cast<uint32_t>(span64);
      Tensor span = u32(span_v);
      // The square wraps in uint32, as JAX's lax.mul does (it is 0 for span 2^32 - 1).
      uint32_t m = static_cast<uint32_t>((uint64_t{1} << 16) % span_v);
      Tensor mult = u32(static_cast<uint32_t>(m * m) % span_v);
      Tensor hi = bits(key_hi, shape);
      off = binary(api, Op::Mod,
                   add(mul(binary(api, Op::Mod, hi, span), mult), binary(api, Op::Mod, lo, span)),
                   span);
    }
    // The offset's bits as int32 (it may pass INT32_MAX), added with wrap-around: JAX's
    // convert_element_type + add, exact for every range.
    return add(bitcast(off, t), const_int(t, lo_v));
  }
  // int64: 64-bit draws (hi word << 32 | lo word) in uint64.
  const DType U64 = DType::UInt64;
  auto bits64 = [&](const Tensor& k) {
    auto [b0, b1] = draw(api, k, shape);
    return bor(shl(cast(b0, U64), 32), cast(b1, U64));
  };
  auto span_v = static_cast<uint64_t>(maxval) - static_cast<uint64_t>(minval);
  Tensor span = const_int(U64, static_cast<int64_t>(span_v));
  uint64_t m = (uint64_t{1} << 32) % span_v;  // its square wraps in uint64, as JAX's
  Tensor mult = const_int(U64, static_cast<int64_t>((m * m) % span_v));
  Tensor hi = bits64(key_hi), lo = bits64(key_lo);
  off =
      binary(api, Op::Mod,
             add(mul(binary(api, Op::Mod, hi, span), mult), binary(api, Op::Mod, lo, span)), span);
  return add(bitcast(off, DType::Int64), const_int(DType::Int64, minval));
}

Tensor permutation(const Tensor& key, int64_t n) {
  const char* api = "nx::random::permutation";
  OpScope scope_(api, {&key});
  check_key(api, key);
  if (n < 0) fail(api, "n must be >= 0, got " + std::to_string(n));
  // Checked here, so the error names this call and n rather than the arange it is built from.
  if (n > ir::kMaxElements)
    fail(api, "n " + std::to_string(n) + " is too large: over " + std::to_string(ir::kMaxElements) +
                  " elements, the most an array may hold");
  int rounds = static_cast<int>(std::ceil(
      3 * std::log(static_cast<double>(std::max<int64_t>(1, n))) / std::log(4294967295.0)));
  Tensor x = arange(n);
  Tensor k = key;
  for (int r = 0; r < rounds; ++r) {
    Tensor ks = split(k, 2);
    k = index(ks, 0, 0);
    Tensor order = argsort(bits(index(ks, 0, 1), {n}));
    x = take(x, order, 0);
  }
  return x;
}

Tensor dropout(const Tensor& key, const Tensor& x, double rate) {
  const char* api = "nx::random::dropout";
  OpScope scope_(api, {&key, &x});
  check_key(api, key);
  require_float(api, x);
  if (!(rate >= 0 && rate < 1)) fail(api, "rate must be in [0, 1), got " + std::to_string(rate));
  if (rate == 0) return identity_result(x);
  double keep = 1 - rate;
  Tensor mask = bernoulli(key, keep, x.shape());
  return where(mask, div(x, scalar_like(x, keep)), zeros_like(x));
}

}  // namespace nx::random
