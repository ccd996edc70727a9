// A child process for tests/runtime/test_env.cpp: each mode reads the environment the way a user
// program does (once, at first use) and prints what the test checks.
//   env_probe ops      a few eager ops and a compiled call (results, then "compiled=N disk=M")
//   env_probe threads  "threads=N used=U sum=<hex bits>": the host pool's size, the distinct
//                      threads a large parallel_for ran on, and a large sum's bits
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
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

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "ops") == 0) return ops();
  if (argc == 2 && std::strcmp(argv[1], "threads") == 0) return threads();
  std::fprintf(stderr, "usage: env_probe ops|threads\n");
  return 2;
}
