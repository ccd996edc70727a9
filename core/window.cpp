// nx::reduce_window and the pools of nx::nn (core/window.h, docs/conv.md) as compositions of nx
// ops: padded with the reduction's identity, the windows viewed (ir::Op::Window, one per windowed
// axis, core/conv.cpp's helpers), the window offsets moved last, then one reduction over them.
// Max and Min pick the first extreme (a chain of selects over small windows, argmax / argmin
// and take_along_axis over large ones), so the gradient of a window reaches only that element.
#include "core/window.h"

#include <cmath>
#include <limits>

#include "core/donation.h"
#include "core/prim.h"
#include "core/window_internal.h"

namespace nx {

using namespace nx::detail;

namespace {

// Max and Min over windows of at most this many elements are a chain of selects (one kernel);
// larger windows go through argmax / argmin and take_along_axis (a chain's kernel and its
// gradient would grow with the window).
constexpr int64_t kChainTaps = 16;

// The identity of `op` for dtype t, as the pad value; nullopt when it is not a double.
std::optional<double> identity(WindowReduce op, DType t) {
  if (op == WindowReduce::Sum) return 0.0;
  const bool mx = op == WindowReduce::Max;
  if (ir::is_float(t)) return mx ? -INFINITY : INFINITY;
  switch (t) {
#define R(D, T)                                                       \
  case DType::D:                                                      \
    return mx ? static_cast<double>(std::numeric_limits<T>::lowest()) \
              : static_cast<double>(std::numeric_limits<T>::max());
    R(Int8, int8_t)
    R(Int16, int16_t)
    R(Int32, int32_t)
    R(UInt8, uint8_t)
    R(UInt16, uint16_t)
    R(UInt32, uint32_t)
#undef R
    case DType::Int64:
      if (mx) return static_cast<double>(std::numeric_limits<int64_t>::lowest());
      return std::nullopt;
    case DType::UInt64:
      if (mx) return 0.0;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

Tensor reduce_window_impl(const std::string& api, const Tensor& x, WindowReduce op,
                          const Shape& window, const WindowOptions& o) {
  if (x.dtype() == DType::Bool) fail(api, "bool operand " + x.describe());
  const size_t nd = x.ndim();
  if (window.size() != nd)
    fail(api, "window " + list_text(window) + " has " + std::to_string(window.size()) +
                  " extents for " + x.describe());
  for (int64_t w : window)
    if (w < 1) fail(api, "window " + list_text(window) + " must be >= 1 in every axis");
  auto stride = per_dim(api, "strides", o.strides, nd, 1, 1);
  auto dil = per_dim(api, "dilation", o.dilation, nd, 1, 1);
  std::vector<int64_t> in(x.shape().begin(), x.shape().end()), eff(nd), out(nd);
  for (size_t a = 0; a < nd; ++a) eff[a] = (window[a] - 1) * dil[a] + 1;
  auto pads = resolve_padding(api, o.padding, in, eff, stride);
  std::vector<int> axes;
  std::vector<int64_t> wk, ws, wd, wo;
  std::vector<std::pair<int64_t, int64_t>> wp;
  bool padded_any = false;
  for (size_t a = 0; a < nd; ++a) {
    const int64_t padded = in[a] + pads[a].first + pads[a].second;
    // An empty axis under a window of 1 has no windows (an empty batch); else every window
    // must fit.
    if (padded < eff[a] && !(padded == 0 && eff[a] == 1))
      fail(api, "the window " + list_text(window) + " (" + std::to_string(eff[a]) +
                    " after dilation along axis " + std::to_string(a) +
                    ") is larger than the padded input (" + std::to_string(padded) + ") of " +
                    x.describe());
    out[a] = padded < eff[a] ? 0 : (padded - eff[a]) / stride[a] + 1;
    if (window[a] == 1 && stride[a] == 1 && pads[a] == std::pair<int64_t, int64_t>{0, 0})
      continue;  // the identity along this axis
    axes.push_back(static_cast<int>(a));
    wk.push_back(window[a]), ws.push_back(stride[a]), wd.push_back(dil[a]), wo.push_back(out[a]);
    wp.push_back(pads[a]);
    padded_any |= pads[a].first > 0 || pads[a].second > 0;
  }
  auto id = identity(op, x.dtype());
  if (!id && padded_any)
    fail(api, "min over " + x.describe() + " with padding: the identity of int64 / uint64 is " +
                  "not representable");
  // [.., O_a, K_a, ..] with the K axes moved last and flattened: [out..., window elements].
  Tensor win = windows(pad_or_crop(x, axes, wp, id ? *id : 0), axes, wo, wk, ws, wd);
  Axes lead, tail;
  int pos = 0;
  size_t next = 0;
  int64_t taps = 1;
  for (size_t a = 0; a < nd; ++a) {
    lead.push_back(pos++);
    if (next < axes.size() && axes[next] == static_cast<int>(a)) {
      tail.push_back(pos++);
      taps *= wk[next++];
    }
  }
  lead.insert(lead.end(), tail.begin(), tail.end());
  Tensor vp = permute(win, lead);  // [out..., K...]
  if (op != WindowReduce::Sum && taps <= kChainTaps) {
    // Small windows: a chain of selects over the window's elements in row-major order, each
    // tap a strided view of x. `at` is the first extreme's tap: where a tap beats the best so
    // far (strictly greater, less for Min, or a NaN over a number) it takes its place. The
    // result is then the tap `at` names, picked by selects keyed on `at` alone: the gradient
    // of a window reaches only that element (argmax's rule), and the backward pass reads the
    // small `at` buffer instead of running the chain again.
    std::vector<Tensor> tap(static_cast<size_t>(taps));
    for (int64_t t = 0; t < taps; ++t) {
      Tensor v = vp;
      int64_t r = t;
      for (size_t i = wk.size(); i-- > 0;) {  // the last window axis first: the others stay put
        v = index(v, static_cast<int>(nd + i), r % wk[i]);
        r /= wk[i];
      }
      tap[static_cast<size_t>(t)] = v;
    }
    Tensor best = tap[0];
    Tensor at = cast(zeros_like(best), DType::UInt8);  // on x's device
    for (int64_t t = 1; t < taps; ++t) {
      const Tensor& v = tap[static_cast<size_t>(t)];
      Tensor beats = op == WindowReduce::Max ? greater(v, best) : less(v, best);
      if (is_float(x.dtype()))
        beats = logical_or(beats, logical_and(isnan(v), logical_not(isnan(best))));
      best = where(beats, v, best);
      at = where(beats, scalar_like(at, static_cast<double>(t)), at);
    }
    at = contiguous(at);  // one buffer, read by the selects below and by the gradient
    Tensor r = tap[static_cast<size_t>(taps - 1)];
    for (int64_t t = taps - 2; t >= 0; --t)
      r = where(equal(at, scalar_like(at, static_cast<double>(t))), tap[static_cast<size_t>(t)], r);
    // A materialisation point forward and backward (a Copy's cotangent is a Copy): the
    // gradient arriving here is a buffer before the window gradient reads it once per tap
    // (inlined, the layer above's input gradient was computed again for every tap).
    return contiguous(reshape(r, Shape(out.begin(), out.end())));
  }
  Shape flat(out.begin(), out.end());
  flat.push_back(taps);
  Tensor v = reshape(vp, flat);
  const int last = static_cast<int>(nd);
  if (op == WindowReduce::Sum) return cast(sum(v, {last}), x.dtype());
  Tensor at = op == WindowReduce::Max ? argmax(v, last, true) : argmin(v, last, true);
  return reshape(take_along_axis(v, at, last), Shape(out.begin(), out.end()));
}

}  // namespace

Tensor reduce_window(const Tensor& x, WindowReduce op, const Shape& window,
                     const WindowOptions& options) {
  OpScope scope_("nx::reduce_window", {&x});
  return reduce_window_impl("nx::reduce_window", x, op, window, options);
}

namespace detail {

std::vector<int> spatial_axes(const std::string& api, const Tensor& x, const std::string& layout) {
  const int nd = x.ndim();
  if (nd < 3)
    fail(api,
         "needs [N, C, spatial...] or [N, spatial..., C] with a spatial axis; got " + x.describe());
  std::vector<int> sp;
  if (layout.empty() || (static_cast<int>(layout.size()) == nd && layout[0] == 'N' &&
                         layout[1] == 'C' && layout.find('C', 2) == std::string::npos)) {
    for (int a = 2; a < nd; ++a) sp.push_back(a);
  } else if (static_cast<int>(layout.size()) == nd && layout[0] == 'N' && layout.back() == 'C' &&
             layout.find('C') == static_cast<size_t>(nd - 1)) {
    for (int a = 1; a < nd - 1; ++a) sp.push_back(a);
  } else {
    fail(api, "layout \"" + layout + "\" is not channels first (\"NC...\") or channels last " +
                  "(\"N...C\") for " + x.describe());
  }
  return sp;
}

}  // namespace detail

namespace nn {
namespace {

// The per-axis window options of a pool over the spatial axes `sp`.
WindowOptions pool_window(const std::string& api, const Tensor& x, const std::vector<int>& sp,
                          const Shape& window, const PoolOptions& o, Shape& full) {
  const size_t d = sp.size();
  if (window.size() != d)
    fail(api, "window " + list_text(window) + " has " + std::to_string(window.size()) +
                  " extents for the " + std::to_string(d) + " spatial dimensions of " +
                  x.describe());
  auto stride = o.strides.empty() ? std::vector<int64_t>(window.begin(), window.end())
                                  : per_dim(api, "strides", o.strides, d, 1, 1);
  auto dil = per_dim(api, "dilation", o.dilation, d, 1, 1);
  WindowOptions w;
  full.assign(x.ndim(), 1);
  w.strides.assign(x.ndim(), 1);
  w.dilation.assign(x.ndim(), 1);
  std::vector<int64_t> in(d), eff(d);
  for (size_t i = 0; i < d; ++i) {
    full[sp[i]] = window[i], w.strides[sp[i]] = stride[i], w.dilation[sp[i]] = dil[i];
    in[i] = x.shape()[sp[i]];
    eff[i] = (window[i] - 1) * dil[i] + 1;
  }
  auto pads = resolve_padding(api, o.padding, in, eff, stride);
  std::vector<std::pair<int64_t, int64_t>> all(x.ndim(), {0, 0});
  for (size_t i = 0; i < d; ++i) all[sp[i]] = pads[i];
  w.padding = Padding(all);
  return w;
}

}  // namespace

Tensor max_pool(const Tensor& x, const Shape& window, const PoolOptions& o) {
  OpScope scope_("nx::nn::max_pool", {&x});
  const std::string api = "nx::nn::max_pool";
  Shape full;
  WindowOptions w = pool_window(api, x, spatial_axes(api, x, o.layout), window, o, full);
  return reduce_window_impl(api, x, WindowReduce::Max, full, w);
}

Tensor avg_pool(const Tensor& x, const Shape& window, const PoolOptions& o) {
  OpScope scope_("nx::nn::avg_pool", {&x});
  const std::string api = "nx::nn::avg_pool";
  require_float(api, x);
  const auto sp = spatial_axes(api, x, o.layout);
  Shape full;
  WindowOptions w = pool_window(api, x, sp, window, o, full);
  const DType t = ir::is_half(x.dtype()) ? DType::Float32 : x.dtype();
  Tensor s = reduce_window_impl(api, cast(x, t), WindowReduce::Sum, full, w);
  if (o.count_include_pad) {
    int64_t n = 1;
    for (int64_t e : window) n *= e;
    return cast(div(s, scalar_like(s, static_cast<double>(n))), x.dtype());
  }
  // The number of a window's elements inside x: a product over the spatial axes of the count
  // along each, known from the shapes alone (a constant of the program).
  Shape cs(x.ndim(), 1);
  std::vector<double> counts{1};
  for (size_t i = 0; i < sp.size(); ++i) {
    const int a = sp[i];
    const int64_t n = x.shape()[a], lo = w.padding.pairs[a].first, outn = s.shape()[a];
    cs[a] = outn;
    std::vector<double> next;
    for (double c : counts)
      for (int64_t p = 0; p < outn; ++p) {
        int64_t inside = 0;
        for (int64_t j = 0; j < full[a]; ++j) {
          const int64_t q = p * w.strides[a] + j * w.dilation[a] - lo;
          inside += q >= 0 && q < n;
        }
        next.push_back(c * static_cast<double>(inside));
      }
    counts = std::move(next);
  }
  Tensor c = reshape(create(t, Shape{static_cast<int64_t>(counts.size())}, counts), cs);
  return cast(div(s, c), x.dtype());
}

Tensor global_avg_pool(const Tensor& x, const std::string& layout, bool keepdims) {
  OpScope scope_("nx::nn::global_avg_pool", {&x});
  const std::string api = "nx::nn::global_avg_pool";
  require_float(api, x);
  const auto sp = spatial_axes(api, x, layout);
  return mean(x, Axes(sp.begin(), sp.end()), keepdims);
}

}  // namespace nn
}  // namespace nx
