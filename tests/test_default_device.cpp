// The default device (docs/gpu.md "The default device") and the device of the values an op makes
// for itself. Creation ops put their results on nx::default_device() (RUNE_DEFAULT_DEVICE); the
// index grids, masks and constants that ops, checks and gradients make internally live with their
// operands, whatever the default. Run on CPU:1 (an asynchronous host device, like a GPU for these
// rules) and on CUDA:0 where there is one (a real GPU, or RUNE_TEST_FAKE_CUDA=1).
// tests/CMakeLists.txt also runs the samples with RUNE_DEFAULT_DEVICE=CPU:1 and checks the
// errors of a bad or missing default device.
#include <gtest/gtest.h>

#include "runtime/gpu/context.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using namespace rt;
using D = std::vector<double>;
using V = std::vector<int64_t>;

TEST(DefaultDevice, CreationOpsPutTheirResultsThere) {
  nx::Device d = nx::default_device();
  for (const Tensor& t :
       {nx::create(nx::float32, {2}, {1, 2}), nx::full(nx::float32, {2, 2}, 3),
        nx::zeros(nx::int32, {3}), nx::ones(nx::bool_, {}), nx::scalar(nx::float64, 2),
        nx::arange(4), nx::arange(nx::float32, 0, 2, 0.5), nx::linspace(nx::float64, 0, 1, 5),
        nx::eye(nx::float32, 3), nx::iota({2, 3}, 1), nx::rand(nx::key(1), nx::float32, {4}),
        nx::randn(nx::key(2), nx::float64, {4}), nx::randint(nx::key(3), 0, 9, {4})}) {
    EXPECT_EQ(t.device(), d) << t.describe();
  }
  uint16_t bytes[2] = {1, 2};
  EXPECT_EQ(nx::from_bytes(nx::uint8, {4}, bytes).device(), d);
  // A compiled call without tensor arguments runs there too.
  auto f = rune::jit([] { return nx::arange(3) * 2.0; });
  Tensor r = f();
  EXPECT_EQ(r.device(), d);
  EXPECT_EQ(nx::to_vector<int64_t>(r), (V{0, 2, 4}));
}

// Devices other than the host that this machine has.
std::vector<std::string> other_devices() {
  std::vector<std::string> v{"CPU:1"};
  if (runtime::gpu::unavailable_reason({runtime::DeviceKind::CUDA, 0}).empty())
    v.push_back("CUDA:0");
  return v;
}

class OpsOn : public testing::TestWithParam<std::string> {
 protected:
  nx::Device dev() const { return nx::Device::parse(GetParam(), "test"); }
  Tensor on(const Tensor& x) const { return nx::place(x, dev()); }
};

TEST_P(OpsOn, LikeOpsFollowTheirArgument) {
  Tensor x = on(nx::create(nx::float32, {2, 2}, {1, 2, 3, 4}));
  for (const Tensor& t : {nx::zeros_like(x), nx::ones_like(x), nx::full_like(x, 7)}) {
    EXPECT_EQ(t.device(), dev());
    EXPECT_EQ((t + x).device(), dev());
  }
  EXPECT_EQ(nx::to_vector<float>(nx::full_like(x, 7)), std::vector<float>(4, 7));
}

// Before the fix these raised "operands on two devices": the op's index grid or mask was made
// on the host while its operand lived on `dev`.
TEST_P(OpsOn, IndexGridsAndMasksLiveWithTheOperands) {
  Tensor h = nx::place(nx::create(nx::float32, {2, 3}, {3, 9, 1, 4, 4, 8}), "CPU");
  Tensor x = on(h);
  EXPECT_EQ(nx::argmax(x, 1).device(), dev());
  EXPECT_EQ(nx::to_vector<int64_t>(nx::argmax(x, 1)), (V{1, 2}));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::argmin(x)), (V{2}));
  Tensor p = nx::pad(x, {{1, 0}, {0, 1}}, -1);
  EXPECT_EQ(p.device(), dev());
  EXPECT_EQ(nx::to_vector<float>(p), nx::to_vector<float>(nx::pad(h, {{1, 0}, {0, 1}}, -1)));
  Tensor i = on(nx::place(nx::create(nx::int32, {3}, {1, 2, 3}), "CPU"));
  EXPECT_EQ(nx::isnan(i).device(), dev());
  EXPECT_EQ(nx::to_vector<bool>(nx::isnan(i) || nx::isnan(i)), std::vector<bool>(3, false));
  // An eager check's index grid too.
  nx::check(nx::greater(x, nx::scalar_like(x, 0)), x,
            [](const std::vector<int64_t>&, const Tensor&) { return std::runtime_error("no"); });
  nx::wait(dev());
}

// Gradients replay their graph eagerly on the parameters' device: iota nodes (an argmax, an
// arange inside f) and the dummy cotangents of jvp are made there.
TEST_P(OpsOn, GradientsOfIotaUsingFunctions) {
  Tensor h = nx::place(nx::create(nx::float64, {4}, {0.5, 2, -1, 3}), "CPU");
  Tensor x = on(h);
  auto f = [](const Tensor& t) {
    Tensor w = nx::cast(nx::arange(4), nx::float64);  // made while tracing
    Tensor hot = nx::cast(nx::equal(nx::iota({4}, 0), nx::argmax(t)), nx::float64);
    return nx::sum(t * w * hot + t * t);
  };
  Tensor g = rune::grad(f, x);
  EXPECT_EQ(g.device(), dev());
  EXPECT_EQ(nx::to_vector<double>(g), nx::to_vector<double>(rune::grad(f, h)));
  auto [y, t] = rune::jvp<Tensor>([](const Tensor& a) { return nx::sin(a); }, x, x);
  EXPECT_EQ(t.device(), dev());
  EXPECT_EQ(nx::to_vector<double>(t), nx::to_vector<double>(nx::cos(h) * h));
}

// A host program cannot read a captured constant on another device in place: it moves to the
// program's device once, with the program (it used to be bound where it was).
TEST_P(OpsOn, CapturedConstantsMoveToAHostProgram) {
  Tensor w = on(nx::create(nx::float64, {3}, {1, 2, 3}));
  auto f = rune::jit([&](const Tensor& x) { return x * w; });
  Tensor r = f(nx::place(nx::create(nx::float64, {3}, {2, 2, 2}), "CPU"));
  EXPECT_EQ(r.device(), nx::Device::cpu());
  EXPECT_EQ(nx::to_vector<double>(r), (D{2, 4, 6}));
}

INSTANTIATE_TEST_SUITE_P(Devices, OpsOn, testing::ValuesIn(other_devices()), [](const auto& info) {
  std::string n = info.param;
  return n == "CPU:1" ? std::string("cpu1") : std::string("cuda0");
});

}  // namespace
