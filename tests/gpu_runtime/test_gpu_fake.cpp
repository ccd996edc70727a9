// The GPU runtime end to end on a fake CUDA driver (fake_driver.h): CUDA:0 is host memory and
// kernels are the C renderer's output in a host dialect, so everything but the vendor driver
// and compiler runs here: contexts, the caching allocator, transfers, runtime::Program slots and
// two-phase scratch, the launch helper, eager ops, rune::jit, donation and checks.
// The donation and check suite of tests/runtime runs here too, on CUDA:0.
#include <bit>
#include <cstring>
#include <random>

#include "fake_driver.h"
#include "runtime/gpu/context.h"
#include "runtime/test_donation_checks.cpp"
#include "test_util.h"

namespace {

// Installed before any test (and before anything asks for CUDA).
const bool installed = (fake_gpu::install_fake_cuda(), true);

INSTANTIATE_TEST_SUITE_P(FakeGpu, OnDevice, testing::Values("CUDA:0"),
                         [](const auto&) { return std::string("fake_cuda"); });

const nx::Device kCuda{runtime::DeviceKind::CUDA, 0};

using rt::bits;  // the exact bits of any dtype's values (tests/test_util.h)

// The fake device's threads are fibers (fake_fibers.h): a barrier returns only once every
// thread has reached it, each thread resumes with its own id re-bound, and a barrier that can
// never complete aborts with a message rather than hanging.
TEST(FakeGpuFibers, BarriersOrderEveryThreadsSteps) {
  fake_gpu::Fibers fibers;
  for (unsigned n : {1u, 8u, 256u}) {
    std::vector<int> step(n, 0);
    unsigned bound = ~0u;  // the "thread-local" id: re-bound on every resume
    bool ordered = true;
    fibers.run(
        n,
        [&](unsigned t) {
          for (int round = 1; round <= 3; ++round) {
            step[t] = round;
            fibers.wait();
            // Past the barrier, every thread has finished this round's step.
            for (unsigned u = 0; u < n; ++u) ordered &= step[u] >= round;
            ordered &= bound == t && fibers.current() == t;
            fibers.wait();
          }
        },
        [&](unsigned t) { bound = t; });
    EXPECT_TRUE(ordered) << n << " fibers";
    for (unsigned t = 0; t < n; ++t) EXPECT_EQ(step[t], 3) << t;
  }
}

TEST(FakeGpuFibersDeathTest, ABarrierThatCannotCompleteAborts) {
  EXPECT_DEATH(
      {
        fake_gpu::Fibers fibers;
        fibers.run(
            4,
            [&](unsigned t) {
              if (t != 2) fibers.wait();  // thread 2 finishes without reaching the barrier
            },
            [](unsigned) {});
      },
      "a barrier can no longer complete \\(1 of 4 threads finished, 3 waiting\\)");
}

// The fake fills its table through the rows of runtime/gpu/driver_table.def, as the CUDA and HIP
// loaders do: every entry is set, the graphs' included.
TEST(FakeGpu, EveryDriverEntryIsFilled) {
  const runtime::gpu::DriverTable& t = fake_gpu::table();
#define RUNE_DRIVER_ENTRY(field, need, ...) EXPECT_NE(t.field, nullptr) << #field;
#include "runtime/gpu/driver_table.def"
#undef RUNE_DRIVER_ENTRY
  EXPECT_TRUE(t.has_graphs());
}

TEST(FakeGpu, DeviceFactsAndCountErrors) {
  ASSERT_TRUE(installed);
  auto& c = runtime::gpu::context(kCuda, "test");
  EXPECT_EQ(c.info().arch, "sm_90");
  EXPECT_EQ(c.info().multiprocessors, 2);
  EXPECT_EQ(message_of([] { nx::place(nx::scalar(nx::float32, 1), "CUDA:5"); }),
            "nx::place: device CUDA:5 is unavailable: this machine has 1 CUDA device (CUDA:0)");
}

// rsqrt, erfc, isinf and isfinite (decompositions into primitives every backend prints) give the
// same bits on CPU, CPU:1 and CUDA:0, eagerly and under rune::jit, for every float dtype, on
// random values, the pieces' ends of erfc and the special values.
TEST(FakeGpu, NewPrimitivesAreBitIdenticalOnEveryDevice) {
  std::vector<double> v = {0.0, -0.0, INFINITY, -INFINITY, NAN,  1e-310, 1e-40, 3e38,
                           1.0, 4.0,  0.5,      -0.5,      1.25, 2.25,   3.5,   5.0,
                           7.0, 10.0, 10.05,    14.5,      20.5, 26.6};
  auto r = nx::to_vector<double>(nx::rand(nx::key(21), nx::float64, {500}) * 60.0 - 30.0);
  v.insert(v.end(), r.begin(), r.end());
  auto fn = [](const Tensor& x) {
    return std::vector<Tensor>{nx::rsqrt(nx::abs(x)), nx::erfc(x), nx::isinf(x), nx::isfinite(x)};
  };
  auto jfn = rune::jit(fn);
  for (auto t : {nx::float64, nx::float32, nx::float16, nx::bfloat16}) {
    auto host = nx::create(t, {static_cast<int64_t>(v.size())}, v);
    auto want = fn(host);
    for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
      auto x = nx::place(host, dev);
      auto eager = fn(x), compiled = jfn(x);
      for (size_t k = 0; k < want.size(); ++k) {
        SCOPED_TRACE(std::string(ir::name(t)) + " on " + dev + ", output " + std::to_string(k));
        EXPECT_EQ(eager[k].device().name(), dev);
        EXPECT_EQ(bits(eager[k]), bits(want[k]));
        EXPECT_EQ(bits(compiled[k]), bits(want[k]));
      }
    }
  }
}

// float32 erf (one polynomial, its coefficients picked per element from three pieces) and sin /
// cos / tan (an integer Payne-Hanek reduction over the whole range) give the same bits on CPU,
// CPU:1 and CUDA:0, eagerly and under rune::jit, for float32 and the 16-bit floats that compute
// at float32: at the pieces' ends, where erf rounds to 1, at the float32 closest to a multiple of
// pi/2 (16367173 * 2^72), at huge arguments, the special values and random bit patterns.
TEST(FakeGpu, Float32ErfAndTrigAreBitIdenticalOnEveryDevice) {
  std::vector<double> v = {0.0,
                           -0.0,
                           INFINITY,
                           -INFINITY,
                           NAN,
                           1e-40,
                           1e-8,
                           0.7853981,
                           0.7853982,
                           1.5707964,
                           1.25,
                           1.2499999,
                           2.375,
                           2.3749998,
                           3.92,
                           3.9199998,
                           -3.9192,
                           4.5,
                           1e10,
                           -3e9,
                           3.4e38,
                           123456.789,
                           16367173.0 * 0x1p72,
                           -7.0,
                           1e5};
  auto r = nx::to_vector<double>(nx::rand(nx::key(22), nx::float64, {300}) * 20.0 - 10.0);
  v.insert(v.end(), r.begin(), r.end());
  std::vector<uint32_t> pattern(300);
  std::mt19937 gen(5);
  for (auto& p : pattern) p = static_cast<uint32_t>(gen());
  for (uint32_t p : pattern) v.push_back(std::bit_cast<float>(p));
  auto fn = [](const Tensor& x) {
    return std::vector<Tensor>{nx::erf(x), nx::sin(x), nx::cos(x), nx::tan(x)};
  };
  auto jfn = rune::jit(fn);
  for (auto t : {nx::float32, nx::float16, nx::bfloat16}) {
    auto host = nx::create(t, {static_cast<int64_t>(v.size())}, v);
    auto want = fn(host);
    for (const char* dev : {"CPU", "CPU:1", "CUDA:0"}) {
      auto x = nx::place(host, dev);
      auto eager = fn(x), compiled = jfn(x);
      for (size_t k = 0; k < want.size(); ++k) {
        SCOPED_TRACE(std::string(ir::name(t)) + " on " + dev + ", output " + std::to_string(k));
        EXPECT_EQ(eager[k].device().name(), dev);
        EXPECT_EQ(bits(eager[k]), bits(want[k]));
        EXPECT_EQ(bits(compiled[k]), bits(want[k]));
      }
    }
  }
}

TEST(FakeGpu, PlaceRoundTripsIncludingStridedSources) {
  auto x = nx::reshape(nx::arange(nx::float32, 0, 12, 1), {3, 4});
  auto t = nx::transpose(x);  // strided on the host
  auto g = nx::place(t, kCuda);
  EXPECT_EQ(g.device().name(), "CUDA:0");
  EXPECT_TRUE(g.impl().view.is_contiguous());
  EXPECT_EQ(bits(g), bits(t));
  // Strided on the device: made contiguous there, then copied back.
  auto gt = nx::transpose(g);
  EXPECT_EQ(bits(nx::place(gt, "CPU")), bits(x));
  // Large enough for pinned staging (> 64 KiB), to the host and to CPU:1.
  auto big = nx::rand(nx::key(3), nx::float32, {100000});
  auto gb = nx::place(big, kCuda);
  EXPECT_EQ(bits(gb), bits(big));
  EXPECT_EQ(bits(nx::place(gb, "CPU:1")), bits(big));
}

TEST(FakeGpu, EagerOpsMatchTheHostBitForBit) {
  auto a = nx::rand(nx::key(1), nx::float32, {1000});
  auto b = nx::rand(nx::key(2), nx::float32, {1000});
  auto ga = nx::place(a, kCuda), gb = nx::place(b, kCuda);
  EXPECT_EQ(bits(nx::exp(ga) * gb + 2.0), bits(nx::exp(a) * b + 2.0));
  EXPECT_EQ(bits(nx::sin(ga / (gb + 1.0))), bits(nx::sin(a / (b + 1.0))));
  auto m = nx::reshape(a, {10, 100});
  auto gm = nx::place(m, kCuda);
  EXPECT_EQ(bits(nx::sum(gm, {1})), bits(nx::sum(m, {1})));
  EXPECT_EQ(bits(nx::max(gm, {0})), bits(nx::max(m, {0})));
  EXPECT_EQ(bits(gm + nx::place(nx::sum(m, {0}), kCuda)), bits(m + nx::sum(m, {0})));  // broadcast
  EXPECT_EQ(nx::sum(gm).device().name(), "CUDA:0");
}

TEST(FakeGpu, MultiBlockReductionsUseScratch) {
  auto x = nx::rand(nx::key(4), nx::float32, {200000});  // > kReduceBlock: two phases
  auto gx = nx::place(x, kCuda);
  EXPECT_EQ(bits(nx::sum(gx)), bits(nx::sum(x)));
  EXPECT_EQ(bits(nx::mean(gx * gx)), bits(nx::mean(x * x)));
}

// Contiguous reductions run their 8 lanes on 8 threads joined by the lane exchange (the fake
// runs 8 host threads per launch): every dtype, a length that is not a multiple of 8, one block
// and several, give the host's bits.
TEST(FakeGpu, LaneThreadReductionsMatchTheHostInEveryDtype) {
  auto base = nx::randn(nx::key(7), nx::float32, {3, 1037}) * 20.0;
  auto big = nx::randn(nx::key(8), nx::float32, {140003});
  for (ir::DType t :
       {ir::DType::Float32, ir::DType::Float64, ir::DType::Float16, ir::DType::BFloat16,
        ir::DType::Int32, ir::DType::Int64, ir::DType::UInt8, ir::DType::Bool}) {
    SCOPED_TRACE(std::string(ir::name(t)));
    auto x = nx::cast(base, t), y = nx::cast(big, t);
    auto gx = nx::place(x, kCuda), gy = nx::place(y, kCuda);
    EXPECT_EQ(bits(nx::sum(gx, {1})), bits(nx::sum(x, {1})));
    EXPECT_EQ(bits(nx::max(gx, {1})), bits(nx::max(x, {1})));
    EXPECT_EQ(bits(nx::min(gx, {1}, true)), bits(nx::min(x, {1}, true)));
    EXPECT_EQ(bits(nx::sum(gy)), bits(nx::sum(y)));
    EXPECT_EQ(bits(nx::max(gy)), bits(nx::max(y)));
  }
}

// Elementwise kernels read and write 4 outputs as vectors where every load is the output's own
// index from an offset that is a multiple of 4 (or one element): every dtype, lengths with a
// tail, slices at offsets 4 (vectors) and 1 (scalar path), broadcast scalars, bool results.
TEST(FakeGpu, VectorLoadsMatchTheHostInEveryDtype) {
  auto a = nx::randn(nx::key(9), nx::float32, {1031}) * 30.0;
  auto b = nx::randn(nx::key(10), nx::float32, {1031}) * 30.0;
  for (ir::DType t :
       {ir::DType::Float32, ir::DType::Float64, ir::DType::Float16, ir::DType::BFloat16,
        ir::DType::Int32, ir::DType::Int64, ir::DType::UInt8, ir::DType::Bool}) {
    SCOPED_TRACE(std::string(ir::name(t)));
    auto x = nx::cast(a, t), y = nx::cast(b, t);
    auto gx = nx::place(x, kCuda), gy = nx::place(y, kCuda);
    EXPECT_EQ(bits(nx::maximum(gx, gy)), bits(nx::maximum(x, y)));
    EXPECT_EQ(bits(nx::less(gx, gy)), bits(nx::less(x, y)));
    auto s = nx::slice(x, {{4, 1024}}), gs = nx::slice(gx, {{4, 1024}});
    auto u = nx::slice(y, {{1, 1021}}), gu = nx::slice(gy, {{1, 1021}});
    EXPECT_EQ(bits(nx::where(nx::less(gs, gu), gs, nx::slice(gy, {{0, 1020}}))),
              bits(nx::where(nx::less(s, u), s, nx::slice(y, {{0, 1020}}))));
    auto one = nx::slice(x, {{7, 8}}), gone = nx::slice(gx, {{7, 8}});
    EXPECT_EQ(bits(nx::maximum(gx, nx::broadcast_to(gone, {1031}))),
              bits(nx::maximum(x, nx::broadcast_to(one, {1031}))));
  }
  EXPECT_EQ(bits(nx::exp(nx::place(a, kCuda) * 0.01)), bits(nx::exp(a * 0.01)));
}

// Matrix products take their elementwise consumers as epilogues on the GPU too (one kernel),
// with the host's bits.
TEST(FakeGpu, MatmulEpiloguesFuseAndMatchTheHost) {
  auto x = nx::randn(nx::key(11), nx::float32, {33, 70});
  auto w = nx::randn(nx::key(12), nx::float32, {70, 20});
  auto b = nx::randn(nx::key(13), nx::float32, {20});
  auto layer = rune::jit([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return nx::relu(nx::matmul(x, w) + b);
  });
  auto host = layer(x, w, b);
  int launches = fake_gpu::counters().launches.load();
  auto dev = layer(nx::place(x, kCuda), nx::place(w, kCuda), nx::place(b, kCuda));
  EXPECT_EQ(fake_gpu::counters().launches.load() - launches, 1);  // product and epilogue
  EXPECT_EQ(dev.device().name(), "CUDA:0");
  EXPECT_EQ(bits(dev), bits(host));
}

TEST(FakeGpu, CompiledCallsBindDeviceArgumentsAndKeepResultsThere) {
  auto f = rune::jit([](const Tensor& x, const Tensor& y) {
    return std::make_pair(nx::tanh(x * y + 1.0), nx::sum(x - y));
  });
  auto x = nx::rand(nx::key(5), nx::float64, {4, 5});
  auto y = nx::rand(nx::key(6), nx::float64, {4, 5});
  auto [hr, hs] = f(x, y);
  auto gx = nx::place(x, kCuda), gy = nx::place(y, kCuda);
  int before = fake_gpu::counters().htod.load();
  auto [gr, gs] = f(gx, gy);
  EXPECT_EQ(fake_gpu::counters().htod.load(), before);  // arguments bound without a copy
  EXPECT_EQ(gr.device().name(), "CUDA:0");
  EXPECT_EQ(gs.device().name(), "CUDA:0");
  EXPECT_EQ(bits(gr), bits(hr));
  EXPECT_EQ(bits(gs), bits(hs));
  EXPECT_THROW(f(gx, y), std::invalid_argument);  // two devices
}

TEST(FakeGpu, CapturedHostConstantsMoveWithTheProgram) {
  auto w = nx::create(nx::float32, {3}, {1, 2, 3});
  auto f = rune::jit([&](const Tensor& x) { return x * w; });
  auto g = nx::place(nx::create(nx::float32, {3}, {2, 2, 2}), kCuda);
  EXPECT_EQ(nx::to_vector<float>(f(g)), (std::vector<float>{2, 4, 6}));
}

TEST(FakeGpu, TrainingStepMatchesTheHost) {
  auto loss = [](const Tensor& w, const Tensor& x, const Tensor& y) {
    auto d = nx::matmul(x, w) - y;
    return nx::mean(d * d);
  };
  auto step = rune::jit([&](const Tensor& w, const Tensor& x, const Tensor& y) {
    auto [l, g] = rune::value_and_grad([&](const Tensor& p) { return loss(p, x, y); }, w);
    return std::make_pair(w - g * 0.1, l);
  });
  auto w = nx::rand(nx::key(7), nx::float32, {8, 2});
  auto x = nx::rand(nx::key(8), nx::float32, {16, 8});
  auto y = nx::rand(nx::key(9), nx::float32, {16, 2});
  auto [hw, hl] = step(w, x, y);
  auto [gw, gl] = step(nx::place(w, kCuda), nx::place(x, kCuda), nx::place(y, kCuda));
  EXPECT_EQ(bits(gw), bits(hw));
  EXPECT_EQ(bits(gl), bits(hl));
}

TEST(FakeGpu, TheCachingAllocatorStopsAllocatingInALoop) {
  auto g = nx::place(nx::rand(nx::key(10), nx::float32, {4096}), kCuda);
  auto f = rune::jit([](const Tensor& x) { return nx::sum(nx::exp(x) * 0.5); });
  for (int i = 0; i < 3; ++i) nx::wait(f(g) + g);
  int allocs = fake_gpu::counters().mem_alloc.load();
  for (int i = 0; i < 50; ++i) nx::wait(f(g) + g);
  EXPECT_EQ(fake_gpu::counters().mem_alloc.load(), allocs);
  auto st = runtime::device_allocator(kCuda).stats();
  EXPECT_GT(st.hits, 100u);
}

TEST(FakeGpu, AFailingCheckRaisesAtTheNextWaitAndPoisonsResults) {
  auto step = rune::jit([](const Tensor& x) {
    nx::check(nx::less(x, nx::scalar_like(x, 5)), x,
              [](const std::vector<int64_t>& i, const Tensor&) {
                return std::out_of_range("too big at " + std::to_string(i[0]));
              });
    return x + 1.0;
  });
  auto x = nx::place(nx::create(nx::float64, {3}, {0, 2, 1}), kCuda);
  std::vector<Tensor> history;
  for (int i = 0; i < 3; ++i) history.push_back(x = step(x));  // all pass: 3 4 ... x[1] = 5
  history.push_back(x = step(x));                              // fails at index 1 (x[1] == 5)
  EXPECT_EQ(message_of([&] { nx::wait(kCuda); }), "too big at 1");
  EXPECT_NO_THROW(nx::wait(kCuda));
  EXPECT_EQ(message_of([&] { nx::to_vector<double>(history[3]); }), "too big at 1");
  EXPECT_EQ(nx::to_vector<double>(history[2]), (std::vector<double>{3, 5, 4}));
}

TEST(FakeGpu, EventsOnADeviceStreamWaitForTheDevice) {
  runtime::Stream* s = runtime::stream_for(kCuda);
  bool ran = false;
  s->enqueue([&] { ran = true; });  // a host task: runs at the next wait
  runtime::Event e;
  e.record(s);
  EXPECT_FALSE(e.done());
  int syncs = fake_gpu::counters().syncs.load();
  e.wait();
  EXPECT_TRUE(e.done());
  EXPECT_TRUE(ran);
  EXPECT_GT(fake_gpu::counters().syncs.load(), syncs);
}

}  // namespace
