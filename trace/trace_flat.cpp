#include "trace/trace_flat.h"

#include <stdexcept>
#include <string>

#include "core/interpreter.h"
#include "core/ops.h"
#include "trace/tracer.h"

namespace rune::detail {

nx::Device device_of(const std::vector<nx::Tensor>& ts) {
  return ts.empty() ? nx::default_device() : ts[0].device();
}

Traced trace_flat(const char* api, const std::vector<Aval>& avals, nx::Device device,
                  const FlatFn& f, int first_capture, const char* fn_name, bool records_loops) {
  Tracer tracer(device, first_capture);
  tracer.records_loops = records_loops;
  Traced t;
  t.device = device;
  std::vector<nx::Tensor> stand_ins;
  for (size_t i = 0; i < avals.size(); ++i) {
    stand_ins.push_back(
        tracer.stand_in(static_cast<int>(i), avals[i].dtype, ir::View::contiguous(avals[i].shape)));
    t.params.push_back(stand_ins.back().impl().node);
  }
  std::vector<nx::Tensor> outs;
  {
    nx::InterpreterScope scope(&tracer);
    outs = f(stand_ins);
  }
  for (const auto& o : outs) {
    if (!o.defined())
      throw std::invalid_argument(std::string(api) + ": " + fn_name +
                                  " returned an undefined tensor");
    t.outputs.push_back(tracer.node_of(o));
  }
  t.captured = tracer.captured();
  t.equations = tracer.equations();
  return t;
}

std::vector<Tracer::Checkpoint> checkpoints_of(const Traced& t) {
  std::vector<Tracer::Checkpoint> r;
  for (const auto& e : t.equations)
    if (const auto* c = std::get_if<Tracer::Checkpoint>(&e)) r.push_back(*c);
  return r;
}

}  // namespace rune::detail
