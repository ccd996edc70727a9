// A program for tests/test_kernel_tiers.cpp: runs a spread of kernels eagerly and compiled
// (transcendentals, casts, integer division, 16-bit floats, two-phase reductions, row kernels,
// products with epilogues, random draws, a training step) and prints one FNV-1a hash of each
// result's bytes, then compile_stats() as "compiled=N upgraded=M". With the argument "swap"
// (under RUNE_KERNEL_TIERS=1) it prints the hashes, waits for every kernel's full tier to be
// swapped in, and prints them again from the same programs. With "exit-from-thread" (under
// RUNE_KERNEL_TIERS=1) a thread other than the main one queues the first upgrades, and the
// process exits with status 3 if the upgrade thread is still running when exit handlers
// registered after that run.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "codegen/compile.h"
#include "core/io.h"
#include "trace/rune.h"

using nx::Tensor;

namespace {

uint64_t hash(const Tensor& t) {
  std::vector<uint8_t> bytes = nx::to_bytes(t);
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : bytes) h = (h ^ static_cast<unsigned char>(b)) * 1099511628211ull;
  return h;
}

struct Mlp {
  Tensor w1, b1, w2, b2;
};

}  // namespace

RUNE_TREE(Mlp, w1, b1, w2, b2)

namespace {

// The same results every run (fixed keys); `step` is the compiled training step.
std::vector<Tensor> results(const std::function<std::pair<Tensor, Mlp>(const Mlp&)>& step,
                            const Mlp& m) {
  auto k = nx::split(nx::key(3));
  Tensor x = nx::randn(k.first, nx::float32, {300, 257}) * 4.0;
  Tensor i = nx::cast(x * 1e9, nx::int32);  // saturating casts
  std::vector<Tensor> r = {
      x,
      nx::exp(x),
      nx::log(nx::abs(x)),
      nx::tanh(x),
      nx::sin(x * 100.0),
      nx::sqrt(nx::abs(x)),
      nx::sum(x, {0}),
      nx::sum(x, {1}),
      nx::mean(nx::reshape(x, {-1})),
      nx::max(x, {1}),
      nx::softmax(x, 1),
      nx::nn::layer_norm(x, nx::ones(nx::float32, {257}), nx::zeros(nx::float32, {257})),
      i,
      i / nx::scalar(nx::int32, 7),
      nx::cast(nx::cast(x, nx::float16) * 3.0, nx::float32),
      nx::cast(nx::cast(x, nx::bfloat16) + 1.0, nx::float32),
      nx::cast(x, nx::float64) / 3.0,
      nx::tanh(nx::matmul(x, nx::transpose(x)) + 1.0),
      nx::cumsum(x, 1),
      nx::rand(k.second, nx::float32, {1000}),
      nx::argmax(x, 1)};
  auto [loss, next] = step(m);
  r.push_back(loss);
  r.push_back(next.w1);
  r.push_back(next.b2);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "exit-from-thread") {
    // The first kernels (and their upgrades) come from another thread, as from CPU:1's stream
    // or a pool worker.
    std::thread([] {
      Tensor t = nx::tanh(nx::randn(nx::key(1), nx::float32, {64, 33}) * 3.0);
      std::printf("%016llx\n", static_cast<unsigned long long>(hash(t)));
    }).join();
    // Registered after the upgrades were queued, as LLVM registers the destructors of the static
    // objects it builds during a background compile: exit runs it before any handler registered
    // earlier, so the upgrade thread must be stopped by then (by the main thread's guard).
    std::atexit([] {
      if (!codegen::kernel_upgrades_stopped()) {
        std::fputs("the upgrade thread was still running at exit\n", stderr);
        _exit(3);
      }
    });
    auto s = codegen::compile_stats();
    std::printf("compiled=%zu upgraded=%zu\n", s.kernels_compiled, s.kernels_upgraded);
    return 0;
  }
  const bool swap = mode == "swap";
  auto k = nx::split(nx::key(5));
  Tensor x = nx::randn(k.first, nx::float32, {200, 2});
  Tensor y = nx::one_hot(nx::cast(nx::sum(x, {1}) > 0.0, nx::int32), 2);
  Mlp m{nx::randn(k.second, nx::float32, {2, 64}), nx::zeros(nx::float32, {64}),
        nx::randn(nx::key(6), nx::float32, {64, 2}) * 0.1, nx::zeros(nx::float32, {2})};
  auto loss_fn = [&](const Mlp& q) {
    Tensor logits = nx::matmul(nx::tanh(nx::matmul(x, q.w1) + q.b1), q.w2) + q.b2;
    return nx::mean(-nx::sum(y * nx::log_softmax(logits, 1), {1}));
  };
  auto step = rune::jit([&](const Mlp& q) {
    auto [l, g] = rune::value_and_grad(loss_fn, q);
    return std::make_pair(l, Mlp{q.w1 - g.w1, q.b1 - g.b1, q.w2 - g.w2, q.b2 - g.b2});
  });
  auto print = [&] {
    for (const Tensor& t : results(step, m))
      std::printf("%016llx\n", static_cast<unsigned long long>(hash(t)));
  };
  print();
  if (swap) {
    codegen::wait_for_kernel_upgrades();
    std::printf("--\n");
    print();
  }
  auto s = codegen::compile_stats();
  std::printf("compiled=%zu upgraded=%zu\n", s.kernels_compiled, s.kernels_upgraded);
}
