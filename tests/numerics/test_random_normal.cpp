// The accuracy of nx::random::normal (docs/random.md): each draw against the exact
// sqrt(2) erfinv(u) of its own uniform u (nx::random::uniform over JAX's interval, the draw
// normal maps), computed with MPFR: erfinv by Newton's method on MPFR's erf at 160 bits from
// rune's value. Asserts the bounds docs/random.md states and prints the measured maximum.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "trace/rune.h"

namespace {

namespace rnd = nx::random;

// |got - sqrt(2) erfinv(u)| in ulps of `digits`-bit floats (53: float64, 24: float32) at the
// exact value's binade.
class Exact {
 public:
  Exact() { mpfr_inits2(kPrec, x_, e_, t_, s_, nullptr); }
  ~Exact() { mpfr_clears(x_, e_, t_, s_, nullptr); }
  double ulps(double u, double got, int digits) {
    // Newton on erf(x) = u from got / sqrt(2): each step squares the relative error, and the
    // start is within a few ulps of float32 at worst, so 4 steps reach far below 2^-100.
    mpfr_set_d(x_, got, MPFR_RNDN);
    mpfr_sqrt_ui(s_, 2, MPFR_RNDN);
    mpfr_div(x_, x_, s_, MPFR_RNDN);
    for (int i = 0; i < 4; ++i) {
      mpfr_erf(e_, x_, MPFR_RNDN);
      mpfr_sub_d(e_, e_, u, MPFR_RNDN);  // erf(x) - u
      mpfr_sqr(t_, x_, MPFR_RNDN);
      mpfr_exp(t_, t_, MPFR_RNDN);  // exp(x^2)
      mpfr_mul(e_, e_, t_, MPFR_RNDN);
      mpfr_const_pi(t_, MPFR_RNDN);
      mpfr_sqrt(t_, t_, MPFR_RNDN);
      mpfr_mul(e_, e_, t_, MPFR_RNDN);
      mpfr_div_ui(e_, e_, 2, MPFR_RNDN);  // (erf(x) - u) / erf'(x)
      mpfr_sub(x_, x_, e_, MPFR_RNDN);
    }
    mpfr_mul(x_, x_, s_, MPFR_RNDN);  // the exact normal
    if (mpfr_zero_p(x_)) return got == 0 ? 0 : INFINITY;
    long ex = mpfr_get_exp(x_);  // x = m 2^ex, 0.5 <= |m| < 1
    mpfr_sub_d(e_, x_, got, MPFR_RNDN);
    mpfr_abs(e_, e_, MPFR_RNDN);
    mpfr_mul_2si(e_, e_, digits - ex, MPFR_RNDN);  // in units of 2^(ex - digits)
    return mpfr_get_d(e_, MPFR_RNDN);
  }

 private:
  static constexpr mpfr_prec_t kPrec = 160;
  mpfr_t x_, e_, t_, s_;
};

// The largest error over n draws of each of `keys` keys.
template <class T>
double max_ulps(nx::DType t, int digits, int64_t n, int keys) {
  Exact exact;
  double worst = 0;
  for (int s = 0; s < keys; ++s) {
    nx::Tensor k = rnd::key(1000 + s);
    double lo = std::nextafter(static_cast<T>(-1), static_cast<T>(0));
    auto u = nx::to_vector<T>(rnd::uniform(k, {n}, t, lo, 1));
    auto z = nx::to_vector<T>(rnd::normal(k, {n}, t));
    for (int64_t i = 0; i < n; ++i) {
      double e = exact.ulps(u[i], z[i], digits);
      EXPECT_TRUE(std::isfinite(e)) << "u " << u[i] << " normal " << z[i];
      worst = std::max(worst, e);
    }
  }
  return worst;
}

// docs/random.md: float64 within 2.5 ulps of the exact value, float32 correctly rounded
// (0.5 ulp, against the float32 u).
TEST(RandomNormalAccuracy, Float64AgainstMpfr) {
  double worst = max_ulps<double>(nx::float64, 53, 1 << 15, 4);
  std::printf("float64 normal: max %.3f ulp\n", worst);
  EXPECT_LE(worst, 2.5);
}

TEST(RandomNormalAccuracy, Float32AgainstMpfr) {
  double worst = max_ulps<float>(nx::float32, 24, 1 << 15, 4);
  std::printf("float32 normal: max %.3f ulp\n", worst);
  EXPECT_LE(worst, 0.5);
}

}  // namespace
