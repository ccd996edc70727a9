// A strided sweep over every float32 bit pattern: each 4099th pattern (1,047,807 inputs: every
// binade of both signs, subnormals, infinities and NaNs) through the float32 transcendentals,
// evaluated eagerly, against glibc's double functions rounded nowhere (within about 2^-29 of a
// float32 ulp of the exact value), held to the documented bound (docs/numerics.md: under 1 ulp).
// test_numerics draws random inputs; this covers every exponent evenly, where the fma-based
// float32 exp (one rounded reduction step) and log (the fma pair f - f^2/2) could lose accuracy.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "trace/rune.h"

namespace {

constexpr uint64_t kStride = 4099;

// |y - ref| in ulps of ref's binade (subnormal spacing below 2^-126); inf against the largest
// finite counts from the top binade, as tests/test_decompose_math.cpp measures.
double ulp_error(float y, double ref) {
  if (std::isnan(ref)) return std::isnan(y) ? 0 : INFINITY;
  if (std::isnan(y)) return INFINITY;
  if (std::isinf(y) || std::isinf(static_cast<float>(ref))) {
    if (y == static_cast<float>(ref)) return 0;
    double yy = std::isinf(y) ? std::copysign(0x1p128, y) : y;  // inf as the next binade's start
    return std::fabs(yy - ref) / 0x1p104;
  }
  int e;
  std::frexp(ref, &e);
  if (ref == 0 || e < -125) e = -125;
  return std::fabs(static_cast<double>(y) - ref) / std::ldexp(1.0, e - 24);
}

struct Fn {
  const char* name;
  nx::Tensor (*op)(const nx::Tensor&);
  double (*ref)(double);
};

const Fn kFns[] = {
    {"exp", nx::exp, [](double x) { return std::exp(x); }},
    {"expm1", nx::expm1, [](double x) { return std::expm1(x); }},
    {"log", nx::log, [](double x) { return std::log(x); }},
    {"log1p", nx::log1p, [](double x) { return std::log1p(x); }},
    {"tanh", nx::tanh, [](double x) { return std::tanh(x); }},
    {"erf", nx::erf, [](double x) { return std::erf(x); }},
    {"sin", nx::sin, [](double x) { return std::sin(x); }},
    {"cos", nx::cos, [](double x) { return std::cos(x); }},
};

TEST(Float32Sweep, EveryBinadeWithinTheDocumentedBound) {
  std::vector<uint32_t> bits;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += kStride) bits.push_back(uint32_t(b));
  const int64_t n = static_cast<int64_t>(bits.size());
  nx::Tensor x = nx::from_bytes(nx::float32, {n}, bits.data());
  for (const Fn& f : kFns) {
    std::vector<float> y = nx::to_vector<float>(f.op(x));
    double worst = 0;
    float at = 0;
    for (int64_t i = 0; i < n; ++i) {
      float xi = std::bit_cast<float>(bits[i]);
      double e = ulp_error(y[i], f.ref(xi));
      if (!(e <= worst)) worst = e, at = xi;
    }
    std::printf("  %-5s float32: max %.3f ulp over %lld inputs, at x = %a\n", f.name, worst,
                static_cast<long long>(n), at);
    EXPECT_LT(worst, 1.0) << f.name << " at x = " << at << " (" << std::hexfloat << at << ")";
  }
}

// Every float32 within 4096 patterns of the points where float32 erf's polynomial pieces meet
// (|x| = 1.25, 2.375) and where it starts returning 1 (3.92), and the float32 arguments hardest
// for sin / cos / tan's range reduction: 16367173 * 2^72 (the closest float32 to a multiple of
// pi/2, |r| = 2^-29.2) and its neighbours, both signs; held to the documented bound.
TEST(Float32Sweep, ErfPieceEndsAndTheHardestTrigReduction) {
  auto sweep = [](std::vector<float> xs, const Fn& f) {
    const int64_t n = static_cast<int64_t>(xs.size());
    std::vector<float> y = nx::to_vector<float>(f.op(nx::from_bytes(nx::float32, {n}, xs.data())));
    double worst = 0;
    float at = 0;
    for (int64_t i = 0; i < n; ++i) {
      double e = ulp_error(y[i], f.ref(xs[i]));
      if (!(e <= worst)) worst = e, at = xs[i];
    }
    std::printf("  %-5s float32: max %.3f ulp over %lld inputs, at x = %a\n", f.name, worst,
                static_cast<long long>(n), at);
    EXPECT_LT(worst, 1.0) << f.name << " at x = " << at << " (" << std::hexfloat << at << ")";
  };
  auto around = [](std::initializer_list<float> centres, int64_t reach) {
    std::vector<float> xs;
    for (float c : centres)
      for (int64_t d = -reach; d <= reach; ++d)
        for (float sign : {1.0f, -1.0f})
          xs.push_back(sign * std::bit_cast<float>(std::bit_cast<uint32_t>(c) + int32_t(d)));
    return xs;
  };
  sweep(around({1.25f, 2.375f, 3.92f}, 4096), kFns[5]);  // erf
  const Fn tan{"tan", nx::tan, [](double x) { return std::tan(x); }};
  for (const Fn& f : {kFns[6], kFns[7], tan})
    sweep(around({16367173.0f * 0x1p72f, 0x1.921fb6p+0f, 0x1.921fb6p+24f}, 64), f);
}

}  // namespace
