// Row kernels (codegen/kernel.h: stages over a row, then a body at the outer index or over the
// row): the host two rows at a time, a GPU one row per thread or per 8 lane threads.
#include <unordered_set>

#include "codegen/lower/passes.h"
#include "codegen/lower/reduction_blocks.h"

namespace codegen::lowering {

namespace {

class Rows : public ReductionBlocks {
 public:
  using ReductionBlocks::ReductionBlocks;
  void run() { rows(); }

 private:
  // A row kernel (codegen/kernel.h): work item o is outer index o. Its stages run in order,
  // each a one-block reduction over the row in the order reduce_block gives the reduction
  // kernel it replaces (lanes, fixed tree; R <= kReduceBlock), reading the earlier stages'
  // results; then the body, at the outer index or over the row (the row is in L1 after the
  // first stage on the host). The host steps two rows together (row_group). The GPU with plan
  // rows:lanes runs a row as 8 consecutive threads (row_lanes), else one row per thread, all 8
  // lanes in registers.
  //
  // A costly value that the last stage and a row-writing body both compute per element (softmax's
  // exp(x - max)) is computed once: the last stage stores it in the output row as it reduces it,
  // and the body reads it back from there (the same value, so the same bits). Only where the body
  // then reads no other memory: with the output in place of an input, the stage's stores may
  // overwrite elements of that input the body would read.
  void rows() {
    const int64_t outs = numel(k_.shape), R = numel(k_.rshape);
    const NodeRef kept = k_.row_out ? kept_value() : nullptr;
    if (p_.row_lanes) return row_lanes(kept);
    p_.lane_threads = false;
    if (!p_.gpu) {
      // The host: the range's rows two at a time (then its last one alone, when odd).
      entry("", outs, outs, [&] {
        NodeRef lo = V(lir::kLo), n = b::sub(V(lir::kHi), V(lir::kLo));
        VarId q = var("q");
        loop(q, I(0), udiv(n, kRowsTogether), Loop::Serial, [&] {
          NodeRef first = let("o", add(lo, mul(V(q), kRowsTogether)));
          std::vector<NodeRef> os;
          for (int g = 0; g < kRowsTogether; ++g) os.push_back(add(first, I(g)));
          row_group(os, kept);
        });
        NodeRef done = mul(udiv(n, kRowsTogether), kRowsTogether);
        VarId o = var("o");
        loop(o, add(lo, done), V(lir::kHi), Loop::Serial, [&] { row_group({V(o)}, kept); });
      });
      return;
    }
    entry("", outs, outs, [&] {
      items(outs, [&](NodeRef o) {
        const std::vector<NodeRef> idx = unflatten(o, k_.shape);
        NodeRef base = k_.row_out ? let("base", mul(o, R)) : nullptr;
        const std::vector<NodeRef> accs =
            row_stages(kept, base, [&] { return reduce_block(idx, I(0), I(R)); });
        if (!k_.row_out) return store(0, o, at_index(k_.body, idx, accs));
        VarId r = var("r");
        loop(r, I(0), I(R), Loop::Serial, [&] { row_element(idx, accs, kept, base, V(r)); });
      });
    });
  }

  // A row kernel's stages in order, each reduced by `reduce` (which reads rb_, rop_ and the
  // earlier stages' results in accs_); the last stage may keep its per-element value (kept) in
  // the output row at `base`. Returns the stages' results.
  template <class Reduce>
  std::vector<NodeRef> row_stages(NodeRef kept, NodeRef base, Reduce&& reduce) {
    std::vector<NodeRef> accs;
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const RowStage& st = k_.stages[s];
      rb_ = st.rbody, rop_ = st.reduce_op, accs_ = accs;
      if (s + 1 == k_.stages.size()) kept_ = kept, kept_base_ = base;
      accs.push_back(reduce());
      kept_ = nullptr;
    }
    return accs;
  }

  // A row-writing body's element r of the row at `base` (outer index idx), reading the kept
  // value back from the output where the last stage stored it.
  void row_element(const std::vector<NodeRef>& idx, const std::vector<NodeRef>& accs, NodeRef kept,
                   NodeRef base, NodeRef r) {
    std::vector<NodeRef> at = idx;
    for (NodeRef d : unflatten(r, k_.rshape)) at.push_back(d);
    std::map<NodeRef, NodeRef> reads;
    if (kept) reads[kept] = load_at(0, k_.out_dtype, add(base, r));
    store(0, add(base, r), at_index(k_.body, at, accs, reads));
  }

  // GPU, plan rows:lanes: work item w is lane l = w % 8 of row o = w / 8, so a row is 8
  // consecutive threads (a warp holds 4 rows; the launch has 8 threads per row, so every group
  // of 8 is whole and its threads run the same items). Each stage is reduce_lane: lane l's
  // chain (elements l, l + 8, ...: reduce_block's lane l), the fixed tree as shuffles, its result
  // broadcast to the 8 threads; then a row-writing body writes element r in lane r % 8's thread
  // (consecutive threads, consecutive addresses), the elements that thread's chains read and,
  // for the kept value, wrote; a body at the outer index is lane 0's. A thread reads and writes
  // only its own lane's elements of its row, so an input written over in place
  // (codegen/inplace.cpp: a read of the row's own index) is never read by another thread after
  // it was written.
  void row_lanes(NodeRef kept) {
    const int64_t outs = numel(k_.shape), R = numel(k_.rshape);
    const int L = kReduceLanes;
    entry("", outs * L, outs * L, [&] {
      items(outs * L, [&](NodeRef w) {
        NodeRef o = let("o", udiv(w, L)), l = let("l", urem(w, L));
        const std::vector<NodeRef> idx = unflatten(o, k_.shape);
        NodeRef base = k_.row_out ? let("base", mul(o, R)) : nullptr;
        const std::vector<NodeRef> accs =
            row_stages(kept, base, [&] { return reduce_lane(idx, I(0), I(R), l, true); });
        if (!k_.row_out)
          return when(b::eq(l, I(0)), [&] { store(0, o, at_index(k_.body, idx, accs)); });
        VarId r = var("r");
        loop(
            r, l, I(R), Loop::Serial, [&] { row_element(idx, accs, kept, base, V(r)); }, L);
      });
    });
  }

  // Host: rows `os` together. Each stage walks their rows in one loop: step j adds element
  // 8 j + l of row g to lane l of row g's accumulator (the last R % 8 elements: element t to
  // lane t), so every row's lanes see exactly the elements, in the order, of reduce_block, and
  // each row then has its own tree. Interleaved, the rows' chains of dependent combines (a
  // max is a few selects per step) overlap instead of each waiting on its own latency.
  //
  // The first stage reads the rows from memory, the later ones from cache; so while a costly
  // last stage computes (softmax's exps: at least kPrefetchMinNodes nodes), each of its steps
  // prefetches the first stage's elements of the next rows at that step's offset
  // (prefetch_next_rows): the next group's first stage then reads from cache, and the memory
  // reads overlap the computing instead of taking turns with it (softmax over [4096, 1024] on
  // one thread: 3.0 against 4.1 ms). Behind a cheap last stage (layer norm's variance) they
  // would not hide: there the rows' bodies prefetch, 16 elements a step (layer norm over
  // [4096, 1024] on one thread: 1.65-1.84 against 1.92-2.16 ms).
  static constexpr int kRowsTogether = 2;
  static constexpr size_t kPrefetchMinNodes = 16;
  void row_group(const std::vector<NodeRef>& os, NodeRef kept) {
    const int G = static_cast<int>(os.size()), L = kReduceLanes;
    const int64_t R = numel(k_.rshape);
    std::vector<std::vector<NodeRef>> idx, accs(G);
    std::vector<NodeRef> base;
    for (NodeRef o : os) {
      idx.push_back(unflatten(o, k_.shape));
      base.push_back(k_.row_out ? let("base", mul(o, R)) : nullptr);
    }
    auto at_row = [&](int g, NodeRef r) {
      std::vector<NodeRef> full = idx[g];
      for (NodeRef d : unflatten(r, k_.rshape)) full.push_back(d);
      return full;
    };
    bool costly_stage = false;  // some stage prefetches the next rows
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      rb_ = k_.stages[s].rbody, rop_ = k_.stages[s].reduce_op;
      const NodeRef keep = s + 1 == k_.stages.size() ? kept : nullptr;
      const bool costly =
          s > 0 && s + 1 == k_.stages.size() && toposort({rb_}).size() >= kPrefetchMinNodes;
      costly_stage = costly_stage || costly;
      const Lanes acc = lanes(int64_t{L} * G);
      // Row g's reduced value at element r (storing the kept value on the way).
      auto value = [&](int g, NodeRef r) {
        std::vector<NodeRef> full = at_row(g, r);
        std::map<NodeRef, NodeRef> reads;
        if (keep) {
          NodeRef v = let("kept", at_index(keep, full, accs[g]));
          store(0, add(base[g], r), v);
          reads[keep] = v;
        }
        return at_index(rb_, full, accs[g], reads);
      };
      // Element r of row g into slot g * L + lane.
      auto update = [&](int g, NodeRef lane, NodeRef r) {
        add_to_lane(acc, add(I(int64_t{g} * L), lane), value(g, r));
      };
      const Loop lanes_loop = p_.vector_lanes ? Loop::Vector : Loop::Unrolled;
      // A costly stage takes two steps at a time: one loop computes the 2 L values of each row
      // (as wide a vector as the CPU has), a second adds them to the lanes in order, step j's
      // then step j + 1's: the same chains, in half the instructions per value.
      const int64_t pairs = costly && p_.vector_lanes ? R / (2 * L) : 0;
      if (pairs) {
        const VarId values = reg("values", acc_type(), int64_t{G} * 2 * L, identity());
        VarId j2 = var("j");
        loop(j2, I(0), I(pairs), Loop::Serial, [&] {
          NodeRef first = mul(V(j2), 2 * L);
          prefetch_next_rows(os, first, 2 * L);
          VarId t = var("t");
          loop(t, I(0), I(2 * L), Loop::Vector, [&] {
            for (int g = 0; g < G; ++g)
              set(values, add(I(int64_t{g} * 2 * L), V(t)), value(g, add(first, V(t))));
          });
          VarId l = var("l");
          loop(l, I(0), I(L), Loop::Vector, [&] {
            for (int g = 0; g < G; ++g)
              for (int half = 0; half < 2; ++half)
                add_to_lane(acc, add(I(int64_t{g} * L), V(l)),
                            at(values, add(I(int64_t{g} * 2 * L + half * L), V(l))));
          });
        });
      }
      VarId j = var("j");
      loop(j, I(pairs * 2), I(R / L), Loop::Serial, [&] {
        if (costly) prefetch_next_rows(os, mul(V(j), L), L);
        VarId l = var("l");
        loop(l, I(0), I(L), lanes_loop, [&] {
          for (int g = 0; g < G; ++g) update(g, V(l), add(mul(V(j), L), V(l)));
        });
      });
      for (int64_t t = 0; t < R % L; ++t)
        for (int g = 0; g < G; ++g) update(g, I(t), I(R / L * L + t));
      for (int g = 0; g < G; ++g) {
        std::vector<NodeRef> lane;
        for (int q = 0; q < L; ++q) lane.push_back(lane_value(acc, I(int64_t{g} * L + q)));
        accs[g].push_back(let("red", tree(lane)));
      }
    }
    for (int g = 0; g < G; ++g) {
      if (!k_.row_out) {
        store(0, os[g], at_index(k_.body, idx[g], accs[g]));
        continue;
      }
      auto element = [&](NodeRef r) {
        std::map<NodeRef, NodeRef> reads;
        if (kept) reads[kept] = load_at(0, k_.out_dtype, add(base[g], r));
        store(0, add(base[g], r), at_index(k_.body, at_row(g, r), accs[g], reads));
      };
      // Without a costly stage to hide the next rows' reads behind, the rows' bodies do: row g's
      // prefetches the g-th next row, 2 L elements a step.
      const int64_t steps = costly_stage || !p_.vector_lanes ? 0 : R / (2 * L);
      if (steps) {
        VarId jb = var("j");
        loop(jb, I(0), I(steps), Loop::Serial, [&] {
          NodeRef first = mul(V(jb), 2 * L);
          prefetch_row(add(os.back(), I(int64_t{g} + 1)), first, 2 * L);
          VarId t = var("t");
          loop(t, I(0), I(2 * L), Loop::Vector, [&] { element(add(first, V(t))); });
        });
      }
      VarId r = var("r");
      loop(r, I(steps * 2 * L), I(R), Loop::Serial, [&] { element(V(r)); });
    }
  }

  // Prefetches elements [r, r + count) of the rows after `os` (os.back() + 1 ...; the last row
  // for those past it), as the first stage reads them: each of its loads through an unmasked
  // view.
  void prefetch_next_rows(const std::vector<NodeRef>& os, NodeRef r, int64_t count) {
    for (size_t g = 0; g < os.size(); ++g)
      prefetch_row(add(os.back(), I(static_cast<int64_t>(g) + 1)), r, count);
  }
  // The same for row `row` (the last row if past it): one prefetch per 64-byte line of each
  // load's elements (16 float32s, 8 float64s), at the element starting it when the row is
  // contiguous.
  void prefetch_row(NodeRef row, NodeRef r, int64_t count) {
    const int64_t outs = numel(k_.shape);
    row = b::where(b::lt(row, I(outs)), row, I(outs - 1));
    const std::vector<NodeRef> row_at = unflatten(row, k_.shape);
    for (NodeRef n : toposort({k_.stages.front().rbody})) {
      if (n->op != Op::Load || shared_tiles_.count(arg_load(n).param)) continue;
      const View& v = arg_load(n).view;
      const int64_t per_line = std::max<int64_t>(1, kCacheLine / itemsize(n->dtype));
      for (int64_t e = 0; e < count; e += per_line) {
        std::vector<NodeRef> at = row_at;
        for (NodeRef d : unflatten(e ? add(r, I(e)) : r, k_.rshape)) at.push_back(d);
        if (valid_of(v, at)->op == Op::Const) prefetch(arg_load(n).param, offset_of(v, at));
      }
    }
  }
  static constexpr int64_t kCacheLine = 64;

  // The value rows() keeps in the output row: the largest subexpression (at least
  // kKeptMinNodes nodes, of the output's dtype) of both the last stage's rbody and the body,
  // whose every load is then inside it; null when there is none.
  static constexpr size_t kKeptMinNodes = 16;
  NodeRef kept_value() const {
    NodeRef last = k_.stages.back().rbody;
    std::unordered_set<NodeRef> in_stage;
    for (NodeRef x : toposort({last})) in_stage.insert(x);
    NodeRef best = nullptr;
    size_t best_size = 0;
    for (NodeRef x : toposort({k_.body})) {
      if (!in_stage.count(x) || x->dtype != k_.out_dtype || x->src.empty()) continue;
      size_t size = toposort({x}).size();
      if (size > best_size) best = x, best_size = size;
    }
    if (best_size < kKeptMinNodes) return nullptr;
    // The body's loads, other than those inside the kept value.
    std::unordered_set<NodeRef> inside;
    for (NodeRef x : toposort({best})) inside.insert(x);
    std::vector<NodeRef> stack{k_.body};
    std::unordered_set<NodeRef> seen;
    while (!stack.empty()) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (x == best || !seen.insert(x).second) continue;
      if (x->op == Op::Load || x->op == Op::LoadAt) return nullptr;
      for (NodeRef c : x->src) stack.push_back(c);
    }
    return best;
  }
};

}  // namespace

lir::Kernel lower_rows(const KernelSpec& k, const Plan& p) {
  Rows pass(k, p);
  pass.run();
  return pass.take();
}

}  // namespace codegen::lowering
