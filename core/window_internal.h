// Internal helpers shared by core/conv.cpp, core/window.cpp and core/resize.cpp: windows as
// strided views. Not part of the public API.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/conv.h"

namespace nx::detail {

// x with interior zeros: along each axis a with factor d > 1, d - 1 zeros between neighbours
// (extent (n - 1) d + 1, 0 for n == 0).
Tensor dilate(const Tensor& x, const std::vector<int>& axes, const std::vector<int64_t>& factors);
// x padded by (lo, hi) on each axis of `axes` with `value`; negative widths crop.
Tensor pad_or_crop(const Tensor& x, const std::vector<int>& axes,
                   const std::vector<std::pair<int64_t, int64_t>>& widths, double value);
// x with each axis axes[i] (increasing) replaced by the two axes [out[i], k[i]]:
// r[..., o, j, ...] = x[..., o * stride[i] + j * dilation[i], ...]. Every such index must lie
// inside x (the caller checked). One ir::Op::Window per axis: a strided view of x (of a copy
// where x is padded), whose gradient adds each window's entries back (trace/vjp.cpp unwindow).
Tensor windows(const Tensor& x, const std::vector<int>& axes, const std::vector<int64_t>& out,
               const std::vector<int64_t>& k, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& dilation);
// One value per spatial dimension: `v` itself, or `d` copies of `fill` when empty; raises
// naming `api` and `what` when the size is not d or a value is below `min`.
std::vector<int64_t> per_dim(const std::string& api, const char* what,
                             const std::vector<int64_t>& v, size_t d, int64_t fill, int64_t min);
// The (lo, hi) pairs of `p` for inputs of extent `in` (undilated, as JAX's padtype_to_pads),
// effective window extents `eff` and strides; raises naming `api` for a bad mode or count.
std::vector<std::pair<int64_t, int64_t>> resolve_padding(const std::string& api, const Padding& p,
                                                         const std::vector<int64_t>& in,
                                                         const std::vector<int64_t>& eff,
                                                         const std::vector<int64_t>& stride);
// The spatial axes of x (at least 3-d) under `layout`: "" or channels first ("NC..."), channels
// last ("N...C"); raises naming `api` for another layout or too few axes. The pools' and
// nx::resize's layouts.
std::vector<int> spatial_axes(const std::string& api, const Tensor& x, const std::string& layout);
// "[1, 2, 3]" for messages.
std::string list_text(const std::vector<int64_t>& v);

}  // namespace nx::detail
