// Element types. The closed set of user dtypes (SEMANTICS.md §1); float16 and bfloat16 are
// stored as 16-bit patterns and computed at float32 (rounded once per primitive).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ir {

enum class DType : uint8_t { Bool, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
inline constexpr int kNumDTypes = 8;

constexpr int64_t itemsize(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
      return 1;
    case DType::Float16:
    case DType::BFloat16:
      return 2;
    case DType::Int32:
    case DType::Float32:
      return 4;
    case DType::Int64:
    case DType::Float64:
      return 8;
  }
  return 0;
}
constexpr bool is_float(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
constexpr bool is_int(DType t) {
  return t == DType::UInt8 || t == DType::Int32 || t == DType::Int64;
}
constexpr bool is_signed_int(DType t) { return t == DType::Int32 || t == DType::Int64; }
constexpr bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

std::string_view name(DType t);
// The dtype numpy's promotion gives for a binary op on a and b (float wins, wider wins).
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
