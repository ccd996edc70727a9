// Every elementwise op against the scalar reference (ir::apply, bit-exact) or, for the
// transcendentals, against std:: math within a ulp tolerance; for every applicable dtype, on
// ordinary and special values, on empty and 0-d shapes and through non-contiguous views.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_util.h"
#include "trace/rune.h"

namespace {

using namespace rt;
using ir::Op;

// ---- input values per dtype ----

std::vector<Value> sample_values(DType t) {
  std::vector<Value> v;
  switch (t) {
    case DType::Bool:
      for (int b : {0, 1, 1, 0, 1}) v.push_back(I(t, b));
      return v;
    case DType::UInt8:
      for (int x : {0, 1, 2, 3, 7, 100, 127, 128, 200, 254, 255}) v.push_back(I(t, x));
      return v;
    case DType::Int32:
      for (int64_t x : {0, 1, -1, 2, -2, 3, -7, 7, 100, -100, 46341, 65536}) v.push_back(I(t, x));
      v.push_back(I(t, INT32_MIN));
      v.push_back(I(t, INT32_MIN + 1));
      v.push_back(I(t, INT32_MAX));
      return v;
    case DType::Int64:
      for (int64_t x : std::initializer_list<int64_t>{0, 1, -1, 2, -2, 3, -7, 7, 100, -100,
                                                      int64_t{1} << 32, 3037000500})
        v.push_back(I(t, x));
      v.push_back(I(t, INT64_MIN));
      v.push_back(I(t, INT64_MIN + 1));
      v.push_back(I(t, INT64_MAX));
      return v;
    // The integer dtypes of issue 18: small values, both ends of the range and the values next
    // to them, and the points where a product or a shift leaves the range.
    case DType::Int8:
      for (int x : {0, 1, -1, 2, -2, 3, -7, 7, 11, 100, -100, 127, -128, -127, 126})
        v.push_back(I(t, x));
      return v;
    case DType::Int16:
      for (int x : {0, 1, -1, 2, -2, 3, -7, 7, 100, -100, 181, 256, 32767, -32768, -32767})
        v.push_back(I(t, x));
      return v;
    case DType::UInt16:
      for (int x : {0, 1, 2, 3, 7, 100, 255, 256, 32767, 32768, 65534, 65535}) v.push_back(I(t, x));
      return v;
    case DType::UInt32:
      for (int64_t x : {0ll, 1ll, 2ll, 3ll, 7ll, 100ll, 65536ll, 2147483647ll, 2147483648ll,
                        4294967294ll, 4294967295ll})
        v.push_back(I(t, x));
      return v;
    case DType::UInt64:
      for (uint64_t x : {0ull, 1ull, 2ull, 3ull, 7ull, 100ull, 1ull << 32, 4294967296ull + 1,
                         0x7fffffffffffffffull, 0x8000000000000000ull, 0xfffffffffffffffeull,
                         0xffffffffffffffffull})
        v.push_back(I(t, static_cast<int64_t>(x)));
      return v;
    default:
      break;
  }
  // Floats: ordinary values, signed zeros, extremes, subnormals, infinities and NaN.
  for (double x : {0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 2.5, 3.0, -7.25, 100.0, 1e-3, 1.0 / 3, 0.1,
                   12345.678, -2.0})
    v.push_back(F(t, x));
  uint64_t max_bits = t == nx::float64   ? 0x7fefffffffffffffull
                      : t == nx::float32 ? 0x7f7fffffull
                      : t == nx::float16 ? 0x7bffull
                                         : 0x7f7full;
  uint64_t min_normal = t == nx::float64   ? 0x0010000000000000ull
                        : t == nx::float32 ? 0x00800000ull
                        : t == nx::float16 ? 0x0400ull
                                           : 0x0080ull;
  int w = static_cast<int>(ir::itemsize(t) * 8);
  v.push_back(bits(t, max_bits));
  v.push_back(bits(t, max_bits | (1ull << (w - 1))));
  v.push_back(bits(t, min_normal));
  v.push_back(bits(t, 1));  // the smallest subnormal
  v.push_back(F(t, INFINITY));
  v.push_back(F(t, -INFINITY));
  v.push_back(F(t, NAN));
  return v;
}

// Extra float values for casts to integers: out-of-range and rounding edges.
std::vector<Value> cast_values(DType t) {
  std::vector<Value> v = sample_values(t);
  if (!ir::is_float(t)) return v;
  for (double x : {-0.9,
                   0.9,
                   127.5,
                   128.0,
                   255.9,
                   256.0,
                   300.0,
                   -129.0,
                   2147483520.0,
                   2147483648.0,
                   -2147483904.0,
                   3e9,
                   -3e9,
                   9.2e18,
                   1e19,
                   -1e19,
                   65504.0,
                   1e5,
                   32767.5,
                   32768.0,
                   -32769.0,
                   65535.9,
                   65536.0,
                   4294967295.5,
                   4294967296.0,
                   1.8446744073709550e19,
                   1.8446744073709552e19,
                   9.2233720368547758e18})
    v.push_back(F(t, x));
  return v;
}

// ---- op table ----

Value A(Op op, DType out, std::vector<Value> a) { return ir::apply(op, out, a); }
Value as_bool(const Value& x) { return A(Op::CmpNe, nx::bool_, {x, num(x.dtype, 0)}); }

struct OpCase {
  std::string name;
  int arity;
  std::vector<DType> dtypes;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  // Exact reference (a composition of ir::apply) ...
  std::function<Value(const std::vector<Value>&)> ref;
  // ... or, for transcendentals, long double std:: math rounded to the dtype (within 0.5 ulp and a
  // hair of the exact value), within `ulps` for float32, `ulps64` for float64 and `ulps16` for the
  // 16-bit floats: 1, since rune is within 1 ulp of the exact value (docs/numerics.md; the bounds
  // of docs/semantics.md §5.3 are looser), and exact where an operand is a special value (+-0,
  // +-inf, NaN: C99 Annex F).
  std::function<double(double, double)> std_fn;
  uint64_t ulps = 0;
  uint64_t ulps64 = 0;
  uint64_t ulps16 = 1;  // float16 / bfloat16
  // float64 inputs of larger finite magnitude are left to a separate test (see HugeArguments).
  double max_abs64 = INFINITY;
  bool reduced_layouts = false;  // composed of several primitives
};

std::ostream& operator<<(std::ostream& os, const OpCase& c) { return os << c.name; }

OpCase unary(std::string name, std::vector<DType> ts, Tensor (*fn)(const Tensor&),
             std::function<Value(const Value&)> ref) {
  return {name, 1, ts, [fn](const std::vector<Tensor>& x) { return fn(x[0]); },
          [ref](const std::vector<Value>& a) { return ref(a[0]); }};
}
OpCase unary_prim(std::string name, std::vector<DType> ts, Tensor (*fn)(const Tensor&), Op op) {
  return unary(name, ts, fn, [op](const Value& x) { return A(op, x.dtype, {x}); });
}
OpCase binary(std::string name, std::vector<DType> ts, Tensor (*fn)(const Tensor&, const Tensor&),
              std::function<Value(const Value&, const Value&)> ref) {
  return {name, 2, ts, [fn](const std::vector<Tensor>& x) { return fn(x[0], x[1]); },
          [ref](const std::vector<Value>& a) { return ref(a[0], a[1]); }};
}
OpCase binary_prim(std::string name, std::vector<DType> ts,
                   Tensor (*fn)(const Tensor&, const Tensor&), Op op, bool to_bool = false) {
  return binary(name, ts, fn, [op, to_bool](const Value& a, const Value& b) {
    return A(op, to_bool ? nx::bool_ : a.dtype, {a, b});
  });
}
std::vector<OpCase> exact_ops() {
  const auto& all = kAllTypes;
  const auto& numeric = kNumTypes;
  const auto& fl = kFloatTypes;
  std::vector<OpCase> ops;
  // Binary arithmetic.
  ops.push_back(binary_prim("add", all, nx::add, Op::Add));
  ops.push_back(binary_prim("sub", numeric, nx::sub, Op::Sub));
  ops.push_back(binary_prim("mul", all, nx::mul, Op::Mul));
  ops.push_back(binary_prim("div", numeric, nx::div, Op::Div));
  ops.push_back(binary_prim("mod", numeric, nx::mod, Op::Mod));
  ops.push_back(binary_prim("maximum", all, nx::maximum, Op::Max));
  ops.push_back(binary_prim("minimum", all, nx::minimum, Op::Min));
  // Comparisons (greater is less with swapped operands).
  ops.push_back(binary_prim("less", all, nx::less, Op::CmpLt, true));
  ops.push_back(binary_prim("less_equal", all, nx::less_equal, Op::CmpLe, true));
  ops.push_back(binary("greater", all, nx::greater, [](const Value& a, const Value& b) {
    return A(Op::CmpLt, nx::bool_, {b, a});
  }));
  ops.push_back(binary("greater_equal", all, nx::greater_equal, [](const Value& a, const Value& b) {
    return A(Op::CmpLe, nx::bool_, {b, a});
  }));
  ops.push_back(binary_prim("equal", all, nx::equal, Op::CmpEq, true));
  ops.push_back(binary_prim("not_equal", all, nx::not_equal, Op::CmpNe, true));
  // Logical ops: operands are "!= 0" first.
  using Bin = Tensor (*)(const Tensor&, const Tensor&);
  using Logical = std::tuple<const char*, Bin, Op>;
  for (auto [n, fn, op] : {Logical{"logical_and", nx::logical_and, Op::And},
                           Logical{"logical_or", nx::logical_or, Op::Or},
                           Logical{"logical_xor", nx::logical_xor, Op::Xor}}) {
    Op o = op;
    ops.push_back(binary(n, all, fn, [o](const Value& a, const Value& b) {
      return A(o, nx::bool_, {as_bool(a), as_bool(b)});
    }));
    ops.back().reduced_layouts = true;
  }
  ops.push_back(unary("logical_not", all, nx::logical_not,
                      [](const Value& x) { return A(Op::Not, nx::bool_, {as_bool(x)}); }));
  ops.back().reduced_layouts = true;
  // Unary.
  ops.push_back(unary_prim("neg", numeric, nx::neg, Op::Neg));
  ops.push_back(unary_prim("abs", all, nx::abs, Op::Abs));
  ops.push_back(unary("sign", numeric, nx::sign, [](const Value& x) {
    DType t = x.dtype;
    Value zero = num(t, 0);
    Value gt = A(Op::CmpLt, nx::bool_, {zero, x});
    Value lt = A(Op::CmpLt, nx::bool_, {x, zero});
    Value inner = A(Op::Where, t, {lt, num(t, -1), x});
    return A(Op::Where, t, {gt, num(t, 1), inner});
  }));
  ops.back().reduced_layouts = true;
  ops.push_back(unary_prim("sqrt", fl, nx::sqrt, Op::Sqrt));
  // Correctly rounded (docs/numerics.md), so the same bits as ir::apply's exact value rounded.
  ops.push_back(unary_prim("rsqrt", fl, nx::rsqrt, Op::Rsqrt));
  ops.push_back(unary_prim("floor", numeric, nx::floor, Op::Floor));
  ops.push_back(unary_prim("ceil", numeric, nx::ceil, Op::Ceil));
  ops.push_back(unary_prim("round", numeric, nx::round, Op::Round));
  ops.push_back(unary("square", numeric, nx::square, [](const Value& x) {
    return A(Op::Mul, x.dtype, {x, x});
  }));
  ops.push_back(unary("reciprocal", fl, nx::reciprocal, [](const Value& x) {
    return A(Op::Div, x.dtype, {num(x.dtype, 1), x});
  }));
  ops.push_back(unary("relu", numeric, nx::relu, [](const Value& x) {
    return A(Op::Max, x.dtype, {x, num(x.dtype, 0)});
  }));
  ops.push_back(unary("isnan", all, nx::isnan, [](const Value& x) {
    return ir::is_float(x.dtype) ? A(Op::IsNan, nx::bool_, {x}) : I(nx::bool_, 0);
  }));
  ops.push_back(unary("isinf", all, nx::isinf, [](const Value& x) {
    return ir::is_float(x.dtype) ? A(Op::IsInf, nx::bool_, {x}) : I(nx::bool_, 0);
  }));
  ops.push_back(unary("isfinite", all, nx::isfinite, [](const Value& x) {
    return ir::is_float(x.dtype) ? A(Op::IsFinite, nx::bool_, {x}) : I(nx::bool_, 1);
  }));
  {
    OpCase c;
    c.name = "clip";
    c.arity = 1;
    c.dtypes = numeric;
    c.reduced_layouts = true;
    // Bounds inside every dtype's range (see ClipBoundsOutsideIntegerRange for the others).
    c.fn = [](const std::vector<Tensor>& x) { return nx::clip(x[0], 2, 100); };
    c.ref = [](const std::vector<Value>& a) {
      DType t = a[0].dtype;
      return A(Op::Min, t, {A(Op::Max, t, {a[0], num(t, 2)}), num(t, 100)});
    };
    ops.push_back(c);
  }
  return ops;
}

std::vector<OpCase> transcendental_ops() {
  auto u = [](std::string n, Tensor (*fn)(const Tensor&), double (*f)(double), uint64_t ulps,
              uint64_t ulps64) {
    OpCase c;
    c.name = n;
    c.arity = 1;
    c.dtypes = kFloatTypes;
    c.fn = [fn](const std::vector<Tensor>& x) { return fn(x[0]); };
    c.std_fn = [f](double a, double) { return f(a); };
    c.ulps = ulps;
    c.ulps64 = ulps64;
    return c;
  };
  std::vector<OpCase> ops;
  ops.push_back(u(
      "exp", nx::exp, [](double x) { return double(std::exp((long double)x)); }, 1, 1));
  ops.push_back(u(
      "log", nx::log, [](double x) { return double(std::log((long double)x)); }, 1, 1));
  ops.push_back(u(
      "sin", nx::sin, [](double x) { return double(std::sin((long double)x)); }, 1, 1));
  ops.push_back(u(
      "cos", nx::cos, [](double x) { return double(std::cos((long double)x)); }, 1, 1));
  ops.push_back(u(
      "tan", nx::tan, [](double x) { return double(std::tan((long double)x)); }, 1, 1));
  for (size_t k = ops.size() - 3; k < ops.size(); ++k) ops[k].max_abs64 = 1e9;
  ops.push_back(u(
      "tanh", nx::tanh, [](double x) { return double(std::tanh((long double)x)); }, 1, 1));
  ops.push_back(u(
      "erfc", nx::erfc, [](double x) { return double(std::erfc((long double)x)); }, 1, 1));
  // sigmoid, a composition: within 2.3 ulp (1.8 for the 16-bit floats) of the exact value
  // (docs/numerics.md), so within 2 of the rounded reference.
  ops.push_back(u(
      "sigmoid", nx::sigmoid, [](double x) { return double(1 / (1 + std::exp(-(long double)x))); },
      2, 2));
  ops.back().ulps16 = 2;
  OpCase p;
  p.name = "pow";
  p.arity = 2;
  p.dtypes = kFloatTypes;
  p.fn = [](const std::vector<Tensor>& x) { return nx::pow(x[0], x[1]); };
  p.std_fn = [](double a, double b) { return double(std::pow((long double)a, (long double)b)); };
  p.ulps = 1;
  p.ulps64 = 1;
  ops.push_back(p);
  OpCase t = p;
  t.name = "atan2";
  t.fn = [](const std::vector<Tensor>& x) { return nx::atan2(x[0], x[1]); };
  t.std_fn = [](double a, double b) { return double(std::atan2((long double)a, (long double)b)); };
  t.ulps = 1;
  t.ulps64 = 1;
  ops.push_back(t);
  return ops;
}

// ---- the checks ----

// The expected result for one element.
Value expect(const OpCase& op, const std::vector<Value>& a) {
  if (op.ref) return op.ref(a);
  DType t = a[0].dtype;
  double y = op.std_fn(a[0].as_double(), a.size() > 1 ? a[1].as_double() : 0.0);
  return F(t, y);
}

std::string describe_args(const std::vector<Value>& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + show(a[i]);
  return s + ")";
}

struct Case {
  std::vector<Tensor> inputs;
  std::vector<std::vector<Value>> grids;  // logical values of each input at the output shape
  Shape shape;
  std::string what;
};

void check_case(const OpCase& op, const Case& c) {
  SCOPED_TRACE(op.name + " on " + c.what);
  Tensor out;
  try {
    out = op.fn(c.inputs);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw: " << e.what();
    return;
  }
  size_t n = static_cast<size_t>(ir::numel(c.shape));
  std::vector<Value> want;
  std::vector<std::vector<Value>> args(n);
  for (size_t k = 0; k < n; ++k) {
    for (const auto& g : c.grids) args[k].push_back(g[k]);
    want.push_back(expect(op, args[k]));
  }
  std::vector<Value> probe;
  for (const auto& x : c.inputs) probe.push_back(num(x.dtype(), 1));
  ASSERT_EQ(out.shape(), c.shape);
  ASSERT_EQ(out.dtype(), expect(op, probe).dtype) << "result dtype";
  auto tolerance = [&](size_t k) -> uint64_t {
    if (op.ulps == 0) return 0;
    for (const Value& a : args[k])
      if (!std::isfinite(a.f) || a.f == 0) return 0;  // Annex F special values are exact
    DType t = args[k][0].dtype;
    if (ir::is_half(t)) return op.ulps16;
    return t == nx::float64 ? op.ulps64 : op.ulps;
  };
  EXPECT_TRUE(match(
      out, want, [&](size_t k) { return describe_args(args[k]); }, tolerance));
}

// Layout coverage. Every primitive op sees every layout on 8-, 32- and 64-bit dtypes; ops
// composed of several primitives, the transcendentals (whose concern is numerics) and the 16-bit
// floats (whose kernels are slow to compile, and whose loads are the same views) see a subset.
bool full_layouts(const OpCase& op, DType t) {
  return !op.reduced_layouts && op.ulps == 0 && !ir::is_half(t);
}

std::vector<Value> op_values(const OpCase& op, DType t) {
  std::vector<Value> v;
  for (const Value& x : sample_values(t))
    if (t != nx::float64 || !std::isfinite(x.f) || std::fabs(x.f) <= op.max_abs64) v.push_back(x);
  return v;
}

void check_unary(const OpCase& op, DType t) {
  SCOPED_TRACE("dtype " + dname(t));
  std::vector<Value> v = op_values(op, t);
  int64_t n = static_cast<int64_t>(v.size());
  // Logical [2, n]: the values, then reversed.
  std::vector<Value> grid = v;
  grid.insert(grid.end(), v.rbegin(), v.rend());
  std::vector<Layout> layouts = {Layout::Contig, Layout::NegStep};
  if (full_layouts(op, t))
    layouts = {Layout::Contig, Layout::Transposed, Layout::Stepped, Layout::NegStep,
               Layout::Flipped};
  for (Layout l : layouts)
    check_case(op, {{with_layout(t, 2, n, grid, l)}, {grid}, {2, n}, layout_name(l)});
  if (op.ulps == 0) {
    // Broadcast: a [1, n] row read as [3, n].
    std::vector<Value> rows;
    for (int i = 0; i < 3; ++i) rows.insert(rows.end(), v.begin(), v.end());
    check_case(op, {{nx::broadcast_to(tensor(t, {1, n}, v), {3, n})}, {rows}, {3, n}, "broadcast"});
  }
  // 0-d, every value.
  for (const Value& x : v) check_case(op, {{tensor(t, {}, {x})}, {{x}}, {}, "0-d " + show(x)});
  // Empty shapes.
  check_case(op, {{tensor(t, {0}, std::vector<Value>{})}, {{}}, {0}, "[0]"});
  check_case(op, {{tensor(t, {2, 0}, std::vector<Value>{})}, {{}}, {2, 0}, "[2, 0]"});
}

void check_binary(const OpCase& op, DType t) {
  SCOPED_TRACE("dtype " + dname(t));
  std::vector<Value> av = op_values(op, t), bv = av;
  int64_t R = static_cast<int64_t>(av.size()), C = static_cast<int64_t>(bv.size());
  // Every pair: A[i][j] = a[i], B[i][j] = b[j].
  std::vector<Value> ga, gb;
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) ga.push_back(av[i]), gb.push_back(bv[j]);
  auto L = [&](const std::vector<Value>& g, Layout l) { return with_layout(t, R, C, g, l); };
  std::vector<std::pair<Layout, Layout>> combos = {{Layout::Contig, Layout::Contig},
                                                   {Layout::Transposed, Layout::Stepped}};
  if (full_layouts(op, t)) combos.push_back({Layout::NegStep, Layout::Flipped});
  for (auto [la, lb] : combos)
    check_case(op, {{L(ga, la), L(gb, lb)},
                    {ga, gb},
                    {R, C},
                    std::string(layout_name(la)) + " with " + layout_name(lb)});
  if (full_layouts(op, t)) {
    // Broadcasting: a [R, 1] column through broadcast_to, b a [C] row broadcast by the op.
    check_case(op, {{nx::broadcast_to(tensor(t, {R, 1}, av), {R, C}), tensor(t, {C}, bv)},
                    {ga, gb},
                    {R, C},
                    "broadcast_to [R, 1] with implicit [C]"});
    // A 0-d operand on the left.
    std::vector<Value> s(ga.size(), av[2]);
    check_case(op, {{tensor(t, {}, {av[2]}), tensor(t, {R, C}, gb)},
                    {s, gb},
                    {R, C},
                    "0-d " + show(av[2]) + " with [R, C]"});
  } else {
    // Implicitly on both sides: [R, 1] with [1, C].
    check_case(op, {{tensor(t, {R, 1}, av), tensor(t, {1, C}, bv)},
                    {ga, gb},
                    {R, C},
                    "implicit [R, 1] with [1, C]"});
  }
  // A 0-d operand on the right (x op scalar).
  std::vector<Value> s(ga.size(), bv[2]);
  check_case(op, {{tensor(t, {R, C}, ga), tensor(t, {}, {bv[2]})},
                  {ga, s},
                  {R, C},
                  "[R, C] with 0-d " + show(bv[2])});
  // 0-d with 0-d, every pair.
  for (const Value& a : av)
    for (const Value& b : bv)
      check_case(op, {{tensor(t, {}, {a}), tensor(t, {}, {b})}, {{a}, {b}}, {}, "0-d pair"});
  // Empty shapes, also broadcast against each other.
  Tensor e0 = tensor(t, {0}, std::vector<Value>{});
  Tensor e20 = tensor(t, {2, 0}, std::vector<Value>{});
  Tensor e10 = tensor(t, {1, 0}, std::vector<Value>{});
  check_case(op, {{e0, e0}, {{}, {}}, {0}, "[0] with [0]"});
  check_case(op, {{e20, e0}, {{}, {}}, {2, 0}, "[2, 0] with [0]"});
  check_case(op, {{e10, e20}, {{}, {}}, {2, 0}, "[1, 0] with [2, 0]"});
  check_case(op, {{e20, tensor(t, {}, {av[1]})}, {{}, {}}, {2, 0}, "[2, 0] with 0-d"});
}

class Elementwise : public ::testing::TestWithParam<OpCase> {};

TEST_P(Elementwise, MatchesReference) {
  const OpCase& op = GetParam();
  for (DType t : op.dtypes) {
    if (op.arity == 1) {
      check_unary(op, t);
    } else {
      check_binary(op, t);
    }
  }
}

auto op_name = [](const ::testing::TestParamInfo<OpCase>& i) { return i.param.name; };
INSTANTIATE_TEST_SUITE_P(Exact, Elementwise, ::testing::ValuesIn(exact_ops()), op_name);
INSTANTIATE_TEST_SUITE_P(Transcendental, Elementwise, ::testing::ValuesIn(transcendental_ops()),
                         op_name);

// float64 sin/cos/tan of huge arguments: the contract (docs/semantics.md §5) bounds the error
// without a range; std:: reduces exactly. At least the results must be finite and in range.
TEST(HugeArguments, Float64Trigonometry) {
  std::vector<double> xs = {4e9,  -1e10,  123456789012.5, 1e15,
                            1e22, -1e100, 1e300,          1.7976931348623157e308};
  std::vector<Value> v;
  for (double x : xs) v.push_back(F(nx::float64, x));
  Tensor x = tensor(nx::float64, {static_cast<int64_t>(xs.size())}, v);
  using Trig = std::tuple<const char*, Tensor (*)(const Tensor&), double (*)(double)>;
  for (auto [name, fn, ref] : {Trig{"sin", nx::sin, [](double a) { return std::sin(a); }},
                               Trig{"cos", nx::cos, [](double a) { return std::cos(a); }},
                               Trig{"tan", nx::tan, [](double a) { return std::tan(a); }}}) {
    SCOPED_TRACE(name);
    std::vector<Value> got = read(fn(x)), want;
    for (double a : xs) want.push_back(F(nx::float64, ref(a)));
    for (size_t k = 0; k < xs.size(); ++k) {
      EXPECT_TRUE(std::isfinite(got[k].f)) << name << "(" << xs[k] << ") = " << got[k].f;
      if (std::string(name) != "tan") {
        EXPECT_LE(std::fabs(got[k].f), 1.0);
      }
    }
    EXPECT_TRUE(match(
        got, want, [&](size_t k) { return show(v[k]); }, [](size_t) { return uint64_t{2}; }));
  }
}

// ---- where: every dtype, mixed layouts, broadcast condition ----

TEST(Where, MatchesReference) {
  OpCase op{"where", 3, kAllTypes,
            [](const std::vector<Tensor>& x) { return nx::where(x[0], x[1], x[2]); },
            [](const std::vector<Value>& a) { return A(Op::Where, a[1].dtype, a); }};
  for (DType t : kAllTypes) {
    SCOPED_TRACE("dtype " + dname(t));
    std::vector<Value> v = sample_values(t);
    int64_t R = 4, C = static_cast<int64_t>(v.size());
    std::vector<Value> gc, ga, gb;
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) {
        gc.push_back(I(nx::bool_, (i + j) % 3 == 0));
        ga.push_back(v[j]);
        gb.push_back(v[(j + i + 1) % C]);
      }
    auto L = [&](DType d, const std::vector<Value>& g, Layout l) {
      return with_layout(d, R, C, g, l);
    };
    check_case(
        op, {{L(nx::bool_, gc, Layout::Contig), L(t, ga, Layout::Contig), L(t, gb, Layout::Contig)},
             {gc, ga, gb},
             {R, C},
             "contiguous"});
    check_case(op, {{L(nx::bool_, gc, Layout::Stepped), L(t, ga, Layout::Transposed),
                     L(t, gb, Layout::NegStep)},
                    {gc, ga, gb},
                    {R, C},
                    "stepped, transposed, negative step"});
    // A [R, 1] condition, a [C] row and a 0-d value, broadcast together.
    std::vector<Value> col, gcol, g0;
    for (int64_t i = 0; i < R; ++i) col.push_back(I(nx::bool_, i % 2));
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) gcol.push_back(col[i]), g0.push_back(v[1]);
    check_case(op, {{tensor(nx::bool_, {R, 1}, col), tensor(t, {C}, v), tensor(t, {}, {v[1]})},
                    {gcol, ga, g0},
                    {R, C},
                    "broadcast [R, 1], [C], 0-d"});
    check_case(op, {{tensor(nx::bool_, {}, {I(nx::bool_, 1)}), tensor(t, {}, {v[2]}),
                     tensor(t, {}, {v[3]})},
                    {{I(nx::bool_, 1)}, {v[2]}, {v[3]}},
                    {},
                    "0-d"});
    check_case(op, {{tensor(nx::bool_, {2, 0}, std::vector<Value>{}),
                     tensor(t, {0}, std::vector<Value>{}), tensor(t, {}, {v[1]})},
                    {{}, {}, {}},
                    {2, 0},
                    "empty"});
  }
}

// ---- cast: every pair of dtypes ----

class Cast : public ::testing::TestWithParam<DType> {};

TEST_P(Cast, MatchesReference) {
  DType from = GetParam();
  std::vector<Value> v = cast_values(from);
  int64_t n = static_cast<int64_t>(v.size());
  std::vector<Value> grid = v;
  grid.insert(grid.end(), v.rbegin(), v.rend());
  for (DType to : kAllTypes) {
    OpCase op{"cast to " + dname(to),
              1,
              {from},
              [to](const std::vector<Tensor>& x) { return nx::cast(x[0], to); },
              [to](const std::vector<Value>& a) { return ir::cast(a[0], to); }};
    SCOPED_TRACE("from " + dname(from));
    for (Layout l : {Layout::Contig, Layout::NegStep})
      check_case(op, {{with_layout(from, 2, n, grid, l)}, {grid}, {2, n}, layout_name(l)});
    for (const Value& x : v) check_case(op, {{tensor(from, {}, {x})}, {{x}}, {}, "0-d"});
    check_case(op, {{tensor(from, {2, 0}, std::vector<Value>{})}, {{}}, {2, 0}, "[2, 0]"});
  }
}

INSTANTIATE_TEST_SUITE_P(From, Cast, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<DType>& i) { return dname(i.param); });

// ---- large inputs: the work is split across threads, mid-row ----

TEST(Large, ThreadedNonContiguous) {
  int64_t R = 301, C = 1003;  // 301903 elements: above the threading threshold
  Rng rng(99);
  for (DType t : {nx::float32, nx::int64}) {
    SCOPED_TRACE(dname(t));
    std::vector<Value> ga, gb;
    for (int64_t k = 0; k < R * C; ++k) {
      ga.push_back(num(t, static_cast<double>(rng.range(-1000, 1000)) / 8));
      gb.push_back(num(t, static_cast<double>(rng.range(-1000, 1000)) / 8));
    }
    OpCase op = binary_prim("mul", {t}, nx::mul, Op::Mul);
    check_case(op, {{with_layout(t, R, C, ga, Layout::Transposed),
                     with_layout(t, R, C, gb, Layout::NegStep)},
                    {ga, gb},
                    {R, C},
                    "transposed with negative step"});
    OpCase sub = binary_prim("sub", {t}, nx::sub, Op::Sub);
    check_case(sub, {{with_layout(t, R, C, ga, Layout::Stepped), tensor(t, {R, C}, gb)},
                     {ga, gb},
                     {R, C},
                     "stepped with contiguous"});
  }
}

// Trailing axes of length 1 are dropped from the host's loops (codegen/lower/elementwise.cpp loop_shape):
// an op over [n, 1] (a value per row, as keepdims gives) must give the bits of the same op over
// [n], with a broadcast operand, on ranges the pool splits (301,001 tanh) and on partial rows.
TEST(TrailingUnitAxes, GiveTheBitsOfTheFlatShape) {
  for (Shape shape : std::vector<Shape>{
           {400, 1}, {37, 1, 1}, {1, 1}, {5, 3, 1}, {2, 1, 3, 1}, {301001, 1}, {7, 2, 1}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    SCOPED_TRACE(testing::PrintToString(shape));
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i % 1001) - 500) / 37.0f;
    Tensor flat = nx::create(nx::float32, {n}, std::vector<double>(v.begin(), v.end()));
    Tensor shaped = nx::reshape(flat, shape);
    Tensor c = nx::create(nx::float32, {1}, {0.75});
    auto f = [&](const Tensor& x) { return nx::tanh(x) * c + nx::log(nx::abs(x) + 1.0); };
    std::vector<float> want = nx::to_vector<float>(f(flat));
    EXPECT_EQ(nx::to_vector<float>(f(shaped)), want);
    auto jf = rune::jit([&](const Tensor& x) { return f(x); });
    EXPECT_EQ(nx::to_vector<float>(jf(shaped)), want);
  }
}

// ---- hand-computed values: guard the reference itself ----

std::vector<double> f64(const Tensor& x) { return nx::to_vector<double>(x); }
std::vector<int64_t> i64(const Tensor& x) { return nx::to_vector<int64_t>(x); }

TEST(HandValues, IntegerDivisionAndModulo) {
  Tensor a = tensor(nx::int32, {6}, {7, -7, 7, -7, 5, INT32_MIN});
  Tensor b = tensor(nx::int32, {6}, {2, 2, -2, -2, 0, -1});
  EXPECT_EQ(i64(nx::div(a, b)), (std::vector<int64_t>{3, -4, -4, 3, 0, INT32_MIN}));
  EXPECT_EQ(i64(nx::mod(a, b)), (std::vector<int64_t>{1, 1, -1, -1, 0, 0}));
  Tensor c = tensor(nx::int64, {3}, {-9, 9, 0});
  Tensor z = tensor(nx::int64, {3}, {0, 0, 0});
  EXPECT_EQ(i64(nx::div(c, z)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(i64(nx::mod(c, z)), (std::vector<int64_t>{0, 0, 0}));
  Tensor u = tensor(nx::uint8, {3}, {200, 7, 9});
  Tensor w = tensor(nx::uint8, {3}, {7, 0, 4});
  EXPECT_EQ(i64(nx::div(u, w)), (std::vector<int64_t>{28, 0, 2}));
  EXPECT_EQ(i64(nx::mod(u, w)), (std::vector<int64_t>{4, 0, 1}));
}

TEST(HandValues, FloatModuloTakesTheDivisorsSign) {
  Tensor a = tensor(nx::float64, {5}, {5.5, -5.5, 5.5, -5.5, 4.0});
  Tensor b = tensor(nx::float64, {5}, {2.0, 2.0, -2.0, -2.0, -2.0});
  auto r = f64(nx::mod(a, b));
  EXPECT_EQ(r[0], 1.5);
  EXPECT_EQ(r[1], 0.5);
  EXPECT_EQ(r[2], -0.5);
  EXPECT_EQ(r[3], -1.5);
  EXPECT_EQ(r[4], 0.0);
  EXPECT_TRUE(std::signbit(r[4])) << "a zero remainder takes the divisor's sign";
}

TEST(HandValues, WrappingIntegerArithmetic) {
  Tensor a = tensor(nx::int32, {3}, {INT32_MAX, INT32_MIN, 46341});
  EXPECT_EQ(i64(nx::add(a, tensor(nx::int32, {3}, {1, -1, 0}))),
            (std::vector<int64_t>{INT32_MIN, INT32_MAX, 46341}));
  EXPECT_EQ(i64(nx::neg(a)), (std::vector<int64_t>{-INT32_MAX, INT32_MIN, -46341}));
  EXPECT_EQ(i64(nx::abs(a)), (std::vector<int64_t>{INT32_MAX, INT32_MIN, 46341}));
  EXPECT_EQ(i64(nx::square(a))[2], static_cast<int32_t>(uint32_t{46341} * 46341u));
  Tensor u = tensor(nx::uint8, {2}, {250, 3});
  EXPECT_EQ(i64(nx::add(u, tensor(nx::uint8, {2}, {10, 0}))), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(i64(nx::neg(u)), (std::vector<int64_t>{6, 253}));
  EXPECT_EQ(i64(nx::sub(tensor(nx::uint8, {1}, {1}), tensor(nx::uint8, {1}, {2}))),
            (std::vector<int64_t>{255}));
}

TEST(HandValues, RoundHalfToEvenAndFloorCeil) {
  Tensor x = tensor(nx::float64, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, -0.2});
  EXPECT_EQ(f64(nx::round(x)), (std::vector<double>{0, 2, 2, -0.0, -2, -2, 2, -0.0}));
  EXPECT_TRUE(std::signbit(f64(nx::round(x))[3]));
  EXPECT_EQ(f64(nx::floor(x)), (std::vector<double>{0, 1, 2, -1, -2, -3, 2, -1}));
  EXPECT_EQ(f64(nx::ceil(x)), (std::vector<double>{1, 2, 3, -0.0, -1, -2, 3, -0.0}));
  EXPECT_TRUE(std::signbit(f64(nx::ceil(x))[7]));
  Tensor h = tensor(nx::float16, {3}, {2.5, 3.5, -4.5});
  EXPECT_EQ(f64(nx::round(h)), (std::vector<double>{2, 4, -4}));
}

TEST(HandValues, MaximumMinimumNaNAndSignedZero) {
  Tensor a = tensor(nx::float32, {4}, {-0.0, 0.0, NAN, 1.0});
  Tensor b = tensor(nx::float32, {4}, {0.0, -0.0, 1.0, NAN});
  auto mx = f64(nx::maximum(a, b)), mn = f64(nx::minimum(a, b));
  EXPECT_EQ(mx[0], 0.0);
  EXPECT_FALSE(std::signbit(mx[0]));
  EXPECT_FALSE(std::signbit(mx[1]));
  EXPECT_TRUE(std::signbit(mn[0]));
  EXPECT_TRUE(std::signbit(mn[1]));
  EXPECT_TRUE(std::isnan(mx[2]) && std::isnan(mx[3]) && std::isnan(mn[2]) && std::isnan(mn[3]));
  auto r = f64(nx::relu(tensor(nx::float64, {4}, {-0.0, -3.0, 2.0, NAN})));
  EXPECT_FALSE(std::signbit(r[0]));
  EXPECT_EQ(r[1], 0.0);
  EXPECT_EQ(r[2], 2.0);
  EXPECT_TRUE(std::isnan(r[3]));
}

TEST(HandValues, ComparisonsWithNaN) {
  Tensor a = tensor(nx::float64, {3}, {NAN, 1.0, NAN});
  Tensor b = tensor(nx::float64, {3}, {1.0, NAN, NAN});
  EXPECT_EQ(nx::to_vector<bool>(nx::less(a, b)), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(nx::to_vector<bool>(nx::greater_equal(a, b)), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(nx::to_vector<bool>(nx::equal(a, b)), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(nx::to_vector<bool>(nx::not_equal(a, b)), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(nx::to_vector<bool>(nx::isnan(a)), (std::vector<bool>{true, false, true}));
  // NaN is "true" (non-zero) for the logical ops, -0 is false.
  Tensor c = tensor(nx::float64, {3}, {NAN, -0.0, 2.0});
  EXPECT_EQ(nx::to_vector<bool>(nx::logical_not(c)), (std::vector<bool>{false, true, false}));
}

TEST(HandValues, SignAndClip) {
  auto s = f64(nx::sign(tensor(nx::float64, {5}, {-3.0, -0.0, 0.0, 7.0, NAN})));
  EXPECT_EQ(s[0], -1);
  EXPECT_TRUE(s[1] == 0 && std::signbit(s[1]));
  EXPECT_TRUE(s[2] == 0 && !std::signbit(s[2]));
  EXPECT_EQ(s[3], 1);
  EXPECT_TRUE(std::isnan(s[4]));
  EXPECT_EQ(i64(nx::sign(tensor(nx::int64, {3}, {INT64_MIN, 0, 5}))),
            (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(f64(nx::clip(tensor(nx::float32, {4}, {-5, 0.5, 9, 3}), -1, 2)),
            (std::vector<double>{-1, 0.5, 2, 2}));
}

// Bool addition is a logical or (numpy: True + True == True), as ir::apply defines it.
TEST(HandValues, BoolAddIsLogicalOr) {
  Tensor t = tensor(nx::bool_, {4}, {1, 1, 0, 0});
  Tensor u = tensor(nx::bool_, {4}, {1, 0, 1, 0});
  EXPECT_EQ(nx::to_vector<bool>(nx::add(t, u)), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(nx::to_vector<bool>(nx::mul(t, u)), (std::vector<bool>{true, false, false, false}));
}

// Clip bounds outside an integer dtype's range must act as "no bound", not wrap around.
TEST(HandValues, ClipBoundsOutsideIntegerRange) {
  EXPECT_EQ(i64(nx::clip(tensor(nx::uint8, {3}, {0, 5, 200}), -1, 10)),
            (std::vector<int64_t>{0, 5, 10}));
  EXPECT_EQ(i64(nx::clip(tensor(nx::int32, {3}, {-5, 5, INT32_MAX}), -1e10, 3)),
            (std::vector<int64_t>{-5, 3, 3}));
}

TEST(HandValues, HalfPrecisionRoundsOncePerOp) {
  // 2049 is not a float16: 2048 + 1 rounds to even (2048); 2048 + 3 rounds to 2052.
  Tensor a = tensor(nx::float16, {2}, {2048, 2048});
  Tensor b = tensor(nx::float16, {2}, {1, 3});
  EXPECT_EQ(f64(nx::add(a, b)), (std::vector<double>{2048, 2052}));
  // bfloat16 keeps 8 significant bits: 256 + 1 -> 256, 256 + 3 -> 260.
  Tensor c = tensor(nx::bfloat16, {2}, {256, 256});
  EXPECT_EQ(f64(nx::add(c, tensor(nx::bfloat16, {2}, {1, 3}))), (std::vector<double>{256, 260}));
  EXPECT_TRUE(std::isinf(
      f64(nx::mul(tensor(nx::float16, {1}, {300}), tensor(nx::float16, {1}, {300})))[0]));
}

TEST(HandValues, CastEdges) {
  Tensor f = tensor(nx::float64, {8}, {NAN, INFINITY, -INFINITY, 3e9, -3e9, -0.9, 255.9, 1e19});
  EXPECT_EQ(i64(nx::cast(f, nx::int32)), (std::vector<int64_t>{0, INT32_MAX, INT32_MIN, INT32_MAX,
                                                               INT32_MIN, 0, 255, INT32_MAX}));
  EXPECT_EQ(i64(nx::cast(f, nx::uint8)), (std::vector<int64_t>{0, 255, 0, 255, 0, 0, 255, 255}));
  EXPECT_EQ(i64(nx::cast(f, nx::int64)), (std::vector<int64_t>{0, INT64_MAX, INT64_MIN, 3000000000,
                                                               -3000000000, 0, 255, INT64_MAX}));
  EXPECT_EQ(nx::to_vector<bool>(nx::cast(f, nx::bool_)),
            (std::vector<bool>{true, true, true, true, true, true, true, true}));
  EXPECT_EQ(i64(nx::cast(tensor(nx::int64, {3}, {300, -1, 256}), nx::uint8)),
            (std::vector<int64_t>{44, 255, 0}));
  // float64 -> float16 rounds once (not through float32): 1 + 2^-11 + 2^-40 rounds up.
  double x = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(f64(nx::cast(tensor(nx::float64, {1}, {x}), nx::float16))[0], 1 + std::ldexp(1.0, -10));
  EXPECT_EQ(f64(nx::cast(tensor(nx::float64, {1}, {70000.0}), nx::float16))[0], INFINITY);
}

TEST(HandValues, Operators) {
  Tensor x = tensor(nx::float64, {3}, {1, 2, 3});
  EXPECT_EQ(f64(x * 2.0 + 1.0), (std::vector<double>{3, 5, 7}));
  EXPECT_EQ(f64(1.0 - x / 2.0), (std::vector<double>{0.5, 0, -0.5}));
  EXPECT_EQ(f64(-x), (std::vector<double>{-1, -2, -3}));
  EXPECT_EQ(f64(x * x - x), (std::vector<double>{0, 2, 6}));
  EXPECT_EQ(nx::to_vector<bool>((x > 1.5) && !(x >= 3.0)), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(nx::to_vector<bool>((x < 1.5) || (x <= 2.0)), (std::vector<bool>{true, true, false}));
}

// Scalars are weakly typed (docs/semantics.md §1.3): a floating-point scalar never truncates, an
// integral one keeps the tensor's dtype and raises (naming the op and the value) outside its range.
TEST(HandValues, WeakScalars) {
  Tensor i = tensor(nx::int32, {4}, {-1, 0, 1, 3});
  Tensor prod = i * 2.5;
  EXPECT_EQ(prod.dtype(), nx::float32);
  EXPECT_EQ(f64(prod), (std::vector<double>{-2.5, 0, 2.5, 7.5}));
  EXPECT_EQ(nx::to_vector<bool>(i < 0.1), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(nx::to_vector<bool>(0.5 + i > 0.0), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ((1.0 / i).dtype(), nx::float32);
  Tensor j = i * 2;  // integral: stays int32, exact
  EXPECT_EQ(j.dtype(), nx::int32);
  EXPECT_EQ(i64(j), (std::vector<int64_t>{-2, 0, 2, 6}));
  EXPECT_EQ(i64(i / 2), (std::vector<int64_t>{-1, 0, 0, 1}));  // floor division
  Tensor u = tensor(nx::uint8, {2}, {0, 255});
  EXPECT_EQ(error_of([&] {
              (void)(u + 300);
            }).rfind("nx::add: integer scalar 300 is out of range for uint8", 0),
            0u);
  EXPECT_EQ(
      error_of([&] { (void)(u - (-1)); }).rfind("nx::sub: integer scalar -1 is out of range", 0),
      0u);
  EXPECT_EQ(error_of([&] {
              (void)(i * (int64_t{1} << 40));
            }).rfind("nx::mul: integer scalar 1099511627776", 0),
            0u);
  EXPECT_EQ(error_of([&] {
              (void)(u + (uint64_t{1} << 63));
            }).rfind("nx::add: integer scalar 9223372036854775808", 0),
            0u);
  EXPECT_EQ(nx::to_vector<bool>(u < 300), (std::vector<bool>{true, true}));  // compares (numpy 2)
  Tensor b = tensor(nx::bool_, {2}, {0, 1});
  EXPECT_EQ((b + 1).dtype(), nx::int32);
  EXPECT_EQ(i64(b + 1), (std::vector<int64_t>{1, 2}));
  Tensor h = tensor(nx::float16, {2}, {1, 2});
  EXPECT_EQ((h * 3).dtype(), nx::float16);
  EXPECT_EQ((h * 2.5).dtype(), nx::float16);
  // Compiled code gives the same values.
  auto c = rune::jit([](const Tensor& t) { return t * 2.5; })(i);
  EXPECT_EQ(c.dtype(), nx::float32);
  EXPECT_EQ(f64(c), f64(prod));
}

TEST(HandValues, SignAndRelu) {
  Tensor x = tensor(nx::float32, {5}, {-2.0, -0.0, 0.0, 3.0, NAN});
  auto s = f64(nx::sign(x));
  EXPECT_EQ(s[0], -1);
  EXPECT_TRUE(s[1] == 0 && std::signbit(s[1]));  // sign(-0) = -0 (JAX)
  EXPECT_TRUE(s[2] == 0 && !std::signbit(s[2]));
  EXPECT_EQ(s[3], 1);
  EXPECT_TRUE(std::isnan(s[4]));
  auto r = f64(nx::relu(x));
  EXPECT_EQ(r[0], 0);
  EXPECT_EQ(r[3], 3);
  EXPECT_TRUE(std::isnan(r[4]));
  EXPECT_EQ(i64(nx::relu(tensor(nx::int32, {3}, {-5, 0, 7}))), (std::vector<int64_t>{0, 0, 7}));
}

TEST(HandValues, Transcendentals) {
  Tensor x = tensor(nx::float64, {3}, {0.0, 1.0, -0.0});
  auto e = f64(nx::exp(x));
  EXPECT_EQ(e[0], 1.0);
  EXPECT_NEAR(e[1], 2.718281828459045, 1e-15);
  EXPECT_EQ(f64(nx::log(tensor(nx::float64, {3}, {1.0, 0.0, -1.0})))[0], 0.0);
  EXPECT_EQ(f64(nx::log(tensor(nx::float64, {3}, {1.0, 0.0, -1.0})))[1], -INFINITY);
  EXPECT_TRUE(std::isnan(f64(nx::log(tensor(nx::float64, {3}, {1.0, 0.0, -1.0})))[2]));
  auto s = f64(nx::sin(x));
  EXPECT_TRUE(s[2] == 0 && std::signbit(s[2])) << "sin(-0) = -0";
  EXPECT_EQ(
      f64(nx::pow(tensor(nx::float64, {2}, {-2.0, 9.0}), tensor(nx::float64, {2}, {3.0, 0.5}))),
      (std::vector<double>{-8.0, 3.0}));
  EXPECT_EQ(f64(nx::pow(tensor(nx::float32, {2}, {3.0, 4.0}), 2.0)), (std::vector<double>{9, 16}));
  EXPECT_NEAR(f64(nx::atan2(tensor(nx::float64, {1}, {1.0}), tensor(nx::float64, {1}, {-1.0})))[0],
              2.356194490192345, 1e-15);
}

}  // namespace
