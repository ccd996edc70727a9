// rune::nn::MultiHeadAttention (nn/attention.h): torch's projections and head layout around
// nx::nn::scaled_dot_product_attention, torch's masks turned into its mask.
#include "nn/attention.h"

#include <cmath>
#include <string>
#include <utility>

#include "core/random.h"
#include "ir/shape.h"
#include "nn/errors.h"

namespace rune::nn {

namespace {

using detail::fail;
using detail::num;

constexpr const char* kApi = "rune::nn::MultiHeadAttention";

std::string shape_text(const nx::Shape& s) { return ir::to_string(s); }

// [.., T, E] -> [.., H, T, E / H] (batched: [N, T, E] -> [N, H, T, d]; unbatched [T, E] ->
// [H, T, d]).
Tensor split_heads(const Tensor& x, int64_t h) {
  const int r = x.ndim();
  nx::Shape s = x.shape();
  const int64_t e = s.back();
  s.back() = h;
  s.push_back(e / h);
  Tensor t = nx::reshape(x, s);  // [.., T, H, d]
  nx::Axes p;
  for (int i = 0; i < r - 2; ++i) p.push_back(i);
  p.insert(p.end(), {r - 1, r - 2, r});
  return nx::permute(t, p);
}

Tensor merge_heads(const Tensor& x) {  // [.., H, T, d] -> [.., T, H * d]
  const int r = x.ndim();
  nx::Axes p;
  for (int i = 0; i < r - 3; ++i) p.push_back(i);
  p.insert(p.end(), {r - 2, r - 3, r - 1});
  Tensor t = nx::permute(x, p);
  nx::Shape s(t.shape().begin(), t.shape().end() - 2);
  s.push_back(x.shape()[r - 3] * x.shape()[r - 1]);
  return nx::reshape(t, s);
}

// A batch-second [T, N, E] input as [N, T, E]; batch-first and unbatched inputs as they are.
Tensor batch_major(const Tensor& x, bool batch_first) {
  return x.ndim() == 3 && !batch_first ? nx::permute(x, {1, 0, 2}) : x;
}

// One of torch's masks (bool: true masks; float: added) reshaped to broadcast against the scores
// [N, H, L, S] (unbatched: [H, L, S]).
struct Mask {
  Tensor value;
  bool is_bool;
};

Mask check_mask(const char* what, const Tensor& m, const Tensor& query, const nx::Shape& as) {
  if (m.dtype() != nx::bool_ && m.dtype() != query.dtype())
    fail(kApi, std::string(what) + " must be bool or the query's dtype " +
                   std::string(ir::name(query.dtype())) + "; got " + m.describe());
  return {nx::reshape(m, as), m.dtype() == nx::bool_};
}

// torch's key_padding_mask and attn_mask as one scaled_dot_product_attention mask: bool masks
// stay bool (true: attended), a float one turns the bool ones into -inf and adds.
std::optional<Tensor> combined_mask(const AttentionMasks& masks, const Tensor& query, bool batched,
                                    int64_t n, int64_t h, int64_t l, int64_t s) {
  std::vector<Mask> parts;
  if (masks.key_padding_mask) {
    const Tensor& m = *masks.key_padding_mask;
    const nx::Shape want = batched ? nx::Shape{n, s} : nx::Shape{s};
    if (m.shape() != want)
      fail(kApi, "key_padding_mask must be " + shape_text(want) + " ([N, S]: one per key of each " +
                     "batch element); got " + m.describe());
    parts.push_back(check_mask("key_padding_mask", m, query,
                               batched ? nx::Shape{n, 1, 1, s} : nx::Shape{1, 1, s}));
  }
  if (masks.attn_mask) {
    const Tensor& m = *masks.attn_mask;
    const nx::Shape per_head = batched ? nx::Shape{n * h, l, s} : nx::Shape{h, l, s};
    if (m.shape() == nx::Shape{l, s}) {
      parts.push_back(check_mask("attn_mask", m, query, m.shape()));
    } else if (m.shape() == per_head) {
      parts.push_back(
          check_mask("attn_mask", m, query, batched ? nx::Shape{n, h, l, s} : nx::Shape{h, l, s}));
    } else {
      fail(kApi, "attn_mask must be [L, S] " + shape_text({l, s}) + " or " +
                     (batched ? "[N * num_heads, L, S] " : "[num_heads, L, S] ") +
                     shape_text(per_head) + "; got " + m.describe());
    }
  }
  if (parts.empty()) return std::nullopt;
  bool any_float = false;
  for (const Mask& p : parts) any_float |= !p.is_bool;
  std::optional<Tensor> r;
  for (const Mask& p : parts) {
    Tensor v = p.value;
    if (any_float && p.is_bool) {
      Tensor z = nx::zeros_like(nx::cast(v, query.dtype()));
      v = nx::where(v, nx::scalar_like(z, -INFINITY), z);
    } else if (p.is_bool) {
      v = nx::logical_not(v);  // scaled_dot_product_attention's convention: true attends
    }
    r = !r ? v : any_float ? nx::add(*r, v) : nx::logical_and(*r, v);
  }
  return r;
}

Tensor forward(const MultiHeadAttention& m, const Tensor& query, const Tensor& key,
               const Tensor& value, const AttentionMasks& masks, std::optional<Tensor> drop_key) {
  const int64_t e = m.embed_dim(), h = m.num_heads;
  const int r = query.ndim();
  if (r != 2 && r != 3)
    fail(kApi, "query must be [L, N, E], [N, L, E] (batch_first) or unbatched [L, E]; got " +
                   query.describe());
  if (key.ndim() != r || value.ndim() != r)
    fail(kApi, "query, key and value must have the same rank; got query " + query.describe() +
                   ", key " + key.describe() + ", value " + value.describe());
  for (const Tensor* t : {&query, &key, &value})
    if (t->shape().back() != e)
      fail(kApi, "query, key and value must have embed_dim " + std::to_string(e) +
                     " features (the last axis); got query " + query.describe() + ", key " +
                     key.describe() + ", value " + value.describe());
  const bool batched = r == 3;
  Tensor qb = batch_major(query, m.batch_first), kb = batch_major(key, m.batch_first);
  Tensor vb = batch_major(value, m.batch_first);
  if (kb.shape() != vb.shape() || (batched && kb.shape()[0] != qb.shape()[0]))
    fail(kApi, "key and value must be [S, N, E] (batch_first: [N, S, E]) and share the query's " +
                   std::string("batch; got query ") + query.describe() + ", key " + key.describe() +
                   ", value " + value.describe());
  const int64_t n = batched ? qb.shape()[0] : 1;
  const int64_t l = qb.shape()[qb.ndim() - 2], s = kb.shape()[kb.ndim() - 2];

  // The projections: in_proj's q, k and v column blocks (one matmul for self-attention).
  Tensor q, k, v;
  const Tensor& w = m.in_proj.weight;
  auto cols = [&](const Tensor& t, int64_t i) {
    return nx::slice(t, {nx::Slice{}, nx::Slice{i * e, (i + 1) * e}});
  };
  auto project = [&](const Tensor& x, int64_t i) {
    Tensor y = nx::matmul(x, cols(w, i));
    return m.in_proj.bias ? y + nx::slice(*m.in_proj.bias, {nx::Slice{i * e, (i + 1) * e}}) : y;
  };
  if (query.impl_ptr() == key.impl_ptr() && key.impl_ptr() == value.impl_ptr()) {
    Tensor qkv = m.in_proj(qb);  // [.., L, 3E]
    auto part = [&](int64_t i) {
      std::vector<nx::Slice> sl(static_cast<size_t>(qkv.ndim()));
      sl.back() = nx::Slice{i * e, (i + 1) * e};
      return nx::slice(qkv, sl);
    };
    q = part(0), k = part(1), v = part(2);
  } else {
    q = project(qb, 0), k = project(kb, 1), v = project(vb, 2);
  }
  nx::nn::AttentionOptions o;
  o.causal = masks.causal;
  o.mask = combined_mask(masks, query, batched, n, h, l, s);
  if (drop_key) o.dropout = m.dropout, o.dropout_key = *drop_key;
  Tensor y = nx::nn::scaled_dot_product_attention(split_heads(q, h), split_heads(k, h),
                                                  split_heads(v, h), o);
  Tensor out = m.out_proj(merge_heads(y));  // [N, L, E] or [L, E]
  return batched && !m.batch_first ? nx::permute(out, {1, 0, 2}) : out;
}

}  // namespace

MultiHeadAttention MultiHeadAttention::init(const Tensor& key, int64_t embed_dim, int64_t num_heads,
                                            const MultiHeadAttentionOptions& o) {
  if (embed_dim <= 0) fail(kApi, "embed_dim must be positive, got " + std::to_string(embed_dim));
  if (num_heads <= 0 || embed_dim % num_heads != 0)
    fail(kApi, "num_heads " + std::to_string(num_heads) +
                   " must be positive and divide embed_dim " + std::to_string(embed_dim));
  if (!(o.dropout >= 0 && o.dropout < 1))
    fail(kApi, "dropout must be in [0, 1), got " + num(o.dropout));
  if (!ir::is_float(o.dtype))
    fail(kApi, "dtype must be a float type, got " + std::string(ir::name(o.dtype)));
  MultiHeadAttention m;
  // xavier_uniform over torch's [3E, E] (fan_in E, fan_out 3E): [E, 3E] read with FanAxes{} has
  // the same fans.
  m.in_proj.weight =
      init::xavier_uniform()(nx::random::fold_in(key, 0), {embed_dim, 3 * embed_dim}, o.dtype);
  LinearOptions lo{.bias = o.bias, .bias_init = init::zeros(), .dtype = o.dtype};
  if (o.bias) m.in_proj.bias = init::zeros()(key, {3 * embed_dim}, o.dtype);
  m.out_proj = Linear::init(nx::random::fold_in(key, 1), embed_dim, embed_dim, lo);
  m.num_heads = num_heads;
  m.dropout = o.dropout;
  m.batch_first = o.batch_first;
  return m;
}

Tensor MultiHeadAttention::operator()(const Tensor& x) const {
  return forward(*this, x, x, x, {}, {});
}

Tensor MultiHeadAttention::operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const AttentionMasks& masks) const {
  return forward(*this, query, key, value, masks, std::nullopt);
}

Tensor MultiHeadAttention::operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const AttentionMasks& masks, Context& ctx) const {
  std::optional<Tensor> drop;
  if (ctx.training() && dropout > 0) drop = ctx.next_key(kApi);
  return forward(*this, query, key, value, masks, drop);
}

}  // namespace rune::nn
