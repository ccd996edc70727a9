// rune::jit behaviour: reads of traced values, captures, nesting, failures, threads.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <thread>

#include "../test_util.h"
#include "tools/ulp-report/ulp_core.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;

TEST(Jit, ReadingATracedValueRaises) {
  auto f = rune::jit([](const Tensor& x) {
    if (nx::item<double>(nx::sum(x)) > 0) return x;
    return -x;
  });
  try {
    f(nx::ones(nx::float64, {3}));
    FAIL() << "no error";
  } catch (const rune::jit_error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("nx::item: cannot read traced value float64 []", 0), 0u) << m;
    EXPECT_NE(m.find("nx::where"), std::string::npos) << m;
  }
  auto g = rune::jit([](const Tensor& x) {
    (void)nx::to_vector<double>(x);
    return x;
  });
  EXPECT_THROW(g(nx::ones(nx::float64, {3})), rune::jit_error);
  auto h = rune::jit([](const Tensor& x) {
    nx::print(x);
    return x;
  });
  EXPECT_THROW(h(nx::ones(nx::float64, {3})), rune::jit_error);
}

TEST(Jit, CapturedTensorsAreConstants) {
  auto w = nx::create(nx::float32, {3}, {1, 2, 3});
  auto f = rune::jit([&](const Tensor& x) { return x * w; });
  EXPECT_EQ(nx::to_vector<float>(f(nx::full(nx::float32, {3}, 2))), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(nx::to_vector<float>(f(nx::full(nx::float32, {3}, 3))), (std::vector<float>{3, 6, 9}));
}

// Captures are found again by their TensorImpl's address; a concrete tensor that dies during
// the trace leaves its address to the next one allocated. A grad inside jit captures fresh
// copies of x and y per step, which die with grad's own trace: the 20-step SGD loop unrolled
// under jit read another step's constants at those addresses (other values each run, up to
// 1e27; before the fix this failed in about half of the traces).
TEST(Jit, ACaptureThatDiesLeavesNoStaleConstant) {
  Tensor x = nx::create(nx::float32, {4, 2}, {1, 0, 0, 1, 1, 1, 2, -1});
  Tensor y = nx::create(nx::float32, {4, 1}, {1, -1, 0.5, 2});
  auto sgd = [&](const Tensor& w) {
    Tensor c = w;
    for (int i = 0; i < 20; ++i) {
      auto loss = [&](const Tensor& p) { return nx::mean(nx::square(nx::matmul(x, p) - y)); };
      c = c - rune::grad(loss, c) * 0.1;
    }
    return c;
  };
  Tensor w0 = nx::zeros(nx::float32, {2, 1});
  const auto want = rt::bits(sgd(w0));
  for (int trace = 0; trace < 6; ++trace)  // each rune::jit traces anew
    EXPECT_EQ(rt::bits(rune::jit(sgd)(w0)), want) << "trace " << trace;
}

TEST(Jit, JitInsideJitIsInlined) {
  int inner_traces = 0, outer_traces = 0;
  auto inner = rune::jit([&](const Tensor& x) {
    ++inner_traces;
    return x + 1.0;
  });
  auto outer = rune::jit([&](const Tensor& x) {
    ++outer_traces;
    return inner(x) * 2.0;
  });
  EXPECT_EQ(nx::to_vector<double>(outer(nx::zeros(nx::float64, {2}))), (std::vector<double>{2, 2}));
  outer(nx::ones(nx::float64, {2}));
  EXPECT_EQ(outer_traces, 1);
  EXPECT_EQ(inner_traces, 1);  // traced once, as part of the outer trace
  EXPECT_EQ(inner.cached_programs(), 0u);
}

TEST(Jit, AFailedTraceInstallsNothing) {
  int calls = 0;
  auto f = rune::jit([&](const Tensor& x) {
    if (++calls == 1) throw std::runtime_error("first trace fails");
    return x + 1.0;
  });
  auto x = nx::zeros(nx::float64, {2});
  EXPECT_THROW(f(x), std::runtime_error);
  EXPECT_EQ(f.cached_programs(), 0u);
  EXPECT_EQ(nx::to_vector<double>(f(x)), (std::vector<double>{1, 1}));
  EXPECT_EQ(calls, 2);
}

TEST(Jit, ResultStructures) {
  auto f = rune::jit([](const Tensor& x) {
    return std::make_tuple(x + 1.0, std::vector<Tensor>{x, x * 2.0}, std::optional<Tensor>(x));
  });
  auto [a, v, o] = f(nx::ones(nx::float64, {2}));
  EXPECT_EQ(nx::to_vector<double>(a), (std::vector<double>{2, 2}));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(nx::to_vector<double>(v[1]), (std::vector<double>{2, 2}));
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(nx::to_vector<double>(*o), (std::vector<double>{1, 1}));
}

TEST(Jit, ArraysAndConstantsAsResults) {
  auto f = rune::jit([](const std::array<Tensor, 2>& xs) {
    return std::make_pair(xs[0] + xs[1], nx::scalar(nx::float32, 5));
  });
  auto r = f({nx::ones(nx::float32, {2}), nx::ones(nx::float32, {2})});
  EXPECT_EQ(nx::to_vector<float>(r.first), (std::vector<float>{2, 2}));
  EXPECT_EQ(nx::item<float>(r.second), 5.0f);
}

TEST(Jit, ConcurrentCallersOnMixedKeys) {
  std::atomic<int> traces{0};
  auto f = rune::jit([&](const Tensor& x) {
    ++traces;
    return nx::sum(x * 2.0 + 1.0);
  });
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        int64_t n = 1 + (t + i) % 4;  // four keys
        double got = nx::item<double>(f(nx::ones(nx::float64, {n})));
        if (got != 3.0 * static_cast<double>(n)) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(traces.load(), 4);  // one trace per key, whatever the interleaving
}

TEST(Jit, EagerAndCompiledAgreeBitForBit) {
  auto fn = [](const Tensor& x) {
    auto y = x * x * x - x * 3.0 + x / 7.0;
    return nx::sum(y, {1}) + nx::max(y, {1}) - nx::mean(y, {1});
  };
  auto x = nx::rand(nx::key(3), nx::float32, {37, 300});
  auto a = nx::to_vector<float>(fn(x));
  auto b = nx::to_vector<float>(rune::jit(fn)(x));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << i;
}

TEST(Jit, KeysSampleReportsItsRetrace) {
  if (rt::fake_cuda() && !rt::host_is_default())
    GTEST_SKIP() << "the keys sample runs in a child process, which has no fake CUDA driver "
                    "(tests/CMakeLists.txt runs it on the fake as fake_cuda.sample.keys)";
  std::string cmd = std::string("RUNE_JIT_DEBUG=1 ") + KEYS_SAMPLE + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(pclose(p), 0);
  EXPECT_NE(out.find("rune.jit: retrace: 0: shape [5] here, shape [3] in the previous key\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2 traces\n"), std::string::npos) << out;
}

}  // namespace

namespace {
// Compiled calls give eager's bits, and both are within the documented bound of the correctly
// rounded result (MPFR, through tools/ulp-report's core: under 1 ulp, docs/numerics.md).
TEST(Jit, MoreFunctionsAgreeWithEagerAndMeetTheirBound) {
  auto x = nx::rand(nx::key(11), nx::float64, {1000}) * 20.0 - 10.0;
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> arg;  // the operand the function sees
  };
  auto same = [](const Tensor& t) { return t; };
  std::vector<Case> cases = {
      {"atan", same},
      {"expm1", same},
      {"log1p", [](const Tensor& t) { return nx::abs(t); }},
      {"exp2", same},
      {"log2", [](const Tensor& t) { return nx::abs(t); }},
      {"sinh", same},
      {"cosh", same},
      {"asin", [](const Tensor& t) { return t * 0.1; }},
      {"acos", [](const Tensor& t) { return t * 0.1; }},
      {"erf", [](const Tensor& t) { return t * 0.3; }},
  };
  for (const auto& c : cases) {
    const ulp::Function& f = *ulp::find_function(c.name);
    Tensor in = c.arg(x);
    auto op = [&f](const Tensor& t) { return ulp::apply(f, t); };
    auto eager = nx::to_vector<double>(op(in));
    auto compiled = nx::to_vector<double>(rune::jit(op)(in));
    for (size_t i = 0; i < eager.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint64_t>(eager[i]), std::bit_cast<uint64_t>(compiled[i]))
          << c.name << " at element " << i;
    ulp::Inputs inputs;
    uint8_t region = inputs.region_id("rand");
    for (double v : nx::to_vector<double>(in)) inputs.push(v, region);
    const double bound = ulp::documented_bound(f, nx::float64);
    ulp::Stats s;
    ulp::measure(f, ulp::kFloat64, inputs, eager, bound, 1, s);
    EXPECT_EQ(s.over, 0) << c.name << ": max " << s.max << " ulp (bound " << bound << "), worst "
                         << ulp::describe(f, s.worst);
  }
  // softplus is its documented composition, max(x, 0) + log1p(e^-|x|), of ops held above.
  auto soft = nx::to_vector<double>(nx::softplus(x));
  auto soft_jit =
      nx::to_vector<double>(rune::jit([](const Tensor& t) { return nx::softplus(t); })(x));
  auto parts =
      nx::to_vector<double>(nx::maximum(x, nx::zeros_like(x)) + nx::log1p(nx::exp(-nx::abs(x))));
  for (size_t i = 0; i < soft.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint64_t>(soft[i]), std::bit_cast<uint64_t>(soft_jit[i]))
        << "softplus at " << i;
    ASSERT_EQ(std::bit_cast<uint64_t>(soft[i]), std::bit_cast<uint64_t>(parts[i]))
        << "softplus at " << i;
  }
}
}  // namespace
