// lower(kernel, plan): the one pass that fixes how a kernel iterates. It writes the documented
// orders of docs/numerics.md once for every backend:
//   - a reduction of R elements per output: blocks of kReduceBlock elements (one block when
//     R <= kReduceBlock); in each block, lane l (of kReduceLanes = 8) combines the elements
//     l, l + 8, l + 16, ... in increasing order from the identity; the lanes combine by the fixed
//     tree ((0,4),(2,6)),((1,5),(3,7)); block partials combine left to right;
//   - a matrix product (on GPUs; the host runs codegen/cpu/gemm.cpp, which keeps the same chain):
//     each output is the fma chain over k in increasing order from +0;
//   - cumulative sums: acc = x[0], then acc = acc + x[i] in increasing i.
// The plan (codegen/plan.h) only maps these onto loops, lanes and threads.
//
// It is one small pass per kernel kind, each in a file of codegen/lower/ over the shared
// builder (codegen/lower/builder.h): elementwise, reduction, rows (row kernels), contraction,
// tiled_contraction (with tiled_staging and tiled_mma) and library (the GPU's library calls);
// lower() picks the pass (codegen/lower.cpp, kPasses). A new kernel kind is a new pass there.
//
// The input kernel must be decomposed (codegen/decompose.h); the result holds only core ops
// (codegen/core_ops.h). Throws std::logic_error when validate(k, plan) fails.
#pragma once
#include "codegen/kernel.h"
#include "codegen/lowered.h"
#include "codegen/plan.h"

namespace codegen {

lir::Kernel lower(const KernelSpec& k, const Plan& plan);

// The params of k's lowered entry points before any scratch a pass adds (a two-phase
// reduction's partials, last): the output, then each slot the kernel reads, with its dtype.
std::vector<lir::Param> kernel_params(const KernelSpec& k);

// The name of the pass that lowers k under plan: its file is codegen/lower/<name>.cpp.
const char* lowering_pass(const KernelSpec& k, const Plan& plan);

// DEBUG >= 3: one line with the kernel's plan ("rune: plan <plan> for <kind> [shape] on <target>");
// DEBUG >= 4: also the pass that lowered it and the lowered IR (lir::to_string).
void debug_print_lowered(const KernelSpec& k, const Plan& plan, const lir::Kernel& lowered,
                         const std::string& target);

}  // namespace codegen
