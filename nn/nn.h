// rune::nn (docs/nn.md): layers and initialisers for models that stay trees. One header:
//   nn/init.h     rune::nn::init: initialisers drawing from a key (normal, truncated_normal,
//                 uniform, glorot / xavier, kaiming / he, lecun, variance_scaling, constants)
//   nn/module.h   Static, Context (training / evaluation, dropout keys, running statistics),
//                 named_params, count_params, with_buffers, Sequential, Lambda
//   nn/layers.h   Linear, Embedding, LayerNorm, RMSNorm, BatchNorm, GroupNorm, Dropout, Conv,
//                 ConvTranspose, MaxPool, AvgPool, Flatten, activations, MLP
//   nn/torch_interop.h  PyTorch state_dicts (safetensors / .npz) in and out of these models
#pragma once
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/torch_interop.h"
#include "trace/rune.h"
