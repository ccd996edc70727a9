// Element types. The closed set of user dtypes (docs/semantics.md §1.2); float16 and bfloat16 are
// stored as 16-bit patterns and computed at float32 (rounded once per primitive).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ir {

// The enum's values are persisted (the compile cache keys, checkpoints' dtype codes are looked
// up by value): the eight original dtypes keep their numbers and new ones are appended.
enum class DType : uint8_t {
  Bool,
  UInt8,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Int8,
  Int16,
  UInt16,
  UInt32,
  UInt64,
};
inline constexpr int kNumDTypes = 13;

// Everything a dtype's kind decides, in one table indexed by the enum (ir/dtype.cpp prints it).
enum class Kind : uint8_t { Bool, Signed, Unsigned, Float };
struct DTypeInfo {
  Kind kind;
  int8_t bytes;
};
inline constexpr DTypeInfo kDTypeInfo[kNumDTypes] = {
    {Kind::Bool, 1},     {Kind::Unsigned, 1}, {Kind::Signed, 4},   {Kind::Signed, 8},
    {Kind::Float, 2},    {Kind::Float, 2},    {Kind::Float, 4},    {Kind::Float, 8},
    {Kind::Signed, 1},   {Kind::Signed, 2},   {Kind::Unsigned, 2}, {Kind::Unsigned, 4},
    {Kind::Unsigned, 8},
};
constexpr const DTypeInfo& info(DType t) { return kDTypeInfo[static_cast<int>(t)]; }

constexpr int64_t itemsize(DType t) { return info(t).bytes; }
constexpr bool is_float(DType t) { return info(t).kind == Kind::Float; }
// Integer dtypes (bool is not one).
constexpr bool is_int(DType t) {
  return info(t).kind == Kind::Signed || info(t).kind == Kind::Unsigned;
}
constexpr bool is_signed_int(DType t) { return info(t).kind == Kind::Signed; }
constexpr bool is_unsigned_int(DType t) { return info(t).kind == Kind::Unsigned; }
constexpr bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
// Value bits of an integer dtype (bool: 1).
constexpr int int_bits(DType t) { return t == DType::Bool ? 1 : static_cast<int>(itemsize(t) * 8); }
// The smallest and largest value of an integer or bool dtype, as the int64 bit pattern rune
// stores them in (uint64's maximum is the pattern of -1: ir::Value keeps uint64 as its bits).
constexpr int64_t int_min(DType t) {
  if (!is_signed_int(t)) return 0;
  return int_bits(t) == 64 ? INT64_MIN : -(int64_t{1} << (int_bits(t) - 1));
}
constexpr int64_t int_max(DType t) {
  if (t == DType::Bool) return 1;
  if (int_bits(t) == 64) return is_signed_int(t) ? INT64_MAX : -1;
  return is_signed_int(t) ? (int64_t{1} << (int_bits(t) - 1)) - 1 : (int64_t{1} << int_bits(t)) - 1;
}

std::string_view name(DType t);
// The dtype numpy's promotion gives arrays of a and b (docs/dtypes.md has the table): float
// wins; a signed and an unsigned int meet at the signed int wide enough for both (uint64 with a
// signed int: float64); float16 with bfloat16 is float32.
DType promote(DType a, DType b);

// float16 / bfloat16 <-> float32 conversions with round-to-nearest-even. These are the
// reference semantics; kernels implement the same bit manipulations (codegen/decompose).
uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
float bf16_bits_to_f32(uint16_t h);
uint16_t f64_to_f16_bits(double d);  // correctly rounded, not via float32
uint16_t f64_to_bf16_bits(double d);

}  // namespace ir
