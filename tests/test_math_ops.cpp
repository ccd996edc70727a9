// The math a model needs (core/ops_math.cpp, core/einsum.cpp, core/nn.cpp; docs/model-math.md):
// values against numpy computed once and pasted (the script is in the comment above each table),
// the same bits eagerly and compiled on CPU, CPU:1 and CUDA:0 (the fake driver,
// gpu_runtime/fake_driver.h) as on the host, gradients against central finite differences in
// float64, and errors that name the API and the values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/nn.h"
#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::Shape;
using nx::Tensor;

// ctest runs the fake-CUDA entry with RUNE_TEST_FAKE_CUDA=1 (tests/fake_cuda_hook.cpp installs
// the driver); run alone, the binary installs it itself.
const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

// Every tensor is made on the host explicitly: the fake-CUDA entry runs with
// RUNE_DEFAULT_DEVICE=CUDA:0.
Tensor host(const Tensor& t) { return nx::place(t, "CPU"); }
Tensor f64(const Shape& s, const std::vector<double>& v) {
  return host(nx::create(nx::float64, s, v));
}

// The inputs of the numpy tables below.
Tensor x34() {
  return f64({3, 4}, {1.5, -2.25, 3.0, 0.5, 4.0, 0.25, -1.0, 2.0, -0.5, 1.25, 2.5, -3.0});
}

// The exact bits of any dtype's values (every dtype converts to float64 exactly), with the
// dtype and shape.
std::string bits(const Tensor& t) {
  auto v = nx::to_array(host(t));
  std::string s = t.describe() + ":";
  for (double d : v) s += " " + std::to_string(std::bit_cast<uint64_t>(d));
  return s;
}

void expect_values(const std::string& name, const Tensor& t, const std::vector<double>& want,
                   double rel = 1e-13) {
  auto got = nx::to_array(host(t));
  ASSERT_EQ(got.size(), want.size()) << name;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * std::max(1.0, std::fabs(want[i])))
        << name << " element " << i;
}

class MathOps : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
  // f eagerly on this device and compiled on this device give the host's eager bits.
  template <class F, class... T>
  void same_bits(const std::string& name, F f, const T&... args) const {
    const std::string want = bits(f(host(args)...));
    EXPECT_EQ(bits(f(on(args)...)), want) << name << " eager on " << GetParam();
    EXPECT_EQ(bits(rune::jit(f)(on(args)...)), want) << name << " compiled on " << GetParam();
  }
};

// numpy 2.4 (python3 -m pip install numpy), x = the x34() above:
//   np.var(x); np.var(x, axis=0); np.var(x, axis=1, ddof=1); np.std(x, axis=1);
//   np.std(x, ddof=1); np.linalg.norm(x); np.linalg.norm(x, axis=1);
//   np.linalg.norm(x, ord=1, axis=1); np.linalg.norm(x, ord=np.inf, axis=0);
//   np.cumprod(x, axis=1); np.cumprod(x, axis=0)
TEST_P(MathOps, ReductionsMatchNumpy) {
  Tensor x = on(x34());
  expect_values("var", nx::var(x), {4.084635416666667});
  expect_values("var axis 0", nx::var(x, {0}),
                {3.388888888888889, 2.1666666666666665, 3.1666666666666665, 4.388888888888889});
  expect_values("var axis 1 ddof 1", nx::var(x, {1}, 1),
                {4.890625, 4.723958333333333, 5.682291666666667});
  expect_values("std axis 1", nx::std(x, {-1}),
                {1.9151941807555704, 1.8822775432969496, 2.064393070614218});
  expect_values("std ddof 1", nx::std(x, {}, 1), {2.1109158934194676});
  EXPECT_EQ(nx::var(x, {1}, 0, true).shape(), (Shape{3, 1}));
  expect_values("norm", nx::norm(x), {7.39509972887452});
  expect_values("norm axis 1", nx::norm(x, 2, {1}),
                {4.0697051490249265, 4.589389937671455, 4.130677910464576});
  expect_values("norm 1", nx::norm(x, 1, {1}), {7.25, 7.25, 7.25});
  expect_values("norm inf", nx::norm(x, INFINITY, {0}), {4.0, 2.25, 3.0, 3.0});
  expect_values(
      "cumprod axis 1", nx::cumprod(x, 1),
      {1.5, -3.375, -10.125, -5.0625, 4.0, 1.0, -1.0, -2.0, -0.5, -0.625, -1.5625, 4.6875});
  expect_values("cumprod axis 0", nx::cumprod(x, 0),
                {1.5, -2.25, 3.0, 0.5, 6.0, -0.5625, -3.0, 1.0, -3.0, -0.703125, -7.5, -3.0});
  // Integers: var, std and norm give float64; cumprod int64 (numpy: int64 on Linux).
  Tensor i = on(nx::create(nx::int32, {2, 4}, {3, -2, 0, 5, 1, 7, 2, -1}));
  Tensor ci = nx::cumprod(i, -1);
  EXPECT_EQ(ci.dtype(), nx::int64);
  EXPECT_EQ(nx::to_vector<int64_t>(ci), (std::vector<int64_t>{3, -6, 0, 0, 1, 7, 14, -14}));
  EXPECT_EQ(nx::var(i).dtype(), nx::float64);
  expect_values("var int32", nx::var(i), {8.109375});  // np.var([3,-2,0,5,1,7,2,-1])
  EXPECT_EQ(nx::norm(i, 1, {1}).dtype(), nx::float64);
  // 16-bit floats compute at float32 and round once: var([65504, -65504]) is 65504^2, which
  // overflows float16 to inf, but its std is 65504.
  Tensor h = on(nx::create(nx::float16, {2}, {65504, -65504}));
  EXPECT_EQ(nx::std(h).dtype(), nx::float16);
  EXPECT_EQ(nx::item<double>(nx::std(h)), 65504.0);
  Tensor ch = nx::cumprod(on(host(nx::create(nx::bfloat16, {3}, {2, 0.5, -3}))));
  EXPECT_EQ(ch.dtype(), nx::bfloat16);
  EXPECT_EQ(nx::to_array(ch), (std::vector<double>{2, 1, -3}));
  // int64 products wrap as numpy's: 2^62 * 4 = 0.
  Tensor w = on(nx::create(nx::int64, {3}, {4611686018427387904.0, 4, 3}));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::cumprod(w)),
            (std::vector<int64_t>{4611686018427387904, 0, 0}));
}

TEST_P(MathOps, AllAnyTruth) {
  // Nonzero is true, NaN is true, -0 is false (numpy's bool()).
  Tensor f = on(f64({2, 3}, {NAN, 1, 2, -0.0, 0, 3}));
  EXPECT_EQ(nx::to_vector<uint8_t>(nx::all(f, {1})), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(nx::to_vector<uint8_t>(nx::any(f, {1})), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(nx::to_vector<uint8_t>(nx::any(f, {0})), (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(nx::to_vector<uint8_t>(nx::all(f, {0})), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(nx::all(f).dtype(), nx::bool_);
  EXPECT_FALSE(nx::item<bool>(nx::all(f)));
  Tensor z = on(host(nx::zeros(nx::int32, {2, 2})));
  EXPECT_FALSE(nx::item<bool>(nx::any(z)));
  EXPECT_EQ(nx::all(z, {1}, true).shape(), (Shape{2, 1}));
  Tensor b = on(host(nx::create(nx::bool_, {3}, {1, 1, 1})));
  EXPECT_TRUE(nx::item<bool>(nx::all(b)));
  // Over no elements: all is true, any false.
  Tensor e = on(host(nx::zeros(nx::float32, {0, 2})));
  EXPECT_EQ(nx::to_vector<uint8_t>(nx::all(e, {0})), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(nx::to_vector<uint8_t>(nx::any(e, {0})), (std::vector<uint8_t>{0, 0}));
}

TEST_P(MathOps, Triangles) {
  Tensor x = on(x34());
  EXPECT_EQ(nx::to_array(nx::tril(x)),
            (std::vector<double>{1.5, 0, 0, 0, 4.0, 0.25, 0, 0, -0.5, 1.25, 2.5, 0}));
  EXPECT_EQ(nx::to_array(nx::tril(x, -1)),
            (std::vector<double>{0, 0, 0, 0, 4.0, 0, 0, 0, -0.5, 1.25, 0, 0}));
  EXPECT_EQ(nx::to_array(nx::triu(x, 1)),
            (std::vector<double>{0, -2.25, 3.0, 0.5, 0, 0, -1.0, 2.0, 0, 0, 0, -3.0}));
  EXPECT_EQ(nx::to_array(nx::triu(x, -1)),
            (std::vector<double>{1.5, -2.25, 3.0, 0.5, 4.0, 0.25, -1.0, 2.0, 0, 1.25, 2.5, -3.0}));
  // A batch of bool masks: the causal mask of attention.
  Tensor ones = on(host(nx::ones(nx::bool_, {2, 3, 3})));
  Tensor causal = nx::tril(ones);
  EXPECT_EQ(causal.dtype(), nx::bool_);
  EXPECT_EQ(nx::to_vector<uint8_t>(causal),
            (std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1}));
}

// numpy 2.4: a = np.arange(6.).reshape(2,3)*.5-1, b = np.arange(12.).reshape(3,4)*.25-1,
// v = [1.5,-2,.25], w = [4,.5,-8], sq = np.arange(9.).reshape(3,3)-4, and np.einsum of each.
TEST_P(MathOps, EinsumMatchesNumpy) {
  Tensor a = on(host(nx::reshape(nx::arange(nx::float64, 0, 6), {2, 3}) * 0.5 - 1.0));
  Tensor b = on(host(nx::reshape(nx::arange(nx::float64, 0, 12), {3, 4}) * 0.25 - 1.0));
  Tensor v = on(f64({3}, {1.5, -2.0, 0.25})), w = on(f64({3}, {4.0, 0.5, -8.0}));
  Tensor sq = on(host(nx::reshape(nx::arange(nx::float64, 0, 9), {3, 3}) - 4.0));
  EXPECT_EQ(nx::to_array(nx::einsum("ij,jk->ik", a, b)),
            (std::vector<double>{1.0, 0.625, 0.25, -0.125, 1.0, 1.75, 2.5, 3.25}));
  EXPECT_EQ(nx::to_array(nx::einsum("ij,jk", a, b)), nx::to_array(nx::einsum("ij,jk->ik", a, b)));
  EXPECT_EQ(nx::to_array(nx::einsum("ij->ji", a)),
            (std::vector<double>{-1.0, 0.5, -0.5, 1.0, 0.0, 1.5}));
  EXPECT_EQ(nx::einsum("ij->ji", a).shape(), (Shape{3, 2}));
  EXPECT_EQ(nx::to_array(nx::einsum("ij->", a)), (std::vector<double>{1.5}));
  EXPECT_EQ(nx::to_array(nx::einsum("ij->j", a)), (std::vector<double>{-0.5, 0.5, 1.5}));
  EXPECT_EQ(nx::to_array(nx::einsum("i,i->", v, w)), (std::vector<double>{3.0}));
  EXPECT_EQ(nx::to_array(nx::einsum("i,j->ij", v, w)),
            (std::vector<double>{6.0, 0.75, -12.0, -8.0, -1.0, 16.0, 1.0, 0.125, -2.0}));
  EXPECT_EQ(nx::to_array(nx::einsum("ii->i", sq)), (std::vector<double>{-4.0, 0.0, 4.0}));
  EXPECT_EQ(nx::to_array(nx::einsum("ii->", sq)), (std::vector<double>{0.0}));
  EXPECT_EQ(nx::to_array(nx::einsum("ii", sq)), (std::vector<double>{0.0}));  // implicit: trace
  // Mixed cases (numpy 2.4 again): a diagonal contracted, an elementwise product, a whole
  // operand summed away, a matrix-vector product, an implicit output.
  EXPECT_EQ(nx::to_array(nx::einsum("ii,i->i", sq, v)), (std::vector<double>{-6.0, 0.0, 1.0}));
  EXPECT_EQ(nx::to_array(nx::einsum("ij,ij->ij", a, a)),
            (std::vector<double>{1.0, 0.25, 0.0, 0.25, 1.0, 2.25}));
  EXPECT_EQ(nx::to_array(nx::einsum("ij,k->k", a, w)), (std::vector<double>{6.0, 0.75, -12.0}));
  EXPECT_EQ(nx::to_array(nx::einsum("ij,j->i", a, v)), (std::vector<double>{-0.5, -0.875}));
  EXPECT_EQ(nx::to_array(nx::einsum("ji,j", sq, w)), (std::vector<double>{-32.5, -36.0, -39.5}));
  // A diagonal is a strided view: -0 stays -0 (a masked sum would give +0).
  Tensor nz = on(f64({2, 2}, {-0.0, 1, 2, 3}));
  EXPECT_TRUE(std::signbit(nx::to_array(nx::einsum("ii->i", nz))[0]));
}

// The contractions attention uses are matmul's: the same bits as nx::matmul of the permuted
// operands.
TEST_P(MathOps, EinsumIsMatmul) {
  Tensor q = on(host(nx::rand(nx::key(1), nx::float32, {2, 3, 5, 4})));
  Tensor k = on(host(nx::rand(nx::key(2), nx::float32, {2, 3, 6, 4})));
  Tensor s = nx::einsum("bhqd,bhkd->bhqk", q, k);
  EXPECT_EQ(s.shape(), (Shape{2, 3, 5, 6}));
  EXPECT_EQ(bits(s), bits(nx::matmul(q, nx::permute(k, {0, 1, 3, 2}))));
  Tensor p = nx::softmax(s);
  Tensor vv = on(host(nx::rand(nx::key(3), nx::float32, {2, 3, 6, 4})));
  EXPECT_EQ(bits(nx::einsum("bhqk,bhkd->bhqd", p, vv)), bits(nx::matmul(p, vv)));
  Tensor a = on(host(nx::rand(nx::key(4), nx::float32, {7, 9})));
  Tensor b = on(host(nx::rand(nx::key(5), nx::float32, {9, 3})));
  EXPECT_EQ(bits(nx::einsum("ij,jk->ik", a, b)), bits(nx::matmul(a, b)));
  EXPECT_EQ(bits(nx::einsum("ij,jk->ki", a, b)), bits(nx::transpose(nx::matmul(a, b))));
  Tensor ba = on(host(nx::rand(nx::key(6), nx::float32, {4, 7, 9})));
  Tensor bb = on(host(nx::rand(nx::key(7), nx::float32, {4, 9, 3})));
  EXPECT_EQ(bits(nx::einsum("bij,bjk->bik", ba, bb)), bits(nx::matmul(ba, bb)));
  // Integers contract exactly, as matmul's.
  Tensor ia = on(host(nx::create(nx::int32, {2, 2}, {1, 2, 3, 4})));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::einsum("ij,jk->ik", ia, ia)),
            (std::vector<int64_t>{7, 10, 15, 22}));
}

// Ellipses broadcast as numpy's (numpy 2.4: A = np.arange(12.).reshape(2,1,3,2)*.5-1,
// B = np.arange(16.).reshape(4,2,2)*.25-1, x = np.arange(6.).reshape(2,3)-2, y = [1.5,-2,.25]);
// three or more operands contract left to right, each pair one matmul.
TEST_P(MathOps, EinsumEllipsesAndChains) {
  Tensor A = on(host(nx::reshape(nx::arange(nx::float64, 0, 12), {2, 1, 3, 2}) * 0.5 - 1.0));
  Tensor B = on(host(nx::reshape(nx::arange(nx::float64, 0, 16), {4, 2, 2}) * 0.25 - 1.0));
  Tensor r = nx::einsum("...ij,...jk->...ik", A, B);
  EXPECT_EQ(r.shape(), (Shape{2, 4, 3, 2}));
  EXPECT_EQ(nx::to_array(r),
            (std::vector<double>{1.25,  0.875,  -0.25, -0.125, -1.75, -1.125, -0.25, -0.625,
                                 0.25,  0.375,  0.75,  1.375,  -1.75, -2.125, 0.75,  0.875,
                                 3.25,  3.875,  -3.25, -3.625, 1.25,  1.375,  5.75,  6.375,
                                 -3.25, -2.125, -4.75, -3.125, -6.25, -4.125, 1.25,  2.375,
                                 1.75,  3.375,  2.25,  4.375,  5.75,  6.875,  8.25,  9.875,
                                 10.75, 12.875, 10.25, 11.375, 14.75, 16.375, 19.25, 21.375}));
  // The implicit output puts the ellipsis first (numpy's "ij..." is "ij...->...ij").
  Tensor A3 = nx::reshape(A, {2, 3, 2});
  EXPECT_EQ(nx::einsum("ij...", A3).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(bits(nx::einsum("ij...", A3)), bits(nx::permute(A3, {2, 0, 1})));
  EXPECT_EQ(bits(nx::einsum("...ij->...ji", A3)), bits(nx::permute(A3, {0, 2, 1})));
  Tensor x = on(host(nx::reshape(nx::arange(nx::float64, 0, 6), {2, 3}) - 2.0));
  Tensor y = on(f64({3}, {1.5, -2.0, 0.25}));
  EXPECT_EQ(nx::to_array(nx::einsum("...,...", x, y)),
            (std::vector<double>{-3.0, 2.0, 0.0, 1.5, -4.0, 0.75}));
  // Chains: a = np.arange(6.).reshape(2,3)*.5-1, b = np.arange(12.).reshape(3,4)*.25-1.
  Tensor a = on(host(nx::reshape(nx::arange(nx::float64, 0, 6), {2, 3}) * 0.5 - 1.0));
  Tensor b = on(host(nx::reshape(nx::arange(nx::float64, 0, 12), {3, 4}) * 0.25 - 1.0));
  Tensor w = on(f64({4}, {4.0, 0.5, -8.0, 2.0}));
  EXPECT_EQ(nx::to_array(nx::einsum("ij,jk,k->i", {a, b, w})),
            (std::vector<double>{2.0625, -8.625}));
  EXPECT_EQ(nx::to_array(nx::einsum("i,i,i->", {y, y, y})), (std::vector<double>{-4.609375}));
  EXPECT_EQ(nx::to_array(nx::sum(nx::einsum("bi,bj,bk->bijk", {a, a, a}))),
            (std::vector<double>{23.625}));
  Tensor fa = on(host(nx::rand(nx::key(8), nx::float32, {5, 7})));
  Tensor fb = on(host(nx::rand(nx::key(9), nx::float32, {7, 6})));
  Tensor fc = on(host(nx::rand(nx::key(10), nx::float32, {6, 3})));
  EXPECT_EQ(bits(nx::einsum("ij,jk,kl->il", {fa, fb, fc})),
            bits(nx::matmul(nx::matmul(fa, fb), fc)));
  EXPECT_EQ(bits(nx::einsum("ij,jk->ik", {fa, fb})), bits(nx::einsum("ij,jk->ik", fa, fb)));
}

// numpy 2.4, x = x34(), gamma = [1,.5,-2,1.5], beta = [0,.25,1,-.5], t = the target below,
// labels = [2,0,3]: the formulas of core/nn.h written out in numpy (log_softmax as
// x - max - log(sum(exp(x - max)))).
TEST_P(MathOps, ModelMathMatchesNumpy) {
  Tensor x = on(x34());
  Tensor gamma = on(f64({4}, {1.0, 0.5, -2.0, 1.5})), beta = on(f64({4}, {0.0, 0.25, 1.0, -0.5}));
  expect_values("layer_norm", nx::nn::layer_norm(x, gamma, beta),
                {0.4242383882560083, -0.5168924710781688, -1.4148954408418932, -0.646851749780926,
                 1.4277895504067986, -0.032237469266460206, 3.4571262030256533, 0.04787273445842266,
                 -0.2724768592101487, 0.5376144624996014, -1.3614661131546222, -2.725227683549548});
  expect_values(
      "rms_norm", nx::nn::rms_norm(x, gamma),
      {0.7371540511859179, -0.5528655383894384, -2.9486162047436717, 0.36857702559295896,
       1.7431509087273582, 0.054473465897729945, 0.8715754543636791, 1.3073631815455187,
       -0.24209098469055737, 0.3026137308631967, -2.4209098469055736, -2.1788188622150164});
  Tensor t = on(f64({3, 4}, {1.0, -2.0, 2.5, 0.0, 3.5, 0.5, -1.5, 2.0, 0.0, 1.0, 2.0, -2.5}));
  expect_values("mse", nx::nn::mse(x, t), {0.18229166666666666});
  Tensor labels = on(host(nx::create(nx::int32, {3}, {2, 0, 3})));
  expect_values("cross_entropy", nx::nn::cross_entropy(x, labels), {2.072186878758231});
  expect_values("cross_entropy smoothed", nx::nn::cross_entropy(x, labels, 0.1),
                {2.136770212091564});
  EXPECT_EQ(nx::nn::cross_entropy(x, labels).shape(), Shape{});
  // ignore_index (torch's): row 1's label -100 adds nothing and is not counted (numpy 2.4: the
  // mean of rows 0 and 2), with and without smoothing; every row ignored is 0 / 0.
  Tensor padded = on(host(nx::create(nx::int32, {3}, {2, -100, 3})));
  expect_values("cross_entropy ignore_index", nx::nn::cross_entropy(x, padded, 0, -100),
                {3.0316662011313045});
  expect_values("cross_entropy ignore_index smoothed", nx::nn::cross_entropy(x, padded, 0.1, -100),
                {2.9941662011313044});
  Tensor all_padded = on(host(nx::create(nx::int32, {3}, {-100, -100, -100})));
  EXPECT_TRUE(std::isnan(nx::item<double>(nx::nn::cross_entropy(x, all_padded, 0, -100))));
  // A label equal to ignore_index inside [0, C) is ignored too (torch's rule).
  expect_values("cross_entropy ignore_index 0", nx::nn::cross_entropy(x, labels, 0, 0),
                nx::to_array(nx::nn::cross_entropy(x, padded, 0, -100)), 0.0);
  // layer_norm along axis 0 is layer_norm of the transpose along its last axis.
  Tensor g3 = on(f64({3}, {1.0, 2.0, 0.5})), b3 = on(f64({3}, {0.5, 0.0, -1.0}));
  expect_values("layer_norm axis 0", nx::transpose(nx::nn::layer_norm(x, g3, b3, 1e-5, 0)),
                nx::to_array(nx::nn::layer_norm(nx::transpose(x), g3, b3)), 1e-15);
  // A -inf logit of another class gives no NaN (a where, not 0 * -inf).
  Tensor inf_logits = on(f64({1, 3}, {0.0, -INFINITY, 1.0}));
  Tensor one = on(host(nx::create(nx::int64, {1}, {2})));
  expect_values("cross_entropy with -inf", nx::nn::cross_entropy(inf_logits, one),
                {std::log1p(std::exp(-1.0))});
  // float16 logits: computed at float32, the loss rounded once to float16.
  Tensor hl = nx::cast(x, nx::float16);
  EXPECT_EQ(nx::nn::cross_entropy(hl, labels).dtype(), nx::float16);
  expect_values("cross_entropy float16", nx::nn::cross_entropy(hl, labels), {2.072186878758231},
                1e-3);
}

// A label outside [0, C) raises: at once eagerly on the host, after the program under rune::jit
// (docs/semantics.md §4), at the next wait on another device.
TEST_P(MathOps, CrossEntropyLabelOutOfRange) {
  Tensor x = on(x34());
  Tensor labels = on(host(nx::create(nx::int64, {3}, {2, 4, 0})));
  const std::string dev = GetParam();
  auto run = [&](auto f) {
    try {
      Tensor r = f(x, labels);
      nx::wait(r);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto ce = [](const Tensor& l, const Tensor& y) { return nx::nn::cross_entropy(l, y); };
  const std::string want = "nx::nn::cross_entropy: label 4 at [1] is outside [0, 4)";
  EXPECT_EQ(run(ce), want);
  EXPECT_EQ(run(rune::jit(ce)), want);
  nx::wait(nx::place(x, dev));  // nothing else is left failed
  Tensor negative = on(host(nx::create(nx::int32, {3}, {0, 1, -1})));
  auto neg = [&](const Tensor& l, const Tensor&) { return nx::nn::cross_entropy(l, negative); };
  EXPECT_EQ(run(neg), "nx::nn::cross_entropy: label -1 at [2] is outside [0, 4)");
  // With an ignore_index, that label is allowed and any other outside [0, C) still raises.
  auto ignoring = [&](const Tensor& l, const Tensor&) {
    return nx::nn::cross_entropy(l, negative, 0, -1);
  };
  EXPECT_EQ(run(ignoring), "no error");
  EXPECT_EQ(run(rune::jit(ignoring)), "no error");
  auto other = [&](const Tensor& l, const Tensor&) {
    return nx::nn::cross_entropy(l, negative, 0, -100);
  };
  EXPECT_EQ(run(rune::jit(other)), "nx::nn::cross_entropy: label -1 at [2] is outside [0, 4)");
  nx::wait(nx::place(x, dev));
}

// Eager on each device and compiled on each device: the host's eager bits, for every op and
// for gradients through them.
TEST_P(MathOps, SameBitsEagerCompiledAndOnEveryDevice) {
  Tensor x = host(nx::rand(nx::key(11), nx::float32, {3, 5}) * 4.0 - 2.0);
  Tensor z = host(nx::where(nx::abs(x) < 0.5, nx::zeros_like(x), x));  // some zeros
  same_bits(
      "var", [](const Tensor& t) { return nx::var(t, {1}); }, x);
  same_bits(
      "std", [](const Tensor& t) { return nx::std(t, {0}, 1); }, x);
  same_bits(
      "all", [](const Tensor& t) { return nx::all(t, {1}); }, z);
  same_bits(
      "any", [](const Tensor& t) { return nx::any(t); }, z);
  same_bits(
      "norm", [](const Tensor& t) { return nx::norm(t); }, x);
  same_bits(
      "norm 1", [](const Tensor& t) { return nx::norm(t, 1, {1}); }, x);
  same_bits(
      "norm inf", [](const Tensor& t) { return nx::norm(t, INFINITY, {0}); }, x);
  same_bits(
      "tril", [](const Tensor& t) { return nx::tril(t, 1); }, x);
  same_bits(
      "triu", [](const Tensor& t) { return nx::triu(t); }, x);
  same_bits(
      "cumprod", [](const Tensor& t) { return nx::cumprod(t, 1); }, z);
  same_bits(
      "cumprod axis 0", [](const Tensor& t) { return nx::cumprod(t, 0); }, x);
  Tensor y = host(nx::rand(nx::key(12), nx::float32, {5, 4}));
  same_bits(
      "einsum", [](const Tensor& a, const Tensor& b) { return nx::einsum("ij,jk->ik", a, b); }, x,
      y);
  same_bits(
      "einsum sum", [](const Tensor& t) { return nx::einsum("ij->j", t); }, x);
  Tensor y3 = host(nx::rand(nx::key(14), nx::float32, {4, 2}));
  same_bits(
      "einsum chain",
      [](const Tensor& a, const Tensor& b, const Tensor& c) {
        return nx::einsum("ij,jk,kl->il", {a, b, c});
      },
      x, y, y3);
  same_bits(
      "einsum ellipsis",
      [](const Tensor& a, const Tensor& b) { return nx::einsum("...j,jk->...k", a, b); }, x, y);
  Tensor g = host(nx::rand(nx::key(13), nx::float32, {5}));
  same_bits(
      "layer_norm", [](const Tensor& t, const Tensor& p) { return nx::nn::layer_norm(t, p, p); }, x,
      g);
  same_bits(
      "rms_norm", [](const Tensor& t, const Tensor& p) { return nx::nn::rms_norm(t, p); }, x, g);
  same_bits(
      "mse", [](const Tensor& a, const Tensor& b) { return nx::nn::mse(a, b); }, x, z);
  Tensor labels = host(nx::create(nx::int32, {3}, {4, 0, 2}));
  same_bits(
      "cross_entropy",
      [](const Tensor& l, const Tensor& y) { return nx::nn::cross_entropy(l, y, 0.1); }, x, labels);
  Tensor padded = host(nx::create(nx::int32, {3}, {4, -100, 2}));
  same_bits(
      "cross_entropy ignore_index",
      [](const Tensor& l, const Tensor& y) { return nx::nn::cross_entropy(l, y, 0.1, -100); }, x,
      padded);
  // Gradients (vjp graphs) of the compositions.
  same_bits(
      "grad cumprod",
      [](const Tensor& t) {
        return rune::grad([](const Tensor& u) { return nx::sum(nx::cumprod(u, 1)); }, t);
      },
      z);
  same_bits(
      "grad norm",
      [](const Tensor& t) { return rune::grad([](const Tensor& u) { return nx::norm(u); }, t); },
      x);
  same_bits(
      "grad cross_entropy",
      [](const Tensor& t, const Tensor& l) {
        return rune::grad([&](const Tensor& u) { return nx::nn::cross_entropy(u, l); }, t);
      },
      x, labels);
}

// jax.grad(lambda x: jnp.linalg.norm(x, 1))(jnp.array([0., -0., 2., -3.])) is [1, 1, 1, -1]
// (jnp.abs's derivative is select(x >= 0, 1, -1)); rune's norm ord 1 gave 0 at both zeros. The
// value keeps sum(abs(x))'s bits (+0 for a row of -0).
TEST_P(MathOps, NormOrd1HasJaxsGradientAtZero) {
  Tensor x = on(f64({2, 4}, {0, -0.0, 2, -3, -0.0, -0.0, -0.0, -0.0}));
  auto loss = [](const Tensor& t) { return nx::sum(nx::norm(t, 1, {1})); };
  const std::vector<double> want{1, 1, 1, -1, 1, 1, 1, 1};
  EXPECT_EQ(nx::to_vector<double>(rune::grad(loss, x)), want);
  EXPECT_EQ(
      nx::to_vector<double>(rune::jit([&](const Tensor& t) { return rune::grad(loss, t); })(x)),
      want);
  same_bits(
      "norm 1 of zeros", [](const Tensor& t) { return nx::norm(t, 1, {1}); }, x);
  EXPECT_EQ(bits(nx::norm(x, 1, {1})), bits(nx::sum(nx::abs(x), {1})));
  // Its second derivative is 0, as JAX's (jax.hessian of the same is all zeros).
  auto grad_sum = [&](const Tensor& t) { return nx::sum(rune::grad(loss, t)); };
  EXPECT_EQ(nx::to_vector<double>(rune::grad(grad_sum, x)), std::vector<double>(8, 0.0));
}

// numpy's (and jnp.dot's) dot of a 0-d operand multiplies: np.dot(2., [1., 2.]) is [2., 4.];
// it raised "scalar operand". jax.grad of sum(jnp.dot(a, b)) at a = 2., b = [1., 2.] is
// (3., [2., 2.]).
TEST_P(MathOps, DotOfAScalarMultiplies) {
  Tensor a = on(f64({}, {2})), b = on(f64({2}, {1, 2}));
  auto dot = [](const Tensor& p, const Tensor& q) { return nx::dot(p, q); };
  EXPECT_EQ(nx::to_vector<double>(nx::dot(a, b)), (std::vector<double>{2, 4}));
  EXPECT_EQ(nx::to_vector<double>(nx::dot(b, on(f64({}, {3})))), (std::vector<double>{3, 6}));
  EXPECT_EQ(nx::item<double>(nx::dot(a, on(f64({}, {3})))), 6.0);
  EXPECT_EQ(nx::dot(a, on(f64({2, 3}, {1, 2, 3, 4, 5, 6}))).shape(), (Shape{2, 3}));
  same_bits("dot scalar", dot, host(a), host(b));
  // The product's sign of zero is the multiply's (np.dot(-1., 0.) is -0.).
  EXPECT_EQ(bits(nx::dot(on(f64({}, {-1})), on(f64({}, {0})))), bits(f64({}, {-0.0})));
  auto loss = [](const Tensor& p, const Tensor& q) { return nx::sum(nx::dot(p, q)); };
  auto [ga, gb] = rune::grad(loss, rune::argnums<0, 1>)(a, b);
  EXPECT_EQ(nx::item<double>(ga), 3.0);
  EXPECT_EQ(nx::to_vector<double>(gb), (std::vector<double>{2, 2}));
  auto [ja, jb] = rune::jit([&](const Tensor& p, const Tensor& q) {
    return rune::grad(loss, rune::argnums<0, 1>)(p, q);
  })(a, b);
  EXPECT_EQ(bits(ja), bits(ga));
  EXPECT_EQ(bits(jb), bits(gb));
  // Integers multiply in int64 and bool gives bool, as the other contractions.
  Tensor i =
      nx::dot(on(host(nx::full(nx::int32, {}, 3))), on(host(nx::create(nx::int32, {2}, {7, -2}))));
  EXPECT_EQ(i.dtype(), nx::int64);
  EXPECT_EQ(nx::to_vector<int64_t>(i), (std::vector<int64_t>{21, -6}));
  Tensor t =
      nx::dot(on(host(nx::full(nx::bool_, {}, 1))), on(host(nx::create(nx::bool_, {2}, {1, 0}))));
  EXPECT_EQ(t.dtype(), nx::bool_);
  EXPECT_EQ(nx::to_vector<uint8_t>(t), (std::vector<uint8_t>{1, 0}));
  // Operands that fail leave nothing behind: a dtype mismatch still raises.
  EXPECT_EQ(rt::error_of([&] {
              nx::dot(a, on(host(nx::create(nx::float32, {2}, {1, 2}))));
            }),
            "nx::dot: dtype mismatch: float64 [] and float32 [2] (cast one with nx::cast)");
}

INSTANTIATE_TEST_SUITE_P(Devices, MathOps, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

// ---- gradients against central finite differences (float64, on the host) ----

using Fn = std::function<Tensor(const Tensor&)>;

std::vector<double> numeric_grad(const Fn& f, const Tensor& x, const Tensor& w) {
  auto xs = nx::to_vector<double>(x);
  std::vector<double> g(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    double h = 1e-6 * std::max(1.0, std::fabs(xs[i]));
    auto at = [&](double d) {
      auto v = xs;
      v[i] += d;
      return nx::item<double>(nx::sum(f(f64(x.shape(), v)) * w));
    };
    g[i] = (at(h) - at(-h)) / (2 * h);
  }
  return g;
}

// rune::grad of sum(f(x) * w) for random weights w against the central differences, eagerly,
// and compiled with the eager gradient's bits.
void check_grad(const std::string& name, const Fn& f, const Tensor& x) {
  Tensor w = host(nx::rand(nx::key(7), nx::float64, f(x).shape()) + 0.5);
  auto loss = [&](const Tensor& t) { return nx::sum(f(t) * w); };
  auto g = nx::to_vector<double>(rune::grad(loss, x));
  auto n = numeric_grad(f, x, w);
  ASSERT_EQ(g.size(), n.size()) << name;
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], n[i], 1e-6 * std::max(1.0, std::fabs(n[i]))) << name << " element " << i;
  auto gj =
      nx::to_vector<double>(rune::jit([&](const Tensor& t) { return rune::grad(loss, t); })(x));
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(g[i]), std::bit_cast<uint64_t>(gj[i]))
        << name << " compiled, element " << i;
}

TEST(MathGrad, ReductionsAndTriangles) {
  Tensor x = x34();
  check_grad(
      "var", [](const Tensor& t) { return nx::var(t); }, x);
  check_grad(
      "var axis 1 ddof 1", [](const Tensor& t) { return nx::var(t, {1}, 1); }, x);
  check_grad(
      "std axis 0", [](const Tensor& t) { return nx::std(t, {0}); }, x);
  check_grad(
      "norm", [](const Tensor& t) { return nx::norm(t); }, x);
  check_grad(
      "norm axis 1", [](const Tensor& t) { return nx::norm(t, 2, {1}, true); }, x);
  check_grad(
      "norm 1", [](const Tensor& t) { return nx::norm(t, 1, {1}); }, x);
  check_grad(
      "norm inf", [](const Tensor& t) { return nx::norm(t, INFINITY, {1}); }, x);
  check_grad(
      "tril", [](const Tensor& t) { return nx::tril(t); }, x);
  check_grad(
      "triu", [](const Tensor& t) { return nx::triu(t, 1); }, x);
}

TEST(MathGrad, NormAtZeroIsZero) {
  // sqrt's derivative is infinite at 0; the norm's gradient there is 0 (as torch's and
  // optax.safe_norm's), also for a zero row beside nonzero ones.
  Tensor z = f64({2, 3}, {0, 0, 0, 3, 0, -4});
  auto g = nx::to_vector<double>(
      rune::grad([](const Tensor& t) { return nx::sum(nx::norm(t, 2, {1})); }, z));
  const std::vector<double> want = {0, 0, 0, 0.6, 0, -0.8};
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i)
    if (want[i] == 0)
      EXPECT_EQ(g[i], 0.0) << "element " << i;  // not NaN
    else
      EXPECT_NEAR(g[i], want[i], 1e-15) << "element " << i;
  auto all = nx::to_vector<double>(
      rune::grad([](const Tensor& t) { return nx::norm(t); }, nx::zeros_like(z)));
  EXPECT_EQ(all, std::vector<double>(6, 0.0));
}

TEST(MathGrad, StdOfAConstantIsNaN) {
  // sqrt's infinite slope at a zero variance times zero deviations: NaN, as jnp.std's.
  auto g = nx::to_vector<double>(
      rune::grad([](const Tensor& t) { return nx::std(t); }, f64({3}, {2, 2, 2})));
  for (double v : g) EXPECT_TRUE(std::isnan(v));
}

TEST(MathGrad, CumprodWithZeros) {
  // Rows with no zero, one zero and two zeros: a formula dividing by x gives NaN or wrong values
  // at the zeros; the running products' own rules give the exact derivative.
  Tensor x = f64({3, 5},
                 {1.5, -2.0, 0.5, 3.0, -1.25, 2.0, 0.0, 1.5, -3.0, 0.75, 0.0, 1.0, 0.0, 2.0, -0.5});
  check_grad(
      "cumprod axis 1", [](const Tensor& t) { return nx::cumprod(t, 1); }, x);
  check_grad(
      "cumprod axis 0", [](const Tensor& t) { return nx::cumprod(t, 0); }, x);
  // By hand: y = cumprod([2, 0, 3]) = [2, 0, 0]; d sum(y) / dx = [1 + 0 + 0, 2 + 2*3, 0].
  auto g = nx::to_vector<double>(
      rune::grad([](const Tensor& t) { return nx::sum(nx::cumprod(t)); }, f64({3}, {2, 0, 3})));
  EXPECT_EQ(g, (std::vector<double>{1, 8, 0}));
  // Eight elements: three levels of the scan.
  Tensor long_x = f64({8}, {1.5, 0.0, -2.0, 0.5, 0.0, 1.25, 3.0, -1.0});
  check_grad(
      "cumprod 8", [](const Tensor& t) { return nx::cumprod(t); }, long_x);
}

TEST(MathGrad, Einsum) {
  Tensor a = host(nx::rand(nx::key(21), nx::float64, {3, 4}) - 0.5);
  Tensor b = host(nx::rand(nx::key(22), nx::float64, {4, 2}) - 0.5);
  check_grad(
      "ij,jk->ik a", [&](const Tensor& t) { return nx::einsum("ij,jk->ik", t, b); }, a);
  check_grad(
      "ij,jk->ik b", [&](const Tensor& t) { return nx::einsum("ij,jk->ik", a, t); }, b);
  check_grad(
      "ij->ji", [](const Tensor& t) { return nx::einsum("ij->ji", t); }, a);
  check_grad(
      "ij->", [](const Tensor& t) { return nx::einsum("ij->", t); }, a);
  Tensor sq = host(nx::rand(nx::key(23), nx::float64, {3, 3}));
  check_grad(
      "ii->i", [](const Tensor& t) { return nx::einsum("ii->i", t); }, sq);
  Tensor v = host(nx::rand(nx::key(24), nx::float64, {4}));
  check_grad(
      "i,i->", [&](const Tensor& t) { return nx::einsum("i,i->", t, v); }, v * 2.0);
  Tensor q = host(nx::rand(nx::key(25), nx::float64, {2, 2, 3, 4}));
  Tensor k = host(nx::rand(nx::key(26), nx::float64, {2, 2, 5, 4}));
  check_grad(
      "bhqd,bhkd->bhqk q", [&](const Tensor& t) { return nx::einsum("bhqd,bhkd->bhqk", t, k); }, q);
  check_grad(
      "bhqd,bhkd->bhqk k", [&](const Tensor& t) { return nx::einsum("bhqd,bhkd->bhqk", q, t); }, k);
  Tensor p = host(nx::rand(nx::key(27), nx::float64, {2, 2, 3, 5}));
  check_grad(
      "bhqk,bhkd->bhqd", [&](const Tensor& t) { return nx::einsum("bhqk,bhkd->bhqd", p, t); }, k);
  Tensor ba = host(nx::rand(nx::key(28), nx::float64, {2, 3, 4}));
  Tensor bb = host(nx::rand(nx::key(29), nx::float64, {2, 4, 2}));
  check_grad(
      "bij,bjk->bik", [&](const Tensor& t) { return nx::einsum("bij,bjk->bik", t, bb); }, ba);
  // An ellipsis broadcast against a batch of 1, and a chain of three.
  Tensor b1 = host(nx::rand(nx::key(30), nx::float64, {1, 4, 2}));
  check_grad(
      "...ij,...jk->...ik broadcast",
      [&](const Tensor& t) { return nx::einsum("...ij,...jk->...ik", ba, t); }, b1);
  Tensor c = host(nx::rand(nx::key(31), nx::float64, {2, 5}) - 0.5);
  check_grad(
      "ij,jk,kl->il middle",
      [&](const Tensor& t) {
        return nx::einsum("ij,jk,kl->il", {a, t, c});
      },
      b);
}

TEST(MathGrad, ModelMath) {
  Tensor x = x34();
  Tensor gamma = f64({4}, {1.0, 0.5, -2.0, 1.5}), beta = f64({4}, {0.0, 0.25, 1.0, -0.5});
  check_grad(
      "layer_norm x", [&](const Tensor& t) { return nx::nn::layer_norm(t, gamma, beta); }, x);
  check_grad(
      "layer_norm gamma", [&](const Tensor& t) { return nx::nn::layer_norm(x, t, beta); }, gamma);
  check_grad(
      "layer_norm beta", [&](const Tensor& t) { return nx::nn::layer_norm(x, gamma, t); }, beta);
  Tensor g3 = f64({3}, {1.0, 2.0, 0.5});
  check_grad(
      "layer_norm axis 0", [&](const Tensor& t) { return nx::nn::layer_norm(t, g3, g3, 1e-5, 0); },
      x);
  check_grad(
      "rms_norm x", [&](const Tensor& t) { return nx::nn::rms_norm(t, gamma); }, x);
  check_grad(
      "rms_norm gamma", [&](const Tensor& t) { return nx::nn::rms_norm(x, t); }, gamma);
  Tensor target = f64({3, 4}, {1.0, -2.0, 2.5, 0.0, 3.5, 0.5, -1.5, 2.0, 0.0, 1.0, 2.0, -2.5});
  check_grad(
      "mse", [&](const Tensor& t) { return nx::nn::mse(t, target); }, x);
  Tensor labels = nx::place(nx::create(nx::int64, {3}, {2, 0, 3}), "CPU");
  check_grad(
      "cross_entropy", [&](const Tensor& t) { return nx::nn::cross_entropy(t, labels); }, x);
  check_grad(
      "cross_entropy smoothed",
      [&](const Tensor& t) { return nx::nn::cross_entropy(t, labels, 0.1); }, x);
  Tensor padded = nx::place(nx::create(nx::int64, {3}, {2, -100, 3}), "CPU");
  check_grad(
      "cross_entropy ignore_index",
      [&](const Tensor& t) { return nx::nn::cross_entropy(t, padded, 0.1, -100); }, x);
  // By hand: d mean CE / d logits = (softmax - target_dist) / batch.
  auto g = nx::to_array(
      rune::grad([&](const Tensor& t) { return nx::nn::cross_entropy(t, labels, 0.1); }, x));
  auto sm = nx::to_array(nx::softmax(x));
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) {
      const int label[] = {2, 0, 3};
      double target_dist = (c == label[r] ? 0.9 : 0.0) + 0.1 / 4;
      EXPECT_NEAR(g[r * 4 + c], (sm[r * 4 + c] - target_dist) / 3, 1e-15);
    }
}

// ---- errors: std::invalid_argument naming the API and the values ----

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(MathErrors, NameTheApiAndTheValues) {
  Tensor x = x34();
  Tensor v = f64({3}, {1, 2, 3});
  EXPECT_EQ(error_of([&] { nx::norm(x, 3); }), "nx::norm: ord must be 1, 2 or inf, got 3");
  EXPECT_EQ(error_of([&] { nx::norm(x, 1); }),
            "nx::norm: ord 1 is a vector norm and needs one axis; got 2 axes of float64 [3, 4] "
            "(numpy's matrix norms are not provided)");
  EXPECT_EQ(error_of([&] { nx::norm(x, 1); }), error_of([&] { nx::norm(x, 1, {0, 1}); }));
  EXPECT_NE(error_of([&] { nx::var(x, {2}); }).find("nx::var"), std::string::npos);
  EXPECT_NE(error_of([&] { nx::all(x, {-3}); }).find("nx::all"), std::string::npos);
  EXPECT_EQ(error_of([&] { nx::tril(v); }), "nx::tril: needs at least two axes; got float64 [3]");
  EXPECT_EQ(error_of([&] { nx::triu(v); }), "nx::triu: needs at least two axes; got float64 [3]");
  EXPECT_EQ(error_of([&] { nx::cumprod(nx::scalar(nx::float64, 2)); }),
            "nx::cumprod: needs at least one axis; got the 0-d float64 []");
  EXPECT_NE(error_of([&] { nx::cumprod(x, 2); }).find("nx::cumprod"), std::string::npos);
  // numpy's dot of [3, 4] and [2, 4, 5] is [3, 2, 5], matmul's [2, 3, 5]: raised, not matmul's.
  EXPECT_EQ(error_of([&] {
              nx::dot(x, host(nx::zeros(nx::float64, {2, 4, 5})));
            }),
            "nx::dot: float64 [3, 4] and float64 [2, 4, 5]: numpy's dot of these is not a matrix "
            "product; use nx::matmul for batched products or nx::einsum for numpy's contraction");
}

TEST(MathErrors, EinsumNamesTheSubscripts) {
  Tensor a = x34(), b = f64({3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(error_of([&] { nx::einsum("ij,jk->ik", a, b); }),
            "nx::einsum: subscripts \"ij,jk->ik\": letter 'j' has extent 4 in float64 [3, 4] and 3 "
            "in float64 [3, 2]");
  EXPECT_EQ(error_of([&] { nx::einsum("ij->k", a); }),
            "nx::einsum: subscripts \"ij->k\": output letter 'k' is in no operand");
  EXPECT_EQ(error_of([&] { nx::einsum("ij->ii", a); }),
            "nx::einsum: subscripts \"ij->ii\": output letter 'i' appears twice");
  EXPECT_EQ(error_of([&] { nx::einsum("ijk->i", a); }),
            "nx::einsum: subscripts \"ijk->i\": operand subscript \"ijk\" has 3 letters for "
            "float64 [3, 4]");
  EXPECT_EQ(error_of([&] { nx::einsum("...i->i", a); }),
            "nx::einsum: subscripts \"...i->i\": an operand's ellipsis stands for 1 axis and the "
            "output has no ellipsis");
  EXPECT_EQ(error_of([&] { nx::einsum("i.j", a); }),
            "nx::einsum: subscripts \"i.j\": '.' in an operand is not part of an ellipsis \"...\"");
  EXPECT_EQ(error_of([&] { nx::einsum("i%", a); }),
            "nx::einsum: subscripts \"i%\": '%' in an operand is not a letter");
  EXPECT_EQ(
      error_of([&] { nx::einsum("...i...", a); }),
      "nx::einsum: subscripts \"...i...\": an operand \"...i...\" has more than one ellipsis");
  EXPECT_EQ(
      error_of([&] { nx::einsum("ij->...", a); }),
      "nx::einsum: subscripts \"ij->...\": the output has an ellipsis and no operand has one");
  EXPECT_EQ(error_of([&] {
              nx::einsum("...ij,...jk", nx::zeros(nx::float64, {2, 3, 4}),
                         nx::zeros(nx::float64, {3, 4, 2}));
            }),
            "nx::einsum: subscripts \"...ij,...jk\": the axes of the ellipsis do not broadcast: "
            "[2] of float64 [2, 3, 4], [3] of float64 [3, 4, 2]");
  EXPECT_EQ(error_of([&] {
              nx::einsum("ij,jk,kl", {a, a, a});
            }),
            "nx::einsum: subscripts \"ij,jk,kl\": letter 'j' has extent 4 in float64 [3, 4] and 3 "
            "in float64 [3, 4]");
  EXPECT_EQ(error_of([&] { nx::einsum("", std::vector<Tensor>{}); }),
            "nx::einsum: subscripts \"\": needs an operand");
  EXPECT_EQ(error_of([&] { nx::einsum("ij,jk->ik", a); }),
            "nx::einsum: subscripts \"ij,jk->ik\": 2 operand subscripts for 1 operands");
  EXPECT_EQ(error_of([&] { nx::einsum("ii->i", a); }),
            "nx::einsum: subscripts \"ii->i\": letter 'i' has extents 3 and 4 in float64 [3, 4]");
  EXPECT_NE(
      error_of([&] { nx::einsum("ij,jk->ik", a, nx::cast(b, nx::float32)); }).find("nx::einsum"),
      std::string::npos);
}

// A failed call changes nothing: its donated operands stay alive and readable (every check runs
// before any op does).
TEST(MathErrors, FailedCallsLeaveDonatedOperands) {
  Tensor a = x34(), b = f64({3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_THROW(nx::einsum("ij,jk->ik", nx::donate(a), nx::donate(b)), std::invalid_argument);
  EXPECT_EQ(nx::to_array(a), nx::to_array(x34()));
  EXPECT_EQ(nx::to_array(b).size(), 6u);
  Tensor g4 = f64({4}, {1, 1, 1, 1});
  EXPECT_THROW(nx::nn::layer_norm(nx::donate(a), nx::donate(g4), b), std::invalid_argument);
  EXPECT_EQ(nx::to_array(a), nx::to_array(x34()));
  EXPECT_EQ(nx::to_array(g4), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_THROW(nx::norm(nx::donate(a), 1), std::invalid_argument);
  EXPECT_EQ(nx::to_array(a), nx::to_array(x34()));
  // And a successful one consumes them.
  nx::einsum("ij->ji", nx::donate(a));
  EXPECT_THROW(nx::to_array(a), std::invalid_argument);
}

TEST(MathErrors, ModelMath) {
  Tensor x = x34();
  Tensor g4 = f64({4}, {1, 1, 1, 1}), g3 = f64({3}, {1, 1, 1});
  EXPECT_EQ(error_of([&] { nx::nn::layer_norm(x, g3, g4); }),
            "nx::nn::layer_norm: gamma must be float64 [4] for float64 [3, 4] (axis 1); got "
            "float64 [3]");
  EXPECT_EQ(error_of([&] { nx::nn::rms_norm(x, nx::cast(g4, nx::float32)); }),
            "nx::nn::rms_norm: gamma must be float64 [4] for float64 [3, 4] (axis 1); got "
            "float32 [4]");
  EXPECT_EQ(error_of([&] { nx::nn::layer_norm(x, g4, g4, -1); }),
            "nx::nn::layer_norm: eps must be >= 0, got -1");
  EXPECT_EQ(error_of([&] { nx::nn::mse(x, nx::transpose(x)); }),
            "nx::nn::mse: pred float64 [3, 4] and target float64 [4, 3] differ in shape");
  Tensor labels = nx::place(nx::create(nx::int64, {3}, {0, 1, 2}), "CPU");
  EXPECT_EQ(error_of([&] { nx::nn::cross_entropy(x, nx::cast(labels, nx::float32)); }),
            "nx::nn::cross_entropy: labels must be an integer dtype, got float32 [3]");
  EXPECT_EQ(error_of([&] {
              nx::nn::cross_entropy(x, nx::reshape(labels, {3, 1}));
            }),
            "nx::nn::cross_entropy: labels int64 [3, 1] must have the shape of logits float64 "
            "[3, 4] without its last axis, [3]");
  EXPECT_EQ(error_of([&] { nx::nn::cross_entropy(x, labels, 1.5); }),
            "nx::nn::cross_entropy: label_smoothing must be in [0, 1], got 1.5");
}

}  // namespace
