// A small program for the disk-cache test: runs a few ops, prints their results and then
// codegen::compile_stats() as "compiled=N disk=M".
#include <cstdio>

#include "codegen/compile.h"
#include "core/nx.h"

int main() {
  nx::Tensor x = nx::create(nx::float32, {2, 3}, {1, 2, 3, 4, 5, 6});
  nx::print(x * 2.0 + 1.0);
  nx::print(nx::sum(nx::transpose(x), {1}));
  nx::print(nx::max(nx::cast(x, nx::int32), {0}));
  nx::print(nx::where(x > 3.0, x, nx::neg(x)));
  auto s = codegen::compile_stats();
  std::printf("compiled=%zu disk=%zu\n", s.kernels_compiled, s.kernels_from_disk);
  return 0;
}
