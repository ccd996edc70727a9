// Random programs: each step is drawn with arguments that are valid for the op (the generator
// tracks every slot's dtype and shape), except that a program sometimes ends with one step whose
// arguments are invalid on purpose (expect_error). Donation marks an argument of a step; the
// donated slot is dead afterwards, so no later step reads it and it is never an output.
#pragma once
#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
#include <optional>
#include <random>

#include "fuzz/bodies.h"

namespace fuzz {

struct GenOptions {
  int max_steps = 12;
  double p_donate = 0.12;   // per eligible argument
  double p_invalid = 0.07;  // a program ending in an invalid step
  // Each step is one of the newer ops (indexing, random numbers, control flow, vmap, optimizer
  // updates: newer_step) with this probability. 0 (RUNE_FUZZ_NEWER=0) draws nothing for it:
  // the programs of the seeds of earlier runs (docs/testing.md), which had only the classic ops.
  double p_newer = 0.2;
};

class Generator {
 public:
  Generator(uint64_t seed, GenOptions o) : r_(seed), o_(o) {}

  Program run() {
    main_ = kDTypes[r_.below(kDTypeCount)];
    int n_in = 1 + r_.below(3);
    for (int i = 0; i < n_in; ++i)
      input(r_.chance(0.7) ? main_ : kDTypes[r_.below(kDTypeCount)], shape());
    int n = 1 + r_.below(o_.max_steps);
    bool checks = false;
    for (int i = 0; i < n; ++i) {
      for (int tries = 0; tries < 8; ++tries)
        if (step(checks)) break;
    }
    if (!checks && r_.chance(o_.p_invalid)) {
      for (int tries = 0; tries < 8; ++tries)
        if (invalid()) break;
    }
    // Outputs: the last live result and up to two more.
    std::vector<int> cand;
    for (int s = 0; s < static_cast<int>(p_.steps.size()); ++s)
      if (!dead_[s] && p_.steps[s].kind != Kind::Input) cand.push_back(s);
    if (cand.empty()) {
      int a = any_live();
      push_unary(a);
      cand.push_back(static_cast<int>(p_.steps.size()) - 1);
    }
    p_.outputs.push_back(cand.back());
    for (int k = r_.below(3); k > 0; --k) {
      int s = cand[r_.below(static_cast<int>(cand.size()))];
      if (std::find(p_.outputs.begin(), p_.outputs.end(), s) == p_.outputs.end())
        p_.outputs.push_back(s);
    }
    return p_;
  }

 private:
  Rng r_;
  GenOptions o_;
  Program p_;
  std::vector<Type> types_;
  std::vector<bool> dead_;
  // Whether a slot reads the result of a rune::fori_loop / scan. Under rune::jit a check after
  // a loop may not read its results (docs/compilation.md "Control flow": a documented
  // limitation, rune::jit raises naming it), so checks, and switch_ indices (bounds-checked
  // under rune::jit), are drawn from other slots while no_loop_results_ is set.
  std::vector<bool> after_loop_;
  bool no_loop_results_ = false;
  DType main_ = nx::float32;

  // ---- shapes ----
  int64_t extent() {
    int w = r_.below(100);
    if (w < 3) return 0;
    if (w < 7) return std::array<int64_t, 3>{16, 33, 65}[r_.below(3)];
    return std::array<int64_t, 8>{1, 1, 2, 3, 4, 5, 7, 8}[r_.below(8)];
  }
  Shape shape() {
    int w = r_.below(10);
    int rank = w < 1 ? 0 : w < 4 ? 1 : w < 8 ? 2 : 3;
    Shape s;
    for (int d = 0; d < rank; ++d) s.push_back(extent());
    // The last extent shrinks first (the seed -> program map of earlier runs); once it is 1 the
    // largest does ([65, 33, 1] hung the generator at seed 6xxx: the loop never ended).
    while (numel(s) > 2048) {
      int64_t& d = s.back() > 1 ? s.back() : *std::max_element(s.begin(), s.end());
      d = std::max<int64_t>(1, d / 4);
    }
    return s;
  }
  // A shape that broadcasts with s (to s itself): some extents 1, maybe fewer leading axes.
  Shape broadcastable(const Shape& s) {
    Shape b(s.begin() + (s.empty() ? 0 : r_.below(static_cast<int>(s.size()) + 1) / 2), s.end());
    for (auto& d : b)
      if (r_.chance(0.3)) d = 1;
    return b;
  }

  // ---- slots ----
  int push(Step st, Type t) {
    st.donate.resize(st.args.size(), false);
    bool loop = st.kind == Kind::Fori || st.kind == Kind::Scan;
    for (int a : st.args) loop |= after_loop_[a];
    after_loop_.push_back(loop);
    p_.steps.push_back(std::move(st));
    types_.push_back(std::move(t));
    dead_.push_back(false);
    return static_cast<int>(p_.steps.size()) - 1;
  }
  int input(DType t, Shape s) {
    Step st;
    st.kind = Kind::Input;
    st.dtype = t;
    st.shape = s;
    int w = r_.below(10);
    st.layout = w < 4   ? Layout::Contig
                : w < 6 ? Layout::Transposed
                : w < 8 ? Layout::Stepped
                : w < 9 ? Layout::Flipped
                        : Layout::Broadcast;
    st.seed = r_.next();
    return push(st, {t, s});
  }
  int any_live() {
    std::vector<int> l;
    for (int s = 0; s < static_cast<int>(dead_.size()); ++s)
      if (!dead_[s]) l.push_back(s);
    if (l.empty()) return input(main_, shape());
    return l[r_.below(static_cast<int>(l.size()))];
  }
  int live_where(const std::function<bool(const Type&)>& ok) {
    std::vector<int> l;
    for (int s = 0; s < static_cast<int>(dead_.size()); ++s)
      if (!dead_[s] && ok(types_[s]) && !(no_loop_results_ && after_loop_[s])) l.push_back(s);
    if (l.empty()) return -1;
    return l[r_.below(static_cast<int>(l.size()))];
  }
  // A live slot of dtype t broadcastable with shape s, or a new input that is.
  int partner(DType t, const Shape& s) {
    int b = r_.chance(0.6) ? live_where([&](const Type& x) {
      return x.dtype == t && ir::broadcast_shapes(x.shape, s).has_value() &&
             numel(*ir::broadcast_shapes(x.shape, s)) <= 4096;
    })
                           : -1;
    return b >= 0 ? b : input(t, r_.chance(0.5) ? s : broadcastable(s));
  }
  // Marks some arguments of the step just built as donated (each appearing once in it).
  void donate_some(Step& st) {
    st.donate.assign(st.args.size(), false);
    for (size_t i = 0; i < st.args.size(); ++i) {
      if (std::count(st.args.begin(), st.args.end(), st.args[i]) != 1) continue;
      if (r_.chance(o_.p_donate)) st.donate[i] = true;
    }
  }
  int finish(Step st, Type t, bool donation = true) {
    if (donation)
      donate_some(st);
    else
      st.donate.assign(st.args.size(), false);
    for (size_t i = 0; i < st.args.size(); ++i)
      if (st.donate[i]) dead_[st.args[i]] = true;
    return push(std::move(st), std::move(t));
  }
  void push_unary(int a) {
    Step st;
    st.kind = Kind::Unary;
    st.fn = 1;  // nx::abs: valid for every dtype
    st.args = {a};
    finish(st, types_[a], false);
  }

  static Shape reduced(const Shape& s, const std::vector<int>& axes, bool keep) {
    Shape out;
    for (int d = 0; d < static_cast<int>(s.size()); ++d) {
      bool red = axes.empty() || std::find_if(axes.begin(), axes.end(), [&](int a) {
                                   return (a < 0 ? a + static_cast<int>(s.size()) : a) == d;
                                 }) != axes.end();
      if (!red)
        out.push_back(s[d]);
      else if (keep)
        out.push_back(1);
    }
    return out;
  }
  std::vector<int> some_axes(int nd, bool allow_empty) {
    std::vector<int> a;
    for (int d = 0; d < nd; ++d)
      if (r_.chance(0.5)) a.push_back(r_.chance(0.2) ? d - nd : d);
    if (a.empty() && !allow_empty && nd > 0) a.push_back(r_.below(nd));
    std::shuffle(a.begin(), a.end(), std::mt19937_64(r_.next()));
    return a;
  }

  // ---- one valid step; false when the drawn op does not fit the live slots ----
  bool step(bool& checks) {
    if (o_.p_newer > 0 && r_.chance(o_.p_newer)) return newer_step();
    int w = r_.below(100);
    Step st;
    if (w < 22) {  // unary
      int a = any_live();
      const Type& t = types_[a];
      int fn = r_.below(kUnaryCount);
      const auto& u = kUnary[fn];
      if (u.float_only && !ir::is_float(t.dtype)) return false;
      if (u.no_bool && t.dtype == nx::bool_) return false;
      st.kind = Kind::Unary;
      st.fn = fn;
      st.args = {a};
      finish(st, {u.to_bool ? nx::bool_ : t.dtype, t.shape});
      return true;
    }
    if (w < 46) {  // binary with broadcasting
      int a = any_live();
      Type t = types_[a];
      int fn = r_.below(kBinaryCount);
      const auto& b = kBinary[fn];
      if (b.float_only && !ir::is_float(t.dtype)) return false;
      int c = partner(t.dtype, t.shape);
      Shape out = *ir::broadcast_shapes(types_[a].shape, types_[c].shape);
      st.kind = Kind::Binary;
      st.fn = fn;
      st.args = r_.chance(0.5) ? std::vector<int>{a, c} : std::vector<int>{c, a};
      finish(st, {b.to_bool ? nx::bool_ : t.dtype, out});
      return true;
    }
    if (w < 51) {  // where
      int a = any_live();
      Type t = types_[a];
      int b = partner(t.dtype, t.shape);
      Shape s = *ir::broadcast_shapes(t.shape, types_[b].shape);
      int c = partner(nx::bool_, s);
      st.kind = Kind::Where;
      st.args = {c, a, b};
      finish(st, {t.dtype, *ir::broadcast_shapes(s, types_[c].shape)});
      return true;
    }
    if (w < 57) {  // cast to another dtype
      int a = any_live();
      DType to = kDTypes[r_.below(kDTypeCount)];
      // Now and then the identity (nx returns the operand itself), whose donation must still
      // give a live result.
      if (to == types_[a].dtype && !r_.chance(0.1)) return false;
      st.kind = Kind::Cast;
      st.args = {a};
      st.dtype = to;
      finish(st, {to, types_[a].shape});
      return true;
    }
    if (w < 82) return view(r_.below(7));
    if (w < 92) {  // reductions
      int a = any_live();
      Type t = types_[a];
      bool arg = r_.chance(0.25);
      st.keepdims = r_.chance(0.4);
      if (arg) {
        st.kind = Kind::ArgReduce;
        st.fn = r_.below(2);
        int nd = static_cast<int>(t.shape.size());
        bool has_axis = nd > 0 && r_.chance(0.7);
        if (has_axis) st.axes = {r_.below(nd) - (r_.chance(0.2) ? nd : 0)};
        bool empty = has_axis ? t.shape[(st.axes[0] + nd) % nd] == 0 : numel(t.shape) == 0;
        if (empty) return false;
        Shape out = has_axis ? reduced(t.shape, st.axes, st.keepdims)
                             : (st.keepdims ? Shape(nd, 1) : Shape{});
        st.args = {a};
        finish(st, {nx::int64, out});
        return true;
      }
      st.kind = Kind::Reduce;
      st.fn = r_.below(kReduceCount);
      st.axes = some_axes(static_cast<int>(t.shape.size()), true);
      Shape out = reduced(t.shape, st.axes, st.keepdims);
      bool minmax = st.fn == 2 || st.fn == 3;
      if (minmax) {
        Shape kept = reduced(t.shape, st.axes, true);
        for (size_t d = 0; d < kept.size(); ++d)
          if (kept[d] == 1 && t.shape[d] == 0) return false;  // no identity
      }
      DType rt = t.dtype;
      // nx::sum / nx::prod: bool and integers below 64 bits accumulate in int64 (docs/dtypes.md).
      bool small = t.dtype == nx::bool_ || (ir::is_int(t.dtype) && ir::itemsize(t.dtype) < 8);
      if ((st.fn == 0 || st.fn == 1) && small) rt = nx::int64;
      if (st.fn == 4 && !ir::is_float(t.dtype)) rt = nx::float64;
      st.args = {a};
      finish(st, {rt, out});
      return true;
    }
    if (w < 96) {  // matmul against a new [K, N], [K] or batched right operand
      int a = live_where([](const Type& x) { return !x.shape.empty() && numel(x.shape) <= 512; });
      if (a < 0) return false;
      Type t = types_[a];
      int64_t k = t.shape.back();
      int64_t n = std::array<int64_t, 4>{1, 2, 3, 5}[r_.below(4)];
      int form = r_.below(3);
      Shape bs = form == 0 ? Shape{k} : form == 1 ? Shape{k, n} : Shape{2, k, n};
      if (t.shape.size() < 2 && form == 2) bs = Shape{k, n};
      int b = input(t.dtype, bs);
      Shape xb(t.shape.begin(), t.shape.end() - std::min<size_t>(2, t.shape.size()));
      Shape yb(bs.begin(), bs.end() - std::min<size_t>(2, bs.size()));
      auto batch = ir::broadcast_shapes(xb, yb);
      if (!batch) return false;
      Shape out = *batch;
      if (t.shape.size() > 1) out.push_back(t.shape[t.shape.size() - 2]);
      if (bs.size() > 1) out.push_back(n);
      DType rt = t.dtype;
      // docs/design-notes.md: integer products are int64, a bool product is bool.
      if (ir::is_int(rt)) rt = nx::int64;
      st.kind = Kind::Matmul;
      st.args = {a, b};
      finish(st, {rt, out});
      return true;
    }
    // a check on a bool slot (its data a slot broadcastable to it)
    no_loop_results_ = true;
    int ok = live_where([](const Type& x) { return x.dtype == nx::bool_; });
    int data = ok < 0 ? -1 : live_where([&](const Type& x) {
      auto s = ir::broadcast_shapes(x.shape, types_[ok].shape);
      return s && *s == types_[ok].shape;
    });
    no_loop_results_ = false;
    if (data < 0) return false;
    st.kind = Kind::Check;
    st.args = {ok, data};
    st.always_true = r_.chance(0.6);
    checks = true;
    finish(st, types_[ok], false);
    return true;
  }

#include "fuzz/generator_newer.inc"

  // ---- views: never the identity (identities come from casts, see step()) ----
  bool view(int which) {
    int a = any_live();
    Type t = types_[a];
    int nd = static_cast<int>(t.shape.size());
    Step st;
    st.args = {a};
    switch (which) {
      case 0: {  // reshape to another factorisation of the same size
        int64_t n = numel(t.shape);
        Shape s;
        if (n == 0) {
          s = r_.chance(0.5) ? Shape{0} : Shape{2, 0};
        } else {
          int64_t rest = n;
          int rank = r_.below(4);
          for (int d = 0; d + 1 < rank; ++d) {
            std::vector<int64_t> divs;
            for (int64_t q = 1; q <= rest; ++q)
              if (rest % q == 0) divs.push_back(q);
            int64_t q = divs[r_.below(static_cast<int>(divs.size()))];
            s.push_back(q);
            rest /= q;
          }
          if (rank > 0 || rest != 1) s.push_back(rest);
        }
        if (s == t.shape) return false;
        st.kind = Kind::Reshape;
        st.shape = s;
        if (n > 0 && !s.empty() && r_.chance(0.2))
          st.shape[r_.below(static_cast<int>(s.size()))] = -1;
        finish(st, {t.dtype, s});
        return true;
      }
      case 1: {  // slice
        if (nd == 0) return false;
        int k = 1 + r_.below(nd);
        Shape out = t.shape;
        bool identity = true;
        for (int d = 0; d < k; ++d) {
          int64_t n = t.shape[d];
          nx::Slice sl;
          sl.step = std::array<int64_t, 6>{1, 1, 2, 3, -1, -2}[r_.below(6)];
          if (r_.chance(0.6)) sl.start = n == 0 ? 0 : r_.below(static_cast<int>(2 * n + 1)) - n;
          if (r_.chance(0.6)) sl.stop = n == 0 ? 0 : r_.below(static_cast<int>(2 * n + 1)) - n;
          // numpy's length of the slice
          int64_t len;
          auto norm = [&](int64_t v) { return v < 0 ? v + n : v; };
          if (sl.step > 0) {
            int64_t s0 = sl.start ? norm(*sl.start) : 0, e0 = sl.stop ? norm(*sl.stop) : n;
            len = e0 > s0 ? (e0 - s0 + sl.step - 1) / sl.step : 0;
          } else {
            int64_t s0 = sl.start ? std::min(norm(*sl.start), n - 1) : n - 1;
            int64_t e0 = sl.stop ? norm(*sl.stop) : -1;
            len = s0 > e0 ? (s0 - e0 - sl.step - 1) / -sl.step : 0;
          }
          identity &= sl.step == 1 && len == n;
          out[d] = len;
          st.slices.push_back(sl);
        }
        if (identity) return false;
        st.kind = Kind::Slice;
        finish(st, {t.dtype, out});
        return true;
      }
      case 2: {  // flip
        if (nd == 0) return false;
        st.kind = Kind::Flip;
        st.axes = some_axes(nd, false);
        finish(st, t);
        return true;
      }
      case 3: {  // permute (not the identity)
        if (nd < 2) return false;
        std::vector<int> perm(nd);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), std::mt19937_64(r_.next()));
        if (std::is_sorted(perm.begin(), perm.end())) std::swap(perm[0], perm[1]);
        Shape out;
        for (int q : perm) out.push_back(t.shape[q]);
        st.kind = Kind::Permute;
        st.axes = perm;
        finish(st, {t.dtype, out});
        return true;
      }
      case 4: {  // transpose
        if (nd < 2) return false;
        st.kind = Kind::Transpose;
        finish(st, {t.dtype, Shape(t.shape.rbegin(), t.shape.rend())});
        return true;
      }
      case 5: {  // broadcast_to a larger shape
        Shape s = t.shape;
        for (auto& d : s)
          if (d == 1 && r_.chance(0.7)) d = 1 + r_.below(4);
        if (s.size() < 3 && r_.chance(0.5)) s.insert(s.begin(), 1 + r_.below(3));
        if (s == t.shape || numel(s) > 4096) return false;
        st.kind = Kind::BroadcastTo;
        st.shape = s;
        finish(st, {t.dtype, s});
        return true;
      }
      default: {  // pad
        if (nd == 0) return false;
        Shape out = t.shape;
        bool any = false;
        for (int d = 0; d < nd; ++d) {
          int64_t lo = r_.below(3), hi = r_.below(3);
          any |= lo || hi;
          st.widths.push_back({lo, hi});
          out[d] += lo + hi;
        }
        if (!any) return false;
        st.kind = Kind::Pad;
        const double vals[] = {0, 0, 1, -2, 0.5, -0.0};
        st.value = t.dtype == nx::bool_ ? r_.below(2) : vals[r_.below(6)];
        if (!ir::is_float(t.dtype)) st.value = std::trunc(st.value);
        finish(st, {t.dtype, out});
        return true;
      }
    }
  }

  // ---- one step with invalid arguments (the program's last) ----
  bool invalid() {
    int a = any_live();
    Type t = types_[a];
    int nd = static_cast<int>(t.shape.size());
    Step st;
    st.expect_error = true;
    st.args = {a};
    switch (r_.below(9)) {
      case 0:
        st.kind = Kind::Reshape;
        st.shape = {numel(t.shape) + 1 + r_.below(3)};
        break;
      case 1:
        st.kind = Kind::BroadcastTo;
        st.shape = t.shape;
        if (nd == 0) return false;
        st.shape[r_.below(nd)] += 1 + r_.below(2);
        if (st.shape == t.shape) return false;
        for (size_t d = 0; d < t.shape.size(); ++d)
          if (t.shape[d] != st.shape[d] && t.shape[d] == 1) return false;
        break;
      case 2: {  // binary op on two dtypes
        st.kind = Kind::Binary;
        st.fn = r_.below(7);
        DType other = kDTypes[r_.below(kDTypeCount)];
        if (other == t.dtype) return false;
        st.args = {a, input(other, t.shape)};
        break;
      }
      case 3:
        st.kind = Kind::Reduce;
        st.fn = r_.below(kReduceCount);
        st.axes = {nd + r_.below(2)};
        break;
      case 4:
        if (nd < 2) return false;
        st.kind = Kind::Permute;
        for (int d = 0; d < nd; ++d) st.axes.push_back(d);
        st.axes[1] = 0;
        break;
      case 5:
        if (nd == 0) return false;
        st.kind = Kind::Slice;
        st.slices = {nx::Slice{std::nullopt, std::nullopt, 0}};
        break;
      case 6:
        if (nd == 0) return false;
        st.kind = Kind::Pad;
        st.widths.assign(nd, {0, 0});
        st.widths[r_.below(nd)] = {-1, 0};
        break;
      case 7:  // neg of a bool, exp of an integer
        if (ir::is_float(t.dtype)) return false;
        st.kind = Kind::Unary;
        st.fn = t.dtype == nx::bool_ ? 0 : 3;
        break;
      default: {  // matmul that does not align
        if (nd == 0) return false;
        st.kind = Kind::Matmul;
        st.args = {a, input(t.dtype, {t.shape.back() + 1, 2})};
        break;
      }
    }
    donate_some(st);  // a failing op consumes nothing: its donated arguments stay alive
    push(st, t);
    return true;
  }
};

inline Program generate(uint64_t seed, GenOptions o = {}) { return Generator(seed, o).run(); }

}  // namespace fuzz
