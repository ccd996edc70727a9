#include "ir/shape.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "ir/hash.h"

namespace ir {

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

void fail_too_large(const std::string& api, const std::string& shape) {
  throw std::invalid_argument(api + ": shape " + shape + " is too large: over " +
                              std::to_string(kMaxElements) +
                              " elements, the most an array may hold");
}

int64_t checked_numel(const std::string& api, const Shape& s) {
  for (int64_t d : s)
    if (d < 0) throw std::invalid_argument(api + ": negative dimension in " + to_string(s));
  // As numpy: the product of the non-zero dims must fit, even when a zero dim makes the count 0,
  // so contiguous strides (which skip zero dims) fit as well.
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : s) {
    if (d == 0) {
      zero = true;
      continue;
    }
    auto m = checked_mul(n, d);
    if (!m || *m > kMaxElements) fail_too_large(api, to_string(s));
    n = *m;
  }
  return zero ? 0 : n;
}

std::string to_string(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    r[i] = da == 1 ? db : da;
  }
  return r;
}

View View::contiguous(const Shape& s) { return View{s, contiguous_strides(s), 0, {}}; }

bool View::is_contiguous() const {
  if (offset != 0 || !mask.empty()) return false;
  auto cs = contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && strides[i] != cs[i]) return false;
  return true;
}

size_t View::hash() const {
  uint64_t h = hash_words(shape);
  h = hash_combine(h, -7);  // between the two lists: [a] ++ [b, c] differs from [a, b] ++ [c]
  h = hash_words(strides, h);
  h = hash_combine(h, offset);
  for (auto [lo, hi] : mask) h = hash_combine(hash_combine(h, lo), hi);
  return h;
}

View View::permute(const std::vector<int>& perm) const {
  View r;
  r.offset = offset;
  for (int p : perm) {
    r.shape.push_back(shape[p]);
    r.strides.push_back(strides[p]);
    if (!mask.empty()) r.mask.push_back(mask[p]);
  }
  return r;
}

View View::expand(const Shape& to) const {
  View r = *this;
  for (size_t i = 0; i < to.size(); ++i) {
    if (shape[i] == to[i]) continue;
    r.shape[i] = to[i];
    r.strides[i] = 0;
    if (!mask.empty())
      r.mask[i] = mask[i].second > mask[i].first ? std::pair<int64_t, int64_t>{0, to[i]}
                                                 : std::pair<int64_t, int64_t>{0, 0};
  }
  return r;
}

View View::shrink(const std::vector<std::pair<int64_t, int64_t>>& b) const {
  View r = *this;
  for (size_t i = 0; i < b.size(); ++i) {
    r.offset += b[i].first * strides[i];
    r.shape[i] = b[i].second - b[i].first;
    if (!mask.empty()) {
      int64_t lo = std::clamp<int64_t>(mask[i].first - b[i].first, 0, r.shape[i]);
      int64_t hi = std::clamp<int64_t>(mask[i].second - b[i].first, 0, r.shape[i]);
      r.mask[i] = {lo, std::max(lo, hi)};
    }
  }
  return r;
}

View View::flip(const std::vector<bool>& axes) const {
  View r = *this;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!axes[i] || shape[i] == 0) continue;
    r.offset += (shape[i] - 1) * strides[i];
    r.strides[i] = -strides[i];
    if (!mask.empty()) r.mask[i] = {shape[i] - mask[i].second, shape[i] - mask[i].first};
  }
  return r;
}

std::optional<View> View::window(int axis, int64_t out, int64_t window, int64_t stride,
                                 int64_t dilation) const {
  if (!mask.empty() && (mask[axis].first != 0 || mask[axis].second != shape[axis]))
    return std::nullopt;
  View r = *this;
  const int64_t s = strides[axis];
  r.shape[axis] = out;
  r.shape.insert(r.shape.begin() + axis + 1, window);
  r.strides[axis] = stride * s;
  r.strides.insert(r.strides.begin() + axis + 1, dilation * s);
  if (!r.mask.empty()) {
    r.mask[axis] = {0, out};
    r.mask.insert(r.mask.begin() + axis + 1, {0, window});
  }
  return r;
}

View View::pad(const std::vector<std::pair<int64_t, int64_t>>& w) const {
  View r = *this;
  if (r.mask.empty())
    for (int64_t d : shape) r.mask.push_back({0, d});
  for (size_t i = 0; i < w.size(); ++i) {
    r.offset -= w[i].first * strides[i];
    r.shape[i] += w[i].first + w[i].second;
    r.mask[i] = {r.mask[i].first + w[i].first, r.mask[i].second + w[i].first};
  }
  return r;
}

std::optional<View> View::reshape(const Shape& to) const {
  if (to == shape) return *this;
  if (numel(to) == 0 || numel(shape) == 0) return View::contiguous(to);
  // A view whose mask is empty on some axis reads nothing but padding: so does any reshape.
  // A rank-0 view has no axis to carry that empty mask (an empty mask means every index is
  // valid), so no view expresses it: nullopt, and the caller copies (a stacked pair indexed
  // down to one element under rune::jit read the other element).
  for (auto [lo, hi] : mask)
    if (hi <= lo) {
      if (to.empty()) return std::nullopt;
      return View{to, Shape(to.size(), 0), 0, Pairs(to.size(), {0, 0})};
    }
  // Masked dims may only pass through unchanged; drop masks that cover their whole dim.
  View base = *this;
  bool masked = false;
  if (!mask.empty()) {
    for (size_t i = 0; i < shape.size(); ++i)
      if (mask[i].first != 0 || mask[i].second != shape[i]) masked = true;
    if (!masked) base.mask.clear();
  }
  // Drop size-1 dims, then match groups of old dims to groups of new dims (numpy's nocopy
  // reshape): inside a group the old dims must be mutually contiguous.
  std::vector<int64_t> os, ost;
  std::vector<std::pair<int64_t, int64_t>> om;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) {
      os.push_back(shape[i]);
      ost.push_back(base.strides[i]);
      if (masked) om.push_back(base.mask[i]);
    }
  View r;
  r.shape = to;
  r.offset = base.offset;
  r.strides.assign(to.size(), 0);
  if (masked) r.mask.assign(to.size(), {0, 1});
  size_t oi = 0, ni = 0;
  while (ni < to.size() && to[ni] == 1) ++ni;
  while (oi < os.size()) {
    while (ni < to.size() && to[ni] == 1) ++ni;
    if (ni >= to.size()) return std::nullopt;
    size_t o0 = oi, n0 = ni;
    int64_t po = os[oi++], pn = to[ni++];
    while (po != pn) {
      if (po < pn) {
        if (oi >= os.size()) return std::nullopt;
        po *= os[oi++];
      } else {
        while (ni < to.size() && to[ni] == 1) ++ni;
        if (ni >= to.size()) return std::nullopt;
        pn *= to[ni++];
      }
    }
    for (size_t k = o0; k + 1 < oi; ++k)
      if (ost[k] != ost[k + 1] * os[k + 1]) return std::nullopt;
    if (masked) {
      // A masked dim must map to exactly one new dim of the same extent.
      bool any_partial = false;
      for (size_t k = o0; k < oi; ++k)
        if (om[k].first != 0 || om[k].second != os[k]) any_partial = true;
      if (any_partial && (oi - o0 != 1)) return std::nullopt;
      int64_t non1 = 0;
      for (size_t k = n0; k < ni; ++k) non1 += to[k] != 1;
      if (any_partial && non1 != 1) return std::nullopt;
    }
    int64_t st = ost[oi - 1];
    for (size_t k = ni; k-- > n0;) {
      if (to[k] == 1) continue;
      r.strides[k] = st;
      if (masked) r.mask[k] = (oi - o0 == 1) ? om[o0] : std::pair<int64_t, int64_t>{0, to[k]};
      st *= to[k];
    }
  }
  for (; ni < to.size(); ++ni)
    if (to[ni] != 1) return std::nullopt;
  return r;
}

std::pair<int64_t, int64_t> View::span() const {
  int64_t lo = offset, hi = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t a = 0, b = shape[i] - 1;
    if (!mask.empty()) a = mask[i].first, b = mask[i].second - 1;
    if (b < a || shape[i] == 0) return {offset, offset - 1};
    int64_t s0 = a * strides[i], s1 = b * strides[i];
    lo += std::min(s0, s1);
    hi += std::max(s0, s1);
  }
  return {lo, hi};
}

}  // namespace ir
