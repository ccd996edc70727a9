#include "trace/vmap_loops.h"

#include <stdexcept>
#include <unordered_map>

#include "core/ops.h"
#include "ir/node.h"
#include "trace/batching.h"
#include "trace/control_flow.h"
#include "trace/graph_eval.h"
#include "trace/structured.h"

namespace rune::detail {

namespace {

// The loops in the body of a lowered loop, in order. Its other equations can only be
// checkpoint blocks and custom vjps, which only autodiff reads: a body with checks is never kept
// whole.
std::vector<const Tracer::Loop*> body_loops(const Tracer::Loop& loop) {
  std::vector<const Tracer::Loop*> r;
  for (const auto& e : loop.body)
    std::visit(Overloaded{[&](const Tracer::Loop& inner) { r.push_back(&inner); },
                          [](const Tracer::Checkpoint&) {}, [](const Tracer::CustomVjp&) {},
                          [&](const Tracer::Check&) {
                            throw std::logic_error(std::string(loop.api) +
                                                   ": a loop kept whole has a check in its body");
                          }},
               e);
  return r;
}

// Every node the body of `loop` computes from: its roots, its predicate, its loops' inputs.
std::vector<ir::NodeRef> body_nodes(const Tracer::Loop& loop) {
  std::vector<ir::NodeRef> r = loop.body_roots;
  if (loop.cond_root) r.push_back(loop.cond_root);
  for (const Tracer::Loop* inner : body_loops(loop))
    for (ir::NodeRef in : inner->inputs)
      if (in) r.push_back(in);
  return r;
}

// The body's params that are batched (params[k]), as batched Params with the same index: the
// batch axis first, contiguous (a loop binds each param to a buffer of its own).
std::unordered_map<ir::NodeRef, ir::NodeRef> batched_params(const Tracer::Loop& loop,
                                                            const std::vector<bool>& params,
                                                            int64_t batch) {
  std::unordered_map<ir::NodeRef, ir::NodeRef> map;
  for (ir::NodeRef n : ir::toposort(body_nodes(loop))) {
    if (n->op != ir::Op::Param) continue;
    const size_t k = static_cast<size_t>(ir::arg_load(n).param);
    if (k >= params.size() || !params[k]) continue;
    nx::Shape s{batch};
    s.insert(s.end(), n->shape.begin(), n->shape.end());
    map[n] = ir::contiguous_param(static_cast<int>(k), n->dtype, s);
  }
  return map;
}

// The batched forms of an inner loop's inputs (null stays null: the inner loop's own loops bind
// those params).
std::vector<BatchedNode> batched_inputs(const Tracer::Loop& inner,
                                        const std::unordered_map<ir::NodeRef, ir::NodeRef>& map,
                                        int64_t batch) {
  std::vector<ir::NodeRef> given;
  for (ir::NodeRef in : inner.inputs)
    if (in) given.push_back(in);
  std::vector<BatchedNode> b = batch_nodes(given, map, batch), r;
  size_t at = 0;
  for (ir::NodeRef in : inner.inputs) r.push_back(in ? b[at++] : BatchedNode{nullptr, false});
  return r;
}

// One run of the batched body on the carry `carry` (batched where b.params says): the new carry
// (batched where b.params says), the rows, then the predicate on `carry` where the loop has one.
std::vector<nx::Tensor> run_body_batched(const Tracer::Loop& loop, const LoopBatching& b,
                                         const std::vector<nx::Tensor>& inputs,
                                         const std::vector<nx::Tensor>& carry, int64_t batch,
                                         nx::Device device) {
  const size_t nc = loop.n_carry;
  // b.params covers the inner loops' results too (loop_batching), so this map reads them batched.
  const auto map = batched_params(loop, b.params, batch);
  std::vector<nx::Tensor> bind = inputs;
  for (size_t i = 0; i < nc; ++i) bind[i] = carry[i];
  GraphEvaluator ev(bind, device);
  const std::vector<const Tracer::Loop*> inners = body_loops(loop);
  for (size_t j = 0; j < inners.size(); ++j) {
    const Tracer::Loop& inner = *inners[j];
    const LoopBatching& ib = b.inner[j];
    std::vector<BatchedNode> bn = batched_inputs(inner, map, batch);
    std::vector<nx::Tensor> ins(inner.inputs.size());
    for (size_t k = 0; k < bn.size(); ++k)
      if (bn[k].node) ins[k] = ev({ib.params[k] ? with_batch_axis(bn[k], batch) : bn[k].node})[0];
    std::vector<nx::Tensor> outs = run_batched_loop(inner, ib, ins, batch, device);
    for (size_t m = 0; m < outs.size(); ++m)
      if (inner.outputs[m] >= 0) ev.bind(inner.outputs[m], outs[m]);
  }
  std::vector<ir::NodeRef> per_example = loop.body_roots;
  if (loop.cond_root) per_example.push_back(loop.cond_root);
  std::vector<BatchedNode> bn = batch_nodes(per_example, map, batch);
  std::vector<ir::NodeRef> roots;
  for (size_t i = 0; i < bn.size(); ++i)
    roots.push_back(i < nc && b.params[i] ? with_batch_axis(bn[i], batch) : bn[i].node);
  return ev(roots);
}

}  // namespace

nx::Tensor move_axis(const nx::Tensor& x, int64_t from, int64_t to) {
  if (from == to) return x;
  nx::Axes perm;
  for (int d = 0; d < x.ndim(); ++d)
    if (d != from) perm.push_back(d);
  perm.insert(perm.begin() + to, static_cast<int>(from));
  return nx::permute(x, perm);
}

LoopBatching loop_batching(const Tracer::Loop& loop, std::vector<bool> batched, int64_t batch) {
  const size_t nc = loop.n_carry;
  batched.resize(loop.inputs.size(), false);
  for (size_t k = 0; k < loop.inputs.size() && k < batched.size(); ++k)
    if (!loop.inputs[k]) batched[k] = false;  // an inner loop's result: found below
  // The fixed point: a carry leaf becomes batched when the body's new value for it is (or when a
  // batched predicate makes examples stop at different steps); at most nc rounds.
  for (;;) {
    LoopBatching r;
    r.params = batched;
    auto map = batched_params(loop, r.params, batch);
    for (const Tracer::Loop* inner_loop : body_loops(loop)) {
      const Tracer::Loop& inner = *inner_loop;
      std::vector<BatchedNode> bn = batched_inputs(inner, map, batch);
      std::vector<bool> in(bn.size());
      for (size_t k = 0; k < bn.size(); ++k) in[k] = bn[k].batched;
      r.inner.push_back(loop_batching(inner, in, batch));
      for (size_t m = 0; m < inner.outputs.size(); ++m)
        if (inner.outputs[m] >= 0)
          r.params[static_cast<size_t>(inner.outputs[m])] = r.inner.back().outputs[m];
      map = batched_params(loop, r.params, batch);
    }
    std::vector<ir::NodeRef> per_example = loop.body_roots;
    if (loop.cond_root) per_example.push_back(loop.cond_root);
    std::vector<BatchedNode> bn = batch_nodes(per_example, map, batch);
    r.pred = loop.cond_root && bn.back().batched;
    bool changed = false;
    for (size_t i = 0; i < nc; ++i)
      if (!batched[i] && (bn[i].batched || r.pred)) batched[i] = changed = true;
    if (changed) continue;
    for (size_t i = 0; i < nc; ++i) r.outputs.push_back(r.params[i]);
    for (size_t j = nc; j < loop.body_roots.size(); ++j) r.outputs.push_back(bn[j].batched);
    return r;
  }
}

std::vector<nx::Tensor> run_batched_loop(const Tracer::Loop& loop, const LoopBatching& b,
                                         const std::vector<nx::Tensor>& inputs, int64_t batch,
                                         nx::Device device) {
  const size_t nc = loop.n_carry;
  const std::vector<nx::Tensor> init(inputs.begin(), inputs.begin() + static_cast<long>(nc));
  auto body = [&](const std::vector<nx::Tensor>& carry) {
    return run_body_batched(loop, b, inputs, carry, batch, device);
  };
  if (loop.trips >= 0) {
    // A fixed trip count: one scan over no xs, whose rows are the body's rows.
    auto [carry, ys] = scan_flat("rune::scan", body, init, {}, {}, loop.trips);
    for (size_t j = 0; j < ys.size(); ++j)
      if (b.outputs[nc + j]) ys[j] = move_axis(ys[j], 1, 0);  // [trips, B, ...] -> [B, ...]
    carry.insert(carry.end(), ys.begin(), ys.end());
    return carry;
  }
  FlatBody cond, step;
  if (b.pred) {
    // Runs while any example runs; an example whose predicate is false keeps its carry.
    auto pred_of = [batch](const nx::Tensor& p, size_t rank) {
      nx::Shape s{batch};
      s.insert(s.end(), rank, 1);
      return nx::reshape(p, s);
    };
    cond = [&](const std::vector<nx::Tensor>& c) {
      return std::vector<nx::Tensor>{nx::any(body(c).back())};
    };
    step = [&, pred_of](const std::vector<nx::Tensor>& c) {
      std::vector<nx::Tensor> out = body(c);
      nx::Tensor p = out.back();
      out.pop_back();
      for (size_t i = 0; i < nc; ++i)
        out[i] = nx::where(pred_of(p, static_cast<size_t>(c[i].ndim() - 1)), out[i], c[i]);
      return out;
    };
  } else {
    cond = [&](const std::vector<nx::Tensor>& c) {
      return std::vector<nx::Tensor>{body(c).back()};
    };
    step = [&](const std::vector<nx::Tensor>& c) {
      std::vector<nx::Tensor> out = body(c);
      out.pop_back();
      return out;
    };
  }
  return while_flat(cond, step, init, {});
}

void batch_loop(const Tracer::Loop& recorded, Batching& bt) {
  const int64_t batch = bt.batch;
  // Its rows read by a trip counter (trace/structured.h): batching them is batching the reads.
  const Tracer::Loop loop = lower_rows(recorded, bt.device);
  std::vector<BatchedNode> bn = batched_inputs(loop, bt.inputs, batch);
  std::vector<bool> given(bn.size());
  for (size_t k = 0; k < bn.size(); ++k) given[k] = bn[k].batched;
  LoopBatching b = loop_batching(loop, given, batch);
  std::vector<nx::Tensor> ins(loop.inputs.size());
  for (size_t k = 0; k < bn.size(); ++k)
    if (bn[k].node) ins[k] = bt.ev({b.params[k] ? with_batch_axis(bn[k], batch) : bn[k].node})[0];
  std::vector<nx::Tensor> outs = run_batched_loop(loop, b, ins, batch, bt.device);
  const size_t nc = loop.n_carry;
  for (size_t m = 0; m < outs.size(); ++m) {
    if (loop.outputs[m] < 0) continue;  // the trip counter: nothing reads it
    ir::NodeRef r = loop.body_roots[m];
    nx::Shape shape = r->shape;
    if (m >= nc) shape.insert(shape.begin(), loop.trips);  // a y, stacked (Tracer::add_loop)
    if (!b.outputs[m]) {
      bt.ev.bind(loop.outputs[m], outs[m]);
      continue;
    }
    nx::Shape batched{batch};
    batched.insert(batched.end(), shape.begin(), shape.end());
    const int index = bt.ev.add_binding(outs[m]);
    bt.inputs[ir::contiguous_param(loop.outputs[m], r->dtype, shape)] =
        ir::contiguous_param(index, r->dtype, batched);
  }
}

}  // namespace rune::detail
