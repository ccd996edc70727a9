#include "ir/debug.h"

#include "ir/env.h"

namespace ir {

// Cached here as well as in ir/env: launches ask for the level on every kernel.
int debug_level() {
  static const int v = env::integer(env::Var::Debug);
  return v;
}
int jit_debug() {
  static const int v = env::integer(env::Var::JitDebug);
  return v;
}

}  // namespace ir
