// GPT-2 as a rune::nn model (nn/gpt2.h, docs/nn.md "Hugging Face GPT-2"): initialisation, the
// forward pass (transformers' GPT2LMHeadModel in evaluation mode, op for op) and greedy
// generation.
#include "nn/gpt2.h"

#include <cmath>
#include <string>

#include "core/attention.h"
#include "core/random.h"
#include "ir/dtype.h"
#include "nn/errors.h"
#include "trace/control_flow.h"

namespace rune::nn {

namespace {

using detail::fail;

// x + attn(ln_1(x)), then + mlp(ln_2(.)), for x [B, T, C]. The attention is
// nx::nn::scaled_dot_product_attention with the causal mask: transformers' eager attention (the
// scores multiplied by D^-1/2, the mask, softmax over the keys; transformers adds the dtype's
// lowest value where this sets -inf: both give exp(.) = 0 exactly, as every row keeps its
// diagonal). `drop(x, rate)` is dropout in training (the identity otherwise).
template <class Drop>
Tensor block_forward(const GPT2Block& b, const Tensor& x, int64_t n_head, double attn_pdrop,
                     double resid_pdrop, Context& ctx, const Drop& drop) {
  const int64_t B = x.shape()[0], T = x.shape()[1], C = x.shape()[2], D = C / n_head;
  Tensor qkv = b.attn.c_attn(b.ln_1(x));  // [B, T, 3C]
  auto heads = [&](int64_t part) {        // [B, T, 3C] -> [B, H, T, D]
    Tensor t = nx::slice(qkv, {{}, {}, {part * C, (part + 1) * C}});
    return nx::permute(nx::reshape(t, {B, T, n_head, D}), {0, 2, 1, 3});
  };
  nx::nn::AttentionOptions o{.causal = true};
  if (ctx.training() && attn_pdrop > 0)
    o.dropout = attn_pdrop, o.dropout_key = ctx.next_key("rune::nn::GPT2");
  Tensor y = nx::nn::scaled_dot_product_attention(heads(0), heads(1), heads(2), o);
  y = nx::reshape(nx::permute(y, {0, 2, 1, 3}), {B, T, C});
  Tensor h = x + drop(b.attn.c_proj(y), resid_pdrop);
  return h + drop(b.mlp.c_proj(nx::gelu(b.mlp.c_fc(b.ln_2(h)))), resid_pdrop);
}

Linear linear(const Tensor& key, int64_t in, int64_t out, double stddev) {
  return Linear::init(key, in, out,
                      {.weight_init = init::normal(stddev), .bias_init = init::zeros()});
}

}  // namespace

GPT2 GPT2::init(const Tensor& key, const GPT2Config& c) {
  const std::string api = "rune::nn::GPT2::init";
  for (auto [what, v] : {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size},
                         {"n_positions", c.n_positions},
                         {"n_embd", c.n_embd},
                         {"n_layer", c.n_layer},
                         {"n_head", c.n_head}})
    if (v <= 0) fail(api, std::string(what) + " must be positive, got " + std::to_string(v));
  if (c.n_inner < 0)
    fail(api, "n_inner must be positive or 0 (4 n_embd), got " + std::to_string(c.n_inner));
  if (c.n_embd % c.n_head)
    fail(api,
         "n_head " + std::to_string(c.n_head) + " must divide n_embd " + std::to_string(c.n_embd));
  if (!(c.initializer_range >= 0))
    fail(api, "initializer_range must be >= 0, got " + detail::num(c.initializer_range));
  for (auto [what, v] : {std::pair<const char*, double>{"embd_pdrop", c.embd_pdrop},
                         {"attn_pdrop", c.attn_pdrop},
                         {"resid_pdrop", c.resid_pdrop}})
    if (!(v >= 0 && v < 1))
      fail(api, std::string(what) + " must be in [0, 1), got " + detail::num(v));
  const double r = c.initializer_range, r_proj = r / std::sqrt(2.0 * c.n_layer);
  const int64_t C = c.n_embd;
  const LayerNormOptions ln{.eps = c.layer_norm_epsilon};
  GPT2 m;
  m.wte = Embedding::init(nx::random::fold_in(key, 0), c.vocab_size, C,
                          {.weight_init = init::normal(r)});
  m.wpe = Embedding::init(nx::random::fold_in(key, 1), c.n_positions, C,
                          {.weight_init = init::normal(r)});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const Tensor k = nx::random::fold_in(key, static_cast<uint32_t>(2 + i));
    auto sub = [&](uint32_t j) { return nx::random::fold_in(k, j); };
    m.h.push_back(
        GPT2Block{LayerNorm::init(C, ln),
                  {linear(sub(0), C, 3 * C, r), linear(sub(1), C, C, r_proj)},
                  LayerNorm::init(C, ln),
                  {linear(sub(2), C, c.inner(), r), linear(sub(3), c.inner(), C, r_proj)}});
  }
  m.ln_f = LayerNorm::init(C, ln);
  m.n_head = c.n_head;
  m.embd_pdrop = c.embd_pdrop, m.attn_pdrop = c.attn_pdrop, m.resid_pdrop = c.resid_pdrop;
  // LayerNorm::init makes its tensors on the default device: every tensor on the key's.
  return rune::tree_map([&](const Tensor& t) { return nx::place(t, key.device()); }, m);
}

GPT2Config GPT2::config() const {
  GPT2Config c;
  c.vocab_size = wte.weight.shape()[0];
  c.n_positions = wpe.weight.shape()[0];
  c.n_embd = wte.weight.shape()[1];
  c.n_layer = static_cast<int64_t>(h.size());
  c.n_head = n_head;
  c.n_inner = h.empty() ? 0 : h[0].mlp.c_fc.out_features();
  if (c.n_inner == 4 * c.n_embd) c.n_inner = 0;
  c.layer_norm_epsilon = ln_f.eps;
  c.embd_pdrop = embd_pdrop, c.attn_pdrop = attn_pdrop, c.resid_pdrop = resid_pdrop;
  return c;
}

Tensor GPT2::operator()(const Tensor& ids) const {
  Context eval;
  return (*this)(ids, eval);
}

Tensor GPT2::operator()(const Tensor& ids, Context& ctx) const {
  const std::string api = "rune::nn::GPT2";
  const int64_t P = wpe.weight.shape()[0], V = wte.weight.shape()[0], C = wte.weight.shape()[1];
  if (!ir::is_int(ids.dtype()) || ids.dtype() == nx::DType::Bool || ids.ndim() != 2)
    fail(api, "ids must be integer token ids [B, T], got " + ids.describe());
  const int64_t B = ids.shape()[0], T = ids.shape()[1];
  if (T < 1 || T > P)
    fail(api, "the sequence length T must be in [1, n_positions " + std::to_string(P) + "], got " +
                  ids.describe());
  auto drop = [&](const Tensor& x, double rate) {
    return ctx.training() && rate > 0 ? nx::random::dropout(ctx.next_key(api.c_str()), x, rate) : x;
  };
  Tensor x = drop(wte(ids) + nx::slice(wpe.weight, {{0, T}}), embd_pdrop);
  for (const GPT2Block& b : h) x = block_forward(b, x, n_head, attn_pdrop, resid_pdrop, ctx, drop);
  x = ln_f(x);
  // lm_head: x @ wte^T (tied to the input embedding).
  return nx::reshape(nx::matmul(nx::reshape(x, {B * T, C}), nx::transpose(wte.weight)), {B, T, V});
}

Tensor greedy_generate(const GPT2& model, const Tensor& prompt, int64_t new_tokens) {
  const std::string api = "rune::nn::greedy_generate";
  const int64_t P = model.wpe.weight.shape()[0], V = model.wte.weight.shape()[0];
  if (!ir::is_int(prompt.dtype()) || prompt.dtype() == nx::DType::Bool || prompt.ndim() != 2 ||
      prompt.shape()[1] < 1)
    fail(api, "prompt must be integer token ids [B, T0] with T0 >= 1, got " + prompt.describe());
  const int64_t B = prompt.shape()[0], T0 = prompt.shape()[1];
  if (new_tokens < 0) fail(api, "new_tokens must be >= 0, got " + std::to_string(new_tokens));
  if (T0 + new_tokens > P)
    fail(api, "the prompt's " + std::to_string(T0) + " tokens and " + std::to_string(new_tokens) +
                  " new ones exceed n_positions " + std::to_string(P));
  if (new_tokens == 0) return prompt;
  Tensor tokens = nx::pad(prompt, {{0, 0}, {0, new_tokens}});  // [B, T0 + n], zeros after
  return rune::fori_loop(
      T0, T0 + new_tokens,
      [&](const Tensor& pos, const Tensor& seq) {
        Tensor zero = nx::zeros_like(pos);
        Tensor last = nx::dynamic_slice(model(seq), {zero, pos - 1, zero}, {B, 1, V});
        Tensor next = nx::cast(nx::argmax(last, -1), seq.dtype());  // [B, 1]
        return nx::dynamic_update_slice(seq, next, {zero, pos});
      },
      tokens);
}

}  // namespace rune::nn
