#include "trace/vmap.h"

#include <stdexcept>
#include <unordered_map>

#include "core/interpreter.h"
#include "core/ops.h"
#include "ir/shape.h"
#include "trace/batching.h"
#include "trace/check_replay.h"
#include "trace/graph_eval.h"
#include "trace/structured.h"
#include "trace/vmap_loops.h"

namespace rune::detail {

namespace {

std::string leaf_name(const std::vector<std::string>& paths, size_t i) {
  return "argument " + (i < paths.size() && !paths[i].empty() ? paths[i] : std::to_string(i));
}

// x's axis `from` moved to `to`, as a node (the tensor form is in trace/vmap_loops.h).
ir::NodeRef move_axis(ir::NodeRef x, int64_t from, int64_t to) {
  if (from == to) return x;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < static_cast<int64_t>(x->shape.size()); ++d)
    if (d != from) perm.push_back(d);
  perm.insert(perm.begin() + to, from);
  ir::Shape s;
  for (auto p : perm) s.push_back(x->shape[static_cast<size_t>(p)]);
  return ir::make(ir::Op::Permute, x->dtype, s, {x}, perm);
}

}  // namespace

std::vector<nx::Tensor> vmap_flat(const char* api, const std::vector<nx::Tensor>& leaves,
                                  const std::vector<Axis>& axes,
                                  const std::vector<std::string>& paths, const FlatFn& f,
                                  int64_t out_axes) {
  // Check every axis and the batch size before tracing: a failing call runs nothing.
  std::vector<Aval> avals;
  std::vector<int64_t> at(leaves.size(), -1);
  int64_t batch = -1;
  size_t first = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const nx::Tensor& x = leaves[i];
    avals.push_back({x.dtype(), x.shape()});
    if (!axes[i]) continue;
    int64_t r = x.ndim(), a = *axes[i];
    if (a < -r || a >= r)
      throw std::invalid_argument(std::string(api) + ": in_axes " + std::to_string(a) +
                                  " is out of range for " + leaf_name(paths, i) + " (" +
                                  x.describe() + ", axes " + std::to_string(-r) + ".." +
                                  std::to_string(r - 1) + ")");
    if (a < 0) a += r;
    at[i] = a;
    int64_t b = x.shape()[static_cast<size_t>(a)];
    if (batch < 0) {
      batch = b;
      first = i;
    } else if (b != batch) {
      throw std::invalid_argument(
          std::string(api) + ": mismatched batch sizes: " + leaf_name(paths, first) + " has " +
          std::to_string(batch) + " along axis " + std::to_string(at[first]) + ", " +
          leaf_name(paths, i) + " has " + std::to_string(b) + " along axis " + std::to_string(a));
    }
    avals.back().shape.erase(avals.back().shape.begin() + a);
  }
  if (batch < 0)
    throw std::invalid_argument(std::string(api) +
                                ": no argument is batched (every in_axes is none)");

  ir::NodeUse use;  // the traced graph and its batched form stay until they ran
  nx::Device device = device_of(leaves);
  int n = static_cast<int>(leaves.size());
  // Loops f runs are recorded (Tracer::Loop) and batched as loops (trace/vmap_loops.h), except
  // in a trace being differentiated, which autodiff replays per iteration.
  Traced t = trace_flat(api, avals, device, f, n, "f", /*records_loops=*/!differentiating());

  // Batched inputs are bound with their batch axis moved to 0 (a view); shared ones as given.
  std::unordered_map<ir::NodeRef, ir::NodeRef> inputs;
  std::vector<nx::Tensor> bindings;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (at[i] < 0) {
      bindings.push_back(leaves[i]);
      continue;
    }
    bindings.push_back(move_axis(leaves[i], at[i], 0));
    ir::Shape s = bindings.back().shape();
    inputs[t.params[i]] = ir::contiguous_param(static_cast<int>(i), leaves[i].dtype(), s);
  }
  for (const auto& c : t.captured) bindings.push_back(c);

  // out_axes are checked before anything runs.
  std::vector<int64_t> out_at;
  for (size_t o = 0; o < t.outputs.size(); ++o) {
    int64_t r = static_cast<int64_t>(t.outputs[o]->shape.size()) + 1, a = out_axes;
    if (a < -r || a >= r)
      throw std::invalid_argument(std::string(api) + ": out_axes " + std::to_string(a) +
                                  " is out of range for output " + std::to_string(o) + " (" +
                                  std::string(ir::name(t.outputs[o]->dtype)) + " " +
                                  ir::to_string(t.outputs[o]->shape) + " per example, so axes " +
                                  std::to_string(-r) + ".." + std::to_string(r - 1) + ")");
    out_at.push_back(a < 0 ? a + r : a);
  }
  GraphEvaluator ev(bindings, device);
  // f's structured primitives, in program order, by their batch rules (trace/structured.def).
  Batching b{api, ev, inputs, batch, device};
  for (const auto& e : t.equations)
    std::visit(
        Overloaded{
#define STRUCTURED(Row, eval, vjp, jvp, batch, stage) [&](const Tracer::Row& r) { batch(r, b); },
#include "trace/structured.def"
#undef STRUCTURED
        },
        e);
  auto batched = batch_nodes(t.outputs, inputs, batch);
  std::vector<ir::NodeRef> roots;
  for (size_t o = 0; o < t.outputs.size(); ++o)
    roots.push_back(move_axis(with_batch_axis(batched[o], batch), 0, out_at[o]));
  return ev(roots);
}

void batch_check(const Tracer::Check& c, Batching& b) {
  // Each check's first failing index becomes one per example, and its data gain the batch axis.
  std::vector<ir::NodeRef> roots;
  for (const BatchedNode& n : batch_nodes(check_nodes(c), b.inputs, b.batch))
    roots.push_back(with_batch_axis(n, b.batch));
  replay_batched_check(b.api, c, b.ev(roots), b.batch, b.device);
}

namespace {
// The abstract shape and dtype of f(x), from a trace (f runs on stand-ins; nothing computes).
Aval out_aval(const char* api, const TensorFn& f, const nx::Tensor& x) {
  ir::NodeUse use;
  Traced t = trace_flat(
      api, {{x.dtype(), x.shape()}}, x.device(),
      [&](const std::vector<nx::Tensor>& xs) { return std::vector<nx::Tensor>{f(xs[0])}; }, 1);
  return {t.outputs[0]->dtype, t.outputs[0]->shape};
}
// The unit vectors of a space of shape s, stacked: [size(s)] ++ s, on x's device.
nx::Tensor basis(nx::DType t, const nx::Shape& s, const nx::Tensor& x) {
  nx::CreateOn on(x.device());
  nx::Shape b{ir::numel(s)};
  b.insert(b.end(), s.begin(), s.end());
  return nx::reshape(nx::eye(t, ir::numel(s)), b);
}
void require_float(const char* api, const nx::Tensor& x) {
  if (!ir::is_float(x.dtype()))
    throw std::invalid_argument(std::string(api) + ": x is " + x.describe() +
                                "; only float tensors have derivatives");
}
}  // namespace

nx::Tensor jacrev_at(const TensorFn& f, const nx::Tensor& x) {
  require_float("rune::jacrev", x);
  Aval y = out_aval("rune::jacrev", f, x);
  // Row i of J is the vjp of the unit cotangent e_i: [size(y)] ++ x.shape, read as y ++ x.
  auto row = [&](const nx::Tensor& u) { return rune::vjp(f, x, u).second; };
  nx::Tensor j = vmap(row, 0)(basis(y.dtype, y.shape, x));
  nx::Shape s = y.shape;
  s.insert(s.end(), x.shape().begin(), x.shape().end());
  return nx::reshape(j, s);
}

nx::Tensor jacfwd_at(const TensorFn& f, const nx::Tensor& x) {
  require_float("rune::jacfwd", x);
  Aval y = out_aval("rune::jacfwd", f, x);
  // Column k of J is the jvp of the unit tangent e_k, stacked last: y ++ [size(x)], read as
  // y ++ x.
  auto col = [&](const nx::Tensor& t) { return rune::jvp<nx::Tensor>(f, x, t).second; };
  int64_t last = static_cast<int64_t>(y.shape.size());
  nx::Tensor j = vmap(col, 0, last)(basis(x.dtype(), x.shape(), x));
  nx::Shape s = y.shape;
  s.insert(s.end(), x.shape().begin(), x.shape().end());
  return nx::reshape(j, s);
}

}  // namespace rune::detail
