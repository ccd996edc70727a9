// Donation (docs/semantics.md §3), checks (§4) and asynchronous devices (§6), on the synchronous
// host (CPU) and on the asynchronous host device (CPU:1).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <thread>

#include "test_util.h"
#include "trace/rune.h"

namespace {

using rt::message_of;

using nx::Tensor;

class OnDevice : public testing::TestWithParam<const char*> {
 protected:
  nx::Device dev() const { return nx::Device::parse(GetParam(), "test"); }
  Tensor make(const nx::Shape& s, const std::vector<double>& v) {
    return nx::place(nx::create(nx::float64, s, v), dev());
  }
};

TEST_P(OnDevice, DonatedValueDiesAndNamesItsConsumer) {
  auto decay = rune::jit([](const Tensor& w) { return w * 0.5; });
  auto w = make({3}, {2, 4, 6});
  auto kept = decay(w);
  auto w2 = decay(nx::donate(w));
  EXPECT_EQ(nx::to_array(w2), nx::to_array(kept));
  EXPECT_EQ(message_of([&] { nx::to_array(w); }),
            "nx::to_array: float64 [3] was donated to rune::jit");
  EXPECT_EQ(message_of([&] { nx::to_vector<double>(w); }),
            "nx::to_vector: float64 [3] was donated to rune::jit");
  EXPECT_EQ(w.describe(), "float64 [3]");  // dtype and shape stay readable
  EXPECT_EQ(message_of([&] { nx::to_string(w); }),
            "nx::to_string: float64 [3] was donated to rune::jit");
  EXPECT_EQ(message_of([&] { w + 1.0; }), "nx::add: float64 [3] was donated to rune::jit");
}

TEST_P(OnDevice, CompiledCallWritesIntoDonatedMemory) {
  auto decay = rune::jit([](const Tensor& w) { return w * 0.5 + 1.0; });
  auto w = make({1000}, std::vector<double>(1000, 4.0));
  void* storage = w.impl().buffer->data;
  auto r = decay(nx::donate(w));
  EXPECT_EQ(r.impl().buffer->data, storage);
  EXPECT_EQ(nx::to_vector<double>(r), std::vector<double>(1000, 3.0));
  // Reading other elements (a flip) must not write in place ...
  auto flipped = rune::jit([](const Tensor& w) { return nx::flip(w) + 1.0; });
  auto v = make({4}, {1, 2, 3, 4});
  void* vs = v.impl().buffer->data;
  auto t = flipped(nx::donate(v));
  EXPECT_NE(t.impl().buffer->data, vs);
  EXPECT_EQ(nx::to_vector<double>(t), (std::vector<double>{5, 4, 3, 2}));
  // ... nor may a result take memory that a later kernel still reads ...
  auto both = rune::jit([](const Tensor& w) { return std::make_pair(w * 2.0, nx::sum(w)); });
  auto u = make({4}, {1, 2, 3, 4});
  void* us = u.impl().buffer->data;
  auto [twice, total] = both(nx::donate(u));
  EXPECT_NE(twice.impl().buffer->data, us);
  EXPECT_EQ(nx::item<double>(total), 10.0);
  // ... but a reduction that ran before the writing kernel is fine.
  auto centred = rune::jit([](const Tensor& w) { return w - nx::sum(w); });
  auto c = make({4}, {1, 2, 3, 4});
  void* cs = c.impl().buffer->data;
  auto r2 = centred(nx::donate(c));
  EXPECT_EQ(r2.impl().buffer->data, cs);
  EXPECT_EQ(nx::to_vector<double>(r2), (std::vector<double>{-9, -8, -7, -6}));
}

TEST_P(OnDevice, EagerOpsConsumeDonations) {
  auto x = make({2}, {1, 2});
  void* xs = x.impl().buffer->data;
  auto y = nx::exp(nx::donate(x));
  EXPECT_EQ(y.impl().buffer->data, xs);  // written into the donated memory
  EXPECT_EQ(nx::to_vector<double>(y), nx::to_vector<double>(nx::exp(make({2}, {1, 2}))));
  auto z = nx::sigmoid(nx::donate(y));  // a composite op: computes into fresh memory
  EXPECT_NE(z.impl().buffer->data, xs);
  EXPECT_EQ(message_of([&] { nx::item<double>(nx::sum(x)); }),
            "nx::sum: float64 [2] was donated to nx::exp");
  auto a = make({2}, {1, 2});
  EXPECT_EQ(message_of([&] { nx::add(nx::donate(a), a); }),
            "nx::donate: nx::add reads one donation twice");
  // A failing op consumes nothing.
  auto b = make({2}, {1, 2});
  EXPECT_NE(message_of([&] {
              nx::add(nx::donate(b), make({3}, {1, 2, 3}));
            }).find("nx::add: cannot broadcast"),
            std::string::npos);
  EXPECT_EQ(nx::to_vector<double>(b), (std::vector<double>{1, 2}));
}

// Donated storage that another value reaches is never written into (test_donation_sharing.cpp
// has every case): the call computes into fresh memory and the donor still dies.
TEST_P(OnDevice, DonatingSharedStorageComputesIntoFreshMemory) {
  auto f = rune::jit([](const Tensor& a, const Tensor& b) { return a + b; });
  auto base = make({4}, {1, 2, 3, 4});
  auto part = nx::slice(base, {{0, 2}});
  EXPECT_EQ(nx::to_vector<double>(f(nx::donate(part), part * 1.0)), (std::vector<double>{2, 4}));
  EXPECT_EQ(message_of([&] { nx::to_vector<double>(part); }),
            "nx::to_vector: float64 [2] was donated to rune::jit");
  EXPECT_EQ(nx::to_vector<double>(base), (std::vector<double>{1, 2, 3, 4}));
  auto whole = make({2}, {1, 2});
  auto alias = nx::reshape(whole, {1, 2});  // another value over the same storage
  EXPECT_EQ(nx::to_vector<double>(f(nx::donate(whole), alias)), (std::vector<double>{2, 4}));
  EXPECT_EQ(nx::to_vector<double>(alias), (std::vector<double>{1, 2}));
}

TEST_P(OnDevice, ConcurrentDonorsExactlyOneWins) {
  auto decay = rune::jit([](const Tensor& w) { return w * 0.5; });
  for (int round = 0; round < 20; ++round) {
    auto w = make({64}, std::vector<double>(64, 2.0));
    auto d = nx::donate(w);
    std::atomic<int> wins{0}, losses{0};
    auto body = [&] {
      try {
        nx::wait(decay(d));
        ++wins;
      } catch (const std::invalid_argument& e) {
        if (std::string(e.what()).find("was donated to rune::jit") != std::string::npos) ++losses;
      }
    };
    std::thread t1(body), t2(body);
    t1.join();
    t2.join();
    EXPECT_EQ(wins.load(), 1);
    EXPECT_EQ(losses.load(), 1);
  }
}

TEST_P(OnDevice, CheckRaisesTheFirstFailingIndexWithItsData) {
  auto fail = [](const std::vector<int64_t>& i, const Tensor& v) {
    return std::runtime_error("bad at (" + std::to_string(i[0]) + ", " + std::to_string(i[1]) +
                              "): " + nx::to_string(v));
  };
  auto x = make({2, 3}, {1, 2, 3, 4, -5, -6});
  auto run = [&] {
    nx::check(nx::greater(x, nx::scalar_like(x, 0)), x, fail);
    nx::wait(dev());
  };
  EXPECT_EQ(message_of(run), "bad at (1, 1): float64 [] -5");
  auto f = rune::jit([&](const Tensor& t) {
    nx::check(nx::greater(t, nx::scalar_like(t, 0)), t, fail);
    return nx::log(t);
  });
  EXPECT_EQ(message_of([&] { nx::wait(f(x)); }), "bad at (1, 1): float64 [] -5");
  // An empty ok never raises; a passing check returns the results.
  nx::check(nx::greater(make({0, 2}, {}), make({}, {0})), make({0, 2}, {}), fail);
  EXPECT_EQ(nx::to_vector<double>(f(make({2, 1}, {1, 1}))), (std::vector<double>{0, 0}));
}

// Errors in program order (core/earlier_failure.h): after a check failed on an asynchronous
// device, a later op that raises at dispatch (bad shapes, a dead operand, one donation read
// twice) raises the check's failure, as the host raised it at the check itself; that wait
// clears it, so the op then raises its own error, and its operands are as they were.
TEST_P(OnDevice, AnEarlierFailedCheckRaisesBeforeALaterOpsError) {
  Tensor x = make({2}, {1, 2});
  auto check = [&] {
    nx::check(nx::less(x, nx::scalar_like(x, 0)), x,
              [](const std::vector<int64_t>& i, const Tensor&) {
                return std::domain_error("negative expected at " + std::to_string(i[0]));
              });
  };
  Tensor y = make({3}, {1, 2, 3});
  Tensor dead = make({2}, {5, 6});
  Tensor consumer = nx::neg(nx::donate(dead));
  Tensor twice = nx::donate(make({2}, {7, 8}));
  const std::vector<std::pair<std::function<void()>, std::string>> later = {
      {[&] { (void)(x + y); }, "nx::add: cannot broadcast float64 [2] with float64 [3]"},
      {[&] { (void)nx::neg(dead); }, "nx::neg: float64 [2] was donated to nx::neg"},
      {[&] { (void)(twice * twice); }, "nx::donate: nx::mul reads one donation twice"}};
  for (const auto& [op, own] : later) {
    EXPECT_EQ(message_of([&] {
                check();
                op();
              }),
              "negative expected at 0")
        << own;
    EXPECT_EQ(message_of(op), own);
    EXPECT_NO_THROW(nx::wait(dev()));
    EXPECT_EQ(nx::to_vector<double>(x), (std::vector<double>{1, 2}));
  }
  EXPECT_EQ(nx::to_vector<double>(twice), (std::vector<double>{7, 8}));  // still donated, alive
}

INSTANTIATE_TEST_SUITE_P(Devices, OnDevice, testing::Values("CPU", "CPU:1"), [](const auto& info) {
  return std::string(info.param[3] == ':' ? "async" : "host");
});

TEST(Async, FailingCheckInALoopRaisesAtTheFirstWaitAndPoisons) {
  nx::Device dev = nx::Device::parse("CPU:1", "test");
  auto step = rune::jit([](const Tensor& x) {
    nx::check(nx::less(x, nx::scalar_like(x, 5)), x,
              [](const std::vector<int64_t>& i, const Tensor&) {
                return std::out_of_range("too big at " + std::to_string(i[0]));
              });
    return x + 1.0;
  });
  auto x = nx::place(nx::create(nx::float64, {3}, {0, 2, 1}), dev);
  std::vector<Tensor> history;
  for (int i = 0; i < 6; ++i) {  // x[1] reaches 5 on the fourth step: queued calls return
    x = step(x);
    history.push_back(x);
  }
  EXPECT_EQ(message_of([&] { nx::wait(dev); }), "too big at 1");  // raised at the first wait
  EXPECT_NO_THROW(nx::wait(dev));                                 // ... and only once
  // The failing call's results and everything computed from them are poisoned.
  EXPECT_EQ(message_of([&] { nx::to_vector<double>(history[3]); }), "too big at 1");
  EXPECT_EQ(message_of([&] { nx::to_vector<double>(history[5]); }), "too big at 1");
  EXPECT_EQ(message_of([&] { nx::to_vector<double>(history[5] * 2.0); }), "too big at 1");
  EXPECT_EQ(nx::to_vector<double>(history[2]), (std::vector<double>{3, 5, 4}));
}

TEST(Async, EventsMarkQueuedWork) {
  nx::Device dev = nx::Device::parse("CPU:2", "test");
  runtime::Stream* s = runtime::stream_for(dev);
  std::atomic<bool> release{false}, ran{false};
  s->enqueue([&] {
    while (!release) std::this_thread::yield();
    ran = true;
  });
  runtime::Event e;
  e.record(s);
  EXPECT_FALSE(e.done());
  release = true;
  e.wait();
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(e.done());
  runtime::Event host;
  host.record(runtime::stream_for(nx::Device::cpu()));  // the synchronous host: done at once
  EXPECT_TRUE(host.done());
}

TEST(Async, ReadingAConcreteValueWhileTracingStillWaits) {
  nx::Device dev = nx::Device::parse("CPU:1", "test");
  auto big = nx::place(nx::rand(nx::key(2), nx::float64, {1 << 20}), dev);
  Tensor total = nx::sum(big * 2.0);  // queued on CPU:1
  auto f = rune::jit([&](const Tensor& x) { return x * nx::item<double>(total); });
  double expected = nx::item<double>(nx::sum(nx::place(big, "CPU") * 2.0));
  EXPECT_EQ(nx::item<double>(f(nx::scalar(nx::float64, 1))), expected);
}

TEST(Async, WorkIsQueuedAndReadsWait) {
  nx::Device dev = nx::Device::parse("CPU:1", "test");
  auto x = nx::place(nx::rand(nx::key(1), nx::float32, {1 << 20}), dev);
  Tensor y = x;
  for (int i = 0; i < 20; ++i) y = y * 0.5 + 1.0;
  EXPECT_EQ(y.device().name(), "CPU:1");
  auto host = nx::place(y, "CPU");
  EXPECT_EQ(host.device().name(), "CPU");
  EXPECT_NEAR(nx::item<float>(nx::mean(host)), 2.0f, 1e-3);
  EXPECT_EQ(message_of([&] {
              x + nx::place(nx::ones(nx::float32, {1 << 20}), "CPU");
            }).rfind("nx::add: operands on two devices, CPU:1", 0),
            0u);
  // Without a CUDA device, moving there names the entry point and the device.
  std::string e = message_of([&] { nx::place(x, "CUDA:0"); });
  EXPECT_TRUE(e == "no error" || e.rfind("nx::place: device CUDA:0 is unavailable: ", 0) == 0) << e;
}

TEST(Donation, ExplicitSignatureConsumesEveryCall) {
  auto step = rune::jit(rune::Signature().consume(0).static_int(1),
                        [](const Tensor& w, int k) { return w * static_cast<double>(k); });
  auto w = nx::create(nx::float64, {2}, {1, 2});
  auto r = step(w, 3);
  EXPECT_EQ(nx::to_vector<double>(r), (std::vector<double>{3, 6}));
  EXPECT_EQ(message_of([&] { nx::to_vector<double>(w); }),
            "nx::to_vector: float64 [2] was donated to rune::jit");
  EXPECT_EQ(message_of([&] {
              rune::jit(rune::Signature().static_int(0), [](const Tensor& t) { return t; });
            }),
            "rune::jit: argument 0 is declared static but is not an integer");
  EXPECT_EQ(message_of([&] {
              rune::jit(rune::Signature().consume(2), [](const Tensor& t) { return t; });
            }),
            "rune::jit: consumed argument 2 out of range for 1 arguments");
}

TEST(Donation, LoopHoldsOneGenerationOf64MiB) {
  auto decay = rune::jit([](const Tensor& w) { return w * 0.5 + 0.25; });
  auto w = nx::contiguous(nx::full(nx::float32, {16 << 20}, 1.0));  // 64 MiB
  // The allocator of the device w lives on (the default device).
  auto& alloc = runtime::device_allocator(w.device());
  alloc.reset_peak();
  size_t before = alloc.stats().in_use;
  // 100 steps move 6.4 GB; a step that kept its input alive would already need 100 generations.
  for (int i = 0; i < 100; ++i) w = decay(nx::donate(w));
  size_t peak = alloc.stats().peak - before;
  EXPECT_LE(peak, size_t(2) << 26) << "peak " << peak;  // within two generations
  EXPECT_NEAR(nx::item<float>(nx::max(w)), 0.5f, 1e-6);
}

}  // namespace
