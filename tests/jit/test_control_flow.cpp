// Control flow (issue 20, docs/compilation.md "Control flow"): rune::scan, fori_loop,
// while_loop, cond and switch_ give the bits of the unrolled C++ loop, eagerly and inside
// rune::jit, on CPU, CPU:1 and the fake CUDA:0; each body is traced once per call (not per
// iteration) and not at all on a compiled call that hits the cache; gradients through scan,
// fori_loop and cond agree with finite differences and, where the association is the same, with the
// unrolled program's bits; a scan under rune::grad is differentiated as a loop (the reverse loop
// written by hand gives its bits, and under rune::jit it is two loop steps whatever its length);
// errors name the API and the offending values. Under rune::jit each loop is one loop step of
// the program (trace/staged_program.h), counted by rune::loop_step_iterations.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "test_util.h"
#include "trace/rune.h"
#include "trace/staged_program.h"

namespace {

using nx::Tensor;

// ctest runs this binary with RUNE_TEST_FAKE_CUDA=1 (the hook installed the fake driver); run
// alone, it installs it itself.
const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

using rt::bits;

using Carry = std::pair<Tensor, Tensor>;  // (h [3], running total [])

// One RNN-like step: the scan body, and the unrolled loops' step.
std::pair<Carry, Tensor> rnn_step(const Carry& c, const Tensor& x) {
  Tensor h = nx::tanh(c.first * 0.5 + x);
  Tensor total = c.second + nx::sum(h);
  return {Carry{h, total}, h * 2.0};
}

// A scan unrolled in C++ (step over the rows of xs, its outputs stacked): what rune::scan must
// equal bit for bit.
template <class Step>
std::pair<Carry, Tensor> unrolled_scan(const Step& step, const Carry& init, const Tensor& xs) {
  Carry c = init;
  std::vector<Tensor> ys;
  for (int64_t i = 0; i < xs.shape()[0]; ++i) {
    auto [next, y] = step(c, nx::index(xs, 0, i));
    c = next;
    ys.push_back(y);
  }
  return {c, nx::stack(ys, 0)};
}

std::pair<Carry, Tensor> rnn_unrolled(const Carry& init, const Tensor& xs) {
  return unrolled_scan(rnn_step, init, xs);
}

std::pair<Carry, Tensor> rnn_scan(const Carry& init, const Tensor& xs) {
  return rune::scan(rnn_step, init, xs);
}

// A step reading the captured w twice and w2, a value computed from w outside the loop.
struct TwiceCaptured {
  Tensor w, w2;
  std::pair<Carry, Tensor> operator()(const Carry& c, const Tensor& x) const {
    Tensor h = nx::tanh(c.first * w + x * w2 + w);
    return {Carry{h, c.second + nx::sum(h * h)}, nx::sin(h)};
  }
};

Tensor twice_loss(const Tensor& w, const Tensor& xs, const Tensor& zero) {
  auto [c, ys] = rune::scan(TwiceCaptured{w, w * 0.7}, Carry{w, zero}, xs);
  return c.second + nx::sum(ys);
}

Tensor xs_data(nx::DType t = nx::float32) {
  std::vector<double> v;
  for (int i = 0; i < 9; ++i) v.push_back(0.15 * i - 0.7);
  return nx::create(t, {3, 3}, v);
}

class ControlFlow : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
  void expect_same(const std::pair<Carry, Tensor>& a, const std::pair<Carry, Tensor>& b) const {
    EXPECT_EQ(a.first.first.device().name(), GetParam());
    EXPECT_EQ(bits(a.first.first), bits(b.first.first));
    EXPECT_EQ(bits(a.first.second), bits(b.first.second));
    ASSERT_EQ(a.second.shape(), (nx::Shape{3, 3}));
    EXPECT_EQ(bits(a.second), bits(b.second));
  }
};

TEST_P(ControlFlow, ScanEqualsUnrolledLoop) {
  Carry init{on(nx::zeros(nx::float32, {3})), on(nx::zeros(nx::float32, {}))};
  Tensor xs = on(xs_data());
  auto eager = rnn_scan(init, xs);
  expect_same(eager, rnn_unrolled(init, xs));
  auto compiled = rune::jit(rnn_scan)(init, xs);
  expect_same(compiled, rune::jit(rnn_unrolled)(init, xs));
  expect_same(compiled, eager);
  // Every device gives the host's bits.
  Carry host_init{nx::zeros(nx::float32, {3}), nx::zeros(nx::float32, {})};
  expect_same(eager, rnn_unrolled(host_init, xs_data()));
}

// reverse (lax.scan's reverse=True): the steps read the rows last to first and ys[i] is the
// output of the step that read row i: the unrolled loop over the flipped rows, its ys flipped
// back. Eagerly and compiled, the same bits.
TEST_P(ControlFlow, ReverseScanVisitsTheRowsLastToFirst) {
  Carry init{on(nx::zeros(nx::float32, {3})), on(nx::zeros(nx::float32, {}))};
  Tensor xs = on(xs_data());
  auto reversed = [](const Carry& c, const Tensor& x) {
    return rune::scan(rnn_step, c, x, rune::ScanOptions{.reverse = true});
  };
  auto [c, ys] = rnn_unrolled(init, nx::flip(xs, {0}));
  const std::pair<Carry, Tensor> want{c, nx::flip(ys, {0})};
  expect_same(reversed(init, xs), want);
  expect_same(rune::jit(reversed)(init, xs), want);
  // Not the forward scan: the rows differ, so the carries do.
  EXPECT_NE(bits(reversed(init, xs).first.first), bits(rnn_scan(init, xs).first.first));
}

TEST_P(ControlFlow, ForiLoopEqualsUnrolledLoop) {
  auto body = [](const Tensor& i, const Tensor& x) {
    return x * 0.75 + nx::cast(i, nx::float32) * x;
  };
  auto looped = [&](const Tensor& x) { return rune::fori_loop(2, 6, body, x); };
  auto unrolled = [&](const Tensor& x) {
    Tensor r = x;
    for (int i = 2; i < 6; ++i) r = body(nx::full(nx::int32, {}, i), r);
    return r;
  };
  Tensor x = on(nx::create(nx::float32, {4}, {0.5, -1.25, 2, 0.125}));
  Tensor eager = looped(x);
  EXPECT_EQ(eager.device().name(), GetParam());
  EXPECT_EQ(bits(eager), bits(unrolled(x)));
  EXPECT_EQ(bits(rune::jit(looped)(x)), bits(rune::jit(unrolled)(x)));
  EXPECT_EQ(bits(rune::jit(looped)(x)), bits(eager));
  // An empty range returns init.
  EXPECT_EQ(bits(rune::fori_loop(3, 3, body, x)), bits(x));
}

TEST_P(ControlFlow, WhileLoopEqualsCppLoop) {
  using C = std::pair<Tensor, Tensor>;  // (x [2], steps int32 [])
  auto cond = [](const C& c) { return nx::sum(c.first) < 40.0; };
  auto body = [](const C& c) { return C{c.first * 1.5 + 1.0, c.second + 1}; };
  C init{on(nx::create(nx::float32, {2}, {1, 2})), on(nx::zeros(nx::int32, {}))};
  C r = rune::while_loop(cond, body, init);
  C want = init;
  while (nx::item<bool>(cond(want))) want = body(want);
  EXPECT_EQ(r.first.device().name(), GetParam());
  EXPECT_EQ(bits(r.first), bits(want.first));
  EXPECT_EQ(nx::item<int32_t>(r.second), nx::item<int32_t>(want.second));
  EXPECT_GT(nx::item<int32_t>(r.second), 2);
  // Compiled: one loop step that reads the predicate each iteration, same bits; an init that
  // fails the predicate at once runs no iteration.
  auto jitted = rune::jit([&](const C& c) { return rune::while_loop(cond, body, c); });
  size_t before = rune::loop_step_iterations();
  C compiled = jitted(init);
  EXPECT_EQ(bits(compiled.first), bits(want.first));
  EXPECT_EQ(nx::item<int32_t>(compiled.second), nx::item<int32_t>(want.second));
  EXPECT_EQ(rune::loop_step_iterations(),
            before + static_cast<size_t>(nx::item<int32_t>(want.second)));
  C done{on(nx::create(nx::float32, {2}, {50, 2})), on(nx::zeros(nx::int32, {}))};
  C none = jitted(done);
  EXPECT_EQ(bits(none.first), bits(done.first));
  EXPECT_EQ(nx::item<int32_t>(none.second), 0);
  EXPECT_EQ(jitted.traces(), 1u);
}

TEST_P(ControlFlow, CondAndSwitchPickTheBranch) {
  auto t = [](const Tensor& x) { return nx::exp(x) - 1.0; };
  auto f = [](const Tensor& x) { return x * x; };
  auto g = [](const Tensor& x) { return -x; };
  auto by_cond = [&](const Tensor& p, const Tensor& x) { return rune::cond(p, t, f, x); };
  auto by_switch = [&](const Tensor& i, const Tensor& x) {
    return rune::switch_<Tensor, Tensor>(i, {t, f, g}, x);
  };
  Tensor x = on(nx::create(nx::float32, {3}, {0.25, -2, 3}));
  auto jc = rune::jit(by_cond);
  auto js = rune::jit(by_switch);
  for (bool p : {true, false}) {
    Tensor pred = on(nx::full(nx::bool_, {}, p));
    Tensor want = p ? t(x) : f(x);
    EXPECT_EQ(bits(by_cond(pred, x)), bits(want)) << p;
    EXPECT_EQ(bits(jc(pred, x)), bits(want)) << p;
  }
  EXPECT_EQ(jc.traces(), 1u);  // one program selects at run time
  std::vector<std::function<Tensor(const Tensor&)>> fs{t, f, g};
  for (int i = 0; i < 3; ++i) {
    Tensor idx = on(nx::full(nx::int32, {}, i));
    EXPECT_EQ(bits(by_switch(idx, x)), bits(fs[i](x))) << i;
    EXPECT_EQ(bits(js(idx, x)), bits(fs[i](x))) << i;
  }
  EXPECT_EQ(js.traces(), 1u);
}

// switch_ differentiates as cond does: with a concrete index only the chosen branch's gradient
// (it raised "cannot read traced value"), with a traced one (rune::jit of rune::grad) through
// the select; and its index range stays checked under both (jit of grad returned a value for
// index 7 of 2 branches).
TEST_P(ControlFlow, SwitchUnderGradPicksTheBranchAndChecksItsIndex) {
  using Branches = std::vector<std::function<Tensor(const Tensor&)>>;
  Branches fs{[](const Tensor& v) { return v * v; }, [](const Tensor& v) { return nx::exp(v); }};
  Tensor x = on(nx::create(nx::float64, {2}, {0.5, -1}));
  auto loss = [&](const Tensor& i, const Tensor& v) {
    return nx::sum(rune::switch_<Tensor, Tensor>(i, fs, v));
  };
  auto grad_at = [&](const Tensor& i, const Tensor& v) {
    return rune::grad([&](const Tensor& w) { return loss(i, w); }, v);
  };
  auto jitted = rune::jit(grad_at);
  const std::vector<std::vector<double>> want{{1, -2}, {std::exp(0.5), std::exp(-1.0)}};
  for (int k = 0; k < 2; ++k) {
    Tensor i = on(nx::full(nx::int32, {}, k));
    EXPECT_EQ(nx::to_vector<double>(grad_at(i, x)), want[k]) << k;
    EXPECT_EQ(nx::to_vector<double>(jitted(i, x)), want[k]) << k;
    // An index made inside the differentiated function is a constant of its trace.
    auto inner = [&](const Tensor& v) { return loss(nx::full(nx::int32, {}, k), v); };
    EXPECT_EQ(nx::to_vector<double>(rune::grad(inner, x)), want[k]) << k;
  }
  EXPECT_EQ(jitted.traces(), 1u);
  for (int64_t bad : {7, -1}) {
    const std::string msg =
        "rune::switch_: index " + std::to_string(bad) + " is out of range for 2 branches";
    Tensor i = on(nx::full(nx::int64, {}, static_cast<double>(bad)));
    EXPECT_EQ(rt::error_of([&] { nx::to_vector<double>(grad_at(i, x)); }), msg);
    EXPECT_EQ(rt::error_of([&] { nx::to_vector<double>(jitted(i, x)); }), msg);
    EXPECT_EQ(rt::error_of([&] {
                nx::to_vector<double>(rune::grad(
                    [&](const Tensor& v) {
                      return loss(nx::full(nx::int64, {}, static_cast<double>(bad)), v);
                    },
                    x));
              }),
              msg);
  }
  nx::wait(x);
}

// What retraces a body: each call of scan traces it once (never per step); a compiled call
// that hits rune::jit's cache does not call it at all; a new key (here a new length) retraces.
TEST_P(ControlFlow, BodyIsTracedOncePerCall) {
  int calls = 0;
  auto step = [&](const Carry& c, const Tensor& x) {
    ++calls;
    return rnn_step(c, x);
  };
  auto run = [&](const Carry& init, const Tensor& xs) { return rune::scan(step, init, xs); };
  Carry init{on(nx::zeros(nx::float32, {3})), on(nx::zeros(nx::float32, {}))};
  Tensor xs = on(xs_data());
  run(init, xs);
  EXPECT_EQ(calls, 1) << "eager: traced once for 3 steps";
  auto jitted = rune::jit(run);
  jitted(init, xs);
  EXPECT_EQ(calls, 2) << "traced once with the enclosing function";
  jitted(init, on(xs_data() * 2.0));
  EXPECT_EQ(calls, 2) << "a cache hit runs the program without tracing";
  Tensor longer = on(nx::concatenate({xs_data(), xs_data()}, 0));
  jitted(init, longer);
  EXPECT_EQ(calls, 3) << "a new length is a new key";
  EXPECT_EQ(jitted.traces(), 2u);
}

// Under rune::jit a scan or fori_loop is one loop step of the program: its body runs `length`
// times in the program runner (not unrolled, not replayed by the caller); two loops in a row
// chain through the program's slots; eagerly and under grad nothing runs as a loop step.
TEST_P(ControlFlow, CompiledLoopsAreLoopSteps) {
  auto two_loops = [](const Carry& init, const Tensor& xs) {
    auto [c, ys] = rnn_scan(init, xs);
    Tensor z = rune::fori_loop(
        0, 3, [](const Tensor& i, const Tensor& h) { return h * 0.5 + nx::cast(i, nx::float32); },
        c.first + nx::sum(ys));
    return std::make_pair(z, ys * 0.5);
  };
  Carry init{on(nx::full(nx::float32, {3}, 0.25)), on(nx::zeros(nx::float32, {}))};
  Tensor xs = on(xs_data());
  size_t before = rune::loop_step_iterations();
  auto eager = two_loops(init, xs);
  EXPECT_EQ(rune::loop_step_iterations(), before) << "eagerly the body is replayed";
  auto jitted = rune::jit(two_loops);
  auto compiled = jitted(init, xs);
  nx::wait(compiled.first);
  EXPECT_EQ(rune::loop_step_iterations(), before + 3 + 3);
  EXPECT_EQ(bits(compiled.first), bits(eager.first));
  EXPECT_EQ(bits(compiled.second), bits(eager.second));
  auto again = jitted(init, on(xs_data() * 0.5));
  EXPECT_EQ(bits(again.first), bits(two_loops(init, on(xs_data() * 0.5)).first));
  EXPECT_EQ(jitted.traces(), 1u);
  // A body returning one value for two carry leaves (one buffer in its program), in a counted
  // and a while loop.
  using P = std::pair<Tensor, Tensor>;
  auto twice = [](const P& c) {
    Tensor t = c.first * 0.5 + c.second;
    return P{t, t};
  };
  auto counted = [&](const P& c) {
    return rune::fori_loop(
        0, 3, [&](const Tensor&, const P& d) { return twice(d); }, c);
  };
  auto until = [&](const P& c) {
    return rune::while_loop([](const P& d) { return nx::sum(d.first) < 20.0; }, twice, c);
  };
  P start{on(nx::create(nx::float32, {2}, {1, 2})), on(nx::create(nx::float32, {2}, {3, 4}))};
  P c_eager = counted(start), c_jit = rune::jit(counted)(start);
  EXPECT_EQ(bits(c_jit.first), bits(c_eager.first));
  EXPECT_EQ(bits(c_jit.second), bits(c_eager.second));
  P w_eager = until(start), w_jit = rune::jit(until)(start);
  EXPECT_EQ(bits(w_jit.first), bits(w_eager.first));
  EXPECT_EQ(bits(w_jit.second), bits(w_eager.second));
}

// Loops inside loop bodies and branches under rune::jit are loop steps of the body's program:
// a while_loop in a scan's body, a fori_loop in a fori_loop's, a scan in a while_loop's, a
// while_loop in a cond branch; the eager bits, and the inner iterations run as loop steps.
TEST_P(ControlFlow, NestedLoopsAreLoopStepsOfTheBody) {
  auto small = [](const Tensor& v) { return nx::sum(v) < 3.0; };
  auto inc = [](const Tensor& v) { return v * 1.5 + 0.25; };
  auto nested = [&](const Tensor& v, const Tensor& xs) {
    auto step = [&](const Tensor& c, const Tensor& r) {
      Tensor grown = rune::while_loop(small, inc, c * 0.5 + r);
      Tensor twice = rune::fori_loop(
          0, 3, [](const Tensor& i, const Tensor& d) { return d * 0.5 + nx::cast(i, nx::float32); },
          grown);
      return std::make_pair(twice, nx::sum(grown));
    };
    auto [c, ys] = rune::scan(step, v, xs);
    auto until = [](const Tensor& d) { return nx::sum(d) < 40.0; };
    auto outer_body = [](const Tensor& d) {
      auto [e, zs] =
          rune::scan([](const Tensor& a, const Tensor& b) { return std::make_pair(a + b, a); }, d,
                     nx::ones(nx::float32, {2, 3}));
      return e + nx::sum(zs) * 0.125;
    };
    Tensor w = rune::while_loop(until, outer_body, c);
    Tensor pick = rune::cond(
        nx::sum(w) > 0.0, [&](const Tensor& a) { return rune::while_loop(small, inc, a * 0.01); },
        [](const Tensor& a) { return a; }, w);
    return std::make_pair(pick, ys);
  };
  Tensor v = on(nx::create(nx::float32, {3}, {0.1, 0.2, 0.3}));
  Tensor xs = on(xs_data());
  auto eager = nested(v, xs);
  size_t before = rune::loop_step_iterations();
  auto jitted = rune::jit(nested);
  auto compiled = jitted(v, xs);
  nx::wait(compiled.first);
  EXPECT_GT(rune::loop_step_iterations(), before + 3 * 3) << "the inner loops ran as loop steps";
  EXPECT_EQ(compiled.first.device().name(), GetParam());
  EXPECT_EQ(bits(compiled.first), bits(eager.first));
  EXPECT_EQ(bits(compiled.second), bits(eager.second));
  auto again = jitted(v * 2.0, xs);
  EXPECT_EQ(bits(again.first), bits(nested(v * 2.0, xs).first));
  EXPECT_EQ(jitted.traces(), 1u);
}

// fori_loop with tensor bounds: under rune::jit one program serves every bound (a while loop
// over the counter), with the bits of the loop with static bounds; it cannot be differentiated.
TEST_P(ControlFlow, ForiLoopWithTracedBounds) {
  auto body = [](const Tensor& i, const Tensor& c) {
    return c * 0.75 + nx::cast(i, nx::float32) * 0.5;
  };
  auto dynamic = rune::jit([&](const Tensor& lo, const Tensor& hi, const Tensor& c) {
    return rune::fori_loop(lo, hi, body, c);
  });
  Tensor c0 = on(nx::create(nx::float32, {3}, {1, 2, 3}));
  for (auto [lo, hi] : {std::pair{0, 4}, std::pair{2, 9}, std::pair{5, 5}, std::pair{3, 1}}) {
    Tensor want = rune::fori_loop(lo, std::max(lo, hi), body, c0);
    Tensor l = on(nx::full(nx::int64, {}, lo)), h = on(nx::full(nx::int64, {}, hi));
    EXPECT_EQ(bits(dynamic(l, h, c0)), bits(want)) << lo << " " << hi;
    EXPECT_EQ(bits(rune::fori_loop(l, h, body, c0)), bits(want)) << lo << " " << hi;
  }
  EXPECT_EQ(dynamic.traces(), 1u);
  // Concrete tensor bounds are read: the static loop, which grad differentiates.
  Tensor zero = on(nx::full(nx::int32, {}, 0)), two = on(nx::full(nx::int32, {}, 2));
  auto sum_loop = [&](const Tensor& lo, const Tensor& hi) {
    return [&, lo, hi](const Tensor& c) { return nx::sum(rune::fori_loop(lo, hi, body, c)); };
  };
  EXPECT_EQ(bits(rune::grad(sum_loop(zero, two), c0)),
            bits(rune::grad(
                [&](const Tensor& c) { return nx::sum(rune::fori_loop(0, 2, body, c)); }, c0)));
  // Traced bounds: a while loop, which cannot be differentiated.
  EXPECT_NE(rt::message_of([&] {
              rune::jit([&](const Tensor& lo, const Tensor& hi, const Tensor& c) {
                return rune::grad(sum_loop(lo, hi), c);
              })(zero, two, c0);
            }).find("rune::while_loop: cannot be differentiated"),
            std::string::npos);
  EXPECT_EQ(rt::error_of([&] { rune::fori_loop(on(nx::full(nx::float32, {}, 0)), two, body, c0); }),
            "rune::fori_loop: bounds must be integer scalars, got float32 []");
}

// A gradient through a long scan under rune::jit is two loop steps whatever the length (the
// body's forward and its vjp each compiled once), with the eager gradient's bits.
TEST_P(ControlFlow, JitGradOfALongScanIsTwoLoopSteps) {
  // Shorter on the fake CUDA:0, whose launches run on host threads (the claim is the same).
  const int64_t T = std::string(GetParam()) == "CUDA:0" ? 16 : 128;
  std::vector<double> v;
  for (int64_t i = 0; i < 3 * T; ++i) v.push_back(0.01 * static_cast<double>(i % 37) - 0.2);
  Tensor xs = on(nx::create(nx::float32, {T, 3}, v));
  Tensor w = on(nx::create(nx::float32, {3}, {0.3, -0.8, 1.1}));
  Tensor zero = on(nx::zeros(nx::float32, {}));
  auto vg = [&](const Tensor& p, const Tensor& x) {
    return rune::value_and_grad([&](const Tensor& q) { return twice_loss(q, x, zero); }, p);
  };
  size_t before = rune::loop_step_iterations();
  auto eager = vg(w, xs);
  EXPECT_EQ(rune::loop_step_iterations(), before);
  auto jitted = rune::jit(vg);
  auto [value, grad] = jitted(w, xs);
  nx::wait(grad);
  EXPECT_EQ(rune::loop_step_iterations(), before + 2 * T);
  EXPECT_EQ(grad.device().name(), GetParam());
  EXPECT_EQ(bits(value), bits(eager.first));
  EXPECT_EQ(bits(grad), bits(eager.second));
  auto again = jitted(w, xs * 0.5);
  EXPECT_EQ(bits(again.second), bits(vg(w, xs * 0.5).second));
  EXPECT_EQ(jitted.traces(), 1u);
}

// Values a graph computes from constants alone are host scalars; as results of a loop's body or
// of vmap they belong on the call's device (fuzz seeds 200579 and 300126: eagerly on CPU:1 and
// CUDA:0 a scan over a carry without elements stacked rows of two devices, and vmap of a
// predicate of an integer operand returned its result on the host).
TEST_P(ControlFlow, ResultsFromConstantsAloneStayOnTheCallsDevice) {
  Tensor empty = on(nx::zeros(nx::bool_, {0, 1}));
  Tensor xs = on(nx::zeros(nx::float32, {2, 3}));
  auto step = [](const Tensor& c, const Tensor&) { return std::make_pair(nx::logical_not(c), c); };
  auto [carry, ys] = rune::scan(step, empty, xs);
  EXPECT_EQ(carry.device().name(), GetParam());
  EXPECT_EQ(ys.device().name(), GetParam());
  EXPECT_EQ(ys.shape(), (nx::Shape{2, 0, 1}));
  Tensor counted = rune::fori_loop(
      0, 3, [](const Tensor&, const Tensor& c) { return nx::zeros_like(c); }, xs);
  EXPECT_EQ(counted.device().name(), GetParam());
  EXPECT_EQ(nx::to_vector<float>(counted), std::vector<float>(6, 0.0f));
  Tensor ints = on(nx::create(nx::int32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  Tensor nan = rune::vmap([](const Tensor& row) { return nx::isnan(nx::sum(row)); })(ints);
  EXPECT_EQ(nan.device().name(), GetParam());
  EXPECT_EQ(nx::to_vector<bool>(nan), (std::vector<bool>{false, false}));
  // It mixes with the device's values (a host value of two elements would not).
  Tensor positive = nx::greater(nx::sum(nx::cast(ints, nx::float32), {1}),
                                nx::scalar_like(nx::sum(nx::cast(ints, nx::float32), {1}), 0));
  EXPECT_EQ(nx::to_vector<bool>(nx::logical_or(nan, positive)), (std::vector<bool>{true, true}));
}

INSTANTIATE_TEST_SUITE_P(Devices, ControlFlow, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

}  // namespace

// A tree carry: a model trained by SGD, 20 steps as one fori_loop (the chapter's linreg).
struct Linreg {
  Tensor w, b;
};
RUNE_TREE(Linreg, w, b)

namespace {

Linreg sgd_step(const Linreg& m, const Tensor& x, const Tensor& y) {
  auto loss = [&](const Linreg& p) { return nx::mean(nx::square(nx::matmul(x, p.w) + p.b - y)); };
  Linreg g = rune::grad(loss, m);
  return Linreg{m.w - g.w * 0.1, m.b - g.b * 0.1};
}

TEST_P(ControlFlow, TrainingLoopWithATreeCarry) {
  Tensor x = on(nx::create(nx::float32, {4, 2}, {1, 0, 0, 1, 1, 1, 2, -1}));
  Tensor y = on(nx::create(nx::float32, {4, 1}, {1, -1, 0.5, 2}));
  Linreg m0{on(nx::zeros(nx::float32, {2, 1})), on(nx::zeros(nx::float32, {1}))};
  auto train = [&](const Linreg& m) {
    return rune::fori_loop(
        0, 20, [&](const Tensor&, const Linreg& c) { return sgd_step(c, x, y); }, m);
  };
  auto unrolled = [&](const Linreg& m) {
    Linreg c = m;
    for (int i = 0; i < 20; ++i) c = sgd_step(c, x, y);
    return c;
  };
  size_t before = rune::loop_step_iterations();
  Linreg compiled = rune::jit(train)(m0);
  nx::wait(compiled.w);
  EXPECT_EQ(rune::loop_step_iterations(), before + 20) << "one program call, one loop step";
  // The C++ loop run eagerly: the loop step, the eager replay and the loop unrolled into one
  // jit graph give its bits. (The unrolled graph gave other values on 2026-12-02: its trace
  // found a dead capture's param at a reused address, Jit.ACaptureThatDiesLeavesNoStaleConstant.)
  Linreg want = unrolled(m0);
  EXPECT_EQ(bits(compiled.w), bits(want.w));
  EXPECT_EQ(bits(compiled.b), bits(want.b));
  Linreg traced = rune::jit(unrolled)(m0);
  EXPECT_EQ(bits(traced.w), bits(want.w));
  EXPECT_EQ(bits(traced.b), bits(want.b));
  Linreg eager = train(m0);
  EXPECT_EQ(bits(eager.w), bits(want.w));
  EXPECT_EQ(bits(eager.b), bits(want.b));
}

// ---- gradients (the host; float64 for the finite differences) ----

Tensor scan_loss(const Tensor& w, const Tensor& xs, bool unrolled) {
  Carry init{w, nx::zeros(nx::float64, {})};
  auto step = [&](const Carry& c, const Tensor& x) {
    Tensor h = nx::tanh(c.first * w + x);
    return std::pair<Carry, Tensor>{Carry{h, c.second + nx::sum(h * h)}, nx::sin(h)};
  };
  auto [c, ys] = unrolled ? unrolled_scan(step, init, xs) : rune::scan(step, init, xs);
  return c.second + nx::sum(ys);
}

// Central differences of f at w along each coordinate.
std::vector<double> finite_differences(const std::function<Tensor(const Tensor&)>& f,
                                       const Tensor& w) {
  std::vector<double> v = nx::to_vector<double>(w), g;
  const double h = 1e-6;
  for (size_t i = 0; i < v.size(); ++i) {
    auto at = [&](double d) {
      std::vector<double> u = v;
      u[i] += d;
      return nx::item<double>(f(nx::create(nx::float64, w.shape(), u)));
    };
    g.push_back((at(h) - at(-h)) / (2 * h));
  }
  return g;
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i]))) << i;
}

TEST(ControlFlowGrad, ScanEqualsUnrolledAndFiniteDifferences) {
  Tensor xs = xs_data(nx::float64);
  Tensor w = nx::create(nx::float64, {3}, {0.3, -0.8, 1.1});
  auto loss = [&](const Tensor& p) { return scan_loss(p, xs, false); };
  auto unrolled = [&](const Tensor& p) { return scan_loss(p, xs, true); };
  size_t before = rune::loop_step_iterations();
  Tensor g = rune::grad(loss, w);
  EXPECT_EQ(bits(g), bits(rune::grad(unrolled, w)));
  auto jg = rune::jit([&](const Tensor& p) { return rune::grad(loss, p); });
  auto ju = rune::jit([&](const Tensor& p) { return rune::grad(unrolled, p); });
  EXPECT_EQ(bits(jg(w)), bits(ju(w)));
  // Under rune::jit the scan is differentiated as a loop: one forward loop step saving the
  // carries, one reverse loop step; eagerly both run per iteration.
  EXPECT_EQ(rune::loop_step_iterations(), before + 2 * 3);
  expect_close(nx::to_vector<double>(g), finite_differences(loss, w));
}

TEST(ControlFlowGrad, ForiLoopAndCond) {
  Tensor w = nx::create(nx::float64, {3}, {0.3, -0.8, 1.1});
  auto body = [](const Tensor& i, const Tensor& x) {
    return nx::sin(x) * (nx::cast(i, nx::float64) + 1.0);
  };
  auto fori = [&](const Tensor& p) { return nx::sum(rune::fori_loop(0, 4, body, p)); };
  auto fori_unrolled = [&](const Tensor& p) {
    Tensor r = p;
    for (int i = 0; i < 4; ++i) r = body(nx::full(nx::int32, {}, i), r);
    return nx::sum(r);
  };
  EXPECT_EQ(bits(rune::grad(fori, w)), bits(rune::grad(fori_unrolled, w)));
  expect_close(nx::to_vector<double>(rune::grad(fori, w)), finite_differences(fori, w));

  auto t = [](const Tensor& x) { return nx::sum(nx::exp(x)); };
  auto f = [](const Tensor& x) { return nx::sum(x * x * x); };
  for (bool p : {true, false}) {
    Tensor pred = nx::full(nx::bool_, {}, p);
    auto by_cond = [&](const Tensor& x, const Tensor& q) { return rune::cond(q, t, f, x); };
    auto loss = [&](const Tensor& x) { return by_cond(x, pred); };
    Tensor want = p ? rune::grad(t, w) : rune::grad(f, w);
    EXPECT_EQ(bits(rune::grad(loss, w)), bits(want)) << p;
    // Compiled with a traced predicate: both branches run, the gradient is the taken one's.
    auto compiled = rune::jit([&](const Tensor& x, const Tensor& q) {
      return rune::grad([&](const Tensor& y) { return by_cond(y, q); }, x);
    });
    EXPECT_EQ(bits(compiled(w, pred)), bits(want)) << p;
    expect_close(nx::to_vector<double>(rune::grad(loss, w)), finite_differences(loss, w));
  }
}

// ---- gradients through loops kept whole (trace/scan_vjp.h, docs/numerics.md) ----

// twice_loss's gradient as the reverse loop written by hand: forward saving each step's carry;
// then for t = T - 1 down to 0 the step's vjp at its saved carry, each captured operand's
// cotangent accumulated from -0; last the seeds in order: init's cotangent, then the captures in
// the order the body read them (w, then w2 = 0.7 w).
Tensor twice_grad_by_hand(const Tensor& w, const Tensor& xs) {
  using Ts = std::vector<Tensor>;
  const Tensor w2 = w * 0.7;
  const int64_t T = xs.shape()[0];
  std::vector<Carry> saved;
  Carry c{w, nx::zeros(nx::float64, {})};
  for (int64_t t = 0; t < T; ++t) {
    saved.push_back(c);
    c = TwiceCaptured{w, w2}(c, nx::index(xs, 0, t)).first;
  }
  // loss = c.second + sum(ys): the cotangents of the final carry and of each y.
  Tensor ct_h = nx::zeros(nx::float64, {3}), ct_total = nx::full(nx::float64, {}, 1.0);
  const Tensor ct_y = nx::ones(nx::float64, {3});
  Tensor acc_w = nx::full(nx::float64, {3}, -0.0), acc_w2 = acc_w;
  for (int64_t t = T - 1; t >= 0; --t) {
    auto step = [&](const Ts& p) {
      auto [next, y] = TwiceCaptured{p[2], p[3]}(Carry{p[0], p[1]}, nx::index(xs, 0, t));
      return Ts{next.first, next.second, y};
    };
    Ts g = rune::vjp(step, Ts{saved[t].first, saved[t].second, w, w2}, Ts{ct_h, ct_total, ct_y})
               .second;
    ct_h = g[0];
    ct_total = g[1];
    acc_w = acc_w + g[2];
    acc_w2 = acc_w2 + g[3];
  }
  return (ct_h + acc_w) + acc_w2 * 0.7;
}

TEST(ScanGrad, IsTheReverseLoopWrittenByHand) {
  Tensor xs = xs_data(nx::float64);
  Tensor w = nx::create(nx::float64, {3}, {0.3, -0.8, 1.1});
  Tensor zero = nx::zeros(nx::float64, {});
  auto loss = [&](const Tensor& p) { return twice_loss(p, xs, zero); };
  Tensor want = twice_grad_by_hand(w, xs);
  size_t before = rune::loop_step_iterations();
  Tensor g = rune::grad(loss, w);
  EXPECT_EQ(rune::loop_step_iterations(), before) << "eagerly the loops run per iteration";
  EXPECT_EQ(bits(g), bits(want));
  Tensor jg = rune::jit([&](const Tensor& p) { return rune::grad(loss, p); })(w);
  EXPECT_EQ(bits(jg), bits(want));
  EXPECT_EQ(rune::loop_step_iterations(), before + 2 * 3);
  expect_close(nx::to_vector<double>(g), finite_differences(loss, w));
}

// Second derivatives: the inner gradient's two loops are kept whole in the outer trace and
// differentiated in turn (four loop steps under rune::jit).
TEST(ScanGrad, SecondDerivativesDifferentiateTheLoops) {
  Tensor xs = xs_data(nx::float64);
  Tensor w = nx::create(nx::float64, {3}, {0.3, -0.8, 1.1});
  Tensor v = nx::create(nx::float64, {3}, {1, -2, 0.5});
  Tensor zero = nx::zeros(nx::float64, {});
  auto g = [&](const Tensor& p) {
    return rune::grad([&](const Tensor& q) { return twice_loss(q, xs, zero); }, p);
  };
  auto gv = [&](const Tensor& p) { return nx::sum(g(p) * v); };
  auto hv = [&](const Tensor& p) { return rune::grad(gv, p); };  // H v
  Tensor eager = hv(w);
  size_t before = rune::loop_step_iterations();
  Tensor jitted = rune::jit(hv)(w);
  nx::wait(jitted);
  EXPECT_EQ(rune::loop_step_iterations(), before + 4 * 3);
  EXPECT_EQ(bits(jitted), bits(eager));
  expect_close(nx::to_vector<double>(eager), finite_differences(gv, w));
}

// rune::vjp through a scan with cotangents for the final carry and the ys: the gradients of
// init and of every row of xs.
TEST(ScanGrad, CotangentsOfInitAndXs) {
  using P = std::pair<Tensor, Tensor>;
  Tensor xs = xs_data(nx::float64);
  Tensor h0 = nx::create(nx::float64, {3}, {0.2, -0.1, 0.4});
  Tensor ct_h = nx::create(nx::float64, {3}, {1, 0.5, -1});
  std::vector<double> cy;
  for (int i = 0; i < 9; ++i) cy.push_back(0.25 * i - 1);
  Tensor ct_ys = nx::create(nx::float64, {3, 3}, cy);
  auto f = [](const P& p) {
    auto [c, ys] = rune::scan(rnn_step, Carry{p.first, nx::zeros(nx::float64, {})}, p.second);
    return P{c.first, ys};
  };
  auto eager = rune::vjp(f, P{h0, xs}, P{ct_h, ct_ys}).second;
  auto jitted = rune::jit([&](const Tensor& a, const Tensor& b) {
    return rune::vjp(f, P{a, b}, P{ct_h, ct_ys}).second;
  })(h0, xs);
  EXPECT_EQ(bits(jitted.first), bits(eager.first));
  EXPECT_EQ(bits(jitted.second), bits(eager.second));
  auto dot = [&](const P& p) {
    P r = f(p);
    return nx::sum(r.first * ct_h) + nx::sum(r.second * ct_ys);
  };
  expect_close(nx::to_vector<double>(eager.first), finite_differences(
                                                       [&](const Tensor& a) {
                                                         return dot(P{a, xs});
                                                       },
                                                       h0));
  expect_close(nx::to_vector<double>(eager.second), finite_differences(
                                                        [&](const Tensor& b) {
                                                          return dot(P{h0, b});
                                                        },
                                                        xs));
}

// Edge cases of a scan kept whole under grad: an integer carry leaf (no cotangent), a carry leaf
// returned unchanged, a y that is the step's row itself, a captured value that needs no
// gradient; fori_loop under jit; and vmap of grad (the per-example gradients of a scan, each
// the bits of rune::grad on its example).
TEST(ScanGrad, IntegerCarryPassThroughAndVmap) {
  using C3 = std::tuple<Tensor, Tensor, Tensor>;             // (h, count int32, fixed)
  Tensor data = nx::create(nx::float64, {3}, {0.5, -1, 2});  // captured, no gradient
  auto loss = [&](const Tensor& w, const Tensor& xs) {
    auto step = [&](const C3& c, const Tensor& x) {
      Tensor h = nx::sin(std::get<0>(c) * w + x * data);
      return std::make_pair(C3{h, std::get<1>(c) + 1, std::get<2>(c)}, x);
    };
    C3 init{w, nx::zeros(nx::int32, {}), w * 2.0};
    auto [c, ys] = rune::scan(step, init, xs);
    return nx::sum(std::get<0>(c) * std::get<2>(c)) + nx::sum(ys * ys) +
           nx::sum(nx::cast(std::get<1>(c), nx::float64));
  };
  Tensor xs = xs_data(nx::float64);
  Tensor w = nx::create(nx::float64, {3}, {0.3, -0.8, 1.1});
  auto f = [&](const Tensor& p) { return loss(p, xs); };
  Tensor g = rune::grad(f, w);
  EXPECT_EQ(bits(rune::jit([&](const Tensor& p) { return rune::grad(f, p); })(w)), bits(g));
  expect_close(nx::to_vector<double>(g), finite_differences(f, w));

  // fori_loop with a captured weight, under jit: two loop steps of 5, the eager bits.
  Tensor v = nx::create(nx::float64, {3}, {0.9, 1.1, -0.4});
  auto fori = [&](const Tensor& p) {
    return nx::sum(rune::fori_loop(
        0, 5,
        [&](const Tensor& i, const Tensor& c) {
          return nx::tanh(c * p + nx::cast(i, nx::float64));
        },
        v));
  };
  size_t before = rune::loop_step_iterations();
  Tensor jf = rune::jit([&](const Tensor& p) { return rune::grad(fori, p); })(w);
  nx::wait(jf);
  EXPECT_EQ(rune::loop_step_iterations(), before + 2 * 5);
  EXPECT_EQ(bits(jf), bits(rune::grad(fori, w)));
  expect_close(nx::to_vector<double>(jf), finite_differences(fori, w));

  // Per-example gradients through the scan: vmap over a batch of xs.
  Tensor batch = nx::stack({xs, xs * 0.5, xs * -1.5}, 0);
  auto per_example = rune::vmap(rune::grad(loss, rune::argnums<0>), {rune::none, 0});
  Tensor pe = per_example(w, batch);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(bits(nx::index(pe, 0, i)),
              bits(rune::grad(loss, rune::argnums<0>)(w, nx::index(batch, 0, i))))
        << i;
  EXPECT_EQ(bits(rune::jit([&](const Tensor& p, const Tensor& b) { return per_example(p, b); })(
                w, batch)),
            bits(pe));
}

// ---- errors: the API and the offending values ----

// A body with a check is replayed per iteration into the program (its checks stay the
// program's); a check after a loop that reads the loop's results is refused at trace time.
TEST(ControlFlowErrors, ChecksAndLoops) {
  RUNE_SKIP_UNLESS_HOST_DEFAULT("a failing check raises at the call on the host");
  auto positive = [](const Tensor& v) {
    nx::check(v > 0.0, v, [](const std::vector<int64_t>& i, const Tensor& at) {
      return std::invalid_argument("not positive at " + std::to_string(i[0]) + ": " +
                                   std::to_string(nx::item<float>(at)));
    });
  };
  auto step = [&](const Tensor& c, const Tensor& x) {
    positive(x);
    return std::make_pair(c + x, c * x);
  };
  auto run = rune::jit([&](const Tensor& c, const Tensor& xs) { return rune::scan(step, c, xs); });
  Tensor c = nx::full(nx::float32, {2}, 1.0);
  Tensor good = nx::create(nx::float32, {3, 2}, {1, 2, 3, 4, 5, 6});
  size_t before = rune::loop_step_iterations();
  auto [carry, ys] = run(c, good);
  auto [want_c, want_ys] = rune::scan(step, c, good);
  EXPECT_EQ(bits(carry), bits(want_c));
  EXPECT_EQ(bits(ys), bits(want_ys));
  EXPECT_EQ(rune::loop_step_iterations(), before) << "unrolled: the body has a check";
  Tensor bad = nx::create(nx::float32, {3, 2}, {1, 2, 3, -4, 5, 6});
  EXPECT_EQ(rt::error_of([&] { run(c, bad); }), "not positive at 1: -4.000000");
  auto after = rune::jit([&](const Tensor& v) {
    Tensor r = rune::fori_loop(
        0, 2, [](const Tensor&, const Tensor& d) { return d * 2.0; }, v);
    positive(r);
    return r;
  });
  EXPECT_NE(rt::message_of([&] { after(c); }).find("reads the result of a rune::scan / fori_loop"),
            std::string::npos);
}

TEST(ControlFlowErrors, Messages) {
  Tensor x = nx::zeros(nx::float32, {3});
  auto widen = [](const Tensor& c, const Tensor& v) {
    return std::pair<Tensor, Tensor>{nx::cast(c + v, nx::float64), v};
  };
  EXPECT_EQ(rt::error_of([&] {
              rune::scan(widen, x, nx::zeros(nx::float32, {2, 3}));
            }),
            "rune::scan: carry leaf '0' is float32 [3] in init but float64 [3] from the body; "
            "the carry keeps its dtypes and shapes");
  auto grow = [](const Tensor& i, const Tensor& c) {
    return nx::concatenate({c, nx::cast(nx::reshape(i, {1}), nx::float32)}, 0);
  };
  EXPECT_EQ(rt::error_of([&] { rune::fori_loop(0, 2, grow, x); }),
            "rune::fori_loop: carry leaf '0' is float32 [3] in init but float32 [4] from the "
            "body; the carry keeps its dtypes and shapes");
  auto keep = [](const Tensor& c, const std::pair<Tensor, Tensor>& v) {
    return std::pair<Tensor, Tensor>{c, v.first};
  };
  EXPECT_EQ(rt::error_of([&] {
              rune::scan(keep, x,
                         std::make_pair(nx::zeros(nx::float32, {2}), nx::zeros(nx::float32, {4})));
            }),
            "rune::scan: xs leaf 1 is float32 [4]; every xs leaf needs 2 rows on axis 0");
  auto id = [](const Tensor& v) { return v; };
  EXPECT_EQ(rt::error_of([&] { rune::cond(nx::full(nx::bool_, {2}, 1), id, id, x); }),
            "rune::cond: pred must be a bool scalar, got bool [2]");
  EXPECT_EQ(rt::error_of([&] { rune::cond(nx::full(nx::int32, {}, 1), id, id, x); }),
            "rune::cond: pred must be a bool scalar, got int32 []");
  auto wide = [](const Tensor& v) { return nx::cast(v, nx::float64); };
  EXPECT_EQ(rt::error_of([&] { rune::cond(nx::full(nx::bool_, {}, 1), id, wide, x); }),
            "rune::cond: output 0 is float64 [3] from false_fn but float32 [3] from true_fn");
  using Branches = std::vector<std::function<Tensor(const Tensor&)>>;
  EXPECT_EQ(rt::error_of([&] {
              rune::switch_<Tensor, Tensor>(nx::full(nx::int32, {}, 2), Branches{id, id}, x);
            }),
            "rune::switch_: index 2 is out of range for 2 branches");
  EXPECT_EQ(rt::error_of([&] {
              rune::switch_<Tensor, Tensor>(nx::full(nx::float32, {}, 0), Branches{id, id}, x);
            }),
            "rune::switch_: index must be an integer scalar, got float32 []");
  // A traced index out of range: the compiled program's check raises after the run.
  auto sw = rune::jit([&](const Tensor& i, const Tensor& v) {
    return rune::switch_<Tensor, Tensor>(i, Branches{id, id}, v);
  });
  EXPECT_EQ(rt::error_of([&] { nx::wait(sw(nx::full(nx::int64, {}, -1), x)); }),
            "rune::switch_: index -1 is out of range for 2 branches");
  auto small = [](const Tensor& v) { return nx::sum(v) < 3.0; };
  auto inc = [](const Tensor& v) { return v + 1.0; };
  EXPECT_EQ(rt::error_of([&] { rune::while_loop(inc, inc, x); }),
            "rune::while_loop: cond_fn must return a bool scalar, got float32 [3]");
  EXPECT_EQ(rt::error_of([&] {
              rune::grad([&](const Tensor& v) { return nx::sum(rune::while_loop(small, inc, v)); },
                         x);
            }),
            "rune::while_loop: cannot be differentiated (rune::grad, vjp, jvp): its trip count "
            "is only known at run time, as in JAX; use rune::fori_loop or rune::scan with a "
            "fixed trip count");
  // A while_loop inside another while_loop's cond_fn (which is not a loop step) under jit.
  auto in_cond = [&](const Tensor& v) {
    auto cond = [&](const Tensor& c) { return nx::sum(rune::while_loop(small, inc, c)) < 9.0; };
    return rune::while_loop(cond, inc, v);
  };
  EXPECT_NE(rt::message_of([&] { rune::jit(in_cond)(x); })
                .find("rune::while_loop: not supported inside the body of a loop or branch that is "
                      "not itself compiled as a loop step"),
            std::string::npos);
  // A failed call leaves its arguments as they were.
  EXPECT_EQ(nx::to_vector<float>(x), (std::vector<float>{0, 0, 0}));
}

}  // namespace
