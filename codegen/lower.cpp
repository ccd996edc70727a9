#include "codegen/lower.h"

#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_set>

#include "codegen/core_ops.h"
#include "ir/builder.h"
#include "ir/debug.h"
#include "ir/rewrite.h"
#include "ir/scalar.h"

namespace codegen {

using namespace ir;
using lir::Block;
using lir::Loop;
using lir::Stmt;
using lir::VarId;

namespace {

NodeRef I(int64_t v) { return b::ci(DType::Int64, v); }
NodeRef add(NodeRef a, NodeRef c) { return b::add(a, c); }
NodeRef mul(NodeRef a, int64_t s) { return s == 1 ? a : b::mul(a, I(s)); }
NodeRef index_op(Op op, NodeRef a, int64_t d) {
  if (a->op == Op::Const) return I(op == Op::UDiv ? arg_int(a) / d : arg_int(a) % d);
  return make(op, DType::Int64, {}, {a, I(d)});
}
NodeRef udiv(NodeRef a, int64_t d) { return d == 1 ? a : index_op(Op::UDiv, a, d); }
NodeRef urem(NodeRef a, int64_t d) { return d == 1 ? I(0) : index_op(Op::URem, a, d); }
NodeRef min(NodeRef a, NodeRef c) { return b::where(b::lt(a, c), a, c); }

// Flat index `flat` over `dims` (C order) as one index per dim.
std::vector<NodeRef> unflatten(NodeRef flat, const Shape& dims) {
  std::vector<NodeRef> idx(dims.size());
  NodeRef rest = flat;
  for (size_t d = dims.size(); d-- > 0;) {
    if (d == 0) {
      idx[0] = rest;
      break;
    }
    int64_t n = dims[d] == 0 ? 1 : dims[d];  // 0: the kernel never runs
    idx[d] = urem(rest, n);
    rest = udiv(rest, n);
  }
  return idx;
}

// A view's element offset and mask at index `idx` (one per view dim).
NodeRef offset_of(const View& v, const std::vector<NodeRef>& idx) {
  NodeRef off = I(v.offset);
  for (size_t d = 0; d < v.shape.size(); ++d)
    if (v.strides[d] != 0) off = add(off, mul(idx.at(d), v.strides[d]));
  return off;
}
NodeRef valid_of(const View& v, const std::vector<NodeRef>& idx) {
  NodeRef ok = b::ci(DType::Bool, 1);
  for (size_t d = 0; d < v.mask.size(); ++d) {
    auto [lo, hi] = v.mask[d];
    if (lo <= 0 && hi >= v.shape[d]) continue;
    NodeRef in = b::band(b::le(I(lo), idx.at(d)), b::lt(idx.at(d), I(hi)));
    ok = ok->op == Op::Const ? in : b::band(ok, in);
  }
  return ok;
}
NodeRef zero(DType t) { return is_float(t) ? b::cf(t, 0) : b::ci(t, 0); }
NodeRef load_at(int param, DType t, NodeRef index) {
  return make(Op::LoadAt, t, {}, {index}, int64_t{param});
}

class Lowerer {
 public:
  Lowerer(const KernelSpec& k, const Plan& p) : k_(k), p_(p), rb_(k.rbody), rop_(k.reduce_op) {
    out_.vars = {{"lo", DType::Int64}, {"hi", DType::Int64}};
    size_t n = k.slots.empty() ? 1 : k.slots.size();
    out_.params.assign(n, {DType::Float32, false});
    out_.params[0] = {k.out_dtype, true};
    if (k.contract) {
      out_.params.at(static_cast<size_t>(k.contract->a_param)).dtype = k.contract->a_dtype;
      out_.params.at(static_cast<size_t>(k.contract->b_param)).dtype = k.contract->b_dtype;
    }
    if (k.library) out_.params.at(1).dtype = k.library->in_dtype;
    for (NodeRef root : k.roots())
      for (NodeRef x : toposort({root})) {
        // Loads, and a Gather's reads (LoadAt, codegen/schedule.cpp), give their param's dtype.
        if (x->op != Op::Load && x->op != Op::LoadAt) continue;
        size_t q = static_cast<size_t>(x->op == Op::Load ? arg_load(x).param : arg_int(x));
        if (q >= out_.params.size()) out_.params.resize(q + 1, {DType::Float32, false});
        out_.params[q].dtype = x->dtype;
      }
  }

  lir::Kernel run() {
    // Plan parts that do not apply to this kernel's kind are ignored (codegen/plan.h).
    p_ = applicable(k_, p_);
    if (k_.contract) {
      p_.tiles ? tiled_contraction() : contraction();
    } else if (k_.library) {
      library();
    } else if (k_.row()) {
      rows();
    } else if (!k_.rbody) {
      p_.gpu ? elementwise_gpu() : elementwise_host();
    } else {
      reduction();
    }
    return std::move(out_);
  }

 private:
  // ---- variables and statements ----
  VarId var(const std::string& name, DType t = DType::Int64) {
    out_.vars.push_back({name + std::to_string(out_.vars.size()), t});
    return static_cast<VarId>(out_.vars.size() - 1);
  }
  NodeRef V(VarId v) const { return make(Op::Var, out_.vars[v].dtype, {}, {}, int64_t{v}); }
  void emit(Stmt s) { cur_->push_back(std::move(s)); }
  template <class F>
  void loop(VarId v, NodeRef lo, NodeRef hi, Loop kind, F&& body, int64_t step = 1,
            int unroll = 0) {
    Stmt s{Stmt::Kind::For};
    s.var = v, s.a = lo, s.b = hi, s.loop = kind, s.step = step, s.unroll = unroll;
    Block* saved = cur_;
    cur_ = &s.body;
    body();
    cur_ = saved;
    emit(std::move(s));
  }
  template <class F>
  void when(NodeRef cond, F&& body) {
    Stmt s{Stmt::Kind::If};
    s.a = cond;
    Block* saved = cur_;
    cur_ = &s.body;
    body();
    cur_ = saved;
    emit(std::move(s));
  }
  NodeRef let(const std::string& name, NodeRef value) {
    VarId v = var(name, value->dtype);
    Stmt s{Stmt::Kind::Let};
    s.var = v, s.a = value, s.dtype = value->dtype;
    emit(std::move(s));
    return V(v);
  }
  VarId reg(const std::string& name, DType t, int64_t count, NodeRef init) {
    VarId v = var(name, t);
    Stmt s{Stmt::Kind::Reg};
    s.var = v, s.dtype = t, s.count = count, s.a = init;
    emit(std::move(s));
    return v;
  }
  NodeRef at(VarId r, NodeRef slot) const {
    return make(Op::RegAt, out_.vars[r].dtype, {}, {slot}, int64_t{r});
  }
  void set(VarId r, NodeRef slot, NodeRef value) {
    Stmt s{Stmt::Kind::Set};
    s.var = r, s.b = slot, s.a = value;
    emit(std::move(s));
  }
  void store(int param, NodeRef index, NodeRef value) {
    Stmt s{Stmt::Kind::Store};
    s.param = param, s.b = index, s.a = value;
    emit(std::move(s));
  }
  // Work items [0, n): the host entry's range [lo, hi), or a GPU grid-stride loop.
  template <class F>
  void items(int64_t n, F&& body) {
    VarId w = var("w");
    if (p_.gpu)
      loop(w, I(0), I(n), Loop::Grid, [&] { body(V(w)); });
    else
      loop(w, V(lir::kLo), V(lir::kHi), Loop::Serial, [&] { body(V(w)); });
  }
  template <class F>
  void entry(const std::string& suffix, int64_t n, int64_t threads, F&& body) {
    lir::Entry e;
    e.suffix = suffix, e.items = n, e.threads = threads;
    cur_ = &e.body;
    body();
    cur_ = nullptr;
    out_.entries.push_back(std::move(e));
  }

  // A block-shared array and a block barrier (GPU entries with a fixed block size).
  VarId shared(const std::string& name, DType t, int64_t count) {
    VarId v = var(name, t);
    Stmt s{Stmt::Kind::Shared};
    s.var = v, s.dtype = t, s.count = count;
    emit(std::move(s));
    return v;
  }
  void barrier() { emit(Stmt{Stmt::Kind::Barrier}); }

  // ---- scalar expressions ----
  // `root` with its kernel leaves at index `idx`: loads read their param at the view's offset
  // (a masked-off element reads nothing and gives 0), Acc leaves become `accs`, and the nodes
  // of `loaded` their values there. Legalised.
  NodeRef at_index(NodeRef root, const std::vector<NodeRef>& idx,
                   const std::vector<NodeRef>& accs = {},
                   const std::map<NodeRef, NodeRef>& loaded = {}) {
    NodeRef r = rewrite(root, [&](NodeRef n, const std::vector<NodeRef>&) -> NodeRef {
      if (auto it = loaded.find(n); it != loaded.end()) return it->second;
      switch (n->op) {
        case Op::Load: {
          const auto& la = arg_load(n);
          NodeRef ok = valid_of(la.view, idx), off = offset_of(la.view, idx);
          if (ok->op == Op::Const) return load_at(la.param, n->dtype, off);
          return b::where(ok, load_at(la.param, n->dtype, b::where(ok, off, I(0))), zero(n->dtype));
        }
        case Op::Valid:
          return valid_of(arg_view(n), idx);
        case Op::Index:
          return offset_of(arg_view(n), idx);
        case Op::Acc:
          return accs.at(std::holds_alternative<int64_t>(n->arg) ? arg_int(n) : 0);
        default:
          return nullptr;
      }
    });
    return legalize(r);
  }

  // The reduction being lowered: the kernel's rbody, or a row kernel's current stage.
  DType acc_type() const { return rb_->dtype; }
  // The reduction's binary op; 16-bit accumulators combine at float32, rounded once.
  NodeRef combine(NodeRef a, NodeRef c) const {
    DType t = acc_type();
    Op op = rop_ == Op::ReduceSum    ? Op::Add
            : rop_ == Op::ReduceProd ? Op::Mul
            : rop_ == Op::ReduceMax  ? Op::Max
                                     : Op::Min;
    if (is_half(t))
      return legalize(b::cast(
          make(op, DType::Float32, {}, {b::cast(a, DType::Float32), b::cast(c, DType::Float32)}),
          t));
    return legalize(make(op, t, {}, {a, c}));
  }
  NodeRef identity() const {
    Value v = reduce_identity(rop_, acc_type());
    return is_float(v.dtype) ? b::cf(v.dtype, v.f) : b::ci(v.dtype, v.i);
  }
  // The fixed tree over a block's 8 lanes: ((0,4),(2,6)),((1,5),(3,7)).
  NodeRef tree(const std::vector<NodeRef>& lane) const {
    static_assert(kReduceLanes == 8, "the tree is written for 8 lanes");
    NodeRef q[4];
    for (int l = 0; l < 4; ++l) q[l] = combine(lane[l], lane[l + 4]);
    return combine(combine(q[0], q[2]), combine(q[1], q[3]));
  }
  // rbody at output index `idx` (its last index moved by w) and flat reduce index r.
  NodeRef rbody_at(std::vector<NodeRef> idx, NodeRef w, NodeRef r) {
    idx.back() = add(idx.back(), w);
    for (NodeRef d : unflatten(r, k_.rshape)) idx.push_back(d);
    return at_index(rb_, idx, accs_);
  }
  NodeRef rbody_at(std::vector<NodeRef> idx, int w, NodeRef r) {
    if (w) idx.back() = add(idx.back(), I(w));
    for (NodeRef d : unflatten(r, k_.rshape)) idx.push_back(d);
    return at_index(rb_, idx, accs_);
  }

  // The lanes of one block [rlo, rhi) of the reduction for W adjacent outputs (W = plan.group,
  // else 1), in the documented order: lane l of output w (slot l * W + w) combines rlo + l,
  // rlo + l + 8, ... from the identity. With W > 1 each lane's W outputs step as one loop over
  // w (a vector loop when the plan's lanes are vector: the W outputs' loads are adjacent along
  // the output's last axis, so they form one vector load and one vector op per lane and step,
  // and the slots stay at constant offsets plus w, which keeps the array in registers).
  VarId accumulate_block(const std::vector<NodeRef>& idx, NodeRef rlo, NodeRef rhi, int W) {
    const int L = kReduceLanes;
    VarId acc = reg("acc", acc_type(), int64_t{L} * W, identity());
    // w: the output's offset along the last axis (null: W == 1, the output itself).
    auto update = [&](NodeRef slot, NodeRef w, NodeRef r) {
      if (kept_ && !w) {  // a row kernel's last stage also stores the kept value (rows())
        std::vector<NodeRef> full = idx;
        for (NodeRef d : unflatten(r, k_.rshape)) full.push_back(d);
        NodeRef v = let("kept", at_index(kept_, full, accs_));
        store(0, add(kept_base_, r), v);
        set(acc, slot, combine(at(acc, slot), at_index(rb_, full, accs_, {{kept_, v}})));
        return;
      }
      set(acc, slot, combine(at(acc, slot), w ? rbody_at(idx, w, r) : rbody_at(idx, 0, r)));
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
  // Output w's result of accumulate_block's lanes: the fixed tree.
  NodeRef block_result(VarId acc, NodeRef w, int W) {
    std::vector<NodeRef> lane;
    for (int l = 0; l < kReduceLanes; ++l)
      lane.push_back(at(acc, W == 1 ? I(l) : add(I(int64_t{l} * W), w)));
    return tree(lane);
  }
  // One block [rlo, rhi) of the reduction for one output: its lanes, then the fixed tree.
  NodeRef reduce_block(const std::vector<NodeRef>& idx, NodeRef rlo, NodeRef rhi) {
    VarId acc = accumulate_block(idx, rlo, rhi, 1);
    return let("red", block_result(acc, I(0), 1));
  }

  // GPU: lane l (of the 8 threads of this group) of the block [rlo, rhi); then the fixed tree as
  // exchanges. After the step with offset 4, lane l < 4 holds q_l = p_l (+) p_(l+4); after 2,
  // lane l < 2 holds s_l = q_l (+) q_(l+2); after 1, lane 0 holds s_0 (+) s_1 (the other lanes
  // compute values nobody reads). With `broadcast` (a row kernel's stage, rows()), every lane
  // then gets lane 0's result (ShuffleIdx): the same bits in the 8 threads. Lane l's elements
  // are rlo + l, rlo + l + 8, ... in increasing order, the last R % 8 included (element 8 j + t
  // is lane t's), exactly those of reduce_block's lane l.
  NodeRef reduce_lane(const std::vector<NodeRef>& idx, NodeRef rlo, NodeRef rhi, NodeRef l,
                      bool broadcast = false) {
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
    if (broadcast)
      return let("red", make(Op::ShuffleIdx, acc_type(), {}, {at(a, I(0))}, int64_t{0}));
    return let("red", at(a, I(0)));
  }

  // ---- kernels ----
  // A last axis this short or shorter (2 classes, 3 coordinates) is unrolled on the host.
  static constexpr int64_t kShortLastAxis = 8;

  // Trailing axes of length 1 ([400, 1]: a value per row) add nothing to the host's loops: rows
  // are taken over the axes before them, so the long loop is the one LLVM vectorises (a [400, 1]
  // log ran as 400 one-iteration inner loops, scalar). Returns that shape (at least one axis
  // when the kernel has any); full_index pads an index of it with the dropped axes' zeros.
  Shape loop_shape() const {
    Shape s = k_.shape;
    while (s.size() > 1 && s.back() == 1) s.pop_back();
    return s;
  }
  std::vector<NodeRef> full_index(std::vector<NodeRef> idx) const {
    while (idx.size() < k_.shape.size()) idx.push_back(I(0));
    return idx;
  }

  void elementwise_host() {
    const Shape s = loop_shape();
    const int64_t last = s.empty() ? 1 : s.back();
    if (s.size() >= 2 && last >= 2 && last <= kShortLastAxis) return short_rows_host();
    entry("", numel(s), numel(s), [&] {
      if (last == 0) return;
      // Rows of the range [lo, hi): the inner loop runs along the last axis.
      VarId row = var("row");
      NodeRef lo = V(lir::kLo), hi = V(lir::kHi);
      loop(row, udiv(lo, last), udiv(add(hi, I(last - 1)), last), Loop::Serial, [&] {
        NodeRef base = let("base", mul(V(row), last));
        NodeRef ilo = b::where(b::lt(base, lo), b::sub(lo, base), I(0));
        NodeRef ihi = min(b::sub(hi, base), I(last));
        std::vector<NodeRef> idx =
            s.empty() ? std::vector<NodeRef>{} : unflatten(V(row), Shape(s.begin(), s.end() - 1));
        VarId i = var("i");
        if (!s.empty()) idx.push_back(V(i));
        loop(i, ilo, ihi, Loop::Serial,
             [&] { store(0, add(base, V(i)), at_index(k_.body, full_index(idx))); });
      });
    });
  }

  // Rows of a short last axis: the loop over rows is the long one, so it is the loop LLVM
  // vectorises; a row's outputs are unrolled (their loads along the row become interleaved
  // vector accesses) and each is computed unconditionally, stored only inside [lo, hi) (rows
  // at the range's ends are partial). Without this the inner loop ran 2 iterations, scalar: a
  // softmax cross-entropy gradient over [400, 2] took 21 us for 800 outputs.
  void short_rows_host() {
    const Shape s = loop_shape();
    const int64_t last = s.back();
    entry("", numel(s), numel(s), [&] {
      VarId row = var("row");
      NodeRef lo = V(lir::kLo), hi = V(lir::kHi);
      loop(row, udiv(lo, last), udiv(add(hi, I(last - 1)), last), Loop::Serial, [&] {
        NodeRef base = let("base", mul(V(row), last));
        std::vector<NodeRef> idx = unflatten(V(row), Shape(s.begin(), s.end() - 1));
        VarId i = var("i");
        idx.push_back(V(i));
        loop(i, I(0), I(last), Loop::Unrolled, [&] {
          NodeRef at = add(base, V(i));
          NodeRef value = let("out", at_index(k_.body, full_index(idx)));
          when(b::band(b::le(lo, at), b::lt(at, hi)), [&] { store(0, at, value); });
        });
      });
    });
  }

  void elementwise_gpu() {
    const int64_t n = numel(k_.shape);
    auto scalar = [&](NodeRef lo) {
      VarId w = var("w");
      loop(w, lo, I(n), Loop::Grid,
           [&] { store(0, V(w), at_index(k_.body, unflatten(V(w), k_.shape))); });
    };
    entry("", n, p_.vector4 ? (n + 3) / 4 : n, [&] { scalar(I(0)); });
    if (!p_.vector4) return;
    // 4 outputs per thread: each load at the output's own index as one vector of 4 (its
    // elements, in order, are those of outputs 4w .. 4w+3), the body 4 times, one vector store;
    // then the last n % 4 outputs one by one.
    lir::Entry& e = out_.entries.back();
    cur_ = &e.aligned_body;
    VarId w = var("w");
    loop(w, I(0), I(n / 4), Loop::Grid, [&] {
      NodeRef base = mul(V(w), 4);
      std::map<std::pair<int, int64_t>, VarId> vectors;
      std::map<NodeRef, NodeRef> lanes[4];
      for (NodeRef x : toposort({k_.body})) {
        if (x->op != Op::Load) continue;
        const auto& la = arg_load(x);
        bool flat = false;
        for (int64_t st : la.view.strides) flat |= st != 0;
        if (!flat) continue;
        auto key = std::make_pair(la.param, la.view.offset);
        auto it = vectors.find(key);
        if (it == vectors.end()) {
          VarId v = var("v", x->dtype);
          Stmt s{Stmt::Kind::VLoad};
          s.var = v, s.param = la.param, s.count = 4, s.dtype = x->dtype;
          s.b = add(I(la.view.offset), base);
          emit(std::move(s));
          it = vectors.emplace(key, v).first;
        }
        for (int c = 0; c < 4; ++c) lanes[c][x] = at(it->second, I(c));
      }
      Stmt st{Stmt::Kind::VStore};
      st.param = 0, st.b = base, st.count = 4, st.dtype = k_.out_dtype;
      for (int c = 0; c < 4; ++c) st.values.push_back(at_index(k_.body, {}, {}, lanes[c]));
      emit(std::move(st));
    });
    scalar(I(n / 4 * 4));
    cur_ = nullptr;
  }

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
  static constexpr int kRowsTogether = 2;
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
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      rb_ = k_.stages[s].rbody, rop_ = k_.stages[s].reduce_op;
      const NodeRef keep = s + 1 == k_.stages.size() ? kept : nullptr;
      VarId acc = reg("acc", acc_type(), int64_t{L} * G, identity());
      // Element r of row g into slot g * L + lane.
      auto update = [&](int g, NodeRef lane, NodeRef r) {
        NodeRef slot = add(I(int64_t{g} * L), lane);
        std::vector<NodeRef> full = at_row(g, r);
        std::map<NodeRef, NodeRef> reads;
        if (keep) {
          NodeRef v = let("kept", at_index(keep, full, accs[g]));
          store(0, add(base[g], r), v);
          reads[keep] = v;
        }
        set(acc, slot, combine(at(acc, slot), at_index(rb_, full, accs[g], reads)));
      };
      VarId j = var("j");
      loop(j, I(0), I(R / L), Loop::Serial, [&] {
        VarId l = var("l");
        loop(l, I(0), I(L), p_.vector_lanes ? Loop::Vector : Loop::Unrolled, [&] {
          for (int g = 0; g < G; ++g) update(g, V(l), add(mul(V(j), L), V(l)));
        });
      });
      for (int64_t t = 0; t < R % L; ++t)
        for (int g = 0; g < G; ++g) update(g, I(t), I(R / L * L + t));
      for (int g = 0; g < G; ++g) {
        std::vector<NodeRef> lane;
        for (int q = 0; q < L; ++q) lane.push_back(at(acc, I(int64_t{g} * L + q)));
        accs[g].push_back(let("red", tree(lane)));
      }
    }
    for (int g = 0; g < G; ++g) {
      if (!k_.row_out) {
        store(0, os[g], at_index(k_.body, idx[g], accs[g]));
        continue;
      }
      VarId r = var("r");
      loop(r, I(0), I(R), Loop::Serial, [&] {
        std::map<NodeRef, NodeRef> reads;
        if (kept) reads[kept] = load_at(0, k_.out_dtype, add(base[g], V(r)));
        store(0, add(base[g], V(r)), at_index(k_.body, at_row(g, V(r)), accs[g], reads));
      });
    }
  }

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
          VarId acc = reg("acc", acc_type(), int64_t{L} * G, identity());
          VarId j = var("j");
          loop(j, I(0), I(kReduceBlock / L), Loop::Serial, [&] {
            NodeRef base = add(rlo, mul(V(j), L));
            VarId l = var("l");
            loop(l, I(0), I(L), p_.vector_lanes ? Loop::Vector : Loop::Unrolled, [&] {
              for (int g = 0; g < G; ++g) {
                NodeRef slot = add(I(int64_t{g} * L), V(l));
                NodeRef r = add(base, add(I(int64_t{g} * kReduceBlock), V(l)));
                set(acc, slot, combine(at(acc, slot), rbody_at(idx, 0, r)));
              }
            });
          });
          for (int g = 0; g < G; ++g) {
            std::vector<NodeRef> lane;
            for (int q = 0; q < L; ++q) lane.push_back(at(acc, I(int64_t{g} * L + q)));
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
            VarId acc = accumulate_block(idx, I(0), I(R), W);
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

  // An operand element read as dtype `from` (a float16 / bfloat16 operand's 16 bits) at the
  // product's dtype t: exactly (docs/numerics.md: 16-bit products compute at float32).
  static NodeRef widen(NodeRef x, DType t) { return x->dtype == t ? x : legalize(b::cast(x, t)); }
  // x rounded to the tensor-core plan's input precision, as float32 (tf32: to nearest, ties
  // away from zero, as cvt.rna.tf32.f32: the 13 low mantissa bits cleared after adding half
  // their range to the magnitude; a NaN stays NaN) or as bfloat16 (to nearest even, the
  // dtype's cast).
  static NodeRef round_for_mma(NodeRef x, MatmulPrecision p) {
    if (p == MatmulPrecision::BF16) return legalize(b::cast(x, DType::BFloat16));
    NodeRef bits = b::bitcast(x, DType::Int32);
    NodeRef r = b::band(b::add(bits, b::ci(DType::Int32, 0x1000)),
                        b::ci(DType::Int32, static_cast<int32_t>(0xffffe000u)));
    return legalize(b::where(b::ne(x, x), x, b::bitcast(r, DType::Float32)));
  }

  // GPU matrix product: one thread per output, the fma chain over k in increasing order from +0,
  // then the fused epilogue (body, at the output's index) when there is one.
  void contraction() {
    const View& a = k_.contract->a;
    const View& bv = k_.contract->b;
    const size_t nd = a.shape.size();
    const int64_t n = numel(k_.shape), K = a.shape[nd - 1];
    const DType t = k_.contract->dtype;
    const DType ta = k_.contract->a_dtype, tb = k_.contract->b_dtype;
    entry("", n, n, [&] {
      items(n, [&](NodeRef w) {
        NodeRef rest = w;
        NodeRef j = urem(rest, bv.shape[nd - 1]);
        rest = udiv(rest, bv.shape[nd - 1]);
        NodeRef i = urem(rest, a.shape[nd - 2]);
        rest = udiv(rest, a.shape[nd - 2]);
        NodeRef ao = add(I(a.offset), mul(i, a.strides[nd - 2]));
        NodeRef bo = add(I(bv.offset), mul(j, bv.strides[nd - 1]));
        for (size_t d = nd - 2; d-- > 0;) {
          NodeRef q = urem(rest, a.shape[d]);
          rest = udiv(rest, a.shape[d]);
          ao = add(ao, mul(q, a.strides[d]));
          bo = add(bo, mul(q, bv.strides[d]));
        }
        ao = let("ao", ao);
        bo = let("bo", bo);
        VarId acc = reg("acc", t, 1, b::cf(t, 0));
        VarId p = var("p");
        loop(p, I(0), I(K), Loop::Serial, [&] {
          NodeRef x =
              widen(load_at(k_.contract->a_param, ta, add(ao, mul(V(p), a.strides[nd - 1]))), t);
          NodeRef y =
              widen(load_at(k_.contract->b_param, tb, add(bo, mul(V(p), bv.strides[nd - 2]))), t);
          set(acc, I(0), make(Op::Fma, t, {}, {x, y, at(acc, I(0))}));
        });
        NodeRef prod = let("prod", at(acc, I(0)));
        bool epilogue = k_.body && k_.body->op != Op::Acc;
        store(0, w, epilogue ? at_index(k_.body, unflatten(w, k_.shape), {prod}) : prod);
      });
    });
  }

  // The tensor-core steps of one staged slice (plan part mma, tiled_contraction): this warp's
  // 2 x 8 fragments of 16 x 8 outputs (accumulators (i * 8 + j) * 4 .. + 4), each slice of bk
  // as bk / 8 m16n8k8 tf32 steps or bk / 16 m16n8k16 bf16 steps in increasing k. Fragment
  // values are read from the staged slice (k-major, padded rows: as[k * (bm + 8) + row],
  // bs[k * (bn + 8) + column]) at the places lir::Stmt::Mma's layout names for this lane.
  static constexpr int64_t kMmaPad = 8;  // elements after each row of a staged slice
  void mma_fragments(VarId acc, VarId as, VarId bs, NodeRef cur_a, NodeRef cur_b, NodeRef wm,
                     NodeRef wn, NodeRef fg, NodeRef fq) {
    const GemmTile g = kGemmTile;
    static_assert(kGemmTile.bm == 4 * 32 && kGemmTile.bn == 2 * 64 && kGemmTile.threads == 256 &&
                      kGemmTile.bk % 16 == 0,
                  "8 warps of 32 x 64 outputs, whole k steps per slice");
    const bool bf16 = p_.mma == MatmulPrecision::BF16;
    const int ks = bf16 ? 16 : 8, na = bf16 ? 8 : 4, nb = bf16 ? 4 : 2;
    for (int k0 = 0; k0 < g.bk; k0 += ks) {
      // (row, k) of a_v and (k, column) of b_v, relative to the fragment's first row, column
      // and this step's first k.
      auto a_at = [&](int v) -> std::pair<int, int> {
        if (!bf16) return {8 * (v & 1), 4 * (v >> 1)};
        return {8 * ((v >> 1) & 1), (v & 1) + 8 * (v >> 2)};
      };
      auto b_at = [&](int v) { return bf16 ? (v & 1) + 8 * (v >> 1) : 4 * v; };
      NodeRef qk = bf16 ? mul(fq, 2) : fq;  // the lane's first k in the step
      std::vector<std::vector<NodeRef>> af(2), bf(8);
      for (int i = 0; i < 2; ++i)
        for (int v = 0; v < na; ++v) {
          auto [dr, dk] = a_at(v);
          NodeRef row = add(wm, add(fg, I(16 * i + dr)));
          NodeRef k = add(qk, I(k0 + dk));
          af[i].push_back(let("fa", at(as, add(cur_a, add(mul(k, g.bm + kMmaPad), row)))));
        }
      for (int j = 0; j < 8; ++j)
        for (int v = 0; v < nb; ++v) {
          NodeRef col = add(wn, add(fg, I(8 * j)));
          NodeRef k = add(qk, I(k0 + b_at(v)));
          bf[j].push_back(let("fb", at(bs, add(cur_b, add(mul(k, g.bn + kMmaPad), col)))));
        }
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 8; ++j) {
          Stmt s{Stmt::Kind::Mma};
          s.var = acc, s.b = I((i * 8 + j) * 4), s.count = ks;
          s.dtype = bf16 ? DType::BFloat16 : DType::Float32;
          s.values = af[i];
          s.values.insert(s.values.end(), bf[j].begin(), bf[j].end());
          emit(std::move(s));
        }
    }
  }

  // GPU tiled float32 matrix product (plan part tiles, codegen/plan.h kGemmTile): block-stride
  // over the output tiles (batch, tile row, tile column); per tile, each thread owns the outputs
  // (m0 + ty + 16 i, n0 + tx + 16 j) and keeps their chains in registers while the block walks
  // k in slices of bk. The block stages each slice of A (bm x bk) and B (bk x bn) in shared
  // memory, consecutive threads reading consecutive addresses along whichever axis has stride 1,
  // elements outside the matrix staged as 0, double-buffered: slice s lives in buffer s % 2.
  // Slice 0 is staged, then a barrier; per slice s: the thread loads its elements of slice s + 1
  // from global memory into registers, runs kk over slice s's [0, min(bk, K - k0)) in increasing
  // order (acc = fma(a, b, acc)), writes the registers to the other buffer, and meets the block
  // at one barrier (so buffer (s + 1) % 2 is complete before anyone reads it, and nobody still
  // reads buffer s % 2 when slice s + 2 is written there). The loads of the next slice are in
  // flight during this slice's arithmetic; one barrier per slice instead of two. The kk loop
  // stops at K, so no chain sees a padded element, and each output is the fma chain over
  // k = 0, 1, ..., K - 1 from +0, as contraction() and the host compute it.
  // float16 / bfloat16 operands are staged as they are (half the bytes) and widened to float32
  // as each thread reads them from shared memory: the same chain.
  //
  // With plan part mma (the opt-in precision of nx::set_matmul_precision) the same staging
  // rounds each element to tf32 (kept as float32) or to bfloat16 (kept as such), and the 8 warps
  // of the block compute the tile on tensor cores instead: warp w owns rows 32 (w % 4) .. + 32
  // and columns 64 (w / 4) .. + 64 of the tile, as 2 x 8 fragments of 16 x 8 outputs (64
  // float32 accumulators per thread, mma_fragments()), and each slice runs 2 m16n8k8 (tf32) or
  // 1 m16n8k16 (bf16) steps per fragment, k in increasing order across steps; the padded k of
  // the last slice is staged as zeros and multiplied in (the order and rounding inside a step
  // are the hardware's: these bits are not the host's, which is that opt-in's contract).
  void tiled_contraction() {
    const GemmTile g = kGemmTile;
    static_assert(kGemmTile.bm / kGemmTile.tm == 16 && kGemmTile.bn / kGemmTile.tn == 16 &&
                      kGemmTile.threads == 256,
                  "the thread layout is 16 x 16 threads of tm x tn outputs");
    static_assert(kGemmTile.bm * kGemmTile.bk % kGemmTile.threads == 0 &&
                      kGemmTile.bn * kGemmTile.bk % kGemmTile.threads == 0,
                  "each thread stages whole elements of a slice");
    const View& a = k_.contract->a;
    const View& bv = k_.contract->b;
    const size_t nd = a.shape.size();
    const int64_t M = a.shape[nd - 2], N = bv.shape[nd - 1], K = a.shape[nd - 1];
    const Shape batch(a.shape.begin(), a.shape.end() - 2);
    const int64_t tiles_m = (M + g.bm - 1) / g.bm, tiles_n = (N + g.bn - 1) / g.bn;
    const int64_t tiles = numel(batch) * tiles_m * tiles_n;
    const int64_t sam = a.strides[nd - 2], sak = a.strides[nd - 1];
    const int64_t sbk = bv.strides[nd - 2], sbn = bv.strides[nd - 1];
    const DType t = k_.contract->dtype;
    const MatmulPrecision mma = p_.mma;
    // What the shared arrays hold: the operands' own dtypes, or the tensor-core inputs.
    const DType sa = mma == MatmulPrecision::Highest ? k_.contract->a_dtype
                     : mma == MatmulPrecision::BF16  ? DType::BFloat16
                                                     : DType::Float32;
    const DType sb = mma == MatmulPrecision::Highest ? k_.contract->b_dtype : sa;
    const bool full_slices = K % g.bk == 0;
    // Vector staging (the entry's aligned body, run when every param is 16-byte aligned): an
    // operand whose stride-1 axis is the one staged along (A's k, B's n), with that extent,
    // its offset and its other strides multiples of 4, loads 4 elements at a time; a vector is
    // then wholly inside or wholly outside the matrix.
    auto vectorisable = [&](const View& v, int64_t s_fast, int64_t s_other, int64_t extent) {
      bool ok = s_fast == 1 && extent % 4 == 0 && v.offset % 4 == 0 && s_other % 4 == 0;
      for (size_t d = 0; d + 2 < nd; ++d) ok = ok && v.strides[d] % 4 == 0;
      return ok;
    };
    const bool vec_a = vectorisable(a, sak, sam, K), vec_b = vectorisable(bv, sbn, sbk, N);
    lir::Entry entry_out;
    entry_out.items = tiles, entry_out.threads = tiles * g.threads, entry_out.block = g.threads;
    cur_ = &entry_out.head;
    // The tensor-core plan's slices have rows of bm + 8 (bn + 8) elements: the 8 lanes with
    // the same q of a fragment read 8 consecutive elements of one row, and the 4 values of q
    // rows apart then fall in distinct banks (a row of 128 put them all in one: 4-way conflicts).
    const int64_t pad = mma == MatmulPrecision::Highest ? 0 : kMmaPad;
    // Two buffers per operand (double buffering: slice s in buffer s % 2).
    VarId as = shared("as", sa, 2 * int64_t{g.bk} * (g.bm + pad)),
          bs = shared("bs", sb, 2 * int64_t{g.bk} * (g.bn + pad));
    // An operand element as staged: its own bits, or rounded for the tensor cores.
    auto staged = [&](NodeRef x) {
      return mma == MatmulPrecision::Highest ? x : round_for_mma(x, mma);
    };
    auto body = [&](bool va, bool vb) {
      VarId tile = var("tile");
      loop(tile, I(0), I(tiles), Loop::Blocks, [&] {
        NodeRef rest = V(tile);
        NodeRef tn = urem(rest, tiles_n);
        rest = udiv(rest, tiles_n);
        NodeRef tm = urem(rest, tiles_m);
        NodeRef bt = let("bt", udiv(rest, tiles_m));
        NodeRef m0 = let("m0", mul(tm, g.bm)), n0 = let("n0", mul(tn, g.bn));
        NodeRef ao = I(a.offset), bo = I(bv.offset);
        if (!batch.empty()) {
          auto q = unflatten(bt, batch);
          for (size_t d = 0; d < batch.size(); ++d)
            ao = add(ao, mul(q[d], a.strides[d])), bo = add(bo, mul(q[d], bv.strides[d]));
        }
        ao = let("ao", ao);
        bo = let("bo", bo);
        VarId th = var("th");
        loop(th, I(0), I(g.threads), Loop::Threads, [&] {
          NodeRef tl = V(th);
          NodeRef tx = let("tx", urem(tl, 16)), ty = let("ty", udiv(tl, 16));
          VarId acc = reg("acc", t, int64_t{g.tm} * g.tn, b::cf(t, 0));
          // The tensor-core plan's warp layout (see above).
          NodeRef wm = nullptr, wn = nullptr, fg = nullptr, fq = nullptr;
          if (mma != MatmulPrecision::Highest) {
            NodeRef lane = urem(tl, 32), warp = udiv(tl, 32);
            wm = let("wm", mul(urem(warp, 4), 32)), wn = let("wn", mul(udiv(warp, 4), 64));
            fg = let("fg", udiv(lane, 4)), fq = let("fq", urem(lane, 4));
          }
          // Stages a slice in two halves: fetch() reads this thread's elements of the slice
          // starting at k `kb` (width `kw`) from global memory into registers (`r`: A's or B's,
          // rounded for the tensor cores where the plan says so, 0 outside the matrix), put()
          // writes them to the shared buffer at `buf`. Element e of a slice is (row, kk) of A or
          // (kk, col) of B; the scalar path's unit u is element tl + 256 u, the vector path's 4
          // consecutive elements along the stride-1 axis.
          struct Operand {
            int param;
            VarId dst, r;
            int64_t width, s_wide, s_k;  // scalar path: strides along the tile axis and k
            bool vec, along_k;           // vector path: 4 elements along k (A) or the tile (B)
            int64_t s_other;             // vector path: the other axis's stride
            NodeRef base, first;
            int64_t extent;
            DType mt;
            bool async;  // plan part cp.async: vector units copied straight into shared memory
          };
          auto scalar_at = [&](const Operand& o, int u) -> std::pair<NodeRef, NodeRef> {
            const bool wide_fast = o.s_wide == 1 && o.s_k != 1;
            NodeRef e = add(tl, I(int64_t{u} * g.threads));
            return {wide_fast ? urem(e, o.width) : udiv(e, g.bk),
                    wide_fast ? udiv(e, o.width) : urem(e, g.bk)};
          };
          // The vector path's unit u: A's (row r, k 4q), B's (k r, column 4q), as (x, kk).
          auto vec_at = [&](const Operand& o, int u) -> std::pair<NodeRef, NodeRef> {
            const int64_t per_row = o.along_k ? g.bk / 4 : o.width / 4;
            NodeRef e = add(tl, I(int64_t{u} * g.threads));
            NodeRef q = urem(e, per_row), r = udiv(e, per_row);
            return o.along_k ? std::pair{r, mul(q, 4)} : std::pair{mul(q, 4), r};
          };
          auto units = [&](const Operand& o) {
            return o.width * g.bk / g.threads / (o.vec ? 4 : 1);
          };
          // `buf`: the buffer an asynchronous operand copies into (the others fill registers).
          auto fetch = [&](const Operand& o, NodeRef kb, NodeRef kw, NodeRef buf) {
            const DType st = out_.vars[o.dst].dtype;
            for (int u = 0; u < units(o); ++u) {
              if (!o.vec) {
                auto [x, kk] = scalar_at(o, u);
                NodeRef ok = b::band(b::lt(add(o.first, x), I(o.extent)), b::lt(kk, kw));
                NodeRef off =
                    add(o.base, add(mul(add(o.first, x), o.s_wide), mul(add(kb, kk), o.s_k)));
                NodeRef v = staged(load_at(o.param, o.mt, b::where(ok, off, I(0))));
                set(o.r, I(u), legalize(b::where(ok, v, zero(st))));
                continue;
              }
              auto [x, kk] = vec_at(o, u);
              NodeRef ok = b::band(b::lt(add(o.first, x), I(o.extent)), b::lt(kk, kw));
              NodeRef off = o.along_k
                                ? add(o.base, add(mul(add(o.first, x), o.s_other), add(kb, kk)))
                                : add(o.base, add(mul(add(kb, kk), o.s_other), add(o.first, x)));
              if (o.async) {
                // 4 elements along the operand's stride-1 axis, in place: B's (kk, x .. x + 3)
                // in its k-major slice, A's (x, kk .. kk + 3) in its m-major one.
                Stmt cp{Stmt::Kind::AsyncCopy};
                cp.var = o.dst;
                cp.a = o.along_k ? add(buf, add(mul(x, g.bk), kk))
                                 : add(buf, add(mul(kk, o.width + pad), x));
                cp.param = o.param, cp.b = legalize(b::where(ok, off, I(0)));
                cp.count = 4, cp.dtype = o.mt, cp.values = {ok};
                emit(std::move(cp));
                continue;
              }
              when(ok, [&] {
                VarId v = var("v", o.mt);
                Stmt ld{Stmt::Kind::VLoad};
                ld.var = v, ld.param = o.param, ld.count = 4, ld.dtype = o.mt, ld.b = off;
                emit(std::move(ld));
                for (int c = 0; c < 4; ++c) set(o.r, I(4 * u + c), staged(at(v, I(c))));
              });
              when(legalize(b::lnot(ok)), [&] {
                for (int c = 0; c < 4; ++c) set(o.r, I(4 * u + c), zero(st));
              });
            }
          };
          // An asynchronous operand's copies are already on their way (put_slice waits once
          // for all of them).
          auto put = [&](const Operand& o, NodeRef buf) {
            if (o.async) return;
            const int64_t row = o.width + pad;
            for (int u = 0; u < units(o); ++u) {
              if (!o.vec) {
                auto [x, kk] = scalar_at(o, u);
                set(o.dst, add(buf, add(mul(kk, row), x)), at(o.r, I(u)));
                continue;
              }
              auto [x, kk] = vec_at(o, u);
              for (int c = 0; c < 4; ++c) {
                NodeRef slot =
                    o.along_k ? add(mul(add(kk, I(c)), row), x) : add(mul(kk, row), add(x, I(c)));
                set(o.dst, add(buf, slot), at(o.r, I(4 * u + c)));
              }
            }
          };
          const DType ma = k_.contract->a_dtype, mb = k_.contract->b_dtype;
          const int64_t per_thread_a = int64_t{g.bm} * g.bk / g.threads,
                        per_thread_b = int64_t{g.bn} * g.bk / g.threads;
          // With cp.async, an operand's vector units (4 elements consecutive in memory) are
          // copied as they are (the SIMT plan stages its operands' own values): B's slice is
          // k-major as always, A's is then m-major (row x of the slice at x * bk), so that its 4
          // consecutive k land consecutively. A warp's A reads then touch 2 rows 16 elements
          // apart (distinct banks, each a broadcast), as the k-major layout's did.
          const bool async_b = vb && p_.async_copy && mma == MatmulPrecision::Highest;
          const bool async_a = va && p_.async_copy && mma == MatmulPrecision::Highest;
          const Operand oa{k_.contract->a_param,
                           as,
                           async_a ? VarId{-1} : reg("ra", sa, per_thread_a, zero(sa)),
                           g.bm,
                           sam,
                           sak,
                           va,
                           true,
                           sam,
                           ao,
                           m0,
                           M,
                           ma,
                           async_a};
          const Operand ob{k_.contract->b_param,
                           bs,
                           async_b ? VarId{-1} : reg("rb", sb, per_thread_b, zero(sb)),
                           g.bn,
                           sbn,
                           sbk,
                           vb,
                           false,
                           sbk,
                           bo,
                           n0,
                           N,
                           mb,
                           async_b};
          const int64_t size_a = int64_t{g.bk} * (g.bm + pad),
                        size_b = int64_t{g.bk} * (g.bn + pad);
          // Both operands' fetched slice into their buffers: the register-staged ones stored,
          // then one wait for every asynchronous copy this thread issued.
          auto put_slice = [&](NodeRef buf_a, NodeRef buf_b) {
            put(oa, buf_a), put(ob, buf_b);
            if (oa.async || ob.async) emit(Stmt{Stmt::Kind::AsyncWait});
          };
          // Slice 0 into buffer 0. (K = 0: no slice, nothing read.)
          if (K > 0) {
            NodeRef kw0 = I(std::min<int64_t>(g.bk, K));
            fetch(oa, I(0), kw0, I(0)), fetch(ob, I(0), kw0, I(0));
            put_slice(I(0), I(0));
            barrier();
          }
          VarId k0 = var("k0");
          loop(
              k0, I(0), I(K), Loop::Serial,
              [&] {
                // Slice s = k0 / bk is in buffer s % 2; slice s + 1 goes to the other.
                NodeRef odd = let("odd", urem(udiv(V(k0), g.bk), 2));
                NodeRef cur_a = let("cur_a", mul(odd, size_a)),
                        cur_b = let("cur_b", mul(odd, size_b));
                NodeRef kn = let("kn", add(V(k0), I(g.bk)));
                NodeRef more = b::lt(kn, I(K));
                // The next slice's global loads are issued before this slice's arithmetic, so
                // their latency is hidden behind it; its stores to shared memory follow it.
                when(more, [&] {
                  NodeRef kwn = full_slices ? I(g.bk) : let("kwn", min(I(g.bk), b::sub(I(K), kn)));
                  fetch(oa, kn, kwn, b::sub(I(size_a), cur_a));
                  fetch(ob, kn, kwn, b::sub(I(size_b), cur_b));
                });
                if (mma != MatmulPrecision::Highest) {
                  mma_fragments(acc, as, bs, cur_a, cur_b, wm, wn, fg, fq);
                } else {
                  NodeRef kw = full_slices ? I(g.bk) : let("kw", min(I(g.bk), b::sub(I(K), V(k0))));
                  VarId kk = var("kk");
                  loop(
                      kk, I(0), kw, Loop::Serial,
                      [&] {
                        std::vector<NodeRef> av, bw;
                        for (int i = 0; i < g.tm; ++i) {
                          NodeRef row = add(ty, I(16 * i));
                          NodeRef slot =
                              async_a ? add(mul(row, g.bk), V(kk)) : add(mul(V(kk), g.bm), row);
                          av.push_back(let("a", widen(at(as, add(cur_a, slot)), t)));
                        }
                        for (int j = 0; j < g.tn; ++j)
                          bw.push_back(let(
                              "b",
                              widen(at(bs, add(cur_b, add(mul(V(kk), g.bn), add(tx, I(16 * j))))),
                                    t)));
                        for (int i = 0; i < g.tm; ++i)
                          for (int j = 0; j < g.tn; ++j) {
                            NodeRef slot = I(int64_t{i} * g.tn + j);
                            set(acc, slot, make(Op::Fma, t, {}, {av[i], bw[j], at(acc, slot)}));
                          }
                      },
                      1, full_slices ? g.bk : 0);
                }
                when(more, [&] { put_slice(b::sub(I(size_a), cur_a), b::sub(I(size_b), cur_b)); });
                // Every thread has finished reading this slice's buffer (written next) and
                // written the next slice's (read next).
                barrier();
              },
              g.bk);
          const bool epilogue = k_.body && k_.body->op != Op::Acc;
          // Output (m, n) of the tile from accumulator `slot`.
          auto out = [&](NodeRef m, NodeRef n, int64_t slot) {
            when(b::band(b::lt(m, I(M)), b::lt(n, I(N))), [&] {
              NodeRef w = let("w", add(mul(bt, M * N), add(mul(m, N), n)));
              NodeRef prod = let("prod", at(acc, I(slot)));
              store(0, w, epilogue ? at_index(k_.body, unflatten(w, k_.shape), {prod}) : prod);
            });
          };
          if (mma != MatmulPrecision::Highest) {
            // Fragment (i, j)'s d_r: row g + 8 (r >> 1), column 2 q + (r & 1) (lir::Stmt::Mma).
            for (int i = 0; i < 2; ++i)
              for (int j = 0; j < 8; ++j)
                for (int r = 0; r < 4; ++r)
                  out(add(m0, add(wm, add(fg, I(16 * i + 8 * (r >> 1))))),
                      add(n0, add(wn, add(mul(fq, 2), I(8 * j + (r & 1))))), (i * 8 + j) * 4 + r);
            return;
          }
          for (int i = 0; i < g.tm; ++i)
            for (int j = 0; j < g.tn; ++j)
              out(add(m0, add(ty, I(16 * i))), add(n0, add(tx, I(16 * j))), int64_t{i} * g.tn + j);
        });
      });
    };
    cur_ = &entry_out.body;
    body(false, false);
    if (vec_a || vec_b) {
      cur_ = &entry_out.aligned_body;
      body(vec_a, vec_b);
    }
    cur_ = nullptr;
    out_.entries.push_back(std::move(entry_out));
  }

  // The sort order of dtype t as a signed int64 key: integers as themselves; floats (16-bit ones
  // through float32, exactly) as +-magnitude with both zeros on 0 and every NaN above +inf.
  NodeRef sort_key(NodeRef v) const {
    DType t = v->dtype;
    // uint64 (ints, issue 18): its bits with the top one flipped order like its values.
    if (t == DType::UInt64)
      return legalize(b::bxor(b::cast(v, DType::Int64), b::ci(DType::Int64, INT64_MIN)));
    if (!is_float(t)) return legalize(b::cast(v, DType::Int64));
    if (is_half(t)) v = legalize(b::cast(v, DType::Float32)), t = DType::Float32;
    const bool f64 = t == DType::Float64;
    DType it = f64 ? DType::Int64 : DType::Int32;
    NodeRef bits = b::bitcast(v, it);
    NodeRef mag = b::band(bits, b::ci(it, f64 ? INT64_MAX : INT32_MAX));
    NodeRef m64 = f64 ? mag : b::cast(mag, DType::Int64);
    int64_t inf = f64 ? 0x7ff0000000000000ll : 0x7f800000ll;
    NodeRef key = b::where(b::lt(bits, b::ci(it, 0)), b::sub(I(0), m64), m64);
    return legalize(b::where(b::lt(I(inf), m64), I(INT64_MAX), key));
  }

  // GPU library kernels (the host runs codegen/cpu/sort_scan.cpp) over rows of L contiguous
  // elements of param 1 from the operand's offset.
  //   Cumsum: one thread per row, acc = x[0], then acc = acc + x[i] in increasing i.
  //   Sort / Argsort: a stable rank sort, one thread per element: its rank is the number of
  //   elements before it with key <= its key plus those after it with key < its key. A stable
  //   sort's result is unique, so the bits match the host's.
  void library() {
    const LibraryCall& lib = *k_.library;
    const int64_t L = k_.shape.empty() ? 1 : k_.shape.back(), n = numel(k_.shape);
    const int64_t rows = L == 0 ? 0 : n / L;
    const DType in = lib.in_dtype;
    if (lib.op == Op::Cumsum) {
      entry("", rows, rows, [&] {
        items(rows, [&](NodeRef w) {
          NodeRef x0 = let("x0", add(I(lib.offset), mul(w, L)));
          NodeRef y0 = let("y0", mul(w, L));
          VarId acc = reg("acc", in, 1, load_at(1, in, x0));
          store(0, y0, at(acc, I(0)));
          VarId i = var("i");
          loop(i, I(1), I(L), Loop::Serial, [&] {
            set(acc, I(0), legalize(b::add(at(acc, I(0)), load_at(1, in, add(x0, V(i))))));
            store(0, add(y0, V(i)), at(acc, I(0)));
          });
        });
      });
      return;
    }
    entry("", n, n, [&] {
      items(n, [&](NodeRef w) {
        NodeRef r = udiv(w, L), i = urem(w, L);
        NodeRef row = let("row", add(I(lib.offset), mul(r, L)));
        NodeRef ki = let("key", sort_key(load_at(1, in, add(row, i))));
        VarId rank = reg("rank", DType::Int64, 1, I(0));
        VarId j = var("j");
        loop(j, I(0), I(L), Loop::Serial, [&] {
          NodeRef kj = sort_key(load_at(1, in, add(row, V(j))));
          NodeRef before = b::where(b::lt(V(j), i), b::le(kj, ki), b::lt(kj, ki));
          set(rank, I(0), b::add(at(rank, I(0)), b::cast(before, DType::Int64)));
        });
        NodeRef value = lib.op == Op::Argsort ? i : load_at(1, in, add(row, i));
        store(0, add(mul(r, L), at(rank, I(0))), legalize(value));
      });
    });
  }

  const KernelSpec& k_;
  Plan p_;
  lir::Kernel out_;
  Block* cur_ = nullptr;
  // The reduction the helpers above lower (accumulate_block, tree, reduce_lane): its body,
  // operation, and the values of its Acc leaves (a row kernel's earlier stages).
  NodeRef rb_;
  Op rop_;
  std::vector<NodeRef> accs_;
  // rows(): the value the stage being lowered also stores at kept_base_ + its row index.
  NodeRef kept_ = nullptr, kept_base_ = nullptr;
};

}  // namespace

void debug_print_lowered(const KernelSpec& k, const Plan& plan, const lir::Kernel& lowered,
                         const std::string& target) {
  if (debug_level() < 3) return;
  std::string kind = k.contract  ? "contraction"
                     : k.library ? std::string(op_name(k.library->op))
                     : k.rbody   ? std::string(op_name(k.reduce_op))
                     : k.row()   ? "row"
                                 : "elementwise";
  std::string shape;
  for (int64_t d : k.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  std::fprintf(stderr, "rune: plan: %s for %s [%s] on %s\n", plan.str().c_str(), kind.c_str(),
               shape.c_str(), target.c_str());
  if (debug_level() >= 4) std::fprintf(stderr, "%s", lir::to_string(lowered).c_str());
}

lir::Kernel lower(const KernelSpec& k, const Plan& plan) {
  if (std::string why = validate(k, plan); !why.empty())
    throw std::logic_error("lower: plan \"" + plan.str() + "\" is not valid here: " + why);
  if (!k.body && !k.contract && !k.library) throw std::logic_error("lower: kernel has no body");
  if (k.row() && (k.rbody || k.blocks() > 1))
    throw std::logic_error("lower: a row kernel has stages only, of one reduction block");
  return Lowerer(k, plan).run();
}

}  // namespace codegen
