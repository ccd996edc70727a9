// The accuracy contract of rune's transcendentals (docs/semantics.md §5), measured as
// tools/ulp-report does but smaller: for each function and dtype, 100,000 random inputs spread over
// the whole range (float32/float64) or every bit pattern (float16/bfloat16; pow and atan2 on a
// 256 x 256 grid) plus every special value, evaluated eagerly and compared with MPFR. Asserts the
// documented ulp bounds (docs/numerics.md: under 1 ulp; they are tighter than the contract's) and
// the exact C99 Annex F special values; then that rune::jit gives eager's bits on the same inputs,
// one op at a time and fused into one program.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tools/ulp-report/ulp_core.h"
#include "trace/rune.h"

namespace {

constexpr size_t kRandom = 100'000;
constexpr size_t kGrid = 256;
constexpr uint64_t kSeed = 20240229;

const ulp::Format* const kFormats[] = {&ulp::kFloat32, &ulp::kFloat64, &ulp::kFloat16,
                                       &ulp::kBFloat16};

struct Case {
  const ulp::Function* f;
  const ulp::Format* t;
};

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (const auto& f : ulp::functions())
    for (const auto* t : kFormats) v.push_back({&f, t});
  return v;
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  return std::string(i.param.f->name) + "_" + i.param.t->name;
}

// The inputs a case measures: random draws (or every pattern / a grid) and the special values.
ulp::Inputs inputs_for(const Case& c) {
  if (c.t->p < 24) return ulp::half_inputs(*c.f, *c.t, kGrid, kSeed, /*sweeps=*/false);
  ulp::Inputs in = ulp::random_inputs(*c.f, *c.t, kRandom, kSeed);
  ulp::Inputs sp = ulp::special_inputs(*c.f, *c.t);
  uint8_t r = in.region_id("specials");
  for (size_t i = 0; i < sp.size(); ++i) {
    if (c.f->arity == 2)
      in.push(sp.x[i], sp.y[i], r);
    else
      in.push(sp.x[i], r);
  }
  return in;
}

nx::Tensor tensor(const ulp::Format& t, const std::vector<double>& v) {
  return nx::create(t.dtype, {static_cast<int64_t>(v.size())}, v);
}

// The results' values as doubles, compared by bits (every value of the four formats converts
// exactly, so zeros keep their signs); any NaN equals any NaN, as in tests/test_util.h: LLVM treats
// a NaN's sign and payload as unspecified and may change them when it optimises a fused program.
std::vector<uint64_t> bits_of(const nx::Tensor& t) {
  std::vector<uint64_t> b;
  for (double v : nx::to_vector<double>(t))
    b.push_back(std::isnan(v) ? 0x7ff8000000000000ull : std::bit_cast<uint64_t>(v));
  return b;
}

// The measure itself: correctly rounded results cost at most half an ulp, one ulp off costs
// between 1/2 and 3/2 (so some cost at least 1), and a NaN for a number is a special-value failure.
TEST(Measure, SelfCheck) {
  const ulp::Function& f = *ulp::find_function("exp");
  const ulp::Format& t = ulp::kFloat32;
  ulp::Inputs in = ulp::random_inputs(f, t, 20'000, kSeed);
  std::vector<double> rounded, off, nan;
  for (double x : in.x) {
    double r = ulp::round_to(t, std::exp(x));  // double exp then one rounding: within 2^-28 ulp
    rounded.push_back(r);
    // One ulp towards zero (away from zero would cost 2.5 ulps just below a power of 2, where
    // the exact value's ulp is half the result's).
    off.push_back(std::isfinite(r) && r != 0 ? ulp::step(t, r, r > 0 ? -1 : 1) : r);
    nan.push_back(std::nan(""));
  }
  ulp::Stats a, b, c;
  ulp::measure(f, t, in, rounded, 2, 2, a);
  ulp::measure(f, t, in, off, 2, 2, b);
  ulp::measure(f, t, in, nan, 2, 2, c);
  EXPECT_LE(a.max, 0.5001) << ulp::describe(f, a.worst);
  EXPECT_EQ(a.special_fail, 0);
  EXPECT_GE(b.max, 1.0);
  EXPECT_LE(b.max, 1.5001) << ulp::describe(f, b.worst);
  EXPECT_GT(b.mean(), 0.5);
  EXPECT_EQ(b.over, 0);
  EXPECT_GT(c.special_fail, 0);
  EXPECT_GT(c.over, 0);
}

class Accuracy : public testing::TestWithParam<Case> {};

TEST_P(Accuracy, WithinBoundAndSpecialsExact) {
  const Case& c = GetParam();
  // The documented bound (docs/numerics.md, the README: under 1 ulp; sigmoid 2.3 / 1.8), which is
  // tighter than the contract's (docs/semantics.md §5.3) for every function.
  const double bnd = ulp::documented_bound(*c.f, c.t->dtype);
  ASSERT_GE(bnd, 0);
  const double contract = ulp::bound(*c.f, c.t->dtype);
  if (contract >= 0) {
    EXPECT_LE(bnd, contract);
  }
  ulp::Stats s;
  ulp::run(*c.f, *c.t, inputs_for(c), bnd, 2, s);
  std::ostringstream why;
  why << c.f->name << " " << c.t->name << ": max " << s.max << " ulp (bound " << bnd << "), mean "
      << s.mean() << ", " << s.over << " of " << s.n << " over; worst "
      << ulp::describe(*c.f, s.worst);
  for (const auto& [name, r] : s.regions)
    if (r.over)
      why << "\n  region " << name << ": " << r.over << " over, max " << r.max << ": "
          << ulp::describe(*c.f, r.worst);
  for (const auto& w : s.failures)
    why << "\n  special: " << w.why << ": " << ulp::describe(*c.f, w);
  EXPECT_EQ(s.over, 0) << why.str();
  // Every function's special values are exact, sigmoid's too (NaN -> NaN, +-inf -> 1 / 0).
  EXPECT_EQ(s.special_fail, 0) << why.str();
  EXPECT_GT(s.special_n, 0);
  RecordProperty("max_ulp", std::to_string(s.max));
}

INSTANTIATE_TEST_SUITE_P(Numerics, Accuracy, testing::ValuesIn(all_cases()), case_name);

// rune::jit runs the same decompositions as eager ops: the same bits, special values included.
class JitIdentity : public testing::TestWithParam<Case> {};

TEST_P(JitIdentity, EagerAndCompiledGiveTheSameBits) {
  const Case& c = GetParam();
  ulp::Inputs in = inputs_for(c);
  nx::Tensor a = tensor(*c.t, in.x), b = c.f->arity == 2 ? tensor(*c.t, in.y) : nx::Tensor{};
  const ulp::Function* f = c.f;
  std::vector<uint64_t> eager = bits_of(ulp::apply(*f, a, b)), compiled;
  if (f->arity == 2) {
    auto jf = rune::jit([f](nx::Tensor x, nx::Tensor y) { return ulp::apply(*f, x, y); });
    compiled = bits_of(jf(a, b));
  } else {
    auto jf = rune::jit([f](nx::Tensor x) { return ulp::apply(*f, x); });
    compiled = bits_of(jf(a));
  }
  ASSERT_EQ(eager.size(), compiled.size());
  size_t diff = 0, first = 0;
  for (size_t i = 0; i < eager.size(); ++i)
    if (eager[i] != compiled[i] && !diff++) first = i;
  EXPECT_EQ(diff, 0u) << c.f->name << " " << c.t->name << ": first difference at input "
                      << ulp::hexf(in.x[first])
                      << (f->arity == 2 ? ", " + ulp::hexf(in.y[first]) : "") << ": eager "
                      << ulp::hexf(std::bit_cast<double>(eager[first])) << ", jit "
                      << ulp::hexf(std::bit_cast<double>(compiled[first]));
}

INSTANTIATE_TEST_SUITE_P(Numerics, JitIdentity, testing::ValuesIn(all_cases()), case_name);

// All the functions fused into one compiled program, and chained through each other, still give
// eager's bits (+ - * are single IEEE roundings, never contracted).
class JitFused : public testing::TestWithParam<const ulp::Format*> {};

TEST_P(JitFused, OneProgramGivesEagerBits) {
  const ulp::Format& t = *GetParam();
  ulp::Inputs xs =
      ulp::random_inputs(*ulp::find_function("atan2"), t.p < 24 ? ulp::kFloat32 : t, 20'000, kSeed);
  for (auto* v : {&xs.x, &xs.y})
    for (double& e : *v) e = ulp::round_to(t, e);
  nx::Tensor a = tensor(t, xs.x), b = tensor(t, xs.y);
  auto all = [](nx::Tensor x, nx::Tensor y) {
    std::vector<nx::Tensor> r;
    for (const auto& f : ulp::functions()) r.push_back(ulp::apply(f, x, y));
    r.push_back(nx::tanh(nx::exp(nx::sin(x)) * nx::cos(y)) + nx::log(nx::abs(x) + 1.0) -
                nx::pow(nx::abs(y), nx::atan2(y, x)));
    return r;
  };
  std::vector<nx::Tensor> eager = all(a, b);
  std::vector<nx::Tensor> compiled = rune::jit(all)(a, b);
  ASSERT_EQ(eager.size(), compiled.size());
  for (size_t k = 0; k < eager.size(); ++k) {
    std::vector<uint64_t> e = bits_of(eager[k]), c = bits_of(compiled[k]);
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < e.size(); ++i)
      if (e[i] != c[i] && !diff++) first = i;
    std::string name = k < ulp::functions().size() ? ulp::functions()[k].name : "chain";
    EXPECT_EQ(diff, 0u) << name << " " << t.name << ": " << diff << " differences, first at ("
                        << ulp::hexf(xs.x[first]) << ", " << ulp::hexf(xs.y[first]) << "): eager "
                        << ulp::hexf(std::bit_cast<double>(e[first])) << ", jit "
                        << ulp::hexf(std::bit_cast<double>(c[first]));
  }
}

INSTANTIATE_TEST_SUITE_P(Numerics, JitFused, testing::ValuesIn(kFormats),
                         [](const testing::TestParamInfo<const ulp::Format*>& i) {
                           return std::string(i.param->name);
                         });

}  // namespace
