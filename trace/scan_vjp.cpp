#include "trace/scan_vjp.h"

#include <stdexcept>
#include <string>
#include <unordered_map>

#include "core/interpreter.h"
#include "core/ops.h"
#include "ir/node.h"
#include "trace/control_flow.h"
#include "trace/custom_vjp.h"
#include "trace/graph_eval.h"
#include "trace/vjp.h"

namespace rune::detail {

namespace {

template <class T>
std::vector<T> slice(const std::vector<T>& v, size_t from, size_t to) {
  return std::vector<T>(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(to));
}

}  // namespace

ScanRun run_scan(const Tracer::Loop& s, const std::vector<nx::Tensor>& inputs, bool save_carries,
                 nx::Device device) {
  // Traced under differentiation, its body records no loops (trace/structured.h).
  bool nests = false;
  for (const auto& e : s.body) nests = nests || std::holds_alternative<Tracer::Loop>(e);
  if (s.trips < 0 || nests)
    throw std::logic_error(std::string(s.api) + ": autodiff met a loop it cannot differentiate");
  const size_t nc = s.n_carry, n_args = s.n_carry + s.n_xs;
  const size_t n_y = s.body_roots.size() - nc;
  const std::vector<nx::Tensor> caps = slice(inputs, n_args, inputs.size());
  // One step: the recorded body on (carry, x rows, captures); with save_carries, the incoming
  // carry is one more y, so the loop stacks it.
  FlatBody step = [&](const std::vector<nx::Tensor>& in) {
    std::vector<nx::Tensor> bind = in;
    bind.insert(bind.end(), caps.begin(), caps.end());
    std::vector<nx::Tensor> out = evaluate(s.body_roots, bind, device);
    if (save_carries) out.insert(out.end(), in.begin(), in.begin() + static_cast<long>(nc));
    return out;
  };
  auto [carry, ys] = scan_flat(s.api, step, slice(inputs, 0, nc), {}, slice(inputs, nc, n_args),
                               s.trips, s.counted ? &s.counter_lo : nullptr);
  ScanRun r;
  r.outputs = carry;
  r.outputs.insert(r.outputs.end(), ys.begin(), ys.begin() + static_cast<long>(n_y));
  r.carries = slice(ys, n_y, ys.size());
  return r;
}

std::vector<nx::Tensor> scan_vjp(const Tracer::Loop& s, const std::vector<nx::Tensor>& inputs,
                                 const ScanRun& run, const std::vector<nx::Tensor>& output_cts,
                                 const std::vector<bool>& wants, nx::Device device) {
  const size_t nc = s.n_carry, n_args = s.n_carry + s.n_xs, n_in = inputs.size();
  const size_t n_out = s.body_roots.size();
  auto is_float = [](const nx::Tensor& t) { return ir::is_float(t.dtype()); };
  // The body's params as its graph holds them (a capture keeps its own layout).
  std::unordered_map<int, ir::NodeRef> params;
  for (ir::NodeRef n : ir::toposort(s.body_roots))
    if (n->op == ir::Op::Param) params[ir::arg_load(n).param] = n;
  auto body_param = [&](size_t i) {
    auto it = params.find(static_cast<int>(i));
    if (it != params.end()) return it->second;
    nx::Shape shape = inputs[i].shape();  // a param the body never reads: its cotangent is 0
    if (i >= nc && i < n_args) shape.erase(shape.begin());  // an x: one row
    return ir::contiguous_param(static_cast<int>(i), inputs[i].dtype(), shape);
  };
  // The step's vjp, once, as a graph over the body's params and the cotangents of its float
  // outputs (params n_in, n_in + 1, ...): the cotangents of the float carry leaves, then of the
  // wanted float xs rows, then of the wanted float captures.
  std::vector<ir::NodeRef> roots, cots;
  std::vector<size_t> float_outputs;
  for (size_t k = 0; k < n_out; ++k) {
    ir::NodeRef o = s.body_roots[k];
    if (!ir::is_float(o->dtype)) continue;
    float_outputs.push_back(k);
    roots.push_back(o);
    cots.push_back(ir::contiguous_param(static_cast<int>(n_in + cots.size()), o->dtype, o->shape));
  }
  std::vector<size_t> carry_ct, x_ct, cap_ct;  // input indices, in the wrt order
  for (size_t i = 0; i < n_in; ++i)
    if (is_float(inputs[i]) && (i < nc || wants[i]))
      (i < nc ? carry_ct : i < n_args ? x_ct : cap_ct).push_back(i);
  std::vector<ir::NodeRef> wrt;
  for (const auto* group : {&carry_ct, &x_ct, &cap_ct})
    for (size_t i : *group) wrt.push_back(body_param(i));
  const std::vector<ir::NodeRef> step_vjp = vjp_nodes(roots, cots, wrt, {}, custom_vjps_of(s.body));
  const std::vector<nx::Tensor> caps = slice(inputs, n_args, n_in);

  // The reverse scan. Carry: the float carry leaves' cotangents, then one accumulator per
  // wanted capture. Rows: the saved carry, the xs, the float ys' cotangents.
  std::vector<nx::Tensor> init;
  for (size_t i : carry_ct) init.push_back(output_cts[i]);
  {
    nx::CreateOn on(device);
    for (size_t i : cap_ct) init.push_back(nx::full(inputs[i].dtype(), inputs[i].shape(), -0.0));
  }
  std::vector<nx::Tensor> rows;
  for (const auto& c : run.carries) rows.push_back(flip_rows(c));
  for (size_t j = nc; j < n_args; ++j) rows.push_back(flip_rows(inputs[j]));
  for (size_t k : float_outputs)
    if (k >= nc) rows.push_back(flip_rows(output_cts[k]));
  const size_t n_cc = carry_ct.size(), n_acc = cap_ct.size();
  FlatBody back = [&](const std::vector<nx::Tensor>& in) {
    // in: carry cotangents (n_cc), accumulators (n_acc), then the rows: carry (nc), xs, y cts.
    std::vector<nx::Tensor> bind = slice(in, n_cc + n_acc, n_cc + n_acc + n_args);
    bind.insert(bind.end(), caps.begin(), caps.end());
    // The cotangents of the float outputs: carry leaves from the loop's carry, ys from the rows.
    size_t c = 0, y = n_cc + n_acc + n_args;
    for (size_t k : float_outputs) bind.push_back(k < nc ? in[c++] : in[y++]);
    std::vector<nx::Tensor> g = evaluate(step_vjp, bind, device);
    std::vector<nx::Tensor> out = slice(g, 0, n_cc);  // the previous carry's cotangents
    for (size_t a = 0; a < n_acc; ++a) out.push_back(in[n_cc + a] + g[n_cc + x_ct.size() + a]);
    for (size_t j = 0; j < x_ct.size(); ++j) out.push_back(g[n_cc + j]);  // rows: xs cotangents
    return out;
  };
  auto [carry, ys] = scan_flat(s.api, back, init, {}, rows, s.trips);
  std::vector<nx::Tensor> cts(n_in);
  for (size_t a = 0; a < n_cc; ++a) cts[carry_ct[a]] = carry[a];
  for (size_t a = 0; a < n_acc; ++a) cts[cap_ct[a]] = carry[n_cc + a];
  for (size_t j = 0; j < x_ct.size(); ++j) cts[x_ct[j]] = flip_rows(ys[j]);
  return cts;
}

}  // namespace rune::detail
