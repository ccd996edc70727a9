// The "Accuracy" section: + - * / are exact, so a compiled call gives eager's bits for them.
#include <bit>
#include <cstdio>

#include "trace/rune.h"

int main() {
  auto poly = [](const nx::Tensor& x) { return x * x * x - x * 3.0 + x; };
  auto probe = nx::create(nx::float64, {3}, {0.1, 1.7, -2.3});
  auto bits = [](const nx::Tensor& x) {
    std::vector<uint64_t> b;
    for (double v : nx::to_array(x)) b.push_back(std::bit_cast<uint64_t>(v));
    return b;
  };
  bool exact = bits(rune::jit(poly)(probe)) == bits(poly(probe));
  std::printf("bit for bit: %s\n", exact ? "true" : "false");
}
