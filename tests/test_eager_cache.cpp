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

// Reductions over adjacent axes of contiguous operands, strided copies, ops over operands
// broadcast along some axes and iotas run one sized kernel per kind for every shape
// (core/eager_sized.h), with the bits of the op compiled for the shape itself.
TEST(EagerCache, ReductionsAndStridedOpsCompileOncePerKindAcrossShapes) {
  if (!host_is_default()) GTEST_SKIP() << "host devices only (GPU kernels are per shape)";
  const std::vector<Shape> shapes = {{3, 5},   {5, 3},    {2, 3, 4}, {33, 17},     {4, 1, 6},
                                     {1, 9},   {9, 1},    {6, 7, 8}, {128, 3},     {3, 128},
                                     {11, 13}, {2, 2, 2}, {7, 300},  {2, 3, 1, 5}, {17, 2},
                                     {40, 41}, {3, 1, 1}, {5, 6},    {1000, 2},    {2, 1000}};
  // Shapes none of the above has, of the same ranks: every kind is built by then.
  const std::vector<Shape> more = {{4, 7},   {7, 4},    {3, 2, 5}, {29, 19},     {5, 1, 3},
                                   {1, 12},  {12, 1},   {5, 6, 9}, {100, 4},     {4, 100},
                                   {10, 14}, {3, 3, 3}, {6, 250},  {3, 2, 1, 4}, {19, 3}};
  // The kinds: a float32 sum over rows and over a leading axis, a max over rows (keeping the
  // axis) and over a leading axis, a min over a middle axis, a transposed copy, a comparison
  // with a value broadcast along an axis, argmax (a max, equal and isnan against it, or, an
  // iota along the axis, where, an int64 min) and gathers along the first and the last axis
  // (take, with its index arithmetic). Each is one sized kernel per layout class (a
  // reduction's rows [.., R] or strided [.., R, B]; a flat or strided elementwise op), whatever
  // the shape.
  Tensor picks;  // {1, 0, -1, 5} on the device: clamped where out of range
  auto ops = [&picks](const Tensor& x) {
    const int last = static_cast<int>(x.ndim()) - 1;
    return std::vector<Tensor>{nx::sum(x, {last}),
                               nx::sum(x, {0}),
                               nx::max(x, {last}, true),
                               nx::min(x, {last > 1 ? 1 : 0}),
                               nx::contiguous(nx::transpose(x)),
                               nx::less(x, nx::max(x, {0}, true)),
                               nx::argmax(x, last),
                               nx::take(x, picks, 0),
                               nx::take(x, picks, last)};
  };
  // Without sized kernels these 9 ops over 20 shapes (180 eager ops) built 215 kernels.
  const size_t kernels_at_most = 28;
  for (const char* where : {"CPU", "CPU:1"}) {
    SCOPED_TRACE(where);
    const nx::Device device = nx::Device::parse(where, "test");
    picks = nx::place(nx::create(nx::int64, {4}, {1, 0, -1, 5}), device);
    std::vector<Tensor> inputs;
    for (const Shape& s : shapes) {
      std::vector<double> a(static_cast<size_t>(ir::numel(s)));
      for (size_t i = 0; i < a.size(); ++i) a[i] = 0.37 * static_cast<double>(i % 23) - 3.1;
      if (a.size() > 7) a[7] = std::nan("");  // a NaN somewhere: max, min and argmax keep it
      if (a.size() > 4) a[4] = -0.0;
      inputs.push_back(nx::place(nx::create(nx::float32, s, a), device));
    }
    std::vector<Tensor> later;
    for (const Shape& s : more) {
      std::vector<double> a(static_cast<size_t>(ir::numel(s)), 1.5);
      later.push_back(nx::place(nx::create(nx::float32, s, a), device));
    }
    for (auto& x : inputs) nx::wait(x);
    for (auto& x : later) nx::wait(x);
    const size_t before = kernels();
    std::vector<std::vector<Tensor>> eager;
    for (auto& x : inputs) eager.push_back(ops(x));
    for (auto& r : eager) nx::wait(r.back());
    EXPECT_LE(kernels() - before, kernels_at_most)
        << "eager ops over " << shapes.size() << " shapes";
    const size_t built = kernels();
    for (auto& x : later) nx::wait(ops(x).back());
    EXPECT_EQ(kernels(), built) << "eager ops over " << more.size() << " new shapes";
    auto compiled = rune::jit([&](const Tensor& x) { return ops(x); });
    for (size_t i = 0; i < shapes.size(); i += 3) {  // 7 of the shapes: each is a compile
      std::vector<Tensor> want = compiled(inputs[i]);
      for (size_t k = 0; k < want.size(); ++k)
        EXPECT_EQ(bits(eager[i][k]), bits(want[k])) << "op " << k << ", shape " << show(shapes[i]);
    }
  }
}

// Sized kernels over every dtype class: 16-bit floats reduce at float32 (a max directly, a sum
// after its cast), integers and bools accumulate in int64, and an int64 iota feeds one_hot; the
// bits are those of the ops compiled for their shapes.
TEST(EagerCache, SizedKernelsKeepTheBitsOfEveryDtype) {
  if (!host_is_default()) GTEST_SKIP() << "host devices only (GPU kernels are per shape)";
  const std::vector<Shape> shapes = {{5, 3}, {2, 9, 4}, {17, 33}, {1, 70}};
  for (DType t :
       {nx::float16, nx::bfloat16, nx::float64, nx::int32, nx::int64, nx::uint8, nx::bool_}) {
    SCOPED_TRACE(std::string(ir::name(t)));
    auto ops = [t](const Tensor& x) {
      const int last = static_cast<int>(x.ndim()) - 1;
      std::vector<Tensor> r = {nx::sum(x, {last}), nx::sum(x, {0}), nx::max(x, {0}),
                               nx::min(x, {last}, true), nx::contiguous(nx::transpose(x))};
      if (t != nx::bool_) r.push_back(nx::argmin(x, 0));
      if (ir::is_int(t)) r.push_back(nx::one_hot(nx::sum(x, {last}), 5, nx::float32));
      return r;
    };
    auto compiled = rune::jit([&](const Tensor& x) { return ops(x); });
    for (const Shape& s : shapes) {
      std::vector<double> a(static_cast<size_t>(ir::numel(s)));
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = t == nx::bool_    ? static_cast<double>((i * 7) % 2)
               : ir::is_float(t) ? static_cast<double>((i * 7) % 5) - 2.25
                                 : static_cast<double>((i * 7) % 5);
      if (ir::is_float(t) && a.size() > 3) a[3] = std::nan("");
      Tensor x = nx::create(t, s, a);
      std::vector<Tensor> eager = ops(x), want = compiled(x);
      for (size_t k = 0; k < want.size(); ++k)
        EXPECT_EQ(bits(eager[k]), bits(want[k])) << "op " << k << ", shape " << show(s);
    }
  }
}

}  // namespace
