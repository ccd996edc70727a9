// Matrix products: every output is the fused multiply-add chain over k in increasing order from
// +0 (ir/ops.def, docs/numerics.md), bit for bit, whatever the shape, layout, blocking, thread
// split or micro-kernel. The same file runs again as test_matmul_portable and test_matmul_avx2
// (the narrower micro-kernels), so every kernel is held to the same reference; each binary
// checks that the kernel it asked for is the one that runs.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "codegen/cpu/gemm.h"
#include "trace/rune.h"

namespace {

#ifdef RUNE_TEST_GEMM_ISA
// Set before main, so before the first product reads it (once per process): the binary runs
// its kernel alone as under ctest.
const bool isa_set = setenv("RUNE_GEMM_ISA", RUNE_TEST_GEMM_ISA, 1) == 0;
#endif

// The micro-kernel this binary must run (docs/env.md: RUNE_GEMM_ISA caps the CPU's widest).
std::string expected_kernel() {
  __builtin_cpu_init();
  std::string best = __builtin_cpu_supports("avx512f")                                 ? "avx512"
                     : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "avx2"
                                                                                       : "portable";
#ifdef RUNE_TEST_GEMM_ISA
  std::string cap = RUNE_TEST_GEMM_ISA;
  if (cap == "portable" || (cap == "avx2" && best == "avx512")) return cap;
#endif
  return best;
}

TEST(Matmul, RunsTheExpectedMicroKernel) {
  EXPECT_EQ(nx::to_vector<float>(
                nx::matmul(nx::ones(nx::float32, {2, 3}), nx::ones(nx::float32, {3, 2}))),
            std::vector<float>(4, 3.0f));
  EXPECT_EQ(std::string(codegen::cpu::gemm_kernel_name()), expected_kernel());
}

using nx::Tensor;
using Shape = std::vector<int64_t>;

// The reference: C[b, i, j] = fma chain of A[b, i, :] and B[b, :, j] (logical C-order values).
template <class T>
std::vector<T> reference(const std::vector<T>& a, const std::vector<T>& b, int64_t batch, int64_t m,
                         int64_t k, int64_t n) {
  std::vector<T> c(static_cast<size_t>(batch * m * n));
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc = std::fma(a[q * m * k + i * k + p], b[q * k * n + p * n + j], acc);
        c[q * m * n + i * n + j] = acc;
      }
  return c;
}

template <class T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y, std::string* where) {
  if (x.size() != y.size()) {
    *where = "sizes " + std::to_string(x.size()) + " vs " + std::to_string(y.size());
    return false;
  }
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(T)) != 0 && !(std::isnan(x[i]) && std::isnan(y[i]))) {
      *where = "element " + std::to_string(i) + ": " + std::to_string(x[i]) + " vs " +
               std::to_string(y[i]);
      return false;
    }
  return true;
}

// Values with every sign, a wide range of magnitudes, and cancellation.
Tensor values(uint64_t seed, nx::DType t, const Shape& s) {
  Tensor u = nx::randn(nx::key(seed), t, s);
  return u * nx::exp(nx::randn(nx::key(seed + 1), t, s) * 3.0);
}

// Checks a @ b (a: [batch..., m, k], b: [batch..., k, n] after broadcasting) eagerly and
// compiled against the reference.
template <class T>
void check(const Tensor& a, const Tensor& b, const std::string& what) {
  SCOPED_TRACE(what + ": " + a.describe() + " @ " + b.describe());
  Tensor c = nx::matmul(a, b);
  Tensor cj = rune::jit([](const Tensor& x, const Tensor& y) { return nx::matmul(x, y); })(a, b);
  int64_t m = a.shape()[a.ndim() - 2], k = a.shape()[a.ndim() - 1], n = b.shape()[b.ndim() - 1];
  Shape batch(c.shape().begin(), c.shape().end() - 2);
  Shape as = batch, bs = batch;
  as.insert(as.end(), {m, k});
  bs.insert(bs.end(), {k, n});
  int64_t nb = 1;
  for (auto d : batch) nb *= d;
  auto want = reference<T>(nx::to_vector<T>(nx::broadcast_to(a, as)),
                           nx::to_vector<T>(nx::broadcast_to(b, bs)), nb, m, k, n);
  std::string where;
  EXPECT_TRUE(same_bits(nx::to_vector<T>(c), want, &where)) << "eager: " << where;
  EXPECT_TRUE(same_bits(nx::to_vector<T>(cj), want, &where)) << "compiled: " << where;
}

template <class T>
void shapes(nx::DType t) {
  struct Case {
    int64_t m, k, n;
  };
  // Edges of the 12 x (32 | 16) micro-tile, of the k block (512), of the m block (144), of the
  // n block (2048), and sizes large enough to be split across threads.
  for (auto [m, k, n] : std::vector<Case>{{1, 1, 1},
                                          {3, 5, 7},
                                          {12, 8, 32},
                                          {13, 9, 33},
                                          {11, 256, 31},
                                          {25, 257, 17},
                                          {11, 512, 31},
                                          {25, 513, 17},
                                          {3, 20, 2100},
                                          {145, 600, 70},
                                          {64, 64, 300},
                                          {300, 130, 10},
                                          {128, 784, 256},
                                          // few rows or columns: smaller tiles, or transposed
                                          {400, 2, 64},
                                          {2, 400, 64},
                                          {64, 400, 2},
                                          {400, 64, 2},
                                          {3, 300, 1},
                                          {1, 300, 50},
                                          {50, 300, 1},
                                          {5, 600, 7},
                                          {9, 40, 1000},
                                          // one tile of rows: b's full panels read in place
                                          // (k past the k block, a partial last panel)
                                          {6, 520, 96},
                                          {12, 300, 64},
                                          {4, 260, 81},
                                          // transposed with a k-contiguous operand: its pack
                                          // transposes 8 x 8 (4 x 4) blocks; k and the
                                          // packed columns not multiples of the block, k
                                          // past the k block (256)
                                          {37, 13, 2},
                                          {45, 263, 3},
                                          {401, 70, 1},
                                          {19, 5, 2},
                                          {200, 516, 2}}) {
    uint64_t seed = static_cast<uint64_t>(m * 1000003 + k * 1009 + n);
    check<T>(values(seed, t, {m, k}), values(seed + 7, t, {k, n}),
             "m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
  }
}

TEST(Matmul, Float32ShapesMatchTheFmaChain) { shapes<float>(nx::float32); }
TEST(Matmul, Float64ShapesMatchTheFmaChain) { shapes<double>(nx::float64); }

TEST(Matmul, StridedOperandsAreReadInPlace) {
  Tensor a = values(1, nx::float32, {40, 30});
  Tensor b = values(2, nx::float32, {50, 30});
  check<float>(a, nx::transpose(b), "transposed b");
  check<float>(nx::transpose(a), nx::transpose(values(3, nx::float32, {20, 40})),
               "both transposed");
  check<float>(nx::slice(a, {{1, 40, 3}, {0, 30, 2}}), values(4, nx::float32, {15, 9}), "steps");
  check<float>(nx::flip(a, {1}), values(5, nx::float32, {30, 6}), "flipped");
  check<float>(nx::pad(a, {{1, 2}, {0, 3}}), values(6, nx::float32, {33, 5}), "padded");
  check<float>(a * 2.0 + 1.0, values(7, nx::float32, {30, 4}), "computed operand");
  check<float>(nx::broadcast_to(values(8, nx::float32, {1, 30}), {7, 30}),
               values(9, nx::float32, {30, 5}), "broadcast rows");
  // A product with few columns whose a has rows longer than k (a slice): its transposed pack
  // reads rows of the full width.
  check<float>(nx::slice(values(20, nx::float32, {45, 300}), {{0, 45, 1}, {0, 263, 1}}),
               values(21, nx::float32, {263, 3}), "sliced rows, transposed");
  check<double>(nx::slice(values(22, nx::float64, {45, 300}), {{0, 45, 1}, {3, 266, 1}}),
                values(23, nx::float64, {263, 2}), "sliced rows, transposed, float64");
}

TEST(Matmul, BatchesBroadcast) {
  check<double>(values(10, nx::float64, {3, 4, 5}), values(11, nx::float64, {3, 5, 6}), "batch");
  check<double>(values(12, nx::float64, {2, 1, 4, 5}), values(13, nx::float64, {3, 5, 6}),
                "broadcast batch");
  check<float>(values(14, nx::float32, {4, 40, 50}), values(15, nx::float32, {50, 70}), "shared b");
  // Few columns: each batch element's product runs transposed.
  check<float>(values(16, nx::float32, {4, 50, 30}), values(17, nx::float32, {30, 2}),
               "shared narrow b");
  check<double>(values(18, nx::float64, {3, 70, 9}), values(19, nx::float64, {3, 9, 3}),
                "narrow batch");
}

TEST(Matmul, SpecialValuesPropagate) {
  Tensor a = nx::create(nx::float32, {2, 3}, {1, INFINITY, 0, NAN, 2, -0.0});
  Tensor b = nx::create(nx::float32, {3, 2}, {1, 0, 2, 1, -0.0, -0.0});
  check<float>(a, b, "inf, nan, signed zeros");
  // The chain starts from +0: (-0) * 1 + (+0) is +0.
  Tensor z =
      nx::matmul(nx::create(nx::float64, {1, 1}, {-0.0}), nx::create(nx::float64, {1, 1}, {1}));
  EXPECT_FALSE(std::signbit(nx::to_vector<double>(z)[0]));
}

TEST(Matmul, EmptyExtents) {
  Tensor c = nx::matmul(nx::zeros(nx::float32, {3, 0}), nx::zeros(nx::float32, {0, 4}));
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  for (float v : nx::to_vector<float>(c)) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(nx::matmul(nx::zeros(nx::float32, {0, 5}), nx::zeros(nx::float32, {5, 4})).shape(),
            (Shape{0, 4}));
}

TEST(Matmul, VectorsAndSixteenBitFloats) {
  Tensor v = values(20, nx::float32, {9});
  Tensor m = values(21, nx::float32, {9, 4});
  // A 1-D operand is a row (on the left) or a column (on the right), dropped from the result:
  // the values are the [1, 9] @ [9, 4] and [4, 9] @ [9, 1] chains.
  Tensor vm = nx::matmul(v, m), mv = nx::matmul(nx::transpose(m), v);
  EXPECT_EQ(vm.shape(), (Shape{4}));
  EXPECT_EQ(mv.shape(), (Shape{4}));
  auto vs = nx::to_vector<float>(v), ms = nx::to_vector<float>(m);
  auto mts = nx::to_vector<float>(nx::transpose(m));
  std::string where;
  EXPECT_TRUE(same_bits(nx::to_vector<float>(vm), reference<float>(vs, ms, 1, 1, 9, 4), &where))
      << "vector @ matrix: " << where;
  EXPECT_TRUE(same_bits(nx::to_vector<float>(mv), reference<float>(mts, vs, 1, 4, 9, 1), &where))
      << "matrix @ vector: " << where;
  Tensor vv = nx::matmul(v, v);
  EXPECT_EQ(vv.shape(), (Shape{}));
  EXPECT_TRUE(same_bits(nx::to_vector<float>(vv), reference<float>(vs, vs, 1, 1, 9, 1), &where))
      << "vector @ vector: " << where;
  check<float>(nx::reshape(v, {1, 9}), m, "vector as a row");
  // 16-bit floats compute at float32 and round once.
  for (auto t : {nx::float16, nx::bfloat16}) {
    Tensor a = nx::cast(values(22, nx::float32, {5, 7}), t),
           b = nx::cast(values(23, nx::float32, {7, 3}), t);
    Tensor want = nx::cast(nx::matmul(nx::cast(a, nx::float32), nx::cast(b, nx::float32)), t);
    EXPECT_EQ(nx::to_vector<double>(nx::matmul(a, b)), nx::to_vector<double>(want));
  }
}

TEST(Matmul, IntegersSumExactly) {
  Tensor a = nx::reshape(nx::arange(6), {2, 3});
  Tensor b = nx::reshape(nx::arange(6), {3, 2});
  EXPECT_EQ(nx::to_vector<int64_t>(nx::matmul(a, b)), (std::vector<int64_t>{10, 13, 28, 40}));
}

// Elementwise consumers fuse into the product's kernel on the host (the epilogue runs on each
// finished tile): compiled results must equal eager ones, which run every op on its own.
TEST(Matmul, FusedEpiloguesGiveEagerBits) {
  auto same = [](const Tensor& x, const Tensor& y, const char* what) {
    std::string where;
    EXPECT_TRUE(same_bits(nx::to_vector<float>(x), nx::to_vector<float>(y), &where))
        << what << ": " << where;
  };
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{5, 7, 3},
                                                            {130, 300, 70},
                                                            {64, 64, 64},
                                                            {400, 64, 2},
                                                            {2, 400, 64},
                                                            {300, 270, 4},
                                                            {400, 2, 64},
                                                            {290, 300, 48}}) {
    Tensor x = values(40 + m, nx::float32, {m, k}), w = values(41 + n, nx::float32, {k, n});
    Tensor b = values(42, nx::float32, {n});
    auto layer = [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return nx::relu(nx::matmul(x, w) + b);
    };
    same(rune::jit(layer)(x, w, b), layer(x, w, b), "relu(x w + b)");
    // The product is also a result: it is materialised, and the consumer reads it.
    auto both = [](const Tensor& x, const Tensor& w) {
      Tensor p = nx::matmul(x, w);
      return std::make_pair(p, nx::tanh(p) * 2.0);
    };
    auto [p1, q1] = rune::jit(both)(x, w);
    auto [p2, q2] = both(x, w);
    same(p1, p2, "product");
    same(q1, q2, "tanh(product) * 2");
    // Two products in one expression: one fuses, the other is materialised first.
    auto two = [](const Tensor& x, const Tensor& w) {
      return nx::matmul(x, w) - nx::matmul(x * 0.5, w);
    };
    same(rune::jit(two)(x, w), two(x, w), "x w - (x/2) w");
    // A narrowing epilogue does not fuse (the product needs float32 storage).
    auto narrow = [](const Tensor& x, const Tensor& w) {
      return nx::cast(nx::matmul(x, w) * 3.0, nx::float16);
    };
    EXPECT_EQ(nx::to_vector<double>(rune::jit(narrow)(x, w)), nx::to_vector<double>(narrow(x, w)));
  }
  // A batched product with a broadcast epilogue operand.
  Tensor xb = values(50, nx::float32, {3, 20, 30}), wb = values(51, nx::float32, {3, 30, 40});
  Tensor bias = values(52, nx::float32, {3, 1, 40});
  auto f = [](const Tensor& x, const Tensor& w, const Tensor& b) { return nx::matmul(x, w) * b; };
  same(rune::jit(f)(xb, wb, bias), f(xb, wb, bias), "batched x w * b");
  // Batched with two columns: each batch element runs transposed, its epilogue one range.
  Tensor xt = values(53, nx::float32, {3, 50, 30}), wt = values(54, nx::float32, {3, 30, 2});
  Tensor bt = values(55, nx::float32, {3, 1, 2});
  same(rune::jit(f)(xt, wt, bt), f(xt, wt, bt), "batched transposed x w * b");
}

TEST(Matmul, GradientsAreProducts) {
  Tensor a = values(30, nx::float64, {5, 4}), b = values(31, nx::float64, {4, 3});
  using P = std::pair<Tensor, Tensor>;
  auto f = [](const P& p) { return nx::sum(nx::matmul(p.first, p.second)); };
  auto [ga, gb] = rune::grad(f, P{a, b});
  // d/da sum(a b) = 1 b^T, d/db = a^T 1: the same contraction primitive, so the same bits.
  Tensor ones = nx::ones(nx::float64, {5, 3});
  EXPECT_EQ(nx::to_vector<double>(ga), nx::to_vector<double>(nx::matmul(ones, nx::transpose(b))));
  EXPECT_EQ(nx::to_vector<double>(gb), nx::to_vector<double>(nx::matmul(nx::transpose(a), ones)));
}

}  // namespace
