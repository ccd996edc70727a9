#include "core/eager_sized.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "codegen/compile.h"
#include "ir/node.h"
#include "runtime/allocator.h"

namespace nx::detail {

ir::View key_view(const ir::View& v) {
  ir::View k = v;
  k.offset = 0;
  for (size_t d = 0; d < k.shape.size(); ++d)
    if (k.shape[d] == 1) k.strides[d] = 0;
  return k;
}

namespace {

using codegen::kStridedRank;
using codegen::RuntimeSizes;

bool is_reduction(ir::Op op) {
  return op == ir::Op::ReduceSum || op == ir::Op::ReduceProd || op == ir::Op::ReduceMax ||
         op == ir::Op::ReduceMin;
}

// An operand's view as its kernel reads it, if it is of the output's shape and unmasked.
std::optional<ir::View> plain_view(const Tensor& s, const Shape& shape) {
  const auto& im = s.impl();
  if (im.shape != shape || !im.view.mask.empty()) return std::nullopt;
  return key_view(im.view);
}

// A reduction of a contiguous operand over axes that are adjacent once extent-1 axes are
// skipped: [A, R, B] over R, one block.
std::optional<SizedOp> sized_reduction(const Shape& out_shape, const std::vector<Tensor>& srcs,
                                       const ir::Arg& arg) {
  if (srcs.size() != 1) return std::nullopt;
  const auto* axes = std::get_if<std::vector<int64_t>>(&arg);
  const Shape& in = srcs[0].shape();
  if (!axes || axes->empty() || out_shape.size() != in.size()) return std::nullopt;
  auto v = plain_view(srcs[0], in);
  if (!v || !v->is_contiguous()) return std::nullopt;
  const int64_t first = axes->front(), last = axes->back();
  int64_t A = 1, R = 1, B = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    const bool reduced = std::find(axes->begin(), axes->end(), d) != axes->end();
    if (d < first)
      A *= in[d];
    else if (d > last)
      B *= in[d];
    else if (reduced)
      R *= in[d];
    else if (in[d] != 1)
      return std::nullopt;  // a kept axis between reduced ones
  }
  if (R > codegen::kReduceBlock) return std::nullopt;
  SizedOp s;
  s.sizes = B == 1 ? RuntimeSizes::ReduceRows : RuntimeSizes::ReduceStrided;
  s.arg = std::vector<int64_t>{1};  // the placeholder's axis (compile_sized_kind)
  s.descriptor = {R, B};
  // Strided: an item is a group of adjacent outputs (codegen/lower/sized.cpp).
  constexpr int64_t group = codegen::kSizedReduceGroup;
  s.items = B == 1 ? A : A * ((B + group - 1) / group);
  s.reduced = B == 1 ? R : R * group;
  return s;
}

// The output's axes longer than one, at most kStridedRank of them, as the descriptor's axes
// (padded in front with extent-1 axes, stride 0).
struct DescriptorAxes {
  std::vector<int> kept;
  static std::optional<DescriptorAxes> of(const Shape& shape) {
    DescriptorAxes a;
    for (int d = 0; d < static_cast<int>(shape.size()); ++d)
      if (shape[d] != 1) a.kept.push_back(d);
    if (a.kept.size() > static_cast<size_t>(kStridedRank)) return std::nullopt;
    return a;
  }
  // Appends values[d] for the kept axes, after `pad` for the padding axes.
  void push(std::vector<int64_t>& out, const std::vector<int64_t>& values, int64_t pad) const {
    out.insert(out.end(), kStridedRank - kept.size(), pad);
    for (int d : kept) out.push_back(values[d]);
  }
};

// An elementwise op, copy or iota over operands of the output's shape (strided, broadcast along
// any axes).
std::optional<SizedOp> sized_elementwise(ir::Op op, const Shape& shape,
                                         const std::vector<Tensor>& srcs, const ir::Arg& arg) {
  auto axes = DescriptorAxes::of(shape);
  if (!axes) return std::nullopt;
  SizedOp s;
  s.sizes = RuntimeSizes::Strided;
  axes->push(s.descriptor, shape, 1);
  for (const auto& x : srcs) {
    auto v = plain_view(x, shape);
    if (!v) return std::nullopt;
    axes->push(s.descriptor, v->strides, 0);
    const int64_t last = s.descriptor.back();
    s.inner.push_back(last == 0 || last == 1 ? last : -1);
  }
  s.arg = arg;
  std::vector<int64_t> index(shape.size(), 0);
  if (op == ir::Op::Iota) {
    index[std::get<int64_t>(arg)] = 1;
    s.arg = int64_t{0};  // the placeholder's axis
  }
  axes->push(s.descriptor, index, 0);  // the index leaf's, after the operands': an iota's axis
  s.items = ir::numel(shape);
  return s;
}

// A gather, out[i] = x[i with i[axis] := clamp(idx[i], 0, n - 1)] (ir/ops.def), over at most
// kStridedRank output axes longer than one: idx is an operand of the output's shape; x is read
// at its strides along the other axes (the index leaf's block; x's own block is unused) plus
// the clamped index times its stride along the axis (n - 1 and that stride follow).
std::optional<SizedOp> sized_gather(const Shape& shape, const std::vector<Tensor>& srcs,
                                    const ir::Arg& arg) {
  const auto* axis = std::get_if<int64_t>(&arg);
  if (!axis || srcs.size() != 2) return std::nullopt;
  const auto& x = srcs[0].impl();
  auto axes = DescriptorAxes::of(shape);
  auto idx = plain_view(srcs[1], shape);
  if (!axes || !idx || !x.view.mask.empty() || x.shape.size() != shape.size()) return std::nullopt;
  SizedOp s;
  s.sizes = RuntimeSizes::Strided;
  axes->push(s.descriptor, shape, 1);
  axes->push(s.descriptor, std::vector<int64_t>(shape.size(), 0), 0);
  axes->push(s.descriptor, idx->strides, 0);
  const int64_t last = s.descriptor.back();
  s.inner = {-1, last == 0 || last == 1 ? last : -1};
  s.arg = int64_t{0};  // the placeholder's axis
  std::vector<int64_t> rest = x.view.strides;
  rest[*axis] = 0;
  axes->push(s.descriptor, rest, 0);
  s.descriptor.push_back(x.shape[*axis] - 1);
  s.descriptor.push_back(x.view.strides[*axis]);
  s.items = ir::numel(shape);
  return s;
}

}  // namespace

std::optional<SizedOp> sized_op(ir::Op op, DType, const Shape& shape,
                                const std::vector<Tensor>& srcs, const ir::Arg& arg,
                                runtime::Device device) {
  if (device.kind != runtime::DeviceKind::CPU || ir::numel(shape) == 0 ||
      std::holds_alternative<ir::HostFnArg>(arg))
    return std::nullopt;
  if (is_reduction(op)) return sized_reduction(shape, srcs, arg);
  if (ir::is_elementwise(op) || op == ir::Op::Copy || op == ir::Op::Iota)
    return sized_elementwise(op, shape, srcs, arg);
  if (op == ir::Op::Gather) return sized_gather(shape, srcs, arg);
  return std::nullopt;
}

std::shared_ptr<const runtime::Program> compile_sized_kind(const SizedOp& s, ir::Op op, DType out,
                                                           const std::vector<Tensor>& srcs,
                                                           runtime::Device device) {
  ir::NodeUse use;
  ir::NodeRef root;
  if (s.sizes == RuntimeSizes::Strided) {
    // One axis of two elements, each operand's stride its inner one (2: a run-time stride; the
    // lowering reads the others from the descriptor): the kernel's expression is the op's.
    const Shape flat = {2};
    std::vector<ir::NodeRef> params;
    for (size_t i = 0; i < srcs.size(); ++i) {
      ir::View view = ir::View::contiguous(flat);
      view.strides = {s.inner[i] < 0 ? 2 : s.inner[i]};
      params.push_back(ir::make(ir::Op::Param, srcs[i].dtype(), flat, {},
                                ir::LoadArg{static_cast<int>(i), view}));
    }
    if (op == ir::Op::Gather) {
      // x over three elements a stride of 5 apart: the offset's constants (2 and 5, distinct)
      // are placeholders the lowering replaces (codegen/lower/sized.cpp).
      const ir::View x{{3}, {5}, 0, {}};
      params[0] = ir::make(ir::Op::Param, srcs[0].dtype(), {3}, {}, ir::LoadArg{0, x});
    }
    root = op == ir::Op::Copy   ? params[0]
           : op == ir::Op::Iota ? ir::make(op, out, flat, {}, s.arg)
                                : ir::make(op, out, flat, params, s.arg);
  } else {
    // [1, 8] reduced over its last axis: one block.
    const Shape in = {1, 8};
    ir::NodeRef x =
        ir::make(ir::Op::Param, srcs[0].dtype(), in, {}, ir::LoadArg{0, ir::View::contiguous(in)});
    root = ir::make(op, out, {1, 1}, {x}, s.arg);
  }
  return codegen::compile_sized(root, static_cast<int>(srcs.size()) + 1, device, s.sizes);
}

std::shared_ptr<const runtime::Program> resized_program(
    const runtime::Program& g, int64_t out_bytes,
    const std::function<bool(runtime::Step&)>& resize) {
  if (g.steps.size() != 1 || g.steps[0].kind != runtime::Step::Kind::Kernel ||
      g.output_slots.size() != 1 || g.temp_bytes != 0 ||
      g.slot_bytes.size() != static_cast<size_t>(g.n_inputs) + 1)
    return nullptr;
  auto p = std::make_shared<runtime::Program>(g);
  if (!resize(p->steps[0])) return nullptr;
  p->slot_bytes[p->output_slots[0]] = out_bytes;
  p->finalize();
  return p;
}

std::shared_ptr<const runtime::Program> sized_program_for(const runtime::Program& g,
                                                          const SizedOp& s, DType out,
                                                          int64_t out_numel) {
  const int64_t out_bytes = out_numel * ir::itemsize(out);
  return resized_program(g, out_bytes, [&](runtime::Step& step) {
    const bool reduce = s.sizes != RuntimeSizes::Strided;
    // The placeholder reduces 8 elements an item: the cost per element stays, times this R.
    if (reduce) step.cost = std::max<int64_t>(step.cost / 8, 1) * std::max<int64_t>(s.reduced, 1);
    step.items = s.items;
    step.bytes = out_bytes * (reduce ? s.reduced + 1 : 2);
    return true;
  });
}

Tensor sized_descriptor(const SizedOp& s, runtime::Device device) {
  const size_t bytes = s.descriptor.size() * sizeof(int64_t);
  auto buf = runtime::allocate(device, bytes);
  std::memcpy(buf->data, s.descriptor.data(), bytes);
  return make_concrete(DType::Int64, std::move(buf),
                       ir::View::contiguous({static_cast<int64_t>(s.descriptor.size())}), device);
}

}  // namespace nx::detail
