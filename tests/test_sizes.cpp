// Sizes (docs/design-notes.md "Sizes, files and creation rules"): every creation, view and movement
// op checks the shape it makes with overflow-safe arithmetic (ir::checked_numel) and raises
// std::invalid_argument naming itself and the shape, eagerly and while tracing in rune::jit; an
// allocation that cannot be satisfied raises runtime::OutOfMemory naming the op and the bytes.
// The suite runs on the default device: also with RUNE_DEFAULT_DEVICE=CPU:1 and on the fake
// CUDA:0 (tests/CMakeLists.txt).
#include <functional>
#include <limits>

#include "runtime/allocator.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using namespace rt;
using V = std::vector<int64_t>;

constexpr int64_t k32 = int64_t{1} << 32;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
// 7 * 7905747460161236407 is 1 modulo 2^64: a shape whose element count wraps to 1.
constexpr int64_t kWrapsTo1 = 7905747460161236407;

// Runs f, which must raise E whose message starts with `prefix` and contains `part`.
template <class E = std::invalid_argument>
void expect_error(const std::function<void()>& f, const std::string& prefix,
                  const std::string& part = "") {
  try {
    f();
    ADD_FAILURE() << "no error; expected " << prefix;
  } catch (const E& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind(prefix, 0), 0u) << m;
    EXPECT_NE(m.find(part), std::string::npos) << m << "\nmissing: " << part;
  }
}

TEST(Sizes, CheckedArithmetic) {
  EXPECT_EQ(ir::checked_mul(k32, k32), std::nullopt);
  EXPECT_EQ(ir::checked_mul(-1, std::numeric_limits<int64_t>::min()), std::nullopt);
  EXPECT_EQ(ir::checked_mul(k32, k32 / 2 - 1), (k32 / 2 - 1) * k32);
  EXPECT_EQ(ir::checked_add(kMax, 1), std::nullopt);
  EXPECT_EQ(ir::checked_add(kMax, -1), kMax - 1);
  EXPECT_EQ(ir::checked_numel("t", {}), 1);
  EXPECT_EQ(ir::checked_numel("t", {0, 5}), 0);
  // The limit is 2^60 - 1: 8-byte elements must fit in 2^63 - 1 bytes.
  EXPECT_EQ(ir::checked_numel("t", {int64_t{1} << 30, (int64_t{1} << 30) - 1}),
            (int64_t{1} << 60) - (int64_t{1} << 30));
  expect_error(
      [] {
        ir::checked_numel("t", {int64_t{1} << 30, int64_t{1} << 30});
      },
      "t: shape [1073741824, 1073741824] is too large");
  EXPECT_EQ(ir::checked_numel("t", {ir::kMaxElements}), ir::kMaxElements);
  expect_error([] { ir::checked_numel("t", {ir::kMaxElements + 1}); },
               "t: shape [1152921504606846976] is too large: over 1152921504606846975 elements");
  expect_error([] { ir::checked_numel("t", {7, kWrapsTo1}); }, "t: shape [7, 7905747460161236407]");
  // As numpy: a zero dim does not excuse other dims whose product overflows.
  expect_error(
      [] {
        ir::checked_numel("t", {0, k32, k32});
      },
      "t: shape [0, 4294967296, 4294967296]");
  expect_error([] { ir::checked_numel("t", {2, -1}); }, "t: negative dimension in [2, -1]");
}

// Each creation op with a shape (or a count) too large: eager, then the same call traced.
TEST(Sizes, CreationOpsRejectOverflowingShapes) {
  const std::string big = "[4294967296, 4294967296] is too large";
  std::vector<std::pair<std::function<Tensor()>, std::string>> cases = {
      {[] {
         return nx::ones(nx::float32, {k32, k32});
       },
       "nx::ones: shape " + big},
      {[] { return nx::zeros(nx::float64, {int64_t{1} << 62}); },
       "nx::zeros: shape [4611686018427387904] is too large"},
      {[] {
         return nx::full(nx::int32, {k32, k32}, 1);
       },
       "nx::full: shape " + big},
      {[] {
         return nx::create(nx::float32, {k32, k32}, {});
       },
       "nx::create: shape " + big},
      {[] { return nx::arange(int64_t{1} << 62); },
       "nx::arange: shape [4611686018427387904] is too large"},
      {[] { return nx::arange(nx::float64, 0, 1e20); },
       "nx::arange: shape [1e+20] (start=0 stop=1e+20 step=1) is too large"},
      {[] { return nx::arange(nx::float64, -1e308, 1e308, 1e-308); }, "nx::arange: shape [inf]"},
      {[] { return nx::linspace(nx::float32, 0, 1, int64_t{1} << 62); },
       "nx::linspace: shape [4611686018427387904] is too large"},
      {[] { return nx::eye(nx::float32, k32); }, "nx::eye: shape " + big},
      {[] {
         return nx::iota({k32, k32}, 0);
       },
       "nx::iota: shape " + big},
      {[] {
         return nx::rand(nx::key(1), nx::float32, {k32, k32});
       },
       "nx::rand: shape " + big},
      {[] {
         return nx::randn(nx::key(1), nx::float32, {k32, k32});
       },
       "nx::randn: shape " + big},
      {[] {
         return nx::randint(nx::key(1), 0, 5, {k32, k32});
       },
       "nx::randint: shape " + big},
      {[] {
         return nx::zeros(nx::float32, {7, kWrapsTo1});
       },
       "nx::zeros: shape [7, 7905747460161236407] is too large"},
  };
  for (auto& [make, want] : cases) {
    expect_error([&] { make(); }, want);
    auto f = rune::jit([&] { return nx::sum(make()); });
    expect_error([&] { f(); }, want);
  }
  char byte = 0;
  expect_error(
      [&] {
        nx::from_bytes(nx::uint8, {k32, k32}, &byte);
      },
      "nx::from_bytes: shape " + big);
  // The limit itself is fine for a shape (a broadcast view holds no memory).
  Tensor v = nx::broadcast_to(nx::scalar(nx::uint8, 3), {ir::kMaxElements});
  EXPECT_EQ(v.size(), ir::kMaxElements);
}

// View and movement ops: the shape they make is checked, naming the op the user called.
TEST(Sizes, ViewAndMovementOpsRejectOverflowingShapes) {
  Tensor one = nx::ones(nx::float32, {1});
  Tensor x = nx::reshape(nx::arange(4), {2, 2});
  Tensor s = nx::scalar(nx::float32, 2);
  using Fn = std::function<Tensor(Tensor, Tensor)>;
  std::vector<std::pair<Fn, std::string>> cases = {
      // A count that wraps to x's (1) used to pass and read far past the buffer.
      {[](Tensor a, Tensor) {
         return nx::reshape(a, {7, kWrapsTo1});
       },
       "nx::reshape: shape [7, 7905747460161236407] is too large"},
      {[](Tensor a, Tensor) {
         return nx::reshape(a, {7, kWrapsTo1, -1});
       },
       "nx::reshape: cannot reshape float32 [1] (1 elements) into [7, 7905747460161236407, -1]"},
      {[](Tensor a, Tensor) {
         return nx::reshape(a, {k32, k32, 0, -1});
       },
       "nx::reshape: cannot reshape float32 [1]"},
      {[](Tensor, Tensor b) {
         return nx::broadcast_to(b, {k32, k32});
       },
       "nx::broadcast_to: shape [4294967296, 4294967296] is too large"},
      {[](Tensor, Tensor b) {
         return nx::add(nx::broadcast_to(b, {k32, 1}), nx::broadcast_to(b, {1, k32}));
       },
       "nx::add: shape [4294967296, 4294967296] is too large"},
      {[](Tensor a, Tensor) {
         return nx::pad(a, {{kMax, 1}});
       },
       "nx::pad: pad widths (9223372036854775807, 1) overflow axis 0 of float32 [1]"},
      {[](Tensor a, Tensor) {
         return nx::pad(nx::reshape(a, {1, 1}), {{0, k32}, {0, k32}});
       },
       "nx::pad: shape [4294967297, 4294967297] is too large"},
      {[](Tensor, Tensor b) {
         Tensor h = nx::broadcast_to(b, {int64_t{1} << 59});
         return nx::concatenate({h, h, h});
       },
       "nx::concatenate: shape [1729382256910270464] is too large"},
      {[](Tensor, Tensor b) {
         // Nine extents of 2^60 overflow int64 while they are summed.
         Tensor h = nx::broadcast_to(b, {ir::kMaxElements});
         return nx::concatenate(std::vector<Tensor>(9, h));
       },
       "nx::concatenate: the extents along axis 0 overflow int64"},
      {[](Tensor, Tensor b) {
         Tensor h = nx::broadcast_to(b, {int64_t{1} << 59});
         return nx::stack({h, h, h});
       },
       "nx::stack: shape [3, 576460752303423488] is too large"},
  };
  for (auto& [op, want] : cases) {
    expect_error([&] { op(one, s); }, want);
    auto f = rune::jit([&](Tensor a, Tensor b) { return nx::sum(op(a, b)); });
    expect_error([&] { f(one, s); }, want);
    // A failing call leaves its arguments as they were.
    EXPECT_EQ(nx::to_vector<float>(one), std::vector<float>{1});
    EXPECT_EQ(nx::item<float>(s), 2);
  }
  // Two halves of the limit stack within it: the shape passes, and the stack (which
  // materialises) then fails cleanly for want of memory.
  Tensor h = nx::broadcast_to(s, {ir::kMaxElements / 2});
  expect_error<runtime::OutOfMemory>(
      [&] {
        nx::stack({h, h});
      },
      "nx::stack: out of memory on ", " allocating 4611686018427387896 bytes");
  EXPECT_EQ(nx::to_vector<int64_t>(x), (V{0, 1, 2, 3}));
}

// An allocation that cannot be satisfied names the op and the bytes: 2^59 bytes is a valid size
// (within the limit) that no machine has.
TEST(Sizes, AllocationFailureNamesTheOpAndTheBytes) {
  const int64_t n = int64_t{1} << 59;
  const std::string dev = nx::default_device().name();
  expect_error<runtime::OutOfMemory>(
      [&] { nx::zeros(nx::uint8, {n}); },
      "nx::zeros: out of memory on " + dev + " allocating 576460752303423488 bytes (");
  Tensor v = nx::broadcast_to(nx::scalar(nx::uint8, 1), {n});
  expect_error<runtime::OutOfMemory>(
      [&] { nx::contiguous(v); },
      "nx::contiguous: out of memory on " + dev + " allocating 576460752303423488 bytes");
  expect_error<runtime::OutOfMemory>([&] { nx::add(v, v); }, "nx::add: out of memory on " + dev);
  // Still a std::runtime_error for callers that catch those.
  EXPECT_THROW(nx::ones(nx::uint8, {n}), std::runtime_error);
  // Compiled: the program's output cannot be allocated either.
  auto f = rune::jit([&] { return nx::zeros(nx::uint8, {n}); });
  expect_error<runtime::OutOfMemory>(
      [&] { f(); }, "rune::jit: out of memory on " + dev, " allocating 576460752303423488 bytes");
  // Nothing is left behind: ordinary work continues.
  EXPECT_EQ(nx::to_vector<int64_t>(nx::arange(3)), (V{0, 1, 2}));
}

}  // namespace
