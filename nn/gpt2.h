// GPT-2 (Radford et al. 2019, Hugging Face's GPT2LMHeadModel) as a rune::nn model (docs/nn.md,
// "Hugging Face GPT-2"): the module tree with Hugging Face's names, the forward pass to logits
// and greedy generation. Loading a transformers checkpoint is nn/hf_gpt2.h.
//
// The tree's paths are transformers' parameter names without "transformer.": wte.weight,
// wpe.weight, h.<i>.ln_1.{weight,bias}, h.<i>.attn.c_attn.{weight,bias},
// h.<i>.attn.c_proj.{weight,bias}, h.<i>.ln_2.{weight,bias}, h.<i>.mlp.c_fc.{weight,bias},
// h.<i>.mlp.c_proj.{weight,bias}, ln_f.{weight,bias}. Linear weights are [in, out], the layout of
// transformers' Conv1D. The output projection (lm_head) is wte's transpose: tied, no tensor of
// its own. model(ids) computes in evaluation mode; model(ids, ctx) in ctx's mode, with
// transformers' dropout in training (nn::Context::train(key)).
#pragma once
#include <cstdint>
#include <vector>

#include "nn/layers.h"
#include "nn/module.h"

namespace rune::nn {

// The hyperparameters of transformers' GPT2Config that shape the model (its defaults are
// GPT-2 small's). The activation is gelu_new, the tanh approximation of GELU (nx::gelu).
struct GPT2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // the longest sequence (rows of wpe)
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;  // divides n_embd
  int64_t n_inner = 0;  // the MLP's hidden width; 0: 4 * n_embd (transformers' None)
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;  // GPT2::init's standard deviation
  // Dropout rates in training, in [0, 1) (transformers' names and defaults): after the
  // embeddings, on the attention weights, on each residual branch (before it is added).
  double embd_pdrop = 0.1, attn_pdrop = 0.1, resid_pdrop = 0.1;

  int64_t inner() const { return n_inner ? n_inner : 4 * n_embd; }
};

struct GPT2Attention {
  Linear c_attn;  // [n_embd, 3 n_embd]: q, k, v side by side
  Linear c_proj;  // [n_embd, n_embd]
};
struct GPT2MLP {
  Linear c_fc;    // [n_embd, inner]
  Linear c_proj;  // [inner, n_embd]
};
struct GPT2Block {
  LayerNorm ln_1;
  GPT2Attention attn;
  LayerNorm ln_2;
  GPT2MLP mlp;
};

struct GPT2 {
  Embedding wte;  // [vocab_size, n_embd], also the output projection
  Embedding wpe;  // [n_positions, n_embd]
  std::vector<GPT2Block> h;
  LayerNorm ln_f;
  // Static leaves (the rest of the config is in the tensors' shapes).
  int64_t n_head = 1;
  Static<double> embd_pdrop, attn_pdrop, resid_pdrop;

  // transformers' initialisation (GPT2PreTrainedModel._init_weights): weights and embeddings
  // N(0, initializer_range^2), the residual projections (attn.c_proj, mlp.c_proj)
  // N(0, initializer_range^2 / (2 n_layer)), biases 0, LayerNorms 1 and 0; float32 tensors on
  // the key's device. Tensor j of block i draws from fold_in(fold_in(key, 2 + i), j); wte and wpe
  // from fold_in(key, 0) and fold_in(key, 1).
  static GPT2 init(const Tensor& key, const GPT2Config& config);
  GPT2Config config() const;  // read back (initializer_range left default)

  // Logits [B, T, vocab_size] of token ids [B, T] (any integer dtype; 1 <= T <= n_positions):
  // position t sees positions 0..t only (causal attention). Out-of-range ids clamp, as
  // nx::take.
  Tensor operator()(const Tensor& ids) const;
  // The same in ctx's mode. In training (transformers' model.train()), dropout at each site with
  // a rate > 0 draws ctx.next_key() in this order: the embeddings' sum (embd_pdrop), then per
  // block the attention weights (attn_pdrop), the attention branch's output and the MLP
  // branch's output (resid_pdrop). In evaluation it is model(ids).
  Tensor operator()(const Tensor& ids, Context& ctx) const;
};

// The greedy continuation: `prompt` [B, T0] (integer ids) followed by `new_tokens` tokens, each
// the argmax of the logits at the previous position (ties: the lowest id), [B, T0 +
// new_tokens] of prompt's dtype. T0 + new_tokens <= n_positions. Each step recomputes the whole
// sequence, padded to its final length so that every step has one shape: the steps are one
// rune::fori_loop, traced once, eagerly and under rune::jit alike (the padding sits after the
// positions a step reads, which causal attention keeps out of them).
Tensor greedy_generate(const GPT2& model, const Tensor& prompt, int64_t new_tokens);

}  // namespace rune::nn

RUNE_TREE(rune::nn::GPT2Attention, c_attn, c_proj)
RUNE_TREE(rune::nn::GPT2MLP, c_fc, c_proj)
RUNE_TREE(rune::nn::GPT2Block, ln_1, attn, ln_2, mlp)
RUNE_TREE(rune::nn::GPT2, wte, wpe, h, ln_f, n_head, embd_pdrop, attn_pdrop, resid_pdrop)
