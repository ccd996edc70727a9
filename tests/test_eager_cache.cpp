// Eager caching: an eager op is a one-op program cached by structure, so calling the same op
// again (same dtypes, shapes and layouts; any values) neither compiles nor loads a kernel.
#include <gtest/gtest.h>

#include "codegen/compile.h"
#include "test_util.h"

namespace {

using namespace rt;

// Host and GPU builds together: on a GPU default device (RUNE_DEFAULT_DEVICE) eager ops build
// GPU programs, one source each.
size_t kernels() {
  auto s = codegen::compile_stats();
  return s.kernels_compiled + s.kernels_from_disk + s.sources;
}
size_t programs() { return codegen::compile_stats().programs; }

// Runs fn twice; the second run must not build anything and must give the same values.
void expect_cached(const std::string& what, const std::function<Tensor()>& fn) {
  SCOPED_TRACE(what);
  std::vector<Value> first = read(fn());
  size_t k = kernels(), p = programs();
  std::vector<Value> second = read(fn());
  EXPECT_EQ(kernels(), k) << "the second call built kernels";
  EXPECT_EQ(programs(), p) << "the second call built programs";
  EXPECT_TRUE(match(second, first));
}

TEST(EagerCache, RepeatedOpsDoNotRecompile) {
  Tensor a = nx::reshape(nx::cast(nx::arange(12), nx::float32), {3, 4});
  Tensor b = nx::full(nx::float32, {3, 4}, 0.5);
  expect_cached("add", [&] { return nx::add(a, b); });
  expect_cached("mul by scalar", [&] { return a * 2.0; });
  expect_cached("sum", [&] { return nx::sum(a, {1}); });
  expect_cached("mean", [&] { return nx::mean(a); });
  expect_cached("argmax", [&] { return nx::argmax(a, 0); });
  expect_cached("cast", [&] { return nx::cast(a, nx::int32); });
  expect_cached("where", [&] { return nx::where(nx::less(a, b), a, b); });
  expect_cached("transpose + add", [&] { return nx::add(nx::transpose(a), nx::transpose(b)); });
  expect_cached("stepped slice", [&] { return nx::neg(nx::slice(a, {{0, 3, 2}, {1, 4, 2}})); });
  expect_cached("matmul", [&] { return nx::matmul(a, nx::transpose(b)); });
  expect_cached("concatenate", [&] { return nx::concatenate({a, b}, 1); });
  expect_cached("pad", [&] { return nx::pad(a, {{1, 0}, {0, 1}}, 3); });
  expect_cached("contiguous", [&] { return nx::contiguous(nx::flip(a)); });
  expect_cached("rand", [&] { return nx::rand(nx::key(1), nx::float32, {5}); });
}

TEST(EagerCache, NewValuesSameStructureDoNotRecompile) {
  Tensor a = nx::full(nx::float64, {2, 3}, 1.5);
  (void)nx::to_vector<double>(a * 2.0);
  size_t k = kernels();
  // Other scalar values, other input values, another key, a view at another offset.
  EXPECT_EQ(nx::to_vector<double>(a * 3.0), std::vector<double>(6, 4.5));
  Tensor c = nx::full(nx::float64, {2, 3}, -1);
  EXPECT_EQ(nx::to_vector<double>(c * 7.0), std::vector<double>(6, -7));
  EXPECT_EQ(kernels(), k);

  Tensor x = nx::cast(nx::arange(10), nx::float32);
  (void)nx::to_vector<double>(nx::neg(nx::slice(x, {{0, 4, 1}})));
  k = kernels();
  EXPECT_EQ(nx::to_vector<double>(nx::neg(nx::slice(x, {{5, 9, 1}}))),
            (std::vector<double>{-5, -6, -7, -8}));
  EXPECT_EQ(kernels(), k) << "a view at another offset reuses the kernel";
}

TEST(EagerCache, NewStructureCompiles) {
  // The counters do count: a shape not seen before builds a kernel (or loads one from disk).
  Tensor a = nx::zeros(nx::float32, {7, 13});
  size_t k = kernels(), p = programs();
  (void)nx::to_vector<double>(nx::sub(a, nx::transpose(nx::zeros(nx::float32, {13, 7}))));
  EXPECT_GT(kernels(), k);
  EXPECT_GT(programs(), p);
}

// Eager elementwise ops compile once per op kind (docs/performance.md "The first step"): over
// 20 shapes, 6 kinds of op (120 eager ops) build at most one kernel per kind, operand class and
// device (7: `x * 2.5` reads its scalar as a broadcast element, except over a one-element shape,
// where both operands are one contiguous element), and
// each result has the bits of the same op compiled for its own shape by rune::jit. A host's
// kernels only: a GPU kernel's launch geometry is its shape's.
TEST(EagerCache, ElementwiseOpsCompileOncePerKindAcrossShapes) {
  if (!host_is_default()) GTEST_SKIP() << "host devices only (GPU kernels are per shape)";
  const std::vector<Shape> shapes = {{},        {1},      {7},          {3, 5},    {5, 3},
                                     {2, 3, 4}, {64},     {1000},       {33, 17},  {4, 1, 6},
                                     {1, 9},    {9, 1},   {2, 2, 2, 2}, {300},     {11, 13},
                                     {6, 7, 8}, {128, 3}, {3, 128},     {1, 1, 1}, {17}};
  auto ops = [](const Tensor& x, const Tensor& y) {
    return std::vector<Tensor>{
        nx::add(x, y),         x * 2.5, nx::exp(x), nx::less(x, y), nx::where(nx::less(x, y), x, y),
        nx::cast(x, nx::int32)};
  };
  const size_t kinds = 6, kernels_at_most = 7;
  for (const char* where : {"CPU", "CPU:1"}) {
    SCOPED_TRACE(where);
    const nx::Device device = nx::Device::parse(where, "test");
    // The operands, made from host data before counting (nx::create compiles nothing).
    std::vector<std::pair<Tensor, Tensor>> inputs;
    for (const Shape& s : shapes) {
      std::vector<double> a(static_cast<size_t>(ir::numel(s))), b(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = 0.37 * static_cast<double>(i % 23) - 3.1;
        b[i] = 2.9 - 0.41 * static_cast<double>(i % 17);
      }
      inputs.emplace_back(nx::place(nx::create(nx::float32, s, a), device),
                          nx::place(nx::create(nx::float32, s, b), device));
    }
    for (auto& [x, y] : inputs) nx::wait(y);
    const size_t before = kernels();
    std::vector<std::vector<Tensor>> eager;
    for (auto& [x, y] : inputs) eager.push_back(ops(x, y));
    for (auto& r : eager) nx::wait(r.back());
    EXPECT_LE(kernels() - before, kernels_at_most)
        << "eager ops over " << shapes.size() << " shapes";
    auto compiled = rune::jit([&](const Tensor& x, const Tensor& y) { return ops(x, y); });
    for (size_t i = 0; i < shapes.size(); i += 3) {  // 7 of the shapes: each is a compile
      std::vector<Tensor> want = compiled(inputs[i].first, inputs[i].second);
      for (size_t k = 0; k < kinds; ++k)
        EXPECT_EQ(bits(eager[i][k]), bits(want[k])) << "op " << k << ", shape " << show(shapes[i]);
    }
  }
}

}  // namespace
