// Reductions (a kernel with an rbody): one output per work item (or per 8 lane threads on a
// GPU with plan lanes:threads) when the reduction is one block; otherwise two phases, one partial
// per (output, block) into a scratch param, then each output's partials left to right. The host
// interleaves several blocks per item (plan part blocks) or several adjacent outputs (group).
#include "codegen/lower/passes.h"
#include "codegen/lower/reduction_blocks.h"

namespace codegen::lowering {

namespace {

class Reduction : public ReductionBlocks {
 public:
  using ReductionBlocks::ReductionBlocks;
  void run() { reduction(); }

 private:
  void reduction() {
    const int64_t outs = numel(k_.shape), nb = k_.blocks(), R = k_.reduce_size();
    const int lanes = p_.lane_threads ? kReduceLanes : 1;
    // The partial of block [rlo, rhi) at output index idx (item w's lane when lane threads).
    auto partial = [&](const std::vector<NodeRef>& idx, NodeRef rlo, NodeRef rhi, NodeRef l) {
      return p_.lane_threads ? reduce_lane(idx, rlo, rhi, l) : reduce_block(idx, rlo, rhi);
    };
    auto finish = [&](NodeRef o, const std::vector<NodeRef>& idx, NodeRef acc) {
      store(0, o, at_index(k_.body, idx, {acc}));
    };
    if (nb > 1) {
      // Phase 1: one partial per (output, block) pair into the scratch param (last).
      const int scratch = static_cast<int>(out_.params.size());
      out_.params.push_back({acc_type(), true});
      if (p_.blocks > 1) {
        interleaved_blocks_host(scratch);
      } else if (p_.group > 1) {
        grouped_blocks_host(scratch);
      } else {
        entry("_p1", outs * nb * lanes, outs * nb * lanes, [&] {
          items(outs * nb * lanes, [&](NodeRef w) {
            NodeRef pw = udiv(w, lanes), l = urem(w, lanes);
            NodeRef o = udiv(pw, nb), blk = urem(pw, nb);
            NodeRef rlo = mul(blk, kReduceBlock);
            NodeRef rhi = min(add(rlo, I(kReduceBlock)), I(R));
            NodeRef part = partial(unflatten(o, k_.shape), rlo, rhi, l);
            if (p_.lane_threads)
              when(b::eq(l, I(0)), [&] { store(scratch, pw, part); });
            else
              store(scratch, pw, part);
          });
        });
      }
      // Phase 2: the block partials of each output combine left to right.
      entry("", outs, outs, [&] {
        items(outs, [&](NodeRef o) {
          NodeRef sb = mul(o, nb);
          VarId acc = reg("acc", acc_type(), 1, load_at(scratch, acc_type(), sb));
          VarId blk = var("b");
          loop(
              blk, I(1), I(nb), Loop::Serial,
              [&] {
                set(acc, I(0),
                    combine(at(acc, I(0)), load_at(scratch, acc_type(), add(sb, V(blk)))));
              },
              1, p_.lane_unroll);
          finish(o, unflatten(o, k_.shape), let("red", at(acc, I(0))));
        });
      });
      return;
    }
    entry("", outs * lanes, outs * lanes, [&] {
      if (p_.group > 1) return grouped_host();
      items(outs * lanes, [&](NodeRef w) {
        NodeRef o = udiv(w, lanes), l = urem(w, lanes);
        auto idx = unflatten(o, k_.shape);
        NodeRef acc = partial(idx, I(0), I(R), l);
        if (p_.lane_threads)
          when(b::eq(l, I(0)), [&] { finish(o, idx, acc); });
        else
          finish(o, idx, acc);
      });
    });
  }

  // Host, phase 1 with plan.blocks = G > 1: work item w is output w / ng and its blocks
  // G (w % ng) .. G (w % ng) + G - 1 (ng = ceil(nb / G)). Where all G are full blocks, one loop
  // walks them together: step j adds element rlo_g + 8 j + l to lane l of block g, for every g,
  // so each block's lanes see exactly the elements, in the order, of reduce_block; each block
  // then has its own tree and partial. Other items reduce their blocks one after another.
  void interleaved_blocks_host(int scratch) {
    const int64_t outs = numel(k_.shape), nb = k_.blocks(), R = k_.reduce_size();
    const int G = p_.blocks, L = kReduceLanes;
    const int64_t ng = (nb + G - 1) / G, full_groups = R / kReduceBlock / G;
    entry("_p1", outs * ng, outs * ng, [&] {
      items(outs * ng, [&](NodeRef w) {
        NodeRef o = udiv(w, ng), grp = urem(w, ng);
        auto idx = unflatten(o, k_.shape);
        NodeRef blk0 = let("blk", mul(grp, G));
        NodeRef sb = add(mul(o, nb), blk0);
        auto together = [&] {
          NodeRef rlo = let("rlo", mul(blk0, kReduceBlock));
          const Lanes acc = lanes(int64_t{L} * G);
          VarId j = var("j");
          loop(j, I(0), I(kReduceBlock / L), Loop::Serial, [&] {
            NodeRef base = add(rlo, mul(V(j), L));
            VarId l = var("l");
            loop(l, I(0), I(L), p_.vector_lanes ? Loop::Vector : Loop::Unrolled, [&] {
              for (int g = 0; g < G; ++g) {
                NodeRef slot = add(I(int64_t{g} * L), V(l));
                NodeRef r = add(base, add(I(int64_t{g} * kReduceBlock), V(l)));
                add_to_lane(acc, slot, rbody_at(idx, 0, r));
              }
            });
          });
          for (int g = 0; g < G; ++g) {
            std::vector<NodeRef> lane;
            for (int q = 0; q < L; ++q) lane.push_back(lane_value(acc, I(int64_t{g} * L + q)));
            store(scratch, add(sb, I(g)), let("red", tree(lane)));
          }
        };
        auto one_by_one = [&] {
          VarId blk = var("b");
          loop(blk, blk0, min(add(blk0, I(G)), I(nb)), Loop::Serial, [&] {
            NodeRef rlo = mul(V(blk), kReduceBlock);
            NodeRef rhi = min(add(rlo, I(kReduceBlock)), I(R));
            store(scratch, add(mul(o, nb), V(blk)), reduce_block(idx, rlo, rhi));
          });
        };
        if (full_groups == ng) return together();
        if (full_groups > 0) when(b::lt(grp, I(full_groups)), together);
        when(b::le(I(full_groups), grp), one_by_one);
      });
    });
  }

  // Host, phase 1 with plan.group = W > 1 (the output's last extent a multiple of W): work item
  // w is block w % nb of the W adjacent outputs W (w / nb) .. W (w / nb) + W - 1, which step
  // together (accumulate_block: each keeps its lanes and tree, so its partial has the bits of
  // reduce_block's). A reduction over the leading axes of a channels-last tensor (a bias
  // gradient) then reads W neighbours per load instead of one element a cache line apart.
  void grouped_blocks_host(int scratch) {
    const int64_t outs = numel(k_.shape), nb = k_.blocks(), R = k_.reduce_size();
    const int W = p_.group;
    const int64_t items_n = outs / W * nb;
    entry("_p1", items_n, items_n, [&] {
      items(items_n, [&](NodeRef w) {
        NodeRef o = let("o", mul(udiv(w, nb), W)), blk = urem(w, nb);
        auto idx = unflatten(o, k_.shape);
        NodeRef rlo = let("rlo", mul(blk, kReduceBlock));
        NodeRef rhi = min(add(rlo, I(kReduceBlock)), I(R));
        const Lanes acc = accumulate_block(idx, rlo, rhi, W);
        VarId q = var("w");
        loop(q, I(0), I(W), p_.vector_lanes ? Loop::Vector : Loop::Unrolled, [&] {
          NodeRef red = let("red", block_result(acc, V(q), W));
          store(scratch, add(mul(add(o, V(q)), nb), blk), red);
        });
      });
    });
  }

  // Host, one block: rows of outputs; along a row, `group` adjacent outputs at a time reduce
  // together (each keeps its lanes and tree), the rest one by one. The groups sit at fixed places
  // in each row (outputs W g .. W g + W - 1, for as many whole groups as the row holds) and a
  // work range [lo, hi) runs every group whose first output it holds, whole (it may store past
  // hi: the range that holds those outputs skips them), and the row's last outputs past its
  // whole groups that lie in it. So any split of the outputs across the thread pool keeps the
  // groups, and each output is stored once, with the same bits either way.
  void grouped_host() {
    const Shape& s = k_.shape;
    const int64_t last = s.back(), R = k_.reduce_size();
    const int W = p_.group;
    if (last == 0) return;
    NodeRef lo = V(lir::kLo), hi = V(lir::kHi);
    NodeRef whole = I(last / W * W);  // the row's outputs in whole groups
    VarId row = var("row");
    loop(row, udiv(lo, last), udiv(add(hi, I(last - 1)), last), Loop::Serial, [&] {
      NodeRef base = let("base", mul(V(row), last));
      NodeRef ilo = let("ilo", b::where(b::lt(base, lo), b::sub(lo, base), I(0)));
      NodeRef ihi = let("ihi", min(b::sub(hi, base), I(last)));
      NodeRef first = let("first", mul(udiv(add(ilo, I(W - 1)), W), W));
      auto idx_at = [&](NodeRef i) {
        auto idx = unflatten(V(row), Shape(s.begin(), s.end() - 1));
        idx.push_back(i);
        return idx;
      };
      VarId g = var("g");
      loop(
          g, first, min(ihi, whole), Loop::Serial,
          [&] {
            auto idx = idx_at(V(g));
            const Lanes acc = accumulate_block(idx, I(0), I(R), W);
            // Each output's tree and store, the W outputs as one loop like their lanes.
            VarId w = var("w");
            loop(w, I(0), I(W), p_.vector_lanes ? Loop::Vector : Loop::Unrolled, [&] {
              auto iw = idx;
              iw.back() = add(iw.back(), V(w));
              NodeRef red = let("red", block_result(acc, V(w), W));
              store(0, add(base, add(V(g), V(w))), at_index(k_.body, iw, {red}));
            });
          },
          W);
      VarId i = var("i");
      loop(i, b::where(b::lt(ilo, whole), whole, ilo), ihi, Loop::Serial, [&] {
        auto idx = idx_at(V(i));
        NodeRef acc = reduce_block(idx, I(0), I(R));
        store(0, add(base, V(i)), at_index(k_.body, idx, {acc}));
      });
    });
  }
};

}  // namespace

lir::Kernel lower_reduction(const KernelSpec& k, const Plan& p) {
  Reduction pass(k, p);
  pass.run();
  return pass.take();
}

}  // namespace codegen::lowering
