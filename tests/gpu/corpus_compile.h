// The GPU source tests' one check, for NVRTC (tests/gpu/test_nvrtc_sources.cpp) and hiprtc
// (tests/hip/test_hiprtc_sources.cpp): every distinct rendering of a corpus (gpu_corpus.h)
// compiles for each arch of a runtime compiler. Kernels are compiled in batches, many per
// program (each under its own name), which divides the compiler's fixed cost per program; a
// failing batch is recompiled kernel by kernel, so the message shows the one kernel's source and
// the compiler's log.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cuda/nvrtc.h"
#include "codegen/gpu/c_renderer.h"
#include "codegen/gpu/device_desc.h"
#include "codegen/hip/hiprtc.h"
#include "gpu_corpus.h"

namespace gpu_test {

// The runtime compiler of a GPU kind (CUDA: NVRTC; HIP: hiprtc) as the check drives it.
struct SourceCompiler {
  runtime::DeviceKind kind;
  // Every arch's source is rendered once, with the plans of this arch (described at each
  // check, so it has the matmul precision of the moment).
  const char* plan_arch;
  std::vector<const char*> archs;  // each batch compiles for every one
  size_t batch;                    // kernels per program
  unsigned threads;                // compiling threads; 1: the calling thread compiles

  bool cuda() const { return kind == runtime::DeviceKind::CUDA; }
  const char* name() const { return cuda() ? "NVRTC" : "hiprtc"; }  // in the summary line
  const codegen::CDialect& dialect() const {
    return cuda() ? codegen::cuda_dialect() : codegen::hip_dialect();
  }
  bool available() const {
    return cuda() ? codegen::cuda::nvrtc_available() : codegen::hip::hiprtc_available();
  }
  std::string version() const {
    return cuda() ? codegen::cuda::nvrtc_version() : codegen::hip::hiprtc_version();
  }
  // Why it is not available ("" where it is).
  std::string load_error() const {
    return cuda() ? codegen::cuda::nvrtc_load_error() : codegen::hip::hiprtc_load_error();
  }
  // The message of a test skipped where it is not available.
  std::string skip_message() const {
    return std::string(cuda() ? "libnvrtc" : "hiprtc") + " not available: " + load_error();
  }
  // Compiles one source for one arch; throws on a compile error (with the log and the source).
  void compile(const std::string& src, const char* arch) const {
    if (cuda())
      codegen::cuda::nvrtc_compile(src, arch);
    else
      codegen::hip::hiprtc_compile(src, arch);
  }
};

struct CompileResult {
  size_t kernels = 0, distinct = 0, programs = 0;
  double seconds = 0;
  std::vector<std::string> failures;
};

inline CompileResult compile_all(const SourceCompiler& c, const std::vector<Labelled>& ks) {
  CompileResult res;
  auto t0 = std::chrono::steady_clock::now();
  const codegen::CDialect& d = c.dialect();
  const codegen::DeviceDesc device = codegen::gpu_device_desc(c.kind, c.plan_arch);
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
  std::atomic<size_t> next{0};
  std::mutex mu;
  auto compile = [&](const std::string& src, const char* arch) {
    {
      std::lock_guard lock(mu);
      ++res.programs;
    }
    c.compile(src, arch);
  };
  auto worker = [&] {
    for (size_t b; (b = next++ * c.batch) < distinct.size();) {
      size_t e = std::min(distinct.size(), b + c.batch);
      std::string src = codegen::render_c_prelude(d);
      for (size_t j = b; j < e; ++j)
        src += codegen::render_c_kernel(ks[distinct[j]].k, "rk" + std::to_string(j), d, device);
      for (const char* arch : c.archs) {
        try {
          compile(src, arch);
        } catch (const std::exception&) {
          for (size_t j = b; j < e; ++j) {
            try {
              compile(codegen::render_c(ks[distinct[j]].k, "rk", d, device), arch);
            } catch (const std::exception& ex) {
              std::lock_guard lock(mu);
              res.failures.push_back(ks[distinct[j]].label + ": " + ex.what());
            }
          }
        }
      }
    }
  };
  if (c.threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < c.threads; ++i) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

// Compiles the corpus, prints a summary line and fails naming the first three kernels that did
// not compile.
inline void expect_all_compile(const SourceCompiler& c, const std::vector<Labelled>& ks) {
  ASSERT_FALSE(ks.empty());
  CompileResult r = compile_all(c, ks);
  std::printf("  %zu kernels, %zu distinct, %zu %s programs (%zu archs) in %.2f s\n", r.kernels,
              r.distinct, r.programs, c.name(), c.archs.size(), r.seconds);
  for (size_t i = 0; i < r.failures.size() && i < 3; ++i) ADD_FAILURE() << r.failures[i];
  EXPECT_TRUE(r.failures.empty()) << r.failures.size() << " kernels failed to compile";
}

// Where the compiler loads, it has a version and no load error; where it does not, a compile
// raises naming each of `names` (the library, how to install it).
inline void expect_loaded_or_named(const SourceCompiler& c, const std::vector<std::string>& names) {
  if (c.available()) {  // nothing to check but the version
    EXPECT_FALSE(c.version().empty());
    EXPECT_TRUE(c.load_error().empty());
    return;
  }
  try {
    c.compile("", c.plan_arch);
    FAIL();
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    for (const std::string& name : names) EXPECT_NE(m.find(name), std::string::npos) << m;
  }
}

}  // namespace gpu_test

// Defines the test fixture `Suite`, skipped where `compiler` (a gpu_test::SourceCompiler) is
// unavailable, and its tests that each corpus of gpu_corpus.h compiles for every arch.
#define RUNE_CORPUS_COMPILE_TESTS(Suite, compiler)                                                 \
  class Suite : public ::testing::Test {                                                           \
   protected:                                                                                      \
    void SetUp() override {                                                                        \
      if (!(compiler).available()) GTEST_SKIP() << (compiler).skip_message();                      \
    }                                                                                              \
  };                                                                                               \
  TEST_F(Suite, EveryElementwisePrimitiveAndDtype) {                                               \
    gpu_test::expect_all_compile(compiler, gpu_test::corpus_elementwise());                        \
  }                                                                                                \
  TEST_F(Suite, CastsBetweenAllDtypePairs) {                                                       \
    gpu_test::expect_all_compile(compiler, gpu_test::corpus_casts());                              \
  }                                                                                                \
  TEST_F(Suite, Reductions) {                                                                      \
    gpu_test::expect_all_compile(compiler, gpu_test::corpus_reductions());                         \
  }                                                                                                \
  TEST_F(Suite, Movement) { gpu_test::expect_all_compile(compiler, gpu_test::corpus_movement()); } \
  TEST_F(Suite, TranscendentalsDecomposed) {                                                       \
    gpu_test::expect_all_compile(compiler, gpu_test::corpus_transcendentals());                    \
  }                                                                                                \
  TEST_F(Suite, AttentionKernels) {                                                                \
    gpu_test::expect_all_compile(compiler, gpu_test::corpus_attention());                          \
  }
