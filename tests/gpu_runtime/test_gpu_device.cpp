// On a real GPU (CUDA:0, else HIP:0): the same programs on the host and on the device give the
// same bits (docs/semantics.md §5: every transcendental is our own decomposition, no contraction),
// eager and compiled, plus the device's asynchronous paths. Skips cleanly without a device;
// tools/gpu-check runs it on a machine that has one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "runtime/cuda/cub_sort.h"
#include "runtime/gpu/context.h"
#include "sort_input.h"
#include "test_util.h"
#include "trace/rune.h"

#ifndef RUNE_EXPECT_CUB_MODULE
#define RUNE_EXPECT_CUB_MODULE 0
#endif

namespace {

using rt::message_of;

using nx::Tensor;
using runtime::Device;
using runtime::DeviceKind;

Device gpu() {
  for (auto k : {DeviceKind::CUDA, DeviceKind::HIP})
    if (runtime::gpu::unavailable_reason(Device{k, 0}).empty()) return Device{k, 0};
  return Device::cpu();
}
#define REQUIRE_GPU()       \
  const Device dev = gpu(); \
  if (dev == Device::cpu()) \
  GTEST_SKIP() << "no GPU: " << runtime::gpu::unavailable_reason(Device{DeviceKind::CUDA, 0})

// Raw bytes of a value read back to the host; NaNs compare equal to any NaN of the same width.
std::vector<uint64_t> bits(const Tensor& t) {
  auto h = nx::place(t, Device::cpu());
  std::vector<double> v = nx::to_array(h);
  std::vector<uint64_t> out;
  for (double d : v) {
    uint64_t b;
    if (std::isnan(d)) d = std::numeric_limits<double>::quiet_NaN();
    std::memcpy(&b, &d, 8);
    out.push_back(b);
  }
  return out;
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

void expect_same_bits(Device dev, const std::string& label, const std::vector<Tensor>& host_args,
                      const Fn& fn) {
  std::vector<Tensor> dev_args;
  for (const auto& a : host_args) dev_args.push_back(nx::place(a, dev));
  // Eager.
  Tensor h = fn(host_args), g = fn(dev_args);
  EXPECT_EQ(g.device(), dev) << label;
  EXPECT_EQ(bits(g), bits(h)) << label << " (eager)";
  // Compiled.
  auto jf = rune::jit([&](const std::vector<Tensor>& a) { return fn(a); });
  EXPECT_EQ(bits(jf(dev_args)), bits(h)) << label << " (compiled)";
}

std::vector<Tensor> specials_f32(int n) {
  auto x = nx::randn(nx::key(11), nx::float32, {n}) * 30.0;
  std::vector<double> sp = {0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, 1e-40, 88.7, -103.9};
  auto s = nx::create(nx::float32, {static_cast<int64_t>(sp.size())}, sp);
  return {nx::concatenate({x, s}, 0)};
}

TEST(OnGpu, ElementwiseIncludingTranscendentalsIsBitIdentical) {
  REQUIRE_GPU();
  for (auto t : {nx::float32, nx::float64, nx::float16, nx::bfloat16}) {
    auto x = nx::cast(specials_f32(4096)[0], t);
    auto y = nx::cast(nx::rand(nx::key(12), nx::float32, {4106}) * 4.0 - 2.0, t);
    std::string n(ir::name(t));
    expect_same_bits(dev, n + " arith", {x, y},
                     [](auto& a) { return (a[0] * a[1] + a[0]) / a[1]; });
    expect_same_bits(dev, n + " sqrt", {x}, [](auto& a) { return nx::sqrt(a[0]); });
    for (auto [name, f] :
         std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>>{{"exp", nx::exp},
                                                                        {"log", nx::log},
                                                                        {"sin", nx::sin},
                                                                        {"cos", nx::cos},
                                                                        {"tanh", nx::tanh},
                                                                        {"erf", nx::erf},
                                                                        {"expm1", nx::expm1},
                                                                        {"log1p", nx::log1p},
                                                                        {"atan", nx::atan},
                                                                        {"sigmoid", nx::sigmoid}})
      expect_same_bits(dev, n + " " + name, {x}, [f = f](auto& a) { return f(a[0]); });
    expect_same_bits(dev, n + " pow", {x, y}, [](auto& a) { return nx::pow(a[0], a[1]); });
  }
}

TEST(OnGpu, ReductionsIncludingMultiBlockAreBitIdentical) {
  REQUIRE_GPU();
  auto big = nx::randn(nx::key(13), nx::float32, {3 << 20});  // 48 reduction blocks
  expect_same_bits(dev, "sum 3M", {big}, [](auto& a) { return nx::sum(a[0]); });
  expect_same_bits(dev, "max 3M", {big}, [](auto& a) { return nx::max(a[0]); });
  expect_same_bits(dev, "mean sq", {big}, [](auto& a) { return nx::mean(a[0] * a[0]); });
  auto m = nx::reshape(big, {3072, 1024});
  expect_same_bits(dev, "rows", {m}, [](auto& a) { return nx::sum(a[0], {1}); });
  expect_same_bits(dev, "cols", {m}, [](auto& a) { return nx::sum(a[0], {0}); });
  auto d = nx::cast(m, nx::float64);
  expect_same_bits(dev, "f64 softmax", {d}, [](auto& a) { return nx::softmax(a[0], -1); });
}

TEST(OnGpu, BroadcastsAndMovementAreBitIdentical) {
  REQUIRE_GPU();
  auto a = nx::randn(nx::key(14), nx::float32, {64, 1, 32});
  auto b = nx::randn(nx::key(15), nx::float32, {1, 48, 32});
  expect_same_bits(dev, "broadcast", {a, b}, [](auto& x) { return x[0] * x[1] - x[1]; });
  expect_same_bits(dev, "transpose+flip", {a, b},
                   [](auto& x) { return nx::flip(nx::transpose(x[0] + x[1]), {0}); });
  expect_same_bits(dev, "matmul", {nx::reshape(a, {64, 32}), nx::reshape(b, {48, 32})},
                   [](auto& x) { return nx::matmul(x[0], nx::transpose(x[1])); });
}

// The tiled float32 product (docs/gpu.md): edge tiles, transposed operands, a chain that must
// stay -0, a batched product with a fused epilogue, and 1024^2 (a grid of 64 tiles).
TEST(OnGpu, TiledProductsAreBitIdentical) {
  REQUIRE_GPU();
  auto r = [](uint64_t k, ir::Shape s) { return nx::randn(nx::key(k), nx::float32, s); };
  auto mm = [](auto& x) { return nx::matmul(x[0], x[1]); };
  expect_same_bits(dev, "tiled edges", {r(40, {130, 70}), r(41, {70, 150})}, mm);
  expect_same_bits(dev, "tiled transposed", {r(42, {40, 96}), r(43, {80, 40})},
                   [](auto& x) { return nx::matmul(nx::transpose(x[0]), nx::transpose(x[1])); });
  expect_same_bits(
      dev, "tiled -0 chain",
      {nx::full(nx::float32, {64, 17}, -1e-30), nx::full(nx::float32, {17, 70}, 1e-30)}, mm);
  expect_same_bits(dev, "tiled batched bias relu",
                   {r(44, {3, 65, 33}), r(45, {3, 33, 72}), r(46, {72})},
                   [](auto& x) { return nx::relu(nx::matmul(x[0], x[1]) + x[2]); });
  expect_same_bits(dev, "tiled 1024", {r(47, {1024, 1024}), r(48, {1024, 1024})}, mm);
}

TEST(OnGpu, TrainingStepIsBitIdentical) {
  REQUIRE_GPU();
  auto loss = [](const Tensor& w1, const Tensor& w2, const Tensor& x, const Tensor& y) {
    auto h = nx::tanh(nx::matmul(x, w1));
    auto d = nx::matmul(h, w2) - y;
    return nx::mean(d * d);
  };
  auto step = rune::jit([&](const Tensor& w1, const Tensor& w2, const Tensor& x, const Tensor& y) {
    auto [l, g] = rune::value_and_grad(
        [&](const std::pair<Tensor, Tensor>& p) { return loss(p.first, p.second, x, y); },
        std::make_pair(w1, w2));
    return std::make_tuple(w1 - g.first * 0.05, w2 - g.second * 0.05, l);
  });
  auto w1 = nx::randn(nx::key(16), nx::float32, {784, 256}) * 0.05;
  auto w2 = nx::randn(nx::key(17), nx::float32, {256, 10}) * 0.05;
  auto x = nx::rand(nx::key(18), nx::float32, {128, 784});
  auto y = nx::rand(nx::key(19), nx::float32, {128, 10});
  auto [h1, h2, hl] = step(w1, w2, x, y);
  auto [g1, g2, gl] =
      step(nx::place(w1, dev), nx::place(w2, dev), nx::place(x, dev), nx::place(y, dev));
  EXPECT_EQ(bits(g1), bits(h1));
  EXPECT_EQ(bits(g2), bits(h2));
  EXPECT_EQ(bits(gl), bits(hl));
}

// Sorts (docs/sort.md): on CUDA, CUB's radix sorts from librune_cub.so where rune was built
// with it (the rendered rank sort elsewhere); the host's bits either way, sorted values (-0 and
// NaN payloads included: compared without canonicalising NaN) and argsort positions.

// rows x len values of t with NaN, +-inf, -0 and +0 (floats), many duplicates, negatives.
Tensor sort_input(nx::DType t, int64_t rows, int64_t len, uint64_t seed) {
  return gpu_sort_test::sort_input(t, rows, len, seed, /*span=*/2001, /*scale_exp=*/7,
                                   /*special_every=*/8);
}

std::vector<uint64_t> exact_bits(const Tensor& t) {
  auto v = nx::to_array(nx::place(t, Device::cpu()));
  std::vector<uint64_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 8);
  return b;
}

// sort and argsort along `axis`, eager and compiled, against the host.
void expect_sorts_match(Device dev, const std::string& label, const Tensor& x, int axis = -1) {
  Tensor g = nx::place(x, dev);
  auto hs = nx::sort(x, axis), ha = nx::argsort(x, axis);
  EXPECT_EQ(exact_bits(nx::sort(g, axis)), exact_bits(hs)) << label << " sort";
  EXPECT_EQ(exact_bits(nx::argsort(g, axis)), exact_bits(ha)) << label << " argsort";
  auto both = rune::jit(
      [axis](const Tensor& a) { return std::make_pair(nx::sort(a, axis), nx::argsort(a, axis)); });
  auto [js, ja] = both(g);
  EXPECT_EQ(exact_bits(js), exact_bits(hs)) << label << " sort (compiled)";
  EXPECT_EQ(exact_bits(ja), exact_bits(ha)) << label << " argsort (compiled)";
}

// The module sorts use on `dev` (nullptr: the rank sort), and why not.
const runtime::cuda::CubModule* cub_for(Device dev, std::string* why) {
  return runtime::cuda::cub_module_for(dev.kind, runtime::gpu::context(dev, "test").driver(), why);
}

TEST(OnGpu, SortsUseCubWhereRuneWasBuiltWithIt) {
  REQUIRE_GPU();
  if (dev.kind != DeviceKind::CUDA) GTEST_SKIP() << "CUB is CUDA only";
  std::string why;
  const auto* m = cub_for(dev, &why);
  if (RUNE_EXPECT_CUB_MODULE && !std::getenv("RUNE_CUB_MODULE")) {
    ASSERT_NE(m, nullptr) << why;
  }
  if (m) RecordProperty("cub_module", m->path + " (" + m->api->build + ")");
}

TEST(OnGpu, SortAndArgsortAreBitIdenticalInEveryDtype) {
  REQUIRE_GPU();
  for (nx::DType t : {nx::float32, nx::float64, nx::float16, nx::bfloat16, nx::int32, nx::int64,
                      nx::uint8, nx::bool_}) {
    std::string n(ir::name(t));
    Tensor x = sort_input(t, 5, 1000, 1 + static_cast<int>(t));
    expect_sorts_match(dev, n + " 5x1000", x);
    expect_sorts_match(dev, n + " 1000x5 (axis 0)", x, 0);
    expect_sorts_match(dev, n + " 1x5000", nx::reshape(x, {5000}));
  }
  // Empty rows and one-element rows.
  expect_sorts_match(dev, "0x7", nx::zeros(nx::float32, {0, 7}));
  expect_sorts_match(dev, "9x1", sort_input(nx::float32, 9, 1, 3));
  // Cumsum keeps its rendered kernel.
  Tensor c = sort_input(nx::float64, 7, 300, 4);
  EXPECT_EQ(exact_bits(nx::cumsum(nx::place(c, dev))), exact_bits(nx::cumsum(c)));
}

TEST(OnGpu, SortsOfLongRowsAndOfManyShortRowsAreBitIdentical) {
  REQUIRE_GPU();
  std::string why;
  if (dev.kind != DeviceKind::CUDA || !cub_for(dev, &why))
    GTEST_SKIP() << "long rows need CUB's sort (the rank sort is O(n^2)): " << why;
  // One long row: DeviceRadixSort over the whole device.
  expect_sorts_match(dev, "f32 1x4M", sort_input(nx::float32, 1, 1 << 22, 5));
  expect_sorts_match(dev, "i64 1x1M", sort_input(nx::int64, 1, 1 << 20, 6));
  // A few long rows: DeviceRadixSort row by row.
  expect_sorts_match(dev, "f64 3x100000", sort_input(nx::float64, 3, 100000, 7));
  expect_sorts_match(dev, "bf16 2x70000", sort_input(nx::bfloat16, 2, 70000, 8));
  // Many short rows: DeviceSegmentedRadixSort.
  expect_sorts_match(dev, "f32 100000x7", sort_input(nx::float32, 100000, 7, 9));
  expect_sorts_match(dev, "i32 20000x33", sort_input(nx::int32, 20000, 33, 10));
  expect_sorts_match(dev, "u8 4096x300", sort_input(nx::uint8, 4096, 300, 11));
  expect_sorts_match(dev, "f16 300x3000", sort_input(nx::float16, 300, 3000, 12));
  expect_sorts_match(dev, "f32 700x4096 (axis 0)", sort_input(nx::float32, 4096, 700, 13), 0);
}

TEST(OnGpu, ChecksRaiseAtTheNextWaitAndDonationWritesInPlace) {
  REQUIRE_GPU();
  auto f = rune::jit([](const Tensor& x) {
    nx::check(
        nx::less(x, nx::scalar_like(x, 5)), x, [](const std::vector<int64_t>& i, const Tensor& v) {
          return std::out_of_range("too big at " + std::to_string(i[0]) + ": " + nx::to_string(v));
        });
    return x * 2.0;
  });
  auto x = nx::place(nx::create(nx::float64, {3}, {1, 7, 2}), dev);
  auto r = f(x);  // queued
  EXPECT_EQ(message_of([&] { nx::wait(dev); }), "too big at 1: float64 [] 7");
  EXPECT_EQ(message_of([&] { nx::to_vector<double>(r); }), "too big at 1: float64 [] 7");
  auto g = rune::jit([](const Tensor& w) { return w * 0.5 + 1.0; });
  auto w = nx::place(nx::create(nx::float32, {1000}, std::vector<double>(1000, 4.0)), dev);
  void* storage = w.impl().buffer->data;
  auto out = g(nx::donate(w));
  EXPECT_EQ(out.impl().buffer->data, storage);
  EXPECT_EQ(nx::to_vector<float>(out), std::vector<float>(1000, 3.0f));
}

TEST(OnGpu, DeviceErrorsNameTheCount) {
  REQUIRE_GPU();
  int n = runtime::gpu::device_count(dev.kind);
  std::string e = message_of([&] { nx::place(nx::scalar(nx::float32, 1), Device{dev.kind, n}); });
  EXPECT_NE(e.find("is unavailable: this machine has " + std::to_string(n)), std::string::npos)
      << e;
}

}  // namespace
