// Matrix products, one thread per output (the GPU's plan without tiles).
#include "codegen/lower/builder.h"
#include "codegen/lower/passes.h"

namespace codegen::lowering {

namespace {

class PerOutputContraction : public Builder {
 public:
  using Builder::Builder;
  void run() { contraction(); }

 private:
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
};

}  // namespace

lir::Kernel lower_contraction(const KernelSpec& k, const Plan& p) {
  PerOutputContraction pass(k, p);
  pass.run();
  return pass.take();
}

}  // namespace codegen::lowering
