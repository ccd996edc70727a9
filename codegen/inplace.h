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

// Whether `v` addresses element k of a contiguous buffer of `shape` at index k (unmasked, offset
// 0; size-1 axes' strides do not matter). Also the attention pass's test that a kernel reads an
// operand as written (codegen/schedule_attention.cpp).
bool reads_own_index(const ir::View& v, const ir::Shape& shape);

}  // namespace codegen
