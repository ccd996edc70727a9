// Control flow over traced bodies (lax.scan, fori_loop, while_loop, cond, switch): each body is
// traced ONCE per call into a graph (trace/control_flow.cpp). Directly inside a trace that
// records loops, a loop is kept whole in one form (Tracer::Loop, trace/structured.h) that each
// transformation runs by its own rule: under rune::jit one loop step of the caller's program
// (trace/staged_program.h: the body's own program runs in the program runner); under rune::vmap
// a batched loop (trace/vmap_loops.h); in a function rune::grad (vjp, value_and_grad)
// differentiates, a scan or fori_loop differentiated as a loop: forward saving each step's
// carry, then a reverse scan of the body's vjp (trace/scan_vjp.h). Elsewhere the
// graph is replayed per iteration through the current interpreter: eagerly outside any trace,
// into the enclosing trace otherwise. docs/compilation.md "Control flow" says what retraces a
// body.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/ops.h"
#include "core/tree.h"
#include "trace/tree_util.h"

namespace rune {

namespace detail {
using FlatBody = std::function<std::vector<nx::Tensor>(const std::vector<nx::Tensor>&)>;

// The carry after `length` steps and the per-step outputs stacked on a new axis 0. body maps
// (carry leaves ++ x leaves at step i) to (new carry leaves ++ y leaves); xs leaves have
// `length` rows on axis 0. carry_paths name the carry's leaves in messages. With counter_lo,
// xs is fori_loop's step counter (counter_lo, counter_lo + 1, ...): a loop step then computes
// each row from its own trip counter instead of reading it.
std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> scan_flat(
    const char* api, const FlatBody& body, const std::vector<nx::Tensor>& init,
    const std::vector<std::string>& carry_paths, const std::vector<nx::Tensor>& xs, int64_t length,
    const int64_t* counter_lo = nullptr);
// x flipped along axis 0; a 0-d x as it is (scan_flat then names it).
nx::Tensor flip_rows(const nx::Tensor& x);
// int32 [lo, lo + 1, ..., hi - 1] on the carry's device (fori_loop's scanned step counter).
nx::Tensor step_counter(int64_t lo, int64_t hi, const std::vector<nx::Tensor>& carry);
std::vector<nx::Tensor> while_flat(const FlatBody& cond, const FlatBody& body,
                                   const std::vector<nx::Tensor>& init,
                                   const std::vector<std::string>& carry_paths);
// Branch `index` of `branches` applied to the operands' leaves; under a trace (a traced index)
// every branch runs and the result is selected element-wise. `index` is a bool scalar for cond
// (true selects branches[0]) or an integer scalar for switch_.
std::vector<nx::Tensor> switch_flat(const char* api, const nx::Tensor& index,
                                    const std::vector<FlatBody>& branches,
                                    const std::vector<nx::Tensor>& operands);

// While alive, traces on this thread are being differentiated (autodiff holds one around the
// trace of f): rune::while_loop raises its "cannot be differentiated" error inside.
class DifferentiatingScope {
 public:
  DifferentiatingScope();
  ~DifferentiatingScope();
  DifferentiatingScope(const DifferentiatingScope&) = delete;
  DifferentiatingScope& operator=(const DifferentiatingScope&) = delete;
};

}  // namespace detail

// lax.scan's options. reverse: the steps visit the rows of xs last to first, and ys[i] is still
// the output of the step that read row i (lax.scan(..., reverse=True)).
struct ScanOptions {
  bool reverse = false;
};

// lax.scan: f(carry, x) -> std::pair<Carry, Y>, over the rows of xs (axis 0 of every leaf of
// the tree X). Returns (final carry, ys) where ys stacks each step's Y on a new axis 0. The
// carry keeps init's structure, dtypes and shapes (a mismatch raises naming the leaf).
template <class F, class C, class X>
auto scan(F f, const C& init, const X& xs, ScanOptions options = {}) {
  using Out = std::decay_t<decltype(f(init, xs))>;
  using Y = typename Out::second_type;
  static_assert(std::is_same_v<std::decay_t<typename Out::first_type>, C>,
                "rune::scan: f(carry, x) returns std::pair<Carry, Y> with init's type as Carry");
  const auto [cflat, cpaths, ctoken_paths] = detail::flatten_with_paths(init);
  Flat xflat;
  Tree<X>::flatten(xs, xflat, "");
  if (xflat.leaves.empty())
    throw std::invalid_argument(
        "rune::scan: xs has no tensors; use rune::fori_loop for a loop "
        "without per-step inputs");
  const int64_t length =
      xflat.leaves[0].shape().empty() ? -1 : xflat.leaves[0].shape()[0];  // -1: checked later
  const size_t n_carry = cflat.leaves.size();
  std::vector<int64_t> y_tokens;
  auto body = [&](const std::vector<nx::Tensor>& in) {
    std::vector<nx::Tensor> c(in.begin(), in.begin() + static_cast<long>(n_carry));
    std::vector<nx::Tensor> x(in.begin() + static_cast<long>(n_carry), in.end());
    Out o = f(detail::rebuild<C>(c, cflat.tokens), detail::rebuild<X>(x, xflat.tokens));
    Flat of;
    Tree<C>::flatten(o.first, of, "");
    if (of.tokens != cflat.tokens)
      throw std::invalid_argument(
          "rune::scan: f returned a carry whose structure differs from "
          "init's");
    Tree<Y>::flatten(o.second, of, "");
    y_tokens.assign(of.tokens.begin() + static_cast<long>(cflat.tokens.size()), of.tokens.end());
    return of.leaves;
  };
  // reverse scans the rows flipped (a view: nothing is copied) and flips the stacked outputs
  // back, so under rune::jit it is the same loop step over reversed views.
  if (options.reverse)
    for (auto& x : xflat.leaves) x = detail::flip_rows(x);
  auto [carry, ys] =
      detail::scan_flat("rune::scan", body, cflat.leaves, cpaths, xflat.leaves, length);
  if (options.reverse)
    for (auto& y : ys) y = detail::flip_rows(y);
  return std::pair<C, Y>{detail::rebuild<C>(carry, cflat.tokens), detail::rebuild<Y>(ys, y_tokens)};
}

// lax.fori_loop: carry = body(i, carry) for i in [lo, hi), i an int32 scalar tensor; lo and hi
// are static (part of the program). The body is traced once, not once per i.
template <class F, class C>
C fori_loop(int64_t lo, int64_t hi, F body, const C& init) {
  if (hi < lo)
    throw std::invalid_argument("rune::fori_loop: hi (" + std::to_string(hi) + ") < lo (" +
                                std::to_string(lo) + ")");
  const auto [cflat, cpaths, ctoken_paths] = detail::flatten_with_paths(init);
  const size_t n_carry = cflat.leaves.size();
  auto step = [&](const std::vector<nx::Tensor>& in) {
    std::vector<nx::Tensor> c(in.begin(), in.begin() + static_cast<long>(n_carry));
    C next = body(in[n_carry], detail::rebuild<C>(c, cflat.tokens));
    Flat of;
    Tree<C>::flatten(next, of, "");
    if (of.tokens != cflat.tokens)
      throw std::invalid_argument(
          "rune::fori_loop: body returned a carry whose structure "
          "differs from init's");
    return of.leaves;
  };
  // The step counter is the scanned input: a traced int32 scalar per row of [lo, hi).
  nx::Tensor is = detail::step_counter(lo, hi, cflat.leaves);
  auto carry =
      detail::scan_flat("rune::fori_loop", step, cflat.leaves, cpaths, {is}, hi - lo, &lo).first;
  return detail::rebuild<C>(carry, cflat.tokens);
}

// lax.while_loop: while cond_fn(carry) (a bool scalar) carry = body_fn(carry). Both are traced
// once. Under rune::jit it is one loop step that reads the predicate back each iteration (on a
// GPU a wait per iteration); inside another loop's or branch's body it raises, and it cannot be
// differentiated (as in JAX).
template <class P, class B, class C>
C while_loop(P cond_fn, B body_fn, const C& init) {
  const auto [cflat, cpaths, ctoken_paths] = detail::flatten_with_paths(init);
  auto cond = [&](const std::vector<nx::Tensor>& in) {
    return std::vector<nx::Tensor>{cond_fn(detail::rebuild<C>(in, cflat.tokens))};
  };
  auto body = [&](const std::vector<nx::Tensor>& in) {
    Flat of;
    Tree<C>::flatten(body_fn(detail::rebuild<C>(in, cflat.tokens)), of, "");
    if (of.tokens != cflat.tokens)
      throw std::invalid_argument(
          "rune::while_loop: body_fn returned a carry whose structure "
          "differs from init's");
    return of.leaves;
  };
  return detail::rebuild<C>(detail::while_flat(cond, body, cflat.leaves, cpaths), cflat.tokens);
}

// lax.fori_loop with bounds that are integer scalar tensors. Concrete bounds are read and give
// the loop above. Traced ones (under rune::jit: the trip count is then only known when the
// program runs, and one program serves every bound) make it, as in JAX, a while_loop over
// (i, carry), i int32 from lo while i < hi, which cannot be differentiated.
template <class F, class C>
C fori_loop(const nx::Tensor& lo, const nx::Tensor& hi, F body, const C& init) {
  for (const nx::Tensor* b : {&lo, &hi})
    if (!b->shape().empty() || !ir::is_int(b->dtype()) || b->dtype() == nx::DType::Bool)
      throw std::invalid_argument("rune::fori_loop: bounds must be integer scalars, got " +
                                  b->describe());
  if (!lo.is_traced() && !hi.is_traced()) {  // concrete: the static loop (differentiable)
    const int64_t l = nx::item<int64_t>(lo), h = nx::item<int64_t>(hi);
    return fori_loop(l, std::max(l, h), body, init);
  }
  using IC = std::pair<nx::Tensor, C>;
  auto cond = [&](const IC& s) { return nx::less(s.first, nx::cast(hi, nx::int32)); };
  auto step = [&](const IC& s) { return IC{s.first + 1, body(s.first, s.second)}; };
  return while_loop(cond, step, IC{nx::cast(lo, nx::int32), init}).second;
}

namespace detail {
template <class R, class P, class F>
FlatBody branch_body(const char* api, F& fn, const std::vector<int64_t>& in_tokens,
                     std::vector<int64_t>& out_tokens, bool& seen) {
  return [api, &fn, in_tokens, &out_tokens, &seen](const std::vector<nx::Tensor>& in) {
    Flat of;
    Tree<R>::flatten(fn(rebuild<P>(in, in_tokens)), of, "");
    if (seen && of.tokens != out_tokens)
      throw std::invalid_argument(std::string(api) +
                                  ": the branches return trees of different structures");
    out_tokens = of.tokens;
    seen = true;
    return of.leaves;
  };
}
}  // namespace detail

// lax.cond: true_fn(operands) if pred else false_fn(operands); pred is a bool scalar. Both
// branches are traced (their results must agree in structure, dtypes and shapes); eagerly only
// the taken one runs, under a trace both run and the result is selected (docs/compilation.md).
template <class T, class E, class P>
auto cond(const nx::Tensor& pred, T true_fn, E false_fn, const P& operands) {
  using R = std::decay_t<decltype(true_fn(operands))>;
  static_assert(std::is_same_v<R, std::decay_t<decltype(false_fn(operands))>>,
                "rune::cond: true_fn and false_fn return the same type");
  Flat in;
  Tree<P>::flatten(operands, in, "");
  std::vector<int64_t> out_tokens;
  bool seen = false;
  std::vector<detail::FlatBody> bs{
      detail::branch_body<R, P>("rune::cond", true_fn, in.tokens, out_tokens, seen),
      detail::branch_body<R, P>("rune::cond", false_fn, in.tokens, out_tokens, seen)};
  return detail::rebuild<R>(detail::switch_flat("rune::cond", pred, bs, in.leaves), out_tokens);
}

// lax.switch: branches[index](operands) for an integer scalar index; an index outside
// [0, branches.size()) raises naming it (a check of the compiled program under rune::jit).
template <class R, class P>
R switch_(const nx::Tensor& index, std::vector<std::function<R(const P&)>> branches,
          const P& operands) {
  Flat in;
  Tree<P>::flatten(operands, in, "");
  std::vector<int64_t> out_tokens;
  bool seen = false;
  std::vector<detail::FlatBody> bs;
  for (auto& b : branches)
    bs.push_back(detail::branch_body<R, P>("rune::switch_", b, in.tokens, out_tokens, seen));
  return detail::rebuild<R>(detail::switch_flat("rune::switch_", index, bs, in.leaves), out_tokens);
}

// The iterations that compiled loop steps (a rune::scan, fori_loop or while_loop staged by
// rune::jit as one loop of the program) have run in this process, on every device: how a test tells
// a loop step from an unrolled or eagerly replayed loop (an unrolled loop adds nothing).
size_t loop_step_iterations();

}  // namespace rune
