// Movement ops (reshape, transpose/permute, broadcast_to, expand_dims/squeeze, flatten, slice,
// index, concatenate, stack, pad, flip, contiguous) against values worked out by hand, and
// chains of them feeding elementwise ops and reductions.
#include <gtest/gtest.h>

#include <limits>
#include <optional>

#include "test_util.h"
#include "trace/rune.h"

namespace {

using namespace rt;
using V = std::vector<int64_t>;
using D = std::vector<double>;

V iv(const Tensor& x) { return nx::to_vector<int64_t>(x); }
D dv(const Tensor& x) { return nx::to_vector<double>(x); }

// int64 [0, n) reshaped to `shape`.
Tensor seq(const Shape& shape) { return nx::reshape(nx::arange(ir::numel(shape)), shape); }

TEST(Reshape, Basics) {
  Tensor x = nx::arange(6);
  Tensor a = nx::reshape(x, {2, 3});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(iv(a), (V{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(nx::reshape(x, {3, -1}).shape(), (Shape{3, 2}));
  EXPECT_EQ(nx::reshape(x, {-1, 1, 2}).shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(nx::reshape(a, {-1}).shape(), (Shape{6}));
  EXPECT_EQ(nx::reshape(nx::arange(1), {}).shape(), Shape{});
  EXPECT_EQ(iv(nx::reshape(nx::arange(1), {})), V{0});
  EXPECT_EQ(nx::reshape(nx::scalar(nx::float32, 4), {1, 1}).shape(), (Shape{1, 1}));
  Tensor e = nx::reshape(nx::arange(0), {2, 0, 3});
  EXPECT_EQ(e.shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(nx::reshape(e, {0, 6}).shape(), (Shape{0, 6}));
  EXPECT_THROW(nx::reshape(e, {0, -1}), std::invalid_argument);  // -1 is ambiguous (numpy too)
  EXPECT_EQ(nx::reshape(e, {0}).size(), 0);
}

TEST(Reshape, NonContiguousSourcesCopy) {
  Tensor t = nx::transpose(seq({2, 3}));  // [[0, 3], [1, 4], [2, 5]]
  EXPECT_EQ(iv(nx::reshape(t, {6})), (V{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(iv(nx::reshape(t, {2, 3})), (V{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(iv(nx::flatten(t)), (V{0, 3, 1, 4, 2, 5}));
  // A stepped slice: columns 0 and 2 of a [3, 4].
  Tensor s = nx::slice(seq({3, 4}), {{}, {0, 4, 2}});  // [[0, 2], [4, 6], [8, 10]]
  EXPECT_EQ(iv(nx::reshape(s, {2, 3})), (V{0, 2, 4, 6, 8, 10}));
  // A flipped view.
  EXPECT_EQ(iv(nx::reshape(nx::flip(seq({2, 3}), {1}), {3, 2})), (V{2, 1, 0, 5, 4, 3}));
  // A broadcast view (stride 0) reshaped across the broadcast axis.
  Tensor b = nx::broadcast_to(nx::reshape(nx::arange(3), {3, 1}), {3, 2});
  EXPECT_EQ(iv(nx::reshape(b, {2, 3})), (V{0, 0, 1, 1, 2, 2}));
  // The source is unchanged.
  EXPECT_EQ(iv(t), (V{0, 3, 1, 4, 2, 5}));
}

TEST(Permute, TransposeAndPermute) {
  Tensor x = seq({2, 3, 4});
  auto at = [](int64_t i, int64_t j, int64_t k) { return i * 12 + j * 4 + k; };
  Tensor t = nx::transpose(x);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  V want;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) want.push_back(at(i, j, k));
  EXPECT_EQ(iv(t), want);
  Tensor p = nx::permute(x, {1, 2, 0});
  EXPECT_EQ(p.shape(), (Shape{3, 4, 2}));
  want.clear();
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 2; ++i) want.push_back(at(i, j, k));
  EXPECT_EQ(iv(p), want);
  EXPECT_EQ(iv(nx::permute(x, {-1, 0, 1})), iv(nx::permute(x, {2, 0, 1})));
  EXPECT_EQ(iv(nx::permute(x, {0, 1, 2})), iv(x));
  EXPECT_EQ(iv(nx::transpose(nx::transpose(x))), iv(x));
  EXPECT_EQ(nx::transpose(nx::scalar(nx::int32, 3)).shape(), Shape{});
  EXPECT_EQ(iv(nx::transpose(nx::arange(3))), (V{0, 1, 2}));
}

TEST(Broadcast, BroadcastTo) {
  EXPECT_EQ(iv(nx::broadcast_to(nx::arange(3), {2, 3})), (V{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(iv(nx::broadcast_to(seq({3, 1}), {3, 2})), (V{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(iv(nx::broadcast_to(nx::scalar(nx::int64, 7), {2, 2})), (V{7, 7, 7, 7}));
  EXPECT_EQ(nx::broadcast_to(nx::arange(1), {0}).shape(), (Shape{0}));
  EXPECT_EQ(nx::broadcast_to(seq({1, 3}), {2, 0, 3}).shape(), (Shape{2, 0, 3}));
  Tensor b = nx::broadcast_to(seq({2, 1, 2}), {2, 3, 2});
  EXPECT_EQ(iv(b), (V{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3}));
  // Broadcasting a non-contiguous view.
  EXPECT_EQ(iv(nx::broadcast_to(nx::transpose(seq({1, 3})), {3, 2})), (V{0, 0, 1, 1, 2, 2}));
}

TEST(Dims, ExpandSqueezeFlatten) {
  Tensor x = seq({2, 3});
  EXPECT_EQ(nx::expand_dims(x, 0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(nx::expand_dims(x, 1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(nx::expand_dims(x, 2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(nx::expand_dims(x, -1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(nx::unsqueeze(x, -3).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(iv(nx::unsqueeze(x, 1)), iv(x));
  EXPECT_EQ(nx::expand_dims(nx::scalar(nx::int64, 1), 0).shape(), (Shape{1}));
  Tensor y = nx::reshape(x, {1, 2, 1, 3, 1});
  EXPECT_EQ(nx::squeeze(y).shape(), (Shape{2, 3}));
  EXPECT_EQ(nx::squeeze(y, 2).shape(), (Shape{1, 2, 3, 1}));
  EXPECT_EQ(nx::squeeze(y, -1).shape(), (Shape{1, 2, 1, 3}));
  EXPECT_EQ(iv(nx::squeeze(y)), iv(x));
  EXPECT_EQ(nx::squeeze(nx::reshape(nx::arange(1), {1, 1})).shape(), Shape{});
  EXPECT_EQ(nx::flatten(nx::scalar(nx::float32, 2)).shape(), (Shape{1}));
  EXPECT_EQ(nx::flatten(seq({2, 0, 3})).shape(), (Shape{0}));
  EXPECT_EQ(iv(nx::flatten(nx::transpose(x))), (V{0, 3, 1, 4, 2, 5}));
}

TEST(Slice, OneDimensional) {
  Tensor x = nx::arange(10);
  using S = nx::Slice;
  auto sl = [&](S s) { return iv(nx::slice(x, {s})); };
  EXPECT_EQ(sl({2, 8, 3}), (V{2, 5}));
  EXPECT_EQ(sl({1, std::nullopt, 3}), (V{1, 4, 7}));  // step fits exactly
  EXPECT_EQ(sl({2, std::nullopt, 3}), (V{2, 5, 8}));  // last step runs past the end
  EXPECT_EQ(sl({std::nullopt, std::nullopt, 4}), (V{0, 4, 8}));
  EXPECT_EQ(sl({std::nullopt, std::nullopt, 20}), (V{0}));
  EXPECT_EQ(sl({-3, std::nullopt, 1}), (V{7, 8, 9}));
  EXPECT_EQ(sl({std::nullopt, -7, 1}), (V{0, 1, 2}));
  EXPECT_EQ(sl({5, 5, 1}), V{});
  EXPECT_EQ(sl({7, 3, 1}), V{});
  EXPECT_EQ(sl({10, std::nullopt, 1}), V{});
  EXPECT_EQ(sl({-10, 10, 1}), (V{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Negative steps (numpy: x[start:stop:-k]).
  EXPECT_EQ(sl({std::nullopt, std::nullopt, -1}), (V{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(sl({8, 2, -2}), (V{8, 6, 4}));
  EXPECT_EQ(sl({7, std::nullopt, -3}), (V{7, 4, 1}));
  EXPECT_EQ(sl({std::nullopt, 2, -3}), (V{9, 6, 3}));
  EXPECT_EQ(sl({std::nullopt, -7, -3}), (V{9, 6}));
  EXPECT_EQ(sl({-2, -5, -1}), (V{8, 7, 6}));
  EXPECT_EQ(sl({2, 8, -1}), V{});
  EXPECT_EQ(sl({0, std::nullopt, -1}), (V{0}));
  EXPECT_EQ(sl({std::nullopt, std::nullopt, -4}), (V{9, 5, 1}));
  EXPECT_EQ(sl({std::nullopt, std::nullopt, -20}), (V{9}));
  EXPECT_EQ(nx::slice(x, {{5, 5, 1}}).shape(), (Shape{0}));
  EXPECT_EQ(nx::slice(x, {}).shape(), (Shape{10}));
}

// numpy's x[start:stop:step] of arange(n) (PySlice_AdjustIndices: out-of-range bounds clamp),
// in 128-bit arithmetic so no step overflows.
V numpy_slice(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  auto adjust = [&](std::optional<int64_t> v, __int128 dflt) -> __int128 {
    if (!v) return dflt;
    __int128 i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  __int128 lo = adjust(start, step < 0 ? n - 1 : 0), hi = adjust(stop, step < 0 ? -1 : n);
  V out;
  for (__int128 i = lo; step > 0 ? i < hi : i > hi; i += step)
    out.push_back(static_cast<int64_t>(i));
  return out;
}

// Extreme steps (INT64_MIN has no int64 negation; INT64_MAX overflows start + step) and the
// extreme starts and stops rune accepts ([-n, n]), against numpy's rules: eager, and compiled
// (one program per step, holding every start/stop pair).
TEST(Slice, ExtremeStepsFollowNumpy) {
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(),
                    hi = std::numeric_limits<int64_t>::max();
  using O = std::optional<int64_t>;
  for (int64_t n : {0, 1, 5}) {
    Tensor x = nx::arange(n);
    std::vector<O> bounds = {std::nullopt, -n, 0, n};
    if (n > 1) bounds.insert(bounds.end(), {-1, 1, n - 1});
    for (int64_t step :
         {lo, lo + 1, int64_t{-2}, int64_t{-1}, int64_t{1}, int64_t{2}, hi - 1, hi}) {
      std::vector<std::pair<O, O>> pairs;
      for (O a : bounds)
        for (O b : bounds) pairs.push_back({a, b});
      auto where = [&](const std::pair<O, O>& p) {
        auto str = [](O v) { return v ? std::to_string(*v) : std::string("None"); };
        return "arange(" + std::to_string(n) + ")[" + str(p.first) + ":" + str(p.second) + ":" +
               std::to_string(step) + "]";
      };
      for (const auto& p : pairs)
        EXPECT_EQ(iv(nx::slice(x, {{p.first, p.second, step}})),
                  numpy_slice(n, p.first, p.second, step))
            << where(p);
      auto f = rune::jit([&](Tensor t) {
        std::vector<Tensor> r;
        for (const auto& p : pairs) r.push_back(nx::slice(t, {{p.first, p.second, step}}));
        return r;
      });
      std::vector<Tensor> got = f(x);
      ASSERT_EQ(got.size(), pairs.size());
      for (size_t k = 0; k < pairs.size(); ++k)
        EXPECT_EQ(iv(got[k]), numpy_slice(n, pairs[k].first, pairs[k].second, step))
            << "compiled " << where(pairs[k]);
    }
  }
  // The one-element results numpy gives for the extreme steps, spelled out.
  Tensor x = nx::arange(5);
  EXPECT_EQ(iv(nx::slice(x, {{std::nullopt, std::nullopt, lo}})), V{4});
  EXPECT_EQ(iv(nx::slice(x, {{std::nullopt, std::nullopt, hi}})), V{0});
  EXPECT_EQ(iv(nx::slice(x, {{5, -5, -1}})), (V{4, 3, 2, 1}));
  EXPECT_EQ(iv(nx::slice(x, {{-5, 5, -1}})), V{});
}

TEST(Slice, MultiDimensional) {
  Tensor m = seq({3, 4});  // [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
  using S = nx::Slice;
  S all{};
  EXPECT_EQ(iv(nx::slice(m, {{std::nullopt, std::nullopt, -1}, {1, std::nullopt, 2}})),
            (V{9, 11, 5, 7, 1, 3}));
  EXPECT_EQ(iv(nx::slice(m, {all, {std::nullopt, std::nullopt, -2}})), (V{3, 1, 7, 5, 11, 9}));
  EXPECT_EQ(iv(nx::slice(m, {{1, 3, 1}})), (V{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(iv(nx::slice(m, {{-1, std::nullopt, 1}, {-2, std::nullopt, 1}})), (V{10, 11}));
  EXPECT_EQ(nx::slice(m, {all, {2, 2, 1}}).shape(), (Shape{3, 0}));
  // Slicing a slice, and a transposed view.
  Tensor s = nx::slice(nx::slice(m, {{0, 3, 2}}), {all, {1, 4, 2}});  // rows 0, 2; cols 1, 3
  EXPECT_EQ(iv(s), (V{1, 3, 9, 11}));
  Tensor t = nx::slice(nx::transpose(m), {{1, std::nullopt, 2}, {std::nullopt, std::nullopt, -1}});
  EXPECT_EQ(iv(t), (V{9, 5, 1, 11, 7, 3}));
  // Three axes with steps on each.
  Tensor c = seq({4, 5, 6});
  V want;
  for (int i = 3; i >= 0; i -= 2)
    for (int j = 0; j < 5; j += 3)
      for (int k = 1; k < 6; k += 2) want.push_back(i * 30 + j * 6 + k);
  EXPECT_EQ(iv(nx::slice(c, {{std::nullopt, std::nullopt, -2}, {0, 5, 3}, {1, 6, 2}})), want);
}

TEST(Index, SelectsAndDropsTheAxis) {
  Tensor m = seq({3, 4});
  EXPECT_EQ(iv(nx::index(m, 0, 1)), (V{4, 5, 6, 7}));
  EXPECT_EQ(iv(nx::index(m, 0, -1)), (V{8, 9, 10, 11}));
  EXPECT_EQ(iv(nx::index(m, 1, 2)), (V{2, 6, 10}));
  EXPECT_EQ(iv(nx::index(m, -1, -4)), (V{0, 4, 8}));
  Tensor e = nx::index(nx::arange(5), 0, 3);
  EXPECT_EQ(e.shape(), Shape{});
  EXPECT_EQ(nx::item<int64_t>(e), 3);
  EXPECT_EQ(iv(nx::index(nx::transpose(m), 0, 1)), (V{1, 5, 9}));
  EXPECT_EQ(nx::index(seq({2, 0}), 0, 1).shape(), (Shape{0}));
}

TEST(Concatenate, AlongEachAxis) {
  Tensor a = seq({2, 2});                                      // [[0, 1], [2, 3]]
  Tensor b = nx::add(seq({1, 2}), nx::scalar(nx::int64, 10));  // [[10, 11]]
  EXPECT_EQ(iv(nx::concatenate({a, b})), (V{0, 1, 2, 3, 10, 11}));
  EXPECT_EQ(nx::concatenate({a, b}, 0).shape(), (Shape{3, 2}));
  Tensor c = nx::add(seq({2, 3}), nx::scalar(nx::int64, 20));  // [[20, 21, 22], [23, 24, 25]]
  EXPECT_EQ(iv(nx::concatenate({a, c}, 1)), (V{0, 1, 20, 21, 22, 2, 3, 23, 24, 25}));
  EXPECT_EQ(iv(nx::concatenate({c, a, a}, -1)),
            (V{20, 21, 22, 0, 1, 0, 1, 23, 24, 25, 2, 3, 2, 3}));
  // An empty part, a single part, non-contiguous parts, floats.
  EXPECT_EQ(iv(nx::concatenate({a, seq({0, 2}), b})), (V{0, 1, 2, 3, 10, 11}));
  EXPECT_EQ(iv(nx::concatenate({a})), iv(a));
  EXPECT_EQ(iv(nx::concatenate({nx::transpose(a), nx::flip(a, {0})}, 1)),
            (V{0, 2, 2, 3, 1, 3, 0, 1}));
  Tensor f = tensor(nx::float32, {2}, {-0.0, NAN});
  D r = dv(nx::concatenate({f, tensor(nx::float32, {1}, {1.5})}));
  EXPECT_TRUE(r[0] == 0 && std::signbit(r[0]));
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_EQ(r[2], 1.5);
  EXPECT_EQ(nx::concatenate({nx::arange(0), nx::arange(0)}).shape(), (Shape{0}));
}

TEST(Stack, NewAxis) {
  Tensor a = nx::arange(3), b = nx::add(nx::arange(3), nx::scalar(nx::int64, 10));
  EXPECT_EQ(nx::stack({a, b}).shape(), (Shape{2, 3}));
  EXPECT_EQ(iv(nx::stack({a, b})), (V{0, 1, 2, 10, 11, 12}));
  EXPECT_EQ(nx::stack({a, b}, 1).shape(), (Shape{3, 2}));
  EXPECT_EQ(iv(nx::stack({a, b}, 1)), (V{0, 10, 1, 11, 2, 12}));
  EXPECT_EQ(iv(nx::stack({a, b, a}, -1)), (V{0, 10, 0, 1, 11, 1, 2, 12, 2}));
  Tensor s = nx::stack({nx::scalar(nx::int64, 4), nx::scalar(nx::int64, 5)});
  EXPECT_EQ(s.shape(), (Shape{2}));
  EXPECT_EQ(iv(s), (V{4, 5}));
}

TEST(Pad, ZeroAndValue) {
  Tensor m = seq({2, 2});  // [[0, 1], [2, 3]]
  Tensor p = nx::pad(m, {{1, 0}, {0, 2}});
  EXPECT_EQ(p.shape(), (Shape{3, 4}));
  EXPECT_EQ(iv(p), (V{0, 0, 0, 0, 0, 1, 0, 0, 2, 3, 0, 0}));
  EXPECT_EQ(iv(nx::pad(m, {{0, 1}, {1, 1}}, 9)), (V{9, 0, 1, 9, 9, 2, 3, 9, 9, 9, 9, 9}));
  EXPECT_EQ(iv(nx::pad(m, {{0, 0}, {0, 0}}, 5)), iv(m));
  Tensor f = tensor(nx::float32, {3}, {1.5, -2, 0});
  EXPECT_EQ(dv(nx::pad(f, {{2, 1}}, -0.5)), (D{-0.5, -0.5, 1.5, -2, 0, -0.5}));
  // A zero inside the source stays zero when the pad value is not zero.
  EXPECT_EQ(dv(nx::pad(f, {{1, 1}}, 7)), (D{7, 1.5, -2, 0, 7}));
  D n = dv(nx::pad(f, {{0, 1}}, NAN));
  EXPECT_TRUE(std::isnan(n[3]));
  EXPECT_EQ(n[2], 0);
  // Padding a non-contiguous view, and an empty tensor.
  EXPECT_EQ(iv(nx::pad(nx::transpose(m), {{0, 1}, {0, 0}}, 4)), (V{0, 2, 1, 3, 4, 4}));
  EXPECT_EQ(iv(nx::pad(nx::arange(0), {{2, 1}}, 3)), (V{3, 3, 3}));
  EXPECT_EQ(nx::to_vector<bool>(nx::pad(tensor(nx::bool_, {1}, {1}), {{1, 1}})),
            (std::vector<bool>{false, true, false}));
}

TEST(Flip, Axes) {
  Tensor m = seq({2, 3});
  EXPECT_EQ(iv(nx::flip(m)), (V{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(iv(nx::flip(m, {0})), (V{3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(iv(nx::flip(m, {1})), (V{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(iv(nx::flip(m, {-1, 0})), (V{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(iv(nx::flip(nx::flip(m, {1}), {1})), iv(m));
  EXPECT_EQ(iv(nx::flip(nx::scalar(nx::int64, 3))), V{3});
  EXPECT_EQ(nx::flip(seq({0, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(iv(nx::flip(nx::transpose(m), {0})), (V{2, 5, 1, 4, 0, 3}));
}

TEST(Contiguous, CopiesViews) {
  Tensor t = nx::transpose(seq({2, 3}));
  Tensor c = nx::contiguous(t);
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  EXPECT_EQ(iv(c), (V{0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(c.impl().view.is_contiguous());
  EXPECT_NE(c.impl().buffer, t.impl().buffer);
  Tensor s = nx::contiguous(nx::slice(nx::arange(10), {{1, 10, 4}}));
  EXPECT_EQ(iv(s), (V{1, 5, 9}));
  EXPECT_TRUE(s.impl().view.is_contiguous());
  EXPECT_EQ(iv(nx::contiguous(nx::broadcast_to(nx::arange(2), {2, 2}))), (V{0, 1, 0, 1}));
  EXPECT_EQ(nx::contiguous(seq({0, 2})).shape(), (Shape{0, 2}));
  EXPECT_EQ(iv(nx::contiguous(nx::scalar(nx::int64, 8))), V{8});
}

// ---- chains of movement ops feeding compute ----

TEST(Chains, TransposeSliceReshapeAdd) {
  Tensor x = seq({4, 6});       // x[i][j] = 6i + j
  Tensor t = nx::transpose(x);  // [6, 4]: t[j][i] = 6i + j
  Tensor s = nx::slice(t, {{1, 6, 2}, {std::nullopt, std::nullopt, -1}});  // rows 1,3,5; cols 3..0
  Tensor r = nx::reshape(s, {2, 6});
  Tensor y = nx::add(r, nx::reshape(nx::arange(6), {1, 6}));
  V flat;
  for (int j : {1, 3, 5})
    for (int i = 3; i >= 0; --i) flat.push_back(6 * i + j);
  V want;
  for (int k = 0; k < 12; ++k) want.push_back(flat[k] + k % 6);
  EXPECT_EQ(iv(y), want);
  // x is untouched.
  V orig(24);
  for (int k = 0; k < 24; ++k) orig[k] = k;
  EXPECT_EQ(iv(x), orig);
}

TEST(Chains, FlipPadSumAndBroadcastMul) {
  Tensor x = tensor(nx::float64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor p = nx::pad(nx::flip(x, {1}), {{0, 1}, {1, 0}}, 10);  // [3, 4]
  // [[10, 3, 2, 1], [10, 6, 5, 4], [10, 10, 10, 10]]
  EXPECT_EQ(dv(p), (D{10, 3, 2, 1, 10, 6, 5, 4, 10, 10, 10, 10}));
  EXPECT_EQ(dv(nx::sum(p, {1})), (D{16, 25, 40}));
  EXPECT_EQ(dv(nx::sum(p, {0})), (D{30, 19, 17, 15}));
  // Columns 0 and 2 of x as rows: [[1, 4], [3, 6]]; outer product of their columns.
  Tensor col = nx::slice(nx::transpose(x), {{std::nullopt, std::nullopt, 2}});
  EXPECT_EQ(dv(col), (D{1, 4, 3, 6}));
  Tensor z =
      nx::mul(nx::expand_dims(nx::index(col, 1, 1), 0), nx::reshape(nx::index(col, 1, 0), {2, 1}));
  EXPECT_EQ(dv(z), (D{4, 6, 12, 18}));
}

TEST(Chains, ConcatenateStackOfViews) {
  Tensor x = seq({3, 3});                  // [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
  Tensor top = nx::slice(x, {{0, 3, 2}});  // rows 0, 2
  Tensor mid = nx::expand_dims(nx::flip(nx::index(x, 1, 1)), 0);  // [[7, 4, 1]]
  Tensor c = nx::concatenate({top, mid}, 0);
  EXPECT_EQ(iv(c), (V{0, 1, 2, 6, 7, 8, 7, 4, 1}));
  Tensor st = nx::stack({nx::index(x, 1, 0), nx::index(nx::transpose(x), 0, 2)}, 1);
  EXPECT_EQ(iv(st), (V{0, 2, 3, 5, 6, 8}));  // columns 0 and 2 side by side
  // Stacked then reduced and compared.
  EXPECT_EQ(iv(nx::sum(st, {1})), (V{2, 8, 14}));
  EXPECT_EQ(nx::to_vector<bool>(nx::greater(nx::index(st, 1, 1), nx::index(st, 1, 0))),
            (std::vector<bool>{true, true, true}));
}

// One element of a concatenation (pad + where) indexed down to rank 0 under rune::jit: the
// other part's mask is empty there, and a rank-0 view has no axis to carry it (ir::View::reshape
// copies instead). Fused, both elements read the second part (issue 37's randint of shape {}).
TEST(Chains, StackIndexedToAScalarUnderJit) {
  Tensor x = nx::create(nx::float32, {2}, {1, 2});
  for (int64_t j : {0, 1}) {
    auto f = [j](const Tensor& v) {
      return nx::index(nx::index(nx::stack({v + 1.0, v * 3.0}, 1), 0, 0), 0, j);
    };
    EXPECT_EQ(dv(f(x)), D{j == 0 ? 2.0 : 3.0}) << j;
    EXPECT_EQ(dv(rune::jit(f)(x)), D{j == 0 ? 2.0 : 3.0}) << j;
  }
}

}  // namespace
