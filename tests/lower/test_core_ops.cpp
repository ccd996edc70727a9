// One meaning per op: legalize (codegen/core_ops.h) rewrites numpy's compound ops into the core
// ops the renderers spell; evaluating the legalised DAG with ir::apply (the reference meaning of
// every op, core ones included) must give the bits ir::apply gives the original op, on edge
// values of every dtype (zeros of both signs, NaN, infinities, MIN, -1, out-of-range shifts and
// casts). ir::apply throws on a truncating division by 0 or MIN / -1, so an unguarded division
// fails here too.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "codegen/core_ops.h"
#include "ir/builder.h"
#include "ir/scalar.h"

namespace {

using namespace ir;

Value eval(NodeRef n, const std::map<int64_t, Value>& vars, std::map<NodeRef, Value>& memo) {
  if (auto it = memo.find(n); it != memo.end()) return it->second;
  Value v;
  if (n->op == Op::Var) {
    v = vars.at(arg_int(n));
  } else if (n->op == Op::Const) {
    v = is_float(n->dtype) ? Value::of_float(n->dtype, arg_float(n))
                           : Value::of_int(n->dtype, arg_int(n));
  } else {
    EXPECT_TRUE(codegen::is_core(n)) << "not a core op after legalize: " << op_name(n->op);
    std::vector<Value> a;
    for (NodeRef s : n->src) a.push_back(eval(s, vars, memo));
    v = apply(n->op, n->dtype, a);
  }
  memo[n] = v;
  return v;
}

std::vector<Value> samples(DType t) {
  std::vector<Value> v;
  if (is_float(t)) {
    const double inf = std::numeric_limits<double>::infinity();
    for (double d : {0.0,
                     -0.0,
                     1.0,
                     -1.0,
                     2.5,
                     -2.5,
                     0.5,
                     -7.25,
                     3.0,
                     1e30,
                     -1e30,
                     3e9,
                     -3e9,
                     300.0,
                     -300.0,
                     1e-40,
                     inf,
                     -inf,
                     std::nan(""),
                     127.9,
                     -128.5,
                     32768.0,
                     -32769.0,
                     65535.5,
                     4294967296.0,
                     1.8446744073709552e19,
                     9.2233720368547758e18})
      v.push_back(Value::of_float(t, d));
  } else if (t == DType::Bool) {
    v = {Value::of_int(t, 0), Value::of_int(t, 1)};
  } else {
    for (int64_t i : {int64_t{0},
                      int64_t{1},
                      int64_t{-1},
                      int64_t{2},
                      int64_t{-2},
                      int64_t{7},
                      int64_t{-7},
                      int64_t{31},
                      int64_t{32},
                      int64_t{63},
                      int64_t{64},
                      int64_t{200},
                      std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max(),
                      int64_t{INT32_MIN},
                      int64_t{INT32_MAX},
                      int64_t{8},
                      int64_t{16},
                      int64_t{-128},
                      int64_t{127},
                      int64_t{255},
                      int64_t{-32768},
                      int64_t{65535},
                      int64_t{UINT32_MAX}})
      v.push_back(Value::of_int(t, i));  // wrapped to t: each dtype's MIN, MAX, -1 among them
  }
  return v;
}

bool same(const Value& a, const Value& b) {
  if (a.dtype != b.dtype) return false;
  if (is_float(a.dtype) && std::isnan(a.f) && std::isnan(b.f)) return true;
  return a.bits() == b.bits();
}

const DType kTypes[] = {DType::Bool,    DType::UInt8,   DType::Int32, DType::Int64,
                        DType::Float32, DType::Float64, DType::Int8,  DType::Int16,
                        DType::UInt16,  DType::UInt32,  DType::UInt64};

NodeRef var(int64_t id, DType t) { return make(Op::Var, t, {}, {}, id); }

void check(Op op, DType out, const std::vector<DType>& in) {
  std::vector<NodeRef> src;
  for (size_t i = 0; i < in.size(); ++i) src.push_back(var(static_cast<int64_t>(i), in[i]));
  NodeRef legal = codegen::legalize(make(op, out, {}, src));
  // Idempotent: lower legalizes expressions built from legalized parts (a reduction's combine
  // of its element), and a second pass must not wrap the guards of a cast or shift again.
  ASSERT_EQ(codegen::legalize(legal), legal) << "legalize twice changed " << op_name(op);
  std::vector<std::vector<Value>> s;
  for (DType t : in) s.push_back(samples(t));
  std::vector<size_t> pick(in.size(), 0);
  int64_t cases = 0;
  while (true) {
    std::map<int64_t, Value> vars;
    std::vector<Value> args;
    for (size_t i = 0; i < in.size(); ++i) {
      vars[static_cast<int64_t>(i)] = s[i][pick[i]];
      args.push_back(s[i][pick[i]]);
    }
    std::map<NodeRef, Value> memo;
    Value want = apply(op, out, args), got = eval(legal, vars, memo);
    ASSERT_TRUE(same(want, got)) << op_name(op) << " " << name(in[0]) << " at "
                                 << args[0].as_double()
                                 << (args.size() > 1 ? ", " + std::to_string(args[1].as_double())
                                                     : "")
                                 << ": apply " << want.as_double() << ", legalised "
                                 << got.as_double();
    ++cases;
    size_t i = 0;
    while (i < pick.size() && ++pick[i] == s[i].size()) pick[i++] = 0;
    if (i == pick.size()) break;
  }
  EXPECT_GT(cases, 0);
}

TEST(CoreOps, LegalisedOpsMeanWhatApplyMeans) {
  for (DType t : kTypes) {
    for (Op op : {Op::Neg, Op::Abs, Op::Not, Op::Floor, Op::Ceil, Op::Round, Op::Sqrt}) {
      if (op == Op::Not && is_float(t)) continue;
      if (op == Op::Sqrt && !is_float(t)) continue;
      check(op, t, {t});
    }
    check(Op::IsNan, DType::Bool, {t});
    for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Mod, Op::Max, Op::Min})
      check(op, t, {t, t});
    for (Op op : {Op::CmpLt, Op::CmpLe, Op::CmpEq, Op::CmpNe}) check(op, DType::Bool, {t, t});
    if (!is_float(t)) {
      for (Op op : {Op::And, Op::Or, Op::Xor, Op::Shl, Op::Shr}) check(op, t, {t, t});
    }
    check(Op::Where, t, {DType::Bool, t, t});
    for (DType to : kTypes) check(Op::Cast, to, {t});
  }
}

// max / min against a constant (a clamp) take a shorter form when the constant is neither NaN
// nor zero (codegen/core_ops.cpp); every constant of the samples, on either side, must still
// give apply's bits for every sample of the other operand, and the short form must be taken.
TEST(CoreOps, MaxAndMinAgainstAConstantMeanWhatApplyMeans) {
  for (DType t : {DType::Float32, DType::Float64}) {
    for (Op op : {Op::Max, Op::Min}) {
      for (const Value& kv : samples(t)) {
        NodeRef k = b::cf(t, kv.f);
        for (int side = 0; side < 2; ++side) {
          NodeRef x = var(0, t);
          NodeRef legal =
              codegen::legalize(make(op, t, {}, side ? std::vector{k, x} : std::vector{x, k}));
          size_t nodes = toposort({legal}).size();
          if (!std::isnan(kv.f) && kv.f != 0) EXPECT_LE(nodes, 4u) << op_name(op) << " " << kv.f;
          for (const Value& xv : samples(t)) {
            std::map<int64_t, Value> vars{{0, xv}};
            std::map<NodeRef, Value> memo;
            std::vector<Value> args = side ? std::vector{kv, xv} : std::vector{xv, kv};
            Value want = apply(op, t, args), got = eval(legal, vars, memo);
            ASSERT_TRUE(same(want, got))
                << op_name(op) << " " << name(t) << " at " << args[0].as_double() << ", "
                << args[1].as_double() << ": apply " << want.as_double() << ", legalised "
                << got.as_double();
          }
        }
      }
    }
  }
}

TEST(CoreOps, OnlyCoreOpsRemain) {
  NodeRef x = var(0, DType::Float32), y = var(1, DType::Int32);
  NodeRef r = codegen::legalize(b::add(b::max(x, b::cast(b::div(y, y), DType::Float32)),
                                       b::cast(b::cast(x, DType::Int64), DType::Float32)));
  for (NodeRef n : toposort({r})) EXPECT_TRUE(codegen::is_core(n)) << op_name(n->op);
}

}  // namespace
