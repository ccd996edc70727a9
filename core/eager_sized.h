// Eager ops whose one kernel serves every shape (codegen/kernel.h RuntimeSizes): a reduction
// of a contiguous operand over adjacent axes, and an elementwise op, copy, iota or gather whose
// operands are strided views (a transpose, a broadcast along some axes). The kind's kernel is
// compiled once per op, dtypes, argument and class from a placeholder graph, and reads this shape's
// sizes and strides from a descriptor the caller binds after the operands (core/eager.cpp). Each
// element (and each reduction, in the documented order) is computed as in the kernel compiled
// for the shape itself: the same bits.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "codegen/kernel.h"
#include "core/tensor.h"
#include "runtime/device.h"
#include "runtime/program.h"

namespace nx::detail {

// A view as a kernel reads it, normalised for keys: its offset is bound with its pointer, and an
// extent-1 axis's stride is never used (both zeroed). The eager fingerprints use it too.
ir::View key_view(const ir::View& v);

struct SizedOp {
  codegen::RuntimeSizes sizes = codegen::RuntimeSizes::Fixed;
  // The argument the kind's kernel is compiled with, part of its key: the op's, or the
  // placeholder's for a reduction, an iota and a gather (their axes are in the descriptor).
  ir::Arg arg;
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

// The kind's program (codegen::compile_sized over a placeholder graph): Params 0..n-1 the
// operands, Param n the descriptor.
std::shared_ptr<const runtime::Program> compile_sized_kind(const SizedOp& s, ir::Op op, DType out,
                                                           const std::vector<Tensor>& srcs,
                                                           runtime::Device device);

// g, a program of one kernel step over its inputs into one output (an op kind's flat or sized
// program), as a copy for one shape: `resize` sets its step's items, cost and bytes (or says,
// false, that g is not the program expected) and the output has out_bytes. Null when g is not
// such a program.
std::shared_ptr<const runtime::Program> resized_program(
    const runtime::Program& g, int64_t out_bytes,
    const std::function<bool(runtime::Step&)>& resize);

// The kind's program g run for s: s's items, the placeholder's cost per element, the bytes.
std::shared_ptr<const runtime::Program> sized_program_for(const runtime::Program& g,
                                                          const SizedOp& s, DType out,
                                                          int64_t out_numel);

// The descriptor as an int64 tensor on `device` (host memory).
Tensor sized_descriptor(const SizedOp& s, runtime::Device device);

}  // namespace nx::detail
