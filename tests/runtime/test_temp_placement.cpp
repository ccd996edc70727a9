// Temporaries placed by their lifetimes (runtime/temp_placement.h, Program::finalize): placed
// temporaries whose intervals meet never share a byte, a chain reuses memory, and a compiled
// chain of kernels keeps its bits while its peak (the device allocator's statistics) holds a
// few temporaries instead of every one, on CPU, CPU:1 and the fake CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "runtime/allocator.h"
#include "runtime/temp_placement.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
using runtime::place_temporaries;
using runtime::TempInterval;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

bool meet(const TempInterval& a, const TempInterval& b) {
  return a.first <= b.last && b.first <= a.last;
}

// Every pair of temporaries alive at one step lies in disjoint bytes, inside the block, aligned.
void expect_valid(const std::vector<TempInterval>& t, int64_t align) {
  auto p = place_temporaries(t, align);
  ASSERT_EQ(p.offset.size(), t.size());
  auto size = [&](size_t i) {
    return (std::max<int64_t>(t[i].bytes, 1) + align - 1) / align * align;
  };
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(p.offset[i] % align, 0) << i;
    EXPECT_GE(p.offset[i], 0) << i;
    EXPECT_LE(p.offset[i] + size(i), p.bytes) << i;
    for (size_t j = 0; j < i; ++j)
      if (meet(t[i], t[j])) {
        EXPECT_TRUE(p.offset[i] + size(i) <= p.offset[j] || p.offset[j] + size(j) <= p.offset[i])
            << "temporaries " << j << " and " << i << " overlap while both are alive";
      }
  }
}

TEST(TempPlacement, AChainReusesTwoSlots) {
  // Temporary k is written by step k and read by step k + 1, so k and k + 2 may share.
  std::vector<TempInterval> t;
  for (int k = 0; k < 16; ++k) t.push_back({1000, k, k + 1});
  auto p = place_temporaries(t, 64);
  EXPECT_EQ(p.bytes, 2 * 1024);  // two rounded slots, against 16 before
  for (int k = 0; k + 1 < 16; ++k) EXPECT_NE(p.offset[k], p.offset[k + 1]) << k;
  expect_valid(t, 64);
}

TEST(TempPlacement, IntervalsThatMeetAtAStepNeverShare) {
  // One's last step is the other's first: a kernel reading one and writing the other.
  std::vector<TempInterval> t = {{256, 0, 3}, {256, 3, 5}, {256, 6, 7}};
  auto p = place_temporaries(t, 256);
  EXPECT_NE(p.offset[0], p.offset[1]);
  EXPECT_EQ(p.bytes, 512);  // the third reuses one of the first two
  expect_valid(t, 256);
}

TEST(TempPlacement, PseudoRandomIntervalsNeverOverlapWhileAlive) {
  uint64_t s = 12345;
  auto next = [&](int64_t n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(n));
  };
  for (int round = 0; round < 20; ++round) {
    std::vector<TempInterval> t;
    int64_t sum = 0;
    for (int i = 0; i < 60; ++i) {
      int first = static_cast<int>(next(40));
      t.push_back({next(5000), first, first + static_cast<int>(next(8))});
      sum += (std::max<int64_t>(t.back().bytes, 1) + 63) / 64 * 64;
    }
    expect_valid(t, 64);
    EXPECT_LE(place_temporaries(t, 64).bytes, sum);
  }
}

TEST(TempPlacement, SameIntervalsSamePlacement) {
  std::vector<TempInterval> t = {{100, 0, 2}, {300, 1, 4}, {100, 3, 5}, {0, 5, 5}};
  EXPECT_EQ(place_temporaries(t, 64).offset, place_temporaries(t, 64).offset);
  expect_valid(t, 64);
}

// A chain of kernels that each materialise a [kRows, kCols] value: h <- tanh(h w) * 0.5 + h, a
// matrix product reading the last h, with an epilogue (the tanh and the add) writing the
// next. Before lifetimes every h held its own bytes for the whole run; now a few do.
constexpr int kSteps = 16;
constexpr int64_t kRows = 32, kCols = 64;  // float64: 16 KiB per value

Tensor chain(Tensor h, const Tensor& w) {
  for (int k = 0; k < kSteps; ++k) h = nx::tanh(nx::matmul(h, w)) * 0.5 + h;
  return h;
}

Tensor values(nx::Shape shape, double scale) {
  std::vector<double> v;
  for (int64_t i = 0; i < shape[0] * shape[1]; ++i)
    v.push_back(scale * (static_cast<double>(i % 97) - 48));
  return nx::create(nx::float64, shape, v);
}

class TempLifetimes : public ::testing::TestWithParam<std::string> {};

TEST_P(TempLifetimes, ACompiledChainHoldsFewTemporaries) {
  Tensor hx = values({kRows, kCols}, 0.01), hw = values({kCols, kCols}, 0.002);
  Tensor x = GetParam() == "CPU" ? hx : nx::place(hx, GetParam());
  Tensor w = GetParam() == "CPU" ? hw : nx::place(hw, GetParam());
  auto f = rune::jit([](const Tensor& x, const Tensor& w) { return chain(x, w); });
  nx::wait(f(x, w));  // compiled, and its first run's memory cached
  auto& alloc = runtime::device_allocator(x.device());
  size_t before = alloc.stats().in_use;
  alloc.reset_peak();
  Tensor y = f(x, w);
  nx::wait(y);
  size_t peak = alloc.stats().peak - before;
  const size_t value = kRows * kCols * sizeof(double);
  std::cout << "peak of the compiled chain on " << GetParam() << ": " << peak << " bytes ("
            << kSteps - 1 << " values of " << value << " bytes held before lifetimes)\n";
  // The output and the temporaries of at most three values at once (a product's input, its
  // result, the next), against the kSteps - 1 intermediate values the block held before.
  EXPECT_LE(peak, 4 * value + 4096) << "peak " << peak;
  EXPECT_GE(peak, value) << "peak " << peak;
  // The same bits as the operations run one at a time on the host.
  auto got = nx::to_vector<double>(y), want = nx::to_vector<double>(chain(hx, hw));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint64_t>(got[i]), std::bit_cast<uint64_t>(want[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(Devices, TempLifetimes, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
