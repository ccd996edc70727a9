// GPU tiled matrix products (plan part tiles, optionally mma): the pass's state and stages. The
// stages are: the tile and thread loops with the thread's registers (tiled_contraction.cpp),
// the staging of a slice of each operand into shared memory (tiled_staging.cpp), the k-slice
// loop with its SIMT step (tiled_contraction.cpp) or tensor-core step (tiled_mma.cpp), and the
// epilogue that stores the tile's outputs.
//
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
#pragma once
#include "codegen/lower/builder.h"

namespace codegen::lowering {

class TiledContraction : public Builder {
 public:
  TiledContraction(const KernelSpec& k, const Plan& p);
  void run();

 private:
  // One operand's staging (tiled_staging.cpp): fetch() reads this thread's elements of a slice
  // starting at k `kb` (width `kw`) from global memory into registers (`r`: A's or B's, rounded
  // for the tensor cores where the plan says so, 0 outside the matrix), put() writes them to the
  // shared buffer at `buf`. Element e of a slice is (row, kk) of A or (kk, col) of B; the scalar
  // path's unit u is element tl + 256 u, the vector path's 4 consecutive elements along the
  // stride-1 axis.
  struct Operand {
    int param;
    VarId dst, r;
    int64_t width;
    const AxisDims* wide;  // scalar path: the tile axis's and k's (extent, stride) pairs
    const AxisDims* kd;
    bool vec, along_k;  // vector path: 4 elements along k (A) or the tile (B)
    int64_t s_other;    // vector path: the other axis's stride
    NodeRef base, first;
    int64_t extent;
    DType mt;
    bool async;  // plan part cp.async: vector units copied straight into shared memory
  };

  // ---- tiles and threads (tiled_contraction.cpp) ----
  // The tile loop, its thread loop and each thread's work, for operands staged as vectors
  // (va, vb: the entry's aligned body) or not.
  void tiles(bool va, bool vb);
  void thread(bool va, bool vb);
  // Slice 0, then the k-slice loop: per slice the next one's fetch, this one's step, the put.
  void k_slices();
  // The SIMT step of the slice at k0 in the buffers at cur_a / cur_b: kk in increasing order.
  void simt_step(NodeRef k0, NodeRef cur_a, NodeRef cur_b);
  // The tile's outputs from the accumulators: output (m, n) from accumulator `slot`.
  void epilogue();
  void store_output(NodeRef m, NodeRef n, int64_t slot);

  // ---- staging (tiled_staging.cpp) ----
  // An operand element as staged: its own bits, or rounded for the tensor cores.
  NodeRef staged(NodeRef x) const;
  Operand operand_a(bool va);
  Operand operand_b(bool vb);
  std::pair<NodeRef, NodeRef> scalar_at(const Operand& o, int u);
  // The vector path's unit u: A's (row r, k 4q), B's (k r, column 4q), as (x, kk).
  std::pair<NodeRef, NodeRef> vec_at(const Operand& o, int u);
  int64_t units(const Operand& o) const;
  // `buf`: the buffer an asynchronous operand copies into (the others fill registers).
  void fetch(const Operand& o, NodeRef kb, NodeRef kw, NodeRef buf);
  // An asynchronous operand's copies are already on their way (put_slice waits once for all of
  // them).
  void put(const Operand& o, NodeRef buf);
  // Both operands' fetched slice into their buffers: the register-staged ones stored, then one
  // wait for every asynchronous copy this thread issued.
  void put_slice(NodeRef buf_a, NodeRef buf_b);

  // ---- tensor cores (tiled_mma.cpp) ----
  // x rounded to the tensor-core plan's input precision, as float32 (tf32: to nearest, ties
  // away from zero, as cvt.rna.tf32.f32: the 13 low mantissa bits cleared after adding half
  // their range to the magnitude; a NaN stays NaN) or as bfloat16 (to nearest even, the
  // dtype's cast).
  static NodeRef round_for_mma(NodeRef x, MatmulPrecision p);
  // The tensor-core steps of one staged slice (plan part mma, tiled_contraction): this warp's
  // 2 x 8 fragments of 16 x 8 outputs (accumulators (i * 8 + j) * 4 .. + 4), each slice of bk
  // as bk / 8 m16n8k8 tf32 steps or bk / 16 m16n8k16 bf16 steps in increasing k. Fragment
  // values are read from the staged slice (k-major, padded rows: as[k * (bm + 8) + row],
  // bs[k * (bn + 8) + column]) at the places lir::Stmt::Mma's layout names for this lane.
  static constexpr int64_t kMmaPad = 8;  // elements after each row of a staged slice
  void mma_fragments(NodeRef cur_a, NodeRef cur_b);
  // The tensor-core plan's outputs: fragment (i, j)'s accumulators.
  void mma_epilogue();

  // The product's shape and operands (the kernel's), and the tile grid over its outputs.
  const GemmTile g = kGemmTile;
  const View& a;
  const View& bv;
  const Shape shape_a, shape_b;  // the operands' logical shapes
  const size_t nd;
  const int64_t M, N, K;
  const Shape batch;
  const int64_t tiles_m, tiles_n, tile_count;
  // Each operand axis's (extent, stride) pairs: one for a plain view, several for a grouped
  // one (a convolution's windows, read in place); the vector path takes plain views only.
  const AxisDims am, ak, bk, bn;
  const int64_t sam, sak, sbk, sbn;  // the strides of plain axes (vector staging)
  const DType t;
  const MatmulPrecision mma;
  // What the shared arrays hold: the operands' own dtypes, or the tensor-core inputs.
  DType sa, sb;
  bool full_slices;
  // The tensor-core plan's slices have rows of bm + 8 (bn + 8) elements: the 8 lanes with
  // the same q of a fragment read 8 consecutive elements of one row, and the 4 values of q
  // rows apart then fall in distinct banks (a row of 128 put them all in one: 4-way conflicts).
  int64_t pad;
  int64_t size_a, size_b;  // one buffer of each operand's slice
  // The double-buffered shared slices (slice s in buffer s % 2).
  VarId as = -1, bs = -1;
  // The tile being lowered: its batch index, first row and column, and the operands' offsets.
  NodeRef bt, m0, n0, ao, bo;
  // The thread being lowered: its index, position in the 16 x 16 layout, accumulators, the
  // tensor-core warp layout (null without mma) and its operands' staging.
  NodeRef tl, tx, ty;
  VarId acc = -1;
  NodeRef wm, wn, fg, fq;
  Operand oa{}, ob{};
};

}  // namespace codegen::lowering
