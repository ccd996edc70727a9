// A kernel: the unit the scheduler produces and every backend renders.
//
// A kernel iterates over `shape` (its output's shape, C order) and writes one element of
// param 0 (a contiguous buffer of `out_dtype`) per index. Where `rbody` is set it also reduces:
// for each output index it combines `rbody` over `rshape` with `reduce_op`, in the association
// order of docs/numerics.md, and `body` reads that result through its Acc leaf.
// Leaves of rbody carry views over shape ++ rshape; leaves of body, views over shape.
// Load leaves name kernel params (>= 1); `slots` maps each param to a program buffer slot.
//
// A contraction kernel (ir::Op::Dot) has `contract` set and no rbody: params a_param and b_param
// are read through the views in `contract`; `body` computes each output from its Acc leaf (the
// product) and, when an epilogue fused, other loads at the output's shape.
//
// A library kernel (ir::OpCategory::Library: Sort, Argsort, Cumsum, HostCall) has `library` set and
// neither body nor rbody: param 1 is the operand, contiguous from element `offset`; Sort, Argsort
// and Cumsum act along the last axis of `shape` (the operand's shape too), row by row; a HostCall
// runs its host function once over the operand (`in_shape`) into the output (`shape`).
//
// A row kernel (codegen/schedule.cpp fuses chained reductions over the same row: softmax's
// max -> sum(exp(x - max)), layernorm's mean -> variance) has `stages` set and no rbody: per
// index of `shape` (the outer index), stage s reduces its rbody over `rshape` with its reduce_op
// in the order of a one-block reduction (rshape has at most kReduceBlock elements: each stage's
// bits are those of the separate reduction kernel it replaces), and its rbody reads the results
// of stages t < s through Acc leaves whose arg is t. `body` reads every stage's result the same
// way; with `row_out` it runs over shape ++ rshape (its leaves carry views over shape ++ rshape
// and the kernel writes numel(shape) * numel(rshape) elements, row by row), else over shape.
//
// An attention kernel (codegen/schedule_attention.h: softmax(q k^T ...) v) has
// `attention` set, and neither body, rbody, stages, contract nor library: the three kernels it
// replaces, in order, each as the scheduler made it (its slots program slots): [0] the scores'
// product S (a contraction without epilogue), [1] the row kernel writing the weights P row by
// row from S (and other buffers: a mask), [2] P's product with v (without epilogue). S and P
// have no buffer (their slots' numel is 0): the kernel computes them a block of query rows at a
// time in per-thread tiles (the host: codegen/cpu/attention.h) or a block-shared tile (a GPU:
// codegen/lower/attention.cpp), each element as the three kernels do.
// Its shape and out_dtype are [2]'s; slots[0] is [2]'s output, then each other slot the parts
// read, once.
//
// An attention gradient kernel (codegen/schedule_attention.h: the backward pass of softmax(q k^T
// ...) v on the host) also has `attention` set, and `attention_tiles`: its parts are kernels of
// the unfused gradient program, in the scheduler's order (the scores' product and the row kernel
// writing the weights first, computed again, then every kernel that reads the [.., Tq, Tk]
// values, and the products writing the values they read), each as the scheduler made it; the
// slots of `attention_tiles` (the scores, the weights and the other per-query-row values only
// the parts read) have no buffer: the kernel computes them a block of query rows at a time in
// per-thread tiles (codegen/cpu/attention_gradient.h). It may write several slots: slots[0] and
// `also_writes` (which are in `slots` too, after the slots it reads): the gradients and any
// other value a later kernel reads. Its shape and out_dtype are slots[0]'s writer's.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/node.h"

namespace codegen {

// Elements per reduction block: a reduction longer than this is split into blocks reduced in
// parallel, then combined left to right. Part of the documented association order.
inline constexpr int64_t kReduceBlock = 1 << 16;
// Independent partial results per block (lanes), combined by a fixed tree.
inline constexpr int kReduceLanes = 8;

// The operands of a contraction kernel: a over [batch..., M, K] and b over [batch..., K, N],
// strided views of params 1 and 2 (no masks).
// An operand's M, K or N axis may span several view axes (a convolution's windows read in
// place: codegen/grouped_view.h): a_groups / b_groups then give the view axes per logical axis
// (batch axes one each, first), and the views are over those axes. Empty: one each.
struct Contraction {
  ir::View a, b;
  std::vector<int> a_groups, b_groups;
  int a_param = 1, b_param = 2;
  // The product's dtype (its Acc leaf: float32 or float64) and each operand's dtype in memory:
  // the product's, or float16 / bfloat16 widened exactly to float32 as it is read (GPU
  // schedules fold such a cast into the operand, so half values cross memory at half the bytes).
  ir::DType dtype = ir::DType::Float32;
  ir::DType a_dtype = ir::DType::Float32, b_dtype = ir::DType::Float32;
  bool operator==(const Contraction&) const = default;
  // The operands' logical shapes ([batch..., M, K] and [batch..., K, N]).
  ir::Shape a_shape() const;
  ir::Shape b_shape() const;
};

// The operation of a library kernel and its operand's dtype and first element; a HostCall's
// function and operand shape.
struct LibraryCall {
  ir::Op op = ir::Op::Sort;
  ir::DType in_dtype = ir::DType::Float32;
  int64_t offset = 0;
  ir::HostFnArg host = {};
  ir::Shape in_shape = {};
  bool operator==(const LibraryCall&) const = default;
};

// One reduction of a row kernel.
struct RowStage {
  ir::Op reduce_op = ir::Op::ReduceSum;
  ir::NodeRef rbody = nullptr;
  bool operator==(const RowStage&) const = default;
};

// Where a kernel's sizes come from. Fixed: its shape, rshape and leaves' views (every kernel a
// program's schedule makes). The others are the host kernels of eager ops that serve every shape
// of their op kind (core/eager_sized.h): their sizes and strides are read at run time from a
// descriptor, an int64 param after the inputs (kernel param slots.size() - 1), and their shape,
// rshape and leaves' views are placeholders the lowering ignores (codegen/lower/sized.cpp):
//  * ReduceRows / ReduceStrided: the reduction of an operand read as a contiguous [A, R, B]
//    over R into a contiguous [A, B], one reduction block (R <= kReduceBlock), in the documented
//    order; the descriptor is {R, B}; ReduceRows is B == 1 (a row's elements adjacent, so a
//    block's lanes load as vectors). Work items: ReduceRows' A outputs; ReduceStrided's groups
//    of kSizedReduceGroup adjacent outputs along B, A * ceil(B / kSizedReduceGroup) of them.
//  * Strided: an elementwise kernel writing a contiguous [d0, d1, d2, d3], each load (and index
//    leaf) reading at sum_k i_k * stride_k; the descriptor is {d0, d1, d2, d3}, then four strides
//    per input slot in order, then four for the kernel's index leaf; a load whose placeholder
//    view has stride 0 or 1 has that inner stride (k = 3) as a constant. Work items: its
//    elements (run as rows of d3).
enum class RuntimeSizes : uint8_t { Fixed, ReduceRows, ReduceStrided, Strided };
inline constexpr int kStridedRank = 4;        // a Strided kernel's axes
inline constexpr int kSizedReduceGroup = 16;  // adjacent outputs a ReduceStrided item reduces

struct KernelSpec {
  ir::Shape shape;
  ir::Shape rshape;
  ir::Op reduce_op = ir::Op::ReduceSum;
  ir::NodeRef rbody = nullptr;
  ir::NodeRef body = nullptr;
  ir::DType out_dtype = ir::DType::Float32;
  std::vector<int> slots;  // slots[0]: the output slot
  std::optional<Contraction> contract;
  std::optional<LibraryCall> library;
  std::vector<RowStage> stages;       // a row kernel's reductions, in order
  bool row_out = false;               // a row kernel's body runs over shape ++ rshape
  std::vector<KernelSpec> attention;  // an attention kernel's parts (scores, weights, output)
  std::vector<int> attention_tiles;   // an attention gradient kernel's slots held in tiles
  std::vector<int> also_writes;       // slots written besides slots[0] (also in `slots`)
  RuntimeSizes sizes = RuntimeSizes::Fixed;

  bool row() const { return !stages.empty(); }
  bool fused_attention() const { return !attention.empty(); }  // forward or gradient
  bool attention_gradient() const { return !attention_tiles.empty(); }
  bool runtime_sizes() const { return sizes != RuntimeSizes::Fixed; }
  int64_t reduce_size() const;
  int64_t blocks() const;     // reduction blocks (1 when rshape has <= kReduceBlock elements)
  int64_t out_numel() const;  // elements written to param 0
  // The kernel's expression roots: body, then rbody or the stages' rbodies (to decompose,
  // keep alive or walk them all); an attention kernel's are its parts' (whose loads name the
  // parts' params, not the kernel's).
  std::vector<ir::NodeRef*> roots();
  std::vector<ir::NodeRef> roots() const;
  size_t hash() const;
  bool operator==(const KernelSpec&) const = default;
};

// Buffers of a program: inputs first (bound by the caller), then outputs, then temporaries.
struct SlotInfo {
  ir::DType dtype;
  int64_t numel;
};

struct Schedule {
  int n_inputs = 0;
  std::vector<SlotInfo> slots;      // every slot; inputs' numel is unknown (-1)
  std::vector<int> output_slots;    // one per root, in order
  std::vector<KernelSpec> kernels;  // in execution order
};

}  // namespace codegen
