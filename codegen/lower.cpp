// lower(kernel, plan): picks the lowering pass of the kernel's kind (codegen/lower/passes.h).
#include "codegen/lower.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "codegen/lower/passes.h"
#include "ir/debug.h"

namespace codegen {

using ir::debug_level;
using ir::op_name;

namespace {

// The passes by kernel kind, tested in this order: the first whose kind the kernel has lowers
// it (a contraction is tiled where the plan says tiles; a kernel with a reduction body and none
// of the other kinds is a reduction).
struct LoweringPass {
  const char* name;  // also its file: codegen/lower/<name>.cpp
  bool (*kind)(const KernelSpec& k, const Plan& p);
  lir::Kernel (*lower)(const KernelSpec& k, const Plan& p);
};
const LoweringPass kPasses[] = {
    {"sized", [](const KernelSpec& k, const Plan&) { return k.runtime_sizes(); },
     lowering::lower_sized},
    {"attention", [](const KernelSpec& k, const Plan&) { return k.fused_attention(); },
     lowering::lower_attention},
    {"tiled_contraction", [](const KernelSpec& k, const Plan& p) { return k.contract && p.tiles; },
     lowering::lower_tiled_contraction},
    {"contraction", [](const KernelSpec& k, const Plan&) { return k.contract.has_value(); },
     lowering::lower_contraction},
    {"library", [](const KernelSpec& k, const Plan&) { return k.library.has_value(); },
     lowering::lower_library_call},
    {"rows", [](const KernelSpec& k, const Plan&) { return k.row(); }, lowering::lower_rows},
    {"elementwise", [](const KernelSpec& k, const Plan&) { return !k.rbody; },
     lowering::lower_elementwise},
    {"reduction", [](const KernelSpec&, const Plan&) { return true; }, lowering::lower_reduction},
};

const LoweringPass& pass_for(const KernelSpec& k, const Plan& applicable_plan) {
  for (const LoweringPass& pass : kPasses)
    if (pass.kind(k, applicable_plan)) return pass;
  throw std::logic_error("lower: no pass");  // unreachable: reduction takes every kernel
}

}  // namespace

const char* lowering_pass(const KernelSpec& k, const Plan& plan) {
  return pass_for(k, applicable(k, plan)).name;
}

void debug_print_lowered(const KernelSpec& k, const Plan& plan, const lir::Kernel& lowered,
                         const std::string& target) {
  if (debug_level() < 3) return;
  std::string kind = k.fused_attention() ? "attention"
                     : k.contract        ? "contraction"
                     : k.library         ? std::string(op_name(k.library->op))
                     : k.rbody           ? std::string(op_name(k.reduce_op))
                     : k.row()           ? "row"
                                         : "elementwise";
  std::string shape;
  for (int64_t d : k.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  std::fprintf(stderr, "rune: plan: %s for %s [%s] on %s\n", plan.str().c_str(), kind.c_str(),
               shape.c_str(), target.c_str());
  if (debug_level() >= 4)
    std::fprintf(stderr, "rune: lowered by codegen/lower/%s.cpp:\n%s", lowering_pass(k, plan),
                 lir::to_string(lowered).c_str());
}

lir::Kernel lower(const KernelSpec& k, const Plan& plan) {
  if (std::string why = validate(k, plan); !why.empty())
    throw std::logic_error("lower: plan \"" + plan.str() + "\" is not valid here: " + why);
  if (!k.body && !k.contract && !k.library && !k.fused_attention())
    throw std::logic_error("lower: kernel has no body");
  if (k.row() && (k.rbody || k.blocks() > 1))
    throw std::logic_error("lower: a row kernel has stages only, of one reduction block");
  // Plan parts that do not apply to this kernel's kind are ignored (codegen/plan.h).
  const Plan p = applicable(k, plan);
  return pass_for(k, p).lower(k, p);
}

std::vector<lir::Param> kernel_params(const KernelSpec& k) {
  size_t n = k.slots.empty() ? 1 : k.slots.size();
  std::vector<lir::Param> params(n, {ir::DType::Float32, false});
  params[0] = {k.out_dtype, true};
  if (k.fused_attention()) {
    // Each slot as the parts read it (their params name their own slots; the scores' and
    // weights' slots are not the kernel's).
    for (const KernelSpec& part : k.attention) {
      const std::vector<lir::Param> pp = kernel_params(part);
      for (size_t q = 1; q < part.slots.size() && q < pp.size(); ++q) {
        auto it = std::find(k.slots.begin(), k.slots.end(), part.slots[q]);
        if (it != k.slots.end() && it != k.slots.begin())
          params[static_cast<size_t>(it - k.slots.begin())].dtype = pp[q].dtype;
      }
    }
    return params;
  }
  if (k.contract) {
    params.at(static_cast<size_t>(k.contract->a_param)).dtype = k.contract->a_dtype;
    params.at(static_cast<size_t>(k.contract->b_param)).dtype = k.contract->b_dtype;
  }
  if (k.library) params.at(1).dtype = k.library->in_dtype;
  if (k.runtime_sizes()) params.back().dtype = ir::DType::Int64;  // the descriptor
  for (ir::NodeRef root : k.roots())
    for (ir::NodeRef x : ir::toposort({root})) {
      // Loads, and a Gather's reads (LoadAt, codegen/schedule.cpp), give their param's dtype.
      if (x->op != ir::Op::Load && x->op != ir::Op::LoadAt) continue;
      size_t q =
          static_cast<size_t>(x->op == ir::Op::Load ? ir::arg_load(x).param : ir::arg_int(x));
      if (q >= params.size()) params.resize(q + 1, {ir::DType::Float32, false});
      params[q].dtype = x->dtype;
    }
  return params;
}

}  // namespace codegen
