// Eager ops whose one kernel serves every shape (codegen/kernel.h RuntimeSizes): a reduction
// of a contiguous operand over adjacent axes, and an elementwise op, copy, iota or gather whose
// operands are strided views (a transpose, a broadcast along some axes). The kind's kernel is
// compiled once per op, dtypes, argument and class from a placeholder graph, and reads this shape's
// sizes and strides from a descriptor the caller binds after the operands (core/eager.cpp). Each
// element (and each reduction, in the documented order) is computed as in the kernel compiled
// for the shape itself: the same bits.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "codegen/kernel.h"
#include "core/tensor.h"
#include "runtime/device.h"
#include "runtime/program.h"

namespace nx::detail {

struct SizedOp {
  codegen::RuntimeSizes sizes = codegen::RuntimeSizes::Fixed;
  std::vector<int64_t> descriptor;  // the kernel's sizes and strides for this shape
  int64_t items = 0;                // work items: the outputs of a reduction, else the elements
  int64_t reduced = 1;              // elements each item reduces
  // Strided: each operand's stride along the last axis as the kernel is compiled for it: 0 or 1
  // (a constant, so the rows' loops vectorise), else -1 (read from the descriptor).
  std::vector<int64_t> inner;
};

// The sized form of `op` over `srcs` at `shape` on a host device, if it has one. Reductions
// longer than one block (codegen::kReduceBlock), non-adjacent reduced axes, strided operands of
// a reduction, masked views and outputs of more than codegen::kStridedRank axes longer than one
// have none (they compile per shape).
std::optional<SizedOp> sized_op(ir::Op op, DType out, const Shape& shape,
                                const std::vector<Tensor>& srcs, const ir::Arg& arg,
                                runtime::Device device);

// The kind's key (op, dtypes, argument where the kernel depends on it, class), appended to v:
// equal keys compile to the same kernel.
void push_sized_key(std::vector<int64_t>& v, const SizedOp& s, ir::Op op, DType out,
                    const std::vector<Tensor>& srcs, const ir::Arg& arg);

// The kind's program (codegen::compile_sized over a placeholder graph): Params 0..n-1 the
// operands, Param n the descriptor.
std::shared_ptr<const runtime::Program> compile_sized_kind(const SizedOp& s, ir::Op op, DType out,
                                                           const std::vector<Tensor>& srcs,
                                                           const ir::Arg& arg,
                                                           runtime::Device device);

// The kind's program run for s: a copy with s's items, cost and output size. Null when g is not
// the one-kernel program expected.
std::shared_ptr<const runtime::Program> sized_program_for(const runtime::Program& g,
                                                          const SizedOp& s, DType out,
                                                          int64_t out_numel);

// The descriptor as an int64 tensor on `device` (host memory).
Tensor sized_descriptor(const SizedOp& s, runtime::Device device);

}  // namespace nx::detail
