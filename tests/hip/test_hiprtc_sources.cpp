// Every kernel of the GPU source corpus (tests/gpu/gpu_corpus.h, shared with the NVRTC test)
// renders as HIP C that hiprtc compiles for gfx90a (CDNA2, wavefront 64) and gfx1030 (RDNA2,
// wavefront 32), without a GPU. A failure prints the kernel's source and hiprtc's log.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "codegen/gpu/c_renderer.h"
#include "codegen/gpu/device_desc.h"
#include "codegen/hip/hiprtc.h"
#include "gpu_corpus.h"

namespace {

using namespace gpu_test;

constexpr const char* kArchs[] = {"gfx90a", "gfx1030"};

// hiprtc's fixed cost is about 250 ms per program (against ~2 ms per kernel), so distinct
// kernels are compiled in batches, many per program (each under its own name); a failing
// batch is recompiled kernel by kernel so the message shows the one kernel's source and log.
constexpr size_t kBatch = 48;

struct Result {
  size_t kernels = 0, distinct = 0, programs = 0;
  double seconds = 0;
  std::vector<std::string> failures;
};

Result compile_all(const std::vector<Labelled>& ks) {
  Result res;
  auto t0 = std::chrono::steady_clock::now();
  const auto& d = codegen::hip_dialect();
  const auto device = codegen::gpu_device_desc(runtime::DeviceKind::HIP, "gfx90a");
  std::vector<size_t> distinct;  // index of the first kernel of each distinct rendering
  std::set<std::string> seen;
  for (size_t i = 0; i < ks.size(); ++i) {
    try {
      if (seen.insert(codegen::render_c_kernel(ks[i].k, "rk", d, device)).second)
        distinct.push_back(i);
    } catch (const std::exception& e) {
      res.failures.push_back(ks[i].label + ": render_c threw: " + e.what());
    }
  }
  res.kernels = ks.size();
  res.distinct = distinct.size();
  // Work items: (batch, arch) pairs.
  const size_t batches = (distinct.size() + kBatch - 1) / kBatch;
  const size_t items = batches * std::size(kArchs);
  auto compile = [&](const std::string& src, const char* arch) {
    ++res.programs;
    codegen::hip::hiprtc_compile(src, arch);
  };
  // One thread: hiprtc_compile serialises every compile (ROCm 5.2's hiprtc hung with two).
  for (size_t item = 0; item < items; ++item) {
    const char* arch = kArchs[item % std::size(kArchs)];
    size_t b = item / std::size(kArchs) * kBatch;
    size_t e = std::min(distinct.size(), b + kBatch);
    std::string src = codegen::render_c_prelude(d);
    for (size_t j = b; j < e; ++j)
      src += codegen::render_c_kernel(ks[distinct[j]].k, "rk" + std::to_string(j), d, device);
    try {
      compile(src, arch);
    } catch (const std::exception&) {
      for (size_t j = b; j < e; ++j) {
        try {
          compile(codegen::render_c(ks[distinct[j]].k, "rk", d, device), arch);
        } catch (const std::exception& ex) {
          res.failures.push_back(ks[distinct[j]].label + ": " + ex.what());
        }
      }
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

void expect_all_compile(const std::vector<Labelled>& ks) {
  ASSERT_FALSE(ks.empty());
  Result r = compile_all(ks);
  std::printf("  %zu kernels, %zu distinct, %zu hiprtc programs (%zu archs) in %.2f s\n", r.kernels,
              r.distinct, r.programs, std::size(kArchs), r.seconds);
  for (size_t i = 0; i < r.failures.size() && i < 3; ++i) ADD_FAILURE() << r.failures[i];
  EXPECT_TRUE(r.failures.empty()) << r.failures.size() << " kernels failed to compile";
}

class Hiprtc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!codegen::hip::hiprtc_available())
      GTEST_SKIP() << "hiprtc not available: " << codegen::hip::hiprtc_load_error();
  }
};

// ---------------------------------------------------------------------------------------------

// Each corpus compiles for both archs.
TEST_F(Hiprtc, EveryElementwisePrimitiveAndDtype) { expect_all_compile(corpus_elementwise()); }

TEST_F(Hiprtc, CastsBetweenAllDtypePairs) { expect_all_compile(corpus_casts()); }

TEST_F(Hiprtc, Reductions) { expect_all_compile(corpus_reductions()); }

TEST_F(Hiprtc, Movement) { expect_all_compile(corpus_movement()); }

TEST_F(Hiprtc, TranscendentalsDecomposed) { expect_all_compile(corpus_transcendentals()); }

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
  if (codegen::hip::hiprtc_available()) {  // nothing to check but the version
    EXPECT_FALSE(codegen::hip::hiprtc_version().empty());
    EXPECT_TRUE(codegen::hip::hiprtc_load_error().empty());
    return;
  }
  try {
    codegen::hip::hiprtc_compile("", "gfx90a");
    FAIL();
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("libamdhip64.so.5"), std::string::npos) << m;
    EXPECT_NE(m.find("apt-get install libamdhip64-dev"), std::string::npos) << m;
  }
}

}  // namespace
