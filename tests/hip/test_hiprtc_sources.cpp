// Every kernel of the GPU source corpus (tests/gpu/gpu_corpus.h, checked as the NVRTC test checks
// it: tests/gpu/corpus_compile.h) renders as HIP C that hiprtc compiles for gfx90a (CDNA2,
// wavefront 64) and gfx1030 (RDNA2, wavefront 32), without a GPU. A failure prints the kernel's
// source and hiprtc's log.
#include <gtest/gtest.h>

#include "codegen/gpu/c_renderer.h"
#include "codegen/gpu/device_desc.h"
#include "codegen/hip/hiprtc.h"
#include "corpus_compile.h"
#include "gpu_corpus.h"

namespace {

using namespace gpu_test;

// hiprtc for gfx90a and gfx1030, rendered with gfx90a's plans. hiprtc's fixed cost is about
// 250 ms per program (against ~2 ms per kernel), hence batches of 48 kernels. One thread:
// hiprtc_compile serialises every compile (ROCm 5.2's hiprtc hung with two).
const SourceCompiler kHiprtc{runtime::DeviceKind::HIP, "gfx90a", {"gfx90a", "gfx1030"}, 48, 1};

// Each corpus compiles for both archs.
RUNE_CORPUS_COMPILE_TESTS(Hiprtc, kHiprtc)

// ---------------------------------------------------------------------------------------------

TEST_F(Hiprtc, CompileErrorCarriesLogAndNumberedSource) {
  try {
    codegen::hip::hiprtc_compile(
        "// line 1\nextern \"C\" __global__ void k() { undeclared_thing(); }\n", "gfx90a");
    FAIL() << "expected a compile error";
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("hiprtc_compile: ", 0), 0u) << m;
    EXPECT_NE(m.find("gfx90a"), std::string::npos) << m;
    EXPECT_NE(m.find("hiprtc log"), std::string::npos) << m;
    EXPECT_NE(m.find("undeclared_thing"), std::string::npos) << m;  // in the log
    EXPECT_NE(m.find("   2  extern \"C\" __global__ void k()"), std::string::npos) << m;
  }
}

// Archs outside the allow-list are refused before hiprtc sees them: hiprtc 5.2 aborts the
// whole process for these (the test process surviving is part of the check).
TEST_F(Hiprtc, ArchOutsideTheAllowListIsRefusedNotCrashed) {
  for (const char* arch : {"gfx942", "gfx1100", "gfx940:xnack-", "sm_90"}) {
    try {
      codegen::hip::hiprtc_compile("extern \"C\" __global__ void k() {}\n", arch);
      FAIL() << "expected " << arch << " to be refused";
    } catch (const std::runtime_error& e) {
      std::string m = e.what();
      EXPECT_EQ(m.rfind("hiprtc_compile: ", 0), 0u) << m;
      EXPECT_NE(m.find(std::string("arch ") + arch), std::string::npos) << m;
      EXPECT_NE(m.find(codegen::hip::hiprtc_version()), std::string::npos) << m;
      EXPECT_NE(m.find("crashes"), std::string::npos) << m;
      EXPECT_NE(m.find("gfx90a"), std::string::npos) << m;  // lists what is accepted
    }
  }
}

TEST_F(Hiprtc, FeatureSuffixedArchCompiles) {
  std::string co = codegen::hip::hiprtc_compile(
      "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n", "gfx90a:xnack-");
  ASSERT_GE(co.size(), 4u);
  EXPECT_EQ(co.substr(0, 4),
            "\x7f"
            "ELF");  // an AMDGPU ELF code object
}

// The dialect's choices, checked on the source: float32 sqrt is correctly rounded through
// float64 (hiprtc's sqrtf is not), no CUDA-only intrinsic, no header.
TEST_F(Hiprtc, HipSourceUsesTheDialect) {
  std::vector<Labelled> ks;
  add_program(ks, "sqrt", {{DType::Float32, {7}}, {DType::Float64, {7}}}, [](auto& a) {
    return std::vector<Tensor>{prim(Op::Sqrt, DType::Float32, {a[0]}),
                               prim(Op::Sqrt, DType::Float64, {a[1]})};
  });
  ASSERT_FALSE(ks.empty());
  const auto& d = codegen::hip_dialect();
  const auto device = codegen::gpu_device_desc(runtime::DeviceKind::HIP, "gfx90a");
  std::string src = codegen::render_c_prelude(d);
  for (size_t i = 0; i < ks.size(); ++i)
    src += codegen::render_c_kernel(ks[i].k, "k" + std::to_string(i), d, device);
  EXPECT_NE(src.find("// rune kernels (hip)"), std::string::npos);
  EXPECT_NE(src.find("rune_hip_sqrt_f32"), std::string::npos) << src;
  EXPECT_EQ(src.find("__fsqrt_rn"), std::string::npos) << src;
  EXPECT_EQ(src.find("#include"), std::string::npos) << src;
  EXPECT_NO_THROW(codegen::hip::hiprtc_compile(src, "gfx90a"));
}

TEST(HiprtcLoad, MessageNamesTheLibrary) {
  expect_loaded_or_named(kHiprtc, {"libamdhip64.so.5", "apt-get install libamdhip64-dev"});
}

}  // namespace
