// A child process for tests/runtime/test_env.cpp: each mode reads the environment the way a user
// program does (once, at first use) and prints what the test checks.
//   env_probe ops      a few eager ops and a compiled call (results, then "compiled=N disk=M")
//   env_probe threads  "threads=N used=U sum=<hex bits>": the host pool's size, the distinct
//                      threads a large parallel_for ran on, and a large sum's bits
//   env_probe matmul   a matrix product (the host's micro-kernels, RUNE_GEMM_ISA)
// An exception ends the probe with status 3 and "env_probe: <type>: <message>" on stderr, the
// type being invalid_argument or exception (a bad variable's value raises where it is read).
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "codegen/compile.h"
#include "runtime/thread_pool.h"
#include "trace/rune.h"

namespace {

int ops() {
  nx::Tensor x = nx::create(nx::float32, {2, 3}, {1, 2, 3, 4, 5, 6});
  nx::print(x * 2.0 + 1.0);
  nx::print(nx::sum(nx::exp(nx::transpose(x) * 0.25), {1}));
  nx::print(nx::max(nx::cast(x, nx::int32), {0}));
  auto f = rune::jit([](const nx::Tensor& a) { return nx::tanh(a) * a - 1.0; });
  nx::print(f(x));
  auto s = codegen::compile_stats();
  std::printf("compiled=%zu disk=%zu\n", s.kernels_compiled, s.kernels_from_disk);
  return 0;
}

int threads() {
  std::mutex mu;
  std::set<std::thread::id> used;
  // Enough work for every worker to take chunks: each item spins a little.
  runtime::parallel_for(4096, 1 << 20, [&](int64_t lo, int64_t hi) {
    volatile double acc = 0;
    for (int64_t i = lo; i < hi; ++i)
      for (int k = 0; k < 20000; ++k) acc = acc + 1e-9 * k;
    std::lock_guard lock(mu);
    used.insert(std::this_thread::get_id());
  });
  nx::Tensor big = nx::rand(nx::key(5), nx::float32, {3'000'000}) - 0.5;
  float s = nx::item<float>(nx::sum(big));
  uint32_t bits;
  std::memcpy(&bits, &s, 4);
  std::printf("threads=%d used=%zu sum=%08x\n", runtime::host_threads(), used.size(), bits);
  return 0;
}

int matmul() {
  nx::Tensor a = nx::create(nx::float32, {2, 3}, {1, 2, 3, 4, 5, 6});
  nx::print(nx::matmul(a, nx::transpose(a)));
  return 0;
}

int run(const char* mode) {
  if (std::strcmp(mode, "ops") == 0) return ops();
  if (std::strcmp(mode, "threads") == 0) return threads();
  if (std::strcmp(mode, "matmul") == 0) return matmul();
  std::fprintf(stderr, "usage: env_probe ops|threads|matmul\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return run("");
  try {
    return run(argv[1]);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "env_probe: invalid_argument: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "env_probe: exception: %s\n", e.what());
  }
  return 3;
}
