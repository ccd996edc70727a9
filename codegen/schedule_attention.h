// The attention pattern of the host's schedules: softmax(q k^T ...) v as one kernel.
#pragma once
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
void fuse_attention(Schedule& s, bool gpu = false);

}  // namespace codegen
