#include "ir/debug.h"

#include <cstdlib>

namespace ir {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long r = std::strtol(v, &end, 10);
  return *end ? fallback : static_cast<int>(r);
}
std::string env_str(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : fallback;
}
int debug_level() {
  static int v = env_int("DEBUG", 0);
  return v;
}
int jit_debug() {
  static int v = env_int("RUNE_JIT_DEBUG", 0);
  return v;
}

}  // namespace ir
