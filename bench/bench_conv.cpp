// Issue 40: convolutions and pooling, compiled with rune::jit, float32, 32 images x 64 channels x
// 32 x 32 (channels first, torch's layout): a 3x3 convolution (64 -> 64, padding SAME) forward,
// forward and both gradients (input and kernel, of sum(conv(x, k) * dy)), 2x2 max pooling; each
// against the same written by hand in C++ (bench/conv_reference.cpp: im2col and the best BLAS
// loaded, a direct loop for the pool), timed in turn. And one training step of samples/cnn.cpp's
// model (samples/cnn_model.h: batch 128, channels last, AdamW, dropout). bench/compare_conv.py
// measures torch (its convolution is oneDNN's), torch.compile and jax.jit on the same workloads
// in the same run of bench/run.
//
// rune's convolution is a composition today (an im2col through nx::take, then nx::matmul;
// docs/conv.md): these rows measure how far that is from a convolution primitive.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/blas.h"
#include "bench/common.h"
#include "bench/conv_reference.h"
#include "runtime/thread_pool.h"
#include "samples/cnn_model.h"
#include "trace/rune.h"

using nx::Tensor;

namespace {

constexpr int64_t kN = 32, kC = 64, kH = 32, kW = 32, kO = 64;

void host_copy(const Tensor& t, bench::AlignedFloats& a) {
  auto v = nx::to_vector<float>(t);
  std::memcpy(a.data(), v.data(), v.size() * sizeof(float));
}

nx::ConvOptions same() {
  nx::ConvOptions o;
  o.padding = "SAME";
  return o;
}

// The largest |a - b| relative to the largest |b|.
double rel_diff(const std::vector<float>& a, const float* b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
    m = std::max(m, static_cast<double>(std::fabs(b[i])));
  }
  return m > 0 ? d / m : d;
}

std::string fmt_diff(const char* what, double d) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s: max |rune - c++| / max |c++| = %.2e", what, d);
  return buf;
}

}  // namespace

int main() {
  bench::Report r("conv");
  const int threads = runtime::host_threads();
  std::vector<std::string> missing;
  auto libs = bench::load_sgemms(threads, &missing);
  for (const auto& m : missing) r.note("blas_missing", m);

  auto keys = nx::split(nx::key(40));
  auto k2 = nx::split(keys.second);
  const Tensor x = nx::randn(keys.first, nx::float32, {kN, kC, kH, kW});
  const Tensor w = nx::randn(k2.first, nx::float32, {kO, kC, 3, 3}) * std::sqrt(2.0 / (kC * 9));
  const Tensor dy = nx::randn(k2.second, nx::float32, {kN, kO, kH, kW});
  bench::AlignedFloats xa(x.size()), wa(w.size()), dya(dy.size()), ya(dy.size()), dxa(x.size()),
      dwa(w.size()), pa(x.size() / 4);
  host_copy(x, xa);
  host_copy(w, wa);
  host_copy(dy, dya);

  auto conv = rune::jit([](const Tensor& a, const Tensor& k) { return nx::conv(a, k, same()); });
  auto conv_grads = rune::jit([&](const Tensor& a, const Tensor& k) {
    auto loss = [&](const std::pair<Tensor, Tensor>& ak) {
      return nx::sum(nx::conv(ak.first, ak.second, same()) * dy);
    };
    auto [l, g] = rune::value_and_grad(loss, std::make_pair(a, k));
    return std::make_tuple(l, g.first, g.second);
  });
  auto pool = rune::jit([](const Tensor& a) { return nx::nn::max_pool(a, {2, 2}); });

  // The best BLAS for the reference: the one with the fastest forward convolution.
  const bench::Sgemm* best = nullptr;
  double best_us = 0;
  for (const auto& l : libs) {
    bench::ConvReference ref(l, kN, kC, kH, kW, kO, threads);
    double us = bench::medians_us(5, 1, [&] { ref.forward(xa.data(), wa.data(), ya.data()); })[0];
    std::printf("conv3x3_fwd: c++ im2col + %s %.1f us\n", l.name.c_str(), us);
    if (!best || us < best_us) best = &l, best_us = us;
  }

  Tensor y, loss, gx, gw, pooled;
  auto rune_fwd = [&] {
    y = conv(x, w);
    nx::wait(y);
  };
  auto rune_grads = [&] {
    std::tie(loss, gx, gw) = conv_grads(x, w);
    nx::wait(gw);
  };
  auto rune_pool = [&] {
    pooled = pool(x);
    nx::wait(pooled);
  };
  const int reps = 11, warmup = 2;
  if (best) {
    bench::ConvReference ref(*best, kN, kC, kH, kW, kO, threads);
    std::string name = "c++ im2col + " + best->name;
    float ref_loss = 0;
    auto [f_rune, f_ref] = bench::medians_us(reps, warmup, rune_fwd,
                                             [&] { ref.forward(xa.data(), wa.data(), ya.data()); });
    r.add("conv3x3_fwd_32x64x32x32", f_rune, name, f_ref);
    r.note("conv3x3_fwd_check", fmt_diff("y", rel_diff(nx::to_vector<float>(y), ya.data())));
    auto [g_rune, g_ref] = bench::medians_us(reps, warmup, rune_grads, [&] {
      ref_loss =
          ref.forward_backward(xa.data(), wa.data(), dya.data(), ya.data(), dxa.data(), dwa.data());
    });
    r.add("conv3x3_fwd_bwd_32x64x32x32", g_rune, name, g_ref);
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s; %s; loss rune %.6g, c++ %.6g",
                  fmt_diff("dx", rel_diff(nx::to_vector<float>(gx), dxa.data())).c_str(),
                  fmt_diff("dk", rel_diff(nx::to_vector<float>(gw), dwa.data())).c_str(),
                  nx::item<float>(loss), ref_loss);
    r.note("conv3x3_fwd_bwd_check", buf);
  } else {
    r.skip("conv3x3_fwd_32x64x32x32",
           "no BLAS loaded for the reference; rune " +
               std::to_string(bench::medians_us(reps, warmup, rune_fwd)[0]) + " us");
    r.skip("conv3x3_fwd_bwd_32x64x32x32",
           "no BLAS loaded for the reference; rune " +
               std::to_string(bench::medians_us(reps, warmup, rune_grads)[0]) + " us");
  }
  auto [p_rune, p_ref] = bench::medians_us(4 * reps, warmup, rune_pool, [&] {
    bench::max_pool_2x2(xa.data(), pa.data(), kN * kC, kH, kW, threads);
  });
  r.add("maxpool2x2_32x64x32x32", p_rune, "loop", p_ref);
  r.note("maxpool2x2_check", fmt_diff("pooled", rel_diff(nx::to_vector<float>(pooled), pa.data())));

  // samples/cnn.cpp's training step on a batch of 128 random images (gathered by index from
  // 1,024 with nx::take, timed with the step: the sample's loader gathers on its host thread).
  cnn::Config c;
  auto opt = cnn::optimizer(c, 5000);
  auto step = cnn::train_step(c, opt);
  auto kd = nx::split(nx::key(41));
  const Tensor images = nx::randn(kd.first, nx::float32, {1024, 28, 28, 1});
  const Tensor labels = nx::cast(nx::randint(kd.second, 0, 10, {1024}), nx::int32);
  const Tensor dropout_key = nx::random::key(1234);
  cnn::Cnn p = cnn::init(c, 0);
  cnn::State s = opt.init(p);
  std::vector<Tensor> batches;  // the indices of 8 batches, used in turn
  for (int64_t b = 0; b < 8; ++b)
    batches.push_back(nx::cast(nx::arange(nx::int64, b * 128, (b + 1) * 128), nx::int32));
  Tensor step_loss, first_loss;
  int64_t i = 0;
  auto rune_step = [&] {
    const Tensor& idx = batches[i % 8];
    std::tie(step_loss, p, s) =
        step(p, s, nx::take(images, idx, 0), nx::take(labels, idx, 0), dropout_key);
    (void)nx::item<float>(step_loss);
    if (i++ == 0) first_loss = step_loss;
  };
  r.time("cnn_train_step_b128", bench::medians_us(reps, warmup, rune_step)[0]);
  char buf[128];
  std::snprintf(buf, sizeof buf, "loss %.4f at step 1, %.4f at step %lld",
                nx::item<float>(first_loss), nx::item<float>(step_loss), (long long)i);
  r.note("cnn_train_step_check", buf);
  r.print_json();
}
