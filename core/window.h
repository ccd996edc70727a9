// Windowed reductions and pooling (issue 40; docs/conv.md): nx::reduce_window as
// jax.lax.reduce_window for sum, max and min, and nx::nn::max_pool, avg_pool and
// global_avg_pool. Compositions of nx ops (the windows gathered by one nx::take per windowed
// axis, then one reduction over the window), so they run eagerly and under rune::jit on every
// device and differentiate and batch through their parts. Speed is not yet the goal.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/conv.h"  // nx::Padding
#include "core/ops.h"

namespace nx {

enum class WindowReduce { Sum, Max, Min };

// The arguments of nx::reduce_window beside the window: one value per axis of the operand
// (empty: 1 for each).
struct WindowOptions {
  std::vector<int64_t> strides;
  Padding padding = "VALID";      // padded with the reduction's identity (0, -inf, +inf)
  std::vector<int64_t> dilation;  // window dilation
};

// r[p...] = the reduction over the window offsets j... of xp[p * stride + j * dilation] where xp
// is x padded with the reduction's identity (Sum: 0; Max: -inf, or the dtype's lowest; Min:
// +inf, or its highest); `window` has one extent per axis of x. The result keeps x's dtype. Sum
// adds the window's elements in nx::sum's order over the window offsets row-major. Max and Min
// pick the first extreme in row-major window order (a NaN counting as the extreme, as
// nx::argmax), so the gradient of every window goes to that one element (torch's and XLA's
// select_and_scatter rule for ties); a window of padding alone gives the identity and no
// gradient. Any dtype but bool; Min of int64 / uint64 with padding raises (its identity is not a
// double).
Tensor reduce_window(const Tensor& x, WindowReduce op, const Shape& window,
                     const WindowOptions& options = {});

namespace nn {

// The arguments of the pools beside the window (one extent per spatial dimension).
struct PoolOptions {
  std::vector<int64_t> strides;  // empty: the window (torch's default; flax's is 1)
  Padding padding = "VALID";
  std::vector<int64_t> dilation;  // window dilation (torch's max_pool dilation)
  bool count_include_pad = true;  // avg_pool: divide by the window's extent (torch's default)
  // "" or channels first ("NCHW", "NCW", "NCDHW": x [N, C, spatial...]); channels last ("NHWC",
  // ...: x [N, spatial..., C]). Any letters for the spatial dimensions, in x's order.
  std::string layout;
};

// The maximum of each window of the spatial dimensions (reduce_window Max: padding is -inf,
// ties and gradients go to the first maximum in row-major window order).
Tensor max_pool(const Tensor& x, const Shape& window, const PoolOptions& options = {});
// The mean of each window: the window's sum (reduce_window Sum) divided by the window's extent
// (count_include_pad) or by the number of its elements inside x (count_include_pad false).
// Floats; 16-bit floats compute at float32 and round once.
Tensor avg_pool(const Tensor& x, const Shape& window, const PoolOptions& options = {});
// The mean over the spatial dimensions: [N, C] (keepdims: the spatial extents become 1).
Tensor global_avg_pool(const Tensor& x, const std::string& layout = "", bool keepdims = false);

}  // namespace nn
}  // namespace nx
