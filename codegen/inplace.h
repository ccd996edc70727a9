// Which inputs a program's outputs may be written into (runtime::Program::inplace_inputs):
// one rule for every backend, decided on the schedule.
#pragma once
#include <vector>

#include "codegen/kernel.h"

namespace codegen {

// Per output: the inputs whose memory that output may take when donated. Input i qualifies when
// every kernel reading it runs before the first kernel writing the output, or is that kernel and
// reads it only at each element's own index (so writing element k never clobbers a later read).
// Contractions and library kernels read whole rows (a product is also built in its output before
// its epilogue reads anything), so no input of theirs qualifies for their own output.
std::vector<std::vector<int>> inplace_inputs(const Schedule& s);

}  // namespace codegen
