// The shared part of the lowering passes (codegen/lower.h; one pass per kernel kind, dispatched
// by codegen/lower.cpp): the index arithmetic every pass writes, and `Builder`, the lowered
// kernel under construction with its statement helpers (variables, loops, lets, registers,
// stores, entries, shared memory) and at_index, which writes a kernel expression at an index.
// A pass derives from Builder (or from ReductionBlocks, codegen/lower/reduction_blocks.h) and
// emits its entries in order; the variables are numbered in the order the pass creates them.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/lowered.h"
#include "codegen/plan.h"
#include "ir/builder.h"

namespace codegen::lowering {

using namespace ir;
using lir::Block;
using lir::Loop;
using lir::Stmt;
using lir::VarId;

// ---- index arithmetic (int64 nodes) ----
NodeRef I(int64_t v);
NodeRef add(NodeRef a, NodeRef c);
NodeRef mul(NodeRef a, int64_t s);
NodeRef udiv(NodeRef a, int64_t d);
NodeRef urem(NodeRef a, int64_t d);
// By a value known at run time only (a sized kernel's extents: codegen/lower/sized.cpp).
NodeRef udiv(NodeRef a, NodeRef d);
NodeRef urem(NodeRef a, NodeRef d);
NodeRef min(NodeRef a, NodeRef c);
// Flat index `flat` over `dims` (C order) as one index per dim.
std::vector<NodeRef> unflatten(NodeRef flat, const Shape& dims);
// A view's element offset and mask at index `idx` (one per view dim).
NodeRef offset_of(const View& v, const std::vector<NodeRef>& idx);
NodeRef valid_of(const View& v, const std::vector<NodeRef>& idx);
NodeRef zero(DType t);
// One logical axis of a contraction operand as (extent, stride) pairs of its view axes, slowest
// first: one pair for a plain view, several for a grouped one (codegen/grouped_view.h).
using AxisDims = std::vector<std::pair<int64_t, int64_t>>;
// Axis `axis` of the contraction's operand a (`is_a`) or b, in the operand's logical shape.
AxisDims operand_axis(const Contraction& c, bool is_a, int axis);
// The element offset of index i along such an axis: i * stride for one pair, else the row-major
// split of i over the pairs (the same addresses as the host gemm's offset tables).
NodeRef offset_along(NodeRef i, const AxisDims& dims);
NodeRef load_at(int param, DType t, NodeRef index);
// An operand element read as dtype `from` (a float16 / bfloat16 operand's 16 bits) at the
// product's dtype t: exactly (docs/numerics.md: 16-bit products compute at float32).
NodeRef widen(NodeRef x, DType t);

class Builder {
 public:
  // The kernel's params (param 0 written, the others read, each with the dtype its loads give)
  // and the host entry's range variables lo and hi. `p` must be applicable(k, plan).
  Builder(const KernelSpec& k, const Plan& p);
  lir::Kernel take() { return std::move(out_); }

 protected:
  // ---- variables and statements ----
  VarId var(const std::string& name, DType t = DType::Int64) {
    out_.vars.push_back({name + std::to_string(out_.vars.size()), t});
    return static_cast<VarId>(out_.vars.size() - 1);
  }
  NodeRef V(VarId v) const { return make(Op::Var, out_.vars[v].dtype, {}, {}, int64_t{v}); }
  void emit(Stmt s) { cur_->push_back(std::move(s)); }
  template <class F>
  void loop(VarId v, NodeRef lo, NodeRef hi, Loop kind, F&& body, int64_t step = 1,
            int unroll = 0) {
    Stmt s{Stmt::Kind::For};
    s.var = v, s.a = lo, s.b = hi, s.loop = kind, s.step = step, s.unroll = unroll;
    Block* saved = cur_;
    cur_ = &s.body;
    body();
    cur_ = saved;
    emit(std::move(s));
  }
  template <class F>
  void when(NodeRef cond, F&& body) {
    Stmt s{Stmt::Kind::If};
    s.a = cond;
    Block* saved = cur_;
    cur_ = &s.body;
    body();
    cur_ = saved;
    emit(std::move(s));
  }
  NodeRef let(const std::string& name, NodeRef value);
  VarId reg(const std::string& name, DType t, int64_t count, NodeRef init);
  NodeRef at(VarId r, NodeRef slot) const {
    return make(Op::RegAt, out_.vars[r].dtype, {}, {slot}, int64_t{r});
  }
  void set(VarId r, NodeRef slot, NodeRef value);
  void store(int param, NodeRef index, NodeRef value);
  // Host: fetch the cache line of param[index] for a read soon (lir Stmt::Kind::Prefetch).
  void prefetch(int param, NodeRef index);
  // Work items [0, n): the host entry's range [lo, hi), or a GPU grid-stride loop.
  template <class F>
  void items(int64_t n, F&& body) {
    VarId w = var("w");
    if (p_.gpu)
      loop(w, I(0), I(n), Loop::Grid, [&] { body(V(w)); });
    else
      loop(w, V(lir::kLo), V(lir::kHi), Loop::Serial, [&] { body(V(w)); });
  }
  template <class F>
  void entry(const std::string& suffix, int64_t n, int64_t threads, F&& body) {
    lir::Entry e;
    e.suffix = suffix, e.items = n, e.threads = threads;
    cur_ = &e.body;
    body();
    cur_ = nullptr;
    out_.entries.push_back(std::move(e));
  }

  // A block-shared array and a block barrier (GPU entries with a fixed block size).
  VarId shared(const std::string& name, DType t, int64_t count);
  void barrier() { emit(Stmt{Stmt::Kind::Barrier}); }

  // ---- scalar expressions ----
  // `root` with its kernel leaves at index `idx`: loads read their param at the view's offset
  // (a masked-off element reads nothing and gives 0), Acc leaves become `accs`, and the nodes
  // of `loaded` their values there. Legalised.
  NodeRef at_index(NodeRef root, const std::vector<NodeRef>& idx,
                   const std::vector<NodeRef>& accs = {},
                   const std::map<NodeRef, NodeRef>& loaded = {});

  const KernelSpec& k_;
  Plan p_;
  lir::Kernel out_;
  Block* cur_ = nullptr;
  // Params read and written through a block-shared array instead of global memory (the GPU
  // attention kernel's tile of scores and weights, codegen/lower/attention.cpp): element i of
  // the param is element i - base of `array`, for loads at_index writes (unmasked views only)
  // and for store().
  struct SharedTile {
    VarId array;
    NodeRef base;
  };
  std::map<int, SharedTile> shared_tiles_;
};

}  // namespace codegen::lowering
