// Donation never overwrites a live value (docs/semantics.md §3): a consumer writes into donated
// storage only when nothing else alive can observe it. Each case runs eagerly and compiled, on
// the synchronous host (CPU), the asynchronous host device (CPU:1) and CUDA:0 where one is
// installed (the fake driver in the fake_cuda.* reruns).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <thread>

#include "test_util.h"
#include "trace/rune.h"

namespace {

using rt::message_of;

// The donation-fate lines are part of what these tests check: on before the library reads it.
__attribute__((constructor)) void enable_jit_debug() { setenv("RUNE_JIT_DEBUG", "1", 0); }

using nx::Tensor;

// The donation-fate lines (RUNE_JIT_DEBUG) that `call` printed; retrace lines are left out.
template <class F>
std::string stderr_of(F&& call) {
  testing::internal::CaptureStderr();
  call();
  std::string all = testing::internal::GetCapturedStderr(), fates;
  for (size_t p = 0; p < all.size();) {
    size_t e = all.find('\n', p);
    e = e == std::string::npos ? all.size() : e + 1;
    std::string line = all.substr(p, e - p);
    if (line.rfind("rune.jit: donation: ", 0) == 0) fates += line;
    p = e;
  }
  return fates;
}

std::vector<double> values(const Tensor& t) { return nx::to_vector<double>(t); }

// A view of w taken before the donation, with the values it must keep.
struct ViewCase {
  const char* name;
  std::function<Tensor(const Tensor&)> view;
  std::vector<double> expected;  // of a view of {1..6} as [2, 3]
};
const std::vector<ViewCase>& view_cases() {
  static const std::vector<ViewCase> cases = {
      {"reshape",
       [](const Tensor& w) {
         return nx::reshape(w, {3, 2});
       },
       {1, 2, 3, 4, 5, 6}},
      {"slice",
       [](const Tensor& w) {
         return nx::slice(w, {{0, 2}, {1, 3}});
       },
       {2, 3, 5, 6}},
      {"flip", [](const Tensor& w) { return nx::flip(w, {1}); }, {3, 2, 1, 6, 5, 4}},
      {"transpose", [](const Tensor& w) { return nx::transpose(w); }, {1, 4, 2, 5, 3, 6}},
      {"broadcast_to",
       [](const Tensor& w) {
         return nx::broadcast_to(nx::reshape(w, {1, 2, 3}), {2, 2, 3});
       },
       {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}},
  };
  return cases;
}

class Sharing : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()).rfind("CUDA", 0) == 0 &&
        message_of([&] { runtime::stream_for(dev(), "test"); }) != "no error")
      GTEST_SKIP() << "no CUDA:0 here (the fake_cuda.* rerun installs one)";
  }
  nx::Device dev() const { return nx::Device::parse(GetParam(), "test"); }
  Tensor make(const nx::Shape& s, const std::vector<double>& v) {
    return nx::place(nx::create(nx::float64, s, v), dev());
  }
  Tensor w23() { return make({2, 3}, {1, 2, 3, 4, 5, 6}); }
  static bool same_storage(const Tensor& a, const Tensor& b) {
    return a.impl().buffer == b.impl().buffer;
  }
};

TEST_P(Sharing, EagerConsumerLeavesViewsTakenBeforeTheDonation) {
  for (const auto& c : view_cases()) {
    SCOPED_TRACE(c.name);
    Tensor w = w23();
    Tensor v = c.view(w);
    Tensor r = nx::neg(nx::donate(w));
    EXPECT_FALSE(same_storage(r, v));
    EXPECT_EQ(values(r), (std::vector<double>{-1, -2, -3, -4, -5, -6}));
    EXPECT_EQ(values(v), c.expected);
    EXPECT_EQ(message_of([&] { values(w); }),
              "nx::to_vector: float64 [2, 3] was donated to nx::neg");
  }
}

TEST_P(Sharing, CompiledConsumerLeavesViewsTakenBeforeTheDonation) {
  auto step = rune::jit([](const Tensor& w) { return w * 0.5 + 1.0; });
  for (const auto& c : view_cases()) {
    SCOPED_TRACE(c.name);
    Tensor w = w23();
    Tensor v = c.view(w);
    std::string log = stderr_of([&] {
      Tensor r = step(nx::donate(w));
      EXPECT_EQ(values(r), (std::vector<double>{1.5, 2, 2.5, 3, 3.5, 4}));
    });
    EXPECT_EQ(log, "rune.jit: donation: 0: copied: storage shared with 1 live value\n");
    EXPECT_EQ(values(v), c.expected);
    EXPECT_EQ(message_of([&] { values(w); }),
              "nx::to_vector: float64 [2, 3] was donated to rune::jit");
  }
}

TEST_P(Sharing, SoleOwnerStillLendsItsStorage) {
  // The rule costs nothing where nothing else sees the storage: a view that died first does not
  // count, nor does a value that only lived while an earlier op read it.
  Tensor w = w23();
  void* storage = w.impl().buffer->data;
  { Tensor v = nx::reshape(w, {6}); }
  Tensor s = nx::sum(w);
  Tensor r = nx::neg(nx::donate(w));
  EXPECT_EQ(r.impl().buffer->data, storage);
  auto step = rune::jit([](const Tensor& x) { return x * 0.5 + 1.0; });
  std::string log = stderr_of([&] { r = step(nx::donate(r)); });
  EXPECT_EQ(log, "rune.jit: donation: 0: reused by result 0\n");
  EXPECT_EQ(r.impl().buffer->data, storage);
  EXPECT_EQ(values(r), (std::vector<double>{0.5, 0, -0.5, -1, -1.5, -2}));
  EXPECT_EQ(nx::item<double>(s), 21);
}

TEST_P(Sharing, DonatingAViewLeavesItsBaseIntact) {
  Tensor base = w23();
  Tensor v = nx::reshape(base, {6});
  Tensor r = nx::neg(nx::donate(v));
  EXPECT_EQ(values(r), (std::vector<double>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(values(base), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  auto step = rune::jit([](const Tensor& x) { return x + 10.0; });
  Tensor u = nx::reshape(base, {3, 2});
  std::string log = stderr_of([&] {
    EXPECT_EQ(values(step(nx::donate(u))), (std::vector<double>{11, 12, 13, 14, 15, 16}));
  });
  EXPECT_EQ(log, "rune.jit: donation: 0: copied: storage shared with 1 live value\n");
  EXPECT_EQ(values(base), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // A view that does not cover its storage is consumed, never written into.
  Tensor part = nx::slice(base, {{0, 1}});
  log = stderr_of([&] {
    EXPECT_EQ(values(step(nx::donate(part))), (std::vector<double>{11, 12, 13}));
  });
  EXPECT_EQ(log, "rune.jit: donation: 0: copied: a view that does not cover its storage\n");
  EXPECT_EQ(values(base), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST_P(Sharing, AnotherArgumentReachingTheStorageIsRead) {
  auto f = rune::jit([](const Tensor& a, const Tensor& b) { return a + nx::flip(b); });
  Tensor whole = make({3}, {1, 2, 3});
  Tensor alias = nx::reshape(whole, {1, 3});  // another value over the same storage
  std::string log = stderr_of([&] {
    EXPECT_EQ(values(f(nx::donate(whole), alias)), (std::vector<double>{4, 4, 4}));
  });
  // The call reads the storage twice (the donor and alias) and alias is alive.
  EXPECT_EQ(log, "rune.jit: donation: 0: copied: storage shared with 2 live values\n");
  EXPECT_EQ(values(alias), (std::vector<double>{1, 2, 3}));
  // Eager: the other operand reads the storage at other indices.
  Tensor x = make({3}, {1, 2, 3});
  Tensor y = nx::flip(x, {0});
  Tensor z = nx::add(nx::donate(x), y);
  EXPECT_EQ(values(z), (std::vector<double>{4, 4, 4}));
  EXPECT_EQ(values(y), (std::vector<double>{3, 2, 1}));
}

TEST_P(Sharing, ACapturedConstantOutlivesItsDonation) {
  Tensor w = make({3}, {1, 2, 3});
  auto uses_w = rune::jit([&](const Tensor& x) { return x + w; });
  Tensor x = make({3}, {10, 20, 30});
  EXPECT_EQ(values(uses_w(x)), (std::vector<double>{11, 22, 33}));
  auto scale = rune::jit([](const Tensor& t) { return t * 100.0; });
  std::string log = stderr_of([&] {
    EXPECT_EQ(values(scale(nx::donate(w))), (std::vector<double>{100, 200, 300}));
  });
  EXPECT_EQ(log, "rune.jit: donation: 0: copied: storage shared with 1 live value\n");
  EXPECT_EQ(values(uses_w(x)), (std::vector<double>{11, 22, 33}));
  // The same with an eager consumer.
  Tensor k = make({3}, {1, 2, 3});
  auto uses_k = rune::jit([&](const Tensor& t) { return t * k; });
  EXPECT_EQ(values(uses_k(x)), (std::vector<double>{10, 40, 90}));
  Tensor r = nx::neg(nx::donate(k));
  EXPECT_EQ(values(r), (std::vector<double>{-1, -2, -3}));
  EXPECT_EQ(values(uses_k(x)), (std::vector<double>{10, 40, 90}));
}

TEST_P(Sharing, DeadValuesRaiseWhenPrinted) {
  Tensor w = make({3}, {1, 2, 3});
  nx::neg(nx::donate(w));
  EXPECT_EQ(message_of([&] { nx::to_string(w); }),
            "nx::to_string: float64 [3] was donated to nx::neg");
  EXPECT_EQ(message_of([&] { nx::print(w); }), "nx::print: float64 [3] was donated to nx::neg");
  EXPECT_EQ(w.describe(), "float64 [3]");
}

TEST_P(Sharing, OneDonationPassedTwiceToACall) {
  auto f = rune::jit([](const Tensor& a, const Tensor& b) { return a * b; });
  Tensor w = make({2}, {1, 2});
  Tensor d = nx::donate(w);
  EXPECT_EQ(message_of([&] { f(d, d); }), "nx::donate: rune::jit reads one donation twice");
  EXPECT_EQ(values(w), (std::vector<double>{1, 2}));  // nothing consumed
  EXPECT_EQ(message_of([&] { nx::mul(d, d); }), "nx::donate: nx::mul reads one donation twice");
  EXPECT_EQ(values(w), (std::vector<double>{1, 2}));
}

// Whatever the interleaving, a read of w racing its donation returns w's values or raises the
// donation error: never the consumer's result.
TEST_P(Sharing, AReadRacingADonationSeesTheValueOrTheError) {
  auto step = rune::jit([](const Tensor& t) { return t * -1.0; });
  const std::vector<double> original(256, 3.0);
  int raised = 0, read = 0;
  for (int round = 0; round < 200; ++round) {
    bool compiled = round % 2 == 1;
    Tensor w = make({256}, original);
    nx::wait(w);
    std::atomic<bool> go{false};
    // The reader may itself be the op that consumes the donation (the next op reading it, on
    // any thread); then the consumer raises instead.
    std::atomic<bool> consumer_raised{false};
    std::thread consumer([&] {
      while (!go) std::this_thread::yield();
      try {
        Tensor r = compiled ? step(nx::donate(w)) : nx::neg(nx::donate(w));
        nx::wait(r);
      } catch (const std::invalid_argument& e) {
        consumer_raised = std::string(e.what()).find("was donated to") != std::string::npos;
      }
    });
    go = true;
    try {
      Tensor copy = nx::add(w, nx::scalar_like(w, 0));  // an eager op reading w
      auto got = values(copy);
      ++read;
      ASSERT_EQ(got, original) << "round " << round;
    } catch (const std::invalid_argument& e) {
      ++raised;
      EXPECT_NE(std::string(e.what()).find("was donated to"), std::string::npos) << e.what();
    }
    consumer.join();
  }
  EXPECT_EQ(raised + read, 200);
}

// A capsule of either kind (nx::to_dlpack / nx::to_dlpack_versioned), seen from its consumer.
struct Capsule {
  DLManagedTensor* legacy = nullptr;
  DLManagedTensorVersioned* versioned = nullptr;
  static Capsule of(const Tensor& x, bool versioned) {
    return versioned ? Capsule{nullptr, nx::to_dlpack_versioned(x)}
                     : Capsule{nx::to_dlpack(x), nullptr};
  }
  const DLTensor& dl() const { return legacy ? legacy->dl_tensor : versioned->dl_tensor; }
  Tensor import() const { return legacy ? nx::from_dlpack(legacy) : nx::from_dlpack(versioned); }
  void remove() const { legacy ? legacy->deleter(legacy) : versioned->deleter(versioned); }
};

// An exported DLPack capsule is a live observer of its storage (docs/interop.md): its consumer
// may read the memory until it calls the deleter, so no donation writes into it (the result
// takes fresh memory, the donor still dies). Each way to donate: compiled, eager, compiled with
// a consumed argument (rune::Signature().consume), both capsule kinds. Once the deleter ran,
// the same donation writes in place again.
TEST_P(Sharing, AnExportedCapsuleIsALiveObserver) {
  auto step = rune::jit([](const Tensor& w) { return nx::neg(w); });
  auto consuming = rune::jit(rune::Signature().consume(0), [](const Tensor& w) { return -w; });
  const std::string exported =
      "rune.jit: donation: 0: copied: exported as a DLPack capsule whose deleter has not run "
      "(nx::to_dlpack)\n";
  struct Path {
    const char* name;
    bool versioned;
    std::function<Tensor(const Tensor&)> run;  // consumes its argument's donation
    std::string fate, fate_after;              // the RUNE_JIT_DEBUG report (none eagerly)
  };
  const std::vector<Path> paths = {
      {"jit", false, [&](const Tensor& x) { return step(nx::donate(x)); }, exported,
       "rune.jit: donation: 0: reused by result 0\n"},
      {"eager", false, [](const Tensor& x) { return nx::neg(nx::donate(x)); }, "", ""},
      {"versioned", true, [&](const Tensor& x) { return step(nx::donate(x)); }, exported,
       "rune.jit: donation: 0: reused by result 0\n"},
      {"consume", true, [&](const Tensor& x) { return consuming(x); }, exported,
       "rune.jit: donation: 0: reused by result 0\n"},
  };
  const bool host = dev().kind == runtime::DeviceKind::CPU;
  for (const auto& p : paths) {
    SCOPED_TRACE(p.name);
    Tensor x = make({4}, {1, 2, 3, 4});
    void* storage = x.impl().buffer->data;
    Capsule c = Capsule::of(x, p.versioned);
    ASSERT_EQ(c.dl().data, storage);
    Tensor back = c.import();  // the consumer: a rune view of the capsule, holding it
    Tensor r;
    std::string log = stderr_of([&] { r = p.run(x); });
    EXPECT_EQ(log, p.fate);
    EXPECT_EQ(values(r), (std::vector<double>{-1, -2, -3, -4}));
    EXPECT_NE(r.impl().buffer->data, storage);
    EXPECT_EQ(values(back), (std::vector<double>{1, 2, 3, 4}));
    if (host) {  // what another library reading the capsule sees
      const double* d = static_cast<const double*>(c.dl().data);
      EXPECT_EQ(std::vector<double>(d, d + 4), (std::vector<double>{1, 2, 3, 4}));
    }
    EXPECT_NE(message_of([&] { values(x); }).find("was donated to"), std::string::npos);
    back = Tensor();  // runs the capsule's deleter

    // The deleter ran: nothing observes the storage, the donation writes in place.
    Tensor y = make({4}, {1, 2, 3, 4});
    void* storage_y = y.impl().buffer->data;
    Capsule::of(y, p.versioned).remove();
    log = stderr_of([&] { r = p.run(y); });
    EXPECT_EQ(log, p.fate_after);
    EXPECT_EQ(values(r), (std::vector<double>{-1, -2, -3, -4}));
    EXPECT_EQ(r.impl().buffer->data, storage_y);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Sharing, testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string p = info.param;
                           return p == "CPU"     ? std::string("host")
                                  : p == "CPU:1" ? std::string("async")
                                                 : std::string("cuda");
                         });

}  // namespace
