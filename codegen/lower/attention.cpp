// The GPU attention kernel (KernelSpec::attention, made by codegen/schedule_attention.h for a
// GPU schedule): softmax(q k^T ...) v as one fixed-block entry, with the bits of the three
// kernels it replaces (the scores' product, the softmax row kernel, the weights' product).
//
// A block of 256 threads takes one task at a time (block-stride over tasks): batch element bi
// (a (batch, head) pair) and its query rows [r0, r0 + R), R = gpu_attention_rows (as many rows
// as fit 44 KiB of block-shared memory with their Tk scores and D elements of q, at most 32).
// Per task, its phases, each ended by a block barrier:
//   q:       the threads copy the rows' q into shared memory (rows past Tq as zeros);
//   scores:  the R rows are split into groups so that groups x Tk work items fill the block;
//            thread (group, key j) runs one chain per row r of its group, each the scores'
//            product's own chain: acc = +0, then acc = fma(q[r, d], k^T[d, j], acc) for d in
//            increasing order (contraction.cpp's and the tiled product's chain, the host's),
//            reading each element of k once for the group, and stores tile[r Tk + j];
//   weights: the row kernel on the tile's rows, in its order: per stage, thread 8 r + l runs
//            lane l's chain of row r (elements l, l + 8, ... in increasing order from the
//            identity: the lane of a one-block reduction, docs/numerics.md), a barrier, thread
//            r combines the row's 8 lanes by the fixed tree, a barrier (the stage's bits are
//            those of the separate reduction, as rows.cpp's lanes give them); then the threads
//            share the rows' elements for the body, reading the scores from the tile and
//            writing the weights over them (element j of a row is read, then written, by one
//            thread only; the row kernel reads the scores at each element's own index,
//            schedule_attention.cpp), and other operands (a mask) from global memory at the
//            same indices;
//   values:  likewise groups x Dv work items; thread (group, column n) runs one chain per row
//            r of its group: acc = +0, then acc = fma(P[r, j], v[j, n], acc) for j in
//            increasing order (the weights' product's chain), reading each element of v once
//            for the group, and stores it at its index of the output.
// So every score, weight and output is computed by the operations the separate kernels compute,
// in their order (the body's exp is recomputed rather than kept in the row, as the row kernel
// may do: the same operations on the same value, so the same bits). Rows past Tq in the last
// block of an element are skipped by every phase.
#include "codegen/lower/attention.h"

#include <algorithm>
#include <stdexcept>

#include "codegen/core_ops.h"
#include "codegen/lower.h"
#include "codegen/lower/passes.h"
#include "codegen/lower/reduction_blocks.h"
#include "ir/rewrite.h"

namespace codegen::lowering {

namespace {

// Where a part's params point in the fused kernel: an index into its slots (params), or the
// tile (the scores' and weights' slots, which have no buffer).
constexpr int kTile = -1;

std::vector<int> param_map(const KernelSpec& k, const KernelSpec& part) {
  const int s_slot = k.attention[0].slots[0], p_slot = k.attention[1].slots[0];
  std::vector<int> m;
  for (int slot : part.slots) {
    if (slot == s_slot || slot == p_slot) {
      m.push_back(kTile);
      continue;
    }
    auto it = std::find(k.slots.begin(), k.slots.end(), slot);
    if (it == k.slots.end())
      throw std::logic_error("lower_attention: a part reads an unknown slot");
    m.push_back(static_cast<int>(it - k.slots.begin()));
  }
  return m;
}

// The row kernel with its loads renamed to the fused kernel's params; its reads of the scores
// name param `tile_param` (one past the kernel's), which the weights phase maps to the tile.
KernelSpec renamed_row_kernel(const KernelSpec& k) {
  KernelSpec w = k.attention[1];
  const std::vector<int> map = param_map(k, w);
  const int tile_param = static_cast<int>(k.slots.size());
  for (NodeRef* root : w.roots())
    *root = rewrite(*root, [&](NodeRef n, const std::vector<NodeRef>& src) -> NodeRef {
      if (n->op == Op::Load) {
        LoadArg la = arg_load(n);
        const int to = map.at(static_cast<size_t>(la.param));
        la.param = to == kTile ? tile_param : to;
        return make(Op::Load, n->dtype, n->shape, src, la);
      }
      if (n->op == Op::LoadAt) {
        const int to = map.at(static_cast<size_t>(arg_int(n)));
        if (to == kTile) throw std::logic_error("lower_attention: a gather from the scores");
        return make(Op::LoadAt, n->dtype, n->shape, src, int64_t{to});
      }
      return nullptr;
    });
  return w;
}

// Base-from-member: the renamed row kernel exists before ReductionBlocks, which lowers it.
struct AttentionParts {
  explicit AttentionParts(const KernelSpec& k)
      : weights(renamed_row_kernel(k)),
        scores_params(param_map(k, k.attention[0])),
        values_params(param_map(k, k.attention[2])) {}
  KernelSpec weights;
  std::vector<int> scores_params, values_params;
};

class Attention : private AttentionParts, public ReductionBlocks {
 public:
  Attention(const KernelSpec& k, const Plan& p)
      : AttentionParts(k),
        ReductionBlocks(weights, p),
        fused_(k),
        t_(k.out_dtype),
        sc_(*k.attention[0].contract),
        vc_(*k.attention[2].contract),
        tq_(sc_.a_shape()[sc_.a_shape().size() - 2]),
        tk_(sc_.b_shape().back()),
        d_(sc_.a_shape().back()),
        dv_(vc_.b_shape().back()),
        rows_(gpu_attention_rows(tq_, tk_, d_, static_cast<int64_t>(weights.stages.size()),
                                 itemsize(t_))) {
    out_.params = kernel_params(k);  // the fused kernel's (Builder took the row kernel's)
    if (!p.gpu)
      throw std::logic_error("lower_attention: a GPU kernel (the host runs a library step)");
    if (rows_ < 1) throw std::logic_error("lower_attention: a row of scores exceeds the tile");
  }

  void run() {
    const int64_t per_element = (tq_ + rows_ - 1) / rows_;
    const int64_t tasks = batch_count() * per_element;
    lir::Entry e;
    e.items = tasks, e.threads = tasks * kGpuAttentionThreads, e.block = kGpuAttentionThreads;
    cur_ = &e.head;
    tile_ = shared("tile", t_, rows_ * tk_);
    qs_ = shared("qs", t_, std::max<int64_t>(rows_ * d_, 1));
    for (const RowStage& st : weights.stages) {
      part_.push_back(shared("part", st.rbody->dtype, rows_ * kReduceLanes));
      res_.push_back(shared("res", st.rbody->dtype, rows_));
    }
    cur_ = &e.body;
    VarId task = var("task");
    loop(task, I(0), I(tasks), Loop::Blocks, [&] {
      bi_ = let("bi", udiv(V(task), per_element));
      r0_ = let("r0", mul(urem(V(task), per_element), rows_));
      scores();
      barrier();
      weights_rows();
      barrier();
      values();
      barrier();  // every thread has read the weights before the next task's scores
    });
    cur_ = nullptr;
    out_.entries.push_back(std::move(e));
  }

 private:
  int64_t batch_count() const {
    const Shape a = sc_.a_shape();
    return numel(Shape(a.begin(), a.end() - 2));
  }
  // The offset of batch element bi_ in an operand of contraction c (C order over c's batch).
  NodeRef batch_offset(const Contraction& c, const View& v) {
    const Shape a = c.a_shape();
    const Shape batch(a.begin(), a.end() - 2);
    NodeRef off = I(v.offset);
    if (batch.empty()) return off;
    const std::vector<NodeRef> q = unflatten(bi_, batch);
    for (size_t d = 0; d < batch.size(); ++d) off = add(off, mul(q[d], v.strides[d]));
    return off;
  }
  // Row groups: the block's R rows split into groups of `per` rows so that groups x width work
  // items fill the 256 threads (one group where width >= 256); body(rg, per, x) for the group
  // starting at row rg and column x (a key or an output column). The group's rows past R read
  // row R - 1 (row_of) and store nothing; rows past Tq store nothing.
  template <class F>
  void groups_of(int64_t width, F&& body) {
    const int64_t groups = gpu_attention_groups(width, rows_);
    const int64_t per = (rows_ + groups - 1) / groups;
    VarId e = var("e");
    loop(e, I(0), I(groups * width), Loop::Threads, [&] {
      NodeRef rg = let("rg", mul(udiv(V(e), width), per)), x = let("x", urem(V(e), width));
      body(rg, per, x);
    });
  }
  // Row rg + i of a group, within the block's R rows (rows past R read the last).
  NodeRef row_of(NodeRef rg, int64_t i) { return let("row", min(add(rg, I(i)), I(rows_ - 1))); }
  // Whether row rg + i of a group is one of the task's rows (below R and below Tq).
  NodeRef stores_row(NodeRef rg, int64_t i) {
    NodeRef r = add(rg, I(i));
    return b::band(b::lt(r, I(rows_)), b::lt(add(r0_, r), I(tq_)));
  }
  // `per` chains at once: acc_i = +0, then acc_i = fma(left(i, t), right(t), acc_i) for t in
  // [0, n) in increasing order (a product's chain per output), right(t) read once for all.
  template <class Left, class Right>
  VarId chains(int64_t per, int64_t n, Left&& left, Right&& right) {
    VarId acc = reg("acc", t_, per, b::cf(t_, 0));
    VarId t = var("t");
    loop(t, I(0), I(n), Loop::Serial, [&] {
      NodeRef y = let("y", right(V(t)));
      for (int64_t i = 0; i < per; ++i)
        set(acc, I(i), make(Op::Fma, t_, {}, {left(i, V(t)), y, at(acc, I(i))}));
    });
    return acc;
  }

  // The task's rows of q into shared memory (rows past Tq as zeros), then the scores: thread
  // (group, key j) runs the chains of its group's rows against key j, reading q from shared
  // memory and each element of k once for the group, and stores them in the tile.
  void scores() {
    const size_t nd = sc_.a_shape().size();
    const int d2 = static_cast<int>(nd) - 2, d1 = static_cast<int>(nd) - 1;
    const AxisDims am = operand_axis(sc_, true, d2), ak = operand_axis(sc_, true, d1);
    const AxisDims bk = operand_axis(sc_, false, d2), bn = operand_axis(sc_, false, d1);
    const int qp = scores_params.at(static_cast<size_t>(sc_.a_param));
    const int kp = scores_params.at(static_cast<size_t>(sc_.b_param));
    NodeRef ao = let("ao", batch_offset(sc_, sc_.a)), bo = let("bo", batch_offset(sc_, sc_.b));
    VarId e = var("e");
    loop(e, I(0), I(rows_ * d_), Loop::Threads, [&] {
      NodeRef r = let("r", udiv(V(e), d_)), d = let("d", urem(V(e), d_));
      NodeRef ok = let("ok", b::lt(add(r0_, r), I(tq_)));
      NodeRef off = add(ao, add(offset_along(add(r0_, r), am), offset_along(d, ak)));
      NodeRef x = widen(load_at(qp, sc_.a_dtype, b::where(ok, off, I(0))), t_);
      set(qs_, V(e), legalize(b::where(ok, x, zero(t_))));
    });
    barrier();
    groups_of(tk_, [&](NodeRef rg, int64_t per, NodeRef j) {
      NodeRef bcol = let("bcol", add(bo, offset_along(j, bn)));
      std::vector<NodeRef> rows;
      for (int64_t i = 0; i < per; ++i) rows.push_back(mul(row_of(rg, i), d_));
      VarId acc = chains(
          per, d_, [&](int64_t i, NodeRef d) { return at(qs_, add(rows[i], d)); },
          [&](NodeRef d) {
            return widen(load_at(kp, sc_.b_dtype, add(bcol, offset_along(d, bk))), t_);
          });
      for (int64_t i = 0; i < per; ++i)
        when(stores_row(rg, i),
             [&] { set(tile_, add(mul(add(rg, I(i)), tk_), j), at(acc, I(i))); });
    });
  }

  // The row kernel over the block's rows, its scores read from the tile and its weights written
  // over them (its param 0 and its reads of the scores both address the tile, from the task's
  // first element of the scores). Each stage s: thread 8 r + l runs lane l of row r (elements l,
  // l + 8, ... in increasing order from the identity, reduce_block's lane l) into part_s; after a
  // barrier thread r combines row r's 8 lanes by the fixed tree into res_s; a barrier. Then the
  // threads share the rows' elements for the body, each reading its row's stage results: element
  // j of a row is read (scores) and then written (weights) by one thread only, and the stages
  // that read the scores are all done (the barrier).
  void weights_rows() {
    const KernelSpec& w = weights;
    const int64_t L = kReduceLanes;
    NodeRef first = let("first", mul(add(mul(bi_, tq_), r0_), tk_));
    shared_tiles_[0] = {tile_, first};
    shared_tiles_[static_cast<int>(fused_.slots.size())] = {tile_, first};
    // Row r's outer index (the row kernel's work item) and index over its shape.
    auto row = [&](NodeRef r) {
      NodeRef o = let("o", add(mul(bi_, tq_), add(r0_, r)));
      return std::pair{o, unflatten(o, w.shape)};
    };
    // The stage results before stage `upto`, for row r.
    auto results = [&](NodeRef r, size_t upto) {
      std::vector<NodeRef> accs;
      for (size_t t = 0; t < upto; ++t) accs.push_back(let("red", at(res_[t], r)));
      return accs;
    };
    for (size_t s = 0; s < w.stages.size(); ++s) {
      rb_ = w.stages[s].rbody, rop_ = w.stages[s].reduce_op;
      VarId e = var("e");
      loop(e, I(0), I(rows_ * L), Loop::Threads, [&] {
        NodeRef r = let("r", udiv(V(e), L)), l = let("l", urem(V(e), L));
        when(b::lt(add(r0_, r), I(tq_)), [&] {
          const std::vector<NodeRef> idx = row(r).second;
          accs_ = results(r, s);
          VarId a = reg("lane", acc_type(), 1, identity());
          VarId j = var("j");
          loop(
              j, l, I(tk_), Loop::Serial,
              [&] { set(a, I(0), combine(at(a, I(0)), rbody_at(idx, 0, V(j)))); }, L);
          set(part_[s], V(e), at(a, I(0)));
        });
      });
      barrier();
      VarId r = var("r");
      loop(r, I(0), I(rows_), Loop::Threads, [&] {
        when(b::lt(add(r0_, V(r)), I(tq_)), [&] {
          std::vector<NodeRef> lanes;
          for (int64_t q = 0; q < L; ++q) lanes.push_back(at(part_[s], add(mul(V(r), L), I(q))));
          set(res_[s], V(r), tree(lanes));
        });
      });
      barrier();
    }
    VarId e = var("e");
    loop(e, I(0), I(rows_ * tk_), Loop::Threads, [&] {
      NodeRef r = let("r", udiv(V(e), tk_)), j = let("j", urem(V(e), tk_));
      when(b::lt(add(r0_, r), I(tq_)), [&] {
        auto [o, idx] = row(r);
        const std::vector<NodeRef> accs = results(r, w.stages.size());
        std::vector<NodeRef> full = idx;
        for (NodeRef x : unflatten(j, w.rshape)) full.push_back(x);
        store(0, add(mul(o, tk_), j), at_index(w.body, full, accs));
      });
    });
    shared_tiles_.clear();
  }

  // The outputs: thread (group, column n) runs the chains of its group's rows, reading the
  // weights from the tile and each element of v once for the group.
  void values() {
    const size_t nd = vc_.b_shape().size();
    const AxisDims bk = operand_axis(vc_, false, static_cast<int>(nd) - 2);
    const AxisDims bn = operand_axis(vc_, false, static_cast<int>(nd) - 1);
    const int vp = values_params.at(static_cast<size_t>(vc_.b_param));
    NodeRef bo = let("vo", batch_offset(vc_, vc_.b));
    groups_of(dv_, [&](NodeRef rg, int64_t per, NodeRef n) {
      NodeRef bcol = let("bcol", add(bo, offset_along(n, bn)));
      std::vector<NodeRef> rows;
      for (int64_t i = 0; i < per; ++i) rows.push_back(mul(row_of(rg, i), tk_));
      VarId acc = chains(
          per, tk_, [&](int64_t i, NodeRef j) { return at(tile_, add(rows[i], j)); },
          [&](NodeRef j) {
            return widen(load_at(vp, vc_.b_dtype, add(bcol, offset_along(j, bk))), t_);
          });
      for (int64_t i = 0; i < per; ++i)
        when(stores_row(rg, i), [&] {
          NodeRef row = add(mul(bi_, tq_), add(r0_, add(rg, I(i))));
          store(0, add(mul(row, dv_), n), at(acc, I(i)));
        });
    });
  }

  const KernelSpec& fused_;
  const DType t_;
  const Contraction &sc_, &vc_;
  const int64_t tq_, tk_, d_, dv_, rows_;
  VarId tile_ = -1, qs_ = -1;      // the scores (then weights) and the rows of q
  std::vector<VarId> part_, res_;  // per stage: the rows' lane results, the rows' results
  NodeRef bi_ = nullptr, r0_ = nullptr;
};

}  // namespace

lir::Kernel lower_attention(const KernelSpec& k, const Plan& p) {
  Attention pass(k, p);
  pass.run();
  return pass.take();
}

}  // namespace codegen::lowering
