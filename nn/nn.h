// rune::nn (docs/nn.md): layers and initialisers for models that stay trees. One header:
//   nn/init.h     rune::nn::init: initialisers drawing from a key (normal, truncated_normal,
//                 uniform, glorot / xavier, kaiming / he, lecun, variance_scaling, constants)
//   nn/module.h   Static, Context (training / evaluation, dropout keys, running statistics),
//                 named_params, count_params, with_buffers, Sequential, Lambda
//   nn/layers.h   Linear, Embedding, LayerNorm, RMSNorm, BatchNorm, GroupNorm, Dropout, Conv,
//                 ConvTranspose, MaxPool, AvgPool, Flatten, activations, MLP
//   nn/attention.h  MultiHeadAttention (torch's nn.MultiheadAttention) on
//                 nx::nn::scaled_dot_product_attention
//   nn/torch_interop.h  PyTorch state_dicts (safetensors / .npz) in and out of these models
//   nn/gpt2.h     GPT-2 (transformers' GPT2LMHeadModel): the model, logits, greedy generation
//   nn/hf_gpt2.h  Hugging Face GPT-2 checkpoints (save_pretrained's directory) into a GPT2
#pragma once
#include "nn/attention.h"
#include "nn/gpt2.h"
#include "nn/hf_gpt2.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/torch_interop.h"
#include "trace/rune.h"
