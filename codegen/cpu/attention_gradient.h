// The attention gradient on the host as one library step (an attention gradient kernel,
// KernelSpec::attention with attention_tiles, made by codegen/schedule_attention.h): one task
// per batch element (a (batch, head) pair), which runs the element's blocks of query rows in
// order and, on each block, every part in order (codegen::GradientRole):
//   a row product (S = q k^T, dP = dO v^T, dQ = dS k) computes the block's rows by the packed
//     GEMM (codegen/cpu/gemm.h), its a read at the block's rows;
//   a row kernel (the softmax row kernel writing P again, the softmax's backward kernels) runs
//     its compiled code over the block's items;
//   a column product (k's gradient dS^T q, v's P^T dO) multiplies the block's query rows in,
//     each element's fma chain continued from the blocks before (GemmPlan::accumulate).
// The slots the kernel holds in tiles (S, P, dP, dS and the like: each [rows, X] per block) are
// per-thread buffers; every part addresses them as the whole buffer it was made for, through
// pointers rebased so that the block's first row is the tile's. Each element is computed by
// the operations of the separate kernel, in its order: a product's element is the same fma
// chain whatever the rows around it (and a column product's chain over the query rows is cut
// into the blocks in order, continued, not restarted); a row kernel computes each item from
// its own rows. So the result has the bits of the unfused gradient program, with no
// [.., Tq, Tk] buffer.
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>

#include "codegen/cpu/gemm.h"
#include "codegen/kernel.h"
#include "codegen/schedule_attention.h"
#include "runtime/program.h"

namespace codegen::cpu {

struct AttentionGradientPlan {
  int64_t batch = 0, tq = 0;  // batch elements, query rows per element
  int64_t rows = 1;           // query rows per block (the last block may have fewer)
  struct Part {
    GradientRole role = GradientRole::RowKernel;
    // A product: its plan for batch element 0, never transposed, one task; a block sets m (a
    // row product) or k (a column product) and adds the element's and rows' offsets.
    GemmPlan gemm;
    ir::Shape batch_shape;
    std::vector<int64_t> a_batch, b_batch;
    // A row kernel (or a row product's epilogue, over the product's rows after them): its
    // entry point (or where a tiered kernel's is read) and items per row.
    runtime::HostKernelFn fn = nullptr;
    const std::atomic<void*>* live = nullptr;
    int64_t items_per_row = 0;
    int64_t cost_per_row = 0;  // operations per query row (the step's cost)
    // Where each of the part's params points: an index into the step's buffers (>= 0), or
    // tile -1 - t.
    std::vector<int> bufs;
  };
  std::vector<Part> parts;
  std::vector<int64_t> tile_row_bytes;  // per tile: bytes per query row
  std::vector<int64_t> tile_row_elems;  // per tile: elements per query row

  int64_t tasks() const { return batch; }
  int64_t flops_per_task() const;
};

// A row kernel part (or a product's epilogue) compiled: its entry point, the tiered entry's
// location (or null) and its operations per item.
struct GradientRowKernel {
  runtime::HostKernelFn fn = nullptr;
  const std::atomic<void*>* live = nullptr;
  int64_t ops_per_item = 0;
};

// The plan of attention gradient kernel `k`, given each part's compiled row kernel (products:
// unused entries).
AttentionGradientPlan plan_attention_gradient(const KernelSpec& k,
                                              const std::vector<GradientRowKernel>& kernels);

// Runs tasks [lo, hi) of the plan (a `const AttentionGradientPlan*`); a runtime::HostLibraryFn.
void run_attention_gradient(const void* plan, char** bufs, int64_t lo, int64_t hi);

}  // namespace codegen::cpu
