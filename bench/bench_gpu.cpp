// GPU benchmarks (tools/gpu-check runs them on CUDA:0): (a) a fused elementwise chain on 256M
// float32 against a device-to-device copy in the same run (bandwidth ratio), (b) a sum over
// 256M float32 against the copy, (c) a compiled call on a 3-element tensor (microseconds,
// launch included), (d) the MLP training step 784-256-10, batch 128, (e) sort and argsort of 16M
// float32 normal values in one row (CUB's radix sort, docs/sort.md) against a device copy of
// the same 64 MiB, (f) sgemm at 1024^2 and 4096^2 and the MLP and gpt steps' shapes (the
// tiled plan, codegen/plan.h) against cuBLAS's sgemm (dlopen, bench/cublas_sgemm.h) in the
// same run, with rune's results up to 2^31 FLOP checked bit for bit against the host's, (g) the
// tf32 and bf16 matmul precisions at 4096^2 (rune's tensor-core plan) against cuBLAS's cublasGemmEx
// with the matching fast compute type, (h) the 3x3 convolution of bench/bench_conv.cpp forward and
// forward + both gradients (rune::jit of nx::conv) against cuDNN's (dlopen, bench/cudnn_conv.h),
// with the largest difference from cuDNN's y, dx, dk. Prints one line each and exits 0 with "no
// CUDA device" where there is none.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/cublas_sgemm.h"
#include "bench/cudnn_conv.h"
#include "bench/mlp_784_step.h"
#include "runtime/cuda/cub_sort.h"
#include "runtime/gpu/context.h"
#include "runtime/gpu/transfer.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median microseconds of `reps` timed runs of f (each followed by a wait on the device).
template <class F>
double time_us(nx::Device dev, int reps, F&& f) {
  f();
  nx::wait(dev);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    f();
    nx::wait(dev);
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
  }
  return median(t);
}

Tensor chain(const Tensor& x) { return (x * 2.0 + 1.0) * nx::tanh(x) - nx::exp(-x * x); }

}  // namespace

int main(int argc, char** argv) {
  std::string name = argc > 1 ? argv[1] : "CUDA:0";
  nx::Device dev = nx::Device::parse(name == "--probe" ? "CUDA:0" : name, "bench_gpu");
  std::string why = runtime::gpu::unavailable_reason(dev);
  if (!why.empty()) {
    std::printf("bench_gpu: no %s device (%s)\n",
                dev.kind == runtime::DeviceKind::HIP ? "HIP" : "CUDA", why.c_str());
    return 0;
  }
  auto& ctx = runtime::gpu::context(dev, "bench_gpu");
  std::printf("bench_gpu: %s = %s (%s, %d multiprocessors)\n", name.c_str(),
              ctx.info().name.c_str(), ctx.info().arch.c_str(), ctx.info().multiprocessors);
  if (name == "--probe") return 0;
  const int64_t n = int64_t{1} << 28;  // 256M float32: 1 GiB
  const double bytes = static_cast<double>(n) * 4;
  Tensor x = nx::place(nx::full(nx::float32, {n}, 0.75), dev);
  auto dst = runtime::allocate(dev, static_cast<size_t>(bytes));
  double copy_us = time_us(dev, 10, [&] {
    runtime::gpu::copy_on_device(ctx, dst->data, x.impl().buffer->data, static_cast<size_t>(bytes));
  });
  double copy_gbs = 2 * bytes / copy_us / 1e3;  // read + write
  auto fchain = rune::jit(chain);
  Tensor y;
  double chain_us = time_us(dev, 10, [&] { y = fchain(x); });
  double chain_gbs = 2 * bytes / chain_us / 1e3;
  auto fsum = rune::jit([](const Tensor& a) { return nx::sum(a); });
  Tensor s;
  double sum_us = time_us(dev, 5, [&] { s = fsum(x); });
  double sum_gbs = bytes / sum_us / 1e3;
  y = Tensor();
  std::printf("copy   256M f32: %9.1f us  %7.1f GB/s\n", copy_us, copy_gbs);
  std::printf("chain  256M f32: %9.1f us  %7.1f GB/s  (%.2f of copy)\n", chain_us, chain_gbs,
              chain_gbs / copy_gbs);
  std::printf("sum    256M f32: %9.1f us  %7.1f GB/s  (%.2f of copy)  = %g\n", sum_us, sum_gbs,
              sum_gbs / copy_gbs, nx::item<float>(s));
  x = Tensor();

  // A compiled call on 3 elements: per call in a queued loop, and one call plus its wait.
  auto affine = rune::jit([](const Tensor& a) { return a * 2.0 + 1.0; });
  Tensor small = nx::place(nx::create(nx::float32, {3}, {1, 2, 3}), dev);
  Tensor r;
  for (int i = 0; i < 100; ++i) r = affine(small);
  nx::wait(dev);
  const int calls = 20000;
  std::vector<double> per;
  for (int rep = 0; rep < 5; ++rep) {
    auto a = Clock::now();
    for (int i = 0; i < calls; ++i) r = affine(small);
    nx::wait(dev);
    per.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count() / calls);
  }
  double call_wait_us = time_us(dev, 200, [&] { r = affine(small); });
  std::printf("jit call 3 elems: %.2f us per call queued (goal < 10), %.2f us call + wait\n",
              median(per), call_wait_us);

  // The MLP step 784-256-10, batch 128.
  auto step = bench::mlp_784_step();
  auto [w1, w2, xb, yb] = bench::mlp_784_inputs(dev);
  Tensor l;
  double step_us = time_us(dev, 50, [&] { std::tie(w1, w2, l) = step(w1, w2, xb, yb); });
  std::printf("mlp step 784-256-10 b128: %.1f us per step, loss %g\n", step_us, nx::item<float>(l));

  // sgemm: rune's product against cuBLAS's on the same device buffers, square at 1024^2 and
  // 4096^2 and at the shapes of the MLP step (batch 128) and of the gpt sample's step (batch 32 x
  // context 128 = 4096 rows, width 128: attention's q/k/v, the MLP's 4x up and down, the tied
  // logits). Every shape of at most 2^31 FLOP is checked bit for bit against the host's.
  {
    struct Shape {
      int64_t m, n, k;
      const char* what;
    };
    const Shape shapes[] = {{1024, 1024, 1024, "square"},     {4096, 4096, 4096, "square"},
                            {128, 256, 784, "mlp layer 1"},   {128, 10, 256, "mlp layer 2"},
                            {4096, 384, 128, "gpt qkv"},      {4096, 512, 128, "gpt mlp up"},
                            {4096, 128, 512, "gpt mlp down"}, {4096, 256, 128, "gpt logits"}};
    bench::CublasSgemm cublas(ctx.handle());
    auto mm = rune::jit([](const Tensor& a, const Tensor& b) { return nx::matmul(a, b); });
    uint64_t seed = 6;
    for (const Shape& s : shapes) {
      Tensor ha = nx::randn(nx::key(seed++), nx::float32, {s.m, s.k});
      Tensor hb = nx::randn(nx::key(seed++), nx::float32, {s.k, s.n});
      Tensor a = nx::place(ha, dev), b = nx::place(hb, dev);
      Tensor c;
      const double flop = 2.0 * s.m * s.n * s.k;
      const int reps = flop > 1e11 ? 10 : 50;
      double rune_us = time_us(dev, reps, [&] { c = mm(a, b); });
      const double tflops = flop / rune_us / 1e6;
      std::string same;
      if (flop <= 2147483648.0) {
        auto got = nx::to_vector<float>(c), want = nx::to_vector<float>(nx::matmul(ha, hb));
        bool eq = got.size() == want.size() &&
                  std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
        same = eq ? ", host bits" : ", NOT THE HOST'S BITS";
      }
      char label[96];
      if (s.m == s.n && s.n == s.k)
        std::snprintf(label, sizeof label, "sgemm %lld^2", static_cast<long long>(s.m));
      else
        std::snprintf(label, sizeof label, "sgemm %lldx%lldx%lld (%s)", static_cast<long long>(s.m),
                      static_cast<long long>(s.n), static_cast<long long>(s.k), s.what);
      if (!cublas.ok()) {
        std::printf("%s: %9.1f us  %6.2f TFLOP/s  (cuBLAS: %s)%s\n", label, rune_us, tflops,
                    cublas.error().c_str(), same.c_str());
        continue;
      }
      auto out = runtime::allocate(dev, static_cast<size_t>(s.m * s.n * 4));
      const auto* pa = static_cast<const float*>(a.impl().buffer->data);
      const auto* pb = static_cast<const float*>(b.impl().buffer->data);
      auto* pc = static_cast<float*>(out->data);
      int rc = 0;
      double cublas_us = time_us(dev, reps, [&] {
        rc |= cublas.run(static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), pa,
                         pb, pc);
      });
      std::printf("%s: %9.1f us  %6.2f TFLOP/s  (%.2f of cuBLAS: %.1f us, %.2f TFLOP/s%s)%s\n",
                  label, rune_us, tflops, cublas_us / rune_us, cublas_us, flop / cublas_us / 1e6,
                  rc ? ", cuBLAS FAILED" : "", same.c_str());
    }
  }

  // The opt-in matmul precisions at 4096^2 (nx::set_matmul_precision: rune's tensor-core plan)
  // against cuBLAS's tensor-core GEMM (cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32 / _16BF), and
  // the largest difference from the "highest" product relative to its largest magnitude.
  {
    bench::CublasSgemm cublas(ctx.handle());
    auto mm = rune::jit([](const Tensor& a, const Tensor& b) { return nx::matmul(a, b); });
    const int64_t d = 4096;
    Tensor a = nx::place(nx::randn(nx::key(6), nx::float32, {d, d}), dev);
    Tensor b = nx::place(nx::randn(nx::key(7), nx::float32, {d, d}), dev);
    auto highest = nx::to_vector<float>(mm(a, b));
    for (const char* p : {"tf32", "bf16"}) {
      nx::set_matmul_precision(p);
      Tensor c;
      double rune_us = time_us(dev, 10, [&] { c = mm(a, b); });
      auto got = nx::to_vector<float>(c);
      nx::set_matmul_precision("highest");
      double diff = 0, mag = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::abs(got[i] - highest[i])));
        mag = std::max(mag, static_cast<double>(std::abs(highest[i])));
      }
      const double tflops = 2.0 * d * d * d / rune_us / 1e6;
      if (!cublas.has_gemm_ex()) {
        std::printf(
            "%s gemm %lld^2: %9.1f us  %6.2f TFLOP/s  (cuBLAS GemmEx: %s), max diff %.3g "
            "of %.3g\n",
            p, static_cast<long long>(d), rune_us, tflops,
            cublas.ok() ? "cublasGemmEx missing" : cublas.error().c_str(), diff, mag);
        continue;
      }
      auto out = runtime::allocate(dev, static_cast<size_t>(d * d * 4));
      const auto* pa = static_cast<const float*>(a.impl().buffer->data);
      const auto* pb = static_cast<const float*>(b.impl().buffer->data);
      auto* pc = static_cast<float*>(out->data);
      const int n = static_cast<int>(d);
      const int compute = std::string(p) == "tf32" ? bench::CublasSgemm::kComputeFastTf32
                                                   : bench::CublasSgemm::kComputeFastBf16;
      int rc = 0;
      double cublas_us =
          time_us(dev, 10, [&] { rc |= cublas.run_fast(n, n, n, pa, pb, pc, compute); });
      std::printf(
          "%s gemm %lld^2: %9.1f us  %6.2f TFLOP/s  (%.2f of cuBLAS GemmEx: %.1f us, "
          "%.2f TFLOP/s%s), max diff from highest %.3g of %.3g\n",
          p, static_cast<long long>(d), rune_us, tflops, cublas_us / rune_us, cublas_us,
          2.0 * d * d * d / cublas_us / 1e6, rc ? ", cuBLAS FAILED" : "", diff, mag);
    }
  }

  // The 3x3 convolution of bench/bench_conv.cpp (32 images, 64 -> 64 channels, 32 x 32, SAME,
  // float32, NCHW and OIHW), forward and forward + both gradients (of sum(conv(x, k) * dy)),
  // rune::jit of nx::conv (an implicit GEMM, docs/conv.md) against cuDNN's forward and forward +
  // backward data + backward filter (bench/cudnn_conv.h: fixed algorithms, FMA math) on the same
  // device buffers, and the largest difference from cuDNN relative to cuDNN's largest magnitude.
  // rune's gradients row also computes the loss sum(y * dy); cuDNN's computes only y, dx and dk.
  {
    constexpr int64_t cn = 32, cc = 64, ch = 32, cw = 32, co = 64;
    auto ks = nx::split(nx::key(40));
    auto k2 = nx::split(ks.second);
    Tensor cx = nx::place(nx::randn(ks.first, nx::float32, {cn, cc, ch, cw}), dev);
    Tensor ck = nx::place(
        nx::randn(k2.first, nx::float32, {co, cc, 3, 3}) * std::sqrt(2.0 / (cc * 9)), dev);
    Tensor cdy = nx::place(nx::randn(k2.second, nx::float32, {cn, co, ch, cw}), dev);
    auto same = [] {
      nx::ConvOptions o;
      o.padding = "SAME";
      return o;
    };
    auto conv = rune::jit([&](const Tensor& a, const Tensor& k) { return nx::conv(a, k, same()); });
    auto conv_grads = rune::jit([&](const Tensor& a, const Tensor& k, const Tensor& dy) {
      auto loss = [&](const std::pair<Tensor, Tensor>& ak) {
        return nx::sum(nx::conv(ak.first, ak.second, same()) * dy);
      };
      auto [l, g] = rune::value_and_grad(loss, std::make_pair(a, k));
      return std::make_tuple(l, g.first, g.second);
    });
    Tensor y, loss, gx, gk;
    const double fwd_flop = 2.0 * cn * co * ch * cw * cc * 9;
    double fwd_us = time_us(dev, 20, [&] { y = conv(cx, ck); });
    double grads_us = time_us(dev, 20, [&] { std::tie(loss, gx, gk) = conv_grads(cx, ck, cdy); });
    bench::CudnnConv cudnn(ctx.handle(), cn, cc, ch, cw, co, 3, 3, 1, 1);
    if (!cudnn.ok()) {
      std::printf("conv3x3_fwd_32x64x32x32: %9.1f us  %6.2f TFLOP/s  (cuDNN: %s)\n", fwd_us,
                  fwd_flop / fwd_us / 1e6, cudnn.error().c_str());
      std::printf("conv3x3_fwd_bwd_32x64x32x32: %9.1f us  (cuDNN: %s)\n", grads_us,
                  cudnn.error().c_str());
    } else {
      auto ws = runtime::allocate(dev, std::max<size_t>(cudnn.workspace_bytes(), 256));
      auto ry = runtime::allocate(dev, static_cast<size_t>(cn * co * ch * cw * 4));
      auto rdx = runtime::allocate(dev, static_cast<size_t>(cn * cc * ch * cw * 4));
      auto rdk = runtime::allocate(dev, static_cast<size_t>(co * cc * 9 * 4));
      const auto* px = static_cast<const float*>(cx.impl().buffer->data);
      const auto* pk = static_cast<const float*>(ck.impl().buffer->data);
      const auto* pdy = static_cast<const float*>(cdy.impl().buffer->data);
      auto* py = static_cast<float*>(ry->data);
      auto* pdx = static_cast<float*>(rdx->data);
      auto* pdk = static_cast<float*>(rdk->data);
      int rc = 0;
      double cudnn_fwd_us = time_us(dev, 20, [&] { rc |= cudnn.forward(px, pk, py, ws->data); });
      double cudnn_grads_us = time_us(dev, 20, [&] {
        rc |= cudnn.forward(px, pk, py, ws->data);
        rc |= cudnn.backward_data(pk, pdy, pdx, ws->data);
        rc |= cudnn.backward_filter(px, pdy, pdk, ws->data);
      });
      nx::wait(dev);
      // The largest |rune - cuDNN| / the largest |cuDNN|, of `n` floats of a cuDNN output.
      auto rel = [&](const Tensor& got, const void* want_dev, int64_t n) {
        std::vector<float> want(static_cast<size_t>(n));
        runtime::gpu::copy_to_host(ctx, want.data(), want_dev, want.size() * sizeof(float));
        auto g = nx::to_vector<float>(got);
        double d = 0, m = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          d = std::max(d, static_cast<double>(std::fabs(g[i] - want[i])));
          m = std::max(m, static_cast<double>(std::fabs(want[i])));
        }
        return m > 0 ? d / m : d;
      };
      const char* failed = rc ? ", cuDNN FAILED" : "";
      std::printf(
          "conv3x3_fwd_32x64x32x32: %9.1f us  %6.2f TFLOP/s  (%.2f of cuDNN: %.1f us%s), "
          "y: max |rune - cuDNN| / max |cuDNN| = %.2e\n",
          fwd_us, fwd_flop / fwd_us / 1e6, cudnn_fwd_us / fwd_us, cudnn_fwd_us, failed,
          rel(y, py, cn * co * ch * cw));
      std::printf(
          "conv3x3_fwd_bwd_32x64x32x32: %9.1f us  (%.2f of cuDNN fwd + bwd data + bwd filter: "
          "%.1f us%s), dx: %.2e, dk: %.2e (max |rune - cuDNN| / max |cuDNN|)\n",
          grads_us, cudnn_grads_us / grads_us, cudnn_grads_us, failed,
          rel(gx, pdx, cn * cc * ch * cw), rel(gk, pdk, co * cc * 9));
    }
  }

  // Sorts of one row of 16M float32 (the rank sort fallback is O(n^2): not timed).
  std::string no_cub;
  const auto* cub = runtime::cuda::cub_module_for(dev.kind, ctx.driver(), &no_cub);
  if (!cub) {
    std::printf("sort 16M f32: skipped (rank sort: %s)\n", no_cub.c_str());
    return 0;
  }
  const int64_t ns = int64_t{1} << 24;
  const size_t sort_bytes = static_cast<size_t>(ns) * 4;
  Tensor v = nx::place(nx::randn(nx::key(5), nx::float32, {ns}), dev);
  auto vdst = runtime::allocate(dev, sort_bytes);
  double vcopy_us = time_us(dev, 20, [&] {
    runtime::gpu::copy_on_device(ctx, vdst->data, v.impl().buffer->data, sort_bytes);
  });
  auto fsort = rune::jit([](const Tensor& a) { return nx::sort(a); });
  auto fargsort = rune::jit([](const Tensor& a) { return nx::argsort(a); });
  Tensor sorted, order;
  double sort_us = time_us(dev, 10, [&] { sorted = fsort(v); });
  double argsort_us = time_us(dev, 10, [&] { order = fargsort(v); });
  std::printf("sort    16M f32: %9.1f us  (%.1f x a 64 MiB device copy: %.1f us; CUB %s)\n",
              sort_us, sort_us / vcopy_us, vcopy_us, cub->api->build);
  std::printf("sort argsort 16M f32: %9.1f us  (%.1f x the copy)\n", argsort_us,
              argsort_us / vcopy_us);
  return 0;
}
