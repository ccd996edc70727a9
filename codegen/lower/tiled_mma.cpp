// The tiled contraction's tensor-core stages (plan part mma, codegen/lower/tiled_contraction.h):
// the rounding of staged elements, each slice's mma steps and the fragments' outputs.
#include "codegen/core_ops.h"
#include "codegen/lower/tiled_contraction.h"

namespace codegen::lowering {

NodeRef TiledContraction::round_for_mma(NodeRef x, MatmulPrecision p) {
  if (p == MatmulPrecision::BF16) return legalize(b::cast(x, DType::BFloat16));
  NodeRef bits = b::bitcast(x, DType::Int32);
  NodeRef r = b::band(b::add(bits, b::ci(DType::Int32, 0x1000)),
                      b::ci(DType::Int32, static_cast<int32_t>(0xffffe000u)));
  return legalize(b::where(b::ne(x, x), x, b::bitcast(r, DType::Float32)));
}

void TiledContraction::mma_fragments(NodeRef cur_a, NodeRef cur_b) {
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

void TiledContraction::mma_epilogue() {
  // Fragment (i, j)'s d_r: row g + 8 (r >> 1), column 2 q + (r & 1) (lir::Stmt::Mma).
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 8; ++j)
      for (int r = 0; r < 4; ++r)
        store_output(add(m0, add(wm, add(fg, I(16 * i + 8 * (r >> 1))))),
                     add(n0, add(wn, add(mul(fq, 2), I(8 * j + (r & 1))))), (i * 8 + j) * 4 + r);
}

}  // namespace codegen::lowering
