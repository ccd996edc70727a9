#include "trace/optim.h"

#include <algorithm>
#include <numbers>
#include <stdexcept>

namespace rune::optim {

namespace {
nx::Tensor steps_f64(const nx::Tensor& count) { return nx::cast(count, nx::float64); }
void check_steps(const char* api, const char* what, int64_t n) {
  if (n <= 0)
    throw std::invalid_argument(std::string(api) + ": " + what + " must be positive, got " +
                                std::to_string(n));
}
}  // namespace

Schedule constant(double value) {
  return Schedule::Fn(
      [value](const nx::Tensor& count) { return nx::scalar_like(steps_f64(count), value); });
}

Schedule::Schedule(double value) : fn_(constant(value).fn_) {}

Schedule linear(double init, double end, int64_t steps) {
  check_steps("rune::optim::linear", "steps", steps);
  return [=](const nx::Tensor& count) {
    nx::Tensor t = nx::clip(steps_f64(count), 0, static_cast<double>(steps));
    return (t / static_cast<double>(steps)) * (end - init) + init;
  };
}

Schedule cosine_decay(double init, int64_t decay_steps, double alpha) {
  check_steps("rune::optim::cosine_decay", "decay_steps", decay_steps);
  return [=](const nx::Tensor& count) {
    double T = static_cast<double>(decay_steps);
    nx::Tensor t = nx::clip(steps_f64(count), 0, T);
    nx::Tensor cosine = (nx::cos(t * (std::numbers::pi / T)) + 1.0) * 0.5;
    return (cosine * (1 - alpha) + alpha) * init;
  };
}

Schedule warmup_cosine_decay(double init, double peak, int64_t warmup_steps, int64_t decay_steps,
                             double end) {
  const char* api = "rune::optim::warmup_cosine_decay";
  if (warmup_steps < 0)
    throw std::invalid_argument(std::string(api) + ": warmup_steps must be nonnegative, got " +
                                std::to_string(warmup_steps));
  if (decay_steps <= warmup_steps)
    throw std::invalid_argument(std::string(api) + ": decay_steps (" + std::to_string(decay_steps) +
                                ") must exceed warmup_steps (" + std::to_string(warmup_steps) +
                                ")");
  if (peak == 0) throw std::invalid_argument(std::string(api) + ": peak must be nonzero");
  Schedule decay = cosine_decay(peak, decay_steps - warmup_steps, end / peak);
  // No warmup: the cosine from step 0 (optax joins the schedules at boundary 0, so its linear
  // part over 0 steps is never used and init plays no part).
  if (warmup_steps == 0) return decay;
  Schedule warm = linear(init, peak, warmup_steps);
  double w = static_cast<double>(warmup_steps);
  return [=](const nx::Tensor& count) {
    nx::Tensor after = nx::maximum(count - warmup_steps, nx::scalar_like(count, 0));
    return nx::where(nx::less(steps_f64(count), nx::scalar_like(steps_f64(count), w)), warm(count),
                     decay(after));
  };
}

namespace {
// The global norm of a non-empty list of leaves; errors name `api`, the function the user called.
nx::Tensor norm_of(const char* api, const std::vector<nx::Tensor>& leaves) {
  nx::DType t = nx::float32;
  for (const auto& l : leaves) {
    if (!ir::is_float(l.dtype()))
      throw std::invalid_argument(std::string(api) + ": leaf " + l.describe() +
                                  " is not a float tensor");
    if (l.dtype() == nx::float64) t = nx::float64;
  }
  nx::Tensor total;
  for (const auto& l : leaves) {
    nx::Tensor x = nx::cast(l, t);
    nx::Tensor s = nx::sum(x * x);
    total = total.defined() ? total + s : s;
  }
  return nx::sqrt(total);
}
}  // namespace

nx::Tensor global_norm(const std::vector<nx::Tensor>& leaves) {
  // optax.global_norm of an empty tree: 0 (float32, on the default device).
  if (leaves.empty()) return nx::scalar(nx::float32, 0);
  return norm_of("rune::optim::global_norm", leaves);
}

std::vector<nx::Tensor> clip_by_global_norm(const std::vector<nx::Tensor>& leaves,
                                            double max_norm) {
  const char* api = "rune::optim::clip_by_global_norm";
  if (!(max_norm > 0))
    throw std::invalid_argument(std::string(api) + ": max_norm must be positive, got " +
                                std::to_string(max_norm));
  if (leaves.empty()) return {};  // optax: the empty tree
  nx::Tensor norm = norm_of(api, leaves);
  // Kept only strictly under max_norm (optax's `g_norm < max_norm`): a norm exactly at it is
  // scaled too. The scale is optax's bits as JAX runs it: optax writes (g / norm) * max_norm, and
  // XLA rewrites a division by a broadcast scalar into a multiply by its reciprocal, so what
  // optax returns is (g * (1 / norm)) * max_norm (docs/training.md).
  nx::Tensor under = nx::less(norm, nx::scalar_like(norm, max_norm));
  std::vector<nx::Tensor> out;
  for (const auto& g : leaves) {
    nx::Tensor n = nx::cast(norm, g.dtype());
    nx::Tensor inv = nx::scalar_like(n, 1.0) / n;
    out.push_back(nx::where(under, g, (g * inv) * max_norm));
  }
  return out;
}

namespace detail {

nx::Tensor zero_count(const std::vector<nx::Tensor>& leaves) {
  nx::Tensor z = nx::scalar(nx::int64, 0);
  return leaves.empty() ? z : nx::place(z, leaves[0].device());
}

void check_params(const char* api, const std::vector<nx::Tensor>& params) {
  for (const auto& p : params)
    if (!ir::is_float(p.dtype()))
      throw std::invalid_argument(std::string(api) + ": parameter " + p.describe() +
                                  " is not a float tensor");
}

void check_grads(const char* api, const std::vector<nx::Tensor>& params,
                 const std::vector<nx::Tensor>& grads) {
  if (grads.size() != params.size())
    throw std::invalid_argument(std::string(api) + ": " + std::to_string(grads.size()) +
                                " gradient (or state) leaves for " + std::to_string(params.size()) +
                                " parameters");
  for (size_t i = 0; i < params.size(); ++i)
    if (grads[i].dtype() != params[i].dtype() || grads[i].shape() != params[i].shape())
      throw std::invalid_argument(std::string(api) + ": leaf " + std::to_string(i) + " is " +
                                  grads[i].describe() + " but parameter " + std::to_string(i) +
                                  " is " + params[i].describe());
}

nx::Tensor as_dtype_of(const nx::Tensor& value, const nx::Tensor& x) {
  return nx::cast(value, x.dtype());
}

nx::Tensor bias_correction(double b, const nx::Tensor& count) {
  nx::Tensor t = nx::cast(count, nx::float64) + 1.0;
  return 1.0 - nx::pow(nx::scalar_like(t, b), t);
}

std::vector<bool> decay_flags(const DecayMask& mask, const std::vector<std::string>& paths,
                              const std::vector<nx::Tensor>& leaves) {
  std::vector<bool> out(leaves.size(), true);
  if (mask)
    for (size_t i = 0; i < leaves.size(); ++i) out[i] = mask(paths[i], leaves[i]);
  return out;
}

}  // namespace detail

}  // namespace rune::optim
