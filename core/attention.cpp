// nx::nn::scaled_dot_product_attention (core/attention.h, docs/attention.md): the checks, then
// the unfused formula as nx ops, over all queries at once or, for long causal attention, over
// blocks of query rows. The masks are combined on their own (broadcast) shape, never the
// scores', before they touch the scores.
#include "core/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/donation.h"
#include "core/prim.h"
#include "core/random.h"

namespace nx::nn {

using namespace nx::detail;

namespace {

constexpr const char* kApi = "nx::nn::scaled_dot_product_attention";

// Causal attention over more queries than this runs as blocks of this many query rows, each
// reading only the keys its last row may see (docs/attention.md, "Cost").
constexpr int64_t kQueryBlock = 128;

DType compute_dtype(DType t) { return ir::is_half(t) ? DType::Float32 : t; }

std::string show(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  return "q " + q.describe() + ", k " + k.describe() + ", v " + v.describe();
}

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

Tensor last_two_swapped(const Tensor& t) {
  Axes p;
  for (int i = 0; i < t.ndim(); ++i) p.push_back(i);
  std::swap(p[p.size() - 1], p[p.size() - 2]);
  return permute(t, p);
}

// k or v with each of its Hk heads (axis -3) repeated g times in place: [..., Hk * g, T, X].
Tensor repeat_heads(const Tensor& t, int64_t g) {
  if (g == 1) return t;
  const int r = t.ndim();
  Shape wide = t.shape();
  wide.insert(wide.end() - 2, g);  // [..., Hk, g, T, X]
  Shape merged = t.shape();
  merged[r - 3] *= g;
  return reshape(broadcast_to(expand_dims(t, r - 2), wide), merged);
}

// The shapes: q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv], batch axes that broadcast, and
// the grouped heads when asked. Returns the number of query heads per key head (1 without GQA).
int64_t check_shapes(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  require_float(kApi, q);
  require_same_dtype(kApi, q, k);
  require_same_dtype(kApi, q, v);
  if (q.ndim() < 2 || k.ndim() < 2 || v.ndim() < 2)
    fail(kApi, "q, k and v need at least 2 axes ([..., T, D]); got " + qkv(q, k, v));
  const int64_t d = q.shape().back();
  if (k.shape().back() != d)
    fail(kApi, "q and k differ in the last axis (" + std::to_string(d) +
                   " != " + std::to_string(k.shape().back()) + "); got " + qkv(q, k, v));
  const int64_t tk = k.shape()[k.ndim() - 2];
  if (v.shape()[v.ndim() - 2] != tk)
    fail(kApi, "k and v differ in the number of keys (axis -2: " + std::to_string(tk) +
                   " != " + std::to_string(v.shape()[v.ndim() - 2]) + "); got " + qkv(q, k, v));
  int64_t group = 1;
  if (o.enable_gqa) {
    if (q.ndim() < 3 || k.ndim() < 3 || v.ndim() < 3)
      fail(kApi, "enable_gqa needs a head axis (-3) in q, k and v; got " + qkv(q, k, v));
    const int64_t hq = q.shape()[q.ndim() - 3], hk = k.shape()[k.ndim() - 3];
    if (v.shape()[v.ndim() - 3] != hk)
      fail(kApi,
           "enable_gqa: k and v differ in the number of heads (axis -3); got " + qkv(q, k, v));
    if (hk == 0 || hq % hk != 0)
      fail(kApi, "enable_gqa: the " + std::to_string(hq) + " query heads are not a multiple of " +
                     "the " + std::to_string(hk) + " key heads (axis -3); got " + qkv(q, k, v));
    group = hq / hk;
  }
  Shape kb = batch_of(k), vb = batch_of(v);
  if (group > 1) kb[kb.size() - 1] *= group, vb[vb.size() - 1] *= group;
  auto b = ir::broadcast_shapes(batch_of(q), kb);
  if (b) b = ir::broadcast_shapes(*b, vb);
  if (!b) fail(kApi, "the batch axes (all but the last two) do not broadcast; got " + qkv(q, k, v));
  return group;
}

void check_options(const Tensor& q, const Shape& scores, const AttentionOptions& o) {
  if (o.mask) {
    const Tensor& m = *o.mask;
    if (m.dtype() != DType::Bool && m.dtype() != q.dtype())
      fail(kApi, "mask must be bool or q's dtype " + std::string(ir::name(q.dtype())) + "; got " +
                     m.describe());
    auto b = ir::broadcast_shapes(m.shape(), scores);
    if (!b || *b != scores)
      fail(kApi, "mask " + m.describe() + " does not broadcast to the scores " +
                     ir::to_string(scores) + " ([..., Tq, Tk])");
  }
  if (!(o.dropout >= 0 && o.dropout < 1))
    fail(kApi, "dropout must be in [0, 1), got " + show(o.dropout));
  if (o.dropout > 0 && !o.dropout_key)
    fail(kApi, "dropout " + show(o.dropout) + " needs a dropout_key (an nx::random key)");
  if (o.scale && !std::isfinite(*o.scale))
    fail(kApi, "scale must be finite, got " + show(*o.scale));
}

// The rows [r0, r1) of the result, from the keys [0, kn) only: the formula on those rows of q
// (and of a mask that has rows) and those keys (and mask columns). Every element is the one the
// whole formula computes (each row's products, softmax and weighted sum are that row's alone);
// the keys left out must be masked for every row kept, so their weights would be exactly 0:
// the softmax's max and sum skip a -inf and a +0 (no change), and the weighted sum's fma chain
// over keys would only continue through fma(0, v, acc) = acc (v finite).
struct Rows {
  const Tensor &qf, &kf, &vf;
  const AttentionOptions& o;
  double scale;
  int64_t tq, tk, r0, r1, kn;
};

Tensor attend(const Rows& r) {
  const bool whole = r.r0 == 0 && r.r1 == r.tq && r.kn == r.tk;
  auto rows_of = [&](const Tensor& x, int64_t n, int64_t lo, int64_t hi, int from_end) {
    const int a = x.ndim() - from_end;
    if (whole || a < 0 || x.shape()[a] != n || (lo == 0 && hi == n)) return x;
    std::vector<Slice> sl(static_cast<size_t>(a + 1));
    sl[a] = Slice{lo, hi};
    return slice(x, sl);
  };
  const int64_t m = r.r1 - r.r0, kn = r.kn;
  Tensor qf = rows_of(r.qf, r.tq, r.r0, r.r1, 2);
  Tensor kf = rows_of(r.kf, r.tk, 0, kn, 2), vf = rows_of(r.vf, r.tk, 0, kn, 2);
  std::optional<Tensor> mask;
  if (r.o.mask) mask = rows_of(rows_of(*r.o.mask, r.tk, 0, kn, 1), r.tq, r.r0, r.r1, 2);
  Tensor s = mul(matmul(qf, last_two_swapped(kf)), scalar_like(qf, r.scale));

  // keep: which keys each query attends to, on the masks' own broadcast shape.
  std::optional<Tensor> keep;
  if (r.o.causal) {
    Tensor row = iota({m, kn}, 0);
    keep = less_equal(iota({m, kn}, 1), r.r0 ? add(row, scalar_like(row, r.r0)) : row);
  }
  if (mask && mask->dtype() == DType::Bool) keep = keep ? logical_and(*keep, *mask) : *mask;
  // live: keep, less the keys a float mask sets to -inf. The causal triangle alone leaves key 0
  // to every row, so only a mask can leave a row with no key (and need the guard below).
  std::optional<Tensor> live;
  if (mask && mask->dtype() == DType::Bool) live = keep;
  if (mask && mask->dtype() != DType::Bool) {
    Tensor add_mask = cast(*mask, s.dtype());
    s = add(s, add_mask);
    Tensor finite = greater(add_mask, scalar_like(add_mask, -INFINITY));
    live = keep ? logical_and(*keep, finite) : finite;
  }
  if (keep) s = where(*keep, s, scalar_like(s, -INFINITY));
  Tensor p;
  if (live || kn == 0) {
    // A row with no live key would be exp(-inf) / 0 = NaN: its scores become 0 (a finite
    // softmax) and its weights 0, so it gives zeros and passes no gradient.
    Tensor row = live ? any(*live, {-1}, true) : full(DType::Bool, {m, 1}, 0);
    p = where(row, softmax(where(row, s, zeros_like(s)), -1), zeros_like(s));
  } else {
    p = softmax(s, -1);
  }
  if (r.o.dropout > 0) p = random::dropout(*r.o.dropout_key, p, r.o.dropout);
  return matmul(p, vf);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& o) {
  OpScope scope_(
      kApi, {&q, &k, &v, o.mask ? &*o.mask : nullptr, o.dropout_key ? &*o.dropout_key : nullptr});
  const int64_t group = check_shapes(q, k, v, o);
  const int64_t tq = q.shape()[q.ndim() - 2], tk = k.shape()[k.ndim() - 2];
  const int64_t d = q.shape().back();
  Shape scores = *ir::broadcast_shapes(batch_of(q), batch_of(repeat_heads(k, group)));
  scores.insert(scores.end(), {tq, tk});
  check_options(q, scores, o);

  const DType t = compute_dtype(q.dtype());
  Tensor qf = cast(q, t), kf = repeat_heads(cast(k, t), group),
         vf = repeat_heads(cast(v, t), group);
  const double scale = o.scale ? *o.scale : 1 / std::sqrt(static_cast<double>(d));
  Tensor y;
  if (o.causal && o.dropout == 0 && tk > 0 && tq > kQueryBlock) {
    std::vector<Tensor> blocks;
    for (int64_t r0 = 0; r0 < tq; r0 += kQueryBlock) {
      const int64_t r1 = std::min(tq, r0 + kQueryBlock);
      blocks.push_back(attend({qf, kf, vf, o, scale, tq, tk, r0, r1, std::min(r1, tk)}));
    }
    y = concatenate(blocks, blocks[0].ndim() - 2);
  } else {
    y = attend({qf, kf, vf, o, scale, tq, tk, 0, tq, tk});
  }
  return cast(y, q.dtype());
}

}  // namespace nx::nn
