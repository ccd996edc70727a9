// The GPU runtime without a device: asking for CUDA:0 or HIP:0 raises a clear error naming the
// entry point, the device and what is missing, and leaves everything as it was. Also the
// driver-loading helper and the launch geometry, which need no device.
#include <gtest/gtest.h>

#include "codegen/compile.h"
#include "runtime/gpu/context.h"
#include "runtime/gpu/driver.h"
#include "runtime/gpu/geometry.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using rt::message_of;

using nx::Tensor;
using runtime::Device;
using runtime::DeviceKind;

const Device kCuda{DeviceKind::CUDA, 0};
const Device kHip{DeviceKind::HIP, 0};

bool available(Device d) { return runtime::gpu::unavailable_reason(d).empty(); }

TEST(NoDevice, PlaceNamesTheApiTheDeviceAndWhatIsMissing) {
  if (available(kCuda)) GTEST_SKIP() << "this machine has a CUDA device";
  auto x = nx::create(nx::float32, {3}, {1, 2, 3});
  std::string why = runtime::gpu::unavailable_reason(kCuda);
  EXPECT_EQ(message_of([&] { nx::place(x, "CUDA:0"); }),
            "nx::place: device CUDA:0 is unavailable: " + why);
  if (!runtime::gpu::driver_for(DeviceKind::CUDA).table) {  // no libcuda here
    EXPECT_EQ(why, "libcuda.so.1 cannot be loaded (no NVIDIA driver on this machine)");
  }
  // The same message again (the reason is kept), and x is as it was.
  EXPECT_EQ(message_of([&] {
              nx::place(x, Device{DeviceKind::CUDA, 0});
            }),
            "nx::place: device CUDA:0 is unavailable: " + why);
  EXPECT_EQ(x.device().name(), "CPU");
  EXPECT_EQ(nx::to_vector<float>(x), (std::vector<float>{1, 2, 3}));
}

TEST(NoDevice, HipToo) {
  if (available(kHip)) GTEST_SKIP() << "this machine has a HIP device";
  auto x = nx::create(nx::float32, {2}, {1, 2});
  std::string e = message_of([&] { nx::place(x, "HIP:0"); });
  RecordProperty("message", e);
  EXPECT_EQ(e.rfind("nx::place: device HIP:0 is unavailable: ", 0), 0u) << e;
  EXPECT_GT(e.size(), std::string("nx::place: device HIP:0 is unavailable: ").size());
  EXPECT_EQ(nx::to_vector<float>(x), (std::vector<float>{1, 2}));
}

TEST(NoDevice, AFailedPlaceConsumesNoDonation) {
  if (available(kCuda)) GTEST_SKIP() << "this machine has a CUDA device";
  auto x = nx::create(nx::float64, {2}, {1, 2});
  auto d = nx::donate(x);
  EXPECT_NE(message_of([&] { nx::place(d, "CUDA:0"); }), "no error");
  EXPECT_EQ(nx::to_vector<double>(x), (std::vector<double>{1, 2}));  // still alive
}

TEST(NoDevice, RuntimeWaitOpsAndJitNameTheirApi) {
  if (available(kCuda)) GTEST_SKIP() << "this machine has a CUDA device";
  std::string why = runtime::gpu::unavailable_reason(kCuda);
  EXPECT_EQ(message_of([&] { runtime::allocate(kCuda, 16); }),
            "runtime::allocate: device CUDA:0 is unavailable: " + why);
  EXPECT_EQ(message_of([&] { runtime::stream_for(kCuda); }),
            "runtime: device CUDA:0 is unavailable: " + why);
  EXPECT_EQ(message_of([&] { nx::wait(kCuda); }), "nx::wait: device CUDA:0 is unavailable: " + why);
  // A tensor claiming to live on CUDA:0 (no such tensor can be made here: this one is forged
  // from host memory) cannot be used by an op or a compiled call.
  auto host = nx::create(nx::float32, {3}, {1, 2, 3});
  auto forged = nx::make_concrete(nx::float32, host.impl().buffer, host.impl().view, kCuda);
  EXPECT_EQ(message_of([&] { nx::exp(forged); }), "nx::exp: device CUDA:0 is unavailable: " + why);
  EXPECT_EQ(message_of([&] { forged + 1.0; }), "nx::add: device CUDA:0 is unavailable: " + why);
  auto f = rune::jit([](const Tensor& a) { return a * 2.0; });
  EXPECT_EQ(message_of([&] { f(forged); }), "rune::jit: device CUDA:0 is unavailable: " + why);
  EXPECT_EQ(f.cached_programs(), 0u);  // a failed call installs nothing
  EXPECT_EQ(nx::to_vector<float>(f(host)), (std::vector<float>{2, 4, 6}));  // CPU still works
}

TEST(DriverLoading, ReportsEveryNameTriedAndMissingSymbols) {
  auto none = runtime::gpu::Library::open_first({"librune_no_such_driver.so.1", "librune_nope.so"});
  EXPECT_EQ(none.handle, nullptr);
  EXPECT_NE(none.tried.find("librune_no_such_driver.so.1"), std::string::npos);
  EXPECT_NE(none.tried.find("librune_nope.so"), std::string::npos);
  auto libm = runtime::gpu::Library::open_first({"librune_no_such_driver.so.1", "libm.so.6"});
  ASSERT_NE(libm.handle, nullptr);
  EXPECT_EQ(libm.name, "libm.so.6");
  std::string missing;
  EXPECT_NE(libm.symbol("cos", &missing), nullptr);
  EXPECT_EQ(missing, "");
  EXPECT_EQ(libm.symbol("cuInit", &missing), nullptr);
  EXPECT_EQ(libm.symbol("hipInit", &missing), nullptr);
  EXPECT_EQ(missing, "symbol cuInit not found in libm.so.6, symbol hipInit not found in libm.so.6");
}

// The loaders' table expansion (runtime/gpu/symbol_table.inc) over a small .def.
struct LibmTable {
#define RUNE_GPU_SYMBOLS "gpu_runtime/symbol_table_test.def"
#include "runtime/gpu/symbol_table.inc"
};

TEST(DriverLoading, ATableNamesEveryMissingSymbol) {
  auto libm = runtime::gpu::Library::open_first({"libm.so.6"});
  ASSERT_NE(libm.handle, nullptr);
  LibmTable t;
  bool optional = true;
  EXPECT_EQ(runtime::gpu::bind_table(libm, t, "CUDA driver", &optional),
            "libm.so.6 is not a usable CUDA driver: symbol cuInit_v9 (or cuInit) not found in "
            "libm.so.6");
  EXPECT_FALSE(optional);  // cuGraphLaunch: the optional rows are absent together
  ASSERT_NE(t.Cos, nullptr);
  ASSERT_NE(t.Sqrt, nullptr);  // the alternative resolved
  EXPECT_EQ(t.Cos(0.0), 1.0);
  EXPECT_EQ(t.Sqrt(4.0), 2.0);
  EXPECT_EQ(t.Init, nullptr);
  EXPECT_EQ(t.GraphLaunch, nullptr);
}

TEST(DriverLoading, ATableOrAReasonNeverBoth) {
  for (auto k : {DeviceKind::CUDA, DeviceKind::HIP}) {
    const auto& d = runtime::gpu::driver_for(k);
    EXPECT_NE(d.table == nullptr, d.error.empty());
    if (d.table) {
      EXPECT_STREQ(d.table->api, k == DeviceKind::CUDA ? "CUDA" : "HIP");
      EXPECT_NE(d.table->launch, nullptr);
      EXPECT_NE(d.table->error_string, nullptr);
    }
  }
}

TEST(LaunchGeometry, GridStrideSizedToTheDevice) {
  using runtime::gpu::launch_geometry;
  using G = runtime::gpu::LaunchGeometry;
  EXPECT_EQ(launch_geometry(0, 132, 32), (G{0, 0}));
  EXPECT_EQ(launch_geometry(3, 132, 32), (G{1, 32}));  // one warp
  EXPECT_EQ(launch_geometry(33, 132, 32), (G{1, 64}));
  EXPECT_EQ(launch_geometry(3, 104, 64), (G{1, 64}));  // an AMD wavefront
  EXPECT_EQ(launch_geometry(256, 132, 32), (G{1, 256}));
  EXPECT_EQ(launch_geometry(257, 132, 32), (G{2, 256}));
  EXPECT_EQ(launch_geometry(100000, 132, 32), (G{391, 256}));
  EXPECT_EQ(launch_geometry(int64_t{1} << 28, 132, 32), (G{1056, 256}));  // 8 per SM
  EXPECT_EQ(launch_geometry(int64_t{1} << 40, 1, 32), (G{8, 256}));
}

}  // namespace
