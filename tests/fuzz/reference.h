// The scalar reference for one step: its result computed element by element from its operands'
// values with ir::apply / ir::cast / ir::reduce_combine (ir/scalar.h, the one definition of op
// meaning), for the steps whose result that definition fixes exactly:
//   elementwise ops other than the transcendentals (whose bits are our own decomposition's,
//   checked in ulps by tests/test_elementwise.cpp), where, cast, every view, max/min reductions,
//   integer and bool sums and products (order-free), argmax/argmin, matrix products (a fused
//   multiply-add chain over k from +0, ir/ops.def).
// NaNs compare as NaNs here: the reference computes in double, which fixes no payload.
#pragma once
#include <optional>

#include "fuzz/values.h"

namespace fuzz {

using ir::Op;
using ir::Value;

struct Host {
  DType dtype;
  Shape shape;
  std::vector<Value> v;  // C order
};

inline Host host_of(const Bits& b) {
  Host h{b.dtype, b.shape, {}};
  for (int64_t k = 0; k < b.size(); ++k) h.v.push_back(Value::from_bits(b.dtype, b.at(k)));
  return h;
}

inline std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    idx[d] = s[d] ? flat % s[d] : 0;
    if (s[d]) flat /= s[d];
  }
  return idx;
}
inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + idx[d];
  return f;
}
// The element of x that index `out` (of a shape x broadcasts to) reads.
inline const Value& bcast_at(const Host& x, const std::vector<int64_t>& out) {
  size_t off = out.size() - x.shape.size();
  std::vector<int64_t> idx(x.shape.size());
  for (size_t d = 0; d < idx.size(); ++d) idx[d] = x.shape[d] == 1 ? 0 : out[off + d];
  return x.v[ravel(idx, x.shape)];
}

// out[i] = f(i's multi-index) over shape s.
template <class F>
Host tabulate(DType t, const Shape& s, F f) {
  Host h{t, s, {}};
  for (int64_t k = 0; k < numel(s); ++k) h.v.push_back(f(unravel(k, s)));
  return h;
}

inline Value vnum(DType t, double v) {
  return ir::is_float(t) ? Value::of_float(t, v) : Value::of_int(t, static_cast<int64_t>(v));
}
inline Value to_bool(const Value& x) {
  return ir::apply(Op::CmpNe, nx::bool_, {x, vnum(x.dtype, 0)});
}

inline std::optional<Value> unary_ref(const std::string& name, const Value& x) {
  DType t = x.dtype;
  if (name == "nx::neg") return ir::apply(Op::Neg, t, {x});
  if (name == "nx::abs") return ir::apply(Op::Abs, t, {x});
  if (name == "nx::sqrt") return ir::apply(Op::Sqrt, t, {x});
  if (name == "nx::floor") return ir::apply(Op::Floor, t, {x});
  if (name == "nx::round") return ir::apply(Op::Round, t, {x});
  if (name == "nx::square") return ir::apply(Op::Mul, t, {x, x});
  if (name == "nx::relu") return ir::apply(Op::Max, t, {x, vnum(t, 0)});
  if (name == "nx::isnan") return ir::apply(Op::IsNan, nx::bool_, {x});
  if (name == "nx::logical_not") return ir::apply(Op::Not, nx::bool_, {to_bool(x)});
  if (name == "nx::sign") {
    if (ir::apply(Op::CmpLt, nx::bool_, {vnum(t, 0), x}).i) return vnum(t, 1);
    if (ir::apply(Op::CmpLt, nx::bool_, {x, vnum(t, 0)}).i) return vnum(t, -1);
    return x;
  }
  return std::nullopt;  // a transcendental
}

inline std::optional<Value> binary_ref(const std::string& name, const Value& a, const Value& b) {
  DType t = a.dtype, B = nx::bool_;
  if (name == "nx::add") return ir::apply(Op::Add, t, {a, b});
  if (name == "nx::sub") return ir::apply(Op::Sub, t, {a, b});
  if (name == "nx::mul") return ir::apply(Op::Mul, t, {a, b});
  if (name == "nx::div") return ir::apply(Op::Div, t, {a, b});
  if (name == "nx::mod") return ir::apply(Op::Mod, t, {a, b});
  if (name == "nx::maximum") return ir::apply(Op::Max, t, {a, b});
  if (name == "nx::minimum") return ir::apply(Op::Min, t, {a, b});
  if (name == "nx::less") return ir::apply(Op::CmpLt, B, {a, b});
  if (name == "nx::less_equal") return ir::apply(Op::CmpLe, B, {a, b});
  if (name == "nx::greater") return ir::apply(Op::CmpLt, B, {b, a});
  if (name == "nx::equal") return ir::apply(Op::CmpEq, B, {a, b});
  if (name == "nx::not_equal") return ir::apply(Op::CmpNe, B, {a, b});
  if (name == "nx::logical_and") return ir::apply(Op::And, B, {to_bool(a), to_bool(b)});
  if (name == "nx::logical_xor") return ir::apply(Op::Xor, B, {to_bool(a), to_bool(b)});
  return std::nullopt;
}

// Reduces x over `axes` (empty: all) with combine, from init(first element); keepdims shape.
template <class F>
Host reduce_ref(const Host& x, const std::vector<int>& axes_in, bool keep, DType t, F each) {
  int nd = static_cast<int>(x.shape.size());
  std::vector<bool> red(nd, axes_in.empty());
  for (int a : axes_in) red[(a + nd) % nd] = true;
  Shape kept, out;
  for (int d = 0; d < nd; ++d) {
    kept.push_back(red[d] ? 1 : x.shape[d]);
    if (!red[d] || keep) out.push_back(kept.back());
  }
  std::vector<std::vector<Value>> groups(numel(kept));
  for (int64_t k = 0; k < numel(x.shape); ++k) {
    auto idx = unravel(k, x.shape);
    for (int d = 0; d < nd; ++d)
      if (red[d]) idx[d] = 0;
    groups[ravel(idx, kept)].push_back(x.v[k]);
  }
  Host h{t, out, {}};
  for (auto& g : groups) h.v.push_back(each(g));
  return h;
}

// The reference result of step s from its operands, or nullopt where the reference does not
// fix the bits (transcendentals, float sums and products, mean, checks).
inline std::optional<Host> reference(const Step& s, const std::vector<Host>& a, const Bits& got) {
  switch (s.kind) {
    case Kind::Unary: {
      std::vector<Value> v;
      for (auto& x : a[0].v) {
        auto r = unary_ref(kUnary[s.fn].name, x);
        if (!r) return std::nullopt;
        v.push_back(*r);
      }
      DType t = kUnary[s.fn].to_bool ? nx::bool_ : a[0].dtype;
      if (a[0].v.empty() && !unary_ref(kUnary[s.fn].name, vnum(a[0].dtype, 1))) return std::nullopt;
      return Host{t, a[0].shape, v};
    }
    case Kind::Binary: {
      auto sh = ir::broadcast_shapes(a[0].shape, a[1].shape);
      if (!sh || !binary_ref(kBinary[s.fn].name, vnum(a[0].dtype, 1), vnum(a[1].dtype, 1)))
        return std::nullopt;
      DType t = kBinary[s.fn].to_bool ? nx::bool_ : a[0].dtype;
      return tabulate(t, *sh, [&](const std::vector<int64_t>& i) {
        return *binary_ref(kBinary[s.fn].name, bcast_at(a[0], i), bcast_at(a[1], i));
      });
    }
    case Kind::Where: {
      auto sh = ir::broadcast_shapes(a[1].shape, a[2].shape);
      sh = ir::broadcast_shapes(*sh, a[0].shape);
      return tabulate(a[1].dtype, *sh, [&](const std::vector<int64_t>& i) {
        return bcast_at(a[0], i).i ? bcast_at(a[1], i) : bcast_at(a[2], i);
      });
    }
    case Kind::Cast: {
      Host h{s.dtype, a[0].shape, {}};
      for (auto& x : a[0].v) h.v.push_back(ir::cast(x, s.dtype));
      return h;
    }
    case Kind::Reshape:
      return Host{a[0].dtype, got.shape, a[0].v};
    case Kind::Transpose:
    case Kind::Permute: {
      int nd = static_cast<int>(a[0].shape.size());
      std::vector<int> perm(s.axes.begin(), s.axes.end());
      if (s.kind == Kind::Transpose)
        for (int d = nd - 1; d >= 0; --d) perm.push_back(d);
      Shape out;
      for (int q : perm) out.push_back(a[0].shape[(q + nd) % nd]);
      return tabulate(a[0].dtype, out, [&](const std::vector<int64_t>& i) {
        std::vector<int64_t> src(nd);
        for (int d = 0; d < nd; ++d) src[(perm[d] + nd) % nd] = i[d];
        return a[0].v[ravel(src, a[0].shape)];
      });
    }
    case Kind::Flip: {
      int nd = static_cast<int>(a[0].shape.size());
      std::vector<bool> f(nd, s.axes.empty());
      for (int q : s.axes) f[(q + nd) % nd] = true;
      return tabulate(a[0].dtype, a[0].shape, [&](const std::vector<int64_t>& i) {
        auto src = i;
        for (int d = 0; d < nd; ++d)
          if (f[d]) src[d] = a[0].shape[d] - 1 - i[d];
        return a[0].v[ravel(src, a[0].shape)];
      });
    }
    case Kind::Slice: {  // numpy semantics
      const Shape& in = a[0].shape;
      Shape out = in;
      std::vector<int64_t> start(in.size(), 0), step(in.size(), 1);
      for (size_t d = 0; d < s.slices.size(); ++d) {
        const auto& sl = s.slices[d];
        int64_t n = in[d];
        auto norm = [&](int64_t v) { return v < 0 ? v + n : v; };
        int64_t s0, len;
        if (sl.step > 0) {
          s0 = sl.start ? norm(*sl.start) : 0;
          int64_t e0 = sl.stop ? norm(*sl.stop) : n;
          len = e0 > s0 ? (e0 - s0 + sl.step - 1) / sl.step : 0;
        } else {
          s0 = sl.start ? std::min(norm(*sl.start), n - 1) : n - 1;
          int64_t e0 = sl.stop ? norm(*sl.stop) : -1;
          len = s0 > e0 ? (s0 - e0 - sl.step - 1) / -sl.step : 0;
        }
        start[d] = s0;
        step[d] = sl.step;
        out[d] = len;
      }
      return tabulate(a[0].dtype, out, [&](const std::vector<int64_t>& i) {
        std::vector<int64_t> src(in.size());
        for (size_t d = 0; d < in.size(); ++d) src[d] = start[d] + i[d] * step[d];
        return a[0].v[ravel(src, in)];
      });
    }
    case Kind::BroadcastTo:
      return tabulate(a[0].dtype, s.shape,
                      [&](const std::vector<int64_t>& i) { return bcast_at(a[0], i); });
    case Kind::Pad: {
      Shape out = a[0].shape;
      for (size_t d = 0; d < out.size(); ++d) out[d] += s.widths[d].first + s.widths[d].second;
      Value fill = a[0].dtype == nx::bool_ ? Value::of_int(nx::bool_, s.value != 0)
                                           : vnum(a[0].dtype, s.value);
      return tabulate(a[0].dtype, out, [&](const std::vector<int64_t>& i) {
        std::vector<int64_t> src(i.size());
        for (size_t d = 0; d < i.size(); ++d) {
          src[d] = i[d] - s.widths[d].first;
          if (src[d] < 0 || src[d] >= a[0].shape[d]) return fill;
        }
        return a[0].v[ravel(src, a[0].shape)];
      });
    }
    case Kind::Reduce: {
      std::string name = kReduce[s.fn].name;
      DType t = a[0].dtype;
      if (name == "nx::max" || name == "nx::min") {
        Op op = name == "nx::max" ? Op::ReduceMax : Op::ReduceMin;
        return reduce_ref(a[0], s.axes, s.keepdims, t, [&](const std::vector<Value>& g) {
          Value r = ir::reduce_identity(op, t);
          for (auto& x : g) r = ir::reduce_combine(op, r, x);
          return r;
        });
      }
      if ((name == "nx::sum" || name == "nx::prod") && !ir::is_float(t)) {
        Op op = name == "nx::sum" ? Op::ReduceSum : Op::ReduceProd;
        const DType acc = t == nx::uint64 ? nx::uint64 : nx::int64;  // docs/dtypes.md
        return reduce_ref(a[0], s.axes, s.keepdims, acc, [&](const std::vector<Value>& g) {
          Value r = ir::reduce_identity(op, acc);
          for (auto& x : g) r = ir::reduce_combine(op, r, ir::cast(x, acc));
          return r;
        });
      }
      return std::nullopt;
    }
    case Kind::ArgReduce: {
      // The first index holding the extreme; a NaN counts as the extreme (numpy).
      Op op = s.fn == 0 ? Op::ReduceMax : Op::ReduceMin;
      Host x = a[0];
      std::vector<int> axes = s.axes;
      bool flat = axes.empty();
      if (flat) {
        x.shape = {numel(x.shape)};
        axes = {0};
      }
      Host h = reduce_ref(x, axes, s.keepdims, nx::int64, [&](const std::vector<Value>& g) {
        Value m = ir::reduce_identity(op, x.dtype);
        for (auto& v : g) m = ir::reduce_combine(op, m, v);
        int64_t k = 0;
        while (k < static_cast<int64_t>(g.size()) &&
               !(ir::apply(Op::CmpEq, nx::bool_, {g[k], m}).i ||
                 ir::apply(Op::IsNan, nx::bool_, {g[k]}).i))
          ++k;
        return Value::of_int(nx::int64, k);
      });
      h.shape = got.shape;  // (a flat argmax with keepdims keeps every axis as 1)
      return h;
    }
    case Kind::Matmul: {
      Host x = a[0], y = a[1];
      bool xv = x.shape.size() == 1, yv = y.shape.size() == 1;
      if (xv) x.shape = {1, x.shape[0]};
      if (yv) y.shape = {y.shape[0], 1};
      size_t xn = x.shape.size(), yn = y.shape.size();
      int64_t m = x.shape[xn - 2], kk = x.shape[xn - 1], n = y.shape[yn - 1];
      Shape bx(x.shape.begin(), x.shape.end() - 2), by(y.shape.begin(), y.shape.end() - 2);
      Shape batch = *ir::broadcast_shapes(bx, by);
      Shape full = batch;
      full.insert(full.end(), {m, n});
      DType t = x.dtype;
      bool fl = ir::is_float(t);
      // docs/design-notes.md: integer products are exact in int64 (the result is int64), a
      // bool product is bool (whether any term is true), floats are an fma chain over k.
      DType acc_t = !fl ? nx::int64 : t == nx::float64 ? nx::float64 : nx::float32;
      DType out_t = fl ? t : t == nx::bool_ ? nx::bool_ : nx::int64;
      Host h = tabulate(out_t, full, [&](const std::vector<int64_t>& i) {
        std::vector<int64_t> ix(i.begin(), i.end() - 2), iy = ix;
        Value acc = vnum(acc_t, 0);
        for (int64_t q = 0; q < kk; ++q) {
          auto xi = ix, yi = iy;
          xi.insert(xi.end(), {i[i.size() - 2], q});
          yi.insert(yi.end(), {q, i[i.size() - 1]});
          Value u = bcast_at(x, xi), w = bcast_at(y, yi);
          if (!fl) {
            Value p =
                ir::apply(Op::Mul, nx::int64, {ir::cast(u, nx::int64), ir::cast(w, nx::int64)});
            acc = ir::apply(Op::Add, nx::int64, {acc, p});
          } else if (acc_t == nx::float64) {
            acc = Value::of_float(acc_t, std::fma(u.f, w.f, acc.f));
          } else {
            acc = Value::of_float(acc_t, std::fmaf(static_cast<float>(u.f), static_cast<float>(w.f),
                                                   static_cast<float>(acc.f)));
          }
        }
        if (out_t == nx::bool_) return Value::of_int(nx::bool_, acc.i != 0);
        return fl ? ir::cast(acc, t) : acc;
      });
      h.shape = got.shape;
      return h;
    }
    case Kind::Input:
    case Kind::Check:
      return std::nullopt;
    // The newer ops have no scalar reference (docs/testing.md): they are compared eager
    // against compiled, on the host, CPU:1 and the fake CUDA:0, bit for bit.
    case Kind::Take:
    case Kind::TakeAlong:
    case Kind::ScatterAdd:
    case Kind::OneHot:
    case Kind::DynSlice:
    case Kind::DynUpdate:
    case Kind::Random:
    case Kind::Fori:
    case Kind::Scan:
    case Kind::Cond:
    case Kind::Switch:
    case Kind::Vmap:
    case Kind::Optim:
      return std::nullopt;
  }
  return std::nullopt;
}

// "" when got matches the reference (NaN matching any NaN), else the first difference.
inline std::string compare_to_reference(const Host& want, const Bits& got) {
  if (want.dtype != got.dtype || want.shape != got.shape)
    return "reference " + std::string(ir::name(want.dtype)) + " " + ir::to_string(want.shape) +
           ", got " + std::string(ir::name(got.dtype)) + " " + ir::to_string(got.shape);
  for (int64_t k = 0; k < got.size(); ++k) {
    Value g = Value::from_bits(got.dtype, got.at(k));
    const Value& w = want.v[k];
    bool gn = ir::is_float(g.dtype) && std::isnan(g.f),
         wn = ir::is_float(w.dtype) && std::isnan(w.f);
    if (gn && wn) continue;
    if (!gn && !wn && g.bits() == w.bits()) continue;
    std::ostringstream s;
    s.precision(17);
    s << "flat index " << k << ": got " << hex(g.bits()) << " (" << g.as_double() << "), reference "
      << hex(w.bits()) << " (" << w.as_double() << ")";
    return s.str();
  }
  return "";
}

}  // namespace fuzz
