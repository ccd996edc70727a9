// The "Checks" section: a check inside a compiled function is computed with the program.
#include <cstdio>
#include <stdexcept>

#include "trace/rune.h"

int main() {
  auto checked_log = rune::jit([](const nx::Tensor& x) {
    nx::check(
        nx::greater(x, nx::scalar_like(x, 0)), x,
        [](const std::vector<int64_t>& i, const nx::Tensor&) {
          return std::runtime_error("log of a nonpositive element at " + std::to_string(i[0]));
        });
    return nx::log(x);
  });
  try {
    // On the host the call raises; on an asynchronous device (a GPU) the wait does.
    nx::wait(checked_log(nx::create(nx::float64, {3}, {1, -1, 0})));
    std::puts("no error");
  } catch (const std::runtime_error& e) {
    std::puts(e.what());
  }
}
