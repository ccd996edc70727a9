// The opt-in matmul precision (nx::set_matmul_precision) and the tensor-core plan (plan part
// mma:tf32 / mma:bf16, codegen/lower/tiled_mma.cpp) on the fake CUDA driver, whose
// prelude emulates mma.sync with the PTX ISA's fragment layout (fake_driver.h): the rendered
// kernel's fragment reads, warp layout and stores all run here. Each case checks the result
// against a float64 product within the documented bound (docs/numerics.md "Matrix products"),
// that it differs from "highest" (the opt-in took effect), that "highest" keeps the host's bits,
// and that a changed setting never reuses a program built under the other.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "codegen/gpu/c_renderer.h"
#include "fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"

using nx::Tensor;

namespace {

const bool installed = (fake_gpu::install_fake_cuda(), true);
const nx::Device kCuda{runtime::DeviceKind::CUDA, 0};

using rt::bits;

// Restores "highest" when a test ends, whatever it set.
struct Precision {
  explicit Precision(const std::string& p) { nx::set_matmul_precision(p); }
  ~Precision() { nx::set_matmul_precision("highest"); }
};

Tensor randn(uint64_t key, ir::Shape shape) { return nx::randn(nx::key(key), nx::float32, shape); }

// The input rounding of a precision: half an ulp of a 10-bit (tf32) or 7-bit (bf16) mantissa.
double unit_roundoff(const std::string& p) {
  return p == "tf32" ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
}

// The documented bound on one output of a K-term product under precision p, relative to
// sum_k |a_ik| |b_kj|: each input rounded once (relative error u), so each product is within
// 2u + u^2; float32 accumulation of K terms in whatever order the tensor core takes, within
// K 2^-22 (twice the IEEE float32 sequential-sum bound, for a hardware adder that may truncate).
double bound(const std::string& p, int64_t K) {
  const double u = unit_roundoff(p);
  return 2 * u + u * u + static_cast<double>(K) * std::ldexp(1.0, -22);
}

struct Accuracy {
  double max_ratio = 0;  // max |got - exact| / sum |a||b| over the outputs
  bool differs = false;  // some output's bits differ from the "highest" (host) result
};

// got (computed on CUDA:0 under precision p) against the float64 product of the same inputs.
Accuracy measure(const Tensor& got, const Tensor& a, const Tensor& b, const Tensor& highest) {
  auto a64 = nx::cast(a, nx::float64), b64 = nx::cast(b, nx::float64);
  auto exact = nx::to_vector<double>(nx::matmul(a64, b64));
  auto scale = nx::to_vector<double>(nx::matmul(nx::abs(a64), nx::abs(b64)));
  auto g = nx::to_vector<double>(nx::cast(nx::place(got, "CPU"), nx::float64));
  auto h = nx::to_vector<double>(nx::cast(highest, nx::float64));
  Accuracy r;
  EXPECT_EQ(g.size(), exact.size());
  for (size_t i = 0; i < g.size() && i < exact.size(); ++i) {
    if (scale[i] > 0) r.max_ratio = std::max(r.max_ratio, std::abs(g[i] - exact[i]) / scale[i]);
    if (g[i] != h[i]) r.differs = true;
  }
  return r;
}

using Product = std::function<Tensor(const Tensor&, const Tensor&)>;

// f(a, b) on CUDA:0 under precision p: one tiled (fixed-block) launch, within the bound, not
// the host's bits; then under "highest" again: the host's bits (no program reused across).
void expect_tensor_core_result(const std::string& p, const Product& f, const Tensor& a,
                               const Tensor& b, int64_t K) {
  SCOPED_TRACE(p);
  ASSERT_TRUE(installed);
  const Tensor host = f(a, b);
  const Tensor da = nx::place(a, kCuda), db = nx::place(b, kCuda);
  Accuracy acc;
  {
    Precision scope(p);
    const int before = fake_gpu::counters().block_launches.load();
    const Tensor got = f(da, db);
    nx::wait(got);
    EXPECT_EQ(fake_gpu::counters().block_launches.load() - before, 1);
    acc = measure(got, a, b, host);
  }
  std::printf("  %s K=%lld: max |err| / sum|a||b| = %.3g (bound %.3g)\n", p.c_str(),
              static_cast<long long>(K), acc.max_ratio, bound(p, K));
  EXPECT_LE(acc.max_ratio, bound(p, K));
  EXPECT_TRUE(acc.differs) << "the result has the host's bits: the opt-in did not take effect";
  EXPECT_EQ(bits(f(da, db)), bits(host)) << "highest again must give the host's bits";
}

TEST(TensorCores, PrecisionIsHighestByDefaultAndBadStringsRaise) {
  EXPECT_EQ(nx::matmul_precision(), "highest");
  {
    Precision scope("tf32");
    EXPECT_EQ(nx::matmul_precision(), "tf32");
    nx::set_matmul_precision("bf16");
    EXPECT_EQ(nx::matmul_precision(), "bf16");
  }
  EXPECT_EQ(nx::matmul_precision(), "highest");
  EXPECT_EQ(rt::error_of([] { nx::set_matmul_precision("medium"); }),
            "nx::set_matmul_precision: \"medium\" is not a matmul precision (expected "
            "\"highest\", \"tf32\" or \"bf16\")");
  EXPECT_EQ(nx::matmul_precision(), "highest");  // unchanged by the failed call
}

// The plan part: printed, parsed back, refused where it cannot run; and which devices take it.
TEST(TensorCores, PlanPartAndDevices) {
  const std::string text = "gpu lanes:unrolled tiles:128x128x16/8x8 mma:bf16";
  auto p = codegen::parse_plan(text);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->mma, codegen::MatmulPrecision::BF16);
  EXPECT_EQ(p->str(), text);
  EXPECT_EQ(codegen::parse_plan("gpu lanes:unrolled tiles:128x128x16/8x8 mma:tf32")->mma,
            codegen::MatmulPrecision::TF32);
  EXPECT_FALSE(codegen::parse_plan("host lanes:vector group:1 mma:tf32"));
  codegen::KernelSpec k;
  k.shape = {64, 64};
  k.out_dtype = ir::DType::Float32;
  k.contract = codegen::Contraction{ir::View::contiguous({64, 8}), ir::View::contiguous({8, 64})};
  codegen::Plan untiled = *p;
  untiled.tiles = false;
  EXPECT_EQ(codegen::validate(k, untiled), "mma:bf16 needs tiles");
  EXPECT_EQ(codegen::validate(k, *p), "");
  codegen::KernelSpec half = k;
  half.contract->a_dtype = ir::DType::BFloat16;
  EXPECT_EQ(codegen::validate(half, *p), "mma:bf16 needs float32 operands");
  // sm_80 and sm_90 take the tensor-core plan under tf32; sm_75 (mma.sync .tf32 needs sm_80)
  // and HIP keep the SIMT tiles.
  Precision scope("tf32");
  auto on = [](runtime::DeviceKind kind, const char* arch) {
    return codegen::gpu_device_desc(kind, arch);
  };
  const auto cuda = runtime::DeviceKind::CUDA, hip = runtime::DeviceKind::HIP;
  EXPECT_EQ(codegen::c_plan(k, on(cuda, "sm_80")).mma, codegen::MatmulPrecision::TF32);
  EXPECT_EQ(codegen::c_plan(k, on(cuda, "sm_90")).mma, codegen::MatmulPrecision::TF32);
  const auto old = codegen::c_plan(k, on(cuda, "sm_75"));
  EXPECT_TRUE(old.tiles);
  EXPECT_EQ(old.mma, codegen::MatmulPrecision::Highest);
  EXPECT_EQ(codegen::c_plan(k, on(hip, "gfx90a")).mma, codegen::MatmulPrecision::Highest);
  EXPECT_TRUE(codegen::c_plan(k, on(hip, "gfx90a")).tiles);
}

Product eager() {
  return [](const Tensor& a, const Tensor& b) { return nx::matmul(a, b); };
}

// Edge tiles (130 x 150, K = 70: partial tiles and a partial last slice, staged as zeros).
TEST(TensorCores, EdgeTilesWithinTheBound) {
  auto a = randn(41, {130, 70}), b = randn(42, {70, 150});
  for (const char* p : {"tf32", "bf16"}) expect_tensor_core_result(p, eager(), a, b, 70);
}

// K = 1 and K = 17 (one element in the second slice), and aligned shapes (vector staging).
TEST(TensorCores, ShortAndOddKWithinTheBound) {
  for (const char* p : {"tf32", "bf16"}) {
    expect_tensor_core_result(p, eager(), randn(43, {64, 1}), randn(44, {1, 64}), 1);
    expect_tensor_core_result(p, eager(), randn(45, {70, 17}), randn(46, {17, 66}), 17);
    expect_tensor_core_result(p, eager(), randn(47, {128, 64}), randn(48, {64, 256}), 64);
  }
}

// Transposed operands, and a compiled batched product with a fused epilogue (one launch).
TEST(TensorCores, TransposedBatchedAndFusedWithinTheBound) {
  Product t = [](const Tensor& a, const Tensor& b) {
    return nx::matmul(nx::transpose(a), nx::transpose(b));
  };
  auto at = randn(49, {40, 96}), bt = randn(50, {80, 40});
  auto batched = rune::jit([](const Tensor& a, const Tensor& b) { return nx::matmul(a, b); });
  Product fb = [&](const Tensor& a, const Tensor& b) { return batched(a, b); };
  auto a3 = randn(51, {3, 65, 33}), b3 = randn(52, {3, 33, 72});
  for (const char* p : {"tf32", "bf16"}) {
    // transpose(at) is [96 x 40]: measure against the same transposed inputs.
    expect_tensor_core_result(
        p, [&](const Tensor& a, const Tensor& b) { return nx::matmul(a, b); },
        nx::contiguous(nx::transpose(at)), nx::contiguous(nx::transpose(bt)), 40);
    {
      Precision scope(p);
      const int before = fake_gpu::counters().block_launches.load();
      auto got = t(nx::place(at, kCuda), nx::place(bt, kCuda));
      EXPECT_EQ(fake_gpu::counters().block_launches.load() - before, 1);
      auto r = measure(got, nx::transpose(at), nx::transpose(bt), t(at, bt));
      EXPECT_LE(r.max_ratio, bound(p, 40));
    }
    expect_tensor_core_result(p, fb, a3, b3, 33);
  }
  // The fused epilogue (bias, relu) reads the finished tensor-core output: one launch.
  auto layer = rune::jit([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return nx::relu(nx::matmul(x, w) + b);
  });
  auto bias = randn(53, {72});
  Precision scope("tf32");
  const int before = fake_gpu::counters().launches.load();
  auto got = layer(nx::place(a3, kCuda), nx::place(b3, kCuda), nx::place(bias, kCuda));
  nx::wait(got);
  EXPECT_EQ(fake_gpu::counters().launches.load() - before, 1);
  auto want = nx::to_vector<double>(
      nx::relu(nx::matmul(nx::cast(a3, nx::float64), nx::cast(b3, nx::float64)) +
               nx::cast(bias, nx::float64)));
  auto scale = nx::to_vector<double>(
      nx::matmul(nx::abs(nx::cast(a3, nx::float64)), nx::abs(nx::cast(b3, nx::float64))));
  auto g = nx::to_vector<double>(nx::cast(nx::place(got, "CPU"), nx::float64));
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_LE(std::abs(g[i] - want[i]), bound("tf32", 33) * scale[i] + 1e-6 * std::abs(want[i]))
        << i;
}

// A compiled function and an eager product, called again after the setting changes: each
// change recompiles (never a kernel built under the other precision), in both directions.
TEST(TensorCores, AChangedSettingNeverReusesAProgram) {
  auto f = rune::jit([](const Tensor& a, const Tensor& b) { return nx::matmul(a, b) * 2.0; });
  auto a = randn(54, {96, 40}), b = randn(55, {40, 80});
  auto host = bits(f(a, b));
  auto da = nx::place(a, kCuda), db = nx::place(b, kCuda);
  EXPECT_EQ(bits(f(da, db)), host);
  EXPECT_EQ(bits(nx::matmul(da, db) * 2.0), host);
  for (const char* p : {"tf32", "bf16"}) {
    {
      Precision scope(p);
      EXPECT_NE(bits(f(da, db)), host) << p;
      EXPECT_NE(bits(nx::matmul(da, db) * 2.0), host) << p;
      EXPECT_EQ(bits(f(a, b)), host) << p << ": the host ignores the setting";
      EXPECT_EQ(bits(nx::matmul(a, b) * 2.0), host) << p;
    }
    EXPECT_EQ(bits(f(da, db)), host) << p;
    EXPECT_EQ(bits(nx::matmul(da, db) * 2.0), host) << p;
  }
  // tf32 and bf16 differ from each other too (no reuse between the two opt-ins).
  std::vector<uint64_t> tf32, bf16;
  {
    Precision scope("tf32");
    tf32 = bits(f(da, db));
  }
  {
    Precision scope("bf16");
    bf16 = bits(f(da, db));
  }
  EXPECT_NE(tf32, bf16);
}

// float16 / bfloat16 operands keep the fma chain (the host's bits) under any precision, and so
// do float64 products: the tensor-core plan takes float32 operands only.
TEST(TensorCores, HalfAndFloat64ProductsKeepTheirBits) {
  auto product = rune::jit([](const Tensor& a, const Tensor& b) { return nx::matmul(a, b); });
  for (nx::DType t : {nx::float16, nx::bfloat16, nx::float64}) {
    auto a = nx::cast(randn(56, {130, 70}), t), b = nx::cast(randn(57, {70, 150}), t);
    auto host = bits(product(a, b));
    Precision scope("tf32");
    EXPECT_EQ(bits(product(nx::place(a, kCuda), nx::place(b, kCuda))), host) << ir::name(t);
  }
}

// RUNE_PLAN="gpu lanes:unrolled" (set by the ctest entry tensor_cores.plan_off) turns tiled
// plans off, the tensor-core plan included: one thread per output, the host's bits.
TEST(TensorCores, PlanOffKeepsOneThreadPerOutput) {
  const char* plan = std::getenv("RUNE_PLAN");
  if (!plan || std::string(plan) != "gpu lanes:unrolled")
    GTEST_SKIP() << "run with RUNE_PLAN=\"gpu lanes:unrolled\" (ctest tensor_cores.plan_off)";
  auto a = randn(58, {130, 70}), b = randn(59, {70, 150});
  auto host = bits(nx::matmul(a, b));
  Precision scope("tf32");
  const int before = fake_gpu::counters().block_launches.load();
  EXPECT_EQ(bits(nx::matmul(nx::place(a, kCuda), nx::place(b, kCuda))), host);
  EXPECT_EQ(fake_gpu::counters().block_launches.load() - before, 0);
}

}  // namespace
