#include "codegen/schedule_attention.h"

#include <algorithm>
#include <array>
#include <cstdio>
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

bool also_written(const KernelSpec& k, int slot) {
  return std::find(k.also_writes.begin(), k.also_writes.end(), slot) != k.also_writes.end();
}

// The kernels of the schedule that read slot `slot` (once per reading param).
std::vector<int> readers_of(const Schedule& s, int slot) {
  std::vector<int> r;
  for (size_t j = 0; j < s.kernels.size(); ++j)
    for (size_t p = 1; p < s.kernels[j].slots.size(); ++p)
      if (s.kernels[j].slots[p] == slot && !also_written(s.kernels[j], slot))
        r.push_back(static_cast<int>(j));
  return r;
}

// (An attention gradient kernel writes its also_writes too.)
std::vector<int> writers_of(const Schedule& s, int slot) {
  std::vector<int> w;
  for (size_t j = 0; j < s.kernels.size(); ++j)
    if (!s.kernels[j].slots.empty() &&
        (s.kernels[j].slots[0] == slot || also_written(s.kernels[j], slot)))
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

// ---- the gradient ----

// The number of leading axes of `shape` whose extents multiply to `rows` (>= 1), or -1.
int row_axes(const Shape& shape, int64_t rows) {
  int64_t p = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (p == rows) return static_cast<int>(d);
    p *= shape[d];
    if (p > rows || p == 0) return -1;
  }
  return p == rows ? static_cast<int>(shape.size()) : -1;
}

// Whether `v`, over the index space `space` whose leading axes are `rows` rows, reads each
// index's own row of a buffer of `x` elements per row (at any place in it: a row's own index,
// a broadcast row value, a transposed tile row), whatever the rows around it.
bool row_local(const View& v, const Shape& space, int64_t rows, int64_t x) {
  if (v.shape != space || x < 1) return false;
  for (size_t d = 0; d < v.mask.size(); ++d)
    if (v.mask[d].first > 0 || v.mask[d].second < space[d]) return false;
  const int a = row_axes(space, rows);
  if (a < 0) return false;
  const Shape prefix(space.begin(), space.begin() + a);
  const Shape cs = contiguous_strides(prefix);
  int64_t lo = v.offset, hi = v.offset;
  for (size_t d = 0; d < space.size(); ++d) {
    if (space[d] == 1) continue;
    if (static_cast<int>(d) < a) {
      if (v.strides[d] != cs[d] * x) return false;
    } else {
      (v.strides[d] < 0 ? lo : hi) += (space[d] - 1) * v.strides[d];
    }
  }
  return lo >= 0 && hi < x;
}

// The index space of root `r` of kernel `k`'s loads: shape, or shape ++ rshape for a
// reduction's body and a row kernel's stages (and its body when it writes rows).
Shape load_space(const KernelSpec& k, NodeRef r) {
  Shape sp = k.shape;
  if (r != k.body || k.row_out) sp.insert(sp.end(), k.rshape.begin(), k.rshape.end());
  return sp;
}

// A float product without grouped operands; with `epilogue`, an elementwise epilogue may be
// fused (a row product's: it runs on the block's rows after their product).
bool plain_product(const KernelSpec& k, bool epilogue = false) {
  if (!k.contract || k.library || k.row() || k.rbody || k.fused_attention()) return false;
  if (!epilogue && k.body && k.body->op != Op::Acc) return false;
  const Contraction& c = *k.contract;
  if (!c.a_groups.empty() || !c.b_groups.empty()) return false;
  if (c.dtype != DType::Float32 && c.dtype != DType::Float64) return false;
  return c.a_dtype == c.dtype && c.b_dtype == c.dtype && k.out_dtype == c.dtype;
}

std::vector<int> swap_last_two(size_t n) {
  std::vector<int> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<int>(i);
  std::swap(p[n - 1], p[n - 2]);
  return p;
}

}  // namespace

int64_t GradientLayout::per_row(int slot) const {
  for (const auto& [sl, x] : row_slots)
    if (sl == slot) return x;
  return -1;
}

std::optional<GradientLayout> gradient_layout(const std::vector<KernelSpec>& parts) {
  if (parts.size() < 3 || !plain_product(parts[0])) return std::nullopt;
  GradientLayout g;
  {
    const Shape sa = parts[0].contract->a_shape();
    g.batch = numel(Shape(sa.begin(), sa.end() - 2));
    g.tq = sa[sa.size() - 2];
  }
  const int64_t rows = g.batch * g.tq;
  if (rows < 1) return std::nullopt;
  auto written = [&](int slot) {
    return g.per_row(slot) >= 0 ||
           std::find(g.column_slots.begin(), g.column_slots.end(), slot) != g.column_slots.end();
  };
  auto is_column = [&](int slot) {
    return std::find(g.column_slots.begin(), g.column_slots.end(), slot) != g.column_slots.end();
  };
  // Whether every load of kernel k's expressions (a row kernel's, a product's epilogue) reads
  // a slot a part wrote within its own query row only, and no gather reads one.
  auto rows_read_in_place = [&](const KernelSpec& k) {
    for (NodeRef root : k.roots())
      for (NodeRef n : toposort({root})) {
        if (n->op == Op::LoadAt) {
          if (written(k.slots[static_cast<size_t>(arg_int(n))])) return false;
        } else if (n->op == Op::Load) {
          const int slot = k.slots[static_cast<size_t>(arg_load(n).param)];
          if (is_column(slot)) return false;
          const int64_t x = g.per_row(slot);
          if (x >= 0 && !row_local(arg_load(n).view, load_space(k, root), rows, x)) return false;
        }
      }
    return true;
  };
  for (const KernelSpec& k : parts) {
    if (k.slots.empty() || written(k.slots[0])) return std::nullopt;  // a slot written twice
    if (k.contract) {
      if (!plain_product(k, /*epilogue=*/true)) return std::nullopt;
      const bool epilogue = k.body && k.body->op != Op::Acc;
      const Contraction& c = *k.contract;
      const Shape sa = c.a_shape(), sb = c.b_shape();
      const size_t nd = sa.size();
      if (nd < 2 || numel(Shape(sa.begin(), sa.end() - 2)) != g.batch) return std::nullopt;
      const int64_t m = sa[nd - 2], kk = sa[nd - 1], n = sb[nd - 1];
      const int a_slot = k.slots[static_cast<size_t>(c.a_param)];
      const int b_slot = k.slots[static_cast<size_t>(c.b_param)];
      if (is_column(a_slot) || is_column(b_slot)) return std::nullopt;
      const int64_t xa = g.per_row(a_slot), xb = g.per_row(b_slot);
      // A row product: b no part's; a any buffer, or a part's read along its query rows.
      if (xb < 0 && m == g.tq && (xa < 0 || row_local(c.a, sa, rows, xa)) &&
          (!epilogue || rows_read_in_place(k))) {
        g.roles.push_back(GradientRole::RowProduct);
        g.row_slots.push_back({k.slots[0], n});
        continue;
      }
      // A column product: the sum over k is over the query rows; a part's operand is read
      // along them (a transposed: its rows are k's).
      const auto perm = swap_last_two(nd);
      Shape sat = sa;
      std::swap(sat[nd - 1], sat[nd - 2]);
      if (!epilogue && kk == g.tq && (xa < 0 || row_local(c.a.permute(perm), sat, rows, xa)) &&
          (xb < 0 || row_local(c.b, sb, rows, xb)) && (xa >= 0 || xb >= 0)) {
        g.roles.push_back(GradientRole::ColumnProduct);
        g.column_slots.push_back(k.slots[0]);
        continue;
      }
      return std::nullopt;
    }
    if (k.library || k.fused_attention() || k.reduce_size() > kReduceBlock) return std::nullopt;
    // Its items are whole numbers of them per query row, and so are its outputs.
    if (row_axes(k.shape, rows) < 0 || k.out_numel() % rows != 0 || !rows_read_in_place(k))
      return std::nullopt;
    g.roles.push_back(GradientRole::RowKernel);
    g.row_slots.push_back({k.slots[0], k.out_numel() / rows});
  }
  if (g.roles[0] != GradientRole::RowProduct) return std::nullopt;
  return g;
}

namespace {

std::vector<int> written_by(const KernelSpec& k) {
  std::vector<int> w{k.slots[0]};
  w.insert(w.end(), k.also_writes.begin(), k.also_writes.end());
  return w;
}

bool reads_any(const KernelSpec& k, const std::vector<int>& sl) {
  for (size_t p = 1; p < k.slots.size(); ++p)
    if (std::find(sl.begin(), sl.end(), k.slots[p]) != sl.end() && !also_written(k, k.slots[p]))
      return true;
  return false;
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The members that read, through kernels that are no members, what a member wrote, and the
// members that read what those wrote: a gradient program's backward pass when its dO depends
// on O through the layers after the attention (then the members cannot run as one kernel at
// one place). Ascending; empty when there are none.
std::vector<int> members_after_others(const Schedule& s, const std::vector<int>& members) {
  std::vector<int> member_out, others_out, after, after_out;
  for (int j = 0; j < static_cast<int>(s.kernels.size()); ++j) {
    const KernelSpec& k = s.kernels[static_cast<size_t>(j)];
    const auto w = written_by(k);
    if (contains(members, j)) {
      if (reads_any(k, others_out) || reads_any(k, after_out)) {
        after.push_back(j);
        after_out.insert(after_out.end(), w.begin(), w.end());
      }
      member_out.insert(member_out.end(), w.begin(), w.end());
    } else if (reads_any(k, member_out) || reads_any(k, others_out)) {
      others_out.insert(others_out.end(), w.begin(), w.end());
    }
  }
  return after;
}

struct Made {
  KernelSpec kernel;
  std::vector<int> placed;  // the kernels it replaces (ascending)
  std::vector<int> moved;   // the kernels that move after it (ascending)
  std::vector<int> again;   // its tiles that the forward's kernels still write
};

// The attention gradient kernel grown from the scores' product `si` (a product writing
// [.., Tq, Tk] scores); or none.
std::optional<Made> gradient_at(const Schedule& s, int si) {
  const size_t n = s.kernels.size();
  const KernelSpec& sk = s.kernels[static_cast<size_t>(si)];
  if (!plain_product(sk) || !batched_operand(sk)) return std::nullopt;
  const int s_slot = sk.slots[0];
  if (s_slot < s.n_inputs || is_output(s, s_slot)) return std::nullopt;
  // Who reads and writes each slot, once.
  std::vector<std::vector<int>> rd(s.slots.size()), wr(s.slots.size());
  for (size_t j = 0; j < n; ++j) {
    const KernelSpec& k = s.kernels[j];
    if (k.slots.empty()) continue;
    for (int w : written_by(k)) wr[static_cast<size_t>(w)].push_back(static_cast<int>(j));
    for (size_t p = 1; p < k.slots.size(); ++p)
      if (!also_written(k, k.slots[p]))
        rd[static_cast<size_t>(k.slots[p])].push_back(static_cast<int>(j));
  }
  auto readers = [&](int slot) -> const std::vector<int>& { return rd[static_cast<size_t>(slot)]; };
  auto writers = [&](int slot) { return wr[static_cast<size_t>(slot)].size(); };
  // (A forward pass alone reads S once: fuse_attention's pattern.)
  if (writers(s_slot) != 1 || readers(s_slot).size() < 2) return std::nullopt;
  const Shape sa = sk.contract->a_shape();
  const int64_t tk = sk.shape.back();
  const int64_t rows = numel(Shape(sa.begin(), sa.end() - 1));  // batch x Tq
  if (rows < 1 || tk < 1 || numel(sk.shape) != rows * tk) return std::nullopt;
  // The members: S's product; every kernel reading a [.., Tq, Tk] value a member writes (the
  // softmax's kernels, P v, dS's row kernel, dS k, dS^T q, P^T dO); a product writing such a
  // value that only members read (dP = dO v^T); and an elementwise or row kernel that reads a
  // row value a member wrote and writes one a member reads (the softmax's shift). `wide`: the
  // [.., Tq, Tk] slots members write.
  std::vector<int> members{si};
  std::vector<int> wide{s_slot}, member_rows;
  // A member's output is a [.., Tq, Tk] value when it has that many elements and is no product
  // over the query rows (k's gradient when D == Tq): a product reading a wide slot as b, or as
  // a other than along its rows.
  auto add = [&](int j) {
    members.push_back(j);
    const KernelSpec& k = s.kernels[static_cast<size_t>(j)];
    if (!k.contract) member_rows.push_back(k.slots[0]);
    if (k.out_numel() != rows * tk) return;
    if (k.contract) {
      const Contraction& c = *k.contract;
      auto in_wide = [&](int param) { return contains(wide, k.slots[static_cast<size_t>(param)]); };
      if (in_wide(c.b_param) || (in_wide(c.a_param) && !row_local(c.a, c.a_shape(), rows, tk)))
        return;
    }
    wide.push_back(k.slots[0]);
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int j = 0; j < static_cast<int>(n); ++j) {
      if (contains(members, j)) continue;
      const KernelSpec& k = s.kernels[static_cast<size_t>(j)];
      if (k.slots.empty() || k.fused_attention()) continue;
      bool join = reads_any(k, wide);
      const int w = k.slots[0];
      const auto& r = readers(w);
      const bool read_by_member =
          std::any_of(r.begin(), r.end(), [&](int x) { return contains(members, x); });
      if (!join && k.contract && w >= s.n_inputs && !is_output(s, w) &&
          k.out_numel() == rows * tk && writers(w) == 1)
        join = !r.empty() &&
               std::all_of(r.begin(), r.end(), [&](int x) { return contains(members, x); });
      if (!join && !k.contract && !k.library && reads_any(k, member_rows) && read_by_member)
        join = true;
      if (join) {
        add(j);
        changed = true;
      }
    }
  }
  if (members.size() < 3) return std::nullopt;
  // `placed`: the members the kernel replaces. When the backward pass (`after`) depends on the
  // forward pass through other kernels (dO on O), it is the backward pass alone, and the
  // forward's kernels writing the [.., Tq, Tk] values it reads (S, the exponentials, P) are
  // computed again as its parts (`again`: the same kernels, so the same bits), reading the
  // forward's row values (its maxima, sums) from memory; the forward's kernels stay, for a
  // later call to fuse on their own.
  std::vector<int> placed = members, again;
  if (auto after = members_after_others(s, members); !after.empty()) {
    auto from_forward = [&](int slot) {
      const auto& w = wr[static_cast<size_t>(slot)];
      return contains(wide, slot) && w.size() == 1 && contains(members, w[0]) &&
             !contains(after, w[0]);
    };
    std::vector<int> need;
    for (int j : after)
      for (size_t p = 1; p < s.kernels[static_cast<size_t>(j)].slots.size(); ++p)
        if (int sl = s.kernels[static_cast<size_t>(j)].slots[p];
            from_forward(sl) && !contains(need, sl))
          need.push_back(sl);
    for (size_t i = 0; i < need.size(); ++i) {
      const int j = wr[static_cast<size_t>(need[i])][0];
      if (contains(again, j)) continue;
      again.push_back(j);
      for (size_t p = 1; p < s.kernels[static_cast<size_t>(j)].slots.size(); ++p)
        if (int sl = s.kernels[static_cast<size_t>(j)].slots[p];
            from_forward(sl) && !contains(need, sl))
          need.push_back(sl);
    }
    if (!contains(again, si)) return std::nullopt;
    placed = after;
    members = again;
    members.insert(members.end(), after.begin(), after.end());
  }
  // The parts: S first, then the others in the scheduler's order.
  std::sort(members.begin(), members.end());
  std::vector<KernelSpec> parts{s.kernels[static_cast<size_t>(si)]};
  for (int j : members)
    if (j != si) parts.push_back(s.kernels[static_cast<size_t>(j)]);
  auto layout = gradient_layout(parts);
  if (!layout) return std::nullopt;
  std::vector<int> again_out;  // the slots of the forward's values computed again
  for (int j : again) again_out.push_back(s.kernels[static_cast<size_t>(j)].slots[0]);
  // Tiles: what row parts write that only members read, no output. The rest the kernel writes
  // to memory: the column products' results and the values read later (y, dq).
  KernelSpec g;
  std::vector<int> outs;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int w = parts[i].slots[0];
    if (writers(w) != 1) return std::nullopt;  // each written by its member alone
    bool tile = contains(again_out, w);
    if (!tile && layout->roles[i] != GradientRole::ColumnProduct && w >= s.n_inputs &&
        !is_output(s, w)) {
      const auto& r = readers(w);
      tile = std::all_of(r.begin(), r.end(), [&](int x) { return contains(members, x); });
    }
    (tile ? g.attention_tiles : outs).push_back(w);
  }
  if (outs.empty() || !contains(g.attention_tiles, s_slot)) return std::nullopt;
  // The kernel runs at the last member's place. Between the first member and it, the kernels
  // that read what a member wrote (or what such a kernel wrote) move after it, in their order
  // (none feeds a member: depends_through_others); the others stay, and may not write what a
  // member before them reads or what a member writes. Nothing after a moved kernel in that
  // range may write what it reads or writes.
  std::vector<int> writes = outs, moved, moved_writes;
  for (int t : g.attention_tiles)
    if (!contains(again_out, t)) writes.push_back(t);
  const int first = members.front(), last = placed.back();
  for (int j = first + 1; j < last; ++j) {
    if (contains(members, j)) continue;
    const KernelSpec& k = s.kernels[static_cast<size_t>(j)];
    const auto kw = written_by(k);
    for (int w : kw) {
      if (contains(writes, w)) return std::nullopt;
      for (int m : moved)
        if (reads_any(s.kernels[static_cast<size_t>(m)], {w}) ||
            contains(written_by(s.kernels[static_cast<size_t>(m)]), w))
          if (!reads_any(k, writes) && !reads_any(k, moved_writes)) return std::nullopt;
    }
    if (reads_any(k, writes) || reads_any(k, moved_writes)) {
      moved.push_back(j);
      moved_writes.insert(moved_writes.end(), kw.begin(), kw.end());
      continue;
    }
    for (int w : kw)
      for (int m : members)
        if (m < j && reads_any(s.kernels[static_cast<size_t>(m)], {w})) return std::nullopt;
  }
  // The kernel: slots[0] the last output, then what the parts read that they do not write,
  // then the other outputs.
  const int main_out = outs.back();
  for (const KernelSpec& k : parts)
    if (k.slots[0] == main_out) {
      g.shape = k.shape;
      g.out_dtype = k.out_dtype;
      if (k.row_out) g.shape.insert(g.shape.end(), k.rshape.begin(), k.rshape.end());
    }
  g.slots = {main_out};
  std::vector<int> part_outs;
  for (const KernelSpec& k : parts) part_outs.push_back(k.slots[0]);
  for (const KernelSpec& k : parts)
    for (size_t p = 1; p < k.slots.size(); ++p)
      if (!contains(part_outs, k.slots[p]) && !contains(g.slots, k.slots[p]))
        g.slots.push_back(k.slots[p]);
  for (int w : outs)
    if (w != main_out) {
      g.slots.push_back(w);
      g.also_writes.push_back(w);
    }
  g.attention = std::move(parts);
  return Made{std::move(g), placed, moved, again_out};
}

}  // namespace

void fuse_attention_gradient(Schedule& s) {
  for (int si = 0; si < static_cast<int>(s.kernels.size()); ++si) {
    auto made = gradient_at(s, si);
    if (!made) continue;
    const Made& m = *made;
    // The schedule without the kernels it replaces, the new kernel at the last one's place
    // and the moved kernels after it.
    std::vector<KernelSpec> kernels;
    const int last = m.placed.back();
    for (int j = 0; j < static_cast<int>(s.kernels.size()); ++j) {
      if (!contains(m.placed, j) && !contains(m.moved, j))
        kernels.push_back(std::move(s.kernels[static_cast<size_t>(j)]));
      if (j == last) {
        kernels.push_back(m.kernel);
        for (int k : m.moved) kernels.push_back(std::move(s.kernels[static_cast<size_t>(k)]));
      }
    }
    s.kernels = std::move(kernels);
    for (int sl : m.kernel.attention_tiles)
      if (!contains(m.again, sl)) s.slots[static_cast<size_t>(sl)].numel = 0;
    si = -1;  // indices moved: look again from the start (a fused product is no candidate)
  }
}

void fuse_attention(Schedule& s, bool gpu) {
  if (!gpu) fuse_attention_gradient(s);
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
