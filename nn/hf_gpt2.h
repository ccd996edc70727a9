// Hugging Face GPT-2 checkpoints for rune::nn::GPT2 (nn/gpt2.h; docs/nn.md "Hugging Face
// GPT-2"): the directory transformers' `save_pretrained` writes (config.json and
// model.safetensors) loaded into a GPT2, and a GPT2 saved as such a directory.
//
// Names: transformers' parameter names, with or without the "transformer." prefix
// (GPT2LMHeadModel's files have it, GPT2Model's do not), are the tree's paths (nn/gpt2.h).
// Layouts: transformers' Conv1D weights are stored [in, out], the layout of rune::nn::Linear,
// and taken as they are (no transpose, unlike torch.nn.Linear's [out, in]). Left out: the
// attention's causal-mask buffers h.<i>.attn.bias and h.<i>.attn.masked_bias (older
// transformers saved them; they are not parameters). lm_head.weight, when present, must be
// bit for bit wte.weight (the head is tied; an untied head raises).
#pragma once
#include <optional>
#include <string>

#include "core/io.h"
#include "nn/gpt2.h"

namespace rune::nn {

// The GPT2Config of a config.json's text (`file` names it in messages). Fields as
// transformers' GPT2Config: vocab_size, n_positions, n_embd, n_layer, n_head (positive
// integers up to 2^40), n_inner (one such integer or null), layer_norm_epsilon and
// initializer_range (numbers), activation_function ("gelu_new" or "gelu_pytorch_tanh", both the
// tanh approximation); a missing field takes GPT2Config's default, as transformers does.
// model_type, when present, is "gpt2". Configurations this model does not compute raise:
// scale_attn_weights false, scale_attn_by_inverse_layer_idx true, add_cross_attention true,
// tie_word_embeddings false. Other fields (dropout rates, token ids, ...) are not read.
GPT2Config parse_hf_gpt2_config(const std::string& json, const std::string& file = "");
GPT2Config read_hf_gpt2_config(const std::string& path);  // a config.json file

struct HFGPT2Options {
  // Where the tensors go; none: the default device (nx::default_device()).
  std::optional<nx::Device> device;
};

// A GPT2 of `config` with the tensors of a transformers state_dict (names as in the file: with
// or without "transformer."). Every tensor is float32 of the shape `config` gives it; errors
// name the API, each missing, unexpected or mismatched tensor (its shape in the file and the one
// wanted), all at once.
GPT2 from_hf_gpt2_state_dict(const GPT2Config& config, const nx::TensorMap& tensors,
                             const HFGPT2Options& options = {});

// The GPT-2 checkpoint in `dir` (save_pretrained's output): dir/config.json and
// dir/model.safetensors. Sharded checkpoints (model.safetensors.index.json) and pickled ones
// (pytorch_model.bin) are not read.
GPT2 load_hf_gpt2(const std::string& dir, const HFGPT2Options& options = {});

// Writes `model` as save_pretrained does, for GPT2LMHeadModel.from_pretrained(dir):
// dir/model.safetensors (float32 tensors named "transformer." + their tree paths, lm_head.weight
// left out as it is tied) and dir/config.json (model_type "gpt2", architectures
// ["GPT2LMHeadModel"], the hyperparameters of model.config(), activation_function "gelu_new",
// tie_word_embeddings true; the fields it leaves out take transformers' defaults). Creates dir;
// each file is written to a temporary and renamed over its name.
void save_hf_gpt2(const GPT2& model, const std::string& dir);

}  // namespace rune::nn
