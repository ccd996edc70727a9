// The columns of ir/ops.def's elementwise rows against what they claim, row by row, so a wrong
// column (or a row whose files were not all written) fails here:
// - nx / domain: every generated nx function runs and gives ir::apply's values (the same bits;
//   decomposed transcendentals within docs/numerics.md's bound on ordinary values), raises
//   require_float's message for a non-float operand of a Float row, and gives ir::apply's value
//   (the row's constant, computed without a kernel) for a predicate's non-float operand;
// - result: the dtype of the nx result, of ir::b's builders and of ir::apply;
// - lowering: a Decomposed row is no core op (codegen::is_core) and has a decomposition
//   (codegen::decompose_op) that legalize accepts; a Core row has none and legalize takes it;
// - derivative: rune::grad of every row with an expression matches a central finite difference
//   (float64, a few points in (0, 1)).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/core_ops.h"
#include "codegen/decompose.h"
#include "core/prim.h"
#include "ir/builder.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using namespace rt;
using ir::Op;
using Fn1 = Tensor (*)(const Tensor&);
using Fn2 = Tensor (*)(const Tensor&, const Tensor&);

struct Row {
  Op op;
  std::string nx;      // the nx column
  std::string domain;  // Float, Any, FloatOrFalse, FloatOrTrue, Hand
  int arity;
  Fn1 f1;  // the generated nx function (nullptr for Hand rows)
  Fn2 f2;
  bool decomposed;
  bool derivative;  // the derivative column is an expression (not `none`)
};

#define RUNE_FN_Float(f) &nx::f
#define RUNE_FN_Any(f) &nx::f
#define RUNE_FN_FloatOrFalse(f) &nx::f
#define RUNE_FN_FloatOrTrue(f) &nx::f
#define RUNE_FN_Hand(f) nullptr
#define X(name, arity, cat)
#define X_UNARY(name, fn, domain, result, lowering, derivative) \
  Row{Op::name,                                                 \
      #fn,                                                      \
      #domain,                                                  \
      1,                                                        \
      RUNE_FN_##domain(fn),                                     \
      nullptr,                                                  \
      #lowering == std::string("Decomposed"),                   \
      std::string_view(#derivative) != "none"},
#define X_BINARY(name, fn, domain, result, lowering) \
  Row{Op::name,                                      \
      #fn,                                           \
      #domain,                                       \
      2,                                             \
      nullptr,                                       \
      RUNE_FN_##domain(fn),                          \
      #lowering == std::string("Decomposed"),        \
      false},
const std::vector<Row> kRows = {
#include "ir/ops.def"
};
#undef X
#undef X_UNARY
#undef X_BINARY

std::vector<Value> values_of(DType t) {
  std::vector<Value> v;
  if (t == nx::bool_) return {I(t, 0), I(t, 1)};
  if (!ir::is_float(t)) return {I(t, 0), I(t, 3), I(t, -2), I(t, 7)};
  const double inf = INFINITY, nan = NAN;
  for (double d : {0.0, -0.0, inf, -inf, nan, 0.5, -0.75, 2.0, 0.3}) v.push_back(F(t, d));
  return v;
}

DType result_dtype(Op op, DType in) {
  return ir::op_result(op) == ir::OpResult::Bool ? nx::bool_ : in;
}

// The tolerance of a result: decomposed float results (polynomial approximations where
// ir::apply calls libm) within 4 ulps (docs/numerics.md's largest bound), zeros (signs included),
// infinities and NaN exactly; everything else the same bits.
uint64_t tolerance(const Row& r, const Value& want) {
  if (!r.decomposed || !ir::is_float(want.dtype)) return 0;
  if (std::isnan(want.f) || std::isinf(want.f) || want.f == 0) return 0;
  return 4;
}

TEST(OpTable, HasTheElementwiseRows) {
  // Every unary and binary primitive is a row with the columns (X_UNARY / X_BINARY).
  size_t n = 0;
  for (int i = 0; i <= static_cast<int>(Op::ShuffleIdx); ++i) {
    auto c = ir::op_category(static_cast<Op>(i));
    n += c == ir::OpCategory::Unary || c == ir::OpCategory::Binary;
  }
  EXPECT_EQ(kRows.size(), n);
  EXPECT_GE(kRows.size(), 40u);
  for (const Row& r : kRows) EXPECT_EQ(ir::op_arity(r.op), r.arity) << ir::op_name(r.op);
}

TEST(OpTable, FrontEndsGiveApplysValues) {
  int checked = 0;
  for (const Row& r : kRows) {
    if (r.domain == "Hand") continue;
    ++checked;
    for (DType t : {nx::float32, nx::float64, nx::int32, nx::bool_}) {
      std::string what = "nx::" + r.nx + " of " + dname(t);
      bool takes = ir::is_float(t) || r.domain != "Float";
      if (r.arity == 2 && t == nx::bool_) continue;  // bool arithmetic: test_elementwise
      auto xs = values_of(t);
      int64_t n = static_cast<int64_t>(xs.size());
      if (r.arity == 1) {
        Tensor x = tensor(t, {n}, xs);
        if (!takes) {
          EXPECT_EQ(error_of([&] { r.f1(x); }),
                    "nx::" + r.nx + ": expects a float tensor, got " + x.describe())
              << what;
          continue;
        }
        // A predicate's constant for non-floats is ir::apply's value too.
        std::vector<Value> want;
        for (const Value& v : xs) want.push_back(ir::apply(r.op, result_dtype(r.op, t), {v}));
        Tensor y = r.f1(x);
        ASSERT_EQ(y.dtype(), result_dtype(r.op, t)) << what;
        EXPECT_TRUE(match(
            y, want, [&](size_t k) { return what + " at " + show(xs[k]); },
            [&](size_t k) { return tolerance(r, want[k]); }))
            << what;
      } else {
        // Every pair of values: a as rows, b as columns.
        std::vector<Value> as, bs, want;
        for (const Value& a : xs)
          for (const Value& b : xs) {
            as.push_back(a);
            bs.push_back(b);
          }
        Tensor a = tensor(t, {n, n}, as), b = tensor(t, {n, n}, bs);
        if (!takes) {
          EXPECT_EQ(error_of([&] { r.f2(a, b); }),
                    "nx::" + r.nx + ": expects a float tensor, got " + a.describe())
              << what;
          continue;
        }
        for (size_t k = 0; k < as.size(); ++k)
          want.push_back(ir::apply(r.op, result_dtype(r.op, t), {as[k], bs[k]}));
        Tensor y = r.f2(a, b);
        ASSERT_EQ(y.dtype(), result_dtype(r.op, t)) << what;
        EXPECT_TRUE(match(
            y, want, [&](size_t k) { return what + " at " + show(as[k]) + ", " + show(bs[k]); },
            [&](size_t k) { return tolerance(r, want[k]); }))
            << what;
      }
    }
  }
  EXPECT_GE(checked, 30);
}

TEST(OpTable, ResultColumnIsTheBuildersDtype) {
  ir::NodeUse use;
  for (const Row& r : kRows) {
    if (ir::op_result(r.op) == ir::OpResult::Given) continue;
    for (DType t : {nx::float32, nx::int32}) {
      if (r.domain == "Float" && t == nx::int32) continue;
      if ((r.op == Op::Not || r.op == Op::Shl || r.op == Op::Shr) && ir::is_float(t)) continue;
      ir::NodeRef v = ir::make(Op::Var, t, {}, {}, int64_t{0});
      ir::NodeRef n = r.arity == 1 ? ir::b::unary(r.op, v) : ir::b::binary(r.op, v, v);
      EXPECT_EQ(n->dtype, result_dtype(r.op, t)) << ir::op_name(r.op) << " of " << dname(t);
    }
  }
}

TEST(OpTable, DecomposedRowsAreDecomposed) {
  ir::NodeUse use;
  int decomposed = 0;
  for (const Row& r : kRows) {
    for (DType t : {nx::float32, nx::float64}) {
      std::string what = std::string(ir::op_name(r.op)) + " of " + dname(t);
      std::vector<ir::NodeRef> src;
      for (int i = 0; i < r.arity; ++i) src.push_back(ir::make(Op::Var, t, {}, {}, int64_t{i}));
      ir::NodeRef n = ir::make(r.op, result_dtype(r.op, t), {}, src);
      ir::NodeRef d = codegen::decompose_op(r.op, src);
      if (r.decomposed) {
        ++decomposed;
        EXPECT_FALSE(codegen::is_core(n)) << what << ": a renderer prints it";
        ASSERT_NE(d, nullptr) << what << " has no decomposition";
        EXPECT_EQ(d->dtype, n->dtype) << what;
        EXPECT_THROW(codegen::legalize(n), std::logic_error) << what;
        EXPECT_NO_THROW(codegen::legalize(d)) << what;
      } else {
        EXPECT_EQ(d, nullptr) << what << " is decomposed but not marked so";
        if (r.domain != "Hand") {
          EXPECT_NO_THROW(codegen::legalize(codegen::decompose(n))) << what;
        }
      }
    }
  }
  EXPECT_GE(decomposed, 2 * 22);
}

TEST(OpTable, DerivativesMatchFiniteDifferences) {
  int checked = 0;
  const std::vector<double> points = {0.2, 0.45, 0.7};
  Tensor x = nx::create(nx::float64, {3}, points);
  Tensor w = nx::create(nx::float64, {3}, {1.0, -0.5, 2.0});
  for (const Row& r : kRows) {
    if (!r.derivative) continue;
    ++checked;
    Op op = r.op;
    auto f = [op](const Tensor& t) { return nx::detail::prim(op, t.dtype(), t.shape(), {t}); };
    auto loss = [&](const Tensor& t) { return nx::sum(f(t) * w); };
    auto g = nx::to_vector<double>(rune::grad(loss, x));
    for (size_t i = 0; i < points.size(); ++i) {
      double h = 1e-6;
      auto at = [&](double d) {
        auto v = points;
        v[i] += d;
        return nx::item<double>(loss(nx::create(nx::float64, {3}, v)));
      };
      double fd = (at(h) - at(-h)) / (2 * h);
      EXPECT_NEAR(g[i], fd, 1e-6 * std::max(1.0, std::fabs(fd)))
          << ir::op_name(op) << " at " << points[i];
    }
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
