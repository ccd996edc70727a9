// Every kernel shape the suite produces renders as CUDA C that NVRTC compiles (sm_80 and sm_90),
// without a GPU. Kernels come from real nx programs traced and scheduled as rune::jit does, then
// decomposed as codegen/compile.cpp does. A failure prints the source and NVRTC's log.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

#include "codegen/cuda/gpu_source_check.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/gpu/c_renderer.h"
#include "codegen/gpu/device_desc.h"
#include "corpus_compile.h"
#include "gpu_corpus.h"

namespace {

using namespace gpu_test;

// NVRTC for every checked arch, in batches of 12 kernels on up to 4 threads. One rendering for
// every arch compiled: sm_90's plans (tensor cores and cp.async from sm_80; the default
// precision picks neither, and cp.async's helper compiles to a plain copy before).
const SourceCompiler kNvrtc{runtime::DeviceKind::CUDA,
                            "sm_90",
                            {std::begin(codegen::kCheckArchs), std::end(codegen::kCheckArchs)},
                            12,
                            std::clamp(std::thread::hardware_concurrency(), 1u, 4u)};

void expect_all_compile(const std::vector<Labelled>& ks) {
  gpu_test::expect_all_compile(kNvrtc, ks);
}

// Each corpus (tests/gpu/gpu_corpus.h) compiles for every checked arch.
RUNE_CORPUS_COMPILE_TESTS(Nvrtc, kNvrtc)

// The corpus's products under the opt-in matmul precisions (nx::set_matmul_precision): the
// tiled float32 ones take the tensor-core plan (mma.sync m16n8k8 tf32 / m16n8k16 bf16, sm_80+).
TEST_F(Nvrtc, TensorCorePlans) {
  std::vector<Labelled> products;
  for (const auto& l : corpus_reductions())
    if (l.k.contract) products.push_back(l);
  for (auto p : {codegen::MatmulPrecision::TF32, codegen::MatmulPrecision::BF16}) {
    codegen::set_matmul_precision(p);
    // The products the precision changes (the others render as under "highest", which
    // Nvrtc.Reductions compiles).
    std::vector<Labelled> mma;
    for (const auto& l : products)
      if (codegen::c_plan(l.k, codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90")).mma ==
          p)
        mma.push_back(l);
    EXPECT_GE(mma.size(), 4u) << codegen::precision_name(p);
    expect_all_compile(mma);
    codegen::set_matmul_precision(codegen::MatmulPrecision::Highest);
  }
}

// ---------------------------------------------------------------------------------------------

TEST_F(Nvrtc, CompileErrorCarriesLogAndSource) {
  try {
    codegen::cuda::nvrtc_compile("extern \"C\" __global__ void k() { undeclared_thing(); }\n",
                                 "sm_90");
    FAIL() << "expected a compile error";
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("undeclared_thing"), std::string::npos) << m;
    EXPECT_NE(m.find("NVRTC log"), std::string::npos) << m;
    EXPECT_NE(m.find("source"), std::string::npos) << m;
  }
}

TEST_F(Nvrtc, CheckCudaSourceOnAScheduledKernel) {
  std::vector<Labelled> ks;
  add_program(ks, "sum", {{DType::Float32, {3, 70000}}},
              [](auto& a) { return std::vector<Tensor>{nx::sum(a[0], {1})}; });
  auto it =
      std::find_if(ks.begin(), ks.end(), [](const Labelled& l) { return l.k.rbody != nullptr; });
  ASSERT_NE(it, ks.end());
  const codegen::KernelSpec& k = it->k;
  ASSERT_GT(k.blocks(), 1);
  EXPECT_NO_THROW(codegen::check_cuda_source(k));
  // Two phases: the scratch buffer follows the kernel params.
  auto dt = codegen::c_param_dtypes(k);
  EXPECT_EQ(dt.size(), k.slots.size() + 1);
  std::string src = codegen::render_c(k, "my_kernel", codegen::cuda_dialect(),
                                      codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
  EXPECT_NE(src.find("void my_kernel_p1("), std::string::npos);
  EXPECT_NE(src.find("void my_kernel("), std::string::npos);
}

TEST(NvrtcLoad, MessageNamesTheLibrary) { expect_loaded_or_named(kNvrtc, {"libnvrtc"}); }

}  // namespace

// Reductions over contiguous elements run their 8 lanes as 8 threads joined by shuffles; short
// ones and reductions over a strided axis keep one thread per output (c_lane_threads).
TEST(CudaReductions, LaneThreadsWhereTheReducedElementsAreContiguous) {
  std::map<std::string, bool> want = {
      {"ReduceSum float32 [2, 65536] #0", true}, {"ReduceMax int64 [2, 200000] #0", true},
      {"ReduceSum bool [2, 65536] #0", true},    {"ReduceSum float32 [3, 7] #0", false},
      {"min transposed float32 #0", false},      {"sum all float16 #0", true}};
  size_t seen = 0;
  for (const auto& [label, k] : corpus_reductions()) {
    auto it = want.find(label);
    if (it == want.end()) continue;
    ++seen;
    const bool lanes =
        codegen::c_lane_threads(k, codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
    EXPECT_EQ(lanes, it->second) << label;
    std::string src =
        codegen::render_c(k, "k", codegen::cuda_dialect(),
                          codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
    // The kernel (after the prelude, which defines the exchange) says its plan and shuffles.
    const size_t body = src.find("// rune kernel");
    EXPECT_EQ(src.find("plan: gpu lanes:threads", body) != std::string::npos &&
                  src.find("rune_shfl_u", body) != std::string::npos,
              lanes)
        << label << "\n"
        << src;
  }
  EXPECT_EQ(seen, want.size());
}

// Row kernels (softmax, log_softmax, layernorm, cross-entropy) with rows of 16 or more run a
// row as 8 consecutive threads (plan rows:lanes), each stage's result broadcast to the 8
// (rune_shfl_idx); short rows keep one thread per row. The plan is named in the source, so a
// fallback to one thread per row cannot pass unnoticed.
TEST(CudaRows, RowsOfSixteenOrMoreAreEightThreads) {
  std::vector<Labelled> ks;
  add_program(ks, "softmax", {{DType::Float32, {4096, 1024}}},
              [](auto& a) { return std::vector<Tensor>{nx::softmax(a[0], -1)}; });
  add_program(ks, "layer_norm",
              {{DType::Float32, {13, 40}}, {DType::Float32, {40}}, {DType::Float32, {40}}},
              [](auto& a) { return std::vector<Tensor>{nx::nn::layer_norm(a[0], a[1], a[2])}; });
  add_program(ks, "short softmax", {{DType::Float32, {64, 7}}},
              [](auto& a) { return std::vector<Tensor>{nx::softmax(a[0], -1)}; });
  ASSERT_EQ(ks.size(), 3u);
  for (const auto& [label, k] : ks) {
    ASSERT_TRUE(k.row()) << label;
    const bool lanes = label != "short softmax #0";
    for (const codegen::CDialect* d : {&codegen::cuda_dialect(), &codegen::hip_dialect()}) {
      const codegen::DeviceDesc device =
          d == &codegen::cuda_dialect()
              ? codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90")
              : codegen::gpu_device_desc(runtime::DeviceKind::HIP, "gfx90a");
      const codegen::Plan plan = codegen::c_plan(k, device);
      EXPECT_EQ(plan.row_lanes, lanes) << label << " " << d->name << ": " << plan.str();
      const std::string src = codegen::render_c(k, "k", *d, device);
      const size_t body = src.find("// rune kernel k ");  // after the prelude
      ASSERT_NE(body, std::string::npos) << src;
      const std::string want = d == &codegen::cuda_dialect()
                                   ? "(plan: gpu lanes:threads/32 rows:lanes)"
                                   : "(plan: gpu lanes:threads/16 rows:lanes)";
      EXPECT_EQ(src.find(want, body) != std::string::npos, lanes) << label << "\n" << src;
      EXPECT_EQ(src.find("rune_shfl_idx_u", body) != std::string::npos, lanes) << label;
    }
    // One launch of 8 threads per row.
    const auto launch = codegen::render_c_kernel_for_launch(
        k, "k", codegen::cuda_dialect(),
        codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
    ASSERT_EQ(launch.launches.size(), 1u);
    EXPECT_EQ(launch.launches[0].threads, ir::numel(k.shape) * (lanes ? 8 : 1)) << label;
  }
}

// Elementwise kernels reading each param at the output's index (or one element) move 4 outputs
// as vectors; strided, masked or misaligned reads keep one output per item (c_vector_loads).
TEST(CudaElementwise, VectorLoadsWhereEveryReadIsTheOutputsIndex) {
  std::vector<Labelled> ks;
  add_program(ks, "add", {{DType::Float32, {5, 8}}, {DType::Float32, {5, 8}}},
              [](auto& a) { return std::vector<Tensor>{a[0] + a[1]}; });
  add_program(ks, "scalar broadcast", {{DType::Float64, {9}}, {DType::Float64, {1}}},
              [](auto& a) { return std::vector<Tensor>{a[0] * nx::broadcast_to(a[1], {9})}; });
  add_program(ks, "row broadcast", {{DType::Float32, {5, 8}}, {DType::Float32, {8}}},
              [](auto& a) { return std::vector<Tensor>{a[0] + a[1]}; });
  add_program(ks, "transposed", {{DType::Int32, {5, 8}}},
              [](auto& a) { return std::vector<Tensor>{nx::transpose(a[0]) * 2}; });
  add_program(ks, "offset 1", {{DType::Float32, {9}}}, [](auto& a) {
    return std::vector<Tensor>{nx::slice(a[0], {{1, 9}}) + 1.0};
  });
  add_program(ks, "offset 4", {{DType::Bool, {12}}}, [](auto& a) {
    return std::vector<Tensor>{nx::logical_not(nx::slice(a[0], {{4, 12}}))};
  });
  const std::map<std::string, bool> want = {
      {"add #0", true},         {"scalar broadcast #0", true}, {"row broadcast #0", false},
      {"transposed #0", false}, {"offset 1 #0", false},        {"offset 4 #0", true}};
  ASSERT_EQ(ks.size(), want.size());
  for (const auto& [label, k] : ks) {
    const bool vec =
        codegen::c_vector_loads(k, codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
    EXPECT_EQ(vec, want.at(label)) << label;
    std::string src =
        codegen::render_c(k, "k", codegen::cuda_dialect(),
                          codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
    const size_t body = src.find("// rune kernel");
    EXPECT_EQ(src.find(" vec4)", body) != std::string::npos &&
                  src.find("& 15ull) == 0ull", body) != std::string::npos,
              vec)
        << label << "\n"
        << src;
  }
  if (codegen::cuda::nvrtc_available()) expect_all_compile(ks);
}

// Attention (corpus_attention): each program's chain is one attention kernel, rendered as one
// fixed-block entry of 256 threads with its score tile in shared memory and block barriers
// between its phases (codegen/lower/attention.cpp).
TEST(CudaAttention, EachProgramIsOneFixedBlockKernel) {
  int fused = 0;
  for (const auto& [label, k] : corpus_attention()) {
    if (!k.fused_attention()) continue;
    ++fused;
    std::string src =
        codegen::render_c(k, "k", codegen::cuda_dialect(),
                          codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"));
    const size_t body = src.find("// rune kernel");
    EXPECT_NE(src.find("__launch_bounds__(256, 1) void k(", body), std::string::npos) << label;
    EXPECT_NE(src.find("__shared__", body), std::string::npos) << label;
    EXPECT_NE(src.find("__syncthreads()", body), std::string::npos) << label;
  }
  EXPECT_EQ(fused, 3);
}
