// Attention on the host as one library step (KernelSpec::attention, made by
// codegen/schedule_attention.h): the tile loop over (batch element, block of query rows) tasks.
// A task computes, for its rows [r0, r1) of one batch element (a (batch, head) pair):
//   S = those rows of the scores' product, by the packed GEMM (codegen/cpu/gemm.h) into a
//       per-thread [rows, Tk] tile,
//   P = the row kernel's compiled code (softmax with its scale and masks) over the tile's rows,
//       into a second tile; its other operands (a mask) are read in place,
//   O = P times v, by the GEMM, into the output's rows.
// Each element is computed by the operations the three separate kernels compute, in the same
// order (a product's element is the same fma chain whatever the rows around it; the row kernel
// computes each row on its own), so the result has the bits of the unfused schedule, with no
// [.., Tq, Tk] buffer: two tiles per thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>

#include "codegen/cpu/gemm.h"
#include "codegen/kernel.h"
#include "runtime/program.h"

namespace codegen::cpu {

struct AttentionPlan {
  ir::DType dtype = ir::DType::Float32;
  int64_t batch = 0;       // batch elements (the products' batch extents multiplied)
  int64_t tq = 0, tk = 0;  // query rows and keys per batch element
  int64_t rows = 1;        // query rows per task (the last block of an element may have fewer)
  int64_t blocks = 1;      // tasks per batch element
  // The products' plans for batch element 0, never transposed, one task each; a task sets m
  // and adds its element's and rows' offsets (from the batch strides below).
  GemmPlan scores, values;
  ir::Shape scores_batch, values_batch;
  std::vector<int64_t> scores_a_batch, scores_b_batch, values_b_batch;
  runtime::HostKernelFn weights = nullptr;  // the row kernel (items: rows of S and P)
  // Where its current entry point is read instead, when set: a tiered kernel that a program
  // compiled earlier (codegen/cpu/kernel_upgrades.h); both tiers give the same bits.
  const std::atomic<void*>* weights_live = nullptr;
  int64_t row_ops = 0;  // the row kernel's operations per row
  // Where each part's params (KernelSpec::attention[i].slots) point: an index into the step's
  // buffers (the kernel's slots), or one of the tiles.
  static constexpr int kScoresTile = -1, kWeightsTile = -2;
  std::vector<int> scores_bufs, weights_bufs, values_bufs;

  int64_t tasks() const { return batch * blocks; }
  int64_t flops_per_task() const;
};

// The plan of an attention kernel whose row kernel (attention[1]) is compiled as `weights`
// (or `weights_live`) and costs `row_ops` operations per row.
AttentionPlan plan_attention(const KernelSpec& k, runtime::HostKernelFn weights,
                             const std::atomic<void*>* weights_live, int64_t row_ops);

// Runs tasks [lo, hi) of the plan (a `const AttentionPlan*`); a runtime::HostLibraryFn.
void run_attention(const void* plan, char** bufs, int64_t lo, int64_t hi);

}  // namespace codegen::cpu
