// Regression tests: each failure the fuzzer (test_fuzz.cpp) found, as its shrunk reproducer.
#include <gtest/gtest.h>

#include "fuzz/executor.h"
#include "gpu_runtime/fake_driver.h"

namespace {

const bool installed = [] {
  const char* v = std::getenv("RUNE_TEST_FAKE_CUDA");
  if (!v || std::string(v) != "1") fake_gpu::install_fake_cuda();
  return true;
}();

TEST(FuzzRegression, Installed) { EXPECT_TRUE(installed); }

}  // namespace
