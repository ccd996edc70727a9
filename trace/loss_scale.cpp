#include "trace/loss_scale.h"

#include <cmath>
#include <stdexcept>

namespace rune::optim {

namespace {
void check_config(const DynamicLossScale& c) {
  const char* api = "rune::optim::DynamicLossScale";
  if (!(c.initial > 0) || !std::isfinite(c.initial))
    throw std::invalid_argument(std::string(api) +
                                ": initial scale must be positive and finite, got " +
                                std::to_string(c.initial));
  if (c.period <= 0)
    throw std::invalid_argument(std::string(api) + ": period must be positive, got " +
                                std::to_string(c.period));
  if (!(c.factor > 1))
    throw std::invalid_argument(std::string(api) + ": factor must exceed 1, got " +
                                std::to_string(c.factor));
}
}  // namespace

nx::Tensor all_finite(const std::vector<nx::Tensor>& leaves) {
  nx::Tensor ok;
  for (const auto& l : leaves) {
    if (!ir::is_float(l.dtype())) continue;
    // max over an empty leaf is not defined; an empty leaf is finite.
    if (l.size() == 0) continue;
    nx::Tensor bad = nx::max(nx::cast(nx::logical_not(nx::isfinite(l)), nx::uint8));
    nx::Tensor f = nx::equal(bad, nx::scalar_like(bad, 0));
    ok = ok.defined() ? nx::logical_and(ok, f) : f;
  }
  if (!ok.defined()) return nx::scalar(nx::bool_, 1);
  return ok;
}

LossScaleState DynamicLossScale::init() const {
  check_config(*this);
  return {nx::scalar(nx::float32, initial), nx::scalar(nx::int64, 0)};
}
LossScaleState DynamicLossScale::init(nx::Device device) const {
  LossScaleState s = init();
  return {nx::place(s.scale, device), nx::place(s.good_steps, device)};
}

nx::Tensor DynamicLossScale::scale(const nx::Tensor& loss, const LossScaleState& s) const {
  return loss * nx::cast(s.scale, loss.dtype());
}

std::vector<nx::Tensor> DynamicLossScale::unscale(const std::vector<nx::Tensor>& grads,
                                                  const LossScaleState& s) const {
  std::vector<nx::Tensor> out;
  for (const auto& g : grads) {
    nx::DType t = g.dtype() == nx::float64 ? nx::float64 : nx::float32;
    out.push_back(nx::cast(nx::cast(g, t) / nx::cast(s.scale, t), g.dtype()));
  }
  return out;
}

LossScaleState DynamicLossScale::adjust(const nx::Tensor& finite, const LossScaleState& s) const {
  check_config(*this);
  nx::Tensor next = s.good_steps + int64_t{1};
  nx::Tensor grow = nx::greater_equal(next, nx::scalar_like(next, static_cast<double>(period)));
  nx::Tensor up = nx::where(grow, s.scale * factor, s.scale);
  nx::Tensor down = nx::maximum(s.scale / factor, nx::scalar_like(s.scale, min_scale));
  nx::Tensor zero = nx::scalar_like(next, 0);
  return {nx::where(finite, up, down), nx::where(finite, nx::where(grow, zero, next), zero)};
}

}  // namespace rune::optim
