// Autodiff: rune::grad, rune::value_and_grad, rune::vjp, rune::jvp over trees of tensors.
// Each traces f over stand-ins into a graph, differentiates the graph with one rule per
// primitive (trace/vjp.cpp), and replays forward and backward through the current
// interpreter: eagerly outside jit, and into the caller's program inside rune::jit (so the
// forward and backward passes compile into one program, and f is traced once per key).
#pragma once
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tree.h"
#include "trace/trace_flat.h"
#include "trace/tree_util.h"

namespace rune {

namespace detail {
// f's outputs and the gradients of sum_i <outputs[i], cotangents[i]> with respect to `params`.
// With no cotangents, f must return one float scalar and the cotangent is 1; with has_aux too,
// f's first output is that scalar and the others are returned, not differentiated.
std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> vjp_flat(
    const char* api, const std::vector<nx::Tensor>& params, const std::vector<std::string>& paths,
    const FlatFn& f, const std::vector<nx::Tensor>* cotangents, bool has_aux = false);
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
}  // namespace detail

// Tags for the forms of grad and value_and_grad that JAX spells with keywords.
// has_aux: f returns std::pair<scalar, Aux>; Aux (any tree) is returned beside the gradient.
struct HasAux {};
inline constexpr HasAux has_aux{};
// argnums<I...>: differentiate with respect to f's arguments I... (grad(f, argnums=...)).
template <size_t... I>
struct Argnums {};
template <size_t... I>
inline constexpr Argnums<I...> argnums{};

namespace detail {
template <class T>
inline constexpr bool is_tag = false;
template <>
inline constexpr bool is_tag<HasAux> = true;
template <size_t... I>
inline constexpr bool is_tag<Argnums<I...>> = true;

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

// The same for an f returning std::pair<scalar, Aux>: ((value, aux), gradient).
template <class F, class P>
auto value_and_grad_aux_as(const char* api, F&& f, const P& p) {
  using Out = std::decay_t<decltype(f(p))>;
  static_assert(std::is_same_v<typename Out::first_type, nx::Tensor>,
                "rune: with has_aux, f returns std::pair<nx::Tensor (the scalar), Aux>");
  std::vector<std::string> paths;
  Flat flat = flat_with_paths(p, paths);
  std::vector<int64_t> out_tokens;
  auto fn = [&](const std::vector<nx::Tensor>& xs) {
    Flat o;
    Tree<Out>::flatten(f(rebuild<P>(xs, flat.tokens)), o, "");
    out_tokens = o.tokens;
    return o.leaves;
  };
  auto [outs, grads] = vjp_flat(api, flat.leaves, paths, fn, nullptr, true);
  return std::pair<Out, P>{rebuild<Out>(outs, out_tokens), rebuild<P>(grads, flat.tokens)};
}

// Where J is among I... (its position), or -1.
template <size_t J, size_t... I>
constexpr long position_of() {
  long k = 0, r = -1;
  ((I == J ? r = k : 0, ++k), ...);
  return r;
}
// Argument J of the call: the selected stand-in when J is differentiated, else the caller's.
template <size_t J, size_t... I, class All, class Sel>
decltype(auto) pick(const All& all, const Sel& sel) {
  constexpr long k = position_of<J, I...>();
  if constexpr (k < 0)
    return std::get<J>(all);
  else
    return std::get<static_cast<size_t>(k)>(sel);
}
template <size_t... I, class F, class All, class Sel, size_t... J>
auto call_with(F& f, const All& all, const Sel& sel, std::index_sequence<J...>) {
  return f(pick<J, I...>(all, sel)...);
}
template <size_t... I>
constexpr bool distinct() {
  size_t v[] = {I...};
  for (size_t a = 0; a < sizeof...(I); ++a)
    for (size_t b = a + 1; b < sizeof...(I); ++b)
      if (v[a] == v[b]) return false;
  return true;
}
// value_and_grad of f(args...) with respect to args I...: the gradient is that argument's
// tree for one index, a std::tuple of them for several.
template <size_t... I, class F, class... A>
auto value_and_grad_argnums(const char* api, F& f, const A&... args) {
  static_assert(sizeof...(I) > 0, "rune: argnums needs at least one argument index");
  static_assert(((I < sizeof...(A)) && ...), "rune: an argnums index is past f's arguments");
  static_assert(distinct<I...>(), "rune: argnums lists an argument twice");
  std::tuple<const A&...> all(args...);
  using Sel = std::tuple<std::decay_t<std::tuple_element_t<I, std::tuple<A...>>>...>;
  Sel sel{std::get<I>(all)...};
  auto g = [&](const Sel& s) {
    return call_with<I...>(f, all, s, std::index_sequence_for<A...>{});
  };
  auto [v, gs] = value_and_grad_as(api, g, sel);
  if constexpr (sizeof...(I) == 1)
    return std::make_pair(v, std::get<0>(std::move(gs)));
  else
    return std::make_pair(v, std::move(gs));
}
}  // namespace detail

// The value of f at p (a float scalar) and its gradient, with p's structure.
template <class F, class P>
requires(!detail::is_tag<P>) std::pair<nx::Tensor, P> value_and_grad(F&& f, const P& p) {
  return detail::value_and_grad_as("rune::value_and_grad", std::forward<F>(f), p);
}

// With has_aux: f(p) returns std::pair<scalar, Aux>; the result is ((value, aux), gradient), as
// jax.value_and_grad(f, has_aux=True). Aux is computed once, in the same pass.
template <class F, class P>
auto value_and_grad(F&& f, const P& p, HasAux) {
  return detail::value_and_grad_aux_as("rune::value_and_grad", std::forward<F>(f), p);
}

// The gradient of f (returning a float scalar) at p, with p's structure.
template <class F, class P>
requires(!detail::is_tag<P>) P grad(F&& f, const P& p) {
  return detail::value_and_grad_as("rune::grad", std::forward<F>(f), p).second;
}

// With has_aux: (gradient, aux), as jax.grad(f, has_aux=True).
template <class F, class P>
auto grad(F&& f, const P& p, HasAux) {
  auto [va, g] = detail::value_and_grad_aux_as("rune::grad", std::forward<F>(f), p);
  return std::make_pair(std::move(g), std::move(va.second));
}

// grad(f) as a function of f's arguments: the gradient with respect to the first, as jax.grad's
// default argnums=0 (`rune::grad(loss)(w, x, y)`); the other arguments are constants.
template <class F>
auto grad(F f) {
  return [f](const auto& p, const auto&... rest) mutable {
    if constexpr (sizeof...(rest) == 0)
      return grad(f, p);
    else
      return detail::value_and_grad_argnums<0>("rune::grad", f, p, rest...).second;
  };
}

// value_and_grad(f) as a function of f's arguments: (value, gradient with respect to the first),
// as jax.value_and_grad's default argnums=0.
template <class F>
auto value_and_grad(F f) {
  return [f](const auto& p, const auto&... rest) mutable {
    if constexpr (sizeof...(rest) == 0)
      return value_and_grad(f, p);
    else
      return detail::value_and_grad_argnums<0>("rune::value_and_grad", f, p, rest...);
  };
}

// grad(f, argnums<I...>) as a function of all of f's arguments: the gradient with respect to
// argument I (one index) or a std::tuple of them (several); the other arguments are constants.
template <class F, size_t... I>
auto grad(F f, Argnums<I...>) {
  return [f](const auto&... args) mutable {
    return detail::value_and_grad_argnums<I...>("rune::grad", f, args...).second;
  };
}
// value_and_grad(f, argnums<I...>): (value, gradient) as a function of f's arguments.
template <class F, size_t... I>
auto value_and_grad(F f, Argnums<I...>) {
  return [f](const auto&... args) mutable {
    return detail::value_and_grad_argnums<I...>("rune::value_and_grad", f, args...);
  };
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
