#include "trace/autodiff.h"

#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "core/interpreter.h"
#include "core/ops.h"
#include "trace/check_replay.h"
#include "trace/control_flow.h"
#include "trace/graph_eval.h"
#include "trace/scan_vjp.h"
#include "trace/structured.h"
#include "trace/trace_flat.h"
#include "trace/vjp.h"

namespace rune::detail {

namespace {

// Traces f over stand-ins for `params` (Params 0..n-1); `bindings` holds the params, room for
// `extra_params` more, then the captured tensors.
struct Bound : Traced {
  std::vector<nx::Tensor> bindings;
};
Bound trace(const char* api, const std::vector<nx::Tensor>& params, const FlatFn& f,
            int extra_params, bool records_loops) {
  DifferentiatingScope differentiating;  // rune::while_loop raises inside
  std::vector<Aval> avals;
  for (const auto& p : params) avals.push_back({p.dtype(), p.shape()});
  Bound t{trace_flat(api, avals, device_of(params), f,
                     static_cast<int>(params.size()) + extra_params, "f", records_loops),
          params};
  t.bindings.resize(params.size() + static_cast<size_t>(extra_params));
  for (const auto& c : t.captured) t.bindings.push_back(c);
  return t;
}

}  // namespace

// Autodiff's state while it runs a trace's equations (trace/structured.h's vjp rules): the
// forward values, which params and nodes depend on the differentiated params, the checkpoint
// blocks, and the seeds of the backward pass (roots receiving cotangents), which each backward
// half extends with the cotangents of its equation's inputs.
struct Differentiation {
  nx::Device device;
  GraphEvaluator ev;
  std::unordered_set<int> live;  // params that depend on the differentiated params
  std::unordered_map<ir::NodeRef, bool> depends;
  std::vector<Tracer::Checkpoint> checkpoints;
  std::vector<Tracer::CustomVjp> custom_vjps;
  std::vector<ir::NodeRef> seed_roots, seed_cots;
};

Backward vjp_check(const Tracer::Check& c, Differentiation& d) {
  eval_check(c, d.ev);
  return {};
}

Backward vjp_checkpoint(const Tracer::Checkpoint& c, Differentiation& d) {
  d.checkpoints.push_back(c);
  return {};
}

Backward vjp_custom_vjp(const Tracer::CustomVjp& c, Differentiation& d) {
  d.custom_vjps.push_back(c);
  return {};
}

// A scan kept whole runs forward, saving its carries where a gradient flows through it; its
// backward half is the reverse scan of its body's vjp (trace/scan_vjp.h) on its results'
// cotangents, whose results seed the cotangents of the scan's inputs.
Backward vjp_loop(const Tracer::Loop& s, Differentiation& d) {
  for (ir::NodeRef n : ir::toposort(s.inputs)) {
    if (d.depends.count(n)) continue;
    bool dep = n->op == ir::Op::Param && d.live.count(ir::arg_load(n).param);
    for (ir::NodeRef src : n->src) dep = dep || d.depends.at(src);
    d.depends[n] = dep;
  }
  auto wants = std::make_shared<std::vector<bool>>();
  bool needed = false;
  for (ir::NodeRef in : s.inputs) {
    wants->push_back(ir::is_float(in->dtype) && d.depends.at(in));
    needed = needed || wants->back();
  }
  auto run = std::make_shared<ScanRun>(run_scan(s, d.ev(s.inputs), needed, d.device));
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    d.ev.bind(s.outputs[i], run->outputs[i]);
    if (needed) d.live.insert(s.outputs[i]);
  }
  if (!needed) return {};
  return [&s, wants, run](Differentiation& d) {
    std::vector<ir::NodeRef> results;
    for (size_t i = 0; i < s.outputs.size(); ++i)
      results.push_back(
          ir::contiguous_param(s.outputs[i], run->outputs[i].dtype(), run->outputs[i].shape()));
    std::vector<nx::Tensor> result_cts =
        d.ev(vjp_nodes(d.seed_roots, d.seed_cots, results, d.checkpoints, d.custom_vjps));
    std::vector<nx::Tensor> input_cts =
        scan_vjp(s, d.ev(s.inputs), *run, result_cts, *wants, d.device);
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      if (!(*wants)[i] || !input_cts[i].defined()) continue;
      d.seed_roots.push_back(s.inputs[i]);
      d.seed_cots.push_back(ir::contiguous_param(d.ev.add_binding(input_cts[i]),
                                                 input_cts[i].dtype(), input_cts[i].shape()));
    }
  };
}

void jvp_loop(const Tracer::Loop& loop, GraphEvaluator&) {
  throw std::logic_error(std::string(loop.api) +
                         ": rune::jvp's trace replays loops; it records none");
}

namespace {

// Evaluates the traced graph's outputs and its params' gradients for `roots` receiving `cots`:
// f's structured primitives by their vjp rules in program order (forward: checks raised, scans
// run as loops), the outputs, then the equations' backward halves in reverse order, each
// seeding more cotangents, and the params' gradients. Returns the outputs, then the gradients.
std::vector<nx::Tensor> evaluate_with_rules(const Bound& t, const std::vector<ir::NodeRef>& roots,
                                            const std::vector<ir::NodeRef>& cots) {
  Differentiation d{t.device, GraphEvaluator(t.bindings, t.device), {}, {}, {}, {}, roots, cots};
  for (ir::NodeRef p : t.params) d.live.insert(ir::arg_load(p).param);
  std::vector<Backward> backward;
  for (const auto& e : t.equations)
    backward.push_back(std::visit(
        Overloaded{
#define STRUCTURED(Row, eval, vjp, jvp, batch, stage) \
  [&](const Tracer::Row& r) { return vjp(r, d); },
#include "trace/structured.def"
#undef STRUCTURED
        },
        e));
  std::vector<nx::Tensor> outs = d.ev(t.outputs);
  for (size_t k = backward.size(); k-- > 0;)
    if (backward[k]) backward[k](d);
  std::vector<nx::Tensor> grads =
      d.ev(vjp_nodes(d.seed_roots, d.seed_cots, t.params, d.checkpoints, d.custom_vjps));
  outs.insert(outs.end(), grads.begin(), grads.end());
  return outs;
}

}  // namespace

std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> vjp_flat(
    const char* api, const std::vector<nx::Tensor>& params, const std::vector<std::string>& paths,
    const FlatFn& f, const std::vector<nx::Tensor>* cotangents, bool has_aux) {
  for (size_t i = 0; i < params.size(); ++i)
    if (!ir::is_float(params[i].dtype()))
      throw std::invalid_argument(
          std::string(api) + ": parameter " +
          (paths.empty() || paths[i].empty() ? std::to_string(i) : paths[i]) + " is " +
          params[i].describe() + "; only float tensors have gradients");
  int n_cot = cotangents ? static_cast<int>(cotangents->size()) : 0;
  ir::NodeUse use;  // the traced graph and its derivatives stay until they ran
  Bound t = trace(api, params, f, n_cot, /*records_loops=*/true);
  std::vector<ir::NodeRef> cots;
  // With has_aux the outputs after the first are carried out undifferentiated.
  size_t n_diff = has_aux ? 1 : t.outputs.size();
  if (!cotangents) {
    if (has_aux ? t.outputs.empty() : t.outputs.size() != 1)
      throw std::invalid_argument(std::string(api) + ": f must return one scalar");
    ir::NodeRef o = t.outputs[0];
    if (!o->shape.empty() || !ir::is_float(o->dtype))
      throw std::invalid_argument(std::string(api) + ": f must return a float scalar, got " +
                                  std::string(ir::name(o->dtype)) + " " + ir::to_string(o->shape));
    cots.push_back(ir::make(ir::Op::Const, o->dtype, {}, {}, 1.0));
  } else {
    if (cotangents->size() != t.outputs.size())
      throw std::invalid_argument(std::string(api) + ": " + std::to_string(cotangents->size()) +
                                  " cotangents for " + std::to_string(t.outputs.size()) +
                                  " outputs");
    for (size_t i = 0; i < t.outputs.size(); ++i) {
      const nx::Tensor& c = (*cotangents)[i];
      ir::NodeRef o = t.outputs[i];
      if (c.dtype() != o->dtype || c.shape() != o->shape)
        throw std::invalid_argument(std::string(api) + ": cotangent " + std::to_string(i) + " is " +
                                    c.describe() + " but output " + std::to_string(i) + " is " +
                                    std::string(ir::name(o->dtype)) + " " +
                                    ir::to_string(o->shape));
      int index = static_cast<int>(params.size() + i);
      cots.push_back(ir::contiguous_param(index, c.dtype(), c.shape()));
      t.bindings[static_cast<size_t>(index)] = c;
    }
  }
  std::vector<ir::NodeRef> differentiated(t.outputs.begin(),
                                          t.outputs.begin() + static_cast<long>(n_diff));
  std::vector<nx::Tensor> vals = evaluate_with_rules(t, differentiated, cots);
  std::vector<nx::Tensor> outs(vals.begin(), vals.begin() + static_cast<long>(t.outputs.size()));
  std::vector<nx::Tensor> gs(vals.begin() + static_cast<long>(t.outputs.size()), vals.end());
  return {outs, gs};
}

std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> jvp_flat(
    const std::vector<nx::Tensor>& primals, const std::vector<nx::Tensor>& tangents,
    const FlatFn& f) {
  const char* api = "rune::jvp";
  if (tangents.size() != primals.size())
    throw std::invalid_argument(std::string(api) + ": " + std::to_string(tangents.size()) +
                                " tangents for " + std::to_string(primals.size()) + " primals");
  for (size_t i = 0; i < primals.size(); ++i)
    if (tangents[i].dtype() != primals[i].dtype() || tangents[i].shape() != primals[i].shape())
      throw std::invalid_argument(std::string(api) + ": tangent " + std::to_string(i) + " is " +
                                  tangents[i].describe() + " but primal " + std::to_string(i) +
                                  " is " + primals[i].describe());
  // Forward mode by transposing reverse mode: u -> J^T u is linear, so the vjp of that map
  // at any u, applied to the tangent t, is (J^T)^T t = J t.
  ir::NodeUse use;  // the traced graph and its derivatives stay until they ran
  // Scans are replayed per iteration here (not kept whole): this transposes the vjp graph.
  Bound t = trace(api, primals, f, 0, /*records_loops=*/false);
  size_t n = primals.size(), m = t.outputs.size();
  size_t base = t.bindings.size();
  std::vector<ir::NodeRef> us;
  for (size_t i = 0; i < m; ++i) {
    ir::NodeRef o = t.outputs[i];
    us.push_back(ir::contiguous_param(static_cast<int>(base + i), o->dtype, o->shape));
  }
  auto g = vjp_nodes(t.outputs, us, t.params);  // J^T u
  std::vector<ir::NodeRef> ts;
  for (size_t i = 0; i < n; ++i)
    ts.push_back(ir::contiguous_param(static_cast<int>(base + m + i), primals[i].dtype(),
                                      primals[i].shape()));
  auto jt = vjp_nodes(g, ts, us);  // d<J^T u, t>/du = J t
  std::vector<nx::Tensor> bindings = t.bindings;
  {
    nx::CreateOn on(t.device);  // the dummy cotangents live with the primals
    for (size_t i = 0; i < m; ++i)
      bindings.push_back(nx::zeros(t.outputs[i]->dtype, t.outputs[i]->shape));
  }
  for (const auto& x : tangents) bindings.push_back(x);
  std::vector<ir::NodeRef> roots = t.outputs;
  roots.insert(roots.end(), jt.begin(), jt.end());
  GraphEvaluator ev(bindings, t.device);
  // f's structured primitives by their jvp rules, in program order: its checks keep their
  // forward meaning (raised, or recorded in the enclosing trace).
  for (const auto& e : t.equations)
    std::visit(
        Overloaded{
#define STRUCTURED(Row, eval, vjp, jvp, batch, stage) [&](const Tracer::Row& r) { jvp(r, ev); },
#include "trace/structured.def"
#undef STRUCTURED
        },
        e);
  auto vals = ev(roots);
  return {std::vector<nx::Tensor>(vals.begin(), vals.begin() + static_cast<long>(m)),
          std::vector<nx::Tensor>(vals.begin() + static_cast<long>(m), vals.end())};
}

}  // namespace rune::detail
