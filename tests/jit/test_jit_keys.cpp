// Retrace counts for every part of the key, and the RUNE_JIT_DEBUG line for each.
#include <gtest/gtest.h>

#include <cstdlib>

#include "trace/rune.h"

namespace {

using nx::Tensor;

// RUNE_JIT_DEBUG is read once, when the library first needs it: set before main, so the binary
// checks the lines when run alone as under ctest.
const bool jit_debug_set = setenv("RUNE_JIT_DEBUG", "1", 1) == 0;

struct Pair {
  Tensor w, b;
};

// Calls `call` with stderr captured and returns what it printed.
template <class F>
std::string stderr_of(F&& call) {
  testing::internal::CaptureStderr();
  call();
  return testing::internal::GetCapturedStderr();
}

TEST(JitKeys, NewElementValuesShareTheKey) {
  int traces = 0;
  auto f = rune::jit([&](const Tensor& x) {
    ++traces;
    return x + 1.0;
  });
  auto out = stderr_of([&] {
    f(nx::create(nx::float64, {3}, {1, 2, 3}));
    f(nx::create(nx::float64, {3}, {4, 5, 6}));
    f(nx::full(nx::float64, {3}, 7));
  });
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(out, "");
}

TEST(JitKeys, Shape) {
  int traces = 0;
  auto f = rune::jit([&](const Tensor& x) {
    ++traces;
    return x * 2.0;
  });
  f(nx::zeros(nx::float64, {3}));
  auto out = stderr_of([&] { f(nx::zeros(nx::float64, {5})); });
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(out, "rune.jit: retrace: 0: shape [5] here, shape [3] in the previous key\n");
}

TEST(JitKeys, Dtype) {
  int traces = 0;
  auto f = rune::jit([&](const Tensor& x) {
    ++traces;
    return x * 2.0;
  });
  f(nx::zeros(nx::float64, {3}));
  auto out = stderr_of([&] { f(nx::zeros(nx::float32, {3})); });
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(out, "rune.jit: retrace: 0: dtype float32 here, dtype float64 in the previous key\n");
}

TEST(JitKeys, StridesOfATransposedView) {
  int traces = 0;
  auto f = rune::jit([&](const Tensor& x) {
    ++traces;
    return x + 1.0;
  });
  auto a = nx::zeros(nx::float32, {2, 3});
  auto b = nx::transpose(nx::zeros(nx::float32, {3, 2}));
  f(a);
  auto out = stderr_of([&] { f(b); });
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(out, "rune.jit: retrace: 0: strides [1, 2] here, strides [3, 1] in the previous key\n");
  // The transposed program reads through the strides: values must match eager.
  auto c = nx::transpose(nx::create(nx::float32, {3, 2}, {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(nx::to_vector<float>(f(c)), nx::to_vector<float>(c + 1.0));
  EXPECT_EQ(traces, 2);
}

TEST(JitKeys, UnalignedOffset) {
  int traces = 0;
  auto f = rune::jit([&](const Tensor& x) {
    ++traces;
    return x + 1.0;
  });
  auto base = nx::create(nx::float32, {8}, {0, 1, 2, 3, 4, 5, 6, 7});
  f(nx::slice(base, {{0, 4}}));
  auto out = stderr_of([&] { f(nx::slice(base, {{1, 5}})); });
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(out,
            "rune.jit: retrace: 0: data offset 4 (mod 16 bytes) here, 0 in the previous key\n");
  // An offset of 16 bytes has the same key as offset 0: no retrace.
  EXPECT_EQ(nx::to_vector<float>(f(nx::slice(base, {{4, 8}}))), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(traces, 2);
}

TEST(JitKeys, ListLength) {
  int traces = 0;
  auto f = rune::jit([&](const std::vector<Tensor>& xs) {
    ++traces;
    Tensor s = nx::zeros(nx::float64, {});
    for (const auto& x : xs) s = s + x;
    return s;
  });
  auto one = nx::scalar(nx::float64, 1);
  f({one, one});
  auto out = stderr_of([&] { EXPECT_EQ(nx::item<double>(f({one, one, one})), 3.0); });
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(out, "rune.jit: retrace: 0: list length 3 here, list length 2 in the previous key\n");
}

TEST(JitKeys, OptionPresence) {
  int traces = 0;
  auto f = rune::jit([&](const Tensor& x, const std::optional<Tensor>& bias) {
    ++traces;
    return bias ? x + *bias : x * 1.0;
  });
  auto x = nx::ones(nx::float64, {2});
  f(x, std::nullopt);
  auto out = stderr_of([&] {
    EXPECT_EQ(nx::to_vector<double>(f(x, x)), (std::vector<double>{2, 2}));
  });
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(out, "rune.jit: retrace: 1: option present here, option absent in the previous key\n");
}

TEST(JitKeys, StaticInteger) {
  int traces = 0;
  auto f = rune::jit([&](const Tensor& x, int k) {
    ++traces;
    return x * static_cast<double>(k);
  });
  auto x = nx::ones(nx::float64, {2});
  f(x, 3);
  f(x, 3);
  auto out = stderr_of([&] {
    EXPECT_EQ(nx::to_vector<double>(f(x, 4)), (std::vector<double>{4, 4}));
  });
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(out, "rune.jit: retrace: 1: static 4 here, static 3 in the previous key\n");
}

}  // namespace

RUNE_TREE(Pair, w, b)

namespace {

TEST(JitKeys, StructFieldPaths) {
  int traces = 0;
  auto f = rune::jit([&](const Pair& p) {
    ++traces;
    return std::make_pair(p.w + p.b, Pair{p.w * 2.0, p.b});
  });
  auto r = f(Pair{nx::ones(nx::float64, {2}), nx::ones(nx::float64, {2})});
  EXPECT_EQ(nx::to_vector<double>(r.first), (std::vector<double>{2, 2}));
  EXPECT_EQ(nx::to_vector<double>(r.second.w), (std::vector<double>{2, 2}));
  auto out = stderr_of([&] { f(Pair{nx::ones(nx::float64, {2}), nx::ones(nx::float64, {1})}); });
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(out, "rune.jit: retrace: 0.b: shape [1] here, shape [2] in the previous key\n");
}

TEST(JitKeys, Placement) {
  int traces = 0;
  auto f = rune::jit([&](const Tensor& x) {
    ++traces;
    return x + 1.0;
  });
  f(nx::zeros(nx::float64, {2}));  // on the default device (RUNE_DEFAULT_DEVICE; the host)
  nx::Device here = nx::default_device();
  nx::Device other = nx::Device::parse(here.name() == "CPU:1" ? "CPU:2" : "CPU:1", "test");
  auto out = stderr_of([&] { nx::wait(f(nx::place(nx::zeros(nx::float64, {2}), other))); });
  EXPECT_EQ(traces, 2);
  EXPECT_EQ(out, "rune.jit: retrace: 0: placement " + other.name() + " here, placement " +
                     here.name() + " in the previous key\n");
}

TEST(JitKeys, DonationFatesAreReported) {
  auto f = rune::jit([](const Tensor& a, const Tensor& b) { return nx::sum(a) + b; });
  auto out = stderr_of(
      [&] { f(nx::donate(nx::ones(nx::float64, {3})), nx::donate(nx::ones(nx::float64, {}))); });
  EXPECT_EQ(out,
            "rune.jit: donation: 0: consumed and lent to no result\n"
            "rune.jit: donation: 1: reused by result 0\n");
}

TEST(JitKeys, EvictionIsReported) {
  int traces = 0;
  rune::JitOptions o;
  o.cache_size = 2;
  auto f = rune::jit(
      [&](const Tensor& x) {
        ++traces;
        return x + 1.0;
      },
      o);
  f(nx::zeros(nx::float64, {1}));
  f(nx::zeros(nx::float64, {2}));
  auto out = stderr_of([&] { f(nx::zeros(nx::float64, {3})); });
  EXPECT_NE(out.find("rune.jit: evicted the program for (float64 [1] on " +
                     nx::default_device().name() + ")"),
            std::string::npos)
      << out;
  EXPECT_EQ(f.cached_programs(), 2u);
  f(nx::zeros(nx::float64, {1}));  // evicted: traced again
  EXPECT_EQ(traces, 4);
}

}  // namespace
