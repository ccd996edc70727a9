// Shapes and strided views. A View maps a multi-index over `shape` to an element offset
// `offset + sum(idx[d] * strides[d])`; where `mask` is present, indices outside
// [mask[d].first, mask[d].second) read as zero (padding) and are never dereferenced.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ir {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string to_string(const Shape& s);     // "[2, 3]"
Shape contiguous_strides(const Shape& s);  // C order, in elements
// numpy broadcasting of two shapes; nullopt when incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

struct View {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  std::vector<std::pair<int64_t, int64_t>> mask;  // empty: every index valid

  static View contiguous(const Shape& s);
  bool operator==(const View&) const = default;
  bool is_contiguous() const;  // C-contiguous, offset 0, unmasked
  size_t hash() const;

  View permute(const std::vector<int>& perm) const;
  View expand(const Shape& to) const;  // size-1 dims become `to`
  View shrink(const std::vector<std::pair<int64_t, int64_t>>& bounds) const;
  View flip(const std::vector<bool>& axes) const;
  View pad(const std::vector<std::pair<int64_t, int64_t>>& widths) const;
  // Reshape without copying where the strides allow it; nullopt otherwise.
  std::optional<View> reshape(const Shape& to) const;
  // Smallest and largest element offset reached by valid indices (for bounds and donation).
  std::pair<int64_t, int64_t> span() const;
};

}  // namespace ir
