// Debug flags, read once from the environment when first asked (documented in docs/env.md).
#pragma once
#include <string>

namespace ir {

// DEBUG=1..7: 1 compiles and cache events; 2 a line per kernel launch with time and GB/s;
// 3 the schedule (kernels per program); 4 generated source; 5 lowered kernel IR; 7 assembly.
int debug_level();
// RUNE_JIT_DEBUG: nonzero makes rune::jit report retraces, evictions and donation fates.
int jit_debug();
// Reads an integer environment variable (default when unset or not a number).
int env_int(const char* name, int fallback);
std::string env_str(const char* name, const std::string& fallback);

}  // namespace ir
