// The documented reduction order's building blocks (docs/numerics.md), shared by the reduction
// and row passes: one block's 8 lanes in registers and their fixed tree (accumulate_block,
// reduce_block), or one lane per GPU thread with the tree as shuffles (reduce_lane). They lower
// the reduction held in rb_ / rop_ / accs_: the kernel's rbody, or a row kernel's current stage.
#pragma once
#include "codegen/lower/builder.h"

namespace codegen::lowering {

class ReductionBlocks : public Builder {
 public:
  ReductionBlocks(const KernelSpec& k, const Plan& p)
      : Builder(k, p), rb_(k.rbody), rop_(k.reduce_op) {}
  virtual ~ReductionBlocks() = default;

 protected:
  // The reduction being lowered: the kernel's rbody, or a row kernel's current stage.
  DType acc_type() const { return rb_->dtype; }
  // The reduction's binary op; 16-bit accumulators combine at float32, rounded once.
  NodeRef combine(NodeRef a, NodeRef c) const;
  NodeRef identity() const;
  // The fixed tree over a block's 8 lanes: ((0,4),(2,6)),((1,5),(3,7)).
  NodeRef tree(const std::vector<NodeRef>& lane) const;
  // rbody at output index `idx` (its last index moved by w, unless w is null) and flat reduce
  // index r. A sized reduction (codegen/lower/sized.cpp) reads at offsets of its own instead.
  virtual NodeRef rbody_at(std::vector<NodeRef> idx, NodeRef w, NodeRef r);
  NodeRef rbody_at(std::vector<NodeRef> idx, int w, NodeRef r) {
    return rbody_at(std::move(idx), w ? I(w) : nullptr, r);
  }

  // A reduction's lane accumulators (`slots` of them) and how values enter them. Plain: one
  // register each, updated by combine. A float maximum or minimum on the host is *keyed*: two
  // registers a lane, with the same lane result as combine's chain, bit for bit, in fewer
  // dependent operations per element (combine's NaN-propagating maximum with -0 below +0 is
  // nine; a max of float32 rows ran at about half a sum's speed):
  //  * `first` follows the values until one is NaN, then keeps it: the lane's first NaN;
  //  * `key` is the integer maximum (minimum) of the values' order keys: a float's bits with
  //    the magnitude bits flipped where the sign is set, which order as the floats do (-0
  //    below +0) for every non-NaN value, and map back exactly (the flip is its own inverse).
  // combine's chain gives the lane's first NaN when it holds one (a NaN accumulator is kept,
  // then a NaN value taken), else its largest (smallest) value with -0 below +0, or the
  // identity when it saw nothing; lane_value gives the same from `first` and `key`. The tree
  // over the lanes is combine's either way, so the reduction's result has the same bits.
  struct Lanes {
    VarId acc = 0;  // combine's accumulators, or the keyed form's `first`
    VarId key = 0;  // the keyed form's order keys
    bool keyed = false;
  };
  Lanes lanes(int64_t slots);
  void add_to_lane(const Lanes& l, NodeRef slot, NodeRef value);
  NodeRef lane_value(const Lanes& l, NodeRef slot) const;

  // The lanes of one block [rlo, rhi) of the reduction for W adjacent outputs (W = plan.group,
  // else 1), in the documented order: lane l of output w (slot l * W + w) combines rlo + l,
  // rlo + l + 8, ... from the identity. With W > 1 each lane's W outputs step as one loop over
  // w (a vector loop when the plan's lanes are vector: the W outputs' loads are adjacent along
  // the output's last axis, so they form one vector load and one vector op per lane and step,
  // and the slots stay at constant offsets plus w, which keeps the array in registers).
  Lanes accumulate_block(const std::vector<NodeRef>& idx, NodeRef rlo, NodeRef rhi, int W);
  // Output w's result of accumulate_block's lanes: the fixed tree.
  NodeRef block_result(const Lanes& acc, NodeRef w, int W);
  // One block [rlo, rhi) of the reduction for one output: its lanes, then the fixed tree.
  NodeRef reduce_block(const std::vector<NodeRef>& idx, NodeRef rlo, NodeRef rhi);

  // GPU: lane l (of the 8 threads of this group) of the block [rlo, rhi); then the fixed tree as
  // exchanges. After the step with offset 4, lane l < 4 holds q_l = p_l (+) p_(l+4); after 2,
  // lane l < 2 holds s_l = q_l (+) q_(l+2); after 1, lane 0 holds s_0 (+) s_1 (the other lanes
  // compute values nobody reads). With `broadcast` (a row kernel's stage, rows()), every lane
  // then gets lane 0's result (ShuffleIdx): the same bits in the 8 threads. Lane l's elements
  // are rlo + l, rlo + l + 8, ... in increasing order, the last R % 8 included (element 8 j + t
  // is lane t's), exactly those of reduce_block's lane l.
  NodeRef reduce_lane(const std::vector<NodeRef>& idx, NodeRef rlo, NodeRef rhi, NodeRef l,
                      bool broadcast = false);

  // The reduction the helpers above lower (accumulate_block, tree, reduce_lane): its body,
  // operation, and the values of its Acc leaves (a row kernel's earlier stages).
  NodeRef rb_;
  Op rop_;
  std::vector<NodeRef> accs_;
  // rows(): the value the stage being lowered also stores at kept_base_ + its row index.
  NodeRef kept_ = nullptr, kept_base_ = nullptr;
};

}  // namespace codegen::lowering
