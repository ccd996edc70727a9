// The lowering passes, one per kernel kind; codegen/lower.cpp picks one by kind (lower()). Each
// takes a validated kernel and its plan with the parts that do not apply removed (applicable(),
// codegen/plan.h) and returns the whole lowered kernel.
#pragma once
#include "codegen/kernel.h"
#include "codegen/lowered.h"
#include "codegen/plan.h"

namespace codegen::lowering {

// codegen/lower/elementwise.cpp: no reduction; the host's rows or the GPU's grid-stride items.
lir::Kernel lower_elementwise(const KernelSpec& k, const Plan& p);
// codegen/lower/reduction.cpp: a reduction (rbody), one block or several (two phases).
lir::Kernel lower_reduction(const KernelSpec& k, const Plan& p);
// codegen/lower/rows.cpp: a row kernel (stages, then the body at the outer index or the row).
lir::Kernel lower_rows(const KernelSpec& k, const Plan& p);
// codegen/lower/contraction.cpp: a matrix product, one thread per output.
lir::Kernel lower_contraction(const KernelSpec& k, const Plan& p);
// codegen/lower/tiled_contraction.cpp: a matrix product under plan part tiles (and mma).
lir::Kernel lower_tiled_contraction(const KernelSpec& k, const Plan& p);
// codegen/lower/library.cpp: the GPU's library calls (cumsum, sort, argsort).
lir::Kernel lower_library_call(const KernelSpec& k, const Plan& p);
// codegen/lower/attention.cpp: a GPU attention kernel (KernelSpec::attention) as one
// fixed-block entry: a block per batch element and block of query rows, the scores in shared
// memory (codegen/lower/attention.h).
lir::Kernel lower_attention(const KernelSpec& k, const Plan& p);
// codegen/lower/sized.cpp: an eager op kind's kernel for every shape (KernelSpec::sizes), its
// sizes and strides loaded from its descriptor param; the host only.
lir::Kernel lower_sized(const KernelSpec& k, const Plan& p);

}  // namespace codegen::lowering
