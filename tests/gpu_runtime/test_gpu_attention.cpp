// Attention as one GPU kernel (codegen/lower/attention.cpp) on the fake CUDA driver: a compiled
// scaled_dot_product_attention runs the attention kernel as one fixed-block launch (one block of
// 256 host threads sharing the score tile, with the block barrier), and its result has the bits
// of the host's eager formula (the scores and weights whole buffers, op by op), so of the three
// kernels it replaces: blocks of query rows with a partial last block, masks, rows with no key,
// float32 and float64. RUNE_FUSE_ATTENTION=0 keeps the three kernels (the ctest
// gpu_attention.unfused runs the launch-count test that way).
#include <cstdlib>
#include <functional>
#include <string>

#include "fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"

using nx::Tensor;
using nx::nn::AttentionOptions;

namespace {

const bool installed = (fake_gpu::install_fake_cuda(), true);
const nx::Device kCuda{runtime::DeviceKind::CUDA, 0};

using rt::bits;

Tensor randn(uint64_t key, nx::DType t, ir::Shape shape) {
  return nx::randn(nx::key(key), t, shape);
}

struct Launches {
  int all = 0, blocks = 0;  // launches, and those of fixed-block entries
};

// sdpa(q, k, v, o) compiled on CUDA:0 against the host's eager bits; the launches it took.
Launches expect_host_bits(const std::string& name, const Tensor& q, const Tensor& k,
                          const Tensor& v, AttentionOptions o) {
  EXPECT_TRUE(installed);
  const auto want = bits(nx::nn::scaled_dot_product_attention(q, k, v, o));
  if (o.mask) o.mask = nx::place(*o.mask, kCuda);
  auto f = rune::jit([o](const Tensor& q, const Tensor& k, const Tensor& v) {
    return nx::nn::scaled_dot_product_attention(q, k, v, o);
  });
  Tensor qd = nx::place(q, kCuda), kd = nx::place(k, kCuda), vd = nx::place(v, kCuda);
  const int all = fake_gpu::counters().launches.load();
  const int blocks = fake_gpu::counters().block_launches.load();
  Tensor got = f(qd, kd, vd);
  EXPECT_EQ(got.device().name(), "CUDA:0") << name;
  EXPECT_EQ(bits(got), want) << name;
  return {fake_gpu::counters().launches.load() - all,
          fake_gpu::counters().block_launches.load() - blocks};
}

// Each case is one attention kernel (after the causal mask's kernel, or a mask's per-row
// reduction: whether the row attends to any key) with the host's bits.
//  - causal, 4 heads of 128 queries: 32 rows per block (the most), 4 blocks per head, the
//    scores' threads 2 groups of 16 rows, the outputs' 8 groups of 4;
//  - a padding mask, 300 queries against 1100 float32 keys: 9 rows per block (44 KiB of
//    shared memory), 34 blocks per element, the last of 3 rows; batch 1 sees 900 keys;
//  - a float mask in float64, 37 queries against 40 keys: blocks of 32 and 5 rows, Dv != D,
//    the scores' threads 6 groups of 6 rows (the last group's 4 rows past the block's 32 store
//    nothing);
//  - a bool mask with a row that sees no key (zeros) and one that sees one key.
TEST(GpuAttention, OneKernelWithTheHostsBits) {
  {
    Tensor q = randn(1, nx::float32, {2, 4, 128, 32}), k = randn(2, nx::float32, {2, 4, 128, 32});
    Tensor v = randn(3, nx::float32, {2, 4, 128, 32});
    Launches l = expect_host_bits("causal", q, k, v, {.causal = true});
    EXPECT_EQ(l.all, 2);  // the mask, then attention
    EXPECT_EQ(l.blocks, 1);
  }
  {
    std::vector<double> pad(2 * 1100, 1);
    for (int j = 900; j < 1100; ++j) pad[1100 + j] = 0;
    Tensor mask = nx::cast(nx::create(nx::float64, {2, 1, 1, 1100}, pad), nx::bool_);
    Tensor q = randn(4, nx::float32, {2, 1, 300, 4}), k = randn(5, nx::float32, {2, 1, 1100, 4});
    Tensor v = randn(6, nx::float32, {2, 1, 1100, 3});
    Launches l = expect_host_bits("padding", q, k, v, {.mask = mask});
    EXPECT_EQ(l.all, 2);  // whether each row attends to any key (a reduction), then attention
    EXPECT_EQ(l.blocks, 1);
  }
  {
    Tensor q = randn(7, nx::float64, {3, 37, 16}), k = randn(8, nx::float64, {3, 40, 16});
    Tensor v = randn(9, nx::float64, {3, 40, 8}), mask = randn(10, nx::float64, {37, 40});
    Launches l = expect_host_bits("float mask float64", q, k, v, {.mask = mask});
    EXPECT_EQ(l.all, 2);
    EXPECT_EQ(l.blocks, 1);
  }
  {
    std::vector<double> m(5 * 9, 1);
    for (int j = 0; j < 9; ++j) m[2 * 9 + j] = 0, m[4 * 9 + j] = j == 3;
    Tensor mask = nx::cast(nx::create(nx::float64, {5, 9}, m), nx::bool_);
    Tensor q = randn(11, nx::float32, {2, 5, 3}), k = randn(12, nx::float32, {2, 9, 3});
    Tensor v = randn(13, nx::float32, {2, 9, 2});
    Launches l = expect_host_bits("rows with no key", q, k, v, {.mask = mask});
    EXPECT_EQ(l.all, 2);
    EXPECT_EQ(l.blocks, 1);
  }
}

// One attention kernel by default; three kernels (the products too small for tiles) with
// RUNE_FUSE_ATTENTION=0 (gpu_attention.unfused): the same bits either way.
TEST(GpuAttention, OneKernelUnlessFuseAttentionIsZero) {
  const char* env = std::getenv("RUNE_FUSE_ATTENTION");
  const bool fused = !(env && std::string(env) == "0");
  Tensor q = randn(20, nx::float32, {2, 2, 40, 8}), k = randn(21, nx::float32, {2, 2, 40, 8});
  Tensor v = randn(22, nx::float32, {2, 2, 40, 8});
  Launches l = expect_host_bits("unmasked", q, k, v, {});
  EXPECT_EQ(l.all, fused ? 1 : 3);
  EXPECT_EQ(l.blocks, fused ? 1 : 0);
}

// A row longer than the kernel's shared memory holds (12000 float32 keys: 48 KiB of scores)
// keeps the three kernels, with the same bits.
TEST(GpuAttention, RowsLongerThanTheTileKeepThreeKernels) {
  Tensor q = randn(30, nx::float32, {1, 1, 2, 2}), k = randn(31, nx::float32, {1, 1, 12000, 2});
  Tensor v = randn(32, nx::float32, {1, 1, 12000, 2});
  Launches l = expect_host_bits("12000 keys", q, k, v, {});
  EXPECT_EQ(l.all, 3);
  EXPECT_EQ(l.blocks, 0);
}

}  // namespace
