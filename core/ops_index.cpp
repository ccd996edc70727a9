// Indexing (issue 18 "Indexing", docs/indexing.md): take, take_along_axis, gather, scatter_add /
// index_add, one_hot, dynamic_slice, dynamic_update_slice, topk. Every read by index is the one
// Gather primitive (ir/ops.def); everything else is a composition of existing primitives, so
// eager, compiled and every backend share the bits by construction.
//
// The out-of-range rule (JAX's): reads map a negative index i to i + n, then clamp to [0, n - 1];
// dynamic windows clamp their start to [0, n - size]; scatter_add maps negatives the same way
// and drops what is still outside [0, n). Every check runs before any primitive is applied, so a
// failing call changes nothing.
#include <string>

#include "core/donation.h"
#include "core/prim.h"

namespace nx {

using namespace detail;
using ir::Op;

namespace {

std::string dtype_name(DType t) { return std::string(ir::name(t)); }
std::string shape_text(const Shape& s) { return ir::to_string(s); }

bool is_integer(DType t) { return !ir::is_float(t) && t != DType::Bool; }

void require_index(const std::string& api, const Tensor& idx, const char* what = "index tensor") {
  if (!is_integer(idx.dtype()))
    fail(api, std::string(what) + " must be an integer dtype, got " + dtype_name(idx.dtype()));
}

Tensor i64(int64_t v) { return const_int(DType::Int64, v); }

// idx as int64 with negatives counted from the end: i < 0 -> i + n (numpy).
Tensor from_end(const Tensor& idx, int64_t n) {
  Tensor i = cast(idx, DType::Int64);
  return where(less(i, i64(0)), add(i, i64(n)), i);
}
// from_end, then clamped to [0, n - 1] (n > 0): the reads' rule.
Tensor clamped(const Tensor& idx, int64_t n) {
  return minimum(maximum(from_end(idx, n), i64(0)), i64(n - 1));
}

// The Gather primitive: out[i] = x[i with i[axis] := idx[i]], idx int64 in range, x of the
// result's shape except along axis.
Tensor gather_prim(const Tensor& x, const Tensor& idx, int axis) {
  return prim(Op::Gather, x.dtype(), idx.shape(), {x, idx}, int64_t{axis});
}

void require_nonempty_axis(const std::string& api, const Tensor& x, int axis, int64_t reads) {
  if (x.shape()[axis] == 0 && reads > 0)
    fail(api, "cannot index the empty axis " + std::to_string(axis) + " of " + x.describe());
}

// x.shape[:axis] ++ mid ++ x.shape[axis+1:].
Shape around(const Shape& x, int axis, const Shape& mid) {
  Shape s(x.begin(), x.begin() + axis);
  s.insert(s.end(), mid.begin(), mid.end());
  s.insert(s.end(), x.begin() + axis + 1, x.end());
  return s;
}

// idx (already int64) flattened to m positions along `axis` and broadcast over x's other axes:
// shape x.shape with axis -> m.
Tensor spread(const Tensor& idx, const Shape& xs, int axis) {
  int64_t m = idx.size();
  Shape one(xs.size(), 1), full = xs;
  one[axis] = m, full[axis] = m;
  return broadcast_to(reshape(idx, one), full);
}

Tensor take_impl(const std::string& api, const Tensor& x, const Tensor& idx, int axis) {
  if (x.ndim() == 0) fail(api, "needs at least one axis; got the 0-d " + x.describe());
  require_index(api, idx);
  int a = norm_axis(api, axis, x.ndim(), x);
  require_nonempty_axis(api, x, a, idx.size());
  Shape out = around(x.shape(), a, idx.shape());
  if (ir::numel(out) == 0) return full(x.dtype(), out, 0);
  int64_t n = x.shape()[a];
  Tensor picked = gather_prim(x, spread(clamped(idx, n), x.shape(), a), a);
  return reshape(picked, out);
}

// The window start of one axis: 0-d integer, negatives from the end, clamped to [0, n - size].
Tensor window_start(const Tensor& s, int64_t n, int64_t size) {
  return minimum(maximum(from_end(s, n), i64(0)), i64(n - size));
}

void check_starts(const std::string& api, const Tensor& x, const std::vector<Tensor>& starts) {
  if (static_cast<int>(starts.size()) != x.ndim())
    fail(api, std::to_string(starts.size()) + " start indices for the " + std::to_string(x.ndim()) +
                  "-d " + x.describe());
  for (size_t d = 0; d < starts.size(); ++d) {
    require_index(api, starts[d], ("start index " + std::to_string(d)).c_str());
    if (starts[d].ndim() != 0)
      fail(api, "start index " + std::to_string(d) + " must be a 0-d tensor, got " +
                    starts[d].describe());
  }
}

std::vector<Tensor> args_of(std::initializer_list<Tensor> head, const std::vector<Tensor>& rest) {
  std::vector<Tensor> v(head);
  v.insert(v.end(), rest.begin(), rest.end());
  return v;
}

}  // namespace

Tensor take(const Tensor& x, const Tensor& idx, int axis) {
  OpScope scope_("nx::take", {&x, &idx});
  return take_impl("nx::take", x, idx, axis);
}

Tensor gather(const Tensor& table, const Tensor& idx) {
  OpScope scope_("nx::gather", {&table, &idx});
  return take_impl("nx::gather", table, idx, 0);
}

Tensor take_along_axis(const Tensor& x, const Tensor& idx, int axis) {
  const std::string api = "nx::take_along_axis";
  OpScope scope_("nx::take_along_axis", {&x, &idx});
  if (x.ndim() == 0) fail(api, "needs at least one axis; got the 0-d " + x.describe());
  require_index(api, idx);
  if (idx.ndim() != x.ndim())
    fail(api, "index tensor must have the rank of x: " + idx.describe() + " for " + x.describe());
  int a = norm_axis(api, axis, x.ndim(), x);
  // The other axes broadcast together (numpy).
  Shape xs = x.shape(), is = idx.shape();
  for (int d = 0; d < x.ndim(); ++d) {
    if (d == a) continue;
    if (xs[d] != is[d] && xs[d] != 1 && is[d] != 1)
      fail(api, "index " + idx.describe() + " does not broadcast with " + x.describe() +
                    " outside axis " + std::to_string(a));
    xs[d] = is[d] = std::max(xs[d], is[d]);
    if (x.shape()[d] == 0 || idx.shape()[d] == 0) xs[d] = is[d] = 0;
  }
  require_nonempty_axis(api, x, a, ir::numel(is));
  if (ir::numel(is) == 0) return full(x.dtype(), is, 0);
  Tensor i = broadcast_to(clamped(idx, x.shape()[a]), is);
  return gather_prim(broadcast_to(x, xs), i, a);
}

Tensor scatter_add(const Tensor& x, const Tensor& idx, const Tensor& updates, int axis) {
  const std::string api = "nx::scatter_add";
  OpScope scope_("nx::scatter_add", {&x, &idx, &updates});
  if (x.ndim() == 0) fail(api, "needs at least one axis; got the 0-d " + x.describe());
  if (x.dtype() == DType::Bool) fail(api, "cannot add into the bool " + x.describe());
  require_index(api, idx);
  int a = norm_axis(api, axis, x.ndim(), x);
  require_same_dtype(api, x, updates);
  Shape want = around(x.shape(), a, idx.shape());
  if (updates.shape() != want)
    fail(api, "updates must have shape " + shape_text(want) + " (x " + x.describe() + ", index " +
                  idx.describe() + ", axis " + std::to_string(a) + "), got " + updates.describe());
  int64_t n = x.shape()[a], m = idx.size();
  if (m == 0 || x.size() == 0) return add(x, zeros_like(x));
  // Over the grid x.shape[:axis+1] ++ [m] ++ x.shape[axis+1:]: where(idx[t] == j[axis],
  // updates[.., t, ..], 0), summed over t (a reduction in the order fixed by the shape: the same
  // bits on every backend, no atomics). An index outside [0, n) matches no j: dropped.
  Shape grid = x.shape();
  grid.insert(grid.begin() + a + 1, m);
  Shape ucol = grid, icol(grid.size(), 1);
  ucol[a] = 1, icol[a + 1] = m;
  Tensor u = broadcast_to(reshape(updates, ucol), grid);
  Tensor i = broadcast_to(reshape(from_end(idx, n), icol), grid);
  Tensor j = iota(grid, a);
  Tensor s = reshape(sum(where(equal(i, j), u, zeros_like(u)), {a + 1}), x.shape());
  return add(x, cast(s, x.dtype()));
}

Tensor index_add(const Tensor& x, int axis, const Tensor& idx, const Tensor& updates) {
  return scatter_add(x, idx, updates, axis);
}

Tensor one_hot(const Tensor& labels, int64_t n, DType t) {
  const std::string api = "nx::one_hot";
  OpScope scope_("nx::one_hot", {&labels});
  require_index(api, labels, "labels");
  if (n < 0) fail(api, "number of classes must be >= 0, got " + std::to_string(n));
  Shape grid = labels.shape();
  grid.push_back(n);
  Tensor l = broadcast_to(expand_dims(cast(labels, DType::Int64), labels.ndim()), grid);
  return cast(equal(l, iota(grid, labels.ndim())), t);
}

Tensor dynamic_slice(const Tensor& x, const std::vector<Tensor>& starts, const Shape& sizes) {
  const std::string api = "nx::dynamic_slice";
  const std::vector<Tensor> args = args_of({x}, starts);  // outlives the scope, which keeps
  OpScope scope_("nx::dynamic_slice", args);              // pointers to its elements
  check_starts(api, x, starts);
  if (static_cast<int>(sizes.size()) != x.ndim())
    fail(api, "sizes " + shape_text(sizes) + " do not match the rank of " + x.describe());
  for (int d = 0; d < x.ndim(); ++d)
    if (sizes[d] < 0 || sizes[d] > x.shape()[d])
      fail(api, "sizes " + shape_text(sizes) + " do not fit in " + x.describe());
  if (ir::numel(sizes) == 0) return full(x.dtype(), sizes, 0);
  // One Gather per axis whose window is narrower than the axis, with indices start + [0, size).
  Tensor r = x;
  for (int d = 0; d < x.ndim(); ++d) {
    int64_t n = x.shape()[d];
    if (sizes[d] == n) continue;
    Tensor s = window_start(starts[d], n, sizes[d]);
    Shape at = r.shape();
    at[d] = sizes[d];
    Shape col(x.ndim(), 1);
    col[d] = sizes[d];
    Tensor i = broadcast_to(reshape(add(arange(sizes[d]), s), col), at);
    r = gather_prim(r, i, d);
  }
  return r.shape() == x.shape() ? contiguous(r) : r;
}

Tensor dynamic_update_slice(const Tensor& x, const Tensor& update,
                            const std::vector<Tensor>& starts) {
  const std::string api = "nx::dynamic_update_slice";
  const std::vector<Tensor> args = args_of({x, update}, starts);  // outlives the scope
  OpScope scope_("nx::dynamic_update_slice", args);
  check_starts(api, x, starts);
  require_same_dtype(api, x, update);
  if (update.ndim() != x.ndim())
    fail(api, "update " + update.describe() + " must have the rank of " + x.describe());
  for (int d = 0; d < x.ndim(); ++d)
    if (update.shape()[d] > x.shape()[d])
      fail(api, "update " + update.describe() + " does not fit in " + x.describe());
  if (update.size() == 0 || x.size() == 0) return contiguous(x);
  // out[i] = update[i - start] inside the window, x[i] outside: the update is read with one
  // Gather per axis (indices clamp(i - start, 0, size - 1), in range everywhere) and a mask
  // selects the window.
  Tensor r = update;
  Tensor inside;
  for (int d = 0; d < x.ndim(); ++d) {
    int64_t n = x.shape()[d], u = update.shape()[d];
    if (u == n) continue;
    Tensor s = window_start(starts[d], n, u);
    Shape col(x.ndim(), 1), at = r.shape();
    col[d] = n, at[d] = n;
    Tensor pos = reshape(arange(n), col);
    Tensor rel = sub(pos, s);
    Tensor i = broadcast_to(minimum(maximum(rel, i64(0)), i64(u - 1)), at);
    r = gather_prim(r, i, d);
    Tensor in_d = logical_and(greater_equal(rel, i64(0)), less(rel, i64(u)));
    inside = inside.defined() ? logical_and(inside, in_d) : in_d;
  }
  if (!inside.defined()) return contiguous(update);
  return where(broadcast_to(inside, x.shape()), r, x);
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int axis) {
  const std::string api = "nx::topk";
  OpScope scope_("nx::topk", {&x});
  if (x.ndim() == 0) fail(api, "needs at least one axis; got the 0-d " + x.describe());
  int a = norm_axis(api, axis, x.ndim(), x);
  int64_t n = x.shape()[a];
  if (k < 0 || k > n)
    fail(api, "k = " + std::to_string(k) + " is outside [0, " + std::to_string(n) + "] for " +
                  x.describe() + " along axis " + std::to_string(a));
  // Descending with ties by lower index: the stable ascending argsort of the flipped axis,
  // read backwards, puts equal elements in decreasing flipped position = increasing position.
  // NaN sorts last ascending, so it comes first here (the largest, as torch.topk).
  Tensor order = sub(i64(n - 1), flip(argsort(flip(x, {a}), a), {a}));
  std::vector<Slice> keep(x.ndim());
  keep[a] = Slice{0, k, 1};
  Tensor idx = contiguous(slice(order, keep));
  if (idx.size() == 0) return {full(x.dtype(), idx.shape(), 0), idx};
  return {gather_prim(x, idx, a), idx};
}

}  // namespace nx
