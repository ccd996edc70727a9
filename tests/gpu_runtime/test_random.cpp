// Random numbers (docs/design-notes.md): a counter-based hash, splitmix64 of the key and the
// element's flat index, so a key gives fixed values, the same bits eagerly and compiled, and on
// every device: CPU, CPU:1 (asynchronous host) and CUDA:0 (the fake driver, fake_driver.h).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "fake_driver.h"
#include "ir/dtype.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;

// ctest runs this binary with RUNE_TEST_FAKE_CUDA=1: the hook (tests/fake_cuda_hook.cpp) has then
// installed the fake driver with a kernel cache its three processes share. Run alone, the
// binary installs it itself.
const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

// The reference, in plain uint64 arithmetic (core/creation.cpp computes it with int64 ops).
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t seed_key(uint64_t seed) { return mix64(seed ^ 0x5851F42D4C957F2Dull); }
// Stream 0: rand, 1 and 2: randn, 3: randint.
uint64_t random_bits(uint64_t key, uint64_t index, uint64_t stream) {
  return mix64((index + 1) * 0x9E3779B97F4A7C15ull + mix64(key + stream * 0x632BE59BD9B4E019ull));
}
double uniform64(uint64_t key, uint64_t index, uint64_t stream) {
  return static_cast<double>(random_bits(key, index, stream) >> 11) * 0x1p-53;
}

// The exact bits of any dtype's values, read as float64 (every dtype converts exactly).
using rt::bits;

TEST(Random, FixedValues) {
  // Literal values, so a change to the generator (or to the reference with it) shows here.
  auto r = nx::to_vector<double>(nx::rand(nx::key(2026), nx::float64, {4}));
  EXPECT_EQ(r, (std::vector<double>{0x1.794b92b43e690p-1, 0x1.adf5b1fc70860p-3,
                                    0x1.f55d6d1454978p-2, 0x1.ce745ecc68532p-1}));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::randint(nx::key(2026), -50, 50, {4})),
            (std::vector<int64_t>{-27, -2, -42, 24}));
}

TEST(Random, MatchesTheSplitmixReference) {
  const uint64_t k = seed_key(77);
  EXPECT_EQ(nx::key(77).value, k);
  const int64_t n = 3000;
  auto r64 = nx::to_vector<double>(nx::rand(nx::key(77), nx::float64, {3, 1000}));
  auto r32 = nx::to_vector<float>(nx::rand(nx::key(77), nx::float32, {n}));
  auto ri = nx::to_vector<int64_t>(nx::randint(nx::key(77), -3, 1000000007, {n}));
  for (int64_t i = 0; i < n; ++i) {
    double u = uniform64(k, i, 0);
    ASSERT_EQ(std::bit_cast<uint64_t>(r64[i]), std::bit_cast<uint64_t>(u))
        << "rand float64 at " << i;
    // float32: rounded to nearest, and kept below 1.
    float f = static_cast<float>(u);
    if (f >= 1.0f) f = 1.0f - 0x1p-24f;
    ASSERT_EQ(std::bit_cast<uint32_t>(r32[i]), std::bit_cast<uint32_t>(f))
        << "rand float32 at " << i;
    int64_t want = static_cast<int64_t>(std::floor(uniform64(k, i, 3) * 1000000010.0)) - 3;
    ASSERT_EQ(ri[i], want) << "randint at " << i;
  }
}

// Every generator, every float dtype: eagerly on the default device (ctest runs this binary with
// RUNE_DEFAULT_DEVICE unset, =CPU:1 and =CUDA:0) and compiled on each device, the host's bits.
TEST(Random, SameBitsEagerCompiledAndOnEveryDevice) {
  ASSERT_TRUE(installed);
  struct Gen {
    std::string name;
    std::function<Tensor(nx::Key)> make;
  };
  std::vector<Gen> gens;
  for (auto t : {nx::float32, nx::float64, nx::float16, nx::bfloat16}) {
    std::string dt(ir::name(t));
    gens.push_back({"rand " + dt, [t](nx::Key k) { return nx::rand(k, t, {7, 129}); }});
    gens.push_back({"randn " + dt, [t](nx::Key k) { return nx::randn(k, t, {7, 129}); }});
  }
  gens.push_back({"randint", [](nx::Key k) { return nx::randint(k, -1000, 1000, {7, 129}); }});
  const nx::Key key = nx::split(nx::key(9)).second;
  // A compiled program runs on its argument's device; the generator inside is traced into it.
  auto compiled_on = [key](const Gen& g, const std::string& dev) {
    auto f = rune::jit([&g, key](const Tensor&) { return g.make(key); });
    Tensor r = f(nx::place(nx::arange(1), dev));
    EXPECT_EQ(r.device().name(), dev);
    return bits(r);
  };
  for (const auto& g : gens) {
    SCOPED_TRACE(g.name);
    const auto want = compiled_on(g, "CPU");
    Tensor eager = g.make(key);
    EXPECT_EQ(eager.device(), nx::default_device());
    EXPECT_EQ(bits(eager), want) << "eager on " << eager.device().name();
    EXPECT_EQ(compiled_on(g, "CPU:1"), want) << "compiled on CPU:1";
    EXPECT_EQ(compiled_on(g, "CUDA:0"), want) << "compiled on CUDA:0";
  }
}

}  // namespace
