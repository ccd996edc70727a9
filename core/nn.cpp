// nx::nn: layer_norm, rms_norm, mse, cross_entropy (core/nn.h). Each opens its own scope (its
// name in errors, its operands' device for the index grids it creates) and composes nx ops.
#include "core/nn.h"

#include <cstdio>
#include <optional>
#include <stdexcept>

#include "core/check.h"
#include "core/donation.h"
#include "core/prim.h"

namespace nx::nn {

using namespace nx::detail;

namespace {

DType compute_dtype(DType t) { return ir::is_half(t) ? DType::Float32 : t; }

// gamma (or beta) must be 1-D of x's dtype and extent along axis `a`.
void check_param(const std::string& api, const char* what, const Tensor& p, const Tensor& x,
                 int a) {
  const int64_t n = x.shape()[a];
  if (p.dtype() != x.dtype() || p.shape() != Shape{n})
    fail(api, std::string(what) + " must be " + std::string(ir::name(x.dtype())) + " [" +
                  std::to_string(n) + "] for " + x.describe() + " (axis " + std::to_string(a) +
                  "); got " + p.describe());
}
// A checked parameter at the compute dtype, shaped to broadcast along axis `a` of x.
Tensor along(const Tensor& p, const Tensor& x, int a) {
  Shape s(x.ndim(), 1);
  s[a] = x.shape()[a];
  return reshape(cast(p, compute_dtype(x.dtype())), s);
}

std::string show_eps(double eps) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", eps);
  return buf;
}

void require_eps(const std::string& api, double eps) {
  if (!(eps >= 0)) fail(api, "eps must be >= 0, got " + show_eps(eps));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, int axis) {
  OpScope scope_("nx::nn::layer_norm", {&x, &gamma, &beta});
  const std::string api = "nx::nn::layer_norm";
  require_float(api, x);
  require_eps(api, eps);
  if (x.ndim() == 0) fail(api, "needs at least one axis; got the 0-d " + x.describe());
  const int a = norm_axis(api, axis, x.ndim(), x);
  check_param(api, "gamma", gamma, x, a);
  check_param(api, "beta", beta, x, a);
  Tensor g = along(gamma, x, a), b = along(beta, x, a);
  Tensor xf = cast(x, compute_dtype(x.dtype()));
  const double n = static_cast<double>(x.shape()[a]);
  Tensor d = sub(xf, div(sum(xf, {a}, true), scalar_like(xf, n)));
  Tensor v = div(sum(mul(d, d), {a}, true), scalar_like(xf, n));
  Tensor y = mul(d, rsqrt(add(v, scalar_like(v, eps))));
  return cast(add(mul(y, g), b), x.dtype());
}

Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps) {
  OpScope scope_("nx::nn::rms_norm", {&x, &gamma});
  const std::string api = "nx::nn::rms_norm";
  require_float(api, x);
  require_eps(api, eps);
  if (x.ndim() == 0) fail(api, "needs at least one axis; got the 0-d " + x.describe());
  const int a = x.ndim() - 1;
  check_param(api, "gamma", gamma, x, a);
  Tensor g = along(gamma, x, a);
  Tensor xf = cast(x, compute_dtype(x.dtype()));
  const double n = static_cast<double>(x.shape()[a]);
  Tensor ms = div(sum(mul(xf, xf), {a}, true), scalar_like(xf, n));
  return cast(mul(mul(xf, rsqrt(add(ms, scalar_like(ms, eps)))), g), x.dtype());
}

Tensor mse(const Tensor& pred, const Tensor& target) {
  OpScope scope_("nx::nn::mse", {&pred, &target});
  const std::string api = "nx::nn::mse";
  require_float(api, pred);
  require_same_dtype(api, pred, target);
  if (pred.shape() != target.shape())
    fail(api, "pred " + pred.describe() + " and target " + target.describe() + " differ in shape");
  DType t = compute_dtype(pred.dtype());
  Tensor d = sub(cast(pred, t), cast(target, t));
  Tensor s = sum(mul(d, d));
  return cast(div(s, scalar_like(s, static_cast<double>(pred.size()))), pred.dtype());
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing,
                     std::optional<int64_t> ignore_index) {
  OpScope scope_("nx::nn::cross_entropy", {&logits, &labels});
  const std::string api = "nx::nn::cross_entropy";
  require_float(api, logits);
  if (ir::is_float(labels.dtype()) || labels.dtype() == DType::Bool)
    fail(api, "labels must be an integer dtype, got " + labels.describe());
  if (logits.ndim() == 0) fail(api, "logits need a class axis; got the 0-d " + logits.describe());
  const int c_axis = logits.ndim() - 1;
  const int64_t classes = logits.shape()[c_axis];
  Shape batch(logits.shape().begin(), logits.shape().end() - 1);
  if (labels.shape() != batch)
    fail(api, "labels " + labels.describe() + " must have the shape of logits " +
                  logits.describe() + " without its last axis, " + ir::to_string(batch));
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    fail(api, "label_smoothing must be in [0, 1], got " + show_eps(label_smoothing));
  if (classes == 0) fail(api, "logits " + logits.describe() + " have no classes");
  // The ignored label is compared in int64 through a double: exact below 2^53 in magnitude.
  if (ignore_index && (*ignore_index > (int64_t{1} << 53) || *ignore_index < -(int64_t{1} << 53)))
    fail(api, "ignore_index " + std::to_string(*ignore_index) + " is outside [-2^53, 2^53]");
  Tensor lab = cast(labels, DType::Int64);
  // A label outside [0, C) would select no class (a loss of 0 for its row): raise instead
  // (torch raises; JAX's gather gives an unspecified value). The ignored label is allowed.
  Tensor ok = logical_and(greater_equal(lab, zeros_like(lab)),
                          less(lab, full_like(lab, static_cast<double>(classes))));
  std::optional<Tensor> counted;  // the rows whose label is not ignore_index
  if (ignore_index) {
    Tensor ignored = equal(lab, full_like(lab, static_cast<double>(*ignore_index)));
    ok = logical_or(ok, ignored);
    counted = logical_not(ignored);
  }
  check(ok, lab, [api, classes](const std::vector<int64_t>& index, const Tensor& bad) {
    std::string at;
    for (int64_t i : index) at += (at.empty() ? "" : ", ") + std::to_string(i);
    return std::invalid_argument(api + ": label " + std::to_string(item<int64_t>(bad)) + " at [" +
                                 at + "] is outside [0, " + std::to_string(classes) + ")");
  });
  DType t = compute_dtype(logits.dtype());
  Tensor lsm = log_softmax(cast(logits, t), c_axis);
  Shape col = batch;
  col.push_back(1);
  // The one-hot as a compare against an index grid; where, not a product, so a -inf log
  // probability of another class does not make 0 * -inf = NaN.
  Tensor hit = equal(iota(logits.shape(), c_axis), reshape(lab, col));
  Tensor nll = neg(sum(where(hit, lsm, zeros_like(lsm)), {c_axis}));
  Tensor loss = nll;
  if (label_smoothing > 0) {
    Tensor uniform = neg(div(sum(lsm, {c_axis}), scalar_like(nll, static_cast<double>(classes))));
    loss = add(mul(nll, scalar_like(nll, 1 - label_smoothing)),
               mul(uniform, scalar_like(nll, label_smoothing)));
  }
  if (counted) {
    // torch's mean over the counted rows: ignored rows add 0 (a where, so no NaN of theirs
    // leaks in) and are not counted; all rows ignored give 0 / 0 = NaN, as torch.
    Tensor total = sum(where(*counted, loss, zeros_like(loss)));
    Tensor rows = sum(cast(*counted, t));
    return cast(div(total, rows), logits.dtype());
  }
  Tensor total = sum(loss);
  const double rows = static_cast<double>(lab.size());
  return cast(div(total, scalar_like(total, rows)), logits.dtype());
}

}  // namespace nx::nn
