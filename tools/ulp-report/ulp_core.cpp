// See ulp_core.h.
#include "tools/ulp-report/ulp_core.h"

#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>

namespace ulp {

const Format kFloat16{"float16", nx::float16, 11, -24, 15};
const Format kBFloat16{"bfloat16", nx::bfloat16, 8, -133, 127};
const Format kFloat32{"float32", nx::float32, 24, -149, 127};
const Format kFloat64{"float64", nx::float64, 53, -1074, 1023};

const Format& format_of(nx::DType t) {
  if (t == nx::float16) return kFloat16;
  if (t == nx::bfloat16) return kBFloat16;
  if (t == nx::float32) return kFloat32;
  if (t == nx::float64) return kFloat64;
  throw std::invalid_argument("ulp::format_of: not a float dtype");
}

const std::vector<Function>& functions() {
  static const std::vector<Function> fs = {
      {Fn::Exp, "exp", 1, 2, 2, false, 1, 1, 1},
      {Fn::Log, "log", 1, 1, 2, false, 1, 1, 1},
      {Fn::Sin, "sin", 1, 2, 2, false, 1, 1, 1},
      {Fn::Cos, "cos", 1, 2, 2, false, 1, 1, 1},
      {Fn::Tan, "tan", 1, 4, 2, false, 1, 1, 1},
      {Fn::Tanh, "tanh", 1, 2, 2, false, 1, 1, 1},
      {Fn::Pow, "pow", 2, 4, 2, false, 1, 1, 1},
      {Fn::Atan2, "atan2", 2, 3, 2, false, 1, 1, 1},
      {Fn::Sigmoid, "sigmoid", 1, -1, -1, true, 2.3, 2.3, 1.8},
      {Fn::Exp2, "exp2", 1, 2, 2, false, 1, 1, 1},
      {Fn::Log2, "log2", 1, 1, 2, false, 1, 1, 1},
      {Fn::Expm1, "expm1", 1, 1, 2, false, 1, 1, 1},
      {Fn::Log1p, "log1p", 1, 1, 2, false, 1, 1, 1},
      {Fn::Sinh, "sinh", 1, 3, 2, false, 1, 1, 1},
      {Fn::Cosh, "cosh", 1, 2, 2, false, 1, 1, 1},
      {Fn::Asin, "asin", 1, 2, 2, false, 1, 1, 1},
      {Fn::Acos, "acos", 1, 2, 2, false, 1, 1, 1},
      {Fn::Atan, "atan", 1, 2, 2, false, 1, 1, 1},
      {Fn::Erf, "erf", 1, 2, 2, false, 1, 1, 1},
      // Newer than the seed chapter's table (docs/semantics.md §5.3): erfc gets erf's contract;
      // rsqrt, correctly rounded by design (docs/numerics.md), 1 ulp.
      {Fn::Erfc, "erfc", 1, 2, 2, false, 1, 1, 1},
      {Fn::Rsqrt, "rsqrt", 1, 1, 1, false, 1, 1, 1},
  };
  return fs;
}

const Function* find_function(const std::string& name) {
  for (const auto& f : functions())
    if (name == f.name) return &f;
  return nullptr;
}

double bound(const Function& f, nx::DType t) {
  if (t == nx::float32) return f.bound32;
  if (t == nx::float64) return f.bound64;
  return f.composite ? -1 : 1;
}

double documented_bound(const Function& f, nx::DType t) {
  if (t == nx::float32) return f.doc32;
  if (t == nx::float64) return f.doc64;
  return f.doc16;
}

uint8_t Inputs::region_id(const std::string& name) {
  for (size_t i = 0; i < region_names.size(); ++i)
    if (region_names[i] == name) return static_cast<uint8_t>(i);
  region_names.push_back(name);
  return static_cast<uint8_t>(region_names.size() - 1);
}

uint16_t half_bits(const Format& t, double v) {
  v = round_to(t, v);
  if (t.dtype == nx::bfloat16)
    return static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16);
  uint16_t s = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isnan(v)) return 0x7e00;
  if (std::isinf(a)) return s | 0x7c00;
  if (a < 0x1p-14) return s | static_cast<uint16_t>(std::ldexp(a, 24));  // subnormal (or 0)
  int e;
  double m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  return s | static_cast<uint16_t>(((e + 14) << 10) | (static_cast<int>(std::ldexp(m, 11)) & 1023));
}

double half_value(const Format& t, uint16_t b) {
  if (t.dtype == nx::bfloat16) return std::bit_cast<float>(uint32_t{b} << 16);
  int e = (b >> 10) & 31, m = b & 1023;
  double v = e == 0    ? std::ldexp(m, -24)
             : e == 31 ? (m ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL)
                       : std::ldexp(m + 1024, e - 25);
  return (b & 0x8000) ? -v : v;
}

// ---------------------------------------------------------------------------------------------
// Inputs.

namespace {

const double kInf = HUGE_VAL;
bool same_bits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}
const double kNaN = std::numeric_limits<double>::quiet_NaN();

uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Gen {
  std::mt19937_64 g;
  const Format& F;
  Gen(uint64_t seed, const Format& f) : g(seed), F(f) {}
  double u01() { return static_cast<double>(g() >> 11) * 0x1p-53; }
  double uni(double a, double b) { return a + (b - a) * u01(); }
  double sgn() { return (g() & 1) ? -1.0 : 1.0; }
  int64_t ri(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(g() % uint64_t(hi - lo + 1));
  }
  double logu(double lo2, double hi2) { return std::exp2(uni(lo2, hi2)); }  // log-uniform, > 0
  double rnd(double v) const { return round_to(F, v); }
  double bits() {
    if (F.p == 24) return std::bit_cast<float>(static_cast<uint32_t>(g()));
    return std::bit_cast<double>(g());
  }
  double subnormal() {  // a random nonzero subnormal (or the smallest normal), random sign
    uint64_t m = 1 + g() % ((uint64_t{1} << (F.p - 1)) - 1);
    return sgn() * std::ldexp(static_cast<double>(m), F.emin_sub);
  }
  double step(double v, int j) const { return ulp::step(F, v, j); }
  double max_finite() const { return std::ldexp(2 - std::ldexp(1, 1 - F.p), F.emax); }
  double min_normal() const { return std::ldexp(1, F.emin_sub + F.p - 1); }
};

}  // namespace

// v moved by j ulps in the format (as nextafter j times, through zero): on the ordinal that orders
// bit patterns as their values (-0 and +0 share one; infinities and NaN are not stepped past).
double step(const Format& F, double v, int j) {
  if (std::isnan(v) || j == 0) return v;
  const int w = F.p == 53 ? 64 : F.p == 24 ? 32 : 16;
  const uint64_t sign = uint64_t{1} << (w - 1);
  uint64_t b = F.p == 53   ? std::bit_cast<uint64_t>(v)
               : F.p == 24 ? std::bit_cast<uint32_t>(static_cast<float>(v))
                           : half_bits(F, v);
  int64_t ord = (b & sign) ? -static_cast<int64_t>(b & (sign - 1)) : static_cast<int64_t>(b);
  const int64_t inf_ord = static_cast<int64_t>(F.p == 53                 ? 0x7ff0000000000000ull
                                               : F.p == 24               ? 0x7f800000ull
                                               : F.dtype == nx::bfloat16 ? 0x7f80ull
                                                                         : 0x7c00ull);
  ord = std::clamp<int64_t>(ord + j, -inf_ord, inf_ord);
  uint64_t nb = ord < 0 ? (static_cast<uint64_t>(-ord) | sign) : static_cast<uint64_t>(ord);
  if (F.p == 53) return std::bit_cast<double>(nb);
  if (F.p == 24) return std::bit_cast<float>(static_cast<uint32_t>(nb));
  return half_value(F, static_cast<uint16_t>(nb));
}

namespace {

struct Region {
  std::string name;
  double weight;
  std::function<void(Gen&, double&, double&)> draw;
};

constexpr long double kPiL = 3.141592653589793238462643383279502884L;

std::vector<Region> regions_for(const Function& f, const Format& F) {
  const bool d = F.p == 53;
  const int p = F.p;
  const double lnmax = std::log(std::ldexp(1.0, F.emax)) + std::log(2.0);  // ~ ln(max finite)
  const double lnsub = F.emin_sub * std::log(2.0);                         // ln(min subnormal)
  const double lnnorm = (F.emin_sub + p - 1) * std::log(2.0);
  auto bits = [](Gen& g, double& x, double&) { x = g.bits(); };
  switch (f.id) {
    case Fn::Exp:
      return {
          {"bits", 0.25, bits},
          {"main range", 0.35,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(lnsub - 2, lnmax + 2)); }},
          {"overflow edge", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(lnmax + g.uni(-0.01, 0.01)); }},
          {"subnormal results", 0.15,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(lnsub - 1, lnnorm + 1)); }},
          {"near 0", 0.15,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 12, 0)); }},
      };
    case Fn::Log:
      return {
          {"bits", 0.20, bits},
          {"positive bits", 0.25, [](Gen& g, double& x, double&) { x = std::fabs(g.bits()); }},
          {"near 1", 0.25,
           [=](Gen& g, double& x, double&) { x = g.rnd(1 + g.sgn() * g.logu(-p - 1, -1)); }},
          {"1 +- k ulp", 0.10,
           [=](Gen& g, double& x, double&) {
             x = g.step(1.0, static_cast<int>(g.ri(-65536, 65536)));
           }},
          {"subnormal", 0.10, [](Gen& g, double& x, double&) { x = std::fabs(g.subnormal()); }},
          {"[0.5, 2]", 0.10, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(0.5, 2)); }},
      };
    case Fn::Sin:
    case Fn::Cos:
    case Fn::Tan: {
      auto near_k = [=](int64_t kmax) {
        return [=](Gen& g, double& x, double&) {
          long double v = static_cast<long double>(g.ri(1, kmax)) * (kPiL / 2);
          x = g.sgn() * g.step(g.rnd(static_cast<double>(v)), static_cast<int>(g.ri(-3, 3)));
        };
      };
      const double top = F.emax + 0.999;
      return {
          {"bits", 0.15, bits},
          {"[-1, 1]", 0.10, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-1, 1)); }},
          {"tiny", 0.05,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 40, 0)); }},
          {"|x| in [1, 2^20)", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(0, 20)); }},
          {"near k pi/2, k < 2^20", 0.15, near_k(int64_t{1} << 20)},
          {"near k pi/2, k < 2^31", 0.10, near_k(int64_t{1} << 31)},
          {"|x| in [2^20, 3.37e9)", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(20, std::log2(3.37e9))); }},
          {"|x| >= 3.37e9", 0.15,
           [=](Gen& g, double& x, double&) {
             x = g.rnd(g.sgn() * g.logu(std::log2(3.37e9), top));
           }},
      };
    }
    case Fn::Tanh: {
      double sat = d ? 19.1 : 9.1;
      return {
          {"bits", 0.25, bits},
          {"[-10, 10]", 0.30, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-10, 10)); }},
          {"small", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 12, 0)); }},
          {"saturation", 0.15,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.uni(sat - 4, sat + 2)); }},
          {"|x| in [0.25, 1.5]", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.uni(0.25, 1.5)); }},
      };
    }
    case Fn::Sigmoid:
      return {
          {"bits", 0.25, bits},
          {"[-20, 20]", 0.35, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-20, 20)); }},
          {"tails", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.uni(15, -lnsub + 2)); }},
          {"small", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 12, 0)); }},
      };
    case Fn::Pow: {
      const double ylim = d ? 0x1p62 : 0x1p31;
      return {
          {"bits", 0.15, [](Gen& g, double& x, double& y) { x = g.bits(), y = g.bits(); }},
          {"x in 2^[-20,20], |y| <= 30", 0.20,
           [=](Gen& g, double& x, double& y) {
             x = g.rnd(g.logu(-20, 20)), y = g.rnd(g.uni(-30, 30));
           }},
          {"x near 1, large |y|", 0.20,
           [=](Gen& g, double& x, double& y) {
             x = g.rnd(1 + g.sgn() * g.logu(-p, -4));
             y = g.rnd(g.sgn() * g.logu(0, p + 12));
           }},
          {"results near overflow/underflow", 0.15,
           [=](Gen& g, double& x, double& y) {
             x = g.rnd(g.logu(-64, 64));
             double l2 = std::log2(x);
             double target = (g.g() & 1) ? g.uni(F.emax - 2, F.emax + 1)
                                         : g.uni(F.emin_sub - 2, F.emin_sub + p + 1);
             y = l2 == 0 ? 1 : g.rnd(target / l2);
           }},
          {"x < 0, integer y", 0.10,
           [=](Gen& g, double& x, double& y) {
             x = g.rnd(-g.logu(-10, 10));
             y = static_cast<double>(g.ri(-200, 200));
           }},
          {"any x > 0, |y| <= 4", 0.10,
           [=](Gen& g, double& x, double& y) { x = std::fabs(g.bits()), y = g.rnd(g.uni(-4, 4)); }},
          {"|x| near 1, large integer y", 0.10,
           [=](Gen& g, double& x, double& y) {
             x = g.rnd(g.sgn() * g.logu(-2, 2));
             y = g.rnd(g.sgn() * std::floor(g.logu(0, std::log2(ylim))));
           }},
      };
    }
    case Fn::Atan2: {
      const double rmin = F.emin_sub - F.emax - 8;  // ratios down to well below the subnormals
      return {
          {"bits", 0.20, [](Gen& g, double& y, double& x) { y = g.bits(), x = g.bits(); }},
          {"[-10, 10]^2", 0.20,
           [=](Gen& g, double& y, double& x) {
             y = g.rnd(g.uni(-10, 10)), x = g.rnd(g.uni(-10, 10));
           }},
          {"near the axes", 0.25,
           [=](Gen& g, double& y, double& x) {
             double big = g.rnd(g.sgn() * g.logu(-30, 30));
             double small = g.rnd(g.sgn() * std::fabs(big) * g.logu(std::max(rmin, -1100.0), -1));
             if (g.g() & 1)
               y = small, x = big;
             else
               y = big, x = small;
           }},
          {"near the diagonals", 0.10,
           [=](Gen& g, double& y, double& x) {
             x = g.rnd(g.sgn() * g.logu(-30, 30));
             y = g.rnd(g.sgn() * std::fabs(x) * (1 + g.sgn() * g.logu(-p, -2)));
           }},
          {"extreme scales", 0.15,
           [=](Gen& g, double& y, double& x) {
             double e = g.uni(F.emin_sub + 5, F.emax - 5);
             y = g.rnd(g.sgn() * g.logu(e - 5, e + 5)), x = g.rnd(g.sgn() * g.logu(e - 5, e + 5));
           }},
          {"subnormal", 0.10,
           [=](Gen& g, double& y, double& x) {
             y = g.subnormal();
             x = (g.g() & 1) ? g.subnormal() : g.rnd(g.sgn() * g.logu(F.emin_sub, 0));
             if (g.g() & 1) std::swap(x, y);
           }},
      };
    }
    case Fn::Exp2:
      return {
          {"bits", 0.20, bits},
          {"main range", 0.30,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(F.emin_sub - 2, F.emax + 2)); }},
          {"overflow edge", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(F.emax + 1 + g.uni(-0.02, 0.02)); }},
          {"subnormal results", 0.15,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(F.emin_sub - 1, F.emin_sub + p)); }},
          {"near 0", 0.15,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 12, 0)); }},
          {"near integers", 0.10,
           [=](Gen& g, double& x, double&) {
             x = g.rnd(static_cast<double>(g.ri(-60, 60)) + g.sgn() * g.logu(-p - 4, -4));
           }},
      };
    case Fn::Log2:
      return {
          {"bits", 0.15, bits},
          {"positive bits", 0.20, [](Gen& g, double& x, double&) { x = std::fabs(g.bits()); }},
          {"near 1", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(1 + g.sgn() * g.logu(-p - 1, -1)); }},
          {"1 +- k ulp", 0.10,
           [=](Gen& g, double& x, double&) {
             x = g.step(1.0, static_cast<int>(g.ri(-65536, 65536)));
           }},
          {"near powers of 2", 0.15,
           [=](Gen& g, double& x, double&) {
             int e = static_cast<int>(g.ri(F.emin_sub + p, F.emax - 1));
             x = g.rnd(std::ldexp(1 + g.sgn() * g.logu(-p - 1, -4), e));
           }},
          {"subnormal", 0.10, [](Gen& g, double& x, double&) { x = std::fabs(g.subnormal()); }},
          {"[0.5, 2]", 0.10, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(0.5, 2)); }},
      };
    case Fn::Log1p:
      return {
          {"bits", 0.15, bits},
          {"positive bits", 0.15, [](Gen& g, double& x, double&) { x = std::fabs(g.bits()); }},
          {"near 0", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 40, -1)); }},
          {"near -1", 0.15, [=](Gen& g, double& x, double&) { x = g.rnd(-1 + g.logu(-p, -1)); }},
          {"(-1, 1)", 0.10, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-1, 1)); }},
          {"1 + x near powers of 2", 0.15,
           [=](Gen& g, double& x, double&) {
             int e = static_cast<int>(g.ri(-8, std::min(F.emax - 1, 200)));
             x = g.rnd(std::ldexp(1 + g.sgn() * g.logu(-p - 1, -4), e) - 1);
           }},
          {"subnormal", 0.10, [](Gen& g, double& x, double&) { x = g.subnormal(); }},
      };
    case Fn::Expm1:
      return {
          {"bits", 0.20, bits},
          {"main range", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-(p + 8), lnmax + 2)); }},
          {"near 0", 0.25,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 40, 0)); }},
          {"[-1, 1]", 0.15, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-1, 1)); }},
          {"overflow edge", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(lnmax + g.uni(-0.01, 0.01)); }},
          {"large negative", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(-g.uni(10, 3 * p)); }},
      };
    case Fn::Sinh:
    case Fn::Cosh: {
      const double edge = lnmax + std::log(2.0);  // sinh/cosh overflow at ln(2 max)
      return {
          {"bits", 0.20, bits},
          {"[-10, 10]", 0.20, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-10, 10)); }},
          {"near 0", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 40, 0)); }},
          {"|x| in [0.25, 2]", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.uni(0.25, 2)); }},
          {"large", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.uni(10, edge + 1)); }},
          {"overflow edge", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * (edge + g.uni(-0.02, 0.02))); }},
      };
    }
    case Fn::Asin:
    case Fn::Acos:
      return {
          {"bits", 0.15, bits},
          {"[-1, 1]", 0.25, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-1, 1)); }},
          {"near +-1", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * (1 - g.logu(-p - 1, -1))); }},
          {"+-1 - k ulp", 0.10,
           [=](Gen& g, double& x, double&) {
             x = g.sgn() * g.step(1.0, -static_cast<int>(g.ri(0, 65536)));
           }},
          {"near 0", 0.15,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 40, -1)); }},
          {"|x| in [0.4, 0.6]", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.uni(0.4, 0.6)); }},
          {"|x| > 1", 0.05, [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(0, 4)); }},
      };
    case Fn::Atan:
      return {
          {"bits", 0.20, bits},
          {"[-4, 4]", 0.20, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-4, 4)); }},
          {"small", 0.15,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 40, -2)); }},
          {"large", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(2, F.emax + 0.999)); }},
          {"near +-1", 0.10,
           [=](Gen& g, double& x, double&) {
             x = g.rnd(g.sgn() * (1 + g.sgn() * g.logu(-p, -2)));
           }},
          {"|x| in [0.3, 3]", 0.15,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.uni(0.3, 3)); }},
      };
    case Fn::Erf: {
      const double one = d ? 5.93 : 3.92;  // erf rounds to 1 above about this
      return {
          {"bits", 0.20, bits},
          {"near 0", 0.20,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 40, -1)); }},
          {"[-1, 1]", 0.15, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-1, 1)); }},
          {"|x| in [1, 6]", 0.25,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.uni(1, 6)); }},
          {"tail (near rounding to 1)", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.uni(one - 1, one + 0.5)); }},
          {"|x| >= 6", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(2.585, F.emax)); }},
      };
    }
    case Fn::Erfc: {
      const double zero = d ? 27.3 : 10.1;  // erfc underflows to 0 above about this
      return {
          {"bits", 0.15, bits},
          {"near 0", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(-p - 40, -1)); }},
          {"[-1, 1]", 0.10, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(-1, 1)); }},
          {"x in [1/2, underflow]", 0.30,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(0.5, zero)); }},
          {"near underflow", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(zero - 2, zero + 0.2)); }},
          {"x in [-6, -1/2]", 0.15, [=](Gen& g, double& x, double&) { x = g.rnd(-g.uni(0.5, 6)); }},
          {"|x| >= 6", 0.10,
           [=](Gen& g, double& x, double&) { x = g.rnd(g.sgn() * g.logu(2.585, F.emax)); }},
      };
    }
    case Fn::Rsqrt:
      return {
          {"bits", 0.15, bits},
          {"positive bits", 0.30, [](Gen& g, double& x, double&) { x = std::fabs(g.bits()); }},
          {"[1, 4)", 0.20, [=](Gen& g, double& x, double&) { x = g.rnd(g.uni(1, 4)); }},
          {"near powers of 4", 0.15,
           [=](Gen& g, double& x, double&) {
             int e = 2 * static_cast<int>(g.ri((F.emin_sub + p) / 2, F.emax / 2));
             x = g.rnd(std::ldexp(1 + g.sgn() * g.logu(-p - 1, -4), e));
           }},
          {"1 +- k ulp", 0.10,
           [=](Gen& g, double& x, double&) {
             x = g.step(1.0, static_cast<int>(g.ri(-65536, 65536)));
           }},
          {"subnormal", 0.10, [](Gen& g, double& x, double&) { x = std::fabs(g.subnormal()); }},
      };
  }
  return {};
}

}  // namespace

Inputs random_inputs(const Function& f, const Format& F, size_t n, uint64_t seed, uint64_t part) {
  auto regs = regions_for(f, F);
  double total = 0;
  for (auto& r : regs) total += r.weight;
  Gen g(mix(seed ^ mix(static_cast<uint64_t>(f.id) * 1000 + F.p) ^ mix(part + 0x1234)), F);
  Inputs in;
  std::vector<uint8_t> ids;
  for (auto& r : regs) ids.push_back(in.region_id(r.name));
  const bool trig = f.id == Fn::Sin || f.id == Fn::Cos || f.id == Fn::Tan;
  uint8_t bits_small = 0, bits_big = 0;
  if (trig)
    bits_small = in.region_id("bits |x| < 3.37e9"), bits_big = in.region_id("bits |x| >= 3.37e9");
  in.x.reserve(n);
  in.region.reserve(n);
  if (f.arity == 2) in.y.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    double u = g.u01() * total;
    size_t k = 0;
    while (k + 1 < regs.size() && u >= regs[k].weight) u -= regs[k++].weight;
    double a = 0, b = 0;
    regs[k].draw(g, a, b);
    uint8_t id = ids[k];
    if (trig && k == 0) id = std::fabs(a) < 3.37e9 || std::isnan(a) ? bits_small : bits_big;
    if (f.arity == 2)
      in.push(a, b, id);
    else
      in.push(a, id);
  }
  return in;
}

namespace {

// The special values of a format, both signs.
std::vector<double> base_specials(const Format& F) {
  Gen g(0, F);
  double mn = g.min_normal(), mx = g.max_finite(), ms = std::ldexp(1, F.emin_sub);
  std::vector<double> pos = {0.0,
                             kInf,
                             ms,
                             ms * 2,
                             ms * 3,
                             mn - ms,  // largest subnormal
                             mn / 2,
                             mn,
                             g.step(mn, 1),
                             1.0,
                             g.step(1.0, 1),
                             g.step(1.0, -1),
                             0.5,
                             2.0,
                             3.0,
                             10.0,
                             mx,
                             g.step(mx, -1)};
  std::vector<double> v = {kNaN, -kNaN};
  for (double p : pos) v.push_back(p), v.push_back(-p);
  return v;
}

void add_unique(std::vector<double>& v, double a) {
  for (double b : v)
    if (std::memcmp(&a, &b, sizeof a) == 0) return;
  v.push_back(a);
}

}  // namespace

Inputs special_inputs(const Function& f, const Format& F) {
  Gen g(0, F);
  std::vector<double> v = base_specials(F);
  auto around = [&](long double c, int k) {
    double r = g.rnd(static_cast<double>(c));
    for (int j = -k; j <= k; ++j) add_unique(v, g.step(r, j));
  };
  const long double ln2 = 0.693147180559945309417232121458176568L;
  switch (f.id) {
    case Fn::Exp:
    case Fn::Sigmoid: {
      long double s = f.id == Fn::Exp ? 1 : -1;
      around(s * (F.emax + 1) * ln2, 3);            // overflow threshold
      around(s * (F.emin_sub - 1) * ln2, 3);        // rounds to 0 below
      around(s * F.emin_sub * ln2, 3);              // the smallest subnormal
      around(s * (F.emin_sub + F.p - 1) * ln2, 3);  // the smallest normal
      around(s * std::ldexp(1.0L, -F.p - 1), 2);    // e^x rounds to 1 below
      break;
    }
    case Fn::Sin:
    case Fn::Cos:
    case Fn::Tan:
      for (long double m : {0.25L, 0.5L, 1.0L, 1.5L, 2.0L, 100.0L})
        around(m * kPiL, 1), around(-m * kPiL, 1);
      for (int e : {20, 24, 30, 31, 32, 53, 64, 100, 500, 1000})
        if (e <= F.emax) add_unique(v, std::ldexp(1.0, e)), add_unique(v, -std::ldexp(1.0, e));
      if (F.p == 53) add_unique(v, std::ldexp(6381956970095103.0, 797));  // the hardest reduction
      if (F.p == 24) add_unique(v, std::ldexp(16367173.0, 72));           // hard for float32
      break;
    case Fn::Tanh:
      for (double a : {0.5, 0.55, 0.625, 1.0, 9.01, 19.06, 20.0, 22.0, 40.0})
        around(a, 1), around(-a, 1);
      break;
    case Fn::Log:
      add_unique(v, g.rnd(2.718281828459045235360287L));
      break;
    case Fn::Exp2:
      for (long double e :
           {F.emax + 1.0L, F.emin_sub - 1.0L, F.emin_sub + 0.0L, F.emin_sub + F.p - 1.0L})
        around(e, 3);
      around(std::ldexp(1.0L, -F.p - 1), 2), around(-std::ldexp(1.0L, -F.p - 1), 2);
      for (int k = -10; k <= 10; ++k) add_unique(v, k), add_unique(v, k + 0.5);
      break;
    case Fn::Log2:
      for (int e : {F.emin_sub, F.emin_sub + F.p - 1, -10, -1, 1, 3, 10, F.emax})
        around(std::ldexp(1.0L, e), 2);
      break;
    case Fn::Expm1:
      around((F.emax + 1) * ln2, 3);  // overflow threshold
      around(-(F.p + 1) * ln2, 3);    // rounds to -1 below
      around(std::ldexp(1.0L, -F.p), 2), around(-std::ldexp(1.0L, -F.p), 2);
      around(ln2 / 2, 1), around(-ln2 / 2, 1), around(ln2, 1), around(-ln2, 1);
      break;
    case Fn::Log1p:
      around(-1, 3);  // -inf at -1, NaN below
      around(std::ldexp(1.0L, -F.p), 2), around(-std::ldexp(1.0L, -F.p), 2);
      around(-0.5L, 2), around(1, 2), around(std::sqrt(2.0L) - 1, 1),
          around(std::sqrt(0.5L) - 1, 1);
      break;
    case Fn::Sinh:
    case Fn::Cosh: {
      long double edge = (F.emax + 1) * ln2 + ln2;  // overflow at ln(2 max)
      around(edge, 3), around(-edge, 3);
      around(std::ldexp(1.0L, -F.p / 2), 2), around(-std::ldexp(1.0L, -F.p / 2), 2);
      for (double a : {0.5, 1.0, 10.0, 20.0, 40.0}) around(a, 1), around(-a, 1);
      break;
    }
    case Fn::Asin:
    case Fn::Acos:
      for (long double a : {1.0L, 0.5L, std::ldexp(1.0L, -F.p / 2)}) around(a, 3), around(-a, 3);
      break;
    case Fn::Atan:
      for (long double a : {1.0L, std::ldexp(1.0L, -F.p / 2), std::ldexp(1.0L, F.p + 1),
                            2.414213562373095L, 0.414213562373095L})
        around(a, 2), around(-a, 2);
      break;
    case Fn::Erf:
      for (long double a :
           {0.5L, 0.84375L, 1.25L, 2.857L, 3.92L, 5.92L, 6.0L, std::ldexp(1.0L, -F.p / 2)})
        around(a, 2), around(-a, 2);
      break;
    case Fn::Erfc:  // the ends of the polynomial pieces, and where erfc underflows or rounds to 2
      for (long double a : {0.5L, 1.25L, 2.25L, 3.5L, 5.0L, 7.0L, 10.0L, 14.5L, 20.5L, 27.5L, 6.0L,
                            10.05L, 26.55L, 27.22L, std::ldexp(1.0L, -F.p / 2)})
        around(a, 2), around(-a, 2);
      break;
    case Fn::Rsqrt:
      for (int e : {F.emin_sub, F.emin_sub + F.p - 1, -900, -2, 1, 2, 1000, F.emax})
        around(std::ldexp(1.0L, e), 2);
      break;
    default:
      break;
  }
  Inputs in;
  uint8_t r = in.region_id("specials");
  if (f.arity == 1) {
    for (double a : v) in.push(a, r);
    return in;
  }
  // Binary: the cross product, with a few more operands that decide pow's cases.
  if (f.id == Fn::Pow) {
    double odd = std::ldexp(1.0, F.p) - 1, even = std::ldexp(1.0, F.p);
    for (double a : {2.5, 0.25, odd, even, even + 2, 1.0 / 3, 0.75, 1.5})
      add_unique(v, g.rnd(a)), add_unique(v, -g.rnd(a));
  }
  for (double a : v)
    for (double b : v) in.push(a, b, r);
  return in;
}

Inputs half_inputs(const Function& f, const Format& F, size_t grid, uint64_t seed, bool sweeps) {
  Inputs in;
  if (f.arity == 1) {
    uint8_t r = in.region_id("every bit pattern");
    for (uint32_t b = 0; b < 65536; ++b) in.push(half_value(F, static_cast<uint16_t>(b)), r);
    return in;
  }
  std::mt19937_64 g(mix(seed ^ mix(static_cast<uint64_t>(f.id) * 1000 + F.p)));
  std::vector<double> xs(grid), ys(grid);
  for (auto& v : xs) v = half_value(F, static_cast<uint16_t>(g()));
  for (auto& v : ys) v = half_value(F, static_cast<uint16_t>(g()));
  uint8_t rg = in.region_id("random grid");
  for (double a : xs)
    for (double b : ys) in.push(a, b, rg);
  uint8_t rs = in.region_id("sweeps");
  auto rnd = [&](double v) { return round_to(F, v); };
  std::vector<double> fix_second, fix_first;
  if (f.id == Fn::Pow) {
    fix_second = {2, 0.5, -1, 3, -2.5, rnd(1.0 / 3), 10};
    fix_first = {2, 0.5, -2, 10, rnd(2.718281828459045)};
  } else {
    double ms = std::ldexp(1.0, F.emin_sub), mx = std::ldexp(2 - std::ldexp(1, 1 - F.p), F.emax);
    fix_second = {1, -1, ms, mx};
    fix_first = {1, -1, ms, mx};
  }
  for (uint32_t bb = 0; sweeps && bb < 65536; ++bb) {
    double v = half_value(F, static_cast<uint16_t>(bb));
    for (double c : fix_second) in.push(v, c, rs);
    for (double c : fix_first) in.push(c, v, rs);
  }
  Inputs sp = special_inputs(f, F);
  uint8_t rsp = in.region_id("specials");
  for (size_t i = 0; i < sp.size(); ++i) in.push(sp.x[i], sp.y[i], rsp);
  return in;
}

double round_to(const Format& F, double v) {
  if (F.p == 53) return v;
  if (F.p == 24) return static_cast<double>(static_cast<float>(v));
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  int e;
  std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  int q = std::max(e - 1 - (F.p - 1), F.emin_sub);
  double r = std::nearbyint(std::ldexp(v, -q));  // ties to even (default rounding mode)
  r = std::ldexp(r, q);
  if (std::fabs(r) >= std::ldexp(1.0, F.emax + 1)) r = std::copysign(kInf, v);
  return r;
}

// ---------------------------------------------------------------------------------------------
// rune.

nx::Tensor apply(const Function& f, const nx::Tensor& a, const nx::Tensor& b) {
  switch (f.id) {
    case Fn::Exp:
      return nx::exp(a);
    case Fn::Log:
      return nx::log(a);
    case Fn::Sin:
      return nx::sin(a);
    case Fn::Cos:
      return nx::cos(a);
    case Fn::Tan:
      return nx::tan(a);
    case Fn::Tanh:
      return nx::tanh(a);
    case Fn::Sigmoid:
      return nx::sigmoid(a);
    case Fn::Pow:
      return nx::pow(a, b);
    case Fn::Atan2:
      return nx::atan2(a, b);
    case Fn::Exp2:
      return nx::exp2(a);
    case Fn::Log2:
      return nx::log2(a);
    case Fn::Expm1:
      return nx::expm1(a);
    case Fn::Log1p:
      return nx::log1p(a);
    case Fn::Sinh:
      return nx::sinh(a);
    case Fn::Cosh:
      return nx::cosh(a);
    case Fn::Asin:
      return nx::asin(a);
    case Fn::Acos:
      return nx::acos(a);
    case Fn::Atan:
      return nx::atan(a);
    case Fn::Erf:
      return nx::erf(a);
    case Fn::Erfc:
      return nx::erfc(a);
    case Fn::Rsqrt:
      return nx::rsqrt(a);
  }
  throw std::logic_error("ulp::apply: unknown function");
}

std::vector<double> eval_rune(const Function& f, const Format& F, const Inputs& in, size_t chunk) {
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) {  // nx::create would round a value the format lacks
    auto bad = [&](double v) { return !std::isnan(v) && !same_bits(round_to(F, v), v); };
    if (bad(in.x[i]) || (f.arity == 2 && bad(in.y[i])))
      throw std::logic_error("ulp::eval_rune: input " + hexf(in.x[i]) +
                             (f.arity == 2 ? ", " + hexf(in.y[i]) : "") + " is not a " + F.name);
  }
  std::vector<double> out(n);
  for (size_t start = 0; start < n; start += chunk) {
    size_t len = std::min(chunk, n - start);
    size_t padded = n > chunk ? chunk : len;  // one shape per run: the last chunk is padded
    std::vector<double> a(in.x.begin() + start, in.x.begin() + start + len);
    a.resize(padded, 1.0);
    nx::Tensor ta = nx::create(F.dtype, {static_cast<int64_t>(padded)}, a), r;
    nx::Tensor tb;
    if (f.arity == 2) {
      std::vector<double> b(in.y.begin() + start, in.y.begin() + start + len);
      b.resize(padded, 1.0);
      tb = nx::create(F.dtype, {static_cast<int64_t>(padded)}, b);
    }
    r = apply(f, ta, tb);
    if (r.dtype() != F.dtype)
      throw std::runtime_error(std::string("ulp: nx::") + f.name + " returned another dtype");
    std::vector<double> v = nx::to_vector<double>(r);
    std::copy(v.begin(), v.begin() + len, out.begin() + start);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// MPFR.

namespace {

// Working precision: 128 bits for float64 (75 bits beyond the format), 64 bits for the narrower
// formats (40 and more beyond float32): the error of an MPFR result is under 2^-40 ulp either way.
mpfr_prec_t precision(const Format& F) { return F.p > 24 ? 128 : 64; }

struct Ctx {
  mpfr_t a, b, y, t, d;
  explicit Ctx(mpfr_prec_t prec) {
    // The exponent range is per thread (MPFR built with TLS): widen it in each worker.
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    mpfr_inits2(prec, a, b, y, t, d, static_cast<mpfr_ptr>(nullptr));
  }
  ~Ctx() { mpfr_clears(a, b, y, t, d, static_cast<mpfr_ptr>(nullptr)); }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
};

// The exact value (rounded to the working precision) in c.y; returns MPFR's ternary (0: exact).
int eval_mpfr(Fn id, Ctx& c) {
  const mpfr_rnd_t R = MPFR_RNDN;
  switch (id) {
    case Fn::Exp:
      return mpfr_exp(c.y, c.a, R);
    case Fn::Log:
      return mpfr_log(c.y, c.a, R);
    case Fn::Sin:
      return mpfr_sin(c.y, c.a, R);
    case Fn::Cos:
      return mpfr_cos(c.y, c.a, R);
    case Fn::Tan:
      return mpfr_tan(c.y, c.a, R);
    case Fn::Tanh:
      return mpfr_tanh(c.y, c.a, R);
    case Fn::Pow:
      return mpfr_pow(c.y, c.a, c.b, R);
    case Fn::Atan2:
      return mpfr_atan2(c.y, c.a, c.b, R);
    case Fn::Sigmoid: {
      int t = mpfr_neg(c.t, c.a, R) != 0;
      t |= mpfr_exp(c.t, c.t, R) != 0;
      t |= mpfr_add_ui(c.t, c.t, 1, R) != 0;
      t |= mpfr_ui_div(c.y, 1, c.t, R) != 0;
      return t;
    }
    case Fn::Exp2:
      return mpfr_exp2(c.y, c.a, R);
    case Fn::Log2:
      return mpfr_log2(c.y, c.a, R);
    case Fn::Expm1:
      return mpfr_expm1(c.y, c.a, R);
    case Fn::Log1p:
      return mpfr_log1p(c.y, c.a, R);
    case Fn::Sinh:
      return mpfr_sinh(c.y, c.a, R);
    case Fn::Cosh:
      return mpfr_cosh(c.y, c.a, R);
    case Fn::Asin:
      return mpfr_asin(c.y, c.a, R);
    case Fn::Acos:
      return mpfr_acos(c.y, c.a, R);
    case Fn::Atan:
      return mpfr_atan(c.y, c.a, R);
    case Fn::Erf:
      return mpfr_erf(c.y, c.a, R);
    case Fn::Erfc:
      return mpfr_erfc(c.y, c.a, R);
    case Fn::Rsqrt:  // IEEE 754 rSqrt(-0) is -inf (numpy's 1/sqrt(-0) too); MPFR gives +inf
      if (mpfr_zero_p(c.a) && mpfr_signbit(c.a)) return mpfr_set_inf(c.y, -1), 0;
      return mpfr_rec_sqrt(c.y, c.a, R);
  }
  return 1;
}

// y (finite) rounded to the format, as a double (+-inf on overflow; zeros keep y's sign).
double round_mpfr(const Format& F, mpfr_srcptr y, mpfr_ptr tmp) {
  if (mpfr_zero_p(y)) return mpfr_signbit(y) ? -0.0 : 0.0;
  long e = static_cast<long>(mpfr_get_exp(y)) - 1;  // |y| in [2^e, 2^(e+1))
  long q = std::max(e - (F.p - 1), static_cast<long>(F.emin_sub));
  mpfr_mul_2si(tmp, y, -q, MPFR_RNDN);
  mpfr_rint(tmp, tmp, MPFR_RNDN);
  if (mpfr_zero_p(tmp)) return mpfr_signbit(y) ? -0.0 : 0.0;
  long eq = static_cast<long>(mpfr_get_exp(tmp)) - 1 + q;
  if (eq > F.emax) return mpfr_signbit(y) ? -kInf : kInf;
  mpfr_mul_2si(tmp, tmp, q, MPFR_RNDN);
  return mpfr_get_d(tmp, MPFR_RNDN);  // exact: the value fits the format, so a double
}

// |got - y| / ulp(y) for finite y.
double ulp_error(const Format& F, double got, mpfr_srcptr y, mpfr_ptr d) {
  long q = F.emin_sub;
  if (!mpfr_zero_p(y)) {
    long e = static_cast<long>(mpfr_get_exp(y)) - 1;
    q = std::clamp(e - (F.p - 1), static_cast<long>(F.emin_sub),
                   static_cast<long>(F.emax - F.p + 1));
  }
  if (std::isinf(got)) {
    mpfr_set_ui_2exp(d, 1, F.emax + 1, MPFR_RNDN);
    if (got < 0) mpfr_neg(d, d, MPFR_RNDN);
  } else {
    mpfr_set_d(d, got, MPFR_RNDN);
  }
  mpfr_sub(d, d, y, MPFR_RNDN);
  mpfr_mul_2si(d, d, -q, MPFR_RNDN);
  return std::fabs(mpfr_get_d(d, MPFR_RNDN));
}

struct Local {
  Stats s;
  std::vector<RegionStats> reg;
};

void record(Sample& w, double err, double x, double y, double got, double exact,
            const std::string& region) {
  w.err = err, w.x = x, w.y = y, w.got = got, w.exact = exact, w.region = region;
}

void measure_range(const Function& f, const Format& F, const Inputs& in,
                   const std::vector<double>& got, double bnd, size_t lo, size_t hi, Local& L) {
  Ctx c(precision(F));
  L.reg.assign(in.region_names.size(), RegionStats{});
  Stats& s = L.s;
  const bool bin = f.arity == 2;
  for (size_t i = lo; i < hi; ++i) {
    const double x = in.x[i], y = bin ? in.y[i] : 0, g = got[i];
    mpfr_set_d(c.a, x, MPFR_RNDN);
    if (bin) mpfr_set_d(c.b, y, MPFR_RNDN);
    const int tern = eval_mpfr(f.id, c);
    double err = 0, exact;
    bool checked = false, ok = true;
    const char* why = "";
    if (mpfr_nan_p(c.y)) {
      exact = kNaN;
      checked = true;
      if (!std::isnan(g)) ok = false, err = kInf, why = "expected NaN";
    } else if (std::isnan(g)) {
      exact = mpfr_get_d(c.y, MPFR_RNDN);
      checked = true, ok = false, err = kInf, why = "NaN for a number";
    } else if (mpfr_inf_p(c.y)) {
      exact = mpfr_signbit(c.y) ? -kInf : kInf;
      bool same = same_bits(g, exact);
      err = same ? 0 : kInf;
      if (tern == 0) checked = true, ok = same, why = "expected an exact infinity";
    } else {
      exact = round_mpfr(F, c.y, c.t);
      // A correctly rounded overflow costs nothing, however far beyond the range y lies.
      err = std::isinf(exact) && same_bits(g, exact) ? 0 : ulp_error(F, g, c.y, c.d);
      bool exact_special = tern == 0 && (mpfr_zero_p(c.y) || mpfr_cmpabs_ui(c.y, 1) == 0);
      bool atan2_axis = f.id == Fn::Atan2 && (x == 0 || std::isinf(x) || y == 0 || std::isinf(y));
      // Annex F: asin(+-1) and atan(+-inf) are +-pi/2, correctly rounded.
      bool half_pi = (f.id == Fn::Asin && std::fabs(x) == 1) || (f.id == Fn::Atan && std::isinf(x));
      if (exact_special || atan2_axis || half_pi) {
        checked = true;
        ok = same_bits(g, exact);
        why = exact_special ? "expected an exact 0 or 1 (sign included)"
              : half_pi     ? "asin(+-1) / atan(+-inf): expected the correctly rounded +-pi/2"
                            : "atan2 on an axis: expected the correctly rounded result";
      } else if (exact == 0 && g == 0 && std::signbit(exact) != std::signbit(g)) {
        ++s.zero_sign;
      }
    }
    const std::string& rname = in.region_names[in.region[i]];
    RegionStats& R = L.reg[in.region[i]];
    ++s.n, ++R.n;
    if (checked) {
      ++s.special_n;
      if (!ok) {
        ++s.special_fail;
        if (s.failures.size() < 8) {
          Sample w;
          record(w, err, x, y, g, exact, rname);
          w.why = why;
          s.failures.push_back(w);
        }
      }
    }
    if (std::isfinite(err)) ++s.finite_n, s.sum += err, R.sum += err;
    if (bnd >= 0 && err > bnd) ++s.over, ++R.over;
    if (err > s.max || s.worst.err < 0)
      s.max = std::max(s.max, err), record(s.worst, err, x, y, g, exact, rname);
    if (err > R.max || R.worst.err < 0)
      R.max = std::max(R.max, err), record(R.worst, err, x, y, g, exact, rname);
  }
}

}  // namespace

RegionStats& Stats::region(const std::string& name) {
  for (auto& [n, r] : regions)
    if (n == name) return r;
  regions.emplace_back(name, RegionStats{});
  return regions.back().second;
}

namespace {
void merge_region(RegionStats& a, const RegionStats& b) {
  if (b.n == 0) return;
  a.n += b.n, a.over += b.over, a.sum += b.sum;
  if (b.worst.err > a.worst.err) a.worst = b.worst;
  a.max = std::max(a.max, b.max);
}
}  // namespace

void Stats::merge(const Stats& o) {
  n += o.n, finite_n += o.finite_n, over += o.over, special_n += o.special_n;
  special_fail += o.special_fail, zero_sign += o.zero_sign, sum += o.sum;
  if (o.worst.err > worst.err) worst = o.worst;
  max = std::max(max, o.max);
  for (const auto& w : o.failures)
    if (failures.size() < 8) failures.push_back(w);
  for (const auto& [name, r] : o.regions) merge_region(region(name), r);
  seconds_rune += o.seconds_rune, seconds_mpfr += o.seconds_mpfr;
}

void measure(const Function& f, const Format& F, const Inputs& in, const std::vector<double>& got,
             double bnd, int threads, Stats& s) {
  const size_t n = in.size();
  if (got.size() != n) throw std::logic_error("ulp::measure: result count differs");
  threads = std::max(1, std::min<int>(threads, static_cast<int>(n / 64) + 1));
  std::vector<Local> locals(threads);
  std::vector<std::thread> ts;
  for (int k = 0; k < threads; ++k) {
    size_t lo = n * k / threads, hi = n * (k + 1) / threads;
    ts.emplace_back([&, lo, hi, k] { measure_range(f, F, in, got, bnd, lo, hi, locals[k]); });
  }
  for (auto& t : ts) t.join();
  for (auto& L : locals) {  // in index order, so the first worst input wins ties
    for (size_t r = 0; r < L.reg.size(); ++r)
      merge_region(L.s.region(in.region_names[r]), L.reg[r]);
    s.merge(L.s);
  }
}

void run(const Function& f, const Format& F, const Inputs& in, double bnd, int threads, Stats& s,
         size_t chunk) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  std::vector<double> got = eval_rune(f, F, in, chunk);
  auto t1 = Clock::now();
  measure(f, F, in, got, bnd, threads, s);
  auto t2 = Clock::now();
  s.seconds_rune += std::chrono::duration<double>(t1 - t0).count();
  s.seconds_mpfr += std::chrono::duration<double>(t2 - t1).count();
}

std::string hexf(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (std::isfinite(v) && v != 0) {
    std::snprintf(buf, sizeof buf, " (%a)", v);
    s += buf;
  }
  return s;
}

std::string describe(const Function& f, const Sample& w) {
  std::string s = f.arity == 2 ? "(" + hexf(w.x) + ", " + hexf(w.y) + ")" : "x = " + hexf(w.x);
  s += ": rune " + hexf(w.got) + ", correctly rounded " + hexf(w.exact);
  if (!w.region.empty()) s += " [" + w.region + "]";
  return s;
}

}  // namespace ulp
