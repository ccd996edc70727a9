// The plan report (codegen/cuda/kernel_report.h): ptxas's resource lines parse, and the tiled
// float32 product compiles for sm_80 and sm_90 without spills, with its shared tiles, at 16 or
// more FLOP per global byte at 4096^2 (the one-thread-per-output plan: 0.25). Needs libnvrtc
// (skips without it); no GPU. Label: nvrtc. The softmax row kernel over [4096, 1024] compiles
// without spills or stack.
#include <gtest/gtest.h>

#include "codegen/cuda/gpu_source_check.h"
#include "codegen/cuda/kernel_report.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/gpu/c_renderer.h"
#include "codegen/gpu/device_desc.h"
#include "codegen/lower/attention.h"
#include "gpu_corpus.h"

namespace {

using namespace gpu_test;

TEST(KernelReport, ParsesPtxasLines) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
      "ptxas info    : Function properties for a\n"
      "ptxas         .     256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 36 registers, used 1 barriers, 256 bytes cumulative stack size, "
      "16384 bytes smem\n"
      "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 8 registers, used 0 barriers\n";
  auto f = codegen::cuda::parse_ptxas_log(log);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].name, "a");
  EXPECT_EQ(f[0].registers, 36);
  EXPECT_EQ(f[0].stack_bytes, 256);
  EXPECT_EQ(f[0].spill_store_bytes, 8);
  EXPECT_EQ(f[0].spill_load_bytes, 12);
  EXPECT_EQ(f[0].shared_bytes, 16384);
  EXPECT_EQ(f[1].name, "b");
  EXPECT_EQ(f[1].registers, 8);
  EXPECT_EQ(f[1].shared_bytes, 0);
}

const codegen::KernelSpec& corpus_kernel(const std::string& label) {
  static const auto ks = corpus_reductions();
  for (const auto& [l, k] : ks)
    if (l == label) return k;
  throw std::runtime_error("no corpus kernel " + label);
}

TEST(KernelReport, TheTiledProductAt4096HasNoSpillsAndAtLeast16FlopPerByte) {
  const auto& k = corpus_kernel("matmul 4096 #0");
  ASSERT_TRUE(k.contract);
  const codegen::Plan plan =
      codegen::c_plan(k, codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
  EXPECT_TRUE(plan.tiles) << plan.str();
  // The model: each 128 x 128 tile stages 128 x 4096 of A and of B once: 32 FLOP per byte of
  // A and B (the output's stores bring it just below).
  const auto t = codegen::traffic(k, plan);
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 4096 * 4096 * 4096);
  EXPECT_GE(t.flops / t.global_bytes, 16.0);
  codegen::Plan naive = plan;
  naive.tiles = false;
  const auto n = codegen::traffic(k, naive);
  EXPECT_DOUBLE_EQ(n.flops / n.global_bytes, 2.0 * 4096 / (2.0 * 4096 * 4 + 4));
  if (!codegen::cuda::nvrtc_available())
    GTEST_SKIP() << "libnvrtc not available: " << codegen::cuda::nvrtc_load_error();
  for (const char* arch : codegen::kCheckArchs) {
    auto r = codegen::cuda::report_kernel(k, "matmul 4096", arch);
    std::printf("%s: %s", arch, codegen::cuda::format_report(r).c_str());
    ASSERT_EQ(r.functions.size(), 1u) << arch;
    const auto& f = r.functions[0];
    EXPECT_GT(f.registers, 0) << arch;
    EXPECT_LE(f.registers, 255) << arch;
    EXPECT_EQ(f.spill_store_bytes, 0) << arch;
    EXPECT_EQ(f.spill_load_bytes, 0) << arch;
    EXPECT_EQ(f.stack_bytes, 0) << arch;  // the accumulators live in registers, not local memory
    const auto& g = codegen::kGemmTile;
    EXPECT_EQ(f.shared_bytes, 2 * int64_t{4} * g.bk * (g.bm + g.bn)) << arch;  // 2 buffers
    EXPECT_GE(r.flops_per_byte(), 16.0) << arch;
  }
}

// The row kernel of softmax over [4096, 1024] float32 (plan rows:lanes: a row is 8 consecutive
// threads, each stage's result broadcast to them): no spills, no stack; its registers and FLOP
// per global byte printed for docs/gpu.md.
TEST(KernelReport, SoftmaxRowsAt4096x1024HaveNoSpills) {
  std::vector<gpu_test::Labelled> ks;
  gpu_test::add_program(ks, "softmax 4096x1024", {{DType::Float32, {4096, 1024}}},
                        [](auto& a) { return std::vector<Tensor>{nx::softmax(a[0], -1)}; });
  ASSERT_EQ(ks.size(), 1u);
  const codegen::KernelSpec& k = ks[0].k;
  ASSERT_TRUE(k.row() && k.row_out);
  const codegen::Plan plan =
      codegen::c_plan(k, codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
  EXPECT_TRUE(plan.row_lanes && plan.lane_threads) << plan.str();
  const auto t = codegen::traffic(k, plan);
  EXPECT_GT(t.flops, 0.0);
  if (!codegen::cuda::nvrtc_available())
    GTEST_SKIP() << "libnvrtc not available: " << codegen::cuda::nvrtc_load_error();
  for (const char* arch : codegen::kCheckArchs) {
    auto r = codegen::cuda::report_kernel(k, "softmax 4096x1024", arch);
    std::printf("%s: %s", arch, codegen::cuda::format_report(r).c_str());
    ASSERT_EQ(r.functions.size(), 1u) << arch;
    const auto& f = r.functions[0];
    EXPECT_GT(f.registers, 0) << arch;
    EXPECT_LE(f.registers, 255) << arch;
    EXPECT_EQ(f.spill_store_bytes, 0) << arch;
    EXPECT_EQ(f.spill_load_bytes, 0) << arch;
    EXPECT_EQ(f.stack_bytes, 0) << arch;
    EXPECT_EQ(f.shared_bytes, 0) << arch;
  }
}

// The attention kernel (codegen/lower/attention.cpp) at bench_attention's T = 1024 (8 batches x
// 8 heads, D = 64, float32, not causal): blocks of 10 query rows, their 10 x 1024 scores and
// 10 x 64 elements of q in shared memory beside the softmax stages' lane and row results (43 KiB);
// no spills, no stack. Its line is printed for docs/gpu.md.
TEST(KernelReport, TheAttentionKernelHasNoSpills) {
  std::vector<gpu_test::Labelled> ks;
  gpu_test::add_program(
      ks, "attention",
      {{DType::Float32, {8, 8, 1024, 64}},
       {DType::Float32, {8, 8, 1024, 64}},
       {DType::Float32, {8, 8, 1024, 64}}},
      [](auto& a) {
        return std::vector<Tensor>{nx::nn::scaled_dot_product_attention(a[0], a[1], a[2])};
      });
  ASSERT_EQ(ks.size(), 1u);
  const codegen::KernelSpec& k = ks[0].k;
  ASSERT_TRUE(k.fused_attention());
  const auto t = codegen::traffic(
      k, codegen::c_plan(k, codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90")));
  EXPECT_GE(t.flops, 2.0 * 64 * 1024 * 1024 * 128);
  if (!codegen::cuda::nvrtc_available())
    GTEST_SKIP() << "libnvrtc not available: " << codegen::cuda::nvrtc_load_error();
  for (const char* arch : codegen::kCheckArchs) {
    auto r = codegen::cuda::report_kernel(k, "attention 8x8x1024x64", arch);
    std::printf("%s: %s", arch, codegen::cuda::format_report(r).c_str());
    ASSERT_EQ(r.functions.size(), 1u) << arch;
    const auto& f = r.functions[0];
    EXPECT_GT(f.registers, 0) << arch;
    EXPECT_EQ(f.spill_store_bytes, 0) << arch;
    EXPECT_EQ(f.spill_load_bytes, 0) << arch;
    EXPECT_EQ(f.stack_bytes, 0) << arch;
    // The scores and q, then per stage (max, sum) 8 lanes and 1 result for each of the 10 rows
    // (and the arrays' 16-byte alignment): within the kernel's 44 KiB.
    EXPECT_GE(f.shared_bytes, 10 * (1024 + 64) * 4 + 2 * (10 * 8 + 10) * 4) << arch;
    EXPECT_LE(f.shared_bytes, codegen::kGpuAttentionSharedBytes) << arch;
  }
}

// The tensor-core plan (nx::set_matmul_precision "tf32" / "bf16", plan part mma) at 4096^2:
// mma.sync compiles for sm_80 and sm_90 without spills or stack, with its staged slices (tf32:
// float32, bf16: bfloat16; rows padded by 8 elements against bank conflicts), at the SIMT plan's
// FLOP per global byte (the same tiles stage the same operands).
TEST(KernelReport, TheTensorCorePlanAt4096HasNoSpills) {
  const auto& k = corpus_kernel("matmul 4096 #0");
  for (auto p : {codegen::MatmulPrecision::TF32, codegen::MatmulPrecision::BF16}) {
    codegen::set_matmul_precision(p);
    const codegen::Plan plan =
        codegen::c_plan(k, codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
    codegen::set_matmul_precision(codegen::MatmulPrecision::Highest);
    EXPECT_EQ(plan.mma, p) << plan.str();
    EXPECT_EQ(plan.str(), std::string("gpu lanes:unrolled tiles:128x128x16/8x8 mma:") +
                              codegen::precision_name(p));
    EXPECT_GE(codegen::traffic(k, plan).flops / codegen::traffic(k, plan).global_bytes, 16.0);
  }
  // The HIP dialect has no tensor-core step: its products keep the SIMT plan.
  codegen::set_matmul_precision(codegen::MatmulPrecision::TF32);
  EXPECT_EQ(codegen::c_plan(k, codegen::gpu_device_desc(runtime::DeviceKind::HIP, "gfx90a")).mma,
            codegen::MatmulPrecision::Highest);
  codegen::set_matmul_precision(codegen::MatmulPrecision::Highest);
  if (!codegen::cuda::nvrtc_available())
    GTEST_SKIP() << "libnvrtc not available: " << codegen::cuda::nvrtc_load_error();
  for (auto p : {codegen::MatmulPrecision::TF32, codegen::MatmulPrecision::BF16}) {
    for (const char* arch : codegen::kCheckArchs) {
      codegen::set_matmul_precision(p);
      codegen::cuda::KernelReport r;
      try {
        r = codegen::cuda::report_kernel(k, "matmul 4096", arch);
      } catch (...) {
        codegen::set_matmul_precision(codegen::MatmulPrecision::Highest);
        throw;
      }
      codegen::set_matmul_precision(codegen::MatmulPrecision::Highest);
      std::printf("%s: %s", arch, codegen::cuda::format_report(r).c_str());
      EXPECT_EQ(r.plan.mma, p) << arch;
      ASSERT_EQ(r.functions.size(), 1u) << arch;
      const auto& f = r.functions[0];
      EXPECT_GT(f.registers, 0) << arch;
      EXPECT_LE(f.registers, 255) << arch;
      EXPECT_EQ(f.spill_store_bytes, 0) << arch;
      EXPECT_EQ(f.spill_load_bytes, 0) << arch;
      EXPECT_EQ(f.stack_bytes, 0) << arch;
      const auto& g = codegen::kGemmTile;
      const int64_t item = p == codegen::MatmulPrecision::BF16 ? 2 : 4;
      EXPECT_EQ(f.shared_bytes, 2 * item * g.bk * (g.bm + 8 + g.bn + 8))
          << arch;  // padded rows, 2 buffers
    }
  }
}

}  // namespace
