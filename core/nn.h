// nx::nn: the normalisations and losses a model needs (issue 18, part "math";
// docs/model-math.md). Compositions of nx ops, so each runs eagerly and under rune::jit, on every
// device, and differentiates through its parts. 16-bit floats compute at float32 and round once.
#pragma once
#include <optional>

#include "core/ops.h"

namespace nx::nn {

// (x - mean) / sqrt(var + eps) * gamma + beta over `axis` (the biased variance, as torch and
// flax); gamma and beta are 1-D of x's extent along `axis` and x's dtype.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5,
                  int axis = -1);
// x / sqrt(mean(x^2) + eps) * gamma over the last axis; gamma is 1-D of that extent.
Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps = 1e-6);
// mean((pred - target)^2) over every element: a 0-d tensor (pred and target: one float dtype,
// one shape).
Tensor mse(const Tensor& pred, const Tensor& target);
// The mean over the batch of -sum_c t_c log_softmax(logits)_c, t = (1 - s) one_hot(label) + s / C
// (torch.nn.functional.cross_entropy(label_smoothing=s), optax's with integer labels). logits
// [..., C] float, labels [...] integer. A label outside [0, C) raises std::invalid_argument when
// the labels are concrete; under rune::jit an nx::check raises it after the program ran.
// ignore_index (torch's, e.g. -100 for padding): rows with that label add nothing and the mean
// is over the other rows (NaN when every row is ignored, as torch).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing = 0,
                     std::optional<int64_t> ignore_index = std::nullopt);

}  // namespace nx::nn
