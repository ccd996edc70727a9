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
    const Contraction& c = *k_.contract;
    const View& a = c.a;
    const View& bv = c.b;
    const Shape as = c.a_shape(), bs = c.b_shape();
    const size_t nd = as.size();
    const int64_t n = numel(k_.shape), K = as[nd - 1];
    // Batch axes are one view axis each, first; M, K and N may be grouped.
    const int d2 = static_cast<int>(nd) - 2, d1 = static_cast<int>(nd) - 1;
    const AxisDims am = operand_axis(c, true, d2), ak = operand_axis(c, true, d1);
    const AxisDims bk = operand_axis(c, false, d2), bn = operand_axis(c, false, d1);
    const DType t = k_.contract->dtype;
    const DType ta = k_.contract->a_dtype, tb = k_.contract->b_dtype;
    entry("", n, n, [&] {
      items(n, [&](NodeRef w) {
        NodeRef rest = w;
        NodeRef j = urem(rest, bs[nd - 1]);
        rest = udiv(rest, bs[nd - 1]);
        NodeRef i = urem(rest, as[nd - 2]);
        rest = udiv(rest, as[nd - 2]);
        NodeRef ao = add(I(a.offset), offset_along(i, am));
        NodeRef bo = add(I(bv.offset), offset_along(j, bn));
        for (size_t d = nd - 2; d-- > 0;) {
          NodeRef q = urem(rest, as[d]);
          rest = udiv(rest, as[d]);
          ao = add(ao, mul(q, a.strides[d]));
          bo = add(bo, mul(q, bv.strides[d]));
        }
        ao = let("ao", ao);
        bo = let("bo", bo);
        VarId acc = reg("acc", t, 1, b::cf(t, 0));
        VarId p = var("p");
        loop(p, I(0), I(K), Loop::Serial, [&] {
          NodeRef x = widen(load_at(c.a_param, ta, add(ao, offset_along(V(p), ak))), t);
          NodeRef y = widen(load_at(c.b_param, tb, add(bo, offset_along(V(p), bk))), t);
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
