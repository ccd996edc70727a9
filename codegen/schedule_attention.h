// The attention pattern of the host's schedules: softmax(q k^T ...) v as one kernel, and its
// gradient as a second.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "codegen/kernel.h"

namespace codegen {

// Replaces each chain of three kernels
//   S = a product (a contraction without epilogue),
//   P = a row kernel writing rows over S's rows (softmax with its scale and masks fused),
//   O = P's product with another operand (a contraction without epilogue, P its left operand),
// where S and P are read by no other kernel and are no outputs, and both products are batches
// whose right operands (k^T and v) are each batch element's own (not broadcast: a weight
// matrix shared by every row would be packed again for each block of rows), with one attention
// kernel (kernel.h) at O's place; S's and P's slots then hold no buffer (numel 0). The row kernel
// must read S at each element's own index (rows of S are rows of P), and P must be the
// product's left operand as written (contiguous rows). Nothing else changes: every element
// is computed by the same operations in the same order (codegen/cpu/attention.h).
// The host backend runs the kernel as a library step (codegen/cpu/attention.h); with `gpu` (a
// GPU schedule) it is one GPU kernel (codegen/lower/attention.cpp), made only where one query
// row (its Tk scores, its D elements of q) fits the kernel's 44 KiB of block-shared memory
// (gpu_attention_rows, codegen/lower/attention.h); longer rows keep the three kernels.
// On the host it runs fuse_attention_gradient first.
void fuse_attention(Schedule& s, bool gpu = false);

// In a gradient program the backward pass reads S and P too. This pass takes that chain's
// backward kernels: every kernel reading S, P or another [.., Tq, Tk] value they lead to, the
// products writing [.., Tq, Tk] values those kernels read (dP = dO v^T), and so on, and replaces
// them with one attention gradient kernel (kernel.h) that computes S and P again per block of
// query rows (the same two kernels: the same bits) and runs every part on the block in the
// scheduler's order, in per-thread tiles (codegen/cpu/attention_gradient.h). The [.., Tq, Tk]
// values and the other per-row values only the parts read get no buffer; the forward chain is
// then the forward pattern above (its S and P read by nothing else), which fuse_attention makes
// one kernel. Taken only when every part has a role of gradient_layout and the forward chain
// then fuses; otherwise the schedule is left as it is.
void fuse_attention_gradient(Schedule& s);

// A part's role in an attention gradient kernel. The kernel runs, for each batch element (a
// (batch, head) pair) and each block [r0, r1) of its query rows in order, every part in order:
enum class GradientRole {
  // A product whose rows are query rows (S = q k^T, dP = dO v^T, dQ = dS k): rows [r0, r1).
  RowProduct,
  // A product summing over the query rows (k's gradient dS^T q, v's P^T dO): the block's
  // terms, each element's fma chain continued from the partial result of the blocks before
  // (so the chain over the query rows is the separate product's, in its order).
  ColumnProduct,
  // An elementwise, reduction or row kernel whose items are query rows or lie in them, reading
  // any slot a part writes in that row only: its items of rows [r0, r1).
  RowKernel,
};

struct GradientLayout {
  int64_t batch = 0, tq = 0;        // batch elements, query rows per element (from S)
  std::vector<GradientRole> roles;  // per part
  // Each slot a row product or row kernel writes, with its elements per query row.
  std::vector<std::pair<int, int64_t>> row_slots;
  std::vector<int> column_slots;    // the slots column products write (read by no part)
  int64_t per_row(int slot) const;  // -1 for a slot not in row_slots
};

// The roles of `parts` (S's product first, then P's row kernel, then the rest in order), or none
// where a part has no role: a product reading a part's output other than along the query rows,
// a kernel reading one outside its own row, a gather, a reduction longer than one block, a
// product with an epilogue or grouped operands, a slot written twice.
std::optional<GradientLayout> gradient_layout(const std::vector<KernelSpec>& parts);

}  // namespace codegen
