// The "Donation" section: a donated argument gives up its memory to the call.
#include <cstdio>

#include "trace/rune.h"

int main() {
  auto decay = rune::jit([](const nx::Tensor& w) { return w * 0.5; });
  auto w = nx::create(nx::float64, {3}, {2, 4, 6});
  auto kept = decay(w);
  auto w2 = decay(nx::donate(w));
  nx::print(w2);
  std::printf("equal: %s\n", nx::to_array(kept) == nx::to_array(w2) ? "true" : "false");
  try {
    nx::to_array(w);
    std::puts("w is alive");
  } catch (const std::invalid_argument& e) {
    std::puts(e.what());
  }
}
