// Convolutions (issue 40; docs/conv.md): nx::conv in the generality of
// jax.lax.conv_general_dilated over any number of spatial dimensions, and nx::conv_transpose with
// torch's conv_transpose semantics. This first version composes nx ops (an im2col: one nx::take
// per spatial dimension gathers the windows, one batched nx::matmul contracts them), so it runs
// eagerly and under rune::jit on every device and differentiates and batches (rune::vmap)
// through its parts. Speed is not yet the goal: a convolution primitive lowered to an
// implicit-GEMM kernel replaces the composition later, with the same semantics and sum order.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/ops.h"

namespace nx {

// Padding of the spatial dimensions: "VALID" (none), "SAME" (JAX's: the output has
// ceil(in / stride) positions, the padding split with the odd element at the end), or explicit
// (lo, hi) pairs, one per spatial dimension (negative pairs crop).
struct Padding {
  Padding() = default;
  Padding(const char* m) : mode(m) {}
  Padding(std::string m) : mode(std::move(m)) {}
  Padding(std::vector<std::pair<int64_t, int64_t>> p) : mode(), pairs(std::move(p)) {}
  Padding(std::initializer_list<std::pair<int64_t, int64_t>> p) : mode(), pairs(p) {}
  std::string mode = "VALID";  // empty when `pairs` is used
  std::vector<std::pair<int64_t, int64_t>> pairs;
};

// The arguments of nx::conv beside its operands. Vectors hold one value per spatial dimension,
// in the order of the kernel's spatial dimensions; an empty vector means 1 for each.
struct ConvOptions {
  std::vector<int64_t> strides;       // window strides
  Padding padding = "VALID";          // applied after lhs dilation
  std::vector<int64_t> lhs_dilation;  // input dilation: d - 1 zeros between input elements
  std::vector<int64_t> rhs_dilation;  // kernel dilation (torch's dilation, "atrous")
  int64_t feature_groups = 1;         // input and output channels split in groups
  int64_t batch_groups = 1;           // XLA's batch_group_count (at most one of the two > 1)
  // "" (channels first: input N C spatial..., kernel O I spatial..., output as the input),
  // one spec naming the input's dimensions ("NCHW", "NCW", "NCDHW": kernel OI + the spatial
  // letters; "NHWC", "NWC", "NDHWC": kernel spatial letters + IO), or JAX's three specs
  // "lhs,rhs,out" ("NHWC,HWIO,NHWC"): N and C in the input and output, O and I in the kernel,
  // the same spatial letters in all three, matched by letter.
  std::string layout;
};

// The convolution of x (input) with w (kernel), as jax.lax.conv_general_dilated:
//   out[n, o, p...] = sum over c in o's group, k... of
//                     xd[n', c', p * stride + k * rhs_dilation - lo] * w[o, c, k...]
// where xd is x dilated by lhs_dilation and padded (positions outside it are 0). Feature groups
// G: C = G * I, group g reads channels [g I, (g+1) I) and writes outputs [g O/G, (g+1) O/G)
// (depthwise when G == C). Batch groups B: the batch splits into B consecutive blocks of N / B;
// block b feeds outputs [b O/B, (b+1) O/B); the output batch is N / B. Floating-point operands
// of one dtype (16-bit floats compute at float32 and round once). Each output is one fused
// multiply-add chain (nx::matmul's) over (input channel, kernel offsets), the channel outermost,
// the offsets row-major in the kernel's spatial order, each increasing.
Tensor conv(const Tensor& x, const Tensor& w, const ConvOptions& options = {});

// The arguments of nx::conv_transpose, torch's conv_transpose{1,2,3}d: one value per spatial
// dimension (empty: stride 1, padding 0, output_padding 0, dilation 1).
struct ConvTransposeOptions {
  std::vector<int64_t> strides;
  std::vector<int64_t> padding;         // torch's: removed from both ends of the full output
  std::vector<int64_t> output_padding;  // added at the end; < stride or < dilation (torch's rule)
  std::vector<int64_t> dilation;
  int64_t groups = 1;
  // "" or channels first ("NCHW"...): x [N, Cin, spatial...], w [Cin, Cout / groups, k...]
  // (torch's). Channels last ("NHWC"...): x [N, spatial..., Cin], w [k..., Cin, Cout / groups],
  // the output channels last.
  std::string layout;
};

// torch.nn.functional.conv_transpose: out[n, g Cout/G + o, i * stride - padding + k * dilation]
// += x[n, g Cin/G + c, i] * w[g Cin/G + c, o, k]; the output extent per spatial dimension is
// (in - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1. Computed as nx::conv of x
// dilated by the stride with the kernel flipped and its channel axes swapped (conv's sum order).
Tensor conv_transpose(const Tensor& x, const Tensor& w, const ConvTransposeOptions& options = {});

}  // namespace nx
