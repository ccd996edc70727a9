// Differential fuzzer: random programs of 1-30 ops over random shapes and dtypes must give the
// same bits eagerly and compiled. RUNE_FUZZ_COUNT sets the number of programs (default 200),
// RUNE_FUZZ_SEED the first seed.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <random>

#include "trace/rune.h"

namespace {

using nx::Tensor;

struct Instr {
  int op, a, b, c, axis;
};

struct Program {
  nx::DType dtype;
  nx::Shape shape;
  int n_inputs;
  std::vector<Instr> code;
  int extra_output;
};

constexpr int kOps = 19;

Program random_program(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  static const std::vector<nx::Shape> shapes = {{7}, {3, 5}, {4, 1, 6}, {2, 3, 4}, {1}, {65}};
  Program p;
  p.dtype = pick(2) ? nx::float32 : nx::float64;
  p.shape = shapes[pick(static_cast<int>(shapes.size()))];
  p.n_inputs = 1 + pick(3);
  int n = 1 + pick(30);
  int pool = p.n_inputs;
  for (int i = 0; i < n; ++i) {
    p.code.push_back(
        {pick(kOps), pick(pool), pick(pool), pick(pool), pick(static_cast<int>(p.shape.size()))});
    ++pool;
  }
  p.extra_output = pick(pool);
  return p;
}

// Runs the program on `inputs` with whatever interpreter is current (eager or a tracer).
std::vector<Tensor> run(const Program& p, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> v = inputs;
  for (const auto& in : p.code) {
    const Tensor &a = v[in.a], &b = v[in.b], &c = v[in.c];
    Tensor r;
    switch (in.op) {
      case 0:
        r = a + b;
        break;
      case 1:
        r = a - b;
        break;
      case 2:
        r = a * b;
        break;
      case 3:
        r = a / b;
        break;
      case 4:
        r = nx::maximum(a, b);
        break;
      case 5:
        r = nx::minimum(a, b);
        break;
      case 6:
        r = -a;
        break;
      case 7:
        r = nx::abs(a);
        break;
      case 8:
        r = nx::sqrt(nx::abs(a));
        break;
      case 9:
        r = nx::where(a < b, a, c);
        break;
      case 10:
        r = nx::sum(a, {in.axis}, true);
        break;
      case 11:
        r = nx::max(a, {in.axis}, true);
        break;
      case 12:
        r = nx::flip(nx::broadcast_to(a, p.shape), {in.axis});
        break;
      case 13:
        r = nx::cast(nx::cast(a, p.dtype == nx::float32 ? nx::float64 : nx::float32), p.dtype);
        break;
      case 14:
        r = a * 0.75 + 2.5;
        break;
      case 15:
        r = nx::mean(a, {in.axis}, true) - a;
        break;
      case 16:
        r = nx::exp(nx::minimum(a, nx::scalar_like(a, 30)));
        break;
      case 17:
        r = nx::tanh(a) * nx::log(nx::abs(b) + 1.0);
        break;
      case 18:
        r = nx::sin(a) + nx::cos(b);
        break;
    }
    v.push_back(r);
  }
  return {v.back(), v[p.extra_output]};
}

bool same_bits(const Tensor& x, const Tensor& y) {
  auto a = nx::to_vector<double>(x), b = nx::to_vector<double>(y);
  if (a.size() != b.size() || x.shape() != y.shape()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::bit_cast<uint64_t>(a[i]) != std::bit_cast<uint64_t>(b[i])) return false;
  }
  return true;
}

TEST(JitFuzz, EagerAndCompiledGiveTheSameBits) {
  int count = std::getenv("RUNE_FUZZ_COUNT") ? std::atoi(std::getenv("RUNE_FUZZ_COUNT")) : 200;
  uint64_t seed0 =
      std::getenv("RUNE_FUZZ_SEED") ? std::strtoull(std::getenv("RUNE_FUZZ_SEED"), nullptr, 10) : 1;
  for (int k = 0; k < count; ++k) {
    uint64_t seed = seed0 + static_cast<uint64_t>(k);
    Program p = random_program(seed);
    std::vector<Tensor> inputs;
    for (int i = 0; i < p.n_inputs; ++i)
      inputs.push_back(nx::randn(nx::key(seed * 10 + i), p.dtype, p.shape) * 3.0);
    auto eager = run(p, inputs);
    auto compiled = rune::jit([&](const std::vector<Tensor>& xs) { return run(p, xs); })(inputs);
    for (int o = 0; o < 2; ++o)
      ASSERT_TRUE(same_bits(eager[o], compiled[o]))
          << "seed " << seed << " output " << o << " (" << p.code.size()
          << " ops)\neager:    " << nx::to_string(eager[o])
          << "\ncompiled: " << nx::to_string(compiled[o]);
  }
}

}  // namespace
