// nx::check (docs/semantics.md §4): `ok` is a bool tensor; if an element is false, the exception
// that fail(index, data_at_index) builds is raised for the first false element in C order. An empty
// `ok` never raises. `data` is a tree of tensors (each broadcastable to ok's shape) taken at
// that index. Eagerly on the host the check raises at once; inside rune::jit it is an output of
// the compiled program, raised after the program ran (and the call returns no results).
#pragma once
#include <exception>
#include <functional>
#include <type_traits>
#include <vector>

#include "core/tree.h"

namespace nx {

using CheckFail = std::function<std::exception_ptr(const std::vector<int64_t>& index,
                                                   const std::vector<Tensor>& data_at)>;

namespace detail {
void check_flat(const Tensor& ok, const std::vector<Tensor>& data, CheckFail fail);
// The index of the first false element of ok in C order, or ok.size() (a traced or eager int64
// scalar, per the current interpreter).
Tensor first_false(const Tensor& ok);
// Builds the exception for the failing flat index from the data values (eagerly).
std::exception_ptr build_failure(const Shape& shape, int64_t flat,
                                 const std::vector<Tensor>& data_at_all, const CheckFail& fail);
}  // namespace detail

template <class Data, class Fail>
void check(const Tensor& ok, const Data& data, Fail fail) {
  Flat flat;
  Tree<Data>::flatten(data, flat, "");
  auto tokens = flat.tokens;
  detail::check_flat(
      ok, flat.leaves,
      [fail, tokens](const std::vector<int64_t>& index, const std::vector<Tensor>& at) {
        Unflat u{at, tokens};
        auto e = fail(index, Tree<Data>::build(u));
        if constexpr (std::is_same_v<decltype(e), std::exception_ptr>)
          return e;
        else
          return std::make_exception_ptr(e);
      });
}

}  // namespace nx
