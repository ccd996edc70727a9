// A consumer of an installed (or fetched) rune: one jitted function, its result printed.
#include <cstdio>

#include "trace/rune.h"

int main() {
  auto f = rune::jit([](const nx::Tensor& x) { return nx::sum(x * x + 1.0); });
  nx::Tensor x = nx::arange(nx::float64, 0, 4);
  std::printf("sum(x*x + 1) over arange(4): %g\n", nx::item<double>(f(x)));
  return 0;
}
