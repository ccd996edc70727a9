// rune::data (trace/data.h, docs/data.md): every example exactly once per epoch under each
// remainder policy, the pad mask and zero padding, shuffles deterministic per key and new per
// epoch (jax.random.permutation(fold_in(key, epoch), n)), the same batches on CPU, CPU:1 and the
// fake CUDA:0, a compiled step that traces once for an epoch whose last batch is padded, the
// prefetch thread (bounded, joined promptly when an epoch is destroyed mid-way, its errors
// raised by the next() that would have returned the batch), the file constructors (.npy,
// .safetensors, IDX, text windows; Fashion-MNIST when installed) and the errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "trace/data.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
namespace data = rune::data;
namespace rnd = nx::random;
using XY = std::pair<Tensor, Tensor>;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

std::string dir() {
  static const std::string d = [] {
    auto p =
        std::filesystem::temp_directory_path() / ("rune_test_data_" + std::to_string(getpid()));
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return d;
}

// n examples: x float32 [n, 3] with row i = (i, i + 0.5, -i), y int32 [n] = i.
XY examples(int64_t n) {
  std::vector<double> x, y;
  for (int64_t i = 0; i < n; ++i) {
    x.insert(x.end(), {double(i), i + 0.5, -double(i)});
    y.push_back(double(i));
  }
  return {nx::create(nx::float32, {n, 3}, x), nx::create(nx::int32, {n}, y)};
}

std::vector<int64_t> ints(const Tensor& t) {
  return nx::to_vector<int64_t>(nx::cast(nx::place(t, "CPU"), nx::int64));
}
std::vector<double> vals(const Tensor& t) { return nx::to_array(nx::place(t, "CPU")); }

// Checks a batch of examples(n): x rows match their labels, padded rows are zero with mask 0.
void expect_consistent(const data::Batch<XY>& b, int64_t rows) {
  ASSERT_EQ(b.data.first.shape(), (nx::Shape{rows, 3}));
  ASSERT_EQ(b.data.second.shape(), (nx::Shape{rows}));
  ASSERT_EQ(b.mask.shape(), (nx::Shape{rows}));
  auto x = vals(b.data.first), m = vals(b.mask);
  auto y = ints(b.data.second);
  for (int64_t r = 0; r < rows; ++r) {
    bool real = r < b.valid;
    EXPECT_EQ(m[r], real ? 1.0 : 0.0) << "row " << r;
    double i = real ? double(y[r]) : 0.0;
    if (!real) {
      EXPECT_EQ(y[r], 0) << "padded row " << r;
    }
    EXPECT_EQ(x[3 * r], i);
    EXPECT_EQ(x[3 * r + 1], real ? i + 0.5 : 0.0);
    EXPECT_EQ(x[3 * r + 2], -i);
  }
}

// The labels of the real rows of each batch of an epoch, in order.
std::vector<int64_t> labels_of(data::Epoch<XY> epoch, std::vector<int64_t>* sizes = nullptr) {
  std::vector<int64_t> out;
  for (auto b : epoch) {
    auto y = ints(b.data.second);
    out.insert(out.end(), y.begin(), y.begin() + b.valid);
    if (sizes) sizes->push_back(b.data.second.dim(0));
  }
  return out;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}
std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

class DataDevices : public ::testing::TestWithParam<std::string> {
 protected:
  nx::Device dev() const { return nx::Device::parse(GetParam(), "test"); }
  Tensor on(const Tensor& t) const { return nx::place(t, dev()); }
};

TEST_P(DataDevices, PadCoversEveryExampleOnceWithAMask) {
  data::Dataset<XY> ds(examples(10));
  EXPECT_EQ(ds.size(), 10);
  data::Loader<XY> loader(ds, {.batch_size = 4, .shuffle_key = on(rnd::key(7)), .device = dev()});
  EXPECT_EQ(loader.batches(), 3);
  for (int64_t e : {0, 1, 5}) {
    std::vector<int64_t> order = loader.order(e), seen;
    int64_t k = 0;
    for (auto b : loader.epoch(e)) {
      EXPECT_EQ(b.index, k);
      EXPECT_EQ(b.valid, k < 2 ? 4 : 2);
      EXPECT_EQ(b.data.first.device(), dev());
      EXPECT_EQ(b.mask.device(), dev());
      EXPECT_EQ(b.mask.dtype(), nx::float32);
      expect_consistent(b, 4);
      auto y = ints(b.data.second);
      seen.insert(seen.end(), y.begin(), y.begin() + b.valid);
      ++k;
    }
    EXPECT_EQ(k, 3);
    EXPECT_EQ(seen, order) << "epoch " << e;  // the batches take the epoch's order
    EXPECT_EQ(sorted(seen), iota(10)) << "epoch " << e;
  }
}

TEST_P(DataDevices, DropAndKeep) {
  data::Dataset<XY> ds(examples(10));
  Tensor key = on(rnd::key(3));
  data::Loader<XY> drop(
      ds,
      {.batch_size = 4, .shuffle_key = key, .remainder = data::Remainder::Drop, .device = dev()});
  EXPECT_EQ(drop.batches(), 2);
  std::vector<int64_t> sizes;
  auto got = labels_of(drop.epoch(2), &sizes);
  auto order = drop.order(2);
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(got, std::vector<int64_t>(order.begin(), order.begin() + 8));
  EXPECT_EQ(sorted(got).size(), std::set<int64_t>(got.begin(), got.end()).size());  // distinct
  // Over epochs, the dropped examples differ: every example is seen.
  std::set<int64_t> all;
  for (int64_t e = 0; e < 8; ++e)
    for (int64_t i : labels_of(drop.epoch(e))) all.insert(i);
  EXPECT_EQ(all.size(), 10u);

  data::Loader<XY> keep(ds, {.batch_size = 4,
                             .shuffle_key = key,
                             .remainder = data::Remainder::Keep,
                             .mask_dtype = nx::bool_,
                             .device = dev()});
  sizes.clear();
  got = labels_of(keep.epoch(2), &sizes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(got, order);
  auto e = keep.epoch(0);
  e.next();
  e.next();
  auto last = e.next();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->mask.dtype(), nx::bool_);
  EXPECT_EQ(vals(last->mask), (std::vector<double>{1, 1}));
  EXPECT_FALSE(e.next());
  EXPECT_FALSE(e.next());
}

TEST_P(DataDevices, UnshuffledIsInOrderAndBoolMask) {
  data::Loader<XY> loader(data::Dataset<XY>(examples(7)),
                          {.batch_size = 3, .mask_dtype = nx::bool_, .device = dev()});
  EXPECT_EQ(loader.order(0), iota(7));
  EXPECT_EQ(loader.order(9), iota(7));
  std::vector<Tensor> masks;
  EXPECT_EQ(labels_of(loader.epoch(4)), iota(7));
  for (auto b : loader.epoch(0)) {
    expect_consistent(b, 3);
    masks.push_back(b.mask);
  }
  ASSERT_EQ(masks.size(), 3u);
  EXPECT_EQ(masks[2].dtype(), nx::bool_);
  EXPECT_EQ(vals(masks[2]), (std::vector<double>{1, 0, 0}));
}

// The order is jax.random.permutation(jax.random.fold_in(key, epoch), n), whatever the device.
TEST_P(DataDevices, ShuffleIsDeterministicPerKeyAndNewPerEpoch) {
  const int64_t n = 50;
  data::Dataset<XY> ds(examples(n));
  Tensor key = on(rnd::key(42));
  data::Loader<XY> a(ds, {.batch_size = 8, .shuffle_key = key, .device = dev()});
  data::Loader<XY> b(ds, {.batch_size = 8, .shuffle_key = rnd::key(42), .device = dev()});
  data::Loader<XY> other(ds, {.batch_size = 8, .shuffle_key = rnd::key(43), .device = dev()});
  for (int64_t e : {0, 1, 2}) {
    auto want = ints(rnd::permutation(rnd::fold_in(key, static_cast<uint32_t>(e)), n));
    EXPECT_EQ(a.order(e), want) << "epoch " << e;
    EXPECT_EQ(b.order(e), want) << "epoch " << e;
    EXPECT_NE(other.order(e), want) << "epoch " << e;
    EXPECT_EQ(labels_of(a.epoch(e)), want) << "epoch " << e;
    EXPECT_EQ(labels_of(b.epoch(e)), want) << "epoch " << e;
  }
  EXPECT_NE(a.order(0), a.order(1));
  EXPECT_NE(a.order(1), a.order(2));
  EXPECT_NE(a.order(0), iota(n));
}

// The order for sizes that take two rounds of the permutation's sort (n > 1625), ties among the
// random keys included (likely at n = 60000), is nx::random::permutation's.
TEST(DataShuffle, OrderIsThePermutationForLargeN) {
  for (int64_t n : {1, 2, 1626, 5000, 60000}) {
    data::Dataset<Tensor> ds(nx::zeros(nx::uint8, {n}));
    data::Loader<Tensor> l(ds, {.batch_size = 7, .shuffle_key = rnd::key(9)});
    for (int64_t e : {0, 3}) {
      auto want = ints(rnd::permutation(rnd::fold_in(rnd::key(9), static_cast<uint32_t>(e)), n));
      EXPECT_EQ(l.order(e), want) << "n " << n << " epoch " << e;
    }
  }
}

// The same batches (labels and bits) on CPU, CPU:1 and CUDA:0, with and without prefetching.
TEST_P(DataDevices, SameBatchesOnEveryDevice) {
  data::Dataset<XY> ds(examples(23));
  auto batches = [&](nx::Device d, int prefetch) {
    data::Loader<XY> l(ds, {.batch_size = 5,
                            .shuffle_key = nx::place(rnd::key(11), d),
                            .device = d,
                            .prefetch = prefetch});
    std::vector<std::vector<double>> out;
    for (int64_t e = 0; e < 2; ++e)
      for (auto b : l.epoch(e)) {
        EXPECT_EQ(b.data.first.device(), d);
        out.push_back(vals(b.data.first));
        out.push_back(vals(b.data.second));
        out.push_back(vals(b.mask));
      }
    return out;
  };
  auto want = batches(nx::Device::cpu(), 0);
  EXPECT_EQ(want.size(), 2u * 5 * 3);
  EXPECT_EQ(batches(dev(), 2), want);
  EXPECT_EQ(batches(dev(), 0), want);
}

// A compiled step over a padded epoch traces once; a kept remainder is a new shape and traces
// again. The masked sums are those of every example.
TEST_P(DataDevices, PaddedEpochTracesOnce) {
  const int64_t n = 10;
  data::Dataset<XY> ds(examples(n));
  auto step = rune::jit([](const Tensor& x, const Tensor& y, const Tensor& mask) {
    return std::make_pair(nx::sum(nx::sum(x, {1}) * mask),
                          nx::sum(nx::cast(y, nx::float32) * mask));
  });
  data::Loader<XY> pad(ds, {.batch_size = 4, .shuffle_key = rnd::key(1), .device = dev()});
  for (int64_t e = 0; e < 2; ++e) {
    double sx = 0, sy = 0;
    for (auto b : pad.epoch(e)) {
      auto [a, c] = step(b.data.first, b.data.second, b.mask);
      sx += nx::item<float>(nx::place(a, "CPU"));
      sy += nx::item<float>(nx::place(c, "CPU"));
    }
    EXPECT_EQ(sx, n * (n - 1) / 2.0 + 0.5 * n);  // row i sums to i + 0.5
    EXPECT_EQ(sy, n * (n - 1) / 2.0);
  }
  EXPECT_EQ(step.traces(), 1u);
  data::Loader<XY> keep(ds, {.batch_size = 4,
                             .shuffle_key = rnd::key(1),
                             .remainder = data::Remainder::Keep,
                             .device = dev()});
  for (auto b : keep.epoch(0)) step(b.data.first, b.data.second, b.mask);
  EXPECT_EQ(step.traces(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Devices, DataDevices, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), ':', '_');
                           return s;
                         });

int threads_now() {
  int n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Destroying an epoch mid-way (or before its first batch, or while the producer waits for
// space) stops and joins its thread promptly, 300 times over; no thread is left behind.
TEST(DataPrefetch, DestroyedMidEpochJoinsPromptly) {
  data::Dataset<XY> ds(examples(1000));
  // Warm up the runtime's own threads (the host pool the permutation's sort starts).
  { data::Loader<XY>(ds, {.batch_size = 8, .shuffle_key = rnd::key(0)}).epoch(0).next(); }
  int before = threads_now();
  using Clock = std::chrono::steady_clock;
  double worst = 0;
  for (int i = 0; i < 300; ++i) {
    data::Loader<XY> l(ds,
                       {.batch_size = 8, .shuffle_key = rnd::key(i % 3), .prefetch = 1 + i % 4});
    auto t0 = Clock::now();
    {
      auto e = l.epoch(i % 5);
      for (int k = 0; k < i % 3; ++k) ASSERT_TRUE(e.next());
      if (i % 2) std::this_thread::sleep_for(std::chrono::microseconds(200));  // queue full
      t0 = Clock::now();
    }
    worst = std::max(worst, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  EXPECT_LT(worst, 2.0) << "an epoch took " << worst << " s to stop";
  EXPECT_EQ(threads_now(), before);
  // A loop broken out of early ends the same way.
  for (int i = 0; i < 20; ++i)
    for (auto b : data::Loader<XY>(ds, {.batch_size = 8}).epoch(0))
      if (b.index == 3) break;
  EXPECT_EQ(threads_now(), before);
}

// The producer stays at most `prefetch` batches ahead of the consumer.
TEST(DataPrefetch, QueueIsBounded) {
  data::Dataset<XY> ds(examples(100));
  for (int depth : {1, 2, 3}) {
    auto built = std::make_shared<std::atomic<int>>(0);
    data::Loader<XY> l(ds, {.batch_size = 4, .prefetch = depth});
    l.map([built](XY b) {
      ++*built;
      return b;
    });
    auto e = l.epoch(0);
    ASSERT_TRUE(e.next());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (*built < depth + 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(*built, depth + 1) << "prefetch " << depth;  // the batch taken and `depth` queued
    ASSERT_TRUE(e.next());
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (*built < depth + 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(*built, depth + 2) << "prefetch " << depth;
  }
  // prefetch 0: built in next(), on the calling thread.
  auto built = std::make_shared<std::atomic<int>>(0);
  auto caller = std::this_thread::get_id();
  auto where = std::make_shared<std::thread::id>();
  data::Loader<XY> l(ds, {.batch_size = 4, .prefetch = 0});
  l.map([built, where](XY b) {
    ++*built;
    *where = std::this_thread::get_id();
    return b;
  });
  auto e = l.epoch(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(*built, 0);
  e.next();
  EXPECT_EQ(*built, 1);
  EXPECT_EQ(*where, caller);
}

// An error building batch 2 is raised by the third next(), after batches 0 and 1; the epoch
// then ends. The same with and without the thread, and through a range-for.
TEST(DataPrefetch, ProducerErrorReachesTheConsumer) {
  data::Dataset<XY> ds(examples(40));
  for (int prefetch : {0, 1, 2, 4}) {
    data::Loader<XY> l(ds, {.batch_size = 4, .prefetch = prefetch});
    l.map([](XY b) {
      if (nx::to_vector<int32_t>(b.second)[0] == 8) throw std::runtime_error("bad example 8");
      return b;
    });
    auto e = l.epoch(0);
    auto b0 = e.next();
    ASSERT_TRUE(b0);
    EXPECT_EQ(b0->index, 0);
    // Batch 1 is still delivered, whatever the producer did since.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto b1 = e.next();
    ASSERT_TRUE(b1);
    EXPECT_EQ(b1->index, 1);
    try {
      e.next();
      ADD_FAILURE() << "no error, prefetch " << prefetch;
    } catch (const std::runtime_error& err) {
      EXPECT_STREQ(err.what(), "bad example 8");
    }
    EXPECT_FALSE(e.next());
    int seen = 0;
    EXPECT_THROW(
        for (auto b
             : l.epoch(1)) {
          (void)b;
          ++seen;
        },
        std::runtime_error);
    EXPECT_EQ(seen, 2);
  }
  // A map that changes the tree's structure raises at next() too.
  using V = std::vector<Tensor>;
  data::Loader<V> lv(data::Dataset<V>(V{nx::zeros(nx::float32, {4, 2})}), {.batch_size = 2});
  lv.map([](V v) {
    v.push_back(v[0]);
    return v;
  });
  auto e = lv.epoch(0);
  try {
    e.next();
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& err) {
    EXPECT_STREQ(
        err.what(),
        "rune::data::Loader::map: f returned a tree of another structure than its argument");
  }
}

// map runs on host tensors before placement: uint8 images become float32 on the device.
TEST(DataLoader, MapThenPlace) {
  std::vector<double> px;
  for (int i = 0; i < 6 * 4; ++i) px.push_back(i * 10 % 256);
  XY ds{nx::create(nx::uint8, {6, 2, 2}, px), nx::create(nx::uint8, {6}, {0, 1, 2, 3, 4, 5})};
  data::Loader<XY> l(data::Dataset<XY>(ds),
                     {.batch_size = 4, .device = nx::Device::parse("CPU:1", "t")});
  l.map([](XY b) {
    EXPECT_EQ(b.first.device(), nx::Device::cpu());
    return XY{nx::cast(b.first, nx::float32) / 255.0, b.second};
  });
  std::vector<double> got;
  for (auto b : l.epoch(0)) {
    EXPECT_EQ(b.data.first.dtype(), nx::float32);
    EXPECT_EQ(b.data.first.device().name(), "CPU:1");
    auto v = vals(b.data.first);
    got.insert(got.end(), v.begin(), v.begin() + 4 * b.valid);
  }
  ASSERT_EQ(got.size(), px.size());
  for (size_t i = 0; i < px.size(); ++i) EXPECT_FLOAT_EQ(got[i], float(px[i]) / 255.0f);
}

// Trees: a RUNE_TREE-less tuple of three leaves, a vector; an epoch outlives its loader.
TEST(DataDataset, TreesAndTake) {
  using T3 = std::tuple<Tensor, Tensor, Tensor>;
  T3 t{nx::arange(5), nx::reshape(nx::arange(10), {5, 2}), nx::zeros(nx::float16, {5, 2, 3})};
  data::Dataset<T3> ds(t);
  auto got = ds.take({4, 0, 4});
  EXPECT_EQ(ints(std::get<0>(got)), (std::vector<int64_t>{4, 0, 4}));
  EXPECT_EQ(ints(std::get<1>(got)), (std::vector<int64_t>{8, 9, 0, 1, 8, 9}));
  EXPECT_EQ(std::get<2>(got).shape(), (nx::Shape{3, 2, 3}));
  EXPECT_EQ(std::get<2>(got).dtype(), nx::float16);
  auto epoch = data::Loader<T3>(ds, {.batch_size = 2}).epoch(0);
  std::vector<int64_t> seen;
  for (auto b : epoch) {
    auto v = ints(std::get<0>(b.data));
    seen.insert(seen.end(), v.begin(), v.begin() + b.valid);
  }
  EXPECT_EQ(seen, iota(5));
  EXPECT_THROW(ds.take({5}), std::invalid_argument);
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

TEST(DataErrors, NameTheApiAndValues) {
  using V = std::vector<Tensor>;
  EXPECT_EQ(error_of([] {
              (void)data::Dataset<V>(V{nx::zeros(nx::float32, {4, 2}), nx::zeros(nx::int32, {3})});
            }),
            "rune::data::Dataset: leaf `1` (int32 [3]) has 3 examples, leaf `0` (float32 [4, 2]) "
            "has 4 (every leaf's leading dimension is the example count)");
  EXPECT_EQ(
      error_of([] {
        (void)data::Dataset<XY>(XY{nx::zeros(nx::float32, {0, 2}), nx::zeros(nx::int32, {0})});
      }),
      "rune::data::Dataset: the dataset is empty (leaf `0` is float32 [0, 2])");
  EXPECT_EQ(error_of([] { (void)data::Dataset<Tensor>(nx::zeros(nx::float32, {})); }),
            "rune::data::Dataset: the tensor (float32 []) has no leading dimension to index "
            "examples by");
  EXPECT_EQ(error_of([] { (void)data::Dataset<V>(V{}); }),
            "rune::data::Dataset: the examples have no tensor leaves");
  data::Dataset<XY> ds(examples(10));
  EXPECT_EQ(error_of([&] { (void)data::Loader<XY>(ds, {.batch_size = 0}); }),
            "rune::data::Loader: batch_size must be positive, got 0");
  EXPECT_EQ(error_of([&] { (void)data::Loader<XY>(ds, {.batch_size = 2, .prefetch = -1}); }),
            "rune::data::Loader: prefetch must be non-negative, got -1");
  EXPECT_EQ(
      error_of([&] { (void)data::Loader<XY>(ds, {.batch_size = 2, .mask_dtype = nx::int32}); }),
      "rune::data::Loader: mask_dtype must be float32 or bool, got int32");
  EXPECT_EQ(error_of([&] {
              (void)data::Loader<XY>(ds,
                                     {.batch_size = 2, .shuffle_key = nx::zeros(nx::float32, {3})});
            }),
            "rune::data::Loader: shuffle_key must be a concrete uint32 [2] key (nx::random::key), "
            "got float32 [3]");
  EXPECT_EQ(error_of([&] {
              data::Loader<XY>(ds, {.batch_size = 11, .remainder = data::Remainder::Drop});
            }),
            "rune::data::Loader: batch_size 11 is larger than the dataset (10 examples) and "
            "Remainder::Drop drops its only, partial batch");
  EXPECT_EQ(error_of([&] { (void)data::Loader<XY>(ds, {.batch_size = 2}).epoch(-1); }),
            "rune::data::Loader::epoch: epoch must be in [0, 2^32), got -1");
  EXPECT_EQ(error_of([&] {
              ds.take({3, 10});
            }),
            "rune::data::Dataset::take: index 10 is out of range for 10 examples");
  // A batch larger than the dataset is padded (pad) or short (keep).
  data::Loader<XY> big(ds, {.batch_size = 16});
  EXPECT_EQ(big.batches(), 1);
  auto b = big.epoch(0).next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->valid, 10);
  expect_consistent(*b, 16);
}

TEST(DataFiles, NpySafetensorsIdx) {
  auto [x, y] = examples(6);
  nx::save_npy(dir() + "/x.npy", x);
  nx::save_npy(dir() + "/y.npy", y);
  nx::save_npy(dir() + "/y5.npy", nx::slice(y, {{0, 5}}));
  auto npy = data::from_npy({dir() + "/x.npy", dir() + "/y.npy"});
  EXPECT_EQ(npy.size(), 6);
  auto t = npy.take({5, 1});
  EXPECT_EQ(vals(t[0]), (std::vector<double>{5, 5.5, -5, 1, 1.5, -1}));
  EXPECT_EQ(ints(t[1]), (std::vector<int64_t>{5, 1}));
  EXPECT_EQ(error_of([&] {
              data::from_npy({dir() + "/x.npy", dir() + "/y5.npy"});
            }),
            "rune::data::from_npy: '" + dir() + "/y5.npy' (int32 [5]) has 5 examples, '" + dir() +
                "/x.npy' (float32 [6, 3]) has 6 (every leaf's leading dimension is the example "
                "count)");

  nx::save(dir() + "/d.safetensors", nx::TensorMap{{"images", x}, {"labels", y}});
  auto st = data::from_safetensors(dir() + "/d.safetensors", {"labels", "images"});
  auto s = st.take({2});
  EXPECT_EQ(ints(s[0]), (std::vector<int64_t>{2}));
  EXPECT_EQ(vals(s[1]), (std::vector<double>{2, 2.5, -2}));
  auto all = data::from_safetensors(dir() + "/d.safetensors");
  EXPECT_EQ(all.take({0}).size(), 2u);
  EXPECT_EQ(all.take({3})[0].shape(), (nx::Shape{1, 3}));  // name order: images, labels
  EXPECT_EQ(error_of([&] { data::from_safetensors(dir() + "/d.safetensors", {"pixels"}); }),
            "rune::data::from_safetensors: '" + dir() +
                "/d.safetensors' has no tensor 'pixels' (it has: images, labels)");

  // IDX: uint8 [3, 2, 2] images and uint8 [3] labels.
  auto write = [&](const std::string& name, std::vector<uint8_t> b) {
    std::ofstream(dir() + "/" + name, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return dir() + "/" + name;
  };
  std::vector<uint8_t> img{0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
  for (int i = 0; i < 12; ++i) img.push_back(static_cast<uint8_t>(i));
  std::string ip = write("img.idx", img), lp = write("lab.idx", {0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9});
  std::string lp2 = write("lab2.idx", {0, 0, 8, 1, 0, 0, 0, 2, 7, 8});
  auto idx = data::from_idx(ip, lp);
  auto [im, lab] = idx.take({1});
  EXPECT_EQ(im.dtype(), nx::uint8);
  EXPECT_EQ(ints(im), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(ints(lab), (std::vector<int64_t>{8}));
  EXPECT_EQ(error_of([&] { data::from_idx(ip, lp2); }),
            "rune::data::from_idx: '" + lp2 + "' (uint8 [2]) has 2 examples, '" + ip +
                "' (uint8 [3, 2, 2]) has 3 (every leaf's leading dimension is the example count)");
}

TEST(DataFiles, TextWindows) {
  const std::string text = "hello, world";  // 12 bytes
  std::string path = dir() + "/t.txt";
  std::ofstream(path, std::ios::binary) << text;
  auto ds = data::from_text(path, 4);  // windows of 5 at 0, 4: (12 - 5) / 4 + 1 = 2
  EXPECT_EQ(ds.size(), 2);
  auto as_str = [](const Tensor& t) {
    std::string s;
    for (int64_t v : ints(t)) s += char(v);
    return s;
  };
  auto [x, y] = ds.take({0, 1});
  EXPECT_EQ(x.dtype(), nx::uint8);
  EXPECT_EQ(x.shape(), (nx::Shape{2, 4}));
  EXPECT_EQ(as_str(x), "hello, w");
  EXPECT_EQ(as_str(y), "ello, wo");
  auto every = data::from_text(path, 4, 1);  // every offset: 12 - 5 + 1 = 8 windows
  EXPECT_EQ(every.size(), 8);
  auto [x7, y7] = every.take({7});
  EXPECT_EQ(as_str(x7), "worl");
  EXPECT_EQ(as_str(y7), "orld");
  // Through a loader, shuffled and padded.
  data::Loader<XY> l(every, {.batch_size = 3, .shuffle_key = rnd::key(0)});
  std::set<std::string> seen;
  for (auto b : l.epoch(0)) {
    std::string s = as_str(b.data.first);
    for (int64_t r = 0; r < b.valid; ++r) seen.insert(s.substr(4 * r, 4));
    for (int64_t r = b.valid; r < 3; ++r) EXPECT_EQ(s.substr(4 * r, 4), std::string(4, '\0'));
  }
  EXPECT_EQ(seen.size(), 8u);
  // Several files joined in order: windows span the boundary.
  std::string second = dir() + "/t2.txt";
  std::ofstream(second, std::ios::binary) << "!?";
  auto joined = data::from_text_files({path, second}, 4, 2);  // (14 - 5) / 2 + 1 = 5 windows
  EXPECT_EQ(joined.size(), 5);
  auto [jx, jy] = joined.take({0, 4});
  EXPECT_EQ(as_str(jx), "hellorld");
  EXPECT_EQ(as_str(jy), "ellorld!");
  auto [jx4, jy4] = data::from_text_files({path, second}, 4, 1).take({9});  // 14 - 5 + 1 = 10
  EXPECT_EQ(as_str(jx4), "rld!");
  EXPECT_EQ(as_str(jy4), "ld!?");
  EXPECT_EQ(data::from_text_files({path}, 4).size(), 2);
  EXPECT_EQ(error_of([&] { data::from_text_files({}, 4); }),
            "rune::data::from_text_files: no files");
  EXPECT_EQ(error_of([&] {
              data::from_text_files({second, second}, 4);
            }),
            "rune::data::from_text_files: the text of 2 files ('" + second +
                "', ...) has 4 tokens, fewer than one window of seq_len + 1 = 5");
  EXPECT_EQ(error_of([&] {
              data::from_text_files({path, dir() + "/missing.txt"}, 4);
            }),
            "rune::data::from_text_files: cannot open '" + dir() + "/missing.txt'");
  // A directory's files by name, without hidden files, skipped suffixes and subdirectories.
  std::string corpus = dir() + "/corpus";
  std::filesystem::create_directories(corpus + "/sub");
  for (const char* name : {"b.txt", "a.txt", "a.txt.dat", ".hidden", "sub/c.txt"})
    std::ofstream(corpus + "/" + name) << name;
  EXPECT_EQ(data::list_files(corpus, {".dat"}),
            (std::vector<std::string>{corpus + "/a.txt", corpus + "/b.txt"}));
  EXPECT_EQ(data::list_files(corpus).size(), 3u);
  EXPECT_EQ(data::list_files(path), std::vector<std::string>{path});
  EXPECT_EQ(error_of([&] { data::list_files(corpus + "/sub", {".txt"}); }),
            "rune::data::list_files: the directory '" + corpus + "/sub' has no files to read");
  EXPECT_EQ(error_of([&] { data::list_files(dir() + "/missing"); }),
            "rune::data::list_files: '" + dir() + "/missing' does not exist");
  // Tokens of another dtype.
  auto tok = data::from_tokens(nx::cast(nx::arange(10), nx::int32), 3, 2);  // (10 - 4) / 2 + 1
  EXPECT_EQ(tok.size(), 4);
  auto [tx, ty] = tok.take({3});
  EXPECT_EQ(tx.dtype(), nx::int32);
  EXPECT_EQ(ints(tx), (std::vector<int64_t>{6, 7, 8}));
  EXPECT_EQ(ints(ty), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(error_of([&] { data::from_text(path, 12); }),
            "rune::data::from_text: '" + path +
                "' has 12 tokens, fewer than one window of seq_len + 1 = 13");
  EXPECT_EQ(error_of([&] { data::from_text(path, 0); }),
            "rune::data::from_text: seq_len must be positive, got 0");
  EXPECT_EQ(error_of([&] { data::from_text(dir() + "/missing.txt", 4); }),
            "rune::data::from_text: cannot open '" + dir() + "/missing.txt'");
  EXPECT_EQ(error_of([&] {
              data::from_tokens(nx::zeros(nx::int32, {2, 2}), 1);
            }),
            "rune::data::from_tokens: tokens must be a concrete 1-D tensor, got int32 [2, 2]");
}

// Debian's dataset-fashion-mnist (tools/setup-deps installs it), when installed.
TEST(DataFiles, FashionMnist) {
  const std::string d = "/usr/share/datasets/fashion-mnist/";
  if (!std::filesystem::exists(d + "train-images-idx3-ubyte.gz")) GTEST_SKIP() << "not installed";
  auto ds = data::from_idx(d + "train-images-idx3-ubyte.gz", d + "train-labels-idx1-ubyte.gz");
  EXPECT_EQ(ds.size(), 60000);
  data::Loader<XY> l(ds, {.batch_size = 128, .shuffle_key = rnd::key(0)});
  EXPECT_EQ(l.batches(), 469);  // 468 full, one of 96 padded
  int64_t n = 0, real = 0;
  std::vector<int64_t> per_class(10);
  for (auto b : l.epoch(0)) {
    EXPECT_EQ(b.data.first.shape(), (nx::Shape{128, 28, 28}));
    real += b.valid;
    auto y = ints(b.data.second);
    for (int64_t r = 0; r < b.valid; ++r) ++per_class.at(y[r]);
    ++n;
  }
  EXPECT_EQ(n, 469);
  EXPECT_EQ(real, 60000);
  EXPECT_EQ(per_class, std::vector<int64_t>(10, 6000));  // 6000 of each class
}

}  // namespace
