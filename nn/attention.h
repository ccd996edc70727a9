// rune::nn::MultiHeadAttention (docs/nn.md, "MultiHeadAttention"): torch.nn.MultiheadAttention
// on nx::nn::scaled_dot_product_attention (core/attention.h), a tree like the other layers.
#pragma once
#include <cstdint>
#include <optional>

#include "core/attention.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace rune::nn {

struct MultiHeadAttentionOptions {
  bool bias = true;          // in_proj and out_proj biases (torch's bias)
  double dropout = 0;        // on the attention weights, in training (torch's dropout)
  bool batch_first = false;  // torch's default: [L, N, E]; true: [N, L, E]
  nx::DType dtype = nx::float32;
};

// The masks of one call, in torch.nn.MultiheadAttention's conventions (bool: TRUE MASKS the key,
// the opposite of nx::nn::scaled_dot_product_attention's mask; float: added to the scores):
struct AttentionMasks {
  // [N, S] (or [S] for unbatched inputs): true (or -inf) where the key is padding.
  std::optional<Tensor> key_padding_mask;
  // [L, S], or [N * num_heads, L, S] (torch's per-head layout: batch n, head h at n * H + h):
  // true (or -inf) where query l may not attend to key s.
  std::optional<Tensor> attn_mask;
  // Query i attends to keys j <= i (scaled_dot_product_attention's causal). Unlike torch's
  // is_causal (a hint that attn_mask is causal), it applies the triangle itself, alone or with
  // the masks above.
  bool causal = false;
};

// torch.nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first) without kdim /
// vdim, add_bias_kv or add_zero_attn: queries, keys and values of width E = embed_dim, split into
// num_heads heads of E / num_heads:
//   q = query @ Wq + bq, k = key @ Wk + bk, v = value @ Wv + bv   (in_proj's three column blocks)
//   out = out_proj(merge_heads(scaled_dot_product_attention(q, k, v)))
// Inputs [L, N, E] (batch_first: [N, L, E]) or unbatched [L, E]; key and value [S, N, E] (or
// [N, S, E], [S, E]). Returns the output alone (torch's need_weights=False).
// Initialisation (torch's _reset_parameters): in_proj's weight xavier_uniform over torch's
// [3E, E] (bound sqrt(6 / (4E))), drawn from fold_in(key, 0); out_proj's weight torch's Linear
// default U(+-1/sqrt(E)) from fold_in(key, 1) (as Linear::init with that key); both biases 0.
struct MultiHeadAttention {
  Linear in_proj;   // weight [E, 3E] (columns: q, k, v), bias [3E]; torch's in_proj_weight [3E, E]
  Linear out_proj;  // [E, E]
  int64_t num_heads = 1;
  Static<double> dropout;
  bool batch_first = false;
  static MultiHeadAttention init(const Tensor& key, int64_t embed_dim, int64_t num_heads,
                                 const MultiHeadAttentionOptions& options = {});
  int64_t embed_dim() const { return out_proj.in_features(); }
  // Self-attention: query = key = value = x (one projection matmul).
  Tensor operator()(const Tensor& x) const;
  // Evaluation mode (no dropout).
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                    const AttentionMasks& masks = {}) const;
  // The mode of ctx: in training, dropout draws ctx.next_key() (one fold per call).
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                    const AttentionMasks& masks, Context& ctx) const;
};

}  // namespace rune::nn

RUNE_TREE(rune::nn::MultiHeadAttention, in_proj, out_proj, num_heads, dropout, batch_first)
