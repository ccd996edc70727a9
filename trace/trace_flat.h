// Tracing a flat function over stand-ins: the first step of every graph transformation
// (autodiff, vmap, the jacobians). The stand-ins are Params 0..n-1; tensors f captures become
// Params after them, bound to `captured` whenever the graph runs.
#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "ir/node.h"
#include "trace/tracer.h"

namespace rune::detail {

using FlatFn = std::function<std::vector<nx::Tensor>(const std::vector<nx::Tensor>&)>;

// The abstract value of one stand-in.
struct Aval {
  nx::DType dtype;
  nx::Shape shape;
};

struct Traced {
  std::vector<ir::NodeRef> params, outputs;
  std::vector<nx::Tensor> captured;  // bound to Params first_capture, first_capture + 1, ...
  nx::Device device;                 // where the graph runs
  // The structured primitives recorded (trace/structured.def), in program order: nx::check
  // calls, rune::checkpoint blocks, and with records_loops the loops kept whole.
  std::vector<Tracer::Equation> equations;
};

// Where a function of these tensors is traced and runs: the first one's device (the default
// device when there are none).
nx::Device device_of(const std::vector<nx::Tensor>& ts);

// Traces f over stand-ins of `avals` on `device`; captured tensors are numbered from
// first_capture (>= avals.size(): room for extra params such as cotangents). The caller holds
// an ir::NodeUse until the graph ran. Raises `<api>: <fn_name> returned an undefined tensor`.
// With records_loops, the loops f runs are kept whole (Tracer::Loop, trace/structured.h).
Traced trace_flat(const char* api, const std::vector<Aval>& avals, nx::Device device,
                  const FlatFn& f, int first_capture, const char* fn_name = "f",
                  bool records_loops = false);

// The rune::checkpoint blocks among t's equations, in program order.
std::vector<Tracer::Checkpoint> checkpoints_of(const Traced& t);

}  // namespace rune::detail
