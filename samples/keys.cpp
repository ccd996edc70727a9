// The "Keys" section of the compilation chapter: a call retraces exactly when its key is new.
#include <cstdio>

#include "trace/rune.h"

int main() {
  int traces = 0;
  auto affine = rune::jit([&](const nx::Tensor& x) {
    ++traces;
    return x * 2.0 + 1.0;
  });
  auto v = [](int64_t n) { return nx::full(nx::float64, {n}, static_cast<double>(n)); };
  affine(v(3));
  affine(nx::create(nx::float64, {3}, {7, 8, 9}));
  affine(v(5));
  std::printf("%d traces\n", traces);
}
