// The tiled float32 matrix product (plan part tiles, codegen/plan.h kGemmTile) on the fake CUDA
// driver: its launches run as one block of 256 host threads sharing the staged slices, with the
// block barrier, so every index, edge and barrier of the rendered kernel runs here. Each case
// compares the bits with the host's gemm (the fma chain over k in increasing order) and checks
// that the tiled kernel ran (a fixed-block launch) or did not (small products).
#include <cstdlib>
#include <cstring>
#include <functional>

#include "codegen/gpu/c_renderer.h"
#include "fake_driver.h"
#include "runtime/gpu/geometry.h"
#include "test_util.h"
#include "trace/rune.h"

using nx::Tensor;

namespace {

const bool installed = (fake_gpu::install_fake_cuda(), true);
const nx::Device kCuda{runtime::DeviceKind::CUDA, 0};

using rt::bits;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// f on the host and on CUDA:0 (the same bits); returns the device run's fixed-block launches.
int expect_host_bits(const Fn& f, const std::vector<Tensor>& args) {
  EXPECT_TRUE(installed);
  Tensor want = f(args);
  std::vector<Tensor> dev;
  for (const auto& a : args) dev.push_back(nx::place(a, kCuda));
  int before = fake_gpu::counters().block_launches.load();
  Tensor got = f(dev);
  EXPECT_EQ(got.device().name(), "CUDA:0");
  EXPECT_EQ(bits(got), bits(want));
  return fake_gpu::counters().block_launches.load() - before;
}

Tensor randn(uint64_t key, ir::Shape shape) { return nx::randn(nx::key(key), nx::float32, shape); }

Fn matmul() {
  return [](const std::vector<Tensor>& a) { return nx::matmul(a[0], a[1]); };
}

// M, N and K off the tile sizes (130 = 128 + 2 rows, 150 columns, K = 70 = 4 slices + 6): the
// edge tiles stage zeros outside the matrices and the last slice's kk loop stops at K.
TEST(GpuTiles, EdgeTilesMatchTheHost) {
  EXPECT_EQ(expect_host_bits(matmul(), {randn(1, {130, 70}), randn(2, {70, 150})}), 1);
  EXPECT_EQ(expect_host_bits(matmul(), {randn(3, {64, 1}), randn(4, {1, 64})}), 1);
}

// K and N multiples of 4 (and the views' offsets and strides): the aligned body stages A and B
// as 4-element vectors; an offset of 1 (a slice) keeps A on the scalar path.
TEST(GpuTiles, VectorStagingMatchesTheHost) {
  EXPECT_EQ(expect_host_bits(matmul(), {randn(14, {130, 72}), randn(15, {72, 152})}), 1);
  Fn sliced = [](const std::vector<Tensor>& a) {
    return nx::matmul(nx::slice(a[0], {{0, 66}, {1, 73}}), a[1]);
  };
  EXPECT_EQ(expect_host_bits(sliced, {randn(16, {66, 73}), randn(17, {72, 68})}), 1);
}

// Transposed operands (stride 1 along M of A and along K of B) stage along the other axis.
TEST(GpuTiles, TransposedOperandsMatchTheHost) {
  Fn f = [](const std::vector<Tensor>& a) {
    return nx::matmul(nx::transpose(a[0]), nx::transpose(a[1]));
  };
  EXPECT_EQ(expect_host_bits(f, {randn(5, {40, 96}), randn(6, {80, 40})}), 1);
}

// A chain that ends at -0 (every product underflows to -0) stays -0: no output's chain sees a
// padded k (fma(0, 0, -0) would give +0). K = 17 leaves one element in the second slice.
TEST(GpuTiles, NoChainSeesAPaddedK) {
  auto a = nx::full(nx::float32, {64, 17}, -1e-30), b = nx::full(nx::float32, {17, 70}, 1e-30);
  EXPECT_EQ(expect_host_bits(matmul(), {a, b}), 1);
  auto r = nx::to_vector<float>(nx::matmul(nx::place(a, kCuda), nx::place(b, kCuda)));
  EXPECT_TRUE(std::signbit(r[0]) && r[0] == 0.0f);
}

// Batched products and a fused epilogue (bias, relu) in one tiled kernel, compiled.
TEST(GpuTiles, BatchedProductsAndEpiloguesMatchTheHost) {
  auto layer = rune::jit([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return nx::relu(nx::matmul(x, w) + b);
  });
  Fn f = [&](const std::vector<Tensor>& a) { return layer(a[0], a[1], a[2]); };
  int before = fake_gpu::counters().launches.load();
  EXPECT_EQ(expect_host_bits(f, {randn(7, {3, 65, 33}), randn(8, {3, 33, 72}), randn(9, {72})}), 1);
  EXPECT_EQ(fake_gpu::counters().launches.load() - before, 1);  // product and epilogue: one
}

// Products too small for a tile keep one thread per output (no fixed-block launch), as do
// float64 products.
TEST(GpuTiles, SmallAndFloat64ProductsKeepOneThreadPerOutput) {
  EXPECT_EQ(expect_host_bits(matmul(), {randn(10, {16, 32}), randn(11, {32, 8})}), 0);
  EXPECT_EQ(expect_host_bits(matmul(), {nx::cast(randn(12, {64, 20}), nx::float64),
                                        nx::cast(randn(13, {20, 64}), nx::float64)}),
            0);
}

// float16 and bfloat16 products (compiled: nx::matmul is a cast to float32, the product and a
// rounding back, which the GPU schedule fuses into one kernel reading the 16-bit operands): the
// tiled plan stages the 16-bit values and widens them as each thread reads them, so each output
// is still the float32 fma chain over k, rounded once, the host's bits. Edge tiles, K = 1 and
// 17, transposed operands, vector staging (K and N multiples of 4), and a batched product with
// a fused epilogue, in both dtypes; one launch each (the product and its rounding together).
TEST(GpuTiles, HalfOperandsMatchTheHost) {
  for (nx::DType t : {nx::float16, nx::bfloat16}) {
    SCOPED_TRACE(std::string(ir::name(t)));
    auto half = [&](uint64_t key, ir::Shape shape) { return nx::cast(randn(key, shape), t); };
    auto product = rune::jit([](const Tensor& a, const Tensor& b) { return nx::matmul(a, b); });
    auto transposed = rune::jit([](const Tensor& a, const Tensor& b) {
      return nx::matmul(nx::transpose(a), nx::transpose(b));
    });
    auto layer = rune::jit([](const Tensor& x, const Tensor& w, const Tensor& b) {
      return nx::relu(nx::matmul(x, w) + b);
    });
    Fn f = [&](const std::vector<Tensor>& a) { return product(a[0], a[1]); };
    Fn ft = [&](const std::vector<Tensor>& a) { return transposed(a[0], a[1]); };
    Fn fl = [&](const std::vector<Tensor>& a) { return layer(a[0], a[1], a[2]); };
    int before = fake_gpu::counters().launches.load();
    EXPECT_EQ(expect_host_bits(f, {half(21, {130, 70}), half(22, {70, 150})}), 1);  // edges
    EXPECT_EQ(fake_gpu::counters().launches.load() - before, 1);
    EXPECT_EQ(expect_host_bits(f, {half(23, {64, 1}), half(24, {1, 64})}), 1);      // K = 1
    EXPECT_EQ(expect_host_bits(f, {half(25, {70, 17}), half(26, {17, 66})}), 1);    // K = 17
    EXPECT_EQ(expect_host_bits(f, {half(27, {130, 72}), half(28, {72, 152})}), 1);  // vectors
    EXPECT_EQ(expect_host_bits(ft, {half(29, {40, 96}), half(30, {80, 40})}), 1);
    before = fake_gpu::counters().launches.load();
    EXPECT_EQ(expect_host_bits(fl, {half(31, {3, 65, 33}), half(32, {3, 33, 72}), half(33, {72})}),
              1);
    EXPECT_EQ(fake_gpu::counters().launches.load() - before, 1);
  }
}

// The plan part cp.async (vector-staged operands copied asynchronously into shared memory):
// printed, parsed back, refused where it cannot run, and which devices take it. The fake driver
// takes it (its copies complete only at the wait, so a read before the wait fails the tests
// above); ctest's gpu_tiles.register_staging reruns them with the plan forced without it.
TEST(GpuTiles, AsyncCopyPlanPartAndDevices) {
  const std::string text = "gpu lanes:unrolled tiles:128x128x16/8x8 cp.async";
  auto p = codegen::parse_plan(text);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->async_copy);
  EXPECT_EQ(p->str(), text);
  EXPECT_FALSE(codegen::parse_plan("host lanes:vector group:1 cp.async"));
  codegen::KernelSpec k;
  k.shape = {64, 64};
  k.out_dtype = ir::DType::Float32;
  k.contract = codegen::Contraction{ir::View::contiguous({64, 8}), ir::View::contiguous({8, 64})};
  EXPECT_EQ(codegen::validate(k, *p), "");
  codegen::Plan untiled = *p;
  untiled.tiles = false;
  EXPECT_EQ(codegen::validate(k, untiled), "cp.async needs tiles");
  codegen::Plan with_mma = *p;
  with_mma.mma = codegen::MatmulPrecision::TF32;
  EXPECT_NE(codegen::validate(k, with_mma), "");
  // Not a product: the part does not apply and is not printed.
  codegen::KernelSpec elementwise;
  elementwise.shape = {64};
  elementwise.out_dtype = ir::DType::Float32;
  EXPECT_FALSE(codegen::applicable(elementwise, *p).async_copy);
  // sm_80 and sm_90 take it; sm_75 and HIP stage through registers.
  const char* forced = std::getenv("RUNE_PLAN");
  if (forced) GTEST_SKIP() << "RUNE_PLAN=" << forced << " replaces the default plans";
  const auto cuda = runtime::DeviceKind::CUDA;
  EXPECT_TRUE(codegen::c_plan(k, codegen::gpu_device_desc(cuda, "sm_80")).async_copy);
  EXPECT_TRUE(codegen::c_plan(k, codegen::gpu_device_desc(cuda, "sm_90")).async_copy);
  const auto old = codegen::c_plan(k, codegen::gpu_device_desc(cuda, "sm_75"));
  EXPECT_TRUE(old.tiles);
  EXPECT_FALSE(old.async_copy);
  EXPECT_FALSE(
      codegen::c_plan(k, codegen::gpu_device_desc(runtime::DeviceKind::HIP, "gfx90a")).async_copy);
  EXPECT_TRUE(codegen::c_plan(k, fake_gpu::fake_device_desc()).async_copy);
}

// Under RUNE_PLAN (ctest gpu_tiles.register_staging) the tiled products above ran with the
// forced plan: both operands staged through registers.
TEST(GpuTiles, ForcedPlanStagesThroughRegisters) {
  const char* forced = std::getenv("RUNE_PLAN");
  if (!forced) GTEST_SKIP() << "run with RUNE_PLAN (ctest gpu_tiles.register_staging)";
  codegen::KernelSpec k;
  k.shape = {130, 150};
  k.out_dtype = ir::DType::Float32;
  k.contract =
      codegen::Contraction{ir::View::contiguous({130, 72}), ir::View::contiguous({72, 150})};
  const codegen::Plan p = codegen::c_plan(k, fake_gpu::fake_device_desc());
  EXPECT_TRUE(p.tiles) << p.str();
  EXPECT_FALSE(p.async_copy) << p.str();
}

// A fixed-block entry launches exactly its block size, a grid of at most 8 blocks per SM.
TEST(GpuTiles, FixedBlockGeometry) {
  using runtime::gpu::fixed_block_geometry;
  EXPECT_EQ(fixed_block_geometry(4 * 256, 256, 132), (runtime::gpu::LaunchGeometry{4, 256}));
  EXPECT_EQ(fixed_block_geometry(1024 * 256, 256, 2), (runtime::gpu::LaunchGeometry{16, 256}));
  EXPECT_EQ(fixed_block_geometry(0, 256, 2), runtime::gpu::LaunchGeometry{});
}

}  // namespace
