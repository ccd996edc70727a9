#include "core/nx.h"
int main() {
  auto x = nx::create(nx::float64, {3}, {1, 2, 3});
  nx::print(x * 2.0 + 1.0);
}
