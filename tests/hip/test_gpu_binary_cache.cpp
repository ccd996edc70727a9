// The GPU binary disk cache (codegen/gpu/gpu_binary_cache.h) and its two users, cubin_for and
// code_object_for. Every source carries a nonce, so each run (and each test) has keys of its
// own in the shared RUNE_CACHE_DIR, and removes the entries it made.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "codegen/cuda/cubin_cache.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/disk_cache.h"
#include "codegen/gpu/gpu_binary_cache.h"
#include "codegen/hip/code_object_cache.h"
#include "codegen/hip/hiprtc.h"

namespace {

std::string nonce() {
  static std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(getpid()));
  return std::to_string(rng());
}

// Removes the entry of `key` at scope exit.
struct Forget {
  std::string path;
  explicit Forget(const std::string& key) : path(codegen::DiskCache::instance().path_for(key)) {}
  ~Forget() { std::remove(path.c_str()); }
};

class GpuBinaryCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!codegen::DiskCache::instance().enabled()) GTEST_SKIP() << "disk cache disabled";
    source_ = "// " + nonce() + "\nkernel source\n";
  }
  void TearDown() override {
    for (const char* compiler : {"hiprtc", "nvrtc"})
      for (const char* version : {"1.0", "1.1"})
        for (const char* arch : {"gfx90a", "gfx1030"})
          std::remove(codegen::DiskCache::instance()
                          .path_for(codegen::gpu_binary_key(compiler, version, arch, source_))
                          .c_str());
  }
  // A cached binary through a counting fake compiler.
  std::string get(const std::string& arch, const std::string& version = "1.0",
                  const std::string& compiler = "hiprtc") {
    return codegen::cached_gpu_binary(compiler, version, arch, source_, [&] {
      ++compiles_;
      return "binary of " + compiler + " " + version + " " + arch + " " + source_;
    });
  }
  std::string path(const std::string& arch) const {
    return codegen::DiskCache::instance().path_for(
        codegen::gpu_binary_key("hiprtc", "1.0", arch, source_));
  }
  std::string source_;
  int compiles_ = 0;
};

TEST_F(GpuBinaryCache, SecondCallReadsTheDisk) {
  std::string a = get("gfx90a");
  EXPECT_EQ(compiles_, 1);
  EXPECT_TRUE(std::ifstream(path("gfx90a")).good());
  EXPECT_EQ(get("gfx90a"), a);
  EXPECT_EQ(compiles_, 1);
}

TEST_F(GpuBinaryCache, CorruptEntryIsRebuilt) {
  std::string a = get("gfx90a");
  {
    std::ofstream f(path("gfx90a"), std::ios::binary | std::ios::trunc);
    f << "not a cache entry";
  }
  EXPECT_EQ(get("gfx90a"), a);
  EXPECT_EQ(compiles_, 2);
  EXPECT_EQ(get("gfx90a"), a);  // the rebuilt entry is read back
  EXPECT_EQ(compiles_, 2);
}

TEST_F(GpuBinaryCache, ArchVersionAndCompilerAreKeyParts) {
  get("gfx90a");
  get("gfx1030");
  EXPECT_EQ(compiles_, 2);
  get("gfx90a", "1.1");
  EXPECT_EQ(compiles_, 3);
  get("gfx90a", "1.0", "nvrtc");
  EXPECT_EQ(compiles_, 4);
  EXPECT_NE(path("gfx90a"), path("gfx1030"));
  get("gfx90a");
  get("gfx1030");
  EXPECT_EQ(compiles_, 4);
}

TEST_F(GpuBinaryCache, FailedCompileStoresNothing) {
  auto fail = []() -> std::string { throw std::runtime_error("hiprtc_compile: boom"); };
  EXPECT_THROW(codegen::cached_gpu_binary("hiprtc", "1.0", "gfx90a", source_, fail),
               std::runtime_error);
  EXPECT_FALSE(std::ifstream(path("gfx90a")).good());
  get("gfx90a");
  EXPECT_EQ(compiles_, 1);
}

double seconds_of(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(GpuBinaryCacheCompilers, CodeObjectForIsCached) {
  if (!codegen::hip::hiprtc_available())
    GTEST_SKIP() << "hiprtc not available: " << codegen::hip::hiprtc_load_error();
  if (!codegen::DiskCache::instance().enabled()) GTEST_SKIP() << "disk cache disabled";
  std::string src =
      "// " + nonce() + "\nextern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }\n";
  std::string first, second;
  Forget entry(
      codegen::gpu_binary_key("hiprtc", codegen::hip::code_object_cache_version(), "gfx90a", src));
  double t1 = seconds_of([&] { first = codegen::hip::code_object_for(src, "gfx90a"); });
  double t2 = seconds_of([&] { second = codegen::hip::code_object_for(src, "gfx90a"); });
  std::printf("  hiprtc compile %.1f ms, from disk %.2f ms\n", t1 * 1e3, t2 * 1e3);
  EXPECT_TRUE(std::ifstream(entry.path).good());
  EXPECT_EQ(first, second);
  EXPECT_EQ(first.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_LT(t2 * 10, t1);
  // Errors are hiprtc_compile's.
  EXPECT_THROW(codegen::hip::code_object_for(src, "gfx942"), std::runtime_error);
}

TEST(GpuBinaryCacheCompilers, CubinForIsCached) {
  if (!codegen::cuda::nvrtc_available())
    GTEST_SKIP() << "libnvrtc not available: " << codegen::cuda::nvrtc_load_error();
  if (!codegen::DiskCache::instance().enabled()) GTEST_SKIP() << "disk cache disabled";
  std::string src =
      "// " + nonce() + "\nextern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }\n";
  std::string first, second;
  Forget entry(
      codegen::gpu_binary_key("nvrtc", codegen::cuda::cubin_cache_version(), "sm_90", src));
  Forget other(
      codegen::gpu_binary_key("nvrtc", codegen::cuda::cubin_cache_version(), "sm_80", src));
  double t1 = seconds_of([&] { first = codegen::cuda::cubin_for(src, "sm_90"); });
  double t2 = seconds_of([&] { second = codegen::cuda::cubin_for(src, "sm_90"); });
  std::printf("  NVRTC compile %.1f ms, from disk %.2f ms\n", t1 * 1e3, t2 * 1e3);
  EXPECT_TRUE(std::ifstream(entry.path).good());
  EXPECT_EQ(first, second);
  EXPECT_LT(t2 * 10, t1);
  EXPECT_NE(codegen::cuda::cubin_for(src, "sm_80"), first);  // another arch, another binary
}

}  // namespace
