// Reductions against a reference that follows the documented association order exactly:
// blocks of 65536 consecutive elements of the reduction (C order over the reduced axes); inside a
// block, lane l (of 8) accumulates block_start + l, + 8, + 16, ... from the identity; lanes
// combine as q_l = p_l + p_{l+4}, s_l = q_l + q_{l+2}, s_0 + s_1; blocks combine left to right.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "test_util.h"
#include "trace/rune.h"

namespace {

using namespace rt;
using ir::Op;

constexpr size_t kBlock = 65536;

Value combine(Op op, const Value& a, const Value& b) { return ir::reduce_combine(op, a, b); }

// Association orders: the documented one, and two plausible others the tests must tell apart.
enum class Order { Documented, OtherLaneTree, BlocksRightToLeft };

// The documented association order, on values already of the accumulator dtype.
Value reduce_ordered(Op op, DType acc, const std::vector<Value>& xs,
                     Order order = Order::Documented) {
  size_t R = xs.size();
  size_t nblocks = R == 0 ? 1 : (R + kBlock - 1) / kBlock;
  std::vector<Value> partial;
  for (size_t b = 0; b < nblocks; ++b) {
    Value lane[8];
    for (auto& l : lane) l = ir::reduce_identity(op, acc);
    size_t lo = b * kBlock, hi = std::min(R, lo + kBlock);
    for (size_t r = lo; r < hi; ++r) lane[(r - lo) % 8] = combine(op, lane[(r - lo) % 8], xs[r]);
    Value q[4];
    for (int l = 0; l < 4; ++l) q[l] = combine(op, lane[l], lane[l + 4]);
    partial.push_back(order == Order::OtherLaneTree
                          ? combine(op, combine(op, q[0], q[1]), combine(op, q[2], q[3]))
                          : combine(op, combine(op, q[0], q[2]), combine(op, q[1], q[3])));
  }
  if (order == Order::BlocksRightToLeft) std::reverse(partial.begin(), partial.end());
  Value total = partial[0];
  for (size_t b = 1; b < partial.size(); ++b) total = combine(op, total, partial[b]);
  return total;
}

// Left-to-right accumulation, to show the data distinguishes the orders.
Value reduce_naive(Op op, DType acc, const std::vector<Value>& xs) {
  Value r = ir::reduce_identity(op, acc);
  for (const Value& x : xs) r = combine(op, r, x);
  return r;
}

// Groups x's values by output element: for each kept index (C order), the reduced values in C
// order over the reduced axes.
std::vector<std::vector<Value>> groups(const Shape& shape, const std::vector<Value>& vals,
                                       const std::vector<int>& axes) {
  int nd = static_cast<int>(shape.size());
  std::vector<bool> red(nd, false);
  for (int a : axes) red[a] = true;
  int64_t nout = 1, nred = 1;
  for (int d = 0; d < nd; ++d) (red[d] ? nred : nout) *= shape[d];
  std::vector<std::vector<Value>> g(nout, std::vector<Value>(nred));
  std::vector<int64_t> idx(nd, 0);
  for (size_t k = 0; k < vals.size(); ++k) {
    int64_t o = 0, r = 0;
    for (int d = 0; d < nd; ++d) {
      if (red[d]) {
        r = r * shape[d] + idx[d];
      } else {
        o = o * shape[d] + idx[d];
      }
    }
    g[o][r] = vals[k];
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return g;
}

std::vector<int> norm(const nx::Axes& axes, int nd) {
  std::vector<int> a;
  if (axes.empty())
    for (int d = 0; d < nd; ++d) a.push_back(d);
  for (int x : axes) a.push_back(x < 0 ? x + nd : x);
  std::sort(a.begin(), a.end());
  return a;
}

Shape out_shape(const Shape& s, const std::vector<int>& axes, bool keepdims) {
  Shape r;
  for (int d = 0; d < static_cast<int>(s.size()); ++d) {
    bool red = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!red)
      r.push_back(s[d]);
    else if (keepdims)
      r.push_back(1);
  }
  return r;
}

enum class R { Sum, Prod, Max, Min, Mean };
const char* rname(R r) {
  switch (r) {
    case R::Sum:
      return "sum";
    case R::Prod:
      return "prod";
    case R::Max:
      return "max";
    case R::Min:
      return "min";
    case R::Mean:
      return "mean";
  }
  return "?";
}

Tensor run(R r, const Tensor& x, const nx::Axes& axes, bool keepdims) {
  switch (r) {
    case R::Sum:
      return nx::sum(x, axes, keepdims);
    case R::Prod:
      return nx::prod(x, axes, keepdims);
    case R::Max:
      return nx::max(x, axes, keepdims);
    case R::Min:
      return nx::min(x, axes, keepdims);
    case R::Mean:
      return nx::mean(x, axes, keepdims);
  }
  throw std::logic_error("run");
}

// Sums and products of bool and integers below 64 bits accumulate in int64 (uint64 in uint64,
// docs/dtypes.md); 16-bit floats in float32, rounded
// once at the end. Means divide the sum (float64 for integers) by the count, in its dtype.
Value expect(R r, DType t, const std::vector<Value>& g) {
  auto accumulate = [&](Op op, DType in) {
    DType acc = in;
    if (in == nx::bool_ || (ir::is_int(in) && ir::itemsize(in) < 8)) acc = nx::int64;
    if (ir::is_half(in)) acc = nx::float32;
    std::vector<Value> xs;
    for (const Value& v : g) xs.push_back(ir::cast(ir::cast(v, in), acc));
    Value res = reduce_ordered(op, acc, xs);
    return ir::is_half(in) ? ir::cast(res, in) : res;
  };
  switch (r) {
    case R::Sum:
      return accumulate(Op::ReduceSum, t);
    case R::Prod:
      return accumulate(Op::ReduceProd, t);
    case R::Max:
      return reduce_ordered(Op::ReduceMax, t, g);
    case R::Min:
      return reduce_ordered(Op::ReduceMin, t, g);
    case R::Mean: {
      // 16-bit floats: the float32 sum divided at float32, rounded once (mean([65504, 65504])
      // in float16 is 65504, not inf).
      DType ft = ir::is_float(t) ? t : nx::float64;
      DType ct = ir::is_half(ft) ? nx::float32 : ft;
      std::vector<Value> xs;
      for (const Value& v : g) xs.push_back(ir::cast(ir::cast(v, ft), ct));
      Value s = reduce_ordered(Op::ReduceSum, ct, xs);
      return ir::cast(ir::apply(Op::Div, ct, {s, F(ct, static_cast<double>(g.size()))}), ft);
    }
  }
  throw std::logic_error("expect");
}

std::string axes_str(const nx::Axes& a) {
  std::string s = "{";
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + std::to_string(a[i]);
  return s + "}";
}

// Reduces x (logical values `vals`) and compares with the reference, keepdims on and off.
void check(R r, const Tensor& x, const std::vector<Value>& vals, const nx::Axes& axes,
           const std::string& what = "") {
  SCOPED_TRACE(std::string(rname(r)) + " of " + x.describe() + " " + what + " over " +
               axes_str(axes));
  auto ax = norm(axes, x.ndim());
  auto g = groups(x.shape(), vals, ax);
  std::vector<Value> want;
  for (const auto& grp : g) want.push_back(expect(r, x.dtype(), grp));
  for (bool keep : {false, true}) {
    SCOPED_TRACE(keep ? "keepdims" : "no keepdims");
    Tensor y;
    try {
      y = run(r, x, axes, keep);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw: " << e.what();
      continue;
    }
    EXPECT_EQ(y.shape(), out_shape(x.shape(), ax, keep));
    DType wt = expect(r, x.dtype(), {num(x.dtype(), 1)}).dtype;
    EXPECT_EQ(y.dtype(), wt);
    EXPECT_TRUE(match(y, want));
  }
}

// Test data: wide magnitudes for sums (so the order shows), moderate ones for products.
std::vector<Value> data(DType t, size_t n, uint64_t seed, bool for_prod = false) {
  Rng rng(seed);
  std::vector<Value> v;
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::Bool:
        v.push_back(I(t, rng.next() & 1));
        break;
      case DType::UInt8:
        v.push_back(I(t, rng.range(for_prod ? 1 : 0, for_prod ? 4 : 256)));
        break;
      case DType::Int32:
        v.push_back(I(t, for_prod ? rng.range(-3, 4) : rng.range(-2000000000, 2000000000)));
        break;
      case DType::Int64:
        v.push_back(I(t, for_prod ? rng.range(-5, 6) : static_cast<int64_t>(rng.next())));
        break;
      default: {
        int span = for_prod ? 2 : ir::is_half(t) ? 6 : 20;
        double m = 1 + rng.uniform();
        int e = static_cast<int>(rng.range(-span, span + 1));
        double sgn = (rng.next() & 1) ? -1 : 1;
        v.push_back(F(t, sgn * std::ldexp(m, e)));
      }
    }
  }
  return v;
}

const std::vector<nx::Axes> kSubsets = {{},     {0},       {1},  {2},    {0, 1},  {0, 2},
                                        {1, 2}, {0, 1, 2}, {-1}, {2, 0}, {-3, -2}};

TEST(Reduce, EveryAxisSubset) {
  Shape s = {2, 3, 5};
  for (R r : {R::Sum, R::Prod, R::Mean, R::Max, R::Min}) {
    for (DType t : {nx::int32, nx::float32, nx::float64}) {
      auto v = data(t, 30, 11, r == R::Prod);
      Tensor x = tensor(t, s, v);
      for (const auto& axes : kSubsets) check(r, x, v, axes);
    }
  }
}

TEST(Reduce, EveryDtype) {
  Shape s = {3, 20};
  for (DType t : kAllTypes) {
    for (R r : {R::Sum, R::Prod, R::Mean, R::Max, R::Min}) {
      auto v = data(t, 60, 5 + static_cast<int>(t), r == R::Prod);
      Tensor x = tensor(t, s, v);
      check(r, x, v, {});
      check(r, x, v, {1});
    }
  }
}

TEST(Reduce, NonContiguousInputs) {
  int64_t Rn = 6, C = 9;
  for (DType t : {nx::float32, nx::int64}) {
    auto v = data(t, Rn * C, 3);
    for (Layout l : {Layout::Transposed, Layout::Stepped, Layout::NegStep, Layout::Flipped}) {
      Tensor x = with_layout(t, Rn, C, v, l);
      for (const auto& axes : std::vector<nx::Axes>{{}, {0}, {1}}) {
        check(R::Sum, x, v, axes, layout_name(l));
        check(R::Max, x, v, axes, layout_name(l));
      }
    }
    // A broadcast input: the row repeated 4 times.
    auto row = data(t, C, 9);
    std::vector<Value> rep;
    for (int i = 0; i < 4; ++i) rep.insert(rep.end(), row.begin(), row.end());
    Tensor b = nx::broadcast_to(tensor(t, {1, C}, row), {4, C});
    for (const auto& axes : std::vector<nx::Axes>{{}, {0}, {1}})
      check(R::Sum, b, rep, axes, "bcast");
  }
}

// Column sums: the host reduces 16 adjacent outputs together (plan group:16), each with its own
// lanes and tree, as one vector loop per lane; reductions whose length is not a multiple of 8
// (tail elements), rows not a multiple of 16 (the rest one by one), and the README demo's
// [400, 64] bias gradient; and column sums large enough to be split across the thread pool,
// whose work ranges cut through groups (each output is still reduced once, in its group).
TEST(Reduce, ColumnSumsOfAdjacentOutputs) {
  struct Case {
    int64_t rows, cols;
  };
  for (DType t : {nx::float32, nx::float64})
    for (auto [rows, cols] : std::vector<Case>{{400, 64},
                                               {403, 64},
                                               {7, 16},
                                               {1, 16},
                                               {13, 35},
                                               {8, 48},
                                               {65, 17},
                                               {129, 100},
                                               {1000, 80},
                                               {2001, 37},
                                               {999, 200}}) {
      SCOPED_TRACE(dname(t) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      auto v = data(t, rows * cols, static_cast<uint64_t>(rows * 31 + cols));
      Tensor x = tensor(t, {rows, cols}, v);
      check(R::Sum, x, v, {0});
      check(R::Max, x, v, {0});
    }
}

TEST(Reduce, ZeroDimensional) {
  for (DType t : {nx::bool_, nx::int32, nx::float16, nx::float64}) {
    Value v = num(t, 3);
    Tensor x = tensor(t, {}, {v});
    for (R r : {R::Sum, R::Prod, R::Mean, R::Max, R::Min}) check(r, x, {v}, {});
    EXPECT_EQ(nx::to_vector<int64_t>(nx::argmax(x)), std::vector<int64_t>{0});
    EXPECT_EQ(nx::argmin(x, std::nullopt, true).shape(), Shape{});
  }
}

TEST(Reduce, Empty) {
  for (DType t : {nx::int32, nx::float32}) {
    Tensor e = tensor(t, {0}, std::vector<Value>{});
    Tensor s = nx::sum(e);
    EXPECT_EQ(s.shape(), Shape{});
    EXPECT_EQ(nx::to_vector<double>(s), std::vector<double>{0});
    EXPECT_EQ(nx::to_vector<double>(nx::prod(e)), std::vector<double>{1});
    EXPECT_FALSE(std::signbit(nx::to_vector<double>(s)[0]));
    EXPECT_THROW(nx::max(e), std::invalid_argument);
    EXPECT_THROW(nx::min(e), std::invalid_argument);
    EXPECT_THROW(nx::argmax(e), std::invalid_argument);
    EXPECT_THROW(nx::argmin(e), std::invalid_argument);
    Tensor e2 = tensor(t, {2, 0}, std::vector<Value>{});
    EXPECT_EQ(nx::sum(e2, {1}).shape(), (Shape{2}));
    EXPECT_EQ(nx::to_vector<double>(nx::sum(e2, {1})), (std::vector<double>{0, 0}));
    EXPECT_EQ(nx::to_vector<double>(nx::prod(e2, {1}, true)), (std::vector<double>{1, 1}));
    EXPECT_EQ(nx::prod(e2, {1}, true).shape(), (Shape{2, 1}));
    EXPECT_EQ(nx::sum(e2, {0}).shape(), (Shape{0}));
    EXPECT_EQ(nx::max(e2, {0}).shape(), (Shape{0}));  // reduces a non-empty axis
    EXPECT_THROW(nx::max(e2, {1}), std::invalid_argument);
    EXPECT_THROW(nx::max(e2), std::invalid_argument);
  }
  EXPECT_EQ(nx::sum(tensor(nx::int32, {0}, std::vector<Value>{})).dtype(), nx::int64);
  EXPECT_TRUE(
      std::isnan(nx::item<double>(nx::mean(tensor(nx::float64, {0}, std::vector<Value>{})))));
}

TEST(Reduce, NaNPropagates) {
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(dname(t));
    // A [3, 20] (the shape of EveryDtype, whose kernels this shares) with a NaN in row 1 and
    // infinities of both signs in row 2.
    auto v = data(t, 60, 17, true);
    v[27] = F(t, NAN);
    v[45] = F(t, INFINITY);
    v[52] = F(t, -INFINITY);
    Tensor x = tensor(t, {3, 20}, v);
    for (R r : {R::Sum, R::Prod, R::Mean, R::Max, R::Min}) {
      EXPECT_TRUE(std::isnan(nx::item<double>(run(r, x, {}, false)))) << rname(r);
      std::vector<double> rows = nx::to_vector<double>(run(r, x, {1}, false));
      EXPECT_TRUE(!std::isnan(rows[0]) && std::isnan(rows[1])) << rname(r);
      check(r, x, v, {});
      check(r, x, v, {1});
    }
    // inf + -inf is NaN; max / min of a row with both infinities are the infinities.
    EXPECT_TRUE(std::isnan(nx::to_vector<double>(nx::sum(x, {1}))[2]));
    EXPECT_EQ(nx::to_vector<double>(nx::max(x, {1}))[2], INFINITY);
    EXPECT_EQ(nx::to_vector<double>(nx::min(x, {1}))[2], -INFINITY);
    if (!ir::is_half(t)) {
      EXPECT_EQ(nx::item<int64_t>(nx::argmax(x)), 27);
      EXPECT_EQ(nx::item<int64_t>(nx::argmin(x)), 27);
      EXPECT_EQ(nx::to_vector<int64_t>(nx::argmax(x, 1))[1], 7);
      EXPECT_EQ(nx::to_vector<int64_t>(nx::argmin(x, 1))[2], 12);
    }
  }
}

TEST(Reduce, SignedZeros) {
  for (DType t : {nx::float32, nx::float64, nx::bfloat16}) {
    SCOPED_TRACE(dname(t));
    auto bit = [](const Tensor& y) { return std::signbit(nx::item<double>(y)); };
    Tensor a = tensor(t, {2}, {-0.0, 0.0}), b = tensor(t, {2}, {0.0, -0.0});
    EXPECT_FALSE(bit(nx::max(a)));
    EXPECT_FALSE(bit(nx::max(b)));
    EXPECT_TRUE(bit(nx::min(a)));
    EXPECT_TRUE(bit(nx::min(b)));
    // Lanes start from +0, so a sum of negative zeros is +0.
    EXPECT_FALSE(bit(nx::sum(tensor(t, {3}, {-0.0, -0.0, -0.0}))));
    // Products start from 1: -0 * 1 = -0.
    EXPECT_TRUE(bit(nx::prod(tensor(t, {2}, {-0.0, 1.0}))));
    EXPECT_EQ(nx::item<int64_t>(nx::argmax(a)), 0) << "-0 == +0: the first one wins";
  }
}

// Float max and min keep combine's result bit for bit where the host accumulates them keyed
// (codegen/lower/reduction_blocks.h, Lanes): the first NaN of each lane (distinct payloads, of
// both signs, in several lanes of a row), -0 below +0, infinities, and lanes that see nothing.
// The reductions cover one block per output, adjacent outputs grouped (columns), interleaved
// blocks (a long row) and a row kernel (x - max(x) under rune::jit). Compared by bit pattern,
// NaN payloads included, with the documented order's reference.
TEST(Reduce, MaxMinKeepEachLanesFirstNaNAndSignedZeros) {
  auto raw = [](const Tensor& y) { return nx::to_bytes(y); };
  auto raw_of = [](DType t, const std::vector<Value>& vals) {
    std::vector<uint8_t> out;
    for (const Value& v : vals) {
      uint64_t b = v.bits();
      const auto* p = reinterpret_cast<const uint8_t*>(&b);
      out.insert(out.end(), p, p + (t == nx::float64 ? 8 : 4));
    }
    return out;
  };
  for (DType t : {nx::float32, nx::float64}) {
    SCOPED_TRACE(dname(t));
    const bool d = t == nx::float64;
    auto nan = [&](bool negative, uint64_t payload) {
      uint64_t q = d ? 0x7ff8000000000000ULL : 0x7fc00000ULL;
      uint64_t sign = d ? 0x8000000000000000ULL : 0x80000000ULL;
      return bits(t, (negative ? sign : 0) | q | payload);
    };
    // [6, 300]: row 0 plain; row 1 NaNs in lanes 3 and 5 (the later lane's first); row 2 two
    // NaNs in lane 2 (the first wins) and a third in lane 6; row 3 signed zeros only; row 4
    // infinities; row 5 negative values and one negative NaN.
    const int64_t C = 300;
    std::vector<Value> v = data(t, 6 * C, 23);
    auto at = [&](int64_t row, int64_t col) -> Value& { return v[row * C + col]; };
    at(1, 3 + 8 * 20) = nan(false, 11), at(1, 5 + 8 * 2) = nan(true, 12);
    at(2, 2 + 8 * 30) = nan(false, 21), at(2, 2 + 8 * 31) = nan(false, 22);
    at(2, 6 + 8 * 1) = nan(true, 23);
    for (int64_t c = 0; c < C; ++c) at(3, c) = F(t, c % 3 ? -0.0 : 0.0);
    at(4, 17) = F(t, INFINITY), at(4, 18) = F(t, -INFINITY);
    for (int64_t c = 0; c < C; ++c) at(5, c) = F(t, -1.0 - c);
    at(5, 299) = nan(true, 51);
    Tensor x = tensor(t, {6, C}, v);
    for (R r : {R::Max, R::Min}) {
      const Op op = r == R::Max ? Op::ReduceMax : Op::ReduceMin;
      SCOPED_TRACE(rname(r));
      for (const nx::Axes& axes : {nx::Axes{1}, nx::Axes{0}, nx::Axes{}}) {
        std::vector<Value> want;
        for (const auto& grp : groups(x.shape(), v, norm(axes, 2)))
          want.push_back(reduce_ordered(op, t, grp));
        EXPECT_EQ(raw(run(r, x, axes, false)), raw_of(t, want)) << axes_str(axes);
      }
      // Columns of 24 adjacent outputs (grouped lanes).
      Tensor cols = nx::reshape(x, {75, 24});
      std::vector<Value> want;
      for (const auto& grp : groups({75, 24}, v, {0})) want.push_back(reduce_ordered(op, t, grp));
      EXPECT_EQ(raw(run(r, cols, {0}, false)), raw_of(t, want)) << "columns";
    }
    // A long row: several blocks of 65536, interleaved on the host; NaNs in blocks 1 and 2.
    std::vector<Value> long_v = data(t, 3 * kBlock + 77, 29);
    long_v[kBlock + 5] = nan(false, 61), long_v[2 * kBlock + 3] = nan(true, 62);
    Tensor long_x = tensor(t, {int64_t(long_v.size())}, long_v);
    EXPECT_EQ(raw(nx::max(long_x)), raw_of(t, {reduce_ordered(Op::ReduceMax, t, long_v)}));
    long_v[kBlock + 5] = long_v[2 * kBlock + 3] = F(t, -0.0);
    Tensor long_z = tensor(t, {int64_t(long_v.size())}, long_v);
    EXPECT_EQ(raw(nx::min(long_z)), raw_of(t, {reduce_ordered(Op::ReduceMin, t, long_v)}));
    // A row kernel: the maximum is its stage, x - max its body.
    auto shift = rune::jit([](const Tensor& a) { return a - nx::max(a, {1}, true); });
    std::vector<Value> want;
    auto g = groups(x.shape(), v, {1});
    for (int64_t row = 0; row < 6; ++row) {
      Value m = reduce_ordered(Op::ReduceMax, t, g[row]);
      for (int64_t c = 0; c < C; ++c) want.push_back(ir::apply(Op::Sub, t, {at(row, c), m}));
    }
    EXPECT_EQ(raw(shift(x)), raw_of(t, want)) << "x - max(x) as a row kernel";
  }
}

TEST(Reduce, HandValues) {
  Tensor x = tensor(nx::int32, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(nx::to_vector<int64_t>(nx::sum(x)), std::vector<int64_t>{21});
  EXPECT_EQ(nx::to_vector<int64_t>(nx::sum(x, {0})), (std::vector<int64_t>{5, 7, 9}));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::sum(x, {1}, true)), (std::vector<int64_t>{6, 15}));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::prod(x, {1})), (std::vector<int64_t>{6, 120}));
  EXPECT_EQ(nx::to_vector<double>(nx::mean(x, {0})), (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(nx::mean(x).dtype(), nx::float64);
  EXPECT_EQ(nx::to_vector<int64_t>(nx::max(x, {-1})), (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::min(x, {0})), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::argmax(x, 1)), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::argmin(x, 0, true)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(nx::argmin(x, 0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(nx::argmax(x, std::nullopt, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(nx::item<int64_t>(nx::argmax(x)), 5);
  // Sums of small integers do not wrap at their own width.
  Tensor u = tensor(nx::uint8, {3}, {200, 200, 200});
  EXPECT_EQ(nx::item<int64_t>(nx::sum(u)), 600);
  EXPECT_EQ(nx::sum(u).dtype(), nx::int64);
  Tensor b = tensor(nx::bool_, {4}, {1, 1, 0, 1});
  EXPECT_EQ(nx::item<int64_t>(nx::sum(b)), 3);
  EXPECT_EQ(nx::item<int64_t>(nx::sum(tensor(nx::int32, {2}, {INT32_MAX, INT32_MAX}))),
            2 * int64_t{INT32_MAX});
  // float16 sums accumulate in float32: 2048 + 1 + 1 + ... stays exact until the end.
  std::vector<Value> h(9, F(nx::float16, 1));
  h[0] = F(nx::float16, 2048);
  EXPECT_EQ(nx::item<double>(nx::sum(tensor(nx::float16, {9}, h))), 2056);
}

// argmax / argmin: the first index of the extreme (a NaN counts as the extreme).
void check_arg(const Tensor& x, const std::vector<Value>& vals, std::optional<int> axis) {
  SCOPED_TRACE(x.describe() + " axis " + (axis ? std::to_string(*axis) : "none"));
  std::vector<int> ax;
  if (axis)
    ax = {*axis < 0 ? *axis + x.ndim() : *axis};
  else
    for (int d = 0; d < x.ndim(); ++d) ax.push_back(d);
  auto g = groups(x.shape(), vals, ax);
  for (bool is_max : {true, false}) {
    std::vector<int64_t> want;
    for (const auto& grp : g) {
      Value m = reduce_ordered(is_max ? Op::ReduceMax : Op::ReduceMin, x.dtype(), grp);
      int64_t k = 0;
      while (!(is_nan(grp[k]) || ir::apply(Op::CmpEq, nx::bool_, {grp[k], m}).i)) ++k;
      want.push_back(k);
    }
    for (bool keep : {false, true}) {
      Tensor y = is_max ? nx::argmax(x, axis, keep) : nx::argmin(x, axis, keep);
      EXPECT_EQ(y.dtype(), nx::int64);
      Shape ws = axis ? out_shape(x.shape(), ax, keep) : keep ? Shape(x.ndim(), 1) : Shape{};
      EXPECT_EQ(y.shape(), ws);
      EXPECT_EQ(nx::to_vector<int64_t>(y), want) << (is_max ? "argmax" : "argmin");
    }
  }
}

TEST(Reduce, ArgMaxArgMin) {
  for (DType t : {nx::int32, nx::float32}) {
    // Few distinct values, so ties are common: the first index must win.
    Rng rng(21);
    std::vector<Value> v;
    for (int i = 0; i < 20; ++i) v.push_back(num(t, static_cast<double>(rng.range(-2, 3))));
    if (ir::is_float(t)) v[13] = F(t, NAN);
    Tensor x = tensor(t, {4, 5}, v);
    for (std::optional<int> a : {std::optional<int>{}, std::optional<int>{0}, std::optional<int>{1},
                                 std::optional<int>{-1}})
      check_arg(x, v, a);
    check_arg(with_layout(t, 4, 5, v, Layout::Transposed), v, 1);
  }
  // (float16 max / min reductions are slow to compile; EveryDtype and NaNPropagates cover them.)
  for (DType t : {nx::bool_, nx::uint8, nx::int64, nx::bfloat16, nx::float64}) {
    auto v = data(t, 12, 4);
    check_arg(tensor(t, {3, 4}, v), v, std::nullopt);
  }
}

// ---- long reductions: the multi-block path ----

TEST(ReduceLong, SumFloat1D) {
  for (DType t : {nx::float32, nx::float64}) {
    SCOPED_TRACE(dname(t));
    // The data must tell the documented order from other plausible ones: take the first seed
    // whose data does (deterministic). Lane l holds values around 2^(4l).
    std::vector<Value> v;
    Value want;
    auto distinguishes = [&] {
      return !same(want, reduce_naive(Op::ReduceSum, t, v)) &&
             !same(want, reduce_ordered(Op::ReduceSum, t, v, Order::OtherLaneTree)) &&
             !same(want, reduce_ordered(Op::ReduceSum, t, v, Order::BlocksRightToLeft));
    };
    uint64_t seed = 42;
    do {
      v = data(t, 200000, seed++);
      for (size_t i = 0; i < v.size(); ++i) v[i] = F(t, std::ldexp(v[i].f, 4 * (i % 8)));
      want = reduce_ordered(Op::ReduceSum, t, v);
    } while (!distinguishes() && seed < 142);
    ASSERT_TRUE(distinguishes());
    Tensor x = tensor(t, {200000}, v);
    EXPECT_TRUE(match(nx::sum(x), {want}));
    // The mean is that sum divided by n, in the dtype.
    EXPECT_TRUE(match(nx::mean(x), {ir::apply(Op::Div, t, {want, F(t, 200000)})}));
  }
}

TEST(ReduceLong, SumAlongEitherAxis) {
  for (DType t : {nx::float32, nx::float64}) {
    SCOPED_TRACE(dname(t));
    auto v = data(t, 300000, 7);
    Tensor x = tensor(t, {3, 100000}, v);
    check(R::Sum, x, v, {1});  // three reductions of 100000 (two blocks each)
    check(R::Sum, x, v, {0});  // 100000 reductions of 3
    Tensor y = tensor(t, {100000, 3}, v);
    check(R::Sum, y, v, {0});  // strided reductions of 100000
    Tensor z = tensor(t, {300, 1000}, v);
    check(R::Sum, z, v, {});  // both axes: one reduction of 300000 (five blocks)
    // A transposed view: reduction order follows the logical C order, not memory.
    check(R::Sum, with_layout(t, 300, 1000, v, Layout::Transposed), v, {}, "transposed");
  }
  // A long reduction of a strided slice (every other element of 400000).
  auto v = data(nx::float32, 400000, 8);
  std::vector<Value> even;
  for (size_t i = 0; i < v.size(); i += 2) even.push_back(v[i]);
  Tensor s = nx::slice(tensor(nx::float32, {400000}, v), {{0, 400000, 2}});
  check(R::Sum, s, even, {}, "stepped");
}

TEST(ReduceLong, ManyBlocksInterleaved) {
  // Enough blocks that the host reduces several per work item (codegen/plan.h, plan part
  // `blocks`: on 2 threads, 4 per item here): the full blocks of an item walked together, the
  // others one by one. Each block keeps its own lanes and tree: the documented order.
  for (DType t : {nx::float32, nx::float64}) {
    SCOPED_TRACE(dname(t));
    const int64_t n = 17 * 65536 + 5;  // 17 full blocks and a partial one
    auto v = data(t, n, 21);
    check(R::Sum, tensor(t, {n}, v), v, {});
    const int64_t m = 6 * 65536 + 3;  // three outputs of six full blocks and a partial one
    auto w = data(t, 3 * m, 22, true);
    Tensor x = tensor(t, {3, m}, w);
    check(R::Sum, x, w, {1});
    check(R::Prod, x, w, {1});
    check(R::Max, x, w, {1});
  }
}

TEST(ReduceLong, OtherOps) {
  auto v = data(nx::float64, 200000, 13, true);
  Tensor x = tensor(nx::float64, {200000}, v);
  check(R::Prod, x, v, {});
  check(R::Max, x, v, {});
  check(R::Min, x, v, {});
  // NaN in the last block propagates.
  auto w = v;
  w[199000] = F(nx::float64, NAN);
  EXPECT_TRUE(std::isnan(nx::item<double>(nx::max(tensor(nx::float64, {200000}, w)))));
  EXPECT_TRUE(std::isnan(nx::item<double>(nx::sum(tensor(nx::float64, {200000}, w)))));
  // argmax in the third block; the first of two equal maxima.
  std::vector<Value> a(200000, F(nx::float32, 1));
  a[150001] = F(nx::float32, 5);
  a[170000] = F(nx::float32, 5);
  a[70000] = F(nx::float32, -5);
  a[190000] = F(nx::float32, -5);
  Tensor ta = tensor(nx::float32, {200000}, a);
  EXPECT_EQ(nx::item<int64_t>(nx::argmax(ta)), 150001);
  EXPECT_EQ(nx::item<int64_t>(nx::argmin(ta)), 70000);
  // Integer sums over many blocks: exact in int64.
  Rng rng(3);
  std::vector<Value> b, i32;
  int64_t count = 0, total = 0;
  for (int i = 0; i < 200000; ++i) {
    bool bit = rng.next() & 1;
    count += bit;
    b.push_back(I(nx::bool_, bit));
    int64_t k = rng.range(-2000000000, 2000000000);
    total += k;
    i32.push_back(I(nx::int32, k));
  }
  EXPECT_EQ(nx::item<int64_t>(nx::sum(tensor(nx::bool_, {200000}, b))), count);
  EXPECT_EQ(nx::item<int64_t>(nx::sum(tensor(nx::int32, {200000}, i32))), total);
  check(R::Sum, tensor(nx::int32, {2, 100000}, i32), i32, {1});
}

}  // namespace

// ---- the values of rune issue 16, eager and compiled (tests/test_numpy_reference.cpp has more)
// ----

namespace {

using namespace rt;
using nx::Tensor;

// f(x) eagerly, after checking rune::jit gives the same bits.
template <class F>
std::vector<Value> eager_and_compiled(F f, const Tensor& x) {
  auto e = read(f(x));
  auto c = read(rune::jit([&](const Tensor& t) { return f(t); })(x));
  EXPECT_TRUE(match(c, e)) << "compiled differs from eager";
  return e;
}

TEST(Issue16, Float16MeanRoundsOnce) {
  Tensor x = tensor(nx::float16, {2}, {65504, 65504});
  auto m = eager_and_compiled([](const Tensor& t) { return nx::mean(t); }, x);
  EXPECT_TRUE(match(m, {F(nx::float16, 65504)}));
  Tensor y = tensor(nx::float16, {1, 2}, {65504, 65504});
  auto s = eager_and_compiled([](const Tensor& t) { return nx::logsumexp(t, {1}); }, y);
  EXPECT_TRUE(match(s, {F(nx::float16, 65504 + std::log(2.0))}));
}

TEST(Issue16, IntegerMatmulIsExactInt64) {
  Tensor a = tensor(nx::int32, {1, 2}, {2147483647, 2}), b = tensor(nx::int32, {2, 1}, {2, 3});
  Tensor r = nx::matmul(a, b);
  EXPECT_EQ(r.dtype(), nx::int64);
  EXPECT_TRUE(match(r, {I(nx::int64, 2147483647LL * 2 + 6)}));
  Tensor u = tensor(nx::uint8, {1, 2}, {255, 2}), v = tensor(nx::uint8, {2, 1}, {2, 3});
  EXPECT_TRUE(match(nx::matmul(u, v), {I(nx::int64, 516)}));
  auto c = rune::jit([](const Tensor& p, const Tensor& q) { return nx::matmul(p, q); })(u, v);
  EXPECT_TRUE(match(c, {I(nx::int64, 516)}));
  Tensor t = tensor(nx::bool_, {1, 2}, {1, 1}), f = tensor(nx::bool_, {2, 1}, {1, 1});
  Tensor bb = nx::matmul(t, f);
  EXPECT_EQ(bb.dtype(), nx::bool_);
  EXPECT_TRUE(match(bb, {I(nx::bool_, 1)}));
}

TEST(Issue16, LogsumexpWithInfinity) {
  Tensor x = tensor(nx::float32, {3}, {1, 2, INFINITY});
  auto l = eager_and_compiled([](const Tensor& t) { return nx::logsumexp(t); }, x);
  EXPECT_TRUE(match(l, {F(nx::float32, INFINITY)}));
  auto ls = eager_and_compiled([](const Tensor& t) { return nx::log_softmax(t); }, x);
  EXPECT_TRUE(
      match(ls, {F(nx::float32, -INFINITY), F(nx::float32, -INFINITY), F(nx::float32, NAN)}));
}

TEST(Issue16, EmptyAxesAndErrorsNameTheCaller) {
  Tensor e = nx::zeros(nx::float32, {2, 0});
  auto l = eager_and_compiled([](const Tensor& t) { return nx::logsumexp(t, {1}); }, e);
  EXPECT_TRUE(match(l, {F(nx::float32, -INFINITY), F(nx::float32, -INFINITY)}));
  EXPECT_EQ(nx::softmax(e).shape(), (nx::Shape{2, 0}));
  EXPECT_EQ(nx::log_softmax(e, 1).shape(), (nx::Shape{2, 0}));
  Tensor x = nx::zeros(nx::float32, {2, 3});
  EXPECT_EQ(error_of([&] { nx::logsumexp(x, {5}); }).rfind("nx::logsumexp: axis 5 out of range", 0),
            0u);
  EXPECT_EQ(error_of([&] {
              nx::stack({x, x}, -4);
            }).rfind("nx::stack: axis -4 out of range", 0),
            0u);
  // In range, stack still accepts every axis in [-ndim - 1, ndim].
  EXPECT_EQ(nx::stack({x, x}, -3).shape(), (nx::Shape{2, 2, 3}));
  EXPECT_EQ(nx::stack({x, x}, 2).shape(), (nx::Shape{2, 3, 2}));
}

}  // namespace
