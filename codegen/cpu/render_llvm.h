// Renders a (decomposed) kernel as LLVM IR text for the host: optimise (codegen/plan.h) picks the
// host plan, lower (codegen/lower.h) fixes every loop, print_llvm spells the statements.
//
// Entry points, each `void name(i8** bufs, i64 lo, i64 hi)` over work items [lo, hi):
//  - `name`: elementwise kernels: items are output elements (C order). Reductions with one
//    block: items are outputs. Reductions with several blocks: items are outputs, and the
//    block partials come from `name_p1` through a scratch buffer (the kernel's last param).
//  - `name_p1` (several blocks only): items are (output, block) pairs.
// bufs[p] is the base pointer of kernel param p (param 0: the output).
#pragma once
#include <string>

#include "codegen/kernel.h"
#include "codegen/lowered.h"

namespace codegen::cpu {

struct RenderedKernel {
  std::string name;
  std::string ir;
  bool two_phase = false;
  int64_t phase1_items = 0;  // two-phase: the work items of the first entry (`name`_p1)
};

// Prints a lowered host kernel (no Grid loops, no vector statements); entry e is `name` + suffix.
std::string print_llvm(const lir::Kernel& k, const std::string& name);

// `k` must already be decomposed. `name` becomes the entry symbol. `threads`: the host thread
// pool's size, which the plan takes into account (codegen/plan.h DeviceDesc).
RenderedKernel render_llvm(const KernelSpec& k, const std::string& name, int threads = 1);

}  // namespace codegen::cpu
