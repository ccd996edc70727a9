// Trees of tensors (the C++ form of Nx.Ptree): how nx::check, rune::jit and rune::grad walk
// arguments and results. Supported: nx::Tensor, std::pair, std::tuple, std::vector, std::optional,
// std::array, static integers and bools (part of the key), and user structs declared walkable
// with RUNE_TREE(Type, field, ...).
//
// flatten writes the tensor leaves in order, and the structure as tokens: list lengths,
// option presence and static values; the key of a call is these tokens plus each leaf's
// abstract value. Paths name leaves for messages: argument index, then indices or field
// names, joined by '.'.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace nx {

enum Token : int64_t { kLeaf = -1, kList = -2, kSome = -3, kNone = -4, kStatic = -5 };

struct Flat {
  std::vector<nx::Tensor> leaves;
  std::vector<int64_t> tokens;
  std::vector<std::string>* paths = nullptr;        // filled when set
  std::vector<std::string>* token_paths = nullptr;  // path of each token, when set
  void note(const std::string& path) {
    if (token_paths) token_paths->push_back(path);
  }
};

// Rebuilds a tree from leaves and tokens recorded by flatten (on stand-ins or outputs).
struct Unflat {
  const std::vector<nx::Tensor>& leaves;
  const std::vector<int64_t>& tokens;
  size_t leaf = 0, token = 0;
};

inline std::string join(const std::string& a, const std::string& b) {
  return a.empty() ? b : a + "." + b;
}

template <class T, class = void>
struct Tree {
  static_assert(
      sizeof(T) == 0,
      "rune: this type is not a tree of tensors; declare it with RUNE_TREE(Type, fields...)");
};

template <>
struct Tree<nx::Tensor> {
  static void flatten(const nx::Tensor& t, Flat& f, const std::string& path) {
    f.leaves.push_back(t);
    f.tokens.push_back(kLeaf);
    f.note(path);
    if (f.paths) f.paths->push_back(path);
  }
  static nx::Tensor build(Unflat& u) {
    ++u.token;
    return u.leaves[u.leaf++];
  }
};

// Static integers and bools: their values are part of the key.
template <class T>
struct Tree<T, std::enable_if_t<std::is_integral_v<T>>> {
  static void flatten(const T& v, Flat& f, const std::string& path) {
    f.tokens.push_back(kStatic);
    f.note(path);
    f.tokens.push_back(static_cast<int64_t>(v));
    f.note(path);
  }
  static T build(Unflat& u) {
    u.token += 2;
    return static_cast<T>(u.tokens[u.token - 1]);
  }
};

template <class A, class B>
struct Tree<std::pair<A, B>> {
  static void flatten(const std::pair<A, B>& p, Flat& f, const std::string& path) {
    Tree<A>::flatten(p.first, f, join(path, "0"));
    Tree<B>::flatten(p.second, f, join(path, "1"));
  }
  static std::pair<A, B> build(Unflat& u) {
    A a = Tree<A>::build(u);
    B b = Tree<B>::build(u);
    return {std::move(a), std::move(b)};
  }
};

template <class... Ts>
struct Tree<std::tuple<Ts...>> {
  template <size_t... I>
  static void flat(const std::tuple<Ts...>& t, Flat& f, const std::string& path,
                   std::index_sequence<I...>) {
    (Tree<Ts>::flatten(std::get<I>(t), f, join(path, std::to_string(I))), ...);
  }
  static void flatten(const std::tuple<Ts...>& t, Flat& f, const std::string& path) {
    flat(t, f, path, std::index_sequence_for<Ts...>{});
  }
  static std::tuple<Ts...> build(Unflat& u) { return std::tuple<Ts...>{Tree<Ts>::build(u)...}; }
};

template <class T>
struct Tree<std::vector<T>> {
  static void flatten(const std::vector<T>& v, Flat& f, const std::string& path) {
    f.tokens.push_back(kList);
    f.note(path);
    f.tokens.push_back(static_cast<int64_t>(v.size()));
    f.note(path);
    for (size_t i = 0; i < v.size(); ++i) Tree<T>::flatten(v[i], f, join(path, std::to_string(i)));
  }
  static std::vector<T> build(Unflat& u) {
    int64_t n = u.tokens[u.token + 1];
    u.token += 2;
    std::vector<T> v;
    v.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v.push_back(Tree<T>::build(u));
    return v;
  }
};

template <class T, size_t N>
struct Tree<std::array<T, N>> {
  static void flatten(const std::array<T, N>& a, Flat& f, const std::string& path) {
    for (size_t i = 0; i < N; ++i) Tree<T>::flatten(a[i], f, join(path, std::to_string(i)));
  }
  template <size_t... I>
  static std::array<T, N> make(Unflat& u, std::index_sequence<I...>) {
    return {((void)I, Tree<T>::build(u))...};
  }
  static std::array<T, N> build(Unflat& u) { return make(u, std::make_index_sequence<N>{}); }
};

template <class T>
struct Tree<std::optional<T>> {
  static void flatten(const std::optional<T>& o, Flat& f, const std::string& path) {
    f.tokens.push_back(o ? kSome : kNone);
    f.note(path);
    if (o) Tree<T>::flatten(*o, f, path);
  }
  static std::optional<T> build(Unflat& u) {
    if (u.tokens[u.token++] == kNone) return std::nullopt;
    return Tree<T>::build(u);
  }
};

}  // namespace nx

// rune walks the same trees.
namespace rune {
using nx::Flat;
using nx::join;
using nx::kLeaf;
using nx::kList;
using nx::kNone;
using nx::kSome;
using nx::kStatic;
using nx::Token;
using nx::Tree;
using nx::Unflat;
}  // namespace rune

#define RUNE_TREE_FLATTEN_FIELD(f) \
  ::nx::Tree<decltype(v_.f)>::flatten(v_.f, fl_, ::nx::join(path_, #f));
#define RUNE_TREE_BUILD_FIELD(f) r_.f = ::nx::Tree<decltype(r_.f)>::build(u_);
#define RUNE_TREE_EXPAND(x) x
#define RUNE_TREE_FOR_EACH_1(m, a) m(a)
#define RUNE_TREE_FOR_EACH_2(m, a, ...) m(a) RUNE_TREE_EXPAND(RUNE_TREE_FOR_EACH_1(m, __VA_ARGS__))
#define RUNE_TREE_FOR_EACH_3(m, a, ...) m(a) RUNE_TREE_EXPAND(RUNE_TREE_FOR_EACH_2(m, __VA_ARGS__))
#define RUNE_TREE_FOR_EACH_4(m, a, ...) m(a) RUNE_TREE_EXPAND(RUNE_TREE_FOR_EACH_3(m, __VA_ARGS__))
#define RUNE_TREE_FOR_EACH_5(m, a, ...) m(a) RUNE_TREE_EXPAND(RUNE_TREE_FOR_EACH_4(m, __VA_ARGS__))
#define RUNE_TREE_FOR_EACH_6(m, a, ...) m(a) RUNE_TREE_EXPAND(RUNE_TREE_FOR_EACH_5(m, __VA_ARGS__))
#define RUNE_TREE_FOR_EACH_7(m, a, ...) m(a) RUNE_TREE_EXPAND(RUNE_TREE_FOR_EACH_6(m, __VA_ARGS__))
#define RUNE_TREE_FOR_EACH_8(m, a, ...) m(a) RUNE_TREE_EXPAND(RUNE_TREE_FOR_EACH_7(m, __VA_ARGS__))
#define RUNE_TREE_PICK(_1, _2, _3, _4, _5, _6, _7, _8, name, ...) name
#define RUNE_TREE_FOR_EACH(m, ...)                                                         \
  RUNE_TREE_EXPAND(RUNE_TREE_PICK(__VA_ARGS__, RUNE_TREE_FOR_EACH_8, RUNE_TREE_FOR_EACH_7, \
                                  RUNE_TREE_FOR_EACH_6, RUNE_TREE_FOR_EACH_5,              \
                                  RUNE_TREE_FOR_EACH_4, RUNE_TREE_FOR_EACH_3,              \
                                  RUNE_TREE_FOR_EACH_2, RUNE_TREE_FOR_EACH_1)(m, __VA_ARGS__))

// Declares a user struct walkable (up to 8 fields; the struct must be default-constructible).
// Use at namespace scope: RUNE_TREE(Params, w, b)
#define RUNE_TREE(Type, ...)                                                         \
  template <>                                                                        \
  struct nx::Tree<Type> {                                                            \
    static void flatten(const Type& v_, ::nx::Flat& fl_, const std::string& path_) { \
      RUNE_TREE_FOR_EACH(RUNE_TREE_FLATTEN_FIELD, __VA_ARGS__)                       \
    }                                                                                \
    static Type build(::nx::Unflat& u_) {                                            \
      Type r_{};                                                                     \
      RUNE_TREE_FOR_EACH(RUNE_TREE_BUILD_FIELD, __VA_ARGS__)                         \
      return r_;                                                                     \
    }                                                                                \
  };
