// A compile that fails inside rune::jit (docs/semantics.md §2.4): it installs nothing, and every
// caller waiting for that key gets the failure; the next call compiles again. The compiler is the
// fake CUDA driver's (tests/gpu_runtime/fake_driver.h) behind a switch that makes it fail and a
// delay that holds the compile while other callers arrive.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;

struct Compiler {
  std::atomic<int> calls{0};
  std::atomic<bool> fail{false}, entered{false};
  std::atomic<int> hold_ms{0};
};
Compiler& compiler() {
  static Compiler c;
  return c;
}

std::string compile(const std::string& source, const std::string& arch) {
  Compiler& c = compiler();
  ++c.calls;
  c.entered = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(c.hold_ms.load()));
  if (c.fail) throw std::runtime_error("fake gpu: the compiler rejected the kernel (test)");
  return fake_gpu::compile_host(source, arch);
}

// Before any test asks for CUDA:0.
const bool installed = [] {
  fake_gpu::install_fake_cuda();
  codegen::set_gpu_target_for_testing(runtime::DeviceKind::CUDA,
                                      {&fake_gpu::host_dialect(), compile});
  return true;
}();

std::vector<float> host_values(const Tensor& t) {
  return nx::to_vector<float>(nx::place(t, "CPU"));
}

TEST(JitCompileFailure, InstallsNothingAndReachesEveryWaiter) {
  ASSERT_TRUE(installed);
  Compiler& c = compiler();
  Tensor host = nx::arange(nx::float32, 0, 64, 1) * 0.125;
  Tensor x = nx::place(host, "CUDA:0");
  auto f = rune::jit([](const Tensor& a) { return nx::exp(a) * 2.0 + 1.0; });
  c.fail = true;
  c.hold_ms = 800;
  c.entered = false;
  const int before = c.calls;
  std::atomic<int> failures{0};
  std::vector<std::string> messages(4);
  auto call = [&](int i) {
    try {
      f(x);
      messages[i] = "no error";
    } catch (const std::exception& e) {
      messages[i] = e.what();
      ++failures;
    }
  };
  // The first caller traces and compiles; three more arrive while the compile is held, find
  // the key being compiled and wait for it.
  std::vector<std::thread> threads;
  threads.emplace_back(call, 0);
  while (!c.entered) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int i = 1; i < 4; ++i) threads.emplace_back(call, i);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 4);
  for (const auto& m : messages)
    EXPECT_NE(m.find("the compiler rejected the kernel (test)"), std::string::npos) << m;
  EXPECT_EQ(c.calls - before, 1) << "the waiters did not compile again";
  EXPECT_EQ(f.traces(), 1u) << "the waiters did not trace again";
  EXPECT_EQ(f.cached_programs(), 0u);
  EXPECT_EQ(host_values(x), nx::to_vector<float>(host)) << "the argument is unchanged";

  // Nothing was installed, in rune::jit or in the GPU program cache: the next call traces and
  // compiles again, and now succeeds with the host's bits.
  c.fail = false;
  c.hold_ms = 0;
  Tensor y = f(x);
  EXPECT_EQ(c.calls - before, 2);
  EXPECT_EQ(f.traces(), 2u);
  EXPECT_EQ(f.cached_programs(), 1u);
  EXPECT_EQ(y.device().name(), "CUDA:0");
  auto want = nx::to_vector<float>(nx::exp(host) * 2.0 + 1.0);
  auto got = host_values(y);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << "element " << i;
  f(x);
  EXPECT_EQ(c.calls - before, 2) << "cached now";
}

TEST(JitCompileFailure, AFailingFirstCallDoesNotPoisonOtherKeys) {
  ASSERT_TRUE(installed);
  Compiler& c = compiler();
  auto f = rune::jit([](const Tensor& a) { return nx::sin(a) - 3.0; });
  Tensor small = nx::place(nx::arange(nx::float64, 0, 8, 1), "CUDA:0");
  Tensor large = nx::place(nx::arange(nx::float64, 0, 16, 1), "CUDA:0");
  c.fail = true;
  EXPECT_THROW(f(small), std::runtime_error);
  c.fail = false;
  // Another key compiles and runs; the failed one is simply new again.
  EXPECT_EQ(nx::to_vector<double>(nx::place(f(large), "CPU")),
            nx::to_vector<double>(nx::sin(nx::arange(nx::float64, 0, 16, 1)) - 3.0));
  EXPECT_EQ(f.cached_programs(), 1u);
  EXPECT_EQ(nx::to_vector<double>(nx::place(f(small), "CPU")),
            nx::to_vector<double>(nx::sin(nx::arange(nx::float64, 0, 8, 1)) - 3.0));
  EXPECT_EQ(f.cached_programs(), 2u);
  EXPECT_EQ(f.traces(), 3u);
}

}  // namespace
