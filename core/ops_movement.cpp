#include <algorithm>
#include <cmath>

#include "core/donation.h"
#include "core/prim.h"

namespace nx {

using namespace detail;
using ir::Op;

// Size checks (ir::checked_numel) name OpScope::current_api(), the op the user called: a shape
// too large for nx::add's broadcast raises "nx::add: ...", not "nx::broadcast_to: ...".

Tensor reshape(const Tensor& x, const Shape& shape) {
  OpScope scope_("nx::reshape", {&x});
  const std::string api = "nx::reshape";
  Shape s = shape;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) fail(api, "more than one -1 in " + ir::to_string(shape));
      infer = static_cast<int>(i);
    } else if (s[i] < 0) {
      fail(api, "negative dimension in " + ir::to_string(shape));
    }
  }
  auto mismatch = [&](const std::string& count) {
    fail(api, "cannot reshape " + x.describe() + " (" + std::to_string(x.size()) +
                  " elements) into " + ir::to_string(shape) + count);
  };
  if (infer >= 0) {
    // The other dims' product, overflow-checked: one past int64 exceeds x's size, so it cannot
    // divide it.
    int64_t known = 1;
    for (size_t i = 0; i < s.size(); ++i) {
      if (static_cast<int>(i) == infer) continue;
      auto m = ir::checked_mul(known, s[i]);
      if (!m) mismatch("");
      known = *m;
    }
    if (known == 0 || x.size() % known != 0) mismatch("");
    s[infer] = x.size() / known;
  }
  // The target's count, overflow-checked (a count that wraps could match x's and corrupt memory).
  int64_t count = ir::checked_numel(OpScope::current_api(), s);
  if (count != x.size()) mismatch(" (" + std::to_string(count) + " elements)");
  if (s == x.shape()) return identity_result(x);
  return prim(Op::Reshape, x.dtype(), s, {x}, ir::Arg{});
}

Tensor permute(const Tensor& x, const Axes& perm) {
  OpScope scope_("nx::permute", {&x});
  const std::string api = "nx::permute";
  if (static_cast<int>(perm.size()) != x.ndim())
    fail(api, "permutation of " + std::to_string(perm.size()) + " axes for " + x.describe());
  std::vector<int64_t> p;
  std::vector<bool> seen(perm.size(), false);
  Shape s;
  for (int a : perm) {
    int n = norm_axis(api, a, x.ndim(), x);
    if (seen[n])
      fail(api, "repeated axis " + std::to_string(a) + " in permutation of " + x.describe());
    seen[n] = true;
    p.push_back(n);
    s.push_back(x.shape()[n]);
  }
  bool identity = true;
  for (size_t i = 0; i < p.size(); ++i) identity &= p[i] == static_cast<int64_t>(i);
  if (identity) return identity_result(x);
  return prim(Op::Permute, x.dtype(), s, {x}, p);
}

Tensor transpose(const Tensor& x) {
  OpScope scope_("nx::transpose", {&x});
  Axes p(x.ndim());
  for (int i = 0; i < x.ndim(); ++i) p[i] = x.ndim() - 1 - i;
  return permute(x, p);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  OpScope scope_("nx::broadcast_to", {&x});
  const std::string api = "nx::broadcast_to";
  if (x.shape() == shape) return identity_result(x);
  ir::checked_numel(OpScope::current_api(), shape);
  if (shape.size() < x.shape().size())
    fail(api, "cannot broadcast " + x.describe() + " to " + ir::to_string(shape));
  size_t lead = shape.size() - x.shape().size();
  Shape padded(lead, 1);
  padded.insert(padded.end(), x.shape().begin(), x.shape().end());
  for (size_t i = 0; i < shape.size(); ++i)
    if (padded[i] != shape[i] && padded[i] != 1)
      fail(api, "cannot broadcast " + x.describe() + " to " + ir::to_string(shape));
  Tensor r = lead ? reshape(x, padded) : x;
  if (padded == shape) return r;
  return prim(Op::Expand, x.dtype(), shape, {r});
}

Tensor expand_dims(const Tensor& x, int axis) {
  OpScope scope_("nx::expand_dims", {&x});
  int n = x.ndim() + 1;
  int a = axis < 0 ? axis + n : axis;
  if (a < 0 || a >= n)
    fail("nx::expand_dims", "axis " + std::to_string(axis) + " out of range for " + x.describe());
  Shape s = x.shape();
  s.insert(s.begin() + a, 1);
  return reshape(x, s);
}
Tensor unsqueeze(const Tensor& x, int axis) {
  OpScope scope_("nx::unsqueeze", {&x});
  return expand_dims(x, axis);
}

Tensor squeeze(const Tensor& x, std::optional<int> axis) {
  OpScope scope_("nx::squeeze", {&x});
  Shape s;
  if (axis) {
    int a = norm_axis("nx::squeeze", *axis, x.ndim(), x);
    if (x.shape()[a] != 1)
      fail("nx::squeeze", "axis " + std::to_string(*axis) + " of " + x.describe() + " is not 1");
    s = x.shape();
    s.erase(s.begin() + a);
  } else {
    for (auto d : x.shape())
      if (d != 1) s.push_back(d);
  }
  return reshape(x, s);
}

Tensor flatten(const Tensor& x) {
  OpScope scope_("nx::flatten", {&x});
  return reshape(x, {x.size()});
}

Tensor flip(const Tensor& x, Axes axes) {
  OpScope scope_("nx::flip", {&x});
  auto a = norm_axes("nx::flip", axes, x);
  if (a.empty()) return identity_result(x);
  return prim(Op::Flip, x.dtype(), x.shape(), {x}, a);
}

static Tensor shrink(const Tensor& x, const ir::Pairs& bounds) {
  bool same = true;
  Shape s;
  for (size_t i = 0; i < bounds.size(); ++i) {
    same &= bounds[i].first == 0 && bounds[i].second == x.shape()[i];
    s.push_back(bounds[i].second - bounds[i].first);
  }
  if (same) return identity_result(x);
  return prim(Op::Shrink, x.dtype(), s, {x}, bounds);
}

static Tensor pad_zero(const Tensor& x, const ir::Pairs& widths) {
  bool none = true;
  Shape s = x.shape();
  for (size_t i = 0; i < widths.size(); ++i) {
    none &= widths[i].first == 0 && widths[i].second == 0;
    s[i] += widths[i].first + widths[i].second;
  }
  if (none) return identity_result(x);
  return prim(Op::Pad, x.dtype(), s, {x}, widths);
}

// A bool tensor of `shape` that is true inside x's region of a zero-padding by `widths`.
static Tensor pad_mask(const Shape& inner, const ir::Pairs& widths) {
  Tensor t = broadcast_to(const_int(DType::Bool, 1), inner);
  return pad_zero(t, widths);
}

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& widths, double value) {
  OpScope scope_("nx::pad", {&x});
  const std::string api = "nx::pad";
  if (static_cast<int>(widths.size()) != x.ndim())
    fail(api, std::to_string(widths.size()) + " pad widths for " + x.describe());
  for (auto [lo, hi] : widths)
    if (lo < 0 || hi < 0)
      fail(api, "negative pad width (" + std::to_string(lo) + ", " + std::to_string(hi) + ") for " +
                    x.describe());
  // The padded shape, overflow-checked dim by dim and then as a whole.
  Shape padded = x.shape();
  for (size_t i = 0; i < widths.size(); ++i) {
    auto d = ir::checked_add(padded[i], widths[i].first);
    if (d) d = ir::checked_add(*d, widths[i].second);
    if (!d)
      fail(api, "pad widths (" + std::to_string(widths[i].first) + ", " +
                    std::to_string(widths[i].second) + ") overflow axis " + std::to_string(i) +
                    " of " + x.describe());
    padded[i] = *d;
  }
  ir::checked_numel(OpScope::current_api(), padded);
  ir::Pairs w(widths.begin(), widths.end());
  Tensor p = pad_zero(x, w);
  if (value == 0 && !std::signbit(value)) return p;  // -0.0 pads with -0.0
  return where(pad_mask(x.shape(), w), p, scalar_like(x, value));
}

Tensor slice(const Tensor& x, const std::vector<Slice>& slices) {
  OpScope scope_("nx::slice", {&x});
  const std::string api = "nx::slice";
  if (static_cast<int>(slices.size()) > x.ndim())
    fail(api, std::to_string(slices.size()) + " slices for " + x.describe());
  Tensor r = x;
  for (size_t ax = 0; ax < slices.size(); ++ax) {
    const Slice& sl = slices[ax];
    int64_t n = x.shape()[ax];
    if (sl.step == 0) fail(api, "slice step 0 on axis " + std::to_string(ax));
    auto check = [&](int64_t v, const char* what) {
      if (v < -n || v > n)
        fail(api, std::string(what) + " " + std::to_string(v) + " out of range for axis " +
                      std::to_string(ax) + " of " + x.describe());
      return v < 0 ? v + n : v;
    };
    // numpy's slice.indices, in arithmetic that cannot overflow for any step (INT64_MIN has no
    // int64 negation, so the step's magnitude is a uint64). A negative step flips the axis and
    // slices the flipped axis forwards: numpy's start s0 (clamped to n - 1) and exclusive stop e0
    // (-1: before index 0) become n - 1 - s0 and n - 1 - e0.
    const uint64_t mag =
        sl.step > 0 ? static_cast<uint64_t>(sl.step) : 0 - static_cast<uint64_t>(sl.step);
    int64_t start, stop;
    if (sl.step > 0) {
      start = sl.start ? check(*sl.start, "start") : 0;
      stop = sl.stop ? check(*sl.stop, "stop") : n;
    } else {
      int64_t s0 = sl.start ? check(*sl.start, "start") : n - 1;
      int64_t e0 = sl.stop ? check(*sl.stop, "stop") : -1;
      s0 = std::min(s0, n - 1);
      start = n - 1 - s0;
      stop = n - 1 - e0;
      r = flip(r, {static_cast<int>(ax)});
    }
    stop = std::max(stop, start);
    // 0 <= stop - start <= n, so the count is at most n and, when it is above 1, the step is
    // below n: step * count below then stays under 2n.
    const int64_t count =
        stop == start ? 0
                      : static_cast<int64_t>((static_cast<uint64_t>(stop - start) - 1) / mag + 1);
    const int64_t step = count > 1 ? static_cast<int64_t>(mag) : 1;
    ir::Pairs b;
    for (int d = 0; d < r.ndim(); ++d) b.push_back({0, r.shape()[d]});
    if (step == 1 || count <= 1) {
      b[ax] = {start, start + count};
      r = shrink(r, b);
      continue;
    }
    // Every step-th element: take [start, start + step*count) (padding past the end), view it
    // as [count, step] and keep column 0.
    int64_t span = step * count;
    int64_t avail = n - start;
    b[ax] = {start, start + std::min(span, avail)};
    r = shrink(r, b);
    if (span > avail) {
      ir::Pairs w(r.ndim(), {0, 0});
      w[ax] = {0, span - avail};
      r = pad_zero(r, w);
    }
    Shape s = r.shape();
    s[ax] = count;
    s.insert(s.begin() + ax + 1, step);
    r = reshape(r, s);
    ir::Pairs c;
    for (int d = 0; d < r.ndim(); ++d) c.push_back({0, r.shape()[d]});
    c[ax + 1] = {0, 1};
    r = shrink(r, c);
    s.erase(s.begin() + ax + 1);
    r = reshape(r, s);
  }
  return r;
}

Tensor index(const Tensor& x, int axis, int64_t i) {
  OpScope scope_("nx::index", {&x});
  const std::string api = "nx::index";
  int a = norm_axis(api, axis, x.ndim(), x);
  int64_t n = x.shape()[a];
  if (i < -n || i >= n)
    fail(api, "index " + std::to_string(i) + " out of range for axis " + std::to_string(axis) +
                  " of " + x.describe());
  if (i < 0) i += n;
  ir::Pairs b;
  for (int d = 0; d < x.ndim(); ++d) b.push_back({0, x.shape()[d]});
  b[a] = {i, i + 1};
  Shape s = x.shape();
  s.erase(s.begin() + a);
  return reshape(shrink(x, b), s);
}

Tensor concatenate(const std::vector<Tensor>& xs, int axis) {
  OpScope scope_("nx::concatenate", xs);
  const std::string api = "nx::concatenate";
  if (xs.empty()) fail(api, "no tensors to concatenate");
  const Tensor& x0 = xs[0];
  int a = norm_axis(api, axis, x0.ndim(), x0);
  int64_t total = 0;
  for (const auto& x : xs) {
    require_same_dtype(api, x0, x);
    bool ok = x.ndim() == x0.ndim();
    for (int d = 0; ok && d < x.ndim(); ++d) ok = d == a || x.shape()[d] == x0.shape()[d];
    if (!ok)
      fail(api, "shapes " + x0.describe() + " and " + x.describe() + " differ off axis " +
                    std::to_string(axis));
    auto t = ir::checked_add(total, x.shape()[a]);
    if (!t) fail(api, "the extents along axis " + std::to_string(axis) + " overflow int64");
    total = *t;
  }
  Shape out = x0.shape();
  out[a] = total;
  ir::checked_numel(OpScope::current_api(), out);
  if (xs.size() == 1) return x0;
  // Each part padded to the full extent, selected by its own region's mask.
  Tensor r;
  int64_t before = 0;
  for (const auto& x : xs) {
    ir::Pairs w(x.ndim(), {0, 0});
    w[a] = {before, total - before - x.shape()[a]};
    before += x.shape()[a];
    Tensor p = pad_zero(x, w);
    r = r.defined() ? where(pad_mask(x.shape(), w), p, r) : p;
  }
  return r;
}

Tensor stack(const std::vector<Tensor>& xs, int axis) {
  OpScope scope_("nx::stack", xs);
  const std::string api = "nx::stack";
  if (xs.empty()) fail(api, "no tensors to stack");
  // Checked here so a bad axis names nx::stack, not the expand_dims it is built from.
  int a = norm_axis(api, axis, xs[0].ndim() + 1, xs[0]);
  std::vector<Tensor> u;
  for (const auto& x : xs) {
    if (x.shape() != xs[0].shape())
      fail(api, "shapes " + xs[0].describe() + " and " + x.describe() + " differ");
    u.push_back(expand_dims(x, a));
  }
  return concatenate(u, a);
}

Tensor contiguous(const Tensor& x) {
  OpScope scope_("nx::contiguous", {&x});
  return prim(Op::Copy, x.dtype(), x.shape(), {x});
}

}  // namespace nx
