// CUB sorts on CUDA (runtime/cuda/cub_sort.h, docs/sort.md) without a GPU: the module built
// with nvcc loads and its entry points fail clearly where there is no driver; where the module
// is looked for; which path a sort takes (a fake driver, HIP: the rank sort, still the host's
// bits); the library steps of a GPU program and the CUB step's plumbing, on the fake CUDA driver
// with a host stand-in for the module. The module's sorts themselves need a device:
// test_gpu_device.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "fake_driver.h"
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
using runtime::DeviceKind;
namespace cu = runtime::cuda;

const bool installed = (fake_gpu::install_fake_cuda(), true);
const nx::Device kCuda{DeviceKind::CUDA, 0};

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

bool machine_has_libcuda() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

TEST(CubModule, IsLookedForWhereTheEnvironmentAndTheBuildSay) {
  auto off = cu::cub_module_source("0", "/build/librune_cub.so");
  EXPECT_EQ(off.path, "");
  EXPECT_EQ(off.why, "RUNE_CUB_MODULE=0 turns it off");
  EXPECT_EQ(cu::cub_module_source("off", "").path, "");
  auto env = cu::cub_module_source("/opt/x/librune_cub.so", "/build/librune_cub.so");
  EXPECT_EQ(env.path, "/opt/x/librune_cub.so");
  EXPECT_TRUE(env.required);
  auto none = cu::cub_module_source(nullptr, "");
  EXPECT_EQ(none.path, "");
  EXPECT_TRUE(has(none.why, "built without it")) << none.why;
  auto gone = cu::cub_module_source("", "/no/such/dir/librune_cub.so");  // empty env: unset
  EXPECT_EQ(gone.path, "");
  EXPECT_TRUE(has(gone.why, "/no/such/dir/librune_cub.so does not exist")) << gone.why;
  if (RUNE_EXPECT_CUB_MODULE) {
    auto built = cu::cub_module_source(nullptr, cu::built_cub_module_path());
    EXPECT_EQ(built.path, cu::built_cub_module_path());
  }
}

TEST(CubModule, WasBuiltAndLoads) {
  if (!RUNE_EXPECT_CUB_MODULE) GTEST_SKIP() << "rune was built without the CUB module (no nvcc)";
  std::string path = cu::built_cub_module_path();
  ASSERT_FALSE(path.empty());
  cu::CubModule m = cu::load_cub_module(path);
  ASSERT_NE(m.api, nullptr);
  EXPECT_EQ(m.path, path);
  EXPECT_EQ(m.api->version, RUNE_CUB_API_VERSION);
  std::string build = m.api->build;
  EXPECT_TRUE(has(build, "CUB 3.") || has(build, "CUB 2.")) << build;
  EXPECT_TRUE(has(build, "sm_90")) << build;
  // Argument errors need no device.
  size_t bytes = 7;
  int rc = m.api->scratch_bytes(99, 0, 1, 10, &bytes);
  EXPECT_EQ(rc, RUNE_CUB_ERROR_BAD_DTYPE);
  EXPECT_STREQ(m.api->error_string(rc), "rune_cub: unknown element format");
  rc = m.api->scratch_bytes(RUNE_CUB_F32, 0, -1, 10, &bytes);
  EXPECT_EQ(rc, RUNE_CUB_ERROR_BAD_SHAPE);
}

TEST(CubModule, WithoutADriverItsEntryPointsFailClearly) {
  if (!RUNE_EXPECT_CUB_MODULE) GTEST_SKIP() << "rune was built without the CUB module (no nvcc)";
  if (machine_has_libcuda()) GTEST_SKIP() << "this machine has a CUDA driver";
  cu::CubModule m = cu::load_cub_module(cu::built_cub_module_path());
  size_t bytes = 7;
  int rc = m.api->scratch_bytes(RUNE_CUB_F32, 1, 4, 1000, &bytes);
  EXPECT_EQ(rc, RUNE_CUB_ERROR_NO_DRIVER);
  EXPECT_STREQ(m.api->error_string(rc),
               "rune_cub: no CUDA driver on this machine (libcuda.so.1 is not installed)");
  // No crash on a sort either (nothing is touched: the driver check comes first).
  rc = m.api->sort(RUNE_CUB_F64, 0, nullptr, nullptr, 4, 1000, nullptr, 0, nullptr);
  EXPECT_EQ(rc, RUNE_CUB_ERROR_NO_DRIVER);
  // CUDA's own codes are named too.
  EXPECT_STREQ(m.api->error_string(2), "cudaErrorMemoryAllocation: out of memory");
}

TEST(CubModule, LoadFailuresNameThePathAndTheReason) {
  std::string e = message_of([] { cu::load_cub_module("/no/such/dir/librune_cub.so"); });
  EXPECT_TRUE(has(e,
                  "rune: the CUB sort module /no/such/dir/librune_cub.so cannot be loaded: "
                  "/no/such/dir/librune_cub.so: cannot open shared object file"))
      << e;
  e = message_of([] { cu::load_cub_module("libm.so.6"); });
  EXPECT_TRUE(has(e,
                  "rune: the CUB sort module libm.so.6 cannot be loaded: symbol rune_cub_api "
                  "not found"))
      << e;
}

TEST(SortPath, FakeDriversAndHipUseTheRankSort) {
  ASSERT_TRUE(installed);
  std::string why;
  const auto& fake = *runtime::gpu::driver_for(DeviceKind::CUDA).table;
  EXPECT_EQ(cu::cub_module_for(DeviceKind::CUDA, fake, &why), nullptr);
  EXPECT_EQ(why, "the CUDA driver is fake (host), not libcuda");
  EXPECT_EQ(cu::cub_module_for(DeviceKind::HIP, fake, &why), nullptr);
  EXPECT_EQ(why, "not a CUDA device");
}

TEST(SortPath, TheRealDriverGetsTheModule) {
  if (!RUNE_EXPECT_CUB_MODULE) GTEST_SKIP() << "rune was built without the CUB module (no nvcc)";
  if (std::getenv("RUNE_CUB_MODULE")) GTEST_SKIP() << "RUNE_CUB_MODULE is set";
  runtime::gpu::DriverTable real;  // only its name matters for the choice
  real.api = "CUDA";
  real.library = "libcuda.so.1";
  std::string why;
  const cu::CubModule* m = cu::cub_module_for(DeviceKind::CUDA, real, &why);
  ASSERT_NE(m, nullptr) << why;
  EXPECT_EQ(m->path, cu::built_cub_module_path());
  EXPECT_EQ(cu::cub_module_for(DeviceKind::CUDA, real, &why), m);  // loaded once
}

// rows x len values of dtype t with every case of the order where t has it: NaN, +-inf, -0 and
// +0, many duplicates, negatives.
Tensor awkward(nx::DType t, int64_t rows, int64_t len, uint64_t seed) {
  return gpu_sort_test::sort_input(t, rows, len, seed, /*span=*/41, /*scale_exp=*/1,
                                   /*special_every=*/4);
}

// The bits of a result, read back as float64 (every dtype converts exactly).
std::vector<uint64_t> raw(const Tensor& t) {
  auto d = nx::to_array(nx::place(t, nx::Device::cpu()));
  std::vector<uint64_t> b(d.size());
  std::memcpy(b.data(), d.data(), d.size() * 8);
  return b;
}

TEST(SortPath, OnTheFakeDriverTheRankSortGivesTheHostsBits) {
  ASSERT_TRUE(installed);
  auto sort_last = rune::jit([](const Tensor& x) { return nx::sort(x); });
  for (nx::DType t : {nx::float32, nx::float64, nx::float16, nx::bfloat16, nx::int32, nx::int64,
                      nx::uint8, nx::bool_}) {
    SCOPED_TRACE(std::string(ir::name(t)));
    Tensor x = awkward(t, 6, 97, 1 + static_cast<int>(t));
    Tensor g = nx::place(x, kCuda);
    EXPECT_EQ(raw(nx::sort(g)), raw(nx::sort(x)));
    EXPECT_EQ(raw(nx::argsort(g)), raw(nx::argsort(x)));
    EXPECT_EQ(raw(nx::argsort(g, 0)), raw(nx::argsort(x, 0)));
    EXPECT_EQ(raw(sort_last(g)), raw(nx::sort(x)));
    EXPECT_EQ(nx::sort(g).device(), kCuda);
  }
  Tensor empty = nx::zeros(nx::float32, {0, 7});
  EXPECT_EQ(nx::sort(nx::place(empty, kCuda)).shape(), (nx::Shape{0, 7}));
  EXPECT_EQ(nx::argsort(nx::place(empty, kCuda), 0).shape(), (nx::Shape{0, 7}));
}

// A host stand-in for the module: records the call and argsorts / sorts float32 rows on the
// host (the fake driver's device memory is host memory).
struct Call {
  int dtype = -1, argsort = -1;
  const void* in = nullptr;
  void *out = nullptr, *scratch = nullptr, *stream = nullptr;
  long long rows = -1, len = -1;
  size_t scratch_bytes = 0;
  int fail = 0;  // the code the next sort returns
};
Call& last_call() {
  static Call c;
  return c;
}
int stand_in_scratch(int, int, long long rows, long long len, size_t* bytes) {
  *bytes = static_cast<size_t>(rows * len * 24 + 100);
  return 0;
}
int stand_in_sort(int dtype, int argsort, const void* in, void* out, long long rows, long long len,
                  void* scratch, size_t scratch_bytes, void* stream) {
  Call& c = last_call();
  c.dtype = dtype, c.argsort = argsort, c.in = in, c.out = out, c.rows = rows, c.len = len;
  c.scratch = scratch, c.scratch_bytes = scratch_bytes, c.stream = stream;
  if (c.fail) return c.fail;
  const float* x = static_cast<const float*>(in);
  for (long long r = 0; r < rows; ++r) {
    std::vector<long long> p(static_cast<size_t>(len));
    for (long long i = 0; i < len; ++i) p[i] = i;
    std::stable_sort(p.begin(), p.end(),
                     [&](long long a, long long b) { return x[r * len + a] < x[r * len + b]; });
    for (long long i = 0; i < len; ++i) {
      if (argsort)
        static_cast<long long*>(out)[r * len + i] = p[i];
      else
        static_cast<float*>(out)[r * len + i] = x[r * len + p[i]];
    }
  }
  return 0;
}
const char* stand_in_error(int code) { return code == 2 ? "stand-in: out of memory" : "?"; }

TEST(CubStep, AHostStepQueuesTheModulesSortWithTheProgramsBuffers) {
  ASSERT_TRUE(installed);
  static const RuneCubApi api = {RUNE_CUB_API_VERSION, "host stand-in", stand_in_scratch,
                                 stand_in_sort, stand_in_error};
  const cu::CubModule m{"stand-in.so", &api};
  auto& c = runtime::gpu::context(kCuda, "test");
  // An argsort of 2 rows of 5 float32 read from element 3 of the input.
  int64_t scratch = 0;
  runtime::Step st = cu::cub_sort_step(c, m, true, ir::DType::Float32, 3, 2, 5, &scratch);
  EXPECT_EQ(scratch, 2 * 5 * 24 + 100);
  EXPECT_EQ(st.items, 10);
  EXPECT_EQ(st.kind, runtime::Step::Kind::Library);
  EXPECT_TRUE(static_cast<bool>(st.queue));
  EXPECT_EQ(st.name, "cub_argsort_float32_2x5");
  runtime::Program p;
  p.device = kCuda;
  p.n_inputs = 1;
  p.slot_bytes = {-1, 10 * 8, scratch};  // input, output, scratch (a temporary)
  p.output_slots = {1};
  st.slots = {1, 0, 2};
  p.steps.push_back(st);
  p.finalize();
  Tensor x =
      nx::place(nx::create(nx::float32, {13}, {9, 9, 9, 3, 1, 2, 1, 0, 5, -1, 5, -2, 5}), kCuda);
  char* in = static_cast<char*>(x.impl().buffer->data);
  auto out = p.run(&in, 1);
  ASSERT_EQ(out.size(), 1u);
  const Call& call = last_call();
  EXPECT_EQ(call.dtype, RUNE_CUB_F32);
  EXPECT_EQ(call.argsort, 1);
  EXPECT_EQ(call.in, in + 3 * 4);
  EXPECT_EQ(call.out, out[0]->data);
  EXPECT_EQ(call.rows, 2);
  EXPECT_EQ(call.len, 5);
  EXPECT_NE(call.scratch, nullptr);
  EXPECT_EQ(call.scratch_bytes, static_cast<size_t>(scratch));
  EXPECT_EQ(call.stream, c.handle());
  const long long* idx = static_cast<const long long*>(out[0]->data);
  EXPECT_EQ(std::vector<long long>(idx, idx + 10),
            (std::vector<long long>{4, 1, 3, 2, 0, 3, 1, 0, 2, 4}));
  // A failing sort raises, naming the module and the module's message.
  last_call().fail = 2;
  EXPECT_EQ(message_of([&] { p.run(&in, 1); }),
            "CUDA: CUB sort (stand-in.so) failed: stand-in: out of memory (2)");
  last_call().fail = 0;
}

}  // namespace
