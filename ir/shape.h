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

int64_t numel(const Shape& s);             // unchecked: for shapes that passed checked_numel
std::string to_string(const Shape& s);     // "[2, 3]"
Shape contiguous_strides(const Shape& s);  // C order, in elements
// numpy broadcasting of two shapes; nullopt when incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// ---- Overflow-safe size arithmetic ----
// A shape is valid when every dim is >= 0 and its element count, times the largest itemsize
// (8 bytes), fits in int64. Every byte count, contiguous stride, offset and span computed from a
// valid shape (or from a view of a valid shape) then fits in int64 too, whatever the dtype, so
// no later layer has to check again. Every creation, view and movement op checks the shape it
// makes with checked_numel (eagerly and while tracing in rune::jit: both run the same op code).
constexpr int64_t kMaxElements = INT64_MAX / 8;
// a * b and a + b, or nullopt where the result does not fit in int64.
std::optional<int64_t> checked_mul(int64_t a, int64_t b);
std::optional<int64_t> checked_add(int64_t a, int64_t b);
// The element count of `s`; raises std::invalid_argument "<api>: ..." naming the shape when a dim
// is negative or the count exceeds kMaxElements.
int64_t checked_numel(const std::string& api, const Shape& s);
// Raises checked_numel's "too large" error for a shape described by `shape` (for a count
// computed in a wider type before it becomes a dim, e.g. arange's in float64).
[[noreturn]] void fail_too_large(const std::string& api, const std::string& shape);

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
  // Axis `axis` as [out, window] (ir::Op::Window): strides stride * s and dilation * s. nullopt
  // where that axis is masked (a padded axis's windows are no box of valid indices).
  std::optional<View> window(int axis, int64_t out, int64_t window, int64_t stride,
                             int64_t dilation) const;
  // Reshape without copying where the strides allow it; nullopt otherwise.
  std::optional<View> reshape(const Shape& to) const;
  // Smallest and largest element offset reached by valid indices (for bounds and donation).
  std::pair<int64_t, int64_t> span() const;
};

}  // namespace ir
