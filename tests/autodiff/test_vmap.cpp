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
#include "core/window.h"
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
  cs.push_back({"Window",  // reduce_window views its windows (ir::Op::Window)
                [](const V& a) {
                  return nx::reduce_window(a[0], nx::WindowReduce::Sum, {1, 2});
                },
                {x},
                {0}});
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

// f of each example, stacked along the case's out axis: what vmap must give.
Tensor looped(const Case& c, const V& inputs) {
  V outs;
  for (int64_t b = 0; b < B; ++b) {
    V ex;
    for (size_t i = 0; i < inputs.size(); ++i)
      ex.push_back(c.axes[i] ? nx::index(inputs[i], static_cast<int>(*c.axes[i]), b) : inputs[i]);
    outs.push_back(c.f(ex));
  }
  int axis = static_cast<int>(c.out_axis < 0 ? c.out_axis + outs[0].ndim() + 1 : c.out_axis);
  return nx::stack(outs, axis);
}

// Every case's `each` (the loop, or vmap) as one compiled program over all the cases' inputs.
// One program of fused kernels per side keeps the test fast on a cold kernel cache (the fake
// CUDA driver builds each kernel with the system compiler); compiled and eager calls share
// their bits by the library's contract, which tests/test_elementwise.cpp and others check.
template <class Each>
V all_cases(const std::vector<Case>& cases, const V& inputs, Each each) {
  return rune::jit([&](const V& a) {
    V outs;
    size_t k = 0;
    for (const auto& c : cases) {
      outs.push_back(each(c, V(a.begin() + static_cast<long>(k),
                               a.begin() + static_cast<long>(k + c.inputs.size()))));
      k += c.inputs.size();
    }
    return outs;
  })(inputs);
}

// vmap of each case on the test's device against the loop of unbatched calls on the host (the
// backends share their bits). Each input leaf takes its own axis here, so the cases call the
// flat entry point that rune::vmap flattens its arguments into.
void check_cases(const Vmap& t, const std::vector<Case>& cases) {
  V inputs;
  for (const auto& c : cases)
    for (const auto& x : c.inputs) inputs.push_back(x);
  std::vector<std::string> paths;
  V want = all_cases(cases, inputs, looped);
  V got = all_cases(cases, t.on(inputs), [&](const Case& c, const V& a) {
    return rune::detail::vmap_flat(
        "rune::vmap", a, c.axes, paths, [&](const V& b) { return V{c.f(b)}; }, c.out_axis)[0];
  });
  for (size_t i = 0; i < cases.size(); ++i) expect_same_bits(got[i], want[i], cases[i].name);
}

TEST_P(Vmap, ElementwiseRulesMatchALoop) { check_cases(*this, unary_and_binary_cases()); }
TEST_P(Vmap, StructuralRulesMatchALoop) { check_cases(*this, structural_cases()); }

// Every tensor-level primitive of ir/ops.def appears in some case above (Kernel rows live only
// inside lowered kernels; HostCall, rune::distributed's collectives, has no batching rule and
// raises, tested in tests/distributed), so no batching rule goes untested.
TEST(VmapCoverage, TheCasesTraceEveryPrimitive) {
  std::set<Op> seen;
  for (const auto& c : unary_and_binary_cases()) add_ops(c, seen);
  for (const auto& c : structural_cases()) add_ops(c, seen);
  std::string missing;
#define X(name, arity, cat)                                                              \
  if (ir::op_category(Op::name) != ir::OpCategory::Kernel && Op::name != Op::HostCall && \
      !seen.count(Op::name))                                                             \
    missing += std::string(" ") + #name;
#include "ir/ops.def"
#undef X
  EXPECT_EQ(missing, "") << "primitives no vmap case traces";
}

// The public entry point: trees of arguments, a shared (none) argument, tree results.
TEST_P(Vmap, TreesAndSharedArguments) {
  Tensor xs = on(values(nx::float64, {B, 2})), w = on(values(nx::float64, {2}, -1, 1, 3));
  auto f = [](const std::pair<Tensor, Tensor>& p, const Tensor& w) {
    return std::make_pair(nx::sum(p.first * w), p.second * 2.0);
  };
  auto [s, t] = rune::vmap(f, {0, rune::none})(std::make_pair(xs, xs), w);
  for (int64_t b = 0; b < B; ++b) {
    Tensor x = nx::index(xs, 0, b);
    expect_same_bits(nx::index(s, 0, b), nx::sum(x * w), "sum " + std::to_string(b));
    expect_same_bits(nx::index(t, 0, b), x * 2.0, "scale " + std::to_string(b));
  }
}

// vmap(grad(loss)): per-example gradients, the same bits as grad of each example alone, eagerly
// and inside jit (one program).
TEST_P(Vmap, PerExampleGradients) {
  // The loop runs on the host: the device gives its bits.
  Tensor wh = values(nx::float64, {3}, -1, 1, 2);
  Tensor xh = values(nx::float64, {4, 3}), yh = values(nx::float64, {4}, -1, 1, 6);
  Tensor w = on(wh), xs = on(xh), ys = on(yh);
  auto loss = [](const Tensor& w, const Tensor& x, const Tensor& y) {
    return nx::square(nx::sum(w * x) - y);
  };
  auto per_example = rune::vmap(rune::grad(loss, rune::argnums<0>), {rune::none, 0, 0});
  Tensor gj = rune::jit([&](const Tensor& w, const Tensor& xs, const Tensor& ys) {
    return per_example(w, xs, ys);
  })(w, xs, ys);
  ASSERT_EQ(gj.shape(), (nx::Shape{4, 3}));
  for (int64_t b = 0; b < 4; ++b) {
    Tensor want = rune::grad(loss, rune::argnums<0>)(wh, nx::index(xh, 0, b), nx::index(yh, 0, b));
    if (GetParam() == "CPU")
      expect_same_bits(nx::index(per_example(w, xs, ys), 0, b), want,
                       "example " + std::to_string(b));
    expect_same_bits(nx::index(gj, 0, b), want, "compiled example " + std::to_string(b));
  }
}

// grad through vmap: d/dx sum_b sin(x_b) . c = cos(x) c, exactly the per-element product.
TEST_P(Vmap, GradOfVmap) {
  Tensor x = on(values(nx::float64, {B, 2})), c = on(values(nx::float64, {2}, 1, 2, 1));
  auto f = [&](const Tensor& x) {
    return nx::sum(rune::vmap([&](const Tensor& r) { return nx::sin(r) * c; })(x));
  };
  Tensor g = rune::jit([&](const Tensor& x) { return rune::grad(f, x); })(x);
  auto want = nx::to_vector<double>(nx::cos(x) * nx::broadcast_to(c, {B, 2}));
  EXPECT_EQ(nx::to_vector<double>(g), want);
}

// Jacobians against central differences of f (float64, h = 1e-6).
Tensor finite_jacobian(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  auto xv = nx::to_vector<double>(x);
  const double h = 1e-6;
  V cols;
  for (size_t k = 0; k < xv.size(); ++k) {
    auto up = xv, down = xv;
    up[k] += h;
    down[k] -= h;
    Tensor fu = f(nx::create(nx::float64, x.shape(), up));
    Tensor fd = f(nx::create(nx::float64, x.shape(), down));
    cols.push_back((fu - fd) / (2 * h));
  }
  Tensor j = nx::stack(cols, -1);  // f.shape ++ [size(x)]
  nx::Shape s = f(x).shape();
  s.insert(s.end(), x.shape().begin(), x.shape().end());
  return nx::reshape(j, s);
}
void expect_near(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  auto x = nx::to_vector<double>(a), y = nx::to_vector<double>(b);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol) << what << " at " << i;
}

TEST_P(Vmap, JacobiansMatchFiniteDifferences) {
  // f: [2, 2] -> [3], mixing every input into every output.
  Tensor a = values(nx::float64, {3, 4}, -1, 1, 8);
  auto f = [a](const Tensor& x) {
    return nx::matmul(x.device() == a.device() ? a : nx::place(a, x.device()),
                      nx::tanh(nx::reshape(x, {4}))) *
           nx::sum(nx::exp(x));
  };
  Tensor x = values(nx::float64, {2, 2}, -0.5, 0.5, 4);
  Tensor fd = finite_jacobian(f, x);
  auto s = [](const Tensor& x) { return nx::sum(nx::sin(x) * nx::exp(nx::flip(x))); };
  Tensor hd = finite_jacobian([&](const Tensor& y) { return rune::grad(s, y); }, x);
  // Compiled on every device (one program), eagerly on the host too: the same bits.
  auto all = [&](const Tensor& y) {
    return std::make_tuple(rune::jacrev(f)(y), rune::jacfwd(f)(y), rune::hessian(s)(y));
  };
  auto [jr, jf, h] = rune::jit(all)(on(x));
  ASSERT_EQ(jr.shape(), (nx::Shape{3, 2, 2}));
  expect_near(jr, fd, 1e-7, "jacrev");
  expect_near(jf, fd, 1e-7, "jacfwd");
  // hessian of a scalar: [2, 2, 2, 2], symmetric, against differences of the gradient.
  expect_near(h, hd, 1e-6, "hessian");
  expect_near(h, nx::permute(h, {2, 3, 0, 1}), 1e-12, "hessian symmetry");
  if (GetParam() == "CPU") {
    auto [er, ef, eh] = all(x);
    expect_same_bits(er, jr, "eager jacrev");
    expect_same_bits(ef, jf, "eager jacfwd");
    expect_same_bits(eh, h, "eager hessian");
  }
}

// Misuse raises naming rune::vmap and the values, before anything runs.
TEST(VmapErrors, NameTheApiAndTheValues) {
  Tensor x = nx::zeros(nx::float32, {2, 3}), y = nx::zeros(nx::float32, {4});
  auto id = [](const Tensor& a) { return a; };
  auto add = [](const Tensor& a, const Tensor& b) { return nx::sum(a) + nx::sum(b); };
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { rune::vmap(id, 2)(x); }),
            "rune::vmap: in_axes 2 is out of range for argument 0 (float32 [2, 3], axes -2..1)");
  EXPECT_EQ(message([&] {
              rune::vmap(add, {0, 0})(x, y);
            }),
            "rune::vmap: mismatched batch sizes: argument 0 has 2 along axis 0, argument 1 has "
            "4 along axis 0");
  EXPECT_EQ(message([&] {
              rune::vmap(add, {1, 0})(x, y);
            }),
            "rune::vmap: mismatched batch sizes: argument 0 has 3 along axis 1, argument 1 has "
            "4 along axis 0");
  EXPECT_EQ(message([&] { rune::vmap(add, {0})(x, y); }),
            "rune::vmap: in_axes has 1 entries for 2 arguments");
  EXPECT_EQ(message([&] { rune::vmap(id, rune::none)(x); }),
            "rune::vmap: no argument is batched (every in_axes is none)");
  EXPECT_EQ(message([&] { rune::vmap(id, 0, 2)(x); }),
            "rune::vmap: out_axes 2 is out of range for output 0 (float32 [3] per example, so "
            "axes -2..1)");
  EXPECT_EQ(message([&] { rune::jacrev(id)(nx::zeros(nx::int32, {2})); }),
            "rune::jacrev: x is int32 [2]; only float tensors have derivatives");
}

INSTANTIATE_TEST_SUITE_P(Devices, Vmap, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace
