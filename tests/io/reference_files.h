// Written by tools/io-refgen (numpy 2.4.6): the tensors of tests/data/io/ref.* as raw bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct ReferenceTensor {
  const char* name;
  const char* dtype;
  std::vector<int64_t> shape;
  std::string hex;  // little-endian bytes in C order
};

inline const std::vector<ReferenceTensor>& reference_tensors() {
  static const std::vector<ReferenceTensor> t = {
      {"b", "bool_", {3}, "010001"},
      {"u8", "uint8", {2, 3}, "fafbfcfdfeff"},
      {"i32", "int32", {4}, "00000080ffffffff00000000ffffff7f"},
      {"i64", "int64", {2, 1}, "0000000000000080ffffffffffffff7f"},
      {"f16", "float16", {2, 2}, "003c00c1ff7b0100"},
      {"f32", "float32", {2, 3}, "3412c07f000000800000807f000080ffc216010000005040"},
      {"f64", "float64", {4}, "000000000000f03f0000000000000080182d4454fb2109400100000000000000"},
      {"scalar", "float32", {}, "0000f040"},
      {"empty", "int32", {0, 3}, ""},
  };
  return t;
}
