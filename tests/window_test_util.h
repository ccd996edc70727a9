// What the direct-loop references of the windowed ops' tests share (tests/test_conv.cpp,
// tests/test_window.cpp): deterministic inputs, JAX's "SAME" pads, bit strings of results and
// error checks. Row-major offsets and index walks are rt::row_major_offset / for_each_index.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/nx.h"

namespace window_test {

using nx::Shape;
using nx::Tensor;
using Pairs = std::vector<std::pair<int64_t, int64_t>>;
using Ints = std::vector<int64_t>;

inline Tensor host(const Tensor& t) { return nx::place(t, "CPU"); }
inline Tensor f64(const Shape& s, const std::vector<double>& v) {
  return host(nx::create(nx::float64, s, v));
}

// Deterministic values (a linear congruential sequence): in [-1, 1), or small integers in
// [0, levels) (many ties) when levels > 0.
inline std::vector<double> values(const Shape& s, uint64_t seed, int levels = 0) {
  std::vector<double> v(static_cast<size_t>(ir::numel(s)));
  uint64_t z = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& d : v) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    double u = static_cast<double>(z >> 11) / 9007199254740992.0;
    d = levels ? std::floor(u * levels) : u * 2 - 1;
  }
  return v;
}

// JAX's "SAME" pads of windows `window` over the spatial extents `in` (undilated input).
inline Pairs same_pads(const Shape& in, const Shape& window, const Ints& stride, const Ints& dil) {
  Pairs p;
  for (size_t a = 0; a < in.size(); ++a) {
    int64_t s = stride.empty() ? 1 : stride[a], d = dil.empty() ? 1 : dil[a];
    int64_t out = (in[a] + s - 1) / s, eff = (window[a] - 1) * d + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in[a]);
    p.push_back({total / 2, total - total / 2});
  }
  return p;
}

// A result's description and the bits of its elements, read on the host.
inline std::string bits(const Tensor& t) {
  std::string s = t.describe() + ":";
  for (double d : nx::to_array(host(t))) s += " " + std::to_string(std::bit_cast<uint64_t>(d));
  return s;
}

// f raises std::invalid_argument whose message holds every one of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected " << parts[0];
  } catch (const std::invalid_argument& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\nlacks: " << p;
  }
}

}  // namespace window_test
