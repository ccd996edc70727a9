// Issue 9: the MLP training step 784-256-10, batch 128, float32 (softmax cross-entropy, SGD 0.1),
// compiled with rune::jit, against the same step written by hand in C++ around the best BLAS
// loaded (mlp_reference.cpp; OpenBLAS, BLIS or oneDNN, whichever is fastest on the step here),
// timed in turn with it. Goal: rune within 1.3x. Both start from the same parameters and data;
// the losses after the same number of steps are printed to show they compute the same thing.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "bench/blas.h"
#include "bench/common.h"
#include "bench/mlp_reference.h"
#include "runtime/thread_pool.h"
#include "trace/rune.h"

using nx::Tensor;

namespace {

constexpr int64_t kBatch = 128, kIn = 784, kHidden = 256, kOut = 10;

struct Mlp {
  Tensor w1, b1, w2, b2;
};

// A reference's own copy of the parameters.
struct Params {
  explicit Params(const Mlp& m) : w1(kIn * kHidden), b1(kHidden), w2(kHidden * kOut), b2(kOut) {
    for (auto [t, a] : {std::pair{&m.w1, &w1}, {&m.b1, &b1}, {&m.w2, &w2}, {&m.b2, &b2}}) {
      auto v = nx::to_vector<float>(*t);
      std::memcpy(a->data(), v.data(), v.size() * 4);
    }
  }
  bench::AlignedFloats w1, b1, w2, b2;
};

}  // namespace

RUNE_TREE(Mlp, w1, b1, w2, b2)

int main() {
  bench::Report r("mlp");
  int threads = runtime::host_threads();
  std::vector<std::string> missing;
  auto libs = bench::load_sgemms(threads, &missing);
  for (const auto& m : missing) r.note("blas_missing", m);

  // The data and initial parameters of bench_train's former MLP step (same keys).
  auto k = nx::split(nx::key(0));
  auto k2 = nx::split(k.second);
  Tensor x = nx::rand(k.first, nx::float32, {kBatch, kIn});
  Tensor labels = nx::randint(k2.first, 0, kOut, {kBatch});
  Tensor y = nx::cast(
      nx::equal(nx::reshape(labels, {kBatch, 1}), nx::reshape(nx::arange(kOut), {1, kOut})),
      nx::float32);
  const Mlp init{
      nx::randn(k2.second, nx::float32, {kIn, kHidden}) * 0.05, nx::zeros(nx::float32, {kHidden}),
      nx::randn(k2.first, nx::float32, {kHidden, kOut}) * 0.05, nx::zeros(nx::float32, {kOut})};
  bench::AlignedFloats xa(kBatch * kIn), ya(kBatch * kOut);
  {
    auto xv = nx::to_vector<float>(x), yv = nx::to_vector<float>(y);
    std::memcpy(xa.data(), xv.data(), xv.size() * 4);
    std::memcpy(ya.data(), yv.data(), yv.size() * 4);
  }

  // The hand-written step with each BLAS; the fastest is the reference.
  const bench::Sgemm* best = nullptr;
  double best_us = 0;
  for (const auto& l : libs) {
    Params p(init);
    bench::MlpReference ref(l, xa.data(), ya.data(), kBatch, kIn, kHidden, kOut);
    double us = bench::medians_us(
        41, 5, [&] { ref.step(p.w1.data(), p.b1.data(), p.w2.data(), p.b2.data(), 0.1f); })[0];
    std::printf("train_mlp_step: c++ + %s %.1f us\n", l.name.c_str(), us);
    if (!best || us < best_us) best = &l, best_us = us;
  }

  auto loss_fn = [&](const Mlp& q) {
    Tensor h = nx::relu(nx::matmul(x, q.w1) + q.b1);
    Tensor logits = nx::matmul(h, q.w2) + q.b2;
    return nx::mean(-nx::sum(y * nx::log_softmax(logits, 1), {1}));
  };
  auto mlp_step = rune::jit([&](const Mlp& q) {
    auto [l, g] = rune::value_and_grad(loss_fn, q);
    return std::make_pair(
        l, Mlp{q.w1 - g.w1 * 0.1, q.b1 - g.b1 * 0.1, q.w2 - g.w2 * 0.1, q.b2 - g.b2 * 0.1});
  });
  Mlp m = init;
  Tensor loss;
  auto rune_step = [&] {
    std::tie(loss, m) = mlp_step(m);
    (void)nx::item<float>(loss);
  };
  if (!best) {
    double us = bench::medians_us(41, 5, rune_step)[0];
    r.skip("train_mlp_step",
           "no BLAS loaded for the reference; rune " + std::to_string(us) + " us");
    r.print_json();
    return 0;
  }
  Params p(init);
  bench::MlpReference ref(*best, xa.data(), ya.data(), kBatch, kIn, kHidden, kOut);
  float ref_loss = 0;
  auto ref_step = [&] {
    ref_loss = ref.step(p.w1.data(), p.b1.data(), p.w2.data(), p.b2.data(), 0.1f);
  };
  // The first step of each, from the same parameters: the same loss to float32 rounding.
  rune_step();
  ref_step();
  char buf[160];
  std::snprintf(buf, sizeof buf, "step 1 loss: rune %.7g, c++ + %s %.7g", nx::item<float>(loss),
                best->name.c_str(), ref_loss);
  r.note("train_mlp_step_loss_1", buf);
  auto [rune_us, ref_us] = bench::medians_us(41, 5, rune_step, ref_step);
  r.add("train_mlp_step", rune_us, "c++ + " + best->name, ref_us, 1.3);
  std::snprintf(buf, sizeof buf, "step 48 loss: rune %.7g, c++ + %s %.7g", nx::item<float>(loss),
                best->name.c_str(), ref_loss);
  r.note("train_mlp_step_loss_48", buf);
  r.print_json();
}
