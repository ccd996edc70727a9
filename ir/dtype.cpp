#include "ir/dtype.h"

#include <bit>
#include <cmath>

namespace ir {

std::string_view name(DType t) {
  static constexpr std::string_view kNames[kNumDTypes] = {
      "bool",    "uint8", "int32", "int64",  "float16", "bfloat16", "float32",
      "float64", "int8",  "int16", "uint16", "uint32",  "uint64"};
  const int i = static_cast<int>(t);
  return i >= 0 && i < kNumDTypes ? kNames[i] : "?";
}

static DType int_of(Kind k, int bits) {
  const bool s = k == Kind::Signed;
  switch (bits) {
    case 8:
      return s ? DType::Int8 : DType::UInt8;
    case 16:
      return s ? DType::Int16 : DType::UInt16;
    case 32:
      return s ? DType::Int32 : DType::UInt32;
    default:
      return s ? DType::Int64 : DType::UInt64;
  }
}

// Floats order by range then precision as rune always has: bfloat16 < float16 < float32 <
// float64 (float16 with bfloat16 is special-cased to float32 below).
static int float_rank(DType t) {
  return t == DType::BFloat16 ? 0 : t == DType::Float16 ? 1 : t == DType::Float32 ? 2 : 3;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_float(a) || is_float(b)) {
    // A float with an integer keeps the float's dtype (rune's rule since the first release, and
    // JAX's; numpy would widen int32 + float32 to float64).
    if (!is_float(a)) return b;
    if (!is_float(b)) return a;
    // float16 with bfloat16 has no exact common 16-bit type: float32, as torch does.
    if (is_half(a) && is_half(b)) return DType::Float32;
    return float_rank(a) >= float_rank(b) ? a : b;
  }
  // Two integers (numpy): the same signedness gives the wider; a signed and an unsigned give the
  // narrowest signed type holding both ranges, and uint64 with any signed type has none: float64.
  const int ba = int_bits(a), bb = int_bits(b);
  if (is_signed_int(a) == is_signed_int(b)) return ba >= bb ? a : b;
  const int bs = is_signed_int(a) ? ba : bb, bu = is_signed_int(a) ? bb : ba;
  if (bs > bu) return is_signed_int(a) ? a : b;
  if (bu == 64) return DType::Float64;
  return int_of(Kind::Signed, 2 * bu);
}

// Rounds the float32 bit pattern `x` to a format with `mbits` mantissa bits and an exponent
// bias/limit given by the caller. Shared by float16 (10 bits) and bfloat16 (7 bits).
uint16_t f32_to_f16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {
    // Subnormal half (or zero): value = ax as float; scale to units of 2^-24 and round.
    float a = std::bit_cast<float>(ax);
    // a * 2^24 is exact in float; round to nearest even integer.
    float scaled = a * 16777216.0f;
    float r = std::nearbyint(scaled);  // default rounding mode: nearest even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(r));
  }
  // Normal: rebias exponent (127 -> 15) and round the low 13 bits to nearest even.
  uint32_t m = ax - 0x38000000u;  // exponent rebias by 112 << 23
  uint32_t lsb = (m >> 13) & 1u;
  m += 0xfffu + lsb;
  return static_cast<uint16_t>(sign | (m >> 13));
}

float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = static_cast<float>(m) * 5.9604644775390625e-08f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t f32_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

float bf16_bits_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// float64 -> 16-bit formats: round to odd at float32 first (keeps the sticky bit), then round to
// nearest even at 16 bits. Round-to-odd at >= 2 extra bits makes the double rounding exact.
static float f64_to_f32_round_odd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || std::isinf(f) || static_cast<double>(f) == d) return f;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (!(bits & 1u)) {
    // Move one step towards d: that neighbour brackets d with f and is odd.
    f = std::nextafter(f, static_cast<double>(f) > d ? -INFINITY : INFINITY);
  }
  return f;
}
uint16_t f64_to_f16_bits(double d) { return f32_to_f16_bits(f64_to_f32_round_odd(d)); }
uint16_t f64_to_bf16_bits(double d) { return f32_to_bf16_bits(f64_to_f32_round_odd(d)); }

}  // namespace ir
