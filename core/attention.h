// nx::nn::scaled_dot_product_attention (issue 41; docs/attention.md): torch's
// torch.nn.functional.scaled_dot_product_attention as a composition of nx ops (the unfused
// formula), so it runs eagerly and under rune::jit on every device with the same bits, and
// differentiates (grad, vjp, jvp) and batches (vmap) through its parts. 16-bit floats compute at
// float32 and round once.
#pragma once
#include <optional>

#include "core/ops.h"

namespace nx::nn {

struct AttentionOptions {
  // torch's is_causal: the top-left aligned lower triangle, query i attends to keys j <= i
  // (torch.ones(Tq, Tk).tril()); with Tq > Tk the rows i >= Tk see every key, with Tq < Tk the
  // last Tk - Tq keys are seen by no query. Unlike torch, it may be combined with `mask` (both
  // apply).
  bool causal = false;
  // Broadcastable to the scores [..., Tq, Tk]: bool (true: the key is attended, torch's
  // attn_mask convention; a padding mask [B, 1, 1, Tk]) or q's float dtype (added to the scaled
  // scores; -inf masks the key).
  std::optional<Tensor> mask;
  // torch's dropout_p: each attention weight (after the softmax) zeroed with this probability and
  // the rest scaled by 1 / (1 - dropout), drawn by nx::random::dropout from `dropout_key`
  // (required when dropout > 0). In [0, 1).
  double dropout = 0;
  std::optional<Tensor> dropout_key;
  // The scores' factor; none: 1 / sqrt(D). Finite.
  std::optional<double> scale;
  // torch's enable_gqa: k and v may have fewer heads (axis -3) than q, Hq a multiple of Hk; query
  // head h uses key head h / (Hq / Hk) (torch's repeat_interleave).
  bool enable_gqa = false;
};

// softmax(q @ k^T * scale + mask) @ v over the last two axes:
//   q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv] -> [..., Tq, Dv]
// one float dtype; the batch axes (all but the last two) broadcast as nx::matmul's. A query row
// whose every key is masked (by the bool mask, the causal triangle or -inf in the float mask;
// every row when Tk = 0) gives zeros and passes no gradient (torch 2.5+'s choice; plain softmax
// would give NaN). Causal attention over more than 128 queries (without dropout) runs in blocks
// of 128 query rows, each against the keys its rows may see: the forward pass keeps the whole
// formula's bits, k's and v's gradients are summed over the blocks (docs/attention.md, "Cost").
// Errors raise std::invalid_argument naming the API and the shapes.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

}  // namespace nx::nn
