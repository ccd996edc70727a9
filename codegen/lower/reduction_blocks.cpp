#include "codegen/lower/reduction_blocks.h"

#include <bit>
#include <cstdint>

#include "codegen/core_ops.h"
#include "ir/scalar.h"

namespace codegen::lowering {

NodeRef ReductionBlocks::combine(NodeRef a, NodeRef c) const {
  DType t = acc_type();
  Op op = rop_ == Op::ReduceSum    ? Op::Add
          : rop_ == Op::ReduceProd ? Op::Mul
          : rop_ == Op::ReduceMax  ? Op::Max
                                   : Op::Min;
  if (is_half(t))
    return legalize(b::cast(
        make(op, DType::Float32, {}, {b::cast(a, DType::Float32), b::cast(c, DType::Float32)}), t));
  return legalize(make(op, t, {}, {a, c}));
}
NodeRef ReductionBlocks::identity() const {
  Value v = reduce_identity(rop_, acc_type());
  return is_float(v.dtype) ? b::cf(v.dtype, v.f) : b::ci(v.dtype, v.i);
}
namespace {
// A float's order key (ReductionBlocks::Lanes) and back: the same flip both ways.
NodeRef order_key(NodeRef bits) {
  const DType t = bits->dtype;
  const int64_t magnitude = t == DType::Int64 ? INT64_MAX : INT32_MAX;
  return b::where(b::lt(bits, b::ci(t, 0)), b::bxor(bits, b::ci(t, magnitude)), bits);
}
}  // namespace

ReductionBlocks::Lanes ReductionBlocks::lanes(int64_t slots) {
  const DType t = acc_type();
  Lanes l;
  l.keyed = !p_.gpu && (rop_ == Op::ReduceMax || rop_ == Op::ReduceMin) &&
            (t == DType::Float32 || t == DType::Float64);
  l.acc = reg(l.keyed ? "first" : "acc", t, slots, identity());
  if (l.keyed) {
    const DType kt = t == DType::Float64 ? DType::Int64 : DType::Int32;
    // The identity's key (-inf's or +inf's), folded here.
    const double inf = reduce_identity(rop_, t).f;
    int64_t bits = t == DType::Float64 ? std::bit_cast<int64_t>(inf)
                                       : std::bit_cast<int32_t>(static_cast<float>(inf));
    if (bits < 0) bits ^= t == DType::Float64 ? INT64_MAX : INT32_MAX;
    l.key = reg("key", kt, slots, b::ci(kt, bits));
  }
  return l;
}
void ReductionBlocks::add_to_lane(const Lanes& l, NodeRef slot, NodeRef value) {
  if (!l.keyed) return set(l.acc, slot, combine(at(l.acc, slot), value));
  NodeRef v = let("v", legalize(value)), first = at(l.acc, slot), key = at(l.key, slot);
  set(l.acc, slot, legalize(b::where(b::ne(first, first), first, v)));
  NodeRef vk = order_key(b::bitcast(v, key->dtype));
  set(l.key, slot,
      legalize(make(rop_ == Op::ReduceMax ? Op::Max : Op::Min, key->dtype, {}, {key, vk})));
}
NodeRef ReductionBlocks::lane_value(const Lanes& l, NodeRef slot) const {
  NodeRef first = at(l.acc, slot);
  if (!l.keyed) return first;
  NodeRef key = at(l.key, slot);
  return legalize(b::where(b::ne(first, first), first, b::bitcast(order_key(key), acc_type())));
}

NodeRef ReductionBlocks::tree(const std::vector<NodeRef>& lane) const {
  static_assert(kReduceLanes == 8, "the tree is written for 8 lanes");
  NodeRef q[4];
  for (int l = 0; l < 4; ++l) q[l] = combine(lane[l], lane[l + 4]);
  return combine(combine(q[0], q[2]), combine(q[1], q[3]));
}
NodeRef ReductionBlocks::rbody_at(std::vector<NodeRef> idx, NodeRef w, NodeRef r) {
  if (w) idx.back() = add(idx.back(), w);
  for (NodeRef d : unflatten(r, k_.rshape)) idx.push_back(d);
  return at_index(rb_, idx, accs_);
}

ReductionBlocks::Lanes ReductionBlocks::accumulate_block(const std::vector<NodeRef>& idx,
                                                         NodeRef rlo, NodeRef rhi, int W) {
  const int L = kReduceLanes;
  const Lanes acc = lanes(int64_t{L} * W);
  // w: the output's offset along the last axis (null: W == 1, the output itself).
  auto update = [&](NodeRef slot, NodeRef w, NodeRef r) {
    if (kept_ && !w) {  // a row kernel's last stage also stores the kept value (rows())
      std::vector<NodeRef> full = idx;
      for (NodeRef d : unflatten(r, k_.rshape)) full.push_back(d);
      NodeRef v = let("kept", at_index(kept_, full, accs_));
      store(0, add(kept_base_, r), v);
      add_to_lane(acc, slot, at_index(rb_, full, accs_, {{kept_, v}}));
      return;
    }
    add_to_lane(acc, slot, w ? rbody_at(idx, w, r) : rbody_at(idx, 0, r));
  };
  const Loop lanes = p_.vector_lanes ? Loop::Vector : Loop::Unrolled;
  // Lane (or tail element) `l`'s slot for each of the W outputs: one loop over w.
  auto outputs = [&](NodeRef l, NodeRef r) {
    VarId w = var("w");
    loop(w, I(0), I(W), lanes, [&] { update(add(mul(l, W), V(w)), V(w), r); });
  };
  NodeRef n = b::sub(rhi, rlo), nfull = udiv(n, L);
  VarId j = var("j");
  loop(j, I(0), nfull, Loop::Serial, [&] {
    NodeRef base = add(rlo, mul(V(j), L));
    if (W == 1) {
      VarId l = var("l");
      loop(l, I(0), I(L), lanes, [&] { update(V(l), nullptr, add(base, V(l))); });
    } else {
      for (int l = 0; l < L; ++l) outputs(I(l), add(base, I(l)));
    }
  });
  // The last n % 8 elements: element t goes to lane t.
  NodeRef tail0 = mul(nfull, L);
  NodeRef tailbase = add(rlo, tail0), ntail = b::sub(n, tail0);
  VarId t = var("t");
  loop(t, I(0), I(L - 1), Loop::Unrolled, [&] {
    when(b::lt(V(t), ntail), [&] {
      if (W == 1)
        update(V(t), nullptr, add(tailbase, V(t)));
      else
        outputs(V(t), add(tailbase, V(t)));
    });
  });
  return acc;
}
NodeRef ReductionBlocks::block_result(const Lanes& acc, NodeRef w, int W) {
  std::vector<NodeRef> lane;
  for (int l = 0; l < kReduceLanes; ++l)
    lane.push_back(lane_value(acc, W == 1 ? I(l) : add(I(int64_t{l} * W), w)));
  return tree(lane);
}
NodeRef ReductionBlocks::reduce_block(const std::vector<NodeRef>& idx, NodeRef rlo, NodeRef rhi) {
  const Lanes acc = accumulate_block(idx, rlo, rhi, 1);
  return let("red", block_result(acc, I(0), 1));
}

NodeRef ReductionBlocks::reduce_lane(const std::vector<NodeRef>& idx, NodeRef rlo, NodeRef rhi,
                                     NodeRef l, bool broadcast) {
  VarId a = reg("lane", acc_type(), 1, identity());
  VarId j = var("j");
  loop(
      j, add(rlo, l), rhi, Loop::Serial,
      [&] {
        if (!kept_) return set(a, I(0), combine(at(a, I(0)), rbody_at(idx, 0, V(j))));
        // A row kernel's last stage also stores the kept value (rows()), in this lane's
        // element: the thread that writes the row's element j later reads it back.
        std::vector<NodeRef> full = idx;
        for (NodeRef d : unflatten(V(j), k_.rshape)) full.push_back(d);
        NodeRef v = let("kept", at_index(kept_, full, accs_));
        store(0, add(kept_base_, V(j)), v);
        set(a, I(0), combine(at(a, I(0)), at_index(rb_, full, accs_, {{kept_, v}})));
      },
      kReduceLanes, p_.lane_unroll);
  for (int64_t k : {4, 2, 1}) {
    NodeRef mine = at(a, I(0));
    set(a, I(0), combine(mine, make(Op::Shuffle, acc_type(), {}, {mine}, k)));
  }
  if (broadcast) return let("red", make(Op::ShuffleIdx, acc_type(), {}, {at(a, I(0))}, int64_t{0}));
  return let("red", at(a, I(0)));
}

}  // namespace codegen::lowering
