// Every message that docs/semantics.md spells out, compared verbatim (other tests check the
// behaviour around them). A message begins with the entry point the user called.
#include <gtest/gtest.h>

#include <functional>

#include "test_util.h"
#include "trace/rune.h"

namespace {

using rt::message_of;

using nx::Tensor;

const char* kTracedTail =
    " while tracing; its elements are not known until the compiled program runs (use nx::where "
    "for data-dependent choices)";

// §2.3: reading a traced value raises rune::jit_error naming the reader the user called.
TEST(SemanticsMessages, ReadingATracedValueNamesTheReader) {
  struct Reader {
    const char* api;
    std::function<void(const Tensor&)> read;
  };
  const std::vector<Reader> readers = {
      {"nx::item", [](const Tensor& t) { (void)nx::item<double>(nx::sum(t)); }},
      {"nx::to_vector", [](const Tensor& t) { (void)nx::to_vector<double>(t); }},
      {"nx::to_array", [](const Tensor& t) { (void)nx::to_array(t); }},
      {"nx::to_string", [](const Tensor& t) { (void)nx::to_string(t); }},
      {"nx::print", [](const Tensor& t) { nx::print(t); }},
  };
  for (const auto& r : readers) {
    auto f = rune::jit([&](const Tensor& x) {
      r.read(x);
      return x;
    });
    std::string described = std::string(r.api) == "nx::item" ? "float64 []" : "float64 [3]";
    std::string got;
    try {
      f(nx::ones(nx::float64, {3}));
      got = "no error";
    } catch (const rune::jit_error& e) {
      got = e.what();
    }
    EXPECT_EQ(got, std::string(r.api) + ": cannot read traced value " + described + kTracedTail);
  }
}

// §3: reading a dead value names the reader, the value and its consumer; printing is a read.
TEST(SemanticsMessages, ReadingADeadValue) {
  auto f = rune::jit([](const Tensor& w) { return w * 2.0; });
  Tensor w = nx::create(nx::float64, {3}, {1, 2, 3});
  f(nx::donate(w));
  EXPECT_EQ(message_of([&] { nx::to_array(w); }),
            "nx::to_array: float64 [3] was donated to rune::jit");
  EXPECT_EQ(message_of([&] { nx::to_string(w); }),
            "nx::to_string: float64 [3] was donated to rune::jit");
  EXPECT_EQ(message_of([&] { nx::print(w); }), "nx::print: float64 [3] was donated to rune::jit");
  EXPECT_EQ(message_of([&] { nx::item<double>(nx::sum(w)); }),
            "nx::sum: float64 [3] was donated to rune::jit");
  EXPECT_EQ(w.describe(), "float64 [3]");
}

// §3: one donated value read twice by one operation, eager and compiled.
TEST(SemanticsMessages, OneDonationReadTwice) {
  Tensor a = nx::create(nx::float64, {2}, {1, 2});
  EXPECT_EQ(message_of([&] { nx::add(nx::donate(a), a); }),
            "nx::donate: nx::add reads one donation twice");
  auto f = rune::jit([](const Tensor& x, const Tensor& y) { return x - y; });
  EXPECT_EQ(message_of([&] { f(nx::donate(a), a); }),
            "nx::donate: rune::jit reads one donation twice");
  EXPECT_EQ(nx::to_vector<double>(a), (std::vector<double>{1, 2}));
}

// §6: operands on two devices raise std::invalid_argument naming both.
TEST(SemanticsMessages, OperandsOnTwoDevices) {
  Tensor x = nx::place(nx::create(nx::float64, {2}, {1, 2}), "CPU:1");
  Tensor y = nx::place(nx::create(nx::float64, {2}, {1, 2}), "CPU");
  EXPECT_EQ(message_of([&] { nx::add(x, y); }),
            "nx::add: operands on two devices, CPU:1 (float64 [2]) and CPU (float64 [2]); move "
            "one with nx::place");
  EXPECT_THROW(nx::add(x, y), std::invalid_argument);
}

// §6: a device that does not exist here.
TEST(SemanticsMessages, UnavailableDevice) {
  std::string e = message_of([&] { nx::place(nx::ones(nx::float64, {2}), "HIP:7"); });
  EXPECT_EQ(e.rfind("nx::place: device HIP:7 is unavailable: ", 0), 0u) << e;
}

}  // namespace
