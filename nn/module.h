// rune::nn modules as trees (docs/nn.md). A module is a plain struct of tensors declared with
// RUNE_TREE (core/tree.h), so rune::jit, rune::grad, rune::vmap, rune::optim and nx::save walk it
// like any parameter struct; its hyperparameters are static leaves of the tree (integers, bools,
// and nn::Static<double> / enums below): part of a compiled call's key, carried through every
// rebuilt tree (the gradient, the optimiser's update, a checkpoint loaded into it), never a
// tensor. This header holds what every module shares:
//   Static<T>         a float or enum hyperparameter as a static leaf
//   Context           the mode of a forward pass: training or evaluation, the dropout key, and
//                     the new running statistics of the BatchNorm layers it ran
//   named_params, named_buffers, count_params, is_buffer, with_buffers
//   Sequential<L...>  layers applied in order (a std::tuple of modules)
//   Lambda<F>         a captureless lambda as a layer
#pragma once
#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/norm.h"
#include "core/ops.h"
#include "trace/tree_util.h"

namespace rune::nn {

using nx::Tensor;

// A hyperparameter of a float or enum type held in a module as a static leaf (an integer token
// of its bits): equal values give equal tree structures, so a compiled call retraces only when
// it changes. Reads as its value.
template <class T>
struct Static {
  static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>,
                "rune::nn::Static holds a number or an enum");
  T value{};
  Static() = default;
  Static(T v) : value(v) {}             // NOLINT(google-explicit-constructor)
  operator T() const { return value; }  // NOLINT(google-explicit-constructor)
};

namespace detail {
template <class T>
int64_t encode_static(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<int32_t>(v);
  } else if constexpr (std::is_same_v<T, double>) {
    return std::bit_cast<int64_t>(v);
  } else {
    return static_cast<int64_t>(v);
  }
}
template <class T>
T decode_static(int64_t v) {
  if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<float>(static_cast<int32_t>(v));
  } else if constexpr (std::is_same_v<T, double>) {
    return std::bit_cast<double>(v);
  } else {
    return static_cast<T>(v);
  }
}
}  // namespace detail

// The mode of one forward pass, passed by reference through the layers (`model(x, ctx)`):
//   Context{} / Context::eval()  evaluation: dropout is the identity, BatchNorm normalises with
//                                its running statistics (torch's model.eval())
//   Context::train(key)          training: dropout draws from `key` folded with a counter (one
//                                fold per dropout call, in call order), BatchNorm normalises
//                                with the batch's statistics and records its new running
//                                statistics here
//   Context::train()             training without dropout keys (a Dropout of rate > 0 raises)
// After a training pass, `ctx.updated(model)` is the model with those new running statistics:
// call it on the very model (the same tree value) the pass ran, e.g. inside the loss function
// of rune::value_and_grad, and return it as the auxiliary value (docs/nn.md).
class Context {
 public:
  Context() = default;
  static Context eval() { return Context(); }
  static Context train(std::optional<Tensor> key = std::nullopt);

  bool training() const { return training_; }
  bool has_key() const { return key_.has_value(); }
  // fold_in(key, n) for the n-th call (n = 0, 1, ...); raises naming `api` without a key.
  Tensor next_key(const char* api);

  // BatchNorm's bookkeeping: the running statistics to start from for the layer whose current
  // statistics are (mean, var) (a previous call's new ones when the layer ran before in this
  // pass), and the record of its new ones.
  nx::nn::BatchNormState running_stats(const Tensor& mean, const Tensor& var) const;
  void record(const Tensor& mean, const Tensor& var, const nx::nn::BatchNormState& updated);
  size_t num_updates() const { return updates_.size(); }

  // `model` with the new running statistics recorded in this pass in place of the old ones (a
  // leaf is replaced when it is the very tensor a BatchNorm of this pass read). Raises when a
  // recorded layer's statistics are not leaves of `model`.
  template <class M>
  M updated(const M& model) const;

 private:
  struct Update {
    std::shared_ptr<nx::TensorImpl> mean, var;  // the statistics the layer held
    nx::nn::BatchNormState state;               // its new statistics
  };
  const Update* find(const Tensor& mean) const;
  bool training_ = false;
  std::optional<Tensor> key_;
  uint32_t count_ = 0;
  std::vector<Update> updates_;
};

// Running statistics (torch's buffers) are the leaves whose path ends in `running_mean` or
// `running_var` (BatchNorm's fields). Parameters are the other leaves.
bool is_buffer(const std::string& path);

// (path, tensor) of each parameter in flatten order: "0.weight", "blocks.2.attn.bias" (the paths
// of rune::tree_map_with_path and rune::jit's messages; a bare tensor's path is ""). Buffers are
// left out (torch's named_parameters); named_buffers lists them.
template <class T>
std::vector<std::pair<std::string, Tensor>> named_params(const T& tree) {
  auto f = rune::detail::flatten_with_paths(tree);
  std::vector<std::pair<std::string, Tensor>> r;
  for (size_t i = 0; i < f.flat.leaves.size(); ++i)
    if (!is_buffer(f.paths[i])) r.emplace_back(f.paths[i], f.flat.leaves[i]);
  return r;
}
template <class T>
std::vector<std::pair<std::string, Tensor>> named_buffers(const T& tree) {
  auto f = rune::detail::flatten_with_paths(tree);
  std::vector<std::pair<std::string, Tensor>> r;
  for (size_t i = 0; i < f.flat.leaves.size(); ++i)
    if (is_buffer(f.paths[i])) r.emplace_back(f.paths[i], f.flat.leaves[i]);
  return r;
}
// The number of parameter elements (buffers not counted), torch's
// sum(p.numel() for p in model.parameters()).
template <class T>
int64_t count_params(const T& tree) {
  int64_t n = 0;
  for (const auto& [path, t] : named_params(tree)) n += t.size();
  return n;
}
// `params` with its buffers taken from `source` (a tree of the same structure): after an
// optimiser step, the parameters of the update and the running statistics of the forward pass.
template <class T>
T with_buffers(const T& params, const T& source) {
  return rune::tree_map_with_path([](const std::string& path, const Tensor& p,
                                     const Tensor& s) { return is_buffer(path) ? s : p; },
                                  params, source);
}

namespace detail {
// layer(x, ctx) when the layer takes a context, else layer(x).
template <class L>
Tensor call_layer(const L& layer, const Tensor& x, Context& ctx) {
  if constexpr (std::is_invocable_r_v<Tensor, const L&, const Tensor&, Context&>) {
    return layer(x, ctx);
  } else {
    static_assert(std::is_invocable_r_v<Tensor, const L&, const Tensor&>,
                  "rune::nn: a layer is callable as layer(x) or layer(x, ctx), returning a Tensor");
    return layer(x);
  }
}
}  // namespace detail

// Layers applied in order, torch.nn.Sequential's role with the types known: a std::tuple of
// modules, so the whole is a tree (its leaves the layers' in order, paths "0.weight", "2.bias"
// as torch's) and each call is inlined. Build it from layers:
//   nn::Sequential net{nn::Linear::init(k0, 2, 16), nn::ReLU{}, nn::Linear::init(k1, 16, 1)};
// net.get<0>() is the first layer.
template <class... Layers>
struct Sequential {
  std::tuple<Layers...> layers;

  Sequential() = default;
  explicit Sequential(Layers... l) requires(sizeof...(Layers) > 0) : layers(std::move(l)...) {}

  static constexpr size_t size() { return sizeof...(Layers); }
  template <size_t I>
  const auto& get() const {
    return std::get<I>(layers);
  }
  template <size_t I>
  auto& get() {
    return std::get<I>(layers);
  }

  Tensor operator()(const Tensor& x) const {
    Context ctx;
    return (*this)(x, ctx);
  }
  Tensor operator()(const Tensor& x, Context& ctx) const {
    return run(x, ctx, std::index_sequence_for<Layers...>{});
  }

 private:
  template <size_t... I>
  Tensor run(const Tensor& x, Context& ctx, std::index_sequence<I...>) const {
    Tensor h = x;
    ((h = detail::call_layer(std::get<I>(layers), h, ctx)), ...);
    return h;
  }
};
template <class... Layers>
Sequential(Layers...) -> Sequential<Layers...>;

// A captureless lambda (default-constructible in C++20, so the tree can rebuild it) as a layer:
//   nn::Lambda{[](const nx::Tensor& x) { return nx::relu(x) * 2.0; }}
template <class F>
struct Lambda {
  static_assert(std::is_default_constructible_v<F>,
                "rune::nn::Lambda holds a captureless lambda (it is rebuilt by default "
                "construction)");
  F fn{};
  Tensor operator()(const Tensor& x) const { return fn(x); }
};
template <class F>
Lambda(F) -> Lambda<F>;

template <class M>
M Context::updated(const M& model) const {
  std::vector<bool> used(updates_.size(), false);
  M out = rune::tree_map(
      [&](const Tensor& leaf) {
        for (size_t i = 0; i < updates_.size(); ++i) {
          if (leaf.impl_ptr() == updates_[i].mean) {
            used[i] = true;
            return updates_[i].state.mean;
          }
          if (leaf.impl_ptr() == updates_[i].var) return updates_[i].state.var;
        }
        return leaf;
      },
      model);
  size_t missing = 0;
  for (bool u : used) missing += !u;
  if (missing)
    throw std::invalid_argument(
        "rune::nn::Context::updated: " + std::to_string(missing) + " of the " +
        std::to_string(updates_.size()) +
        " BatchNorm layers that ran in this context hold running statistics that are not leaves "
        "of this model (call updated on the model value the forward pass ran)");
  return out;
}

}  // namespace rune::nn

template <class T>
struct nx::Tree<rune::nn::Static<T>> {
  static void flatten(const rune::nn::Static<T>& v, Flat& f, const std::string& path) {
    f.tokens.push_back(kStatic);
    f.note(path);
    f.tokens.push_back(rune::nn::detail::encode_static(v.value));
    f.note(path);
  }
  static rune::nn::Static<T> build(Unflat& u) {
    u.token += 2;
    return rune::nn::Static<T>(rune::nn::detail::decode_static<T>(u.tokens[u.token - 1]));
  }
};

// A Sequential flattens its layers at its own path, one index per layer ("0", "1", ...).
template <class... Layers>
struct nx::Tree<rune::nn::Sequential<Layers...>> {
  using S = rune::nn::Sequential<Layers...>;
  template <size_t... I>
  static void flat(const S& s, Flat& f, const std::string& path, std::index_sequence<I...>) {
    (Tree<Layers>::flatten(std::get<I>(s.layers), f, join(path, std::to_string(I))), ...);
  }
  static void flatten(const S& s, Flat& f, const std::string& path) {
    flat(s, f, path, std::index_sequence_for<Layers...>{});
  }
  static S build(Unflat& u) {
    S s;
    s.layers = std::tuple<Layers...>{Tree<Layers>::build(u)...};
    return s;
  }
};

template <class F>
struct nx::Tree<rune::nn::Lambda<F>> {
  static void flatten(const rune::nn::Lambda<F>&, Flat&, const std::string&) {}
  static rune::nn::Lambda<F> build(Unflat&) { return {}; }
};

// A module without tensors or hyperparameters (an activation) as a tree of no leaves:
// RUNE_NN_STATELESS(my::Swish) at namespace scope.
#define RUNE_NN_STATELESS(Type)                                          \
  template <>                                                            \
  struct nx::Tree<Type> {                                                \
    static void flatten(const Type&, ::nx::Flat&, const std::string&) {} \
    static Type build(::nx::Unflat&) { return Type{}; }                  \
  };
