// Autodiff: rune::grad, rune::value_and_grad, rune::vjp, rune::jvp over trees of tensors.
// Each traces f over stand-ins into a graph, differentiates the graph with one rule per
// primitive (trace/vjp.cpp), and replays forward and backward through the current
// interpreter: eagerly outside jit, and into the caller's program inside rune::jit (so the
// forward and backward passes compile into one program, and f is traced once per key).
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/tree.h"

namespace rune {

namespace detail {
using FlatFn = std::function<std::vector<nx::Tensor>(const std::vector<nx::Tensor>&)>;
// f's outputs and the gradients of sum_i <outputs[i], cotangents[i]> with respect to `params`.
// With no cotangents, f must return one float scalar and the cotangent is 1.
std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> vjp_flat(
    const char* api, const std::vector<nx::Tensor>& params, const std::vector<std::string>& paths,
    const FlatFn& f, const std::vector<nx::Tensor>* cotangents);
std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> jvp_flat(
    const std::vector<nx::Tensor>& primals, const std::vector<nx::Tensor>& tangents,
    const FlatFn& f);

template <class P>
Flat flat_with_paths(const P& p, std::vector<std::string>& paths) {
  Flat f;
  f.paths = &paths;
  Tree<P>::flatten(p, f, "");
  f.paths = nullptr;
  return f;
}
template <class P>
P rebuild(const std::vector<nx::Tensor>& leaves, const std::vector<int64_t>& tokens) {
  Unflat u{leaves, tokens};
  return Tree<P>::build(u);
}
}  // namespace detail

namespace detail {
// value_and_grad under the entry point name `api` (named in its errors).
template <class F, class P>
std::pair<nx::Tensor, P> value_and_grad_as(const char* api, F&& f, const P& p) {
  std::vector<std::string> paths;
  Flat flat = flat_with_paths(p, paths);
  auto fn = [&](const std::vector<nx::Tensor>& xs) {
    return std::vector<nx::Tensor>{f(rebuild<P>(xs, flat.tokens))};
  };
  auto [outs, grads] = vjp_flat(api, flat.leaves, paths, fn, nullptr);
  return {outs[0], rebuild<P>(grads, flat.tokens)};
}
}  // namespace detail

// The value of f at p (a float scalar) and its gradient, with p's structure.
template <class F, class P>
std::pair<nx::Tensor, P> value_and_grad(F&& f, const P& p) {
  return detail::value_and_grad_as("rune::value_and_grad", std::forward<F>(f), p);
}

// The gradient of f (returning a float scalar) at p, with p's structure.
template <class F, class P>
P grad(F&& f, const P& p) {
  return detail::value_and_grad_as("rune::grad", std::forward<F>(f), p).second;
}

// grad(f) as a function of p.
template <class F>
auto grad(F f) {
  return [f](const auto& p) { return grad(f, p); };
}

// f's output at p and the cotangent-vector product: vjp(f, p, ct) = (f(p), ct^T J).
// f returns a tensor tree R; `ct` has R's structure.
template <class F, class P, class R>
std::pair<R, P> vjp(F&& f, const P& p, const R& ct) {
  std::vector<std::string> paths;
  Flat flat = detail::flat_with_paths(p, paths);
  std::vector<int64_t> out_tokens;
  auto fn = [&](const std::vector<nx::Tensor>& xs) {
    Flat o;
    Tree<R>::flatten(f(detail::rebuild<P>(xs, flat.tokens)), o, "");
    out_tokens = o.tokens;
    return o.leaves;
  };
  Flat cflat;
  Tree<R>::flatten(ct, cflat, "");
  auto [outs, grads] = detail::vjp_flat("rune::vjp", flat.leaves, paths, fn, &cflat.leaves);
  return {detail::rebuild<R>(outs, out_tokens), detail::rebuild<P>(grads, flat.tokens)};
}

// f's output at p and the Jacobian-vector product J t (forward mode), with R's structure.
template <class R, class F, class P>
std::pair<R, R> jvp(F&& f, const P& p, const P& t) {
  Flat flat, tflat;
  Tree<P>::flatten(p, flat, "");
  Tree<P>::flatten(t, tflat, "");
  std::vector<int64_t> out_tokens;
  auto fn = [&](const std::vector<nx::Tensor>& xs) {
    Flat o;
    Tree<R>::flatten(f(detail::rebuild<P>(xs, flat.tokens)), o, "");
    out_tokens = o.tokens;
    return o.leaves;
  };
  auto [outs, tangents] = detail::jvp_flat(flat.leaves, tflat.leaves, fn);
  return {detail::rebuild<R>(outs, out_tokens), detail::rebuild<R>(tangents, out_tokens)};
}

}  // namespace rune
