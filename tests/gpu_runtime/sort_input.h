// Inputs for the sort tests (test_gpu_cub, test_gpu_device): every case of the sort order.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "trace/rune.h"

namespace gpu_sort_test {

// rows x len values of dtype t, from a fixed generator: for floats, one value in
// `special_every` is NaN, +-inf, -0 or +0; the others (and every integer) are drawn from `span`
// consecutive integers centred on 0 (floats scaled by 2^-scale_exp), so there are many
// duplicates and negatives; uint8 takes the non-negative part below min(span, 251), bool 0 or 1.
inline nx::Tensor sort_input(nx::DType t, int64_t rows, int64_t len, uint64_t seed, unsigned span,
                             int scale_exp, unsigned special_every) {
  std::vector<double> v(static_cast<size_t>(rows * len));
  const double special[] = {NAN, -0.0, 0.0, INFINITY, -INFINITY};
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& e : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const unsigned r = static_cast<unsigned>(s >> 33);
    const double centred =
        static_cast<double>(static_cast<int>(r % span) - static_cast<int>(span / 2));
    if (ir::is_float(t) && r % special_every == 0)
      e = special[(r / special_every) % 5];
    else if (t == nx::uint8)
      e = r % std::min(span, 251u);
    else if (t == nx::bool_)
      e = r % 2;
    else
      e = ir::is_float(t) ? std::ldexp(centred, -scale_exp) : centred;
  }
  return nx::create(t, {rows, len}, v);
}

}  // namespace gpu_sort_test
