#include "codegen/gpu/runtime_compiler.h"

#include <sstream>

namespace codegen::gpu {

std::string numbered(const std::string& source) {
  std::ostringstream s;
  std::istringstream in(source);
  std::string line;
  for (int i = 1; std::getline(in, line); ++i)
    s << (i < 10 ? "   " : i < 100 ? "  " : i < 1000 ? " " : "") << i << "  " << line << "\n";
  return s.str();
}

std::string trimmed_log(std::string log) {
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

}  // namespace codegen::gpu
