// Accuracy and special-value tests for codegen/decompose_math: each decomposition is built once per
// function and dtype, evaluated with the reference interpreter (ir::eval_scalar) on many inputs,
// and compared in ulps with long double libm (or exactly, for the C99 Annex F special values).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/decompose.h"
#include "codegen/decompose_math.h"
#include "ir/builder.h"
#include "ir/eval.h"
#include "ir/scalar.h"

namespace {

using ir::DType;
using ir::NodeRef;
using ir::Value;
namespace m = codegen::math;

using Fn1 = NodeRef (*)(NodeRef);
using Fn2 = NodeRef (*)(NodeRef, NodeRef);

template <class T>
constexpr DType dtype_of() {
  return sizeof(T) == 4 ? DType::Float32 : DType::Float64;
}

// A leaf the builder cannot fold (a Const input would fold the whole graph through ir::apply).
NodeRef input(DType t, int param) {
  return ir::make(ir::Op::Load, t, {}, {}, ir::LoadArg{param, ir::View::contiguous({})});
}

// A decomposition built once, evaluated on many inputs.
template <class T>
struct Graph {
  NodeRef a = nullptr, b = nullptr, root = nullptr;
  ir::ScalarProgram program;
  explicit Graph(Fn1 fn) : a(input(dtype_of<T>(), 0)), root(fn(a)), program(root) {}
  explicit Graph(Fn2 fn)
      : a(input(dtype_of<T>(), 0)), b(input(dtype_of<T>(), 1)), root(fn(a, b)), program(root) {}
  T operator()(T x, T y = 0) const {
    Value va = Value::of_float(dtype_of<T>(), x), vb = Value::of_float(dtype_of<T>(), y);
    Value r = program.run([&](NodeRef n) { return n == a ? va : vb; });
    EXPECT_EQ(r.dtype, dtype_of<T>());
    return static_cast<T>(r.f);
  }
};

// ---------------------------------------------------------------------------------------------
// ulp error of y against the (much more precise) reference ref: |y - ref| / ulp, where ulp is the
// spacing of T in ref's binade (subnormal spacing below the normal range).

template <class T>
double ulp_error(T y, long double ref) {
  if (std::isnan(ref)) return std::isnan(y) ? 0 : INFINITY;
  if (std::isnan(y)) return INFINITY;
  T rr = static_cast<T>(ref);
  if (std::isinf(y) || std::isinf(rr)) {
    if (y == rr) return 0;
    // ref rounds to inf but y is the largest finite (or the reverse): measure at the top binade.
    long double top = std::numeric_limits<T>::max();
    long double u =
        std::ldexp(1.0L, std::numeric_limits<T>::max_exponent - std::numeric_limits<T>::digits);
    long double yy = std::isinf(y) ? std::copysign(top + u, (long double)y) : (long double)y;
    return static_cast<double>(std::fabs(yy - ref) / u);
  }
  int e;
  std::frexp(ref, &e);                              // |ref| in [2^(e-1), 2^e)
  int emin = std::numeric_limits<T>::min_exponent;  // min normal is 2^(emin-1)
  if (ref == 0 || e < emin) e = emin;
  long double u = std::ldexp(1.0L, e - std::numeric_limits<T>::digits);
  return static_cast<double>(std::fabs(static_cast<long double>(y) - ref) / u);
}

// ---------------------------------------------------------------------------------------------
// Inputs. The environment variable DECOMPOSE_MATH_SCALE=n multiplies the random sample counts (and
// the run time, ~6 s at 1) for a longer search; DECOMPOSE_MATH_SEED changes the random seed.

int scale() {
  static int s = [] {
    const char* e = std::getenv("DECOMPOSE_MATH_SCALE");
    return e && std::atoi(e) > 0 ? std::atoi(e) : 1;
  }();
  return s;
}
uint64_t seed() {
  const char* e = std::getenv("DECOMPOSE_MATH_SEED");
  return e ? std::strtoull(e, nullptr, 0) : 0x5eed1234;
}

template <class T>
struct Gen {
  std::mt19937_64 rng{seed()};
  std::vector<T> v;

  T bits_any() {  // any finite non-NaN bit pattern
    for (;;) {
      uint64_t r = rng();
      T x;
      if constexpr (sizeof(T) == 4) {
        uint32_t u = static_cast<uint32_t>(r);
        std::memcpy(&x, &u, 4);
      } else {
        std::memcpy(&x, &r, 8);
      }
      if (std::isfinite(x)) return x;
    }
  }
  T uni(double lo, double hi) {
    return static_cast<T>(std::uniform_real_distribution<double>(lo, hi)(rng));
  }
  T logu(double elo, double ehi) {  // 2^U(elo, ehi) with a random sign
    T x = static_cast<T>(std::exp2(std::uniform_real_distribution<double>(elo, ehi)(rng)));
    return (rng() & 1) ? -x : x;
  }
  // n values of each generator (times DECOMPOSE_MATH_SCALE)
  void add(int n, const std::function<T()>& g) {
    for (int i = 0; i < n * scale(); ++i) v.push_back(g());
  }
  // values near x: x, then a few ulps either side
  void around(T x, int ulps) {
    T lo = x, hi = x;
    v.push_back(x);
    for (int i = 0; i < ulps; ++i) {
      lo = std::nextafter(lo, -INFINITY);
      hi = std::nextafter(hi, INFINITY);
      v.push_back(lo);
      v.push_back(hi);
    }
  }
};

struct Stats {
  double max_err = 0;
  long double at_x = 0, at_y = 0;
  int n = 0;
};

template <class T>
void report(const char* name, const Stats& s, double bound) {
  std::printf("  %-6s %s: max %.3f ulp (bound %g) over %d inputs, at x=%.17Lg y=%.17Lg\n", name,
              sizeof(T) == 4 ? "f32" : "f64", s.max_err, bound, s.n, s.at_x, s.at_y);
  EXPECT_LE(s.max_err, bound) << name << " at x=" << (double)s.at_x << " y=" << (double)s.at_y;
}

template <class T>
void check1(const char* name, Fn1 fn, long double (*ref)(long double), const std::vector<T>& xs,
            double bound) {
  Graph<T> g(fn);
  Stats s;
  for (T x : xs) {
    T y = g(x);
    double e = ulp_error<T>(y, ref(static_cast<long double>(x)));
    if (!(e <= s.max_err)) s.max_err = e, s.at_x = x;
    ++s.n;
  }
  report<T>(name, s, bound);
}

template <class T>
void check2(const char* name, Fn2 fn, long double (*ref)(long double, long double),
            const std::vector<std::pair<T, T>>& xs, double bound) {
  Graph<T> g(fn);
  Stats s;
  for (auto [x, y] : xs) {
    T r = g(x, y);
    double e = ulp_error<T>(r, ref(static_cast<long double>(x), static_cast<long double>(y)));
    if (!(e <= s.max_err)) s.max_err = e, s.at_x = x, s.at_y = y;
    ++s.n;
  }
  report<T>(name, s, bound);
}

template <class T>
constexpr bool is32 = sizeof(T) == 4;

// ---------------------------------------------------------------------------------------------
// Per-function inputs.

template <class T>
std::vector<T> exp_inputs() {
  Gen<T> g;
  double hi = is32<T> ? 88.8 : 709.9, lo = is32<T> ? -104 : -745.2;
  g.add(6000, [&] { return g.uni(lo, hi); });
  g.add(3000, [&] { return g.uni(-1, 1); });
  g.add(2000, [&] { return g.logu(is32<T> ? -30 : -60, 0); });
  g.add(2000, [&] { return g.uni(hi - 1, hi); });                // overflow edge
  g.add(2000, [&] { return g.uni(lo, is32<T> ? -87 : -708); });  // subnormal results
  g.add(1000, [&] { return g.bits_any(); });
  for (int k = -3; k <= 3; ++k) g.around(static_cast<T>(k * 0.34657359027997264), 20);
  return g.v;
}

template <class T>
std::vector<T> expm1_inputs() {
  Gen<T> g;
  double hi = is32<T> ? 88.8 : 709.9;
  g.add(5000, [&] { return g.uni(-1, 1); });
  g.add(4000, [&] { return g.logu(is32<T> ? -40 : -80, 1); });
  g.add(3000, [&] { return g.uni(is32<T> ? -20 : -40, hi); });
  g.add(2000, [&] { return g.uni(-0.4, 0.4); });
  g.add(1000, [&] { return g.uni(hi - 1, hi); });
  g.add(1000, [&] { return g.bits_any(); });
  for (int k = -3; k <= 3; ++k) g.around(static_cast<T>(k * 0.34657359027997264), 20);
  return g.v;
}

template <class T>
std::vector<T> log_inputs(bool p1) {
  Gen<T> g;
  g.add(6000, [&] { return std::fabs(g.bits_any()); });
  g.add(3000, [&] { return g.uni(0.5, 2); });
  g.add(3000, [&] { return T(1) + g.logu(is32<T> ? -24 : -53, -1); });
  g.add(2000, [&] { return g.uni(0.70, 0.72); });
  g.add(2000, [&] { return g.uni(1.40, 1.42); });
  g.add(1000, [&] { return std::fabs(g.logu(is32<T> ? -149 : -1074, is32<T> ? -126 : -1022)); });
  if (p1) {
    g.add(4000, [&] { return g.logu(is32<T> ? -40 : -80, -1); });  // near 0, both signs
    g.add(2000, [&] { return T(-1) + std::fabs(g.logu(is32<T> ? -24 : -53, -1)); });
    g.add(1000, [&] { return g.uni(-1, 10); });
    for (T& x : g.v) x = std::isfinite(x) ? x : T(0);
  }
  std::vector<T> out;
  for (T x : g.v)
    if (std::isfinite(x) && x != 0) out.push_back(x);
  return out;
}

template <class T>
std::vector<T> trig_inputs() {
  Gen<T> g;
  g.add(5000, [&] { return g.uni(-10, 10); });
  g.add(2000, [&] { return g.logu(is32<T> ? -30 : -60, 3); });
  if (is32<T>) {
    g.add(5000, [&] { return g.bits_any(); });  // the whole float32 range
  } else {
    g.add(5000, [&] { return g.logu(3, 31.6); });  // up to 3.3e9 (beyond: HugeArguments)
  }
  // Near multiples of pi/2, where the reduction cancels.
  g.add(3000, [&] {
    double k =
        std::floor(std::exp2(std::uniform_real_distribution<double>(0, is32<T> ? 20 : 30)(g.rng)));
    T x = static_cast<T>(static_cast<long double>(k) * 1.57079632679489661923132169163975144L);
    int steps = static_cast<int>(g.rng() % 5);
    for (int i = 0; i < steps; ++i) x = std::nextafter(x, (g.rng() & 1) ? INFINITY : -INFINITY);
    return (g.rng() & 1) ? -x : x;
  });
  // The closest values to multiples of pi/2 (from the continued fractions of pi/2 * 2^j): the
  // reduction cancels down to |r| ~ 2^-60.5 (float64, below 2^31) and 2^-29.2 (float32).
  if (is32<T>) {
    for (double x : {0x1.f37c8ap+95, 0x1.47d0fep+34, 0x1.f9cbe2p+7, 0x1.32ede2p+85, 0x1.628d4cp+40,
                     0x1.130930p+76, 0x1.b08c4ap+111, 0x1.4665d2p+25, 0x1.2d97c8p+2, 0x1.abb4b0p+89,
                     0x1.0f79a0p+57, 0x1.9a48dep+15, 0x1.7f4134p+101})
      for (T sgn : {T(1), T(-1)}) g.v.push_back(sgn * static_cast<T>(x));
  } else {
    for (double x : {0x1.6c6cbc45dc8dep+5, 0x1.b951f1572eba5p+23, 0x1.6c6cbc45dc8dep+11,
                     0x1.39c6fd67805a7p+18, 0x1.9eb7148f354d6p+20, 0x1.b951f1572eba5p+29,
                     0x1.921fb54442d18p+0, 0x1.55202aefde314p+30, 0x1.67e57cdd4dc54p+15,
                     0x1.e1dcc9111b506p+27, 0x1.635e3d74befcap+14, 0x1.4456bdcf64b08p+24,
                     0x1.d3ecce1f28274p+22, 0x1.90c7199d42244p+27, 0x1.93c05c9ed3cbcp+18,
                     0x1.bf9b3c6059d24p+17, 0x1.5a4fbea3a16b6p+13, 0x1.a9adcc7f96cf0p+19})
      for (T sgn : {T(1), T(-1)}) g.v.push_back(sgn * static_cast<T>(x));
  }
  return g.v;
}

template <class T>
std::vector<T> tanh_inputs() {
  Gen<T> g;
  g.add(6000, [&] { return g.uni(-3, 3); });
  g.add(4000, [&] { return g.logu(is32<T> ? -30 : -60, 4.6); });
  g.add(3000, [&] { return g.uni(-25, 25); });
  g.add(1000, [&] { return g.bits_any(); });
  g.add(1000, [&] { return g.logu(is32<T> ? -14 : -29, is32<T> ? -12 : -27); });
  return g.v;
}

template <class T>
std::vector<T> atan_inputs() {
  Gen<T> g;
  g.add(6000, [&] { return g.uni(-5, 5); });
  g.add(4000, [&] { return g.logu(is32<T> ? -30 : -60, is32<T> ? 30 : 60); });
  g.add(3000, [&] { return g.bits_any(); });
  for (double t : {0.25, 0.7207592200561265, 1.387425886722793, 4.23606797749979, 1.0, 0.5, 2.0})
    g.around(static_cast<T>(t), 100);
  return g.v;
}

template <class T>
std::vector<std::pair<T, T>> atan2_inputs() {
  Gen<T> g;
  std::vector<std::pair<T, T>> v;
  auto add = [&](int n, const std::function<std::pair<T, T>()>& f) {
    for (int i = 0; i < n * scale(); ++i) v.push_back(f());
  };
  add(6000, [&] { return std::pair{g.uni(-5, 5), g.uni(-5, 5)}; });
  add(4000, [&] { return std::pair{g.logu(-30, 30), g.logu(-30, 30)}; });
  add(2000, [&] { return std::pair{g.bits_any(), g.bits_any()}; });
  // y/x near the reduction thresholds, x of both signs
  add(3000, [&] {
    T x = g.logu(-20, 20);
    static const double kT[] = {0.25, 0.7207592200561265, 1.387425886722793, 4.23606797749979, 1};
    T y = static_cast<T>(std::fabs(x) * kT[g.rng() % 5] * (1 + g.uni(-1e-3, 1e-3)));
    return std::pair{(g.rng() & 1) ? -y : y, x};
  });
  // results near +-pi: tiny y, negative x
  add(1000, [&] { return std::pair{g.logu(-40, 0), -std::fabs(g.logu(0, 10))}; });
  return v;
}

template <class T>
std::vector<std::pair<T, T>> pow_inputs() {
  Gen<T> g;
  std::vector<std::pair<T, T>> v;
  double wmax = is32<T> ? 88 : 709, wmin = is32<T> ? -103 : -744;
  auto with_w = [&](T x, double w) {  // y with y log|x| = w
    return std::pair{x, static_cast<T>(w / std::log(std::fabs(static_cast<double>(x))))};
  };
  auto add = [&](int n, const std::function<std::pair<T, T>()>& f) {
    for (int i = 0; i < n * scale(); ++i) v.push_back(f());
  };
  add(4000, [&] { return std::pair{std::fabs(g.logu(-20, 20)), g.uni(-10, 10)}; });
  // |x| in [0.5, 2] with large y: the hard case for the log's precision
  add(4000, [&] { return with_w(g.uni(0.5, 2), g.uni(wmin, wmax)); });
  add(3000, [&] { return with_w(std::fabs(g.logu(-120, 120)), g.uni(wmin, wmax)); });
  add(2000, [&] { return with_w(T(1) + g.logu(is32<T> ? -23 : -52, -5), g.uni(wmin, wmax)); });
  add(1500, [&] { return with_w(std::fabs(g.logu(-60, 60)), g.uni(wmax - 2, wmax + 1)); });
  add(1500, [&] { return with_w(std::fabs(g.logu(-60, 60)), g.uni(wmin, wmin + 40)); });
  // negative x with integer y
  add(2000, [&] {
    T x = -std::fabs(g.logu(-8, 8));
    T y = std::round(g.uni(-60, 60));
    return std::pair{x, y};
  });
  add(1000, [&] { return std::pair{std::fabs(g.bits_any()), g.uni(-3, 3)}; });
  std::vector<std::pair<T, T>> out;
  for (auto p : v)
    if (std::isfinite(p.first) && std::isfinite(p.second)) out.push_back(p);
  return out;
}

template <class T>
std::vector<T> exp2_inputs() {
  Gen<T> g;
  double hi = is32<T> ? 128 : 1024, lo = is32<T> ? -150 : -1075;
  g.add(5000, [&] { return g.uni(lo, hi); });
  g.add(3000, [&] { return g.uni(-1, 1); });
  g.add(2000, [&] { return g.logu(is32<T> ? -30 : -60, 0); });
  g.add(2000, [&] { return g.uni(hi - 1, hi + 0.5); });            // overflow edge
  g.add(2000, [&] { return g.uni(lo, is32<T> ? -125 : -1021); });  // subnormal results
  g.add(1000, [&] { return g.bits_any(); });
  for (int k = -4; k <= 4; ++k) g.around(static_cast<T>(k * 0.5), 20);  // reduction edges
  for (T k : {T(-149), T(-126), T(-1), T(1), T(10), T(127)}) g.around(k, 5);
  return g.v;
}

template <class T>
std::vector<T> log2_inputs() {
  Gen<T> g;
  g.add(5000, [&] { return std::fabs(g.bits_any()); });
  g.add(3000, [&] { return g.uni(0.5, 2); });
  g.add(3000, [&] { return T(1) + g.logu(is32<T> ? -24 : -53, -1); });  // near 1, both sides
  g.add(1000, [&] { return g.uni(0.70, 0.72); });
  g.add(1000, [&] { return std::fabs(g.logu(is32<T> ? -149 : -1074, is32<T> ? -126 : -1022)); });
  for (int e : {-1074, -1022, -149, -126, -60, -1, 1, 2, 30, 127, 1023})  // around powers of two
    if (!is32<T> || (e >= -149 && e <= 127)) g.around(std::ldexp(T(1), e), 30);
  std::vector<T> out;
  for (T x : g.v)
    if (std::isfinite(x) && x > 0) out.push_back(x);
  return out;
}

template <class T>
std::vector<T> sinh_inputs() {
  Gen<T> g;
  double hi = is32<T> ? 89.5 : 710.6;
  g.add(5000, [&] { return g.uni(-3, 3); });
  g.add(4000, [&] { return g.logu(is32<T> ? -30 : -60, 3); });
  g.add(3000, [&] { return g.uni(-hi, hi); });
  g.add(1000, [&] { return g.uni(hi - 2, hi); });  // overflow edge
  g.add(1000, [&] { return g.bits_any(); });
  g.add(1000, [&] { return g.logu(is32<T> ? -14 : -29, is32<T> ? -12 : -27); });
  for (double t : {12.0, 22.0}) {  // the switch to exp
    g.around(static_cast<T>(t), 50);
    g.around(static_cast<T>(-t), 50);
  }
  return g.v;
}

template <class T>
std::vector<T> asin_inputs() {
  Gen<T> g;
  g.add(6000, [&] { return g.uni(-1, 1); });
  g.add(3000, [&] { return g.logu(is32<T> ? -30 : -60, 0); });
  g.add(3000, [&] {  // near +-1
    T x = T(1) - std::fabs(g.logu(is32<T> ? -24 : -53, -2));
    return (g.rng() & 1) ? -x : x;
  });
  g.add(1000, [&] { return g.uni(0.45, 0.55); });
  g.add(1000, [&] { return g.uni(-0.55, -0.45); });
  g.add(500, [&] { return g.bits_any(); });
  for (T t : {T(0.5), T(-0.5), T(1), T(-1)}) g.around(t, 50);
  std::vector<T> out;
  for (T x : g.v)
    if (std::fabs(x) <= 1) out.push_back(x);
  return out;
}

template <class T>
std::vector<T> erf_inputs() {
  Gen<T> g;
  g.add(6000, [&] { return g.uni(-4, 4); });
  g.add(3000, [&] { return g.logu(is32<T> ? -30 : -60, 1); });
  g.add(3000, [&] { return g.uni(1, 6); });  // the tail
  g.add(1000, [&] { return g.uni(-6, -1); });
  g.add(1000, [&] { return g.logu(is32<T> ? -149 : -1074, is32<T> ? -120 : -1000); });  // tiny
  g.add(500, [&] { return g.bits_any(); });
  for (double t : {1.0, 1.5, 2.25, 3.5, 6.0}) g.around(static_cast<T>(t), 50);
  return g.v;
}

template <class T>
std::vector<T> erfc_inputs() {
  Gen<T> g;
  const double zero = is32<T> ? 10.1 : 27.3;  // erfc underflows to 0 beyond
  g.add(4000, [&] { return g.uni(-1, 1); });
  g.add(6000, [&] { return g.uni(0.5, zero); });               // the pieces of erfc(x) e^(x^2)
  g.add(1500, [&] { return g.uni(zero - 1.5, zero + 0.2); });  // subnormal results
  g.add(2000, [&] { return g.uni(-6, -0.5); });
  g.add(1000, [&] { return g.logu(is32<T> ? -30 : -60, 1); });
  g.add(500, [&] { return g.bits_any(); });
  for (double t : {0.5, 1.25, 2.25, 3.5, 5.0, 7.0, 10.0, 14.5, 20.5, 27.5})
    if (t < zero + 1) g.around(static_cast<T>(t), 50), g.around(static_cast<T>(-t), 20);
  return g.v;
}

template <class T>
std::vector<T> rsqrt_inputs() {
  Gen<T> g;
  g.add(6000, [&] { return g.uni(1, 4); });
  g.add(4000, [&] { return std::fabs(g.bits_any()); });
  g.add(1000, [&] { return std::fabs(g.logu(is32<T> ? -149 : -1074, is32<T> ? -126 : -1022)); });
  for (int e : {-6, -2, 0, 2, 6, 100}) g.around(static_cast<T>(std::ldexp(1.0, e)), 50);
  return g.v;
}

long double ref_exp(long double x) { return expl(x); }
long double ref_expm1(long double x) { return expm1l(x); }
long double ref_log(long double x) { return logl(x); }
long double ref_log1p(long double x) { return log1pl(x); }
long double ref_sin(long double x) { return sinl(x); }
long double ref_cos(long double x) { return cosl(x); }
long double ref_tan(long double x) { return tanl(x); }
long double ref_tanh(long double x) { return tanhl(x); }
long double ref_atan(long double x) { return atanl(x); }
long double ref_atan2(long double y, long double x) { return atan2l(y, x); }
long double ref_pow(long double x, long double y) { return powl(x, y); }
long double ref_exp2(long double x) { return exp2l(x); }
long double ref_log2(long double x) { return log2l(x); }
long double ref_sinh(long double x) { return sinhl(x); }
long double ref_cosh(long double x) { return coshl(x); }
long double ref_asin(long double x) { return asinl(x); }
long double ref_acos(long double x) { return acosl(x); }
long double ref_erf(long double x) { return erfl(x); }
long double ref_erfc(long double x) { return erfcl(x); }
long double ref_rsqrt(long double x) { return 1 / sqrtl(x); }

// Every function is held to the bound docs/numerics.md and the README document: under 1 ulp,
// float32 and float64 alike (the contract's, docs/semantics.md §5.3, is looser: 1 to 4 ulps).
constexpr double kDocumentedUlps = 1;

template <class T>
void accuracy_all() {
  check1<T>("exp", m::exp, ref_exp, exp_inputs<T>(), kDocumentedUlps);
  check1<T>("expm1", m::expm1, ref_expm1, expm1_inputs<T>(), kDocumentedUlps);
  check1<T>("log", m::log, ref_log, log_inputs<T>(false), kDocumentedUlps);
  check1<T>("log1p", m::log1p, ref_log1p, log_inputs<T>(true), kDocumentedUlps);
  auto tr = trig_inputs<T>();
  check1<T>("sin", m::sin, ref_sin, tr, kDocumentedUlps);
  check1<T>("cos", m::cos, ref_cos, tr, kDocumentedUlps);
  check1<T>("tan", m::tan, ref_tan, tr, kDocumentedUlps);
  check1<T>("tanh", m::tanh, ref_tanh, tanh_inputs<T>(), kDocumentedUlps);
  check1<T>("atan", m::atan, ref_atan, atan_inputs<T>(), kDocumentedUlps);
  check2<T>("atan2", m::atan2, ref_atan2, atan2_inputs<T>(), kDocumentedUlps);
  check2<T>("pow", m::pow, ref_pow, pow_inputs<T>(), kDocumentedUlps);
}

TEST(DecomposeMath, AccuracyFloat32) { accuracy_all<float>(); }
TEST(DecomposeMath, AccuracyFloat64) { accuracy_all<double>(); }

template <class T>
void accuracy_more() {
  check1<T>("exp2", m::exp2, ref_exp2, exp2_inputs<T>(), kDocumentedUlps);
  check1<T>("log2", m::log2, ref_log2, log2_inputs<T>(), kDocumentedUlps);
  auto sh = sinh_inputs<T>();
  check1<T>("sinh", m::sinh, ref_sinh, sh, kDocumentedUlps);
  check1<T>("cosh", m::cosh, ref_cosh, sh, kDocumentedUlps);
  auto as = asin_inputs<T>();
  check1<T>("asin", m::asin, ref_asin, as, kDocumentedUlps);
  check1<T>("acos", m::acos, ref_acos, as, kDocumentedUlps);
  check1<T>("erf", m::erf, ref_erf, erf_inputs<T>(), kDocumentedUlps);
  check1<T>("erfc", m::erfc, ref_erfc, erfc_inputs<T>(), kDocumentedUlps);
  // Correctly rounded (docs/numerics.md): half an ulp, plus a hair for the long double reference.
  check1<T>("rsqrt", m::rsqrt, ref_rsqrt, rsqrt_inputs<T>(), 0.501);
}

TEST(DecomposeMath, AccuracyMoreFloat32) { accuracy_more<float>(); }
TEST(DecomposeMath, AccuracyMoreFloat64) { accuracy_more<double>(); }

// float64 sin/cos/tan beyond the Cody-Waite range (the Payne-Hanek path, |x| >= 2^31), up to
// DBL_MAX. x86-64 glibc reduces long double arguments exactly, so sinl etc. remain valid
// references at any magnitude.
std::vector<double> huge_trig_inputs() {
  Gen<double> g;
  g.add(2000, [&] { return g.logu(29.9, 1023.99); });  // 1e9 .. DBL_MAX, random exponents
  g.add(1000, [&] {                                    // random bit patterns with |x| >= 2^30
    uint64_t r = g.rng();
    uint64_t ex = 1053 + (r >> 1) % (2047 - 1053);
    uint64_t u = (r & 0x800fffffffffffffull) | (ex << 52);
    double x;
    std::memcpy(&x, &u, 8);
    return x;
  });
  g.add(500, [&] { return g.logu(30.5, 32.5); });  // around the switch between the reductions
  g.around(0x1p31, 20);
  g.around(-0x1p31, 20);
  double mx = std::numeric_limits<double>::max();
  for (int i = 0; i < 20; ++i, mx = std::nextafter(mx, 0.0)) g.v.push_back(i & 1 ? mx : -mx);
  // The doubles closest to multiples of pi/2 for various exponents (best approximations from the
  // continued fraction of 2^e 2/pi mod 1, computed with mpmath): |x mod pi/2| from 2^-60.9 (the
  // worst case over all doubles, 6381956970095103 * 2^797) to 2^-52.6.
  for (double x : {0x1.6ac5b262ca1ffp+849,  0x1.66bd5424e5655p+90,  0x1.83009e2e9e2ebp+615,
                   0x1.4c96c11134d36p+579,  0x1.66bd5424e5655p+91,  0x1.e0664dbedfec5p+81,
                   0x1.1a209b98a791fp+69,   0x1.e109a7163f279p+962, 0x1.a93b216e8dfbcp+327,
                   0x1.d893a099137d3p+601,  0x1.2ddd2435024e2p+346, 0x1.0809c95f020f7p+277,
                   0x1.61a3db8c8d129p+1023, 0x1.b930d680374c2p+151, 0x1.7ca792e4bb049p+1001,
                   0x1.2722f5d698acep+178,  0x1.99caa5236feeap+78,  0x1.504cac51f1eafp+136,
                   0x1.0332fe835389ap+910,  0x1.b2196364d750bp+257, 0x1.0539b48d14c55p+185,
                   0x1.ac593e47e035bp+459,  0x1.69eab0985179bp+250, 0x1.3842c122fbc87p+550,
                   0x1.1c6cc29b3b153p+105,  0x1.47623428452f0p+119, 0x1.5cba89af1f855p+52,
                   0x1.4d58ea64be345p+437,  0x1.db41f3cb71d7bp+685, 0x1.cca7515e2585cp+167,
                   0x1.0a62858fe0e2ep+630,  0x1.1e47413bee7c2p+676, 0x1.065c829d68730p+42,
                   0x1.97e359bb79bb4p+673,  0x1.5403807969f02p+405, 0x1.ae30cc2e55861p+627}) {
    g.around(x, 3);
    g.around(-x, 3);
  }
  return g.v;
}

TEST(DecomposeMath, HugeArgumentsFloat64) {
  auto xs = huge_trig_inputs();
  check1<double>("sin", m::sin, ref_sin, xs, kDocumentedUlps);
  check1<double>("cos", m::cos, ref_cos, xs, kDocumentedUlps);
  check1<double>("tan", m::tan, ref_tan, xs, kDocumentedUlps);
}

// ---------------------------------------------------------------------------------------------
// C99 Annex F special values, compared bit-exactly (any NaN matches any NaN).

template <class T>
bool same(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
struct Special {
  T x, y, want;
};

template <class T>
void check_special1(const char* name, Fn1 fn, const std::vector<std::pair<T, T>>& cases) {
  Graph<T> g(fn);
  for (auto [x, want] : cases) {
    T got = g(x);
    EXPECT_TRUE(same(got, want)) << name << (is32<T> ? "f32" : "f64") << "(" << x << ") = " << got
                                 << ", want " << want;
  }
}

template <class T>
void check_special2(const char* name, Fn2 fn, const std::vector<Special<T>>& cases) {
  Graph<T> g(fn);
  for (auto [x, y, want] : cases) {
    T got = g(x, y);
    EXPECT_TRUE(same(got, want)) << name << (is32<T> ? "f32" : "f64") << "(" << x << ", " << y
                                 << ") = " << got << ", want " << want;
  }
}

template <class T>
void specials_all() {
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T den = std::numeric_limits<T>::denorm_min();
  const long double pi = 3.141592653589793238462643383279502884L;
  const T pi_ = static_cast<T>(pi), pio2 = static_cast<T>(pi / 2), pio4 = static_cast<T>(pi / 4);
  const T tpio4 = static_cast<T>(3 * pi / 4);
  const T big = is32<T> ? T(1000) : T(1e4);

  check_special1<T>("exp", m::exp,
                    {{-inf, 0},
                     {inf, inf},
                     {nan, nan},
                     {T(0), 1},
                     {-T(0), 1},
                     {big, inf},
                     {-big, 0},
                     {T(1e-30), 1}});
  check_special1<T>("expm1", m::expm1,
                    {{-inf, -1},
                     {inf, inf},
                     {nan, nan},
                     {T(0), T(0)},
                     {-T(0), -T(0)},
                     {big, inf},
                     {-big, -1},
                     {den, den},
                     {-den, -den}});
  check_special1<T>("log", m::log,
                    {{T(0), -inf},
                     {-T(0), -inf},
                     {T(-1), nan},
                     {-inf, nan},
                     {inf, inf},
                     {T(1), T(0)},
                     {nan, nan},
                     {-den, nan}});
  check_special1<T>("log1p", m::log1p,
                    {{T(0), T(0)},
                     {-T(0), -T(0)},
                     {T(-1), -inf},
                     {T(-2), nan},
                     {inf, inf},
                     {-inf, nan},
                     {nan, nan},
                     {den, den},
                     {-den, -den}});
  check_special1<T>("sin", m::sin,
                    {{T(0), T(0)},
                     {-T(0), -T(0)},
                     {inf, nan},
                     {-inf, nan},
                     {nan, nan},
                     {den, den},
                     {-den, -den}});
  check_special1<T>("cos", m::cos,
                    {{T(0), 1}, {-T(0), 1}, {inf, nan}, {-inf, nan}, {nan, nan}, {den, 1}});
  check_special1<T>("tan", m::tan,
                    {{T(0), T(0)},
                     {-T(0), -T(0)},
                     {inf, nan},
                     {-inf, nan},
                     {nan, nan},
                     {den, den},
                     {-den, -den}});
  check_special1<T>("tanh", m::tanh,
                    {{T(0), T(0)},
                     {-T(0), -T(0)},
                     {inf, 1},
                     {-inf, -1},
                     {nan, nan},
                     {big, 1},
                     {-big, -1},
                     {den, den},
                     {-den, -den}});
  check_special1<T>("atan", m::atan,
                    {{T(0), T(0)},
                     {-T(0), -T(0)},
                     {inf, pio2},
                     {-inf, -pio2},
                     {nan, nan},
                     {T(1), pio4},
                     {T(-1), -pio4},
                     {den, den}});

  const T z = 0, one = 1;
  check_special2<T>(
      "atan2", m::atan2,
      {{z, -z, pi_},       {-z, -z, -pi_},       {z, z, z},         {-z, z, -z},
       {z, -one, pi_},     {-z, -one, -pi_},     {z, one, z},       {-z, one, -z},
       {-one, z, -pio2},   {-one, -z, -pio2},    {one, z, pio2},    {one, -z, pio2},
       {one, -inf, pi_},   {-one, -inf, -pi_},   {one, inf, z},     {-one, inf, -z},
       {inf, one, pio2},   {-inf, one, -pio2},   {inf, -one, pio2}, {-inf, -one, -pio2},
       {inf, -inf, tpio4}, {-inf, -inf, -tpio4}, {inf, inf, pio4},  {-inf, inf, -pio4},
       {nan, one, nan},    {one, nan, nan},      {nan, nan, nan},   {z, nan, nan},
       {one, one, pio4},   {-one, -one, -tpio4}});

  const T half = 0.5, two = 2, three = 3, mhalf = -0.5;
  std::vector<Special<T>> pw;
  for (T x : {z, -z, one, -one, two, half, inf, -inf, nan})
    for (T y : {z, -z}) pw.push_back({x, y, one});  // pow(x, +-0) = 1
  for (T y : {z, two, -two, half, inf, -inf, nan, T(1e30)}) pw.push_back({one, y, one});
  pw.insert(pw.end(), {
                          {-one, inf, one},
                          {-one, -inf, one},
                          {z, -three, inf},
                          {-z, -three, -inf},  // pow(+-0, negative odd)
                          {z, -inf, inf},
                          {-z, -inf, inf},
                          {z, -two, inf},
                          {-z, -two, inf},
                          {-z, mhalf, inf},
                          {z, three, z},
                          {-z, three, -z},  // pow(+-0, positive odd)
                          {-z, two, z},
                          {-z, half, z},
                          {-z, inf, z},
                          {z, inf, z},
                          {half, -inf, inf},
                          {mhalf, -inf, inf},
                          {two, -inf, z},
                          {-two, -inf, z},
                          {half, inf, z},
                          {mhalf, inf, z},
                          {two, inf, inf},
                          {-two, inf, inf},
                          {-inf, -three, -z},
                          {-inf, -two, z},
                          {-inf, mhalf, z},
                          {-inf, three, -inf},
                          {-inf, two, inf},
                          {-inf, half, inf},
                          {inf, -two, z},
                          {inf, mhalf, z},
                          {inf, half, inf},
                          {inf, two, inf},
                          {-two, half, nan},
                          {mhalf, T(1.5), nan},
                          {T(-3), T(0.1), nan},
                          {nan, one, nan},
                          {two, nan, nan},
                          {nan, nan, nan},
                          {-one, nan, nan},
                          {-two, three, T(-8)},
                          {-two, -three, T(-0.125)},
                          {two, T(10), T(1024)},
                          {three, two, T(9)},
                          {T(10), T(7), T(1e7)},
                          {T(-10), T(5), T(-1e5)},
                          {-one, T(1e30), one},
                          {mhalf, T(1e30), z},
                          {T(-1.0000001), T(1e30), inf},
                          {T(10), T(400), inf},
                          {T(-10), T(401), -inf},
                          {T(10), T(-400), z},
                          {T(-10), T(-401), -z},
                          {two, is32<T> ? T(-149) : T(-1074), den},
                          {-two, is32<T> ? T(-149) : T(-1073), is32<T> ? -den : -2 * den},
                          {two, half, static_cast<T>(std::sqrt(2.0L))},
                          {T(4), half, two},
                          {T(0.25), mhalf, two},
                      });
  check_special2<T>("pow", m::pow, pw);

  const T mx = std::numeric_limits<T>::max();
  check_special1<T>("exp2", m::exp2,
                    {{-inf, 0},
                     {inf, inf},
                     {nan, nan},
                     {T(0), 1},
                     {-T(0), 1},
                     {T(1), 2},
                     {T(-1), half},
                     {T(10), T(1024)},
                     {is32<T> ? T(-149) : T(-1074), den},
                     {is32<T> ? T(128) : T(1024), inf},
                     {is32<T> ? T(-151) : T(-1076), 0},
                     {mx, inf},
                     {-mx, 0}});
  check_special1<T>("log2", m::log2,
                    {{T(0), -inf},
                     {-T(0), -inf},
                     {T(1), T(0)},
                     {T(2), T(1)},
                     {half, T(-1)},
                     {T(1024), T(10)},
                     {den, is32<T> ? T(-149) : T(-1074)},
                     {T(-1), nan},
                     {-den, nan},
                     {-inf, nan},
                     {inf, inf},
                     {nan, nan}});
  check_special1<T>("sinh", m::sinh,
                    {{T(0), T(0)},
                     {-T(0), -T(0)},
                     {inf, inf},
                     {-inf, -inf},
                     {nan, nan},
                     {den, den},
                     {-den, -den},
                     {big, inf},
                     {-big, -inf}});
  check_special1<T>("cosh", m::cosh,
                    {{T(0), 1},
                     {-T(0), 1},
                     {inf, inf},
                     {-inf, inf},
                     {nan, nan},
                     {den, 1},
                     {big, inf},
                     {-big, inf}});
  check_special1<T>("asin", m::asin,
                    {{T(0), T(0)},
                     {-T(0), -T(0)},
                     {one, pio2},
                     {-one, -pio2},
                     {T(1.0000001), nan},
                     {T(-2), nan},
                     {inf, nan},
                     {-inf, nan},
                     {nan, nan},
                     {den, den},
                     {-den, -den}});
  check_special1<T>("acos", m::acos,
                    {{one, T(0)},
                     {-one, pi_},
                     {T(0), pio2},
                     {-T(0), pio2},
                     {T(1.0000001), nan},
                     {T(-2), nan},
                     {inf, nan},
                     {-inf, nan},
                     {nan, nan}});
  check_special1<T>("erf", m::erf,
                    {{T(0), T(0)},
                     {-T(0), -T(0)},
                     {inf, one},
                     {-inf, -one},
                     {nan, nan},
                     {T(10), one},
                     {T(-10), -one},
                     {mx, one}});
  check_special1<T>("erfc", m::erfc,
                    {{T(0), one},
                     {-T(0), one},
                     {inf, T(0)},
                     {-inf, T(2)},
                     {nan, nan},
                     {T(30), T(0)},
                     {T(-30), T(2)},
                     {mx, T(0)},
                     {-mx, T(2)}});
  check_special1<T>("rsqrt", m::rsqrt,
                    {{T(0), inf},
                     {-T(0), -inf},
                     {inf, T(0)},
                     {-inf, nan},
                     {T(-1), nan},
                     {-den, nan},
                     {nan, nan},
                     {one, one},
                     {T(4), T(0.5)},
                     {T(0.25), T(2)}});
}

TEST(DecomposeMath, SpecialValuesFloat32) { specials_all<float>(); }
TEST(DecomposeMath, SpecialValuesFloat64) { specials_all<double>(); }

// Every decomposition uses only the exact primitives that all backends implement identically
// (Fma included: an IEEE fused multiply-add, rounded once, on every backend).
TEST(DecomposeMath, OnlyExactPrimitives) {
  using ir::Op;
  const std::set<Op> allowed = {Op::Add,   Op::Sub,   Op::Mul,   Op::Div,   Op::Sqrt,    Op::Neg,
                                Op::Abs,   Op::Floor, Op::Round, Op::Cast,  Op::Bitcast, Op::And,
                                Op::Or,    Op::Xor,   Op::Shl,   Op::Shr,   Op::CmpLt,   Op::CmpLe,
                                Op::CmpEq, Op::CmpNe, Op::Where, Op::IsNan, Op::Max,     Op::Min,
                                Op::Fma,   Op::Const, Op::Load};
  for (DType t : {DType::Float32, DType::Float64}) {
    NodeRef a = input(t, 0), b = input(t, 1);
    std::vector<std::pair<const char*, NodeRef>> roots = {
        {"exp", m::exp(a)},        {"expm1", m::expm1(a)}, {"log", m::log(a)},
        {"log1p", m::log1p(a)},    {"sin", m::sin(a)},     {"cos", m::cos(a)},
        {"tan", m::tan(a)},        {"tanh", m::tanh(a)},   {"atan", m::atan(a)},
        {"atan2", m::atan2(a, b)}, {"pow", m::pow(a, b)},  {"exp2", m::exp2(a)},
        {"log2", m::log2(a)},      {"sinh", m::sinh(a)},   {"cosh", m::cosh(a)},
        {"asin", m::asin(a)},      {"acos", m::acos(a)},   {"erf", m::erf(a)},
        {"erfc", m::erfc(a)},      {"rsqrt", m::rsqrt(a)}};
    for (auto [name, root] : roots) {
      auto nodes = ir::toposort({root});
      for (NodeRef n : nodes) {
        EXPECT_TRUE(allowed.count(n->op)) << name << " uses " << ir::op_name(n->op);
        EXPECT_TRUE(n->shape.empty()) << name;
        if (n->op == Op::Load) {
          EXPECT_TRUE(n == a || n == b) << name;
        }
      }
      EXPECT_EQ(root->dtype, t) << name;
      size_t ops = 0;  // what a kernel computes: nodes other than constants and the inputs
      for (NodeRef n : nodes) ops += n->op != Op::Const && n->op != Op::Load;
      std::printf("  %-6s %s: %zu nodes, %zu operations\n", name,
                  t == DType::Float32 ? "f32" : "f64", nodes.size(), ops);
    }
  }
}

// decompose (the pass every kernel goes through) leaves none of the primitives that renderers do
// not print: Rsqrt, Erfc, IsInf and IsFinite become exact primitives for every dtype (16-bit floats
// and integers included), with ir::apply's values (a renderer throws "must be decomposed first"
// on anything else).
TEST(DecomposeMath, DecomposeCoversTheNewPrimitives) {
  using ir::Op;
  const std::set<Op> printed = {Op::Add,   Op::Sub,   Op::Mul,   Op::Div,   Op::Sqrt,    Op::Neg,
                                Op::Abs,   Op::Floor, Op::Round, Op::Cast,  Op::Bitcast, Op::And,
                                Op::Or,    Op::Xor,   Op::Shl,   Op::Shr,   Op::CmpLt,   Op::CmpLe,
                                Op::CmpEq, Op::CmpNe, Op::Where, Op::IsNan, Op::Max,     Op::Min,
                                Op::Not,   Op::Fma,   Op::Const, Op::Load};
  const double kValues[] = {0.0,  -0.0, 1.0,  -1.0, 0.3,      4.0,       1e-40, 3e38,
                            -2.5, 7.0,  27.0, -6.5, INFINITY, -INFINITY, NAN};
  for (Op op : {Op::Rsqrt, Op::Erfc, Op::IsInf, Op::IsFinite}) {
    bool classify = op == Op::IsInf || op == Op::IsFinite;
    std::vector<DType> ts = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
    if (classify) ts.insert(ts.end(), {DType::Bool, DType::UInt8, DType::Int32, DType::Int64});
    for (DType t : ts) {
      std::string what = std::string(ir::op_name(op)) + " of " + std::string(ir::name(t));
      NodeRef a = input(t, 0);
      NodeRef root = codegen::decompose(ir::make(op, classify ? DType::Bool : t, {}, {a}));
      for (NodeRef n : ir::toposort({root}))
        EXPECT_TRUE(printed.count(n->op)) << what << " leaves " << ir::op_name(n->op);
      ASSERT_EQ(root->dtype, classify ? DType::Bool : t) << what;
      const ir::ScalarProgram program(root);
      for (double v : kValues) {
        Value x = ir::is_float(t)
                      ? Value::of_float(t, v)
                      : Value::of_int(t, std::isfinite(v) ? static_cast<int64_t>(v) : 1);
        Value got = program.run([&](NodeRef) { return x; });
        Value want = ir::apply(op, root->dtype, {x});
        bool nan = ir::is_float(got.dtype) && std::isnan(got.f) && std::isnan(want.f);
        if (!nan && op == Op::Erfc && t == DType::Float64) {  // std::erfc: not correctly rounded
          EXPECT_LE(std::fabs(got.f - want.f), 2e-16 * std::fabs(want.f)) << what << " at " << v;
          continue;
        }
        EXPECT_TRUE(nan || got.bits() == want.bits())
            << what << " at " << v << ": " << got.as_double() << ", want " << want.as_double();
      }
    }
  }
}

TEST(DecomposeMath, RejectsNonFloat) {
  NodeRef i = input(DType::Int32, 0);
  EXPECT_THROW(m::exp(i), std::logic_error);
  EXPECT_THROW(m::pow(input(DType::Float32, 0), input(DType::Float64, 1)), std::logic_error);
}

}  // namespace
