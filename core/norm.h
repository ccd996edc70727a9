// Normalisations with running state (issue 40; docs/norm.md): nx::nn::batch_norm in training
// and inference mode, its running statistics a tree (BatchNormState) that rune::jit, rune::grad,
// the optimisers and nx::save walk with the model, and nx::nn::group_norm. Compositions of nx
// ops, as layer_norm (core/nn.h): they run eagerly and under rune::jit on every device and
// differentiate and batch through their parts. 16-bit floats compute at float32 and round once.
#pragma once
#include <cstdint>

#include "core/ops.h"
#include "core/tree.h"

namespace nx::nn {

// batch_norm's running statistics: mean and variance per channel, 1-D [C] of one float dtype
// (torch's running_mean / running_var buffers). A tree (RUNE_TREE below): pass it to a compiled
// step as a consumed argument (rune::Signature().consume(i)) and the new state is written into
// its memory.
struct BatchNormState {
  Tensor mean, var;
};

// torch's initial state: mean 0, var 1, [channels] of dtype t on the default device.
BatchNormState batch_norm_state(int64_t channels, DType t = DType::Float32);

struct BatchNormOptions {
  int axis = 1;           // the channel axis: 1 channels first (NC...), -1 channels last (N...C)
  double momentum = 0.1;  // torch's: running = (1 - momentum) running + momentum batch_stat
  double eps = 1e-5;
};

// A training step's output: the normalised x and the updated running statistics.
struct BatchNormOutput {
  Tensor y;
  BatchNormState state;
};

// Training mode (torch.nn.functional.batch_norm(training=True)): the batch statistics over every
// axis of x but the channel axis (n = x.size() / C elements per channel),
//   mean = sum(x) / n,  var = sum((x - mean)^2) / n (biased),
//   y = (x - mean) * rsqrt(var + eps) * gamma + beta,
// and the running statistics updated with the unbiased variance, as torch:
//   state.mean' = momentum * mean + (1 - momentum) * state.mean
//   state.var'  = momentum * var * n / (n - 1) + (1 - momentum) * state.var
// computed at the state's dtype. No gradient flows into or out of the new state (it is
// nx::stop_gradient'ed); y differentiates with respect to x, gamma and beta. x: float, at least
// 2-D, n >= 2 (torch's "more than 1 value per channel"); gamma, beta: [C] of x's dtype; state:
// mean and var [C] of one float dtype; momentum in [0, 1], eps >= 0.
BatchNormOutput batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const BatchNormState& state, const BatchNormOptions& options = {});
// Inference mode (training=False): y = (x - state.mean) * rsqrt(state.var + eps) * gamma + beta,
// the statistics cast to x's compute dtype and held constant (no gradient reaches them).
// options.momentum is not used.
Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const BatchNormState& state, const BatchNormOptions& options = {});

// torch.nn.functional.group_norm: x [N, C, ...] with C's channels split into num_groups
// consecutive groups; each (sample, group) is normalised over its C / num_groups channels and
// every spatial position with its own biased statistics (mean, var over those m elements):
//   y = (x - mean) * rsqrt(var + eps) * gamma[c] + beta[c]
// num_groups 1 normalises each sample as a whole, num_groups C is instance norm. x: float, at
// least 2-D; num_groups >= 1 divides C; gamma, beta: [C] of x's dtype; eps >= 0.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& gamma, const Tensor& beta,
                  double eps = 1e-5);

}  // namespace nx::nn

RUNE_TREE(nx::nn::BatchNormState, mean, var)
RUNE_TREE(nx::nn::BatchNormOutput, y, state)
