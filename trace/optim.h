// rune::optim: the optimizers of a training loop (Optax's and torch.optim's), over any tree of
// float tensors. An optimizer is a value holding its hyperparameters; `init(params)` gives its
// state (a tree: the step count and the moment estimates, shaped like params), and
// `update(params, grads, state)` gives the new parameters and the new state. Inside rune::jit,
// pass params and state as consumed arguments (rune::Signature().consume(...)) and the update
// writes both in place: a step holds one generation of them (docs/training.md).
//
// Formulas (docs/training.md "Optimizers" states each with its source):
//   Sgd:  g' = g + wd p;  b = mu b + g';  u = nesterov ? g' + mu b : b   (mu = 0: u = g')
//         p <- p - lr u                                                    (torch.optim.SGD)
//   Adam: g' = g + wd p (coupled L2, torch.optim.Adam);  AdamW: g' = g (decoupled)
//         m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g' g';  t = count + 1
//         u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps);  AdamW: u = u + wd p
//         p <- p - lr u                                                    (optax.adam / adamw)
// The learning rate is a Schedule of the step count, evaluated inside the program: a new step
// neither retraces nor becomes a constant.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/nx.h"
#include "trace/tree_util.h"

namespace rune::optim {

// A scalar hyperparameter as a function of the step count: `count` is the number of updates
// applied before this one (an int64 scalar tensor); the result is a float64 scalar tensor.
// A plain number is the constant schedule, so `optim::adamw(1e-3)` and `optim::Sgd{0.1}` read as
// they do in optax and torch.optim; any callable of the count is a schedule of its own.
class Schedule {
 public:
  using Fn = std::function<nx::Tensor(const nx::Tensor& count)>;
  Schedule(double value);  // NOLINT(google-explicit-constructor): constant(value)
  template <class F, class = std::enable_if_t<
                         !std::is_arithmetic_v<std::decay_t<F>> &&
                         !std::is_same_v<std::decay_t<F>, Schedule> &&
                         std::is_invocable_r_v<nx::Tensor, const F&, const nx::Tensor&>>>
  Schedule(F fn) : fn_(std::move(fn)) {}  // NOLINT(google-explicit-constructor)
  nx::Tensor operator()(const nx::Tensor& count) const { return fn_(count); }

 private:
  Fn fn_;
};
// The same value every step.
Schedule constant(double value);
// optax.linear_schedule: init at step 0 to end at step `steps`, then end.
Schedule linear(double init, double end, int64_t steps);
// optax.cosine_decay_schedule: init * ((1 - alpha) (1 + cos(pi min(t, T) / T)) / 2 + alpha).
Schedule cosine_decay(double init, int64_t decay_steps, double alpha = 0);
// optax.warmup_cosine_decay_schedule: linear from init to peak over warmup_steps, then a cosine
// decay from peak to end over the remaining decay_steps - warmup_steps (decay_steps counts the
// warmup too). warmup_steps 0 is the cosine alone from step 0.
Schedule warmup_cosine_decay(double init, double peak, int64_t warmup_steps, int64_t decay_steps,
                             double end = 0);

// Which parameters weight decay applies to, by path and value (nullptr: all). GPT-style models
// decay matrices only: [](const std::string&, const nx::Tensor& p) { return p.shape().size() >= 2;
// }
using DecayMask = std::function<bool(const std::string& path, const nx::Tensor& leaf)>;

// The square root of the sum of every leaf's squared elements, at the widest float dtype among
// the leaves (at least float32), summed leaf by leaf in flatten order; 0 (float32) for no leaves.
nx::Tensor global_norm(const std::vector<nx::Tensor>& leaves);
template <class P>
nx::Tensor global_norm(const P& tree) {
  return global_norm(tree_leaves(tree));
}
// optax.clip_by_global_norm: the tree unchanged when its global norm is strictly under
// max_norm, else each leaf scaled as (g * (1 / norm)) * max_norm (optax's bits as XLA computes
// its (g / norm) * max_norm, docs/training.md); an empty tree gives the empty tree.
std::vector<nx::Tensor> clip_by_global_norm(const std::vector<nx::Tensor>& leaves, double max_norm);
template <class P>
P clip_by_global_norm(const P& grads, double max_norm) {
  auto [leaves, def] = tree_flatten(grads);
  return tree_unflatten<P>(def, clip_by_global_norm(leaves, max_norm));
}

namespace detail {
// A zero int64 scalar on `like`'s device (the step count), or on the default device.
nx::Tensor zero_count(const std::vector<nx::Tensor>& leaves);
// Raises unless every leaf is a float tensor and grads match params leaf by leaf.
void check_params(const char* api, const std::vector<nx::Tensor>& params);
void check_grads(const char* api, const std::vector<nx::Tensor>& params,
                 const std::vector<nx::Tensor>& grads);
// lr(count) as x's dtype, for the update of x.
nx::Tensor as_dtype_of(const nx::Tensor& value, const nx::Tensor& x);
// 1 - b^(count + 1) as a float64 scalar (Adam's bias correction).
nx::Tensor bias_correction(double b, const nx::Tensor& count);
std::vector<bool> decay_flags(const DecayMask& mask, const std::vector<std::string>& paths,
                              const std::vector<nx::Tensor>& leaves);
}  // namespace detail

template <class P>
struct SgdState {
  nx::Tensor count;           // updates applied so far (int64 scalar)
  std::optional<P> momentum;  // the momentum buffer b; absent when momentum is 0
};

struct Sgd {
  Schedule lr = constant(1e-2);
  double momentum = 0;
  bool nesterov = false;
  double weight_decay = 0;  // coupled (L2 added to the gradient), as torch.optim.SGD
  DecayMask decay_mask = nullptr;

  template <class P>
  SgdState<P> init(const P& params) const {
    auto leaves = tree_leaves(params);
    detail::check_params("rune::optim::Sgd::init", leaves);
    SgdState<P> s{detail::zero_count(leaves), std::nullopt};
    if (momentum != 0)
      s.momentum = tree_map([](const nx::Tensor& p) { return nx::zeros_like(p); }, params);
    return s;
  }

  template <class P>
  std::pair<P, SgdState<P>> update(const P& params, const P& grads, const SgdState<P>& s) const {
    const char* api = "rune::optim::Sgd::update";
    auto fp = rune::detail::flatten_with_paths(params);  // leaves, structure and paths at once
    const std::vector<nx::Tensor>& pl = fp.flat.leaves;
    TreeDef def{fp.flat.tokens, pl.size()};
    auto gl = tree_leaves(grads);
    detail::check_params(api, pl);
    detail::check_grads(api, pl, gl);
    if (momentum != 0 && !s.momentum)
      throw std::invalid_argument(std::string(api) +
                                  ": the state has no momentum buffer (made by "
                                  "an Sgd without momentum?)");
    std::vector<nx::Tensor> bl = s.momentum ? tree_leaves(*s.momentum) : std::vector<nx::Tensor>{};
    auto decays = detail::decay_flags(decay_mask, fp.paths, pl);
    nx::Tensor rate = lr(s.count);
    std::vector<nx::Tensor> np, nb;
    for (size_t i = 0; i < pl.size(); ++i) {
      nx::Tensor g = gl[i];
      if (weight_decay != 0 && decays[i]) g = g + pl[i] * weight_decay;
      nx::Tensor u = g;
      if (momentum != 0) {
        nx::Tensor b = bl[i] * momentum + g;
        nb.push_back(b);
        u = nesterov ? g + b * momentum : b;
      }
      np.push_back(pl[i] - detail::as_dtype_of(rate, pl[i]) * u);
    }
    SgdState<P> next{s.count + int64_t{1}, std::nullopt};
    if (momentum != 0) next.momentum = tree_unflatten<P>(def, nb);
    return {tree_unflatten<P>(def, np), std::move(next)};
  }
};

template <class P>
struct AdamState {
  nx::Tensor count;  // updates applied so far (int64 scalar)
  P mu;              // first moment m
  P nu;              // second moment v
};

struct Adam {
  Schedule lr = constant(1e-3);
  double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  double weight_decay = 0;
  bool decoupled = false;  // false: L2 added to the gradient (Adam); true: AdamW
  DecayMask decay_mask = nullptr;

  template <class P>
  AdamState<P> init(const P& params) const {
    auto leaves = tree_leaves(params);
    detail::check_params("rune::optim::Adam::init", leaves);
    auto zeros = [](const nx::Tensor& p) { return nx::zeros_like(p); };
    return {detail::zero_count(leaves), tree_map(zeros, params), tree_map(zeros, params)};
  }

  template <class P>
  std::pair<P, AdamState<P>> update(const P& params, const P& grads, const AdamState<P>& s) const {
    const char* api = "rune::optim::Adam::update";
    auto fp = rune::detail::flatten_with_paths(params);
    const std::vector<nx::Tensor>& pl = fp.flat.leaves;
    TreeDef def{fp.flat.tokens, pl.size()};
    auto gl = tree_leaves(grads), ml = tree_leaves(s.mu), vl = tree_leaves(s.nu);
    detail::check_params(api, pl);
    detail::check_grads(api, pl, gl);
    detail::check_grads(api, pl, ml);
    detail::check_grads(api, pl, vl);
    auto decays = detail::decay_flags(decay_mask, fp.paths, pl);
    nx::Tensor rate = lr(s.count);
    nx::Tensor c1 = detail::bias_correction(b1, s.count), c2 = detail::bias_correction(b2, s.count);
    std::vector<nx::Tensor> np, nm, nv;
    for (size_t i = 0; i < pl.size(); ++i) {
      const nx::Tensor& p = pl[i];
      nx::Tensor g = gl[i];
      bool decay = weight_decay != 0 && decays[i];
      if (decay && !decoupled) g = g + p * weight_decay;
      nx::Tensor m = ml[i] * b1 + g * (1 - b1);
      nx::Tensor v = vl[i] * b2 + g * g * (1 - b2);
      nx::Tensor u =
          (m / detail::as_dtype_of(c1, p)) / (nx::sqrt(v / detail::as_dtype_of(c2, p)) + eps);
      if (decay && decoupled) u = u + p * weight_decay;
      np.push_back(p - detail::as_dtype_of(rate, p) * u);
      nm.push_back(m);
      nv.push_back(v);
    }
    return {
        tree_unflatten<P>(def, np),
        AdamState<P>{s.count + int64_t{1}, tree_unflatten<P>(def, nm), tree_unflatten<P>(def, nv)}};
  }
};

// optax.sgd / torch.optim.SGD (no weight decay; set Sgd::weight_decay for torch's coupled one).
inline Sgd sgd(Schedule lr, double momentum = 0, bool nesterov = false) {
  return Sgd{std::move(lr), momentum, nesterov};
}

// optax.adam / torch.optim.Adam (no weight decay).
inline Adam adam(Schedule lr, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8) {
  return Adam{std::move(lr), b1, b2, eps};
}

// optax.adamw / torch.optim.AdamW (decoupled weight decay, torch's default 0.01).
inline Adam adamw(Schedule lr, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
                  double weight_decay = 1e-2, DecayMask mask = nullptr) {
  return Adam{std::move(lr), b1, b2, eps, weight_decay, true, std::move(mask)};
}

}  // namespace rune::optim

// The states are trees (rune::jit arguments and results, checkpoints).
template <class P>
struct nx::Tree<rune::optim::SgdState<P>> {
  static void flatten(const rune::optim::SgdState<P>& s, Flat& f, const std::string& path) {
    Tree<nx::Tensor>::flatten(s.count, f, join(path, "count"));
    Tree<std::optional<P>>::flatten(s.momentum, f, join(path, "momentum"));
  }
  static rune::optim::SgdState<P> build(Unflat& u) {
    rune::optim::SgdState<P> s;
    s.count = Tree<nx::Tensor>::build(u);
    s.momentum = Tree<std::optional<P>>::build(u);
    return s;
  }
};
template <class P>
struct nx::Tree<rune::optim::AdamState<P>> {
  static void flatten(const rune::optim::AdamState<P>& s, Flat& f, const std::string& path) {
    Tree<nx::Tensor>::flatten(s.count, f, join(path, "count"));
    Tree<P>::flatten(s.mu, f, join(path, "mu"));
    Tree<P>::flatten(s.nu, f, join(path, "nu"));
  }
  static rune::optim::AdamState<P> build(Unflat& u) {
    rune::optim::AdamState<P> s;
    s.count = Tree<nx::Tensor>::build(u);
    s.mu = Tree<P>::build(u);
    s.nu = Tree<P>::build(u);
    return s;
  }
};
