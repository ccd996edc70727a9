#include "codegen/cpu/attention_gradient.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>

#include "codegen/cpu/attention_tiles.h"

namespace codegen::cpu {

namespace {

// Bytes of all tiles of a block together: its rows are about this many bytes over the tiles'
// bytes per row, rounded up to the product's micro-kernel rows (the forward kernel's tiles are
// 512 KiB each, two of them: codegen/cpu/attention.cpp).
constexpr int64_t kBlockBytes = 1024 * 1024;

// Part `part`'s compiled kernel over the items of rows [row0, row1) (of all elements).
void run_rows(const AttentionGradientPlan::Part& part, char** bufs, int64_t row0, int64_t row1) {
  const runtime::HostKernelFn fn =
      part.live
          ? reinterpret_cast<runtime::HostKernelFn>(part.live->load(std::memory_order_acquire))
          : part.fn;
  fn(bufs, row0 * part.items_per_row, row1 * part.items_per_row);
}

}  // namespace

int64_t AttentionGradientPlan::flops_per_task() const {
  int64_t f = 0;
  for (const Part& p : parts) {
    f += tq * p.cost_per_row;
    if (p.role != GradientRole::RowKernel)
      f += 2 * p.gemm.m * p.gemm.n * std::max<int64_t>(p.gemm.k, 1);
  }
  return std::max<int64_t>(f, 1);
}

AttentionGradientPlan plan_attention_gradient(const KernelSpec& k,
                                              const std::vector<GradientRowKernel>& kernels) {
  auto layout = gradient_layout(k.attention);
  if (!layout || kernels.size() != k.attention.size())
    throw std::logic_error("plan_attention_gradient: not an attention gradient kernel");
  AttentionGradientPlan p;
  p.batch = layout->batch;
  p.tq = layout->tq;
  const int64_t rows_total = p.batch * p.tq;
  // The tiles, in attention_tiles' order.
  for (int slot : k.attention_tiles) {
    int64_t x = layout->per_row(slot), size = 0;
    for (const KernelSpec& part : k.attention)
      if (part.slots[0] == slot) size = ir::itemsize(part.out_dtype);
    if (x < 0 || size == 0)
      throw std::logic_error("plan_attention_gradient: a tile no row part writes");
    p.tile_row_elems.push_back(x);
    p.tile_row_bytes.push_back(x * size);
  }
  int mr = 1;
  for (size_t i = 0; i < k.attention.size(); ++i) {
    const KernelSpec& part = k.attention[i];
    AttentionGradientPlan::Part q;
    q.role = layout->roles[i];
    for (int slot : part.slots) {
      auto t = std::find(k.attention_tiles.begin(), k.attention_tiles.end(), slot);
      if (t != k.attention_tiles.end()) {
        q.bufs.push_back(-1 - static_cast<int>(t - k.attention_tiles.begin()));
        continue;
      }
      auto it = std::find(k.slots.begin(), k.slots.end(), slot);
      if (it == k.slots.end())
        throw std::logic_error("plan_attention_gradient: a part reads an unknown slot");
      q.bufs.push_back(static_cast<int>(it - k.slots.begin()));
    }
    if (q.role == GradientRole::RowKernel) {
      q.fn = kernels[i].fn;
      q.live = kernels[i].live;
      q.items_per_row = ir::numel(part.shape) / rows_total;
      q.cost_per_row = q.items_per_row * kernels[i].ops_per_item;
      if (!q.fn) throw std::logic_error("plan_attention_gradient: a row kernel not compiled");
    } else {
      q.fn = kernels[i].fn;  // its epilogue, or none
      q.live = kernels[i].live;
      q.items_per_row = ir::numel(part.shape) / rows_total;
      q.cost_per_row = q.items_per_row * kernels[i].ops_per_item;
      q.gemm = plan_gemm(part, /*threads=*/1, /*epilogue_ops=*/0, /*may_transpose=*/false);
      q.batch_shape = q.gemm.batch;
      q.a_batch = q.gemm.a_batch;
      q.b_batch = q.gemm.b_batch;
      q.gemm.batch.clear();
      q.gemm.a_batch.clear();
      q.gemm.b_batch.clear();
      q.gemm.m_parts = q.gemm.n_parts = 1;
      if (i == 0) mr = q.gemm.mr;
    }
    p.parts.push_back(std::move(q));
  }
  int64_t row_bytes = 0;
  for (int64_t b : p.tile_row_bytes) row_bytes += b;
  const int64_t want = std::clamp<int64_t>(kBlockBytes / std::max<int64_t>(row_bytes, 1), 1, p.tq);
  const int64_t blocks = (p.tq + want - 1) / want;
  p.rows = (p.tq + blocks - 1) / blocks;
  p.rows = std::min(p.tq, (p.rows + mr - 1) / mr * mr);
  return p;
}

void run_attention_gradient(const void* plan, char** bufs, int64_t lo, int64_t hi) {
  const auto& p = *static_cast<const AttentionGradientPlan*>(plan);
  const size_t n_tiles = p.tile_row_bytes.size();
  std::vector<char*> tiles(n_tiles), based(n_tiles);
  for (size_t t = 0; t < n_tiles; ++t)
    tiles[t] = attention_tile(kGradientFirstTile + t, p.rows * p.tile_row_bytes[t]);
  std::vector<char*> pb;
  for (int64_t bi = lo; bi < hi; ++bi)
    for (int64_t r0 = 0; r0 < p.tq; r0 += p.rows) {
      const int64_t r1 = std::min(p.tq, r0 + p.rows);
      const int64_t row = bi * p.tq + r0;  // the block's first row over all elements
      for (size_t t = 0; t < n_tiles; ++t) based[t] = rebased(tiles[t], row * p.tile_row_bytes[t]);
      for (const auto& part : p.parts) {
        pb.resize(part.bufs.size());
        for (size_t i = 0; i < part.bufs.size(); ++i)
          pb[i] = part.bufs[i] >= 0 ? bufs[part.bufs[i]]
                                    : based[static_cast<size_t>(-1 - part.bufs[i])];
        switch (part.role) {
          case GradientRole::RowKernel:
            run_rows(part, pb.data(), row, bi * p.tq + r1);
            break;
          case GradientRole::RowProduct: {
            GemmPlan g = part.gemm;
            g.m = r1 - r0;
            g.a_off += batch_offset(part.batch_shape, part.a_batch, bi) + r0 * g.a_rs;
            g.b_off += batch_offset(part.batch_shape, part.b_batch, bi);
            char* out = pb[0];
            pb[0] += row * g.n * static_cast<int64_t>(ir::itemsize(g.dtype));
            run_gemm(&g, pb.data(), 0, 1);
            pb[0] = out;
            if (part.fn) run_rows(part, pb.data(), row, bi * p.tq + r1);  // its epilogue
            break;
          }
          case GradientRole::ColumnProduct: {
            GemmPlan g = part.gemm;
            g.k = r1 - r0;
            g.accumulate = r0 > 0;
            g.a_off += batch_offset(part.batch_shape, part.a_batch, bi) + r0 * g.a_cs;
            g.b_off += batch_offset(part.batch_shape, part.b_batch, bi) + r0 * g.b_rs;
            pb[0] += bi * g.m * g.n * static_cast<int64_t>(ir::itemsize(g.dtype));
            run_gemm(&g, pb.data(), 0, 1);
            break;
          }
        }
      }
    }
}

}  // namespace codegen::cpu
