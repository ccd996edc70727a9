#include "codegen/cpu/attention.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>

#include "codegen/cpu/attention_tiles.h"

namespace codegen::cpu {

namespace {

// Bytes per tile: a task's rows of S (and of P) are about this many bytes over Tk's, rounded
// up to the micro-kernel's rows. More rows amortise the packing of k and v (once per task) and
// waste fewer rows of edge tiles; the two tiles of a task fit the L2 cache of the machine the
// size was measured on (1 MiB per core: all 128 queries of a causal block against 1024 keys,
// float32; about 10% faster there than a quarter of that: docs/attention.md).
constexpr int64_t kTileBytes = 512 * 1024;

// A plan of batch element 0 of kernel `part`'s product (batch strides moved out).
GemmPlan element_plan(const KernelSpec& part, ir::Shape& batch, std::vector<int64_t>* a_batch,
                      std::vector<int64_t>& b_batch) {
  GemmPlan g = plan_gemm(part, /*threads=*/1, /*epilogue_ops=*/0, /*may_transpose=*/false);
  batch = g.batch;
  if (a_batch) *a_batch = g.a_batch;
  b_batch = g.b_batch;
  g.batch.clear();
  g.a_batch.clear();
  g.b_batch.clear();
  g.m_parts = g.n_parts = 1;
  return g;
}

// Where each param of `part` points (see AttentionPlan): S's and P's slots to their tiles.
std::vector<int> param_map(const KernelSpec& k, const KernelSpec& part, int s_slot, int p_slot) {
  std::vector<int> m;
  for (int slot : part.slots) {
    if (slot == s_slot) {
      m.push_back(AttentionPlan::kScoresTile);
    } else if (slot == p_slot) {
      m.push_back(AttentionPlan::kWeightsTile);
    } else {
      auto it = std::find(k.slots.begin(), k.slots.end(), slot);
      if (it == k.slots.end())
        throw std::logic_error("plan_attention: a part reads an unknown slot");
      m.push_back(static_cast<int>(it - k.slots.begin()));
    }
  }
  return m;
}

}  // namespace

int64_t AttentionPlan::flops_per_task() const {
  return std::max<int64_t>(rows * (2 * tk * (scores.k + values.n) + row_ops), 1);
}

AttentionPlan plan_attention(const KernelSpec& k, runtime::HostKernelFn weights,
                             const std::atomic<void*>* weights_live, int64_t row_ops) {
  if (k.attention.size() != 3) throw std::logic_error("plan_attention: not an attention kernel");
  const KernelSpec &s = k.attention[0], &w = k.attention[1], &o = k.attention[2];
  AttentionPlan p;
  p.dtype = o.out_dtype;
  p.scores = element_plan(s, p.scores_batch, &p.scores_a_batch, p.scores_b_batch);
  p.values = element_plan(o, p.values_batch, nullptr, p.values_b_batch);
  p.tq = p.scores.m;
  p.tk = p.scores.n;
  p.batch = 1;
  for (int64_t e : p.scores_batch) p.batch *= e;
  // P is the values product's a, read from the weights tile as written: [rows, Tk].
  p.values.a_off = 0;
  p.values.a_rs = p.tk;
  p.values.a_cs = 1;
  p.weights = weights;
  p.weights_live = weights_live;
  p.row_ops = row_ops;
  const int64_t per_row = ir::itemsize(p.dtype) * std::max<int64_t>(p.tk, 1);
  const int64_t want = std::clamp<int64_t>(kTileBytes / per_row, 1, std::max<int64_t>(p.tq, 1));
  const int64_t mr = p.scores.mr;
  p.blocks = (p.tq + want - 1) / want;
  p.rows = p.blocks ? (p.tq + p.blocks - 1) / p.blocks : 1;
  p.rows = std::min(p.tq, (p.rows + mr - 1) / mr * mr);
  p.blocks = p.rows ? (p.tq + p.rows - 1) / p.rows : 1;
  const int s_slot = s.slots[0], p_slot = w.slots[0];
  p.scores_bufs = param_map(k, s, s_slot, p_slot);
  p.weights_bufs = param_map(k, w, s_slot, p_slot);
  p.values_bufs = param_map(k, o, s_slot, p_slot);
  return p;
}

void run_attention(const void* plan, char** bufs, int64_t lo, int64_t hi) {
  const auto& p = *static_cast<const AttentionPlan*>(plan);
  const int64_t size = ir::itemsize(p.dtype);
  char* s_tile = attention_tile(0, p.rows * p.tk * size);
  char* p_tile = attention_tile(1, p.rows * p.tk * size);
  const runtime::HostKernelFn weights =
      p.weights_live
          ? reinterpret_cast<runtime::HostKernelFn>(p.weights_live->load(std::memory_order_acquire))
          : p.weights;
  std::vector<char*> sb(p.scores_bufs.size()), wb(p.weights_bufs.size()), vb(p.values_bufs.size());
  for (int64_t t = lo; t < hi; ++t) {
    const int64_t bi = t / p.blocks, r0 = t % p.blocks * p.rows;
    const int64_t r1 = std::min(p.tq, r0 + p.rows);
    if (r0 >= r1) continue;
    const int64_t first = (bi * p.tq + r0) * p.tk;  // S's and P's element (bi, r0, 0)
    auto fill = [&](std::vector<char*>& out, const std::vector<int>& map) {
      for (size_t i = 0; i < map.size(); ++i)
        out[i] = map[i] == AttentionPlan::kScoresTile    ? rebased(s_tile, first * size)
                 : map[i] == AttentionPlan::kWeightsTile ? rebased(p_tile, first * size)
                                                         : bufs[map[i]];
    };
    // S: rows [r0, r1) of q's element bi against all of k's, into the scores tile.
    GemmPlan sg = p.scores;
    sg.m = r1 - r0;
    sg.a_off += batch_offset(p.scores_batch, p.scores_a_batch, bi) + r0 * sg.a_rs;
    sg.b_off += batch_offset(p.scores_batch, p.scores_b_batch, bi);
    fill(sb, p.scores_bufs);
    sb[0] = s_tile;
    run_gemm(&sg, sb.data(), 0, 1);
    // P: the row kernel over rows bi * Tq + [r0, r1) of S, written into the weights tile.
    fill(wb, p.weights_bufs);
    weights(wb.data(), bi * p.tq + r0, bi * p.tq + r1);
    // O: P times v's element bi, into the output's rows.
    GemmPlan vg = p.values;
    vg.m = r1 - r0;
    vg.b_off += batch_offset(p.values_batch, p.values_b_batch, bi);
    fill(vb, p.values_bufs);
    vb[static_cast<size_t>(p.values.a_param)] = p_tile;
    vb[0] = bufs[0] + (bi * p.tq + r0) * p.values.n * size;
    run_gemm(&vg, vb.data(), 0, 1);
  }
}

}  // namespace codegen::cpu
