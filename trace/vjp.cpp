#include "trace/vjp.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "ir/full.h"
#include "trace/custom_vjp.h"

namespace rune {

using ir::NodeRef;
using ir::Op;
using ir::Shape;

namespace {

// Tensor-level node builders mirroring the nx ops (operands already share shape and dtype).
NodeRef like(NodeRef x, double v) { return ir::full(x->dtype, v, x->shape); }
NodeRef bin(Op op, NodeRef a, NodeRef b) { return ir::make(op, a->dtype, a->shape, {a, b}); }
NodeRef add(NodeRef a, NodeRef b) { return bin(Op::Add, a, b); }
NodeRef sub(NodeRef a, NodeRef b) { return bin(Op::Sub, a, b); }
NodeRef mul(NodeRef a, NodeRef b) { return bin(Op::Mul, a, b); }
NodeRef div(NodeRef a, NodeRef b) { return bin(Op::Div, a, b); }
NodeRef un(Op op, NodeRef a) { return ir::make(op, a->dtype, a->shape, {a}); }
NodeRef neg(NodeRef a) { return un(Op::Neg, a); }
NodeRef cmp(Op op, NodeRef a, NodeRef b) { return ir::make(op, ir::DType::Bool, a->shape, {a, b}); }
NodeRef where(NodeRef c, NodeRef a, NodeRef b) {
  return ir::make(Op::Where, a->dtype, a->shape, {c, a, b});
}
NodeRef cast(NodeRef a, ir::DType t) {
  return a->dtype == t ? a : ir::make(Op::Cast, t, a->shape, {a});
}
NodeRef expand(NodeRef g, const Shape& shape) {
  return g->shape == shape ? g : ir::make(Op::Expand, g->dtype, shape, {g});
}
NodeRef reshape(NodeRef g, const Shape& shape) {
  return g->shape == shape ? g : ir::make(Op::Reshape, g->dtype, shape, {g});
}
NodeRef reduce_sum(NodeRef g, const std::vector<int64_t>& axes) {
  if (axes.empty()) return g;
  Shape s = g->shape;
  for (auto a : axes) s[a] = 1;
  return ir::make(Op::ReduceSum, g->dtype, s, {g}, axes);
}
// Sums g over the axes where `shape` has extent 1 and g does not (undoing a broadcast).
NodeRef sum_to(NodeRef g, const Shape& shape) {
  std::vector<int64_t> axes;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == 1 && g->shape[d] != 1) axes.push_back(static_cast<int64_t>(d));
  return reduce_sum(g, axes);
}

// x with its last two axes swapped (a view).
NodeRef swap_last(NodeRef x) {
  size_t nd = x->shape.size();
  std::vector<int64_t> perm(nd);
  for (size_t d = 0; d < nd; ++d) perm[d] = static_cast<int64_t>(d);
  std::swap(perm[nd - 1], perm[nd - 2]);
  Shape s = x->shape;
  std::swap(s[nd - 1], s[nd - 2]);
  return ir::make(Op::Permute, x->dtype, s, {x}, perm);
}
NodeRef dot(NodeRef a, NodeRef b) {
  Shape s = a->shape;
  s.back() = b->shape.back();
  return ir::make(Op::Dot, a->dtype, s, {a, b});
}

// x flipped along its last axis (a view).
NodeRef flip_last(NodeRef x) {
  return ir::make(Op::Flip, x->dtype, x->shape, {x},
                  std::vector<int64_t>{static_cast<int64_t>(x->shape.size()) - 1});
}
// The cotangent of y = sort(x) (last axis): each g[..., i] goes back to x's position
// argsort(x)[..., i], as sum over i of where(argsort[..., i] == j, g[..., i], 0) for each j:
// a one-hot comparison with an Iota over [..., L (i), L (j)], reduced over i.
NodeRef unsort(NodeRef x, NodeRef g) {
  size_t nd = x->shape.size();
  NodeRef idx = ir::make(Op::Argsort, ir::DType::Int64, x->shape, {x});
  Shape col = x->shape, grid = x->shape;
  col.push_back(1);
  grid.push_back(x->shape.back());
  NodeRef at = expand(reshape(idx, col), grid);
  NodeRef j = ir::make(Op::Iota, ir::DType::Int64, grid, {}, static_cast<int64_t>(nd));
  NodeRef gi = expand(reshape(g, col), grid);
  NodeRef picked = where(cmp(Op::CmpEq, at, j), gi, like(gi, 0));
  return reshape(reduce_sum(picked, {static_cast<int64_t>(nd) - 1}), x->shape);
}

// ---- issue 18 "Indexing": the cotangent of Gather ----
// out = Gather(x, idx) along `axis` reads x at i with i[axis] := clamp(idx[i], 0, n - 1); each
// g[i] goes back to that element: dx[j] = sum over t of where(clamp(idx)[.., t, ..] == j[axis],
// g[.., t, ..], 0), a one-hot comparison over x.shape[:axis+1] ++ [m] ++ x.shape[axis+1:]
// (m = idx.shape[axis]) reduced over the m axis, as nx::scatter_add (core/ops_index.cpp). The
// clamp is the primitive's own, so a clamped read sends its gradient to the clamped element.
// Deterministic: a reduction's fixed order, no atomics.
NodeRef ungather(NodeRef x, NodeRef idx, NodeRef g, int64_t axis) {
  const int64_t m = idx->shape[axis];
  Shape grid = x->shape, col = idx->shape;
  grid.insert(grid.begin() + axis + 1, m);
  col.insert(col.begin() + axis, 1);
  NodeRef hi = ir::full(ir::DType::Int64, static_cast<double>(x->shape[axis] - 1), idx->shape);
  NodeRef clamped = bin(Op::Min, bin(Op::Max, idx, ir::full(ir::DType::Int64, 0, idx->shape)), hi);
  NodeRef j = ir::make(Op::Iota, ir::DType::Int64, grid, {}, axis);
  NodeRef gi = expand(reshape(g, col), grid);
  NodeRef picked = where(cmp(Op::CmpEq, expand(reshape(clamped, col), grid), j), gi, like(gi, 0));
  return reshape(reduce_sum(picked, {axis + 1}), x->shape);
}

// The cotangent of Window(x) (windows along `axis`: out[.., o, j, ..] = x[.., o s + j d, ..]):
// each element of x gets the sum of the window entries that view it. Per tap j the slice
// g[.., :, j, ..] is spread to positions o s + j d (zeros between, a pad of a size-1 axis and a
// reshape) and the K spread slices are added in increasing j: pads and adds, one elementwise
// kernel, no scatter. Built from primitives with rules, so it differentiates again.
NodeRef unwindow(NodeRef x, NodeRef g, const std::vector<int64_t>& a) {
  const auto axis = static_cast<size_t>(a[0]);
  const int64_t k = a[1], stride = a[2], dil = a[3];
  const int64_t L = x->shape[axis], out = g->shape[axis];
  const size_t nd = g->shape.size();
  NodeRef sum = nullptr;
  for (int64_t j = 0; j < k; ++j) {
    ir::Pairs tap(nd);
    for (size_t d = 0; d < nd; ++d) tap[d] = {0, g->shape[d]};
    tap[axis + 1] = {j, j + 1};
    Shape one = g->shape;
    one[axis + 1] = 1;
    NodeRef t = ir::make(Op::Shrink, g->dtype, one, {g}, tap);
    int64_t spread = out;  // t's extent along axis once spread by the stride
    if (stride > 1) {
      ir::Pairs gap(nd, {0, 0});
      gap[axis + 1] = {0, stride - 1};
      Shape wide = one;
      wide[axis + 1] = stride;
      t = ir::make(Op::Pad, g->dtype, wide, {t}, gap);
      spread = out * stride;
    }
    Shape flat = x->shape;
    flat[axis] = spread;
    t = reshape(t, flat);
    // Placed at offset j d in [0, L): the spread's tail past L holds only its zeros (every
    // window ends inside x), so it is cut.
    const int64_t lo = j * dil, room = L - lo;
    if (spread > room) {
      ir::Pairs cut(x->shape.size());
      for (size_t d = 0; d < cut.size(); ++d) cut[d] = {0, flat[d]};
      cut[axis] = {0, room};
      flat[axis] = room;
      t = ir::make(Op::Shrink, g->dtype, flat, {t}, cut);
      spread = room;
    }
    if (lo > 0 || spread < L) {
      ir::Pairs place(x->shape.size(), {0, 0});
      place[axis] = {lo, L - lo - spread};
      t = ir::make(Op::Pad, g->dtype, x->shape, {t}, place);
    }
    sum = sum ? add(sum, t) : t;
  }
  return sum ? sum : like(x, 0);
}

// (1 - x)(1 + x): 1 - x^2 without the cancellation of 1 - x*x near |x| = 1.
NodeRef one_minus_square(NodeRef x) { return mul(sub(like(x, 1), x), add(like(x, 1), x)); }

// Inclusive running products along the last axis (Hillis-Steele: log2(L) shifted multiplies,
// each shift a pad with 1s): built from primitives that have rules, so it differentiates again.
NodeRef cumprod_last(NodeRef x) {
  size_t nd = x->shape.size();
  int64_t L = x->shape.back();
  NodeRef iota = ir::make(Op::Iota, ir::DType::Int64, x->shape, {}, static_cast<int64_t>(nd - 1));
  for (int64_t k = 1; k < L; k *= 2) {
    ir::Pairs keep(nd, {0, 0}), widen(nd, {0, 0});
    for (size_t d = 0; d < nd; ++d) keep[d] = {0, x->shape[d]};
    keep[nd - 1] = {0, L - k};
    widen[nd - 1] = {k, 0};
    Shape head = x->shape;
    head[nd - 1] = L - k;
    NodeRef shifted = ir::make(Op::Pad, x->dtype, x->shape,
                               {ir::make(Op::Shrink, x->dtype, head, {x}, keep)}, widen);
    NodeRef filled =
        where(cmp(Op::CmpLe, ir::full(ir::DType::Int64, static_cast<double>(k), x->shape), iota),
              shifted, like(x, 1));
    // Each level is materialised (a Copy is always its own buffer, codegen/schedule.cpp):
    // fused, level k would recompute 2^k products per element.
    x = ir::make(Op::Copy, x->dtype, x->shape, {mul(x, filled)});
  }
  return x;
}
// The product of every element of the last axis but the one at each position: exclusive running
// products from the left times those from the right. No division, so zeros, infinities and NaNs
// give the products JAX gives (d prod([2, 0, 4]) = [0, 8, 0]).
NodeRef others_last(NodeRef x) {
  size_t nd = x->shape.size();
  int64_t L = x->shape.back();
  if (L == 0) return x;
  auto exclusive = [&](NodeRef v) {  // [1, v0, v0 v1, ...]
    NodeRef inc = cumprod_last(v);
    ir::Pairs keep(nd), widen(nd, {0, 0});
    for (size_t d = 0; d < nd; ++d) keep[d] = {0, v->shape[d]};
    keep[nd - 1] = {0, L - 1};
    widen[nd - 1] = {1, 0};
    Shape head = v->shape;
    head[nd - 1] = L - 1;
    NodeRef shifted = ir::make(Op::Pad, v->dtype, v->shape,
                               {ir::make(Op::Shrink, v->dtype, head, {inc}, keep)}, widen);
    NodeRef iota = ir::make(Op::Iota, ir::DType::Int64, v->shape, {}, static_cast<int64_t>(nd - 1));
    return where(cmp(Op::CmpLt, ir::full(ir::DType::Int64, 0, v->shape), iota), shifted,
                 like(v, 1));
  };
  return mul(exclusive(x), flip_last(exclusive(flip_last(x))));
}
// others_last over the reduced `axes` of x: they move last (a permute), flatten into one, and
// come back.
NodeRef others_product(NodeRef x, const std::vector<int64_t>& axes) {
  size_t nd = x->shape.size();
  std::vector<int64_t> perm;
  Shape kept, moved;
  int64_t len = 1;
  for (size_t d = 0; d < nd; ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end()) {
      perm.push_back(static_cast<int64_t>(d));
      kept.push_back(x->shape[d]);
    }
  for (auto a : axes) {
    perm.push_back(a);
    moved.push_back(x->shape[a]);
    len *= x->shape[a];
  }
  Shape permuted = kept;
  permuted.insert(permuted.end(), moved.begin(), moved.end());
  Shape flat = kept;
  flat.push_back(len);
  NodeRef p = ir::make(Op::Permute, x->dtype, permuted, {x}, perm);
  NodeRef o = reshape(others_last(reshape(p, flat)), permuted);
  std::vector<int64_t> inv(nd);
  for (size_t i = 0; i < nd; ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return ir::make(Op::Permute, x->dtype, x->shape, {o}, inv);
}

// 1 where a wins against b, 1/2 on ties (split evenly, as JAX does), 0 where b wins.
NodeRef winner_weight(NodeRef a, NodeRef b, bool is_max) {
  NodeRef wins = is_max ? cmp(Op::CmpLt, b, a) : cmp(Op::CmpLt, a, b);
  NodeRef tie = cmp(Op::CmpEq, a, b);
  return where(wins, like(a, 1), where(tie, like(a, 0.5), like(a, 0)));
}

// -1, 0 or 1 as x is negative, zero (either sign) or positive: abs's derivative, 0 at the kink.
NodeRef sign(NodeRef x) {
  return where(cmp(Op::CmpLt, like(x, 0), x), like(x, 1),
               where(cmp(Op::CmpLt, x, like(x, 0)), like(x, -1), like(x, 0)));
}

// Cotangents of n's sources given n's cotangent g (nullptr: no gradient flows there). The unary
// rules are ir/ops.def's derivative column (x the operand, y the result), `none` giving none.
std::vector<NodeRef> rule(NodeRef n, NodeRef g) {
  const NodeRef none = nullptr;
  const auto& s = n->src;
  auto A = [&](int i) { return s[i]; };
  switch (n->op) {
    case Op::Add:
      return {g, g};
    case Op::Sub:
      return {g, neg(g)};
    case Op::Mul:
      return {mul(g, A(1)), mul(g, A(0))};
    case Op::Div:
      return {div(g, A(1)), neg(div(mul(g, n), A(1)))};
#define X(name, arity, cat)
#define X_BINARY(name, nx, domain, result, lowering)
#define X_UNARY(name, nx, domain, result, lowering, derivative) \
  case Op::name: {                                              \
    NodeRef x = A(0), y = n;                                    \
    (void)x, (void)y;                                           \
    return {derivative};                                        \
  }
#include "ir/ops.def"
#undef X
#undef X_UNARY
#undef X_BINARY
    case Op::Pow: {
      // d/da = b a^(b-1), read as b a^(b'-1) with b' = 1 where b = 0: exactly 0 there (a^0 is
      // constant), with no 0 * 0^-1 = NaN in it or in its own derivatives (so x^0 and x^1 have
      // finite jvp and second derivatives at 0; JAX gives NaN there).
      // d/db = a^b log a for a > 0, else 0. The log reads where(a > 0, a, 1), so no -inf (and
      // no 1/0 in its own derivative) appears at a = 0: jvp and second derivatives stay finite.
      NodeRef a = A(0), b = A(1);
      NodeRef b_safe = where(cmp(Op::CmpEq, b, like(b, 0)), like(b, 1), b);
      NodeRef da = mul(g, mul(b, bin(Op::Pow, a, sub(b_safe, like(b, 1)))));
      NodeRef pos = cmp(Op::CmpLt, like(a, 0), a);
      NodeRef safe_log = un(Op::Log, where(pos, a, like(a, 1)));
      NodeRef db = where(pos, mul(g, mul(n, safe_log)), like(a, 0));
      return {da, db};
    }
    case Op::Atan2: {
      NodeRef y = A(0), x = A(1);
      NodeRef den = add(mul(x, x), mul(y, y));
      return {div(mul(g, x), den), neg(div(mul(g, y), den))};
    }
    case Op::Mod:
      return {g, neg(mul(g, un(Op::Floor, div(A(0), A(1)))))};
    case Op::Max:
      return {mul(g, winner_weight(A(0), A(1), true)), mul(g, winner_weight(A(1), A(0), true))};
    case Op::Min:
      return {mul(g, winner_weight(A(0), A(1), false)), mul(g, winner_weight(A(1), A(0), false))};
    case Op::Where:
      return {nullptr, where(A(0), g, like(g, 0)), where(A(0), like(g, 0), g)};
    case Op::Copy:  // a materialisation point forward is one backward too (cumprod_last's
                    // levels then stay linear in both directions)
      return {ir::make(Op::Copy, g->dtype, g->shape, {g})};
    case Op::Dot:  // c = a b: da = g b^T, db = a^T g (operands are read as strided views)
      return {dot(g, swap_last(A(1))), dot(swap_last(A(0)), g)};
    case Op::Cumsum:  // the reverse running sum of g
      return {flip_last(ir::make(Op::Cumsum, g->dtype, g->shape, {flip_last(g)}))};
    case Op::Sort:
      return {unsort(A(0), g)};
    case Op::HostCall:  // the function's own rule (rune::distributed: docs/distributed.md)
      return {ir::arg_host_fn(n).vjp(n, g)};
    case Op::Gather:  // issue 18 "Indexing": the indices get no gradient
      return {ungather(A(0), A(1), g, ir::arg_int(n)), none};
    case Op::ReduceSum:
      return {expand(g, A(0)->shape)};
    case Op::ReduceProd:
      return {mul(expand(g, A(0)->shape), others_product(A(0), ir::arg_ints(n)))};
    case Op::ReduceMax:
    case Op::ReduceMin: {
      // Ties share the gradient evenly.
      NodeRef x = A(0);
      NodeRef hit = cast(cmp(Op::CmpEq, x, expand(n, x->shape)), x->dtype);
      NodeRef count = ir::make(Op::ReduceSum, x->dtype, n->shape, {hit}, n->arg);
      return {mul(expand(div(g, count), x->shape), hit)};
    }
    case Op::Reshape:
      return {reshape(g, A(0)->shape)};
    case Op::Permute: {
      const auto& p = ir::arg_ints(n);
      std::vector<int64_t> inv(p.size());
      for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
      return {ir::make(Op::Permute, g->dtype, A(0)->shape, {g}, inv)};
    }
    case Op::Expand:
      return {sum_to(g, A(0)->shape)};
    case Op::Shrink: {
      ir::Pairs w;
      const auto& b = ir::arg_pairs(n);
      for (size_t d = 0; d < b.size(); ++d) w.push_back({b[d].first, A(0)->shape[d] - b[d].second});
      return {ir::make(Op::Pad, g->dtype, A(0)->shape, {g}, w)};
    }
    case Op::Pad: {
      ir::Pairs b;
      const auto& w = ir::arg_pairs(n);
      for (size_t d = 0; d < w.size(); ++d) b.push_back({w[d].first, w[d].first + A(0)->shape[d]});
      return {ir::make(Op::Shrink, g->dtype, A(0)->shape, {g}, b)};
    }
    case Op::Flip:
      return {ir::make(Op::Flip, g->dtype, g->shape, {g}, n->arg)};
    case Op::Window:
      return {unwindow(A(0), g, ir::arg_ints(n))};
    default:
      // Piecewise-constant or non-float ops (floor, round, comparisons, bit ops): no gradient.
      return std::vector<NodeRef>(s.size(), nullptr);
  }
}

}  // namespace

namespace {

using Cotangents = std::unordered_map<NodeRef, NodeRef>;
using CustomAt = std::unordered_map<NodeRef, const Tracer::CustomVjp*>;

void accumulate(Cotangents& ct, NodeRef n, NodeRef g) {
  auto it = ct.find(n);
  if (it == ct.end())
    ct[n] = g;
  else
    it->second = add(it->second, g);
}

// The nodes reachable from `root`, sources first, without passing a node of `stops` (which
// are included, as leaves).
std::vector<NodeRef> toposort_until(NodeRef root, const std::unordered_set<NodeRef>& stops) {
  std::vector<NodeRef> order;
  std::unordered_set<NodeRef> seen{root};
  std::vector<std::pair<NodeRef, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (!stops.count(n) && i < n->src.size()) {
      NodeRef s = n->src[i++];
      if (seen.insert(s).second) stack.push_back({s, 0});
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

void propagate(Cotangents& ct, const std::vector<NodeRef>& order, const CustomAt& custom,
               const std::unordered_set<NodeRef>& stops);

// The cotangents of a custom vjp's inputs, given its output's cotangent g: its rule's for the
// inputs it owns; for the others, g taken through the forward's nodes between its inputs and its
// output (stopping at the inputs, so no cotangent reaches an owned input that way).
void custom_rule(Cotangents& ct, const Tracer::CustomVjp& c, NodeRef g, const CustomAt& custom) {
  std::vector<NodeRef> own = detail::custom_cotangents(c, g);
  size_t k = 0;
  bool others = false;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.own[i])
      accumulate(ct, c.inputs[i], own[k++]);
    else
      others = true;
  }
  if (!others) return;
  const std::unordered_set<NodeRef> inputs(c.inputs.begin(), c.inputs.end());
  Cotangents inner{{c.output, g}};
  CustomAt below = custom;
  below.erase(c.output);
  propagate(inner, toposort_until(c.output, inputs), below, inputs);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (!c.own[i])
      if (auto it = inner.find(c.inputs[i]); it != inner.end())
        accumulate(ct, c.inputs[i], it->second);
}

// Each node's cotangent into its sources, in reverse `order` (sources first), by the nodes'
// rules or, at a custom vjp's output, by custom_rule; nodes of `stops` keep theirs.
void propagate(Cotangents& ct, const std::vector<NodeRef>& order, const CustomAt& custom,
               const std::unordered_set<NodeRef>& stops) {
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    NodeRef n = *it;
    auto c = ct.find(n);
    if (c == ct.end() || n->src.empty() || !ir::is_float(n->dtype) || stops.count(n)) continue;
    if (auto k = custom.find(n); k != custom.end()) {
      custom_rule(ct, *k->second, c->second, custom);
      continue;
    }
    auto grads = rule(n, c->second);
    for (size_t i = 0; i < n->src.size(); ++i)
      if (grads[i] && ir::is_float(n->src[i]->dtype)) accumulate(ct, n->src[i], grads[i]);
  }
}

}  // namespace

std::vector<NodeRef> vjp_nodes(const std::vector<NodeRef>& roots,
                               const std::vector<NodeRef>& cotangents,
                               const std::vector<NodeRef>& wrt,
                               const std::vector<Tracer::Checkpoint>& checkpoints,
                               const std::vector<Tracer::CustomVjp>& custom_vjps) {
  Cotangents ct;
  for (size_t i = 0; i < roots.size(); ++i) accumulate(ct, roots[i], cotangents[i]);
  CustomAt custom;
  for (const auto& c : custom_vjps) custom.emplace(c.output, &c);
  propagate(ct, ir::toposort(roots), custom, {});
  std::vector<NodeRef> out;
  for (auto w : wrt) {
    auto c = ct.find(w);
    out.push_back(c != ct.end() ? c->second : ir::full(w->dtype, 0, w->shape));
  }
  return checkpoints.empty() ? out : rematerialise(out, roots, checkpoints);
}

}  // namespace rune
