// Matrix products on the host (ir::Op::Dot): a packed, cache-blocked kernel with an AVX-512 or
// AVX2 micro-kernel chosen at run time (a portable one elsewhere), float32 and float64.
//
// Every output element is the fused multiply-add chain over k in increasing order starting from
// +0 (ir/ops.def), whatever the blocking, the vector width or the thread split: a block of k
// continues the chain from the partial result stored in the output. So the result never depends
// on the machine, the number of threads or the problem's tiling, and the CUDA and HIP kernels
// (codegen/gpu/c_renderer.cpp) give the same bits.
#pragma once
#include <cstdint>
#include <vector>

#include "codegen/kernel.h"
#include "runtime/program.h"

namespace codegen::cpu {

// A product's geometry in element strides. Buffers: bufs[0] the output (contiguous
// [batch..., m, n]), bufs[a_param] a, bufs[b_param] b; a[batch, i, p] lives at
// a_off + sum(batch_idx * a_batch) + i * a_rs + p * a_cs, and likewise b[batch, p, j].
struct GemmPlan {
  ir::DType dtype = ir::DType::Float32;
  ir::Shape batch;  // batch extents (may be empty)
  std::vector<int64_t> a_batch, b_batch;
  int64_t m = 0, n = 0, k = 0;
  int64_t a_off = 0, a_rs = 0, a_cs = 0;
  int64_t b_off = 0, b_rs = 0, b_cs = 0;
  int a_param = 1, b_param = 2;
  // A grouped operand (Contraction::a_groups / b_groups: a convolution's windows read in
  // place) is addressed by tables instead of the row and column strides: a[batch, i, p] at
  // a_off + batch part + a_rows[i] + a_cols[p], and likewise b. Empty for a plain operand.
  std::vector<int64_t> a_rows, a_cols, b_rows, b_cols;
  // The product computed: the output itself, or (transposed) its transpose C^T = B^T A^T, whose
  // m x n elements are the output's n x m in place (every field above then describes the
  // transposed product: m and n, a and b swapped). The same fma chain per output element either
  // way; chosen by plan_gemm for products with few columns.
  bool transposed = false;
  // Rows of the micro-tile (the default, or fewer for a product with few rows).
  int mr = 1;
  // Each element's chain continues from the partial result stored in the output instead of
  // starting from +0: the product is one block of k of a longer one (the attention gradient's
  // products over the query rows, a block of rows at a time: codegen/cpu/attention_gradient.h).
  bool accumulate = false;
  // Work split: each batch element's output is cut into m_parts x n_parts independent tasks.
  int64_t m_parts = 1, n_parts = 1;
  // A fused elementwise epilogue (an LLVM kernel over the output's flat indices that reads the
  // product from the output at its own index), applied to each finished row of a tile.
  runtime::HostKernelFn epilogue = nullptr;
  // The epilogue's operations per output (decomposed: a tanh is about 60), for the split and
  // the pool's decision: an expensive epilogue makes a small product worth splitting.
  int64_t epilogue_ops = 0;

  int64_t batch_count() const;
  int64_t tasks() const { return batch_count() * m_parts * n_parts; }
  int64_t flops_per_task() const;
};

// The plan of a Dot kernel (KernelSpec::contract), split for `threads` workers; its fused
// epilogue, if any, costs `epilogue_ops` operations per output. `may_transpose` false: never
// transposed (the attention kernel cuts the plan's rows itself: codegen/cpu/attention.h).
GemmPlan plan_gemm(const KernelSpec& k, int threads, int64_t epilogue_ops = 0,
                   bool may_transpose = true);

// Runs tasks [lo, hi) of the plan (a `const GemmPlan*`); a runtime::HostLibraryFn.
void run_gemm(const void* plan, char** bufs, int64_t lo, int64_t hi);

// The micro-kernel in use on this CPU: "avx512", "avx2" or "portable" (RUNE_GEMM_ISA caps it).
const char* gemm_kernel_name();

}  // namespace codegen::cpu
