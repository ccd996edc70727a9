// rune::vmap (automatic batching) and the jacobians built on it: jacfwd, jacrev, hessian.
// vmap traces f once over one example's stand-ins into a graph, batches the graph with one rule
// per primitive (trace/batching.cpp) and replays it through the current interpreter: eagerly
// outside jit, into the caller's program inside rune::jit or rune::grad. So it composes both
// ways: jit(vmap(f)), vmap(grad(loss)) (per-example gradients), grad(vmap(f)).
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tree.h"
#include "trace/autodiff.h"
#include "trace/trace_flat.h"

namespace rune {

// One argument's batch axis (negative counts from the end), or none: the argument is shared by
// every example (JAX's in_axes=None).
using Axis = std::optional<int64_t>;
inline constexpr std::nullopt_t none = std::nullopt;

// vmap's in_axes: one Axis for every argument (`0`, `1`, `none`), or a list with one per
// argument (`{0, rune::none}`). An argument's axis applies to every leaf of its tree.
struct InAxes {
  std::vector<Axis> axes;
  bool each = false;  // one entry for every argument
  InAxes(int64_t a) : axes{a}, each(true) {}
  InAxes(std::nullopt_t) : axes{std::nullopt}, each(true) {}
  InAxes(std::initializer_list<Axis> l) : axes(l) {}
  InAxes(std::vector<Axis> l) : axes(std::move(l)) {}
};

namespace detail {
// f over batched leaves: leaf i is batched along axes[i] (or shared); every output leaf gets its
// batch axis at out_axes. Errors name `api` and the offending values.
std::vector<nx::Tensor> vmap_flat(const char* api, const std::vector<nx::Tensor>& leaves,
                                  const std::vector<Axis>& axes,
                                  const std::vector<std::string>& paths, const FlatFn& f,
                                  int64_t out_axes);

template <class F, class... A>
auto vmap_call(const char* api, F& f, const InAxes& in_axes, int64_t out_axes, const A&... args) {
  using R = std::decay_t<decltype(f(args...))>;
  constexpr size_t n = sizeof...(A);
  if (!in_axes.each && in_axes.axes.size() != n)
    throw std::invalid_argument(std::string(api) + ": in_axes has " +
                                std::to_string(in_axes.axes.size()) + " entries for " +
                                std::to_string(n) + " arguments");
  Flat flat;
  std::vector<std::string> paths;
  flat.paths = &paths;
  std::vector<std::vector<int64_t>> tokens;
  std::vector<size_t> first_leaf;
  size_t k = 0;
  (
      [&] {
        first_leaf.push_back(flat.leaves.size());
        size_t t0 = flat.tokens.size();
        Tree<A>::flatten(args, flat, std::to_string(k++));
        tokens.emplace_back(flat.tokens.begin() + static_cast<long>(t0), flat.tokens.end());
      }(),
      ...);
  first_leaf.push_back(flat.leaves.size());
  std::vector<Axis> axes;
  for (size_t a = 0; a < n; ++a)
    for (size_t l = first_leaf[a]; l < first_leaf[a + 1]; ++l)
      axes.push_back(in_axes.axes[in_axes.each ? 0 : a]);
  std::vector<int64_t> out_tokens;
  auto fn = [&](const std::vector<nx::Tensor>& xs) {
    auto one = [&](size_t a) {
      return std::vector<nx::Tensor>(xs.begin() + static_cast<long>(first_leaf[a]),
                                     xs.begin() + static_cast<long>(first_leaf[a + 1]));
    };
    auto apply = [&]<size_t... I>(std::index_sequence<I...>) {
      return f(rebuild<std::decay_t<A>>(one(I), tokens[I])...);
    };
    Flat o;
    Tree<R>::flatten(apply(std::index_sequence_for<A...>{}), o, "");
    out_tokens = o.tokens;
    return o.leaves;
  };
  auto outs = vmap_flat(api, flat.leaves, axes, paths, fn, out_axes);
  return rebuild<R>(outs, out_tokens);
}

using TensorFn = std::function<nx::Tensor(const nx::Tensor&)>;
nx::Tensor jacrev_at(const TensorFn& f, const nx::Tensor& x);
nx::Tensor jacfwd_at(const TensorFn& f, const nx::Tensor& x);
}  // namespace detail

// f batched over its arguments' in_axes: vmap(f, in_axes, out_axes)(args...) is f of each
// example, stacked along out_axes of every output leaf, as jax.vmap. f takes trees of tensors
// and returns one. An output that depends on no batched argument is broadcast to the batch.
template <class F>
auto vmap(F f, InAxes in_axes = 0, int64_t out_axes = 0) {
  return [f, in_axes, out_axes](const auto&... args) mutable {
    return detail::vmap_call("rune::vmap", f, in_axes, out_axes, args...);
  };
}

// The Jacobian of f: Tensor -> Tensor at x, of shape f(x).shape ++ x.shape (as JAX's).
// jacrev: one reverse pass (rune::vjp) batched over the outputs' unit cotangents; cheap for
// few outputs. jacfwd: rune::jvp batched over the inputs' unit tangents; jvp is the transpose
// of reverse mode (two reverse passes), so jacfwd costs about twice jacrev for a square f.
template <class F>
auto jacrev(F f) {
  return [f](const nx::Tensor& x) { return detail::jacrev_at(detail::TensorFn(f), x); };
}
template <class F>
auto jacfwd(F f) {
  return [f](const nx::Tensor& x) { return detail::jacfwd_at(detail::TensorFn(f), x); };
}
// The Hessian of a scalar f: jacfwd(jacrev(f)), shape x.shape ++ x.shape.
template <class F>
auto hessian(F f) {
  return jacfwd(jacrev(f));
}

}  // namespace rune
