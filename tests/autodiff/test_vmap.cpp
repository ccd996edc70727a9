// rune::vmap: every primitive's batching rule against a loop of unbatched calls stacked (the same
// bits), eager and compiled; a coverage check that the cases trace every tensor-level primitive
// of ir/ops.def; vmap with grad (per-example gradients) and jit; jacfwd, jacrev and hessian
// against central finite differences; the errors. On CPU, CPU:1 and the fake CUDA device.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/interpreter.h"
#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"
#include "trace/tracer.h"

namespace {

using ir::Op;
using nx::Tensor;
using V = std::vector<Tensor>;
using Fn = std::function<Tensor(const V&)>;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

// One primitive's case: f over its inputs, each batched along its axis (or shared).
struct Case {
  std::string name;
  Fn f;
  V inputs;
  std::vector<rune::Axis> axes;
  int64_t out_axis = 0;
};

// Deterministic values in (lo, hi), never a round number.
Tensor values(nx::DType t, const nx::Shape& s, double lo = 0.1, double hi = 0.9, int salt = 0) {
  int64_t n = 1;
  for (auto e : s) n *= e;
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(lo + (hi - lo) * std::fmod(0.137 * static_cast<double>(i + 3 * salt) + 0.05, 1.0));
  return nx::create(t, s, v);
}
Tensor ints(nx::DType t, const nx::Shape& s, int64_t lo, int64_t hi, int salt = 0) {
  int64_t n = 1;
  for (auto e : s) n *= e;
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(lo + (i * 7 + salt) % (hi - lo)));
  return nx::create(t, s, v);
}

constexpr int64_t B = 3;
const nx::Shape kEx{B, 2, 3};  // batch 3 of [2, 3] examples along axis 0

std::vector<Case> unary_and_binary_cases() {
  std::vector<Case> cs;
  Tensor x = values(nx::float64, kEx), y = values(nx::float64, kEx, 0.2, 0.8, 5);
#define RUNE_UN_Float(fn) [](const V& a) { return nx::fn(a[0]); }
#define RUNE_UN_Any(fn) RUNE_UN_Float(fn)
#define RUNE_UN_FloatOrFalse(fn) RUNE_UN_Float(fn)
#define RUNE_UN_FloatOrTrue(fn) RUNE_UN_Float(fn)
#define RUNE_UN_Hand(fn) Fn()
#define RUNE_BIN_Float(fn) [](const V& a) { return nx::fn(a[0], a[1]); }
#define RUNE_BIN_Any(fn) RUNE_BIN_Float(fn)
#define RUNE_BIN_Hand(fn) Fn()
#define X(name, arity, cat)
#define X_UNARY(name, fn, domain, result, lowering, derivative) \
  if (Fn f = RUNE_UN_##domain(fn)) cs.push_back({#name, f, {x}, {0}});
#define X_BINARY(name, fn, domain, result, lowering) \
  if (Fn f = RUNE_BIN_##domain(fn)) cs.push_back({#name, f, {x, y}, {0, 0}});
#include "ir/ops.def"
#undef X
#undef X_UNARY
#undef X_BINARY
  // The Hand rows.
  Tensor p = nx::less(x, y), q = nx::less(y, values(nx::float64, kEx, 0.1, 0.9, 2));
  Tensor i = ints(nx::int32, kEx, 0, 9), k = ints(nx::int32, kEx, 0, 5, 3);
  cs.push_back({"Neg", [](const V& a) { return nx::neg(a[0]); }, {x}, {0}});
  cs.push_back({"Not", [](const V& a) { return nx::logical_not(a[0]); }, {p}, {0}});
  cs.push_back({"Cast", [](const V& a) { return nx::cast(a[0], nx::float32); }, {x}, {0}});
  cs.push_back({"Bitcast",
                [](const V& a) { return nx::apply(Op::Bitcast, nx::int64, a[0].shape(), {a[0]}); },
                {x},
                {0}});
  cs.push_back(
      {"StopGradient", [](const V& a) { return nx::stop_gradient(a[0]) * a[0]; }, {x}, {0}});
  cs.push_back({"And", [](const V& a) { return nx::logical_and(a[0], a[1]); }, {p, q}, {0, 0}});
  cs.push_back({"Or", [](const V& a) { return nx::logical_or(a[0], a[1]); }, {p, q}, {0, 0}});
  cs.push_back({"Xor", [](const V& a) { return nx::logical_xor(a[0], a[1]); }, {p, q}, {0, 0}});
  cs.push_back({"Shl",
                [](const V& a) {
                  return nx::apply(Op::Shl, nx::int32, a[0].shape(), {a[0], a[1]});
                },
                {i, k},
                {0, 0}});
  cs.push_back({"Shr",
                [](const V& a) {
                  return nx::apply(Op::Shr, nx::int32, a[0].shape(), {a[0], a[1]});
                },
                {i, k},
                {0, 0}});
  return cs;
}

std::vector<Case> structural_cases() {
  std::vector<Case> cs;
  Tensor x = values(nx::float64, kEx), y = values(nx::float64, kEx, 0.2, 0.8, 5);
  Tensor xt = values(nx::float64, {2, B, 3}, 0.1, 0.9, 7);  // batched along axis 1
  Tensor w = values(nx::float64, {3, 4}, -1, 1, 4);
  Tensor c = nx::less(x, y);
  cs.push_back(
      {"Where", [](const V& a) { return nx::where(a[0], a[1], a[2]); }, {c, x, y}, {0, 0, 0}});
  cs.push_back({"Where shared",
                [](const V& a) { return nx::where(a[0], a[1], a[2]); },
                {nx::index(c, 0, 1), x, nx::index(y, 0, 2)},
                {rune::none, 0, rune::none}});
  cs.push_back({"ReduceSum", [](const V& a) { return nx::sum(a[0], {1}); }, {x}, {0}});
  cs.push_back({"ReduceSum all", [](const V& a) { return nx::sum(a[0]); }, {xt}, {1}});
  cs.push_back({"ReduceProd", [](const V& a) { return nx::prod(a[0], {0}); }, {x}, {0}});
  cs.push_back({"ReduceMax", [](const V& a) { return nx::max(a[0]); }, {x}, {0}});
  cs.push_back({"ReduceMin", [](const V& a) { return nx::min(a[0], {1}, true); }, {xt}, {1}});
  cs.push_back({"Dot", [](const V& a) { return nx::matmul(a[0], a[1]); }, {x, w}, {0, rune::none}});
  cs.push_back({"Dot both",
                [](const V& a) { return nx::matmul(a[0], a[1]); },
                {xt, values(nx::float64, {B, 3, 2}, -1, 1, 9)},
                {1, 0}});
  cs.push_back({"Dot float32",
                [](const V& a) { return nx::matmul(a[0], a[1]); },
                {nx::cast(x, nx::float32), nx::cast(w, nx::float32)},
                {0, rune::none}});
  cs.push_back({"Sort", [](const V& a) { return nx::sort(a[0]); }, {x}, {0}});
  cs.push_back({"Sort axis 0", [](const V& a) { return nx::sort(a[0], 0); }, {xt}, {1}});
  cs.push_back({"Argsort", [](const V& a) { return nx::argsort(a[0], 0); }, {x}, {0}});
  cs.push_back({"Cumsum", [](const V& a) { return nx::cumsum(a[0]); }, {xt}, {1}});
  Tensor idx = ints(nx::int64, {B, 2, 2}, 0, 3);
  cs.push_back(
      {"Gather", [](const V& a) { return nx::take_along_axis(a[0], a[1], 1); }, {x, idx}, {0, 0}});
  cs.push_back({"Gather shared table",
                [](const V& a) { return nx::gather(a[0], a[1]); },
                {w, ints(nx::int64, {B, 5}, 0, 3, 1)},
                {rune::none, 0}});
  cs.push_back({"Reshape", [](const V& a) { return nx::reshape(a[0], {3, 2}); }, {x}, {0}});
  cs.push_back({"Permute", [](const V& a) { return nx::transpose(a[0]); }, {xt}, {1}});
  cs.push_back({"Expand", [](const V& a) { return nx::broadcast_to(a[0], {4, 2, 3}); }, {x}, {0}});
  cs.push_back({"Shrink",
                [](const V& a) {
                  return nx::slice(a[0], {{1, 2}, {0, 3, 2}});
                },
                {x},
                {0}});
  cs.push_back({"Flip", [](const V& a) { return nx::flip(a[0], {1}); }, {x}, {0}});
  cs.push_back({"Pad", [](const V& a) { return nx::pad(a[0], {{1, 0}, {0, 2}}); }, {x}, {0}});
  cs.push_back({"Copy", [](const V& a) { return nx::contiguous(nx::transpose(a[0])); }, {x}, {0}});
  cs.push_back({"Iota and Const",
                [](const V& a) {
                  return a[0] * 2.0 + nx::cast(nx::iota({2, 3}, 1), nx::float64);
                },
                {x},
                {0}});
  cs.push_back({"out_axes 1",
                [](const V& a) { return nx::exp(a[0]) + a[1]; },
                {x, nx::index(y, 0, 0)},
                {0, rune::none},
                1});
  cs.push_back({"out_axes -1", [](const V& a) { return nx::sum(a[0], {0}); }, {xt}, {1}, -1});
  cs.push_back(
      {"shared output", [](const V& a) { return nx::sin(a[1]); }, {x, w}, {0, rune::none}});
  return cs;
}

// The cases' ops, read from their traced per-example graphs.
void add_ops(const Case& c, std::set<Op>& ops) {
  ir::NodeUse use;
  rune::Tracer tracer(nx::Device::cpu(), static_cast<int>(c.inputs.size()));
  V stand_ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    nx::Shape s = c.inputs[i].shape();
    if (c.axes[i]) s.erase(s.begin() + *c.axes[i]);
    stand_ins.push_back(
        tracer.stand_in(static_cast<int>(i), c.inputs[i].dtype(), ir::View::contiguous(s)));
  }
  ir::NodeRef out;
  {
    nx::InterpreterScope scope(&tracer);
    out = tracer.node_of(c.f(stand_ins));
  }
  for (ir::NodeRef n : ir::toposort({out})) ops.insert(n->op);
}

class Vmap : public ::testing::TestWithParam<std::string> {
 public:
  Tensor on(const Tensor& h) const { return GetParam() == "CPU" ? h : nx::place(h, GetParam()); }
  V on(const V& hs) const {
    V r;
    for (const auto& h : hs) r.push_back(on(h));
    return r;
  }
};

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  auto x = nx::to_vector<double>(a), y = nx::to_vector<double>(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint64_t>(x[i]), std::bit_cast<uint64_t>(y[i]))
        << what << " at " << i << ": " << x[i] << " vs " << y[i];
}

// f of each example, stacked along the case's out axis, computed eagerly on the host: what vmap
// must give on every device (the backends share their bits).
Tensor looped(const Case& c) {
  V outs;
  for (int64_t b = 0; b < B; ++b) {
    V ex;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      ex.push_back(c.axes[i] ? nx::index(c.inputs[i], static_cast<int>(*c.axes[i]), b)
                             : c.inputs[i]);
    outs.push_back(c.f(ex));
  }
  int axis = static_cast<int>(c.out_axis < 0 ? c.out_axis + outs[0].ndim() + 1 : c.out_axis);
  return nx::stack(outs, axis);
}

// vmap of each case against the loop: eagerly (op by op) on the host, and compiled on every
// device, all cases as one program (the fake CUDA driver builds each kernel with the system
// compiler, so one program of fused kernels keeps the test fast). Each input leaf takes its own
// axis here, so the cases call the flat entry point that rune::vmap flattens its arguments into.
void check_cases(const Vmap& t, const std::vector<Case>& cases) {
  std::vector<std::string> paths;
  auto batched = [&](const Case& c, const V& a) {
    return rune::detail::vmap_flat(
        "rune::vmap", a, c.axes, paths, [&](const V& b) { return V{c.f(b)}; }, c.out_axis)[0];
  };
  V want, all_inputs;
  for (const auto& c : cases) {
    want.push_back(looped(c));
    if (t.GetParam() == "CPU")
      expect_same_bits(batched(c, c.inputs), want.back(), c.name + " eager");
    for (const auto& x : c.inputs) all_inputs.push_back(x);
  }
  V got = rune::jit([&](const V& a) {
    V outs;
    size_t k = 0;
    for (const auto& c : cases) {
      outs.push_back(batched(c, V(a.begin() + static_cast<long>(k),
                                  a.begin() + static_cast<long>(k + c.inputs.size()))));
      k += c.inputs.size();
    }
    return outs;
  })(t.on(all_inputs));
  for (size_t i = 0; i < cases.size(); ++i)
    expect_same_bits(got[i], want[i], cases[i].name + " compiled");
}

TEST_P(Vmap, ElementwiseRulesMatchALoop) { check_cases(*this, unary_and_binary_cases()); }
TEST_P(Vmap, StructuralRulesMatchALoop) { check_cases(*this, structural_cases()); }

// Every tensor-level primitive of ir/ops.def appears in some case above (Kernel rows live only
// inside lowered kernels), so no batching rule goes untested.
TEST(VmapCoverage, TheCasesTraceEveryPrimitive) {
  std::set<Op> seen;
  for (const auto& c : unary_and_binary_cases()) add_ops(c, seen);
  for (const auto& c : structural_cases()) add_ops(c, seen);
  std::string missing;
#define X(name, arity, cat)                                                         \
  if (ir::op_category(Op::name) != ir::OpCategory::Kernel && !seen.count(Op::name)) \
    missing += std::string(" ") + #name;
#include "ir/ops.def"
#undef X
  EXPECT_EQ(missing, "") << "primitives no vmap case traces";
}

INSTANTIATE_TEST_SUITE_P(Devices, Vmap, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
