// nx::nn::batch_norm, batch_norm_inference and group_norm (core/norm.h, docs/norm.md): each
// opens its own scope (its name in errors, its operands' device for what it creates) and
// composes nx ops, as layer_norm does in core/nn.cpp.
#include "core/norm.h"

#include <cstdio>
#include <string>

#include "core/donation.h"
#include "core/prim.h"

namespace nx::nn {

using namespace nx::detail;

namespace {

DType compute_dtype(DType t) { return ir::is_half(t) ? DType::Float32 : t; }

std::string show(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// gamma or beta: [C] of x's dtype, C x's extent along the channel axis `a`.
void check_affine(const std::string& api, const char* what, const Tensor& p, const Tensor& x,
                  int a) {
  const int64_t c = x.shape()[a];
  if (p.dtype() != x.dtype() || p.shape() != Shape{c})
    fail(api, std::string(what) + " must be " + std::string(ir::name(x.dtype())) + " [" +
                  std::to_string(c) + "] (the channels of " + x.describe() + ", axis " +
                  std::to_string(a) + "); got " + p.describe());
}

// The running statistics: mean and var [C] of one float dtype.
void check_state(const std::string& api, const BatchNormState& s, const Tensor& x, int a) {
  const int64_t c = x.shape()[a];
  for (const auto& [what, t] : {std::pair<const char*, const Tensor*>{"state.mean", &s.mean},
                                std::pair<const char*, const Tensor*>{"state.var", &s.var}})
    if (!ir::is_float(t->dtype()) || t->shape() != Shape{c})
      fail(api, std::string(what) + " must be a float [" + std::to_string(c) +
                    "] (the channels of " + x.describe() + ", axis " + std::to_string(a) +
                    "); got " + t->describe());
  if (s.mean.dtype() != s.var.dtype())
    fail(api, "state.mean " + s.mean.describe() + " and state.var " + s.var.describe() +
                  " differ in dtype");
}

void require_eps(const std::string& api, double eps) {
  if (!(eps >= 0)) fail(api, "eps must be >= 0, got " + show(eps));
}

// The channel axis of a batch_norm operand, after the checks every mode shares.
int batch_norm_axis(const std::string& api, const Tensor& x, const Tensor& gamma,
                    const Tensor& beta, const BatchNormState& s, const BatchNormOptions& o) {
  require_float(api, x);
  require_eps(api, o.eps);
  if (x.ndim() < 2)
    fail(api, "needs a batch and a channel axis (at least 2-d); got " + x.describe());
  const int a = norm_axis(api, o.axis, x.ndim(), x);
  check_affine(api, "gamma", gamma, x, a);
  check_affine(api, "beta", beta, x, a);
  check_state(api, s, x, a);
  return a;
}

// p ([C], any dtype) at dtype t, shaped to broadcast along axis `a` of an x of `ndim` axes.
Tensor along(const Tensor& p, int ndim, int a, DType t) {
  Shape s(ndim, 1);
  s[a] = p.shape()[0];
  return reshape(cast(p, t), s);
}

}  // namespace

BatchNormState batch_norm_state(int64_t channels, DType t) {
  const std::string api = "nx::nn::batch_norm_state";
  if (channels < 0) fail(api, "channels must be >= 0, got " + std::to_string(channels));
  if (!ir::is_float(t))
    fail(api, "the state's dtype must be float, got " + std::string(ir::name(t)));
  return {zeros(t, {channels}), ones(t, {channels})};
}

BatchNormOutput batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const BatchNormState& state, const BatchNormOptions& o) {
  OpScope scope_("nx::nn::batch_norm", {&x, &gamma, &beta, &state.mean, &state.var});
  const std::string api = "nx::nn::batch_norm";
  const int a = batch_norm_axis(api, x, gamma, beta, state, o);
  if (!(o.momentum >= 0 && o.momentum <= 1))
    fail(api, "momentum must be in [0, 1], got " + show(o.momentum));
  const int nd = x.ndim();
  Axes red;
  int64_t n = 1;
  for (int i = 0; i < nd; ++i)
    if (i != a) red.push_back(i), n *= x.shape()[i];
  if (n < 2)
    fail(api, "training needs more than 1 value per channel (torch's rule: the unbiased " +
                  std::string("variance divides by n - 1); ") + x.describe() + " has " +
                  std::to_string(n) + " per channel along axis " + std::to_string(a));
  const DType t = compute_dtype(x.dtype());
  const int64_t c = x.shape()[a];
  Tensor xf = cast(x, t);
  Tensor mean = div(sum(xf, red, true), scalar_like(xf, static_cast<double>(n)));
  Tensor d = sub(xf, mean);
  Tensor ss = sum(mul(d, d), red, true);  // n times the biased variance
  Tensor var = div(ss, scalar_like(ss, static_cast<double>(n)));
  Tensor y = mul(d, rsqrt(add(var, scalar_like(var, o.eps))));
  y = cast(add(mul(y, along(gamma, nd, a, t)), along(beta, nd, a, t)), x.dtype());
  // The running statistics at the state's dtype; torch's order of the terms.
  const DType st = state.mean.dtype();
  Tensor bm = cast(reshape(mean, {c}), st);
  Tensor bv = cast(reshape(div(ss, scalar_like(ss, static_cast<double>(n - 1))), {c}), st);
  Tensor m = scalar_like(bm, o.momentum), keep = scalar_like(bm, 1 - o.momentum);
  BatchNormState next{stop_gradient(add(mul(m, bm), mul(keep, state.mean))),
                      stop_gradient(add(mul(m, bv), mul(keep, state.var)))};
  return {y, next};
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const BatchNormState& state, const BatchNormOptions& o) {
  OpScope scope_("nx::nn::batch_norm_inference", {&x, &gamma, &beta, &state.mean, &state.var});
  const std::string api = "nx::nn::batch_norm_inference";
  const int a = batch_norm_axis(api, x, gamma, beta, state, o);
  const int nd = x.ndim();
  const DType t = compute_dtype(x.dtype());
  Tensor mean = stop_gradient(along(state.mean, nd, a, t));
  Tensor var = stop_gradient(along(state.var, nd, a, t));
  Tensor y = mul(sub(cast(x, t), mean), rsqrt(add(var, scalar_like(var, o.eps))));
  return cast(add(mul(y, along(gamma, nd, a, t)), along(beta, nd, a, t)), x.dtype());
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& gamma, const Tensor& beta,
                  double eps) {
  OpScope scope_("nx::nn::group_norm", {&x, &gamma, &beta});
  const std::string api = "nx::nn::group_norm";
  require_float(api, x);
  require_eps(api, eps);
  if (x.ndim() < 2) fail(api, "needs x [N, C, ...] (at least 2-d); got " + x.describe());
  const int64_t n = x.shape()[0], c = x.shape()[1];
  if (num_groups < 1 || c % num_groups != 0)
    fail(api, "num_groups " + std::to_string(num_groups) + " does not divide the " +
                  std::to_string(c) + " channels of " + x.describe());
  check_affine(api, "gamma", gamma, x, 1);
  check_affine(api, "beta", beta, x, 1);
  int64_t m = c / num_groups;  // elements per (sample, group)
  for (int i = 2; i < x.ndim(); ++i) m *= x.shape()[i];
  const DType t = compute_dtype(x.dtype());
  Tensor xg = reshape(cast(x, t), {n, num_groups, m});
  Tensor mean = div(sum(xg, {2}, true), scalar_like(xg, static_cast<double>(m)));
  Tensor d = sub(xg, mean);
  Tensor var = div(sum(mul(d, d), {2}, true), scalar_like(xg, static_cast<double>(m)));
  Tensor y = reshape(mul(d, rsqrt(add(var, scalar_like(var, eps)))), x.shape());
  return cast(add(mul(y, along(gamma, x.ndim(), 1, t)), along(beta, x.ndim(), 1, t)), x.dtype());
}

}  // namespace nx::nn
