// Debug flags, read once from the environment when first asked (ir/env.h; docs/env.md).
#pragma once

namespace ir {

// DEBUG=1..5, each level printing what the ones below do and more: 1 compiles and cache events;
// 2 a line per kernel launch with its time and GB/s; 3 the scheduled graph (a line per kernel:
// what fused) and each kernel's plan; 4 the lowered kernel IR; 5 the rendered source (LLVM IR,
// CUDA C, HIP C).
int debug_level();
// RUNE_JIT_DEBUG: nonzero makes rune::jit report retraces, evictions and donation fates.
int jit_debug();

}  // namespace ir
