// Tree utilities (jax.tree_util): leaves, flatten / unflatten and map over the trees rune::jit and
// rune::grad accept (core/tree.h: nx::Tensor, pairs, tuples, vectors, arrays, optionals, static
// integers, RUNE_TREE structs). A tree's leaves are its tensors in flatten order; its structure
// (a TreeDef) is everything else: list lengths, option presence, static values.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tree.h"

namespace rune {

// The structure of a tree without its leaves: equal TreeDefs rebuild the same C++ value shape.
struct TreeDef {
  std::vector<int64_t> tokens;
  size_t num_leaves = 0;
  bool operator==(const TreeDef&) const = default;
};

template <class T>
std::vector<nx::Tensor> tree_leaves(const T& tree) {
  Flat f;
  Tree<T>::flatten(tree, f, "");
  return std::move(f.leaves);
}

template <class T>
std::pair<std::vector<nx::Tensor>, TreeDef> tree_flatten(const T& tree) {
  Flat f;
  Tree<T>::flatten(tree, f, "");
  size_t n = f.leaves.size();
  return {std::move(f.leaves), TreeDef{std::move(f.tokens), n}};
}

// The tree of type T with structure `def` and these leaves (in flatten order).
template <class T>
T tree_unflatten(const TreeDef& def, const std::vector<nx::Tensor>& leaves) {
  if (leaves.size() != def.num_leaves)
    throw std::invalid_argument("rune::tree_unflatten: " + std::to_string(leaves.size()) +
                                " leaves for a structure of " + std::to_string(def.num_leaves));
  Unflat u{leaves, def.tokens};
  return Tree<T>::build(u);
}

namespace detail {
// The tree of type T with the structure `tokens` (a Flat's) and these leaves.
template <class T>
T rebuild(const std::vector<nx::Tensor>& leaves, const std::vector<int64_t>& tokens) {
  Unflat u{leaves, tokens};
  return Tree<T>::build(u);
}

struct FlatWithPaths {
  Flat flat;
  std::vector<std::string> paths, token_paths;
};
template <class T>
FlatWithPaths flatten_with_paths(const T& tree) {
  FlatWithPaths r;
  r.flat.paths = &r.paths;
  r.flat.token_paths = &r.token_paths;
  Tree<T>::flatten(tree, r.flat, "");
  r.flat.paths = nullptr;
  r.flat.token_paths = nullptr;
  return r;
}
// Raises unless `other` (tree number k of the call) has the structure of the first tree.
void check_same_structure(const char* api, size_t k, const FlatWithPaths& first,
                          const FlatWithPaths& other);

// Rebuilds T's structure from make(i, first, others) for each leaf i.
template <class T, class Make, class... Rest>
T tree_map_impl(const char* api, const Make& make, const T& tree, const Rest&... rest) {
  FlatWithPaths first = flatten_with_paths(tree);
  std::vector<FlatWithPaths> others{flatten_with_paths(rest)...};
  for (size_t k = 0; k < others.size(); ++k) check_same_structure(api, k + 1, first, others[k]);
  std::vector<nx::Tensor> out;
  out.reserve(first.flat.leaves.size());
  for (size_t i = 0; i < first.flat.leaves.size(); ++i) out.push_back(make(i, first, others));
  Unflat u{out, first.flat.tokens};
  return Tree<T>::build(u);
}
template <class F, size_t... K>
nx::Tensor call_leaf(F& f, const std::string* path, size_t i, const FlatWithPaths& first,
                     const std::vector<FlatWithPaths>& others, std::index_sequence<K...>) {
  if (path) {
    if constexpr (std::is_invocable_v<F&, const std::string&, const nx::Tensor&,
                                      decltype((void)K, first.flat.leaves[0])...>)
      return f(*path, first.flat.leaves[i], others[K].flat.leaves[i]...);
  } else {
    if constexpr (std::is_invocable_v<F&, const nx::Tensor&,
                                      decltype((void)K, first.flat.leaves[0])...>)
      return f(first.flat.leaves[i], others[K].flat.leaves[i]...);
  }
  throw std::logic_error("rune::tree_map: f has the wrong signature");
}
}  // namespace detail

// f applied to each leaf of `tree` (and the leaves at the same place in `rest`, which must have
// tree's structure): a tree of T's type. f returns an nx::Tensor.
template <class F, class T, class... Rest>
T tree_map(F f, const T& tree, const Rest&... rest) {
  static_assert(std::is_invocable_r_v<nx::Tensor, F&, const nx::Tensor&,
                                      std::conditional_t<true, const nx::Tensor&, Rest>...>,
                "rune::tree_map: f takes one nx::Tensor per tree and returns an nx::Tensor");
  auto make = [&](size_t i, const detail::FlatWithPaths& first,
                  const std::vector<detail::FlatWithPaths>& others) {
    return detail::call_leaf(f, nullptr, i, first, others, std::index_sequence_for<Rest...>{});
  };
  return detail::tree_map_impl("rune::tree_map", make, tree, rest...);
}

// tree_map whose f also receives each leaf's path first (`0.w`, `layers.2.b`: the names
// rune::jit's messages use), e.g. to decay only some parameters.
template <class F, class T, class... Rest>
T tree_map_with_path(F f, const T& tree, const Rest&... rest) {
  static_assert(std::is_invocable_r_v<nx::Tensor, F&, const std::string&, const nx::Tensor&,
                                      std::conditional_t<true, const nx::Tensor&, Rest>...>,
                "rune::tree_map_with_path: f takes a path and one nx::Tensor per tree");
  auto make = [&](size_t i, const detail::FlatWithPaths& first,
                  const std::vector<detail::FlatWithPaths>& others) {
    return detail::call_leaf(f, &first.paths[i], i, first, others,
                             std::index_sequence_for<Rest...>{});
  };
  return detail::tree_map_impl("rune::tree_map_with_path", make, tree, rest...);
}

}  // namespace rune
