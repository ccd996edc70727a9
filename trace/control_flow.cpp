#include "trace/control_flow.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "core/check.h"
#include "core/interpreter.h"
#include "core/ops.h"
#include "ir/node.h"
#include "trace/check_replay.h"
#include "trace/graph_eval.h"
#include "trace/structured.h"
#include "trace/trace_flat.h"
#include "trace/tracer.h"

namespace rune::detail {

namespace {

thread_local int differentiating_depth = 0;

using Avals = std::vector<Aval>;

std::string aval_text(nx::DType t, const nx::Shape& s) {
  return std::string(ir::name(t)) + " " + ir::to_string(s);
}

// A function traced once over stand-ins: its graph, and what its params are bound to on each
// replay (the arguments, then the concrete tensors and enclosing-trace values it captured).
struct Body {
  std::vector<ir::NodeRef> outputs;
  std::vector<nx::Tensor> bindings;  // undefined for an inner loop's results (bound by its loop)
  // Its structured primitives in program order: checks, checkpoint blocks, and loops where it
  // records them (see `nests_loops`).
  std::vector<Tracer::Equation> equations;
  size_t n_args = 0;
  nx::Device device;
};

// Whether a body traced now records its own loops (Tracer::Loop) instead of unrolling them
// (scan, fori_loop) or refusing them (while_loop): everywhere but under autodiff, which
// differentiates the replayed graph. Replayed into a trace that records loops, they are
// recorded there again; elsewhere they run per iteration (run_body).
bool nests_loops() { return differentiating_depth == 0; }

// The trace that keeps control flow traced now whole (Tracer::Loop), or null: none is active,
// or the active one replays loops per iteration.
Tracer* loop_trace() {
  Tracer* t = active_tracer();
  return t && t->records_loops ? t : nullptr;
}

// Traces f once over stand-ins with the avals `in` (contiguous, on `device`).
Body trace_body(const char* api, const Avals& in, nx::Device device, const FlatBody& f,
                bool records_loops = false) {
  Traced t = trace_flat(api, in, device, f, static_cast<int>(in.size()), "the body", records_loops);
  Body b;
  b.outputs = std::move(t.outputs);
  b.n_args = in.size();
  b.bindings.resize(in.size());
  b.bindings.insert(b.bindings.end(), t.captured.begin(), t.captured.end());
  b.equations = std::move(t.equations);
  b.device = device;
  return b;
}

// The loop whose body is `lb`, started from `args` (lb's first n_args params: the initial carry,
// then the xs where it has some): its inputs are the enclosing trace's nodes of args and of lb's
// captures; an inner loop's result has no node (nullptr: its loop inside lb binds it).
Tracer::Loop loop_of(const char* api, Tracer& outer, const Body& lb,
                     const std::vector<nx::Tensor>& args) {
  Tracer::Loop loop;
  loop.api = api;
  for (const auto& c : args) loop.inputs.push_back(outer.node_of(c));
  for (size_t k = lb.n_args; k < lb.bindings.size(); ++k)
    loop.inputs.push_back(lb.bindings[k].defined() ? outer.node_of(lb.bindings[k]) : nullptr);
  loop.body = lb.equations;
  return loop;
}

// One iteration: the traced graph replayed on `args` through the current interpreter, after its
// equations (eval_equations: its checks raise, its loops are bound again).
std::vector<nx::Tensor> run_body(Body& b, const std::vector<nx::Tensor>& args);

// The body of a recorded loop, bound to its inputs (the carry and rows are bound per iteration).
Body body_of(const Tracer::Loop& loop, std::vector<nx::Tensor> inputs, nx::Device device) {
  Body body;
  body.outputs = loop.body_roots;
  if (loop.cond_root) body.outputs.push_back(loop.cond_root);
  body.bindings = std::move(inputs);
  body.equations = loop.body;
  body.n_args = loop.n_carry + loop.n_xs;
  body.device = device;
  return body;
}

// A recorded loop run per iteration through the current interpreter (eagerly, or replayed into a
// trace that does not record loops): its body graph evaluated on the carry, row t of each xs
// and the operands, its rows stacked; a while loop reads its predicate each iteration.
std::vector<nx::Tensor> run_loop_record(const Tracer::Loop& loop, std::vector<nx::Tensor> inputs,
                                        nx::Device device) {
  const size_t n_carry = loop.n_carry, n_args = loop.n_carry + loop.n_xs;
  Body body = body_of(loop, std::move(inputs), device);
  std::vector<nx::Tensor> args(body.bindings.begin(),
                               body.bindings.begin() + static_cast<long>(n_args));
  const std::vector<nx::Tensor> xs(args.begin() + static_cast<long>(n_carry), args.end());
  std::vector<std::vector<nx::Tensor>> rows(loop.n_ys());
  for (int64_t t = 0; loop.trips < 0 || t < loop.trips; ++t) {
    for (size_t j = 0; j < xs.size(); ++j) args[n_carry + j] = nx::index(xs[j], 0, t);
    std::vector<nx::Tensor> out = run_body(body, args);
    if (loop.cond_root) {  // out: the new carry, then the predicate on the old one
      if (!nx::item<bool>(out.back())) break;
      out.pop_back();
    }
    for (size_t j = 0; j < loop.n_ys(); ++j) rows[j].push_back(out[n_carry + j]);
    std::copy(out.begin(), out.begin() + static_cast<long>(n_carry), args.begin());
  }
  std::vector<nx::Tensor> results(args.begin(), args.begin() + static_cast<long>(n_carry));
  for (auto& r : rows) results.push_back(nx::stack(r, 0));
  return results;
}

std::vector<nx::Tensor> run_body(Body& b, const std::vector<nx::Tensor>& args) {
  for (size_t i = 0; i < b.n_args; ++i) b.bindings[i] = args[i];
  GraphEvaluator ev(b.bindings, b.device);
  eval_equations(b.equations, ev);
  return ev(b.outputs);
}

// Whether `b` recorded a check: it is then replayed per iteration, never kept whole (a loop step
// or a scan autodiff differentiates has no checks in its body).
bool has_checks(const Body& b) {
  for (const auto& e : b.equations)
    if (std::holds_alternative<Tracer::Check>(e)) return true;
  return false;
}

Avals avals_of(const std::vector<nx::Tensor>& ts) {
  Avals a;
  for (const auto& t : ts) a.push_back({t.dtype(), t.shape()});
  return a;
}

std::string leaf_name(const std::vector<std::string>& paths, size_t i) {
  return "'" + (i < paths.size() && !paths[i].empty() ? paths[i] : std::to_string(i)) + "'";
}

// Raises unless the body's first carry outputs have init's dtypes and shapes.
void check_carry(const char* api, const Body& b, const std::vector<nx::Tensor>& init,
                 const std::vector<std::string>& paths) {
  if (b.outputs.size() < init.size())
    throw std::invalid_argument(std::string(api) + ": the body returned " +
                                std::to_string(b.outputs.size()) + " tensors for a carry of " +
                                std::to_string(init.size()));
  for (size_t i = 0; i < init.size(); ++i) {
    ir::NodeRef o = b.outputs[i];
    if (o->dtype != init[i].dtype() || o->shape != init[i].shape())
      throw std::invalid_argument(std::string(api) + ": carry leaf " + leaf_name(paths, i) +
                                  " is " + init[i].describe() + " in init but " +
                                  aval_text(o->dtype, o->shape) +
                                  " from the body; the carry keeps its dtypes and shapes");
  }
}

void check_scalar(const char* api, const char* what, const nx::Tensor& t, bool want_bool) {
  bool ok_type = want_bool ? t.dtype() == nx::DType::Bool
                           : (ir::is_int(t.dtype()) && t.dtype() != nx::DType::Bool);
  if (!t.shape().empty() || !ok_type)
    throw std::invalid_argument(std::string(api) + ": " + what + " must be " +
                                (want_bool ? "a bool scalar" : "an integer scalar") + ", got " +
                                t.describe());
}

// A scan kept whole in `tracer` (it records loops): its results are params of that trace,
// bound where a transformation runs the loop (trace/structured.h).
std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> record_scan(
    const char* api, Tracer& tracer, const Body& b, const std::vector<nx::Tensor>& init,
    const std::vector<nx::Tensor>& xs, int64_t length, const int64_t* counter_lo) {
  std::vector<nx::Tensor> args = init;
  args.insert(args.end(), xs.begin(), xs.end());
  Tracer::Loop s = loop_of(api, tracer, b, args);
  s.body_roots = b.outputs;
  s.n_carry = init.size();
  s.n_xs = xs.size();
  s.trips = length;
  if (counter_lo) {
    s.counted = true;
    s.counter_lo = *counter_lo;
  }
  std::vector<nx::Tensor> out = tracer.add_loop(std::move(s));
  std::vector<nx::Tensor> carry(out.begin(), out.begin() + static_cast<long>(init.size()));
  std::vector<nx::Tensor> ys(out.begin() + static_cast<long>(init.size()), out.end());
  return {carry, ys};
}

}  // namespace

bool differentiating() { return differentiating_depth > 0; }

void eval_loop(const Tracer::Loop& loop, GraphEvaluator& ev) {
  std::vector<nx::Tensor> ins;
  for (ir::NodeRef in : loop.inputs) ins.push_back(in ? ev({in})[0] : nx::Tensor());
  std::vector<nx::Tensor> outs = bind_loop(loop, ins, ev.device());
  for (size_t k = 0; k < outs.size(); ++k)
    if (loop.outputs[k] >= 0) ev.bind(loop.outputs[k], outs[k]);
}

void eval_equations(const std::vector<Tracer::Equation>& eqs, GraphEvaluator& ev) {
  for (const auto& e : eqs)
    std::visit(
        Overloaded{
#define STRUCTURED(Row, eval, vjp, jvp, batch, stage) [&](const Tracer::Row& r) { eval(r, ev); },
#include "trace/structured.def"
#undef STRUCTURED
        },
        e);
}

std::vector<nx::Tensor> bind_loop(const Tracer::Loop& loop, const std::vector<nx::Tensor>& inputs,
                                  nx::Device device) {
  if (Tracer* t = loop_trace()) {
    Tracer::Loop copy = loop;
    for (size_t k = 0; k < copy.inputs.size(); ++k)
      if (copy.inputs[k]) copy.inputs[k] = t->node_of(inputs[k]);
    return t->add_loop(std::move(copy));
  }
  return run_loop_record(loop, inputs, device);
}

Tracer::Loop lower_rows(const Tracer::Loop& s, nx::Device device) {
  Tracer::Loop r;
  if (s.n_xs == 0) {
    r = s;
    for (auto& e : r.body)
      if (auto* inner = std::get_if<Tracer::Loop>(&e)) *inner = lower_rows(*inner, device);
    return r;
  }
  const size_t nc = s.n_carry, n_args = nc + s.n_xs;
  // Which rows and operands the body (or a loop inside it) reads.
  std::vector<bool> read(s.inputs.size(), false);
  std::vector<ir::NodeRef> roots = s.body_roots;
  for (const auto& e : s.body)
    if (const auto* inner = std::get_if<Tracer::Loop>(&e))
      for (ir::NodeRef in : inner->inputs)
        if (in) roots.push_back(in);
  for (ir::NodeRef n : ir::toposort(roots))
    if (n->op == ir::Op::Param) read.at(static_cast<size_t>(ir::arg_load(n).param)) = true;
  const bool reads_rows =
      std::find(read.begin() + static_cast<long>(nc), read.begin() + static_cast<long>(n_args),
                true) != read.begin() + static_cast<long>(n_args);
  // The new body's params: the carry, the counter where rows are read, the xs leaves it slices
  // (a scan's), then the operands it reads; the loop binds each to a buffer of its own, so all
  // are contiguous stand-ins.
  Avals avals;
  for (size_t k = 0; k < nc; ++k) avals.push_back({s.body_roots[k]->dtype, s.body_roots[k]->shape});
  if (reads_rows) avals.push_back({nx::int32, {}});
  std::vector<size_t> given;  // the inputs of s bound to the new body's params after the counter
  for (size_t k = nc; k < s.inputs.size(); ++k)
    if (s.inputs[k] && read[k] && (k >= n_args || (reads_rows && !s.counted))) {
      given.push_back(k);
      avals.push_back({s.inputs[k]->dtype, s.inputs[k]->shape});
    }
  const size_t n_front = nc + (reads_rows ? 1 : 0);
  auto row_starts = [](const nx::Tensor& i, size_t rank) {
    std::vector<nx::Tensor> starts{i};
    for (size_t d = 1; d < rank; ++d) starts.push_back(nx::zeros_like(i));
    return starts;
  };
  Body b = body_of(s, std::vector<nx::Tensor>(s.inputs.size()), device);
  FlatBody step = [&](const std::vector<nx::Tensor>& in) {
    std::vector<nx::Tensor> args(in.begin(), in.begin() + static_cast<long>(nc));
    for (size_t g = 0; g < given.size(); ++g) b.bindings[given[g]] = in[n_front + g];
    for (size_t k = nc; k < n_args; ++k) {
      if (!read[k]) {  // a row the body does not read: any value stands for it
        args.push_back(nx::zeros(nx::int32, {}));
        continue;
      }
      const nx::Tensor& i = in[nc];
      if (s.counted) {  // fori_loop: the row of the counter is lo + i
        args.push_back(s.counter_lo == 0 ? i : i + static_cast<int>(s.counter_lo));
        continue;
      }
      const nx::Tensor& x = b.bindings[k];
      nx::Shape row(x.shape().begin() + 1, x.shape().end()), one = x.shape();
      one[0] = 1;
      args.push_back(nx::reshape(nx::dynamic_slice(x, row_starts(i, x.shape().size()), one), row));
    }
    std::vector<nx::Tensor> outs = run_body(b, args);
    if (!reads_rows) return outs;
    std::vector<nx::Tensor> next(outs.begin(), outs.begin() + static_cast<long>(nc));
    next.push_back(in[nc] + 1);
    next.insert(next.end(), outs.begin() + static_cast<long>(nc), outs.end());  // the rows
    return next;
  };
  Traced t = trace_flat(s.api, avals, device, step, static_cast<int>(avals.size()), "the body",
                        /*records_loops=*/true);
  r.api = s.api;
  r.inputs.assign(s.inputs.begin(), s.inputs.begin() + static_cast<long>(nc));
  if (reads_rows) {
    // The counter's initial value, a constant: the same node in every trace.
    Tracer constants(device, 0);
    nx::InterpreterScope scope(&constants);
    nx::CreateOn on(device);
    r.inputs.push_back(constants.node_of(nx::zeros(nx::int32, {})));
  }
  for (size_t k : given) r.inputs.push_back(s.inputs[k]);
  for (const auto& c : t.captured) {
    if (c.defined())
      throw std::logic_error(std::string(s.api) + ": a loop's lowered body captured a value");
    r.inputs.push_back(nullptr);  // the result of one of its loops
  }
  r.body_roots = std::move(t.outputs);
  for (auto& e : t.equations) {  // loops recorded again by run_body
    if (auto* inner = std::get_if<Tracer::Loop>(&e)) *inner = lower_rows(*inner, device);
    r.body.push_back(std::move(e));
  }
  r.n_carry = n_front;
  r.trips = s.trips;
  r.outputs.assign(s.outputs.begin(), s.outputs.begin() + static_cast<long>(nc));
  if (reads_rows) r.outputs.push_back(-1);
  r.outputs.insert(r.outputs.end(), s.outputs.begin() + static_cast<long>(nc), s.outputs.end());
  return r;
}

DifferentiatingScope::DifferentiatingScope() { ++differentiating_depth; }
DifferentiatingScope::~DifferentiatingScope() { --differentiating_depth; }

std::pair<std::vector<nx::Tensor>, std::vector<nx::Tensor>> scan_flat(
    const char* api, const FlatBody& body, const std::vector<nx::Tensor>& init,
    const std::vector<std::string>& carry_paths, const std::vector<nx::Tensor>& xs, int64_t length,
    const int64_t* counter_lo) {
  for (size_t j = 0; j < xs.size(); ++j)
    if (xs[j].shape().empty() || xs[j].shape()[0] != length)
      throw std::invalid_argument(
          std::string(api) + ": xs leaf " + std::to_string(j) + " is " + xs[j].describe() +
          (length < 0 ? std::string(": xs leaves need an axis 0 to scan over")
                      : "; every xs leaf needs " + std::to_string(length) + " rows on axis 0"));
  ir::NodeUse use;  // the body's nodes stay while it is replayed
  Avals in = avals_of(init);
  for (const auto& x : xs)
    in.push_back({x.dtype(), nx::Shape(x.shape().begin() + 1, x.shape().end())});
  nx::Device device = device_of(init.empty() ? xs : init);
  Body b = trace_body(api, in, device, body, nests_loops());
  check_carry(api, b, init, carry_paths);
  // Traced straight into a trace that records loops, the scan is kept whole (Tracer::Loop): a
  // loop step of rune::jit's program, a batched loop under rune::vmap, a loop that autodiff
  // differentiates as a loop (trace/scan_vjp.h), not as its replayed iterations. A body with
  // checks is replayed per iteration instead (its checks become the enclosing trace's).
  if (Tracer* outer = loop_trace(); outer && length > 0 && !has_checks(b))
    return record_scan(api, *outer, b, init, xs, length, counter_lo);
  const size_t n_carry = init.size(), n_y = b.outputs.size() - n_carry;
  std::vector<nx::Tensor> carry = init;
  std::vector<std::vector<nx::Tensor>> ys(n_y);
  std::vector<nx::Tensor> args(in.size());
  for (int64_t i = 0; i < length; ++i) {
    for (size_t k = 0; k < n_carry; ++k) args[k] = carry[k];
    for (size_t j = 0; j < xs.size(); ++j) args[n_carry + j] = nx::index(xs[j], 0, i);
    std::vector<nx::Tensor> out = run_body(b, args);
    for (size_t k = 0; k < n_carry; ++k) carry[k] = out[k];
    for (size_t j = 0; j < n_y; ++j) ys[j].push_back(out[n_carry + j]);
  }
  std::vector<nx::Tensor> stacked;
  nx::CreateOn on(device);
  for (size_t j = 0; j < n_y; ++j) {
    ir::NodeRef y = b.outputs[n_carry + j];
    if (length == 0) {
      nx::Shape s{0};
      s.insert(s.end(), y->shape.begin(), y->shape.end());
      stacked.push_back(nx::zeros(y->dtype, s));
    } else {
      stacked.push_back(nx::stack(ys[j], 0));
    }
  }
  return {carry, stacked};
}

std::vector<nx::Tensor> while_flat(const FlatBody& cond, const FlatBody& body,
                                   const std::vector<nx::Tensor>& init,
                                   const std::vector<std::string>& carry_paths) {
  const char* api = "rune::while_loop";
  Tracer* outer = active_tracer();
  if (outer && (differentiating_depth > 0 || !outer->records_loops)) {
    if (differentiating_depth > 0)
      throw std::invalid_argument(std::string(api) +
                                  ": cannot be differentiated (rune::grad, vjp, jvp): its trip "
                                  "count is only known at run time, as in JAX; use "
                                  "rune::fori_loop or rune::scan with a fixed trip count");
    throw jit_error(std::string(api) +
                    ": not supported inside the body of a loop or branch that is not itself "
                    "compiled as a loop step (a body with checks, a loop outside rune::jit, a "
                    "cond_fn); use rune::fori_loop / rune::scan with a fixed trip count there");
  }
  ir::NodeUse use;
  Avals in = avals_of(init);
  nx::Device device = device_of(init);
  Body c = trace_body(api, in, device, cond);
  if (c.outputs.size() != 1 || !c.outputs[0]->shape.empty() ||
      c.outputs[0]->dtype != nx::DType::Bool)
    throw std::invalid_argument(std::string(api) + ": cond_fn must return a bool scalar, got " +
                                (c.outputs.size() == 1
                                     ? aval_text(c.outputs[0]->dtype, c.outputs[0]->shape)
                                     : std::to_string(c.outputs.size()) + " tensors"));
  Body b = trace_body(api, in, device, body, nests_loops());
  check_carry(api, b, init, carry_paths);
  if (b.outputs.size() != init.size())
    throw std::invalid_argument(std::string(api) + ": body_fn returned " +
                                std::to_string(b.outputs.size()) + " tensors for a carry of " +
                                std::to_string(init.size()));
  if (outer) {
    if (has_checks(b) || has_checks(c))
      throw jit_error(std::string(api) +
                      ": a body or predicate with checks (e.g. index bounds) "
                      "cannot run as a loop step of rune::jit yet");
    // One loop: the predicate and the body replayed into one trace over the carry (sharing its
    // captures); a loop step compiles them apart: cond_fn then body_fn per iteration.
    const size_t n = init.size();
    FlatBody both = [&](const std::vector<nx::Tensor>& in) {
      std::vector<nx::Tensor> r = run_body(b, in);
      r.push_back(run_body(c, in)[0]);
      return r;
    };
    Body lb = trace_body(api, in, device, both, /*records_loops=*/true);
    Tracer::Loop loop = loop_of(api, *outer, lb, init);
    loop.n_carry = n;
    loop.body_roots.assign(lb.outputs.begin(), lb.outputs.begin() + static_cast<long>(n));
    loop.cond_root = lb.outputs[n];
    loop.trips = -1;
    return outer->add_loop(std::move(loop));
  }
  std::vector<nx::Tensor> carry = init;
  while (nx::item<bool>(run_body(c, carry)[0])) carry = run_body(b, carry);
  return carry;
}

std::vector<nx::Tensor> switch_flat(const char* api, const nx::Tensor& index,
                                    const std::vector<FlatBody>& branches,
                                    const std::vector<nx::Tensor>& operands) {
  const bool is_cond = std::string(api) == "rune::cond";
  check_scalar(api, is_cond ? "pred" : "index", index, is_cond);
  if (branches.empty()) throw std::invalid_argument(std::string(api) + ": no branches");
  auto branch_name = [&](size_t k) {
    return is_cond ? std::string(k == 0 ? "true_fn" : "false_fn") : "branch " + std::to_string(k);
  };
  ir::NodeUse use;
  Avals in = avals_of(operands);
  nx::Device device = operands.empty() ? index.device() : device_of(operands);
  std::vector<Body> bs;
  const bool nests = nests_loops();
  for (const auto& f : branches) bs.push_back(trace_body(api, in, device, f, nests));
  for (size_t k = 1; k < bs.size(); ++k) {
    if (bs[k].outputs.size() != bs[0].outputs.size())
      throw std::invalid_argument(std::string(api) + ": " + branch_name(k) + " returns " +
                                  std::to_string(bs[k].outputs.size()) + " tensors but " +
                                  branch_name(0) + " returns " +
                                  std::to_string(bs[0].outputs.size()));
    for (size_t i = 0; i < bs[0].outputs.size(); ++i) {
      ir::NodeRef a = bs[0].outputs[i], o = bs[k].outputs[i];
      if (a->dtype != o->dtype || a->shape != o->shape)
        throw std::invalid_argument(std::string(api) + ": output " + std::to_string(i) + " is " +
                                    aval_text(o->dtype, o->shape) + " from " + branch_name(k) +
                                    " but " + aval_text(a->dtype, a->shape) + " from " +
                                    branch_name(0));
    }
  }
  const int64_t n = static_cast<int64_t>(bs.size());
  if (!index.is_traced()) {
    // A concrete index: only the chosen branch runs (eagerly, or into the enclosing trace). It
    // is read as it is, with no op: inside a trace (rune::grad's) an op on it would be traced.
    const bool wide = index.dtype() == nx::uint64;
    const uint64_t u = wide ? nx::item<uint64_t>(index) : 0;
    const int64_t k = is_cond ? (nx::item<bool>(index) ? 0 : 1)
                      : wide  ? static_cast<int64_t>(std::min<uint64_t>(u, INT64_MAX))
                              : nx::item<int64_t>(index);
    if (k < 0 || k >= n)
      throw std::invalid_argument(std::string(api) + ": index " +
                                  (wide ? std::to_string(u) : std::to_string(k)) +
                                  " is out of range for " + std::to_string(n) + " branches");
    return run_body(bs[static_cast<size_t>(k)], operands);
  }
  // A traced index: every branch runs and the result is selected element by element (exactly
  // the chosen branch's bits). switch_'s range is a check of the compiled program.
  // Each branch's checks hold only where it is taken (Tracer::push_check_guard): an index out
  // of a branch's range must not raise that branch's errors.
  nx::Tensor i64 = is_cond ? nx::Tensor() : nx::cast(index, nx::int64);
  Tracer* trace = active_tracer();
  std::vector<std::vector<nx::Tensor>> outs;
  for (int64_t k = 0; k < n; ++k) {
    nx::Tensor taken = !is_cond ? nx::equal(i64, nx::scalar_like(i64, static_cast<double>(k)))
                       : k == 0 ? index
                                : nx::logical_not(index);
    if (trace) trace->push_check_guard(taken);
    struct Pop {
      Tracer* t;
      ~Pop() {
        if (t) t->pop_check_guard();
      }
    } pop{trace};
    outs.push_back(run_body(bs[static_cast<size_t>(k)], operands));
  }
  if (is_cond) {
    std::vector<nx::Tensor> r;
    for (size_t i = 0; i < outs[0].size(); ++i)
      r.push_back(nx::where(index, outs[0][i], outs[1][i]));
    return r;
  }
  std::string name = api;
  nx::check(
      nx::logical_and(i64 >= 0.0, i64 < static_cast<double>(n)), i64,
      [name, n](const std::vector<int64_t>&, const nx::Tensor& at) {
        return std::invalid_argument(name + ": index " + std::to_string(nx::item<int64_t>(at)) +
                                     " is out of range for " + std::to_string(n) + " branches");
      });
  std::vector<nx::Tensor> r = outs.back();
  for (int64_t k = n - 2; k >= 0; --k) {
    nx::Tensor pick = nx::equal(i64, nx::scalar_like(i64, static_cast<double>(k)));
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = nx::where(pick, outs[static_cast<size_t>(k)][i], r[i]);
  }
  return r;
}

nx::Tensor flip_rows(const nx::Tensor& x) { return x.shape().empty() ? x : nx::flip(x, {0}); }

nx::Tensor step_counter(int64_t lo, int64_t hi, const std::vector<nx::Tensor>& carry) {
  nx::CreateOn on(device_of(carry));
  return nx::arange(nx::int32, static_cast<double>(lo), static_cast<double>(hi));
}

}  // namespace rune::detail
