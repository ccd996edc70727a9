// nx::resize (core/resize.h, docs/norm.md): the source indices and weights of each resized axis
// are computed here from the extents alone, with torch's formulas and float precision, and
// applied as nx ops: one nx::take per axis for nearest, two takes and a weighted sum for linear.
#include "core/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/donation.h"
#include "core/prim.h"
#include "core/window_internal.h"

namespace nx {

using namespace nx::detail;

namespace {

enum class Method { Nearest, NearestExact, Linear };

Method parse_method(const std::string& api, const std::string& m, size_t spatial) {
  if (m == "nearest") return Method::Nearest;
  if (m == "nearest-exact") return Method::NearestExact;
  if (m == "linear" || (m == "bilinear" && spatial == 2) || (m == "trilinear" && spatial == 3))
    return Method::Linear;
  const std::string dims =
      " for " + std::to_string(spatial) + " spatial dimension" + (spatial == 1 ? "" : "s");
  if (m == "bilinear" || m == "trilinear")
    fail(api, "method \"" + m + "\" needs " + (m == "bilinear" ? "2" : "3") +
                  " spatial dimensions; use \"linear\"" + dims);
  fail(api, "method \"" + m +
                "\" is not \"nearest\", \"nearest-exact\", \"linear\", \"bilinear\" (2-d) or "
                "\"trilinear\" (3-d)");
}

// torch's nearest_idx (aten/src/ATen/native/UpSample.h): the float32 scale in / out.
std::vector<double> nearest_index(int64_t in, int64_t out, bool exact) {
  std::vector<double> idx(static_cast<size_t>(out));
  const float s = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t d = 0; d < out; ++d) {
    int64_t i;
    if (!exact && out == 2 * in)
      i = d >> 1;
    else if (exact)
      i = static_cast<int64_t>(std::floor((static_cast<float>(d) + 0.5f) * s));
    else
      i = static_cast<int64_t>(std::floor(static_cast<float>(d) * s));
    idx[static_cast<size_t>(d)] = static_cast<double>(std::min(i, in - 1));
  }
  return idx;
}

struct LinearAxis {
  std::vector<double> i0, i1, w0, w1;
};

// torch's linear weights, align_corners=False (area_pixel_compute_source_index and
// guard_index_and_lambda), at precision T.
template <class T>
LinearAxis linear_axis(int64_t in, int64_t out) {
  LinearAxis r;
  const T s = static_cast<T>(in) / static_cast<T>(out);
  for (int64_t d = 0; d < out; ++d) {
    T p = s * (static_cast<T>(d) + static_cast<T>(0.5)) - static_cast<T>(0.5);
    if (p < 0) p = 0;
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(p)), in - 1);
    const T l1 = std::min(std::max(p - static_cast<T>(i0), static_cast<T>(0)), static_cast<T>(1));
    const T l0 = static_cast<T>(1) - l1;
    r.i0.push_back(static_cast<double>(i0));
    r.i1.push_back(static_cast<double>(i0 + (i0 < in - 1 ? 1 : 0)));
    r.w0.push_back(static_cast<double>(l0));
    r.w1.push_back(static_cast<double>(l1));
  }
  return r;
}

}  // namespace

Tensor resize(const Tensor& x, const Shape& size, const std::string& method,
              const std::string& layout) {
  OpScope scope_("nx::resize", {&x});
  const std::string api = "nx::resize";
  const std::vector<int> sp = spatial_axes(api, x, layout);
  const Method m = parse_method(api, method, sp.size());
  if (size.size() != sp.size())
    fail(api, "size " + list_text(size) + " has " + std::to_string(size.size()) +
                  " extents for the " + std::to_string(sp.size()) + " spatial dimensions of " +
                  x.describe());
  for (size_t i = 0; i < sp.size(); ++i) {
    if (size[i] < 1) fail(api, "size " + list_text(size) + " must be >= 1 in every dimension");
    if (x.shape()[sp[i]] == 0)
      fail(api, "cannot resize the empty spatial axis " + std::to_string(sp[i]) + " of " +
                    x.describe() + " to " + std::to_string(size[i]));
  }
  if (m == Method::Linear) require_float(api, x);
  const DType t = ir::is_half(x.dtype()) ? DType::Float32 : x.dtype();
  Tensor r = m == Method::Linear ? cast(x, t) : x;
  // From the last spatial axis to the first: torch's nesting of the linear sums.
  for (size_t k = sp.size(); k-- > 0;) {
    const int a = sp[k];
    const int64_t in = x.shape()[a], out = size[k];
    if (in == out) continue;
    if (m != Method::Linear) {
      r = take(r, create(DType::Int64, {out}, nearest_index(in, out, m == Method::NearestExact)),
               a);
      continue;
    }
    LinearAxis w = t == DType::Float64 ? linear_axis<double>(in, out) : linear_axis<float>(in, out);
    Shape ws(x.ndim(), 1);
    ws[a] = out;
    Tensor lo = take(r, create(DType::Int64, {out}, w.i0), a);
    Tensor hi = take(r, create(DType::Int64, {out}, w.i1), a);
    r = add(mul(lo, create(t, ws, w.w0)), mul(hi, create(t, ws, w.w1)));
  }
  return m == Method::Linear ? cast(r, x.dtype()) : identity_result(r);
}

}  // namespace nx
