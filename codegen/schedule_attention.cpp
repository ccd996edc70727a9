#include "codegen/schedule_attention.h"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "codegen/inplace.h"
#include "codegen/lower/attention.h"
#include "ir/rewrite.h"

namespace codegen {

using namespace ir;

namespace {

bool float_product(const KernelSpec& k) {
  if (!k.contract || k.library || k.row() || k.rbody) return false;
  if (k.body && k.body->op != Op::Acc) return false;  // an epilogue: not fused here
  const Contraction& c = *k.contract;
  if (!c.a_groups.empty() || !c.b_groups.empty()) return false;
  if (c.dtype != DType::Float32 && c.dtype != DType::Float64) return false;
  return c.a_dtype == c.dtype && c.b_dtype == c.dtype && k.out_dtype == c.dtype;
}

// Whether the product is a batch of problems whose right operand (k^T, v) is each problem's
// own: batch axes, none of extent > 1 broadcast in b. The attention kernel packs b once per
// block of rows, as the separate product packs it once per batch element; a b shared by every
// row (a weight matrix: a layer norm between two linear layers is the same chain) would be
// packed again for every block where the separate product packs it once.
bool batched_operand(const KernelSpec& k) {
  const Contraction& c = *k.contract;
  const size_t nd = c.b.shape.size();
  if (nd <= 2) return false;
  for (size_t d = 0; d + 2 < nd; ++d)
    if (c.b.shape[d] > 1 && c.b.strides[d] == 0) return false;
  return true;
}

// The kernels of the schedule that read slot `slot` (once per reading param).
std::vector<int> readers_of(const Schedule& s, int slot) {
  std::vector<int> r;
  for (size_t j = 0; j < s.kernels.size(); ++j)
    for (size_t p = 1; p < s.kernels[j].slots.size(); ++p)
      if (s.kernels[j].slots[p] == slot) r.push_back(static_cast<int>(j));
  return r;
}

std::vector<int> writers_of(const Schedule& s, int slot) {
  std::vector<int> w;
  for (size_t j = 0; j < s.kernels.size(); ++j)
    if (!s.kernels[j].slots.empty() && s.kernels[j].slots[0] == slot)
      w.push_back(static_cast<int>(j));
  return w;
}

bool is_output(const Schedule& s, int slot) {
  return std::find(s.output_slots.begin(), s.output_slots.end(), slot) != s.output_slots.end();
}

// Whether every read of slot `slot` by row kernel `k` is a Load at each element's own index of
// its rows (shape ++ rshape): then row r of the kernel reads row r of the slot only.
bool reads_rows_in_place(const KernelSpec& k, int slot) {
  Shape rows = k.shape;
  rows.insert(rows.end(), k.rshape.begin(), k.rshape.end());
  for (NodeRef root : k.roots())
    for (NodeRef n : toposort({root})) {
      if (n->op == Op::LoadAt && k.slots[static_cast<size_t>(arg_int(n))] == slot) return false;
      if (n->op == Op::Load && k.slots[static_cast<size_t>(arg_load(n).param)] == slot &&
          !reads_own_index(arg_load(n).view, rows))
        return false;
    }
  return true;
}

// The chain ending at product `o` (index into s.kernels), as {scores, weights, o}, or none.
std::optional<std::array<int, 3>> chain_at(const Schedule& s, int o, bool gpu) {
  const KernelSpec& out = s.kernels[static_cast<size_t>(o)];
  if (!float_product(out) || !batched_operand(out)) return std::nullopt;
  const Contraction& oc = *out.contract;
  const int p_slot = out.slots[static_cast<size_t>(oc.a_param)];
  if (out.slots[static_cast<size_t>(oc.b_param)] == p_slot || p_slot < s.n_inputs ||
      is_output(s, p_slot))
    return std::nullopt;
  auto pw = writers_of(s, p_slot);
  if (pw.size() != 1 || readers_of(s, p_slot) != std::vector<int>{o}) return std::nullopt;
  const int w = pw[0];
  const KernelSpec& wk = s.kernels[static_cast<size_t>(w)];
  if (w >= o || !wk.row() || !wk.row_out || wk.contract || wk.library || wk.rbody ||
      wk.rshape.size() != 1 || wk.out_dtype != oc.dtype || wk.reduce_size() > kReduceBlock)
    return std::nullopt;
  const int64_t tk = wk.rshape[0], rows = numel(wk.shape);
  // P [batch..., Tq, Tk] read as written: row r of the weights is row r of the product's a.
  const Shape pa = oc.a_shape();
  if (pa.size() < 2 || pa.back() != tk || tk < 1 || rows < 1 || numel(pa) != rows * tk ||
      !reads_own_index(oc.a, pa))
    return std::nullopt;
  const int64_t tq = pa[pa.size() - 2];
  // S: the one buffer the row kernel reads that a product of the same rows wrote.
  for (size_t p = 1; p < wk.slots.size(); ++p) {
    const int sl = wk.slots[p];
    if (sl < s.n_inputs || is_output(s, sl)) continue;
    auto sw = writers_of(s, sl);
    if (sw.size() != 1 || sw[0] >= w) continue;
    const KernelSpec& sk = s.kernels[static_cast<size_t>(sw[0])];
    if (!float_product(sk) || !batched_operand(sk) || sk.out_dtype != oc.dtype) continue;
    const Shape sa = sk.contract->a_shape();
    if (sk.shape.size() < 2 || sk.shape.back() != tk || sa[sa.size() - 2] != tq ||
        numel(sk.shape) != rows * tk)
      continue;
    // A GPU kernel keeps a block of rows (scores, q) in shared memory: one row must fit.
    if (gpu && gpu_attention_rows(tq, tk, sa.back(), static_cast<int64_t>(wk.stages.size()),
                                  itemsize(oc.dtype)) < 1)
      continue;
    auto sr = readers_of(s, sl);
    if (std::any_of(sr.begin(), sr.end(), [&](int r) { return r != w; })) continue;
    if (!reads_rows_in_place(wk, sl)) continue;
    // The fused kernel runs at o's place: nothing between the scores' product and o may
    // write a slot the parts read (a slot written again: then the parts would read the
    // later value).
    std::vector<int> reads;
    for (int j : {sw[0], w, o})
      for (size_t q = 1; q < s.kernels[static_cast<size_t>(j)].slots.size(); ++q)
        reads.push_back(s.kernels[static_cast<size_t>(j)].slots[q]);
    bool clobbered = false;
    for (int j = sw[0] + 1; j < o && !clobbered; ++j)
      if (j != w)
        clobbered = std::find(reads.begin(), reads.end(),
                              s.kernels[static_cast<size_t>(j)].slots[0]) != reads.end();
    if (clobbered) continue;
    return std::array<int, 3>{sw[0], w, o};
  }
  return std::nullopt;
}

}  // namespace

void fuse_attention(Schedule& s, bool gpu) {
  for (int o = 0; o < static_cast<int>(s.kernels.size()); ++o) {
    auto chain = chain_at(s, o, gpu);
    if (!chain) continue;
    auto [si, wi, oi] = *chain;
    KernelSpec fused;
    fused.shape = s.kernels[static_cast<size_t>(oi)].shape;
    fused.out_dtype = s.kernels[static_cast<size_t>(oi)].out_dtype;
    const int s_slot = s.kernels[static_cast<size_t>(si)].slots[0];
    const int p_slot = s.kernels[static_cast<size_t>(wi)].slots[0];
    fused.slots = {s.kernels[static_cast<size_t>(oi)].slots[0]};
    for (int j : {si, wi, oi}) {
      const auto& sl = s.kernels[static_cast<size_t>(j)].slots;
      for (size_t q = 1; q < sl.size(); ++q)
        if (sl[q] != s_slot && sl[q] != p_slot &&
            std::find(fused.slots.begin(), fused.slots.end(), sl[q]) == fused.slots.end())
          fused.slots.push_back(sl[q]);
    }
    for (int j : {si, wi, oi}) fused.attention.push_back(s.kernels[static_cast<size_t>(j)]);
    s.slots[static_cast<size_t>(s_slot)].numel = 0;
    s.slots[static_cast<size_t>(p_slot)].numel = 0;
    s.kernels[static_cast<size_t>(oi)] = std::move(fused);
    s.kernels.erase(s.kernels.begin() + wi);
    s.kernels.erase(s.kernels.begin() + si);
    o -= 2;  // the fused kernel's index
  }
}

}  // namespace codegen
