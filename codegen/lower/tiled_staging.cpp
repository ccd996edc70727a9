// The tiled contraction's staging (codegen/lower/tiled_contraction.h): each thread's share of a
// slice of A (bm x bk) and B (bk x bn), read from global memory and written to shared memory.
#include "codegen/core_ops.h"
#include "codegen/lower/tiled_contraction.h"

namespace codegen::lowering {

NodeRef TiledContraction::staged(NodeRef x) const {
  return mma == MatmulPrecision::Highest ? x : round_for_mma(x, mma);
}

// With cp.async, an operand's vector units (4 elements consecutive in memory) are copied as they
// are (the SIMT plan stages its operands' own values): B's slice is k-major as always, A's is
// then m-major (row x of the slice at x * bk), so that its 4 consecutive k land consecutively.
// A warp's A reads then touch 2 rows 16 elements apart (distinct banks, each a broadcast), as
// the k-major layout's did.
TiledContraction::Operand TiledContraction::operand_a(bool va) {
  const bool async_a = va && p_.async_copy && mma == MatmulPrecision::Highest;
  const int64_t per_thread_a = int64_t{g.bm} * g.bk / g.threads;
  return {k_.contract->a_param,
          as,
          async_a ? VarId{-1} : reg("ra", sa, per_thread_a, zero(sa)),
          g.bm,
          &am,
          &ak,
          va,
          true,
          sam,
          ao,
          m0,
          M,
          k_.contract->a_dtype,
          async_a};
}
TiledContraction::Operand TiledContraction::operand_b(bool vb) {
  const bool async_b = vb && p_.async_copy && mma == MatmulPrecision::Highest;
  const int64_t per_thread_b = int64_t{g.bn} * g.bk / g.threads;
  return {k_.contract->b_param,
          bs,
          async_b ? VarId{-1} : reg("rb", sb, per_thread_b, zero(sb)),
          g.bn,
          &bn,
          &bk,
          vb,
          false,
          sbk,
          bo,
          n0,
          N,
          k_.contract->b_dtype,
          async_b};
}

std::pair<NodeRef, NodeRef> TiledContraction::scalar_at(const Operand& o, int u) {
  const bool wide_fast = o.wide->back().second == 1 && o.kd->back().second != 1;
  NodeRef e = add(tl, I(int64_t{u} * g.threads));
  return {wide_fast ? urem(e, o.width) : udiv(e, g.bk),
          wide_fast ? udiv(e, o.width) : urem(e, g.bk)};
}
std::pair<NodeRef, NodeRef> TiledContraction::vec_at(const Operand& o, int u) {
  const int64_t per_row = o.along_k ? g.bk / 4 : o.width / 4;
  NodeRef e = add(tl, I(int64_t{u} * g.threads));
  NodeRef q = urem(e, per_row), r = udiv(e, per_row);
  return o.along_k ? std::pair{r, mul(q, 4)} : std::pair{mul(q, 4), r};
}
int64_t TiledContraction::units(const Operand& o) const {
  return o.width * g.bk / g.threads / (o.vec ? 4 : 1);
}

void TiledContraction::fetch(const Operand& o, NodeRef kb, NodeRef kw, NodeRef buf) {
  const DType st = out_.vars[o.dst].dtype;
  for (int u = 0; u < units(o); ++u) {
    if (!o.vec) {
      auto [x, kk] = scalar_at(o, u);
      NodeRef ok = b::band(b::lt(add(o.first, x), I(o.extent)), b::lt(kk, kw));
      NodeRef off = add(
          o.base, add(offset_along(add(o.first, x), *o.wide), offset_along(add(kb, kk), *o.kd)));
      NodeRef v = staged(load_at(o.param, o.mt, b::where(ok, off, I(0))));
      set(o.r, I(u), legalize(b::where(ok, v, zero(st))));
      continue;
    }
    auto [x, kk] = vec_at(o, u);
    NodeRef ok = b::band(b::lt(add(o.first, x), I(o.extent)), b::lt(kk, kw));
    NodeRef off = o.along_k ? add(o.base, add(mul(add(o.first, x), o.s_other), add(kb, kk)))
                            : add(o.base, add(mul(add(kb, kk), o.s_other), add(o.first, x)));
    if (o.async) {
      // 4 elements along the operand's stride-1 axis, in place: B's (kk, x .. x + 3)
      // in its k-major slice, A's (x, kk .. kk + 3) in its m-major one.
      Stmt cp{Stmt::Kind::AsyncCopy};
      cp.var = o.dst;
      cp.a = o.along_k ? add(buf, add(mul(x, g.bk), kk)) : add(buf, add(mul(kk, o.width + pad), x));
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
}

void TiledContraction::put(const Operand& o, NodeRef buf) {
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
      NodeRef slot = o.along_k ? add(mul(add(kk, I(c)), row), x) : add(mul(kk, row), add(x, I(c)));
      set(o.dst, add(buf, slot), at(o.r, I(4 * u + c)));
    }
  }
}

void TiledContraction::put_slice(NodeRef buf_a, NodeRef buf_b) {
  put(oa, buf_a), put(ob, buf_b);
  if (oa.async || ob.async) emit(Stmt{Stmt::Kind::AsyncWait});
}

}  // namespace codegen::lowering
