// custom_vjp (trace/custom_vjp.h): recording a value's own reverse-mode rule, and splicing the
// rule's traced backward graph into a backward pass (trace/vjp.cpp reads it).
#include "trace/custom_vjp.h"

#include <stdexcept>
#include <string>
#include <unordered_set>

#include "core/interpreter.h"
#include "ir/rewrite.h"
#include "trace/trace_flat.h"

namespace rune::detail {

nx::Tensor custom_vjp(const std::vector<nx::Tensor>& inputs, std::vector<bool> own,
                      const CustomForward& forward, CustomBackward backward) {
  if (own.size() != inputs.size())
    throw std::logic_error("rune::custom_vjp: " + std::to_string(own.size()) + " marks for " +
                           std::to_string(inputs.size()) + " inputs");
  nx::Tensor out = forward(inputs);
  auto* tracer = dynamic_cast<Tracer*>(out.impl().tracer);
  if (!tracer) return out;  // eager: nothing is differentiated here
  Tracer::CustomVjp c;
  std::unordered_set<ir::NodeRef> seen;
  for (const auto& x : inputs) {
    c.inputs.push_back(tracer->node_of(x));
    if (!seen.insert(c.inputs.back()).second) return out;  // aliased inputs: the parts' rules
  }
  c.output = tracer->node_of(out);
  c.own = std::move(own);
  c.backward = std::move(backward);
  c.device = out.device();
  tracer->record_custom_vjp(std::move(c));
  return out;
}

std::vector<ir::NodeRef> custom_cotangents(const Tracer::CustomVjp& c, ir::NodeRef g) {
  const char* api = "rune::custom_vjp";
  std::vector<Aval> avals;
  for (ir::NodeRef x : c.inputs) avals.push_back({x->dtype, x->shape});
  avals.push_back({g->dtype, g->shape});
  const size_t n = c.inputs.size();
  Traced t = trace_flat(
      api, avals, c.device,
      [&](const std::vector<nx::Tensor>& a) {
        return c.backward(std::vector<nx::Tensor>(a.begin(), a.begin() + static_cast<long>(n)),
                          a[n]);
      },
      static_cast<int>(avals.size()), "the backward rule");
  if (!t.captured.empty())
    throw std::logic_error(std::string(api) + ": the backward rule captured " +
                           std::to_string(t.captured.size()) + " concrete tensors");
  for (const auto& e : t.equations)
    if (!std::holds_alternative<Tracer::CustomVjp>(e))
      throw std::logic_error(std::string(api) + ": the backward rule recorded a check or a loop");
  std::vector<ir::NodeRef> subst = c.inputs;
  subst.push_back(g);
  std::vector<ir::NodeRef> r = ir::rewrite(t.outputs, [&](ir::NodeRef m, const auto&) {
    return m->op == ir::Op::Param ? subst.at(static_cast<size_t>(ir::arg_load(m).param)) : nullptr;
  });
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!c.own[i]) continue;
    if (k >= r.size() || r[k]->dtype != c.inputs[i]->dtype || r[k]->shape != c.inputs[i]->shape)
      throw std::logic_error(std::string(api) + ": the backward rule's cotangent " +
                             std::to_string(k) + " does not match input " + std::to_string(i) +
                             " " + ir::to_string(c.inputs[i]->shape));
    ++k;
  }
  if (k != r.size())
    throw std::logic_error(std::string(api) + ": the backward rule returned " +
                           std::to_string(r.size()) + " cotangents for " + std::to_string(k) +
                           " inputs");
  return r;
}

std::vector<Tracer::CustomVjp> custom_vjps_of(const std::vector<Tracer::Equation>& equations) {
  std::vector<Tracer::CustomVjp> r;
  for (const auto& e : equations)
    if (const auto* c = std::get_if<Tracer::CustomVjp>(&e)) r.push_back(*c);
  return r;
}

}  // namespace rune::detail
