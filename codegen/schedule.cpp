#include "codegen/schedule.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "codegen/decompose.h"
#include "codegen/grouped_view.h"
#include "codegen/schedule_attention.h"
#include "ir/debug.h"
#include "ir/env.h"
#include "ir/rewrite.h"

namespace codegen {

using namespace ir;

size_t KernelSpec::hash() const {
  size_t h = std::hash<const void*>()(rbody) * 31 + std::hash<const void*>()(body);
  for (auto d : shape) h = h * 131 + d;
  for (auto d : rshape) h = h * 137 + d;
  if (contract)
    for (const View* v : {&contract->a, &contract->b}) {
      for (auto d : v->strides) h = h * 139 + static_cast<size_t>(d);
      h = h * 149 + static_cast<size_t>(v->offset);
    }
  if (contract)
    for (const auto* g : {&contract->a_groups, &contract->b_groups})
      for (int n : *g) h = h * 191 + static_cast<size_t>(n);
  if (library) {
    h = (h * 151 + static_cast<size_t>(library->op)) * 157 +
        static_cast<size_t>(library->in_dtype) * 163 + static_cast<size_t>(library->offset);
    if (library->host.fn)
      for (auto w : library->host.fn->key()) h = h * 167 + static_cast<size_t>(w);
  }
  if (contract) h = h * 151 + static_cast<size_t>(contract->a_param * 8 + contract->b_param);
  for (const RowStage& st : stages)
    h = (h * 173 + std::hash<const void*>()(st.rbody)) * 179 + static_cast<size_t>(st.reduce_op);
  if (row_out) h = h * 181 + 1;
  h = h * 197 + static_cast<size_t>(sizes);
  for (const KernelSpec& part : attention) h = h * 193 + part.hash();
  return h ^ (static_cast<size_t>(reduce_op) << 3) ^ static_cast<size_t>(out_dtype);
}

namespace {

// The primitive operations one node of `op` becomes once codegen::decompose has rewritten it
// (a transcendental: its polynomial decomposition; 16-bit floats compute at float32), counted
// once per (op, dtype) on a scalar node over distinct loads; 1 for every op that is not
// decomposed.
int primitive_ops(Op op, DType dtype) {
  if (!op_decomposed(op) || !is_float(dtype)) return 1;
  DType t = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  static std::mutex mu;
  static std::map<std::pair<Op, DType>, int> counted;
  std::lock_guard lock(mu);
  auto [it, fresh] = counted.try_emplace({op, t}, 1);
  if (!fresh) return it->second;
  std::vector<NodeRef> src;
  for (int i = 0; i < op_arity(op); ++i)
    src.push_back(make(Op::Load, t, {}, {}, LoadArg{i + 1, View::contiguous({})}));
  if (NodeRef r = decompose_op(op, src)) {
    int n = 0;
    for (NodeRef x : toposort({r})) n += x->op != Op::Load && x->op != Op::Const;
    it->second = std::max(n, 1);
  }
  return it->second;
}

// Where kernels are cut: fusing a kernel's graph (Scheduler::fuse) stops at the first node (in
// fusing order) that must get a buffer first and names it; that node is materialised (its kernel
// is built first) and the kernel is then fused again from scratch. Each retry follows a new
// materialisation, and a node is materialised at most once, so building a kernel ends.
struct Realize {
  NodeRef node;
};

// The outcome of one step of fusing a kernel: a value, or the node to materialise first.
template <class T>
class OrRealize {
 public:
  OrRealize(T value) : value_(std::move(value)) {}
  OrRealize(Realize r) : need_(r.node) {}
  bool ok() const { return need_ == nullptr; }
  const T& value() const { return *value_; }
  // The node to materialise before the kernel is fused again (null when ok()).
  NodeRef need() const { return need_; }
  // The same request, as the outcome of the step that made this one.
  Realize realize_first() const { return Realize{need_}; }

 private:
  std::optional<T> value_;
  NodeRef need_ = nullptr;
};

struct MemoKey {
  NodeRef node;
  std::vector<NodeRef> mops;
  int space;
  bool operator<(const MemoKey& o) const {
    return std::tie(node, space, mops) < std::tie(o.node, o.space, o.mops);
  }
};

// The rows a row kernel reduces (see Scheduler::row_context).
struct RowContext {
  Shape input;
  std::vector<int64_t> axes;
  Shape outer, rshape;
  std::vector<int> perm;
};

class Scheduler {
 public:
  Scheduler(const std::vector<NodeRef>& roots, int n_inputs, bool fuse_epilogues,
            bool half_operands)
      : roots_(roots), fuse_epilogues_(fuse_epilogues), half_operands_(half_operands) {
    out_.n_inputs = n_inputs;
    for (int i = 0; i < n_inputs; ++i) out_.slots.push_back({DType::Float32, -1});
    std::vector<NodeRef> order = toposort(roots);
    for (auto n : order)
      for (auto s : n->src) consumers_[s].push_back(n);
    post_dominators(order);
    for (size_t i = 0; i < roots.size(); ++i) {
      out_.slots.push_back({roots[i]->dtype, numel(roots[i]->shape)});
      out_.output_slots.push_back(n_inputs + static_cast<int>(i));
    }
  }

  Schedule run() {
    // Host calls first, in the structural order of the graph (a post-order walk from the roots,
    // the same in every process that traced the same function; a call feeding another comes
    // first): order_for_memory keeps their relative order, so processes exchanging data in
    // them (rune::distributed's collectives) make their calls in the same order.
    for (NodeRef n : toposort(roots_))
      if (n->op == Op::HostCall) realize(n);
    for (size_t i = 0; i < roots_.size(); ++i) {
      NodeRef r = roots_[i];
      int slot = out_.output_slots[i];
      auto it = slot_of_.find(r);
      if (r->op == Op::HostCall && it != slot_of_.end() && it->second == slot)
        continue;  // realised first, into its output slot
      if (it != slot_of_.end() || r->op == Op::Param) {
        // Already materialised (an input or an earlier root): copy it into this output.
        NodeRef c = make(Op::Copy, r->dtype, r->shape, {r});
        build_kernel(c, slot);
      } else {
        assign_slot(r, slot);
        build_kernel(r, slot);
      }
    }
    return std::move(out_);
  }

 private:
  int realize(NodeRef n) {
    if (auto it = slot_of_.find(n); it != slot_of_.end()) return it->second;
    int slot = -1;
    for (size_t i = 0; i < roots_.size(); ++i)
      if (roots_[i] == n) slot = out_.output_slots[i];
    if (slot < 0) {
      slot = static_cast<int>(out_.slots.size());
      out_.slots.push_back({n->dtype, numel(n->shape)});
    }
    assign_slot(n, slot);
    build_kernel(n, slot);
    return slot;
  }

  // Records that n is materialised in `slot`. readers() and inlined_into_one_kernel() read
  // slot_of_, so their memos are dropped: a cached answer may count through a node that is now
  // a buffer (only fusion depends on them, never the bits).
  void assign_slot(NodeRef n, int slot) {
    slot_of_[n] = slot;
    readers_.clear();
    private_.clear();
  }

  // How many direct consumers n has (a node reading n twice counts twice).
  size_t direct_users(NodeRef n) const {
    auto it = consumers_.find(n);
    return it == consumers_.end() ? 0 : it->second.size();
  }

  void build_kernel(NodeRef target, int slot) {
    if (op_category(target->op) == OpCategory::Library) return build_library(target, slot);
    // A target whose elementwise graph reads reductions of its own rows broadcast back along
    // them (softmax's x - max, e / sum) is built as a row kernel writing rows: its body runs
    // over outer ++ row. Set by the first attempt that meets such a reduction (row_request_);
    // dropped for good if that attempt ends with no reduction left to fuse.
    std::optional<RowContext> rows;
    bool rows_failed = false;
    for (;;) {
      target_ = target;
      k_ = KernelSpec{};
      k_.shape = target->shape;
      k_.out_dtype = target->dtype;
      k_.slots = {slot};
      memo_.clear();
      stages_.clear();
      fusing_stage_ = nullptr;
      stage_of_.clear();
      row_ = rows;
      row_out_ = rows.has_value();
      row_request_.reset();
      allow_row_out_ = !rows && !rows_failed && row_kernels_;
      if (row_out_) {
        k_.shape = rows->outer;
        k_.rshape = rows->rshape;
        reduce_perm_ = rows->perm;
      }
      NodeRef top = target->op == Op::Copy ? target->src[0] : target;
      OrRealize<NodeRef> body = fuse(top, {}, row_out_ ? 1 : 0);
      if (!body.ok()) {
        if (row_request_) {
          rows = row_request_;  // fuse again as a row kernel
          continue;
        }
        realize(body.need());  // then fuse this kernel again
        continue;
      }
      k_.body = body.value();
      if (row_out_ && stages_.empty()) {
        rows.reset(), rows_failed = true;  // nothing left to fuse: an elementwise kernel
        continue;
      }
      finish_stages();
      if (k_.out_numel() > 0) out_.kernels.push_back(k_);
      return;
    }
  }

  // The kernel's reductions as found: one (not writing rows) is an ordinary reduction kernel,
  // its Acc leaf without arg, exactly as before row kernels existed; more are a row kernel.
  void finish_stages() {
    if (stages_.empty()) return;
    if (stages_.size() == 1 && !row_out_) {
      k_.rbody = stages_[0].rbody;
      k_.reduce_op = stages_[0].reduce_op;
      k_.body = rewrite(k_.body, [](NodeRef n, const std::vector<NodeRef>&) -> NodeRef {
        return n->op == Op::Acc ? make(Op::Acc, n->dtype, {}, {}) : nullptr;
      });
      return;
    }
    k_.stages = stages_;
    k_.row_out = row_out_;
  }

  // A contraction reads its operands through strided views of buffers: movement ops down to an
  // input or a materialised node fold into the view; anything else (a computation, a pad's
  // mask, a reshape no strided view expresses) is materialised first. With `widened` (a GPU
  // schedule's contraction operand), one exact cast of float16 / bfloat16 to float32 among them
  // folds in too: the view is then of the 16-bit buffer, *widened its dtype, and the kernel
  // widens each element as it reads it (movement ops and an elementwise cast commute).
  // The operand views of a contraction (`grouped`: its M, K and N axes may each span several
  // view axes, codegen/grouped_view.h: the host's gemm packs them through offset tables, the
  // GPU's lowering splits each index over the group's axes), a library kernel or a gather.
  OrRealize<std::pair<int, GroupedView>> operand_view(NodeRef x, DType* widened = nullptr,
                                                      bool grouped = false) {
    std::vector<NodeRef> mops;
    NodeRef s = x;
    for (;;) {
      if (s->op == Op::Param || slot_of_.count(s)) break;
      if (widened && half_operands_ && s->op == Op::Cast && s->dtype == DType::Float32 &&
          is_half(s->src[0]->dtype) && !is_half(*widened)) {
        *widened = s->src[0]->dtype;
        s = s->src[0];
        continue;
      }
      if (!is_movement(s->op) || s->op == Op::Copy || s->op == Op::Pad) break;
      mops.push_back(s);
      // A reshape whose source was copied contiguous (below) reads the copy.
      auto it = reshape_source_.find(s);
      s = it != reshape_source_.end() && slot_of_.count(it->second) ? it->second : s->src[0];
    }
    // The movement ops applied to `base`, innermost first: the view, or the op no view
    // expresses. A grouped view must keep its batch axes whole and have no mask; where it does
    // not, the plain views decide.
    auto through = [&](const View& base, bool groups) {
      GroupedView g = GroupedView::of(base);
      for (size_t i = mops.size(); i-- > 0;) {
        std::optional<GroupedView> r =
            groups ? g.through(mops[i]) : [&]() -> std::optional<GroupedView> {
          auto v = view_through(g.view, mops[i]);
          if (!v) return std::nullopt;
          return GroupedView::of(*v);
        }();
        if (!r) return std::pair<std::optional<GroupedView>, NodeRef>{std::nullopt, mops[i]};
        g = *r;
      }
      return std::pair<std::optional<GroupedView>, NodeRef>{g, nullptr};
    };
    auto usable = [&](const std::optional<GroupedView>& g) {
      if (!g || !g->view.mask.empty()) return false;
      for (size_t d = 0; d + 2 < g->groups.size(); ++d)
        if (g->groups[d] != 1) return false;
      return true;
    };
    auto best = [&](const View& base) {
      if (grouped) {
        auto r = through(base, true);
        if (usable(r.first)) return r;
      }
      return through(base, false);
    };
    // What is under the views is not a buffer yet. Where a strided view of it expresses them,
    // it is materialised as itself and read through them: its kernel keeps its own shape, so a
    // layer norm stays a row kernel under the reshape to the product's rows, and attention's q,
    // k and v are three views of one projection whose bias fuses into the product (not three
    // kernels adding it). Where none does, a computation is materialised in the operand's layout
    // (the views fused into its kernel: one kernel, not a kernel and a copy); a product or a
    // reduction is a kernel of its own anyway: materialised as itself, then copied where the
    // views need it (below).
    if (s->op != Op::Param && !slot_of_.count(s)) {
      const bool viewable = usable(best(View::contiguous(s->shape)).first);
      return Realize{viewable || is_reduce_or_contract(s) ? s : x};
    }
    int slot = s->op == Op::Param ? static_cast<int>(arg_load(s).param) : slot_of_.at(s);
    View v = s->op == Op::Param ? arg_load(s).view : View::contiguous(s->shape);
    auto [g, failed] = best(v);
    if (failed) {
      // No strided view expresses this reshape (or windows of a padded axis): copy its source
      // contiguous (as leaf_view does) and read the copy through it and the views above it.
      // Realising the whole operand instead copied the copy again (attention's heads joined
      // for the output projection: a permute copy, then a reshape copy of it).
      NodeRef copy = make(Op::Copy, failed->src[0]->dtype, failed->src[0]->shape, {failed->src[0]});
      reshape_source_[failed] = copy;
      return Realize{copy};
    }
    if (!g->view.mask.empty()) return Realize{x};
    return std::pair{slot, *g};
  }

  // A library kernel reads its operand as one contiguous buffer (from any offset): views that
  // keep it contiguous (reshapes, a shrink of the leading axis) fold in; any other layout is
  // copied to contiguous memory first.
  void build_library(NodeRef target, int slot) {
    NodeRef x = target->src[0];
    OrRealize<std::pair<int, GroupedView>> op = operand_view(x);
    while (!op.ok()) {
      realize(op.need());
      op = operand_view(x);
    }
    auto [sx, gx] = op.value();
    View vx = gx.view;
    bool contiguous = vx.shape == x->shape && vx.mask.empty();
    auto cs = contiguous_strides(x->shape);
    for (size_t d = 0; d < x->shape.size() && contiguous; ++d)
      if (x->shape[d] != 1 && vx.strides[d] != cs[d]) contiguous = false;
    if (!contiguous) {
      NodeRef copy = make(Op::Copy, x->dtype, x->shape, {x});
      sx = realize(copy);
      vx = View::contiguous(x->shape);
    }
    k_ = KernelSpec{};
    k_.shape = target->shape;
    k_.out_dtype = target->dtype;
    k_.slots = {slot, sx};
    k_.library = LibraryCall{target->op, x->dtype, vx.offset};
    if (target->op == Op::HostCall) {
      // Always a step, even over no elements: the function may talk to other processes.
      k_.library->host = std::get<HostFnArg>(target->arg);
      k_.library->in_shape = x->shape;
      out_.kernels.push_back(k_);
      return;
    }
    if (numel(k_.shape) > 0) out_.kernels.push_back(k_);
  }

  // Whether broadcasting n's source would recompute an elementwise computation for every copy:
  // then the source is materialised once instead (loads of inputs and constants broadcast for
  // free).
  // Returns that computation (the node to materialise), or nullptr.
  NodeRef expanded_computation(NodeRef n) {
    if (numel(n->shape) <= numel(n->src[0]->shape)) return nullptr;
    NodeRef s = n->src[0];
    while (is_movement(s->op) && s->op != Op::Copy && s->op != Op::Pad && !slot_of_.count(s))
      s = s->src[0];
    if (slot_of_.count(s) || op_category(s->op) == OpCategory::Leaf) return nullptr;
    if (s->op == Op::Cast && (s->src[0]->op == Op::Param || slot_of_.count(s->src[0])))
      return nullptr;
    return is_elementwise(s->op) ? s : nullptr;
  }

  // Elementwise work that several consumers read is computed once (materialised) when a
  // kernel would inline at least this many distinct computing nodes to recompute it. Below, a
  // recomputation in each consumer is cheaper than a buffer round trip (a scale and shift, a
  // mask of a compare); above, it multiplies its work by its readers, and transitively: a
  // dropout mask (a threefry stream, ~130 integer ops) read by the forward and the backward
  // pass, or a residual stream read by the next layer norm and the next residual add, was
  // recomputed by every later kernel of a transformer step (issue 18: 60% of the GPT step).
  // Materialising never changes bits: a fused kernel rounds every op to its dtype, as the
  // buffer does.
  static constexpr int kRecomputeLimit = 48;
  // The same when recomputing it would read at least this many buffers that earlier kernels
  // computed: each reader would load all of them again, and would keep every one of them alive
  // until the last reader's kernel ran (temporaries are placed by their lifetimes,
  // runtime/temp_placement.h). A running sum over layers (the residual stream's gradient in a
  // backward pass: each layer adds its term to the next layer's) is then stored every few
  // layers, and its terms die there, instead of all living to the last layer's kernel. Program
  // inputs do not count: they are alive for the whole run anyway. Three is where storing
  // never costs traffic: two readers recomputing load 2 x 3 buffers; storing loads 3, writes 1
  // and each reader loads 1 (6 either way); more readers or buffers favour the store. Only
  // values of at least kStoredBytes: below, a kernel launch costs more than the memory and
  // traffic it saves (the small training steps of the samples keep their kernels).
  static constexpr int kRecomputeBufferLimit = 3;
  static constexpr int64_t kStoredBytes = 16 << 10;
  // The same, for values of at least kStoredBytes, when the work to recompute it, counted in
  // the primitive operations codegen::decompose turns it into, reaches kRecomputeLimit: a
  // transcendental is dozens of them (float64 exp: 59), so softmax's exp(x - max), read by the
  // row sum and by the division, is computed once instead of twice (float32 exp, 34 with fused
  // multiply-adds, is below the limit and is recomputed by both readers). Storing costs a
  // write and a read per element, which a 2-core host or a GPU covers with about 40-55 simple
  // operations of compute (docs/compilation.md, "Program memory"); smaller values keep the old rule
  // so the small steps keep their kernels.

  bool costly_to_recompute(NodeRef n) {
    std::unordered_set<NodeRef> seen;
    std::vector<NodeRef> stack{n};
    const bool large = numel(n->shape) * itemsize(n->dtype) >= kStoredBytes;
    int ops = 0, buffers = 0, decomposed_ops = 0;
    while (!stack.empty()) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      if (x != n && slot_of_.count(x)) {  // a buffer: a load
        if (x->op != Op::Param && ++buffers >= kRecomputeBufferLimit && large) return true;
        continue;
      }
      switch (op_category(x->op)) {
        case OpCategory::Unary:
        case OpCategory::Binary:
        case OpCategory::Ternary:
          if (++ops >= kRecomputeLimit) return true;
          decomposed_ops += primitive_ops(x->op, x->dtype);
          if (large && decomposed_ops >= kRecomputeLimit) return true;
          break;
        case OpCategory::Movement:
          if (x->op == Op::Copy) continue;  // materialised where it is read
          break;
        case OpCategory::Gather:
          stack.push_back(x->src[1]);  // the index computation fuses; the table is a load
          continue;
        default:
          continue;  // leaves, and reductions, products and library calls (their own kernels)
      }
      for (auto s : x->src) stack.push_back(s);
    }
    return false;
  }

  // The immediate post-dominator of every node (the nearest node every path from it to a
  // root passes through; null: the program's exit, for roots and nodes reaching several roots
  // apart), in consumers-first order (Cooper, Harvey and Kennedy's intersection on depths).
  void post_dominators(const std::vector<NodeRef>& order) {
    std::unordered_set<NodeRef> is_root(roots_.begin(), roots_.end());
    auto intersect = [&](NodeRef a, NodeRef b) {
      while (a != b) {
        if (!a || !b) return NodeRef{nullptr};
        if (pdom_depth_[a] >= pdom_depth_[b])
          a = ipdom_[a];
        else
          b = ipdom_[b];
      }
      return a;
    };
    for (size_t i = order.size(); i-- > 0;) {
      NodeRef n = order[i];
      NodeRef d = nullptr;
      auto it = consumers_.find(n);
      if (!is_root.count(n) && it != consumers_.end() && !it->second.empty()) {
        d = it->second[0];
        for (size_t c = 1; c < it->second.size() && d; ++c) d = intersect(d, it->second[c]);
      }
      ipdom_[n] = d;
      pdom_depth_[n] = d ? pdom_depth_[d] + 1 : 1;
    }
  }

  // Whether every reader of n leads, through computations and views a kernel inlines, to one
  // node (n's immediate post-dominator): then n is computed in that node's kernel only (the
  // memo of a kernel computes each node once), however many readers it has: the lanes of a
  // threefry round, the difference a variance squares.
  bool inlined_into_one_kernel(NodeRef n) {
    if (auto it = private_.find(n); it != private_.end()) return it->second;
    NodeRef p = ipdom_[n];
    bool ok = p != nullptr;
    std::unordered_set<NodeRef> seen;
    std::vector<NodeRef> stack;
    if (ok)
      if (auto it = consumers_.find(n); it != consumers_.end()) stack = it->second;
    while (ok && !stack.empty()) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (x == p || !seen.insert(x).second) continue;
      const OpCategory c = op_category(x->op);
      const bool inlined = c == OpCategory::Unary || c == OpCategory::Binary ||
                           c == OpCategory::Ternary ||
                           (c == OpCategory::Movement && x->op != Op::Copy && x->op != Op::Expand &&
                            x->op != Op::Window);
      if (!inlined || slot_of_.count(x)) {
        ok = false;
        break;
      }
      if (auto it = consumers_.find(x); it != consumers_.end())
        stack.insert(stack.end(), it->second.begin(), it->second.end());
    }
    private_[n] = ok;
    return ok;
  }

  // How many consumers read n's value, counting through views: a reshape or broadcast of n
  // read twice is two readers of n (each inlines n's computation).
  int readers(NodeRef n) {
    if (auto it = readers_.find(n); it != readers_.end()) return it->second;
    int r = 0;
    if (auto it = consumers_.find(n); it != consumers_.end())
      for (NodeRef c : it->second)
        r += is_movement(c->op) && c->op != Op::Copy && !slot_of_.count(c) ? readers(c) : 1;
    for (const NodeRef& root : roots_) r += root == n;
    readers_[n] = r;
    return r;
  }

  // ---- row kernels ----
  static bool one_block_rows(NodeRef n) {
    int64_t r = 1;
    for (auto a : arg_ints(n)) r *= n->src[0]->shape[a];
    return r <= kReduceBlock;
  }

  // The row of a reduction: its input's shape, its axes, its own (outer) shape, the reduced
  // shape, and the permutation moving the reduced axes last.
  RowContext row_context(NodeRef n) const {
    RowContext c;
    NodeRef x = n->src[0];
    c.input = x->shape;
    c.axes = arg_ints(n);
    c.outer = n->shape;
    for (int d = 0; d < static_cast<int>(x->shape.size()); ++d)
      if (std::find(c.axes.begin(), c.axes.end(), d) == c.axes.end()) c.perm.push_back(d);
    for (auto a : c.axes) {
      c.perm.push_back(static_cast<int>(a));
      c.rshape.push_back(x->shape[a]);
    }
    return c;
  }

  // Whether reduction n can be one more stage of this kernel's row: the same input shape and
  // axes (so the same rows, in the same order), rows of one reduction block (each stage then
  // keeps the association order of the reduction kernel it replaces), an outer shape with as
  // many elements, and no reader outside this kernel (it would compute n again).
  bool row_stage(NodeRef n) {
    if (k_.contract) return false;
    const RowContext& c = *row_;
    if (numel(c.rshape) > kReduceBlock || n->src[0]->shape != c.input || arg_ints(n) != c.axes ||
        numel(n->shape) != numel(c.outer))
      return false;
    return n == target_ || only_in_this_kernel(n);
  }

  // Whether every reader of reduction n leads to this kernel's target through values this
  // kernel computes (elementwise ops, views, reductions over the same rows): then n is computed
  // here only. A path to another root, a buffer, a reduction over other rows or a kernel of
  // another kind would compute it again (n then gets a buffer of its own, as a reduction always
  // did).
  bool only_in_this_kernel(NodeRef n) {
    std::unordered_set<NodeRef> seen;
    std::vector<NodeRef> stack{n};
    std::unordered_set<NodeRef> is_root(roots_.begin(), roots_.end());
    while (!stack.empty()) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (x == target_ || !seen.insert(x).second) continue;
      if (x != n) {
        const OpCategory c = op_category(x->op);
        const bool same_rows = c == OpCategory::Reduce && x->src[0]->shape == n->src[0]->shape &&
                               arg_ints(x) == arg_ints(n);
        const bool here = c == OpCategory::Unary || c == OpCategory::Binary ||
                          c == OpCategory::Ternary || same_rows ||
                          (c == OpCategory::Movement && x->op != Op::Copy);
        if (!here || slot_of_.count(x)) return false;
      }
      auto it = consumers_.find(x);
      if (is_root.count(x) || it == consumers_.end() || it->second.empty()) return false;
      stack.insert(stack.end(), it->second.begin(), it->second.end());
    }
    return true;
  }

  // Whether a reduction of the target's graph (not yet a buffer) reads product n: that
  // reduction's kernel reads the product from memory, so the product gets a buffer of its own
  // anyway, and this kernel must not take it as its contraction first: it would keep the target
  // from becoming a row kernel (attention's scores q k^T, scaled and masked, then softmax's max
  // and sum: one row kernel reading the product, instead of a max, a shift, an exp and a sum).
  bool reduced_before_target(NodeRef n) {
    std::unordered_set<NodeRef> graph;
    std::vector<NodeRef> stack{target_};
    while (!stack.empty()) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (!graph.insert(x).second || (x != target_ && (slot_of_.count(x) || x->op == Op::Param)))
        continue;
      for (NodeRef s : x->src) stack.push_back(s);
    }
    std::unordered_set<NodeRef> seen;
    stack = {n};
    while (!stack.empty()) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      auto it = consumers_.find(x);
      if (it == consumers_.end()) continue;
      for (NodeRef c : it->second) {
        if (!graph.count(c) || slot_of_.count(c)) continue;
        if (op_category(c->op) == OpCategory::Reduce) return true;
        stack.push_back(c);
      }
    }
    return false;
  }

  // Whether n (costly, with several readers) is computed once in this kernel anyway: every reader
  // leads to the target through values a row kernel writing the target's rows computes
  // (elementwise ops, views, reductions over those rows). Such a kernel's last stage keeps the
  // value in the output row as it reduces it and the body reads it back (codegen/lower/rows.cpp
  // rows(): softmax's exp(x - shift)), so it needs no buffer of its own: one kernel instead of
  // two, the same bits (every op rounds to its dtype in a kernel as in a buffer). Asked before
  // the row kernel exists (the first attempt, which may still ask for it) and inside it.
  bool computed_once_in_rows(NodeRef n) {
    if (!row_kernels_ || k_.contract || n->shape != target_->shape) return false;
    if (!row_out_ && !(allow_row_out_ && stages_.empty())) return false;
    std::unordered_set<NodeRef> is_root(roots_.begin(), roots_.end());
    std::unordered_set<NodeRef> seen;
    std::vector<NodeRef> stack{n};
    while (!stack.empty()) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (x == target_ || !seen.insert(x).second) continue;
      if (x != n) {
        if (slot_of_.count(x)) return false;
        const OpCategory c = op_category(x->op);
        if (c == OpCategory::Reduce) {
          const bool rows = row_out_ ? row_ && x->src[0]->shape == row_->input &&
                                           arg_ints(x) == row_->axes && only_in_this_kernel(x)
                                     : row_out_candidate(x);
          if (!rows) return false;
        } else if (!(c == OpCategory::Unary || c == OpCategory::Binary ||
                     c == OpCategory::Ternary ||
                     (c == OpCategory::Movement && x->op != Op::Copy))) {
          return false;
        }
      }
      auto it = consumers_.find(x);
      if (is_root.count(x) || it == consumers_.end() || it->second.empty()) return false;
      stack.insert(stack.end(), it->second.begin(), it->second.end());
    }
    return true;
  }

  // Whether an elementwise target could be a row kernel writing rows around reduction n: n
  // reduces the target's own shape over its trailing axes (the output is then written row by
  // row, contiguously), rows of one reduction block.
  bool row_out_candidate(NodeRef n) {
    NodeRef x = n->src[0];
    if (x->shape != target_->shape || is_reduce_or_contract(target_)) return false;
    const auto& axes = arg_ints(n);
    const int64_t nd = static_cast<int64_t>(x->shape.size()),
                  na = static_cast<int64_t>(axes.size());
    if (na == 0) return false;
    for (int64_t i = 0; i < na; ++i)
      if (axes[i] != nd - na + i) return false;
    RowContext c = row_context(n);
    if (numel(c.rshape) > kReduceBlock) return false;
    return only_in_this_kernel(n);
  }
  static bool is_reduce_or_contract(NodeRef n) {
    OpCategory c = op_category(n->op);
    return c == OpCategory::Reduce || c == OpCategory::Contract;
  }

  // Whether n's value, seen through `mops` in iteration space `space`, is read at the kernel's
  // outer index: in space 0 the view of n is the contiguous view of the outer shape; in space 1
  // it is that, broadcast along the row (stride 0 over rshape). Then n's value is its stage's
  // result.
  bool reads_per_row(NodeRef n, const std::vector<NodeRef>& mops, int space) {
    if (numel(n->shape) != numel(k_.shape)) return false;
    auto saved = reshape_source_;
    OrRealize<View> v = leaf_view(View::contiguous(n->shape), mops, space);
    reshape_source_ = std::move(saved);
    if (!v.ok()) return false;
    const View& w = v.value();
    const size_t no = k_.shape.size();
    if (w.offset != 0 || w.shape.size() != no + (space == 1 ? k_.rshape.size() : 0)) return false;
    for (size_t d = 0; d < w.mask.size(); ++d)
      if (w.mask[d].first > 0 || w.mask[d].second < w.shape[d]) return false;
    auto cs = contiguous_strides(k_.shape);
    for (size_t d = 0; d < no; ++d)
      if (k_.shape[d] != 1 && w.strides[d] != cs[d]) return false;
    for (size_t d = no; d < w.shape.size(); ++d)
      if (w.shape[d] != 1 && w.strides[d] != 0) return false;
    return true;
  }

  // Adds reduction n as the next stage (after the stages its body reads, found while fusing
  // it); its value is the Acc leaf naming it.
  OrRealize<NodeRef> add_stage(NodeRef n) {
    NodeRef outer_stage = fusing_stage_;
    fusing_stage_ = n;
    OrRealize<NodeRef> rbody = fuse(n->src[0], {}, 1);
    fusing_stage_ = outer_stage;
    if (!rbody.ok()) return rbody;
    const int index = static_cast<int>(stages_.size());
    stages_.push_back({n->op, rbody.value()});
    stage_of_[n] = index;
    return make(Op::Acc, n->dtype, {}, {}, int64_t{index});
  }

  // Whether the elementwise computation c (an expanded value: materialised once by default)
  // reads a reduction that can fuse into this kernel's row (or make the target a row kernel):
  // then it is computed in the row kernel instead, once per row and element (a few operations
  // on the stages' results, such as softmax's finite shift or layernorm's rsqrt(var + eps)).
  bool reaches_row_stage(NodeRef c) {
    if (k_.contract || !row_kernels_) return false;
    std::unordered_set<NodeRef> seen;
    std::vector<NodeRef> stack{c};
    while (!stack.empty()) {
      NodeRef x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second || slot_of_.count(x)) continue;
      const OpCategory cat = op_category(x->op);
      if (cat == OpCategory::Reduce) {
        if (stage_of_.count(x)) return true;
        if (row_ && row_stage(x)) return true;
        if (!row_ && allow_row_out_ && stages_.empty() && row_out_candidate(x)) return true;
        continue;
      }
      const bool inlined = cat == OpCategory::Unary || cat == OpCategory::Binary ||
                           cat == OpCategory::Ternary ||
                           (cat == OpCategory::Movement && x->op != Op::Copy);
      if (inlined)
        for (NodeRef s : x->src) stack.push_back(s);
    }
    return false;
  }

  int param_for_slot(int slot) {
    for (size_t i = 1; i < k_.slots.size(); ++i)
      if (k_.slots[i] == slot) return static_cast<int>(i);
    k_.slots.push_back(slot);
    return static_cast<int>(k_.slots.size()) - 1;
  }

  // The view of a leaf in the kernel's iteration space: space 0 is shape, space 1 is
  // shape ++ rshape (inside the fused reduction).
  OrRealize<View> leaf_view(View v, const std::vector<NodeRef>& mops, int space) {
    for (size_t i = mops.size(); i-- > 0;) {
      NodeRef m = mops[i];
      auto r = view_through(v, m);
      if (!r) {
        // No strided view expresses this reshape (or these windows): copy its source to
        // contiguous memory.
        NodeRef copy = make(Op::Copy, m->src[0]->dtype, m->src[0]->shape, {m->src[0]});
        reshape_source_[m] = copy;
        return Realize{copy};
      }
      v = *r;
    }
    if (space == 1) {
      // Move the reduced axes last, then insert the kept size-1 axes so the view spans
      // shape ++ rshape.
      v = v.permute(reduce_perm_);
      Shape full = k_.shape;
      full.insert(full.end(), k_.rshape.begin(), k_.rshape.end());
      auto r = v.reshape(full);
      if (!r) {
        // The kernel's outer shape is not the reduction's own (a reduction fused through a
        // reshape of its result, and the stages sharing its rows): a leaf whose view cannot be
        // split that way (a strided input, a permuted source) cannot be read in this space.
        // The reduction whose body is being fused then gets a kernel of its own (its outer
        // shape is its own: every view splits into it) and this kernel reads its buffer.
        // With the kernel's own outer shape the split always exists, so no stage, or a stage
        // that is the target itself, is a broken invariant.
        if (!fusing_stage_ || fusing_stage_ == target_)
          throw std::logic_error("schedule: reduction view reshape failed");
        return Realize{fusing_stage_};
      }
      v = *r;
    }
    return v;
  }

  // The kernel node computing n (seen through the movement ops `mops`, outermost first) in
  // iteration space `space`, or the node to materialise first. Every step that names one
  // returns at once: the first such node in fusing order decides, and the rest of this
  // attempt is discarded (build_kernel starts the kernel again).
  OrRealize<NodeRef> fuse(NodeRef n, const std::vector<NodeRef>& mops, int space) {
    MemoKey key{n, mops, space};
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    OrRealize<NodeRef> r = fuse_uncached(n, mops, space);
    if (r.ok()) memo_[key] = r.value();
    return r;
  }

  OrRealize<NodeRef> fuse_uncached(NodeRef n, const std::vector<NodeRef>& mops, int space) {
    if (n != target_ || n->op == Op::Param) {
      if (auto it = slot_of_.find(n); it != slot_of_.end() || n->op == Op::Param) {
        int slot = n->op == Op::Param ? static_cast<int>(arg_load(n).param) : it->second;
        View base = n->op == Op::Param ? arg_load(n).view : View::contiguous(n->shape);
        int param = param_for_slot(slot);
        OrRealize<View> view = leaf_view(base, mops, space);
        if (!view.ok()) return view.realize_first();
        return make(Op::Load, n->dtype, {}, {}, LoadArg{param, view.value()});
      }
    }
    auto with = [&](NodeRef m) {
      auto v = mops;
      v.push_back(m);
      return v;
    };
    switch (op_category(n->op)) {
      case OpCategory::Leaf:
        if (n->op == Op::Const) return make(Op::Const, n->dtype, {}, {}, n->arg);
        if (n->op == Op::Iota) {
          View v{n->shape, Shape(n->shape.size(), 0), 0, {}};
          v.strides[arg_int(n)] = 1;
          OrRealize<View> view = leaf_view(v, mops, space);
          if (!view.ok()) return view.realize_first();
          return make(Op::Index, DType::Int64, {}, {}, view.value());
        }
        break;
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Ternary: {
        if (n != target_ && readers(n) >= 2 && !inlined_into_one_kernel(n) &&
            costly_to_recompute(n) && !computed_once_in_rows(n))
          return Realize{n};
        std::vector<NodeRef> src;
        for (auto s : n->src) {
          OrRealize<NodeRef> l = fuse(s, mops, space);
          if (!l.ok()) return l;
          src.push_back(l.value());
        }
        return make(n->op, n->dtype, {}, std::move(src), n->arg);
      }
      case OpCategory::Movement:
        if (n->op == Op::Copy) return Realize{n};
        if (n->op == Op::Expand || n->op == Op::Window) {
          // Overlapping windows read each element several times, as an expand does.
          if (NodeRef c = expanded_computation(n); c && !reaches_row_stage(c)) return Realize{c};
        }
        if (n->op == Op::Reshape || n->op == Op::Window) {
          auto it = reshape_source_.find(n);
          NodeRef src = it == reshape_source_.end() ? n->src[0] : it->second;
          return fuse(src, with(n), space);
        }
        if (n->op == Op::Pad) {
          // Padding reads zero outside the source: the mask guards the loads below it, and a
          // where() gives zero there even when the padded expression is not zero at zero.
          View region = View::contiguous(n->src[0]->shape).pad(arg_pairs(n));
          OrRealize<View> valid_view = leaf_view(region, mops, space);
          if (!valid_view.ok()) return valid_view.realize_first();
          NodeRef valid = make(Op::Valid, DType::Bool, {}, {}, valid_view.value());
          OrRealize<NodeRef> inner = fuse(n->src[0], with(n), space);
          if (!inner.ok()) return inner;
          NodeRef zero = is_float(n->dtype) ? make(Op::Const, n->dtype, {}, {}, 0.0)
                                            : make(Op::Const, n->dtype, {}, {}, int64_t{0});
          return make(Op::Where, n->dtype, {}, {valid, inner.value(), zero});
        }
        return fuse(n->src[0], with(n), space);
      case OpCategory::Reduce: {
        if (auto it = stage_of_.find(n); it != stage_of_.end()) {
          if (!reads_per_row(n, mops, space)) return Realize{n};
          return make(Op::Acc, n->dtype, {}, {}, int64_t{it->second});
        }
        // The kernel's first reduction, read at the output's own index (also through reshapes
        // that keep it there, such as logsumexp's dropping of the kept axes, where its rows
        // could be a row kernel's: of one reduction block), where no other kernel reads it
        // (each would compute it again).
        bool fusable = space == 0 && stages_.empty() && !row_out_ && !k_.contract &&
                       (mops.empty() ? n->shape == k_.shape
                                     : row_kernels_ && one_block_rows(n) &&
                                           only_in_this_kernel(n) && reads_per_row(n, mops, 0)) &&
                       (n == target_ || direct_users(n) <= 1);
        if (fusable) {
          row_ = row_context(n);
          k_.rshape = row_->rshape;
          reduce_perm_ = row_->perm;
          return add_stage(n);
        }
        if (row_kernels_ && row_ && row_stage(n) && reads_per_row(n, mops, space))
          return add_stage(n);
        // The first reduction of an elementwise target, read broadcast along its own rows:
        // build the target again as a row kernel.
        if (allow_row_out_ && space == 0 && !k_.contract && stages_.empty() &&
            row_out_candidate(n)) {
          RowContext c = row_context(n);
          row_ = c, k_.shape = c.outer, k_.rshape = c.rshape, reduce_perm_ = c.perm;
          bool per_row = reads_per_row(n, mops, 1);
          row_.reset(), k_.shape = target_->shape, k_.rshape.clear();
          if (per_row) {
            row_request_ = c;
            return Realize{n};  // not materialised: build_kernel starts the row kernel
          }
        }
        return Realize{n};
      }
      case OpCategory::Contract:
        return fuse_contraction(n, mops, space);
      case OpCategory::Library:
        return Realize{n};  // a sort or a scan is a kernel of its own
      case OpCategory::Gather:
        return fuse_gather(n, mops, space);
      case OpCategory::Kernel:
        break;
    }
    throw std::logic_error("schedule: cannot fuse " + std::string(op_name(n->op)));
  }

  // A contraction (fuse_uncached): the kernel's product, or the node to materialise.
  OrRealize<NodeRef> fuse_contraction(NodeRef n, const std::vector<NodeRef>& mops, int space) {
    // A kernel of its own, whose elementwise consumers at its shape and dtype may fuse as
    // an epilogue on the host (the product is then computed in the output buffer first).
    // A GPU schedule also fuses the rounding of a float32 product to float16 / bfloat16 (the
    // kernel then stores each output rounded once, as nx::matmul defines it).
    const bool rounded = half_operands_ && n->dtype == DType::Float32 && is_half(k_.out_dtype);
    bool fusable = space == 0 && mops.empty() && stages_.empty() && !row_out_ && !k_.contract &&
                   n->shape == k_.shape && (n->dtype == k_.out_dtype || rounded) &&
                   (n == target_ || (fuse_epilogues_ && direct_users(n) <= 1 &&
                                     !(row_kernels_ && reduced_before_target(n))));
    if (!fusable) return Realize{n};
    DType da = n->dtype, db = n->dtype;
    OrRealize<std::pair<int, GroupedView>> a = operand_view(n->src[0], &da, /*grouped=*/true);
    if (!a.ok()) return a.realize_first();
    OrRealize<std::pair<int, GroupedView>> b = operand_view(n->src[1], &db, /*grouped=*/true);
    if (!b.ok()) return b.realize_first();
    auto [sa, va] = a.value();
    auto [sb, vb] = b.value();
    k_.contract = Contraction{va.view,
                              vb.view,
                              va.plain() ? std::vector<int>{} : va.groups,
                              vb.plain() ? std::vector<int>{} : vb.groups,
                              param_for_slot(sa),
                              param_for_slot(sb),
                              n->dtype,
                              da,
                              db};
    return make(Op::Acc, n->dtype, {}, {});
  }

  // A gather (fuse_uncached): a LoadAt of its buffer at the index the kernel computes.
  OrRealize<NodeRef> fuse_gather(NodeRef n, const std::vector<NodeRef>& mops, int space) {
    // out[i] = x[i with i[axis] := clamp(idx[i], 0, extent - 1)] (issue 18 "Indexing"). x
    // is read from a buffer (an input or a materialised node; its movement ops fold into a
    // strided view, anything else is materialised first) at an element index the kernel
    // computes from idx, which fuses like any operand. The index is in range for every idx
    // value, so no load leaves x's storage.
    OrRealize<std::pair<int, GroupedView>> xv = operand_view(n->src[0]);
    if (!xv.ok()) return xv.realize_first();
    OrRealize<NodeRef> idx = fuse(n->src[1], mops, space);
    if (!idx.ok()) return idx;
    auto [sx, gx] = xv.value();
    const View& vx = gx.view;
    const auto axis = static_cast<size_t>(arg_int(n));
    // The offset of every other axis: x's view over the result's shape, axis stride 0.
    View rest{n->shape, vx.strides, vx.offset, {}};
    rest.strides[axis] = 0;
    OrRealize<View> at = leaf_view(rest, mops, space);
    if (!at.ok()) return at.realize_first();
    auto i64 = [](int64_t v) { return make(Op::Const, DType::Int64, {}, {}, v); };
    NodeRef base = make(Op::Index, DType::Int64, {}, {}, at.value());
    NodeRef i =
        make(Op::Min, DType::Int64, {},
             {make(Op::Max, DType::Int64, {}, {idx.value(), i64(0)}), i64(vx.shape[axis] - 1)});
    NodeRef off = make(Op::Add, DType::Int64, {},
                       {base, make(Op::Mul, DType::Int64, {}, {i, i64(vx.strides[axis])})});
    // Under a pad of the result, masked-off positions read element 0 (the pad's where()
    // gives 0 there), as masked loads do.
    if (!at.value().mask.empty())
      off = make(Op::Where, DType::Int64, {},
                 {make(Op::Valid, DType::Bool, {}, {}, at.value()), off, i64(0)});
    return make(Op::LoadAt, n->dtype, {}, {off}, int64_t{param_for_slot(sx)});
  }

  std::vector<NodeRef> roots_;
  bool fuse_epilogues_;
  bool half_operands_;  // a GPU schedule: contractions read float16 / bfloat16 operands
  Schedule out_;
  std::unordered_map<NodeRef, std::vector<NodeRef>> consumers_;
  std::unordered_map<NodeRef, int> readers_;  // memo of readers()
  std::unordered_map<NodeRef, NodeRef> ipdom_;
  std::unordered_map<NodeRef, int> pdom_depth_;
  std::unordered_map<NodeRef, bool> private_;  // memo of inlined_into_one_kernel()
  std::unordered_map<NodeRef, int> slot_of_;
  std::unordered_map<NodeRef, NodeRef> reshape_source_;
  std::map<MemoKey, NodeRef> memo_;
  NodeRef target_ = nullptr;
  KernelSpec k_;
  std::vector<int> reduce_perm_;
  // This attempt's row (set by its first reduction, or by row-out mode) and its reductions.
  std::optional<RowContext> row_;
  bool row_out_ = false;        // the target is built as a row kernel writing rows
  bool allow_row_out_ = false;  // this attempt may ask for that (row_request_)
  std::optional<RowContext> row_request_;
  std::vector<RowStage> stages_;
  std::unordered_map<NodeRef, int> stage_of_;
  NodeRef fusing_stage_ = nullptr;  // the reduction whose body add_stage is fusing
  // RUNE_ROW_KERNELS=0: no row kernels (each reduction a kernel of its own, as before them).
  const bool row_kernels_ = ir::env::integer(ir::env::Var::RowKernels) != 0;
};

}  // namespace

namespace {

// The distinct computing nodes (unary, binary, ternary) of a kernel body.
int count_ops(NodeRef body) {
  if (!body) return 0;
  int n = 0;
  for (NodeRef x : toposort({body})) {
    OpCategory c = op_category(x->op);
    n += c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary;
  }
  return n;
}

std::string slot_list(const std::vector<int>& slots, size_t from) {
  std::string s;
  for (size_t i = from; i < slots.size(); ++i) {
    s += ' ';
    s += std::to_string(slots[i]);
  }
  return s.empty() ? " none" : s;
}

}  // namespace

std::string describe(const KernelSpec& k) {
  std::string s;
  if (k.attention_gradient()) {
    // e.g. "attention gradient float32 [2, 4, 128, 32] from scores [2, 4, 128, 128]: 9 parts
    // (5 products), 4 tiles, writes 3 slots, 5 params"
    const size_t products = static_cast<size_t>(std::count_if(
        k.attention.begin(), k.attention.end(), [](const KernelSpec& p) { return !!p.contract; }));
    const size_t params = k.slots.size() - 1 - k.also_writes.size();
    return "attention gradient " + std::string(name(k.out_dtype)) + " " + to_string(k.shape) +
           " from scores " + to_string(k.attention[0].shape) + ": " +
           std::to_string(k.attention.size()) + " parts (" + std::to_string(products) +
           " products), " + std::to_string(k.attention_tiles.size()) + " tiles, writes " +
           std::to_string(1 + k.also_writes.size()) + " slots, " + std::to_string(params) +
           (params == 1 ? " param" : " params");
  }
  if (k.fused_attention()) {
    // e.g. "attention float32 [2, 4, 128, 32] from scores [2, 4, 128, 128] by ReduceMax then
    // ReduceSum, 4 params, 2+7+8 ops"
    const KernelSpec& w = k.attention[1];
    s = "attention " + std::string(name(k.out_dtype)) + " " + to_string(k.shape) + " from scores " +
        to_string(k.attention[0].shape) + " by ";
    for (size_t i = 0; i < w.stages.size(); ++i)
      s += (i ? " then " : "") + std::string(op_name(w.stages[i].reduce_op));
    const size_t params = k.slots.size() - 1;
    s += ", " + std::to_string(params) + (params == 1 ? " param, " : " params, ");
    for (const RowStage& st : w.stages) s += std::to_string(count_ops(st.rbody)) + "+";
    return s + std::to_string(count_ops(w.body)) + " ops";
  }
  if (k.library)
    s = "library " +
        (k.library->host.fn ? k.library->host.fn->describe() : std::string(op_name(k.library->op)));
  else if (k.contract)
    s = "contract";
  else if (k.rbody)
    s = "reduce";
  else if (k.row())
    s = "row";
  else
    s = "elementwise";
  s += " " + std::string(name(k.out_dtype)) + " " + to_string(k.shape);
  if (k.rbody) s += " over " + to_string(k.rshape) + " by " + std::string(op_name(k.reduce_op));
  if (k.row()) {
    s += " over " + to_string(k.rshape) + " by ";
    for (size_t i = 0; i < k.stages.size(); ++i)
      s += (i ? " then " : "") + std::string(op_name(k.stages[i].reduce_op));
    if (k.row_out) s += ", writes rows";
  }
  size_t params = k.slots.empty() ? 0 : k.slots.size() - 1;
  s += ", " + std::to_string(params) + (params == 1 ? " param" : " params");
  if (k.library) return s;
  s += ", ";
  if (k.rbody) s += std::to_string(count_ops(k.rbody)) + "+";
  for (const RowStage& st : k.stages) s += std::to_string(count_ops(st.rbody)) + "+";
  return s + std::to_string(count_ops(k.body)) + " ops";
}

Schedule schedule(const std::vector<NodeRef>& roots, int n_inputs, bool fuse_epilogues,
                  bool half_operands, bool fuse_attention) {
  Schedule s = Scheduler(roots, n_inputs, fuse_epilogues, half_operands).run();
  // RUNE_FUSE_ATTENTION=0: attention stays three kernels (the same bits). A GPU schedule
  // (half_operands) fuses it into one GPU kernel.
  if (fuse_attention && ir::env::integer(ir::env::Var::FuseAttention) != 0)
    codegen::fuse_attention(s, /*gpu=*/half_operands);
  if (debug_level() >= 3)
    for (size_t i = 0; i < s.kernels.size(); ++i) {
      const KernelSpec& k = s.kernels[i];
      std::fprintf(stderr, "rune: schedule: kernel %zu of %zu: %s; writes slot %d, reads slots%s\n",
                   i, s.kernels.size(), describe(k).c_str(), k.slots.empty() ? -1 : k.slots[0],
                   slot_list(k.slots, 1).c_str());
    }
  return s;
}

}  // namespace codegen
