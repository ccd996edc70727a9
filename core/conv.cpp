// nx::conv and nx::conv_transpose (core/conv.h, docs/conv.md) as compositions of nx ops: the
// operands are permuted to channels first, the input dilated and padded, its windows viewed
// (one ir::Op::Window per spatial dimension: a strided view, no gather) and contracted with the
// kernel by one batched nx::matmul whose k index is (input channel, kernel offsets) row-major.
// Reverse mode takes the input's cotangent from a rule of its own (trace/custom_vjp.h): the
// transposed convolution, one product over the windows of the output's cotangent. The
// helpers the windowed reductions share (core/window.cpp) are here too (core/window_internal.h).
#include "core/conv.h"

#include <algorithm>
#include <stdexcept>

#include "core/donation.h"
#include "core/prim.h"
#include "core/window_internal.h"
#include "trace/custom_vjp.h"

namespace nx {
namespace detail {

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::vector<int64_t> per_dim(const std::string& api, const char* what,
                             const std::vector<int64_t>& v, size_t d, int64_t fill, int64_t min) {
  if (v.empty()) return std::vector<int64_t>(d, fill);
  if (v.size() != d)
    fail(api, std::string(what) + " " + list_text(v) + " has " + std::to_string(v.size()) +
                  " values for " + std::to_string(d) + " spatial dimensions");
  for (int64_t x : v)
    if (x < min)
      fail(api, std::string(what) + " " + list_text(v) + " must be >= " + std::to_string(min));
  return v;
}

std::vector<std::pair<int64_t, int64_t>> resolve_padding(const std::string& api, const Padding& p,
                                                         const std::vector<int64_t>& in,
                                                         const std::vector<int64_t>& eff,
                                                         const std::vector<int64_t>& stride) {
  const size_t d = in.size();
  if (p.mode.empty()) {
    if (p.pairs.size() != d)
      fail(api, "padding has " + std::to_string(p.pairs.size()) + " (lo, hi) pairs for " +
                    std::to_string(d) + " spatial dimensions");
    return p.pairs;
  }
  if (p.mode == "VALID") return std::vector<std::pair<int64_t, int64_t>>(d, {0, 0});
  if (p.mode != "SAME")
    fail(api, "padding \"" + p.mode + "\" is not \"SAME\", \"VALID\" or (lo, hi) pairs");
  // JAX's padtype_to_pads: out = ceil(in / stride), the total split with the odd one at the end.
  std::vector<std::pair<int64_t, int64_t>> r;
  for (size_t i = 0; i < d; ++i) {
    int64_t out = (in[i] + stride[i] - 1) / stride[i];
    int64_t total = std::max<int64_t>(0, (out - 1) * stride[i] + eff[i] - in[i]);
    r.push_back({total / 2, total - total / 2});
  }
  return r;
}

Tensor dilate(const Tensor& x, const std::vector<int>& axes, const std::vector<int64_t>& factors) {
  Tensor r = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t f = factors[i];
    if (f == 1) continue;
    const int a = axes[i];
    const int64_t n = r.shape()[a];
    // [.., n, ..] -> [.., n, 1, ..] padded to [.., n, f, ..] -> [.., n f, ..], cut to (n-1) f + 1.
    Shape s = r.shape();
    s.insert(s.begin() + a + 1, 1);
    std::vector<std::pair<int64_t, int64_t>> w(s.size(), {0, 0});
    w[a + 1] = {0, f - 1};
    Tensor p = pad(reshape(r, s), w);
    Shape flat = r.shape();
    flat[a] = n * f;
    std::vector<Slice> cut(a + 1);
    cut[a].stop = n == 0 ? 0 : (n - 1) * f + 1;
    r = slice(reshape(p, flat), cut);
  }
  return r;
}

Tensor pad_or_crop(const Tensor& x, const std::vector<int>& axes,
                   const std::vector<std::pair<int64_t, int64_t>>& widths, double value) {
  std::vector<std::pair<int64_t, int64_t>> grow(x.ndim(), {0, 0});
  bool any_grow = false, any_crop = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    grow[axes[i]] = {std::max<int64_t>(0, widths[i].first), std::max<int64_t>(0, widths[i].second)};
    any_grow |= widths[i].first > 0 || widths[i].second > 0;
    any_crop |= widths[i].first < 0 || widths[i].second < 0;
  }
  Tensor r = any_grow ? pad(x, grow, value) : x;
  if (!any_crop) return r;
  std::vector<Slice> cut(x.ndim());
  for (size_t i = 0; i < axes.size(); ++i) {
    const int a = axes[i];
    cut[a].start = std::max<int64_t>(0, -widths[i].first);
    cut[a].stop = r.shape()[a] - std::max<int64_t>(0, -widths[i].second);
  }
  return slice(r, cut);
}

Tensor windows(const Tensor& x, const std::vector<int>& axes, const std::vector<int64_t>& out,
               const std::vector<int64_t>& k, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& dilation) {
  Tensor r = x;
  // From the last axis to the first, so the positions of the axes not yet done stay as given.
  for (size_t i = axes.size(); i-- > 0;) {
    const int a = axes[i];
    Shape s = r.shape();
    s[a] = out[i];
    s.insert(s.begin() + a + 1, k[i]);
    if (stride[i] == k[i] && (dilation[i] == 1 || k[i] == 1)) {
      // Windows that tile the axis (a 2x2 pool of stride 2, a patch embedding): the first
      // out * k elements split as [out, k]. A plain view whose gradient is a pad and a
      // reshape, where a Window's adds the taps' pads.
      if (r.shape()[a] != out[i] * k[i]) {
        std::vector<Slice> cut(static_cast<size_t>(a) + 1);
        cut[a].stop = out[i] * k[i];
        r = slice(r, cut);
      }
      r = reshape(r, s);
      continue;
    }
    r = prim(ir::Op::Window, r.dtype(), s, {r},
             std::vector<int64_t>{a, k[i], stride[i], dilation[i]});
  }
  return r;
}

}  // namespace detail

using namespace nx::detail;

namespace {

// Where each canonical axis of the three operands is: lhs [N, C, spatial...], rhs [O, I,
// spatial...], out [N, C, spatial...], the spatial dimensions in the kernel's order.
struct Layout {
  std::vector<int> lhs, rhs, out;
};

// Positions of `a`, `b`, then the other letters of `spec` (each once), or fail.
std::pair<std::vector<int>, std::string> split_spec(const std::string& api, const std::string& spec,
                                                    char a, char b, int ndim,
                                                    const std::string& whole) {
  if (static_cast<int>(spec.size()) != ndim)
    fail(api, "layout \"" + whole + "\": spec \"" + spec + "\" has " + std::to_string(spec.size()) +
                  " letters for " + std::to_string(ndim) + "-d operands");
  std::vector<int> pos(2, -1);
  std::string spatial;
  for (int i = 0; i < ndim; ++i) {
    const char c = spec[i];
    if (std::count(spec.begin(), spec.end(), c) != 1)
      fail(api,
           "layout \"" + whole + "\": spec \"" + spec + "\" repeats '" + std::string(1, c) + "'");
    if (c == a)
      pos[0] = i;
    else if (c == b)
      pos[1] = i;
    else
      spatial += c;
  }
  if (pos[0] < 0 || pos[1] < 0)
    fail(api, "layout \"" + whole + "\": spec \"" + spec + "\" needs '" + std::string(1, a) +
                  "' and '" + std::string(1, b) + "'");
  return {pos, spatial};
}

Layout parse_layout(const std::string& api, const std::string& layout, int ndim) {
  const int d = ndim - 2;
  std::string lhs, rhs, out;
  if (layout.empty() || layout.find(',') == std::string::npos) {
    std::string sp;
    if (layout.empty()) {
      const std::string names = "DHW";
      for (int i = 0; i < d; ++i) sp += d <= 3 ? names[3 - d + i] : static_cast<char>('a' + i);
      lhs = "NC" + sp;
    } else {
      lhs = layout;
    }
    if (static_cast<int>(lhs.size()) != ndim)
      fail(api, "layout \"" + layout + "\" has " + std::to_string(lhs.size()) + " letters for " +
                    std::to_string(ndim) + "-d operands");
    if (lhs[0] == 'N' && lhs[1] == 'C')
      rhs = "OI" + lhs.substr(2);
    else if (lhs[0] == 'N' && lhs.back() == 'C')
      rhs = lhs.substr(1, d) + "IO";
    else
      fail(api, "layout \"" + layout +
                    "\" is neither channels first (\"NC...\") nor channels last (\"N...C\"); give "
                    "three specs \"lhs,rhs,out\" for another order");
    out = lhs;
  } else {
    size_t c1 = layout.find(','), c2 = layout.find(',', c1 + 1);
    if (c2 == std::string::npos || layout.find(',', c2 + 1) != std::string::npos)
      fail(api, "layout \"" + layout + "\" must be one spec or three \"lhs,rhs,out\"");
    lhs = layout.substr(0, c1);
    rhs = layout.substr(c1 + 1, c2 - c1 - 1);
    out = layout.substr(c2 + 1);
  }
  const std::string whole = layout.empty() ? lhs : layout;
  auto [lp, ls] = split_spec(api, lhs, 'N', 'C', ndim, whole);
  auto [rp, rs] = split_spec(api, rhs, 'O', 'I', ndim, whole);
  auto [op, os] = split_spec(api, out, 'N', 'C', ndim, whole);
  Layout l{lp, rp, op};
  for (char c : rs) {
    size_t li = lhs.find(c), oi = out.find(c);
    if (ls.find(c) == std::string::npos || os.find(c) == std::string::npos)
      fail(api, "layout \"" + whole + "\": the kernel's spatial dimension '" + std::string(1, c) +
                    "' is not a spatial dimension of the input and the output");
    l.lhs.push_back(static_cast<int>(li));
    l.rhs.push_back(static_cast<int>(rhs.find(c)));
    l.out.push_back(static_cast<int>(oi));
  }
  return l;
}

std::vector<int64_t> spatial_of(const Tensor& t) {
  return std::vector<int64_t>(t.shape().begin() + 2, t.shape().end());
}

// The convolution of channels-first operands xc [N, C, S...] and wc [O, I, K...] (conv's
// semantics, arguments already per dimension): [N / batch_groups, O, out...].
Tensor conv_channels_first(const std::string& api, const Tensor& xc, const Tensor& wc,
                           const std::vector<int64_t>& stride,
                           const std::vector<std::pair<int64_t, int64_t>>& pads,
                           const std::vector<int64_t>& ldil, const std::vector<int64_t>& rdil,
                           int64_t fg, int64_t bg, const std::string& shapes) {
  const int d = xc.ndim() - 2;
  const int64_t n = xc.shape()[0], c = xc.shape()[1], o = wc.shape()[0], i = wc.shape()[1];
  const auto s = spatial_of(xc), k = spatial_of(wc);
  // Sizes first, so a failed call computes nothing.
  std::vector<int64_t> out(d), eff(d);
  for (int a = 0; a < d; ++a) {
    eff[a] = k[a] == 0 ? 0 : (k[a] - 1) * rdil[a] + 1;
    const int64_t dilated = s[a] == 0 ? 0 : (s[a] - 1) * ldil[a] + 1;
    const int64_t padded = dilated + pads[a].first + pads[a].second;
    if (k[a] == 0)
      fail(api, "the kernel has no elements along spatial dimension " + std::to_string(a) + " (" +
                    shapes + ")");
    if (padded < eff[a])
      fail(api, "the window (" + std::to_string(eff[a]) + " after dilation) is larger than the " +
                    "padded input (" + std::to_string(padded) + ") along spatial dimension " +
                    std::to_string(a) + " (" + shapes + ")");
    out[a] = (padded - eff[a]) / stride[a] + 1;
  }
  (void)c;
  // Groups G on a leading axis: x [G, N', Cg, S...], w [G, Og, Cg, K...].
  const int64_t g = fg > 1 ? fg : bg;
  const int64_t og = o / g, cg = i;
  Shape xs = xc.shape(), ws = wc.shape();
  Tensor xg;
  if (bg > 1) {
    xs.erase(xs.begin());
    xs.insert(xs.begin(), {bg, n / bg});
    xg = reshape(xc, xs);
  } else {
    xs.erase(xs.begin() + 1);
    xs.insert(xs.begin() + 1, {fg, cg});
    Axes perm{1, 0};
    for (int a = 2; a < d + 3; ++a) perm.push_back(a);
    xg = permute(reshape(xc, xs), perm);
  }
  ws.erase(ws.begin());
  ws.insert(ws.begin(), {g, og});
  Tensor wg = reshape(wc, ws);
  std::vector<int> sp(d);
  for (int a = 0; a < d; ++a) sp[a] = 3 + a;
  xg = pad_or_crop(dilate(xg, sp, ldil), sp, pads, 0);
  // [G, N', Cg, O1, K1, ..., Od, Kd] -> [G, N', O1..Od, Cg, K1..Kd] -> [G, N' O.., Cg K..].
  Tensor win = windows(xg, sp, out, k, stride, rdil);
  Axes perm{0, 1};
  for (int a = 0; a < d; ++a) perm.push_back(3 + 2 * a);
  perm.push_back(2);
  for (int a = 0; a < d; ++a) perm.push_back(4 + 2 * a);
  int64_t positions = 1, taps = 1;
  for (int a = 0; a < d; ++a) positions *= out[a], taps *= k[a];
  const int64_t nb = xg.shape()[1];
  Tensor lhs = reshape(permute(win, perm), {g, nb * positions, cg * taps});
  Tensor rhs = permute(reshape(wg, {g, og, cg * taps}), {0, 2, 1});
  Tensor r = matmul(lhs, rhs);  // [G, N' O.., Og]
  Shape rs{g, nb};
  rs.insert(rs.end(), out.begin(), out.end());
  rs.push_back(og);
  Axes back{1, 0, d + 2};
  for (int a = 0; a < d; ++a) back.push_back(2 + a);
  Shape final{nb, o};
  final.insert(final.end(), out.begin(), out.end());
  return reshape(permute(reshape(r, rs), back), final);
}

// The cotangent of conv_channels_first's input xc (shape xs) for its output's cotangent g [N',
// O, out...]: the transposed convolution (JAX's _conv_general_dilated_transpose_lhs) -- g dilated
// by the stride, padded so that each input position sees every output position whose window
// covered it, its windows read with stride lhs_dilation and contracted with the kernel flipped
// along its spatial axes and its channel axes swapped within each group: one implicit GEMM, no
// window-shaped cotangent and no col2im. Each element is one fma chain over (o, k...), the
// output channel of the group outermost, the flipped kernel's offsets row-major and increasing
// inside it (the kernel's own offsets decreasing). Batch groups B become B feature groups whose
// outputs are the B blocks of the batch.
Tensor conv_input_cotangent(const std::string& api, const Shape& xs, const Tensor& wc,
                            const Tensor& g, const std::vector<int64_t>& stride,
                            const std::vector<std::pair<int64_t, int64_t>>& pads,
                            const std::vector<int64_t>& ldil, const std::vector<int64_t>& rdil,
                            int64_t fg, int64_t bg, const std::string& shapes) {
  const int d = static_cast<int>(xs.size()) - 2;
  const int64_t o = wc.shape()[0], i = wc.shape()[1];
  const int64_t groups = fg > 1 ? fg : bg, og = o / groups;
  const auto k = spatial_of(wc), p = spatial_of(g);
  std::vector<std::pair<int64_t, int64_t>> tpads(d);
  for (int a = 0; a < d; ++a) {
    const int64_t eff = (k[a] - 1) * rdil[a] + 1;
    const int64_t in_dilated = (xs[2 + a] - 1) * ldil[a] + 1;
    const int64_t out_dilated = (p[a] - 1) * stride[a] + 1;
    const int64_t before = eff - 1 - pads[a].first;
    tpads[a] = {before, in_dilated + eff - 1 - out_dilated - before};
  }
  // [G Og, I, K..] -> [G, Og, I, K..] -> [G, I, Og, K..] -> [G I, Og, K..], flipped.
  Shape split{groups, og, i};
  split.insert(split.end(), k.begin(), k.end());
  Axes swap{0, 2, 1}, spatial;
  for (int a = 0; a < d; ++a) swap.push_back(3 + a), spatial.push_back(2 + a);
  Shape merged{groups * i, og};
  merged.insert(merged.end(), k.begin(), k.end());
  Tensor wt = flip(reshape(permute(reshape(wc, split), swap), merged), spatial);
  Tensor dx = conv_channels_first(api, g, wt, ldil, tpads, stride, rdil, groups, 1, shapes);
  if (bg == 1) return dx;
  // [N / B, B I, S..] -> [N / B, B, I, S..] -> [B, N / B, I, S..] -> [N, I, S..].
  Shape blocks{xs[0] / bg, bg, i};
  blocks.insert(blocks.end(), xs.begin() + 2, xs.end());
  Axes outer{1, 0};
  for (int a = 2; a < d + 3; ++a) outer.push_back(a);
  return reshape(permute(reshape(dx, blocks), outer), xs);
}

// conv_channels_first whose input cotangent is conv_input_cotangent (rune::grad and the
// like: trace/custom_vjp.h); the kernel's cotangent is the composition's own (the windows of xc,
// transposed, against the output's cotangent: an implicit GEMM too). Empty operands keep the
// composition's rules.
Tensor conv_with_vjp(const std::string& api, const Tensor& xc, const Tensor& wc,
                     const std::vector<int64_t>& stride,
                     const std::vector<std::pair<int64_t, int64_t>>& pads,
                     const std::vector<int64_t>& ldil, const std::vector<int64_t>& rdil, int64_t fg,
                     int64_t bg, const std::string& shapes) {
  auto forward = [=](const std::vector<Tensor>& in) {
    return conv_channels_first(api, in[0], in[1], stride, pads, ldil, rdil, fg, bg, shapes);
  };
  if (xc.size() == 0 || wc.size() == 0) return forward({xc, wc});
  const Shape xs = xc.shape();
  auto backward = [=](const std::vector<Tensor>& in, const Tensor& g) {
    return std::vector<Tensor>{
        conv_input_cotangent(api, xs, in[1], g, stride, pads, ldil, rdil, fg, bg, shapes)};
  };
  return rune::detail::custom_vjp({xc, wc}, {true, false}, forward, backward);
}

Axes inverse(const std::vector<int>& p) {
  Axes r(p.size());
  for (size_t i = 0; i < p.size(); ++i) r[p[i]] = static_cast<int>(i);
  return r;
}

void check_operands(const std::string& api, const Tensor& x, const Tensor& w) {
  require_float(api, x);
  require_same_dtype(api, x, w);
  if (x.ndim() < 3 || x.ndim() != w.ndim())
    fail(api, "input " + x.describe() + " and kernel " + w.describe() +
                  " must have the same rank, at least 3 (batch, channels, spatial...)");
}

}  // namespace

Tensor conv(const Tensor& x, const Tensor& w, const ConvOptions& o) {
  OpScope scope_("nx::conv", {&x, &w});
  const std::string api = "nx::conv";
  check_operands(api, x, w);
  const Layout l = parse_layout(api, o.layout, x.ndim());
  const size_t d = x.ndim() - 2;
  const std::string shapes = "input " + x.describe() + ", kernel " + w.describe() +
                             (o.layout.empty() ? "" : ", layout \"" + o.layout + "\"");
  const int64_t n = x.shape()[l.lhs[0]], c = x.shape()[l.lhs[1]];
  const int64_t oc = w.shape()[l.rhs[0]], ic = w.shape()[l.rhs[1]];
  const int64_t fg = o.feature_groups, bg = o.batch_groups;
  if (fg < 1 || bg < 1)
    fail(api, "feature_groups " + std::to_string(fg) + " and batch_groups " + std::to_string(bg) +
                  " must be >= 1");
  if (fg > 1 && bg > 1)
    fail(api, "feature_groups " + std::to_string(fg) + " and batch_groups " + std::to_string(bg) +
                  ": at most one may exceed 1");
  if (c % fg != 0)
    fail(api, "feature_groups " + std::to_string(fg) + " does not divide the input's " +
                  std::to_string(c) + " channels (" + shapes + ")");
  if (ic * fg != c)
    fail(api, "the kernel's " + std::to_string(ic) + " input channels times feature_groups " +
                  std::to_string(fg) + " must equal the input's " + std::to_string(c) +
                  " channels (" + shapes + ")");
  if (oc % fg != 0)
    fail(api, "feature_groups " + std::to_string(fg) + " does not divide the kernel's " +
                  std::to_string(oc) + " output channels (" + shapes + ")");
  if (n % bg != 0 || oc % bg != 0)
    fail(api, "batch_groups " + std::to_string(bg) + " must divide the input's batch " +
                  std::to_string(n) + " and the kernel's " + std::to_string(oc) +
                  " output channels (" + shapes + ")");
  auto stride = per_dim(api, "strides", o.strides, d, 1, 1);
  auto ldil = per_dim(api, "lhs_dilation", o.lhs_dilation, d, 1, 1);
  auto rdil = per_dim(api, "rhs_dilation", o.rhs_dilation, d, 1, 1);
  std::vector<int64_t> in(d), eff(d);
  for (size_t a = 0; a < d; ++a) {
    in[a] = x.shape()[l.lhs[2 + a]];
    const int64_t k = w.shape()[l.rhs[2 + a]];
    eff[a] = k == 0 ? 0 : (k - 1) * rdil[a] + 1;
  }
  auto pads = resolve_padding(api, o.padding, in, eff, stride);
  Tensor r = conv_with_vjp(api, permute(x, Axes(l.lhs.begin(), l.lhs.end())),
                           permute(w, Axes(l.rhs.begin(), l.rhs.end())), stride, pads, ldil, rdil,
                           fg, bg, shapes);
  return permute(r, inverse(l.out));
}

Tensor conv_transpose(const Tensor& x, const Tensor& w, const ConvTransposeOptions& o) {
  OpScope scope_("nx::conv_transpose", {&x, &w});
  const std::string api = "nx::conv_transpose";
  check_operands(api, x, w);
  const int nd = x.ndim();
  const size_t d = nd - 2;
  // Channels first or last; the kernel [Cin, Cout/G, k...] or [k..., Cin, Cout/G].
  bool last = false;
  if (!o.layout.empty()) {
    const std::string& s = o.layout;
    if (static_cast<int>(s.size()) != nd || s[0] != 'N' ||
        std::count(s.begin(), s.end(), 'C') != 1 || (s[1] != 'C' && s.back() != 'C'))
      fail(api, "layout \"" + s + "\" must be channels first (\"NC...\") or channels last " +
                    "(\"N...C\") with " + std::to_string(nd) + " letters");
    last = s[1] != 'C';
  }
  Axes xperm{0}, wperm;
  if (last) {
    xperm.push_back(nd - 1);
    wperm = {nd - 2, nd - 1};
    for (int a = 1; a <= static_cast<int>(d); ++a) xperm.push_back(a);
    for (int a = 0; a < static_cast<int>(d); ++a) wperm.push_back(a);
  } else {
    for (int a = 1; a < nd; ++a) xperm.push_back(a);
    for (int a = 0; a < nd; ++a) wperm.push_back(a);
  }
  Tensor xc = permute(x, xperm), wc = permute(w, wperm);  // [N, Cin, S..], [Cin, Og, K..]
  const std::string shapes = "input " + x.describe() + ", kernel " + w.describe();
  const int64_t g = o.groups, cin = xc.shape()[1];
  if (g < 1) fail(api, "groups " + std::to_string(g) + " must be >= 1");
  if (cin % g != 0)
    fail(api, "groups " + std::to_string(g) + " does not divide the input's " +
                  std::to_string(cin) + " channels (" + shapes + ")");
  if (wc.shape()[0] != cin)
    fail(api, "the kernel's " + std::to_string(wc.shape()[0]) +
                  " input channels must equal the input's " + std::to_string(cin) + " (" + shapes +
                  ")");
  auto stride = per_dim(api, "strides", o.strides, d, 1, 1);
  auto padding = per_dim(api, "padding", o.padding, d, 0, 0);
  auto outpad = per_dim(api, "output_padding", o.output_padding, d, 0, 0);
  auto dil = per_dim(api, "dilation", o.dilation, d, 1, 1);
  const auto s = spatial_of(xc), k = spatial_of(wc);
  std::vector<std::pair<int64_t, int64_t>> pads(d);
  for (size_t a = 0; a < d; ++a) {
    if (outpad[a] >= stride[a] && outpad[a] >= dil[a])
      fail(api, "output_padding " + list_text(outpad) + " must be smaller than the stride " +
                    list_text(stride) + " or the dilation " + list_text(dil));
    if (k[a] == 0) fail(api, "the kernel has no elements (" + shapes + ")");
    const int64_t full = (s[a] - 1) * stride[a] + dil[a] * (k[a] - 1) + 1;
    if (s[a] == 0 || full - 2 * padding[a] + outpad[a] <= 0)
      fail(api, "padding " + list_text(padding) + " leaves no output along spatial dimension " +
                    std::to_string(a) + " (" + shapes + ")");
    pads[a] = {dil[a] * (k[a] - 1) - padding[a], dil[a] * (k[a] - 1) - padding[a] + outpad[a]};
  }
  // The kernel as a convolution's: [G, Cg, Og, K..] -> [G, Og, Cg, K..] -> [G Og, Cg, K..],
  // flipped along every spatial axis.
  const int64_t cg = cin / g, og = wc.shape()[1];
  Shape ws{g, cg, og};
  ws.insert(ws.end(), k.begin(), k.end());
  Axes swap{0, 2, 1};
  Axes spatial;
  for (int a = 3; a < static_cast<int>(d) + 3; ++a) swap.push_back(a);
  for (int a = 2; a < nd; ++a) spatial.push_back(a);
  Shape cs{g * og, cg};
  cs.insert(cs.end(), k.begin(), k.end());
  Tensor kc = flip(reshape(permute(reshape(wc, ws), swap), cs), spatial);
  Tensor r =
      conv_with_vjp(api, xc, kc, std::vector<int64_t>(d, 1), pads, stride, dil, g, 1, shapes);
  return last ? permute(r, inverse(std::vector<int>(xperm.begin(), xperm.end()))) : r;
}

}  // namespace nx
