// Measuring rune's transcendentals against MPFR: the shared core of tools/ulp-report and
// tests/numerics.
//
// For each input, rune's result (computed eagerly on a large array, as users get it) is compared
// with the exact value computed by MPFR (correctly rounded to 128 bits for float64, to 64 bits for
// float32 and the 16-bit formats, so within 2^-40 ulp of the exact value):
//  * ulp error = |rune - exact| / ulp(exact), with the exact (unrounded) MPFR value and ulp(y) the
//    spacing of the dtype in y's binade (the subnormal spacing below the normal range, the top
//    binade's spacing above the largest finite value); an infinite rune result counts as
//    +-2^(emax+1), the value IEEE rounding treats it as, so a correct overflow costs < 1 ulp;
//  * special values (C99 Annex F): where the exact result is NaN, +-inf, +-0 or +-1 exactly, rune
//    must return exactly it (any NaN for NaN, the sign of a zero included); atan2 with a zero or
//    infinite operand must return the correctly rounded multiple of pi/4 (or the exact zero), and
//    asin(+-1) and atan(+-inf) the correctly rounded +-pi/2; rune returning NaN where the result is
//    a number is a failure too.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/nx.h"

namespace ulp {

// A floating-point format: precision p (with the implicit bit), the exponent of the smallest
// subnormal's ulp, and the largest exponent (the largest finite value is (2 - 2^(1-p)) 2^emax).
struct Format {
  const char* name;
  nx::DType dtype;
  int p;
  int emin_sub;
  int emax;
};
const Format& format_of(nx::DType t);
extern const Format kFloat16, kBFloat16, kFloat32, kFloat64;

enum class Fn {
  Exp,
  Log,
  Sin,
  Cos,
  Tan,
  Tanh,
  Pow,
  Atan2,
  Sigmoid,
  Exp2,
  Log2,
  Expm1,
  Log1p,
  Sinh,
  Cosh,
  Asin,
  Acos,
  Atan,
  Erf,
  Erfc,
  Rsqrt
};

struct Function {
  Fn id;
  const char* name;
  int arity;
  double bound32, bound64;  // the contract (docs/semantics.md §5.3); < 0: no bound (reported only)
  bool composite;           // built from other eager ops (sigmoid): no float16/bfloat16 bound
  // What docs/numerics.md and the README promise, which tests/numerics and ulp-report hold
  // rune to: under 1 ulp for every transcendental at every dtype (tighter than the contract);
  // sigmoid, a composition outside the contract, within the 2.3 / 1.8 ulp the page states.
  double doc32, doc64, doc16;
};
const std::vector<Function>& functions();
const Function* find_function(const std::string& name);
// The contract's bound for f at dtype t (float16/bfloat16: 1 ulp); < 0 when there is none.
double bound(const Function& f, nx::DType t);
// The documented bound for f at dtype t (docs/numerics.md); always >= 0.
double documented_bound(const Function& f, nx::DType t);

// A batch of inputs (y only for binary functions) with the region each came from.
struct Inputs {
  std::vector<double> x, y;
  std::vector<uint8_t> region;
  std::vector<std::string> region_names;
  size_t size() const { return x.size(); }
  uint8_t region_id(const std::string& name);  // adds the name when new
  void push(double a, uint8_t r) { x.push_back(a), region.push_back(r); }
  void push(double a, double b, uint8_t r) { x.push_back(a), y.push_back(b), region.push_back(r); }
};

// `n` pseudo-random inputs for f at dtype t (float32/float64), spread over the whole range:
// random bit patterns plus dense draws in the function's hard regions. Deterministic in seed;
// `part` selects an independent stream, so a large run can be generated in chunks.
Inputs random_inputs(const Function& f, const Format& t, size_t n, uint64_t seed,
                     uint64_t part = 0);
// Every special value (+-0, +-inf, NaN, subnormals, +-1, extremes, function-specific edges); for
// binary functions, their cross product.
Inputs special_inputs(const Function& f, const Format& t);
// float16/bfloat16: every bit pattern for unary functions; for binary ones, a grid of
// grid x grid random pairs plus sweeps of every pattern against a few fixed operands.
Inputs half_inputs(const Function& f, const Format& t, size_t grid, uint64_t seed,
                   bool sweeps = true);

// v rounded to the format (nearest, ties to even; +-inf on overflow).
double round_to(const Format& t, double v);
// v moved by j ulps in the format (float32 / float64), as nextafter j times.
double step(const Format& t, double v, int j);

// The exact value of one bit pattern of a 16-bit format, as a double, and back (v is rounded).
double half_value(const Format& t, uint16_t bits);
uint16_t half_bits(const Format& t, double v);

// rune's op for f on a (and b, binary functions only), through the current interpreter (eager,
// or traced inside rune::jit).
nx::Tensor apply(const Function& f, const nx::Tensor& a, const nx::Tensor& b = {});

// rune's results, evaluated eagerly on arrays of at most `chunk` elements.
std::vector<double> eval_rune(const Function& f, const Format& t, const Inputs& in,
                              size_t chunk = 1 << 20);

struct Sample {
  double x = 0, y = 0, got = 0, exact = 0, err = -1;
  std::string region, why;
};
struct RegionStats {
  int64_t n = 0, over = 0;
  double max = 0, sum = 0;
  Sample worst;
};
struct Stats {
  int64_t n = 0;             // inputs measured
  int64_t finite_n = 0;      // inputs with a finite error (the mean's denominator)
  int64_t over = 0;          // inputs beyond the bound
  int64_t special_n = 0;     // inputs subject to an exact (special-value) check
  int64_t special_fail = 0;  // of which failed
  int64_t zero_sign = 0;     // results rounding to zero with the other sign (not Annex F; noted)
  double max = 0, sum = 0;
  Sample worst;
  std::vector<Sample> failures;  // the first few special-value failures
  std::vector<std::pair<std::string, RegionStats>> regions;
  double seconds_rune = 0, seconds_mpfr = 0;
  double mean() const { return finite_n ? sum / finite_n : 0; }
  void merge(const Stats& o);
  RegionStats& region(const std::string& name);
};

// Compares rune's results `got` for `in` with MPFR on `threads` threads, adding to `s`. `bnd` is
// the bound used to count inputs over it (< 0: none).
void measure(const Function& f, const Format& t, const Inputs& in, const std::vector<double>& got,
             double bnd, int threads, Stats& s);

// eval_rune then measure, with timings.
void run(const Function& f, const Format& t, const Inputs& in, double bnd, int threads, Stats& s,
         size_t chunk = 1 << 20);

std::string hexf(double v);  // %a, or the shortest round-trip decimal for readability
std::string describe(const Function& f, const Sample& w);  // "x=..., y=...: rune ..., exact ..."

}  // namespace ulp
