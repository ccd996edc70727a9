#include "codegen/grouped_view.h"

#include <stdexcept>

namespace codegen {

using namespace ir;

namespace {

View apply_movement(const View& v, NodeRef movement) {
  switch (movement->op) {
    case Op::Permute: {
      std::vector<int> perm(arg_ints(movement).begin(), arg_ints(movement).end());
      return v.permute(perm);
    }
    case Op::Expand:
      return v.expand(movement->shape);
    case Op::Shrink:
      return v.shrink(arg_pairs(movement));
    case Op::Pad:
      return v.pad(arg_pairs(movement));
    case Op::Flip: {
      std::vector<bool> axes(v.shape.size(), false);
      for (auto a : arg_ints(movement)) axes[a] = true;
      return v.flip(axes);
    }
    default:
      throw std::logic_error("schedule: not a view movement");
  }
}

// Within each group: drops extent-1 axes (one stays where the group has nothing else) and
// merges neighbours a, b whose strides chain (stride[a] == extent[b] * stride[b]), so a group
// a strided view expresses becomes one axis and the plain fast paths apply.
GroupedView simplified(const GroupedView& g) {
  GroupedView r;
  size_t at = 0;
  for (int n : g.groups) {
    std::vector<int64_t> ext, str;
    for (int i = 0; i < n; ++i, ++at) {
      const int64_t e = g.view.shape[at], s = g.view.strides[at];
      if (e == 1) continue;
      if (!ext.empty() && str.back() == e * s) {
        ext.back() *= e;
        str.back() = s;
        continue;
      }
      ext.push_back(e);
      str.push_back(s);
    }
    if (ext.empty()) ext = {1}, str = {0};
    r.view.shape.insert(r.view.shape.end(), ext.begin(), ext.end());
    r.view.strides.insert(r.view.strides.end(), str.begin(), str.end());
    r.groups.push_back(static_cast<int>(ext.size()));
  }
  r.view.offset = g.view.offset;
  return r;
}

}  // namespace

std::optional<View> view_through(const View& v, NodeRef m) {
  if (m->op == Op::Reshape) return v.reshape(m->shape);
  if (m->op == Op::Window) {
    const auto& a = arg_ints(m);
    return v.window(static_cast<int>(a[0]), m->shape[a[0]], a[1], a[2], a[3]);
  }
  return apply_movement(v, m);
}

GroupedView GroupedView::of(const View& v) { return {v, std::vector<int>(v.shape.size(), 1)}; }

Shape GroupedView::logical_shape() const {
  Shape s;
  size_t at = 0;
  for (int n : groups) {
    int64_t e = 1;
    for (int i = 0; i < n; ++i) e *= view.shape[at++];
    s.push_back(e);
  }
  return s;
}

bool GroupedView::plain() const {
  for (int n : groups)
    if (n != 1) return false;
  return true;
}

std::optional<GroupedView> GroupedView::through(NodeRef m) const {
  if (plain() || m->op != Op::Reshape) {
    // A plain view takes every movement op a strided view takes; a grouped one only those
    // below (a shrink or a window of a group is no longer a group).
    if (plain()) {
      if (auto v = view_through(view, m)) return of(*v);
      if (m->op != Op::Reshape) return std::nullopt;
    } else if (m->op == Op::Permute) {
      const auto& perm = arg_ints(m);
      std::vector<size_t> start(groups.size());
      for (size_t d = 1; d < groups.size(); ++d) start[d] = start[d - 1] + groups[d - 1];
      GroupedView r;
      r.view.offset = view.offset;
      for (int64_t p : perm) {
        for (int i = 0; i < groups[p]; ++i) {
          r.view.shape.push_back(view.shape[start[p] + i]);
          r.view.strides.push_back(view.strides[start[p] + i]);
        }
        r.groups.push_back(groups[p]);
      }
      return r;
    } else if (m->op == Op::Expand) {
      GroupedView r = *this;
      const Shape from = logical_shape();
      size_t at = 0;
      for (size_t d = 0; d < from.size(); at += groups[d], ++d) {
        if (from[d] == m->shape[d]) continue;
        if (groups[d] != 1) return std::nullopt;  // an extent-1 group is one axis (simplified)
        r.view.shape[at] = m->shape[d];
        r.view.strides[at] = 0;
      }
      return r;
    } else {
      return std::nullopt;
    }
  }
  if (!view.mask.empty()) return std::nullopt;
  // A reshape that only merges neighbouring logical axes (and inserts or drops extent-1 ones):
  // each new axis is the concatenation of whole groups.
  const Shape from = logical_shape(), &to = m->shape;
  for (int64_t e : from)
    if (e == 0) return std::nullopt;
  std::vector<size_t> start(groups.size() + 1);
  for (size_t d = 0; d < groups.size(); ++d) start[d + 1] = start[d] + groups[d];
  GroupedView r;
  r.view.offset = view.offset;
  size_t d = 0;
  for (int64_t want : to) {
    while (d < from.size() && from[d] == 1) ++d;  // extent-1 axes address nothing
    int64_t have = 1;
    size_t first = d;
    while (have < want && d < from.size()) have *= from[d++];
    if (have != want) return std::nullopt;
    if (want == 1) {
      r.view.shape.push_back(1);
      r.view.strides.push_back(0);
      r.groups.push_back(1);
      continue;
    }
    for (size_t a = start[first]; a < start[d]; ++a) {
      r.view.shape.push_back(view.shape[a]);
      r.view.strides.push_back(view.strides[a]);
    }
    r.groups.push_back(static_cast<int>(start[d] - start[first]));
  }
  while (d < from.size() && from[d] == 1) ++d;
  if (d != from.size()) return std::nullopt;
  return simplified(r);
}

std::vector<int64_t> GroupedView::offsets(int axis) const {
  size_t at = 0;
  for (int d = 0; d < axis; ++d) at += groups[d];
  std::vector<int64_t> off{0};
  // Row-major: the group's first axis varies slowest.
  for (int i = 0; i < groups[axis]; ++i) {
    const int64_t e = view.shape[at + i], s = view.strides[at + i];
    std::vector<int64_t> next;
    next.reserve(off.size() * static_cast<size_t>(e));
    for (int64_t o : off)
      for (int64_t j = 0; j < e; ++j) next.push_back(o + j * s);
    off.swap(next);
  }
  return off;
}

}  // namespace codegen
