// Generated functions: the bodies of control flow (rune::fori_loop, scan, cond, switch_) and of
// rune::vmap in a fuzz program. A body is a list of steps over local slots: its operands first
// (local 0, 1, ...), then one slot per step; it returns the last local. Its steps are ordinary
// Steps (program.h), so the executor applies them with apply_step and the printer prints them,
// with locals named l<i>. Bodies hold no inputs, donations, checks or bodies of their own.
#pragma once
#include <algorithm>

#include "fuzz/values.h"

namespace fuzz {

struct Type {
  DType dtype;
  Shape shape;
};

class BodyGen {
 public:
  BodyGen(Rng& r, std::vector<Type> operands) : r_(r), types_(std::move(operands)) {}

  // A body returning a value of operand 0's type (a loop's carry, a branch's result): ops that
  // keep its dtype and shape, reading the other operands where they broadcast to it.
  std::vector<Step> keep(int max_ops) {
    const Type want = types_[0];
    int cur = 0;
    const int n = 1 + r_.below(max_ops);
    for (int k = 0; k < n; ++k) {
      for (int tries = 0; tries < 8; ++tries) {
        int next = keep_op(cur, want);
        if (next < 0) continue;
        cur = next;
        break;
      }
    }
    if (body_.empty()) {  // nx::abs keeps every dtype
      Step st;
      st.kind = Kind::Unary;
      st.fn = 1;
      st.args = {cur};
      push(st, want);
    }
    return body_;
  }

  // Any body (a vmapped function): elementwise ops, reductions, casts, flips and transposes of
  // the operands; `result` is its result's type.
  std::vector<Step> any(int max_ops, Type& result) {
    const int n = 1 + r_.below(max_ops);
    int cur = 0;
    for (int k = 0; k < n; ++k) {
      for (int tries = 0; tries < 8; ++tries) {
        int next = any_op(cur);
        if (next < 0) continue;
        cur = next;
        break;
      }
    }
    if (body_.empty()) {
      Step st;
      st.kind = Kind::Unary;
      st.fn = 1;
      st.args = {cur};
      push(st, types_[cur]);
    }
    result = types_.back();
    return body_;
  }

 private:
  Rng& r_;
  std::vector<Type> types_;
  std::vector<Step> body_;

  int push(Step st, Type t) {
    st.donate.assign(st.args.size(), false);
    body_.push_back(std::move(st));
    types_.push_back(std::move(t));
    return static_cast<int>(types_.size()) - 1;
  }
  bool unary_ok(const UnaryOp& u, DType t) const {
    return !(u.float_only && !ir::is_float(t)) && !(u.no_bool && t == nx::bool_);
  }
  // A local of dtype t that broadcasts with shape s to at most 4096 elements (or -1).
  int partner(DType t, const Shape& s, const Shape* exactly = nullptr) {
    std::vector<int> l;
    for (int j = 0; j < static_cast<int>(types_.size()); ++j) {
      if (types_[j].dtype != t) continue;
      auto b = ir::broadcast_shapes(types_[j].shape, s);
      if (b && (exactly ? *b == *exactly : ir::numel(*b) <= 4096)) l.push_back(j);
    }
    return l.empty() ? -1 : l[r_.below(static_cast<int>(l.size()))];
  }

  int keep_op(int cur, const Type& want) {
    Step st;
    const DType t = want.dtype;
    int w = r_.below(10);
    if (w < 4) {  // unary
      st.fn = r_.below(kUnaryCount);
      const UnaryOp& u = kUnary[st.fn];
      if (!unary_ok(u, t) || (u.to_bool && t != nx::bool_)) return -1;
      st.kind = Kind::Unary;
      st.args = {cur};
      return push(st, want);
    }
    if (w < 9) {  // binary with an operand (or an earlier value) broadcasting to the carry
      st.fn = r_.below(kBinaryCount);
      const BinaryOp& b = kBinary[st.fn];
      if ((b.float_only && !ir::is_float(t)) || (b.to_bool && t != nx::bool_)) return -1;
      int o = partner(t, want.shape, &want.shape);
      if (o < 0) return -1;
      st.kind = Kind::Binary;
      st.args = r_.chance(0.5) ? std::vector<int>{cur, o} : std::vector<int>{o, cur};
      return push(st, want);
    }
    // a round trip through another dtype (rounding, wrapping, saturation)
    st.kind = Kind::Cast;
    st.dtype = kDTypes[r_.below(kDTypeCount)];
    st.args = {cur};
    int mid = push(st, {st.dtype, want.shape});
    Step back;
    back.kind = Kind::Cast;
    back.dtype = t;
    back.args = {mid};
    return push(back, want);
  }

  int any_op(int cur) {
    Step st;
    const Type t = types_[cur];
    const int nd = static_cast<int>(t.shape.size());
    int w = r_.below(12);
    if (w < 3) {
      st.fn = r_.below(kUnaryCount);
      const UnaryOp& u = kUnary[st.fn];
      if (!unary_ok(u, t.dtype)) return -1;
      st.kind = Kind::Unary;
      st.args = {cur};
      return push(st, {u.to_bool ? nx::bool_ : t.dtype, t.shape});
    }
    if (w < 6) {
      st.fn = r_.below(kBinaryCount);
      const BinaryOp& b = kBinary[st.fn];
      if (b.float_only && !ir::is_float(t.dtype)) return -1;
      int o = partner(t.dtype, t.shape);
      if (o < 0) return -1;
      st.kind = Kind::Binary;
      st.args = r_.chance(0.5) ? std::vector<int>{cur, o} : std::vector<int>{o, cur};
      Shape out = *ir::broadcast_shapes(t.shape, types_[o].shape);
      return push(st, {b.to_bool ? nx::bool_ : t.dtype, out});
    }
    if (w < 9) {  // a reduction over some axes (sum, prod, max, min, mean)
      st.kind = Kind::Reduce;
      st.fn = r_.below(kReduceCount);
      st.keepdims = r_.chance(0.4);
      for (int d = 0; d < nd; ++d)
        if (r_.chance(0.5)) st.axes.push_back(d);
      Shape out, kept;
      for (int d = 0; d < nd; ++d) {
        bool red = st.axes.empty() || std::count(st.axes.begin(), st.axes.end(), d);
        if (red && (st.fn == 2 || st.fn == 3) && t.shape[d] == 0) return -1;  // no identity
        if (!red) out.push_back(t.shape[d]);
        if (red && st.keepdims) out.push_back(1);
      }
      DType rt = t.dtype;
      bool small = t.dtype == nx::bool_ || (ir::is_int(t.dtype) && ir::itemsize(t.dtype) < 8);
      if ((st.fn == 0 || st.fn == 1) && small) rt = nx::int64;
      if (st.fn == 4 && !ir::is_float(t.dtype)) rt = nx::float64;
      st.args = {cur};
      return push(st, {rt, out});
    }
    if (w < 10) {
      st.kind = Kind::Cast;
      st.dtype = kDTypes[r_.below(kDTypeCount)];
      st.args = {cur};
      return push(st, {st.dtype, t.shape});
    }
    if (w < 11) {
      if (nd == 0) return -1;
      st.kind = Kind::Flip;
      st.axes = {r_.below(nd)};
      st.args = {cur};
      return push(st, t);
    }
    if (nd < 2) return -1;
    st.kind = Kind::Transpose;
    st.args = {cur};
    return push(st, {t.dtype, Shape(t.shape.rbegin(), t.shape.rend())});
  }
};

}  // namespace fuzz
