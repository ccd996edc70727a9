// A program with loops (rune::scan / fori_loop under rune::jit): one runtime::Program whose
// steps are, for each loop in trace order, the kernels computing its initial carry and operands
// and then one loop step (the body's own compiled program, run `trips` times by the program
// runner on the host: on a GPU it only queues the body's kernels, no host round trip per
// iteration), and last the kernels of the results. Each part is compiled by codegen::compile
// over the trace's params; the parts' slots are renumbered into the one program, and a loop's
// final carry lives in slots the later parts read where their graphs read its params.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/program.h"
#include "trace/tracer.h"

namespace rune {

// `roots` over `n_params` params (the arguments, captures and the loops' outputs); the loops
// as the tracer recorded them (each is lowered first so that its body reads its rows by a trip
// counter: detail::lower_rows). Donation lends no memory in such a program (no inplace inputs).
std::shared_ptr<const runtime::Program> compile_with_loops(const std::vector<ir::NodeRef>& roots,
                                                           const std::vector<Tracer::Loop>& loops,
                                                           int n_params, nx::Device device);

}  // namespace rune
