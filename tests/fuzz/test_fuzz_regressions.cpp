// Regression tests: each failure the fuzzer (test_fuzz.cpp) found, as its shrunk reproducer
// (the seed that found it in the name's comment). Raw bits are compared, as the fuzzer does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "fuzz/executor.h"
#include "fuzz/generator.h"
#include "gpu_runtime/fake_driver.h"

namespace {

using fuzz::Bits;
using fuzz::read_bits;
using nx::Tensor;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

template <class T>
Tensor from(nx::DType t, const nx::Shape& s, const std::vector<T>& bits, const char* dev = "CPU") {
  Tensor h = nx::host_from_bytes(t, s, bits.data());
  return std::string(dev) == "CPU" ? h : nx::place(h, dev);
}

std::string dead_message(const Tensor& t) {
  try {
    nx::to_vector<double>(t);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<readable>";
}

// Seeds 28, 102, 182: nx::pad with value -0.0 padded with +0 (the pad value's sign was lost:
// a zero pad value takes the zero-padding path, and -0.0 == 0).
TEST(FuzzRegression, PadWithNegativeZeroKeepsItsSign) {
  for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
    SCOPED_TRACE(dev);
    Tensor x = from<uint16_t>(nx::float16, {1}, {0x3c00}, dev);  // 1.0
    Bits r = read_bits(nx::pad(x, {{1, 0}}, -0.0));
    ASSERT_EQ(r.size(), 2);
    EXPECT_EQ(r.at(0), 0x8000u) << "the pad element is not -0";
    EXPECT_EQ(r.at(1), 0x3c00u);
    Tensor y = from<uint32_t>(nx::float32, {2}, {0x40000000u, 0x40400000u}, dev);
    auto f = rune::jit([](const Tensor& a) { return nx::pad(a, {{0, 1}}, -0.0); });
    Bits c = read_bits(f(y));
    ASSERT_EQ(c.size(), 3);
    EXPECT_EQ(c.at(2), 0x80000000u);
  }
}

// Seeds 7, 8, 9, 16 (and most donating programs): rune::jit raised "nx::donate: the donated
// float64 [1] passed to rune::jit is a view that does not cover its storage" where an eager op
// accepts the same donation. docs/semantics.md §3: where the donor's memory cannot be reused, the
// consumer computes into fresh memory and the donor still dies.
TEST(FuzzRegression, JitTakesADonatedStridedView) {
  std::vector<uint64_t> a = {0x401bc1ae9406a0e8};
  std::vector<uint64_t> b = {0xc000000000000000, 0x4010000000000000, 0xbff0000000000000};
  auto f = rune::jit([](const Tensor& x, const Tensor& y) { return nx::sub(x, y); });
  for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
    SCOPED_TRACE(dev);
    Tensor x = from(nx::float64, {1}, a, dev);
    Tensor y = nx::slice(from(nx::float64, {3}, b, dev), {{1, 3, 2}});  // [4.0], a strided view
    Bits want = read_bits(nx::sub(x, y));
    Tensor r;
    ASSERT_NO_THROW(r = f(x, nx::donate(y)));
    EXPECT_EQ(read_bits(r), want);
    EXPECT_NE(dead_message(y).find("was donated to rune::jit"), std::string::npos)
        << dead_message(y);
  }
}

// The known donation bug (the lead engineer's fix in progress): a donated value whose storage
// another live value reaches (a view of it, the base it views) must not be written into.
TEST(FuzzRegression, DonatingAViewLeavesItsBaseIntact) {
  std::vector<uint32_t> bits = {0x3f800000u, 0x40000000u, 0xc0400000u, 0x80000000u};
  for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
    SCOPED_TRACE(dev);
    Tensor x = from(nx::float32, {4}, bits, dev);
    Bits before = read_bits(x);
    Tensor v = nx::reshape(x, {2, 2});  // shares x's storage
    Bits want = read_bits(nx::neg(nx::reshape(x, {2, 2})));
    Tensor r = nx::neg(nx::donate(v));
    EXPECT_EQ(read_bits(r), want);
    EXPECT_EQ(read_bits(x), before) << "the base was written through its donated view";
    EXPECT_NE(dead_message(v).find("was donated to nx::neg"), std::string::npos);
    // The other way round: the base donated while a view of it lives.
    Tensor y = from(nx::float32, {4}, bits, dev);
    Tensor w = nx::reshape(y, {2, 2});
    Bits wv = read_bits(w);
    Tensor s = nx::neg(nx::donate(y));
    EXPECT_EQ(read_bits(w), wv) << "a live view saw the donated base overwritten";
    EXPECT_EQ(read_bits(nx::reshape(s, {2, 2})), want);
  }
}

// The same through rune::jit: a donated argument whose storage another live value reaches.
TEST(FuzzRegression, JitDonationLeavesSharingValuesIntact) {
  std::vector<uint32_t> bits = {0x3f800000u, 0x40000000u, 0xc0400000u, 0x80000000u};
  auto f = rune::jit([](const Tensor& a) { return nx::neg(a); });
  for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
    SCOPED_TRACE(dev);
    Tensor y = from(nx::float32, {4}, bits, dev);
    Tensor w = nx::reshape(y, {2, 2});  // a live view of y
    Bits wv = read_bits(w);
    Bits want = read_bits(nx::neg(y));
    Tensor r;
    ASSERT_NO_THROW(r = f(nx::donate(y)));
    EXPECT_EQ(read_bits(r), want);
    EXPECT_EQ(read_bits(w), wv) << "a live view saw the donated argument overwritten";
    EXPECT_NE(dead_message(y).find("was donated to rune::jit"), std::string::npos);
  }
}

}  // namespace

namespace {

// Seed 5114: nx::prod(nx::donate(x), {}, true) on a 0-d x returns x itself (a reduction over
// no axes is the identity), which the op then kills as its donated operand: the caller gets a
// dead result ("nx::wait: float64 [] was donated to nx::prod"). Any op that returns its
// argument (a cast to the same dtype, a reshape to the same shape, ...) does the same.
TEST(FuzzRegression, AnIdentityOpOnADonatedValueReturnsALiveResult) {
  std::vector<uint64_t> bits = {0xc05b915a0e7bca0aull};
  for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
    SCOPED_TRACE(dev);
    Tensor x = from(nx::float64, {}, bits, dev);
    Tensor r = nx::prod(nx::donate(x), {}, true);
    Bits got;
    ASSERT_NO_THROW(got = read_bits(r)) << "the result is the dead donated operand";
    EXPECT_EQ(got.at(0), bits[0]);
    Tensor y = from(nx::float64, {}, bits, dev);
    Tensor c = nx::cast(nx::donate(y), nx::float64);
    ASSERT_NO_THROW(got = read_bits(c));
    EXPECT_EQ(got.at(0), bits[0]);
  }
}

}  // namespace

namespace {

std::string error_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Seeds 901..928 of the 10000-program run made program 928's eager run on CPU:1 raise a check
// failure ("fuzz check: false at [] ...", a 0-d check's message, while 928's check is 3-d and
// passes alone); a device-wide wait after each program makes it vanish, so work or a failure of
// an earlier program reaches a later one. Not reduced yet (docs/testing.md); this test pins the
// simplest form of that property: once a failure has been raised, later waits stay quiet.
TEST(FuzzRegression, AFailedCheckIsRaisedOnce) {
  auto fail = [](const std::vector<int64_t>&, const Tensor&) {
    return std::invalid_argument("fuzz check: false");
  };
  for (int compiled = 0; compiled < 2; ++compiled) {
    for (const char* dev : {"CPU:1", "CUDA:0"}) {
      SCOPED_TRACE(std::string(dev) + (compiled ? " compiled" : " eager"));
      std::vector<uint8_t> f = {0};
      Tensor ok = from(nx::bool_, {}, f, dev);
      auto run = [&](const Tensor& o) {
        nx::check(o, o, fail);
        return nx::logical_not(o);
      };
      auto jitted = rune::jit([&](const Tensor& o) { return run(o); });
      std::string first = error_text([&] {
        Tensor r = compiled ? jitted(ok) : run(ok);
        read_bits(r);
      });
      EXPECT_EQ(first, "fuzz check: false");
      // An unrelated value on the same device, after the failure was raised.
      std::vector<uint32_t> one = {0x3f800000u};
      std::string later = error_text([&] { read_bits(nx::neg(from(nx::float32, {1}, one, dev))); });
      EXPECT_EQ(later, "") << "a later wait raised the earlier failure again";
      EXPECT_EQ(error_text([&] { nx::wait(nx::Device::parse(dev, "test")); }), "");
    }
  }
}

}  // namespace

namespace {

// Seed 1263: with its bfloat16 argument donated, a compiled call whose results read that
// argument through a flip (at other elements' indices) returned other bits than eager
// (0 vs 1 at 12 of 28 elements of the broadcast result). docs/semantics.md §3: the result may take
// the donated memory only where it reads the donated value at each element's own index.
TEST(FuzzRegression, JitDonationWithAFlippedReaderKeepsEagerBits) {
  std::vector<uint16_t> bits = {0xffc0, 0x3f7f, 0x0, 0x3fa6, 0x3f80, 0x3f80, 0x41f3};
  std::vector<uint8_t> yes = {1};
  auto prog = [](const Tensor& x, const Tensor& c) {
    Tensor f = nx::flip(x, {1});
    Tensor s = nx::sqrt(f);
    nx::where(c, f, f);  // traced, not returned (as in the fuzz program)
    return std::make_pair(nx::broadcast_to(s, {2, 2, 7}), s);
  };
  auto jitted = rune::jit([&](const Tensor& x, const Tensor& c) { return prog(x, c); });
  for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
    SCOPED_TRACE(dev);
    auto want = prog(from(nx::bfloat16, {1, 7}, bits, dev), from(nx::bool_, {1, 1}, yes, dev));
    Tensor x = from(nx::bfloat16, {1, 7}, bits, dev);
    auto got = jitted(nx::donate(x), from(nx::bool_, {1, 1}, yes, dev));
    EXPECT_EQ(read_bits(got.first), read_bits(want.first));
    EXPECT_EQ(read_bits(got.second), read_bits(want.second));
  }
}

// Seed 1233: on CUDA:0 (an asynchronous device) a failed check reported the data at the failing
// index after a later op had taken the data's memory by donation: "data int64 [] 16" (the
// product written into it) instead of -4. The check still reads the data, so the later op must
// not write into it (docs/semantics.md §3, §4).
TEST(FuzzRegression, ACheckSeesItsDataAsItWasWhenADonationFollows) {
  std::vector<uint64_t> bits = {0xfffffffffffffffcull};  // -4
  std::vector<uint8_t> no = {0};
  for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
    SCOPED_TRACE(dev);
    std::string msg = error_text([&] {
      Tensor x = from(nx::int64, {1}, bits, dev);
      Tensor c = from(nx::bool_, {1}, no, dev);
      nx::check(nx::less(x, x), x, [](const std::vector<int64_t>&, const Tensor& d) {
        return std::invalid_argument("data " + nx::to_string(d));
      });
      Tensor w = nx::where(c, x, x);
      Tensor m = nx::mul(w, nx::donate(x));
      read_bits(w);
      read_bits(m);
    });
    EXPECT_EQ(msg, "data int64 [] -4");
  }
}

// Seeds 4935 + 4936 (and 923 + 928 of an earlier run): on CPU:1 a check failed, an alias of its
// argument was donated, and a later op read the dead alias. That op raised the donation error
// at dispatch without waiting, so the check's failure stayed recorded and the next program's
// first read raised it. Now an op's dispatch error comes after the earlier failure (program
// order, core/earlier_failure.h), and nothing is left for an unrelated later read.
TEST(FuzzRegression, ACheckFailureIsNotLeftForTheNextProgram) {
  for (const char* dev : {"CPU:1", "CUDA:0"}) {
    Tensor x = from<uint8_t>(nx::bool_, {2}, {1, 0}, dev);
    Tensor alias = x;
    auto program = [&] {
      nx::check(alias, x, [](const std::vector<int64_t>& i, const Tensor&) {
        return std::invalid_argument("fuzz check: false at " + std::to_string(i[0]));
      });
      Tensor m = nx::max(nx::donate(alias), {0}, false);
      (void)nx::logical_not(x);  // x is dead: consumed through its alias
    };
    EXPECT_EQ(rt::message_of(program), "fuzz check: false at 1") << dev;
    // The next program on the device: its reads raise nothing of the first one's.
    Tensor y = from<uint8_t>(nx::bool_, {1}, {1}, dev);
    EXPECT_NO_THROW(read_bits(nx::logical_not(y))) << dev;
  }
}

}  // namespace

namespace {

// The generator ends for every seed a long run uses: shape() shrank only the last extent of a
// shape over 2048 elements, so a shape whose last extent was 1 (as [65, 33, 1]) looped forever
// (found when the 10^4-program run stalled in its first chunk, seeds 6001..6500). Before the
// fix this test hangs (ctest's timeout fails it).
TEST(FuzzRegression, TheGeneratorEndsOnEverySeed) {
  size_t steps = 0;
  for (uint64_t seed = 1; seed <= 20000; ++seed) steps += fuzz::generate(seed).steps.size();
  EXPECT_GT(steps, 20000u);
}

}  // namespace

namespace {

// Seed 80648 (issue 37): the sum over axis 2 of a strided [2, 5, 1] view (steps {2, 2, 2} of a
// [5, 11, 3] buffer), reshaped to [10]: eagerly its values, under rune::jit "std::logic_error:
// schedule: reduction view reshape failed" (the reduction fused through the reshape reads its
// input over [10] ++ [1], which no strided view of that input expresses). Now the reduction is a
// kernel of its own there
// (ScheduleFusion.AReductionThroughAReshapeOfAStridedInputIsAKernelOfItsOwn).
TEST(FuzzRegression, AReductionThroughAReshapeOfAStridedViewCompiles) {
  std::vector<uint64_t> bits(5 * 11 * 3);
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = i % 7 == 0 ? 0x8000000000000000ull : i * 0x9e3779b97f4a7c15ull;
  auto program = [](const Tensor& x) { return nx::reshape(nx::sum(x, {2}, false), {10}); };
  auto f = rune::jit(program);
  for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
    SCOPED_TRACE(dev);
    Tensor x =
        nx::slice(from(nx::int64, {5, 11, 3}, bits, dev), {{1, 5, 2}, {1, 11, 2}, {1, 3, 2}});
    Bits want = read_bits(program(x));
    Bits got;
    ASSERT_NO_THROW(got = read_bits(f(x)));
    EXPECT_EQ(got, want);
  }
}

}  // namespace

namespace {

// Seeds 14, 24, 32 of the first run with the newer ops (issue 37): an optimizer's init inside
// rune::jit raised "nx::place: cannot move traced value int64 [] while tracing" (its step
// count, a traced constant, placed on the parameters' device: its own). Placing a traced value
// on its own device is the identity.
TEST(FuzzRegression, AnOptimizerStepFromItsInitCompiles) {
  std::vector<uint32_t> p = {0x3f800000u, 0xc0000000u, 0x80000000u};
  std::vector<uint32_t> g = {0x3e800000u, 0x7fc00000u, 0x00000001u};
  auto step = [](const Tensor& params, const Tensor& grads) {
    auto opt = rune::optim::adamw(rune::optim::constant(0.25));
    auto state = opt.init(params);
    auto [q, next] = opt.update(params, grads, state);
    return opt.update(q, grads, next).first;
  };
  auto f = rune::jit(step);
  for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
    SCOPED_TRACE(dev);
    Tensor x = from(nx::float32, {3}, p, dev), y = from(nx::float32, {3}, g, dev);
    Bits want = read_bits(step(x, y));
    Bits got;
    ASSERT_NO_THROW(got = read_bits(f(x, y)));
    EXPECT_EQ(got, want);
  }
}

}  // namespace
