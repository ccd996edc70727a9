// Kernels that serve every shape of an eager op kind (codegen/kernel.h RuntimeSizes): their
// sizes and strides are loaded from the descriptor param at run time, and the kernel's shape,
// rshape and leaves' views are placeholders. Each element is computed by the same expression,
// and each reduction in the same documented order (codegen/lower/reduction_blocks.h), as in the
// kernel scheduled for the shape itself, so the bits are the same; only the index arithmetic
// differs (divisions by loaded values instead of constants). The host only.
#include <stdexcept>

#include "codegen/lower/passes.h"
#include "codegen/lower/reduction_blocks.h"

namespace codegen::lowering {

namespace {

// The nodes of `root` that read through a view (Load, Index, Valid) or at a computed offset
// (LoadAt): a sized kernel replaces each with a read at offsets of its own (at_index's `loaded`).
std::vector<NodeRef> leaves(NodeRef root) {
  std::vector<NodeRef> out;
  for (NodeRef x : toposort({root}))
    if (x->op == Op::Load || x->op == Op::Index || x->op == Op::Valid || x->op == Op::LoadAt)
      out.push_back(x);
  return out;
}

// A reduction over [A, R, B] (descriptor {R, B}) in the documented order, one block
// (reduce_block's lanes and tree for each output). Rows (B == 1): work item w is output w, its
// elements at w R + r. Strided: work item w is the group of kGroup adjacent outputs
// (a, kGroup g .. kGroup g + kGroup - 1), (a, g) = (w / G, w % G) with G = ceil(B / kGroup),
// output (a, b)'s elements at a R B + b + r B. A whole group steps together (each output keeps
// its own lanes and tree, as a scheduled kernel's plan group does), so its loads along b are
// vectors; a row's last, partial group reduces its outputs one by one.
class SizedReduction : public ReductionBlocks {
 public:
  static constexpr int kGroup = kSizedReduceGroup;
  using ReductionBlocks::rbody_at;
  using ReductionBlocks::ReductionBlocks;
  void run() {
    const int desc = static_cast<int>(k_.slots.size()) - 1;
    const bool rows = k_.sizes == RuntimeSizes::ReduceRows;
    for (NodeRef x : leaves(k_.rbody))
      if (x->op != Op::Load)
        throw std::logic_error("lower: a sized reduction reads its operand by loads only");
    if (!leaves(k_.body).empty())
      throw std::logic_error("lower: a sized reduction's body reads nothing but its result");
    entry("", numel(k_.shape), numel(k_.shape), [&] {
      NodeRef R = let("R", load_at(desc, DType::Int64, I(0)));
      if (rows) {
        items(numel(k_.shape), [&](NodeRef w) {
          base_ = let("base", b::mul(w, R));
          finish(w, reduce_block({}, I(0), R));
        });
        return;
      }
      NodeRef B = let("B", load_at(desc, DType::Int64, I(1)));
      stride_ = B;
      NodeRef G = let("G", udiv(add(B, I(kGroup - 1)), kGroup));
      items(numel(k_.shape), [&](NodeRef w) {
        NodeRef a = let("a", udiv(w, G));
        NodeRef b0 = let("b0", mul(urem(w, G), kGroup));
        NodeRef outs = let("o", b::mul(a, B));              // output (a, 0)
        NodeRef row = let("row", b::mul(b::mul(a, R), B));  // its first element
        when(b::le(add(b0, I(kGroup)), B), [&] {
          base_ = let("base", add(row, b0));
          const Lanes acc = accumulate_block({}, I(0), R, kGroup);
          VarId q = var("w");
          loop(q, I(0), I(kGroup), p_.vector_lanes ? Loop::Vector : Loop::Unrolled, [&] {
            finish(add(outs, add(b0, V(q))), let("red", block_result(acc, V(q), kGroup)));
          });
        });
        when(b::lt(B, add(b0, I(kGroup))), [&] {
          VarId q = var("b");
          loop(q, b0, B, Loop::Serial, [&] {
            base_ = let("base", add(row, V(q)));
            finish(add(outs, V(q)), reduce_block({}, I(0), R));
          });
        });
      });
    });
  }

 protected:
  NodeRef rbody_at(std::vector<NodeRef>, NodeRef w, NodeRef r) override {
    std::map<NodeRef, NodeRef> loaded;
    NodeRef at = add(base_, stride_ ? b::mul(r, stride_) : r);
    if (w) at = add(at, w);
    for (NodeRef x : leaves(rb_)) loaded[x] = load_at(arg_load(x).param, x->dtype, at);
    return at_index(rb_, {}, accs_, loaded);
  }

 private:
  void finish(NodeRef o, NodeRef acc) { store(0, o, at_index(k_.body, {}, {acc})); }
  NodeRef base_ = nullptr, stride_ = nullptr;  // stride_ null: 1
};

// An elementwise kernel over a contiguous [d0, d1, d2, d3] (descriptor: the extents, then four
// strides per input slot, then four for the index leaf, then a gather's extent - 1 and stride):
// the work items are its elements, run as the host's elementwise kernels run them, rows of d3
// with the row's index computed once.
class SizedElementwise : public Builder {
 public:
  using Builder::Builder;
  void run() {
    const int desc = static_cast<int>(k_.slots.size()) - 1;
    const int inputs = k_.slots.back();  // the descriptor is the last input slot
    std::vector<NodeRef> leaf;
    NodeRef gather = nullptr;
    int index_leaves = 0;
    for (NodeRef x : leaves(k_.body)) {
      if (x->op == Op::LoadAt) {
        if (gather) throw std::logic_error("lower: a sized kernel gathers once");
        gather = x;
        continue;
      }
      if (x->op == Op::Index) ++index_leaves;
      if ((x->op != Op::Load && x->op != Op::Index) || index_leaves > 1)
        throw std::logic_error("lower: a sized elementwise kernel reads loads and one index");
      leaf.push_back(x);
    }
    // A gather's offset as codegen/schedule.cpp's fuse_gather writes it for an unmasked operand:
    // Add(Index(the operand's strides, 0 along the axis), Mul(Min(Max(i, 0), extent - 1),
    // stride along the axis)). Its two constants are the placeholder's: the descriptor gives
    // this shape's, after the index leaf's strides.
    NodeRef scaled = nullptr, clamp = nullptr;
    if (gather) {
      NodeRef off = gather->src[0];
      if (off->op == Op::Add && off->src.size() == 2 && off->src[0]->op == Op::Index)
        scaled = off->src[1];
      if (scaled && scaled->op == Op::Mul) clamp = scaled->src[0];
      if (!clamp || clamp->op != Op::Min || clamp->src[0]->op != Op::Max)
        throw std::logic_error("lower: a sized gather's offset is not of the scheduled form");
    }
    entry("", numel(k_.shape), numel(k_.shape), [&] {
      NodeRef lo = V(lir::kLo), hi = V(lir::kHi);
      when(b::lt(lo, hi), [&] {
        auto desc_at = [&](int i) { return load_at(desc, DType::Int64, I(i)); };
        std::vector<NodeRef> d;
        for (int k = 0; k < kStridedRank; ++k) d.push_back(let("d", desc_at(k)));
        // Each leaf's strides: an input slot's block, or the index leaf's after them.
        // A load whose view's stride is 0 or 1 has that inner stride as a constant (the eager
        // op's class: its rows' loops vectorise).
        std::map<NodeRef, std::vector<NodeRef>> strides;
        for (NodeRef x : leaf) {
          const int block = x->op == Op::Index ? inputs : k_.slots.at(arg_load(x).param);
          for (int k = 0; k < kStridedRank; ++k)
            strides[x].push_back(let("s", desc_at(kStridedRank * (1 + block) + k)));
          if (x->op != Op::Load) continue;
          const int64_t inner = arg_load(x).view.strides.back();
          if (inner == 0 || inner == 1) strides[x].back() = I(inner);
        }
        NodeRef extent_max = nullptr, axis_stride = nullptr;
        if (gather) {
          extent_max = let("n", desc_at(kStridedRank * (2 + inputs)));
          axis_stride = let("s", desc_at(kStridedRank * (2 + inputs) + 1));
        }
        NodeRef last = d[kStridedRank - 1];
        VarId row = var("row");
        loop(row, udiv(lo, last), udiv(add(hi, b::sub(last, I(1))), last), Loop::Serial, [&] {
          NodeRef base = let("base", b::mul(V(row), last));
          NodeRef ilo = b::where(b::lt(base, lo), b::sub(lo, base), I(0));
          NodeRef ihi = min(b::sub(hi, base), last);
          // The row's index over d0, d1, d2, then each leaf's offset at the row's start.
          NodeRef i2 = urem(V(row), d[2]), r2 = udiv(V(row), d[2]);
          NodeRef i1 = urem(r2, d[1]), i0 = udiv(r2, d[1]);
          std::vector<NodeRef> idx = {let("i", i0), let("i", i1), let("i", i2)};
          std::map<NodeRef, NodeRef> start;
          for (NodeRef x : leaf) {
            NodeRef s = I(0);
            for (int k = 0; k < kStridedRank - 1; ++k) s = add(s, b::mul(idx[k], strides[x][k]));
            start[x] = let("at", s);
          }
          VarId i = var("i");
          loop(i, ilo, ihi, Loop::Serial, [&] {
            std::map<NodeRef, NodeRef> loaded;
            for (NodeRef x : leaf) {
              NodeRef inner = strides[x][kStridedRank - 1];
              NodeRef at = inner->op == Op::Const && arg_int(inner) == 0 ? start[x]
                           : inner->op == Op::Const && arg_int(inner) == 1
                               ? add(start[x], V(i))
                               : add(start[x], b::mul(V(i), inner));
              loaded[x] = x->op == Op::Index ? at : load_at(arg_load(x).param, x->dtype, at);
            }
            if (gather) {
              NodeRef index = at_index(clamp->src[0]->src[0], {}, {}, loaded);
              loaded[scaled] = b::mul(b::min(b::max(index, I(0)), extent_max), axis_stride);
            }
            store(0, add(base, V(i)), at_index(k_.body, {}, {}, loaded));
          });
        });
      });
    });
  }
};

}  // namespace

lir::Kernel lower_sized(const KernelSpec& k, const Plan& p) {
  if (p.gpu) throw std::logic_error("lower: sized kernels are host kernels");
  if (k.sizes == RuntimeSizes::Strided) {
    SizedElementwise pass(k, p);
    pass.run();
    return pass.take();
  }
  SizedReduction pass(k, p);
  pass.run();
  return pass.take();
}

}  // namespace codegen::lowering
