// nx::nn::scaled_dot_product_attention (core/attention.h, docs/attention.md) against a float64
// loop written here from torch's formula, eagerly and under rune::jit on CPU, CPU:1 and the fake
// CUDA:0 (eager and compiled share their bits); against the unfused formula of nx ops (the same
// bits, forward and gradient); gradients against central differences of the loop, jvp against
// vjp, vmap against a loop; rows with no key to attend (zeros, zero gradients); dropout as
// nx::random::dropout of the weights; 16-bit floats; errors that name the API and the shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/attention.h"
#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"
#include "window_test_util.h"

namespace {

using namespace window_test;
using nx::nn::AttentionOptions;
using QKV = std::tuple<Tensor, Tensor, Tensor>;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

const double kInf = std::numeric_limits<double>::infinity();

Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o = {}) {
  return nx::nn::scaled_dot_product_attention(q, k, v, o);
}

// The loop: N independent problems, Q [N, Tq, D], K [N, Tk, D], V [N, Tk, Dv], keep and add
// [N, Tq, Tk] (keep: 1 attended, 0 masked). A row with no key left gives zeros (torch 2.5+).
std::vector<double> ref_attention(int64_t n, int64_t tq, int64_t tk, int64_t d, int64_t dv,
                                  const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const std::vector<double>& keep,
                                  const std::vector<double>& add, bool causal, double scale) {
  std::vector<double> out(static_cast<size_t>(n * tq * dv));
  std::vector<double> s(static_cast<size_t>(tk));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < tq; ++i) {
      double m = -kInf;
      for (int64_t j = 0; j < tk; ++j) {
        const size_t mi = static_cast<size_t>((b * tq + i) * tk + j);
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += q[(b * tq + i) * d + c] * k[(b * tk + j) * d + c];
        double x = dot * scale + add[mi];
        if (keep[mi] == 0 || (causal && j > i)) x = -kInf;
        s[j] = x;
        m = std::max(m, x);
      }
      if (m == -kInf) continue;  // no key: zeros
      double z = 0;
      for (int64_t j = 0; j < tk; ++j) z += (s[j] = std::exp(s[j] - m));
      for (int64_t c = 0; c < dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < tk; ++j) acc += s[j] / z * v[(b * tk + j) * dv + c];
        out[(b * tq + i) * dv + c] = acc;
      }
    }
  return out;
}

struct Case {
  std::string name;
  Shape qs, ks, vs;
  bool causal = false;
  // The mask on the host (bool or float64), or none.
  std::function<std::optional<Tensor>()> mask = [] { return std::nullopt; };
  std::optional<double> scale;
  bool gqa = false;
  bool dead_rows = false;  // some query row attends to no key
};

void expect_near(const std::string& name, const Tensor& t, const Shape& shape,
                 const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(t.shape(), shape) << name;
  auto got = nx::to_array(host(t));
  ASSERT_EQ(got.size(), want.size()) << name;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i])))
        << name << " element " << i;
}

Tensor bool_mask(const Shape& s, uint64_t seed) {
  auto v = values(s, seed, 4);
  for (double& x : v) x = x != 0;  // 3 in 4 attended
  return nx::cast(f64(s, v), nx::bool_);
}

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"plain [B, H, T, D]", {2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 6, 3}});
  c.push_back({"3-D", {2, 5, 4}, {2, 5, 4}, {2, 5, 4}});
  c.push_back({"2-D, scale 0.3", {3, 4}, {5, 4}, {5, 2}, false, [] { return std::nullopt; }, 0.3});
  c.push_back({"causal Tq = Tk", {2, 2, 5, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}, true});
  c.push_back({"causal Tq < Tk", {1, 2, 3, 4}, {1, 2, 6, 4}, {1, 2, 6, 4}, true});
  c.push_back({"causal Tq > Tk", {1, 2, 6, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}, true});
  c.push_back({"padding mask [B, 1, 1, Tk]", {2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}, false, [] {
                 return std::optional<Tensor>(
                     nx::cast(f64({2, 1, 1, 5}, {1, 1, 1, 0, 0, 1, 1, 1, 1, 0}), nx::bool_));
               }});
  c.push_back({"float mask [Tq, Tk]", {2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}, false, [] {
                 return std::optional<Tensor>(f64({3, 5}, values({3, 5}, 77)));
               }});
  c.push_back(
      {"bool mask [B, H, Tq, Tk] with causal", {2, 2, 4, 3}, {2, 2, 4, 3}, {2, 2, 4, 3}, true, [] {
         return std::optional<Tensor>(bool_mask({2, 2, 4, 4}, 78));
       }});
  c.push_back({"rows with no key (bool)",
               {2, 3, 4},
               {2, 5, 4},
               {2, 5, 4},
               false,
               [] {
                 auto v = std::vector<double>(15, 1);
                 for (int j = 0; j < 5; ++j) v[5 + j] = 0;  // query 1 sees nothing
                 return std::optional<Tensor>(nx::cast(f64({3, 5}, v), nx::bool_));
               },
               std::nullopt,
               false,
               true});
  c.push_back({"rows with no key (float -inf) and causal",
               {1, 3, 4},
               {1, 3, 4},
               {1, 3, 4},
               true,
               [] {
                 // Row 0 sees key 0 only (causal), masked by -inf; row 2 keeps key 1.
                 return std::optional<Tensor>(
                     f64({3, 3}, {-kInf, 0.5, 0, 0.25, -kInf, 1, -kInf, 0, -kInf}));
               },
               std::nullopt,
               false,
               true});
  c.push_back({"no keys (Tk = 0)",
               {2, 3, 4},
               {2, 0, 4},
               {2, 0, 5},
               false,
               [] { return std::nullopt; },
               std::nullopt,
               false,
               true});
  c.push_back({"broadcast batch (k, v batch 1)", {3, 2, 4, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}});
  c.push_back({"grouped heads (enable_gqa)",
               {2, 6, 3, 4},
               {2, 2, 5, 4},
               {2, 2, 5, 3},
               false,
               [] {
                 return std::optional<Tensor>(bool_mask({2, 6, 3, 5}, 79));
               },
               std::nullopt,
               true});
  return c;
}

// Shape s without its last two axes.
Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// A case's problems as the loop takes them: for each element of the broadcast Q [N, Tq, D], K,
// V [N, Tk, D(v)] (grouped heads repeated) and masks [N, Tq, Tk], the index of the input element
// it is (found by broadcasting arange tensors through the same nx ops once).
struct Expanded {
  int64_t n = 1, tq = 0, tk = 0, d = 0, dv = 0;
  std::vector<double> qi, ki, vi, keep, add;
  double scale = 1;
};

Expanded expand(const Case& c) {
  Expanded e;
  e.tq = c.qs[c.qs.size() - 2], e.tk = c.ks[c.ks.size() - 2], e.d = c.qs.back(), e.dv = c.vs.back();
  auto arange = [](const Shape& s) {
    return host(nx::reshape(nx::arange(nx::float64, 0, static_cast<double>(ir::numel(s))), s));
  };
  Tensor kk = arange(c.ks), vv = arange(c.vs);
  if (c.gqa) {  // repeat each key head g times in place, as torch's repeat_interleave
    const int64_t g = c.qs[c.qs.size() - 3] / c.ks[c.ks.size() - 3];
    auto rep = [g](const Tensor& t) {
      std::vector<Tensor> heads;
      for (int64_t h = 0; h < t.shape()[t.ndim() - 3]; ++h)
        for (int64_t r = 0; r < g; ++r) heads.push_back(nx::slice(t, {{}, {h, h + 1}}));
      return nx::concatenate(heads, t.ndim() - 3);
    };
    kk = rep(kk), vv = rep(vv);
  }
  Shape batch = *ir::broadcast_shapes(batch_of(c.qs), batch_of(kk.shape()));
  for (int64_t b : batch) e.n *= b;
  auto full = [&](const Tensor& t, int64_t rows, int64_t cols) {
    Shape s = batch;
    s.insert(s.end(), {rows, cols});
    return nx::to_array(nx::broadcast_to(t, s));
  };
  e.qi = full(arange(c.qs), e.tq, e.d), e.ki = full(kk, e.tk, e.d), e.vi = full(vv, e.tk, e.dv);
  e.keep.assign(static_cast<size_t>(e.n * e.tq * e.tk), 1);
  e.add.assign(e.keep.size(), 0);
  if (auto m = c.mask()) (m->dtype() == nx::bool_ ? e.keep : e.add) = full(*m, e.tq, e.tk);
  e.scale = c.scale ? *c.scale : 1 / std::sqrt(static_cast<double>(e.d));
  return e;
}

std::vector<double> reference(const Case& c, const Expanded& e, const std::vector<double>& q,
                              const std::vector<double>& k, const std::vector<double>& v) {
  auto gather = [](const std::vector<double>& from, const std::vector<double>& at) {
    std::vector<double> r(at.size());
    for (size_t i = 0; i < at.size(); ++i) r[i] = from[static_cast<size_t>(at[i])];
    return r;
  };
  return ref_attention(e.n, e.tq, e.tk, e.d, e.dv, gather(q, e.qi), gather(k, e.ki),
                       gather(v, e.vi), e.keep, e.add, c.causal, e.scale);
}

// The loop's answer for a case (inputs on the host, float64).
std::vector<double> reference(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v) {
  return reference(c, expand(c), nx::to_array(q), nx::to_array(k), nx::to_array(v));
}

// The textbook formula (torch's documentation), for cases where every row attends to a key.
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const int r = k.ndim();
  nx::Axes p;
  for (int i = 0; i < r; ++i) p.push_back(i);
  std::swap(p[r - 1], p[r - 2]);
  const double scale = o.scale ? *o.scale : 1 / std::sqrt(static_cast<double>(q.shape().back()));
  Tensor s = nx::matmul(q, nx::permute(k, p)) * scale;
  const int64_t tq = q.shape()[q.ndim() - 2], tk = k.shape()[r - 2];
  if (o.mask && o.mask->dtype() != nx::bool_) s = s + *o.mask;
  if (o.causal)
    s = nx::where(
        nx::place(nx::less_equal(nx::iota({tq, tk}, 1), nx::iota({tq, tk}, 0)), s.device()), s,
        nx::scalar_like(s, -kInf));
  if (o.mask && o.mask->dtype() == nx::bool_) s = nx::where(*o.mask, s, nx::scalar_like(s, -kInf));
  Tensor w = nx::softmax(s, -1);
  if (o.dropout > 0) w = nx::random::dropout(*o.dropout_key, w, o.dropout);
  return nx::matmul(w, v);
}

class Attention : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
  AttentionOptions options(const Case& c) const {
    AttentionOptions o{.causal = c.causal, .scale = c.scale, .enable_gqa = c.gqa};
    if (auto m = c.mask()) o.mask = on(*m);
    return o;
  }
};

TEST_P(Attention, MatchesTheLoopEagerAndCompiled) {
  uint64_t seed = 1;
  const bool gpu = std::string(GetParam()) == "CUDA:0";
  int i = 0;
  for (const Case& c : cases()) {
    // The fake GPU compiles each kernel with the host compiler: half the cases there (the
    // masked ones among them) keep the test to seconds.
    if (gpu && i++ % 2 == 1) continue;
    Tensor q = f64(c.qs, values(c.qs, seed++)), k = f64(c.ks, values(c.ks, seed++));
    Tensor v = f64(c.vs, values(c.vs, seed++));
    const AttentionOptions o = options(c);
    auto f = [o](const Tensor& q, const Tensor& k, const Tensor& v) { return sdpa(q, k, v, o); };
    Tensor eager = f(on(q), on(k), on(v));
    EXPECT_EQ(eager.device(), on(q).device()) << c.name;
    expect_near(c.name, eager, eager.shape(), reference(c, q, k, v));
    EXPECT_EQ(eager.shape()[eager.ndim() - 1], c.vs.back()) << c.name;
    EXPECT_EQ(eager.shape()[eager.ndim() - 2], c.qs[c.qs.size() - 2]) << c.name;
    EXPECT_EQ(bits(rune::jit(f)(on(q), on(k), on(v))), bits(eager)) << c.name << " compiled";
    // The same bits as the textbook formula where every row has a key (torch's value).
    if (!c.dead_rows && !c.gqa) {
      EXPECT_EQ(bits(unfused(on(q), on(k), on(v), o)), bits(eager)) << c.name << " unfused";
    }
  }
}

// Rows with no key to attend: zeros, and no gradient reaches q, k or v through them (the plain
// softmax gives NaN for both).
TEST_P(Attention, RowsWithNoKeyGiveZerosAndZeroGradients) {
  Tensor q = on(f64({1, 2, 3}, values({1, 2, 3}, 30))),
         k = on(f64({1, 4, 3}, values({1, 4, 3}, 31)));
  Tensor v = on(f64({1, 4, 2}, values({1, 4, 2}, 32)));
  AttentionOptions o{.mask = on(nx::cast(f64({2, 4}, {1, 0, 1, 1, 0, 0, 0, 0}), nx::bool_))};
  Tensor y = sdpa(q, k, v, o);
  auto yv = nx::to_array(host(y));
  EXPECT_EQ(yv[2], 0.0);
  EXPECT_EQ(yv[3], 0.0);
  EXPECT_TRUE(std::isnan(nx::to_array(host(unfused(q, k, v, o)))[2])) << "the plain formula";
  auto [gq, gk, gv] = rune::grad(
      [&](const Tensor& q, const Tensor& k, const Tensor& v) { return nx::sum(sdpa(q, k, v, o)); },
      rune::argnums<0, 1, 2>)(q, k, v);
  auto gqv = nx::to_array(host(gq));
  for (int i = 3; i < 6; ++i) EXPECT_EQ(gqv[i], 0.0) << "d/dq of the dead row, element " << i;
  for (double g : nx::to_array(host(gk))) EXPECT_TRUE(std::isfinite(g));
  // v's gradient is the weights' column sums: keys 0, 2, 3 of row 0 only; key 1 gets nothing.
  auto gvv = nx::to_array(host(gv));
  EXPECT_EQ(gvv[2], 0.0);
  EXPECT_EQ(gvv[3], 0.0);
}

// Dropout is nx::random::dropout of the weights with the given key: the formula's bits, eager and
// compiled; rate 0 is no dropout.
TEST_P(Attention, DropoutDropsTheWeights) {
  const Shape s{2, 2, 6, 4};
  Tensor q = on(f64(s, values(s, 40))), k = on(f64(s, values(s, 41))),
         v = on(f64(s, values(s, 42)));
  Tensor key = on(nx::random::key(7));
  AttentionOptions o{.causal = true, .dropout = 0.25, .dropout_key = key};
  auto f = [o](const Tensor& q, const Tensor& k, const Tensor& v) { return sdpa(q, k, v, o); };
  Tensor y = f(q, k, v);
  EXPECT_EQ(bits(y), bits(unfused(q, k, v, o)));
  EXPECT_EQ(bits(rune::jit(f)(q, k, v)), bits(y)) << "compiled";
  EXPECT_NE(bits(y), bits(sdpa(q, k, v, {.causal = true}))) << "dropout changed nothing";
  EXPECT_EQ(bits(sdpa(q, k, v, {.causal = true, .dropout = 0, .dropout_key = key})),
            bits(sdpa(q, k, v, {.causal = true})));
}

// The gradients on the device and compiled have the host's eager bits; they equal the unfused
// formula's bits.
TEST_P(Attention, GradientsOnTheDeviceHaveTheHostsBitsAndTheFormulas) {
  const Shape qs{2, 2, 5, 4}, vs{2, 2, 6, 3}, ks{2, 2, 6, 4};
  Tensor q = f64(qs, values(qs, 50)), k = f64(ks, values(ks, 51)), v = f64(vs, values(vs, 52));
  Tensor mask = f64({5, 6}, values({5, 6}, 53)), r = f64({2, 2, 5, 3}, values({2, 2, 5, 3}, 54));
  auto grads = [](bool formula) {
    return [formula](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                     const Tensor& r) {
      AttentionOptions o{.causal = true, .mask = mask};
      auto [gq, gk, gv] = rune::grad(
          [&](const Tensor& q, const Tensor& k, const Tensor& v) {
            return nx::sum(nx::sin(formula ? unfused(q, k, v, o) : sdpa(q, k, v, o)) * r);
          },
          rune::argnums<0, 1, 2>)(q, k, v);
      return nx::concatenate({nx::flatten(gq), nx::flatten(gk), nx::flatten(gv)});
    };
  };
  const std::string want = bits(grads(false)(q, k, v, mask, r));
  EXPECT_EQ(bits(grads(true)(q, k, v, mask, r)), want) << "the unfused formula";
  EXPECT_EQ(bits(grads(false)(on(q), on(k), on(v), on(mask), on(r))), want) << "eager on device";
  EXPECT_EQ(bits(rune::jit(grads(false))(on(q), on(k), on(v), on(mask), on(r))), want)
      << "compiled on " << GetParam();
}

// vmap over a leading axis equals a loop of calls.
TEST_P(Attention, VmapMatchesALoop) {
  const Shape qs{3, 2, 4, 4}, ks{3, 2, 5, 4};
  Tensor q = on(f64(qs, values(qs, 60))), k = on(f64(ks, values(ks, 61)));
  Tensor v = on(f64(ks, values(ks, 62)));
  Tensor mask = on(bool_mask({4, 5}, 63));
  auto f = [mask](const Tensor& q, const Tensor& k, const Tensor& v) {
    return sdpa(q, k, v, {.causal = true, .mask = mask});
  };
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < qs[0]; ++i)
    rows.push_back(f(nx::index(q, 0, i), nx::index(k, 0, i), nx::index(v, 0, i)));
  EXPECT_EQ(bits(rune::vmap(f)(q, k, v)), bits(nx::stack(rows)));
  // k and v shared across the mapped axis.
  rows.clear();
  Tensor k0 = nx::index(k, 0, 0), v0 = nx::index(v, 0, 0);
  for (int64_t i = 0; i < qs[0]; ++i) rows.push_back(f(nx::index(q, 0, i), k0, v0));
  EXPECT_EQ(bits(rune::vmap(f, {0, rune::none, rune::none})(q, k0, v0)), bits(nx::stack(rows)));
}

// 16-bit floats compute at float32 and round once: within the dtype's rounding of the loop on
// the rounded inputs.
TEST_P(Attention, SixteenBitFloatsRoundOnce) {
  const Shape qs{2, 4, 8}, ks{2, 6, 8};
  for (nx::DType t : {nx::float16, nx::bfloat16}) {
    Tensor q = nx::cast(f64(qs, values(qs, 70)), t), k = nx::cast(f64(ks, values(ks, 71)), t);
    Tensor v = nx::cast(f64(ks, values(ks, 72)), t);
    Case c{"16-bit", qs, ks, ks, true};
    Tensor y = sdpa(on(q), on(k), on(v), {.causal = true});
    EXPECT_EQ(y.dtype(), t);
    const double tol = t == nx::float16 ? 1e-3 : 8e-3;  // half an ulp at 1, and some
    expect_near(
        rt::dname(t), y, {2, 4, 8},
        reference(c, nx::cast(q, nx::float64), nx::cast(k, nx::float64), nx::cast(v, nx::float64)),
        tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Attention, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

// Causal attention over more than 128 queries runs as blocks of 128 query rows (two here), each
// reading the keys its rows may see: the formula's bits, eagerly and compiled on every device, with
// masks, Tq != Tk and rows with no key; the gradient with respect to q keeps its bits, those of k
// and v (summed over the blocks) are within rounding.
TEST(AttentionRowBlocks, KeepTheFormulasBits) {
  std::vector<Case> cs;
  cs.push_back(
      {"Tq 200 > Tk 150, padding", {2, 1, 200, 8}, {2, 1, 150, 8}, {2, 1, 150, 4}, true, [] {
         std::vector<double> m(300, 1);
         for (int j = 100; j < 150; ++j) m[150 + j] = 0;  // batch 1 has 100 keys
         return std::optional<Tensor>(nx::cast(f64({2, 1, 1, 150}, m), nx::bool_));
       }});
  cs.push_back(
      {"Tq 160 < Tk 300, float mask", {1, 1, 160, 8}, {1, 1, 300, 8}, {1, 1, 300, 8}, true, [] {
         return std::optional<Tensor>(f64({160, 300}, values({160, 300}, 5)));
       }});
  cs.push_back({"rows with no key",
                {1, 1, 140, 4},
                {1, 1, 140, 4},
                {1, 1, 140, 4},
                true,
                [] {
                  std::vector<double> m(140, 1);
                  m[0] = m[130] = 0;  // key 0 hidden: query 0 sees nothing
                  return std::optional<Tensor>(nx::cast(f64({140}, m), nx::bool_));
                },
                std::nullopt,
                false,
                true});
  uint64_t seed = 300;
  for (const Case& c : cs) {
    Tensor q = f64(c.qs, values(c.qs, seed++)), k = f64(c.ks, values(c.ks, seed++));
    Tensor v = f64(c.vs, values(c.vs, seed++));
    AttentionOptions o{.causal = true, .mask = c.mask()};
    auto f = [o](const Tensor& q, const Tensor& k, const Tensor& v) { return sdpa(q, k, v, o); };
    Tensor y = f(q, k, v);
    expect_near(c.name, y, y.shape(), reference(c, q, k, v));
    if (!c.dead_rows) {
      EXPECT_EQ(bits(y), bits(unfused(q, k, v, o))) << c.name;
    }
    EXPECT_EQ(bits(rune::jit(f)(q, k, v)), bits(y)) << c.name << " compiled";
  }
  // Every device, compiled, and the gradients.
  const Case& c = cs[0];
  Tensor q = f64(c.qs, values(c.qs, 1)), k = f64(c.ks, values(c.ks, 2)),
         v = f64(c.vs, values(c.vs, 3));
  Tensor r = f64({2, 1, 200, 4}, values({2, 1, 200, 4}, 4));
  AttentionOptions o{.causal = true, .mask = c.mask()};
  auto f = [o](const Tensor& q, const Tensor& k, const Tensor& v) { return sdpa(q, k, v, o); };
  const std::string want = bits(f(q, k, v));
  for (const char* d : {"CPU:1", "CUDA:0"}) {
    AttentionOptions od = o;
    od.mask = nx::place(*o.mask, d);
    auto fd = [od](const Tensor& q, const Tensor& k, const Tensor& v) { return sdpa(q, k, v, od); };
    EXPECT_EQ(bits(rune::jit(fd)(nx::place(q, d), nx::place(k, d), nx::place(v, d))), want) << d;
  }
  auto grads = [&](bool formula) {
    return rune::grad(
        [&](const Tensor& q, const Tensor& k, const Tensor& v) {
          return nx::sum((formula ? unfused(q, k, v, o) : sdpa(q, k, v, o)) * r);
        },
        rune::argnums<0, 1, 2>)(q, k, v);
  };
  auto [gq, gk, gv] = grads(false);
  auto [fq, fk, fv] = grads(true);
  EXPECT_EQ(bits(gq), bits(fq));
  expect_near("d/dk", gk, gk.shape(), nx::to_array(fk), 1e-13);
  expect_near("d/dv", gv, gv.shape(), nx::to_array(fv), 1e-13);
}

// Compiled on the host, attention is one attention kernel (codegen/cpu/attention.h: blocks of
// query rows, the scores and weights in per-thread tiles): the bits of the eager formula, whose
// scores and weights are whole buffers between separate programs, and of CPU:1 and the fake
// CUDA:0 (one GPU kernel there: codegen/lower/attention.cpp), float32 and float64, causal or
// not, with bool and float masks, T not a multiple of the kernel's row blocks (512 KiB tiles: 1100 float32 keys take blocks of
// 120 rows, 700 queries 6 of them; float64 blocks of 60 rows; causal attention's blocks of 128
// queries over 700 float64 keys take 2 of 72 rows and 56).
TEST(AttentionFused, HasTheUnfusedBits) {
  struct F {
    std::string name;
    Shape qs, ks, vs;
    bool causal;
    std::optional<Tensor> mask;
  };
  std::vector<double> pad(2 * 1100, 1);
  for (int j = 900; j < 1100; ++j) pad[1100 + j] = 0;  // batch 1 sees 900 keys
  const std::vector<F> fs = {
      {"700 x 1100", {2, 2, 700, 4}, {2, 2, 1100, 4}, {2, 2, 1100, 5}, false, std::nullopt},
      {"300 x 1100, padding",
       {2, 1, 300, 4},
       {2, 1, 1100, 4},
       {2, 1, 1100, 3},
       false,
       nx::cast(f64({2, 1, 1, 1100}, pad), nx::bool_)},
      {"causal 700 x 700, float mask",
       {1, 1, 700, 4},
       {1, 1, 700, 4},
       {1, 1, 700, 4},
       true,
       f64({700, 700}, values({700, 700}, 9))},
      {"causal 37 x 37", {3, 37, 16}, {3, 37, 16}, {3, 37, 16}, true, std::nullopt},
  };
  uint64_t seed = 600;
  for (nx::DType t : {nx::float32, nx::float64})
    for (const F& c : fs) {
      const std::string name = c.name + " " + std::string(ir::name(t));
      Tensor q = nx::cast(f64(c.qs, values(c.qs, seed++)), t);
      Tensor k = nx::cast(f64(c.ks, values(c.ks, seed++)), t);
      Tensor v = nx::cast(f64(c.vs, values(c.vs, seed++)), t);
      std::optional<Tensor> mask = c.mask;
      if (mask && mask->dtype() != nx::bool_) mask = nx::cast(*mask, t);
      auto f_on = [&](const char* d) {
        AttentionOptions o{.causal = c.causal};
        if (mask) o.mask = nx::place(*mask, d);
        return [o](const Tensor& q, const Tensor& k, const Tensor& v) { return sdpa(q, k, v, o); };
      };
      const std::string eager = bits(f_on("CPU")(q, k, v));
      EXPECT_EQ(bits(rune::jit(f_on("CPU"))(q, k, v)), eager) << name << " compiled";
      for (const char* d : {"CPU:1", "CUDA:0"}) {
        // The fake GPU runs its kernels as compiled C on the host, a product of 700 x 1100
        // scores in a second: float32's smaller cases only.
        if (std::string(d) == "CUDA:0" && (t == nx::float64 || c.qs[c.qs.size() - 2] >= 700))
          continue;
        EXPECT_EQ(bits(rune::jit(f_on(d))(nx::place(q, d), nx::place(k, d), nx::place(v, d))),
                  eager)
            << name << " compiled on " << d;
      }
    }
}

// The gradient program compiled on the host runs the backward pass as one attention gradient
// kernel (codegen/cpu/attention_gradient.h: per batch element, blocks of query rows in order,
// S and P computed again, dP, dS and the like in per-thread tiles, k's and v's gradients
// continuing their fma chains over the blocks) beside the fused forward kernel: the bits of
// the eager gradient (each op its own program, every [.., Tq, Tk] value a whole buffer), of
// CPU:1 and of the fake CUDA:0 (the unfused kernels there), float32 and float64, causal or not,
// bool and float masks, rows with no key, Tq not a multiple of the blocks (1 MiB of tiles per
// block: 1100 float32 keys take blocks of 48 rows or so, 130 queries 3 of them), causal
// attention over 300 queries (three causal blocks of 128, each its own pair of kernels).
TEST(AttentionFusedGradient, HasTheUnfusedBits) {
  struct F {
    std::string name;
    Shape qs, ks, vs;
    bool causal;
    std::optional<Tensor> mask;
    bool gpu;  // also on the fake CUDA:0 (small cases: it runs compiled C on the host)
  };
  std::vector<double> pad(2 * 1100, 1);
  for (int j = 900; j < 1100; ++j) pad[1100 + j] = 0;  // batch 1 sees 900 keys
  std::vector<double> dead(2 * 9 * 11, 1);
  for (int j = 0; j < 11; ++j) dead[(9 + 4) * 11 + j] = 0;  // batch 1, query 4: no key
  const std::vector<F> fs = {
      {"130 x 1100", {2, 2, 130, 4}, {2, 2, 1100, 4}, {2, 2, 1100, 5}, false, std::nullopt, false},
      {"50 x 1100, padding",
       {2, 1, 50, 4},
       {2, 1, 1100, 4},
       {2, 1, 1100, 3},
       false,
       nx::cast(f64({2, 1, 1, 1100}, pad), nx::bool_),
       false},
      {"causal 300 x 300, float mask",
       {1, 1, 300, 4},
       {1, 1, 300, 4},
       {1, 1, 300, 4},
       true,
       f64({300, 300}, values({300, 300}, 9)),
       false},
      {"causal 37 x 37", {3, 37, 16}, {3, 37, 16}, {3, 37, 16}, true, std::nullopt, true},
      {"9 x 11, a row with no key",
       {2, 9, 3},
       {2, 11, 3},
       {2, 11, 2},
       false,
       nx::cast(f64({2, 9, 11}, dead), nx::bool_),
       true},
  };
  uint64_t seed = 700;
  for (nx::DType t : {nx::float32, nx::float64})
    for (const F& c : fs) {
      const std::string name = c.name + " " + std::string(ir::name(t));
      Tensor q = nx::cast(f64(c.qs, values(c.qs, seed++)), t);
      Tensor k = nx::cast(f64(c.ks, values(c.ks, seed++)), t);
      Tensor v = nx::cast(f64(c.vs, values(c.vs, seed++)), t);
      Shape ys = c.qs;
      ys.back() = c.vs.back();
      Tensor dy = nx::cast(f64(ys, values(ys, seed++)), t);
      std::optional<Tensor> mask = c.mask;
      if (mask && mask->dtype() != nx::bool_) mask = nx::cast(*mask, t);
      auto f_on = [&](const char* d) {
        AttentionOptions o{.causal = c.causal};
        if (mask) o.mask = nx::place(*mask, d);
        return [o](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dy) {
          auto f = [&](const QKV& x) {
            return sdpa(std::get<0>(x), std::get<1>(x), std::get<2>(x), o);
          };
          auto [y, ct] = rune::vjp(f, QKV{q, k, v}, dy);
          return std::make_tuple(y, std::get<0>(ct), std::get<1>(ct), std::get<2>(ct));
        };
      };
      auto all_bits = [](const std::tuple<Tensor, Tensor, Tensor, Tensor>& r) {
        return std::vector<std::string>{bits(std::get<0>(r)), bits(std::get<1>(r)),
                                        bits(std::get<2>(r)), bits(std::get<3>(r))};
      };
      const auto eager = all_bits(f_on("CPU")(q, k, v, dy));
      EXPECT_EQ(all_bits(rune::jit(f_on("CPU"))(q, k, v, dy)), eager) << name << " compiled";
      for (const char* d : {"CPU:1", "CUDA:0"}) {
        if (std::string(d) == "CUDA:0" && !c.gpu) continue;
        EXPECT_EQ(all_bits(rune::jit(f_on(d))(nx::place(q, d), nx::place(k, d), nx::place(v, d),
                                              nx::place(dy, d))),
                  eager)
            << name << " compiled on " << d;
      }
    }
}

// A gradient whose dy depends on y, through a layer after the attention. With tanh alone the
// backward pass still runs with the forward as one kernel (dy is the epilogue of y's product,
// one of its parts). With a linear layer (y w) between, it cannot: the backward pass is an
// attention gradient kernel of its own that computes S and P again (the forward's kernels, so
// their bits), after the forward pass's kernel, which writes y and the softmax's row values
// the backward reads. The bits of the eager gradient, CPU:1 and the fake CUDA:0, causal or not,
// Tq not a multiple of the blocks.
TEST(AttentionFusedGradient, ThroughALaterLayerHasTheUnfusedBits) {
  struct F {
    std::string name;
    Shape qs, ks;
    bool causal;
    bool gpu;
  };
  const std::vector<F> fs = {
      {"130 x 1100", {2, 2, 130, 4}, {2, 2, 1100, 4}, false, false},
      {"causal 37 x 37", {3, 37, 16}, {3, 37, 16}, true, true},
  };
  uint64_t seed = 800;
  for (bool linear : {false, true})
    for (nx::DType t : {nx::float32, nx::float64})
      for (const F& c : fs) {
        const std::string name =
            c.name + " " + std::string(ir::name(t)) + (linear ? " linear" : " tanh");
        Tensor q = nx::cast(f64(c.qs, values(c.qs, seed++)), t);
        Tensor k = nx::cast(f64(c.ks, values(c.ks, seed++)), t);
        Tensor v = nx::cast(f64(c.ks, values(c.ks, seed++)), t);
        Tensor r = nx::cast(f64(c.qs, values(c.qs, seed++)), t);
        const int64_t dv = c.ks.back();
        Tensor w = nx::cast(f64({dv, dv}, values({dv, dv}, seed++)), t);
        auto f = [o = AttentionOptions{.causal = c.causal}, linear](
                     const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r,
                     const Tensor& w) {
          return rune::grad(
              [&](const Tensor& q, const Tensor& k, const Tensor& v) {
                Tensor y = sdpa(q, k, v, o);
                return nx::sum(nx::tanh(linear ? nx::matmul(y, w) : y) * r);
              },
              rune::argnums<0, 1, 2>)(q, k, v);
        };
        auto all_bits = [](const std::tuple<Tensor, Tensor, Tensor>& g) {
          return std::vector<std::string>{bits(std::get<0>(g)), bits(std::get<1>(g)),
                                          bits(std::get<2>(g))};
        };
        const auto eager = all_bits(f(q, k, v, r, w));
        EXPECT_EQ(all_bits(rune::jit(f)(q, k, v, r, w)), eager) << name << " compiled";
        for (const char* d : {"CPU:1", "CUDA:0"}) {
          if (std::string(d) == "CUDA:0" && !c.gpu) continue;
          EXPECT_EQ(all_bits(rune::jit(f)(nx::place(q, d), nx::place(k, d), nx::place(v, d),
                                          nx::place(r, d), nx::place(w, d))),
                    eager)
              << name << " compiled on " << d;
        }
      }
}

// ---- gradients (float64, on the host) ----

// rune::grad of sum(sdpa(q, k, v) * r) against central differences of the loop, for every case.
TEST(AttentionGrad, AgainstCentralDifferences) {
  uint64_t seed = 100;
  for (const Case& c : cases()) {
    std::vector<std::vector<double>> x{values(c.qs, seed), values(c.ks, seed + 1),
                                       values(c.vs, seed + 2)};
    const Expanded e = expand(c);
    seed += 3;
    AttentionOptions o{.causal = c.causal, .scale = c.scale, .enable_gqa = c.gqa};
    o.mask = c.mask();
    Tensor y = sdpa(f64(c.qs, x[0]), f64(c.ks, x[1]), f64(c.vs, x[2]), o);
    auto rv = values(y.shape(), seed++);
    Tensor r = f64(y.shape(), rv);
    auto [gq, gk, gv] =
        rune::grad([&](const Tensor& q, const Tensor& k,
                       const Tensor& v) { return nx::sum(sdpa(q, k, v, o) * r); },
                   rune::argnums<0, 1, 2>)(f64(c.qs, x[0]), f64(c.ks, x[1]), f64(c.vs, x[2]));
    const std::vector<double> got[3] = {nx::to_array(gq), nx::to_array(gk), nx::to_array(gv)};
    for (size_t which = 0; which < 3; ++which)
      for (size_t i = 0; i < x[which].size(); ++i) {
        auto w = x;
        const double h = 1e-5;
        auto dot = [&](double dx) {
          w[which][i] = x[which][i] + dx;
          auto out = reference(c, e, w[0], w[1], w[2]);
          double s = 0;
          for (size_t e = 0; e < out.size(); ++e) s += out[e] * rv[e];
          return s;
        };
        const double fd = (dot(h) - dot(-h)) / (2 * h);
        EXPECT_NEAR(got[which][i], fd, 1e-8 * std::max(1.0, std::fabs(fd)))
            << c.name << ": d/d"
            << "qkv"[which] << "[" << i << "]";
      }
  }
}

// Forward mode: <jvp(t), r> equals <t, vjp(r)> (both through the composition).
TEST(AttentionGrad, JvpAgreesWithVjp) {
  const Shape qs{2, 3, 4}, ks{2, 5, 4};
  QKV p{f64(qs, values(qs, 200)), f64(ks, values(ks, 201)), f64(ks, values(ks, 202))};
  QKV t{f64(qs, values(qs, 203)), f64(ks, values(ks, 204)), f64(ks, values(ks, 205))};
  Tensor r = f64({2, 3, 4}, values({2, 3, 4}, 206));
  AttentionOptions o{.causal = true, .mask = f64({3, 5}, values({3, 5}, 207))};
  auto f = [o](const QKV& x) { return sdpa(std::get<0>(x), std::get<1>(x), std::get<2>(x), o); };
  auto [y, dy] = rune::jvp<Tensor>(f, p, t);
  auto [y2, ct] = rune::vjp(f, p, r);
  EXPECT_EQ(bits(y), bits(y2));
  const double lhs = nx::item<double>(nx::sum(dy * r));
  const double rhs = nx::item<double>(nx::sum(std::get<0>(ct) * std::get<0>(t)) +
                                      nx::sum(std::get<1>(ct) * std::get<1>(t)) +
                                      nx::sum(std::get<2>(ct) * std::get<2>(t)));
  EXPECT_NEAR(lhs, rhs, 1e-13 * std::max(1.0, std::fabs(rhs)));
}

// ---- errors ----

TEST(AttentionErrors, NameTheApiAndTheShapes) {
  Tensor q = f64({2, 3, 4}, values({2, 3, 4}, 1)), k = f64({2, 5, 4}, values({2, 5, 4}, 2));
  Tensor v = f64({2, 5, 6}, values({2, 5, 6}, 3));
  const std::string api = "nx::nn::scaled_dot_product_attention:";
  expect_error(
      [&] {
        sdpa(q, f64({2, 5, 3}, values({2, 5, 3}, 4)), v);
      },
      {api, "q and k differ in the last axis (4 != 3)",
       "q float64 [2, 3, 4], k float64 [2, 5, 3], v float64 [2, 5, 6]"});
  expect_error(
      [&] {
        sdpa(q, k, f64({2, 4, 6}, values({2, 4, 6}, 5)));
      },
      {api, "k and v differ in the number of keys (axis -2: 5 != 4)"});
  expect_error([&] { sdpa(q, nx::cast(k, nx::float32), v); }, {api, "float32"});
  expect_error([&] { sdpa(f64({4}, {1, 2, 3, 4}), k, v); }, {api, "at least 2 axes"});
  expect_error(
      [&] {
        sdpa(f64({3, 3, 4}, values({3, 3, 4}, 6)), k, v);
      },
      {api, "the batch axes (all but the last two) do not broadcast"});
  expect_error(
      [&] {
        sdpa(q, k, v, {.mask = f64({4, 5}, values({4, 5}, 7))});
      },
      {api, "mask float64 [4, 5] does not broadcast to the scores [2, 3, 5]"});
  expect_error([&] { sdpa(q, k, v, {.mask = nx::cast(f64({5}, values({5}, 8)), nx::float32)}); },
               {api, "mask must be bool or q's dtype float64; got float32 [5]"});
  expect_error([&] { sdpa(q, k, v, {.dropout = 0.1}); }, {api, "dropout 0.1 needs a dropout_key"});
  expect_error([&] { sdpa(q, k, v, {.dropout = 1}); }, {api, "dropout must be in [0, 1), got 1"});
  expect_error([&] { sdpa(q, k, v, {.scale = kInf}); }, {api, "scale must be finite, got inf"});
  Tensor q4 = f64({1, 3, 2, 4}, values({1, 3, 2, 4}, 9)),
         k4 = f64({1, 2, 5, 4}, values({1, 2, 5, 4}, 10));
  expect_error([&] { sdpa(q4, k4, k4, {.enable_gqa = true}); },
               {api, "enable_gqa: the 3 query heads are not a multiple of the 2 key heads"});
  expect_error(
      [&] {
        sdpa(q, k, v, {.enable_gqa = false});
        sdpa(q4, k4, k4);
      },
      {api, "the batch axes (all but the last two) do not broadcast"});
}

}  // namespace
