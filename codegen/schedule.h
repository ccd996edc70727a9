// Schedule: turn a tensor graph into kernels. Elementwise chains, movement ops and broadcasts
// fuse into the kernel of the node that consumes them; a reduction fuses with its elementwise
// producers and, when its result is consumed elementwise at its own shape, with its consumers.
// A node is materialised (gets a buffer) only when it is a root, a reduction that cannot be
// fused, or the source of a reshape that no strided view can express.
#pragma once
#include "codegen/kernel.h"

namespace codegen {

// `roots` are the graph's outputs; Param leaves are the inputs (arg LoadArg{index, layout}),
// numbered 0..n_inputs-1.
// fuse_epilogues: elementwise consumers of a matrix product fuse into its kernel (the host's
// gemm applies them tile by tile; the GPU kernel applies them to each finished output).
// half_operands (GPU schedules): a matrix product reads float16 / bfloat16 operands directly
// (the exact cast to float32 that nx::matmul puts before it folds into the kernel's reads) and
// its rounding back to that dtype fuses as its epilogue; the host's gemm reads float32 only.
// fuse_attention: the chain q k^T -> softmax row kernel -> weights v becomes one attention
// kernel (codegen/schedule_attention.h), unless RUNE_FUSE_ATTENTION=0; in a GPU schedule
// (half_operands) one GPU kernel, where a row of its scores fits the kernel's shared tile.
// With DEBUG >= 3 it prints one line per kernel (describe, then the slots it writes and reads).
Schedule schedule(const std::vector<ir::NodeRef>& roots, int n_inputs, bool fuse_epilogues = false,
                  bool half_operands = false, bool fuse_attention = false);

// One kernel in one line: its kind, output dtype and shape, the reduced shape and operation of
// a reduction, how many params it reads and how many operations fused into it, e.g.
//   "reduce float64 [] over [4] by ReduceSum, 3 params, 4+1 ops"
// Kinds: elementwise, reduce, row (reductions chained over the same rows, "by A then B",
// "writes rows" when its body runs over the rows), contract (a matrix product; its ops are the
// fused epilogue's), library <op> (a sort or scan), attention (its scores' shape and its row
// kernel's reductions; its ops are the row kernel's). Ops count the distinct unary, binary and
// ternary nodes of the kernel's bodies (the reductions' bodies first): what fused, in a number.
std::string describe(const KernelSpec& k);

}  // namespace codegen
