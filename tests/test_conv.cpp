// nx::conv and nx::conv_transpose (core/conv.cpp, docs/conv.md) against direct float64 loops
// written here (conv: XLA's definition of conv_general_dilated, output by output; conv_transpose:
// torch's, input by input scattered into the output), eagerly and under rune::jit on CPU, CPU:1
// and the fake CUDA:0 (eager and compiled share their bits); gradients with respect to the input
// and the kernel against central differences of the loop reference (channels last: the
// channels-first gradients' bits); jvp, second derivatives and vmap of the gradient through the
// input cotangent's own rule; vmap against a loop; errors that name the API and the shapes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "core/conv.h"
#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"
#include "window_test_util.h"

namespace {

using namespace window_test;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

// Row-major offsets and index walks of the references (tests/test_util.h).
int64_t offset(const Shape& s, const Ints& i) { return rt::row_major_offset(s, i); }
void each(const Shape& s, const std::function<void(const Ints&)>& f) { rt::for_each_index(s, f); }
int64_t numel(const Shape& s) { return ir::numel(s); }

struct Result {
  Shape shape;
  std::vector<double> v;
};

// The convolution in XLA's words, channels first: out[n, o, p] = sum over c < I, k of
// x[n_in, c_in, q] w[o, c, k] where q * ldil = p * stride + k * rdil - lo (other positions are
// the padding's or the dilation's zeros).
Result ref_conv(const Shape& xs, const std::vector<double>& x, const Shape& ws,
                const std::vector<double>& w, Ints stride, Pairs pads, Ints ldil, Ints rdil,
                int64_t fg, int64_t bg) {
  const size_t d = xs.size() - 2;
  if (stride.empty()) stride.assign(d, 1);
  if (ldil.empty()) ldil.assign(d, 1);
  if (rdil.empty()) rdil.assign(d, 1);
  if (pads.empty()) pads.assign(d, {0, 0});
  const int64_t n_out = xs[0] / bg, o_n = ws[0], i_n = ws[1], g = fg > 1 ? fg : bg, og = o_n / g;
  Shape os{n_out, o_n}, ks(ws.begin() + 2, ws.end());
  for (size_t a = 0; a < d; ++a) {
    int64_t padded = (xs[2 + a] - 1) * ldil[a] + 1 + pads[a].first + pads[a].second;
    int64_t eff = (ws[2 + a] - 1) * rdil[a] + 1;
    os.push_back((padded - eff) / stride[a] + 1);
  }
  Result r{os, std::vector<double>(numel(os))};
  each(os, [&](const Ints& p) {
    const int64_t grp = p[1] / og;
    const int64_t n = bg > 1 ? grp * n_out + p[0] : p[0];
    double acc = 0;
    for (int64_t c = 0; c < i_n; ++c) {
      const int64_t ch = fg > 1 ? grp * i_n + c : c;
      each(ks, [&](const Ints& k) {
        Ints xi{n, ch};
        for (size_t a = 0; a < d; ++a) {
          int64_t pos = p[2 + a] * stride[a] + k[a] * rdil[a] - pads[a].first;
          if (pos < 0 || pos % ldil[a] != 0 || pos / ldil[a] >= xs[2 + a]) return;
          xi.push_back(pos / ldil[a]);
        }
        Ints wi{p[1], c};
        wi.insert(wi.end(), k.begin(), k.end());
        acc += x[offset(xs, xi)] * w[offset(ws, wi)];
      });
    }
    r.v[offset(os, p)] = acc;
  });
  return r;
}

// torch's conv_transpose, channels first: every input element scattered through the kernel.
Result ref_conv_transpose(const Shape& xs, const std::vector<double>& x, const Shape& ws,
                          const std::vector<double>& w, Ints stride, Ints pad, Ints outpad,
                          Ints dil, int64_t groups) {
  const size_t d = xs.size() - 2;
  if (stride.empty()) stride.assign(d, 1);
  if (pad.empty()) pad.assign(d, 0);
  if (outpad.empty()) outpad.assign(d, 0);
  if (dil.empty()) dil.assign(d, 1);
  const int64_t cg = xs[1] / groups, og = ws[1];
  Shape os{xs[0], og * groups}, ks(ws.begin() + 2, ws.end());
  for (size_t a = 0; a < d; ++a)
    os.push_back((xs[2 + a] - 1) * stride[a] - 2 * pad[a] + dil[a] * (ws[2 + a] - 1) + outpad[a] +
                 1);
  Result r{os, std::vector<double>(numel(os))};
  each(xs, [&](const Ints& i) {
    const int64_t grp = i[1] / cg;
    for (int64_t o = 0; o < og; ++o)
      each(ks, [&](const Ints& k) {
        Ints oi{i[0], grp * og + o};
        for (size_t a = 0; a < d; ++a) {
          int64_t y = i[2 + a] * stride[a] - pad[a] + k[a] * dil[a];
          if (y < 0 || y >= os[2 + a]) return;
          oi.push_back(y);
        }
        Ints wi{i[1], o};
        wi.insert(wi.end(), k.begin(), k.end());
        r.v[offset(os, oi)] += x[offset(xs, i)] * w[offset(ws, wi)];
      });
  });
  return r;
}

void expect_near(const std::string& name, const Tensor& t, const Result& want, double tol = 1e-12) {
  ASSERT_EQ(t.shape(), want.shape) << name;
  auto got = nx::to_array(host(t));
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want.v[i], tol * std::max(1.0, std::fabs(want.v[i])))
        << name << " element " << i;
}

struct ConvCase {
  const char* name;
  Shape xs, ws;  // channels first: [N, C, S...], [O, I, K...]
  nx::ConvOptions o;
};

// Pads of a case for the reference (SAME resolved as JAX does).
Pairs pads_of(const ConvCase& c) {
  if (c.o.padding.mode == "SAME")
    return same_pads(Shape(c.xs.begin() + 2, c.xs.end()), Shape(c.ws.begin() + 2, c.ws.end()),
                     c.o.strides, c.o.rhs_dilation);
  if (c.o.padding.mode == "VALID") return {};
  return c.o.padding.pairs;
}

Result ref_of(const ConvCase& c, const std::vector<double>& x, const std::vector<double>& w) {
  return ref_conv(c.xs, x, c.ws, w, c.o.strides, pads_of(c), c.o.lhs_dilation, c.o.rhs_dilation,
                  c.o.feature_groups, c.o.batch_groups);
}

std::vector<ConvCase> conv_cases() {
  return {
      {"plain 2-d", {2, 3, 5, 6}, {4, 3, 3, 2}, {}},
      {"strides", {1, 2, 7, 8}, {3, 2, 3, 3}, {.strides = {2, 3}}},
      {"SAME", {2, 2, 5, 7}, {2, 2, 3, 4}, {.strides = {2, 1}, .padding = "SAME"}},
      {"SAME dilated", {1, 2, 6, 5}, {2, 2, 2, 3}, {.padding = "SAME", .rhs_dilation = {2, 2}}},
      {"explicit padding", {1, 2, 4, 5}, {3, 2, 3, 2}, {.padding = {{1, 2}, {0, 3}}}},
      {"negative padding crops", {1, 2, 6, 6}, {2, 2, 2, 2}, {.padding = {{-1, 0}, {2, -2}}}},
      {"rhs dilation", {2, 2, 7, 8}, {3, 2, 2, 3}, {.strides = {1, 2}, .rhs_dilation = {2, 3}}},
      {"lhs dilation",
       {1, 2, 4, 3},
       {2, 2, 3, 2},
       {.strides = {1, 2}, .padding = {{1, 1}, {2, 0}}, .lhs_dilation = {2, 3}}},
      {"feature groups", {2, 6, 5, 5}, {4, 3, 3, 3}, {.feature_groups = 2}},
      {"depthwise", {2, 4, 5, 5}, {8, 1, 3, 3}, {.padding = "SAME", .feature_groups = 4}},
      {"batch groups", {4, 3, 5, 5}, {6, 3, 2, 2}, {.batch_groups = 2}},
      {"1x1 kernel", {2, 5, 4, 4}, {3, 5, 1, 1}, {}},
      {"kernel as large as the input", {2, 2, 4, 5}, {3, 2, 4, 5}, {}},
      {"empty batch", {0, 2, 4, 4}, {3, 2, 3, 3}, {.padding = "SAME"}},
      {"1-d", {2, 3, 9}, {2, 3, 4}, {.strides = {2}, .padding = {{1, 2}}, .rhs_dilation = {2}}},
      {"3-d", {1, 2, 4, 5, 3}, {2, 2, 2, 3, 2}, {.strides = {1, 2, 1}, .padding = "SAME"}},
  };
}

// The channels-last layout of a case's rank and the permutations into it.
std::string last_layout(size_t ndim) { return ndim == 3 ? "NWC" : ndim == 4 ? "NHWC" : "NDHWC"; }
nx::Axes to_last(int nd) {  // [N, C, S...] -> [N, S..., C]
  nx::Axes p{0};
  for (int a = 2; a < nd; ++a) p.push_back(a);
  p.push_back(1);
  return p;
}
nx::Axes kernel_to_last(int nd) {  // [O, I, K...] -> [K..., I, O]
  nx::Axes p;
  for (int a = 2; a < nd; ++a) p.push_back(a);
  p.push_back(1);
  p.push_back(0);
  return p;
}

class Conv : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
};

TEST_P(Conv, MatchesTheLoopEagerAndCompiled) {
  uint64_t seed = 1;
  for (const ConvCase& c : conv_cases()) {
    auto xv = values(c.xs, seed++), wv = values(c.ws, seed++);
    Result want = ref_of(c, xv, wv);
    Tensor x = on(f64(c.xs, xv)), w = on(f64(c.ws, wv));
    auto f = [o = c.o](const Tensor& a, const Tensor& b) { return nx::conv(a, b, o); };
    Tensor eager = f(x, w);
    EXPECT_EQ(eager.device(), x.device()) << c.name;
    expect_near(c.name, eager, want);
    EXPECT_EQ(bits(rune::jit(f)(x, w)), bits(eager)) << c.name << " compiled";
    EXPECT_EQ(bits(eager), bits(f(host(x), host(w)))) << c.name << " host bits";
    // Channels last, the kernel spatial + IO (flax's).
    const int nd = static_cast<int>(c.xs.size());
    nx::ConvOptions ol = c.o;
    ol.layout = last_layout(c.xs.size());
    Tensor yl = nx::conv(nx::permute(x, to_last(nd)), nx::permute(w, kernel_to_last(nd)), ol);
    Result want_last{nx::permute(f64(want.shape, want.v), to_last(nd)).shape(),
                     nx::to_array(nx::permute(f64(want.shape, want.v), to_last(nd)))};
    expect_near(std::string(c.name) + " channels last", yl, want_last);
  }
}

TEST_P(Conv, JaxLayoutTriples) {
  // Input channels last, kernel OIHW, output channels first; spatial order from the kernel:
  // "NWHC,OIHW,NCHW" reads the input's spatial axes swapped.
  auto xv = values({2, 3, 5, 6}, 11), wv = values({4, 3, 3, 2}, 12);
  Result want = ref_conv({2, 3, 5, 6}, xv, {4, 3, 3, 2}, wv, {2, 1}, {}, {}, {}, 1, 1);
  Tensor x = on(f64({2, 3, 5, 6}, xv)), w = on(f64({4, 3, 3, 2}, wv));
  Tensor y =
      nx::conv(nx::permute(x, {0, 3, 2, 1}), w, {.strides = {2, 1}, .layout = "NWHC,OIHW,NCHW"});
  expect_near("NWHC,OIHW,NCHW", y, want);
  Tensor z = nx::conv(nx::permute(x, {0, 2, 3, 1}), nx::permute(w, {2, 3, 1, 0}),
                      {.strides = {2, 1}, .layout = "NHWC,HWIO,NCHW"});
  expect_near("NHWC,HWIO,NCHW", z, want);
}

TEST_P(Conv, HalfPrecisionComputesAtFloat32) {
  auto xv = values({1, 2, 4, 4}, 21), wv = values({2, 2, 3, 3}, 22);
  Result want = ref_conv({1, 2, 4, 4}, xv, {2, 2, 3, 3}, wv, {}, {}, {}, {}, 1, 1);
  for (nx::DType t : {nx::float32, nx::bfloat16, nx::float16}) {
    Tensor x = on(nx::cast(f64({1, 2, 4, 4}, xv), t)), w = on(nx::cast(f64({2, 2, 3, 3}, wv), t));
    // The reference of the rounded inputs.
    Result r = ref_conv({1, 2, 4, 4}, nx::to_array(host(x)), {2, 2, 3, 3}, nx::to_array(host(w)),
                        {}, {}, {}, {}, 1, 1);
    Tensor y = nx::conv(x, w);
    EXPECT_EQ(y.dtype(), t);
    expect_near(std::string(ir::name(t)), y, r, t == nx::float32 ? 1e-6 : 1e-2);
    (void)want;
  }
}

struct TransposeCase {
  const char* name;
  Shape xs, ws;  // [N, Cin, S...], [Cin, Cout / groups, K...]
  nx::ConvTransposeOptions o;
};

std::vector<TransposeCase> transpose_cases() {
  return {
      {"plain", {2, 3, 4, 5}, {3, 2, 3, 3}, {}},
      {"stride and padding", {1, 2, 4, 3}, {2, 3, 3, 4}, {.strides = {2, 3}, .padding = {1, 2}}},
      {"output padding",
       {2, 2, 3, 3},
       {2, 2, 3, 3},
       {.strides = {2, 3}, .padding = {1, 0}, .output_padding = {1, 2}}},
      {"dilation", {1, 2, 4, 4}, {2, 1, 2, 3}, {.strides = {2, 1}, .dilation = {2, 3}}},
      {"groups", {2, 4, 3, 3}, {4, 3, 2, 2}, {.strides = {2, 2}, .groups = 2}},
      {"padding beyond the kernel",
       {1, 1, 6, 6},
       {1, 2, 2, 2},
       {.strides = {2, 2}, .padding = {2, 2}}},
      {"1-d", {2, 3, 5}, {3, 2, 4}, {.strides = {3}, .padding = {1}, .output_padding = {2}}},
      {"3-d", {1, 2, 2, 3, 2}, {2, 2, 2, 2, 3}, {.strides = {2, 1, 2}, .padding = {0, 1, 1}}},
  };
}

Result ref_of(const TransposeCase& c, const std::vector<double>& x, const std::vector<double>& w) {
  return ref_conv_transpose(c.xs, x, c.ws, w, c.o.strides, c.o.padding, c.o.output_padding,
                            c.o.dilation, c.o.groups);
}

TEST_P(Conv, TransposeMatchesTheLoopEagerAndCompiled) {
  uint64_t seed = 100;
  for (const TransposeCase& c : transpose_cases()) {
    auto xv = values(c.xs, seed++), wv = values(c.ws, seed++);
    Result want = ref_of(c, xv, wv);
    Tensor x = on(f64(c.xs, xv)), w = on(f64(c.ws, wv));
    auto f = [o = c.o](const Tensor& a, const Tensor& b) { return nx::conv_transpose(a, b, o); };
    Tensor eager = f(x, w);
    expect_near(c.name, eager, want);
    EXPECT_EQ(bits(rune::jit(f)(x, w)), bits(eager)) << c.name << " compiled";
    const int nd = static_cast<int>(c.xs.size());
    nx::ConvTransposeOptions ol = c.o;
    ol.layout = last_layout(c.xs.size());
    nx::Axes wl;  // [Cin, Og, K...] -> [K..., Cin, Og]
    for (int a = 2; a < nd; ++a) wl.push_back(a);
    wl.push_back(0);
    wl.push_back(1);
    Tensor yl = nx::conv_transpose(nx::permute(x, to_last(nd)), nx::permute(w, wl), ol);
    Tensor wantl = nx::permute(f64(want.shape, want.v), to_last(nd));
    expect_near(std::string(c.name) + " channels last", yl, {wantl.shape(), nx::to_array(wantl)});
  }
}

TEST_P(Conv, VmapOverAnExtraBatchAxisMatchesALoop) {
  const Shape xs{3, 2, 2, 5, 4}, ws{3, 2, 2, 2};
  Tensor xb = on(f64(xs, values(xs, 31))), w = on(f64(ws, values(ws, 32)));
  nx::ConvOptions o{.strides = {2, 1}, .padding = "SAME"};
  auto f = [o](const Tensor& x, const Tensor& k) { return nx::conv(x, k, o); };
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < xs[0]; ++i) rows.push_back(f(nx::index(xb, 0, i), w));
  const std::string want = bits(nx::stack(rows));
  auto batched = rune::vmap(f, {0, rune::none});
  EXPECT_EQ(bits(batched(xb, w)), want);
  EXPECT_EQ(bits(rune::jit([&](const Tensor& a, const Tensor& b) { return batched(a, b); })(xb, w)),
            want);
  // Batched kernels too: example i with kernel i.
  Tensor wb = on(f64({3, 3, 2, 2, 2}, values({3, 3, 2, 2, 2}, 33)));
  std::vector<Tensor> rows2;
  for (int64_t i = 0; i < xs[0]; ++i) rows2.push_back(f(nx::index(xb, 0, i), nx::index(wb, 0, i)));
  EXPECT_EQ(bits(rune::vmap(f)(xb, wb)), bits(nx::stack(rows2)));
}

TEST_P(Conv, GradientsOnTheDeviceHaveTheHostsBits) {
  const ConvCase c{"strided", {2, 2, 5, 5}, {3, 2, 3, 2}, {.strides = {2, 1}, .padding = "SAME"}};
  Tensor x = f64(c.xs, values(c.xs, 41)), w = f64(c.ws, values(c.ws, 42));
  auto g = [o = c.o](const Tensor& a, const Tensor& b) {
    auto [ga, gb] = rune::grad(
        [&](const Tensor& p, const Tensor& q) { return nx::sum(nx::sin(nx::conv(p, q, o))); },
        rune::argnums<0, 1>)(a, b);
    return nx::concatenate({nx::flatten(ga), nx::flatten(gb)});
  };
  const std::string want = bits(g(x, w));
  EXPECT_EQ(bits(g(on(x), on(w))), want) << "eager on " << GetParam();
  EXPECT_EQ(bits(rune::jit(g)(on(x), on(w))), want) << "compiled on " << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Devices, Conv, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

// ---- gradients against central differences of the loop reference (float64, on the host) ----

// rune::grad of sum(f(x, w) * r) with respect to x and w against central differences of the
// same sum computed by `ref`, eagerly; compiled with the eager gradient's bits.
void check_grads(
    const std::string& name, const Shape& xs, const Shape& ws,
    const std::function<Tensor(const Tensor&, const Tensor&)>& f,
    const std::function<Result(const std::vector<double>&, const std::vector<double>&)>& ref) {
  auto xv = values(xs, 51), wv = values(ws, 52);
  Result y = ref(xv, wv);
  auto rv = values(y.shape, 53);
  Tensor x = f64(xs, xv), w = f64(ws, wv), r = f64(y.shape, rv);
  auto loss = [&](const Tensor& a, const Tensor& b) { return nx::sum(f(a, b) * r); };
  auto [gx, gw] = rune::grad(loss, rune::argnums<0, 1>)(x, w);
  auto dot = [&](const std::vector<double>& a, const std::vector<double>& b) {
    Result o = ref(a, b);
    double s = 0;
    for (size_t i = 0; i < o.v.size(); ++i) s += o.v[i] * rv[i];
    return s;
  };
  auto check = [&](const char* which, const Tensor& g, std::vector<double> v, bool first) {
    auto got = nx::to_array(g);
    ASSERT_EQ(got.size(), v.size()) << name << " " << which;
    for (size_t i = 0; i < v.size(); ++i) {
      const double h = 1e-5, at = v[i];
      v[i] = at + h;
      double up = first ? dot(v, wv) : dot(xv, v);
      v[i] = at - h;
      double down = first ? dot(v, wv) : dot(xv, v);
      v[i] = at;
      double fd = (up - down) / (2 * h);
      EXPECT_NEAR(got[i], fd, 1e-7 * std::max(1.0, std::fabs(fd)))
          << name << " d/d" << which << " element " << i;
    }
  };
  check("x", gx, xv, true);
  check("w", gw, wv, false);
  auto both = [&](const Tensor& a, const Tensor& b) {
    auto [p, q] = rune::grad(loss, rune::argnums<0, 1>)(a, b);
    return nx::concatenate({nx::flatten(p), nx::flatten(q)});
  };
  EXPECT_EQ(bits(rune::jit(both)(x, w)), bits(nx::concatenate({nx::flatten(gx), nx::flatten(gw)})))
      << name << " compiled";
}

TEST(ConvGrad, InputAndKernelAgainstCentralDifferences) {
  for (const ConvCase& c : conv_cases()) {
    if (numel(c.xs) > 200 || numel(c.xs) == 0) continue;  // the larger cases repeat the others
    check_grads(
        c.name, c.xs, c.ws,
        [o = c.o](const Tensor& a, const Tensor& b) { return nx::conv(a, b, o); },
        [&c](const std::vector<double>& x, const std::vector<double>& w) {
          return ref_of(c, x, w);
        });
  }
  for (const TransposeCase& c : transpose_cases()) {
    check_grads(
        std::string("transpose ") + c.name, c.xs, c.ws,
        [o = c.o](const Tensor& a, const Tensor& b) { return nx::conv_transpose(a, b, o); },
        [&c](const std::vector<double>& x, const std::vector<double>& w) {
          return ref_of(c, x, w);
        });
  }
}

// Channels last: the same composition between views, so the gradients are the channels-first
// ones permuted, bit for bit (conv and conv_transpose).
TEST(ConvGrad, ChannelsLastHasTheChannelsFirstGradients) {
  uint64_t seed = 70;
  auto grads = [](const std::function<Tensor(const Tensor&, const Tensor&)>& f, const Tensor& x,
                  const Tensor& w, const Tensor& r) {
    return rune::grad([&](const Tensor& a, const Tensor& b) { return nx::sum(f(a, b) * r); },
                      rune::argnums<0, 1>)(x, w);
  };
  auto expect_same = [&](const std::string& name, const Shape& xs, const Shape& ws,
                         const std::function<Tensor(const Tensor&, const Tensor&)>& first,
                         const std::function<Tensor(const Tensor&, const Tensor&)>& last,
                         const nx::Axes& kernel_perm) {
    const int nd = static_cast<int>(xs.size());
    Tensor x = f64(xs, values(xs, seed++)), w = f64(ws, values(ws, seed++));
    Tensor y = first(x, w);
    Tensor r = f64(y.shape(), values(y.shape(), seed++));
    auto [gx, gw] = grads(first, x, w, r);
    auto [lx, lw] = grads(last, nx::permute(x, to_last(nd)), nx::permute(w, kernel_perm),
                          nx::permute(r, to_last(nd)));
    EXPECT_EQ(bits(lx), bits(nx::permute(gx, to_last(nd)))) << name << " d/dx";
    EXPECT_EQ(bits(lw), bits(nx::permute(gw, kernel_perm))) << name << " d/dw";
  };
  for (const ConvCase& c : conv_cases()) {
    if (numel(c.xs) > 200 || numel(c.xs) == 0) continue;
    nx::ConvOptions ol = c.o;
    ol.layout = last_layout(c.xs.size());
    expect_same(
        c.name, c.xs, c.ws,
        [o = c.o](const Tensor& a, const Tensor& b) { return nx::conv(a, b, o); },
        [ol](const Tensor& a, const Tensor& b) { return nx::conv(a, b, ol); },
        kernel_to_last(static_cast<int>(c.xs.size())));
  }
  for (const TransposeCase& c : transpose_cases()) {
    const int nd = static_cast<int>(c.xs.size());
    nx::ConvTransposeOptions ol = c.o;
    ol.layout = last_layout(c.xs.size());
    nx::Axes wl;  // [Cin, Og, K...] -> [K..., Cin, Og]
    for (int a = 2; a < nd; ++a) wl.push_back(a);
    wl.push_back(0);
    wl.push_back(1);
    expect_same(
        std::string("transpose ") + c.name, c.xs, c.ws,
        [o = c.o](const Tensor& a, const Tensor& b) { return nx::conv_transpose(a, b, o); },
        [ol](const Tensor& a, const Tensor& b) { return nx::conv_transpose(a, b, ol); }, wl);
  }
}

// The input's cotangent has its own rule (a transposed convolution, docs/conv.md); forward mode,
// second derivatives and batched gradients still hold: jvp against the loop's product rule,
// the second derivatives of a nonlinear loss against central differences of rune's gradient
// (and compiled with the eager bits), vmap of the gradient against a loop of gradients.
TEST(ConvGrad, JvpSecondDerivativesAndVmap) {
  const std::vector<ConvCase> cases{
      {"strided groups",
       {2, 4, 5, 4},
       {4, 2, 3, 2},
       {.strides = {2, 1}, .padding = "SAME", .rhs_dilation = {1, 2}, .feature_groups = 2}},
      {"batch groups, lhs dilation",
       {2, 2, 3, 3},
       {4, 2, 2, 2},
       {.padding = {{1, 0}, {0, 1}}, .lhs_dilation = {2, 1}, .batch_groups = 2}},
  };
  uint64_t seed = 80;
  for (const ConvCase& c : cases) {
    auto xv = values(c.xs, seed++), wv = values(c.ws, seed++);
    auto txv = values(c.xs, seed++), twv = values(c.ws, seed++);
    Tensor x = f64(c.xs, xv), w = f64(c.ws, wv);
    auto conv = [o = c.o](const Tensor& a, const Tensor& b) { return nx::conv(a, b, o); };
    // jvp: the product rule of a bilinear map, J (tx, tw) = conv(tx, w) + conv(x, tw).
    using Pair = std::tuple<Tensor, Tensor>;
    auto [y, dy] =
        rune::jvp<Tensor>([&](const Pair& p) { return conv(std::get<0>(p), std::get<1>(p)); },
                          Pair{x, w}, Pair{f64(c.xs, txv), f64(c.ws, twv)});
    Result a = ref_of(c, txv, wv), b = ref_of(c, xv, twv);
    for (size_t i = 0; i < a.v.size(); ++i) a.v[i] += b.v[i];
    expect_near(std::string(c.name) + " jvp", dy, a);
    // Second derivatives of h(x, w) = <d/dx sum(r sin(conv(x, w))), s>.
    Tensor r = f64(y.shape(), values(y.shape(), seed++)), s = f64(c.xs, values(c.xs, seed++));
    auto dx = [&](const Tensor& p, const Tensor& q) {
      return rune::grad([&](const Tensor& u) { return nx::sum(nx::sin(conv(u, q)) * r); })(p);
    };
    auto h = [&](const Tensor& p, const Tensor& q) { return nx::sum(dx(p, q) * s); };
    auto second = [&](const Tensor& p, const Tensor& q) {
      auto [hx, hw] = rune::grad(h, rune::argnums<0, 1>)(p, q);
      return nx::concatenate({nx::flatten(hx), nx::flatten(hw)});
    };
    Tensor got = second(x, w);
    EXPECT_EQ(bits(rune::jit(second)(x, w)), bits(got)) << c.name << " compiled";
    auto gv = nx::to_array(got);
    std::vector<double> all = xv;
    all.insert(all.end(), wv.begin(), wv.end());
    for (size_t i = 0; i < all.size(); i += 3) {  // every third element: enough to fail
      auto at = [&](double e) {
        std::vector<double> v = all;
        v[i] += e;
        return nx::item<double>(h(f64(c.xs, std::vector<double>(v.begin(), v.begin() + xv.size())),
                                  f64(c.ws, std::vector<double>(v.begin() + xv.size(), v.end()))));
      };
      const double e = 1e-5, fd = (at(e) - at(-e)) / (2 * e);
      EXPECT_NEAR(gv[i], fd, 1e-7 * std::max(1.0, std::fabs(fd))) << c.name << " element " << i;
    }
    // vmap of the gradient: the examples stacked on a new axis 0.
    const Shape bs{3, c.xs[0], c.xs[1], c.xs[2], c.xs[3]};
    Tensor xb = f64(bs, values(bs, seed++));
    std::vector<Tensor> rows;
    for (int64_t i = 0; i < bs[0]; ++i) rows.push_back(dx(nx::index(xb, 0, i), w));
    auto batched = rune::vmap(dx, {0, rune::none});
    EXPECT_EQ(bits(batched(xb, w)), bits(nx::stack(rows))) << c.name << " vmap";
  }
}

// A convolution in a loop's body keeps its rule: rune::grad through rune::scan (the reverse scan
// of the body's vjp) has the bits of the same steps unrolled.
TEST(ConvGrad, InsideAScanBodyAsUnrolled) {
  const Shape hs{2, 3, 4, 4}, ws{3, 3, 3, 3}, xs{3, 2, 3, 4, 4};
  Tensor h0 = f64(hs, values(hs, 90)), w = f64(ws, values(ws, 91)), rows = f64(xs, values(xs, 92));
  nx::ConvOptions o{.strides = {1, 1}, .padding = "SAME"};
  auto step = [o](const Tensor& h, const Tensor& k, const Tensor& x) {
    return nx::sin(nx::conv(h, k, o)) + x;
  };
  auto scanned = [&](const Tensor& h, const Tensor& k) {
    auto body = [&](const Tensor& c, const Tensor& x) {
      Tensor n = step(c, k, x);
      return std::make_pair(n, n);
    };
    return nx::sum(rune::scan(body, h, rows).second);
  };
  auto unrolled = [&](const Tensor& h, const Tensor& k) {
    Tensor c = h, total = nx::zeros(nx::float64, {});
    for (int64_t t = 0; t < xs[0]; ++t) {
      c = step(c, k, nx::index(rows, 0, t));
      total = total + nx::sum(c);
    }
    return total;
  };
  auto [sh, sk] = rune::grad(scanned, rune::argnums<0, 1>)(h0, w);
  auto [uh, uk] = rune::grad(unrolled, rune::argnums<0, 1>)(h0, w);
  EXPECT_EQ(bits(sh), bits(uh));
  EXPECT_EQ(bits(sk), bits(uk));
}

// ---- errors: the API's name and the offending shapes; a failed call changes nothing ----

TEST(ConvErrors, NameTheApiAndTheShapes) {
  Tensor x = f64({2, 4, 5, 5}, values({2, 4, 5, 5}, 61));
  Tensor w = f64({6, 3, 3, 3}, values({6, 3, 3, 3}, 62));
  const std::string before = bits(x) + bits(w);
  expect_error([&] { nx::conv(x, w); }, {"nx::conv:", "3 input channels", "4 channels",
                                         "float64 [2, 4, 5, 5]", "float64 [6, 3, 3, 3]"});
  expect_error(
      [&] {
        nx::conv(x, f64({6, 2, 3, 3}, values({6, 2, 3, 3}, 1)), {.feature_groups = 3});
      },
      {"nx::conv:", "feature_groups 3 does not divide the input's 4 channels"});
  expect_error(
      [&] {
        nx::conv(x, f64({5, 2, 3, 3}, values({5, 2, 3, 3}, 1)), {.feature_groups = 2});
      },
      {"nx::conv:", "does not divide the kernel's 5 output channels"});
  expect_error(
      [&] {
        nx::conv(x, f64({6, 4, 3, 3}, values({6, 4, 3, 3}, 1)), {.batch_groups = 4});
      },
      {"nx::conv:", "batch_groups 4", "batch 2"});
  expect_error([&] { nx::conv(x, w, {.layout = "NCWHX"}); }, {"nx::conv:", "layout \"NCWHX\""});
  expect_error([&] { nx::conv(x, w, {.layout = "CNHW"}); },
               {"nx::conv:", "layout \"CNHW\"", "neither channels first"});
  expect_error([&] { nx::conv(x, w, {.layout = "NCHW,OIHX,NCHW"}); },
               {"nx::conv:", "kernel's spatial dimension 'X'"});
  Tensor w4 = f64({6, 4, 7, 3}, values({6, 4, 7, 3}, 1));
  expect_error([&] { nx::conv(x, w4); },
               {"nx::conv:", "window (7 after dilation) is larger than the padded input (5)",
                "float64 [6, 4, 7, 3]"});
  expect_error(
      [&] {
        nx::conv(x, f64({6, 4, 3, 3}, values({6, 4, 3, 3}, 1)), {.rhs_dilation = {3, 1}});
      },
      {"nx::conv:", "window (7 after dilation)"});
  expect_error([&] { nx::conv(x, w4, {.padding = "FULL"}); }, {"nx::conv:", "padding \"FULL\""});
  expect_error([&] { nx::conv(x, w4, {.strides = {1, 0}}); }, {"nx::conv:", "strides [1, 0]"});
  expect_error(
      [&] {
        nx::conv(x, w4, {.padding = {{1, 1}}});
      },
      {"nx::conv:", "1 (lo, hi) pairs for 2 spatial dimensions"});
  expect_error([&] { nx::conv(x, nx::cast(w4, nx::float32)); }, {"nx::conv"});
  expect_error([&] { nx::conv(nx::reshape(x, {8, 25}), w4); }, {"nx::conv:", "same rank"});
  expect_error([&] { nx::conv_transpose(x, w); },
               {"nx::conv_transpose:", "6 input channels must equal the input's 4"});
  expect_error(
      [&] {
        nx::conv_transpose(x, f64({4, 2, 3, 3}, values({4, 2, 3, 3}, 1)), {.groups = 3});
      },
      {"nx::conv_transpose:", "groups 3 does not divide the input's 4 channels"});
  expect_error(
      [&] {
        nx::conv_transpose(x, f64({4, 2, 3, 3}, values({4, 2, 3, 3}, 1)),
                           {.strides = {2, 2}, .output_padding = {2, 0}});
      },
      {"nx::conv_transpose:", "output_padding [2, 0] must be smaller"});
  EXPECT_EQ(bits(x) + bits(w), before);
}

}  // namespace
