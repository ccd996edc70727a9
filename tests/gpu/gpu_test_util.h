// Kernels from real nx programs, traced and scheduled as rune::jit does, then decomposed as
// codegen/compile.cpp does: the corpus of the GPU source tests.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "codegen/decompose.h"
#include "codegen/schedule.h"
#include "core/interpreter.h"
#include "core/ops.h"
#include "trace/tracer.h"

namespace gpu_test {

using ir::DType;
using ir::Op;
using nx::Tensor;
using Shape = std::vector<int64_t>;

inline constexpr DType kAll[] = {DType::Bool,    DType::UInt8,    DType::Int32,   DType::Int64,
                                 DType::Float16, DType::BFloat16, DType::Float32, DType::Float64,
                                 DType::Int8,    DType::Int16,    DType::UInt16,  DType::UInt32,
                                 DType::UInt64};
inline constexpr DType kFloats[] = {DType::Float16, DType::BFloat16, DType::Float32,
                                    DType::Float64};

struct Arg {
  DType t;
  Shape shape;
};
using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// A program traced from nx code: its kernels, decomposed, each with a label for messages.
struct Labelled {
  std::string label;
  codegen::KernelSpec k;
};

inline void add_program(std::vector<Labelled>& out, const std::string& label,
                        const std::vector<Arg>& args, const Fn& fn) {
  rune::Tracer tr(nx::Device::cpu(), static_cast<int>(args.size()));
  std::vector<ir::NodeRef> roots;
  {
    nx::InterpreterScope scope(&tr);
    std::vector<Tensor> ins;
    for (size_t i = 0; i < args.size(); ++i)
      ins.push_back(
          tr.stand_in(static_cast<int>(i), args[i].t, ir::View::contiguous(args[i].shape)));
    for (const auto& r : fn(ins)) roots.push_back(tr.node_of(r));
  }
  // As codegen/compile.cpp for a GPU: matrix products take their elementwise consumers as
  // epilogues and read float16 / bfloat16 operands directly; attention is one kernel.
  auto s = codegen::schedule(roots, static_cast<int>(args.size() + tr.captured().size()),
                             /*fuse_epilogues=*/true, /*half_operands=*/true,
                             /*fuse_attention=*/true);
  int i = 0;
  for (auto k : s.kernels) {
    for (ir::NodeRef* r : k.roots()) *r = codegen::decompose(*r);
    out.push_back({label + " #" + std::to_string(i++), k});
  }
}

inline Tensor prim(Op op, DType out, const std::vector<Tensor>& srcs, const ir::Arg& arg = {}) {
  return nx::apply(op, out, srcs[0].shape(), srcs, arg);
}

inline std::string dname(DType t) { return std::string(ir::name(t)); }

}  // namespace gpu_test
