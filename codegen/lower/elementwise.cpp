// Elementwise kernels (no reduction): on the host, rows of the entry's range [lo, hi) with the
// inner loop along the last axis (or, for a short last axis, the rows' loop inside and the row
// unrolled); on a GPU, one grid-stride item per output, or 4 per thread with vector loads and
// stores when the plan says vector4.
#include "codegen/lower/builder.h"
#include "codegen/lower/passes.h"

namespace codegen::lowering {

namespace {

class Elementwise : public Builder {
 public:
  using Builder::Builder;
  void run() { p_.gpu ? gpu() : host(); }

 private:
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

  void host() {
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

  void gpu() {
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
    loop(w, I(0), I(n / 4), Loop::Grid, [&] { vector4_item(V(w)); });
    scalar(I(n / 4 * 4));
    cur_ = nullptr;
  }

  // GPU item w of the vector4 body: outputs 4w .. 4w+3.
  void vector4_item(NodeRef w) {
    NodeRef base = mul(w, 4);
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
  }
};

}  // namespace

lir::Kernel lower_elementwise(const KernelSpec& k, const Plan& p) {
  Elementwise pass(k, p);
  pass.run();
  return pass.take();
}

}  // namespace codegen::lowering
