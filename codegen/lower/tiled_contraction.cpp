#include "codegen/lower/tiled_contraction.h"

#include <algorithm>

#include "codegen/core_ops.h"
#include "codegen/lower/passes.h"

namespace codegen::lowering {

TiledContraction::TiledContraction(const KernelSpec& k, const Plan& p)
    : Builder(k, p),
      a(k.contract->a),
      bv(k.contract->b),
      shape_a(k.contract->a_shape()),
      shape_b(k.contract->b_shape()),
      nd(shape_a.size()),
      M(shape_a[nd - 2]),
      N(shape_b[nd - 1]),
      K(shape_a[nd - 1]),
      batch(shape_a.begin(), shape_a.end() - 2),
      tiles_m((M + g.bm - 1) / g.bm),
      tiles_n((N + g.bn - 1) / g.bn),
      tile_count(numel(batch) * tiles_m * tiles_n),
      am(operand_axis(*k.contract, true, static_cast<int>(nd) - 2)),
      ak(operand_axis(*k.contract, true, static_cast<int>(nd) - 1)),
      bk(operand_axis(*k.contract, false, static_cast<int>(nd) - 2)),
      bn(operand_axis(*k.contract, false, static_cast<int>(nd) - 1)),
      sam(am.back().second),
      sak(ak.back().second),
      sbk(bk.back().second),
      sbn(bn.back().second),
      t(k.contract->dtype),
      mma(p.mma) {
  static_assert(kGemmTile.bm / kGemmTile.tm == 16 && kGemmTile.bn / kGemmTile.tn == 16 &&
                    kGemmTile.threads == 256,
                "the thread layout is 16 x 16 threads of tm x tn outputs");
  static_assert(kGemmTile.bm * kGemmTile.bk % kGemmTile.threads == 0 &&
                    kGemmTile.bn * kGemmTile.bk % kGemmTile.threads == 0,
                "each thread stages whole elements of a slice");
  sa = mma == MatmulPrecision::Highest ? k.contract->a_dtype
       : mma == MatmulPrecision::BF16  ? DType::BFloat16
                                       : DType::Float32;
  sb = mma == MatmulPrecision::Highest ? k.contract->b_dtype : sa;
  full_slices = K % g.bk == 0;
  pad = mma == MatmulPrecision::Highest ? 0 : kMmaPad;
  size_a = int64_t{g.bk} * (g.bm + pad), size_b = int64_t{g.bk} * (g.bn + pad);
}

void TiledContraction::run() {
  // Vector staging (the entry's aligned body, run when every param is 16-byte aligned): an
  // operand whose stride-1 axis is the one staged along (A's k, B's n), with that extent,
  // its offset and its other strides multiples of 4, loads 4 elements at a time; a vector is
  // then wholly inside or wholly outside the matrix.
  auto vectorisable = [&](const View& v, int64_t s_fast, int64_t s_other, int64_t extent,
                          bool grouped) {
    bool ok = !grouped && s_fast == 1 && extent % 4 == 0 && v.offset % 4 == 0 && s_other % 4 == 0;
    for (size_t d = 0; d + 2 < nd; ++d) ok = ok && v.strides[d] % 4 == 0;
    return ok;
  };
  const bool vec_a = vectorisable(a, sak, sam, K, am.size() > 1 || ak.size() > 1),
             vec_b = vectorisable(bv, sbn, sbk, N, bk.size() > 1 || bn.size() > 1);
  lir::Entry entry_out;
  entry_out.items = tile_count, entry_out.threads = tile_count * g.threads;
  entry_out.block = g.threads;
  cur_ = &entry_out.head;
  // Two buffers per operand (double buffering: slice s in buffer s % 2).
  as = shared("as", sa, 2 * int64_t{g.bk} * (g.bm + pad));
  bs = shared("bs", sb, 2 * int64_t{g.bk} * (g.bn + pad));
  cur_ = &entry_out.body;
  tiles(false, false);
  if (vec_a || vec_b) {
    cur_ = &entry_out.aligned_body;
    tiles(vec_a, vec_b);
  }
  cur_ = nullptr;
  out_.entries.push_back(std::move(entry_out));
}

void TiledContraction::tiles(bool va, bool vb) {
  VarId tile = var("tile");
  loop(tile, I(0), I(tile_count), Loop::Blocks, [&] {
    NodeRef rest = V(tile);
    NodeRef tn = urem(rest, tiles_n);
    rest = udiv(rest, tiles_n);
    NodeRef tm = urem(rest, tiles_m);
    bt = let("bt", udiv(rest, tiles_m));
    m0 = let("m0", mul(tm, g.bm));
    n0 = let("n0", mul(tn, g.bn));
    NodeRef a_off = I(a.offset), b_off = I(bv.offset);
    if (!batch.empty()) {
      auto q = unflatten(bt, batch);
      for (size_t d = 0; d < batch.size(); ++d)
        a_off = add(a_off, mul(q[d], a.strides[d])), b_off = add(b_off, mul(q[d], bv.strides[d]));
    }
    ao = let("ao", a_off);
    bo = let("bo", b_off);
    VarId th = var("th");
    loop(th, I(0), I(g.threads), Loop::Threads, [&] {
      tl = V(th);
      thread(va, vb);
    });
  });
}

void TiledContraction::thread(bool va, bool vb) {
  tx = let("tx", urem(tl, 16));
  ty = let("ty", udiv(tl, 16));
  acc = reg("acc", t, int64_t{g.tm} * g.tn, b::cf(t, 0));
  // The tensor-core plan's warp layout (see above).
  wm = wn = fg = fq = nullptr;
  if (mma != MatmulPrecision::Highest) {
    NodeRef lane = urem(tl, 32), warp = udiv(tl, 32);
    wm = let("wm", mul(urem(warp, 4), 32));
    wn = let("wn", mul(udiv(warp, 4), 64));
    fg = let("fg", udiv(lane, 4));
    fq = let("fq", urem(lane, 4));
  }
  oa = operand_a(va);
  ob = operand_b(vb);
  k_slices();
  epilogue();
}

void TiledContraction::k_slices() {
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
        NodeRef cur_a = let("cur_a", mul(odd, size_a)), cur_b = let("cur_b", mul(odd, size_b));
        NodeRef kn = let("kn", add(V(k0), I(g.bk)));
        NodeRef more = b::lt(kn, I(K));
        // The next slice's global loads are issued before this slice's arithmetic, so
        // their latency is hidden behind it; its stores to shared memory follow it.
        when(more, [&] {
          NodeRef kwn = full_slices ? I(g.bk) : let("kwn", min(I(g.bk), b::sub(I(K), kn)));
          fetch(oa, kn, kwn, b::sub(I(size_a), cur_a));
          fetch(ob, kn, kwn, b::sub(I(size_b), cur_b));
        });
        if (mma != MatmulPrecision::Highest)
          mma_fragments(cur_a, cur_b);
        else
          simt_step(V(k0), cur_a, cur_b);
        when(more, [&] { put_slice(b::sub(I(size_a), cur_a), b::sub(I(size_b), cur_b)); });
        // Every thread has finished reading this slice's buffer (written next) and
        // written the next slice's (read next).
        barrier();
      },
      g.bk);
}

void TiledContraction::simt_step(NodeRef k0, NodeRef cur_a, NodeRef cur_b) {
  NodeRef kw = full_slices ? I(g.bk) : let("kw", min(I(g.bk), b::sub(I(K), k0)));
  VarId kk = var("kk");
  loop(
      kk, I(0), kw, Loop::Serial,
      [&] {
        std::vector<NodeRef> av, bw;
        for (int i = 0; i < g.tm; ++i) {
          NodeRef row = add(ty, I(16 * i));
          NodeRef slot = oa.async ? add(mul(row, g.bk), V(kk)) : add(mul(V(kk), g.bm), row);
          av.push_back(let("a", widen(at(as, add(cur_a, slot)), t)));
        }
        for (int j = 0; j < g.tn; ++j)
          bw.push_back(
              let("b", widen(at(bs, add(cur_b, add(mul(V(kk), g.bn), add(tx, I(16 * j))))), t)));
        for (int i = 0; i < g.tm; ++i)
          for (int j = 0; j < g.tn; ++j) {
            NodeRef slot = I(int64_t{i} * g.tn + j);
            set(acc, slot, make(Op::Fma, t, {}, {av[i], bw[j], at(acc, slot)}));
          }
      },
      1, full_slices ? g.bk : 0);
}

void TiledContraction::store_output(NodeRef m, NodeRef n, int64_t slot) {
  const bool epilogue = k_.body && k_.body->op != Op::Acc;
  when(b::band(b::lt(m, I(M)), b::lt(n, I(N))), [&] {
    NodeRef w = let("w", add(mul(bt, M * N), add(mul(m, N), n)));
    NodeRef prod = let("prod", at(acc, I(slot)));
    store(0, w, epilogue ? at_index(k_.body, unflatten(w, k_.shape), {prod}) : prod);
  });
}

void TiledContraction::epilogue() {
  if (mma != MatmulPrecision::Highest) return mma_epilogue();
  for (int i = 0; i < g.tm; ++i)
    for (int j = 0; j < g.tn; ++j)
      store_output(add(m0, add(ty, I(16 * i))), add(n0, add(tx, I(16 * j))), int64_t{i} * g.tn + j);
}

lir::Kernel lower_tiled_contraction(const KernelSpec& k, const Plan& p) {
  TiledContraction pass(k, p);
  pass.run();
  return pass.take();
}

}  // namespace codegen::lowering
